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
/// Reports are validated against ±(1 + `VALIDATION_SIGMAS`·σ): an honest report
/// exceeds it with probability below e^{-1250}.
pub const VALIDATION_SIGMAS: f64 = 50.0;
/// Coarse wire encodings cover `±(1 + WIRE_CLAMP_SIGMAS·σ)` (in unit-ball units): an
/// honest noisy entry falls outside, and is clamped, with probability below
/// `P(|N(0,1)| > 6) ≈ 2·10⁻⁹`.
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
    /// Largest accepted |entry| in grid units.
    pub max_abs_grid_value: i64,
    /// Grid units per wire unit: 1 for i32; for i16/i8 the coarse step
    /// `ceil((1 + 6σ)·2^k / wire_max)`.
    pub wire_step: i64,
    /// Largest |wire value|: `max_abs_grid_value` for i32, 32 767 for i16, 127 for i8.
    pub wire_max: i64,
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
    /// The grid is the finest `k ≤ 24` for which every honest entry,
    /// `|v| ≤ 1 + 50σ`, fits an i32 at `2^-k`. Rounding the signal to that grid moves
    /// each entry by at most `2^-(k+1)`, so the sensitivity grows from √2 to
    /// `√2 + √d·2^-k` (`ALGORITHMS.md` §1), and σ is calibrated to that.
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
            let bound = ((1.0 + VALIDATION_SIGMAS * sigma) * scale).ceil();
            if sigma * scale < MIN_SIGMA_GRID {
                // Too little noise in grid units for the discrete Gaussian's privacy to
                // match the continuous calibration (see MIN_SIGMA_GRID).
                return Err(SpecError::Epsilon(epsilon));
            }
            if bound <= f64::from(i32::MAX) {
                let (wire_step, wire_max) = match encoding {
                    Encoding::I32Le | Encoding::Unspecified => (1, bound as i64),
                    Encoding::I16Le | Encoding::I8 => {
                        let wire_max = if encoding == Encoding::I8 {
                            127
                        } else {
                            32_767
                        };
                        let range = ((1.0 + WIRE_CLAMP_SIGMAS * sigma) * scale).ceil();
                        ((range / wire_max as f64).ceil() as i64, wire_max)
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
                    max_abs_grid_value: bound as i64,
                    wire_step,
                    wire_max,
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
    use crate::calibration::gaussian_delta;

    fn spec(dim: u32, epsilon: f64, delta: f64) -> CollectionSpec {
        CollectionSpec {
            collection_id: "c1".into(),
            dim,
            epsilon,
            delta,
            clip_radius: 1.0,
            min_reports: 10,
            encoding: 0,
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
            assert!(c.max_abs_grid_value as f64 >= (1.0 + 50.0 * c.sigma) * c.grid_scale());
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
            assert!(c.wire_step * c.wire_max <= c.max_abs_grid_value);
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
