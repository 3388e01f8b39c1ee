//! The fast exact sampler: [`DiscreteGaussian`], its table construction and its draw.

use super::bigint::{ExpAffine, div_ceil_big, exp_neg_bounds, lazy_bernoulli, pow2, shr_ceil};
use super::fixed_point::{exp_neg_q63, mul_u128_u64, shr_ceil_u128, shr_floor_u128, shr192_small};
use super::random_bits::{BitSource, RandomBits, WordPerTake};
use super::sigma2::{Sigma2, SigmaError};
use num_bigint::BigUint;
use rand::RngCore;

/// Fixed-point precision (bits) of the table construction.
const PREC: u64 = 192;
/// The body of the table reaches `BODY_SIGMAS·(⌊σ⌋ + 1)`.
const BODY_SIGMAS: u64 = 6;
/// At most this many bins (so that the `2N + 2` pieces fit 2048 alias columns).
const MAX_BINS: u64 = 1000;
/// Draws with `|x| ≥ OUTPUT_LIMIT` are rejected so the result fits an i64.
const OUTPUT_LIMIT: u128 = 1 << 62;
/// Bits of the alias thresholds: each column holds `2^ALIAS_BITS` units of weight.
pub(super) const ALIAS_BITS: u32 = 12;

/// One bin of the body: weights and the fast-path bounds on `H = κ·W·f(a)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bin {
    pub(super) w_core: u64,
    pub(super) w_cap: u64,
    /// `H ∈ [hm_lo, hm_hi]·2^(−rs−1)` (so `H·g·2^64 ∈ [hm·G] >> rs` for `g = G·2^−63`).
    hm_lo: u64,
    hm_hi: u64,
    rs: u32,
}

/// The exact discrete Gaussian `N_Z(0, σ²)` for one σ², precomputed (see the
/// [module documentation](super) for the algorithm and the exactness argument).
///
/// Building one takes about half a millisecond (a few thousand big-integer products);
/// a draw then takes about 45 random bits (at σ = 10⁸) and no big integers, except
/// with probability about `2^−40`.
#[derive(Clone)]
pub struct DiscreteGaussian {
    sigma2: Sigma2,
    pub(super) n: BigUint,
    pub(super) d: BigUint,
    log_cols: u32,
    col_mask: u64,
    pub(super) q_bits: u32,
    q_mask: u64,
    /// Bits taken per proposal.
    head_bits: u32,
    pub(super) w_bits: u32,
    pub(super) single_word: bool,
    /// Per alias column: threshold (low 32 bits) and alias piece (high 32 bits).
    pub(super) table: Box<[u64]>,
    /// Piece `p < two_bins` is the core (`p` even) or cap (`p` odd) of bin `p/2`;
    /// `p = two_bins` is the tail; larger pieces are dummies.
    pub(super) two_bins: usize,
    pub(super) bins: Box<[Bin]>,
    pub(super) x0: u64,
    pub(super) b_bits: u32,
    pub(super) w_tail: u64,
    /// κ = kn·2^−ke.
    pub(super) kn: u64,
    pub(super) ke: u64,
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
pub(super) fn build_alias(weights: &[u64], capacity: u64) -> Vec<(u64, u32)> {
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
    pub(super) fn with_layout(sigma2: Sigma2, body_sigmas: u64, max_bins: u64) -> Self {
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
    pub(super) fn gamma(&self, x: u128) -> (BigUint, BigUint) {
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
    pub(super) fn cap_fast(&self, bin: usize, off: u64, u: u64) -> Option<bool> {
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
