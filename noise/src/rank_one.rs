//! [`RankOneSampler`]: the exact sampler of the rank-one PrivUnitG mechanism (pure
//! ε-LDP). Parameters (γ, the tilt λ, the cap probability `p̂`, the lattice and input
//! grids) come from `ldpcov_privacy::mechanism::rank_one`; the privacy argument is in
//! `docs/PRIVACY.md`, section "The rank-one mechanism" (§8.3–8.4).
//!
//! The output law is a two-component mixture with a **public** weight `p̂` (a multiple
//! of `2^−64`): with probability `p̂` the lattice Gaussian conditioned on the cap of the
//! input, otherwise conditioned on the rest of the space. Every report draws **both**
//! components and then keeps one, so its running time does not tell which:
//!
//! 1. `b ← [w < P]` for one fresh 64-bit word `w` (`P = p̂·2^64`).
//! 2. **Off-cap component**: repeat { `k ∈ Z^{p+1}`, each coordinate an exact discrete
//!    Gaussian with σ = `2^K` ([`DiscreteGaussian`]); `t = Σ kᵢvᵢ` exactly in i128 }
//!    until `k` is in the box `|kᵢ| < 2^61` and off the cap (`|t| < T`, or `t < T`
//!    one-sided; `T = γ·2^{K+m}`).
//! 3. **Cap component** (the half-cap `t ≥ T`): repeat { `kᵢ = gᵢ + λ·vᵢ·2^{K−m}` with
//!    `gᵢ` the same discrete Gaussian (an exponentially tilted proposal with an
//!    *integer* centre); `t = Σ kᵢvᵢ`; one fresh word `u`; accept iff `k` is in the box,
//!    `t ≥ T` and `U < exp(−λ(t − T)/2^{K+m})` (`U = (u + V)/2^64`, `V` uniform, decided
//!    from certified fixed-point bounds, exactly with big integers in the rare
//!    undecided case) }. Symmetric cap: then one bit from the reservoir flips the sign
//!    (`k → −k` maps one half-cap onto the other and keeps the lattice Gaussian).
//! 4. Keep the cap component if `b`, else the off-cap one.
//!
//! The proposal's law on the box is `∝ exp(−‖k − c‖²/2σ²)`, `c = λv·2^{K−m}`, and the
//! target's `∝ exp(−‖k‖²/2σ²)`; their ratio is `∝ exp(−λt/2^{K+m})`, so the acceptance
//! `exp(−λ(t − T)/2^{K+m}) ≤ 1` on the half-cap makes the accepted `k` exactly the
//! lattice Gaussian conditioned on the box and the half-cap. No floating-point number
//! is computed.

use super::bigint::{exp_neg_bounds, lazy_bernoulli, pow2};
use super::fixed_point::exp_neg_q63;
use super::random_bits::RandomBits;
use super::sampler::DiscreteGaussian;
use super::sigma2::Sigma2;
use num_bigint::BigUint;
use rand::RngCore;
use thiserror::Error;

/// The largest lattice exponent `K` (σ = `2^K` ≤ `2^50`, the sampler's limit).
const MAX_LATTICE_BITS: u32 = 50;
/// The largest input exponent `m`.
const MAX_INPUT_BITS: u32 = 60;
/// `|kᵢ| < 2^63` for every candidate (a draw below `2^62` plus a centre below `2^61`).
const DRAW_BITS: u32 = 63;
/// The box `|kᵢ| < 2^BOX_BITS` both components are conditioned on: the same for every
/// input, and inside the range `|kᵢ − cᵢ| < 2^62` of the tilted proposal.
const BOX_BITS: u32 = 61;
/// The largest tilt λ.
const MAX_TILT: u32 = 255;
/// `e^{−n}·2^63 < 1` for `n ≥ EXP_TABLE_LEN − 1`: the fast path's table of `e^{−n}`.
const EXP_TABLE_LEN: usize = 45;

/// Why a rank-one sampler could not be built or could not report on an input.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RankOneSamplerError {
    /// `K` out of range.
    #[error("lattice bits {0} must be between 1 and {MAX_LATTICE_BITS}")]
    LatticeBits(u32),
    /// `m` out of range, or above `K` (the tilted centre `λv·2^{K−m}` must be integer).
    #[error("input bits {0} must be between 1 and {MAX_INPUT_BITS} and at most the lattice bits")]
    InputBits(u32),
    /// The threshold `γ·2^{K+m}` is not an integer below `2^126`, or γ is zero.
    #[error(
        "γ = {units}·2^-{bits} does not give an integer cap threshold below 2^126 on this lattice"
    )]
    Gamma {
        /// γ's numerator.
        units: u64,
        /// γ's exponent.
        bits: u32,
    },
    /// The tilt λ is zero or above 255.
    #[error("the tilt {0} must be between 1 and {MAX_TILT}")]
    Tilt(u32),
    /// The cap probability `P·2^−64` is zero (the cap would never be reported).
    #[error("the cap probability must be positive")]
    CapProbability,
    /// Input and output of different lengths.
    #[error("the lifted input has {input} coordinates, the output buffer {output}")]
    Length {
        /// Input length.
        input: usize,
        /// Output length.
        output: usize,
    },
    /// So many coordinates that `Σ kᵢvᵢ` could overflow an i128.
    #[error("{0} coordinates are too many for an exact i128 inner product at these grids")]
    TooLong(usize),
    /// A lifted input off its norm band `2^{2m} − 2^{m+1} ≤ ‖v‖² ≤ 2^{2m}` (not lifted
    /// to the sphere by `ldpcov_privacy::mechanism::rank_one::lift_to_sphere`).
    #[error(
        "the lifted input's squared norm is outside [2^2m - 2^(m+1), 2^2m]: lift it to the sphere first"
    )]
    NotOnSphere,
}

/// The cap of the rank-one mechanism (mirrors `ldpcov_privacy::mechanism::rank_one::Cap`, which this
/// crate cannot depend on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapShape {
    /// `|⟨y, ũ⟩| ≥ γ`.
    Symmetric,
    /// `⟨y, ũ⟩ ≥ γ`.
    OneSided,
}

/// The rounds one report took: both components are always drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankOneRounds {
    /// Rounds of the off-cap component (Geometric with success `1 − Q(v)`).
    pub off_cap: u64,
    /// Rounds of the cap component (Geometric with success `A(v) = e^{λγ − λ²ρ²/2}·Q₊(v)`).
    pub cap: u64,
}

impl RankOneRounds {
    /// Both components' rounds together.
    pub fn total(&self) -> u64 {
        self.off_cap + self.cap
    }
}

/// The exact rank-one sampler for one `(K, m, γ, λ, p̂, cap)`.
///
/// A report draws a public-weight coin, one off-cap candidate and one cap candidate
/// (each by rejection, `p + 1` exact discrete Gaussian draws on the lattice `2^−K` per
/// round) and keeps one of the two (the algorithm and the privacy argument:
/// `docs/PRIVACY.md`, §8.3). Its output is ε-LDP for the ε that
/// `ldpcov_privacy::mechanism::rank_one::privacy_loss_bound` computes from `p̂`, the
/// cap mass and the lattice slack.
///
/// ```
/// use ldpcov_noise::{CapShape, RandomBits, RankOneSampler};
/// use rand::SeedableRng;
///
/// // K = m = 40, γ = 82 261·2^−16 ≈ 1.2552, λ = 1, p̂ ≈ 0.418 (ε ≈ 1: use
/// // ldpcov_privacy::mechanism::rank_one's values).
/// let s = RankOneSampler::new(CapShape::Symmetric, 40, 40, 82_261, 16, 1, 7_710_000_000_000_000_000)?;
/// let mut bits = RandomBits::new(rand_chacha::ChaCha20Rng::seed_from_u64(7)); // not private
/// let direction = [0, 1i64 << 40]; // u = 0 lifted to (0, 1)
/// let mut k = [0i64; 2];
/// let rounds = s.sample(&mut bits, &direction, &mut k)?;
/// assert!(rounds.off_cap >= 1 && rounds.cap >= 1);
/// # Ok::<(), ldpcov_noise::RankOneSamplerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RankOneSampler {
    lattice: DiscreteGaussian,
    lattice_bits: u32,
    input_bits: u32,
    threshold: i128,
    cap: CapShape,
    tilt: u32,
    cap_probability: u64,
    /// Certified `(lo, hi)` bounds on `e^{−n}·2^63`, `n < EXP_TABLE_LEN`.
    exp_table: [(u64, u64); EXP_TABLE_LEN],
}

impl RankOneSampler {
    /// The sampler with lattice `2^−lattice_bits`, inputs on the grid `2^−input_bits`
    /// (`input_bits ≤ lattice_bits`), `γ = gamma_units·2^−gamma_bits`, the tilt λ of
    /// the cap component's proposal and the cap probability `p̂ = cap_probability·2^−64`.
    /// Building one takes about a millisecond (the discrete Gaussian's table).
    pub fn new(
        cap: CapShape,
        lattice_bits: u32,
        input_bits: u32,
        gamma_units: u64,
        gamma_bits: u32,
        tilt: u32,
        cap_probability: u64,
    ) -> Result<Self, RankOneSamplerError> {
        if !(1..=MAX_LATTICE_BITS).contains(&lattice_bits) {
            return Err(RankOneSamplerError::LatticeBits(lattice_bits));
        }
        if !(1..=MAX_INPUT_BITS.min(lattice_bits)).contains(&input_bits) {
            return Err(RankOneSamplerError::InputBits(input_bits));
        }
        let gamma_err = RankOneSamplerError::Gamma {
            units: gamma_units,
            bits: gamma_bits,
        };
        let shift = (lattice_bits + input_bits)
            .checked_sub(gamma_bits)
            .ok_or(gamma_err.clone())?;
        let threshold = i128::from(gamma_units)
            .checked_shl(shift)
            .filter(|&t| t > 0 && t < 1 << 126 && t >> shift == i128::from(gamma_units))
            .ok_or(gamma_err)?;
        if !(1..=MAX_TILT).contains(&tilt) {
            return Err(RankOneSamplerError::Tilt(tilt));
        }
        if cap_probability == 0 {
            return Err(RankOneSamplerError::CapProbability);
        }
        let sigma2 = Sigma2::from_ratio(1 << (2 * lattice_bits), 1)
            .map_err(|_| RankOneSamplerError::LatticeBits(lattice_bits))?;
        let one = BigUint::from(1u32);
        let word = |b: &BigUint| b.iter_u64_digits().next().unwrap_or(0);
        let exp_table = std::array::from_fn(|n| {
            let (lo, hi) = exp_neg_bounds(&BigUint::from(n), &one, 63);
            (word(&lo), word(&hi))
        });
        Ok(RankOneSampler {
            lattice: DiscreteGaussian::new(sigma2),
            lattice_bits,
            input_bits,
            threshold,
            cap,
            tilt,
            cap_probability,
            exp_table,
        })
    }

    /// One report for the lifted input `direction` (`p + 1` integers on the grid
    /// `2^−m`, norm in the band of `lift_to_sphere`): writes the lattice coordinates
    /// `kᵢ` (`yᵢ = kᵢ·2^−K`) to `out` and returns both components' rounds.
    pub fn sample<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> Result<RankOneRounds, RankOneSamplerError> {
        if direction.len() != out.len() {
            return Err(RankOneSamplerError::Length {
                input: direction.len(),
                output: out.len(),
            });
        }
        // Σ |kᵢvᵢ| < len·2^{63+m} must stay below 2^126.
        let len_bits = usize::BITS - direction.len().leading_zeros();
        if DRAW_BITS + self.input_bits + len_bits > 126 {
            return Err(RankOneSamplerError::TooLong(direction.len()));
        }
        let m = self.input_bits;
        let one = 1u128 << m;
        let mut norm2: u128 = 0;
        for &v in direction {
            let mag = u128::from(v.unsigned_abs());
            if mag > one {
                return Err(RankOneSamplerError::NotOnSphere);
            }
            norm2 += mag * mag;
        }
        let full = one * one;
        if norm2 > full || norm2 < full - (one << 1) {
            return Err(RankOneSamplerError::NotOnSphere);
        }
        Ok(self.sample_unchecked(bits, direction, out))
    }

    /// The report for any direction (tests use it on inputs off the sphere): the coin,
    /// then the off-cap component into `out`, then the cap component, then the choice.
    pub(super) fn sample_unchecked<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> RankOneRounds {
        let keep_cap = bits.rng_mut().next_u64() < self.cap_probability;
        let off_cap = self.off_cap_component(bits, direction, out);
        let mut in_cap = vec![0i64; out.len()];
        let cap = self.cap_component(bits, direction, &mut in_cap);
        // Both components were drawn whatever `keep_cap` is; choose without a branch
        // on it per coordinate.
        let mask = -i64::from(keep_cap);
        for (o, c) in out.iter_mut().zip(&in_cap) {
            *o = (*c & mask) | (*o & !mask);
        }
        RankOneRounds { off_cap, cap }
    }

    /// `p + 1` fresh lattice draws plus `centre·vᵢ` into `out`: returns `t = Σ kᵢvᵢ`
    /// and whether every `|kᵢ| < 2^61`. A coordinate whose centre overflows (only for
    /// directions `sample` refuses) counts as outside the box.
    fn candidate<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        centre: i64,
        out: &mut [i64],
    ) -> (i128, bool) {
        let mut t: i128 = 0;
        let mut in_box = true;
        for (k, &v) in out.iter_mut().zip(direction) {
            let g = self.lattice.sample_bits(bits);
            let x = centre.checked_mul(v).and_then(|c| g.checked_add(c));
            let x = x.unwrap_or(i64::MAX);
            in_box &= x.unsigned_abs() < 1 << BOX_BITS;
            t = t.wrapping_add(i128::from(x) * i128::from(v));
            *k = x;
        }
        (t, in_box)
    }

    fn in_cap(&self, t: i128) -> bool {
        match self.cap {
            CapShape::Symmetric => t.unsigned_abs() >= self.threshold as u128,
            CapShape::OneSided => t >= self.threshold,
        }
    }

    /// The lattice Gaussian conditioned on the box and off the cap, by plain rejection.
    fn off_cap_component<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> u64 {
        let mut rounds = 0;
        loop {
            rounds += 1;
            let (t, in_box) = self.candidate(bits, direction, 0, out);
            if in_box & !self.in_cap(t) {
                return rounds;
            }
        }
    }

    /// The lattice Gaussian conditioned on the box and the cap: the half-cap `t ≥ T` by
    /// the tilted proposal (centre `λ·v·2^{K−m}`, acceptance `exp(−λ(t − T)/2^{K+m})`),
    /// then (symmetric) a random sign.
    fn cap_component<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> u64 {
        let centre = i64::from(self.tilt) << (self.lattice_bits - self.input_bits);
        let mut rounds = 0;
        loop {
            rounds += 1;
            let (t, in_box) = self.candidate(bits, direction, centre, out);
            let half_cap = t >= self.threshold;
            // t − T ≥ 0 on the half-cap (no overflow: |t|, T < 2^126); 0 elsewhere, so
            // that every round computes the same bounds and draws the same word.
            let over = if half_cap {
                (t - self.threshold) as u128
            } else {
                0
            };
            let coin = self.tilt_coin(bits.rng_mut(), over, half_cap);
            if in_box & half_cap & coin {
                break;
            }
        }
        if self.cap == CapShape::Symmetric && bits.take(1) == 1 {
            for k in out.iter_mut() {
                *k = -*k;
            }
        }
        rounds
    }

    /// Bernoulli(exp(−λ·over/2^{K+m})) exactly: `U < exp(−x)` for `U = (u + V)·2^−64`,
    /// `u` one fresh word; decided by [`exp_neg_fast`](Self::exp_neg_fast) except with
    /// probability below `2^−50`, when big-integer bounds refine it
    /// ([`lazy_bernoulli`]). Only called with `over = 0` outside the half-cap, where
    /// `exp(0) = 1` is always decided.
    pub(super) fn tilt_coin<R: RngCore>(&self, rng: &mut R, over: u128, half_cap: bool) -> bool {
        let u = u128::from(rng.next_u64());
        let scaled = over.checked_mul(u128::from(self.tilt));
        if let Some(x) = scaled {
            let (lo, hi) = self.exp_neg_fast(x);
            if u < lo {
                return true;
            }
            if u >= hi {
                return false;
            }
        }
        half_cap && self.tilt_coin_exact(rng, u as u64, over)
    }

    /// The undecided case of [`tilt_coin`](Self::tilt_coin), with big integers.
    #[cold]
    fn tilt_coin_exact<R: RngCore>(&self, rng: &mut R, first: u64, over: u128) -> bool {
        let num = BigUint::from(over) * self.tilt;
        let den = pow2(u64::from(self.lattice_bits + self.input_bits));
        lazy_bernoulli(rng, first, |p| exp_neg_bounds(&num, &den, p))
    }

    /// Certified bounds `lo ≤ exp(−x/2^{K+m})·2^64 ≤ hi`, in the same fixed work for
    /// every `x`: `x/2^{K+m} = n + f`; `e^{−f} = (e^{−f/8})^8` from the Q63 Taylor
    /// bounds (`f/8 < ¼`) and three directed squarings; `e^{−n}` from the table
    /// (`n` clamped to 44, where `e^{−n}·2^63 < 1` and the bounds are `[0, 1]`).
    /// About 2^−56 apart or less.
    pub(super) fn exp_neg_fast(&self, x: u128) -> (u128, u128) {
        let s = self.lattice_bits + self.input_bits;
        let n = x >> s;
        let low = x & ((1u128 << s) - 1);
        // f in units of 2^−64: [f_lo, f_hi].
        let (f_lo, f_hi) = if s >= 64 {
            let rest = s - 64;
            let f = low >> rest;
            (f, f + u128::from(low & ((1u128 << rest) - 1) != 0))
        } else {
            (low << (64 - s), low << (64 - s))
        };
        // f/8 < 2^61 units: within exp_neg_q63's range.
        let (e_lo, e_hi) = exp_neg_q63((f_lo >> 3) as u64, (f_hi.div_ceil(8)) as u64);
        let (mut lo, mut hi) = (u128::from(e_lo), u128::from(e_hi));
        for _ in 0..3 {
            lo = (lo * lo) >> 63;
            hi = (hi * hi).div_ceil(1 << 63);
        }
        let index = usize::try_from(n)
            .unwrap_or(EXP_TABLE_LEN - 1)
            .min(EXP_TABLE_LEN - 1);
        let (t_lo, t_hi) = self.exp_table[index];
        lo = (lo * u128::from(t_lo)) >> 63;
        hi = (hi * u128::from(t_hi)).div_ceil(1 << 63);
        (lo << 1, hi << 1)
    }
}
