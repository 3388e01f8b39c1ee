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
use ldpcov_prio::Field;
use ldpcov_privacy::Collection;
use ldpcov_privacy::two_aggregator::TwoAggregatorCircuit;
use prio::codec::Encode;
use prio::field::{FieldElement, FieldElementWithInteger};
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

/// The circuit and the central twin of a two-aggregator collection.
fn circuit_and_twin(
    collection: &Collection,
) -> Result<(TwoAggregatorCircuit, Collection), ReleaseError> {
    let circuit = collection.two_aggregator().ok_or_else(|| {
        ReleaseError::Collection(format!(
            "collection {} is not a two-aggregator collection",
            collection.id()
        ))
    })?;
    let twin = collection
        .central_twin()
        .map_err(|e| ReleaseError::Collection(e.to_string()))?;
    Ok((circuit, twin))
}

/// This aggregator's noisy share of a GaussCov release of `rho` over its accumulator
/// `acc` (its limbs).
pub fn noisy_share(
    collection: &Collection,
    acc: &Accumulator,
    rho: f64,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisyShare, ReleaseError> {
    let (circuit, twin) = circuit_and_twin(collection)?;
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

/// The leader's combination of the two noisy shares over `reports` reports: the central
/// layout's sums plus both noises, as integers (grid units). The circuit aggregates each
/// coordinate offset by `2^(b−1)` (its range check's), so the mean block loses
/// `reports·2^(b−1)·2^14` here, once.
pub fn combine(
    collection: &Collection,
    reports: u64,
    leader: &[u8],
    helper: &[u8],
) -> Result<Vec<i64>, ReleaseError> {
    let (circuit, twin) = circuit_and_twin(collection)?;
    let entries = twin.release_entries();
    let mean_offset = if circuit.output_x {
        i128::from(reports) << (circuit.range_bits - 1 + circuit.mean_block_shift())
    } else {
        0
    };
    let (l, h) = (
        decode_elements(leader, entries)?,
        decode_elements(helper, entries)?,
    );
    let q = Field::modulus();
    l.iter()
        .zip(&h)
        .enumerate()
        .map(|(k, (&a, &b))| {
            let v = u128::from(a + b);
            let centred = if v > q / 2 {
                -((q - v) as i128)
            } else {
                v as i128
            };
            let offset = if k < circuit.dim { mean_offset } else { 0 };
            i64::try_from(centred - offset).map_err(|_| ReleaseError::OutOfRange)
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
    Ok(x.iter()
        .map(|&v| v * scale)
        .chain(y.iter().copied())
        .collect())
}

/// An integer as a field element (negative: `q − |v|`).
fn field_of(v: i64) -> Field {
    let magnitude = Field::from(u128::from(v.unsigned_abs()));
    if v < 0 { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::two_aggregator::share_limbs;
    use ldpcov_estimate::FOLDS;
    use ldpcov_privacy::ReportId;
    use ldpcov_proto::v1::{CollectionSpec, PrivacyModel};

    fn collection() -> Collection {
        Collection::create(&CollectionSpec {
            collection_id: "r".into(),
            dim: 3,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 2,
            privacy_model: PrivacyModel::TwoAggregator as i32,
            ..Default::default()
        })
        .unwrap()
    }

    /// Each aggregator's noise is the whole release's: σ = Δ₂·2^30/√(2ρ) on the mean and
    /// diagonal entries and σ/√2 off the diagonal (the svec weighting), Δ₂ the central
    /// twin's sensitivity; and the two noisy shares add up to the central layout's sums
    /// (mean block x·2^14 first, then the triangle) within their noise. The bound: each of
    /// the 9 combined entries is off by a discrete Gaussian of sd at most √2·σ, and
    /// P(|Z| > 6) < 2·10⁻⁹ per entry, so the test fails for a mislaid block or a forgotten
    /// offset (errors of at least 2^28 grid units, ≫ 6·√2·σ ≈ 2^26.6 at ρ = 10^4), not by
    /// chance.
    #[test]
    fn each_share_carries_the_whole_noise_and_the_shares_add_to_the_central_sums() {
        let c = collection();
        let circuit = c.two_aggregator().unwrap();
        let vdaf = ldpcov_prio::collection_prio3(&circuit).unwrap();
        let ctx = ldpcov_prio::context(c.id());
        let key = [3u8; 32];
        let vectors: [[i64; 3]; 3] = [[1 << 14, -(1 << 14), 0], [1 << 15, 0, 0], [5, 7, -9]];
        let mut leader = Accumulator::new(c.entries(), FOLDS);
        let mut helper = Accumulator::new(c.entries(), FOLDS);
        let mut want = vec![0i64; 9];
        for (k, x) in vectors.iter().enumerate() {
            let nonce = [k as u8; 16];
            let upload = ldpcov_prio::exchange::shard(&vdaf, &ctx, x, &nonce).unwrap();
            let (l, h) = ldpcov_prio::exchange::verify_both(
                &vdaf,
                &key,
                &ctx,
                &nonce,
                &upload.public_share,
                &upload.leader_share,
                &upload.helper_share,
            )
            .unwrap();
            let fold = ReportId(nonce).fold(FOLDS);
            leader.add(fold, &share_limbs(&l));
            helper.add(fold, &share_limbs(&h));
            for i in 0..3 {
                want[i] += x[i] << 14;
            }
            let mut t = 3;
            for i in 0..3 {
                for j in i..3 {
                    want[t] += x[i] * x[j];
                    t += 1;
                }
            }
        }
        let rho = 1e4;
        let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(11);
        let l = noisy_share(&c, &leader, rho, &mut sampler).unwrap();
        let h = noisy_share(&c, &helper, rho, &mut sampler).unwrap();
        let twin = c.central_twin().unwrap();
        let sigma = twin.sensitivity() * 2f64.powi(30) / (2.0 * rho).sqrt();
        for share in [&l, &h] {
            assert!((share.noise_sd_grid / sigma - 1.0).abs() < 1e-9);
            assert!((share.off_diagonal_noise_sd_grid * 2f64.sqrt() / sigma - 1.0).abs() < 1e-9);
        }
        let sums = combine(&c, 3, &l.share, &h.share).unwrap();
        for (got, want) in sums.iter().zip(&want) {
            let off = (got - want).abs() as f64;
            assert!(
                off < 6.0 * 2f64.sqrt() * sigma,
                "{got} vs {want}: off by {off}, σ = {sigma}"
            );
        }
        // Shares that do not belong together are refused, not read as sums.
        assert!(combine(&c, 3, &l.share, &l.share[16..]).is_err());
    }
}
