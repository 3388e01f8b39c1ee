//! Two-aggregator collections (`PrivacyModel::TwoAggregator`): each report is the
//! central collections' raw vector — `x = u·2^15` inside the unit ball exactly
//! ([`RawVectorReport`](crate::mechanism::RawVectorReport)) — split into two additive
//! Prio3 shares with a validity proof, one for a leader and one (sealed) for a helper run
//! by another operator. Neither sees a vector unless both collude; the proof lets them
//! refuse a malformed one without seeing it.
//!
//! This module holds what a device and both aggregators must agree on, the circuit's
//! parameters ([`TwoAggregatorCircuit`]): the same grid as a central collection, so the
//! two aggregators' combined sums are exactly a central collection's (mean block
//! `2^14·Σx_i`, second moment `Σ x_i·x_j`, grid `2^−30`), and a central collection's
//! release budget and sensitivity apply.
//!
//! ```
//! use ldpcov_privacy::Collection;
//! use ldpcov_privacy::two_aggregator::{NORM_BOUND, RANGE_BITS};
//! use ldpcov_proto::v1::{CollectionSpec, PrivacyModel};
//!
//! let c = Collection::create(&CollectionSpec {
//!     collection_id: "survey".into(),
//!     dim: 3,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 2.0,
//!     min_reports: 100,
//!     privacy_model: PrivacyModel::TwoAggregator as i32,
//!     ..Default::default()
//! })?;
//! let circuit = c.two_aggregator().expect("a two-aggregator collection");
//! assert_eq!((circuit.range_bits, circuit.norm_bound), (RANGE_BITS, NORM_BOUND));
//! assert!(c.sigma() == 0.0 && !c.is_central());
//! # Ok::<(), ldpcov_privacy::SpecError>(())
//! ```

use crate::mechanism::raw_vector::CENTRAL_COORDINATE_BITS;
use ldpcov_proto::v1::TwoAggregatorParams;

/// Bits of each coordinate's range check: `x_i + 2^16` in `[0, 2^17)` holds every
/// coordinate of a vector inside the unit ball on the grid `2^−15` (`|x_i| ≤ 2^15`).
pub const RANGE_BITS: u32 = CENTRAL_COORDINATE_BITS + 2;

/// The squared-norm bound a report proves: `‖x‖² ≤ 2^30`, the unit ball on the grid.
pub const NORM_BOUND: u64 = 1 << (2 * CENTRAL_COORDINATE_BITS);

/// Bits of one limb of an aggregate-share element ([`SHARE_LIMBS`]).
pub const SHARE_LIMB_BITS: u32 = 16;

/// Limbs an aggregate-share element is kept in: a share is an element of Prio3's
/// 128-bit field, which no integer accumulator holds, so each aggregator sums every
/// report's output-share element as 8 limbs of 16 bits, each in an ordinary exact
/// integer sum (below `2^16·n`, exact in an `i64` for `n < 2^47`), and reduces the
/// limbs' sums modulo the field's prime only when it releases its share. Addition
/// commutes with the split, so the limbs' sums give exactly the field sum of the shares.
pub const SHARE_LIMBS: usize = 128 / SHARE_LIMB_BITS as usize;

/// The parameters of a two-aggregator collection's validity circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwoAggregatorCircuit {
    /// Coordinates `p`.
    pub dim: usize,
    /// The coordinate grid `2^−k` (`k` = [`CENTRAL_COORDINATE_BITS`]).
    pub coordinate_grid_bits: u32,
    /// Bits of each coordinate's range check ([`RANGE_BITS`]).
    pub range_bits: u32,
    /// The squared-norm bound ([`NORM_BOUND`]).
    pub norm_bound: u64,
    /// Whether `x` is aggregated beside `triu(x·xᵀ)` (mean-and-covariance collections).
    pub output_x: bool,
}

impl TwoAggregatorCircuit {
    /// The circuit of a collection of `dim` coordinates, with `x` in the output if
    /// `has_mean`.
    pub(crate) fn new(dim: usize, has_mean: bool) -> Self {
        TwoAggregatorCircuit {
            dim,
            coordinate_grid_bits: CENTRAL_COORDINATE_BITS,
            range_bits: RANGE_BITS,
            norm_bound: NORM_BOUND,
            output_x: has_mean,
        }
    }

    /// Elements of the circuit's output, the aggregated vector: `x` (with the mean block)
    /// then `triu(x·xᵀ)`.
    pub fn output_len(&self) -> usize {
        crate::layout::triangle_len(self.dim) + if self.output_x { self.dim } else { 0 }
    }

    /// The shift that puts the output's `x` on a central collection's mean block: its
    /// entries are `w·u_i` (`w = 1/2`) on the grid `2^−30`, i.e. `x_i·2^14`.
    pub fn mean_block_shift(&self) -> u32 {
        self.coordinate_grid_bits - 1
    }

    /// Entries each aggregator's accumulator sums per report: [`SHARE_LIMBS`] per
    /// output element.
    pub fn share_entries(&self) -> usize {
        SHARE_LIMBS * self.output_len()
    }

    /// The public parameters (without the helper's keys, which only the helper adds).
    pub fn params(&self) -> TwoAggregatorParams {
        TwoAggregatorParams {
            coordinate_grid_bits: self.coordinate_grid_bits,
            range_bits: self.range_bits,
            norm_bound: self.norm_bound,
            helper_keys: Vec::new(),
        }
    }

    /// Whether `params` (from a server) describe this circuit; the helper's keys are not
    /// compared (they change with time).
    pub fn agrees_with(&self, params: &TwoAggregatorParams) -> bool {
        params.coordinate_grid_bits == self.coordinate_grid_bits
            && params.range_bits == self.range_bits
            && params.norm_bound == self.norm_bound
    }
}

#[cfg(test)]
mod tests {
    use crate::Collection;
    use ldpcov_proto::v1::{CollectionSpec, Moments, PrivacyModel, ShuffleSpec};

    fn spec() -> CollectionSpec {
        CollectionSpec {
            collection_id: "two".into(),
            dim: 4,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 2.0,
            min_reports: 10,
            privacy_model: PrivacyModel::TwoAggregator as i32,
            ..Default::default()
        }
    }

    /// The collection is a central one in all but who holds the sums: the same grid,
    /// sensitivity and release budget; its circuit outputs `x` exactly when the
    /// collection has a mean block; it survives its own parameters (a device's check).
    #[test]
    fn a_two_aggregator_collection_is_central_in_its_numbers() {
        let two = Collection::create(&spec()).unwrap();
        let central = Collection::create(&CollectionSpec {
            privacy_model: PrivacyModel::Central as i32,
            ..spec()
        })
        .unwrap();
        assert!(two.is_two_aggregator() && !two.is_central());
        assert_eq!(two.mechanism(), central.mechanism());
        assert_eq!(two.rho(), central.rho());
        assert_eq!(two.sensitivity(), central.sensitivity());
        assert_eq!(two.central_weighting(), central.central_weighting());
        assert!(two.two_aggregator().unwrap().output_x);
        // Each aggregator sums its shares' limbs: 8 per element of (x, triu(x·xᵀ)).
        assert_eq!(two.entries(), 8 * central.entries());
        assert_eq!(
            two.two_aggregator().unwrap().output_len(),
            central.entries()
        );
        assert!(central.two_aggregator().is_none());
        let second = Collection::create(&CollectionSpec {
            moments: Moments::SecondMoment as i32,
            ..spec()
        })
        .unwrap();
        assert!(!second.two_aggregator().unwrap().output_x);
        let params = two.params();
        assert!(params.two_aggregator.is_some() && params.shuffle.is_none());
        assert_eq!(Collection::from_params(&params).unwrap(), two);
    }

    /// A server cannot move the circuit: other parameters, none, or some on a collection
    /// of another model are refused by the device's re-derivation.
    #[test]
    fn params_that_disagree_are_refused() {
        let two = Collection::create(&spec()).unwrap();
        let mut params = two.params();
        params.two_aggregator.as_mut().unwrap().norm_bound *= 2;
        assert!(Collection::from_params(&params).is_err());
        let mut params = two.params();
        params.two_aggregator.as_mut().unwrap().range_bits -= 1;
        assert!(Collection::from_params(&params).is_err());
        let mut params = two.params();
        params.two_aggregator = None;
        assert!(Collection::from_params(&params).is_err());
        let central = Collection::create(&CollectionSpec {
            privacy_model: PrivacyModel::Central as i32,
            ..spec()
        })
        .unwrap();
        let mut params = central.params();
        params.two_aggregator = two.params().two_aggregator;
        assert!(Collection::from_params(&params).is_err());
    }

    /// What only a central (trusted-curator) or a shuffled collection may have is refused.
    #[test]
    fn central_only_and_shuffle_options_are_refused() {
        for bad in [
            CollectionSpec {
                moments: Moments::SecondMoment as i32,
                norm_bins: 2,
                ..spec()
            },
            CollectionSpec {
                moments: Moments::SecondMoment as i32,
                allow_compressed_release: true,
                ..spec()
            },
            CollectionSpec {
                shuffle: Some(ShuffleSpec {
                    min_batch_size: 100,
                    ..Default::default()
                }),
                ..spec()
            },
        ] {
            assert!(Collection::create(&bad).is_err(), "{bad:?}");
        }
    }
}
