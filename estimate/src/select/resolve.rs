//! Resolving a rule on the full average into what is applied to it: the fixed rules'
//! thresholds, or the choice of the cross-validation (or of its refit-free SURE
//! selection above `CrossValidation::refit_free_above_dim`).

use super::candidates::{Candidate, candidate_kind, candidate_structure, candidate_thresholds};
use super::cv::cross_validate;
use super::rules::{BulkShrinkage, RegularisationRule, ldp_noise_threshold, universal_threshold};
use super::settings::CrossValidation;
use super::sure::{SURE_KIND, SureChoice, refit_free_top_limit, sure_select};
use crate::full_average::FullAverage;
use crate::structure::Structure;
use crate::threshold::{ThresholdKind, Thresholds, adaptive_thresholds, noise_threshold};

/// What a rule applies to the full average: thresholds, kind, whether the diagonal
/// is thresholded, the diagonal shrinkage, and a name for the estimate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    /// The thresholds.
    pub thresholds: Thresholds,
    /// Hard or soft.
    pub kind: ThresholdKind,
    /// Whether the diagonal is thresholded.
    pub include_diagonal: bool,
    /// Diagonal shrinkage weight β (0 for every rule but cross-validation).
    pub diagonal_shrinkage: f64,
    /// Banding or Toeplitz averaging applied before the threshold (unstructured for
    /// every rule but cross-validation).
    pub structure: Structure,
    /// A spectral rule applied instead of the threshold (the named spectral rules, or
    /// the cross-validation's spectral choice).
    pub spectral: Option<RegularisationRule>,
    /// The rule's name, with the cross-validation's choice.
    pub name: String,
    /// The cross-validation's stacked second release and its weight w: the estimate
    /// is `(1 − w)·this + w·that` ([`CrossValidation::stack_families`]).
    pub stacked: Option<(Box<Resolved>, f64)>,
    /// Release the zero matrix (the trivial candidate won:
    /// [`CrossValidation::trivial_candidates`]); everything above is then ignored.
    pub zero: bool,
    /// Multiply the release by this factor (1 for every rule but the refit-free
    /// selection's scaled identity, whose level it shrinks toward zero).
    pub scale: f64,
}

/// Resolves a rule on the full average (running the cross-validation if asked).
///
/// `kind` is used by the fixed rules; cross-validation uses the kind it chose.
pub(crate) fn resolve(
    rule: &RegularisationRule,
    kind: ThresholdKind,
    full: &FullAverage<'_>,
) -> Resolved {
    let input = full.input();
    let n = full.reports();
    let p = input.dim();
    let diag = rule.threshold_diagonal();
    let fixed = |thresholds: Thresholds| Resolved {
        thresholds,
        kind,
        include_diagonal: diag,
        diagonal_shrinkage: 0.0,
        structure: Structure::Unstructured,
        spectral: None,
        name: format!("{}, {}", rule.name(), kind.name()),
        stacked: None,
        zero: false,
        scale: 1.0,
    };
    match rule {
        // The spectral rules are not thresholds: `estimate` applies them to the average
        // this leaves unchanged.
        RegularisationRule::None => Resolved {
            name: rule.name(),
            ..fixed(Thresholds::Uniform(0.0))
        },
        RegularisationRule::Spectral(_)
        | RegularisationRule::Factor(_)
        | RegularisationRule::BulkShrink(_) => Resolved {
            name: rule.name(),
            spectral: Some(rule.clone()),
            ..fixed(Thresholds::Uniform(0.0))
        },
        RegularisationRule::Universal(u) => fixed(Thresholds::Uniform(universal_threshold(
            u,
            p,
            n,
            full.entry_noise_sd(),
        ))),
        RegularisationRule::LdpNoise(s) => {
            fixed(Thresholds::Uniform(ldp_noise_threshold(s, input, n)))
        }
        RegularisationRule::Adaptive(a) => {
            fixed(adaptive_thresholds(full.variances(), p, n, a.eta))
        }
        RegularisationRule::CrossValidated(cv) if p > cv.refit_free_above_dim => {
            match refit_free(full, cv) {
                Some(resolved) => Resolved {
                    include_diagonal: diag,
                    name: format!("{} → {}", rule.name(), resolved.name),
                    ..resolved
                },
                // The eigensolver failed: the cross-validation still works.
                None => resolve_cv(rule, cv, diag, full),
            }
        }
        RegularisationRule::CrossValidated(cv) => resolve_cv(rule, cv, diag, full),
    }
}

/// The refit-free choice of [`sure_select`] on the full average (None if the
/// eigensolver fails).
fn refit_free(full: &FullAverage<'_>, cv: &CrossValidation) -> Option<Resolved> {
    let n = full.reports();
    let selection = sure_select(full, cv).ok()?;
    let risk = selection.risk;
    // "…, off-diagonal signal z = 0.4[, top z = -1.3][, simplest within 1 SE]": the
    // signal tests (the second only when the first shows no signal), and whether the
    // rule without signal chose.
    let signal = format!(
        "off-diagonal signal z = {:.1}{}{}",
        selection.signal_z,
        selection.top_z.map_or(String::new(), |t| {
            format!(", top z = {t:.1} (limit {} here)", refit_free_top_limit(cv))
        }),
        if selection.signal {
            ""
        } else {
            ", simplest within 1 SE"
        }
    );
    let unthresholded = Resolved {
        thresholds: Thresholds::Uniform(0.0),
        kind: ThresholdKind::Hard,
        include_diagonal: false,
        diagonal_shrinkage: 0.0,
        structure: Structure::Unstructured,
        spectral: None,
        name: String::new(),
        stacked: None,
        zero: false,
        scale: 1.0,
    };
    Some(match selection.choice {
        SureChoice::Soft { c, beta } => Resolved {
            thresholds: Thresholds::Uniform(noise_threshold(full.input(), n, c)),
            kind: SURE_KIND,
            diagonal_shrinkage: beta,
            scale: selection.level_scale.unwrap_or(1.0),
            name: format!(
                "noise(c={c:.3}, soft), diagonal shrinkage {beta}{} (SURE {risk:.6e}, {signal}, refit-free above p = {})",
                selection.level_scale.map_or(String::new(), |a| format!(
                    ", the scaled identity's level × {a:.3} = (1 − 2τ²/m̂²)⁺"
                )),
                cv.refit_free_above_dim
            ),
            ..unthresholded
        },
        SureChoice::Zero => Resolved {
            // The scaled identity at its shrunk level: the diagonal alone (banding at
            // bandwidth 0), pooled, times the factor.
            structure: Structure::Banded { bandwidth: 0 },
            diagonal_shrinkage: 1.0,
            scale: selection.level_scale.unwrap_or(0.0),
            name: format!(
                "scaled identity, level × {:.3} = (1 − 2τ²/m̂²)⁺ (the zero matrix's SURE {risk:.6e}: {} did not beat it by one standard error; {signal}, refit-free above p = {})",
                selection.level_scale.unwrap_or(0.0),
                match selection.replaced {
                    Some(SureChoice::Soft { c, beta }) =>
                        format!("noise(c={c:.3}, soft), diagonal shrinkage {beta}"),
                    Some(SureChoice::Bulk { .. }) => "bulk-shrink".to_string(),
                    _ => "the choice".to_string(),
                },
                cv.refit_free_above_dim
            ),
            ..unthresholded
        },
        SureChoice::Bulk { alpha, tau } => Resolved {
            spectral: Some(RegularisationRule::BulkShrink(BulkShrinkage {
                alphas: vec![alpha],
                taus: vec![tau],
            })),
            name: format!(
                "bulk-shrink (SURE {risk:.6e}, {signal}, refit-free above p = {})",
                cv.refit_free_above_dim
            ),
            ..unthresholded
        },
    })
}

/// The K-fold cross-validation's choice.
fn resolve_cv(
    rule: &RegularisationRule,
    cv: &CrossValidation,
    diag: bool,
    full: &FullAverage<'_>,
) -> Resolved {
    let n = full.reports();
    match cross_validate(full, cv) {
        None => Resolved {
            thresholds: Thresholds::Uniform(0.0),
            kind: ThresholdKind::Hard,
            include_diagonal: false,
            diagonal_shrinkage: 0.0,
            structure: Structure::Unstructured,
            spectral: None,
            name: format!("{} → none (fewer than 2 usable folds)", rule.name()),
            stacked: None,
            zero: false,
            scale: 1.0,
        },
        Some(outcome) => {
            let candidate = |c: Candidate, beta: f64, name: String| {
                let variances = match c {
                    Candidate::Adaptive { .. } => full.variances(),
                    _ => &[],
                };
                Resolved {
                    thresholds: candidate_thresholds(&c, full.input(), variances, n),
                    kind: candidate_kind(&c),
                    include_diagonal: diag,
                    diagonal_shrinkage: beta,
                    structure: candidate_structure(&c),
                    spectral: match c {
                        Candidate::Spectral(s) => Some(s.into()),
                        _ => None,
                    },
                    name,
                    stacked: None,
                    zero: c == Candidate::Zero,
                    scale: 1.0,
                }
            };
            let name = format!(
                "{} → {}, diagonal shrinkage {} ({} folds, off-diagonal signal z = {:.1}, top z = {:.1}{}{})",
                rule.name(),
                outcome.chosen.name(),
                outcome.diagonal_shrinkage,
                outcome.folds_used,
                outcome.off_diagonal_signal_z,
                outcome.off_diagonal_top_z,
                if outcome.simplest_within_one_standard_error {
                    ", simplest within 1 SE"
                } else {
                    ""
                },
                if outcome.spectral_guard_refused.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", spectral-norm guard refused {}",
                        outcome.spectral_guard_refused.join("; ")
                    )
                }
            );
            Resolved {
                stacked: outcome.stacked.map(|s| {
                    let name = format!(
                        "{}, diagonal shrinkage {}",
                        s.candidate.name(),
                        s.diagonal_shrinkage
                    );
                    (
                        Box::new(candidate(s.candidate, s.diagonal_shrinkage, name)),
                        s.weight,
                    )
                }),
                ..candidate(outcome.chosen, outcome.diagonal_shrinkage, name)
            }
        }
    }
}
