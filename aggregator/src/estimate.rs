//! From exact integer sums to a released covariance estimate: average, rescale,
//! threshold, project onto the PSD cone.
//!
//! Everything here is post-processing of the noisy sums, so none of it costs privacy.
//! The module knows nothing about gRPC or storage.

use crate::accumulator::Accumulator;
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

/// Seed 000's universal threshold `λ = γ·√(log p / n) + c·σ_n·√(log p)`, with
/// `σ_n = R²σ/√n` the noise sd of one averaged entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UniversalThreshold {
    /// γ, the sub-Gaussian constant of the data (0 leaves only the noise term).
    pub gamma: f64,
    /// c, the multiple of the noise level (the paper uses 4).
    pub c: f64,
    /// Threshold the diagonal too, as the paper prints; by default it is exempt.
    pub threshold_diagonal: bool,
}

impl Default for UniversalThreshold {
    fn default() -> Self {
        UniversalThreshold {
            gamma: 0.0,
            c: 4.0,
            threshold_diagonal: false,
        }
    }
}

/// Which entries of the average are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdRule {
    /// Keep every entry.
    None,
    /// Seed 000's universal hard threshold.
    Universal(UniversalThreshold),
}

/// The default is no threshold: seed 000's universal rule at c = 4 zeroes true
/// entries whenever `4σ_n√(log p)` exceeds them, which at moderate n is most of them
/// (loadgen defaults: relative spectral error 0.71 with it, 0.19 without).
impl Default for ThresholdRule {
    fn default() -> Self {
        ThresholdRule::None
    }
}

impl ThresholdRule {
    /// A short name for logs and the estimate message.
    pub fn name(&self) -> String {
        match self {
            ThresholdRule::None => "none".to_string(),
            ThresholdRule::Universal(u) => format!(
                "universal(gamma={}, c={}, diagonal={})",
                u.gamma,
                u.c,
                if u.threshold_diagonal {
                    "thresholded"
                } else {
                    "exempt"
                }
            ),
        }
    }
}

/// What to compute from the sums.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EstimateOptions {
    /// The threshold rule.
    pub rule: ThresholdRule,
    /// Skip the PSD projection (return the thresholded average as is).
    pub skip_psd_projection: bool,
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
    /// Threshold applied (0 when none), data units.
    pub threshold: f64,
    /// Name of the rule.
    pub rule: String,
    /// Packed upper-triangle entries that are non-zero after thresholding.
    pub surviving_entries: u64,
    /// Eigenvalues raised to 0 by the projection.
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

/// The value of the universal threshold for dimension `p`, `n` reports and averaged
/// entry noise sd `entry_noise_sd`.
pub fn universal_threshold(
    rule: &UniversalThreshold,
    p: usize,
    n: u64,
    entry_noise_sd: f64,
) -> f64 {
    let log_p = (p as f64).ln();
    rule.gamma * (log_p / n.max(1) as f64).sqrt() + rule.c * entry_noise_sd * log_p.sqrt()
}

/// Sets to zero every entry with `|m_ij| ≤ λ` (the diagonal only if
/// `include_diagonal`). Returns the number of packed entries left non-zero.
pub fn hard_threshold(m: &mut DMatrix<f64>, lambda: f64, include_diagonal: bool) -> u64 {
    let p = m.nrows();
    let mut surviving = 0;
    for (i, j) in triangle_pairs(p) {
        if (i != j || include_diagonal) && m[(i, j)].abs() <= lambda {
            m[(i, j)] = 0.0;
            m[(j, i)] = 0.0;
        }
        if m[(i, j)] != 0.0 {
            surviving += 1;
        }
    }
    surviving
}

/// Projects a symmetric matrix onto the PSD cone in Frobenius norm: eigendecompose
/// (faer's self-adjoint solver) and raise negative eigenvalues to 0. Returns the
/// projection and how many eigenvalues were clamped. A PSD input is returned as is.
pub fn project_psd(m: &DMatrix<f64>) -> Result<(DMatrix<f64>, u32), EstimateError> {
    let p = m.nrows();
    let a = faer::Mat::<f64>::from_fn(p, p, |i, j| m[(i, j)]);
    let eig = a
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|_| EstimateError::Eigen)?;
    let values: Vec<f64> = eig.S().column_vector().iter().copied().collect();
    let clamped = values.iter().filter(|&&l| l < 0.0).count() as u32;
    if clamped == 0 {
        return Ok((m.clone(), 0));
    }
    let u = eig.U();
    // U·diag(max(λ, 0))·Uᵀ, as (U·diag)·Uᵀ.
    let scaled = faer::Mat::<f64>::from_fn(p, p, |i, j| u[(i, j)] * values[j].max(0.0));
    let projected = &scaled * u.transpose();
    // Symmetrise exactly: the product is symmetric only up to rounding.
    let out = DMatrix::from_fn(p, p, |i, j| 0.5 * (projected[(i, j)] + projected[(j, i)]));
    Ok((out, clamped))
}

/// Runs the whole estimator on a collection's accumulators.
///
/// Refuses below the collection's minimum number of reports.
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
    let mut matrix = average(collection, &acc.sums(), n)?;
    let entry_noise_sd = collection.mean_entry_noise_sd(n);
    let (threshold, include_diagonal) = match &options.rule {
        ThresholdRule::None => (0.0, false),
        ThresholdRule::Universal(u) => {
            for (name, value) in [("gamma", u.gamma), ("c", u.c)] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(EstimateError::ThresholdParameter { name, value });
                }
            }
            (
                universal_threshold(u, collection.dim, n, entry_noise_sd),
                u.threshold_diagonal,
            )
        }
    };
    let surviving_entries = if threshold > 0.0 {
        hard_threshold(&mut matrix, threshold, include_diagonal)
    } else {
        triangle_pairs(collection.dim)
            .filter(|&(i, j)| matrix[(i, j)] != 0.0)
            .count() as u64
    };
    let (matrix, clamped_eigenvalues) = if options.skip_psd_projection {
        (matrix, 0)
    } else {
        project_psd(&matrix)?
    };
    Ok(CovarianceEstimate {
        matrix,
        reports: n,
        entry_noise_sd,
        threshold,
        rule: options.rule.name(),
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
            skip_psd_projection: false,
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
