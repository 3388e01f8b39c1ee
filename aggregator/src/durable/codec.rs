//! The accumulator blob: little-endian serialization of an [`Accumulator`] (format in
//! the module docs of `durable`). The PostgreSQL store stores its base and delta
//! accumulators in the same format.

use thiserror::Error;

use ldpcov_estimate::Accumulator;

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
