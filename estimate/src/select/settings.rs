//! The settings of the K-fold cross-validation ([`CrossValidation`]), the default
//! rule, and the candidates they span.

use super::candidates::{Candidate, SpectralCandidate};
use super::signal::{OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z};
use crate::structure::{Structure, bandwidth_grid};
use crate::threshold::ThresholdKind;

/// K-fold cross-validation of the threshold from the fold sums.
///
/// For every candidate and every fold k with reports on both sides: train = average
/// of the other folds (`n − n_k` reports), test = average of fold k; the loss is
/// `‖T_λ(S̃_{−k}) − S̃_k‖_F²` over **all** entries (both triangles and the diagonal,
/// i.e. the Frobenius norm of the full matrix). Entries a rule exempts (the diagonal
/// by default) are identical across candidates, so they add the same constant to every
/// loss and do not change the choice; keeping them makes the loss the plain squared
/// Frobenius error that the candidates are compared on, and correct when the diagonal
/// is thresholded. Because the test fold's noise is independent of the training
/// folds', `E loss = E‖T_λ(S̃_{−k}) − Σ‖_F² + const`, an unbiased comparison of the
/// candidates' risks at the training size.
///
/// Banding and Toeplitz candidates are scored the same way (the structure replaces the
/// threshold; the diagonal shrinkage applies to all). Their parameter, the bandwidth,
/// does not depend on n, so they are re-applied unchanged to the full average.
///
/// Within each family — thresholds (with "none") and structures — the candidate with
/// the smallest mean loss wins; the best structure then replaces the best threshold
/// only if its fold-wise losses are lower by more than one standard error of the paired
/// difference (the one-standard-error rule, applied between the families: a structure
/// assumes an order of the variables, and among many candidates the smallest mean loss
/// alone picks one by chance when the order carries no information). Within the
/// spectral family the bulk shrinkage is the best unless another beats it by that rule
/// ([`CrossValidation::spectral_prefer_bulk_shrink`]); it then replaces the choice so
/// far if its mean loss is lower when the data show off-diagonal signal, and only by
/// that rule when they do not ([`CrossValidation::spectral_guard`]). When a threshold
/// wins, the one applied is the simplest threshold within one standard error of the
/// best when the data show no off-diagonal signal
/// ([`CrossValidation::threshold_one_standard_error`]). The data show off-diagonal
/// signal when either test on the full average rejects the null of none
/// ([`CrossValidation::shows_off_diagonal_signal`]).
///
/// The chosen candidate is applied to the full average. The
/// candidates are parameterised by scale-free constants (c, η) multiplying a quantity
/// proportional to `1/√n`, so re-evaluating the chosen candidate at the full n rescales
/// its threshold from the training size `n(K−1)/K` to n by `√((K−1)/K)`: the threshold
/// tracks the noise level of the estimate it is applied to.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossValidation {
    /// Consider "no threshold".
    pub include_none: bool,
    /// Grid of c for the noise form `c·σ_n·√(log p)`.
    pub noise_scales: Vec<f64>,
    /// Grid of η for the entry-adaptive form (skipped when the accumulators carry no
    /// sums of squares).
    pub adaptive_scales: Vec<f64>,
    /// Kinds tried with every scale.
    pub kinds: Vec<ThresholdKind>,
    /// Threshold the diagonal too; by default it is exempt.
    pub threshold_diagonal: bool,
    /// Project each candidate's training estimate onto the PSD cone before the loss
    /// (the loss then scores exactly what would be released) when p is at most this;
    /// above it the loss uses the thresholded matrix (the projection costs one
    /// eigendecomposition per candidate and fold).
    pub project_in_loss_max_dim: usize,
    /// Weights β of the diagonal shrinkage tried with every threshold: the diagonal
    /// becomes `(1 − β)·s_ii + β·mean_k s_kk` (β = 0 keeps it; β = 1 is a scaled
    /// identity, the Ledoit–Wolf target). When the privacy noise swamps the variances
    /// and they are similar, pooling them removes most of the diagonal's noise; when
    /// they differ, the held-out loss keeps β = 0.
    pub diagonal_shrinkage: Vec<f64>,
    /// Try banding (keep `|i − j| ≤ k`) at every bandwidth k of the grid, when the
    /// collection declares ordered variables (`EstimationInput::ordered_variables`).
    pub banding: bool,
    /// Try Toeplitz band averaging at every bandwidth k of the grid, when the
    /// collection declares ordered variables.
    pub toeplitz: bool,
    /// Try the spectral estimators (`SpectralCandidate`: the spectral shrinkage, the factor model and the bulk
    /// shrinkage, with their defaults) on the same folds.
    pub spectral: bool,
    /// Above this dimension the folds are not refitted: the choice is made by Stein's
    /// unbiased risk estimate on the full average among "none", the soft thresholds
    /// (with the diagonal shrinkage grid) and the bulk shrinkage weights (see the
    /// `sure` module; docs/ALGORITHMS.md §3 has the measurement behind the switch).
    /// `usize::MAX` never switches.
    pub refit_free_above_dim: usize,
    /// Between-family rule for the spectral estimators: when the best one must earn
    /// its place against the choice among thresholds (and structures) by one standard
    /// error of the paired fold-wise differences, instead of a lower mean loss. See
    /// [`SpectralGuard`]; the default guards only when the data show no off-diagonal
    /// signal.
    pub spectral_guard: SpectralGuard,
    /// Within the spectral family: the SURE bulk shrinkage is the family's best unless
    /// the one with the smallest mean loss beats it by more than one standard error of
    /// the paired differences (`true`, the default), or the smallest mean loss wins
    /// (`false`). See docs/ALGORITHMS.md §3.
    pub spectral_prefer_bulk_shrink: bool,
    /// Within the thresholds, when the full average shows no off-diagonal signal
    /// (`off_diagonal_signal_z` at most
    /// [`threshold_one_standard_error_max_z`](Self::threshold_one_standard_error_max_z)):
    /// take the simplest
    /// candidate (the fewest kept degrees of freedom: non-zero off-diagonal entries
    /// plus the diagonal's) whose held-out loss is within one standard error of the
    /// best (`true`, the default), or the best (`false`, and always when the signal
    /// is significant). See docs/ALGORITHMS.md §3 for why: held-out Frobenius loss
    /// cannot tell apart thresholds that differ by a few kept noise entries, which
    /// cost little in Frobenius norm and a lot in spectral norm when the off-diagonal
    /// truth is below the noise. When the diagonal's spread
    /// (`diagonal_spread_z`) exceeds the same limit, the
    /// variances differ and no candidate pooling the diagonal more than the best is
    /// taken. Over gRPC `CrossValidatedThreshold.smallest_mean_threshold` sets it to
    /// `false`.
    pub threshold_one_standard_error: bool,
    /// When the full average shows off-diagonal signal
    /// (`off_diagonal_signal_z` above
    /// [`threshold_one_standard_error_max_z`](Self::threshold_one_standard_error_max_z)),
    /// release the convex combination `(1 − w)·chosen + w·other` of the chosen
    /// candidate and the other family's best (the spectral family's best when a
    /// threshold or structure was chosen, the choice it replaced when a spectral
    /// estimate was), with the stacking weight `w ∈ [0, 1]` that minimises the summed
    /// held-out loss over the folds (`true`, the default), provided the mixture earns
    /// its place: scored on each fold at the weight fitted on the others, it must beat
    /// the chosen candidate alone by one standard error of the paired differences, the
    /// rule between the families. `false` releases the chosen candidate alone.
    /// Without signal the simplest threshold stands unmixed. See
    /// docs/ALGORITHMS.md §3. Over gRPC `CrossValidatedThreshold.no_stacking` sets it
    /// to `false`.
    pub stack_families: bool,
    /// The largest off-diagonal signal z (`off_diagonal_signal_z`)
    /// that shows no off-diagonal signal (`OFF_DIAGONAL_SIGNAL_Z`
    /// by default; with `f64::INFINITY` and an infinite
    /// [`off_diagonal_top_max_z`](Self::off_diagonal_top_max_z) the data never show
    /// signal, so the within-threshold rule applies whatever the signal). Also the
    /// limit of the diagonal's spread z.
    pub threshold_one_standard_error_max_z: f64,
    /// The largest top-eigenvalue z (`off_diagonal_top_z`)
    /// that shows no off-diagonal signal (`OFF_DIAGONAL_TOP_Z`
    /// by default; `f64::INFINITY` leaves the energy test alone).
    pub off_diagonal_top_max_z: f64,
    /// Bandwidths for banding and Toeplitz averaging; empty means
    /// `bandwidth_grid(p)` (every k up to 8, then a ×1.25 grid up to p − 1). Values ≥ p act as p − 1.
    pub bandwidths: Vec<usize>,
    /// Weigh the trivial estimates too (`true`, the default). Cross-validation: the
    /// diagonal alone (a threshold at infinity off the diagonal, with every diagonal
    /// shrinkage β: β = 1 is the scaled identity) and, where the mean variance is
    /// within `1 + √3` noise sds of zero, the zero matrix, which every other family
    /// must beat by one standard error of the paired held-out differences. Above
    /// [`refit_free_above_dim`](Self::refit_free_above_dim): the scaled identity's
    /// level is shrunk by `(1 − 2τ²/m̂²)⁺`, and any other choice must beat the zero
    /// matrix by one standard error of the SUREs' difference, else that shrunk scaled
    /// identity is released. See docs/ALGORITHMS.md §3.
    pub trivial_candidates: bool,
    /// Refuse a release whose held-out spectral error, measured along directions
    /// chosen on each training fold, is worse than that of the plain projected
    /// average ("none" + PSD) or of the zero matrix by more than one standard error of
    /// the paired fold-wise differences; the next candidate by held-out loss is tried
    /// instead (up to six, then the better of the two). Cross-validation only (not the
    /// refit-free selection). `false` by default: measured on held-out data sets it
    /// never helped and fired three times for the worse (docs/ALGORITHMS.md §3).
    pub spectral_norm_guard: bool,
}

/// How many releases the spectral-norm guard
/// ([`CrossValidation::spectral_norm_guard`]) tries, in order of held-out loss, before
/// it falls back to the better of the plain projected average and the zero matrix.
pub(crate) const SPECTRAL_GUARD_TRIES: usize = 6;

/// `base·2^{i/2}` for `i = 0..count` (a √2 log grid).
pub fn log_grid(base: f64, count: usize) -> Vec<f64> {
    (0..count)
        .map(|i| base * 2f64.powf(i as f64 / 2.0))
        .collect()
}

impl Default for CrossValidation {
    /// "None" plus c, η ∈ {0.25, 0.35, …, 5.66} (a √2 grid of 10 values spanning 0.25
    /// to 5.66 noise sds at √(log p) scale), hard and soft.
    fn default() -> Self {
        CrossValidation {
            include_none: true,
            noise_scales: log_grid(0.25, 10),
            adaptive_scales: log_grid(0.25, 10),
            kinds: vec![ThresholdKind::Hard, ThresholdKind::Soft],
            threshold_diagonal: false,
            project_in_loss_max_dim: 200,
            diagonal_shrinkage: vec![0.0, 0.5, 1.0],
            banding: true,
            toeplitz: true,
            spectral: true,
            refit_free_above_dim: 200,
            spectral_guard: SpectralGuard::WithoutSignal,
            spectral_prefer_bulk_shrink: true,
            threshold_one_standard_error: true,
            stack_families: true,
            threshold_one_standard_error_max_z: OFF_DIAGONAL_SIGNAL_Z,
            off_diagonal_top_max_z: OFF_DIAGONAL_TOP_Z,
            bandwidths: Vec::new(),
            trivial_candidates: true,
            spectral_norm_guard: false,
        }
    }
}

/// When the spectral family's best must earn its place against the thresholds (and
/// structures) by one standard error of the paired fold-wise differences
/// ([`CrossValidation::spectral_guard`]) rather than by a lower mean loss.
///
/// Without off-diagonal signal the held-out Frobenius loss barely sees a spectral
/// estimate's worst error: one noise eigenvalue kept as a spike costs about its own
/// square in a fold loss of order `p²σ_n²`, but its whole size in spectral norm. On
/// independent variables (Σ diagonal) that was a released direction up to six times
/// the variances' scale in about one release in thirty (docs/ALGORITHMS.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpectralGuard {
    /// A lower mean loss always suffices.
    Never,
    /// One standard error when the data show no off-diagonal signal
    /// ([`CrossValidation::shows_off_diagonal_signal`]); a lower mean otherwise. The
    /// default.
    WithoutSignal,
    /// One standard error always.
    Always,
}

impl CrossValidation {
    /// Whether the full average shows off-diagonal signal: its off-diagonal energy z
    /// (`off_diagonal_signal_z`) is above
    /// [`threshold_one_standard_error_max_z`](Self::threshold_one_standard_error_max_z)
    /// or its top off-diagonal eigenvalue z (`off_diagonal_top_z`)
    /// above [`off_diagonal_top_max_z`](Self::off_diagonal_top_max_z). The energy test
    /// sees signal spread over many entries, the eigenvalue test a few strong
    /// directions; each is a test at about 0.1 % and 1 % under the null.
    pub fn shows_off_diagonal_signal(&self, energy_z: f64, top_z: f64) -> bool {
        energy_z > self.threshold_one_standard_error_max_z || top_z > self.off_diagonal_top_max_z
    }

    /// The candidates for a `p × p` matrix in the order they are tried (ties of held-out
    /// loss go to the larger threshold, then to the earlier candidate). Banding and Toeplitz averaging are included only for `ordered`
    /// variables: on variables without an order their bands mean nothing.
    pub(crate) fn candidates(
        &self,
        with_adaptive: bool,
        p: usize,
        ordered: bool,
    ) -> Vec<Candidate> {
        let mut out = Vec::new();
        if self.trivial_candidates {
            out.push(Candidate::Zero);
            out.push(Candidate::Diagonal);
        }
        if self.include_none {
            out.push(Candidate::None);
        }
        for &kind in &self.kinds {
            for &c in &self.noise_scales {
                out.push(Candidate::Noise { c, kind });
            }
            if with_adaptive {
                for &eta in &self.adaptive_scales {
                    out.push(Candidate::Adaptive { eta, kind });
                }
            }
        }
        let bandwidths: Vec<usize> = if self.bandwidths.is_empty() {
            bandwidth_grid(p)
        } else {
            let mut b: Vec<usize> = self
                .bandwidths
                .iter()
                .map(|&k| k.min(p.saturating_sub(1)))
                .collect();
            b.sort_unstable();
            b.dedup();
            b
        };
        if self.banding && ordered {
            out.extend(
                bandwidths
                    .iter()
                    .map(|&bandwidth| Candidate::Structured(Structure::Banded { bandwidth })),
            );
        }
        if self.toeplitz && ordered {
            out.extend(
                bandwidths
                    .iter()
                    .map(|&bandwidth| Candidate::Structured(Structure::Toeplitz { bandwidth })),
            );
        }
        if self.spectral && p >= 2 {
            out.extend(SpectralCandidate::ALL.map(Candidate::Spectral));
        }
        out
    }
}
