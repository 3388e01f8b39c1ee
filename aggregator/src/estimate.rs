//! From exact integer sums to a released covariance estimate: average, rescale,
//! threshold ([`crate::threshold`]), project onto the PSD cone (clamping eigenvalues
//! at 0, or at a floor ε_floor > 0 for an invertible result).
//!
//! Everything here is post-processing of the noisy sums, so none of it costs privacy.
//! The module knows nothing about gRPC or storage.

use crate::accumulator::Accumulator;
pub use crate::threshold::{
    AdaptiveThreshold, Candidate, CrossValidation, Seed001Threshold, Structure, ThresholdKind,
    ThresholdRule, Thresholds, UniversalThreshold, universal_threshold,
};
use ldpcov_proto::Collection;
use ldpcov_proto::layout::triangle_pairs;
use nalgebra::DMatrix;
use thiserror::Error;

/// Why an estimate could not be computed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EstimateError {
    /// Fewer reports than the collection's minimum.
    #[error("collection has {have} reports; an estimate is released from {need}")]
    BelowMinimum {
        /// Reports counted.
        have: u64,
        /// The collection's minimum.
        need: u64,
    },
    /// A threshold parameter is negative or not finite.
    #[error("threshold parameter {name} = {value} must be a finite number ≥ 0")]
    ThresholdParameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f64,
    },
    /// A parameter other than a threshold's is out of range.
    #[error("parameter {name} = {value} must be {requirement}")]
    Parameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f64,
        /// What it must be.
        requirement: &'static str,
    },
    /// The sums do not have d entries.
    #[error("accumulator has {got} entries, collection needs {expected}")]
    SumLength {
        /// d of the collection.
        expected: usize,
        /// Entries in the sums.
        got: usize,
    },
    /// The eigensolver did not converge.
    #[error("symmetric eigendecomposition did not converge")]
    Eigen,
}

/// What to compute from the sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EstimateOptions {
    /// The threshold rule (default: cross-validation).
    pub rule: ThresholdRule,
    /// Hard or soft thresholding for the fixed rules (cross-validation chooses its own
    /// among [`CrossValidation::kinds`]).
    pub kind: ThresholdKind,
    /// Skip the PSD projection (return the thresholded average as is).
    pub skip_psd_projection: bool,
    /// Eigenvalue floor of the projection: 0 projects onto the PSD cone (seed 000),
    /// ε_floor > 0 onto `{A ⪰ ε_floor·I}` for an invertible (positive definite) result.
    pub psd_floor: f64,
}

/// A released covariance estimate and how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct CovarianceEstimate {
    /// The symmetric `p × p` estimate in data units.
    pub matrix: DMatrix<f64>,
    /// Reports averaged.
    pub reports: u64,
    /// Noise sd of one averaged entry in data units, `R²σ/√n`.
    pub entry_noise_sd: f64,
    /// Threshold applied (0 when none), data units; for per-entry thresholds the mean
    /// off-diagonal λ_ij.
    pub threshold: f64,
    /// Name of the rule (for cross-validation: with the candidate it chose).
    pub rule: String,
    /// Hard or soft, as applied.
    pub kind: ThresholdKind,
    /// Packed upper-triangle entries that are non-zero after thresholding.
    pub surviving_entries: u64,
    /// Eigenvalues raised to the floor by the projection.
    pub clamped_eigenvalues: u32,
    /// Whether the PSD projection ran.
    pub psd_projected: bool,
}

/// The average `S̃ = (R²/n)·Σ report` as a symmetric matrix in data units, from the
/// packed grid-unit sums of `n` reports.
pub fn average(
    collection: &Collection,
    sums: &[i64],
    n: u64,
) -> Result<DMatrix<f64>, EstimateError> {
    if sums.len() != collection.entries {
        return Err(EstimateError::SumLength {
            expected: collection.entries,
            got: sums.len(),
        });
    }
    let p = collection.dim;
    let r = collection.clip_radius;
    let scale = r * r / (collection.grid_scale() * n.max(1) as f64);
    let mut m = DMatrix::zeros(p, p);
    for ((i, j), &s) in triangle_pairs(p).zip(sums) {
        let v = s as f64 * scale;
        m[(i, j)] = v;
        m[(j, i)] = v;
    }
    Ok(m)
}

/// Projects a symmetric matrix onto the PSD cone in Frobenius norm: eigendecompose
/// (faer's self-adjoint solver) and raise negative eigenvalues to 0. Returns the
/// projection and how many eigenvalues were clamped. A PSD input is returned as is.
pub fn project_psd(m: &DMatrix<f64>) -> Result<(DMatrix<f64>, u32), EstimateError> {
    project_psd_floor(m, 0.0)
}

/// Projects a symmetric matrix onto `{A : A ⪰ floor·I}` in Frobenius norm: raise every
/// eigenvalue below `floor` to `floor`. `floor = 0` is the PSD projection; `floor > 0`
/// gives a positive definite (invertible) result. Returns the projection and how many
/// eigenvalues were raised; an input already above the floor is returned as is.
pub fn project_psd_floor(
    m: &DMatrix<f64>,
    floor: f64,
) -> Result<(DMatrix<f64>, u32), EstimateError> {
    let (values, vectors) = symmetric_eigen(m)?;
    let clamped = values.iter().filter(|&&l| l < floor).count() as u32;
    if clamped == 0 {
        return Ok((m.clone(), 0));
    }
    let out = from_eigen(&vectors, values.iter().map(|&l| l.max(floor)));
    Ok((out, clamped))
}

/// Eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix, by faer's
/// self-adjoint eigensolver (reads the lower triangle).
pub fn symmetric_eigen(m: &DMatrix<f64>) -> Result<(Vec<f64>, faer::Mat<f64>), EstimateError> {
    let p = m.nrows();
    let a = faer::Mat::<f64>::from_fn(p, p, |i, j| m[(i, j)]);
    let eig = a
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|_| EstimateError::Eigen)?;
    let values: Vec<f64> = eig.S().column_vector().iter().copied().collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err(EstimateError::Eigen);
    }
    Ok((values, eig.U().to_owned()))
}

/// `U·diag(values)·Uᵀ`, symmetrised exactly (the product is symmetric only up to
/// rounding).
pub fn from_eigen(u: &faer::Mat<f64>, values: impl IntoIterator<Item = f64>) -> DMatrix<f64> {
    let p = u.nrows();
    let values: Vec<f64> = values.into_iter().collect();
    let scaled = faer::Mat::<f64>::from_fn(p, p, |i, j| u[(i, j)] * values[j]);
    let product = &scaled * u.transpose();
    DMatrix::from_fn(p, p, |i, j| 0.5 * (product[(i, j)] + product[(j, i)]))
}

/// Sets to zero every entry with `|m_ij| ≤ λ` (the diagonal only if
/// `include_diagonal`). Returns the number of packed entries left non-zero.
pub fn hard_threshold(m: &mut DMatrix<f64>, lambda: f64, include_diagonal: bool) -> u64 {
    crate::threshold::apply_threshold(
        m,
        &Thresholds::Uniform(lambda),
        ThresholdKind::Hard,
        include_diagonal,
    )
}

/// Checks the options' numeric parameters.
pub fn validate_options(options: &EstimateOptions) -> Result<(), EstimateError> {
    for (name, value) in options.rule.parameters() {
        if !(value.is_finite() && value >= 0.0) {
            return Err(EstimateError::ThresholdParameter { name, value });
        }
    }
    if !(options.psd_floor.is_finite() && options.psd_floor >= 0.0) {
        return Err(EstimateError::Parameter {
            name: "psd_floor",
            value: options.psd_floor,
            requirement: "a finite number ≥ 0",
        });
    }
    Ok(())
}

/// Runs the whole estimator on a collection's accumulators: average, threshold by
/// `options.rule`, project onto `{A ⪰ psd_floor·I}` unless skipped.
///
/// Refuses below the collection's minimum number of reports and on invalid options.
pub fn estimate(
    collection: &Collection,
    acc: &Accumulator,
    options: &EstimateOptions,
) -> Result<CovarianceEstimate, EstimateError> {
    let n = acc.count;
    if n < collection.min_reports {
        return Err(EstimateError::BelowMinimum {
            have: n,
            need: collection.min_reports,
        });
    }
    validate_options(options)?;
    if acc.entries() != collection.entries {
        return Err(EstimateError::SumLength {
            expected: collection.entries,
            got: acc.entries(),
        });
    }
    let mut matrix = average(collection, &acc.sums(), n)?;
    let entry_noise_sd = collection.mean_entry_noise_sd(n.max(1));
    let resolved = crate::threshold::resolve(&options.rule, options.kind, collection, acc);
    crate::threshold::shrink_diagonal(&mut matrix, resolved.diagonal_shrinkage);
    resolved.structure.apply(&mut matrix);
    let surviving_entries = crate::threshold::apply_threshold(
        &mut matrix,
        &resolved.thresholds,
        resolved.kind,
        resolved.include_diagonal,
    );
    let (matrix, clamped_eigenvalues) = if options.skip_psd_projection {
        (matrix, 0)
    } else {
        project_psd_floor(&matrix, options.psd_floor)?
    };
    Ok(CovarianceEstimate {
        matrix,
        reports: n,
        entry_noise_sd,
        threshold: resolved.thresholds.summary(collection.dim),
        rule: resolved.name,
        kind: resolved.kind,
        surviving_entries,
        clamped_eigenvalues,
        psd_projected: !options.skip_psd_projection,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(dim: u32, min_reports: u64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "t".into(),
            dim,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 2.0,
            min_reports,
            encoding: 0,
        })
        .unwrap()
    }

    #[test]
    fn average_rescales_by_r_squared_over_n_and_grid() {
        let c = collection(2, 1);
        let g = c.grid_scale() as i64;
        // Two reports summing to [[1, 0.5], [0.5, 0.25]] in unit-ball units (×2 reports).
        let sums = [2 * g, g, g / 2];
        let m = average(&c, &sums, 2).unwrap();
        // R² = 4, divided by n = 2: entries ×2 of the per-report mean.
        assert_eq!(m[(0, 0)], 4.0);
        assert_eq!(m[(0, 1)], 2.0);
        assert_eq!(m[(1, 0)], 2.0);
        assert_eq!(m[(1, 1)], 1.0);
        assert!(average(&c, &sums[..2], 2).is_err());
    }

    #[test]
    fn hard_threshold_keeps_diagonal_unless_asked() {
        let mut m =
            DMatrix::from_row_slice(3, 3, &[0.1, 0.5, -0.2, 0.5, 2.0, 0.05, -0.2, 0.05, 0.3]);
        let kept = hard_threshold(&mut m.clone(), 0.25, false);
        assert_eq!(kept, 4); // 3 diagonal + (0,1)
        let kept = hard_threshold(&mut m, 0.25, true);
        assert_eq!(kept, 3); // (0,1), (1,1), (2,2)
        assert_eq!(m[(0, 0)], 0.0);
        assert_eq!(m[(2, 0)], 0.0);
        assert_eq!(m[(1, 0)], 0.5);
    }

    #[test]
    fn universal_threshold_formula() {
        let u = UniversalThreshold {
            gamma: 2.0,
            c: 4.0,
            threshold_diagonal: false,
        };
        let lam = universal_threshold(&u, 100, 10_000, 0.01);
        let want = 2.0 * (100f64.ln() / 1e4).sqrt() + 4.0 * 0.01 * 100f64.ln().sqrt();
        assert!((lam - want).abs() < 1e-15);
    }

    #[test]
    fn psd_projection_clamps_negative_eigenvalues() {
        // Eigenvalues 3 and -1 of [[1, 2], [2, 1]]; projection is 1.5·[[1,1],[1,1]].
        let m = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let (out, clamped) = project_psd(&m).unwrap();
        assert_eq!(clamped, 1);
        for v in out.iter() {
            assert!((v - 1.5).abs() < 1e-12, "{out}");
        }
        // Already PSD: unchanged.
        let pd = DMatrix::from_row_slice(2, 2, &[2.0, 1.0, 1.0, 2.0]);
        assert_eq!(project_psd(&pd).unwrap(), (pd, 0));
    }

    #[test]
    fn psd_floor_raises_small_eigenvalues_to_the_floor() {
        // [[1, 2], [2, 1]] has eigenvalues 3 and −1 with eigenvectors (1, ±1)/√2.
        // Floor 0.5: 3·vvᵀ + 0.5·wwᵀ = [[1.75, 1.25], [1.25, 1.75]].
        let m = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let (out, clamped) = project_psd_floor(&m, 0.5).unwrap();
        assert_eq!(clamped, 1);
        let want = DMatrix::from_row_slice(2, 2, &[1.75, 1.25, 1.25, 1.75]);
        assert!((&out - &want).abs().max() < 1e-12, "{out}");
        // A PSD input with an eigenvalue below the floor is changed too: diag(2, 0.1).
        let d = DMatrix::from_row_slice(2, 2, &[2.0, 0.0, 0.0, 0.1]);
        let (out, clamped) = project_psd_floor(&d, 0.25).unwrap();
        assert_eq!(clamped, 1);
        assert!((out[(1, 1)] - 0.25).abs() < 1e-12 && (out[(0, 0)] - 2.0).abs() < 1e-12);
        // Through estimate(): a negative floor is INVALID_ARGUMENT material.
        let c = collection(2, 1);
        let mut acc = Accumulator::new(3, 5);
        acc.add(0, &[1, 2, 3]);
        let bad = EstimateOptions {
            psd_floor: -1.0,
            ..Default::default()
        };
        assert!(matches!(
            estimate(&c, &acc, &bad),
            Err(EstimateError::Parameter {
                name: "psd_floor",
                ..
            })
        ));
    }

    #[test]
    fn projection_of_random_symmetric_matrix_is_psd_and_nearest() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let p = 40;
        let mut m = DMatrix::<f64>::zeros(p, p);
        for i in 0..p {
            for j in i..p {
                let v = rng.random_range(-1.0..1.0);
                m[(i, j)] = v;
                m[(j, i)] = v;
            }
        }
        let (out, clamped) = project_psd(&m).unwrap();
        assert!(clamped > 0);
        assert_eq!(out, out.transpose());
        let eig = out.clone().symmetric_eigen();
        let min = eig
            .eigenvalues
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        assert!(min >= -1e-9 * out.norm(), "min eigenvalue {min}");
        // Nearest: M − P(M) is negative semi-definite and orthogonal to P(M).
        let diff = &m - &out;
        let max_diff = diff
            .clone()
            .symmetric_eigen()
            .eigenvalues
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(max_diff <= 1e-9);
        assert!(diff.dot(&out).abs() <= 1e-9 * m.norm_squared());
    }

    #[test]
    fn estimate_refuses_below_minimum_and_validates_rule() {
        let c = collection(3, 5);
        let mut acc = Accumulator::new(6, 2);
        for _ in 0..4 {
            acc.add(0, &[0; 6]);
        }
        assert_eq!(
            estimate(&c, &acc, &EstimateOptions::default()),
            Err(EstimateError::BelowMinimum { have: 4, need: 5 })
        );
        let bad = EstimateOptions {
            rule: ThresholdRule::Universal(UniversalThreshold {
                gamma: f64::NAN,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            {
                acc.add(1, &[0; 6]);
                estimate(&c, &acc, &bad)
            },
            Err(EstimateError::ThresholdParameter { name: "gamma", .. })
        ));
    }
}
