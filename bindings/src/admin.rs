//! [`Admin`]: operator calls for scripts and quickstarts.

use std::sync::{Arc, Mutex};

use ldpcov_client::proto::v1::{
    CentralMechanism, CentralRelease, CollectionSpec, CollectionStatus, GetEstimateRequest,
    PrivacyModel, RadiusPhaseSpec, ShuffleSpec,
};
use ldpcov_client::{AggregatorClient, Collection};
use ldpcov_privacy::layout::unpack_symmetric;
use tokio::runtime::Runtime;

use crate::{CollectionInfo, LdpcovError, Mechanism, WireEncoding, connect, lock, new_runtime};

/// What an operator asks for when creating a collection. The aggregator derives the
/// noise (σ, grid, sensitivity) from these numbers; devices re-derive it themselves.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct CollectionSpecInput {
    /// Collection id (1–128 characters from `[A-Za-z0-9._-]`).
    pub collection_id: String,
    /// Dimension p of the vectors.
    pub dim: u32,
    /// ε of one report.
    pub epsilon: f64,
    /// δ of one report (0 for [`Mechanism::RankOne`], which is pure ε).
    pub delta: f64,
    /// Clip radius R.
    pub clip_radius: f64,
    /// Reports needed before an estimate is released.
    pub min_reports: u64,
    /// Wire encoding of the reports (`None`: i32, or i16 for the rank-one mechanism,
    /// its only encoding).
    #[uniffi(default)]
    pub encoding: Option<WireEncoding>,
    /// How devices perturb their reports (`None`: [`Mechanism::Gaussian`]).
    #[uniffi(default)]
    pub mechanism: Option<Mechanism>,
    /// A shuffled collection (rank-one only): devices send their reports sealed
    /// through a relay, which forwards them in shuffled batches of at least this many
    /// reports (2 or more); `None`: reports go directly to the aggregator.
    #[uniffi(default)]
    pub shuffle_min_batch_size: Option<u64>,
    /// A shuffled collection's batch window, seconds (only with
    /// `shuffle_min_batch_size`): the relay closes a window into a batch once it is
    /// this old and holds at least the minimum (at least 1; `None`: the aggregator's
    /// default, one hour).
    #[uniffi(default)]
    pub shuffle_batch_window_seconds: Option<u64>,
    /// A two-aggregator collection: each device splits its clipped vector into two
    /// secret shares with a validity proof, one for the leader and one sealed to the
    /// helper, and each aggregator adds its own noise at release. Create it on the
    /// helper first, then on the leader with the same spec. Not with a mechanism, an
    /// encoding or shuffling, which are the local model's.
    #[uniffi(default = false)]
    pub two_aggregator: bool,
    /// Choose the clip radius privately (give `clip_radius` 0): every device first
    /// spends this share of its budget (in (0, 1), e.g. 0.1) reporting its norm's
    /// interval to the collection `<id>.radius`; closing that collection sets the
    /// radius from its noisy sums, and `Device::submit` then sends vectors. Local
    /// Gaussian collections only here. `None`: `clip_radius` is the radius.
    #[uniffi(default)]
    pub radius_phase_share: Option<f64>,
}

impl CollectionSpecInput {
    /// The `CollectionSpec` an operator sends (`Admin::create_collection`): the
    /// encoding made explicit (i32, or i16 for the rank-one mechanism), the rest as
    /// the aggregator's defaults. InvalidInput for a batch window without a minimum
    /// batch size (a collection that is not shuffled has no batches) or of 0 seconds.
    pub(crate) fn to_proto(&self) -> Result<CollectionSpec, LdpcovError> {
        let shuffle = match (
            self.shuffle_min_batch_size,
            self.shuffle_batch_window_seconds,
        ) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(LdpcovError::InvalidInput {
                    reason: "shuffle_batch_window_seconds is for shuffled collections: give shuffle_min_batch_size too".into(),
                });
            }
            (Some(_), Some(0)) => {
                return Err(LdpcovError::InvalidInput {
                    reason: "shuffle_batch_window_seconds must be at least 1 (leave it out for the aggregator's default)".into(),
                });
            }
            (Some(min_batch_size), window) => Some(ShuffleSpec {
                min_batch_size,
                // 0: the aggregator's default window.
                batch_window_seconds: window.unwrap_or(0),
                ..Default::default()
            }),
        };
        if self.radius_phase_share.is_some() && self.clip_radius != 0.0 {
            return Err(LdpcovError::InvalidInput {
                reason: "clip_radius must be 0 with radius_phase_share: the phase chooses it"
                    .into(),
            });
        }
        let common = CollectionSpec {
            collection_id: self.collection_id.clone(),
            dim: self.dim,
            epsilon: self.epsilon,
            delta: self.delta,
            clip_radius: self.clip_radius,
            min_reports: self.min_reports,
            radius_phase: self.radius_phase_share.map(|share| RadiusPhaseSpec {
                share,
                ..Default::default()
            }),
            ..Default::default()
        };
        if self.two_aggregator {
            if self.encoding.is_some() || self.mechanism.is_some() || shuffle.is_some() {
                return Err(LdpcovError::InvalidInput {
                    reason: "a two-aggregator collection takes no mechanism, encoding or shuffling: each aggregator adds its noise at release".into(),
                });
            }
            return Ok(CollectionSpec {
                privacy_model: PrivacyModel::TwoAggregator as i32,
                ..common
            });
        }
        Ok(CollectionSpec {
            encoding: match (self.encoding, self.mechanism) {
                (Some(encoding), _) => encoding.to_proto().into(),
                (None, Some(Mechanism::RankOne)) => WireEncoding::I16.to_proto().into(),
                (None, _) => WireEncoding::I32.to_proto().into(),
            },
            local_mechanism: self.mechanism.map_or(0, |m| m.to_proto() as i32),
            shuffle,
            ..common
        })
    }
}

/// A collection's count and state.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CollectionStatusInfo {
    /// Reports counted so far.
    pub reports: u64,
    /// Whether enough reports arrived for an estimate to be released.
    pub releasable: bool,
    /// The collection takes no more reports.
    pub closed: bool,
}

impl From<CollectionStatus> for CollectionStatusInfo {
    fn from(status: CollectionStatus) -> Self {
        CollectionStatusInfo {
            reports: status.reports,
            releasable: status.releasable,
            closed: status.closed,
        }
    }
}

/// The covariance estimate the aggregator released (its default rule: K-fold
/// cross-validated thresholding, then the projection onto the PSD cone).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct EstimateInfo {
    /// Collection id.
    pub collection_id: String,
    /// Dimension p.
    pub dim: u32,
    /// Reports the estimate is made of.
    pub reports: u64,
    /// The packed upper triangle, row-major (`i ≤ j`), `p(p+1)/2` entries.
    pub upper_triangle: Vec<f64>,
    /// The full symmetric `p × p` matrix, row-major (`reshape(p, p)` in numpy).
    pub matrix: Vec<f64>,
    /// Per-entry noise sd of the average, in the data's units.
    pub entry_noise_sd: f64,
    /// The threshold rule applied (e.g. `cv`).
    pub threshold_rule: String,
    /// Whether the PSD projection was applied.
    pub psd_projected: bool,
}

/// Operator access to an aggregator: create collections, read their status, close
/// them, fetch estimates. Needs the admin token if the aggregator has one.
///
/// Every method blocks until the aggregator has answered (see the crate
/// documentation).
#[derive(uniffi::Object)]
pub struct Admin {
    // Dropped before the runtime that drives it.
    client: Mutex<AggregatorClient>,
    runtime: Runtime,
}

#[uniffi::export]
impl Admin {
    /// Connects to the aggregator at `url` (as [`Device::connect`](crate::Device::connect))
    /// with the admin `token`, if the aggregator requires one.
    #[uniffi::constructor(default(token = None, ca_pem = None))]
    pub fn connect(
        url: String,
        token: Option<String>,
        ca_pem: Option<String>,
    ) -> Result<Arc<Self>, LdpcovError> {
        let runtime = new_runtime()?;
        let client = connect(&runtime, url, token, ca_pem)?;
        Ok(Arc::new(Admin {
            client: Mutex::new(client),
            runtime,
        }))
    }

    /// Creates a collection and returns its parameters, re-derived locally from the
    /// server's answer.
    pub fn create_collection(
        &self,
        spec: CollectionSpecInput,
    ) -> Result<CollectionInfo, LdpcovError> {
        let spec = spec.to_proto()?;
        let mut client = lock(&self.client)?;
        let params = self.runtime.block_on(client.create_collection(spec))?;
        let collection =
            Collection::from_params(&params).map_err(|e| LdpcovError::ServerMismatch {
                reason: e.to_string(),
            })?;
        Ok(CollectionInfo::from(&collection))
    }

    /// Count and state of a collection.
    pub fn status(&self, collection_id: String) -> Result<CollectionStatusInfo, LdpcovError> {
        let mut client = lock(&self.client)?;
        let status = self.runtime.block_on(client.status(&collection_id))?;
        Ok(status.into())
    }

    /// Closes a collection: it takes no more reports (estimates still work).
    pub fn close_collection(
        &self,
        collection_id: String,
    ) -> Result<CollectionStatusInfo, LdpcovError> {
        let mut client = lock(&self.client)?;
        let status = self
            .runtime
            .block_on(client.close_collection(&collection_id))?;
        Ok(status.into())
    }

    /// The released covariance estimate with the aggregator's default rule.
    /// `FailedPrecondition` below the collection's minimum number of reports.
    ///
    /// A two-aggregator collection's estimate (asked of the leader) is a release of
    /// `release_rho`, the zCDP ρ it spends from each aggregator's budget (Gaussian noise
    /// on each share); asking for the same release again answers the same numbers at no
    /// cost. `None` for a local or shuffled collection, whose reports carry their noise.
    #[uniffi::method(default(release_rho = None))]
    pub fn estimate(
        &self,
        collection_id: String,
        release_rho: Option<f64>,
    ) -> Result<EstimateInfo, LdpcovError> {
        let request = GetEstimateRequest {
            collection_id,
            release: release_rho.map(|rho| CentralRelease {
                mechanism: CentralMechanism::GaussCov as i32,
                rho,
                ..CentralRelease::default()
            }),
            ..GetEstimateRequest::default()
        };
        let mut client = lock(&self.client)?;
        let estimate = self.runtime.block_on(client.estimate(request))?;
        let dim = estimate.dim as usize;
        if estimate.upper_triangle.len() != dim * (dim + 1) / 2 {
            return Err(LdpcovError::ServerMismatch {
                reason: format!(
                    "estimate of dimension {dim} has {} packed entries",
                    estimate.upper_triangle.len()
                ),
            });
        }
        Ok(EstimateInfo {
            matrix: unpack_symmetric(dim, &estimate.upper_triangle),
            collection_id: estimate.collection_id,
            dim: estimate.dim,
            reports: estimate.reports,
            upper_triangle: estimate.upper_triangle,
            entry_noise_sd: estimate.entry_noise_sd,
            threshold_rule: estimate.threshold_rule,
            psd_projected: estimate.psd_projected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shuffled(min_batch: Option<u64>, window: Option<u64>) -> CollectionSpecInput {
        CollectionSpecInput {
            collection_id: "shuffled".into(),
            dim: 3,
            epsilon: 2.0,
            delta: 0.0,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: None,
            mechanism: Some(Mechanism::RankOne),
            shuffle_min_batch_size: min_batch,
            shuffle_batch_window_seconds: window,
            two_aggregator: false,
            radius_phase_share: None,
        }
    }

    /// A radius phase asks for its share and no radius; a radius with it is refused.
    #[test]
    fn a_radius_phase_share_goes_into_the_spec_without_a_radius() {
        let mut input = CollectionSpecInput {
            mechanism: None,
            delta: 1e-6,
            clip_radius: 0.0,
            radius_phase_share: Some(0.2),
            ..shuffled(None, None)
        };
        let spec = input.to_proto().expect("a valid spec");
        assert_eq!(spec.clip_radius, 0.0);
        assert_eq!(spec.radius_phase.map(|p| p.share), Some(0.2));
        input.clip_radius = 1.0;
        assert!(matches!(
            input.to_proto(),
            Err(LdpcovError::InvalidInput { reason }) if reason.contains("clip_radius must be 0")
        ));
    }

    #[test]
    fn the_batch_window_goes_into_the_shuffle_spec() {
        let spec = shuffled(Some(5), Some(1)).to_proto().expect("a valid spec");
        let shuffle = spec.shuffle.expect("a shuffled collection");
        assert_eq!(
            (shuffle.min_batch_size, shuffle.batch_window_seconds),
            (5, 1)
        );
        // Left out: 0, which the aggregator resolves to its default.
        let spec = shuffled(Some(5), None).to_proto().expect("a valid spec");
        assert_eq!(spec.shuffle.expect("shuffled").batch_window_seconds, 0);
        assert_eq!(
            shuffled(None, None)
                .to_proto()
                .expect("a valid spec")
                .shuffle,
            None
        );
    }

    #[test]
    fn a_two_aggregator_spec_names_its_model_and_takes_no_local_options() {
        let two = CollectionSpecInput {
            mechanism: None,
            two_aggregator: true,
            ..shuffled(None, None)
        };
        let spec = two.to_proto().expect("a valid spec");
        assert_eq!(spec.privacy_model, PrivacyModel::TwoAggregator as i32);
        assert_eq!((spec.local_mechanism, spec.encoding), (0, 0));
        assert_eq!(spec.shuffle, None);
        for refused in [
            shuffled(None, None),
            shuffled(Some(5), None),
            CollectionSpecInput {
                mechanism: None,
                encoding: Some(WireEncoding::I16),
                ..shuffled(None, None)
            },
        ] {
            let refused = CollectionSpecInput {
                two_aggregator: true,
                ..refused
            }
            .to_proto();
            assert!(
                matches!(refused, Err(LdpcovError::InvalidInput { .. })),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn a_window_without_a_minimum_or_of_zero_seconds_is_refused() {
        for (min_batch, window) in [(None, Some(1)), (Some(5), Some(0))] {
            let refused = shuffled(min_batch, window).to_proto();
            assert!(
                matches!(refused, Err(LdpcovError::InvalidInput { .. })),
                "{min_batch:?}, {window:?}: {refused:?}"
            );
        }
    }
}
