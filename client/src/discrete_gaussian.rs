//! Exact discrete Gaussian noise `N_Z(0, σ²)` on the integers (Canonne, Kamath &
//! Steinke 2020, "The Discrete Gaussian for Differential Privacy"; CKS20 below), from
//! integer arithmetic and a cryptographic random number generator (`docs/PRIVACY.md` §2).
//!
//! `N_Z(0, σ²)` puts mass `exp(−x²/(2σ²)) / Σ_y exp(−y²/(2σ²))` on each integer `x`.
//! Every decision that shapes the output distribution is taken on integers (exact
//! rationals, or certified integer bounds on an irrational number), never on floating
//! point.
//!
//! # API
//!
//! * [`Sigma2`]: σ² as an exact rational. [`Sigma2::from_sigma`] takes the f64 σ a
//!   [`Collection`](ldpcov_proto::Collection) computes and squares it **exactly**
//!   (an f64 is a dyadic rational `m·2^e`, so `σ² = m²·2^{2e}` needs no rounding at
//!   all): the noise is never smaller than the f64 σ the calibration produced.
//! * [`DiscreteGaussian`]: the precomputed exact sampler for one σ²; `sample` takes any
//!   [`RngCore`].
//! * [`DiscreteGaussianSampler`]: a [`NoiseSampler`] (ChaCha20 seeded by the operating
//!   system, or a deterministic seed for simulations) that caches the
//!   [`DiscreteGaussian`] of the last `sigma_grid` it saw.
//! * [`cks20`]: the straightforward CKS20 algorithms (Bernoulli(exp(−γ)), discrete
//!   Laplace, discrete Gaussian) on big integers, kept as the reference the fast sampler
//!   is benchmarked and tested against.
//!
//! # The algorithm
//!
//! CKS20's Algorithm 3 (rejection from a discrete Laplace) needs about 1.3 rounds of
//! several big-rational Bernoulli trials per draw; `benches/noise.rs` measures it at
//! about a microsecond per sample. [`DiscreteGaussian`] is a different exact rejection
//! sampler that spends about 45 random bits per draw at σ = 10⁸ (20 at σ = 3):
//!
//! Let `f(x) = exp(−x²/(2σ²))` for `x ≥ 0`. The body `[0, X0)`, `X0 ≥ 6(⌊σ⌋+1)`, is cut
//! into `N ≤ 1000` bins `[a, a+W)` of a power-of-two width `W`. Bin `i` gets two
//! *pieces* with integer weights:
//! * a **core** of weight `w_core ≤ κ·W·f(a+W−1)` (certified lower bound): a uniform
//!   point of the bin, always accepted;
//! * a **cap** of weight `w_cap` with `w_core + w_cap ≥ κ·W·f(a)` (certified upper
//!   bound): a uniform point `x` of the bin, accepted with probability
//!   `α = (κ·W·f(x) − w_core)/w_cap ∈ [0, 1]`.
//!
//! One **tail** piece covers `x ≥ X0`: `j ~ Geometric(½)`, `x` uniform in
//! `[X0 + jB, X0 + (j+1)B)` (`B` a power of two `≥ σ²/X0`), accepted with probability
//! `α = κ·B·2^{j+1}·f(x)/w_tail`, `w_tail ≥ 2κ·B·f(X0)`. One **dummy** piece (always
//! rejected) pads the total weight to `n·2^q`, `n ≤ 2048` a power of two, `q = 12`
//! (it weighs at most `N + 2` units, under 0.02 %). A piece is drawn by
//! Walker's alias method over the `n` columns with integer thresholds, then a sign;
//! `x = 0` with a negative sign is rejected (CKS20's trick so that 0 is not counted
//! twice). Rejection restarts from scratch.
//!
//! One take of `log₂ n + q + 1 + log₂ W` bits (44 at σ = 10⁸) from a [`RandomBits`]
//! reservoir supplies the column, the alias threshold, the sign and the offset in the
//! bin; the reservoir carries unused bits over to the next draw, so one 64-bit word of
//! the cipher serves about 1.4 draws at σ = 10⁸ and 3 at σ = 3. The core is chosen
//! about 99 % of the time (the caps weigh about `W/(1.25σ) ≈ 0.5–1 %`); only caps and
//! the tail draw more randomness (a fresh 64-bit word for `U`).
//!
//! # Exactness
//!
//! * The alias table reproduces the integer weights exactly: piece `j` is chosen with
//!   probability `w_j/(n·2^q)` (the table is built and checked in integers).
//! * For `x ≥ 0` the probability of proposing and accepting `x` is, up to the common
//!   factor `1/(n·2^q)`: in a bin, `w_core/W + (w_cap/W)·α = κ·f(x)`; in the tail,
//!   `w_tail·2^{−(j+1)}/B·α = κ·f(x)`. So an accepted `x` has law `∝ f(x)` on `x ≥ 0`,
//!   and with the sign, `∝ exp(−x²/(2σ²))` on `Z`. This needs only `0 ≤ α ≤ 1`, which
//!   the certified bounds guarantee (for the tail: `x² ≥ X0² + 2X0·jB` and
//!   `X0·B/σ² ≥ 1 > ln 2`, so `f(x) ≤ f(X0)·2^{−j}`). The numbers `κ`, `w_*`, `W`, `B`,
//!   `X0` only move the efficiency, never the distribution.
//! * "Accept with probability α" is `U < α` for one uniform real `U` whose binary
//!   digits are drawn lazily, 64 at a time. A decision is taken only when an interval
//!   certified to contain α lies entirely on one side of the interval `U` is known to be
//!   in. The fast path bounds `exp(−γ)` with a 13-term alternating Taylor series in
//!   64-bit fixed point, rounding every partial product toward the safe side, and
//!   decides about `1 − 2^{−40}` of the time; otherwise the exact fallback
//!   (`lazy_bernoulli`) refines `α` with big integers to any precision (`exp(−γ)` of a
//!   rational `γ ≠ 0` is irrational, so the comparison ends with probability one, after
//!   `1 + 2^{−60}` rounds on average).
//! * Bounds on `exp(−a/b)` use the alternating Taylor series of `exp(−r)`,
//!   `r = a/b − ⌊a/b⌋ ∈ [0, 1)` (remainder below the first omitted term) and powers of
//!   certified bounds on `e^{−1}`, with floors for lower and ceilings for upper bounds.
//! * Randomness: every decision uses bits of the generator's stream that nothing else
//!   has used ([`RandomBits`] hands each bit out once, in order; `U` and the tail take
//!   fresh words), so, with the stream modelled as uniform bits (the cipher's security
//!   assumption), the pieces, offsets, signs and `U`s are independent and uniform.
//! * Output range: a draw with `|x| ≥ 2^62` is rejected (so it fits an i64). The output
//!   is thus `N_Z(0, σ²)` conditioned on `|x| < 2^62`, an event of probability below
//!   `exp(−2^23)` for the largest σ accepted (`2^50`): a total-variation change of that
//!   size, far below anything a privacy accounting can see.
//!
//! # Arithmetic bounds
//!
//! σ² = `num/den` with `num, den < 2^128` and `2^−16 ≤ σ² ≤ 2^100`; `⌊σ⌋ ≤ 2^50`,
//! `X0 ≤ 6·2^50 + W < 2^54`, `W ≤ 2^43`. Fast path (u64/u128 only): alias weights
//! `≤ n·2^q ≤ 2^23`; `Γ = γ·2^64` with `γ = δ(2a+δ)/(2σ²)`: `δ(2a+δ) < 2^98` times a 64-bit
//! mantissa of `1/(2σ²)` is a 162-bit product, shifted down in 192-bit limbs and used
//! only if below `2^62` (`γ < ¼`; by construction `γ ≲ 0.08`); Taylor terms are u64
//! products `< 2^128`; the acceptance test compares `u·w_cap + w_core·2^64 < 2^88`
//! with `H·e^{−γ}·2^64 < 2^88` (`H = κ·W·f(a) < 2^24` as a 63-bit mantissa times
//! `e^{−γ}` in Q63, a product `< 2^126` shifted right).
//! Anything outside these ranges falls back to the exact big-integer path, which has no
//! overflow (num-bigint). The table is built in 192-bit fixed point (big integers).
//!
//! # Random number generator
//!
//! [`DiscreteGaussianSampler`] uses ChaCha20 (`rand_chacha::ChaCha20Rng`) seeded with
//! 256 bits from the operating system, like [`FloatGaussianNotPrivate`](crate::FloatGaussianNotPrivate).
//! ChaCha12 (rand's `StdRng`) is also considered secure and is faster, but ChaCha20 is
//! the conservative, widely standardised choice (RFC 8439). With the bit reservoir the
//! cipher is about a quarter of the cost of a draw (ChaCha20 gives ~275 M words/s on
//! one core here, a draw needs ~0.7 word at σ = 10⁸); `benches/noise.rs` measures
//! both ciphers.

use crate::ClientError;
use crate::perturb::NoiseSampler;
use num_bigint::BigUint;
use rand::rngs::OsRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use thiserror::Error;

/// σ² below `2^MIN_SIGMA2_LOG2` is refused (σ < 1/256).
const MIN_SIGMA2_LOG2: u32 = 16;
/// σ² above `2^MAX_SIGMA2_LOG2` is refused (σ > 2^50).
const MAX_SIGMA2_LOG2: u32 = 100;
/// Fixed-point precision (bits) of the table construction.
const PREC: u64 = 192;
/// The body of the table reaches `BODY_SIGMAS·(⌊σ⌋ + 1)`.
const BODY_SIGMAS: u64 = 6;
/// At most this many bins (so that the `2N + 2` pieces fit 2048 alias columns).
const MAX_BINS: u64 = 1000;
/// Draws with `|x| ≥ OUTPUT_LIMIT` are rejected so the result fits an i64.
const OUTPUT_LIMIT: u128 = 1 << 62;
/// Bits of the alias thresholds: each column holds `2^ALIAS_BITS` units of weight.
const ALIAS_BITS: u32 = 12;

/// An invalid σ or σ² for the exact sampler.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid noise scale: {0}")]
pub struct SigmaError(String);

/// σ² as an exact rational `num/den` (reduced), `2^−16 ≤ σ² ≤ 2^100`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sigma2 {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Sigma2 {
    /// σ² = `num/den` exactly. Fails unless `den > 0` and `2^−16 ≤ num/den ≤ 2^100`.
    pub fn from_ratio(num: u128, den: u128) -> Result<Self, SigmaError> {
        if den == 0 {
            return Err(SigmaError("σ² has a zero denominator".into()));
        }
        if num == 0 {
            return Err(SigmaError("σ² must be positive".into()));
        }
        let g = gcd(num, den);
        let (num, den) = (num / g, den / g);
        // num/den ≥ 2^-16 ⇔ num·2^16 ≥ den; num/den ≤ 2^100 ⇔ num ≤ den·2^100.
        let big_enough = num >= 1 << (128 - MIN_SIGMA2_LOG2) || num << MIN_SIGMA2_LOG2 >= den;
        let small_enough = den >= 1 << (128 - MAX_SIGMA2_LOG2) || num <= den << MAX_SIGMA2_LOG2;
        if !big_enough || !small_enough {
            return Err(SigmaError(format!(
                "σ² = {num}/{den} is outside [2^-{MIN_SIGMA2_LOG2}, 2^{MAX_SIGMA2_LOG2}]"
            )));
        }
        Ok(Sigma2 { num, den })
    }

    /// σ² for the f64 `sigma`, **exactly**: an f64 is `m·2^e` with an integer `m`, so
    /// `σ² = m²·2^{2e}` is a rational with a power-of-two denominator and no rounding is
    /// needed (in particular it is never below the square of `sigma`, so the privacy
    /// guarantee computed for `sigma` is not weakened). Fails unless
    /// `2^−8 ≤ sigma ≤ 2^50`.
    pub fn from_sigma(sigma: f64) -> Result<Self, SigmaError> {
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(SigmaError(format!(
                "σ must be finite and positive, got {sigma}"
            )));
        }
        let bits = sigma.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1 << 52) - 1);
        let (m, e) = if biased == 0 {
            (frac, -1074)
        } else {
            (frac | 1 << 52, biased - 1075)
        };
        // σ = m·2^e exactly, m odd after this.
        let tz = m.trailing_zeros();
        let (m, e) = (m >> tz, e + tz as i32);
        let m2 = u128::from(m) * u128::from(m); // < 2^106
        let out_of_range = || SigmaError(format!("σ = {sigma} is outside [2^-8, 2^50]"));
        if e >= 0 {
            let shift = 2 * e as u32;
            if shift + (128 - m2.leading_zeros()) > 127 {
                return Err(out_of_range());
            }
            Sigma2::from_ratio(m2 << shift, 1).map_err(|_| out_of_range())
        } else {
            let shift = (-2 * e) as u32;
            if shift > 127 {
                return Err(out_of_range());
            }
            Sigma2::from_ratio(m2, 1 << shift).map_err(|_| out_of_range())
        }
    }

    /// Numerator of the reduced fraction.
    pub fn numerator(&self) -> u128 {
        self.num
    }

    /// Denominator of the reduced fraction.
    pub fn denominator(&self) -> u128 {
        self.den
    }

    /// `⌊σ⌋ = ⌊√⌊σ²⌋⌋` (exact integer square root), at most `2^50`.
    pub fn floor_sigma(&self) -> u64 {
        let s = (BigUint::from(self.num / self.den)).sqrt();
        u64::try_from(&s).expect("σ ≤ 2^50")
    }

    fn big(&self) -> (BigUint, BigUint) {
        (BigUint::from(self.num), BigUint::from(self.den))
    }
}

// ---------------------------------------------------------------------------------
// Big-integer fixed point with directed rounding.

fn pow2(p: u64) -> BigUint {
    BigUint::from(1u32) << p
}

/// `⌈a / 2^s⌉`.
fn shr_ceil(a: &BigUint, s: u64) -> BigUint {
    let q = a >> s;
    // Exact iff the s low bits are zero (or a = 0).
    if a.trailing_zeros().is_none_or(|tz| tz >= s) {
        q
    } else {
        q + 1u32
    }
}

/// `⌈a / b⌉`.
fn div_ceil_big(a: &BigUint, b: &BigUint) -> BigUint {
    let q = a / b;
    if &(&q * b) == a { q } else { q + 1u32 }
}

/// Certified bounds `lo ≤ exp(−r)·2^wp ≤ hi` for any `r ∈ [r_lo, r_hi]·2^−wp ⊂ [0, 1]`.
///
/// Alternating Taylor series: the terms `t_k = r^k/k!` never increase (r ≤ 1), so the
/// remainder after the terms below `k` is at most `t_k`. Each `t_k·2^wp` is carried as
/// a floor chain from `r_lo` and a ceiling chain from `r_hi` (a multiplication, a shift
/// and a division by the small `k` per term), and the sum stops at the first `k` whose
/// ceiling is at most one unit, which then bounds the remainder.
fn exp_neg_unit(r_lo: &BigUint, r_hi: &BigUint, wp: u64) -> (BigUint, BigUint) {
    let one = pow2(wp);
    if r_hi.bits() == 0 {
        return (one.clone(), one);
    }
    let unit = BigUint::from(1u32);
    let (mut t_lo, mut t_hi) = (one.clone(), one.clone());
    // Even terms (and t_0 = 1) and odd terms, each with a lower and an upper bound.
    let (mut even_lo, mut even_hi) = (one.clone(), one);
    let (mut odd_lo, mut odd_hi) = (BigUint::ZERO, BigUint::ZERO);
    let mut k: u64 = 1;
    let remainder = loop {
        t_lo = ((&t_lo * r_lo) >> wp) / k;
        t_hi = (shr_ceil(&(&t_hi * r_hi), wp) + (k - 1)) / k;
        if t_hi <= unit {
            break t_hi;
        }
        if k % 2 == 1 {
            odd_lo += &t_lo;
            odd_hi += &t_hi;
        } else {
            even_lo += &t_lo;
            even_hi += &t_hi;
        }
        k += 1;
    };
    let neg = odd_hi + &remainder;
    let lo = if even_lo > neg {
        even_lo - neg
    } else {
        BigUint::ZERO
    };
    (lo, even_hi + remainder - odd_lo)
}

thread_local! {
    /// Bounds on e^{−1}·2^p at the largest precision p computed so far on this thread.
    static EXP_NEG_ONE: std::cell::RefCell<(u64, BigUint, BigUint)> =
        const { std::cell::RefCell::new((0, BigUint::ZERO, BigUint::ZERO)) };
}

/// Certified bounds on `e^{−1}·2^wp` (rounded down/up from a cached finer evaluation).
fn exp_neg_one(wp: u64) -> (BigUint, BigUint) {
    EXP_NEG_ONE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 < wp {
            let p = wp.max(2 * cache.0).max(512);
            let one = pow2(p);
            let (lo, hi) = exp_neg_unit(&one, &one, p);
            *cache = (p, lo, hi);
        }
        let shift = cache.0 - wp;
        (&cache.1 >> shift, shr_ceil(&cache.2, shift))
    })
}

/// Bounds on `x^j·2^wp` from bounds `lo ≤ x·2^wp ≤ hi`, `0 ≤ x ≤ 1`.
fn pow_bounds(mut b_lo: BigUint, mut b_hi: BigUint, mut j: u64, wp: u64) -> (BigUint, BigUint) {
    let mut r_lo = pow2(wp);
    let mut r_hi = r_lo.clone();
    while j > 0 {
        if j & 1 == 1 {
            r_lo = (&r_lo * &b_lo) >> wp;
            r_hi = shr_ceil(&(&r_hi * &b_hi), wp);
        }
        j >>= 1;
        if j > 0 {
            b_lo = (&b_lo * &b_lo) >> wp;
            b_hi = shr_ceil(&(&b_hi * &b_hi), wp);
        }
    }
    (r_lo, r_hi)
}

/// Certified bounds `lo ≤ exp(−a/b)·2^p ≤ hi` (`b > 0`, `p ≥ 1`), at most a few units
/// apart; exact (`lo = hi = 2^p`) when `a = 0`.
///
/// `exp(−a/b) = e^{−j}·exp(−r/b)` with `j = ⌊a/b⌋`; both factors are bounded at a working
/// precision `p + 64 + 2j + 2·log₂ j` that absorbs the relative error of `j` products of
/// numbers as small as `e^{−j} > 2^{−1.45j}`. When `j ≥ p`, `exp(−a/b)·2^p < (2/e)^p < 1`
/// and the bounds are simply 0 and 1.
pub(crate) fn exp_neg_bounds(a: &BigUint, b: &BigUint, p: u64) -> (BigUint, BigUint) {
    assert!(b.bits() > 0, "zero denominator");
    assert!(p >= 1);
    if a.bits() == 0 {
        let one = pow2(p);
        return (one.clone(), one);
    }
    let j_big = a / b;
    if j_big >= BigUint::from(p) {
        return (BigUint::ZERO, BigUint::from(1u32));
    }
    let j = u64::try_from(&j_big).expect("j < p");
    let r = a % b;
    let wp = p + 64 + 2 * j + 2 * u64::from(64 - j.leading_zeros());
    let r_shifted = r << wp;
    let (mut lo, mut hi) = exp_neg_unit(&(&r_shifted / b), &div_ceil_big(&r_shifted, b), wp);
    if j > 0 {
        let (e_lo, e_hi) = exp_neg_one(wp);
        let (p_lo, p_hi) = pow_bounds(e_lo, e_hi, j, wp);
        lo = (lo * p_lo) >> wp;
        hi = shr_ceil(&(hi * p_hi), wp);
    }
    (lo >> (wp - p), shr_ceil(&hi, wp - p))
}

/// The number `α = (S·exp(−γ) − C)/D`, `S = s_num/s_den`, `γ = g_num/g_den`, known to
/// lie in `[0, 1]`: certified bounds on `α·2^prec` to any precision.
struct ExpAffine {
    s_num: BigUint,
    s_den: BigUint,
    c: BigUint,
    d: BigUint,
    g_num: BigUint,
    g_den: BigUint,
}

impl ExpAffine {
    fn bounds(&self, prec: u64) -> (BigUint, BigUint) {
        // S/D < 2^(bits(s_num) − bits(s_den) − bits(d) + 2): that many extra bits of
        // exp(−γ) keep the bounds on α within a few units of 2^−prec.
        let scale = (self.s_num.bits() + 2).saturating_sub(self.s_den.bits() + self.d.bits());
        let p2 = prec + scale + 16;
        let (e_lo, e_hi) = exp_neg_bounds(&self.g_num, &self.g_den, p2);
        // α·2^prec = (s_num·E·2^prec − C·s_den·2^(p2+prec)) / (s_den·D·2^p2), E = e·2^−p2.
        let den = (&self.s_den * &self.d) << p2;
        let sub = (&self.c * &self.s_den) << (p2 + prec);
        let n_lo = (&self.s_num * e_lo) << prec;
        let n_hi = (&self.s_num * e_hi) << prec;
        let lo = if n_lo > sub {
            (n_lo - &sub) / &den
        } else {
            BigUint::ZERO
        };
        let hi = if n_hi > sub {
            div_ceil_big(&(n_hi - &sub), &den)
        } else {
            BigUint::ZERO
        };
        let one = pow2(prec);
        (lo.min(one.clone()), hi.min(one))
    }
}

/// Decides `U < α` exactly for a uniform real `U ∈ [0, 1)` whose first 64 binary digits
/// are `first` (already drawn) and whose further digits are drawn from `rng` as needed.
/// `bounds(prec)` must return `lo ≤ α·2^prec ≤ hi` with `hi − lo` bounded as `prec`
/// grows.
///
/// With `u` the digits drawn so far, `U ∈ [u, u+1)·2^−prec`: accept when
/// `u + 1 ≤ lo`, reject when `u ≥ hi`, else draw 64 more digits.
pub(crate) fn lazy_bernoulli<R: RngCore + ?Sized>(
    rng: &mut R,
    first: u64,
    mut bounds: impl FnMut(u64) -> (BigUint, BigUint),
) -> bool {
    let mut u = BigUint::from(first);
    let mut prec = 64;
    loop {
        let (lo, hi) = bounds(prec);
        // u + 1 ≤ lo, in integers.
        if u < lo {
            return true;
        }
        if u >= hi {
            return false;
        }
        u = (u << 64u32) + rng.next_u64();
        prec += 64;
    }
}

// ---------------------------------------------------------------------------------
// Fast fixed-point helpers (u64 / u128 only).

/// `⌊2^63/k!⌋` and `⌈2^63/k!⌉` for `k = 0..16`.
const fn inv_factorials_q63(ceil: bool) -> [u64; 16] {
    let mut out = [0u64; 16];
    let mut fact: u128 = 1;
    let mut k = 0;
    while k < 16 {
        if k > 0 {
            fact *= k as u128;
        }
        let q = (1u128 << 63) / fact;
        let rem = (1u128 << 63) % fact;
        out[k] = (if ceil && rem != 0 { q + 1 } else { q }) as u64;
        k += 1;
    }
    out
}
const INV_FACT_LO: [u64; 16] = inv_factorials_q63(false);
const INV_FACT_HI: [u64; 16] = inv_factorials_q63(true);
/// Taylor terms summed by [`exp_neg_q63`]; the next one bounds the remainder.
const TAYLOR_TERMS: usize = 13;

#[inline]
fn mul_hi_floor(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 64) as u64
}

#[inline]
fn mul_hi_ceil(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    ((p >> 64) as u64) + u64::from(p as u64 != 0)
}

/// Certified bounds `lo ≤ exp(−γ)·2^63 ≤ hi` for any `γ ∈ [g_lo, g_hi]·2^−64`,
/// `g_hi < 2^62` (γ < ¼).
///
/// `exp(−γ) = Σ (−γ)^k/k!`: `γ^k·2^64` is carried as a floor chain from `g_lo` and a
/// ceiling chain from `g_hi`, multiplied by floor/ceiling of `2^63/k!`; positive terms
/// enter the lower bound rounded down and negative terms rounded up (and conversely).
/// The remainder after 13 terms is at most `γ^14/14! < 2^−64` (γ < ¼), bounded by the
/// ceiling of the 14th term. Total width: about 30 units of `2^−63`.
#[inline]
fn exp_neg_q63(g_lo: u64, g_hi: u64) -> (u64, u64) {
    debug_assert!(g_lo <= g_hi && g_hi < 1 << 62);
    let (mut p_lo, mut p_hi) = (g_lo, g_hi);
    let mut lo: i128 = 1 << 63;
    let mut hi: i128 = 1 << 63;
    for k in 1..=TAYLOR_TERMS {
        if k > 1 {
            p_lo = mul_hi_floor(p_lo, g_lo);
            p_hi = mul_hi_ceil(p_hi, g_hi);
        }
        let t_lo = i128::from(mul_hi_floor(p_lo, INV_FACT_LO[k]));
        let t_hi = i128::from(mul_hi_ceil(p_hi, INV_FACT_HI[k]));
        if k % 2 == 1 {
            lo -= t_hi;
            hi -= t_lo;
        } else {
            lo += t_lo;
            hi += t_hi;
        }
    }
    let p_next = mul_hi_ceil(p_hi, g_hi);
    let rem = i128::from(mul_hi_ceil(p_next, INV_FACT_HI[TAYLOR_TERMS + 1]));
    lo -= rem;
    hi += rem;
    (lo.clamp(0, 1 << 63) as u64, hi.clamp(0, 1 << 63) as u64)
}

/// `a·b` as three little-endian 64-bit limbs.
#[inline]
fn mul_u128_u64(a: u128, b: u64) -> [u64; 3] {
    let p0 = u128::from(a as u64) * u128::from(b);
    let p1 = u128::from((a >> 64) as u64) * u128::from(b);
    let mid = (p0 >> 64) + u128::from(p1 as u64);
    [p0 as u64, mid as u64, ((p1 >> 64) + (mid >> 64)) as u64]
}

/// `(⌊v/2^s⌋, ⌈v/2^s⌉)` if the ceiling is below `2^62`.
#[inline]
fn shr192_small(v: [u64; 3], s: u32) -> Option<(u64, u64)> {
    if s >= 192 {
        return Some((0, u64::from(v != [0; 3])));
    }
    let (word, bit) = ((s / 64) as usize, s % 64);
    let limb = |i: usize| if i < 3 { v[i] } else { 0 };
    let shifted = |i: usize| {
        if bit == 0 {
            limb(i + word)
        } else {
            (limb(i + word) >> bit) | (limb(i + word + 1) << (64 - bit))
        }
    };
    if shifted(1) != 0 || shifted(2) != 0 {
        return None;
    }
    let floor = shifted(0);
    let mut rem = v[..word].iter().any(|&l| l != 0);
    if bit > 0 {
        rem |= v[word] & ((1u64 << bit) - 1) != 0;
    }
    let ceil = floor + u64::from(rem);
    (ceil < 1 << 62).then_some((floor, ceil))
}

#[inline]
fn shr_floor_u128(v: u128, s: u32) -> u128 {
    if s >= 128 { 0 } else { v >> s }
}

#[inline]
fn shr_ceil_u128(v: u128, s: u32) -> u128 {
    if s >= 128 {
        u128::from(v != 0)
    } else {
        let q = v >> s;
        q + u128::from(q << s != v)
    }
}

// ---------------------------------------------------------------------------------
// The fast exact sampler.

/// One bin of the body: weights and the fast-path bounds on `H = κ·W·f(a)`.
#[derive(Clone, Copy, Debug)]
struct Bin {
    w_core: u64,
    w_cap: u64,
    /// `H ∈ [hm_lo, hm_hi]·2^(−rs−1)` (so `H·g·2^64 ∈ [hm·G] >> rs` for `g = G·2^−63`).
    hm_lo: u64,
    hm_hi: u64,
    rs: u32,
}

/// The exact discrete Gaussian `N_Z(0, σ²)` for one σ², precomputed (see the
/// [module documentation](self) for the algorithm and the exactness argument).
///
/// Building one takes about half a millisecond (a few thousand big-integer products);
/// a draw then takes about 45 random bits (at σ = 10⁸) and no big integers, except
/// with probability about `2^−40`.
#[derive(Clone)]
pub struct DiscreteGaussian {
    sigma2: Sigma2,
    n: BigUint,
    d: BigUint,
    log_cols: u32,
    col_mask: u64,
    q_bits: u32,
    q_mask: u64,
    /// Bits taken per proposal.
    head_bits: u32,
    w_bits: u32,
    single_word: bool,
    /// Per alias column: threshold (low 32 bits) and alias piece (high 32 bits).
    table: Box<[u64]>,
    /// Piece `p < two_bins` is the core (`p` even) or cap (`p` odd) of bin `p/2`;
    /// `p = two_bins` is the tail; larger pieces are dummies.
    two_bins: usize,
    bins: Box<[Bin]>,
    x0: u64,
    b_bits: u32,
    w_tail: u64,
    /// κ = kn·2^−ke.
    kn: u64,
    ke: u64,
    /// `1/(2σ²) ∈ [im_lo, im_hi]·2^−ie`.
    im_lo: u64,
    im_hi: u64,
    ie: u32,
}

impl std::fmt::Debug for DiscreteGaussian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscreteGaussian")
            .field("sigma2", &self.sigma2)
            .field("bins", &self.bins.len())
            .field("bin_width", &(1u64 << self.w_bits))
            .field("tail_start", &self.x0)
            .finish_non_exhaustive()
    }
}

/// Walker's alias table with integer thresholds: column `k` yields piece `k` when a
/// uniform `thr ∈ [0, capacity)` is below `prob[k]`, else `alias[k]`. Requires
/// `Σ weights = weights.len()·capacity`; then piece `j` has probability exactly
/// `weights[j]/Σ weights`.
fn build_alias(weights: &[u64], capacity: u64) -> Vec<(u64, u32)> {
    let n = weights.len();
    assert_eq!(
        weights.iter().map(|&w| u128::from(w)).sum::<u128>(),
        n as u128 * u128::from(capacity)
    );
    let mut w = weights.to_vec();
    let mut out: Vec<(u64, u32)> = (0..n).map(|k| (capacity, k as u32)).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&k| w[k] < capacity);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        out[s] = (w[s], l as u32);
        // w[l] ≥ capacity: it gives capacity − w[s] to column s.
        w[l] -= capacity - w[s];
        if w[l] < capacity {
            large.pop();
            small.push(l);
        }
    }
    // The sum is exact, so everything left holds exactly `capacity`.
    debug_assert!(small.is_empty() && large.iter().all(|&l| w[l] == capacity));
    out
}

impl DiscreteGaussian {
    /// The exact sampler for σ².
    pub fn new(sigma2: Sigma2) -> Self {
        Self::with_layout(sigma2, BODY_SIGMAS, MAX_BINS)
    }

    /// The exact sampler for the f64 `sigma` (σ² squared exactly, see
    /// [`Sigma2::from_sigma`]).
    pub fn from_sigma(sigma: f64) -> Result<Self, SigmaError> {
        Ok(Self::new(Sigma2::from_sigma(sigma)?))
    }

    /// σ².
    pub fn sigma2(&self) -> &Sigma2 {
        &self.sigma2
    }

    /// The body reaches `body_sigmas·(⌊σ⌋ + 1)` with at most `max_bins` bins (tests use
    /// small values to exercise the tail and the slow paths).
    fn with_layout(sigma2: Sigma2, body_sigmas: u64, max_bins: u64) -> Self {
        let (n, d) = sigma2.big();
        let two_n = &n << 1u32;
        let reach = body_sigmas * (sigma2.floor_sigma() + 1);
        let mut w_bits = 0;
        while (max_bins << w_bits) < reach {
            w_bits += 1;
        }
        let w = 1u64 << w_bits;
        let nbins = reach.div_ceil(w);
        let x0 = nbins * w;
        let log_cols = (2 * nbins + 2).next_power_of_two().trailing_zeros();
        let cols = 1u64 << log_cols;
        let q_bits = ALIAS_BITS;
        // Column, threshold, sign and (if they fit in one take of ≤ 63 bits) offset.
        let single_word = log_cols + q_bits + 1 + w_bits <= 63;
        let head_bits = log_cols + q_bits + 1 + if single_word { w_bits } else { 0 };
        let capacity = 1u64 << q_bits;

        // exp(−c/(2σ²)) = exp(−c·d/(2n)).
        let exp_c = |c: u128| exp_neg_bounds(&(BigUint::from(c) * &d), &two_n, PREC);
        let wu = u128::from(w);
        let (mut r_lo, mut r_hi) = exp_c(wu * wu); // f(a₁)/f(a₀) = e^{−W²/2σ²}
        let (q_lo, q_hi) = exp_c(2 * wu * wu); // ratio of ratios e^{−W²/σ²}
        let (mut sv_lo, _) = exp_c((wu - 1) * (wu - 1)); // s·vⁱ, s = e^{−(W−1)²/2σ²}
        let (v_lo, _) = exp_c(2 * wu * (wu - 1)); // v = e^{−W(W−1)/σ²}
        let mul_lo = |a: &BigUint, b: &BigUint| (a * b) >> PREC;
        let mul_hi = |a: &BigUint, b: &BigUint| shr_ceil(&(a * b), PREC);

        // f(aᵢ) (both bounds) and f(aᵢ + W − 1) (lower bound), 2^−PREC units:
        // f(a_{i+1}) = f(aᵢ)·e^{−(2i+1)W²/2σ²}, f(aᵢ+W−1) = f(aᵢ)·s·vⁱ.
        let (mut fa_lo, mut fa_hi) = (pow2(PREC), pow2(PREC));
        let mut fa = Vec::with_capacity(nbins as usize);
        let mut fb_lo = Vec::with_capacity(nbins as usize);
        for _ in 0..nbins {
            fb_lo.push(mul_lo(&fa_lo, &sv_lo));
            fa.push((fa_lo.clone(), fa_hi.clone()));
            fa_lo = mul_lo(&fa_lo, &r_lo);
            fa_hi = mul_hi(&fa_hi, &r_hi);
            r_lo = mul_lo(&r_lo, &q_lo);
            r_hi = mul_hi(&r_hi, &q_hi);
            sv_lo = mul_lo(&sv_lo, &v_lo);
        }
        let fx0_hi = fa_hi; // upper bound on f(X0)

        // Tail blocks: B = 2^b_bits ≥ σ²/X0 = n/(d·X0).
        let b_need = div_ceil_big(&n, &(&d * x0));
        let b_need = u64::try_from(&b_need).expect("σ²/X0 ≤ σ/6 < 2^48");
        let b_bits = b_need.next_power_of_two().trailing_zeros();
        let b = 1u64 << b_bits;

        // κ·E ≤ target, E = Σ W·f(aᵢ) + 2B·f(X0) (upper bounds): each of the N + 1
        // ceilings adds less than one unit, so the total stays below cols·capacity and
        // the dummy piece (the waste) weighs at most N + 2 units.
        let envelope: BigUint =
            fa.iter().map(|(_, hi)| hi * w).sum::<BigUint>() + &fx0_hi * (2 * b);
        let target = cols * capacity - (nbins + 2);
        let ke = 48 + envelope.bits() as i64 - PREC as i64 - i64::from(64 - target.leading_zeros());
        assert!(ke > 0, "κ exponent {ke}");
        let ke = ke as u64;
        let kn = (BigUint::from(target) << (PREC + ke)) / &envelope;
        let kn = u64::try_from(&kn).expect("κ mantissa has about 48 bits");
        let sc = PREC + ke; // weights = ⌊/⌈ kn·(…) / 2^sc ⌋/⌉

        let kw = BigUint::from(kn) * w;
        let mut weights = vec![0u64; cols as usize];
        let mut bins = Vec::with_capacity(nbins as usize);
        for (i, ((lo, hi), fb)) in fa.iter().zip(&fb_lo).enumerate() {
            // H = κ·W·f(aᵢ) ∈ [x_lo, x_hi]·2^−sc.
            let (x_lo, x_hi) = (&kw * lo, &kw * hi);
            let top = u64::try_from(&shr_ceil(&x_hi, sc)).expect("weight < 2^24");
            let core = u64::try_from(&((&kw * fb) >> sc)).expect("weight < 2^24");
            assert!(core <= top);
            weights[2 * i] = core;
            weights[2 * i + 1] = top - core;
            // H as 63-bit mantissas.
            let sh = x_hi.bits().saturating_sub(63);
            let hm_lo = u64::try_from(&(x_lo >> sh)).expect("63 bits");
            let hm_hi = u64::try_from(&shr_ceil(&x_hi, sh)).expect("63 bits");
            let rs = (sc - sh)
                .checked_sub(1)
                .expect("H < 2^62, so the shift is positive");
            bins.push(Bin {
                w_core: core,
                w_cap: top - core,
                hm_lo,
                hm_hi,
                rs: u32::try_from(rs).unwrap_or(u32::MAX),
            });
        }
        let two_bins = 2 * nbins as usize;
        let w_tail = shr_ceil(&(BigUint::from(kn) * (2 * b) * &fx0_hi), sc);
        let w_tail = u64::try_from(&w_tail).expect("weight < 2^24");
        weights[two_bins] = w_tail;
        let used: u64 = weights.iter().sum();
        let total = cols * capacity;
        assert!(used <= total, "weights {used} exceed {total}");
        weights[two_bins + 1] = total - used;
        let table = build_alias(&weights, capacity)
            .into_iter()
            .map(|(prob, alias)| prob | (u64::from(alias) << 32))
            .collect();

        // 1/(2σ²) = d/(2n) ∈ [im_lo, im_hi]·2^−ie, im_hi ≤ 2^63.
        let ie = 62 + two_n.bits() - d.bits();
        let im = (&d << ie) / &two_n;
        let im_lo = u64::try_from(&im).expect("63 bits");
        let im_hi = u64::try_from(&div_ceil_big(&(&d << ie), &two_n)).expect("63 bits");

        DiscreteGaussian {
            sigma2,
            n,
            d,
            log_cols,
            col_mask: cols - 1,
            q_bits,
            q_mask: capacity - 1,
            head_bits,
            w_bits,
            single_word,
            table,
            two_bins,
            bins: bins.into_boxed_slice(),
            x0,
            b_bits,
            w_tail,
            kn,
            ke,
            im_lo,
            im_hi,
            ie: u32::try_from(ie).expect("small exponent"),
        }
    }

    /// One exact draw of `N_Z(0, σ²)` (conditioned on `|x| < 2^62`, see the module
    /// documentation) from `rng`.
    ///
    /// Takes a fresh 64-bit word for every group of bits it needs and discards what it
    /// does not use. [`sample_bits`](Self::sample_bits) on one [`RandomBits`] wastes
    /// nothing (about 1.4 draws per word at σ = 10⁸, 3 at σ = 3), which pays when the
    /// generator is slow; with AVX2 ChaCha20 the two cost about the same.
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> i64 {
        self.sample_from(&mut WordPerTake(rng))
    }

    /// One exact draw of `N_Z(0, σ²)` (conditioned on `|x| < 2^62`), taking its
    /// random bits from `bits`.
    #[inline]
    pub fn sample_bits<R: RngCore>(&self, bits: &mut RandomBits<R>) -> i64 {
        self.sample_from(bits)
    }

    #[inline(always)]
    fn sample_from<S: BitSource>(&self, bits: &mut S) -> i64 {
        loop {
            let r = bits.take(self.head_bits);
            let col = (r & self.col_mask) as usize;
            let entry = self.table[col];
            let thr = (r >> self.log_cols) & self.q_mask;
            // The alias branch is a coin flip for the predictor: select without a jump.
            let piece = std::hint::select_unpredictable(
                thr < (entry & 0xffff_ffff),
                col,
                (entry >> 32) as usize,
            );
            let rest = r >> (self.log_cols + self.q_bits);
            // −1 for a negative sign, else 0.
            let sign = ((rest & 1) as i64).wrapping_neg();
            let x = if piece < self.two_bins {
                let bin = piece >> 1;
                let off = if self.single_word {
                    rest >> 1
                } else {
                    bits.take(self.w_bits)
                };
                let x = ((bin as u64) << self.w_bits) | off;
                if piece & 1 == 1 && !self.cap_accept(bits.rng_mut(), bin, off, x) {
                    continue;
                }
                x
            } else if piece == self.two_bins {
                match self.tail_draw(bits.rng_mut()) {
                    Some(x) => x,
                    None => continue,
                }
            } else {
                continue;
            };
            if x == 0 && sign != 0 {
                continue;
            }
            // Conditional negation without a branch: (x ^ −1) + 1 = −x.
            return ((x as i64) ^ sign) - sign;
        }
    }

    /// `γ = x²/(2σ²)` as the exact rational `x²·d / (2n)`.
    fn gamma(&self, x: u128) -> (BigUint, BigUint) {
        let x = BigUint::from(x);
        (&x * &x * &self.d, &self.n << 1u32)
    }

    /// Accept `x = a + off` proposed by the cap of `bin`: `U < (κ·W·f(x) − w_core)/w_cap`.
    #[cold]
    fn cap_accept<R: RngCore + ?Sized>(&self, rng: &mut R, bin: usize, off: u64, x: u64) -> bool {
        let u = rng.next_u64();
        if let Some(decision) = self.cap_fast(bin, off, u) {
            return decision;
        }
        self.cap_exact(rng, bin, x, u)
    }

    /// The fast cap test on the first 64 digits `u` of `U`, or `None` when they do not
    /// decide it (or a bound is out of the fast path's range).
    #[inline]
    fn cap_fast(&self, bin: usize, off: u64, u: u64) -> Option<bool> {
        let b = &self.bins[bin];
        // γ = (x² − a²)/(2σ²) = off·(2a + off)/(2σ²): f(x) = f(a)·exp(−γ) = H·exp(−γ)/(κW).
        let a = u128::from(bin as u64) << self.w_bits;
        let num = u128::from(off) * (2 * a + u128::from(off));
        let (g_lo, g_hi) = if num == 0 {
            (0, 0)
        } else {
            let s = self.ie.checked_sub(64)?;
            let (lo, _) = shr192_small(mul_u128_u64(num, self.im_lo), s)?;
            let (_, hi) = shr192_small(mul_u128_u64(num, self.im_hi), s)?;
            (lo, hi)
        };
        let (e_lo, e_hi) = exp_neg_q63(g_lo, g_hi);
        // U·w_cap + w_core < H·exp(−γ), everything times 2^64.
        let rhs_lo = shr_floor_u128(u128::from(b.hm_lo) * u128::from(e_lo), b.rs);
        let rhs_hi = shr_ceil_u128(u128::from(b.hm_hi) * u128::from(e_hi), b.rs);
        let z = u128::from(u) * u128::from(b.w_cap) + (u128::from(b.w_core) << 64);
        if z + u128::from(b.w_cap) <= rhs_lo {
            Some(true)
        } else if z >= rhs_hi {
            Some(false)
        } else {
            None
        }
    }

    /// The cap test decided exactly (big integers), `u` being the first 64 digits of `U`.
    #[cold]
    fn cap_exact<R: RngCore + ?Sized>(&self, rng: &mut R, bin: usize, x: u64, u: u64) -> bool {
        let b = &self.bins[bin];
        let (g_num, g_den) = self.gamma(u128::from(x));
        let alpha = ExpAffine {
            s_num: BigUint::from(self.kn) << self.w_bits,
            s_den: pow2(self.ke),
            c: BigUint::from(b.w_core),
            d: BigUint::from(b.w_cap),
            g_num,
            g_den,
        };
        lazy_bernoulli(rng, u, |p| alpha.bounds(p))
    }

    /// The tail piece: `j ~ Geometric(½)`, `x` uniform in `[X0 + jB, X0 + (j+1)B)`,
    /// accepted with probability `κ·B·2^{j+1}·f(x)/w_tail`.
    #[cold]
    fn tail_draw<R: RngCore + ?Sized>(&self, rng: &mut R) -> Option<u64> {
        let mut j: u64 = 0;
        loop {
            let r = rng.next_u64();
            if r != 0 {
                j += u64::from(r.trailing_zeros());
                break;
            }
            j += 64;
        }
        let off = if self.b_bits == 0 {
            0
        } else {
            rng.next_u64() >> (64 - self.b_bits)
        };
        let x = u128::from(j)
            .checked_shl(self.b_bits)
            .filter(|&jb| jb >> self.b_bits == u128::from(j))
            .map(|jb| u128::from(self.x0) + jb + u128::from(off))
            .filter(|&x| x < OUTPUT_LIMIT)?;
        let (g_num, g_den) = self.gamma(x);
        let alpha = ExpAffine {
            s_num: BigUint::from(self.kn) << (u64::from(self.b_bits) + j + 1),
            s_den: pow2(self.ke) * self.w_tail,
            c: BigUint::ZERO,
            d: BigUint::from(1u32),
            g_num,
            g_den,
        };
        let first = rng.next_u64();
        lazy_bernoulli(rng, first, |p| alpha.bounds(p)).then_some(x as u64)
    }
}

// ---------------------------------------------------------------------------------
// Random bits.

/// Fresh words per refill of [`RandomBits`].
const RESERVOIR_WORDS: usize = 32;
/// End (in bits) of the valid data in the reservoir: one carried word, then the fresh
/// ones.
const RESERVOIR_END: u32 = 64 * (RESERVOIR_WORDS as u32 + 1);

/// Uniform random bits from a generator, handed out a few at a time, so that a draw
/// needing 20 or 44 bits does not spend a whole 64-bit word of the cipher.
///
/// The generator's output is read 32 words at a time into a buffer, and each
/// [`take`](Self::take) returns the next `k` bits of that stream: every bit is handed
/// out exactly once, in order (none skipped, none reused), so takes are independent
/// and uniform. Words taken directly from [`rng_mut`](Self::rng_mut) are fresh too.
/// Its `Debug` output hides the state.
pub struct RandomBits<R> {
    rng: R,
    /// `words[0]` is carried over from the previous refill, `words[1..=32]` are fresh,
    /// `words[33]` is zero padding for the two-word window of `take`.
    words: [u64; RESERVOIR_WORDS + 2],
    /// Position of the next unused bit, in `[0, RESERVOIR_END]`.
    pos: u32,
}

impl<R: RngCore> RandomBits<R> {
    /// Bits from `rng`.
    pub fn new(rng: R) -> Self {
        RandomBits {
            rng,
            words: [0; RESERVOIR_WORDS + 2],
            // Nothing buffered: the first take refills.
            pos: RESERVOIR_END,
        }
    }

    /// `k ≤ 63` fresh uniform bits, as the low bits of the result (the others are 0).
    #[inline]
    pub fn take(&mut self, k: u32) -> u64 {
        debug_assert!(k <= 63);
        if self.pos + k > RESERVOIR_END {
            self.refill();
        }
        let (i, off) = ((self.pos / 64) as usize, self.pos % 64);
        // Bits pos.. as one word: words[i] >> off, then the low bits of words[i + 1]
        // (shifted by 64 − off, written as 1 + (63 − off) so that off = 0 gives 0).
        let window = (self.words[i] >> off) | ((self.words[i + 1] << 1) << (63 - off));
        self.pos += k;
        window & ((1u64 << k) - 1)
    }

    /// Moves the last (partly used) word to the front and reads fresh words after it.
    #[cold]
    fn refill(&mut self) {
        // pos > RESERVOIR_END − 64: the unused bits all lie in the last data word.
        let carried = self.pos.saturating_sub(64 * RESERVOIR_WORDS as u32);
        self.words[0] = self.words[RESERVOIR_WORDS];
        for w in &mut self.words[1..=RESERVOIR_WORDS] {
            *w = self.rng.next_u64();
        }
        self.pos = carried;
    }

    /// The generator, for whole fresh words (the buffered bits stay unused until the
    /// next `take`).
    pub fn rng_mut(&mut self) -> &mut R {
        &mut self.rng
    }
}

/// Where the sampler takes its bits from: `take(k)` returns `k ≤ 63` fresh uniform
/// bits, `rng_mut` a generator for whole fresh words.
trait BitSource {
    type Rng: RngCore + ?Sized;
    fn take(&mut self, k: u32) -> u64;
    fn rng_mut(&mut self) -> &mut Self::Rng;
}

impl<R: RngCore> BitSource for RandomBits<R> {
    type Rng = R;
    #[inline]
    fn take(&mut self, k: u32) -> u64 {
        RandomBits::take(self, k)
    }
    fn rng_mut(&mut self) -> &mut R {
        &mut self.rng
    }
}

/// A fresh word of the generator for every take (no state kept between draws).
struct WordPerTake<'a, R: ?Sized>(&'a mut R);

impl<R: RngCore + ?Sized> BitSource for WordPerTake<'_, R> {
    type Rng = R;
    #[inline]
    fn take(&mut self, k: u32) -> u64 {
        self.0.next_u64() & ((1u64 << k) - 1)
    }
    fn rng_mut(&mut self) -> &mut R {
        self.0
    }
}

impl<R> std::fmt::Debug for RandomBits<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomBits").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------
// The NoiseSampler.

/// Exact discrete Gaussian noise for [`Perturber`](crate::Perturber): a ChaCha20 stream
/// (through a [`RandomBits`] reservoir) and the [`DiscreteGaussian`] of the last
/// `sigma_grid` (rebuilt, in about half a millisecond, when σ changes).
///
/// `sample_grid(σ)` draws `N_Z(0, σ²)` with σ² the exact square of the f64 σ
/// ([`Sigma2::from_sigma`]); its variance is σ² up to `O(σ²·e^{−2π²σ²})` (CKS20 Prop. 19),
/// i.e. exactly σ² for any σ ≥ 2 at f64 resolution.
///
/// Its `Debug` output never shows the generator state.
pub struct DiscreteGaussianSampler {
    bits: RandomBits<ChaCha20Rng>,
    cached: Option<(u64, DiscreteGaussian)>,
}

impl DiscreteGaussianSampler {
    /// A sampler seeded with 256 bits from the operating system's random number
    /// generator. This is the one to use for real reports.
    pub fn from_os_rng() -> Result<Self, ClientError> {
        Ok(DiscreteGaussianSampler {
            bits: RandomBits::new(ChaCha20Rng::try_from_rng(&mut OsRng)?),
            cached: None,
        })
    }

    /// A **deterministic** sampler for simulations and tests.
    ///
    /// The noise is a function of `seed`: anyone who knows or guesses the seed can
    /// subtract it and recover the data. Reports built with it are **not private**;
    /// never use it on real data.
    pub fn from_seed_for_simulation(seed: u64) -> Self {
        DiscreteGaussianSampler {
            bits: RandomBits::new(ChaCha20Rng::seed_from_u64(seed)),
            cached: None,
        }
    }

    /// Builds and caches the table for `sigma_grid` (out of line: rare).
    #[cold]
    #[inline(never)]
    fn rebuild(&mut self, sigma_grid: f64) {
        let dist = DiscreteGaussian::from_sigma(sigma_grid)
            .unwrap_or_else(|err| panic!("noise sd {sigma_grid}: {err}"));
        self.cached = Some((sigma_grid.to_bits(), dist));
    }

    /// One draw of `dist` from this sampler's generator.
    pub fn sample(&mut self, dist: &DiscreteGaussian) -> i64 {
        dist.sample_bits(&mut self.bits)
    }
}

impl std::fmt::Debug for DiscreteGaussianSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscreteGaussianSampler")
            .finish_non_exhaustive()
    }
}

impl NoiseSampler for DiscreteGaussianSampler {
    /// # Panics
    /// If `sigma_grid` is negative, NaN, infinite, or positive but outside
    /// `[2^−8, 2^50]` (a caller bug: [`Perturber`](crate::Perturber) only passes the σ
    /// of a validated collection, about `10^6..10^10` grid units). `sigma_grid = 0`
    /// adds no noise.
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        assert!(
            sigma_grid.is_finite() && sigma_grid >= 0.0,
            "noise sd {sigma_grid} must be finite and non-negative"
        );
        if sigma_grid == 0.0 {
            return 0;
        }
        let key = sigma_grid.to_bits();
        if !matches!(&self.cached, Some((k, _)) if *k == key) {
            self.rebuild(sigma_grid);
        }
        let Some((_, dist)) = &self.cached else {
            unreachable!("filled above")
        };
        dist.sample_bits(&mut self.bits)
    }

    fn kind(&self) -> &'static str {
        "exact-discrete-gaussian"
    }

    fn uniform_below(&mut self, bound: u64) -> u64 {
        self.bits.rng_mut().random_range(0..bound.max(1))
    }
}

// ---------------------------------------------------------------------------------
// The reference CKS20 algorithms.

/// The straightforward algorithms of Canonne, Kamath & Steinke (2020), on big integers:
/// the reference that [`DiscreteGaussian`] is benchmarked and tested against.
///
/// Exact and simple, but slow (microseconds per draw at large σ): every Bernoulli trial
/// draws a uniform big integer below a big denominator.
pub mod cks20 {
    use super::Sigma2;
    use num_bigint::{BigInt, BigUint};
    use rand::RngCore;

    /// A uniform integer in `[0, bound)`, `bound ≥ 1`, by rejection on `bits(bound)`
    /// random bits (fewer than 2 rounds on average).
    pub(crate) fn random_below<R: RngCore + ?Sized>(rng: &mut R, bound: &BigUint) -> BigUint {
        let bits = bound.bits();
        assert!(bits > 0, "empty range");
        if bits <= 64 {
            let bound = u64::try_from(bound).expect("64 bits");
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            loop {
                let v = rng.next_u64() & mask;
                if v < bound {
                    return BigUint::from(v);
                }
            }
        }
        let words = bits.div_ceil(32) as usize;
        let top_bits = bits - 32 * (words as u64 - 1);
        loop {
            let mut digits: Vec<u32> = (0..words).map(|_| rng.next_u32()).collect();
            if top_bits < 32 {
                digits[words - 1] &= (1u32 << top_bits) - 1;
            }
            let v = BigUint::new(digits);
            if &v < bound {
                return v;
            }
        }
    }

    /// Bernoulli(num/den), `num ≤ den`.
    fn bernoulli_ratio<R: RngCore + ?Sized>(rng: &mut R, num: &BigUint, den: &BigUint) -> bool {
        &random_below(rng, den) < num
    }

    /// Bernoulli(exp(−γ)) for `γ = num/den ∈ [0, 1]`: CKS20 Algorithm 1, first part.
    /// `K ← 1`; while Bernoulli(γ/K), `K ← K + 1`; return `K` odd.
    fn bernoulli_exp_neg_unit<R: RngCore + ?Sized>(
        rng: &mut R,
        num: &BigUint,
        den: &BigUint,
    ) -> bool {
        let mut k: u64 = 1;
        while bernoulli_ratio(rng, num, &(den * k)) {
            k += 1;
        }
        k % 2 == 1
    }

    /// Bernoulli(exp(−γ)) for a rational `γ = num/den ≥ 0` (CKS20 Algorithm 1):
    /// `⌊γ⌋` trials of Bernoulli(e^{−1}), then one of Bernoulli(exp(−(γ − ⌊γ⌋))).
    pub(crate) fn bernoulli_exp_neg_big<R: RngCore + ?Sized>(
        rng: &mut R,
        num: &BigUint,
        den: &BigUint,
    ) -> bool {
        if num <= den {
            return bernoulli_exp_neg_unit(rng, num, den);
        }
        let one = BigUint::from(1u32);
        let mut j = num / den;
        while j.bits() > 0 {
            if !bernoulli_exp_neg_unit(rng, &one, &one) {
                return false;
            }
            j -= 1u32;
        }
        bernoulli_exp_neg_unit(rng, &(num % den), den)
    }

    /// Bernoulli(exp(−num/den)) exactly (CKS20 Algorithm 1). `den > 0`.
    pub fn bernoulli_exp_neg<R: RngCore + ?Sized>(rng: &mut R, num: u128, den: u128) -> bool {
        assert!(den > 0, "zero denominator");
        bernoulli_exp_neg_big(rng, &BigUint::from(num), &BigUint::from(den))
    }

    fn discrete_laplace_big<R: RngCore + ?Sized>(rng: &mut R, t: &BigUint) -> BigInt {
        let one = BigUint::from(1u32);
        loop {
            let u = random_below(rng, t);
            if !bernoulli_exp_neg_big(rng, &u, t) {
                continue;
            }
            let mut v = BigUint::ZERO;
            while bernoulli_exp_neg_unit(rng, &one, &one) {
                v += 1u32;
            }
            let x = u + t * v;
            let negative = rng.next_u32() & 1 == 1;
            if negative && x.bits() == 0 {
                continue;
            }
            let x = BigInt::from(x);
            return if negative { -x } else { x };
        }
    }

    /// The discrete Laplace distribution with scale `t ≥ 1`, `P(x) ∝ exp(−|x|/t)` on Z
    /// (CKS20 Algorithm 2 with `s = 1`): `U` uniform in `[0, t)` kept with probability
    /// `exp(−U/t)`, `V ~ Geometric(1 − e^{−1})`, `|x| = U + tV`, a sign, and `−0` rejected.
    pub fn discrete_laplace<R: RngCore + ?Sized>(rng: &mut R, t: u64) -> i64 {
        assert!(t >= 1, "scale must be at least 1");
        loop {
            if let Ok(x) = i64::try_from(discrete_laplace_big(rng, &BigUint::from(t))) {
                return x;
            }
        }
    }

    /// The discrete Gaussian `N_Z(0, σ²)` (CKS20 Algorithm 3): with `t = ⌊σ⌋ + 1`,
    /// `Y ~ Lap_Z(t)` accepted with probability `exp(−(|Y| − σ²/t)²/(2σ²))`. With
    /// σ² = n/d the exponent is the rational `(|Y|·t·d − n)² / (2·n·d·t²)`. Draws beyond
    /// the i64 range are rejected.
    pub fn discrete_gaussian<R: RngCore + ?Sized>(rng: &mut R, sigma2: &Sigma2) -> i64 {
        let (n, d) = sigma2.big();
        let t = BigUint::from(sigma2.floor_sigma() + 1);
        let n_int = BigInt::from(n.clone());
        let den = BigUint::from(2u32) * &n * &d * &t * &t;
        loop {
            let y = discrete_laplace_big(rng, &t);
            let diff = BigInt::from(y.magnitude() * &t * &d) - &n_int;
            let num = diff.magnitude() * diff.magnitude();
            if bernoulli_exp_neg_big(rng, &num, &den)
                && let Ok(y) = i64::try_from(y)
            {
                return y;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::calibration::std_normal_cdf;
    use rand_chacha::ChaCha12Rng;

    // --- Statistical helpers -------------------------------------------------------
    //
    // Significance. Every statistical check below fails with probability at most about
    // 10⁻⁶ under the null hypothesis (the sampler is exact), with fixed seeds, so a
    // failure means a bug, not bad luck:
    // * z-tests (binomial proportions, means, variances) accept |z| < 5: two-sided
    //   P(|N(0,1)| ≥ 5) = 5.7·10⁻⁷ (normal approximation, every count here is ≫ 100);
    // * chi-square tests accept below the Wilson–Hilferty quantile
    //   df·(1 − 2/(9df) + z·√(2/(9df)))³ with z = 4.9 (upper tail 4.8·10⁻⁷); the
    //   approximation's error in the far tail is a few percent of the quantile for
    //   df ≥ 3, which z = 4.9 instead of 4.75 (α = 10⁻⁶) absorbs. Cells are merged until
    //   every expected count is at least 20.

    const Z: f64 = 5.0;

    fn chi2_critical(df: usize) -> f64 {
        let df = df as f64;
        let z = 4.9;
        let a = 2.0 / (9.0 * df);
        df * (1.0 - a + z * a.sqrt()).powi(3)
    }

    /// Chi-square statistic of `observed` against probabilities `probs` (summing to 1),
    /// merging adjacent cells until each expects ≥ 20; returns (statistic, df).
    fn chi2(observed: &[u64], probs: &[f64]) -> (f64, usize) {
        let n: u64 = observed.iter().sum();
        let n = n as f64;
        let mut cells: Vec<(f64, f64)> = Vec::new();
        let (mut o, mut e) = (0.0, 0.0);
        for (&obs, &p) in observed.iter().zip(probs) {
            o += obs as f64;
            e += p * n;
            if e >= 20.0 {
                cells.push((o, e));
                (o, e) = (0.0, 0.0);
            }
        }
        if let Some(last) = cells.last_mut() {
            last.0 += o;
            last.1 += e;
        }
        let stat = cells.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
        (stat, cells.len() - 1)
    }

    fn assert_chi2(observed: &[u64], probs: &[f64], what: &str) {
        let (stat, df) = chi2(observed, probs);
        assert!(df >= 1, "{what}: too few cells");
        let crit = chi2_critical(df);
        assert!(stat < crit, "{what}: chi2 {stat:.1} ≥ {crit:.1} (df {df})");
    }

    /// Exact pmf of N_Z(0, σ²) on [-m, m] (f64; the mass beyond is < 1e-300).
    fn dg_pmf(sigma: f64) -> (i64, Vec<f64>) {
        let m = (40.0 * sigma).ceil() as i64 + 5;
        let w: Vec<f64> = (-m..=m)
            .map(|x| (-(x as f64).powi(2) / (2.0 * sigma * sigma)).exp())
            .collect();
        let z: f64 = w.iter().sum();
        (m, w.iter().map(|v| v / z).collect())
    }

    fn histogram(samples: &[i64], m: i64) -> Vec<u64> {
        let mut h = vec![0u64; (2 * m + 1) as usize];
        for &s in samples {
            assert!(s.abs() <= m, "draw {s} out of the tested range");
            h[(s + m) as usize] += 1;
        }
        h
    }

    fn draws(dist: &DiscreteGaussian, n: usize, seed: u64) -> Vec<i64> {
        let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
        (0..n).map(|_| dist.sample_bits(&mut bits)).collect()
    }

    /// Mean 0 and second moment `var` (fourth moment `m4`) within Z standard errors.
    fn assert_moments(samples: &[i64], var: f64, m4: f64, what: &str) {
        let n = samples.len() as f64;
        let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / n;
        let m2 = samples.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
        let se_mean = (var / n).sqrt();
        let se_m2 = ((m4 - var * var) / n).sqrt();
        assert!(
            mean.abs() < Z * se_mean,
            "{what}: mean {mean} (se {se_mean})"
        );
        assert!(
            (m2 - var).abs() < Z * se_m2,
            "{what}: E x² {m2} vs {var} (se {se_m2})"
        );
    }

    /// Σ (c(k) − c(−k))² / (c(k) + c(−k)) over k ≥ 1: under symmetry each term is the
    /// square of an (approximately) standard normal, so the sum is χ² with as many
    /// degrees of freedom as pairs (pairs with fewer than 40 draws are pooled).
    fn assert_symmetric(samples: &[i64], what: &str) {
        let max = samples.iter().map(|v| v.abs()).max().unwrap_or(0);
        let (mut pos, mut neg) = (vec![0f64; max as usize + 1], vec![0f64; max as usize + 1]);
        for &s in samples {
            if s > 0 {
                pos[s as usize] += 1.0;
            } else if s < 0 {
                neg[(-s) as usize] += 1.0;
            }
        }
        let (mut stat, mut df, mut p, mut q) = (0.0, 0usize, 0.0, 0.0);
        for k in 1..=max as usize {
            p += pos[k];
            q += neg[k];
            if p + q >= 40.0 {
                stat += (p - q) * (p - q) / (p + q);
                df += 1;
                (p, q) = (0.0, 0.0);
            }
        }
        assert!(df >= 1);
        assert!(
            stat < chi2_critical(df),
            "{what}: symmetry chi2 {stat} (df {df})"
        );
    }

    /// Bernoulli count `k` of `n` against probability `p`.
    fn assert_binomial(k: u64, n: u64, p: f64, what: &str) {
        let (k, n) = (k as f64, n as f64);
        let se = (n * p * (1.0 - p)).sqrt();
        assert!(
            (k - n * p).abs() < Z * se.max(1e-9),
            "{what}: {k} of {n}, expected {}",
            n * p
        );
    }

    // --- σ² ---------------------------------------------------------------------

    #[test]
    fn sigma2_from_f64_is_the_exact_square() {
        for sigma in [
            0.5,
            1.0,
            3.0,
            0.1,
            1e8,
            1.0e8 + 0.37,
            6.02e7,
            2e9,
            2f64.powi(50),
        ] {
            let s2 = Sigma2::from_sigma(sigma).unwrap();
            // σ = m·2^e exactly; check num·2^(-2e) = m²·den in big integers.
            let bits = sigma.to_bits();
            let m = (bits & ((1 << 52) - 1)) | 1 << 52;
            let e = ((bits >> 52) & 0x7ff) as i64 - 1075;
            let lhs = BigUint::from(s2.numerator()) << 400u64;
            let rhs = (BigUint::from(m) * BigUint::from(m) * BigUint::from(s2.denominator()))
                << (400 + 2 * e) as u64;
            assert_eq!(lhs, rhs, "σ = {sigma}");
            let approx = s2.numerator() as f64 / s2.denominator() as f64;
            assert!((approx / (sigma * sigma) - 1.0).abs() < 1e-15);
            assert_eq!(s2.floor_sigma(), sigma.floor() as u64, "σ = {sigma}");
        }
        // Reduced fractions.
        assert_eq!(
            Sigma2::from_ratio(18, 2).unwrap(),
            Sigma2::from_ratio(9, 1).unwrap()
        );
        assert_eq!(
            Sigma2::from_sigma(0.5).unwrap(),
            Sigma2::from_ratio(1, 4).unwrap()
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-3, 2f64.powi(51)] {
            assert!(Sigma2::from_sigma(bad).is_err(), "{bad}");
        }
        assert!(Sigma2::from_ratio(1, 0).is_err());
        assert!(Sigma2::from_ratio(0, 1).is_err());
        assert!(Sigma2::from_ratio(1, 1 << 17).is_err());
        assert!(Sigma2::from_ratio(1, 1 << 16).is_ok());
        assert!(Sigma2::from_ratio(1 << 100, 1).is_ok());
        assert!(Sigma2::from_ratio((1 << 100) + 1, 1).is_err());
        assert!(Sigma2::from_ratio(u128::MAX, u128::MAX - 1).is_ok());
    }

    // --- Arithmetic building blocks ------------------------------------------------

    #[test]
    fn big_exp_bounds_bracket_exp() {
        let cases: [(u64, u64); 10] = [
            (0, 1),
            (1, 3),
            (1, 1),
            (2, 1),
            (7, 5),
            (22, 7),
            (1, 1 << 40),
            (100, 3),
            (500, 1),
            (123_456_789, 1_000_000),
        ];
        for (a, b) in cases {
            let (big_a, big_b) = (BigUint::from(a), BigUint::from(b));
            let want = (-(a as f64) / b as f64).exp();
            for p in [64u64, 128, 300, 1000] {
                let (lo, hi) = exp_neg_bounds(&big_a, &big_b, p);
                assert!(lo <= hi);
                if want * 2f64.powi(p as i32) > 1e30 || p == 1000 {
                    // Compare the leading digits: lo and hi within a few units.
                    let width = &hi - &lo;
                    assert!(width <= BigUint::from(8u32), "{a}/{b} p {p}: width {width}");
                }
                if p <= 300 && want > 1e-80 {
                    let scale = 2f64.powi(p as i32);
                    let lo_f = lo.to_string().parse::<f64>().unwrap() / scale;
                    let hi_f = hi.to_string().parse::<f64>().unwrap() / scale;
                    assert!(
                        lo_f <= want * (1.0 + 1e-14) && want <= hi_f * (1.0 + 1e-14),
                        "{a}/{b} p {p}: {lo_f} {want} {hi_f}"
                    );
                }
                // Nested precisions agree: the bounds at p+64 lie inside those at p.
                let (lo2, hi2) = exp_neg_bounds(&big_a, &big_b, p + 64);
                assert!((&lo << 64u32) <= hi2 && lo2 <= (&hi << 64u32));
            }
        }
        // exp(-0) is exactly one; e^{-j} for j ≥ p short-cuts to [0, 1].
        assert_eq!(
            exp_neg_bounds(&BigUint::ZERO, &BigUint::from(5u32), 70),
            (pow2(70), pow2(70))
        );
        assert_eq!(
            exp_neg_bounds(&BigUint::from(200u32), &BigUint::from(1u32), 100),
            (BigUint::ZERO, BigUint::from(1u32))
        );
    }

    /// e^{-1/2}·2^400 against an independent evaluation with a 400-digit rational
    /// series: Σ_{k<120} (−1/2)^k/k! with a common denominator.
    #[test]
    fn big_exp_matches_an_independent_series() {
        let k_max = 120u64;
        let mut den = BigUint::from(1u32);
        for k in 1..k_max {
            den *= 2 * k; // 2^k·k!
        }
        // Σ (−1)^k·den/(2^k k!)
        let (mut pos, mut neg) = (BigUint::ZERO, BigUint::ZERO);
        let mut term = den.clone();
        for k in 0..k_max {
            if k > 0 {
                term /= 2 * k;
            }
            if k % 2 == 0 {
                pos += &term;
            } else {
                neg += &term;
            }
        }
        let value = ((pos - neg) << 400u32) / &den;
        let (lo, hi) = exp_neg_bounds(&BigUint::from(1u32), &BigUint::from(2u32), 400);
        assert!(lo <= &value + 1u32 && value <= &hi + 1u32);
        assert!(&hi - &lo <= BigUint::from(4u32));
    }

    #[test]
    fn fast_exp_bounds_bracket_the_big_bounds() {
        let mut rng = ChaCha12Rng::seed_from_u64(3);
        for i in 0..3000u64 {
            let g: u64 = match i {
                0 => 0,
                1 => (1 << 62) - 1,
                2 => 1,
                _ => rng.random_range(0..1u64 << 62) >> rng.random_range(0..62),
            };
            let (lo, hi) = exp_neg_q63(g, g);
            let (big_lo, big_hi) = exp_neg_bounds(&BigUint::from(g), &pow2(64), 63 + 64);
            // lo·2^64 ≤ e^{-γ}·2^127 ≤ hi·2^64
            assert!(BigUint::from(lo) << 64u32 <= big_hi, "g {g}");
            assert!(big_lo <= BigUint::from(hi) << 64u32, "g {g}");
            assert!(hi - lo <= 40, "g {g}: width {}", hi - lo);
            // An interval of γ: still bracketing both ends.
            let g2 = g
                .saturating_add(rng.random_range(0..1000))
                .min((1 << 62) - 1);
            let (lo2, hi2) = exp_neg_q63(g, g2);
            assert!(lo2 <= lo && hi2 >= hi);
        }
        assert_eq!(exp_neg_q63(0, 0), (1 << 63, 1 << 63));
    }

    #[test]
    fn wide_multiply_and_shift() {
        let mut rng = ChaCha12Rng::seed_from_u64(4);
        for _ in 0..5000 {
            let a: u128 = rng.random::<u128>() >> rng.random_range(0..128);
            let b: u64 = rng.random::<u64>() >> rng.random_range(0..64);
            let s: u32 = rng.random_range(0..200);
            let exact = BigUint::from(a) * BigUint::from(b);
            let limbs = mul_u128_u64(a, b);
            let back = BigUint::from(limbs[0])
                + (BigUint::from(limbs[1]) << 64u32)
                + (BigUint::from(limbs[2]) << 128u32);
            assert_eq!(back, exact);
            let floor = &exact >> s;
            let ceil = shr_ceil(&exact, u64::from(s));
            match shr192_small(limbs, s) {
                Some((f, c)) => {
                    assert_eq!(BigUint::from(f), floor);
                    assert_eq!(BigUint::from(c), ceil);
                }
                None => assert!(ceil >= BigUint::from(1u64 << 62)),
            }
        }
    }

    /// The reservoir hands out the generator's bit stream in order, each bit once.
    #[test]
    fn random_bits_hand_out_the_stream_once() {
        let mut rng = ChaCha12Rng::seed_from_u64(7);
        let words: Vec<u64> = (0..400).map(|_| rng.next_u64()).collect();
        let bit = |i: usize| (words[i / 64] >> (i % 64)) & 1;
        let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(7));
        let mut sizes = ChaCha12Rng::seed_from_u64(8);
        let mut pos = 0;
        while pos + 63 < 64 * words.len() {
            let k = sizes.random_range(0..=63u32);
            let got = bits.take(k);
            let want = (0..k as usize).fold(0u64, |acc, i| acc | bit(pos + i) << i);
            assert_eq!(got, want, "take({k}) at bit {pos}");
            pos += k as usize;
        }
        assert_eq!(format!("{bits:?}"), "RandomBits { .. }");
        // `sample` (fresh reservoir per call) is the same sampler.
        let dist = DiscreteGaussian::from_sigma(1.5).unwrap();
        let mut rng = ChaCha12Rng::seed_from_u64(9);
        let samples: Vec<i64> = (0..100_000).map(|_| dist.sample(&mut rng)).collect();
        let (m, probs) = dg_pmf(1.5);
        assert_chi2(&histogram(&samples, m), &probs, "sample() σ=1.5");
    }

    #[test]
    fn alias_table_reproduces_the_weights_exactly() {
        let weights = [5u64, 0, 13, 1, 7, 6, 0, 0];
        let table = build_alias(&weights, 4);
        let mut mass = [0u64; 8];
        for (k, &(prob, alias)) in table.iter().enumerate() {
            mass[k] += prob;
            mass[alias as usize] += 4 - prob;
        }
        assert_eq!(mass, weights);
        // And for a real table.
        for sigma in [0.5, 3.0, 1e6] {
            let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
            let cap = 1u64 << dist.q_bits;
            let mut mass = vec![0u64; dist.table.len()];
            for (k, &e) in dist.table.iter().enumerate() {
                let prob = e & 0xffff_ffff;
                mass[k] += prob;
                mass[(e >> 32) as usize] += cap - prob;
            }
            for (i, bin) in dist.bins.iter().enumerate() {
                assert_eq!(mass[2 * i], bin.w_core);
                assert_eq!(mass[2 * i + 1], bin.w_cap);
            }
            assert_eq!(mass[dist.two_bins], dist.w_tail);
            assert_eq!(mass.iter().sum::<u64>(), cap * dist.table.len() as u64);
        }
    }

    /// κ as an exact fraction kn/2^ke, times m.
    fn kappa_times(dist: &DiscreteGaussian, m: &BigUint) -> (BigUint, BigUint) {
        (BigUint::from(dist.kn) * m, pow2(dist.ke))
    }

    /// Independent check of the envelope: for every bin,
    /// w_core ≤ κ·W·f(a+W−1) and κ·W·f(a) ≤ w_core + w_cap, with f evaluated directly
    /// at 256 bits (not through the construction's recurrences); for the tail,
    /// X0·B ≥ σ² and w_tail ≥ 2κ·B·f(X0). Also: the dummy weight is small.
    fn assert_envelope(dist: &DiscreteGaussian) {
        let p = 256;
        let w = 1u64 << dist.w_bits;
        let f = |x: u64| {
            let (a, b) = dist.gamma(u128::from(x));
            exp_neg_bounds(&a, &b, p)
        };
        let (kw, den) = kappa_times(dist, &BigUint::from(w));
        for (i, bin) in dist.bins.iter().enumerate() {
            let a = i as u64 * w;
            let (_, fa_hi) = f(a);
            let (fb_lo, _) = f(a + w - 1);
            // w_core·den·2^p ≤ kw·f_lo(b−1)  and  kw·f_hi(a) ≤ (w_core + w_cap)·den·2^p
            assert!(
                (BigUint::from(bin.w_core) * &den) << p <= &kw * fb_lo,
                "bin {i}"
            );
            assert!(
                &kw * fa_hi <= (BigUint::from(bin.w_core + bin.w_cap) * &den) << p,
                "bin {i}"
            );
        }
        let b = 1u64 << dist.b_bits;
        assert!(&dist.d * dist.x0 * b >= dist.n, "X0·B ≥ σ²");
        let (_, fx0_hi) = f(dist.x0);
        let (k2b, den) = kappa_times(dist, &BigUint::from(2 * b));
        assert!(&k2b * fx0_hi <= (BigUint::from(dist.w_tail) * den) << p);
        let cap = 1u64 << dist.q_bits;
        let mut dummy = 0u64;
        for (k, &e) in dist.table.iter().enumerate() {
            let prob = e & 0xffff_ffff;
            for (piece, mass) in [(k, prob), ((e >> 32) as usize, cap - prob)] {
                if piece > dist.two_bins {
                    dummy += mass;
                }
            }
        }
        let total = cap * dist.table.len() as u64;
        assert!(
            (dummy as f64) < 1e-3 * total as f64,
            "dummy {dummy} of {total}"
        );
    }

    #[test]
    fn envelope_is_certified() {
        for sigma in [0.5, 1.0, 3.0, 20.0, 1e3, 1e6, 1.005e8, 2e9] {
            assert_envelope(&DiscreteGaussian::from_sigma(sigma).unwrap());
        }
        assert_envelope(&DiscreteGaussian::with_layout(
            Sigma2::from_ratio(9, 1).unwrap(),
            1,
            4,
        ));
        assert_envelope(&DiscreteGaussian::with_layout(
            Sigma2::from_ratio(2500, 1).unwrap(),
            2,
            4,
        ));
        assert_envelope(&DiscreteGaussian::new(
            Sigma2::from_ratio(1, 1 << 16).unwrap(),
        ));
    }

    /// The large-σ layouts take the cheap path: one word per proposal, caps of about 1 %.
    #[test]
    fn layout_of_the_production_sigmas() {
        for (sigma, single) in [
            (3.0, true),
            (1e6, true),
            (1.005e8, true),
            (2e9, true),
            (1e12, true),
            (1e15, false),
        ] {
            let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
            assert_eq!(dist.single_word, single, "σ = {sigma}");
            assert_eq!(dist.q_bits, ALIAS_BITS);
            let caps: u64 = dist.bins.iter().map(|b| b.w_cap).sum();
            let frac = caps as f64 / (dist.table.len() as f64 * (1u64 << dist.q_bits) as f64);
            assert!(frac < 0.015, "σ = {sigma}: caps {frac}");
        }
    }

    /// Whenever the fast cap test decides, the exact α (256-bit bounds) agrees. Points
    /// are drawn at random and also right at the boundary u = ⌊α·2^64⌋ (±1), where the
    /// fast test must abstain rather than guess.
    #[test]
    fn fast_cap_decisions_agree_with_the_exact_ones() {
        let mut rng = ChaCha12Rng::seed_from_u64(11);
        for sigma in [20.0, 1e3, 1e6, 1.005e8, 2e9] {
            let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
            let (mut decided, mut total) = (0, 0);
            for _ in 0..300 {
                let bin = rng.random_range(0..dist.bins.len());
                let off = rng.random::<u64>() & ((1 << dist.w_bits) - 1);
                let x = ((bin as u64) << dist.w_bits) | off;
                let b = dist.bins[bin];
                if b.w_cap == 0 {
                    continue;
                }
                let (g_num, g_den) = dist.gamma(u128::from(x));
                let alpha = ExpAffine {
                    s_num: BigUint::from(dist.kn) << dist.w_bits,
                    s_den: pow2(dist.ke),
                    c: BigUint::from(b.w_core),
                    d: BigUint::from(b.w_cap),
                    g_num,
                    g_den,
                };
                let (lo, hi) = alpha.bounds(256);
                let boundary = u64::try_from(&(&lo >> 192u32)).unwrap_or(u64::MAX);
                for u in [
                    rng.random::<u64>(),
                    boundary,
                    boundary.saturating_sub(1),
                    boundary.saturating_add(1),
                ] {
                    total += 1;
                    match dist.cap_fast(bin, off, u) {
                        Some(true) => {
                            decided += 1;
                            assert!((BigUint::from(u) + 1u32) << 192u32 <= lo, "σ {sigma} x {x}");
                        }
                        Some(false) => {
                            decided += 1;
                            assert!(BigUint::from(u) << 192u32 >= hi, "σ {sigma} x {x}");
                        }
                        None => {}
                    }
                }
            }
            // Random u decide; the three boundary points mostly abstain.
            assert!(
                decided * 4 >= total,
                "σ {sigma}: decided {decided} of {total}"
            );
        }
    }

    // --- Bernoulli and Laplace sub-samplers ------------------------------------------

    #[test]
    fn cks20_bernoulli_exp_matches_exp() {
        let mut rng = ChaCha12Rng::seed_from_u64(20);
        let n = 100_000u64;
        for (num, den) in [
            (0u128, 1u128),
            (1, 3),
            (1, 1),
            (7, 5),
            (3, 1),
            (22, 7),
            (1u128 << 80, 3u128 << 79),
        ] {
            let k = (0..n)
                .filter(|_| cks20::bernoulli_exp_neg(&mut rng, num, den))
                .count();
            let p = (-(num as f64) / den as f64).exp();
            assert_binomial(k as u64, n, p, &format!("exp(-{num}/{den})"));
        }
    }

    /// The exact lazy Bernoulli on its own: α rational (exact bounds) and α = e^{-γ}
    /// (big bounds), from a random first word and from the word right at α's 64-bit
    /// prefix, where the outcome depends on the later digits: P(accept | u) is then the
    /// fractional part of α·2^64.
    #[test]
    fn lazy_bernoulli_is_exact() {
        let mut rng = ChaCha12Rng::seed_from_u64(21);
        let n = 30_000u64;
        // α = 1/3.
        let third = |p: u64| {
            let v = pow2(p) / 3u32;
            (v.clone(), v + 1u32)
        };
        let k = (0..n)
            .filter(|_| {
                let first = rng.next_u64();
                lazy_bernoulli(&mut rng, first, third)
            })
            .count();
        assert_binomial(k as u64, n, 1.0 / 3.0, "1/3");
        // u = ⌊2^64/3⌋: P = frac(2^64/3) = 1/3 (2^64 ≡ 1 mod 3).
        let u = (1u128 << 64).div_euclid(3) as u64;
        let k = (0..n)
            .filter(|_| lazy_bernoulli(&mut rng, u, third))
            .count();
        assert_binomial(k as u64, n, 1.0 / 3.0, "1/3 at its prefix");
        // α = e^{-7/5}.
        let (a, b) = (BigUint::from(7u32), BigUint::from(5u32));
        let bounds = |p: u64| exp_neg_bounds(&a, &b, p);
        let k = (0..n)
            .filter(|_| {
                let first = rng.next_u64();
                lazy_bernoulli(&mut rng, first, bounds)
            })
            .count();
        assert_binomial(k as u64, n, (-1.4f64).exp(), "e^-1.4");
        let (lo, _) = exp_neg_bounds(&a, &b, 64 + 64);
        let prefix = u64::try_from(&(&lo >> 64u32)).unwrap();
        let frac = u64::try_from(&(&lo & BigUint::from(u64::MAX))).unwrap() as f64 / 2f64.powi(64);
        let k = (0..n)
            .filter(|_| lazy_bernoulli(&mut rng, prefix, bounds))
            .count();
        assert_binomial(k as u64, n, frac, "e^-1.4 at its prefix");
        assert!(lazy_bernoulli(&mut rng, prefix - 1, bounds));
        assert!(!lazy_bernoulli(&mut rng, prefix + 1, bounds));
    }

    #[test]
    fn cks20_discrete_laplace_has_the_laplace_pmf() {
        let mut rng = ChaCha12Rng::seed_from_u64(22);
        for t in [1u64, 4] {
            let n = 100_000;
            let m = 40 * t as i64;
            let samples: Vec<i64> = (0..n)
                .map(|_| cks20::discrete_laplace(&mut rng, t))
                .collect();
            let w: Vec<f64> = (-m..=m)
                .map(|x| (-(x.abs() as f64) / t as f64).exp())
                .collect();
            let z: f64 = w.iter().sum();
            let probs: Vec<f64> = w.iter().map(|v| v / z).collect();
            assert_chi2(&histogram(&samples, m), &probs, &format!("Lap_Z({t})"));
            assert_symmetric(&samples, &format!("Lap_Z({t})"));
        }
    }

    #[test]
    fn cks20_discrete_gaussian_has_the_exact_pmf() {
        let mut rng = ChaCha12Rng::seed_from_u64(23);
        for (num, den) in [(1u128, 4u128), (9, 1)] {
            let s2 = Sigma2::from_ratio(num, den).unwrap();
            let sigma = (num as f64 / den as f64).sqrt();
            let samples: Vec<i64> = (0..60_000)
                .map(|_| cks20::discrete_gaussian(&mut rng, &s2))
                .collect();
            let (m, probs) = dg_pmf(sigma);
            assert_chi2(&histogram(&samples, m), &probs, &format!("CKS20 σ={sigma}"));
        }
    }

    // --- The fast sampler's distribution ---------------------------------------------

    fn exact_moments(sigma: f64) -> (f64, f64) {
        let (m, probs) = dg_pmf(sigma);
        let var = (-m..=m)
            .zip(&probs)
            .map(|(x, p)| (x as f64).powi(2) * p)
            .sum();
        let m4 = (-m..=m)
            .zip(&probs)
            .map(|(x, p)| (x as f64).powi(4) * p)
            .sum();
        (var, m4)
    }

    #[test]
    fn small_sigmas_have_the_exact_pmf() {
        for (i, sigma) in [0.5, 1.0, 3.0, 20.0].into_iter().enumerate() {
            let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
            let samples = draws(&dist, 400_000, 100 + i as u64);
            let (m, probs) = dg_pmf(sigma);
            assert_chi2(&histogram(&samples, m), &probs, &format!("σ={sigma}"));
            let (var, m4) = exact_moments(sigma);
            assert_moments(&samples, var, m4, &format!("σ={sigma}"));
            assert_symmetric(&samples, &format!("σ={sigma}"));
        }
        // The exact variance is below σ² at small σ: σ = 0.5 gives 0.2146..., not 0.25.
        let (var, _) = exact_moments(0.5);
        assert!((var - 0.25).abs() > 0.03);
    }

    /// Layouts that make the tail and the exact (big-integer) cap path common: the body
    /// stops at 4 (≈ 1.3σ) for σ = 3, and for σ = 50 at 128 ≈ 2.6σ with bins of width 32
    /// whose γ exceeds the fast path's range (so every outer cap goes to big integers).
    #[test]
    fn tail_and_exact_paths_have_the_exact_pmf() {
        for (num, body, bins, seed) in [(9u128, 1, 4, 30), (2500, 2, 4, 31)] {
            let s2 = Sigma2::from_ratio(num, 1).unwrap();
            let sigma = (num as f64).sqrt();
            let dist = DiscreteGaussian::with_layout(s2, body, bins);
            let samples = draws(&dist, 80_000, seed);
            let (m, probs) = dg_pmf(sigma);
            assert_chi2(
                &histogram(&samples, m),
                &probs,
                &format!("σ={sigma} tail layout"),
            );
            let tail = samples
                .iter()
                .filter(|&&x| x.unsigned_abs() >= dist.x0)
                .count();
            let p_tail: f64 = (-m..=m)
                .zip(&probs)
                .filter(|(x, _)| x.unsigned_abs() >= dist.x0)
                .map(|(_, p)| p)
                .sum();
            assert!(p_tail > 0.005);
            assert_binomial(tail as u64, samples.len() as u64, p_tail, "tail mass");
            let (var, m4) = exact_moments(sigma);
            assert_moments(&samples, var, m4, &format!("σ={sigma} tail layout"));
        }
    }

    /// Large σ: chi-square over bins of width ⌊σ/4⌋ on [−6σ, 6σ] plus two tails, against
    /// the normal CDF with continuity correction: P(a ≤ X < b) = Φ((b−½)/σ) − Φ((a−½)/σ)
    /// up to a relative O(1/σ²) (Euler–Maclaurin; the discrete normaliser equals
    /// σ√(2π) up to e^{−2π²σ²}), far below the test's resolution (~10⁻³).
    #[test]
    fn large_sigmas_match_the_normal_cdf() {
        for (i, sigma) in [1e3, 1e6, 1.005e8, 2e9].into_iter().enumerate() {
            let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
            let samples = draws(&dist, 400_000, 200 + i as u64);
            let width = (sigma / 4.0).floor() as i64;
            let edges: Vec<i64> = (-24..=24).map(|k| k * width).collect();
            let mut counts = vec![0u64; edges.len() + 1];
            for &s in &samples {
                counts[edges.partition_point(|&e| e <= s)] += 1;
            }
            let cdf = |e: i64| std_normal_cdf((e as f64 - 0.5) / sigma);
            let mut probs = vec![cdf(edges[0])];
            probs.extend(edges.windows(2).map(|w| cdf(w[1]) - cdf(w[0])));
            probs.push(1.0 - cdf(*edges.last().unwrap()));
            assert_chi2(&counts, &probs, &format!("σ={sigma}"));
            assert_moments(
                &samples,
                sigma * sigma,
                3.0 * sigma.powi(4),
                &format!("σ={sigma}"),
            );
            assert_symmetric_binned(&samples, width, &format!("σ={sigma}"));
        }
    }

    /// Symmetry for large σ: counts of x ∈ [kw, (k+1)w) against (−(k+1)w, −kw].
    fn assert_symmetric_binned(samples: &[i64], width: i64, what: &str) {
        let folded: Vec<i64> = samples
            .iter()
            .map(|&s| s.signum() * ((s.abs() + width - 1) / width))
            .collect();
        assert_symmetric(&folded, what);
    }

    #[test]
    fn noise_sampler_caches_and_is_deterministic() {
        let mut a = DiscreteGaussianSampler::from_seed_for_simulation(5);
        let mut b = DiscreteGaussianSampler::from_seed_for_simulation(5);
        for sigma in [1e6, 1e6, 3.0, 1e6] {
            for _ in 0..50 {
                assert_eq!(a.sample_grid(sigma), b.sample_grid(sigma));
            }
        }
        // The σ in use follows the argument.
        let small: Vec<i64> = (0..2000).map(|_| a.sample_grid(3.0)).collect();
        assert!(small.iter().all(|v| v.abs() < 60));
        let big: Vec<i64> = (0..2000).map(|_| a.sample_grid(1e8)).collect();
        assert!(big.iter().filter(|v| v.abs() > 1_000_000).count() > 1900);
        assert!((0..100).all(|_| a.sample_grid(0.0) == 0));
        assert!(a.uniform_below(10) < 10);
        assert_eq!(format!("{a:?}"), "DiscreteGaussianSampler { .. }");
        let mut os = DiscreteGaussianSampler::from_os_rng().unwrap();
        let draws: Vec<i64> = (0..4).map(|_| os.sample_grid(1e9)).collect();
        assert!(draws.iter().any(|&v| v != draws[0]));
        let dist = DiscreteGaussian::from_sigma(2.0).unwrap();
        assert!(os.sample(&dist).abs() < 100);
        assert!(format!("{dist:?}").starts_with("DiscreteGaussian { sigma2"));
    }

    #[test]
    #[should_panic(expected = "must be finite")]
    fn noise_sampler_refuses_nan() {
        DiscreteGaussianSampler::from_seed_for_simulation(1).sample_grid(f64::NAN);
    }
}
