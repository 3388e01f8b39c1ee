//! The device's report, built without a network: [`ReportBuilder`], the one sequence
//! every way of sending a report takes — the gRPC path (`AggregatorClient`'s
//! `prepare_report` and `submit`, feature `grpc`), the relay path (sealed to the
//! collection's key, then to the relay's), and the bindings through them:
//!
//! 1. **policy** — the collection checked against the device's [`PrivacyPolicy`]
//!    (a central or two-aggregator collection refused: its reports are not perturbed
//!    here);
//! 2. **clip** — the public centre subtracted, then clipped to the radius
//!    ([`Perturber::clip`](crate::Perturber::clip)); input errors stop here, before any
//!    randomness is used or budget spent;
//! 3. **report id** — 16 fresh random bytes (the aggregator counts an id once);
//! 4. **ledger** — the spend charged to the device's [`BudgetLedger`], durably, before
//!    any noise is drawn;
//! 5. **mechanism** — the collection's report mechanism with the builder's noise
//!    sampler (the exact discrete Gaussian, OS-seeded, unless replaced);
//! 6. **wire** — re-quantised to the collection's wire step and encoded;
//! 7. for a shuffled collection, **sealed** to the collection's active key
//!    ([`seal_to_aggregator`](crate::seal_to_aggregator)), then to the relay's own key
//!    under a fresh submission id ([`relay_report`](crate::relay_report)).
//!
//! A two-aggregator collection's report
//! ([`two_aggregator_report`](ReportBuilder::two_aggregator_report)) takes steps 1–4, then
//! puts the clipped vector on the central collections' grid (`x = u·2^15` inside the unit
//! ball exactly), **shares** it with its Prio3 validity proof (`ldpcov-prio`, the report
//! id as the nonce) and **seals** the helper's share to the helper's key: no noise is drawn
//! on the device, and neither aggregator alone can read `x`.
//!
//! Transports only send what it built: a retry resends the same bytes under the same
//! id, and no second noisy copy of a vector is ever made for one call.
//!
//! ```
//! use ldpcov_client::{Collection, FloatGaussianNotPrivate, ReportBuilder};
//! use ldpcov_client::proto::v1::CollectionSpec;
//!
//! let collection = Collection::from_spec(&CollectionSpec {
//!     collection_id: "survey".into(),
//!     dim: 3,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 1.0,
//!     min_reports: 1,
//!     ..Default::default()
//! })?;
//! // A simulation's sampler; real devices keep the default exact one.
//! let mut device = ReportBuilder::new()?.with_noise_sampler(
//!     FloatGaussianNotPrivate::from_seed_for_simulation_not_private(7),
//! );
//! let report = device.report(&collection, &[0.3, -0.2, 0.1])?;
//! assert_eq!(report.collection_id, "survey");
//! assert_eq!(report.report_id.len(), 16);
//! // Bad input is refused before anything is drawn or spent.
//! assert!(device.report(&collection, &[0.3, f64::NAN, 0.1]).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::perturb::{
    clip, radius_phase_vector, random_report_id, refuse_pending_radius, report_of_clipped,
};
use crate::{BudgetLedger, ClientError, DiscreteGaussianSampler, NoiseSampler, PrivacyPolicy};
use ldpcov_privacy::{Collection, ReportId, ReportMechanism};
use ldpcov_proto::v1::{RelayReport, Report, SealedReport, TwoAggregatorReport};
use ldpcov_seal::PublicKeyConfig;

/// A noise sampler a builder can hold: `Send`, and `Any` so that its concrete type
/// can be checked (the tests check that the default is the exact sampler).
pub(crate) trait HeldNoise: NoiseSampler + Send + std::any::Any {}

impl<N: NoiseSampler + Send + 'static> HeldNoise for N {}

/// A shuffled collection's report, sealed for the relay (see the module docs), with
/// the id of the report inside the seal.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRelayReport {
    /// The id of the report inside the seal (the aggregator counts it once).
    pub report_id: ReportId,
    /// What goes to the relay.
    pub request: RelayReport,
}

/// Builds a device's reports (see the module docs): holds the device's privacy policy,
/// its noise sampler and, optionally, its budget ledger. Never logs vectors, reports
/// or payloads.
pub struct ReportBuilder {
    policy: PrivacyPolicy,
    pub(crate) noise: Box<dyn HeldNoise>,
    ledger: Option<BudgetLedger>,
}

impl std::fmt::Debug for ReportBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportBuilder")
            .field("policy", &self.policy)
            .field("noise", &self.noise.kind())
            .field("ledger", &self.ledger.is_some())
            .finish()
    }
}

impl ReportBuilder {
    /// A builder with the default [`PrivacyPolicy`], an OS-seeded exact
    /// [`DiscreteGaussianSampler`] and no ledger. Fails only if the operating system's
    /// random number generator does.
    pub fn new() -> Result<Self, ClientError> {
        Ok(ReportBuilder {
            policy: PrivacyPolicy::default(),
            noise: Box::new(DiscreteGaussianSampler::from_os_rng()?),
            ledger: None,
        })
    }

    /// Sets the privacy floor every collection is checked against.
    pub fn with_privacy_policy(mut self, policy: PrivacyPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Replaces the noise sampler, e.g. by
    /// [`DiscreteGaussianSampler::from_seed_for_simulation`] in simulations. Anything
    /// but a cryptographically seeded sampler makes the reports non-private.
    pub fn with_noise_sampler(mut self, noise: impl NoiseSampler + Send + 'static) -> Self {
        self.noise = Box::new(noise);
        self
    }

    /// Charges every report to `ledger` first (see the module docs, step 4).
    pub fn with_ledger(mut self, ledger: BudgetLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The privacy floor in use.
    pub fn policy(&self) -> &PrivacyPolicy {
        &self.policy
    }

    /// The budget ledger, if one is attached.
    pub fn ledger(&self) -> Option<&BudgetLedger> {
        self.ledger.as_ref()
    }

    /// The kind of noise sampler in use (`"exact-discrete-gaussian"` unless replaced).
    pub fn noise_sampler_kind(&self) -> &'static str {
        self.noise.kind()
    }

    /// A complete report of `collection` for `x` under a fresh random id: steps 1–6 of
    /// the module docs. Keep it and resend it if sending fails; building a second one
    /// for the same `x` spends the budget again.
    pub fn report(&mut self, collection: &Collection, x: &[f64]) -> Result<Report, ClientError> {
        // Before the ledger: nothing is charged for a report that is not built.
        if collection.is_central() {
            return Err(ClientError::CentralCollection {
                id: collection.id().to_string(),
            });
        }
        if collection.is_two_aggregator() {
            return Err(ClientError::TwoAggregatorCollection {
                id: collection.id().to_string(),
            });
        }
        refuse_pending_radius(collection)?;
        // A Collection holds what its spec derives (it cannot be edited), so it is used
        // as it is: derived once, when it was fetched or built, never per report.
        self.policy.check(collection)?;
        // Input errors surface before any randomness is used.
        let u = clip(collection, x)?;
        let report_id = random_report_id()?;
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.charge(collection)?;
        }
        report_of_clipped(collection, &u, &mut *self.noise, report_id)
    }

    /// The radius-phase report for `x` of a collection whose clip radius is still being
    /// chosen ([`Collection::radius_pending`]): the one-hot vector of the interval
    /// `‖x − c‖` falls in, built by [`report`](Self::report) for the phase's own
    /// collection — its policy check, its spend (the phase's ρ, under the phase's id)
    /// and its Gaussian noise. The main collection is checked against the policy too
    /// (its ε is the device's total over both reports). Refuses a collection with no
    /// pending phase, and bad input, before anything is spent.
    pub fn radius_phase_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<Report, ClientError> {
        if collection.is_central() {
            // Its phase's reports go unperturbed to the curator, knowingly:
            // `trusted_curator_radius_phase_report`.
            return Err(ClientError::CentralCollection {
                id: collection.id().to_string(),
            });
        }
        self.policy.check(collection)?;
        let (phase, one_hot) = radius_phase_vector(collection, x)?;
        self.report(&phase, &one_hot)
    }

    /// A two-aggregator collection's report for `x` (see the module docs): the leader's
    /// share and the public share in the clear, the helper's share sealed to
    /// `helper_key`, the helper's active key for the collection **as the helper itself
    /// published it** (never as the leader relays it: the leader would then hold both
    /// shares). Charged to the ledger like any report (the collection's release budget
    /// ρ). Refuses a collection of another model before anything is built.
    pub fn two_aggregator_report(
        &mut self,
        collection: &Collection,
        helper_key: &PublicKeyConfig,
        x: &[f64],
    ) -> Result<TwoAggregatorReport, ClientError> {
        let vdaf = two_aggregator_prio3(collection)?;
        self.policy.check(collection)?;
        let grid = two_aggregator_measurement(collection, x)?;
        let shares = |e: ldpcov_prio::Error| ClientError::Shares(e.to_string());
        let report_id = random_report_id()?;
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.charge(collection)?;
        }
        let upload = ldpcov_prio::exchange::shard(
            &vdaf,
            &ldpcov_prio::context(collection.id()),
            &grid,
            &report_id.0,
        )
        .map_err(shares)?;
        let helper_share = ldpcov_seal::seal_helper_share_with_os_rng(
            helper_key,
            collection.id(),
            &report_id.0,
            &upload.helper_share,
        )
        .map_err(|e| ClientError::Sealing(format!("the helper's share: {e}")))?;
        Ok(TwoAggregatorReport {
            collection_id: collection.id().to_string(),
            report_id: report_id.0.to_vec(),
            public_share: upload.public_share,
            leader_share: upload.leader_share,
            helper_share: Some(crate::shuffle::sealed_message(helper_share)),
        })
    }

    /// A shuffled collection's report for `x` sealed to its active key `key` (steps
    /// 1–7 up to the relay's layer): what the relay forwards to the aggregator.
    /// Refuses a collection that is not shuffled before anything is built.
    pub fn sealed_report(
        &mut self,
        collection: &Collection,
        key: &PublicKeyConfig,
        x: &[f64],
    ) -> Result<(ReportId, SealedReport), ClientError> {
        require_shuffled(collection)?;
        let report = self.report(collection, x)?;
        let report_id = ReportId::try_from(report.report_id.as_slice())?;
        let sealed = crate::shuffle::seal_to_aggregator(collection, key, &report)?;
        Ok((report_id, sealed))
    }

    /// [`sealed_report`](Self::sealed_report), then sealed once more to the relay's own
    /// key `relay_key` under a fresh submission id: what a device sends to the relay.
    pub fn relay_report(
        &mut self,
        collection: &Collection,
        key: &PublicKeyConfig,
        relay_key: &PublicKeyConfig,
        x: &[f64],
    ) -> Result<PreparedRelayReport, ClientError> {
        let (report_id, sealed) = self.sealed_report(collection, key, x)?;
        let request = crate::shuffle::relay_report(collection, relay_key, &sealed)?;
        Ok(PreparedRelayReport { report_id, request })
    }
}

/// A two-aggregator collection's measurement for `x`: `x` clipped as for any collection
/// ([`Perturber::clip`](crate::Perturber::clip)), then on the central grid (`x = u·2^15`,
/// inside the unit ball exactly): the vector a device shares. The shared test vectors
/// pin it.
pub fn two_aggregator_measurement(
    collection: &Collection,
    x: &[f64],
) -> Result<Vec<i64>, ClientError> {
    let raw = match collection.mechanism() {
        ReportMechanism::RawVector(raw) if collection.is_two_aggregator() => raw,
        _ => {
            return Err(ClientError::NotTwoAggregator {
                id: collection.id().to_string(),
            });
        }
    };
    let u = clip(collection, x)?;
    Ok(raw.statistic(&u)?.into_iter().map(i64::from).collect())
}

/// The Prio3 type of a two-aggregator collection's reports: `ldpcov-prio`'s circuit with
/// the collection's [`TwoAggregatorCircuit`](ldpcov_privacy::two_aggregator::TwoAggregatorCircuit)
/// (its `encode` gives the measurement the device shares).
pub fn two_aggregator_report_type(
    collection: &Collection,
) -> Result<ldpcov_prio::CovarianceReport, ClientError> {
    let circuit = collection
        .two_aggregator()
        .ok_or_else(|| ClientError::NotTwoAggregator {
            id: collection.id().to_string(),
        })?;
    ldpcov_prio::CovarianceReport::of_circuit(&circuit)
        .map_err(|e| ClientError::Shares(e.to_string()))
}

/// The Prio3 instance of a two-aggregator collection's reports
/// ([`two_aggregator_report_type`] with `ldpcov-prio`'s instance parameters, as both
/// aggregators build it: [`ldpcov_prio::collection_prio3`]).
pub fn two_aggregator_prio3(
    collection: &Collection,
) -> Result<ldpcov_prio::Prio3Covariance, ClientError> {
    ldpcov_prio::new_prio3(two_aggregator_report_type(collection)?)
        .map_err(|e| ClientError::Shares(e.to_string()))
}

/// Refuses a collection that is not shuffled (its reports go to the aggregator, not
/// sealed through a relay).
pub(crate) fn require_shuffled(collection: &Collection) -> Result<(), ClientError> {
    if collection.shuffle().is_none() {
        return Err(ClientError::Sealing(format!(
            "collection {} is not shuffled: send its reports to the aggregator",
            collection.id()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FloatGaussianNotPrivate, Perturber};
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(epsilon: f64) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: "c".into(),
            dim: 4,
            epsilon,
            delta: 1e-6,
            clip_radius: 2.0,
            min_reports: 1,
            centre: vec![1.0, 0.0, 0.0, -1.0],
            ..Default::default()
        })
        .unwrap()
    }

    /// The builder's bytes are the pinned sequence's (the test vectors' `Perturber::
    /// report`, clip then mechanism then wire) for the same noise: only the id is its
    /// own, fresh and random.
    #[test]
    fn the_builder_builds_what_the_vectors_pin() {
        let c = collection(1.0);
        let x = [1.5, -0.5, 2.0, 0.0];
        let mut device = ReportBuilder::new()
            .unwrap()
            .with_noise_sampler(FloatGaussianNotPrivate::from_seed_for_simulation_not_private(3));
        let built = device.report(&c, &x).unwrap();
        let mut noise = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(3);
        let id = ReportId::try_from(built.report_id.as_slice()).unwrap();
        let pinned = Perturber::new(c.clone())
            .report(&x, &mut noise, id)
            .unwrap();
        assert_eq!(built, pinned);
        let again = device.report(&c, &x).unwrap();
        assert_ne!(again.report_id, built.report_id);
    }

    /// A two-aggregator report goes through the real two-party round: the helper opens
    /// its share (only with the report's id), both aggregators accept, and the combined
    /// sums are exactly the clipped vector's on the central grid — `triu(x·xᵀ)` and `x` —
    /// what a central collection would have summed. Refusals come before the ledger.
    #[test]
    fn a_two_aggregator_report_verifies_and_sums_to_the_clipped_vector() {
        use ldpcov_prio::exchange::verify_both;
        use ldpcov_privacy::ReportMechanism;
        use prio::vdaf::{Aggregatable, Aggregator, Collector};

        let spec = CollectionSpec {
            privacy_model: ldpcov_proto::v1::PrivacyModel::TwoAggregator as i32,
            // The device draws no noise: no local mechanism, the central grid's encoding.
            local_mechanism: 0,
            encoding: 0,
            // The mean block too: the aggregators then sum x beside triu(x·xᵀ).
            moments: ldpcov_proto::v1::Moments::MeanAndCovariance as i32,
            ..collection(1.0).spec()
        };
        let c = Collection::create(&spec).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ledger = BudgetLedger::open(dir.path(), crate::BudgetLimits::default()).unwrap();
        let mut device = ReportBuilder::new().unwrap().with_ledger(ledger);
        let master = ldpcov_seal::MasterSecret::from_bytes([4; 32]);
        let schedule = ldpcov_seal::KeySchedule::new(3600, 2).unwrap();
        let helper = ldpcov_seal::CollectionKeys::new(&master, c.id(), schedule).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let [_, helper_key] = helper.published(now).unwrap();

        // Refused before anything is spent: a plain report, a trusted-curator report, a
        // two-aggregator report for a local collection.
        assert!(matches!(
            device.report(&c, &[0.0; 4]),
            Err(ClientError::TwoAggregatorCollection { .. })
        ));
        assert!(matches!(
            crate::trusted_curator_report(&c, &[0.0; 4], ReportId([1; 16])),
            Err(ClientError::TwoAggregatorCollection { .. })
        ));
        assert!(matches!(
            device.two_aggregator_report(&collection(1.0), &helper_key, &[0.0; 4]),
            Err(ClientError::NotTwoAggregator { .. })
        ));
        assert_eq!(device.ledger().unwrap().lifetime_epsilon(), 0.0);

        let x = [1.5, -0.5, 2.0, 0.0];
        let report = device.two_aggregator_report(&c, &helper_key, &x).unwrap();
        assert_eq!(device.ledger().unwrap().spends().len(), 1);
        assert_eq!(device.ledger().unwrap().spends()[0].rho, c.rho());

        let vdaf = two_aggregator_prio3(&c).unwrap();
        let ctx = ldpcov_prio::context(c.id());
        let nonce: [u8; 16] = report.report_id.as_slice().try_into().unwrap();
        let sealed = report.helper_share.clone().unwrap();
        let sealed = ldpcov_seal::SealedReport {
            key_id: sealed.key_id,
            enc: sealed.enc,
            ciphertext: sealed.ciphertext,
        };
        assert!(helper.open_helper_share(&sealed, &[0; 16], now).is_err());
        let helper_share = helper.open_helper_share(&sealed, &nonce, now).unwrap();
        let key = [3u8; 32];
        let (leader_out, helper_out) = verify_both(
            &vdaf,
            &key,
            &ctx,
            &nonce,
            &report.public_share,
            &report.leader_share,
            &helper_share,
        )
        .unwrap();
        let (mut l, mut h) = (vdaf.aggregate_init(&()), vdaf.aggregate_init(&()));
        l.accumulate(&leader_out).unwrap();
        h.accumulate(&helper_out).unwrap();
        let sum = vdaf.unshard(&(), [l, h], 1).unwrap();

        let ReportMechanism::RawVector(raw) = c.mechanism() else {
            panic!("a two-aggregator collection sums raw vectors");
        };
        let grid = raw
            .statistic(&crate::Perturber::new(c.clone()).clip(&x).unwrap())
            .unwrap();
        assert_eq!(
            two_aggregator_measurement(&c, &x).unwrap(),
            grid.iter().map(|&v| i64::from(v)).collect::<Vec<_>>()
        );
        let want_y: Vec<i128> = (0..4)
            .flat_map(|i| (i..4).map(move |j| (i, j)))
            .map(|(i, j)| i128::from(grid[i]) * i128::from(grid[j]))
            .collect();
        assert_eq!(sum.y, want_y);
        assert_eq!(
            sum.x.unwrap(),
            grid.iter().map(|&v| i128::from(v)).collect::<Vec<_>>()
        );
    }

    /// The order of the sequence: a policy refusal and bad input stop the builder
    /// before the ledger is charged; a collection that is not shuffled is refused
    /// before a report is built (`sealed_report` checks it first).
    #[test]
    fn refusals_come_before_the_spend() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = BudgetLedger::open(dir.path(), crate::BudgetLimits::default()).unwrap();
        let mut device = ReportBuilder::new()
            .unwrap()
            .with_privacy_policy(PrivacyPolicy {
                max_epsilon: 2.0,
                ..PrivacyPolicy::default()
            })
            .with_ledger(ledger);
        let spent = |d: &ReportBuilder| d.ledger().unwrap().lifetime_epsilon();
        assert!(matches!(
            device.report(&collection(4.0), &[0.0; 4]),
            Err(ClientError::PolicyViolation { .. })
        ));
        assert!(device.report(&collection(1.0), &[0.0; 3]).is_err());
        assert!(
            device
                .report(&collection(1.0), &[0.0, f64::NAN, 0.0, 0.0])
                .is_err()
        );
        assert_eq!(spent(&device), 0.0);
        device.report(&collection(1.0), &[0.0; 4]).unwrap();
        assert!(spent(&device) > 0.0);
        assert!(matches!(
            require_shuffled(&collection(1.0)),
            Err(ClientError::Sealing(_))
        ));
    }
}
