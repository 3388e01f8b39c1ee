//! The raw-vector report of a central (trusted-curator) collection: the device sends its
//! clipped `u` on the grid `2^−15`, inside the unit ball exactly and without noise; the
//! server expands it into `(w·u, triu(uuᵀ))` on the grid `2^−30` (and, with norm bins,
//! the binned statistics), and the releases add the noise.

use crate::encoding::WireError;
use crate::layout::triangle_len;
use crate::mechanism::statistic_of;

/// The grid of a central report's coordinates: `u_i` is sent as an integer multiple
/// of `2^−15` ([`Encoding::RawI32Le`](ldpcov_proto::v1::Encoding::RawI32Le)). A product of two
/// coordinates of a vector in the unit ball is then at most `2^30` units of `2^−30` and
/// fits an i32; the mean block `w·u_i` (`w = 1/2`) is `u_i·2^14` units, exact.
pub const CENTRAL_COORDINATE_BITS: u32 = 15;
/// The grid of a central collection's stored entries: `2^−30`, the grid of the
/// products of two coordinates.
pub const CENTRAL_GRID_BITS: u32 = 2 * CENTRAL_COORDINATE_BITS;

/// The raw-vector report of a central collection.
#[derive(Debug, Clone, PartialEq)]
pub struct RawVectorReport {
    dim: usize,
    mean_weight: f64,
    base_sensitivity: f64,
    norm_bins: usize,
    entries: usize,
}

impl RawVectorReport {
    /// The report of dimension `dim`, with the mean block if `has_mean`, and
    /// `norm_bins` dyadic norm bins (each adds `2d + 1` entries after the statistic).
    pub(crate) fn new(dim: usize, has_mean: bool, norm_bins: usize) -> Self {
        let (mean_weight, base_sensitivity) = statistic_of(has_mean);
        let d = triangle_len(dim);
        let entries = if has_mean { dim } else { 0 } + d + norm_bins * (2 * d + 1);
        RawVectorReport {
            dim,
            mean_weight,
            base_sensitivity,
            norm_bins,
            entries,
        }
    }

    /// Dimension p (coordinates of a report).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Weight `w` of the mean block (0 without one).
    pub fn mean_weight(&self) -> f64 {
        self.mean_weight
    }

    /// The replace-one sensitivity of the exact sums: Δ₀ (√2, or Δ₀(w) with the mean
    /// block), with no rounding term since every report is on the grid and inside the
    /// unit ball exactly.
    pub fn base_sensitivity(&self) -> f64 {
        self.base_sensitivity
    }

    /// Dyadic norm bins kept (0: none).
    pub fn norm_bins(&self) -> usize {
        self.norm_bins
    }

    /// Entries a report expands into (norm bins included).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// What a device sends for its clipped `u`: the coordinates on the grid `2^−15`,
    /// inside the unit ball exactly ([`to_grid_unit_ball`]).
    pub fn statistic(&self, u: &[f64]) -> Result<Vec<i32>, WireError> {
        to_grid_unit_ball(u, CENTRAL_COORDINATE_BITS)
    }

    /// Decodes a raw vector and expands it into the entries the store sums, in units
    /// of `2^−30`: the mean block `w·u_i = u_i·2^14` when the collection has one, then
    /// `triu(u·uᵀ)`, then the norm bins. Refused unless it has `p` coordinates with
    /// `Σ u_i² ≤ 2^30` exactly (so every product is at most `2^30` in magnitude and the
    /// exact sums have the sensitivity the releases are calibrated to).
    pub(crate) fn decode(&self, payload: &[u8]) -> Result<Vec<i32>, WireError> {
        let p = self.dim;
        if payload.len() != 4 * p {
            return Err(WireError::Length {
                expected: 4 * p,
                got: payload.len(),
                entries: p,
            });
        }
        let u: Vec<i32> = payload
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let norm2 = check_unit_ball(&u)?;
        let mut entries = vec![0i32; self.entries];
        self.expand(&u, norm2, |k, v| entries[k] = v);
        Ok(entries)
    }

    /// Adds the report of the vector `u` (grid `2^−15`) to the exact `sums` in place:
    /// the same entries [`decode`](crate::mechanism::ReportMechanism::decode) expands it
    /// into, without building them (simulations keep collection sums this way at any
    /// size). Refused, with `sums` unchanged, for sums or a vector of the wrong length,
    /// and a vector outside the unit ball.
    pub fn add_to_sums(&self, u: &[i32], sums: &mut [i64]) -> Result<(), WireError> {
        if u.len() != self.dim || sums.len() != self.entries {
            return Err(WireError::Length {
                expected: self.dim,
                got: u.len(),
                entries: self.entries,
            });
        }
        let norm2 = check_unit_ball(u)?;
        self.expand(u, norm2, |k, v| sums[k] += i64::from(v));
        Ok(())
    }

    /// The non-zero part of a report's expansion, in units of `2^−30`, handed to
    /// `visit(index, value)`: the mean block `w·u_i = u_i·2^14` when the collection has
    /// one, then `triu(u·uᵀ)`, then (with norm bins) in the vector's own bin
    /// ([`norm_bin`]) `triu(u·uᵀ)`, `triu(u·uᵀ)/‖u‖²` rounded half away from zero (0 for
    /// u = 0) and the count 1; the other bins are 0. Every value is at most `2^30` in
    /// magnitude (`|u_i·u_j| ≤ ‖u‖² ≤ 2^30`). `u` must be inside the unit ball, `norm2`
    /// its squared norm.
    fn expand(&self, u: &[i32], norm2: i64, mut visit: impl FnMut(usize, i32)) {
        let p = u.len();
        let d = triangle_len(p);
        let mut k = 0;
        if self.mean_weight > 0.0 {
            // w = 1/2: w·u_i·2^30 = u_i·2^14, |u_i| ≤ 2^15.
            debug_assert_eq!(self.mean_weight, 0.5);
            for &v in u {
                visit(k, v << (CENTRAL_COORDINATE_BITS - 1));
                k += 1;
            }
        }
        for i in 0..p {
            for &v in &u[i..] {
                visit(k, u[i] * v);
                k += 1;
            }
        }
        if self.norm_bins == 0 {
            return;
        }
        let start = k + norm_bin(norm2, self.norm_bins) * (2 * d + 1);
        let mut k = 0;
        for i in 0..p {
            for j in i..p {
                let a = i64::from(u[i]) * i64::from(u[j]);
                visit(start + k, a as i32);
                if norm2 > 0 {
                    // round(a·2^30/‖u‖²), half away from zero: |a|·2^30 ≤ 2^60.
                    let scaled = (a.abs() << (2 * CENTRAL_COORDINATE_BITS)) + norm2 / 2;
                    visit(start + d + k, (a.signum() * (scaled / norm2)) as i32);
                }
                k += 1;
            }
        }
        visit(start + 2 * d, 1);
    }
}

/// `Σ u_i²` in units of `2^−30` if `u` (grid `2^−15`) is inside the unit ball exactly;
/// [`WireError::OutsideUnitBall`] otherwise.
fn check_unit_ball(u: &[i32]) -> Result<i64, WireError> {
    // |u_i| ≤ 2^31, u_i² ≤ 2^62: summed in i128, no overflow for any p.
    let norm2: i128 = u.iter().map(|&v| i128::from(v) * i128::from(v)).sum();
    if norm2 > 1i128 << (2 * CENTRAL_COORDINATE_BITS) {
        return Err(WireError::OutsideUnitBall {
            norm2: i64::try_from(norm2).unwrap_or(i64::MAX),
        });
    }
    // ≤ 2^30.
    Ok(norm2 as i64)
}

/// `x` clipped into the unit ball and rounded to the grid `2^−k` so that the result is
/// inside the ball exactly: `x/max(1, ‖x‖)`, each coordinate rounded to the nearest
/// multiple of `2^−k`, then the largest coordinates moved one step toward zero until
/// `Σ u_i² ≤ 2^2k` in integers (at most a few steps: rounding adds at most `√p/2`
/// units to the norm). Refuses non-finite coordinates. `grid_bits` ≤ 15 (the central
/// grid, [`CENTRAL_COORDINATE_BITS`]).
pub fn to_grid_unit_ball(x: &[f64], grid_bits: u32) -> Result<Vec<i32>, WireError> {
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        return Err(WireError::NotFinite { index });
    }
    let grid_bits = grid_bits.min(CENTRAL_COORDINATE_BITS);
    let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let scale = f64::from(1u32 << grid_bits) / norm.max(1.0);
    let mut u: Vec<i32> = x.iter().map(|v| (v * scale).round() as i32).collect();
    let unit = 1i128 << (2 * grid_bits);
    let mut norm2: i128 = u.iter().map(|&v| i128::from(v) * i128::from(v)).sum();
    while norm2 > unit {
        // Non-empty: an empty vector has norm 0.
        let Some((i, _)) = u.iter().enumerate().max_by_key(|(_, v)| v.unsigned_abs()) else {
            break;
        };
        let old = i128::from(u[i]);
        u[i] -= u[i].signum();
        norm2 += i128::from(u[i]) * i128::from(u[i]) - old * old;
    }
    Ok(u)
}

/// Serialises a central report: the coordinates `u` (units of `2^−15`, inside the
/// unit ball exactly, e.g. from [`to_grid_unit_ball`]) as little-endian i32
/// ([`Encoding::RawI32Le`](ldpcov_proto::v1::Encoding::RawI32Le)).
pub fn encode_raw(u: &[i32]) -> Vec<u8> {
    u.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The norm bin of a vector of squared norm `norm2` (units of `2^−30`): the largest
/// `l < bins` with `‖u‖ ≤ 2^−l`, i.e. `norm2 ≤ 2^(30 − 2l)` (0 for the unit sphere,
/// `bins − 1` for every short vector and for 0).
pub fn norm_bin(norm2: i64, bins: usize) -> usize {
    (0..bins)
        .rev()
        .find(|&l| norm2 <= 1i64 << (2 * CENTRAL_COORDINATE_BITS as usize - 2 * l))
        .unwrap_or(0)
}
