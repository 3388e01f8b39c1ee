//! A validated collection: the operator's [`CollectionSpec`] plus every parameter
//! derived from it (grid, sensitivity, σ, ρ, validation bound).
//!
//! Both sides derive the parameters with the same code, so a device never has to
//! trust the noise level a server tells it.

use crate::SpecError;
use crate::calibration::{analytic_sigma, zcdp_rho};
use crate::layout::triangle_len;
use crate::v1::{CollectionParams, CollectionSpec, Encoding};

/// Largest dimension a collection may have. At p = 4096 a report holds 8.4 M entries
/// (33.6 MB as i32), which is as large as we let one gRPC message be.
pub const MAX_DIM: usize = 4096;
/// Largest ε a collection may ask for. Beyond it a report protects next to nothing,
/// and `e^ε` in the analytic calibration loses precision.
pub const MAX_EPSILON: f64 = 100.0;
/// Smallest noise sd in grid units. The d-dimensional discrete Gaussian's privacy
/// loss exceeds the continuous Gaussian's by at most `τ = 10·Σ_{k<d} e^{−2π²σ²k/(k+1)}`
/// (Canonne, Kamath & Steinke 2020, Theorem 14); at σ ≥ 16 grid units that is below
/// `10·d·e^{−2500}`, zero in any arithmetic. In practice σ·2^k is 10⁵ or more.
pub const MIN_SIGMA_GRID: f64 = 16.0;
/// Longest collection id.
pub const MAX_ID_LEN: usize = 128;
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
/// Name of the calibration recorded in [`CollectionParams::calibration`].
pub const CALIBRATION_NAME: &str = "analytic-gaussian/balle-wang-2018";

/// A collection whose spec is valid, with its derived parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Collection {
    /// Collection id (1–128 characters from `[A-Za-z0-9._-]`).
    pub id: String,
    /// Dimension p.
    pub dim: usize,
    /// ε of one report.
    pub epsilon: f64,
    /// δ of one report.
    pub delta: f64,
    /// Clip radius R.
    pub clip_radius: f64,
    /// Minimum number of reports before an estimate is released.
    pub min_reports: u64,
    /// Wire encoding of reports.
    pub encoding: Encoding,
    /// Number of packed entries d = p(p+1)/2.
    pub entries: usize,
    /// k: entries are multiples of 2^-k in unit-ball units.
    pub grid_bits: u32,
    /// L2 sensitivity of the grid-rounded statistic, unit-ball units: √2 + √d·2^-k.
    pub sensitivity: f64,
    /// Per-entry noise sd in unit-ball units.
    pub sigma: f64,
    /// zCDP ρ of one report.
    pub rho: f64,
    /// Largest accepted |entry| in grid units, the validation bound: for i32
    /// `ceil((1 + tσ)·2^k)` with `t` = [`VALIDATION_SIGMAS`]; for i16/i8 the wire range
    /// `wire_step·wire_max`, which covers `(1 + 6σ)·2^k`. Devices clamp to it.
    pub max_abs_grid_value: i64,
    /// Grid units per wire unit: 1 for i32; for i16/i8 the coarse step
    /// `ceil((1 + 6σ)·2^k / wire_max)`.
    pub wire_step: i64,
    /// Largest |wire value|: `max_abs_grid_value` for i32, 32 767 for i16, 127 for i8.
    pub wire_max: i64,
    /// The variables have a natural order (`CollectionSpec.ordered_variables`): the
    /// default cross-validation may then try banding and Toeplitz averaging.
    pub ordered_variables: bool,
}

/// Checks a collection id: 1–128 characters from `[A-Za-z0-9._-]`.
pub fn validate_collection_id(id: &str) -> Result<(), SpecError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SpecError::CollectionId(
            id.chars().take(MAX_ID_LEN + 8).collect(),
        ))
    }
}

impl Collection {
    /// Validates `spec` and derives the grid, sensitivity and noise.
    ///
    /// The grid is the finest `k ≤ 24` for which `1 + 50σ` ([`GRID_HEADROOM_SIGMAS`])
    /// fits an i32 at `2^-k`. Rounding the signal to that grid moves each entry by at
    /// most `2^-(k+1)`, so the sensitivity grows from √2 to `√2 + √d·2^-k`
    /// (`docs/PRIVACY.md`, "Sensitivity"), and σ is calibrated to that. The validation
    /// bound is then `1 + tσ` ([`VALIDATION_SIGMAS`]) for i32 and the wire range for
    /// i16/i8.
    pub fn from_spec(spec: &CollectionSpec) -> Result<Self, SpecError> {
        validate_collection_id(&spec.collection_id)?;
        let dim = spec.dim as usize;
        if dim == 0 || dim > MAX_DIM {
            return Err(SpecError::Dim(spec.dim));
        }
        let (epsilon, delta, clip_radius) = (spec.epsilon, spec.delta, spec.clip_radius);
        if !(epsilon.is_finite() && epsilon > 0.0 && epsilon <= MAX_EPSILON) {
            return Err(SpecError::Epsilon(epsilon));
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(SpecError::Delta(delta));
        }
        if !(clip_radius.is_finite() && clip_radius > 0.0) {
            return Err(SpecError::ClipRadius(clip_radius));
        }
        if spec.min_reports == 0 {
            return Err(SpecError::MinReports);
        }
        let encoding = match Encoding::try_from(spec.encoding) {
            Ok(Encoding::Unspecified) => Encoding::I32Le,
            Ok(e) => e,
            Err(_) => return Err(SpecError::Encoding(spec.encoding)),
        };
        let entries = triangle_len(dim);
        for grid_bits in (MIN_GRID_BITS..=MAX_GRID_BITS).rev() {
            let scale = f64::from(1u32 << grid_bits);
            let sensitivity = std::f64::consts::SQRT_2 + (entries as f64).sqrt() / scale;
            let sigma = analytic_sigma(sensitivity, epsilon, delta)?;
            let headroom = ((1.0 + GRID_HEADROOM_SIGMAS * sigma) * scale).ceil();
            if sigma * scale < MIN_SIGMA_GRID {
                // Too little noise in grid units for the discrete Gaussian's privacy to
                // match the continuous calibration (see MIN_SIGMA_GRID).
                return Err(SpecError::Epsilon(epsilon));
            }
            if headroom <= f64::from(i32::MAX) {
                let (wire_step, wire_max, bound) = match encoding {
                    Encoding::I32Le | Encoding::Unspecified => {
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
                return Ok(Collection {
                    id: spec.collection_id.clone(),
                    dim,
                    epsilon,
                    delta,
                    clip_radius,
                    min_reports: spec.min_reports,
                    encoding,
                    entries,
                    grid_bits,
                    sensitivity,
                    sigma,
                    rho: zcdp_rho(sensitivity, sigma),
                    max_abs_grid_value: bound,
                    wire_step,
                    wire_max,
                    ordered_variables: spec.ordered_variables,
                });
            }
        }
        Err(SpecError::Uncalibratable { epsilon, delta })
    }

    /// Re-derives a collection from parameters received from a server and checks
    /// that every derived field agrees with local arithmetic.
    pub fn from_params(params: &CollectionParams) -> Result<Self, SpecError> {
        let spec = params.spec.as_ref().ok_or(SpecError::MissingSpec)?;
        let local = Self::from_spec(spec)?;
        let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
        let agrees = params.entries as usize == local.entries
            && params.grid_bits == local.grid_bits
            && same(params.sigma, local.sigma)
            && same(params.sensitivity, local.sensitivity)
            && params.max_abs_grid_value == local.max_abs_grid_value
            && params.wire_step == local.wire_step
            && params.wire_max == local.wire_max;
        if agrees {
            Ok(local)
        } else {
            Err(SpecError::ParamsMismatch {
                server_sigma: params.sigma,
                local_sigma: local.sigma,
            })
        }
    }

    /// The spec this collection was built from (encoding made explicit).
    pub fn spec(&self) -> CollectionSpec {
        CollectionSpec {
            collection_id: self.id.clone(),
            dim: self.dim as u32,
            epsilon: self.epsilon,
            delta: self.delta,
            clip_radius: self.clip_radius,
            min_reports: self.min_reports,
            encoding: self.encoding as i32,
            ordered_variables: self.ordered_variables,
        }
    }

    /// The public parameters sent to clients.
    pub fn params(&self) -> CollectionParams {
        CollectionParams {
            spec: Some(self.spec()),
            entries: self.entries as u32,
            grid_bits: self.grid_bits,
            sensitivity: self.sensitivity,
            sigma: self.sigma,
            rho: self.rho,
            max_abs_grid_value: self.max_abs_grid_value,
            calibration: CALIBRATION_NAME.to_string(),
            wire_step: self.wire_step,
            wire_max: self.wire_max,
        }
    }

    /// `2^k`: grid units per unit-ball unit.
    pub fn grid_scale(&self) -> f64 {
        f64::from(1u32 << self.grid_bits)
    }

    /// Noise sd in grid units, `σ·2^k`.
    pub fn sigma_grid(&self) -> f64 {
        self.sigma * self.grid_scale()
    }

    /// Noise sd of one entry of the average of `n` reports, in data units: `R²σ/√n`.
    pub fn mean_entry_noise_sd(&self, n: u64) -> f64 {
        self.clip_radius * self.clip_radius * self.sigma / (n as f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{gaussian_delta, std_normal_cdf};

    fn spec(dim: u32, epsilon: f64, delta: f64) -> CollectionSpec {
        CollectionSpec {
            collection_id: "c1".into(),
            dim,
            epsilon,
            delta,
            clip_radius: 1.0,
            min_reports: 10,
            encoding: 0,
            ordered_variables: false,
        }
    }

    #[test]
    fn derived_parameters_are_private_for_the_grid_sensitivity() {
        for &(dim, eps, delta) in &[(1, 1.0, 1e-6), (20, 1.0, 1e-6), (1000, 0.1, 1e-9)] {
            let c = Collection::from_spec(&spec(dim, eps, delta)).unwrap();
            let d = (dim as usize) * (dim as usize + 1) / 2;
            assert_eq!(c.entries, d);
            let want_sens = 2f64.sqrt() + (d as f64).sqrt() / c.grid_scale();
            assert_eq!(c.sensitivity, want_sens);
            // The sensitivity is never below the true √2.
            assert!(c.sensitivity > 2f64.sqrt());
            // σ meets δ at that sensitivity.
            assert!(gaussian_delta(c.sensitivity, eps, c.sigma) <= delta * (1.0 + 1e-9));
            // Every honest value fits the i32 wire.
            assert!(c.max_abs_grid_value <= i64::from(i32::MAX));
            let bound = ((1.0 + VALIDATION_SIGMAS * c.sigma) * c.grid_scale()).ceil();
            assert_eq!(c.max_abs_grid_value as f64, bound);
            assert_eq!(c.wire_max, c.max_abs_grid_value);
        }
    }

    /// `t` meets the per-entry tail target of its derivation, and is the smallest
    /// value to 0.01 that does (a looser bound would be a longer poisoning lever).
    #[test]
    fn validation_sigmas_meet_the_tail_target_and_no_more() {
        let chernoff = |t: f64| 2.0 * (-t * t / 2.0).exp();
        let t = VALIDATION_SIGMAS;
        assert!(chernoff(t) <= VALIDATION_TAIL, "{}", chernoff(t));
        assert!(
            chernoff(t - 0.01) > VALIDATION_TAIL,
            "{}",
            chernoff(t - 0.01)
        );
        // The continuous Gaussian's exact tail lies below the Chernoff bound.
        assert!(2.0 * std_normal_cdf(-t) < chernoff(t));
        // The coarse encodings' range sits inside it; the grid headroom outside.
        assert!(WIRE_CLAMP_SIGMAS < t && t < GRID_HEADROOM_SIGMAS);
    }

    /// The grid is still the finest with `(1 + 50σ)·2^k ≤ i32::MAX`: tightening the
    /// validation bound changed neither k, nor Δ, nor σ.
    #[test]
    fn the_grid_keeps_its_own_headroom() {
        // k pinned from an independent computation (mpmath bisection of the analytic
        // Gaussian, the rule above), which the code before the tightening also gave.
        for &(dim, eps, delta, k) in &[
            (1, 1.0, 1e-6, 22),
            (20, 1.0, 1e-6, 22),
            (1000, 0.1, 1e-9, 19),
        ] {
            let c = Collection::from_spec(&spec(dim, eps, delta)).unwrap();
            assert_eq!(c.grid_bits, k, "p = {dim}");
            let fits = |k: u32| {
                let scale = f64::from(1u32 << k);
                let sens = std::f64::consts::SQRT_2 + (c.entries as f64).sqrt() / scale;
                let sigma = analytic_sigma(sens, eps, delta).unwrap();
                ((1.0 + 50.0 * sigma) * scale).ceil() <= f64::from(i32::MAX)
            };
            assert!(fits(c.grid_bits));
            assert!(c.grid_bits == MAX_GRID_BITS || !fits(c.grid_bits + 1));
        }
    }

    /// The poisoning lever: the most one accepted report can add to one summed entry,
    /// `max_abs_grid_value / 2^k` unit-ball units, in units of an honest report's noise
    /// sd σ. An honest entry is signal (|s| ≤ 1) plus noise, so the lever is the bound
    /// `t + 1/σ` (i32) or `6 + 1/σ` plus less than one wire step (i16/i8); it was
    /// `50 + 1/σ` for i32 before. `--nocapture` prints the table docs/PRIVACY.md quotes.
    #[test]
    fn the_poisoning_lever_is_the_bound_in_sigmas() {
        for &(dim, eps) in &[(20, 0.5), (20, 1.0), (20, 4.0), (200, 1.0)] {
            for encoding in [Encoding::I32Le, Encoding::I16Le, Encoding::I8] {
                let mut s = spec(dim, eps, 1e-6);
                s.encoding = encoding as i32;
                let c = Collection::from_spec(&s).unwrap();
                let lever = c.max_abs_grid_value as f64 / c.sigma_grid();
                let floor = |t: f64| t + 1.0 / c.sigma;
                let old = floor(GRID_HEADROOM_SIGMAS);
                println!(
                    "p={dim} eps={eps} {encoding:?}: sigma={:.4} lever={lever:.3} (i32 before: {old:.3})",
                    c.sigma
                );
                let (t, slack) = match encoding {
                    Encoding::I32Le => (VALIDATION_SIGMAS, 1.0),
                    _ => (WIRE_CLAMP_SIGMAS, c.wire_max as f64 + 1.0),
                };
                // Rounding up to whole grid units (and wire steps) adds < slack units.
                assert!(lever >= floor(t), "{lever}");
                assert!(lever < floor(t) + slack / c.sigma_grid(), "{lever}");
                assert!(lever < floor(VALIDATION_SIGMAS) + 1e-3, "{lever}");
            }
        }
    }

    #[test]
    fn grid_rounding_costs_little_sensitivity_at_p_1000() {
        let c = Collection::from_spec(&spec(1000, 1.0, 1e-6)).unwrap();
        assert!(
            c.sensitivity / 2f64.sqrt() - 1.0 < 1e-2,
            "{}",
            c.sensitivity
        );
    }

    #[test]
    fn coarse_encodings_cover_six_sigma_and_fit_the_grid() {
        for (encoding, wire_max) in [(Encoding::I16Le, 32_767i64), (Encoding::I8, 127)] {
            let mut s = spec(100, 1.0, 1e-6);
            s.encoding = encoding as i32;
            let c = Collection::from_spec(&s).unwrap();
            assert_eq!(c.wire_max, wire_max);
            let covered = (c.wire_step * c.wire_max) as f64;
            let needed = (1.0 + 6.0 * c.sigma) * c.grid_scale();
            // step = ceil(needed / wire_max): covers the range, overshooting by < wire_max.
            assert!(covered >= needed && covered < needed + wire_max as f64);
            // The wire range is the validation bound.
            assert_eq!(c.wire_step * c.wire_max, c.max_abs_grid_value);
            // The same noise calibration as i32: the encoding is post-processing.
            let i32c = Collection::from_spec(&spec(100, 1.0, 1e-6)).unwrap();
            assert_eq!((c.sigma, c.grid_bits), (i32c.sigma, i32c.grid_bits));
            assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
        }
    }

    #[test]
    fn params_round_trip_and_tampering_is_caught() {
        let c = Collection::from_spec(&spec(5, 1.0, 1e-6)).unwrap();
        assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
        let mut p = c.params();
        p.sigma *= 0.5;
        assert!(matches!(
            Collection::from_params(&p),
            Err(SpecError::ParamsMismatch { .. })
        ));
    }

    #[test]
    fn rejects_nonsense_specs() {
        assert!(matches!(
            Collection::from_spec(&spec(0, 1.0, 1e-6)),
            Err(SpecError::Dim(0))
        ));
        assert!(Collection::from_spec(&spec(MAX_DIM as u32 + 1, 1.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, 0.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, -1.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, f64::INFINITY, 1e-6)).is_err());
        // Noise below one grid unit: refused rather than handed to an integer sampler.
        assert!(Collection::from_spec(&spec(3, 1e12, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, 1e3, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, MAX_EPSILON, 1e-6)).is_ok());
        assert!(Collection::from_spec(&spec(3, 1.0, 0.0)).is_err());
        assert!(Collection::from_spec(&spec(3, 1.0, 1.0)).is_err());
        assert!(Collection::from_spec(&spec(3, 1.0, f64::NAN)).is_err());
        let mut s = spec(3, 1.0, 1e-6);
        s.clip_radius = 0.0;
        assert!(Collection::from_spec(&s).is_err());
        s.clip_radius = 1.0;
        s.min_reports = 0;
        assert!(Collection::from_spec(&s).is_err());
        s.min_reports = 1;
        s.encoding = 99;
        assert!(Collection::from_spec(&s).is_err());
        s.encoding = 4;
        assert!(Collection::from_spec(&s).is_err());
        s.encoding = 0;
        for bad in ["", "a b", "x/y", &"a".repeat(129)] {
            s.collection_id = bad.to_string();
            assert!(Collection::from_spec(&s).is_err(), "{bad:?}");
        }
    }
}
