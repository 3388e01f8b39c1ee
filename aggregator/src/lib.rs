//! The ldpcov aggregator: it receives perturbed reports over gRPC, sums them exactly,
//! and releases a thresholded, positive semi-definite covariance estimate computed by
//! the `ldpcov-estimate` crate ([`ldpcov_estimate`]).
//!
//! * [`auth`] — bearer tokens: who may call what.
//! * [`tls`] — optional TLS (rustls) for the daemon and the CLI.
//! * [`service`] — the `ldpcov.v1.Aggregator` gRPC service (validation, status codes).
//! * [`store`] — the [`Store`](store::Store) trait and the in-memory store.
//! * [`durable`] — the durable store (redb, group commit).
//! * [`server`] — serving on a listener, or embedded in-process.
//! * [`output`] — writing an estimate as JSON, CSV or NPY.
//! * [`heatmap`] — PNG heatmaps of a matrix or a vector (diverging colour scale).
//!
//! The accumulators the stores keep and every estimator (average, thresholds,
//! banding/Toeplitz, spectral shrinkage, PSD projection, precision matrices) live in
//! `ldpcov-estimate`.
//! The daemon and admin CLI are the `ldpcov-aggregator` binary.

#![warn(missing_docs)]

pub mod auth;
pub mod durable;
pub mod heatmap;
pub mod output;
pub mod server;
pub mod service;
pub mod store;
pub mod tls;
