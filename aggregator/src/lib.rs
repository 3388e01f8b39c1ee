//! The ldpcov aggregator: it receives perturbed reports over gRPC, sums them exactly,
//! and releases a thresholded, positive semi-definite covariance estimate.
//!
//! * [`auth`] — bearer tokens: who may call what.
//! * [`tls`] — optional TLS (rustls) for the daemon and the CLI.
//! * [`service`] — the `ldpcov.v1.Aggregator` gRPC service (validation, status codes).
//! * [`accumulator`] — exact integer sums (per fold) and sums of squares.
//! * [`store`] — the [`Store`](store::Store) trait and the in-memory store.
//! * [`durable`] — the durable store (redb, group commit).
//! * [`estimate`] — average, threshold, PSD projection (pure functions, no I/O).
//! * [`threshold`] — threshold rules: universal, seed 001, entry-adaptive, cross-validated.
//! * [`spectral`] — spectral estimators using the known noise level: spike de-biasing,
//!   optimal shrinkers, low rank plus diagonal, bulk shrinkage, SURE.
//! * [`structure`] — banding and Toeplitz band averaging (candidates of the CV).
//! * [`precision`] — precision matrices: ridge (ROPE) and graphical lasso (ADMM), λ by CV.
//! * [`server`] — serving on a listener, or embedded in-process.
//! * [`output`] — writing an estimate as JSON, CSV or NPY.
//!
//! The daemon and admin CLI are the `ldpcov-aggregator` binary.
//!
//! ```
//! use ldpcov_aggregator::accumulator::Accumulator;
//! use ldpcov_aggregator::estimate::{estimate, EstimateOptions, ThresholdRule};
//! use ldpcov_proto::{v1::CollectionSpec, Collection};
//!
//! let c = Collection::from_spec(&CollectionSpec {
//!     collection_id: "doc".into(), dim: 2, epsilon: 1.0, delta: 1e-6,
//!     clip_radius: 1.0, min_reports: 1, encoding: 0,
//! })?;
//! // Two grid-unit reports whose average is [[0.5, 0.25], [0.25, 0.5]].
//! let g = c.grid_scale() as i32;
//! let mut acc = Accumulator::new(c.entries, 2);
//! acc.add(0, &[g, g / 2, 0]);
//! acc.add(1, &[0, 0, g]);
//! let opts = EstimateOptions { rule: ThresholdRule::None, ..Default::default() };
//! let est = estimate(&c, &acc, &opts)?;
//! assert_eq!(est.matrix[(0, 1)], 0.25);
//! assert_eq!(est.clamped_eigenvalues, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod accumulator;
pub mod auth;
pub mod durable;
pub mod estimate;
pub mod output;
pub mod precision;
pub mod server;
pub mod service;
pub mod spectral;
pub mod store;
pub mod structure;
pub mod threshold;
pub mod tls;
