//! The tests on the full average that the selection's rules depend on: whether the
//! off-diagonal part shows signal (its energy, [`off_diagonal_signal_z`], and its top
//! eigenvalue, [`off_diagonal_top_z`]) and whether the variances differ (the spread of
//! the diagonal, [`diagonal_spread_z`]). Each is standardised under its null with
//! independent Gaussian entry noise of a known sd.

use crate::packed::packed_to_matrix;
use crate::psd::symmetric_eigen;
use ldpcov_privacy::layout::triangle_pairs;

/// The default of [`CrossValidation::threshold_one_standard_error_max_z`]: above this
/// [`off_diagonal_signal_z`] the data show off-diagonal signal and the
/// within-threshold one-standard-error rule is not applied (the smallest mean wins):
/// a one-sided test at about the 0.1 % level under the null of no off-diagonal
/// signal (docs/ALGORITHMS.md §3 has the reason and the measurement).
pub(crate) const OFF_DIAGONAL_SIGNAL_Z: f64 = 3.0;

/// The off-diagonal signal energy of a packed `p × p` average with independent
/// Gaussian entry noise of sd `sigma`, standardised under the null of no
/// off-diagonal signal: with `m = p(p − 1)/2` off-diagonal entries,
/// `z = (Σ_{i<j} y_ij² − m·σ²) / (√(2m)·σ²)`. Under the null `Σ y_ij²/σ²` is `χ²_m`
/// (mean m, variance 2m), so z has mean 0 and sd 1 (close to normal for m ≳ 30);
/// with off-diagonal truth s its mean is `Σ_{i<j} s_ij² / (√(2m)·σ²)`. 0 when there
/// is no off-diagonal entry or no noise to standardise by.
pub(crate) fn off_diagonal_signal_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    let m = (p * p.saturating_sub(1) / 2) as f64;
    let var = sigma * sigma;
    if m == 0.0 || var <= 0.0 || !var.is_finite() {
        return 0.0;
    }
    let energy: f64 = triangle_pairs(p)
        .zip(packed)
        .filter(|((i, j), _)| i != j)
        .map(|(_, v)| v * v)
        .sum();
    standardised_chi_square(energy / var, m)
}

/// The default of [`CrossValidation::off_diagonal_top_max_z`]: above this
/// [`off_diagonal_top_z`] the data show off-diagonal signal. It is the Tracy–Widom
/// (β = 1) distribution's 99 % quantile, 2.02, rounded; at finite p the statistic's null
/// quantiles are lower (docs/ALGORITHMS.md §3), so the test's level is at most about
/// 1 % at every p.
pub(crate) const OFF_DIAGONAL_TOP_Z: f64 = 2.0;

/// The largest eigenvalue of the off-diagonal part of a packed `p × p` average with
/// independent Gaussian entry noise of sd `sigma`, on the Tracy–Widom scale:
/// `t = (λ₁(Y − diag Y) − 2σ√p) / (σ·p^(−1/6))`. Without off-diagonal signal the
/// off-diagonal part is a Wigner matrix with a zero diagonal, whose top eigenvalue sits
/// at the edge `2σ√p` with fluctuations of order `σ·p^(−1/6)` (t tends to the
/// Tracy–Widom law as p grows); the diagonal, signal or noise, does not enter. A
/// low-rank signal `θuuᵀ` with a delocalised u and `θ > σ√p` lifts it to about
/// `θ + pσ²/θ` (`t ≈ p^(2/3)·(θ/σ√p + σ√p/θ − 2)`), so t sees a single strong
/// direction that the off-diagonal energy ([`off_diagonal_signal_z`]), spread over
/// `p(p − 1)/2` entries, misses at small p. 0 for p < 2, no noise to standardise by,
/// or an eigensolver failure.
pub(crate) fn off_diagonal_top_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    if p < 2 || !(sigma > 0.0 && sigma.is_finite()) {
        return 0.0;
    }
    let mut m = packed_to_matrix(p, packed);
    m.fill_diagonal(0.0);
    let Ok((values, _)) = symmetric_eigen(&m) else {
        return 0.0;
    };
    let top = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pf = p as f64;
    (top - 2.0 * sigma * pf.sqrt()) / (sigma * pf.powf(-1.0 / 6.0))
}

/// `(x − k)/√(2k)`: a `χ²_k` draw `x` standardised to mean 0 and sd 1.
fn standardised_chi_square(x: f64, k: f64) -> f64 {
    (x - k) / (2.0 * k).sqrt()
}

/// The spread of the diagonal of a packed `p × p` average with independent Gaussian
/// entry noise of sd `sigma`, standardised under the null of equal variances: with
/// `ȳ` the mean diagonal entry, `z = (Σ_i (y_ii − ȳ)² − (p − 1)·σ²) / (√(2(p − 1))·σ²)`.
/// Under the null `Σ_i (y_ii − ȳ)²/σ²` is `χ²_{p−1}` (mean p − 1, variance 2(p − 1)),
/// so z has mean 0 and sd 1; with variances `s_ii` its mean grows by
/// `Σ_i (s_ii − s̄)² / (√(2(p − 1))·σ²)`. 0 for p < 2 or no noise to standardise by.
pub(crate) fn diagonal_spread_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    let var = sigma * sigma;
    if p < 2 || var <= 0.0 || !var.is_finite() {
        return 0.0;
    }
    let diagonal: Vec<f64> = triangle_pairs(p)
        .zip(packed)
        .filter(|((i, j), _)| i == j)
        .map(|(_, v)| *v)
        .collect();
    let mean = diagonal.iter().sum::<f64>() / p as f64;
    let spread: f64 = diagonal.iter().map(|v| (v - mean) * (v - mean)).sum();
    standardised_chi_square(spread / var, (p - 1) as f64)
}

/// The largest [`diagonal_level_z`] at which the zero matrix is a candidate
/// ([`CrossValidation::trivial_candidates`](crate::CrossValidation::trivial_candidates)):
/// `1 + √3`, where the scaled identity stops losing to the zero matrix by one standard
/// error of the difference of their SUREs (the `sure` module's `beats_zero`: with
/// `u = m̂/τ`, `SURE(m̂·I) − SURE(0) = −p·m̂² + 2σ_d² = −σ_d²(u² − 2)` against a
/// standard error of `2σ_d²·|u|`, so the scaled identity wins once `u² − 2|u| − 2 > 0`).
/// Above it the full average tells the mean variance from zero at about the 0.3 % level
/// (one-sided), and the zero matrix is not weighed.
pub(crate) const ZERO_LEVEL_Z: f64 = 2.732_050_807_568_877;

/// The mean of the diagonal of a packed `p × p` average with diagonal noise sd `sigma`,
/// over its own noise sd `τ = σ/√p`: how many standard errors the mean variance stands
/// above zero. Infinite without noise (or for p = 0).
pub(crate) fn diagonal_level_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    if p == 0 || !(sigma > 0.0 && sigma.is_finite()) {
        return f64::INFINITY;
    }
    let trace: f64 = triangle_pairs(p)
        .zip(packed)
        .filter(|((i, j), _)| i == j)
        .map(|(_, v)| *v)
        .sum();
    (trace / p as f64) / (sigma / (p as f64).sqrt())
}
