//! Resolving a rule on the accumulators into what is applied to the full average.

use super::sure::{SURE_KIND, SureChoice, refit_free_top_limit, sure_select};
use super::{
    BulkShrinkage, Candidate, CrossValidation, ThresholdKind, ThresholdRule, Thresholds,
    adaptive_thresholds, candidate_kind, candidate_structure, candidate_thresholds, cross_validate,
    entry_variances, noise_threshold, seed001_threshold, universal_threshold,
};
use crate::accumulator::Accumulator;
use crate::estimate::average;
use crate::structure::Structure;
use ldpcov_proto::Collection;

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
    pub spectral: Option<ThresholdRule>,
    /// The rule's name, with the cross-validation's choice.
    pub name: String,
    /// The cross-validation's stacked second release and its weight w: the estimate
    /// is `(1 − w)·this + w·that` ([`CrossValidation::stack_families`]).
    pub stacked: Option<(Box<Resolved>, f64)>,
}

/// Resolves a rule on the accumulators (running the cross-validation if asked).
///
/// `kind` is used by the fixed rules; cross-validation uses the kind it chose.
pub(crate) fn resolve(
    rule: &ThresholdRule,
    kind: ThresholdKind,
    collection: &Collection,
    acc: &Accumulator,
) -> Resolved {
    let n = acc.count;
    let p = collection.dim();
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
    };
    match rule {
        // The spectral rules are not thresholds: `estimate` applies them to the average
        // this leaves unchanged.
        ThresholdRule::None => Resolved {
            name: rule.name(),
            ..fixed(Thresholds::Uniform(0.0))
        },
        ThresholdRule::Spectral(_) | ThresholdRule::Factor(_) | ThresholdRule::BulkShrink(_) => {
            Resolved {
                name: rule.name(),
                spectral: Some(rule.clone()),
                ..fixed(Thresholds::Uniform(0.0))
            }
        }
        ThresholdRule::Universal(u) => fixed(Thresholds::Uniform(universal_threshold(
            u,
            p,
            n,
            collection.mean_entry_noise_sd(n.max(1)),
        ))),
        ThresholdRule::Seed001(s) => {
            fixed(Thresholds::Uniform(seed001_threshold(s, collection, n)))
        }
        ThresholdRule::Adaptive(a) => fixed(adaptive_thresholds(
            &entry_variances(collection, acc),
            p,
            n,
            a.eta,
        )),
        ThresholdRule::CrossValidated(cv) if p > cv.refit_free_above_dim => {
            match refit_free(collection, acc, cv) {
                Some(resolved) => Resolved {
                    include_diagonal: diag,
                    name: format!("{} → {}", rule.name(), resolved.name),
                    ..resolved
                },
                // The eigensolver failed: the cross-validation still works.
                None => resolve_cv(rule, cv, diag, collection, acc),
            }
        }
        ThresholdRule::CrossValidated(cv) => resolve_cv(rule, cv, diag, collection, acc),
    }
}

/// The refit-free choice of [`sure_select`] on the full average (None if the
/// eigensolver fails).
fn refit_free(
    collection: &Collection,
    acc: &Accumulator,
    cv: &CrossValidation,
) -> Option<Resolved> {
    let n = acc.count;
    let y = average(collection, &acc.sums(), n).ok()?;
    let sigma_n = collection.mean_entry_noise_sd(n.max(1));
    let selection = sure_select(&y, sigma_n, cv).ok()?;
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
    };
    Some(match selection.choice {
        SureChoice::Soft { c, beta } => Resolved {
            thresholds: Thresholds::Uniform(noise_threshold(collection, n, c)),
            kind: SURE_KIND,
            diagonal_shrinkage: beta,
            name: format!(
                "noise(c={c:.3}, soft), diagonal shrinkage {beta} (SURE {risk:.6e}, {signal}, refit-free above p = {})",
                cv.refit_free_above_dim
            ),
            ..unthresholded
        },
        SureChoice::Bulk { alpha, tau } => Resolved {
            spectral: Some(ThresholdRule::BulkShrink(BulkShrinkage {
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
    rule: &ThresholdRule,
    cv: &CrossValidation,
    diag: bool,
    collection: &Collection,
    acc: &Accumulator,
) -> Resolved {
    let n = acc.count;
    match cross_validate(collection, acc, cv) {
        None => Resolved {
            thresholds: Thresholds::Uniform(0.0),
            kind: ThresholdKind::Hard,
            include_diagonal: false,
            diagonal_shrinkage: 0.0,
            structure: Structure::Unstructured,
            spectral: None,
            name: format!("{} → none (fewer than 2 usable folds)", rule.name()),
            stacked: None,
        },
        Some(outcome) => {
            let candidate = |c: Candidate, beta: f64, name: String| {
                let variances = match c {
                    Candidate::Adaptive { .. } => entry_variances(collection, acc),
                    _ => Vec::new(),
                };
                Resolved {
                    thresholds: candidate_thresholds(&c, collection, &variances, n),
                    kind: candidate_kind(&c),
                    include_diagonal: diag,
                    diagonal_shrinkage: beta,
                    structure: candidate_structure(&c),
                    spectral: match c {
                        Candidate::Spectral(s) => Some(s.rule()),
                        _ => None,
                    },
                    name,
                    stacked: None,
                }
            };
            let name = format!(
                "{} → {}, diagonal shrinkage {} ({} folds, off-diagonal signal z = {:.1}, top z = {:.1}{})",
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
