//! What a decoded report hands the accumulators: its summed entries, either as they
//! are ([`ReportEntries::Dense`]) or in the compact form of an outer product
//! ([`ReportEntries::OuterProduct`]), from which the accumulators can add a whole batch
//! of `triu(vvᵀ)` as one matrix product instead of expanding every report.

use crate::encoding::WireError;
use crate::layout::triangle_len;

/// The largest magnitude of a coordinate of an [`OuterProduct`]: every product
/// `vᵢvⱼ` is then at most `2^30`, so a sum of up to `2^23` of them is an integer below
/// `2^53`, exact in f64 in any order.
pub const OUTER_PRODUCT_MAX: i32 = 1 << 15;

/// The summed entries of one validated report ([`ReportMechanism::decode`]'s output).
///
/// Both forms stand for the same entries in the one layout every mechanism shares (the
/// mean block, then the packed upper triangle); [`to_dense`](Self::to_dense) gives them
/// explicitly.
///
/// [`ReportMechanism::decode`]: crate::mechanism::ReportMechanism::decode
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportEntries {
    /// The entries themselves, in grid units.
    Dense(Vec<i32>),
    /// The entries `(v·2^s, triu(vvᵀ))` of a vector `v`, kept as `v`.
    OuterProduct(OuterProduct),
}

impl ReportEntries {
    /// The number of summed entries this report stands for.
    pub fn len(&self) -> usize {
        match self {
            ReportEntries::Dense(entries) => entries.len(),
            ReportEntries::OuterProduct(outer) => outer.entries(),
        }
    }

    /// Whether the report stands for no entries at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The summed entries, expanded.
    pub fn to_dense(&self) -> Vec<i32> {
        match self {
            ReportEntries::Dense(entries) => entries.clone(),
            ReportEntries::OuterProduct(outer) => outer.expand(),
        }
    }
}

impl From<Vec<i32>> for ReportEntries {
    fn from(entries: Vec<i32>) -> Self {
        ReportEntries::Dense(entries)
    }
}

/// A report whose summed entries are an outer product: the optional mean block
/// `vᵢ·2^s`, then `vᵢvⱼ` for `i ≤ j` in
/// [`triangle_pairs`](crate::layout::triangle_pairs) order, all in grid units.
///
/// **Invariant:** every `|vᵢ| ≤ 2^15` ([`OUTER_PRODUCT_MAX`]) and `s ≤ 15`, so every
/// entry is at most `2^30` in magnitude, like the entries of every other report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OuterProduct {
    values: Vec<i32>,
    mean_shift: Option<u32>,
}

impl OuterProduct {
    /// The outer product of `values` (`|vᵢ| ≤ 2^15`), with a mean block `vᵢ·2^s` when
    /// `mean_shift` is `Some(s)` (`s ≤ 15`). A coordinate out of range is refused with
    /// [`WireError::OutOfRange`], a shift out of range with
    /// [`WireError::OuterProductShift`].
    pub fn new(values: Vec<i32>, mean_shift: Option<u32>) -> Result<Self, WireError> {
        if let Some(shift) = mean_shift.filter(|&s| s > 15) {
            return Err(WireError::OuterProductShift(shift));
        }
        if let Some((index, &value)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| v.unsigned_abs() > OUTER_PRODUCT_MAX.unsigned_abs())
        {
            return Err(WireError::OutOfRange {
                index,
                value: i64::from(value),
                bound: i64::from(OUTER_PRODUCT_MAX),
            });
        }
        Ok(OuterProduct { values, mean_shift })
    }

    /// The outer product of `values` clamped to `±2^15`, for a caller whose values and
    /// shift are in range by construction (the shift is capped at 15 too).
    pub(crate) fn clamped(mut values: Vec<i32>, mean_shift: Option<u32>) -> Self {
        debug_assert!(mean_shift.is_none_or(|s| s <= 15));
        for v in &mut values {
            *v = (*v).clamp(-OUTER_PRODUCT_MAX, OUTER_PRODUCT_MAX);
        }
        OuterProduct {
            values,
            mean_shift: mean_shift.map(|s| s.min(15)),
        }
    }

    /// The vector `v`, in its own units.
    pub fn values(&self) -> &[i32] {
        &self.values
    }

    /// The dimension `p`.
    pub fn dim(&self) -> usize {
        self.values.len()
    }

    /// The shift `s` of the mean block `v·2^s`, or `None` without a mean block.
    pub fn mean_shift(&self) -> Option<u32> {
        self.mean_shift
    }

    /// The number of summed entries: `p(p + 1)/2`, plus `p` with a mean block.
    pub fn entries(&self) -> usize {
        let p = self.dim();
        triangle_len(p) + if self.mean_shift.is_some() { p } else { 0 }
    }

    /// The summed entries, expanded.
    pub fn expand(&self) -> Vec<i32> {
        let v = &self.values;
        let mut out = Vec::with_capacity(self.entries());
        if let Some(shift) = self.mean_shift {
            // |vᵢ| ≤ 2^15 and s ≤ 15: |vᵢ·2^s| ≤ 2^30.
            out.extend(v.iter().map(|&x| x << shift));
        }
        for (i, &vi) in v.iter().enumerate() {
            // |vᵢvⱼ| ≤ 2^30: no overflow.
            out.extend(v[i..].iter().map(|&vj| vi * vj));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expansion_is_the_mean_block_then_the_triangle() {
        let outer = OuterProduct::new(vec![3, -2, 5], Some(4)).unwrap();
        assert_eq!(outer.entries(), 9);
        assert_eq!(
            outer.expand(),
            vec![48, -32, 80, 9, -6, 15, 4, -10, 25],
            "mean block v·2^4, then v₀v₀, v₀v₁, v₀v₂, v₁v₁, v₁v₂, v₂v₂"
        );
        let entries = ReportEntries::OuterProduct(outer);
        assert_eq!(entries.len(), 9);
        assert_eq!(entries.to_dense().len(), entries.len());
        let plain = OuterProduct::new(vec![3, -2], None).unwrap();
        assert_eq!(plain.expand(), vec![9, -6, 4]);
    }

    #[test]
    fn out_of_range_coordinates_and_shifts_are_refused() {
        let max = OUTER_PRODUCT_MAX;
        assert!(OuterProduct::new(vec![max, -max], Some(15)).is_ok());
        assert!(matches!(
            OuterProduct::new(vec![0, max + 1], None),
            Err(WireError::OutOfRange { index: 1, .. })
        ));
        assert!(matches!(
            OuterProduct::new(vec![i32::MIN], None),
            Err(WireError::OutOfRange { index: 0, .. })
        ));
        assert!(matches!(
            OuterProduct::new(vec![1], Some(16)),
            Err(WireError::OuterProductShift(16))
        ));
        let extreme = OuterProduct::new(vec![-max, max], Some(15)).unwrap();
        assert!(extreme.expand().iter().all(|v| v.unsigned_abs() <= 1 << 30));
    }
}
