//! ldpcov: covariance estimation under differential privacy.
//!
//! The libraries the examples and end-to-end tests use are re-exported here:
//! * [`proto`] (`ldpcov-proto`) — the `ldpcov.v1` wire format, the privacy arithmetic
//!   and the report mechanisms.
//! * [`client`] (`ldpcov-client`) — the device side: clip, perturb, encode, submit.
//! * [`estimate`] (`ldpcov-estimate`) — the exact accumulators and the estimators.
//! * [`central`] (`ldpcov-central`) — the trusted-curator releases.
//! * [`aggregator`] (`ldpcov-aggregator`) — the gRPC service and its stores.
//!
//! The exact noise samplers (`ldpcov-noise`) are reached through `client`, and the
//! command line with its output formats is `ldpcov-cli`.
//!
//! This root crate adds what simulations, examples and end-to-end tests share:
//! [`models`], the data generators of the papers the system reproduces, [`metrics`], the error
//! measures the papers report, [`sim`], the in-process simulation of many users
//! (per-user and sum-of-noise paths), [`data`], reading a user's data matrix from a
//! CSV or `.npy` file, and [`data_users`], a data file's rows as the users of a run.
//!
//! ```
//! use ldpcov::models::{Model, Sampler};
//! use rand::SeedableRng;
//!
//! let sigma = Model::BandedGeometric.covariance(5);
//! assert_eq!(sigma[(0, 2)], 0.6f64.powi(2));
//! let sampler = Sampler::gaussian(&sigma)?;
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let x = sampler.sample(&mut rng);
//! assert_eq!(x.len(), 5);
//! # Ok::<(), ldpcov::models::ModelError>(())
//! ```

pub use ldpcov_accounting as accounting;
pub use ldpcov_aggregator as aggregator;
pub use ldpcov_central as central;
pub use ldpcov_client as client;
pub use ldpcov_estimate as estimate;
pub use ldpcov_privacy as privacy;
pub use ldpcov_proto as proto;

pub mod data;
pub mod data_users;
pub mod metrics;
pub mod models;
pub mod sim;
