//! `ldpcov-noise`: exact discrete Gaussian noise `N_Z(0, σ²)` on the integers (Canonne, Kamath &
//! Steinke 2020, "The Discrete Gaussian for Differential Privacy"; CKS20 below), from
//! integer arithmetic and a cryptographic random number generator.
//!
//! `N_Z(0, σ²)` puts mass `exp(−x²/(2σ²)) / Σ_y exp(−y²/(2σ²))` on each integer `x`.
//! Every decision that shapes the output distribution is taken on integers (exact
//! rationals, or certified integer bounds on an irrational number), never on floating
//! point.
//!
//! # API
//!
//! * [`Sigma2`]: σ² as an exact rational. [`Sigma2::from_sigma`] takes the f64 σ a
//!   collection's calibration computes and squares it **exactly**
//!   (an f64 is a dyadic rational `m·2^e`, so `σ² = m²·2^{2e}` needs no rounding at
//!   all): the noise is never smaller than the f64 σ the calibration produced.
//! * [`DiscreteGaussian`]: the precomputed exact sampler for one σ²; `sample` takes any
//!   [`RngCore`](rand::RngCore).
//! * [`DiscreteGaussianSampler`]: a [`NoiseSampler`] (ChaCha20 seeded by the operating
//!   system, or a deterministic seed for simulations) that caches the
//!   [`DiscreteGaussian`] of the last `sigma_grid` it saw.
//! * [`cks20`]: the straightforward CKS20 algorithms (Bernoulli(exp(−γ)), discrete
//!   Laplace, discrete Gaussian) on big integers, kept as the reference the fast sampler
//!   is benchmarked and tested against.
//! * [`RankOneSampler`]: the exact sampler of the rank-one PrivUnitG mechanism (pure
//!   ε-LDP reports of `p + 1` lattice coordinates: a public-weight mixture of the
//!   lattice Gaussian on and off the cap, both components drawn every report, the cap
//!   by an integer-centred tilted proposal; [`RankOneRounds`] counts their rounds), with
//!   [`TriangularDither`] (the unbiased wire quantisation of its coordinates, error
//!   second moment exactly `Δ²/4`) and [`BernoulliExpNeg`] (an exact Bernoulli(exp(−x))
//!   for an f64 `x`).
//!
//! ```
//! use ldpcov_noise::{DiscreteGaussian, DiscreteGaussianSampler, NoiseSampler};
//! use rand::SeedableRng;
//!
//! // Real noise: ChaCha20 seeded by the operating system.
//! let mut noise = DiscreteGaussianSampler::from_os_rng()?;
//! let draw: i64 = noise.sample_grid(1.0e6); // N_Z(0, 10¹²), in grid units
//! assert!(draw.abs() < 1_000_000_000);
//!
//! // One precomputed distribution, any RNG (here a seeded one: not private).
//! let dist = DiscreteGaussian::from_sigma(3.0)?;
//! let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
//! let x = dist.sample(&mut rng);
//! assert!(x.abs() < 100);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
//! 256 bits from the operating system (as `ldpcov-client`'s simulation-only float sampler
//! does).
//! ChaCha12 (rand's `StdRng`) is also considered secure and is faster, but ChaCha20 is
//! the conservative, widely standardised choice (RFC 8439). With the bit reservoir the
//! cipher is about a quarter of the cost of a draw (ChaCha20 gives ~275 M words/s on
//! one core here, a draw needs ~0.7 word at σ = 10⁸); `benches/noise.rs` measures
//! both ciphers.

mod bigint;
pub mod cks20;
mod dither;
mod exp_bernoulli;
mod fixed_point;
mod noise;
mod random_bits;
mod rank_one;
mod sampler;
mod sigma2;
#[cfg(test)]
mod tests;

pub use dither::{DitherBitsError, TriangularDither};
pub use exp_bernoulli::{BernoulliExpNeg, ExponentError};
pub use noise::{DiscreteGaussianSampler, NoiseSampler};
pub use random_bits::RandomBits;
pub use rank_one::{CapShape, RankOneRounds, RankOneSampler, RankOneSamplerError};
pub use sampler::DiscreteGaussian;
pub use sigma2::{Sigma2, SigmaError};
