//! Stein's unbiased risk estimate of an eigenvalue-shrinkage estimator
//! ([`sure_spectral`]) and its basis, one eigendecomposition for many shrinkers.

use super::*;

/// Stein's unbiased estimate of the Frobenius risk `E‖f(Y) − Σ‖_F²` of the spectral
/// estimator `f(Y) = U·diag(h(λ))·Uᵀ` (`h` applied to each eigenvalue of `Y`, `dh` its
/// derivative), under this module's noise model.
///
/// Derivation. In packed coordinates `y_k` (iid noise `σ_n²`) the Frobenius norm
/// weighs a diagonal entry 1 and an off-diagonal one 2 (`Σ w_k = p²`), so Stein's
/// identity gives `SURE = ‖f(Y) − Y‖_F² − p²σ_n² + 2σ_n²·Σ_k w_k ∂f_k/∂y_k`. The
/// derivative of a spectral function is `Df[H] = U(Γ ∘ UᵀHU)Uᵀ` with
/// `Γ_ab = (h(λ_a) − h(λ_b))/(λ_a − λ_b)` and `Γ_aa = h'(λ_a)` (Candès, Sing-Long &
/// Trzasko 2013 for singular values; the symmetric analogue). Moving packed entry
/// `(i, j)`, `i < j`, moves `Y` by `E_ij + E_ji`, so
/// `Σ_k w_k ∂f_k/∂y_k = 2·tr(Df) − Σ_i (Df[E_ii])_ii` with
/// `tr(Df) = Σ_a h'(λ_a) + Σ_{a<b} Γ_ab` (trace over symmetric matrices) and
/// `(Df[E_ii])_ii = Σ_ab U_ia²U_ib²Γ_ab`. For `h(λ) = λ` this gives `p²` and
/// `SURE = p²σ_n² = E‖W‖_F²`. (With GOE noise the weights would be uniform and the
/// divergence `2·tr(Df)`.)
///
/// Unbiased when `h` is continuous and piecewise differentiable, e.g. the balanced or
/// Frobenius shrinker over a fixed level (both are 0 at the edge) or `max(λ, 0)`; a
/// jump in `h` (the operator shrinker, a margin) adds a term this omits.
pub fn sure_spectral(
    y: &DMatrix<f64>,
    sigma_n: f64,
    h: impl Fn(f64) -> f64,
    dh: impl Fn(f64) -> f64,
) -> Result<f64, EstimateError> {
    check_input(y, sigma_n, &RankRule::Fixed(0))?;
    let (values, u) = symmetric_eigen(y)?;
    let basis = SureBasis::new(values, &u);
    let hv: Vec<f64> = basis.values.iter().map(|&l| h(l)).collect();
    let dv: Vec<f64> = basis.values.iter().map(|&l| dh(l)).collect();
    Ok(basis.risk(sigma_n, &hv, &dv))
}

/// What [`sure_spectral`] needs from one eigendecomposition, so that many shrinkers
/// can be scored for `O(p²)` each: the eigenvalues and `M = (U∘U)ᵀ(U∘U)`.
pub(super) struct SureBasis {
    pub(super) values: Vec<f64>,
    pub(super) m: DMatrix<f64>,
}

impl SureBasis {
    pub(super) fn new(values: Vec<f64>, u: &faer::Mat<f64>) -> Self {
        let p = values.len();
        let sq = DMatrix::<f64>::from_fn(p, p, |i, a| u[(i, a)] * u[(i, a)]);
        let m = sq.transpose() * &sq;
        SureBasis { values, m }
    }

    /// SURE for `h` given by its values `hv` and derivatives `dv` at the eigenvalues.
    /// `‖f(Y) − Y‖_F² = Σ_a (h(λ_a) − λ_a)²` (same eigenvectors).
    pub(super) fn risk(&self, sigma_n: f64, hv: &[f64], dv: &[f64]) -> f64 {
        let values = &self.values;
        let p = values.len();
        // Γ_ab; coincident eigenvalues take the mean derivative (the limit for smooth h).
        let scale = values.iter().fold(1.0f64, |m, l| m.max(l.abs()));
        let gamma = |a: usize, b: usize| -> f64 {
            let gap = values[a] - values[b];
            if a == b {
                dv[a]
            } else if gap.abs() <= 1e-12 * scale {
                0.5 * (dv[a] + dv[b])
            } else {
                (hv[a] - hv[b]) / gap
            }
        };
        let mut trace = 0.0;
        // Σ_i Σ_ab U_ia²U_ib²Γ_ab = Σ_ab M_ab Γ_ab.
        let mut diag_part = 0.0;
        for (a, &da) in dv.iter().enumerate() {
            trace += da;
            diag_part += self.m[(a, a)] * da;
            for b in a + 1..p {
                let g = gamma(a, b);
                trace += g;
                diag_part += 2.0 * self.m[(a, b)] * g;
            }
        }
        let divergence = 2.0 * trace - diag_part;
        let s2 = sigma_n * sigma_n;
        let fit: f64 = hv.iter().zip(values).map(|(h, l)| (h - l).powi(2)).sum();
        fit - (p * p) as f64 * s2 + 2.0 * s2 * divergence
    }
}
