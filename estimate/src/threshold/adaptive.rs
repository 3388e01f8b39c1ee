//! The entry-adaptive threshold's ingredients: per-entry variances across reports from
//! the sums of squares, and Cai & Liu's `λ_ij` from them.

use super::Thresholds;
use crate::accumulator::Accumulator;
use crate::input::EstimationInput;
use crate::moments::unit_blocks;
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_privacy::mechanism::NoiseModel;

/// Per-entry variance across reports in data units, packed: one per entry of the
/// second-moment block (a mean-and-covariance report's mean block is skipped). All
/// zeros when there are no reports.
///
/// From the sums of squares, `θ̂_ij = R⁴/2^{2k}·(Σv²/n − (Σv/n)²)/d²` (clamped at 0
/// against rounding; `d` the entry's unbiasing divisor: 1, √2 or κ), except for the
/// off-diagonal entries of a rank-one collection: their sums of squares are not kept
/// (a second p × p product per batch would double the ingest's cost,
/// `accumulator/outer.rs`), and their variance is the mechanism's closed form
/// ([`NoiseModel::off_diagonal_population_variance`]) at the estimated second moments,
/// `R⁴·v(m̂_ii, m̂_jj, m̂_ij)/κ²`. The noise dominates that variance at every ε (its
/// floor is `1/κ²`); the closed form carries it exactly, where the sums of squares
/// would carry it with their own sampling error.
///
/// For a mean-and-covariance collection this is the variance of the reported
/// `uᵢuⱼ` (noise included), not of `(uᵢ − μᵢ)(uⱼ − μⱼ)`: the noise dominates both at
/// the noise levels of local privacy, and the sums of squares of the centred products
/// are not observable.
pub fn entry_variances(input: &EstimationInput, acc: &Accumulator) -> Vec<f64> {
    entry_variances_of_sums(input, acc, &acc.sums())
}

/// [`entry_variances`] with the sums over all folds, `sums`, already computed.
pub(crate) fn entry_variances_of_sums(
    input: &EstimationInput,
    acc: &Accumulator,
    sums: &[i64],
) -> Vec<f64> {
    let n = acc.count;
    let skip = input.mean_entries();
    if n == 0 {
        return vec![0.0; acc.entries().saturating_sub(skip)];
    }
    let r2 = input.clip_radius() * input.clip_radius();
    let g = input.grid_scale();
    let scale = r2 * r2 / (g * g);
    let unbias = input.unbiasing();
    // An unbiased entry is the summed entry over its divisor (√2 off the diagonal of
    // an svec report, κ for a rank-one report): its variance over the divisor squared.
    let diagonal = scale / (unbias.diagonal_divisor * unbias.diagonal_divisor);
    let off_diagonal = scale / (unbias.off_diagonal_divisor * unbias.off_diagonal_divisor);
    let nf = n as f64;
    let noise = input.noise();
    // A rank-one collection's unbiased second moments (unit-ball units) and their
    // diagonal: what the closed form reads.
    let moments = matches!(noise, NoiseModel::RankOne { .. }).then(|| {
        let second = unit_blocks(input, sums, n).1;
        let diagonal: Vec<f64> = triangle_pairs(input.dim())
            .zip(&second)
            .filter(|((i, j), _)| i == j)
            .map(|(_, &m)| m)
            .collect();
        (second, diagonal)
    });
    let model_scale = r2 * r2 / (unbias.off_diagonal_divisor * unbias.off_diagonal_divisor);
    sums.iter()
        .zip(&acc.sum_squares)
        .skip(skip)
        .zip(triangle_pairs(input.dim()))
        .enumerate()
        .map(|(k, ((&s, &q), (i, j)))| {
            if i != j
                && let Some((m, d)) = &moments
                && let Some(v) = noise.off_diagonal_population_variance(d[i], d[j], m[k])
            {
                return model_scale * v;
            }
            let mean = s as f64 / nf;
            let factor = if i == j { diagonal } else { off_diagonal };
            factor * (q as f64 / nf - mean * mean).max(0.0)
        })
        .collect()
}

/// Whether the accumulators carry sums of squares (all zero means they were not kept,
/// e.g. a simulation that only fills fold sums).
pub(crate) fn has_sum_squares(acc: &Accumulator) -> bool {
    acc.sum_squares.iter().any(|&q| q != 0)
}

/// Cai & Liu's `λ_ij = η·√(θ̂_ij·log p / n)` from per-entry variances at n reports.
pub(crate) fn adaptive_thresholds(variances: &[f64], p: usize, n: u64, eta: f64) -> Thresholds {
    let factor = (p as f64).ln() / n.max(1) as f64;
    Thresholds::PerEntry(
        variances
            .iter()
            .map(|&v| eta * (v * factor).sqrt())
            .collect(),
    )
}
