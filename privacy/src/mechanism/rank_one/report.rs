//! The rank-one report of a local collection ([`RankOneReport`]): what a device sends
//! (the first `p` coordinates of its PrivUnitG output `y`, dithered to the wire step
//! `2^−11` and sent as i16), what the aggregator sums (`y` for a mean-and-covariance
//! collection, and the packed upper triangle of `yyᵀ`, on the grid `2^−22`), and how the
//! averages become unbiased estimates.
//!
//! Why `p` numbers and not `p + 1`: the lifted coordinate `√(1 − ‖u‖²)` is not needed by
//! the estimator, and dropping it is post-processing of the private output.

use super::{Cap, RankOneError, RankOneParams, WIRE_STEP_BITS, grid_input, lift_to_sphere};
use crate::SpecError;
use crate::encoding::{WireError, encode_clamped};
use crate::layout::triangle_len;
use crate::mechanism::{NoiseModel, OuterProduct, Unbiasing};
use ldpcov_proto::v1::Encoding;

/// k of the summed entries: a product of two wire values (units `2^−11` each) is in
/// units of `2^−22`; the mean block's wire values are scaled by `2^11` onto that grid.
pub const RANK_ONE_GRID_BITS: u32 = 2 * WIRE_STEP_BITS;
/// Largest |wire value|: the i16 range without −32 768 (so every value has a negation).
pub const RANK_ONE_WIRE_MAX: i64 = i16::MAX as i64;

/// The rank-one report of a local collection of dimension `p`: the symmetric cap for the
/// second moment, the one-sided cap for the mean and covariance.
#[derive(Debug, Clone, PartialEq)]
pub struct RankOneReport {
    params: RankOneParams,
    has_mean: bool,
}

impl RankOneReport {
    /// The report for dimension `dim`, privacy loss `epsilon` (pure ε-LDP, lattice slack
    /// included), with the mean block if `has_mean`.
    pub(crate) fn new(dim: usize, has_mean: bool, epsilon: f64) -> Result<Self, SpecError> {
        let cap = if has_mean {
            Cap::OneSided
        } else {
            Cap::Symmetric
        };
        let params = RankOneParams::new(dim, epsilon, cap).map_err(|err| match err {
            RankOneError::Dim(_) => SpecError::Dim(dim as u32),
            _ => SpecError::RankOneEpsilon(epsilon),
        })?;
        Ok(RankOneReport { params, has_mean })
    }

    /// The derived parameters: γ, the nominal ε, η, κ, c.
    pub fn params(&self) -> &RankOneParams {
        &self.params
    }

    /// Dimension p.
    pub fn dim(&self) -> usize {
        self.params.dim
    }

    /// Whether the summed entries lead with the mean block `y` (one-sided cap).
    pub fn has_mean(&self) -> bool {
        self.has_mean
    }

    /// Entries of the mean block at the start of the summed entries: `p`, or 0.
    pub fn mean_entries(&self) -> usize {
        if self.has_mean { self.dim() } else { 0 }
    }

    /// Entries the aggregator sums per report: `p(p+1)/2` products `yᵢyⱼ` (`i ≤ j`),
    /// after the `p` coordinates `yᵢ` for a mean-and-covariance collection.
    pub fn entries(&self) -> usize {
        self.mean_entries() + triangle_len(self.dim())
    }

    /// Values a device sends: `p`.
    pub fn wire_entries(&self) -> usize {
        self.dim()
    }

    /// Bytes of one report's payload: `2p`.
    pub fn payload_bytes(&self) -> usize {
        2 * self.wire_entries()
    }

    /// The wire encoding: always i16.
    pub fn encoding(&self) -> Encoding {
        Encoding::I16Le
    }

    /// The lifted input `ũ = (u, √(1 − ‖u‖²))` of a clipped `u` on the sampler's input
    /// grid, in integers ([`grid_input`], [`lift_to_sphere`]).
    pub fn lifted_input(&self, u: &[f64]) -> Result<Vec<i64>, RankOneError> {
        lift_to_sphere(&grid_input(u)?)
    }

    /// The noise of the summed entries: the rank-one model with the collection's κ, c,
    /// e₄ and the wire's dither variance.
    pub fn noise(&self) -> NoiseModel {
        NoiseModel::RankOne {
            kappa: self.params.moments.kappa,
            mean_scale: self.params.moments.mean_scale,
            excess_fourth_moment: self.params.moments.excess_fourth_moment,
            dither_variance: RankOneParams::wire_step_and_dither_variance().1,
        }
    }

    /// From averaged entries to unbiased estimates: `E[ŷ] = c·u` and
    /// `E[ŷŷᵀ] = (1 + Δ_w²/4)·I + κ·uuᵀ` on the `p × p` block (the dither adds `Δ_w²/4`
    /// to each diagonal entry and nothing else, `docs/PRIVACY.md` §8.5).
    pub fn unbiasing(&self) -> Unbiasing {
        let (_, dither_variance) = RankOneParams::wire_step_and_dither_variance();
        let kappa = self.params.moments.kappa;
        Unbiasing {
            mean_divisor: if self.has_mean {
                self.params.moments.mean_scale
            } else {
                1.0
            },
            diagonal_offset: 1.0 + dither_variance,
            diagonal_divisor: kappa,
            off_diagonal_divisor: kappa,
        }
    }

    /// Serialises wire values (units `2^−11`) as i16, clamped to `±32 767`.
    pub fn encode(&self, wire_values: &[i32]) -> Vec<u8> {
        debug_assert_eq!(wire_values.len(), self.wire_entries());
        encode_clamped(Encoding::I16Le, RANK_ONE_WIRE_MAX, wire_values)
    }

    /// The entries the aggregator sums for the wire values `y` (units `2^−11`, each
    /// within `±32 767`), on the grid `2^−22`, in their compact form: the
    /// [`OuterProduct`] of `y` with the mean block `yᵢ·2^11` when the collection has
    /// one. [`expand`](Self::expand) gives them explicitly.
    pub fn outer_product(&self, y: Vec<i32>) -> Result<OuterProduct, WireError> {
        debug_assert_eq!(y.len(), self.dim());
        if let Some((index, &value)) = y
            .iter()
            .enumerate()
            .find(|(_, v)| i64::from(v.unsigned_abs()) > RANK_ONE_WIRE_MAX)
        {
            return Err(WireError::OutOfRange {
                index,
                value: i64::from(value),
                bound: RANK_ONE_WIRE_MAX,
            });
        }
        OuterProduct::new(y, self.has_mean.then_some(WIRE_STEP_BITS))
    }

    /// The summed entries of the wire values `y` ([`outer_product`](Self::outer_product)),
    /// expanded: `yᵢ·2^11` for the mean block, then `yᵢyⱼ` for `i ≤ j` in
    /// [`triangle_pairs`](crate::layout::triangle_pairs) order. Every value is below
    /// `2^30` in magnitude. A value outside `±32 767` is clamped to it first, as the
    /// encoding would.
    pub fn expand(&self, y: &[i32]) -> Vec<i32> {
        let max = RANK_ONE_WIRE_MAX as i32;
        let clamped = y.iter().map(|&v| v.clamp(-max, max)).collect();
        OuterProduct::clamped(clamped, self.has_mean.then_some(WIRE_STEP_BITS)).expand()
    }

    /// Decodes a payload (`p` little-endian i16, each within `±32 767`) into its
    /// [`outer_product`](Self::outer_product), checking the length and the range.
    pub(crate) fn decode(&self, payload: &[u8]) -> Result<OuterProduct, WireError> {
        let entries = self.wire_entries();
        let expected = 2 * entries;
        if payload.len() != expected {
            return Err(WireError::Length {
                expected,
                got: payload.len(),
                entries,
            });
        }
        let y: Vec<i32> = payload
            .chunks_exact(2)
            .map(|c| i32::from(i16::from_le_bytes([c[0], c[1]])))
            .collect();
        self.outer_product(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::triangle_pairs;

    /// The expansion is the mean block on the 2^−22 grid and the packed products, and a
    /// decoded payload is its expansion; −32 768 and a wrong length are refused.
    #[test]
    fn expansion_and_decode() {
        let report = RankOneReport::new(3, true, 1.0).unwrap();
        let y = [3, -32_767, 5];
        let entries = report.expand(&y);
        assert_eq!(entries.len(), 3 + 6);
        assert_eq!(&entries[..3], &[3 << 11, -32_767 << 11, 5 << 11]);
        for (e, (i, j)) in entries[3..].iter().zip(triangle_pairs(3)) {
            assert_eq!(*e, y[i] * y[j]);
        }
        let payload = report.encode(&y);
        assert_eq!(payload.len(), 6);
        assert_eq!(report.decode(&payload).unwrap().expand(), entries);
        let mut bad = payload.clone();
        bad[2..4].copy_from_slice(&i16::MIN.to_le_bytes());
        assert!(matches!(
            report.decode(&bad),
            Err(WireError::OutOfRange {
                index: 1,
                value: -32_768,
                ..
            })
        ));
        assert!(matches!(
            report.decode(&payload[..4]),
            Err(WireError::Length {
                expected: 6,
                got: 4,
                entries: 3
            })
        ));
        let second = RankOneReport::new(3, false, 1.0).unwrap();
        assert_eq!(second.expand(&y).len(), 6);
        assert_eq!(second.params().cap, Cap::Symmetric);
        assert_eq!(report.params().cap, Cap::OneSided);
    }
}
