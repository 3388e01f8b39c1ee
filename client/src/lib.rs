//! The ldpcov device side: turn a user's vector `x ∈ Rᵖ` into a locally private
//! report of `triu(x·xᵀ)`, and send it to an aggregator.
//!
//! For each report the client
//! 1. clips `x` to the collection's public radius R and scales it into the unit ball,
//!    `u = x / max(R, ‖x‖)`;
//! 2. puts each packed entry `uᵢ·uⱼ` (`i ≤ j`, row-major) on the collection's grid
//!    `2⁻ᵏ` with deterministic rounding;
//! 3. adds independent noise of sd `σ·2ᵏ` grid units per entry, σ calibrated by the
//!    analytic Gaussian mechanism to the sensitivity `√2 + √d·2⁻ᵏ`;
//! 4. encodes the integers (little-endian i32) under a fresh random 16-byte report id.
//!
//! The privacy arithmetic (grid, sensitivity, σ, validation bound) lives in
//! [`ldpcov_proto`] and is shared with the aggregator. A client always re-derives it
//! from the collection's spec and refuses a server that announces less noise, and a
//! [`PrivacyPolicy`] bounds the (ε, δ) it accepts.
//!
//! The core ([`Perturber`] and the samplers) has no transport and no async runtime:
//! build the crate with `default-features = false` to ship reports your own way. The `grpc` feature (on by
//! default) adds [`AggregatorClient`], an async tonic client with retries that resend
//! the same report under the same id.
//!
//! ```
//! use ldpcov_client::proto::v1::CollectionSpec;
//! use ldpcov_privacy::{wire::decode_payload, Collection};
//! use ldpcov_client::{random_report_id, DiscreteGaussianSampler, Perturber};
//!
//! let collection = Collection::from_spec(&CollectionSpec {
//!     collection_id: "demo".into(),
//!     dim: 3,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 5.0,
//!     min_reports: 100,
//!     encoding: 0,
//!     ..Default::default()
//! })?;
//! let perturber = Perturber::new(collection.clone());
//! // Real reports: exact discrete Gaussian noise, integer arithmetic only, from a
//! // ChaCha20 stream seeded by the operating system.
//! let mut noise = DiscreteGaussianSampler::from_os_rng()?;
//!
//! let x = [0.5, -1.25, 2.0];
//! let report = perturber.report(&x, &mut noise, random_report_id()?)?;
//! assert_eq!(report.collection_id, "demo");
//! assert_eq!(report.report_id.len(), 16);
//! // d = p(p+1)/2 = 6 entries of 4 bytes, within the aggregator's validation bound.
//! assert_eq!(report.payload.len(), 4 * 6);
//! let entries = decode_payload(&collection, report.encoding, &report.payload)?;
//! assert_eq!(entries.len(), 6);
//!
//! // Input errors come before any noise is drawn.
//! assert!(perturber.perturb(&[1.0, f64::NAN, 0.0], &mut noise).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

//! # Public surface
//!
//! Everything is exported at the crate root. The exact samplers come from the
//! `ldpcov-noise` crate ([`DiscreteGaussianSampler`] and what a device needs are
//! re-exported here); its docs carry the algorithm, the exactness argument and the
//! CKS20 reference algorithms it is tested and benchmarked against.

mod error;
mod ledger;
mod mechanism;
mod perturb;
mod policy;
mod report_builder;
mod shuffle;

#[cfg(feature = "grpc")]
mod grpc;

pub use error::ClientError;
pub use ldpcov_noise::{
    DiscreteGaussian, DiscreteGaussianSampler, NoiseSampler, RandomBits, Sigma2, SigmaError,
};
pub use ldpcov_privacy::{Collection, ReportId};
pub use ldpcov_proto as proto;
pub use ledger::{BudgetLedger, BudgetLimits, LEDGER_FILE, LedgerError, Spend};
pub use perturb::{
    CLIP_MARGIN, FloatGaussianNotPrivate, Perturber, random_report_id,
    trusted_curator_radius_phase_report, trusted_curator_report,
};
pub use policy::{PrivacyPolicy, ShufflePolicy};
pub use report_builder::{
    PreparedRelayReport, ReportBuilder, two_aggregator_measurement, two_aggregator_prio3,
    two_aggregator_report_type,
};
pub use shuffle::{
    SUBMISSION_ID_LEN, active_key, relay_key, relay_report, seal_for_relay, seal_report,
    seal_to_aggregator,
};

#[cfg(feature = "grpc")]
pub use grpc::{AggregatorClient, MAX_MESSAGE_SIZE, RetryPolicy, SubmitOutcome, is_retryable};
