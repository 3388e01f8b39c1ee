//! The device's fixed-point grid: a clipped vector `u` (‖u‖ ≤ 1, unit-ball units) becomes the
//! integer vector `x` the circuit checks.

use crate::{CovarianceReport, Error, MAX_BITS, MAX_DIM};

/// The grid of a collection: `dim` coordinates of `bits` bits, `x_i = round(s·u_i)` with the
/// scale `s = 2^(bits-1) - 1`, so that `|x_i| ≤ s` is inside the circuit's range
/// `[-2^(bits-1), 2^(bits-1))` whenever `|u_i| ≤ 1`.
///
/// The squared-norm bound is `B = ⌈(2s + ⌈√p⌉ + 1)²/4⌉`, above `(s + √p/2)²`: rounding moves each
/// coordinate by at most 1/2, so `‖x‖ ≤ s·‖u‖ + √p/2 ≤ s + √p/2` (the extra 1/2 absorbs a
/// clipped vector whose float norm is a few ulps above 1). `B` is what the aggregators'
/// sensitivity is computed from.
///
/// ```
/// use ldpcov_prio::Grid;
///
/// let grid = Grid::new(2, 8)?; // s = 127
/// assert_eq!(grid.scale(), 127);
/// assert_eq!(grid.quantise(&[0.6, -0.8])?, vec![76, -102]);
/// // (2·127 + 2 + 1)²/4 rounded up.
/// assert_eq!(grid.norm_bound(), 16_513);
/// # Ok::<(), ldpcov_prio::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    dim: usize,
    bits: usize,
}

impl Grid {
    /// The grid of `dim` coordinates of `bits` bits each.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] unless `1 ≤ dim ≤` [`MAX_DIM`] and `2 ≤ bits ≤` [`MAX_BITS`].
    pub fn new(dim: usize, bits: usize) -> Result<Self, Error> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::InvalidParameter(format!(
                "dim {dim} not in [1, {MAX_DIM}]"
            )));
        }
        if !(2..=MAX_BITS).contains(&bits) {
            return Err(Error::InvalidParameter(format!(
                "bits {bits} not in [2, {MAX_BITS}]"
            )));
        }
        Ok(Grid { dim, bits })
    }

    /// Number of coordinates `p`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bits per coordinate `b`.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// The scale `s = 2^(b-1) - 1`: grid units per unit-ball unit.
    pub fn scale(&self) -> i64 {
        (1i64 << (self.bits - 1)) - 1
    }

    /// The squared-norm bound `B` (see the type's docs).
    pub fn norm_bound(&self) -> u64 {
        let p = self.dim as u128;
        let root = p.isqrt();
        let ceil_root = if root * root < p { root + 1 } else { root };
        let a = 2 * self.scale().unsigned_abs() as u128 + ceil_root + 1;
        // a ≤ 2^33, so a² fits; B ≤ 2^64 only if b = 32 and p is large: saturate (the circuit
        // then checks a bound no report on the grid can exceed anyway).
        u64::try_from((a * a).div_ceil(4)).unwrap_or(u64::MAX)
    }

    /// The circuit of this grid's reports, with `x` aggregated too if `output_x`.
    ///
    /// # Errors
    ///
    /// As [`CovarianceReport::new`].
    pub fn report_type(&self, output_x: bool) -> Result<CovarianceReport, Error> {
        CovarianceReport::new(self.dim, self.bits, self.norm_bound(), output_x)
    }

    /// `x = round(s·u)` for a clipped vector `u`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongLength`]; [`Error::InvalidParameter`] for a coordinate that is not finite
    /// or a vector with `‖u‖ > 1` (beyond a relative `1e-9`: clip first).
    pub fn quantise(&self, u: &[f64]) -> Result<Vec<i64>, Error> {
        if u.len() != self.dim {
            return Err(Error::WrongLength {
                got: u.len(),
                want: self.dim,
            });
        }
        if let Some(index) = u.iter().position(|v| !v.is_finite()) {
            return Err(Error::InvalidParameter(format!(
                "coordinate {index} is not finite"
            )));
        }
        let norm = u.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 1.0 + 1e-9 {
            return Err(Error::InvalidParameter(format!(
                "the vector's norm {norm} is above 1: clip it first"
            )));
        }
        let scale = self.scale() as f64;
        // |s·u_i| ≤ s(1 + 1e-9) < 2^31: the cast is exact after rounding.
        Ok(u.iter().map(|&v| (scale * v).round() as i64).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound holds for every vector on the unit sphere's worst case: each coordinate's
    /// rounding pushed outwards, ‖u‖ = 1 exactly (coordinates all ±1/√p).
    #[test]
    fn rounded_vectors_stay_inside_the_bound_and_the_range() {
        for (dim, bits) in [(1, 2), (3, 4), (20, 16), (100, 16), (7, 31)] {
            let grid = Grid::new(dim, bits).unwrap();
            let circuit = grid.report_type(true).unwrap();
            let u: Vec<f64> = (0..dim)
                .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 } / (dim as f64).sqrt())
                .collect();
            let x = grid.quantise(&u).unwrap();
            let s = grid.scale();
            assert!(x.iter().all(|v| v.abs() <= s), "{dim} {bits}: {x:?}");
            let norm: u128 = x.iter().map(|&v| (v as i128 * v as i128) as u128).sum();
            assert!(norm <= u128::from(grid.norm_bound()));
            // The encoder (the circuit's own range and norm checks) accepts it.
            circuit.encode(&x).unwrap();
        }
    }

    #[test]
    fn bad_vectors_are_refused() {
        let grid = Grid::new(2, 8).unwrap();
        assert!(matches!(
            grid.quantise(&[0.1]),
            Err(Error::WrongLength { got: 1, want: 2 })
        ));
        assert!(grid.quantise(&[0.1, f64::NAN]).is_err());
        assert!(grid.quantise(&[0.8, 0.8]).is_err());
        assert!(Grid::new(0, 8).is_err());
        assert!(Grid::new(2, 1).is_err());
        assert!(Grid::new(2, MAX_BITS + 1).is_err());
    }
}
