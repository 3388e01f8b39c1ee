//! [`RankOneSampler`]: the exact sampler of the rank-one PrivUnitG mechanism (pure
//! ε-LDP). Parameters (γ, the nominal ε, the lattice and input grids) come from
//! `ldpcov_privacy::mechanism::rank_one`; the privacy argument is in `docs/PRIVACY.md`, section
//! "The rank-one mechanism".
//!
//! One report: repeat { draw `k ∈ Z^{p+1}`, each coordinate an independent exact
//! discrete Gaussian with σ = `2^K` ([`DiscreteGaussian`], input-independent); compute
//! `t = Σ kᵢvᵢ` exactly in i128 (`v` the lifted input on the grid `2^−m`, so
//! `t = ⟨y, ṽ⟩·2^{K+m}` for `y = k·2^−K`); draw one Bernoulli(e^{−ε}) exactly
//! ([`BernoulliExpNeg`]); accept if `t` is in the cap (`|t| ≥ T` or `t ≥ T`,
//! `T = γ·2^{K+m}` an integer) or the coin came up } and return `k` with the number of
//! rounds. No floating-point number is computed, let alone one that depends on the
//! input.
//!
//! So `P(k | v) = N_Z(k)·w(t)/Z(v)` with `w = 1` on the cap and `e^{−ε}` off it, and
//! `Z(v) = Q(v) + e^{−ε}(1 − Q(v))`, `Q(v)` the lattice cap mass. The coin is drawn in
//! every round, in the cap or not, so a round's running time does not depend on
//! whether the candidate was in the cap; the number of rounds is geometric with
//! success probability `Z(v)`, which depends on the input only through `Q(v)`
//! (`|Q(v) − q| ≤ η`, about `10⁻⁹`).

use super::exp_bernoulli::{BernoulliExpNeg, ExponentError};
use super::random_bits::RandomBits;
use super::sampler::DiscreteGaussian;
use super::sigma2::Sigma2;
use rand::RngCore;
use thiserror::Error;

/// The largest lattice exponent `K` (σ = `2^K` ≤ `2^50`, the sampler's limit).
const MAX_LATTICE_BITS: u32 = 50;
/// The largest input exponent `m`.
const MAX_INPUT_BITS: u32 = 60;
/// `|kᵢ| < 2^62` (the discrete Gaussian's output range).
const DRAW_BITS: u32 = 62;

/// Why a rank-one sampler could not be built or could not report on an input.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RankOneSamplerError {
    /// `K` out of range.
    #[error("lattice bits {0} must be between 1 and {MAX_LATTICE_BITS}")]
    LatticeBits(u32),
    /// `m` out of range.
    #[error("input bits {0} must be between 1 and {MAX_INPUT_BITS}")]
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
    /// An invalid ε.
    #[error(transparent)]
    Epsilon(#[from] ExponentError),
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

/// The exact rank-one sampler for one `(K, m, γ, ε_nominal, cap)`.
///
/// A report is a sequence of rounds: `p + 1` exact discrete Gaussian draws on the
/// lattice `2^−K`, an exact i128 cap test of `Σ kᵢvᵢ` against `γ·2^{K+m}`, and one exact
/// Bernoulli(e^{−ε_nominal}) drawn in every round; the round is accepted if the
/// candidate is in the cap or the coin came up. Its output is ε_nominal-LDP up to the
/// lattice slack that `ldpcov_privacy::mechanism::rank_one::nominal_epsilon` charges (the algorithm
/// and the privacy argument: `docs/PRIVACY.md`, §8.3).
///
/// ```
/// use ldpcov_noise::{CapShape, RandomBits, RankOneSampler};
/// use rand::SeedableRng;
///
/// // K = m = 40, γ = 82 261·2^−16 ≈ 1.2552, ε ≈ 1 (use ldpcov_privacy::mechanism::rank_one's values).
/// let s = RankOneSampler::new(CapShape::Symmetric, 40, 40, 82_261, 16, 0.999_999_999)?;
/// let mut bits = RandomBits::new(rand_chacha::ChaCha20Rng::seed_from_u64(7)); // not private
/// let direction = [0, 1i64 << 40]; // u = 0 lifted to (0, 1)
/// let mut k = [0i64; 2];
/// let rounds = s.sample(&mut bits, &direction, &mut k)?;
/// assert!(rounds >= 1);
/// # Ok::<(), ldpcov_noise::RankOneSamplerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RankOneSampler {
    lattice: DiscreteGaussian,
    input_bits: u32,
    threshold: i128,
    cap: CapShape,
    off_cap: BernoulliExpNeg,
}

impl RankOneSampler {
    /// The sampler with lattice `2^−lattice_bits`, inputs on the grid `2^−input_bits`,
    /// `γ = gamma_units·2^−gamma_bits` and off-cap acceptance `e^{−nominal_epsilon}`
    /// (the exact value of the f64). Building one takes about a millisecond (the
    /// discrete Gaussian's table).
    pub fn new(
        cap: CapShape,
        lattice_bits: u32,
        input_bits: u32,
        gamma_units: u64,
        gamma_bits: u32,
        nominal_epsilon: f64,
    ) -> Result<Self, RankOneSamplerError> {
        if !(1..=MAX_LATTICE_BITS).contains(&lattice_bits) {
            return Err(RankOneSamplerError::LatticeBits(lattice_bits));
        }
        if !(1..=MAX_INPUT_BITS).contains(&input_bits) {
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
        let sigma2 = Sigma2::from_ratio(1 << (2 * lattice_bits), 1)
            .map_err(|_| RankOneSamplerError::LatticeBits(lattice_bits))?;
        if nominal_epsilon <= 0.0 {
            return Err(ExponentError(nominal_epsilon).into());
        }
        Ok(RankOneSampler {
            lattice: DiscreteGaussian::new(sigma2),
            input_bits,
            threshold,
            cap,
            off_cap: BernoulliExpNeg::new(nominal_epsilon)?,
        })
    }

    /// One report for the lifted input `direction` (`p + 1` integers on the grid
    /// `2^−m`, norm in the band of `lift_to_sphere`): writes the lattice coordinates
    /// `kᵢ` (`yᵢ = kᵢ·2^−K`) to `out` and returns the number of rejection rounds.
    pub fn sample<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> Result<u64, RankOneSamplerError> {
        if direction.len() != out.len() {
            return Err(RankOneSamplerError::Length {
                input: direction.len(),
                output: out.len(),
            });
        }
        // Σ |kᵢvᵢ| < len·2^{62+m} must stay below 2^127.
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

    /// The rejection loop, for any direction (tests use it on inputs off the sphere).
    pub(super) fn sample_unchecked<R: RngCore>(
        &self,
        bits: &mut RandomBits<R>,
        direction: &[i64],
        out: &mut [i64],
    ) -> u64 {
        let mut rounds = 0;
        loop {
            rounds += 1;
            let mut t: i128 = 0;
            for (k, &v) in out.iter_mut().zip(direction) {
                *k = self.lattice.sample_bits(bits);
                t += i128::from(*k) * i128::from(v);
            }
            let in_cap = match self.cap {
                CapShape::Symmetric => t.unsigned_abs() >= self.threshold as u128,
                CapShape::OneSided => t >= self.threshold,
            };
            // Drawn in every round, in the cap or not: the round's duration does not
            // tell whether the accepted candidate was in the cap.
            let coin = self.off_cap.sample(bits.rng_mut());
            if in_cap | coin {
                return rounds;
            }
        }
    }
}
