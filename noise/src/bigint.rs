//! Big-integer fixed point with directed rounding: certified bounds on `exp(−a/b)`
//! and the exact lazy Bernoulli trial `U < α` that the rare slow paths fall back to.

use num_bigint::BigUint;
use rand::RngCore;

pub(super) fn pow2(p: u64) -> BigUint {
    BigUint::from(1u32) << p
}

/// `⌈a / 2^s⌉`.
pub(super) fn shr_ceil(a: &BigUint, s: u64) -> BigUint {
    let q = a >> s;
    // Exact iff the s low bits are zero (or a = 0).
    if a.trailing_zeros().is_none_or(|tz| tz >= s) {
        q
    } else {
        q + 1u32
    }
}

/// `⌈a / b⌉`.
pub(super) fn div_ceil_big(a: &BigUint, b: &BigUint) -> BigUint {
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
pub(super) fn exp_neg_bounds(a: &BigUint, b: &BigUint, p: u64) -> (BigUint, BigUint) {
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
pub(super) struct ExpAffine {
    pub(super) s_num: BigUint,
    pub(super) s_den: BigUint,
    pub(super) c: BigUint,
    pub(super) d: BigUint,
    pub(super) g_num: BigUint,
    pub(super) g_den: BigUint,
}

impl ExpAffine {
    pub(super) fn bounds(&self, prec: u64) -> (BigUint, BigUint) {
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
pub(super) fn lazy_bernoulli<R: RngCore + ?Sized>(
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
