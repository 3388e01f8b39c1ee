//! The threshold operator itself: hard or soft, one λ or one per entry, applied to a
//! symmetric matrix; and the diagonal shrinkage toward the mean variance.

use ldpcov_privacy::layout::triangle_pairs;
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

/// Replaces each diagonal entry `s_ii` of a packed matrix by
/// `(1 − beta)·s_ii + beta·mean_k s_kk`.
pub(crate) fn shrink_packed_diagonal(p: usize, packed: &mut [f64], beta: f64) {
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
pub(crate) fn shrink_diagonal(m: &mut DMatrix<f64>, beta: f64) {
    let p = m.nrows();
    if beta == 0.0 || p == 0 {
        return;
    }
    let mean = m.trace() / p as f64;
    for i in 0..p {
        m[(i, i)] = (1.0 - beta) * m[(i, i)] + beta * mean;
    }
}
