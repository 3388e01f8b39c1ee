//! A collection's report payloads: encoding a device's wire values and the
//! decode-and-validate step the aggregator runs on every report before it touches any
//! state, both through the collection's [`ReportMechanism`].
//!
//! The byte-level pieces live in [`encoding`](crate::encoding) and in the mechanisms
//! ([`mechanism`](crate::mechanism)), which know no collection; they are re-exported
//! here under their established paths.

use crate::Collection;
use crate::mechanism::{ReportEntries, ReportMechanism};
use ldpcov_proto::v1::{Encoding, PrivacyModel};

pub use crate::encoding::{REPORT_ID_LEN, ReportId, WireError, bytes_per_entry};
pub use crate::mechanism::raw_vector::{encode_raw, norm_bin, to_grid_unit_ball};

/// Serialises wire values (grid units divided by [`Collection::wire_step`], within
/// `±wire_max`) in the collection's encoding. Values outside the wire range are
/// clamped to it, so the output always decodes.
pub fn encode_payload(collection: &Collection, wire_values: &[i32]) -> Vec<u8> {
    collection.mechanism().encode(wire_values)
}

/// Decodes a payload into the grid-unit entries the aggregator sums (wire value ×
/// `wire_step`; a central collection's raw vector expanded; a rank-one report as its
/// outer product), checking encoding, length and range: the one ingest check,
/// [`ReportMechanism::decode`].
pub fn decode_payload(
    collection: &Collection,
    encoding: i32,
    payload: &[u8],
) -> Result<ReportEntries, WireError> {
    collection.mechanism().decode(encoding, payload)
}

/// Adds the central report of the vector `u` (grid `2^−15`) to a central collection's
/// exact `sums` in place: the same entries [`decode_payload`] expands it into, without
/// building them (simulations keep collection sums this way at any size). Refused,
/// with `sums` unchanged, for a local collection, sums or a vector of the wrong length,
/// and a vector outside the unit ball.
pub fn add_raw_vector(
    collection: &Collection,
    u: &[i32],
    sums: &mut [i64],
) -> Result<(), WireError> {
    match collection.mechanism() {
        ReportMechanism::RawVector(raw) => raw.add_to_sums(u, sums),
        ReportMechanism::Gaussian(_) | ReportMechanism::RankOne(_) => {
            Err(WireError::ModelMismatch {
                privacy_model: PrivacyModel::Local,
                got: Encoding::RawI32Le,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`decode_payload`], its entries expanded.
    fn decode_dense(
        collection: &Collection,
        encoding: i32,
        payload: &[u8],
    ) -> Result<Vec<i32>, WireError> {
        decode_payload(collection, encoding, payload).map(|entries| entries.to_dense())
    }
    use ldpcov_proto::v1::{CollectionSpec, Moments};

    // FNV-1a 64 of the 16 bytes, mod 5, computed independently in Python (a 6-line
    // FNV-1a: offset basis 0xcbf29ce484222325, prime 0x100000001b3, xor then multiply).
    const PINNED_FOLDS: [usize; 8] = [1, 0, 1, 2, 1, 3, 1, 1];
    // Ids with distinct bytes, and their hash mod 5 and mod the prime 1 000 003 (which
    // pins ~20 bits of the hash rather than ~2), from the same Python.
    const PINNED_IDS: [([u8; 16], usize, usize); 5] = [
        (
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
            1,
            441_248,
        ),
        (
            [
                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
            ],
            4,
            995_108,
        ),
        (*b"ldpcov-report-id", 2, 605_004),
        ([0xff; 16], 3, 835_331),
        (
            [0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            2,
            876_459,
        ),
    ];

    fn collection() -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "w".into(),
            dim: 3,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: 0,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn round_trip() {
        let c = collection();
        let v: Vec<i32> = vec![0, -1, 1, 12345, -54321, c.max_abs_grid_value() as i32];
        let bytes = encode_payload(&c, &v);
        assert_eq!(bytes.len(), 24);
        assert_eq!(decode_dense(&c, Encoding::I32Le as i32, &bytes).unwrap(), v);
        assert_eq!(decode_dense(&c, 0, &bytes).unwrap(), v);
    }

    #[test]
    fn rejects_bad_payloads() {
        let c = collection();
        let ok = encode_payload(&c, &[0; 6]);
        assert!(matches!(
            decode_dense(&c, 7, &ok),
            Err(WireError::UnknownEncoding(7))
        ));
        assert!(matches!(
            decode_dense(&c, 1, &ok[..20]),
            Err(WireError::Length {
                expected: 24,
                got: 20,
                ..
            })
        ));
        // Raw bytes: encode_payload itself never produces out-of-range values.
        let raw = |v: i32| -> Vec<u8> {
            let mut b = ok.clone();
            b[16..20].copy_from_slice(&v.to_le_bytes());
            b
        };
        assert!(matches!(
            decode_dense(&c, 1, &raw(c.max_abs_grid_value() as i32 + 1)),
            Err(WireError::OutOfRange { index: 4, .. })
        ));
        assert!(decode_dense(&c, 1, &raw(i32::MIN)).is_err());
        assert!(decode_dense(&c, 1, &raw(-(c.max_abs_grid_value() as i32))).is_ok());
        // encode_payload clamps to the wire range.
        let clamped = encode_payload(&c, &[i32::MAX, 0, 0, 0, 0, i32::MIN + 1]);
        let back = decode_dense(&c, 1, &clamped).unwrap();
        assert_eq!(back[0] as i64, c.max_abs_grid_value());
        assert_eq!(back[5] as i64, -c.max_abs_grid_value());
    }

    #[test]
    fn folds_are_stable_and_balanced() {
        // Pinned values: a change of hash would silently reshuffle persisted folds.
        let pinned: Vec<usize> = (0u8..8).map(|b| ReportId([b; 16]).fold(5)).collect();
        assert_eq!(pinned, PINNED_FOLDS);
        for (bytes, fold5, mod_prime) in PINNED_IDS {
            let id = ReportId(bytes);
            assert_eq!(
                (id.fold(5), id.fold(1_000_003)),
                (fold5, mod_prime),
                "{bytes:?}"
            );
        }
        // 10 000 sequential ids over 5 folds: for a hash that behaves like a uniform
        // draw each count is Binomial(10 000, 0.2), mean 2000, sd √(10 000·0.2·0.8) =
        // 40. Allow 6 sd (240): a fair hash fails with probability < 5·2·10⁻⁹ (normal
        // tail, union over 5 folds); one that ignored the varying bytes would put all
        // 10 000 in one fold.
        let mut counts = [0usize; 5];
        for k in 0u32..10_000 {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&k.to_le_bytes());
            counts[ReportId(id).fold(5)] += 1;
        }
        assert!(counts.iter().all(|&c| c.abs_diff(2000) < 240), "{counts:?}");
    }

    #[test]
    fn coarse_encodings_round_trip_in_wire_units() {
        for (encoding, width) in [(Encoding::I16Le, 2), (Encoding::I8, 1)] {
            let c = Collection::from_spec(&CollectionSpec {
                encoding: encoding as i32,
                ..collection().spec()
            })
            .unwrap();
            let wire = vec![0, -1, 1, 100, -(c.wire_max() as i32), c.wire_max() as i32];
            let bytes = encode_payload(&c, &wire);
            assert_eq!(bytes.len(), 6 * width);
            let grid = decode_dense(&c, encoding as i32, &bytes).unwrap();
            let want: Vec<i32> = wire.iter().map(|w| w * c.wire_step() as i32).collect();
            assert_eq!(grid, want);
            // Another encoding than the collection's is refused.
            assert!(matches!(
                decode_dense(&c, Encoding::I32Le as i32, &bytes),
                Err(WireError::EncodingMismatch { .. })
            ));
        }
        // i8: −128 is outside ±127.
        let c = Collection::from_spec(&CollectionSpec {
            encoding: Encoding::I8 as i32,
            ..collection().spec()
        })
        .unwrap();
        let mut bytes = encode_payload(&c, &[0; 6]);
        bytes[3] = 0x80;
        assert!(matches!(
            decode_dense(&c, Encoding::I8 as i32, &bytes),
            Err(WireError::OutOfRange {
                index: 3,
                value: -128,
                bound: 127
            })
        ));
    }

    /// The per-entry definition the vectorised decoder must match: widen, refuse the
    /// first entry beyond ±wire_max, scale by wire_step.
    fn reference_decode(c: &Collection, payload: &[u8]) -> Result<Vec<i32>, (usize, i64)> {
        let width = bytes_per_entry(c.encoding()).unwrap();
        payload
            .chunks_exact(width)
            .enumerate()
            .map(|(i, b)| {
                let v = match b.len() {
                    4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
                    _ => i64::from(b[0] as i8),
                };
                if v.abs() > c.wire_max() {
                    Err((i, v))
                } else {
                    Ok((v * c.wire_step()) as i32)
                }
            })
            .collect()
    }

    #[test]
    fn decoding_matches_a_per_entry_reference() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for encoding in [Encoding::I32Le, Encoding::I16Le, Encoding::I8] {
            let c = Collection::from_spec(&CollectionSpec {
                encoding: encoding as i32,
                ..collection().spec()
            })
            .unwrap();
            let width = bytes_per_entry(encoding).unwrap();
            let max = c.wire_max().min(i64::from(i32::MAX));
            for trial in 0..200 {
                // Values at and around the bound, and the type's extremes.
                let mut payload = Vec::new();
                for _ in 0..c.entries() {
                    let v: i64 = match rng.random_range(0..6) {
                        0 => max,
                        1 => -max,
                        2 if trial % 3 == 0 => max + 1,
                        3 if trial % 5 == 0 => i64::from(i32::MIN),
                        _ => rng.random_range(-max..=max),
                    };
                    match width {
                        4 => payload.extend(
                            (v.clamp(i32::MIN as i64, i32::MAX as i64) as i32).to_le_bytes(),
                        ),
                        2 => payload.extend((v.clamp(-32768, 32767) as i16).to_le_bytes()),
                        _ => payload.push(v.clamp(-128, 127) as i8 as u8),
                    }
                }
                let got = decode_dense(&c, encoding as i32, &payload);
                match reference_decode(&c, &payload) {
                    Ok(want) => assert_eq!(got.unwrap(), want, "{encoding:?} trial {trial}"),
                    Err((index, value)) => assert_eq!(
                        got,
                        Err(WireError::OutOfRange {
                            index,
                            value,
                            bound: c.wire_max()
                        }),
                        "{encoding:?} trial {trial}"
                    ),
                }
            }
        }
    }

    #[test]
    fn report_ids() {
        assert!(ReportId::try_from(&[1u8; 16][..]).is_ok());
        assert_eq!(ReportId::try_from(&[][..]), Err(WireError::ReportId(0)));
        assert_eq!(
            ReportId::try_from(&[0u8; 17][..]),
            Err(WireError::ReportId(17))
        );
    }

    /// A central report is expanded exactly (the mean block `u_i·2^14`, then
    /// `triu(uuᵀ)`), refused outside the unit ball by one unit of `2^−30`, refused at
    /// the wrong length, and refused by (or sent to) a collection of the other model.
    #[test]
    fn raw_vectors_expand_exactly_and_only_into_central_collections() {
        let spec = |moments: Moments, model: PrivacyModel| CollectionSpec {
            collection_id: "c".into(),
            dim: 3,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            moments: moments as i32,
            privacy_model: model as i32,
            ..Default::default()
        };
        let central =
            Collection::from_spec(&spec(Moments::SecondMoment, PrivacyModel::Central)).unwrap();
        assert_eq!(central.encoding(), Encoding::RawI32Le);
        assert_eq!((central.entries(), central.grid_bits()), (6, 30));
        // (0.6, −0.8, 0) rounded toward 0 on the grid 2^-15:
        // 19 660² + 26 214² = 1 073 689 396 ≤ 2^30.
        let u = [19_660, -26_214, 0];
        let got = decode_dense(&central, Encoding::RawI32Le as i32, &encode_raw(&u)).unwrap();
        let want: Vec<i32> = vec![19_660 * 19_660, 19_660 * -26_214, 0, 26_214 * 26_214, 0, 0];
        assert_eq!(got, want);
        // The unspecified encoding on a report means the collection's.
        assert_eq!(decode_dense(&central, 0, &encode_raw(&u)).unwrap(), want);
        // One unit of 2^-30 outside the ball: 2^15 and 1 → 2^30 + 1.
        assert_eq!(
            decode_dense(&central, 4, &encode_raw(&[1 << 15, 1, 0])),
            Err(WireError::OutsideUnitBall {
                norm2: (1 << 30) + 1
            })
        );
        // On the sphere exactly is inside.
        assert!(decode_dense(&central, 4, &encode_raw(&[1 << 15, 0, 0])).is_ok());
        // i32::MIN does not overflow the norm.
        assert!(matches!(
            decode_dense(&central, 4, &encode_raw(&[i32::MIN, 0, 0])),
            Err(WireError::OutsideUnitBall { .. })
        ));
        assert_eq!(
            decode_dense(&central, 4, &encode_raw(&u[..2])),
            Err(WireError::Length {
                expected: 12,
                got: 8,
                entries: 3
            })
        );
        // A perturbed report to a central collection, a raw one to a local collection.
        assert_eq!(
            decode_dense(&central, Encoding::I32Le as i32, &[0; 24]),
            Err(WireError::ModelMismatch {
                privacy_model: PrivacyModel::Central,
                got: Encoding::I32Le
            })
        );
        let local =
            Collection::from_spec(&spec(Moments::SecondMoment, PrivacyModel::Local)).unwrap();
        assert_eq!(
            decode_dense(&local, Encoding::RawI32Le as i32, &encode_raw(&u)),
            Err(WireError::ModelMismatch {
                privacy_model: PrivacyModel::Local,
                got: Encoding::RawI32Le
            })
        );
        // With the mean block: w·u_i = u_i·2^14 units of 2^-30 first.
        let joint = Collection::from_spec(&spec(Moments::MeanAndCovariance, PrivacyModel::Central))
            .unwrap();
        let got = decode_dense(&joint, 4, &encode_raw(&u)).unwrap();
        assert_eq!(got.len(), 9);
        assert_eq!(&got[..3], &[19_660 << 14, -26_214 << 14, 0]);
        assert_eq!(&got[3..], &want[..]);
        // A central spec with a local encoding, and the reverse, are refused.
        let mut bad = spec(Moments::SecondMoment, PrivacyModel::Central);
        bad.encoding = Encoding::I32Le as i32;
        assert!(matches!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::EncodingForModel { .. })
        ));
        let mut bad = spec(Moments::SecondMoment, PrivacyModel::Local);
        bad.encoding = Encoding::RawI32Le as i32;
        assert!(matches!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::EncodingForModel { .. })
        ));
        // Norm bins: ‖u‖ ≤ 2^-l ⟺ Σu² ≤ 2^(30−2l); the last bin takes the rest.
        assert_eq!(norm_bin(1 << 30, 5), 0);
        assert_eq!(norm_bin((1 << 28) + 1, 5), 0);
        assert_eq!(norm_bin(1 << 28, 5), 1);
        assert_eq!(norm_bin(1 << 22, 5), 4);
        assert_eq!(norm_bin(1, 5), 4);
        assert_eq!(norm_bin(0, 5), 4);
        let mut binned = spec(Moments::SecondMoment, PrivacyModel::Central);
        binned.norm_bins = 2;
        let binned = Collection::from_spec(&binned).unwrap();
        assert_eq!(binned.entries(), 6 + 2 * 13);
        let got = decode_dense(&binned, 4, &encode_raw(&u)).unwrap();
        // ‖u‖² ≈ 0.99995: bin 0 holds uuᵀ, round(uuᵀ·2^30/‖u‖²) and the count 1.
        let norm2 = 19_660i64 * 19_660 + 26_214 * 26_214;
        assert_eq!(&got[..6], &want[..]);
        assert_eq!(&got[6..12], &want[..]);
        let scaled = |a: i64| (a.signum() * ((a.abs() << 30) + norm2 / 2) / norm2) as i32;
        let t: Vec<i32> = want.iter().map(|&a| scaled(i64::from(a))).collect();
        assert_eq!(&got[12..18], &t[..]);
        assert_eq!(got[18], 1);
        assert!(got[19..].iter().all(|&v| v == 0));
        let mut bad = spec(Moments::MeanAndCovariance, PrivacyModel::Central);
        bad.norm_bins = 2;
        assert_eq!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::NormBinsModel)
        );
        // 15 bins at p = 1000 would be 31·500 500 + 15 entries per report: refused.
        let mut bad = spec(Moments::SecondMoment, PrivacyModel::Central);
        bad.dim = 1000;
        bad.norm_bins = 15;
        assert!(matches!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::TooManyEntries { .. })
        ));
        let mut bad = spec(Moments::SecondMoment, PrivacyModel::Central);
        bad.norm_bins = 16;
        assert_eq!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::NormBins(16))
        );
        let mut bad = spec(Moments::SecondMoment, PrivacyModel::Local);
        bad.privacy_model = 7;
        assert_eq!(
            Collection::from_spec(&bad),
            Err(crate::SpecError::PrivacyModel(7))
        );
    }
}
