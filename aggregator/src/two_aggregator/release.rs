//! A two-aggregator release: each aggregator's noisy share, and the leader's combination.
//!
//! Each aggregator turns its aggregate share into a share of the central collection's
//! sums (the mean block scaled to the central grid, `2^14·Σx_i`), adds exact discrete
//! Gaussian noise of the **whole** release's σ to every entry (the central collections'
//! noise, `ldpcov_central::release_sums`, drawn on zero sums), and releases that. The
//! leader adds the two noisy shares: the central sums plus two independent noises. Each
//! noise alone makes the release ρ-zCDP, so the release stays ρ-zCDP against either
//! aggregator even if it knows (or removed) its own noise; its variance is twice a
//! trusted curator's.

use ldpcov_central::{Mechanism, ReleaseBudget, release_sums};
use ldpcov_estimate::Accumulator;
use ldpcov_noise::DiscreteGaussianSampler;
use ldpcov_prio::{Field, Prio3Covariance};
use ldpcov_privacy::Collection;
use prio::codec::Encode;
use prio::field::FieldElementWithInteger;
use prio::vdaf::AggregateShare;

use super::aggregate_share;

/// Why a noisy share cannot be drawn or combined.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The collection is not a two-aggregator collection, or its central twin cannot be
    /// derived.
    #[error("{0}")]
    Collection(String),
    /// The noise could not be drawn.
    #[error("noise: {0}")]
    Noise(#[from] ldpcov_central::CentralError),
    /// A share does not decode, or the two shares do not match.
    #[error("share: {0}")]
    Share(String),
    /// A combined sum is outside the `i64` range (the shares do not belong together).
    #[error("the combined shares are not the sums of valid reports")]
    OutOfRange,
}

/// One aggregator's noisy share and the noise it carries.
#[derive(Debug, Clone)]
pub struct NoisyShare {
    /// The share of the central layout's sums plus this aggregator's noise, encoded.
    pub share: Vec<u8>,
    /// The noise sd of each mean and diagonal entry, grid units.
    pub noise_sd_grid: f64,
    /// The noise sd of each off-diagonal entry, grid units.
    pub off_diagonal_noise_sd_grid: f64,
}

/// The Prio3 instance and the central twin of a two-aggregator collection.
fn instance(collection: &Collection) -> Result<(Prio3Covariance, Collection), ReleaseError> {
    let circuit = collection.two_aggregator().ok_or_else(|| {
        ReleaseError::Collection(format!(
            "collection {} is not a two-aggregator collection",
            collection.id()
        ))
    })?;
    let vdaf = ldpcov_prio::collection_prio3(&circuit)
        .map_err(|e| ReleaseError::Collection(e.to_string()))?;
    let twin = collection
        .central_twin()
        .map_err(|e| ReleaseError::Collection(e.to_string()))?;
    Ok((vdaf, twin))
}

/// This aggregator's noisy share of a GaussCov release of `rho` over its accumulator
/// `acc` (its limbs).
pub fn noisy_share(
    collection: &Collection,
    acc: &Accumulator,
    rho: f64,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisyShare, ReleaseError> {
    let (_, twin) = instance(collection)?;
    let circuit = collection
        .two_aggregator()
        .ok_or_else(|| ReleaseError::Collection("not a two-aggregator collection".into()))?;
    let entries = twin.release_entries();
    let noise = release_sums(
        &twin,
        acc.count,
        &vec![0; twin.entries()],
        Mechanism::GaussCov,
        ReleaseBudget::Rho(rho),
        sampler,
    )?;
    let share = aggregate_share(acc);
    let share: &[Field] = share.as_ref();
    let central = central_layout(
        share,
        circuit.dim,
        circuit.output_x,
        circuit.mean_block_shift(),
        entries,
    )?;
    let noisy: Vec<Field> = central
        .iter()
        .zip(&noise.sums)
        .map(|(&s, &n)| s + field_of(n))
        .collect();
    let share = AggregateShare::from(noisy)
        .get_encoded()
        .map_err(|e| ReleaseError::Share(e.to_string()))?;
    Ok(NoisyShare {
        share,
        noise_sd_grid: noise.noise_sd_grid,
        off_diagonal_noise_sd_grid: noise.off_diagonal_noise_sd_grid,
    })
}

/// The leader's combination of the two noisy shares: the central layout's sums plus both
/// noises, as integers (grid units).
pub fn combine(collection: &Collection, leader: &[u8], helper: &[u8]) -> Result<Vec<i64>, ReleaseError> {
    let (_, twin) = instance(collection)?;
    let entries = twin.release_entries();
    let (l, h) = (decode_elements(leader, entries)?, decode_elements(helper, entries)?);
    let q = Field::modulus();
    l.iter()
        .zip(&h)
        .map(|(&a, &b)| {
            let v = u128::from(a + b);
            let centred = if v > q / 2 { -((q - v) as i128) } else { v as i128 };
            i64::try_from(centred).map_err(|_| ReleaseError::OutOfRange)
        })
        .collect()
}

/// `entries` field elements from their encoding (16 bytes each).
fn decode_elements(bytes: &[u8], entries: usize) -> Result<Vec<Field>, ReleaseError> {
    if bytes.len() != entries * Field::ENCODED_SIZE {
        return Err(ReleaseError::Share(format!(
            "{} bytes for {entries} elements",
            bytes.len()
        )));
    }
    bytes
        .chunks(Field::ENCODED_SIZE)
        .map(|c| Field::try_from(c).map_err(|e| ReleaseError::Share(e.to_string())))
        .collect()
}

/// A share of the output `(y, x)` rearranged as a share of the central layout: the mean
/// block `x·2^shift` first (if any), then the triangle `y`.
fn central_layout(
    share: &[Field],
    dim: usize,
    output_x: bool,
    shift: u32,
    entries: usize,
) -> Result<Vec<Field>, ReleaseError> {
    let d = ldpcov_privacy::layout::triangle_len(dim);
    let want = d + if output_x { dim } else { 0 };
    if share.len() != want || entries != want {
        return Err(ReleaseError::Share(format!(
            "a share of {} elements for {want}",
            share.len()
        )));
    }
    let (y, x) = share.split_at(d);
    let scale = Field::from(1u128 << shift);
    Ok(x.iter().map(|&v| v * scale).chain(y.iter().copied()).collect())
}

/// An integer as a field element (negative: `q − |v|`).
fn field_of(v: i64) -> Field {
    let magnitude = Field::from(u128::from(v.unsigned_abs()));
    if v < 0 { -magnitude } else { magnitude }
}
