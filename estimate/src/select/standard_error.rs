//! The one-standard-error rules the selection decides by: within a family, the
//! simplest candidate within one standard error of the best
//! ([`within_one_standard_error`]); between families, a challenger replaces the
//! incumbent only when it earns its place by one standard error of the paired
//! differences ([`earns_its_place`]).

/// Whether a candidate with fold-wise losses `candidate` is within one standard error
/// of the best, `best` (same folds): its mean loss exceeds the best's by at most the
/// standard error of the best's mean loss across the folds (sd of its fold losses over
/// √K). This is the within-family one-standard-error rule of Breiman et al. (1984) as
/// `glmnet`'s `lambda.1se` applies it; the paired standard error of [`earns_its_place`]
/// would be too narrow here: two thresholds that differ in a few entries have nearly
/// equal fold-wise losses, so their paired differences vary little across folds that
/// share 3/4 of their training reports, and a chance advantage of the less simple one
/// would look significant.
pub(crate) fn within_one_standard_error(candidate: &[f64], best: &[f64]) -> bool {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let k = best.len() as f64;
    if best.len() < 2 {
        return mean(candidate) <= mean(best);
    }
    let m = mean(best);
    let se = (best.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (k - 1.0) / k).sqrt();
    mean(candidate) - m <= se
}

/// The mean of the paired differences `a − b` and its standard error (infinite with
/// fewer than two pairs).
fn paired_difference(a: &[f64], b: &[f64]) -> (f64, f64) {
    let diff: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let k = diff.len() as f64;
    let mean = diff.iter().sum::<f64>() / k.max(1.0);
    if diff.len() < 2 {
        return (mean, f64::INFINITY);
    }
    let se = (diff.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0) / k).sqrt();
    (mean, se)
}

/// The one-standard-error rule between the families: whether a candidate with
/// fold-wise losses `challenger` replaces the choice so far with losses `incumbent`
/// (same folds, same order). True only when the mean paired difference plus one
/// standard error of it is below zero. Structures assume an order of the variables
/// that the data may not have, and with many candidates the smallest mean loss alone
/// over-selects them by chance; the same guard keeps a spectral estimate from
/// replacing a threshold that is as good.
pub(crate) fn earns_its_place(challenger: &[f64], incumbent: &[f64]) -> bool {
    let (mean, se) = paired_difference(challenger, incumbent);
    mean + se < 0.0
}
