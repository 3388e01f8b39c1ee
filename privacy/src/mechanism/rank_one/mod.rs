//! The parameters of the rank-one PrivUnitG mechanism (pure ε-LDP, reports of `p`
//! numbers): the cap threshold γ, the moments the estimator divides by, the lattice
//! slack and the nominal ε the exact sampler runs at, and the integer lifting of a
//! clipped vector to the unit sphere; [`RankOneReport`] is the mechanism a collection
//! holds (what is sent, summed and unbiased).
//!
//! Everything here is a pure function of `(p, ε, cap)` in deterministic f64 (`libm`
//! and IEEE arithmetic only), so a device and the aggregator derive the same numbers
//! bit for bit. The derivations are in `docs/PRIVACY.md`, section "The rank-one
//! mechanism".
//!
//! # The mechanism
//!
//! The clipped `u ∈ R^p`, `‖u‖ ≤ 1`, is lifted to `ũ = (u, √(1 − ‖u‖²))` on the unit
//! sphere of `R^{p+1}`. The report `y ∈ R^{p+1}` has density `∝ φ(y)·w(⟨y, ũ⟩)`, `φ`
//! the standard normal density, `w = 1` on the cap and `r = e^{−ε}` off it; the cap is
//! `|t| ≥ γ` ([`Cap::Symmetric`]) or `t ≥ γ` ([`Cap::OneSided`]). With `q` the cap's
//! normal mass, the normaliser `Z = q + r(1 − q)` does not depend on `ũ`, so two
//! inputs' densities differ by at most `1/r = e^ε`. Writing `y = tũ + z`, `t` has
//! density `φ(t)w(t)/Z` and `z ~ N(0, I − ũũᵀ)` is independent of it, so
//! `E[yyᵀ] = I + κũũᵀ` with `κ = E[t²] − 1` and (one-sided) `E[y] = c·ũ`, `c = E[t]`.
//!
//! The exact sampler (`ldpcov_noise::RankOneSampler`) draws `y` on the lattice
//! `2^−`[`LATTICE_BITS`]` Z^{p+1}` and takes `ũ` on the grid `2^−`[`INPUT_BITS`]; the
//! cap mass then moves with `ũ` by at most [`RankOneParams::eta`], which
//! [`nominal_epsilon`] charges to ε.
//!
//! ```
//! use ldpcov_privacy::mechanism::rank_one::{Cap, RankOneParams, grid_input, lift_to_sphere};
//!
//! let params = RankOneParams::new(100, 1.0, Cap::Symmetric)?;
//! assert!((params.gamma - 1.255).abs() < 0.01);
//! // The slack the lattice costs is tiny, and charged: ε_nominal + slack ≤ ε.
//! assert!(params.nominal_epsilon < 1.0 && params.nominal_epsilon > 1.0 - 1e-8);
//! assert!(params.privacy_loss_bound <= 1.0);
//!
//! // A clipped vector on the input grid, lifted to the sphere exactly in integers.
//! let v = lift_to_sphere(&grid_input(&[0.6, 0.0])?)?;
//! assert_eq!(v.len(), 3);
//! # Ok::<(), ldpcov_privacy::mechanism::rank_one::RankOneError>(())
//! ```

pub mod report;

pub use report::{RANK_ONE_GRID_BITS, RANK_ONE_WIRE_MAX, RankOneReport};

use crate::limits::{MAX_DIM, MAX_RANK_ONE_EPSILON};
use ldpcov_accounting::calibration::std_normal_cdf;
use thiserror::Error;

/// `K`: the sampler's lattice is `h·Z^{p+1}`, `h = 2^−K`; each coordinate is the exact
/// discrete Gaussian with σ = `2^K` lattice units (σ² = `2^{2K}`, an exact integer).
pub const LATTICE_BITS: u32 = 40;
/// `m`: the lifted input `ũ` is given as integers on the grid `2^−m`.
pub const INPUT_BITS: u32 = 40;
/// γ is rounded to a multiple of `2^−GAMMA_BITS` (a public dyadic, so the cap test
/// `Σ yᵢũᵢ ≥ γ` is an exact integer comparison).
pub const GAMMA_BITS: u32 = 16;
/// The wire step `Δ_w = 2^−WIRE_STEP_BITS`: each lattice coordinate is re-quantised to
/// it with a triangular dither (`ldpcov_noise::TriangularDither`) and sent as an i16,
/// range `±32 767·Δ_w ≈ ±16`.
pub const WIRE_STEP_BITS: u32 = 11;

/// √(2π).
const SQRT_2PI: f64 = 2.506_628_274_631_000_7;
/// Relative margin by which the computed slack is inflated before it is charged, far
/// above the f64 rounding of its evaluation (a few ulps).
const SLACK_MARGIN: f64 = 1e-6;
/// Absolute margin added to the cap-mass deviation η: covers the f64 error of `q`
/// (`erfc` is accurate to a few ulps) and the discrete Gaussian's normaliser and
/// range-conditioning terms (below `10^−10^20` at `K = 40`).
const ETA_MARGIN: f64 = 1e-15;
/// ε_nominal is rounded down to a multiple of `2^−NOMINAL_EPSILON_BITS` (so the
/// off-cap Bernoulli(e^{−ε_nominal}) has a small exact rational exponent).
const NOMINAL_EPSILON_BITS: i32 = 40;
/// Golden-section steps of the γ search (the bracket shrinks by 0.618 each: 2^−66).
const GAMMA_SEARCH_STEPS: usize = 96;
/// The bracket γ is searched in.
const GAMMA_SEARCH_RANGE: (f64, f64) = (0.05, 8.0);

/// Why rank-one parameters or an input could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RankOneError {
    /// p out of range.
    #[error("dimension {0} must be between 1 and {MAX_DIM}")]
    Dim(usize),
    /// ε not in (0, [`MAX_RANK_ONE_EPSILON`]].
    #[error(
        "epsilon {0} must be a positive number of at most {MAX_RANK_ONE_EPSILON} for the rank-one mechanism"
    )]
    Epsilon(f64),
    /// An input coordinate that is NaN, infinite or outside [−1, 1].
    #[error("input[{index}] = {value} must be a finite number in [-1, 1] (clip first)")]
    InputValue {
        /// Its position.
        index: usize,
        /// The value.
        value: f64,
    },
    /// A grid coordinate outside `[−2^m, 2^m]`.
    #[error("grid input[{index}] = {value} is outside ±2^{INPUT_BITS}")]
    GridValue {
        /// Its position.
        index: usize,
        /// The value.
        value: i64,
    },
    /// The input's norm exceeds 1 (it was not clipped).
    #[error("the input's squared norm {norm2} grid units² exceeds 2^{twice_m}: clip it first", twice_m = 2 * INPUT_BITS)]
    NotClipped {
        /// `Σ vᵢ²` in grid units.
        norm2: u128,
    },
}

/// The shape of the cap on which the output's density is not damped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cap {
    /// `|⟨y, ũ⟩| ≥ γ`: `E[yyᵀ] = I + κũũᵀ`, `E[y] = 0` (the second moment only).
    Symmetric,
    /// `⟨y, ũ⟩ ≥ γ`: `E[y] = c·ũ` and `E[yyᵀ] = I + κ₁ũũᵀ` from one report (mean and
    /// covariance).
    OneSided,
}

impl Cap {
    /// Half-lines per coordinate in the lattice hybrid argument (and caps per
    /// direction): 2 symmetric, 1 one-sided.
    fn sides(self) -> f64 {
        match self {
            Cap::Symmetric => 2.0,
            Cap::OneSided => 1.0,
        }
    }
}

/// The standard normal density φ(x).
fn normal_density(x: f64) -> f64 {
    libm::exp(-0.5 * x * x) / SQRT_2PI
}

/// The upper tail Φ̄(x) = P(N(0,1) ≥ x).
fn normal_tail(x: f64) -> f64 {
    std_normal_cdf(-x)
}

/// The law of `t = ⟨y, ũ⟩` (density `φ(t)w(t)/Z`) for one γ, `r` and cap: its
/// normaliser and moments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapMoments {
    /// `q`, the cap's standard normal mass: `2Φ̄(γ)` or `Φ̄(γ)`.
    pub cap_mass: f64,
    /// `Z = q + r(1 − q)`, the normaliser (the acceptance of one round of the continuous
    /// whole-vector rejection sampler of `docs/PRIVACY.md` §8.1).
    pub acceptance: f64,
    /// `κ = E[t²] − 1`: `2γφ(γ)(1 − r)/Z` symmetric, `γφ(γ)(1 − r)/Z` one-sided.
    pub kappa: f64,
    /// `c = E[t]`: `(1 − r)φ(γ)/Z` one-sided, 0 symmetric.
    pub mean_scale: f64,
    /// `e₄ = E[t⁴] − 3(E[t²])²`, the excess fourth moment that enters the variance of
    /// one report's entries.
    pub excess_fourth_moment: f64,
}

impl CapMoments {
    /// The moments for threshold `gamma ≥ 0`, off-cap weight `r = e^{−epsilon}` and `cap`.
    ///
    /// With `A_k = ∫_cap t^k φ(t) dt` (`A₀ = q`, `A₁ = φ(γ)` one-sided, `A₂ = γφ + Φ̄`,
    /// `A₄ = (γ³ + 3γ)φ + 3Φ̄` per half-line) and the full-line moments 1, 0, 1, 3:
    /// `E[t^k] = (A_k + r(M_k − A_k))/Z`.
    pub fn new(gamma: f64, epsilon: f64, cap: Cap) -> Self {
        let r = libm::exp(-epsilon);
        let sides = cap.sides();
        let (dens, tail) = (normal_density(gamma), normal_tail(gamma));
        let cap_mass = sides * tail;
        let a2 = sides * (gamma * dens + tail);
        let a4 = sides * ((gamma * gamma * gamma + 3.0 * gamma) * dens + 3.0 * tail);
        let a1 = match cap {
            Cap::Symmetric => 0.0,
            Cap::OneSided => dens,
        };
        let z = cap_mass + r * (1.0 - cap_mass);
        let m2 = (a2 + r * (1.0 - a2)) / z;
        let m4 = (a4 + r * (3.0 - a4)) / z;
        CapMoments {
            cap_mass,
            acceptance: z,
            kappa: sides * gamma * dens * (1.0 - r) / z,
            mean_scale: (1.0 - r) * a1 / z,
            excess_fourth_moment: m4 - 3.0 * m2 * m2,
        }
    }

    /// Variance of entry `(i, j)` of one report's unbiased estimate `(yyᵀ − I)/κ` of
    /// `uuᵀ`, for an input with `ũᵢ² = a_i2`, `ũⱼ² = a_j2`:
    /// `[(1 + κaᵢ²)(1 + κaⱼ²) + (κ² + e₄)aᵢ²aⱼ²]/κ²` off the diagonal and
    /// `[2(1 + κaᵢ²)² + e₄aᵢ⁴]/κ²` on it (Isserlis for `N(0, I + κũũᵀ)` plus the
    /// excess fourth moment of `t` along `ũ`).
    pub fn second_moment_entry_variance(&self, a_i2: f64, a_j2: f64, diagonal: bool) -> f64 {
        let k = self.kappa;
        let e4 = self.excess_fourth_moment;
        let v = if diagonal {
            let s = 1.0 + k * a_i2;
            2.0 * s * s + e4 * a_i2 * a_i2
        } else {
            (1.0 + k * a_i2) * (1.0 + k * a_j2) + (k * k + e4) * a_i2 * a_j2
        };
        v / (k * k)
    }

    /// Variance of entry `i` of one report's unbiased mean estimate `y/c` (one-sided):
    /// `(1 + (κ − c²)aᵢ²)/c²`. Infinite for the symmetric cap (no mean).
    pub fn mean_entry_variance(&self, a_i2: f64) -> f64 {
        let c = self.mean_scale;
        (1.0 + (self.kappa - c * c) * a_i2) / (c * c)
    }

    /// Worst case over `‖u‖² = s ∈ [0, 1]` of one report's total squared error:
    /// `E‖(yyᵀ − I)/κ − uuᵀ‖²_F = [p(p+1) + 2κs(p+1) + (2κ² + e₄)s²]/κ²` over the `p × p`
    /// block, plus (one-sided) the mean's `E‖y/c − u‖² = (p + (κ − c²)s)/c²`.
    fn worst_case_total_variance(&self, dim: usize, cap: Cap) -> f64 {
        let p = dim as f64;
        let k = self.kappa;
        let mut a = p * (p + 1.0) / (k * k);
        let mut b = 2.0 * (p + 1.0) / k;
        let c2 = 2.0 + self.excess_fourth_moment / (k * k);
        if cap == Cap::OneSided {
            let c = self.mean_scale;
            a += p / (c * c);
            b += (k - c * c) / (c * c);
        }
        let f = |s: f64| a + b * s + c2 * s * s;
        let mut worst = f(0.0).max(f(1.0));
        if c2 < 0.0 {
            let vertex = -b / (2.0 * c2);
            if vertex > 0.0 && vertex < 1.0 {
                worst = worst.max(f(vertex));
            }
        }
        worst
    }
}

impl CapMoments {
    /// One report's total squared error over the `p × p` second-moment block (both
    /// triangles), for an input with `‖u‖² = s`:
    /// `E‖(yyᵀ − I)/κ − uuᵀ‖²_F = [p(p+1) + 2κs(p+1) + (2κ² + e₄)s²]/κ²` (the sum of
    /// [`second_moment_entry_variance`](Self::second_moment_entry_variance) over the
    /// block, with `Σ aᵢ² = s`).
    pub fn second_moment_total_variance(&self, dim: usize, s: f64) -> f64 {
        let p = dim as f64;
        let k = self.kappa;
        (p * (p + 1.0)
            + 2.0 * k * s * (p + 1.0)
            + (2.0 * k * k + self.excess_fourth_moment) * s * s)
            / (k * k)
    }
}

/// The γ on `[0.05, 8]` minimising `objective` (golden-section search, a fixed number
/// of steps: deterministic).
fn golden_section_minimum(objective: impl Fn(f64) -> f64) -> f64 {
    let inv_phi = 0.618_033_988_749_894_8;
    let (mut lo, mut hi) = GAMMA_SEARCH_RANGE;
    let mut x1 = hi - inv_phi * (hi - lo);
    let mut x2 = lo + inv_phi * (hi - lo);
    let (mut f1, mut f2) = (objective(x1), objective(x2));
    for _ in 0..GAMMA_SEARCH_STEPS {
        if f1 <= f2 {
            hi = x2;
            (x2, f2) = (x1, f1);
            x1 = hi - inv_phi * (hi - lo);
            f1 = objective(x1);
        } else {
            lo = x1;
            (x1, f1) = (x2, f2);
            x2 = lo + inv_phi * (hi - lo);
            f2 = objective(x2);
        }
    }
    0.5 * (lo + hi)
}

/// The γ maximising κ (the criterion of the issue): 1.125 / 1.255 / 1.530 / 2.097 /
/// 3.153 symmetric and 1.069 / 1.155 / 1.373 / 1.906 / 2.982 one-sided at
/// ε = 0.5 / 1 / 2 / 4 / 8. Not rounded.
pub fn kappa_maximising_gamma(epsilon: f64, cap: Cap) -> f64 {
    golden_section_minimum(|g| -CapMoments::new(g, epsilon, cap).kappa)
}

/// The γ minimising the worst-case (over `‖u‖ ∈ [0, 1]`) total variance of one
/// report's unbiased estimate at dimension `dim` (see
/// [`CapMoments::second_moment_entry_variance`]; one-sided: plus the mean's). Its
/// leading term `p(p+1)/κ²` makes it the κ-maximiser for large p; at small p the
/// fourth-moment terms pull it down (p = 1, ε = 8: 2.83 instead of 3.15, 28 % less
/// variance). Not rounded.
pub fn variance_optimal_gamma(dim: usize, epsilon: f64, cap: Cap) -> f64 {
    golden_section_minimum(|g| CapMoments::new(g, epsilon, cap).worst_case_total_variance(dim, cap))
}

/// `η`: a bound on `|Q(ũ) − q|`, how far the lattice sampler's cap mass `Q(ũ)` can be
/// from the continuous `q`, for any lifted input of [`lift_to_sphere`] in dimension
/// `dim` (so `dim + 1` coordinates).
///
/// `sides·[(p+1)·h·φ(0) + φ(1)·(1 − ρ_min)/ρ_min] + margin`, `h = 2^−K`,
/// `ρ_min = √(1 − 2^{1−m})`: the hybrid argument (one coordinate at a time from the
/// discrete to the continuous Gaussian, each costing at most `h·φ(0)` per half-line)
/// plus the norm term `|q(γ/ρ) − q(γ)|`; see `docs/PRIVACY.md`.
pub fn cap_mass_deviation_bound(dim: usize, cap: Cap) -> f64 {
    let h = libm::ldexp(1.0, -(LATTICE_BITS as i32));
    let coords = dim as f64 + 1.0;
    let rho_min = libm::sqrt(1.0 - libm::ldexp(1.0, 1 - INPUT_BITS as i32));
    let lattice = coords * h * normal_density(0.0);
    let norm = normal_density(1.0) * (1.0 - rho_min) / rho_min;
    cap.sides() * (lattice + norm) * (1.0 + SLACK_MARGIN) + ETA_MARGIN
}

/// Absolute margin added to the privacy-loss bound for the f64 evaluation of
/// `ln(p̂/(1 − p̂)) + ln((1 − q)/q)` (a few ulps of numbers below 40).
const LOSS_MARGIN: f64 = 1e-13;
/// Relative amount by which `p*` is lowered before it is rounded down to `2^−64`: far
/// above its f64 error, so `p̂/(1 − p̂) < e^{ε_n}·q/(1 − q)` holds for the real numbers.
const CAP_PROBABILITY_MARGIN: f64 = 1e-12;

/// The privacy loss of the lattice mechanism whose cap component has the exact weight
/// `cap_probability` (`p̂`, a multiple of `2^−64`), for a cap mass `Q(v)` known to lie
/// in `[q − η, q + η]` for every input: the largest of the four ratios
/// `P(k | v)/P(k | v′)`, with `θ = p̂/(1 − p̂)`:
///
/// * `k` in the cap of `v`, off the cap of `v′`: `θ·(1 − q + η)/(q − η)`;
/// * off the cap of `v`, in the cap of `v′`: `(q + η)/(θ(1 − q − η))`;
/// * in both caps: `(q + η)/(q − η)`; off both: `(1 − q + η)/(1 − q − η)`;
///
/// in logarithms, the slack terms inflated by a relative margin and the whole by an
/// absolute one for the f64 rounding (`docs/PRIVACY.md` §8.3).
pub fn privacy_loss_bound(cap_probability: f64, cap_mass: f64, eta: f64) -> f64 {
    let (q, p) = (cap_mass, cap_probability);
    let m = 1.0 + SLACK_MARGIN;
    let log_theta = libm::log(p) - libm::log1p(-p);
    let log_odds_off = libm::log1p(-q) - libm::log(q);
    let in_out = log_theta + log_odds_off + lattice_slack(q, eta);
    let out_in =
        -log_theta - log_odds_off + (libm::log1p(eta / q) + libm::log1p(eta / (1.0 - q - eta))) * m;
    let both_in = libm::log1p(2.0 * eta / (q - eta)) * m;
    let both_out = libm::log1p(2.0 * eta / (1.0 - q - eta)) * m;
    in_out.max(out_in).max(both_in).max(both_out) + LOSS_MARGIN
}

/// `ln[q/(q − η)] + ln[(1 − q + η)/(1 − q)]`, inflated by a relative margin for its own
/// rounding: what the lattice adds to `ε_n` in the worst ratio (a cap point of one
/// input off the cap of another). It does not depend on ε.
fn lattice_slack(cap_mass: f64, eta: f64) -> f64 {
    let q = cap_mass;
    (libm::log1p(eta / (q - eta)) + libm::log1p(eta / (1.0 - q))) * (1.0 + SLACK_MARGIN)
}

/// The ε the mixture's weight is set for, so that the whole privacy loss, lattice slack
/// included, is at most `epsilon`: `epsilon − slack(q, η)`, lowered by `2^−40` (which
/// covers the f64 subtraction) and rounded down to a multiple of `2^−40`.
pub fn nominal_epsilon(epsilon: f64, cap_mass: f64, eta: f64) -> f64 {
    let nominal = epsilon - lattice_slack(cap_mass, eta);
    libm::ldexp(
        libm::floor(libm::ldexp(nominal, NOMINAL_EPSILON_BITS)) - 1.0,
        -NOMINAL_EPSILON_BITS,
    )
}

/// `P = p̂·2^64`, the cap component's weight in units of `2^−64`:
/// `p* = q/(q + r(1 − q))`, `r = e^{−ε_n}` (the continuous mechanism's cap
/// probability, `e^{ε_n}q/(e^{ε_n}q + 1 − q)`), lowered by a relative `10^−12` and
/// rounded down, so `p̂/(1 − p̂) < e^{ε_n}·q/(1 − q)`. At least 1 and at most
/// `2^64 − 2^11`.
pub fn cap_probability_units(nominal_epsilon: f64, cap_mass: f64) -> u64 {
    let q = cap_mass;
    let r = libm::exp(-nominal_epsilon);
    let p = q / (q + r * (1.0 - q)) * (1.0 - CAP_PROBABILITY_MARGIN);
    // An f64 below 1 times 2^64: an integer-valued f64 (≤ 53 significant bits) or
    // a fraction, floored; the conversion saturates.
    let units = libm::floor(libm::ldexp(p, 64)) as u64;
    units.clamp(1, u64::MAX - ((1 << 11) - 1))
}

/// The derived parameters of one rank-one collection `(p, ε, cap)`.
#[derive(Debug, Clone, PartialEq)]
pub struct RankOneParams {
    /// p.
    pub dim: usize,
    /// The collection's ε: the total privacy loss of one report, slack included.
    pub epsilon: f64,
    /// The cap.
    pub cap: Cap,
    /// γ in units of `2^−`[`GAMMA_BITS`]: the exact threshold the sampler compares with.
    pub gamma_units: u64,
    /// γ = `gamma_units·2^−GAMMA_BITS` (exact in f64): [`variance_optimal_gamma`] rounded.
    pub gamma: f64,
    /// The ε the mixture's weight is set for ([`nominal_epsilon`]): the cap probability
    /// is that of the continuous mechanism with off-cap weight `r = e^{−nominal_epsilon}`.
    pub nominal_epsilon: f64,
    /// `P = p̂·2^64`: the sampler keeps its cap component with probability exactly
    /// `p̂` ([`cap_probability_units`]).
    pub cap_probability_units: u64,
    /// `p̂ = P·2^−64` (exact in f64).
    pub cap_probability: f64,
    /// The tilt λ of the cap component's proposal: γ rounded to the nearest integer,
    /// at least 1 (the proposal is centred at `λũ`).
    pub tilt: u32,
    /// η, the bound on the lattice's cap-mass deviation ([`cap_mass_deviation_bound`]).
    pub eta: f64,
    /// [`privacy_loss_bound`] of the weight `p̂`: at most `epsilon`.
    pub privacy_loss_bound: f64,
    /// The law of `⟨y, ũ⟩` at γ and the nominal ε: `q`, `Z`, `κ`, `c`, `e₄`.
    pub moments: CapMoments,
}

impl RankOneParams {
    /// The parameters for dimension `dim`, privacy loss `epsilon` and `cap`.
    pub fn new(dim: usize, epsilon: f64, cap: Cap) -> Result<Self, RankOneError> {
        if dim == 0 || dim > MAX_DIM {
            return Err(RankOneError::Dim(dim));
        }
        if !(epsilon > 0.0 && epsilon <= MAX_RANK_ONE_EPSILON) {
            return Err(RankOneError::Epsilon(epsilon));
        }
        let gamma_units = libm::round(libm::ldexp(
            variance_optimal_gamma(dim, epsilon, cap),
            GAMMA_BITS as i32,
        )) as u64;
        let gamma = libm::ldexp(gamma_units as f64, -(GAMMA_BITS as i32));
        let eta = cap_mass_deviation_bound(dim, cap);
        let q = CapMoments::new(gamma, epsilon, cap).cap_mass;
        let nominal = nominal_epsilon(epsilon, q, eta);
        let units = cap_probability_units(nominal, q);
        let cap_probability = libm::ldexp(units as f64, -64);
        Ok(RankOneParams {
            dim,
            epsilon,
            cap,
            gamma_units,
            gamma,
            nominal_epsilon: nominal,
            cap_probability_units: units,
            cap_probability,
            tilt: (libm::round(gamma) as u32).max(1),
            eta,
            privacy_loss_bound: privacy_loss_bound(cap_probability, q, eta),
            moments: CapMoments::new(gamma, nominal, cap),
        })
    }

    /// The cap threshold in the sampler's integer units: `γ·2^{K+m}`, to compare with
    /// `Σ kᵢvᵢ` (`k` the lattice draw, `v` the lifted input).
    pub fn threshold(&self) -> u128 {
        u128::from(self.gamma_units) << (LATTICE_BITS + INPUT_BITS - GAMMA_BITS)
    }

    /// Variance of an off-diagonal entry of one report's unbiased estimate, to leading
    /// order (`ũᵢ², ũⱼ² → 0`, i.e. `p ≫ 1`): `1/κ²`.
    pub fn off_diagonal_variance(&self) -> f64 {
        self.moments.second_moment_entry_variance(0.0, 0.0, false)
    }

    /// Variance of a diagonal entry, to leading order: `2/κ²` (twice the off-diagonal).
    pub fn diagonal_variance(&self) -> f64 {
        self.moments.second_moment_entry_variance(0.0, 0.0, true)
    }

    /// Variance of a mean entry (one-sided), to leading order: `1/c²`.
    pub fn mean_variance(&self) -> f64 {
        self.moments.mean_entry_variance(0.0)
    }

    /// Expected rounds per report, both components together (each round draws `p + 1`
    /// lattice coordinates): the sum of [`expected_rounds`](Self::expected_rounds).
    pub fn expected_iterations(&self) -> f64 {
        let (off, on) = self.expected_rounds();
        off + on
    }

    /// Expected rounds of the off-cap component, `1/(1 − q)`, and of the cap component,
    /// `1/A` with `A = e^{λγ − λ²/2}·q₊` (`q₊ = q/2` symmetric, `q` one-sided, the
    /// half-cap's mass), for an input of norm 1 and the continuous cap mass; the
    /// lattice and the lift move them by relative amounts of order `η/q`.
    pub fn expected_rounds(&self) -> (f64, f64) {
        let q = self.moments.cap_mass;
        (1.0 / (1.0 - q), 1.0 / self.cap_acceptance(q, 1.0))
    }

    /// `A = e^{λγ − λ²ρ²/2}·q₊`: the cap component's acceptance for a direction of
    /// norm ρ, `q₊ = cap_mass/sides` the half-cap's mass.
    fn cap_acceptance(&self, cap_mass: f64, rho2: f64) -> f64 {
        let l = f64::from(self.tilt);
        libm::exp(l * self.gamma - 0.5 * l * l * rho2) * cap_mass / self.cap.sides()
    }

    /// What an observer who times the report on the device learns beyond the output,
    /// `(ε_t, δ_t)` (`docs/PRIVACY.md` §8.4): the pair (output, rounds of both
    /// components) is `(ε + ε_t, δ_t)`-DP. Each round count is geometric with a success
    /// probability that depends on the input only through the lattice slack
    /// (`1 − Q(v)`, `Q ∈ [q − η, q + η]`; `A(v) = e^{λγ − λ²ρ²/2}Q₊(v)`,
    /// `ρ² ∈ [1 − 2^{1−m}, 1]`); counts up to `n₀` (a tail of at most `e^{−40}` for
    /// every input) change in probability by at most `e^{ε_t}`; the rest, and the
    /// fast path's undecided coin (below `2^−50` per round), go to δ_t.
    pub fn timing_leak(&self) -> (f64, f64) {
        let (q, eta) = (self.moments.cap_mass, self.eta);
        let n_off = libm::ceil(40.0 / -libm::log(q + eta));
        let eps_off = libm::log((1.0 - q + eta) / (1.0 - q - eta))
            + (n_off - 1.0) * libm::log((q + eta) / (q - eta));
        let rho2_min = 1.0 - libm::ldexp(1.0, 1 - INPUT_BITS as i32);
        let a_lo = self.cap_acceptance(q - eta, 1.0);
        let a_hi = self.cap_acceptance(q + eta, rho2_min);
        let n_cap = libm::ceil(40.0 / -libm::log1p(-a_lo));
        let eps_cap =
            libm::log(a_hi / a_lo) + (n_cap - 1.0) * libm::log((1.0 - a_lo) / (1.0 - a_hi));
        let delta = 2.0 * libm::exp(-40.0) + n_cap * libm::ldexp(1.0, -50);
        ((eps_off + eps_cap) * (1.0 + SLACK_MARGIN), delta)
    }

    /// The wire step `Δ_w` and the second moment `Δ_w²/4` the triangular dither adds to
    /// each diagonal entry of `E[ŷŷᵀ]` (the aggregator subtracts it).
    pub fn wire_step_and_dither_variance() -> (f64, f64) {
        let step = libm::ldexp(1.0, -(WIRE_STEP_BITS as i32));
        (step, step * step / 4.0)
    }
}

/// A clipped vector (`‖u‖ ≤ 1`, each coordinate in `[−1, 1]`) on the grid `2^−m`,
/// `m = `[`INPUT_BITS`]: `vᵢ = trunc(uᵢ·2^m)` (toward zero; exact, as `uᵢ·2^m` is an
/// exact f64 below `2^53`). Truncation never increases a coordinate's magnitude, so
/// `Σ vᵢ² ≤ 2^{2m}‖u‖²`: a vector clipped in exact arithmetic stays in the ball.
pub fn grid_input(u: &[f64]) -> Result<Vec<i64>, RankOneError> {
    u.iter()
        .enumerate()
        .map(|(index, &value)| {
            if value.is_finite() && (-1.0..=1.0).contains(&value) {
                Ok(libm::trunc(libm::ldexp(value, INPUT_BITS as i32)) as i64)
            } else {
                Err(RankOneError::InputValue { index, value })
            }
        })
        .collect()
}

/// The lift `ũ = (u, √(1 − ‖u‖²))` in integers on the grid `2^−m`: appends
/// `w = ⌊√(2^{2m} − Σ vᵢ²)⌋` (exact integer square root). Then
/// `2^{2m} − 2^{m+1} ≤ ‖ṽ‖² ≤ 2^{2m}`, i.e. the lifted norm `ρ = ‖ṽ‖/2^m` has
/// `1 − 2^{1−m} ≤ ρ² ≤ 1` (`|ρ − 1| ≤ 2^{1−m}`): `2^{2m} − S − w² < 2w + 1 ≤ 2^{m+1} + 1`.
/// The last coordinate is the largest with the norm at most `2^m`.
pub fn lift_to_sphere(grid: &[i64]) -> Result<Vec<i64>, RankOneError> {
    let one = 1u128 << INPUT_BITS;
    let mut norm2: u128 = 0;
    for (index, &value) in grid.iter().enumerate() {
        let mag = u128::from(value.unsigned_abs());
        if mag > one {
            return Err(RankOneError::GridValue { index, value });
        }
        // ≤ 4097 terms of at most 2^80: no overflow.
        norm2 += mag * mag;
    }
    let full = one * one;
    if norm2 > full {
        return Err(RankOneError::NotClipped { norm2 });
    }
    let last = (full - norm2).isqrt();
    let mut lifted = Vec::with_capacity(grid.len() + 1);
    lifted.extend_from_slice(grid);
    // last ≤ 2^m < 2^63.
    lifted.push(last as i64);
    Ok(lifted)
}

#[cfg(test)]
mod tests;
