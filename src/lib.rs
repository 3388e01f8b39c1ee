//! ldpcov: covariance estimation under differential privacy.
//!
//! This root package holds the workspace's user-facing examples (`examples/loadgen`,
//! the main job; `examples/quickstart.rs`; `examples/wire_encodings.rs`); the system
//! tests are `ldpcov-system-tests` (`testing/system/`). The libraries they use are re-exported here:
//! * [`proto`] (`ldpcov-proto`) — the `ldpcov.v1` wire format (gRPC stubs with the
//!   feature `grpc`).
//! * [`privacy`] (`ldpcov-privacy`) — collections, report mechanisms, the planner.
//! * [`accounting`] (`ldpcov-accounting`) — calibration and shuffle amplification.
//! * [`client`] (`ldpcov-client`) — the device side: clip, perturb, encode, submit.
//! * [`estimate`] (`ldpcov-estimate`) — the exact accumulators and the estimators.
//! * [`central`] (`ldpcov-central`) — the trusted-curator releases.
//! * [`aggregator`] (`ldpcov-aggregator`) — the gRPC service and its stores.
//!
//! The exact noise samplers (`ldpcov-noise`) are reached through `client`, and the
//! command line with its output formats is `ldpcov-aggregator-cli`. The simulation models, data
//! files as users and error metrics the examples use are the lab's
//! (`ldpcov-lab`, a dev-dependency).
//!
//! ```
//! use ldpcov::privacy::Collection;
//! use ldpcov::proto::v1::CollectionSpec;
//!
//! let spec = CollectionSpec {
//!     collection_id: "survey".into(),
//!     dim: 5,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 1.0,
//!     min_reports: 1,
//!     ..Default::default()
//! };
//! let collection = Collection::from_spec(&spec)?;
//! assert_eq!(collection.dim(), 5);
//! # Ok::<(), ldpcov::privacy::SpecError>(())
//! ```

pub use ldpcov_accounting as accounting;
pub use ldpcov_aggregator as aggregator;
pub use ldpcov_central as central;
pub use ldpcov_client as client;
pub use ldpcov_estimate as estimate;
pub use ldpcov_privacy as privacy;
pub use ldpcov_proto as proto;
