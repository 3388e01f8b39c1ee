//! [`NoiseSampler`], the noise source reports are perturbed with, and
//! [`DiscreteGaussianSampler`], the exact sampler as the `NoiseSampler` of real
//! reports.

use super::random_bits::RandomBits;
use super::sampler::DiscreteGaussian;
use rand::rand_core::OsError;
use rand::rngs::OsRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// A source of centred integer noise on the collection's grid.
///
/// One call is one independent draw; the sampler must be cryptographically seeded for
/// the reports to be private. Kept deliberately small so that the exact [`DiscreteGaussianSampler`] and the
/// simulation-only float sampler of `ldpcov-client` are interchangeable.
pub trait NoiseSampler {
    /// One draw of centred noise with standard deviation `sigma_grid`, in grid units.
    fn sample_grid(&mut self, sigma_grid: f64) -> i64;

    /// A uniform integer in `0..bound` (`bound ≥ 1`), for the unbiased stochastic
    /// rounding of the coarse wire encodings. That rounding acts on the already-noisy
    /// value (post-processing), so privacy does not rest on this randomness; the
    /// default still draws from the thread-local CSPRNG (`rand::rng()`).
    fn uniform_below(&mut self, bound: u64) -> u64 {
        rand::rng().random_range(0..bound.max(1))
    }

    /// One uniform 64-bit word from this sampler's generator, for the exact samplers
    /// built on random bits (the rank-one mechanism's lattice draws, its exact
    /// Bernoulli and its dither). The privacy of a rank-one report rests on these
    /// words: the default draws them from the thread-local CSPRNG (`rand::rng()`); a
    /// seeded sampler overrides it so that its reports are reproducible.
    fn next_word(&mut self) -> u64 {
        rand::rng().next_u64()
    }

    /// What kind of sampler this is, for logs and checks (never its state).
    fn kind(&self) -> &'static str {
        "custom"
    }
}

impl<N: NoiseSampler + ?Sized> NoiseSampler for Box<N> {
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        (**self).sample_grid(sigma_grid)
    }
    fn uniform_below(&mut self, bound: u64) -> u64 {
        (**self).uniform_below(bound)
    }
    fn next_word(&mut self) -> u64 {
        (**self).next_word()
    }
    fn kind(&self) -> &'static str {
        (**self).kind()
    }
}

impl<N: NoiseSampler + ?Sized> NoiseSampler for &mut N {
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        (**self).sample_grid(sigma_grid)
    }
    fn uniform_below(&mut self, bound: u64) -> u64 {
        (**self).uniform_below(bound)
    }
    fn next_word(&mut self) -> u64 {
        (**self).next_word()
    }
    fn kind(&self) -> &'static str {
        (**self).kind()
    }
}

/// Exact discrete Gaussian noise for reports (`ldpcov-client`'s `Perturber`) and for
/// releases computed by a trusted aggregator: a ChaCha20 stream
/// (through a [`RandomBits`] reservoir) and the [`DiscreteGaussian`] of the last
/// `sigma_grid` (rebuilt, in about half a millisecond, when σ changes).
///
/// `sample_grid(σ)` draws `N_Z(0, σ²)` with σ² the exact square of the f64 σ
/// ([`Sigma2::from_sigma`](super::Sigma2::from_sigma)); its variance is σ² up to `O(σ²·e^{−2π²σ²})` (CKS20 Prop. 19),
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
    pub fn from_os_rng() -> Result<Self, OsError> {
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

    /// The generator itself, for the other exact samplers of [`cks20`](crate::cks20)
    /// (a trusted aggregator's discrete Laplace noise). Its words are drawn after the
    /// reservoir's, never shared with it.
    pub fn rng_mut(&mut self) -> &mut ChaCha20Rng {
        self.bits.rng_mut()
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
    /// `[2^−8, 2^50]` (a caller bug: `ldpcov-client`'s `Perturber` only passes the σ
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

    /// A whole word from the generator, after (never shared with) the reservoir's.
    fn next_word(&mut self) -> u64 {
        self.bits.rng_mut().next_u64()
    }

    fn kind(&self) -> &'static str {
        "exact-discrete-gaussian"
    }

    fn uniform_below(&mut self, bound: u64) -> u64 {
        self.bits.rng_mut().random_range(0..bound.max(1))
    }
}
