//! The Gaussian report of a local collection: the device puts `(w·u, svec(uuᵀ))` (the
//! mean block only with `w > 0`; off-diagonal entries `√2·uᵢuⱼ`, or `uᵢuⱼ` for the
//! original [`OffDiagonalWeighting::Raw`] weighting) on the grid `2^−k`, adds independent
//! discrete Gaussian noise of sd `σ·2^k` grid units to every entry, clamps to the
//! validation bound and encodes (`docs/PRIVACY.md` §2). This module holds its
//! calibration, its exact grid statistic, its encoding and its ingest check; the noise
//! draws are the client's.

use crate::SpecError;
use crate::encoding::{WireError, bytes_per_entry, encode_clamped};
use crate::layout::{triangle_len, triangle_pairs};
use crate::mechanism::{NoiseModel, Unbiasing, statistic_of};
use ldpcov_accounting::calibration::analytic_sigma;
use ldpcov_proto::v1::Encoding;

/// Smallest noise sd in grid units. The d-dimensional discrete Gaussian's privacy
/// loss exceeds the continuous Gaussian's by at most `τ = 10·Σ_{k<d} e^{−2π²σ²k/(k+1)}`
/// (Canonne, Kamath & Steinke 2020, Theorem 14); at σ ≥ 16 grid units that is below
/// `10·d·e^{−2500}`, zero in any arithmetic. In practice σ·2^k is 10⁵ or more.
pub const MIN_SIGMA_GRID: f64 = 16.0;
/// Finest grid: entries are multiples of 2^-24.
pub const MAX_GRID_BITS: u32 = 24;
/// Coarsest grid we accept before calling a spec uncalibratable.
pub const MIN_GRID_BITS: u32 = 8;
/// Headroom, in σ, that the grid choice leaves for an honest noisy entry: `k` is the
/// finest grid with `(1 + GRID_HEADROOM_SIGMAS·σ)·2^k ≤ i32::MAX`. This fixes `k` (and
/// with it Δ and σ) and is kept as it was; it is not the validation bound.
pub const GRID_HEADROOM_SIGMAS: f64 = 50.0;
/// The validation bound `t`: i32 reports are accepted up to `±(1 + t·σ)` unit-ball
/// units (coarse encodings are bounded by their wire range, `±(1 + 6σ)` plus less than
/// one wire step, see [`WIRE_CLAMP_SIGMAS`]).
///
/// Derivation. An honest entry is `s + z` with `|s| ≤ 2^k` (`|uᵢuⱼ| ≤ ‖u‖² ≤ 1`, and
/// rounding to the grid cannot pass `±2^k`, which is on the grid) and `z` the noise in
/// grid units, sd `σ_g = σ·2^k`. So it leaves `±(1 + tσ)·2^k` only if `|z| > t·σ_g`.
/// The discrete Gaussian `N_ℤ(0, σ_g²)` is sub-Gaussian with the continuous
/// Gaussian's parameter, `E[e^{λz}] ≤ e^{λ²σ_g²/2}` (Canonne, Kamath & Steinke 2020),
/// so Chernoff gives `P(|z| > tσ_g) ≤ 2·e^{−t²/2}`: the continuous tail bound with
/// factor 1. (The simulation sampler rounds a continuous Gaussian to the nearest
/// integer; `|round(y)| > m` needs `|y| > m`, so the same bound holds.) Asking
/// `2·e^{−t²/2} ≤ 10⁻¹²` per entry gives `t ≥ √(2·ln(2·10¹²)) = 7.5265…`; we take
/// 7.53 (`2·e^{−7.53²/2} = 9.7·10⁻¹³`; the exact continuous tail `2Φ̄(7.53)` is
/// `5.1·10⁻¹⁴`). A device clamps its noisy entries to the bound (post-processing), so
/// an honest report is never refused; one of `d` entries is clamped with probability
/// at most `d·10⁻¹²`.
pub const VALIDATION_SIGMAS: f64 = 7.53;
/// Largest tail probability per honest entry that [`VALIDATION_SIGMAS`] allows.
pub const VALIDATION_TAIL: f64 = 1e-12;
/// Coarse wire encodings cover `±(1 + WIRE_CLAMP_SIGMAS·σ)` (in unit-ball units): an
/// honest noisy entry falls outside, and is clamped, with probability below
/// `P(|N(0,1)| > 6) ≈ 2·10⁻⁹`. Below [`VALIDATION_SIGMAS`], so for i16/i8 the wire
/// range is the validation bound.
pub const WIRE_CLAMP_SIGMAS: f64 = 6.0;

/// How a Gaussian report carries an off-diagonal product `uᵢuⱼ` (i < j).
///
/// The sensitivity is the same for both: packing counts an off-diagonal pair once, so
/// `‖triu(A)‖ ≤ ‖svec(A)‖ = ‖A‖_F`, and the worst pair of inputs has a diagonal
/// `uuᵀ − u'u'ᵀ` (see [`joint_base_sensitivity`](crate::mechanism::joint_base_sensitivity)),
/// where both norms are equal. Dividing the `√2`-weighted entry by `√2` on the server
/// halves its noise variance for free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffDiagonalWeighting {
    /// `uᵢuⱼ`: the weighting of collections created before the `svec` one.
    Raw,
    /// `√2·uᵢuⱼ` (the `svec` convention): the packed vector's ℓ₂ norm is `‖uuᵀ‖_F`.
    Svec,
}

impl OffDiagonalWeighting {
    /// The factor an off-diagonal product is carried with: 1 or √2.
    pub fn factor(self) -> f64 {
        match self {
            OffDiagonalWeighting::Raw => 1.0,
            OffDiagonalWeighting::Svec => std::f64::consts::SQRT_2,
        }
    }
}

/// Relative margin on the grid-rounding term of an `svec` report's sensitivity.
///
/// Why a margin: its off-diagonal entries round `√2·uᵢuⱼ`, which an f64 computes with
/// a relative error of at most two ulps (`2^−51`), i.e. at most
/// `2^−51·2^k·|√2·uᵢuⱼ| ≤ 2^−27` grid units at `k ≤ 24`: an entry's rounding error is at
/// most `½ + 2^−27` grid units instead of `½`, which a margin of `2^−26` would cover.
///
/// Why `2^−10`: it also makes every svec collection's σ and Δ differ from those of the
/// raw weighting by more than the relative `10⁻¹²` with which a device compares a
/// server's parameters with its own derivation (`Collection::from_params`): at least
/// `2^−10·2^−24/√2 ≈ 4·10⁻¹¹` (one entry at the finest grid). A device that predates
/// the weighting, and so derives the raw report from the same spec, refuses an svec
/// collection (`ParamsMismatch`) instead of sending raw-weighted reports the server
/// would divide by √2. The cost is nil: σ grows by less than `10⁻⁸` relative.
pub const SVEC_ROUNDING_MARGIN: f64 = 1.0 / (1u64 << 10) as f64;

/// The calibrated Gaussian report of a local collection.
///
/// Calibration: the report has `entries` values (`d`, or `p + d` with the mean block).
/// The grid is the finest `k ≤ 24` for which `1 + 50σ` ([`GRID_HEADROOM_SIGMAS`]) fits
/// an i32 at `2^-k`; σ is the analytic Gaussian's for the sensitivity `Δ₀ + √entries·2^-k`
/// (the grid rounding included); the validation bound is `1 + tσ`
/// ([`VALIDATION_SIGMAS`]) for i32 and the wire range for i16/i8.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianReport {
    dim: usize,
    weighting: OffDiagonalWeighting,
    mean_weight: f64,
    base_sensitivity: f64,
    entries: usize,
    encoding: Encoding,
    grid_bits: u32,
    sensitivity: f64,
    sigma: f64,
    max_abs_grid_value: i64,
    wire_step: i64,
    wire_max: i64,
}

impl GaussianReport {
    /// Calibrates the report of dimension `dim` (with the mean block if `has_mean`,
    /// off-diagonal products carried by `weighting`) to (ε, δ) in `encoding` (I32Le,
    /// I16Le or I8).
    ///
    /// The report has `entries` values (`d`, or `p + d` with the mean block). The grid
    /// is the finest `k ≤ 24` for which `1 + 50σ` ([`GRID_HEADROOM_SIGMAS`]) fits an
    /// i32 at `2^-k`. Rounding the signal to that grid moves each entry by at most
    /// `2^-(k+1)`, so the sensitivity grows from `Δ₀` (√2, or
    /// [`joint_base_sensitivity`](crate::mechanism::joint_base_sensitivity)`(w)`) to
    /// `Δ₀ + √entries·2^-k` (`docs/PRIVACY.md`, "Sensitivity"; times
    /// `1 + `[`SVEC_ROUNDING_MARGIN`] for the `svec` weighting), and σ is calibrated to
    /// that. Both weightings have the same `Δ₀` (see [`OffDiagonalWeighting`]), and an
    /// `svec` off-diagonal entry `|√2·uᵢuⱼ| ≤ ‖u‖²/√2 < 1` stays within the range of the
    /// diagonal's, so the validation bound and the wire range do not change. The validation bound is then `1 + tσ` ([`VALIDATION_SIGMAS`]) for i32 and
    /// the wire range for i16/i8: honest entries of the mean block are
    /// `|w·uᵢ| ≤ w ≤ 1`, within the same bound as the products `|uᵢuⱼ| ≤ 1`.
    pub(crate) fn calibrate(
        dim: usize,
        has_mean: bool,
        weighting: OffDiagonalWeighting,
        epsilon: f64,
        delta: f64,
        encoding: Encoding,
    ) -> Result<Self, SpecError> {
        let (mean_weight, base_sensitivity) = statistic_of(has_mean);
        let entries = if has_mean { dim } else { 0 } + triangle_len(dim);
        let rounding_margin = match weighting {
            OffDiagonalWeighting::Raw => 1.0,
            OffDiagonalWeighting::Svec => 1.0 + SVEC_ROUNDING_MARGIN,
        };
        for grid_bits in (MIN_GRID_BITS..=MAX_GRID_BITS).rev() {
            let scale = f64::from(1u32 << grid_bits);
            let sensitivity = base_sensitivity + (entries as f64).sqrt() / scale * rounding_margin;
            let sigma = analytic_sigma(sensitivity, epsilon, delta)?;
            let headroom = ((1.0 + GRID_HEADROOM_SIGMAS * sigma) * scale).ceil();
            if sigma * scale < MIN_SIGMA_GRID {
                // Too little noise in grid units for the discrete Gaussian's privacy to
                // match the continuous calibration (see MIN_SIGMA_GRID).
                return Err(SpecError::Epsilon(epsilon));
            }
            if headroom <= f64::from(i32::MAX) {
                let (wire_step, wire_max, bound) = match encoding {
                    Encoding::I32Le | Encoding::Unspecified | Encoding::RawI32Le => {
                        // ≤ headroom ≤ i32::MAX, since t < 50.
                        let bound = ((1.0 + VALIDATION_SIGMAS * sigma) * scale).ceil() as i64;
                        (1, bound, bound)
                    }
                    Encoding::I16Le | Encoding::I8 => {
                        let wire_max = if encoding == Encoding::I8 {
                            127
                        } else {
                            32_767
                        };
                        let range = ((1.0 + WIRE_CLAMP_SIGMAS * sigma) * scale).ceil();
                        let step = (range / wire_max as f64).ceil() as i64;
                        // step·wire_max < range + wire_max ≤ (1 + 6σ)·2^k + 2^15 fits
                        // an i32: if 44σ_g ≥ 2^15 it is below headroom; otherwise
                        // σ_g < 745 and it is below 2^24 + 4470 + 2^15 < 2^25.
                        (step, wire_max, step * wire_max)
                    }
                };
                return Ok(GaussianReport {
                    dim,
                    weighting,
                    mean_weight,
                    base_sensitivity,
                    entries,
                    encoding,
                    grid_bits,
                    sensitivity,
                    sigma,
                    max_abs_grid_value: bound,
                    wire_step,
                    wire_max,
                });
            }
        }
        Err(SpecError::Uncalibratable { epsilon, delta })
    }

    /// Dimension p.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How off-diagonal products are carried.
    pub fn weighting(&self) -> OffDiagonalWeighting {
        self.weighting
    }

    /// Weight `w` of the mean block (0 without one).
    pub fn mean_weight(&self) -> f64 {
        self.mean_weight
    }

    /// Entries of the mean block at the start of a report: `p`, or 0 without one.
    pub fn mean_entries(&self) -> usize {
        if self.mean_weight > 0.0 { self.dim } else { 0 }
    }

    /// Sensitivity before grid rounding: Δ₀(w), or √2.
    pub fn base_sensitivity(&self) -> f64 {
        self.base_sensitivity
    }

    /// Entries per report: `d = p(p+1)/2`, or `p + d` with the mean block (first).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Wire encoding of a report.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// k: entries are multiples of `2^−k` in unit-ball units.
    pub fn grid_bits(&self) -> u32 {
        self.grid_bits
    }

    /// `2^k`: grid units per unit-ball unit.
    pub fn grid_scale(&self) -> f64 {
        f64::from(1u32 << self.grid_bits)
    }

    /// ℓ₂ sensitivity of the grid-rounded report, unit-ball units:
    /// `base_sensitivity + √entries·2^-k`.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// Per-entry noise sd, unit-ball units.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// Noise sd in grid units, `σ·2^k`.
    pub fn sigma_grid(&self) -> f64 {
        self.sigma * self.grid_scale()
    }

    /// Largest accepted |entry| in grid units, the validation bound: for i32
    /// `ceil((1 + tσ)·2^k)` with `t` = [`VALIDATION_SIGMAS`]; for i16/i8 the wire range
    /// `wire_step·wire_max`, which covers `(1 + 6σ)·2^k`. Devices clamp to it.
    pub fn max_abs_grid_value(&self) -> i64 {
        self.max_abs_grid_value
    }

    /// Grid units per wire unit: 1 for i32; for i16/i8 the coarse step
    /// `ceil((1 + 6σ)·2^k / wire_max)`.
    pub fn wire_step(&self) -> i64 {
        self.wire_step
    }

    /// Largest |wire value|: `max_abs_grid_value` for i32, 32 767 for i16, 127 for i8.
    pub fn wire_max(&self) -> i64 {
        self.wire_max
    }

    /// The noise of a report: i.i.d. Gaussian of sd σ on every entry.
    pub fn noise(&self) -> NoiseModel {
        NoiseModel::IidGaussian { sigma: self.sigma }
    }

    /// From averaged entries to unbiased estimates: the mean block divided by `w`, the
    /// off-diagonal entries by the weighting's factor (so an `svec` report's
    /// off-diagonal noise sd is `σ/√2`).
    pub fn unbiasing(&self) -> Unbiasing {
        Unbiasing {
            mean_divisor: if self.mean_weight > 0.0 {
                self.mean_weight
            } else {
                1.0
            },
            diagonal_offset: 0.0,
            diagonal_divisor: 1.0,
            off_diagonal_divisor: self.weighting.factor(),
        }
    }

    /// The exact noiseless statistic of the clipped `u` (‖u‖ ≤ 1, `p` coordinates) on
    /// the grid, in grid units and report order: for each `i`, `round(w·uᵢ·2ᵏ)` (the
    /// mean block, if any); then for each `(i, j)`, `i ≤ j`, in
    /// [`triangle_pairs`] order, `round(uᵢ·uⱼ·2ᵏ)` on the diagonal and, off it,
    /// `round(uᵢ·uⱼ·2ᵏ)` (raw weighting) or `round(√2·uᵢ·uⱼ·2ᵏ)` (`svec`), to the
    /// nearest integer with ties away from zero. Raw products are decided on the exact
    /// product; an `svec` product `(√2·uᵢ)·uⱼ` is within `2^−27` grid units of exact
    /// (see [`SVEC_ROUNDING_MARGIN`]). Each value is at most `2ᵏ ≤ 2²⁴` in magnitude.
    /// `w = 1/2` is a power of two, so the exact-tie rule applies to the mean block as to
    /// the products.
    pub fn statistic<'a>(&'a self, u: &'a [f64]) -> impl Iterator<Item = i64> + 'a {
        let scale = self.grid_scale();
        let factor = self.weighting.factor();
        let mean_block = u[..self.mean_entries()]
            .iter()
            .map(|&ui| (self.mean_weight, ui));
        let products = triangle_pairs(self.dim).map(move |(i, j)| {
            if i == j || factor == 1.0 {
                (u[i], u[j])
            } else {
                (factor * u[i], u[j])
            }
        });
        // |signal| ≤ 2ᵏ ≤ 2²⁴: exact in i64.
        mean_block
            .chain(products)
            .map(move |(a, b)| round_grid(a, b, scale) as i64)
    }

    /// A noisy entry (grid units) clamped to the validation bound
    /// `±max_abs_grid_value`. The clamp acts on the already-noisy value, so it is
    /// post-processing and costs no privacy; an honest entry reaches it with
    /// probability at most 10⁻¹² ([`VALIDATION_SIGMAS`]).
    pub fn clamp(&self, noisy: i64) -> i32 {
        let bound = self.max_abs_grid_value.clamp(0, i64::from(i32::MAX));
        // Within ±bound ⊂ i32 after the clamp.
        noisy.clamp(-bound, bound) as i32
    }

    /// Serialises wire values (grid units divided by [`wire_step`](Self::wire_step),
    /// within `±wire_max`) in the report's encoding. Values outside the wire range are
    /// clamped to it, so the output always decodes.
    pub fn encode(&self, wire_values: &[i32]) -> Vec<u8> {
        debug_assert_eq!(wire_values.len(), self.entries);
        encode_clamped(self.encoding, self.wire_max, wire_values)
    }

    /// Decodes a payload in this report's encoding into grid-unit entries (wire value
    /// × `wire_step`), checking length and range.
    pub(crate) fn decode(&self, payload: &[u8]) -> Result<Vec<i32>, WireError> {
        let width = bytes_per_entry(self.encoding)
            .ok_or(WireError::UnknownEncoding(self.encoding as i32))?;
        let expected = self.entries * width;
        if payload.len() != expected {
            return Err(WireError::Length {
                expected,
                got: payload.len(),
                entries: self.entries,
            });
        }
        let (bound, step) = (self.wire_max, self.wire_step);
        // Three passes a compiler can vectorise (this is the ingest hot path: a branch
        // and an early return per entry cost ~10× more): widen every entry to i32, check
        // the largest magnitude, scale. Only a payload that fails the check is searched
        // for its first bad entry.
        let mut values = vec![0i32; self.entries];
        match width {
            4 => {
                for (v, c) in values.iter_mut().zip(payload.chunks_exact(4)) {
                    *v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            2 => {
                for (v, c) in values.iter_mut().zip(payload.chunks_exact(2)) {
                    *v = i32::from(i16::from_le_bytes([c[0], c[1]]));
                }
            }
            _ => {
                for (v, &b) in values.iter_mut().zip(payload) {
                    *v = i32::from(b as i8);
                }
            }
        }
        let largest = values.iter().fold(0u32, |m, v| m.max(v.unsigned_abs()));
        if i64::from(largest) > bound {
            let (index, &value) = values
                .iter()
                .enumerate()
                .find(|(_, v)| i64::from(v.unsigned_abs()) > bound)
                .unwrap_or((0, &0));
            return Err(WireError::OutOfRange {
                index,
                value: i64::from(value),
                bound,
            });
        }
        if step != 1 {
            // |value·step| ≤ wire_max·wire_step = max_abs_grid_value ≤ i32::MAX, and
            // step ≤ max_abs_grid_value fits an i32: no product overflows.
            let step = step as i32;
            for v in &mut values {
                *v *= step;
            }
        }
        Ok(values)
    }
}

/// `round(a·b·scale)` for a power-of-two `scale`, to the nearest integer with ties away
/// from zero, decided on the exact real product `a·b`.
///
/// The rounded float product can land exactly on a half-integer although the real
/// product lies strictly on one side; then the error term of the product (exact by
/// FMA) decides. This keeps the rounding error at most ½ grid unit, which the
/// sensitivity `√2 + √d·2⁻ᵏ` relies on.
pub fn round_grid(a: f64, b: f64, scale: f64) -> f64 {
    let p = a * b;
    // Exact: scale is a power of two.
    let y = p * scale;
    let r = y.round();
    if (y - r).abs() == 0.5 {
        // a·b = p + e exactly (no underflow here: |p| ≥ ½·2⁻ᵏ).
        let e = a.mul_add(b, -p);
        if e > 0.0 {
            return y + 0.5;
        }
        if e < 0.0 {
            return y - 0.5;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// Exact rounding of a·b·2ᵏ against i128 arithmetic, on float ties in particular.
    #[test]
    fn grid_rounding_is_exact_on_ties() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut naive_wrong = 0;
        for _ in 0..20_000 {
            // a = A·2⁻³⁰, b = B·2⁻³⁰ in [½, 1): the 60-bit product does not fit an f64.
            let big_a: i128 = rng.random_range((1 << 29)..(1 << 30));
            let big_b: i128 = rng.random_range((1 << 29)..(1 << 30));
            let (a, b) = (big_a as f64 / 2f64.powi(30), big_b as f64 / 2f64.powi(30));
            // The k for which the float product times 2ᵏ is a half-integer.
            let p = a * b;
            let k = (0..60)
                .find(|&k| (p * 2f64.powi(k + 1)).fract() == 0.0)
                .expect("a dyadic product");
            let scale = 2f64.powi(k);
            // Exact: A·B·2^(k−60), rounded half away from zero.
            let shift = 60 - k;
            let exact = ((big_a * big_b + (1i128 << (shift - 1))) >> shift) as f64;
            let got = round_grid(a, b, scale);
            assert_eq!(got, exact, "a={a} b={b} k={k}");
            assert_eq!(round_grid(-a, b, scale), -exact);
            if (p * scale).round() != exact {
                naive_wrong += 1;
            }
            // Away from ties at the real grid, it agrees with exact rounding too.
            let k = 24;
            let shift = 60 - k;
            let exact = ((big_a * big_b + (1i128 << (shift - 1))) >> shift) as f64;
            assert_eq!(round_grid(a, b, 2f64.powi(k)), exact);
        }
        // Plain rounding of the float product is wrong on a good share of these ties.
        assert!(naive_wrong > 1000, "{naive_wrong}");
    }
}
