//! What the persistent backends store, and how it is read back: the accumulator blob
//! (a little-endian serialization of an [`Accumulator`], format below), a collection's
//! spec as protobuf bytes, and [`Corruption`], what stored data can be that this
//! version cannot read. The redb and PostgreSQL backends store their accumulators in
//! the same blob format.
//!
//! Blob layout: the magic `LDPACC01`, the fold count (`u32`), 4 reserved bytes, the
//! entry count (`u64`), the report count (`u64`), one count per fold (`u64`), the fold
//! sums fold by fold (`i64` per entry), the sums of squares (`u128` per entry).

use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_privacy::Collection;
use ldpcov_proto::v1::CollectionSpec;
use prost::Message;
use thiserror::Error;

/// Why an accumulator blob could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The blob ends early.
    #[error("accumulator blob truncated")]
    Truncated,
    /// The blob does not start with the magic bytes.
    #[error("accumulator blob has a wrong magic")]
    Magic,
    /// The entry count does not fit this platform's `usize`.
    #[error("accumulator blob: entry count too large")]
    TooLarge,
    /// The sizes in the header overflow.
    #[error("accumulator blob: sizes overflow")]
    Overflow,
    /// The blob's length disagrees with its header (or the header says zero folds).
    #[error(
        "accumulator blob: {found} bytes after the header, expected {expected} for {folds} folds × {entries} entries"
    )]
    Length {
        /// Bytes after the header.
        found: usize,
        /// Bytes the header implies.
        expected: usize,
        /// Folds in the header.
        folds: usize,
        /// Entries in the header.
        entries: usize,
    },
    /// The fold counts do not add up to the count.
    #[error("accumulator blob: fold counts do not add up to the count")]
    Counts,
}

const BLOB_MAGIC: &[u8; 8] = b"LDPACC01";

/// The report count in an accumulator blob's header, without decoding its sums (`None`
/// if the header is not one of ours): what a damaged store can still tell.
pub(crate) fn blob_report_count(blob: &[u8]) -> Option<u64> {
    if blob.get(..8)? != BLOB_MAGIC {
        return None;
    }
    Some(u64::from_le_bytes(*blob.get(24..32)?.first_chunk::<8>()?))
}

/// Serializes accumulators (little-endian; see the module docs).
pub(crate) fn encode_accumulator(acc: &Accumulator) -> Vec<u8> {
    let folds = acc.fold_sums.len();
    let entries = acc.entries();
    let mut out = Vec::with_capacity(32 + 8 * folds + entries * (8 * folds + 16));
    out.extend_from_slice(BLOB_MAGIC);
    out.extend_from_slice(&(folds as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(entries as u64).to_le_bytes());
    out.extend_from_slice(&acc.count.to_le_bytes());
    for c in &acc.fold_counts {
        out.extend_from_slice(&c.to_le_bytes());
    }
    for fold in &acc.fold_sums {
        for s in fold {
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    for q in &acc.sum_squares {
        out.extend_from_slice(&q.to_le_bytes());
    }
    out
}

/// Parses [`encode_accumulator`]'s output, checking lengths and totals.
pub(crate) fn decode_accumulator(blob: &[u8]) -> Result<Accumulator, CodecError> {
    fn take<const N: usize>(blob: &mut &[u8]) -> Result<[u8; N], CodecError> {
        let (head, rest) = blob.split_first_chunk::<N>().ok_or(CodecError::Truncated)?;
        *blob = rest;
        Ok(*head)
    }
    let mut b = blob;
    if &take::<8>(&mut b)? != BLOB_MAGIC {
        return Err(CodecError::Magic);
    }
    let folds = u32::from_le_bytes(take(&mut b)?) as usize;
    let _reserved = take::<4>(&mut b)?;
    let entries =
        usize::try_from(u64::from_le_bytes(take(&mut b)?)).map_err(|_| CodecError::TooLarge)?;
    let expected = folds
        .checked_mul(8)
        .and_then(|f| entries.checked_mul(8 * folds + 16).map(|e| (f, e)))
        .and_then(|(f, e)| f.checked_add(e).and_then(|n| n.checked_add(8)))
        .ok_or(CodecError::Overflow)?;
    if b.len() != expected || folds == 0 {
        return Err(CodecError::Length {
            found: b.len(),
            expected,
            folds,
            entries,
        });
    }
    let count = u64::from_le_bytes(take(&mut b)?);
    let mut fold_counts = Vec::with_capacity(folds);
    for _ in 0..folds {
        fold_counts.push(u64::from_le_bytes(take(&mut b)?));
    }
    let mut fold_sums = Vec::with_capacity(folds);
    for _ in 0..folds {
        let mut sums = Vec::with_capacity(entries);
        for _ in 0..entries {
            sums.push(i64::from_le_bytes(take(&mut b)?));
        }
        fold_sums.push(sums);
    }
    let mut sum_squares = Vec::with_capacity(entries);
    for _ in 0..entries {
        sum_squares.push(u128::from_le_bytes(take(&mut b)?));
    }
    if fold_counts.iter().sum::<u64>() != count {
        return Err(CodecError::Counts);
    }
    Ok(Accumulator {
        count,
        fold_counts,
        fold_sums,
        sum_squares,
    })
}

/// What a database holds that this version cannot read.
#[derive(Debug, Error)]
pub enum Corruption {
    /// Another table layout or blob format.
    #[error("store format {found}, this version reads {expected}")]
    Format {
        /// The stored format version.
        found: u64,
        /// The format version this version reads.
        expected: u64,
    },
    /// A stored collection spec is not valid protobuf.
    #[error("spec of collection {id:?}: {source}")]
    SpecDecode {
        /// The collection.
        id: String,
        /// The decoding error.
        source: prost::DecodeError,
    },
    /// A stored collection spec is refused by [`Collection::from_spec`].
    #[error("spec of collection {id:?}: {source}")]
    Spec {
        /// The collection.
        id: String,
        /// Why the spec is refused.
        source: ldpcov_privacy::SpecError,
    },
    /// A collection is stored under another collection's id.
    #[error("collection stored under {id:?} is {found:?}")]
    IdMismatch {
        /// The key.
        id: String,
        /// The id in the stored spec.
        found: String,
    },
    /// A collection's accumulator blob cannot be read.
    #[error("collection {id:?}: {source}")]
    Blob {
        /// The collection.
        id: String,
        /// Why the blob cannot be read.
        source: CodecError,
    },
    /// A collection's accumulators do not match its dimension.
    #[error(
        "collection {id:?}: accumulators of {entries} entries × {folds} folds, expected {expected} × {}",
        ldpcov_estimate::FOLDS
    )]
    Shape {
        /// The collection.
        id: String,
        /// Entries of the stored accumulators.
        entries: usize,
        /// Folds of the stored accumulators.
        folds: usize,
        /// Entries of the collection.
        expected: usize,
    },
    /// A closed flag for a collection that does not exist.
    #[error("unknown collection {id:?} is marked closed")]
    UnknownClosed {
        /// The id.
        id: String,
    },
}

/// The collection whose spec is stored under `id`, read on the stored path
/// ([`Collection::from_spec`], never `create`): a spec written before the `moments`
/// field existed decodes with 0 and keeps meaning the second moment.
pub(crate) fn decode_collection(id: &str, spec: &[u8]) -> Result<Collection, Corruption> {
    let spec = CollectionSpec::decode(spec).map_err(|source| Corruption::SpecDecode {
        id: id.to_string(),
        source,
    })?;
    Collection::from_spec(&spec).map_err(|source| Corruption::Spec {
        id: id.to_string(),
        source,
    })
}

/// The accumulators stored for collection `id` (`blob`), or empty ones if none are.
pub(crate) fn decode_accumulators(
    id: &str,
    collection: &Collection,
    blob: Option<&[u8]>,
) -> Result<Accumulator, Corruption> {
    match blob {
        Some(blob) => decode_accumulator(blob).map_err(|source| Corruption::Blob {
            id: id.to_string(),
            source,
        }),
        None => Ok(Accumulator::new(collection.entries(), FOLDS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec stored before collections chose their mechanism, as the bytes an older
    /// version wrote (field by field: id "old", dim 4, ε = 1, δ = 10⁻⁶, R = 1,
    /// min_reports 1, encoding I32_LE, moments SECOND_MOMENT; no field 15), reads back
    /// as the raw-weighted Gaussian report it was created with, and a new collection
    /// stored and read back keeps the svec weighting.
    #[test]
    fn stored_specs_keep_the_weighting_they_were_created_with() {
        use ldpcov_privacy::mechanism::{OffDiagonalWeighting, ReportMechanism};
        use ldpcov_proto::v1::LocalMechanism;
        let mut old = vec![0x0a, 3, b'o', b'l', b'd', 0x10, 4, 0x19];
        old.extend_from_slice(&1.0f64.to_le_bytes());
        old.push(0x21);
        old.extend_from_slice(&[0x8d, 0xed, 0xb5, 0xa0, 0xf7, 0xc6, 0xb0, 0x3e]);
        old.push(0x29);
        old.extend_from_slice(&1.0f64.to_le_bytes());
        old.extend_from_slice(&[0x30, 1, 0x38, 1, 0x40, 1]);
        let stored = decode_collection("old", &old).unwrap();
        assert_eq!(stored.delta(), 1e-6);
        let ReportMechanism::Gaussian(g) = stored.mechanism() else {
            panic!("a stored local spec is a Gaussian report");
        };
        assert_eq!(g.weighting(), OffDiagonalWeighting::Raw);
        assert_eq!(
            stored.spec().local_mechanism,
            LocalMechanism::GaussianTriu as i32
        );
        let created = Collection::create(&CollectionSpec::decode(old.as_slice()).unwrap()).unwrap();
        let round_trip = decode_collection("old", &created.spec().encode_to_vec()).unwrap();
        let ReportMechanism::Gaussian(g) = round_trip.mechanism() else {
            panic!("a Gaussian report");
        };
        assert_eq!(g.weighting(), OffDiagonalWeighting::Svec);
        assert_eq!(round_trip, created);
    }

    /// A central spec stored before `central_weighting` existed, as the bytes an older
    /// version wrote (id "oldc", dim 4, ε = 1, δ = 10⁻⁶, R = 1, min_reports 1, encoding
    /// RAW_I32_LE, moments SECOND_MOMENT, privacy model CENTRAL; no field 16), reads
    /// back as the raw triangle it was created with; CreateCollection of the same spec
    /// resolves the svec weighting, which a store keeps.
    #[test]
    fn stored_central_specs_keep_the_triangle() {
        use ldpcov_privacy::mechanism::OffDiagonalWeighting;
        use ldpcov_proto::v1::CentralWeighting;
        let mut old = vec![0x0a, 4, b'o', b'l', b'd', b'c', 0x10, 4, 0x19];
        old.extend_from_slice(&1.0f64.to_le_bytes());
        old.push(0x21);
        old.extend_from_slice(&[0x8d, 0xed, 0xb5, 0xa0, 0xf7, 0xc6, 0xb0, 0x3e]);
        old.push(0x29);
        old.extend_from_slice(&1.0f64.to_le_bytes());
        old.extend_from_slice(&[0x30, 1, 0x38, 4, 0x40, 1, 0x60, 2]);
        let stored = decode_collection("oldc", &old).unwrap();
        assert!(stored.is_central());
        assert_eq!(stored.delta(), 1e-6);
        assert_eq!(stored.central_weighting(), Some(OffDiagonalWeighting::Raw));
        assert_eq!(
            stored.spec().central_weighting,
            CentralWeighting::Triu as i32
        );
        // Written back (with the field now explicit) it still reads as the triangle.
        let again = decode_collection("oldc", &stored.spec().encode_to_vec()).unwrap();
        assert_eq!(again, stored);
        let created = Collection::create(&CollectionSpec::decode(old.as_slice()).unwrap()).unwrap();
        assert_eq!(
            created.central_weighting(),
            Some(OffDiagonalWeighting::Svec)
        );
        let round_trip = decode_collection("oldc", &created.spec().encode_to_vec()).unwrap();
        assert_eq!(round_trip, created);
    }

    #[test]
    fn blob_round_trips_and_rejects_damage() {
        let mut acc = Accumulator::new(3, FOLDS);
        acc.add(0, &[i32::MAX, -7, 0]);
        acc.add(4, &[-i32::MAX, 5, 1]);
        let blob = encode_accumulator(&acc);
        assert_eq!(blob.len(), 32 + 8 * FOLDS + 3 * (8 * FOLDS + 16));
        assert_eq!(decode_accumulator(&blob).unwrap(), acc);
        assert!(decode_accumulator(&blob[..blob.len() - 1]).is_err());
        let mut bad = blob.clone();
        bad[0] = b'X';
        assert!(decode_accumulator(&bad).is_err());
        let mut bad = blob;
        bad[24] ^= 1; // count no longer equals the sum of the fold counts
        assert!(decode_accumulator(&bad).is_err());
    }
}
