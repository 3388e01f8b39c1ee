//! The device's own floor on privacy: collections asking for more than this are
//! refused, whatever the server says, before any noise is drawn. A device may also
//! insist that a collection be shuffled, in batches of at least its own floor and at a
//! central ε it computes itself ([`ShufflePolicy`]).

use crate::ClientError;
use ldpcov_privacy::Collection;

/// The weakest privacy a client agrees to give: the largest ε and δ of one report, and
/// optionally a shuffled collection's central guarantee.
///
/// The default refuses collections with ε > 10 or δ > 10⁻³ and does not require
/// shuffling. A collection's σ is always re-derived locally from its (ε, δ), so a
/// server can only obtain less noise by asking for a larger ε or δ, which is what this
/// policy bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacyPolicy {
    /// Largest ε of one report accepted.
    pub max_epsilon: f64,
    /// Largest δ of one report accepted.
    pub max_delta: f64,
    /// `Some`: only shuffled collections meeting it are accepted.
    pub shuffle: Option<ShufflePolicy>,
}

/// What a device requires of a shuffled collection before it reports: the collection
/// is shuffled (its reports go sealed through a relay, never to the aggregator
/// directly), its batches hold at least `min_batch` reports, and the central ε the
/// device computes itself from the collection's ε0, batch floor and central δ (never
/// the number a server announces) is at most `max_central_epsilon`, at a central δ
/// below 1/`min_batch`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShufflePolicy {
    /// Smallest batch floor accepted.
    pub min_batch: u64,
    /// Largest central ε accepted.
    pub max_central_epsilon: f64,
}

impl Default for PrivacyPolicy {
    fn default() -> Self {
        PrivacyPolicy {
            max_epsilon: 10.0,
            max_delta: 1e-3,
            shuffle: None,
        }
    }
}

impl PrivacyPolicy {
    /// Checks that `collection` asks for no weaker privacy than this policy allows.
    ///
    /// A NaN bound refuses every collection.
    pub fn check(&self, collection: &Collection) -> Result<(), ClientError> {
        let ok = collection.epsilon() <= self.max_epsilon && collection.delta() <= self.max_delta;
        if !ok {
            return Err(ClientError::PolicyViolation {
                epsilon: collection.epsilon(),
                delta: collection.delta(),
                max_epsilon: self.max_epsilon,
                max_delta: self.max_delta,
            });
        }
        match self.shuffle {
            Some(required) => required.check(collection),
            None => Ok(()),
        }
    }
}

impl ShufflePolicy {
    /// Checks that `collection` is shuffled as this policy requires (see the type).
    pub fn check(&self, collection: &Collection) -> Result<(), ClientError> {
        let refuse = |reason: String| {
            Err(ClientError::ShufflePolicyViolation {
                id: collection.id().to_string(),
                reason,
            })
        };
        let Some(settings) = collection.shuffle() else {
            return refuse(
                "it is not shuffled: its reports would go to the aggregator directly".into(),
            );
        };
        let batch = settings.min_batch_size();
        if batch < self.min_batch {
            return refuse(format!(
                "its batches may hold {batch} reports, this device requires at least {}",
                self.min_batch
            ));
        }
        let delta = settings.central_delta();
        if delta * batch as f64 >= 1.0 {
            return refuse(format!(
                "its central delta {delta} is at least 1/{batch}: one report in the clear per batch would be allowed"
            ));
        }
        // Computed here from the collection's own ε0, floor and δ: a server's announced
        // figure is never read.
        let Some(privacy) = collection.shuffled_privacy() else {
            return refuse("no amplification bound covers its mechanism".into());
        };
        if !(privacy.central_epsilon <= self.max_central_epsilon) {
            return refuse(format!(
                "its central epsilon is {} (epsilon0 {} in batches of {batch} at delta {delta}), this device accepts at most {}",
                privacy.central_epsilon, privacy.local_epsilon, self.max_central_epsilon
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(epsilon: f64, delta: f64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "policy".into(),
            dim: 2,
            epsilon,
            delta,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: 0,
            ..Default::default()
        })
        .expect("valid spec")
    }

    #[test]
    fn default_policy_bounds_epsilon_and_delta() {
        let policy = PrivacyPolicy::default();
        assert!(policy.check(&collection(1.0, 1e-6)).is_ok());
        assert!(policy.check(&collection(10.0, 1e-3)).is_ok());
        assert!(matches!(
            policy.check(&collection(10.5, 1e-6)),
            Err(ClientError::PolicyViolation { epsilon, .. }) if epsilon == 10.5
        ));
        assert!(matches!(
            policy.check(&collection(1.0, 2e-3)),
            Err(ClientError::PolicyViolation { .. })
        ));
        let nan = PrivacyPolicy {
            max_epsilon: f64::NAN,
            max_delta: 1.0,
            shuffle: None,
        };
        assert!(nan.check(&collection(0.1, 1e-9)).is_err());
    }
}

#[cfg(test)]
mod shuffle_tests {
    use super::*;
    use ldpcov_proto::v1::{CollectionSpec, LocalMechanism, ShuffleSpec};

    fn rank_one(shuffle: Option<ShuffleSpec>) -> Collection {
        Collection::create(&CollectionSpec {
            collection_id: "shuffled".into(),
            dim: 5,
            epsilon: 8.0,
            delta: 0.0,
            clip_radius: 1.0,
            min_reports: 1,
            local_mechanism: LocalMechanism::RankOne as i32,
            shuffle,
            ..Default::default()
        })
        .expect("valid spec")
    }

    fn batches_of(n: u64) -> Option<ShuffleSpec> {
        Some(ShuffleSpec {
            min_batch_size: n,
            ..Default::default()
        })
    }

    fn reason(policy: &PrivacyPolicy, c: &Collection) -> String {
        match policy.check(c) {
            Err(ClientError::ShufflePolicyViolation { reason, .. }) => reason,
            other => panic!("expected a shuffle refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_device_that_insists_on_shuffling_refuses_what_falls_short() {
        // ε0 = 8 in batches of 10⁶ at the default δ 1e-7: central ε ≈ 0.34 (the
        // variation-ratio bound lies between its values at δ = 1e-6, 0.30, and 1e-8, 0.38).
        let policy = PrivacyPolicy {
            max_epsilon: 10.0,
            max_delta: 1e-3,
            shuffle: Some(ShufflePolicy {
                min_batch: 100_000,
                max_central_epsilon: 0.5,
            }),
        };
        assert!(policy.check(&rank_one(batches_of(1_000_000))).is_ok());
        // The aggregator turned the collection direct.
        assert!(reason(&policy, &rank_one(None)).contains("not shuffled"));
        // Batches below the device's floor.
        assert!(reason(&policy, &rank_one(batches_of(1000))).contains("at least 100000"));
        // Floor met, but the central ε it computes is above what it accepts: ε0 = 8 in
        // batches of 10⁵ gives about 1.2.
        let loose = PrivacyPolicy {
            shuffle: Some(ShufflePolicy {
                min_batch: 10_000,
                max_central_epsilon: 0.5,
            }),
            ..policy
        };
        assert!(reason(&loose, &rank_one(batches_of(100_000))).contains("central epsilon"));
        // Without the requirement, the same collections pass.
        assert!(PrivacyPolicy::default().check(&rank_one(None)).is_ok());
    }

    #[test]
    fn a_central_delta_of_one_over_n_is_refused() {
        let policy = PrivacyPolicy {
            shuffle: Some(ShufflePolicy {
                min_batch: 2,
                max_central_epsilon: 10.0,
            }),
            ..PrivacyPolicy::default()
        };
        // Stored specs (from_spec) are not held to create's δ rule: a device is.
        let c = Collection::from_spec(&CollectionSpec {
            collection_id: "shuffled".into(),
            dim: 5,
            epsilon: 8.0,
            delta: 0.0,
            clip_radius: 1.0,
            min_reports: 1,
            local_mechanism: LocalMechanism::RankOne as i32,
            encoding: ldpcov_proto::v1::Encoding::I16Le as i32,
            moments: ldpcov_proto::v1::Moments::SecondMoment as i32,
            shuffle: Some(ShuffleSpec {
                min_batch_size: 1_000_000,
                batch_window_seconds: 3600,
                central_delta: 1e-6,
                key_rotation_seconds: 86_400,
                key_grace_rotations: 7,
            }),
            ..Default::default()
        })
        .expect("a stored spec");
        assert!(reason(&policy, &c).contains("at least 1/1000000"));
    }
}
