//! What the persistent backends store, and how it is read back: the accumulator blob
//! (a little-endian serialization of an [`Accumulator`], format below), a collection's
//! spec as protobuf bytes, and [`Corruption`], what stored data can be that this
//! version cannot read. The redb and PostgreSQL backends store their accumulators in
//! the same blob format.
//!
//! Blob layout: the magic `LDPACC01`, the fold count (`u32`), 4 reserved bytes, the
//! entry count (`u64`), the report count (`u64`), one count per fold (`u64`), the fold
//! sums fold by fold (`i64` per entry), the sums of squares (`u128` per entry).
//!
//! # Report log
//!
//! The compact form of a committed batch's counted reports, which both backends append
//! instead of a dense accumulator blob when it is smaller ([`log_is_smaller`]) and
//! fold into the accumulators later ([`fold_report_log`]). Little-endian: the magic
//! `LDPLOG01`, the entry count of the collection (`u64`), the report count (`u64`),
//! then per report its fold (`u8`), its form (`u8`: 0 dense, 1 outer product without a
//! mean block, 2 with one), the mean block's shift (`u8`, 0 unless form 2), the number
//! of values (`u32`) and the values (`i32` each): the entries of a dense report, the
//! vector `v` of an outer product. A rank-one report at p = 1000 is 4 007 bytes here
//! against the 28 MB of a dense blob.

use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_privacy::Collection;
use ldpcov_privacy::mechanism::{OuterProduct, ReportEntries};
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
    /// A report log does not start with its magic bytes.
    #[error("report log has a wrong magic")]
    LogMagic,
    /// A report log is for accumulators of another number of entries.
    #[error("report log of {found} entries, expected {expected}")]
    LogEntries {
        /// Entries in the log's header.
        found: u64,
        /// Entries of the collection.
        expected: usize,
    },
    /// A report of a report log cannot be read back as one of the collection's.
    #[error("report log: report {index} is invalid ({why})")]
    LogReport {
        /// Its position in the log.
        index: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A report log holds bytes after its last report, or its count disagrees with the
    /// count stored beside it.
    #[error("report log: {0}")]
    LogLength(String),
}

const BLOB_MAGIC: &[u8; 8] = b"LDPACC01";

const LOG_MAGIC: &[u8; 8] = b"LDPLOG01";

/// Bytes of a report log's header: magic, entries, count.
const LOG_HEADER: usize = 24;

/// Bytes of a report's header in a report log: fold, form, shift, value count.
const LOG_REPORT_HEADER: usize = 7;

/// Bytes of the accumulator blob ([`encode_accumulator`]) of `entries` entries and
/// [`FOLDS`] folds: what a dense delta or a checkpoint of the sums writes.
pub(crate) fn accumulator_blob_len(entries: usize) -> usize {
    32 + 8 * FOLDS + entries.saturating_mul(8 * FOLDS + 16)
}

/// The values a report keeps in a report log.
fn log_values(entries: &ReportEntries) -> &[i32] {
    match entries {
        ReportEntries::Dense(values) => values,
        ReportEntries::OuterProduct(outer) => outer.values(),
    }
}

/// Bytes of the report log ([`encode_report_log`]) of `reports`.
pub(crate) fn report_log_len(reports: &[(usize, &ReportEntries)]) -> usize {
    LOG_HEADER
        + reports
            .iter()
            .map(|(_, e)| LOG_REPORT_HEADER + 4 * log_values(e).len())
            .sum::<usize>()
}

/// Whether the report log of `reports` is smaller than the accumulator blob of
/// `entries` entries: the choice, per committed batch, between appending the reports
/// and writing dense sums.
pub(crate) fn log_is_smaller(entries: usize, reports: &[(usize, &ReportEntries)]) -> bool {
    report_log_len(reports) < accumulator_blob_len(entries)
}

/// The report log of `reports` (each with its fold, below [`FOLDS`]), all of
/// `entries` entries (see the module docs, "Report log").
pub(crate) fn encode_report_log(entries: usize, reports: &[(usize, &ReportEntries)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(report_log_len(reports));
    out.extend_from_slice(LOG_MAGIC);
    out.extend_from_slice(&(entries as u64).to_le_bytes());
    out.extend_from_slice(&(reports.len() as u64).to_le_bytes());
    for &(fold, report) in reports {
        let (form, shift) = match report {
            ReportEntries::Dense(_) => (0u8, 0u8),
            ReportEntries::OuterProduct(outer) => match outer.mean_shift() {
                None => (1, 0),
                // A shift is at most 15 (`OuterProduct`'s invariant).
                Some(s) => (2, s as u8),
            },
        };
        let values = log_values(report);
        out.push(fold as u8);
        out.push(form);
        out.push(shift);
        out.extend_from_slice(&(values.len() as u32).to_le_bytes());
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Parses [`encode_report_log`]'s output for accumulators of `entries` entries:
/// every report with its fold, checked (fold below [`FOLDS`], an outer product's
/// range, every report of `entries` entries).
pub(crate) fn decode_report_log(
    blob: &[u8],
    entries: usize,
) -> Result<Vec<(usize, ReportEntries)>, CodecError> {
    fn take<'a>(blob: &mut &'a [u8], n: usize) -> Result<&'a [u8], CodecError> {
        if blob.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, rest) = blob.split_at(n);
        *blob = rest;
        Ok(head)
    }
    fn u64_at(bytes: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        u64::from_le_bytes(b)
    }
    let mut b = blob;
    if take(&mut b, 8)? != LOG_MAGIC {
        return Err(CodecError::LogMagic);
    }
    let found = u64_at(take(&mut b, 8)?);
    if found != entries as u64 {
        return Err(CodecError::LogEntries {
            found,
            expected: entries,
        });
    }
    let count = u64_at(take(&mut b, 8)?);
    // Every report takes at least its header: a count beyond that is damage (and is
    // not allowed to size an allocation).
    if count > (b.len() / LOG_REPORT_HEADER) as u64 {
        return Err(CodecError::LogLength(format!(
            "{count} reports in {} bytes",
            b.len()
        )));
    }
    let mut reports = Vec::with_capacity(count as usize);
    for index in 0..count {
        let bad = |why: String| CodecError::LogReport { index, why };
        let head = take(&mut b, LOG_REPORT_HEADER)?;
        let (fold, form, shift) = (head[0] as usize, head[1], u32::from(head[2]));
        let mut n = [0u8; 4];
        n.copy_from_slice(&head[3..7]);
        let n = u32::from_le_bytes(n) as usize;
        if fold >= FOLDS {
            return Err(bad(format!("fold {fold}")));
        }
        let raw = take(&mut b, n.checked_mul(4).ok_or(CodecError::Overflow)?)?;
        let values: Vec<i32> = raw
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let report = match form {
            0 => ReportEntries::Dense(values),
            1 | 2 => ReportEntries::OuterProduct(
                OuterProduct::new(values, (form == 2).then_some(shift))
                    .map_err(|e| bad(e.to_string()))?,
            ),
            other => return Err(bad(format!("form {other}"))),
        };
        if report.len() != entries {
            return Err(bad(format!("{} entries, expected {entries}", report.len())));
        }
        reports.push((fold, report));
    }
    if !b.is_empty() {
        return Err(CodecError::LogLength(format!(
            "{} bytes after the last report",
            b.len()
        )));
    }
    Ok(reports)
}

/// Adds the reports of a report log (`blob`, for accumulators of `acc`'s entries) to
/// `acc`, exactly as adding them when they arrived would have; returns how many.
/// Nothing is added if the log cannot be read.
pub(crate) fn fold_report_log(acc: &mut Accumulator, blob: &[u8]) -> Result<u64, CodecError> {
    let reports = decode_report_log(blob, acc.entries())?;
    let refs: Vec<(usize, &ReportEntries)> = reports.iter().map(|(f, e)| (*f, e)).collect();
    acc.add_reports(&refs);
    Ok(reports.len() as u64)
}

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
    /// Appended reports of a collection that does not exist.
    #[error("unknown collection {id:?} has appended reports")]
    UnknownAppended {
        /// The id.
        id: String,
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

    /// A log of dense reports and outer products (with and without a mean block) reads
    /// back as the same reports, folds into exactly what adding them directly gives,
    /// is smaller than the blob for rank-one reports at p = 1000 and not for dense ones
    /// beyond 14 per batch, and damage is refused with nothing added.
    #[test]
    fn report_logs_round_trip_fold_exactly_and_reject_damage() {
        let outer = |v: Vec<i32>, s| ReportEntries::OuterProduct(OuterProduct::new(v, s).unwrap());
        // p = 3 with a mean block: 3 + 6 entries.
        let reports = [
            (0, outer(vec![3, -2, 5], Some(4))),
            (
                4,
                ReportEntries::Dense(vec![1, -1, 2, 3, -5, 8, 13, -21, 34]),
            ),
            (2, outer(vec![-(1 << 15), 1 << 15, 0], Some(15))),
        ];
        let refs: Vec<(usize, &ReportEntries)> = reports.iter().map(|(f, e)| (*f, e)).collect();
        let log = encode_report_log(9, &refs);
        assert_eq!(log.len(), report_log_len(&refs));
        assert_eq!(decode_report_log(&log, 9).unwrap(), reports.to_vec());
        let mut direct = Accumulator::new(9, FOLDS);
        direct.add_reports(&refs);
        let mut folded = Accumulator::new(9, FOLDS);
        assert_eq!(fold_report_log(&mut folded, &log).unwrap(), 3);
        assert_eq!(folded, direct);

        let p1000 = outer(vec![7; 1000], None);
        let d = p1000.len();
        assert!(log_is_smaller(d, &vec![(0, &p1000); 1024]));
        let dense = ReportEntries::Dense(vec![1; d]);
        assert!(log_is_smaller(d, &vec![(0, &dense); 13]));
        assert!(!log_is_smaller(d, &vec![(0, &dense); 14]));

        let mut untouched = Accumulator::new(9, FOLDS);
        assert!(matches!(
            fold_report_log(&mut untouched, &log[..log.len() - 1]),
            Err(CodecError::Truncated)
        ));
        assert!(matches!(
            decode_report_log(&log, 10),
            Err(CodecError::LogEntries { found: 9, .. })
        ));
        let mut bad = log.clone();
        bad[LOG_HEADER] = FOLDS as u8; // the first report's fold
        assert!(matches!(
            fold_report_log(&mut untouched, &bad),
            Err(CodecError::LogReport { index: 0, .. })
        ));
        let mut bad = log.clone();
        bad[0] = b'X';
        assert!(matches!(
            decode_report_log(&bad, 9),
            Err(CodecError::LogMagic)
        ));
        let mut bad = log;
        bad.push(0);
        assert!(matches!(
            decode_report_log(&bad, 9),
            Err(CodecError::LogLength(_))
        ));
        assert_eq!(untouched, Accumulator::new(9, FOLDS), "nothing added");
    }

    #[test]
    fn blob_round_trips_and_rejects_damage() {
        let mut acc = Accumulator::new(3, FOLDS);
        acc.add(0, &[i32::MAX, -7, 0]);
        acc.add(4, &[-i32::MAX, 5, 1]);
        let blob = encode_accumulator(&acc);
        assert_eq!(blob.len(), 32 + 8 * FOLDS + 3 * (8 * FOLDS + 16));
        assert_eq!(blob.len(), accumulator_blob_len(3));
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
