//! Threshold rules for the averaged noisy second moment: fixed-form (seed 000's
//! universal rule, seed 001's LDP rule), entry-adaptive (Cai & Liu 2011) and K-fold
//! cross-validated (Bickel & Levina 2008), each with hard or soft thresholding.
//!
//! The cross-validation (the default rule) also scores two structural regularisers
//! for ordered variables, banding and Toeplitz band averaging ([`crate::structure`]),
//! and a diagonal shrinkage, against the thresholds on the same held-out folds: it
//! picks whichever predicts held-out users best, so a structure is used only when the
//! data support it (`estimate --unordered` / `unordered_variables` turns them off).
//!
//! # Why none of this costs privacy
//!
//! Every report is already (ε, δ)-LDP when it leaves the device. Everything here is a
//! function of the aggregator's accumulators (fold sums, sums of squares and counts),
//! which are themselves functions of the privatised reports plus public parameters
//! (p, R, σ, the grid); none of it touches a raw `x`. By the post-processing property
//! of differential privacy, any such function — a threshold chosen from the data, a
//! per-entry variance, a cross-validation loss — is as private as the reports. The
//! fold assignment is by report id (random bytes chosen by the client), so it reveals
//! nothing either. Cross-validation splits users, not entries, and each user's noise is
//! independent, so a held-out fold is a genuine independent test set.
//!
//! # Units
//!
//! Accumulators are in grid units of the unit ball; every threshold here is in data
//! units (`× R²/2^k`), like the matrix it is applied to. `σ_n = R²σ/√n` is the noise sd
//! of one averaged entry.
//!
//! # Memory
//!
//! Cross-validation works on packed `d = p(p+1)/2` vectors: one training average, one
//! test average and the optional per-entry variances at a time, so beyond the K fold
//! sums it needs O(p²) memory and O(K·#candidates·p²) time.

use crate::accumulator::Accumulator;
pub use crate::structure::Structure;
use crate::structure::bandwidth_grid;
use ldpcov_proto::Collection;
use ldpcov_proto::layout::triangle_pairs;
use nalgebra::DMatrix;

/// How an entry above the threshold is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThresholdKind {
    /// `x·1[|x| > λ]` (the seed papers' rule).
    #[default]
    Hard,
    /// `sign(x)·max(|x| − λ, 0)`: continuous in x, shrinks survivors by λ.
    Soft,
}

impl ThresholdKind {
    /// `"hard"` or `"soft"`.
    pub fn name(&self) -> &'static str {
        match self {
            ThresholdKind::Hard => "hard",
            ThresholdKind::Soft => "soft",
        }
    }

    /// Applies the threshold `lambda` to one value.
    pub fn apply(&self, x: f64, lambda: f64) -> f64 {
        match self {
            ThresholdKind::Hard => {
                if x.abs() > lambda {
                    x
                } else {
                    0.0
                }
            }
            ThresholdKind::Soft => {
                let shrunk = x.abs() - lambda;
                if shrunk > 0.0 {
                    shrunk.copysign(x)
                } else {
                    0.0
                }
            }
        }
    }
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

/// Seed 001's LDP threshold with the missing `1/√n` restored:
/// `λ = ξ·√(log p / n) + 4·(R²σ/√n)·√(log p)`.
///
/// The paper prints `4σ₂√(log p)` (no `1/√n`), which does not shrink with n and would
/// zero every off-diagonal entry at any realistic n; the noise of an averaged entry is
/// `σ₂/√n` (in data units `R²σ/√n`), so that is what the threshold scales.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Seed001Threshold {
    /// ξ, the data term's constant (the paper tunes it by cross-validation).
    pub xi: f64,
    /// Threshold the diagonal too, as the paper prints; by default it is exempt.
    pub threshold_diagonal: bool,
}

/// Entry-adaptive threshold (Cai & Liu 2011): `λ_ij = η·√(θ̂_ij·log p / n)` with
/// `θ̂_ij` the variance of entry ij across reports, in data units
/// `R⁴/2^{2k}·(Σv²/n − (Σv/n)²)`.
///
/// `θ̂_ij` includes the privacy noise variance `R⁴σ²` as well as the data's own
/// variance, so the rule adapts both to the noise level and to entries whose products
/// `x_i x_j` vary more; that is intended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveThreshold {
    /// η (Cai & Liu recommend 2).
    pub eta: f64,
    /// Threshold the diagonal too; by default it is exempt.
    pub threshold_diagonal: bool,
}

impl Default for AdaptiveThreshold {
    fn default() -> Self {
        AdaptiveThreshold {
            eta: 2.0,
            threshold_diagonal: false,
        }
    }
}

/// One threshold a cross-validation may choose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Candidate {
    /// Keep every entry.
    None,
    /// The noise form `λ = c·σ_n·√(log p)` (seed 000 with γ = 0, seed 001 with ξ = 0).
    Noise {
        /// c, the multiple of `σ_n·√(log p)`.
        c: f64,
        /// Hard or soft.
        kind: ThresholdKind,
    },
    /// The entry-adaptive form `λ_ij = η·√(θ̂_ij·log p / n)`.
    Adaptive {
        /// η.
        eta: f64,
        /// Hard or soft.
        kind: ThresholdKind,
    },
    /// A structural regulariser instead of a threshold: banding or Toeplitz band
    /// averaging ([`crate::structure`]).
    Structured(Structure),
}

impl Candidate {
    /// A short name such as `noise(c=1.41, soft)`.
    pub fn name(&self) -> String {
        match self {
            Candidate::None => "none".to_string(),
            Candidate::Noise { c, kind } => format!("noise(c={c:.3}, {})", kind.name()),
            Candidate::Adaptive { eta, kind } => format!("adaptive(eta={eta:.3}, {})", kind.name()),
            Candidate::Structured(s) => s.name(),
        }
    }
}

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
/// alone picks one by chance when the order carries no information).
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
    /// Try banding (keep `|i − j| ≤ k`) at every bandwidth k of the grid.
    pub banding: bool,
    /// Try Toeplitz band averaging at every bandwidth k of the grid.
    pub toeplitz: bool,
    /// Bandwidths for banding and Toeplitz averaging; empty means
    /// [`bandwidth_grid`]`(p)`. Values ≥ p act as p − 1.
    pub bandwidths: Vec<usize>,
}

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
            bandwidths: Vec::new(),
        }
    }
}

impl CrossValidation {
    /// The candidates for a `p × p` matrix in the order they are tried (ties go to the
    /// earlier one).
    pub fn candidates(&self, with_adaptive: bool, p: usize) -> Vec<Candidate> {
        let mut out = Vec::new();
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
        if self.banding {
            out.extend(
                bandwidths
                    .iter()
                    .map(|&bandwidth| Candidate::Structured(Structure::Banded { bandwidth })),
            );
        }
        if self.toeplitz {
            out.extend(
                bandwidths
                    .iter()
                    .map(|&bandwidth| Candidate::Structured(Structure::Toeplitz { bandwidth })),
            );
        }
        out
    }
}

/// Which entries of the average are kept, and how the threshold is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum ThresholdRule {
    /// Keep every entry.
    None,
    /// Seed 000's universal threshold.
    Universal(UniversalThreshold),
    /// Seed 001's LDP threshold (with the `1/√n` erratum fixed).
    Seed001(Seed001Threshold),
    /// Cai & Liu's entry-adaptive threshold.
    Adaptive(AdaptiveThreshold),
    /// Chosen by K-fold cross-validation from the fold sums.
    CrossValidated(CrossValidation),
}

/// The default is cross-validation with [`CrossValidation::default`]: it falls back to
/// "no threshold" when the data are dense and thresholds hard when they are sparse,
/// where any fixed rule is right for one and wrong for the other (seed 000's c = 4
/// zeroes true entries whenever `4σ_n√(log p)` exceeds them).
impl Default for ThresholdRule {
    fn default() -> Self {
        ThresholdRule::CrossValidated(CrossValidation::default())
    }
}

impl ThresholdRule {
    /// A short name for logs and the estimate message.
    pub fn name(&self) -> String {
        let diag = |t: bool| if t { "thresholded" } else { "exempt" };
        match self {
            ThresholdRule::None => "none".to_string(),
            ThresholdRule::Universal(u) => format!(
                "universal(gamma={}, c={}, diagonal={})",
                u.gamma,
                u.c,
                diag(u.threshold_diagonal)
            ),
            ThresholdRule::Seed001(s) => format!(
                "seed001(xi={}, diagonal={})",
                s.xi,
                diag(s.threshold_diagonal)
            ),
            ThresholdRule::Adaptive(a) => {
                format!(
                    "adaptive(eta={}, diagonal={})",
                    a.eta,
                    diag(a.threshold_diagonal)
                )
            }
            ThresholdRule::CrossValidated(cv) => {
                format!("cv(diagonal={})", diag(cv.threshold_diagonal))
            }
        }
    }

    /// Whether the rule thresholds the diagonal.
    pub fn threshold_diagonal(&self) -> bool {
        match self {
            ThresholdRule::None => false,
            ThresholdRule::Universal(u) => u.threshold_diagonal,
            ThresholdRule::Seed001(s) => s.threshold_diagonal,
            ThresholdRule::Adaptive(a) => a.threshold_diagonal,
            ThresholdRule::CrossValidated(cv) => cv.threshold_diagonal,
        }
    }

    /// Every numeric parameter with its name, for validation.
    pub fn parameters(&self) -> Vec<(&'static str, f64)> {
        match self {
            ThresholdRule::None => vec![],
            ThresholdRule::Universal(u) => vec![("gamma", u.gamma), ("c", u.c)],
            ThresholdRule::Seed001(s) => vec![("xi", s.xi)],
            ThresholdRule::Adaptive(a) => vec![("eta", a.eta)],
            ThresholdRule::CrossValidated(cv) => cv
                .noise_scales
                .iter()
                .map(|&v| ("noise_scales", v))
                .chain(cv.adaptive_scales.iter().map(|&v| ("adaptive_scales", v)))
                .chain(
                    cv.diagonal_shrinkage
                        .iter()
                        .map(|&v| ("diagonal_shrinkage", if v <= 1.0 { v } else { -v })),
                )
                .collect(),
        }
    }
}

/// Thresholds in data units: one for every entry, or one per packed entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Thresholds {
    /// The same λ for every entry.
    Uniform(f64),
    /// λ_ij per packed entry (row-major upper triangle).
    PerEntry(Vec<f64>),
}

impl Thresholds {
    /// λ of packed entry `k`.
    pub fn at(&self, k: usize) -> f64 {
        match self {
            Thresholds::Uniform(l) => *l,
            Thresholds::PerEntry(v) => v[k],
        }
    }

    /// A one-number summary: the uniform λ, or the mean off-diagonal λ_ij (the mean
    /// over all entries when p = 1).
    pub fn summary(&self, p: usize) -> f64 {
        match self {
            Thresholds::Uniform(l) => *l,
            Thresholds::PerEntry(v) => {
                let (sum, count) = triangle_pairs(p)
                    .zip(v)
                    .filter(|((i, j), _)| i != j || p == 1)
                    .fold((0.0, 0usize), |(s, c), (_, &l)| (s + l, c + 1));
                if count == 0 { 0.0 } else { sum / count as f64 }
            }
        }
    }
}

/// `c·σ_n·√(log p)` for `σ_n` the averaged-entry noise sd at n reports (data units).
pub fn noise_threshold(collection: &Collection, n: u64, c: f64) -> f64 {
    c * collection.mean_entry_noise_sd(n.max(1)) * (collection.dim as f64).ln().sqrt()
}

/// Seed 000's universal threshold `γ√(log p/n) + c·σ_n√(log p)` at n reports.
pub fn universal_threshold(
    rule: &UniversalThreshold,
    p: usize,
    n: u64,
    entry_noise_sd: f64,
) -> f64 {
    let log_p = (p as f64).ln();
    rule.gamma * (log_p / n.max(1) as f64).sqrt() + rule.c * entry_noise_sd * log_p.sqrt()
}

/// Seed 001's LDP threshold `ξ√(log p/n) + 4(R²σ/√n)√(log p)` at n reports.
pub fn seed001_threshold(rule: &Seed001Threshold, collection: &Collection, n: u64) -> f64 {
    let log_p = (collection.dim as f64).ln();
    rule.xi * (log_p / n.max(1) as f64).sqrt() + noise_threshold(collection, n, 4.0)
}

/// Per-entry variance across reports in data units,
/// `θ̂_ij = R⁴/2^{2k}·(Σv²/n − (Σv/n)²)` (clamped at 0 against rounding), packed.
/// All zeros when there are no reports.
pub fn entry_variances(collection: &Collection, acc: &Accumulator) -> Vec<f64> {
    let n = acc.count;
    if n == 0 {
        return vec![0.0; acc.entries()];
    }
    let r2 = collection.clip_radius * collection.clip_radius;
    let g = collection.grid_scale();
    let scale = r2 * r2 / (g * g);
    let nf = n as f64;
    acc.sums()
        .iter()
        .zip(&acc.sum_squares)
        .map(|(&s, &q)| {
            let mean = s as f64 / nf;
            scale * (q as f64 / nf - mean * mean).max(0.0)
        })
        .collect()
}

/// Whether the accumulators carry sums of squares (all zero means they were not kept,
/// e.g. a simulation that only fills fold sums).
pub fn has_sum_squares(acc: &Accumulator) -> bool {
    acc.sum_squares.iter().any(|&q| q != 0)
}

/// Cai & Liu's `λ_ij = η·√(θ̂_ij·log p / n)` from per-entry variances at n reports.
pub fn adaptive_thresholds(variances: &[f64], p: usize, n: u64, eta: f64) -> Thresholds {
    let factor = (p as f64).ln() / n.max(1) as f64;
    Thresholds::PerEntry(
        variances
            .iter()
            .map(|&v| eta * (v * factor).sqrt())
            .collect(),
    )
}

/// The thresholds of a cross-validation candidate at n reports (None: zero).
pub fn candidate_thresholds(
    candidate: &Candidate,
    collection: &Collection,
    variances: &[f64],
    n: u64,
) -> Thresholds {
    match candidate {
        Candidate::None | Candidate::Structured(_) => Thresholds::Uniform(0.0),
        Candidate::Noise { c, .. } => Thresholds::Uniform(noise_threshold(collection, n, *c)),
        Candidate::Adaptive { eta, .. } => adaptive_thresholds(variances, collection.dim, n, *eta),
    }
}

fn candidate_kind(candidate: &Candidate) -> ThresholdKind {
    match candidate {
        Candidate::None | Candidate::Structured(_) => ThresholdKind::Hard,
        Candidate::Noise { kind, .. } | Candidate::Adaptive { kind, .. } => *kind,
    }
}

fn candidate_structure(candidate: &Candidate) -> Structure {
    match candidate {
        Candidate::Structured(s) => *s,
        _ => Structure::Unstructured,
    }
}

/// Thresholds a symmetric matrix in place (the diagonal only if `include_diagonal`).
/// Returns the number of packed entries left non-zero.
pub fn apply_threshold(
    m: &mut DMatrix<f64>,
    thresholds: &Thresholds,
    kind: ThresholdKind,
    include_diagonal: bool,
) -> u64 {
    let p = m.nrows();
    let mut surviving = 0;
    for (k, (i, j)) in triangle_pairs(p).enumerate() {
        if i != j || include_diagonal {
            let v = kind.apply(m[(i, j)], thresholds.at(k));
            m[(i, j)] = v;
            m[(j, i)] = v;
        }
        if m[(i, j)] != 0.0 {
            surviving += 1;
        }
    }
    surviving
}

/// Packed average of `sums` over `n` reports in data units (`R²/(2^k·n)·Σ`).
fn packed_average(collection: &Collection, sums: &[i64], n: u64) -> Vec<f64> {
    let r = collection.clip_radius;
    let scale = r * r / (collection.grid_scale() * n.max(1) as f64);
    sums.iter().map(|&s| s as f64 * scale).collect()
}

/// Replaces each diagonal entry `s_ii` of a packed matrix by
/// `(1 − beta)·s_ii + beta·mean_k s_kk`.
pub fn shrink_packed_diagonal(p: usize, packed: &mut [f64], beta: f64) {
    if beta == 0.0 || p == 0 {
        return;
    }
    let diag: Vec<usize> = triangle_pairs(p)
        .enumerate()
        .filter(|(_, (i, j))| i == j)
        .map(|(k, _)| k)
        .collect();
    let mean = diag.iter().map(|&k| packed[k]).sum::<f64>() / p as f64;
    for k in diag {
        packed[k] = (1.0 - beta) * packed[k] + beta * mean;
    }
}

/// Replaces each diagonal entry of a symmetric matrix by
/// `(1 − beta)·m_ii + beta·mean_k m_kk`.
pub fn shrink_diagonal(m: &mut DMatrix<f64>, beta: f64) {
    let p = m.nrows();
    if beta == 0.0 || p == 0 {
        return;
    }
    let mean = m.trace() / p as f64;
    for i in 0..p {
        m[(i, i)] = (1.0 - beta) * m[(i, i)] + beta * mean;
    }
}

/// PSD projection of a packed symmetric matrix (None if the eigensolver fails).
fn project_packed(p: usize, packed: &[f64]) -> Option<Vec<f64>> {
    let mut m = DMatrix::zeros(p, p);
    for ((i, j), &v) in triangle_pairs(p).zip(packed) {
        m[(i, j)] = v;
        m[(j, i)] = v;
    }
    let (out, _) = crate::estimate::project_psd(&m).ok()?;
    Some(triangle_pairs(p).map(|(i, j)| out[(i, j)]).collect())
}

/// The outcome of a cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct CvOutcome {
    /// The candidate with the smallest mean held-out loss.
    pub chosen: Candidate,
    /// The diagonal shrinkage weight chosen with it.
    pub diagonal_shrinkage: f64,
    /// Every threshold candidate with its mean held-out loss (data units squared), at
    /// its best diagonal shrinkage.
    pub losses: Vec<(Candidate, f64)>,
    /// Folds used (those with reports on both sides).
    pub folds_used: usize,
}

/// Runs the K-fold cross-validation of [`CrossValidation`] on the accumulators.
///
/// Returns `None` when fewer than two folds have reports on both sides (nothing to
/// validate against); the caller then keeps every entry. See [`CrossValidation`] for
/// the loss and the rescaling to the full n.
pub fn cross_validate(
    collection: &Collection,
    acc: &Accumulator,
    cv: &CrossValidation,
) -> Option<CvOutcome> {
    let p = collection.dim;
    let with_adaptive = has_sum_squares(acc) && !cv.adaptive_scales.is_empty();
    let variances = if with_adaptive {
        // θ̂ from all reports: it is a per-report variance, the same population
        // quantity whichever fold is held out, and sums of squares are not kept per fold.
        entry_variances(collection, acc)
    } else {
        Vec::new()
    };
    let candidates = cv.candidates(with_adaptive, p);
    if candidates.is_empty() {
        return None;
    }
    let total = acc.sums();
    let weights: Vec<f64> = triangle_pairs(p)
        .map(|(i, j)| if i == j { 1.0 } else { 2.0 })
        .collect();
    let betas: Vec<f64> = if cv.diagonal_shrinkage.is_empty() {
        vec![0.0]
    } else {
        cv.diagonal_shrinkage.clone()
    };
    let candidates: Vec<(Candidate, f64)> = candidates
        .iter()
        .flat_map(|&c| betas.iter().map(move |&b| (c, b)))
        .collect();
    // Per candidate, the loss of every usable fold (for the paired comparison below).
    let mut losses: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    let mut folds_used = 0;
    for (fold_sums, &n_k) in acc.fold_sums.iter().zip(&acc.fold_counts) {
        let n_train = acc.count.saturating_sub(n_k);
        if n_k == 0 || n_train == 0 {
            continue;
        }
        folds_used += 1;
        let train_sums: Vec<i64> = total.iter().zip(fold_sums).map(|(t, f)| t - f).collect();
        let train = packed_average(collection, &train_sums, n_train);
        let test = packed_average(collection, fold_sums, n_k);
        let project = p <= cv.project_in_loss_max_dim;
        for (loss, (candidate, beta)) in losses.iter_mut().zip(&candidates) {
            let thresholds = candidate_thresholds(candidate, collection, &variances, n_train);
            let kind = candidate_kind(candidate);
            let mut shrunk = train.clone();
            shrink_packed_diagonal(p, &mut shrunk, *beta);
            candidate_structure(candidate).apply_packed(p, &mut shrunk);
            let train = &shrunk;
            let kept: Vec<f64> = triangle_pairs(p)
                .enumerate()
                .map(|(k, (i, j))| {
                    if i != j || cv.threshold_diagonal {
                        kind.apply(train[k], thresholds.at(k))
                    } else {
                        train[k]
                    }
                })
                .collect();
            let kept = if project {
                match project_packed(p, &kept) {
                    Some(v) => v,
                    None => kept,
                }
            } else {
                kept
            };
            loss.push(
                kept.iter()
                    .zip(&test)
                    .zip(&weights)
                    .map(|((a, b), w)| w * (a - b) * (a - b))
                    .sum::<f64>(),
            );
        }
    }
    if folds_used < 2 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // The best candidate of each family: thresholds (and "none") vs structures.
    let best_of = |structured: bool| {
        candidates
            .iter()
            .zip(&losses)
            .enumerate()
            .filter(|(_, ((c, _), _))| matches!(c, Candidate::Structured(_)) == structured)
            .fold(None::<(usize, f64)>, |best, (i, (_, l))| {
                let l = mean(l);
                match best {
                    Some((_, bl)) if bl <= l => best,
                    _ => Some((i, l)),
                }
            })
    };
    let chosen_index = match (best_of(false), best_of(true)) {
        (Some((u, _)), Some((s, _))) => {
            if structure_earns_its_place(&losses[s], &losses[u]) {
                s
            } else {
                u
            }
        }
        (Some((i, _)), None) | (None, Some((i, _))) => i,
        (None, None) => return None,
    };
    let (chosen, diagonal_shrinkage) = candidates[chosen_index];
    let all: Vec<((Candidate, f64), f64)> = candidates
        .into_iter()
        .zip(losses)
        .map(|(c, l)| (c, mean(&l)))
        .collect();
    // Per threshold candidate: the best loss over the diagonal shrinkages.
    let mut losses: Vec<(Candidate, f64)> = Vec::new();
    for &((c, _), l) in &all {
        match losses.last_mut() {
            Some((lc, ll)) if *lc == c => *ll = ll.min(l),
            _ => losses.push((c, l)),
        }
    }
    Some(CvOutcome {
        chosen,
        diagonal_shrinkage,
        losses,
        folds_used,
    })
}

/// The one-standard-error rule between the families: whether a structure with
/// fold-wise losses `structured` replaces the best threshold with losses `thresholded`
/// (same folds, same order). True only when the mean paired difference plus one
/// standard error of it is below zero. Structures assume an order of the variables
/// that the data may not have, and with many candidates the smallest mean loss alone
/// over-selects them by chance.
pub fn structure_earns_its_place(structured: &[f64], thresholded: &[f64]) -> bool {
    let diff: Vec<f64> = structured
        .iter()
        .zip(thresholded)
        .map(|(a, b)| a - b)
        .collect();
    let k = diff.len() as f64;
    if diff.len() < 2 {
        return false;
    }
    let mean = diff.iter().sum::<f64>() / k;
    let se = (diff.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0) / k).sqrt();
    mean + se < 0.0
}

/// What a rule applies to the full average: thresholds, kind, whether the diagonal
/// is thresholded, the diagonal shrinkage, and a name for the estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
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
    /// The rule's name, with the cross-validation's choice.
    pub name: String,
}

/// Resolves a rule on the accumulators (running the cross-validation if asked).
///
/// `kind` is used by the fixed rules; cross-validation uses the kind it chose.
pub fn resolve(
    rule: &ThresholdRule,
    kind: ThresholdKind,
    collection: &Collection,
    acc: &Accumulator,
) -> Resolved {
    let n = acc.count;
    let p = collection.dim;
    let diag = rule.threshold_diagonal();
    let fixed = |thresholds: Thresholds| Resolved {
        thresholds,
        kind,
        include_diagonal: diag,
        diagonal_shrinkage: 0.0,
        structure: Structure::Unstructured,
        name: format!("{}, {}", rule.name(), kind.name()),
    };
    match rule {
        ThresholdRule::None => Resolved {
            name: rule.name(),
            ..fixed(Thresholds::Uniform(0.0))
        },
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
        ThresholdRule::CrossValidated(cv) => match cross_validate(collection, acc, cv) {
            None => Resolved {
                thresholds: Thresholds::Uniform(0.0),
                kind: ThresholdKind::Hard,
                include_diagonal: false,
                diagonal_shrinkage: 0.0,
                structure: Structure::Unstructured,
                name: format!("{} → none (fewer than 2 usable folds)", rule.name()),
            },
            Some(outcome) => {
                let variances = match outcome.chosen {
                    Candidate::Adaptive { .. } => entry_variances(collection, acc),
                    _ => Vec::new(),
                };
                Resolved {
                    thresholds: candidate_thresholds(&outcome.chosen, collection, &variances, n),
                    kind: candidate_kind(&outcome.chosen),
                    include_diagonal: diag,
                    diagonal_shrinkage: outcome.diagonal_shrinkage,
                    structure: candidate_structure(&outcome.chosen),
                    name: format!(
                        "{} → {}, diagonal shrinkage {} ({} folds)",
                        rule.name(),
                        outcome.chosen.name(),
                        outcome.diagonal_shrinkage,
                        outcome.folds_used
                    ),
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn collection(dim: u32, epsilon: f64, clip_radius: f64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "t".into(),
            dim,
            epsilon,
            delta: 1e-6,
            clip_radius,
            min_reports: 1,
            encoding: 0,
        })
        .unwrap()
    }

    #[test]
    fn hard_and_soft_on_one_value() {
        assert_eq!(ThresholdKind::Hard.apply(0.5, 0.3), 0.5);
        assert_eq!(ThresholdKind::Hard.apply(-0.3, 0.3), 0.0);
        assert!((ThresholdKind::Soft.apply(0.5, 0.3) - 0.2).abs() < 1e-15);
        assert!((ThresholdKind::Soft.apply(-0.5, 0.3) + 0.2).abs() < 1e-15);
        assert_eq!(ThresholdKind::Soft.apply(0.2, 0.3), 0.0);
    }

    #[test]
    fn apply_threshold_hard_vs_soft_on_a_matrix() {
        let m = DMatrix::from_row_slice(3, 3, &[1.0, 0.5, -0.2, 0.5, 2.0, -0.4, -0.2, -0.4, 0.1]);
        let t = Thresholds::Uniform(0.3);
        let mut hard = m.clone();
        assert_eq!(
            apply_threshold(&mut hard, &t, ThresholdKind::Hard, false),
            5
        );
        assert_eq!(hard[(0, 1)], 0.5);
        assert_eq!(hard[(2, 1)], -0.4);
        assert_eq!(hard[(0, 2)], 0.0);
        assert_eq!(hard[(2, 2)], 0.1); // diagonal exempt
        let mut soft = m.clone();
        assert_eq!(apply_threshold(&mut soft, &t, ThresholdKind::Soft, true), 4);
        assert!((soft[(0, 1)] - 0.2).abs() < 1e-15 && soft[(0, 1)] == soft[(1, 0)]);
        assert!((soft[(1, 2)] + 0.1).abs() < 1e-15);
        assert!((soft[(0, 0)] - 0.7).abs() < 1e-15);
        assert_eq!(soft[(2, 2)], 0.0); // 0.1 ≤ 0.3 with the diagonal included
    }

    #[test]
    fn diagonal_shrinkage_pools_toward_the_mean_variance() {
        // Diagonal (1, 2, 6): mean 3. β = 0.5 → (2, 2.5, 4.5); β = 1 → 3·I on the
        // diagonal; off-diagonal entries untouched; packed and full forms agree.
        let mut m = DMatrix::from_row_slice(3, 3, &[1.0, 0.4, 0.0, 0.4, 2.0, 0.1, 0.0, 0.1, 6.0]);
        let mut packed: Vec<f64> = triangle_pairs(3).map(|(i, j)| m[(i, j)]).collect();
        shrink_diagonal(&mut m, 0.5);
        shrink_packed_diagonal(3, &mut packed, 0.5);
        assert_eq!((m[(0, 0)], m[(1, 1)], m[(2, 2)]), (2.0, 2.5, 4.5));
        assert_eq!(m[(0, 1)], 0.4);
        let again: Vec<f64> = triangle_pairs(3).map(|(i, j)| m[(i, j)]).collect();
        assert_eq!(packed, again);
        shrink_diagonal(&mut m, 1.0);
        assert_eq!((m[(0, 0)], m[(1, 1)], m[(2, 2)]), (3.0, 3.0, 3.0));
    }

    #[test]
    fn seed001_threshold_has_the_one_over_root_n() {
        let c = collection(20, 1.0, 2.0);
        let s = Seed001Threshold {
            xi: 0.5,
            threshold_diagonal: false,
        };
        let log_p = 20f64.ln();
        for n in [100u64, 10_000] {
            let want = 0.5 * (log_p / n as f64).sqrt()
                + 4.0 * 4.0 * c.sigma / (n as f64).sqrt() * log_p.sqrt();
            let got = seed001_threshold(&s, &c, n);
            assert!((got - want).abs() < 1e-12 * want, "{got} vs {want}");
        }
        // ×100 users → λ/10.
        let ratio = seed001_threshold(&s, &c, 100) / seed001_threshold(&s, &c, 10_000);
        assert!((ratio - 10.0).abs() < 1e-9);
    }

    #[test]
    fn adaptive_lambda_from_known_sums_of_squares() {
        // p = 2 (3 packed entries), R = 2, four reports with known grid values.
        let c = collection(2, 1.0, 2.0);
        let g = c.grid_scale() as i32;
        let mut acc = Accumulator::new(3, 5);
        // Entry 0: values g, g, 3g, 3g → mean 2g, mean square 5g², variance g².
        // Entry 1: 0, 0, 0, 0 → variance 0. Entry 2: g, −g, g, −g → variance g².
        acc.add(0, &[g, 0, g]);
        acc.add(1, &[g, 0, -g]);
        acc.add(2, &[3 * g, 0, g]);
        acc.add(3, &[3 * g, 0, -g]);
        let v = entry_variances(&c, &acc);
        // Data units: R⁴/g²·g² = 16.
        assert!((v[0] - 16.0).abs() < 1e-9, "{v:?}");
        assert_eq!(v[1], 0.0);
        assert!((v[2] - 16.0).abs() < 1e-9);
        let t = adaptive_thresholds(&v, 2, 4, 2.0);
        // λ = η√(θ̂·log p/n) = 2·√(16·ln 2/4) = 4√(ln 2).
        let want = 4.0 * 2f64.ln().sqrt();
        assert!((t.at(0) - want).abs() < 1e-9);
        assert_eq!(t.at(1), 0.0);
        // Through resolve(): the same numbers.
        let rule = ThresholdRule::Adaptive(AdaptiveThreshold::default());
        let r = resolve(&rule, ThresholdKind::Soft, &c, &acc);
        assert_eq!(r.thresholds, t);
        assert_eq!(r.kind, ThresholdKind::Soft);
        assert!(!r.include_diagonal);
    }

    /// Reports `round(2^k·(u_i u_j)) + round(N(0, σ_grid²))` for u = x/R, x ~ N(0, Σ)
    /// with Σ given by its Cholesky factor; fold = user index mod 5.
    fn simulate(c: &Collection, chol: &DMatrix<f64>, n: usize, seed: u64) -> Accumulator {
        let p = c.dim;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let std = Normal::new(0.0, 1.0).unwrap();
        let noise = Normal::new(0.0, c.sigma_grid()).unwrap();
        let g = c.grid_scale();
        let r = c.clip_radius;
        let mut acc = Accumulator::new(c.entries, 5);
        let mut report = vec![0i32; c.entries];
        for user in 0..n {
            let z = nalgebra::DVector::from_fn(p, |_, _| std.sample(&mut rng));
            let x = chol * z;
            let norm = x.norm().max(r);
            let u = x / norm;
            for (slot, (i, j)) in report.iter_mut().zip(triangle_pairs(p)) {
                *slot = ((u[i] * u[j] * g).round() + noise.sample(&mut rng).round()) as i32;
            }
            acc.add(user % 5, &report);
        }
        acc
    }

    /// The estimate the default rule releases, before the PSD projection.
    fn default_estimate(c: &Collection, acc: &Accumulator) -> DMatrix<f64> {
        let options = crate::estimate::EstimateOptions {
            skip_psd_projection: true,
            ..Default::default()
        };
        crate::estimate::estimate(c, acc, &options).unwrap().matrix
    }

    #[test]
    fn cv_keeps_everything_when_the_truth_is_dense() {
        // Σ_ij = s_i s_j (0.5 + 0.5·1[i = j]) with s_i = 1 + 0.5·i/(p − 1): every
        // off-diagonal entry is 0.5·s_i s_j ∈ [0.5, 1.125], and neither the bands
        // (entries of one band differ by up to 0.5·(1.5² − 1)) nor the diagonal
        // (s_i² ∈ [1, 2.25]) are constant. p = 20, R = 9, ε = 40, n = 45 000:
        // σ ≈ 0.26, σ_n = R²σ/√n ≈ 0.10 (checked below), so every true off-diagonal
        // entry is ≥ 5σ_n from zero and far above every candidate's threshold but the
        // largest (5.66·σ_n·√(log 20) ≈ 1.0). No candidate removes noise from such
        // entries: hard thresholds below ≈ 0.3 change nothing, larger ones zero true
        // entries (cost ≥ 0.25 each), and soft ones shrink all 380 off-diagonal entries
        // by λ ≥ 0.25·σ_n·√(log 20) ≈ 0.045, a bias of 380·0.045² ≈ 0.77 in squared
        // Frobenius norm, while the noise in a loss difference,
        // 2λ·√(380·(σ_train² + σ_test²)) / √5 folds ≈ 2·0.045·√(380·0.065)/2.2 ≈ 0.2,
        // is about 4 times smaller. Toeplitz averaging replaces each entry by its band's
        // mean: the within-band spread of 0.5·s_i s_{i+h} has variance ≈ 0.02–0.03, a
        // bias of ≈ 8 over 380 entries against a noise saving of at most 380·σ_n² ≈ 4;
        // banding drops true entries ≥ 0.5. Diagonal shrinkage toward the mean moves
        // s_i² by up to 0.6. So CV must keep the raw average: "none", a hard threshold
        // that zeroes nothing, or banding at the full bandwidth p − 1.
        let p = 20;
        let c = collection(p as u32, 40.0, 9.0);
        let s: Vec<f64> = (0..p)
            .map(|i| 1.0 + 0.5 * i as f64 / (p - 1) as f64)
            .collect();
        let sigma = DMatrix::from_fn(p, p, |i, j| s[i] * s[j] * if i == j { 1.0 } else { 0.5 });
        let chol = sigma.clone().cholesky().unwrap().l();
        let acc = simulate(&c, &chol, 45_000, 11);
        let sd = c.mean_entry_noise_sd(acc.count);
        assert!((0.09..0.11).contains(&sd), "σ_n = {sd}");
        let outcome = cross_validate(&c, &acc, &CrossValidation::default()).unwrap();
        assert_eq!(outcome.folds_used, 5);
        match outcome.chosen {
            Candidate::None
            | Candidate::Noise {
                kind: ThresholdKind::Hard,
                ..
            }
            | Candidate::Adaptive {
                kind: ThresholdKind::Hard,
                ..
            } => {}
            Candidate::Structured(Structure::Banded { bandwidth }) if bandwidth + 1 >= p => {}
            other => panic!("dense truth: CV chose {other:?}"),
        }
        assert_eq!(outcome.diagonal_shrinkage, 0.0);
        // The released matrix is the raw average, entry for entry.
        let raw = crate::estimate::average(&c, &acc.sums(), acc.count).unwrap();
        assert_eq!(
            default_estimate(&c, &acc),
            raw,
            "chosen {:?}",
            outcome.chosen
        );
    }

    #[test]
    fn cv_thresholds_hard_when_the_truth_is_diagonal() {
        // Σ = I, p = 12, R = 4, ε = 1, n = 5 000. Every off-diagonal average is pure
        // noise of sd σ_n = 16σ/√5000 ≈ 1.35 (σ ≈ 6.0 at ε = 1): keeping it costs σ_n²
        // per entry, zeroing it costs nothing, so the loss is minimised by removing
        // as much as possible: a threshold of at least 2·σ_n·√(log p) (c ≥ 2; with 66
        // off-diagonal noise entries, a threshold c·σ_n√(log 12) = 1.58c·σ_n keeps a
        // fraction 2Φ(−1.58c) of them, at least 11% for c < 1, which the held-out loss
        // sees), or banding at a small bandwidth (bandwidth k keeps k(2p − k − 1)/2 of
        // the 66 entries: 11 at k = 1).
        let p = 12;
        let c = collection(p as u32, 1.0, 4.0);
        let chol = DMatrix::identity(p, p);
        let acc = simulate(&c, &chol, 5_000, 5);
        let outcome = cross_validate(&c, &acc, &CrossValidation::default()).unwrap();
        let none_loss = outcome.losses[0].1;
        let best = outcome
            .losses
            .iter()
            .map(|&(_, l)| l)
            .fold(f64::INFINITY, f64::min);
        // Every loss carries the same test-fold noise constant (≈ 144·5σ_n², five times
        // the per-fold-of-five variance), so only the order is asserted here.
        assert!(best < none_loss, "best {best} vs none {none_loss}");
        assert!(outcome.chosen != Candidate::None);
        let r = resolve(&ThresholdRule::default(), ThresholdKind::Hard, &c, &acc);
        assert!(!r.include_diagonal);
        let sd = c.mean_entry_noise_sd(acc.count);
        match outcome.chosen {
            Candidate::Structured(Structure::Banded { bandwidth }) => {
                assert!(bandwidth <= 1, "{:?}", outcome.chosen)
            }
            Candidate::Structured(_) => panic!("Σ = I: CV chose {:?}", outcome.chosen),
            _ => assert!(r.thresholds.summary(p) >= 1.5 * sd, "{:?}", outcome.chosen),
        }
        // Applied to the full average, the chosen rule zeroes at least 80% of the noise.
        let m = default_estimate(&c, &acc);
        let zeroed = triangle_pairs(p)
            .filter(|&(i, j)| i != j && m[(i, j)] == 0.0)
            .count();
        let off = p * (p - 1) / 2;
        assert!(zeroed * 10 >= off * 8, "{zeroed} of {off} zeroed");
    }

    #[test]
    fn cv_averages_bands_when_the_truth_is_stationary_and_the_noise_is_large() {
        // Σ_ij = 0.6^|i−j| (seed 001 Model 1), p = 20, R = √40, ε = 2, n = 200 000:
        // σ ≈ 3.4, σ_n = 40σ/√n ≈ 0.30 (checked below), above every true entry beyond
        // band 2. Any unstructured estimate (each entry kept with its noise or zeroed)
        // has squared Frobenius error at least the oracle's
        // 2Σ_h (p − h)·min(0.36^h, σ_n²) ≈ 9.1 (bands 1–2 are at the noise level,
        // 3–19 below it). Toeplitz averaging at bandwidth k leaves noise σ_n²/(p − h)
        // on each of the 2(p − h) entries of band h ≤ k (2σ_n² ≈ 0.18 per band) and a
        // bias 2Σ_{h>k}(p − h)·0.36^h, the diagonal adds at most 20σ_n² ≈ 1.8 (β = 0)
        // or σ_n² (β = 1): at every k the total is below 0.18·19 + 1.8 + 0.1 ≈ 5.3,
        // about 1.1 at the best k ≈ 5. So CV must choose Toeplitz averaging, and its
        // estimate must beat the unstructured CV and stay under 6.
        let p = 20;
        let c = collection(p as u32, 2.0, 40f64.sqrt());
        let sigma = DMatrix::from_fn(p, p, |i, j| 0.6f64.powi(i.abs_diff(j) as i32));
        let chol = sigma.clone().cholesky().unwrap().l();
        let acc = simulate(&c, &chol, 200_000, 21);
        let sd = c.mean_entry_noise_sd(acc.count);
        assert!((0.27..0.33).contains(&sd), "σ_n = {sd}");
        let outcome = cross_validate(&c, &acc, &CrossValidation::default()).unwrap();
        assert!(
            matches!(
                outcome.chosen,
                Candidate::Structured(Structure::Toeplitz { .. })
            ),
            "chosen {:?}",
            outcome.chosen
        );
        let structured = (default_estimate(&c, &acc) - &sigma).norm_squared();
        let unstructured_options = crate::estimate::EstimateOptions {
            rule: ThresholdRule::CrossValidated(CrossValidation {
                banding: false,
                toeplitz: false,
                ..Default::default()
            }),
            skip_psd_projection: true,
            ..Default::default()
        };
        let unstructured = crate::estimate::estimate(&c, &acc, &unstructured_options)
            .unwrap()
            .matrix;
        let unstructured = (unstructured - &sigma).norm_squared();
        assert!(
            structured < 6.0 && structured < unstructured,
            "Toeplitz {structured} vs unstructured {unstructured}: {:?} β={} losses {:?}",
            outcome.chosen,
            outcome.diagonal_shrinkage,
            outcome.losses
        );
    }

    #[test]
    fn cv_does_not_average_bands_that_are_not_constant() {
        // Two blocks: variables 0..10 equicorrelated at 0.8, variables 10..20
        // independent (unit variances). p = 20, R = 9, ε = 40, n = 45 000: σ_n ≈ 0.10
        // as in the dense test. Band h holds 10 − h entries of 0.8 out of 20 − h, so its
        // mean is 0.8·(10 − h)/(20 − h) and Toeplitz averaging misplaces every entry of
        // the band by ≈ 0.4 (bias ≈ 0.8²·(10 − h)(10)/(20 − h) per band, ≥ 30 in total
        // at bandwidth 9) against a noise saving of at most 380σ_n² ≈ 4. Banding below
        // 9 drops true entries of 0.8. A hard threshold around 3σ_n keeps the block
        // and zeroes the rest. So CV must not choose a structure, and its estimate has
        // the block and nothing else.
        let p = 20;
        let c = collection(p as u32, 40.0, 9.0);
        let sigma = DMatrix::from_fn(p, p, |i, j| {
            if i == j {
                1.0
            } else if i < 10 && j < 10 {
                0.8
            } else {
                0.0
            }
        });
        let chol = sigma.clone().cholesky().unwrap().l();
        let acc = simulate(&c, &chol, 45_000, 31);
        let outcome = cross_validate(&c, &acc, &CrossValidation::default()).unwrap();
        assert!(
            !matches!(outcome.chosen, Candidate::Structured(_)),
            "chosen {:?}",
            outcome.chosen
        );
        let m = default_estimate(&c, &acc);
        for (i, j) in triangle_pairs(p).filter(|(i, j)| i != j) {
            // Kept block entries are within 5σ_n + the soft shrinkage (≤ 0.6) of 0.8;
            // the rest are zero or, if a noise entry survives, small.
            if sigma[(i, j)] != 0.0 {
                assert!((m[(i, j)] - 0.8).abs() < 0.6, "({i}, {j}) = {}", m[(i, j)]);
            } else {
                assert!(m[(i, j)].abs() < 0.5, "({i}, {j}) = {}", m[(i, j)]);
            }
        }
    }

    #[test]
    fn a_structure_must_win_by_one_standard_error() {
        // Differences −1, −1, −1, −1, −1: mean −1, se 0 → chosen.
        assert!(structure_earns_its_place(&[9.0; 5], &[10.0; 5]));
        // Differences 1.4, −3.4, 1.4, −3.4, −1: mean −1, sd 2.4, se 2.4/√5 ≈ 1.07 →
        // mean + se > 0: not chosen although the mean loss is lower.
        let t = [10.0; 5];
        assert!(!structure_earns_its_place(&[11.4, 6.6, 11.4, 6.6, 9.0], &t));
        // Differences 1, −3, 1, −3, −1: mean −1, sd 2, se ≈ 0.89 → chosen.
        assert!(structure_earns_its_place(&[11.0, 7.0, 11.0, 7.0, 9.0], &t));
        // Worse on average: never.
        assert!(!structure_earns_its_place(&[11.0; 5], &t));
        // Fewer than two folds: no standard error, no structure.
        assert!(!structure_earns_its_place(&[1.0], &[10.0]));
    }

    #[test]
    fn cv_without_usable_folds_keeps_everything() {
        let c = collection(2, 1.0, 1.0);
        let mut acc = Accumulator::new(3, 5);
        acc.add(0, &[1, 2, 3]);
        acc.add(0, &[1, 2, 3]);
        assert!(cross_validate(&c, &acc, &CrossValidation::default()).is_none());
        let r = resolve(&ThresholdRule::default(), ThresholdKind::Hard, &c, &acc);
        assert_eq!(r.thresholds, Thresholds::Uniform(0.0));
        assert!(r.name.contains("none"), "{}", r.name);
    }
}
