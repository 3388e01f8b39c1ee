//! The device's report, built without a network: [`ReportBuilder`], the one sequence
//! every way of sending a report takes — the gRPC path (`AggregatorClient`'s
//! `prepare_report` and `submit`, feature `grpc`), the relay path (sealed to the
//! collection's key, then to the relay's), and the bindings through them:
//!
//! 1. **policy** — the collection checked against the device's [`PrivacyPolicy`]
//!    (a central collection refused: its reports are not perturbed here);
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

use crate::perturb::{clip, random_report_id, report_of_clipped};
use crate::{BudgetLedger, ClientError, DiscreteGaussianSampler, NoiseSampler, PrivacyPolicy};
use ldpcov_privacy::{Collection, ReportId};
use ldpcov_proto::v1::{RelayReport, Report, SealedReport};
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
        if collection.is_central() {
            // Before the ledger: nothing is charged for a report that is not built.
            return Err(ClientError::CentralCollection {
                id: collection.id().to_string(),
            });
        }
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
