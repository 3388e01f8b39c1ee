//! The device half of the rank-one report ([`RankOneReport`]): the clipped `u` lifted to
//! the sphere on the input grid, one exact PrivUnitG draw on the lattice
//! ([`RankOneSampler`]), and each of its first `p` coordinates re-quantised to the wire
//! step `2^−11` with the triangular dither ([`TriangularDither`]). Every random bit comes
//! from the caller's [`NoiseSampler`] ([`NoiseSampler::next_word`]); no floating-point
//! number that depends on the input is computed after the lift.

use crate::ClientError;
use ldpcov_noise::{CapShape, NoiseSampler, RandomBits, RankOneSampler, TriangularDither};
use ldpcov_privacy::mechanism::RankOneReport;
use ldpcov_privacy::mechanism::rank_one::{
    Cap, GAMMA_BITS, INPUT_BITS, LATTICE_BITS, WIRE_STEP_BITS,
};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Samplers built so far, by `(cap, γ units, λ, P)`: building one takes about a
/// millisecond (the discrete Gaussian's table), a report tens of microseconds.
static SAMPLERS: LazyLock<SamplerCache> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// `(one-sided cap, γ units, tilt λ, cap probability units P)`: what a sampler is built
/// from.
type SamplerKey = (bool, u64, u32, u64);
/// The cache of built samplers.
type SamplerCache = Mutex<HashMap<SamplerKey, Arc<RankOneSampler>>>;
/// Distinct samplers kept before the cache is cleared (a device reports to few
/// collections).
const MAX_CACHED_SAMPLERS: usize = 64;

/// The caller's noise sampler as the generator [`RandomBits`] reads words from.
struct Words<'a, N: ?Sized>(&'a mut N);

impl<N: NoiseSampler + ?Sized> rand::RngCore for Words<'_, N> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_word() as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_word()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let word = self.0.next_word().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// The sampler of `report`'s parameters (cached).
fn sampler_for(report: &RankOneReport) -> Result<Arc<RankOneSampler>, ClientError> {
    let params = report.params();
    let key = (
        params.cap == Cap::OneSided,
        params.gamma_units,
        params.tilt,
        params.cap_probability_units,
    );
    let mut cache = SAMPLERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(sampler) = cache.get(&key) {
        return Ok(Arc::clone(sampler));
    }
    let shape = match params.cap {
        Cap::Symmetric => CapShape::Symmetric,
        Cap::OneSided => CapShape::OneSided,
    };
    let sampler = Arc::new(
        RankOneSampler::new(
            shape,
            LATTICE_BITS,
            INPUT_BITS,
            params.gamma_units,
            GAMMA_BITS,
            params.tilt,
            params.cap_probability_units,
        )
        .map_err(|err| ClientError::RankOne(err.to_string()))?,
    );
    if cache.len() >= MAX_CACHED_SAMPLERS {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&sampler));
    Ok(sampler)
}

/// The wire values of one rank-one report for the clipped `u` (‖u‖ ≤ 1): the first `p`
/// lattice coordinates of one PrivUnitG draw, each dithered to units of `2^−11` and
/// clamped to the i16 range (post-processing of the private draw).
pub(super) fn perturb(
    report: &RankOneReport,
    u: &[f64],
    noise: &mut (impl NoiseSampler + ?Sized),
) -> Result<Vec<i32>, ClientError> {
    let lifted = report
        .lifted_input(u)
        .map_err(|err| ClientError::RankOne(err.to_string()))?;
    let sampler = sampler_for(report)?;
    let dither = TriangularDither::new(LATTICE_BITS - WIRE_STEP_BITS)
        .map_err(|err| ClientError::RankOne(err.to_string()))?;
    let mut bits = RandomBits::new(Words(noise));
    let mut draw = vec![0i64; lifted.len()];
    sampler
        .sample(&mut bits, &lifted, &mut draw)
        .map_err(|err| ClientError::RankOne(err.to_string()))?;
    Ok(draw[..report.wire_entries()]
        .iter()
        .map(|&k| i32::from(dither.quantise_i16(k, &mut bits)))
        .collect())
}
