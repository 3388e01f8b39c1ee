//! Fast fixed-point helpers (u64 / u128 only): certified bounds on `exp(−γ)` in Q63
//! and the wide products and directed shifts of the sampler's fast cap test.

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
pub(super) fn exp_neg_q63(g_lo: u64, g_hi: u64) -> (u64, u64) {
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
pub(super) fn mul_u128_u64(a: u128, b: u64) -> [u64; 3] {
    let p0 = u128::from(a as u64) * u128::from(b);
    let p1 = u128::from((a >> 64) as u64) * u128::from(b);
    let mid = (p0 >> 64) + u128::from(p1 as u64);
    [p0 as u64, mid as u64, ((p1 >> 64) + (mid >> 64)) as u64]
}

/// `(⌊v/2^s⌋, ⌈v/2^s⌉)` if the ceiling is below `2^62`.
#[inline]
pub(super) fn shr192_small(v: [u64; 3], s: u32) -> Option<(u64, u64)> {
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
pub(super) fn shr_floor_u128(v: u128, s: u32) -> u128 {
    if s >= 128 { 0 } else { v >> s }
}

#[inline]
pub(super) fn shr_ceil_u128(v: u128, s: u32) -> u128 {
    if s >= 128 {
        u128::from(v != 0)
    } else {
        let q = v >> s;
        q + u128::from(q << s != v)
    }
}
