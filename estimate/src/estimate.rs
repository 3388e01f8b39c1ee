//! From exact integer sums to a released covariance estimate: average, rescale (for
//! a mean-and-covariance collection, form Σ̂ = M̂ − μ̂μ̂ᵀ + τ²I: the `moments` module),
//! regularise (the rule the `select` module resolves, applied with the operators of
//! the `threshold`, `structure` and `spectral` modules), project onto the PSD cone
//! (clamping eigenvalues at 0, or at a floor ε_floor > 0 for an invertible result).
//! The full average is computed once per request ([`FullAverage`]) and handed down.
//!
//! Everything here is post-processing of the noisy sums, so none of it costs privacy.
//! The module knows nothing about gRPC or storage.

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::full_average::FullAverage;
use crate::input::EstimationInput;
use crate::moments::{MomentsEstimate, check_sums, packed_covariance};
use crate::packed::packed_to_matrix;
use crate::psd::project_psd_floor;
use crate::select::{RegularisationRule, Resolved, resolve};
use crate::spectral::{self, RankRule, Shrinker, SpectralOptions};
use crate::threshold::{ThresholdKind, apply_threshold, shrink_diagonal};
use ldpcov_privacy::layout::triangle_pairs;
use nalgebra::DMatrix;

/// What to compute from the sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EstimateOptions {
    /// The threshold rule (default: cross-validation).
    pub rule: RegularisationRule,
    /// Hard or soft thresholding for the fixed rules (cross-validation chooses its own
    /// among [`CrossValidation::kinds`](crate::CrossValidation::kinds)).
    pub kind: ThresholdKind,
    /// Skip the PSD projection (return the thresholded average as is).
    pub skip_psd_projection: bool,
    /// Eigenvalue floor of the projection: 0 projects onto the PSD cone (as Wang & Xu do),
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
    /// The unregularised moments of the full average (for a mean-and-covariance
    /// collection: the mean, its noise sd, the raw second moment; see
    /// [`MomentsEstimate`]).
    pub moments: MomentsEstimate,
}

/// The matrix the estimators act on, symmetric, in data units, from the grid-unit
/// sums of `n` reports: the average `S̃ = (R²/n)·Σ report` for a second-moment
/// collection; for a mean-and-covariance collection the de-biased covariance
/// `R²·(M̂ − μ̂μ̂ᵀ + τ²I)` of its two blocks (see [`MomentsEstimate`](crate::MomentsEstimate)).
pub fn average(
    input: &EstimationInput,
    sums: &[i64],
    n: u64,
) -> Result<DMatrix<f64>, EstimateError> {
    check_sums(input, sums)?;
    Ok(packed_to_matrix(
        input.dim(),
        &packed_covariance(input, sums, n),
    ))
}

/// Largest `psd_floor` an estimate may ask for: the square of the largest clip radius
/// ([`ldpcov_privacy::limits::MAX_CLIP_RADIUS`]), the scale of the largest covariance a
/// collection can hold. A floor beyond it lifts every eigenvalue past anything the data
/// can say, and at 1e308 the projected matrix holds `inf`.
pub const MAX_PSD_FLOOR: f64 = 1e200;

/// Checks the options' numeric parameters.
pub fn validate_options(options: &EstimateOptions) -> Result<(), EstimateError> {
    for (name, value) in options.rule.parameters() {
        if !(value.is_finite() && value >= 0.0) {
            return Err(EstimateError::ThresholdParameter { name, value });
        }
    }
    if !(0.0..=MAX_PSD_FLOOR).contains(&options.psd_floor) {
        return Err(EstimateError::Parameter {
            name: "psd_floor",
            value: options.psd_floor,
            requirement: "a number in [0, 1e200]",
        });
    }
    Ok(())
}

/// Runs the whole estimator on a collection's accumulators: average (for a
/// mean-and-covariance collection, the de-biased covariance of [`average`]),
/// threshold by `options.rule`, project onto `{A ⪰ psd_floor·I}` unless skipped.
///
/// Refuses below the collection's minimum number of reports and on invalid options.
pub fn estimate(
    input: &EstimationInput,
    acc: &Accumulator,
    options: &EstimateOptions,
) -> Result<CovarianceEstimate, EstimateError> {
    let n = acc.count;
    if n < input.min_reports() {
        return Err(EstimateError::BelowMinimum {
            have: n,
            need: input.min_reports(),
        });
    }
    validate_options(options)?;
    if acc.entries() != input.entries() {
        return Err(EstimateError::SumLength {
            expected: input.entries(),
            got: acc.entries(),
        });
    }
    let full = FullAverage::new(input, acc)?;
    let average = full.matrix();
    let entry_noise_sd = full.entry_noise_sd();
    let spectral_noise_sd = full.spectral_noise_sd();
    let resolved = resolve(&options.rule, options.kind, &full);
    let (mut matrix, mut surviving_entries, chosen) =
        apply_resolved(&resolved, average, spectral_noise_sd)?;
    let mut name = if options.rule.is_spectral() {
        resolved
            .spectral
            .as_ref()
            .map_or_else(|| resolved.name.clone(), |rule| rule.name())
    } else {
        // The cross-validation's name already says which candidate it chose.
        resolved.name.clone()
    } + &chosen;
    if let Some((other, weight)) = &resolved.stacked {
        // Each part as the folds scored it (a threshold's estimate PSD-projected), so
        // the convex combination is PSD before the final projection's floor.
        let (other_matrix, _, other_chosen) = apply_resolved(other, average, spectral_noise_sd)?;
        let as_scored = |m: DMatrix<f64>, part: &Resolved| -> Result<_, EstimateError> {
            Ok(if part.spectral.is_none() {
                project_psd_floor(&m, 0.0)?.0
            } else {
                m
            })
        };
        matrix = as_scored(matrix, &resolved)? * (1.0 - weight)
            + as_scored(other_matrix, other)? * *weight;
        surviving_entries = nonzero_packed(&matrix);
        name = format!(
            "{name}; stacked with weight {weight:.3}: {}{other_chosen}",
            other.name
        );
    }
    let (matrix, clamped_eigenvalues) = if options.skip_psd_projection {
        (matrix, 0)
    } else {
        project_psd_floor(&matrix, options.psd_floor)?
    };
    Ok(CovarianceEstimate {
        matrix,
        reports: n,
        entry_noise_sd,
        threshold: resolved.thresholds.summary(input.dim()),
        rule: name,
        kind: resolved.kind,
        surviving_entries,
        clamped_eigenvalues,
        psd_projected: !options.skip_psd_projection,
        moments: full.into_moments(),
    })
}

/// Applies one resolved release to the average `y` (entry noise sd `sigma_n`):
/// diagonal shrinkage, structure, then the spectral rule or the threshold. Returns the
/// matrix (not yet PSD-projected), its non-zero packed entries and what a spectral
/// rule chose, as a suffix for the rule's name.
fn apply_resolved(
    resolved: &Resolved,
    y: &DMatrix<f64>,
    sigma_n: f64,
) -> Result<(DMatrix<f64>, u64, String), EstimateError> {
    if resolved.zero {
        return Ok((DMatrix::zeros(y.nrows(), y.ncols()), 0, String::new()));
    }
    let mut matrix = y.clone();
    shrink_diagonal(&mut matrix, resolved.diagonal_shrinkage);
    resolved.structure.apply(&mut matrix);
    if let Some(rule) = &resolved.spectral {
        let (spectral, chosen) = apply_spectral(rule, &matrix, sigma_n)?;
        let surviving = nonzero_packed(&spectral);
        return Ok((spectral, surviving, chosen));
    }
    let mut surviving = apply_threshold(
        &mut matrix,
        &resolved.thresholds,
        resolved.kind,
        resolved.include_diagonal,
    );
    if resolved.scale != 1.0 {
        matrix *= resolved.scale;
        if resolved.scale == 0.0 {
            surviving = 0;
        }
    }
    Ok((matrix, surviving, String::new()))
}

/// Applies a spectral rule to the average `y` (entry noise sd `sigma_n`): the estimate
/// and what it chose (rank, spikes' bulk level, SURE's α) as a suffix for the rule's
/// name. The identity for a non-spectral rule.
fn apply_spectral(
    rule: &RegularisationRule,
    y: &DMatrix<f64>,
    sigma_n: f64,
) -> Result<(DMatrix<f64>, String), EstimateError> {
    let rank_rule = |rank: Option<usize>| rank.map_or_else(RankRule::default, RankRule::Fixed);
    let (estimate, chosen) = match rule {
        RegularisationRule::Spectral(s) => {
            let options = SpectralOptions {
                rank: rank_rule(s.rank),
                shrinker: s.shrinker,
            };
            (spectral::shrink(y, sigma_n, &options)?, String::new())
        }
        RegularisationRule::Factor(f) => {
            let options = SpectralOptions {
                rank: rank_rule(f.rank),
                shrinker: Shrinker::default(),
            };
            (spectral::factor(y, sigma_n, &options)?, String::new())
        }
        RegularisationRule::BulkShrink(b) => {
            let (choice, estimate) = spectral::bulk_shrink_sure(y, sigma_n, &b.alphas, &b.taus)?;
            let spectral::BulkChoice { alpha, tau, risk } = choice;
            (
                estimate,
                format!(", alpha {alpha}, tau {tau} (SURE {risk:.6e})"),
            )
        }
        _ => return Ok((y.clone(), String::new())),
    };
    let suffix = format!(
        " → rank {}, bulk level {:.6e}{chosen}",
        estimate.rank, estimate.bulk_level
    );
    Ok((estimate.matrix, suffix))
}

/// Packed upper-triangle entries of `m` that are non-zero.
fn nonzero_packed(m: &DMatrix<f64>) -> u64 {
    triangle_pairs(m.nrows())
        .filter(|&(i, j)| m[(i, j)] != 0.0)
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::UniversalThreshold;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(dim: u32, min_reports: u64) -> EstimationInput {
        EstimationInput::from_collection(&collection_spec(dim, min_reports))
    }

    fn collection_spec(dim: u32, min_reports: u64) -> ldpcov_privacy::Collection {
        ldpcov_privacy::Collection::from_spec(&CollectionSpec {
            collection_id: "t".into(),
            dim,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 2.0,
            min_reports,
            encoding: 0,
            ..Default::default()
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
    fn estimate_refuses_a_negative_psd_floor() {
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
    fn absurd_floors_rhos_and_lambdas_are_refused_with_their_range() {
        let floor = |psd_floor| {
            validate_options(&EstimateOptions {
                psd_floor,
                ..Default::default()
            })
        };
        assert_eq!(
            floor(1e308).unwrap_err().to_string(),
            "parameter psd_floor = 1e308 must be a number in [0, 1e200]"
        );
        floor(MAX_PSD_FLOOR).unwrap();
        let glasso = |rho| {
            crate::validate_glasso(
                0.1,
                &crate::GlassoOptions {
                    rho,
                    ..Default::default()
                },
            )
        };
        assert_eq!(
            glasso(1e300).unwrap_err().to_string(),
            "parameter rho = 1e300 must be a number in (0, 1e100]"
        );
        glasso(crate::MAX_GLASSO_RHO).unwrap();
        assert_eq!(
            crate::check_lambda(1e300).unwrap_err().to_string(),
            "parameter lambda = 1e300 must be a number in [0, 1e200]"
        );
    }

    #[test]
    fn spectral_rules_refuse_bad_parameters_and_report_their_choice() {
        use crate::select::{BulkShrinkage, FactorModel, SpectralShrinkage};
        let c = collection(3, 1);
        let g: i32 = 1 << 10;
        let mut acc = Accumulator::new(6, 2);
        acc.add(0, &[g, g / 2, 0, g, 0, g]);
        acc.add(1, &[g, 0, g / 4, g, 0, g]);
        let with = |rule| EstimateOptions {
            rule,
            ..Default::default()
        };
        // α outside [0, 1], τ outside [0, 2], an empty grid and a rank ≥ p are
        // parameter errors (INVALID_ARGUMENT).
        let bulk = |alphas: Vec<f64>, taus: Vec<f64>| {
            RegularisationRule::BulkShrink(BulkShrinkage { alphas, taus })
        };
        for rule in [
            bulk(vec![1.5], vec![2.0]),
            bulk(vec![-0.5], vec![2.0]),
            bulk(vec![0.5], vec![2.5]),
            bulk(vec![0.5], vec![-1.0]),
            bulk(vec![0.5], vec![]),
            bulk(vec![], vec![2.0]),
            RegularisationRule::Factor(FactorModel { rank: Some(3) }),
            RegularisationRule::Spectral(SpectralShrinkage {
                rank: Some(4),
                ..Default::default()
            }),
        ] {
            let name = rule.name();
            assert!(
                matches!(
                    estimate(&c, &acc, &with(rule)),
                    Err(EstimateError::ThresholdParameter { .. } | EstimateError::Parameter { .. })
                ),
                "{name}"
            );
        }
        let e = estimate(
            &c,
            &acc,
            &with(RegularisationRule::Factor(FactorModel { rank: Some(1) })),
        )
        .unwrap();
        assert!(e.rule.starts_with("factor(rank=1) → rank 1"), "{}", e.rule);
        let e = estimate(
            &c,
            &acc,
            &with(RegularisationRule::BulkShrink(BulkShrinkage::default())),
        )
        .unwrap();
        assert!(
            e.rule.contains(", alpha ") && e.rule.contains(", tau "),
            "{}",
            e.rule
        );
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
            rule: RegularisationRule::Universal(UniversalThreshold {
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
