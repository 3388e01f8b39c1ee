//! The exact sufficient statistics a trusted aggregator keeps: the sum of `u·uᵀ` over
//! users' clipped vectors `u` on the grid `2^−k`, never a row.

use crate::CentralError;
use nalgebra::DMatrix;

/// The grid of central reports: a coordinate is an integer multiple of `2^−15`, so a
/// product of two coordinates of a unit vector is at most `2^30` grid² units and fits
/// an i32 (and a sum of `2^33` of them an i64).
pub const CENTRAL_GRID_BITS: u32 = ldpcov_privacy::collection::CENTRAL_COORDINATE_BITS;

/// `Σ triu(u·uᵀ)` over the users counted, exactly, in units of `2^−2k`, where every
/// `u` is on the grid `2^−k` and inside the closed unit ball **exactly**
/// (`Σ u_i² ≤ 2^2k` in integers). That check is what makes the replace-one
/// sensitivity of the sum exactly `√2·2^2k` units (see [`gauss_cov`](crate::gauss_cov)):
/// no rounding term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CentralStatistics {
    dim: usize,
    grid_bits: u32,
    count: u64,
    /// Packed upper triangle (row-major, `i ≤ j`) of `Σ u·uᵀ`.
    sums: Vec<i64>,
}

impl CentralStatistics {
    /// Empty statistics of dimension `dim` on the grid `2^−grid_bits`
    /// (`1 ≤ grid_bits ≤ CENTRAL_GRID_BITS`).
    pub fn new(dim: usize, grid_bits: u32) -> Result<Self, CentralError> {
        if dim == 0 {
            return Err(CentralError::Parameter(
                "dimension must be at least 1".into(),
            ));
        }
        if !(1..=CENTRAL_GRID_BITS).contains(&grid_bits) {
            return Err(CentralError::Parameter(format!(
                "grid bits {grid_bits} must be between 1 and {CENTRAL_GRID_BITS}"
            )));
        }
        Ok(CentralStatistics {
            dim,
            grid_bits,
            count: 0,
            sums: vec![0; dim * (dim + 1) / 2],
        })
    }

    /// Statistics from exact sums kept elsewhere (an aggregator's store): `sums` is
    /// the packed `Σ triu(u·uᵀ)` of `count` users in units of `2^−2k`. Its length and
    /// the bound every sum must meet (`|S_ij| ≤ n·2^2k`) are
    /// checked; the users' unit-ball checks are the caller's (the wire decoder's).
    pub fn from_sums(
        dim: usize,
        grid_bits: u32,
        count: u64,
        sums: Vec<i64>,
    ) -> Result<Self, CentralError> {
        let mut stats = Self::new(dim, grid_bits)?;
        if sums.len() != stats.sums.len() {
            return Err(CentralError::Length {
                expected: stats.sums.len(),
                got: sums.len(),
            });
        }
        let bound = i128::from(count) * i128::from(stats.unit());
        if sums.iter().any(|&s| i128::from(s).abs() > bound) {
            return Err(CentralError::Parameter(format!(
                "a sum exceeds {count} users' largest possible total"
            )));
        }
        stats.count = count;
        stats.sums = sums;
        Ok(stats)
    }

    /// The dimension p.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The grid exponent k.
    pub fn grid_bits(&self) -> u32 {
        self.grid_bits
    }

    /// Users counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The packed sums, in units of `2^−2k`.
    pub fn sums(&self) -> &[i64] {
        &self.sums
    }

    /// `2^2k`: one unit of `‖u‖²`.
    pub fn unit(&self) -> i64 {
        1i64 << (2 * self.grid_bits)
    }

    /// Adds one user's vector on the grid (integers, units of `2^−k`). Refused unless
    /// it has `dim` coordinates and `Σ u_i² ≤ 2^2k` exactly; nothing changes then.
    pub fn add(&mut self, u: &[i32]) -> Result<(), CentralError> {
        if u.len() != self.dim {
            return Err(CentralError::Length {
                expected: self.dim,
                got: u.len(),
            });
        }
        // |u_i| ≤ 2^31, u_i² ≤ 2^62, and a sum of p ≤ 2^16 of them is checked in i128.
        let norm2: i128 = u.iter().map(|&v| i128::from(v) * i128::from(v)).sum();
        if norm2 > i128::from(self.unit()) {
            return Err(CentralError::OutsideUnitBall {
                norm2: norm2 as f64 / self.unit() as f64,
            });
        }
        let mut k = 0;
        for i in 0..self.dim {
            for j in i..self.dim {
                // Both inside the ball: |u_i·u_j| ≤ 2^2k ≤ 2^30.
                self.sums[k] += i64::from(u[i]) * i64::from(u[j]);
                k += 1;
            }
        }
        self.count += 1;
        Ok(())
    }

    /// Adds `x` clipped into the unit ball and put on the grid with
    /// [`to_grid_unit_ball`].
    pub fn add_vector(&mut self, x: &[f64]) -> Result<(), CentralError> {
        let u = to_grid_unit_ball(x, self.grid_bits)?;
        self.add(&u)
    }

    /// The exact average `Σ u·uᵀ / n` as a symmetric matrix (`None` before any user).
    pub fn exact_second_moment(&self) -> Option<DMatrix<f64>> {
        (self.count > 0).then(|| self.unpack(&self.sums_f64(), self.count as f64))
    }

    /// The sums as f64, in units of `2^−2k` (exact below `2^53`).
    pub(crate) fn sums_f64(&self) -> Vec<f64> {
        self.sums.iter().map(|&v| v as f64).collect()
    }

    /// A symmetric matrix from packed values in units of `2^−2k`, divided by `n`.
    pub(crate) fn unpack(&self, packed: &[f64], n: f64) -> DMatrix<f64> {
        let scale = 1.0 / (self.unit() as f64 * n);
        ldpcov_estimate::packed_to_matrix(self.dim, packed) * scale
    }
}

/// `x` clipped into the unit ball and put on the grid `2^−k`, inside the ball exactly:
/// [`ldpcov_privacy::wire::to_grid_unit_ball`] (the devices' code), with this crate's
/// error.
pub fn to_grid_unit_ball(x: &[f64], grid_bits: u32) -> Result<Vec<i32>, CentralError> {
    ldpcov_privacy::wire::to_grid_unit_ball(x, grid_bits).map_err(|e| match e {
        ldpcov_privacy::WireError::NotFinite { index } => CentralError::NotFinite { index },
        other => CentralError::Parameter(other.to_string()),
    })
}
