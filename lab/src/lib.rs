//! ldpcov-lab: the lab beside the product — simulation models, data loading, error
//! metrics and (in `examples/reproduce/`) the papers' reproduction harness.
//!
//! No product crate depends on this one; it depends on them, and runs the **same**
//! perturbation and estimator code as the real system, in-process:
//! * [`models`] — the data generators of the papers the system reproduces (the
//!   heavy-tailed paper's Models 1 and 2, Wang & Xu's sparse model), sampled as
//!   Gaussian or multivariate t vectors.
//! * [`sim`] — the in-process simulation of many users (per-user and sum-of-noise
//!   paths). **Simulation only**: every noise stream is seeded, so nothing produced
//!   here is private.
//! * [`metrics`] — the error measures the papers report.
//! * [`data`] — reading a data matrix from a CSV or `.npy` file; [`data_users`] — a
//!   data file's rows as the users of a load-generator run.
//!
//! The load generator (the root package's `examples/loadgen`) and the system tests use
//! these modules; the reproduction harness (`cargo run --release -p ldpcov-lab --example
//! reproduce -- …`) and `examples/estimator_check.rs` are the lab's own. How to rerun
//! every experiment, and the results: `lab/docs/REPRODUCTION.md`.
//!
//! ```
//! use ldpcov_lab::metrics::relative_frobenius_error;
//! use ldpcov_lab::models::{Model, Sampler};
//! use rand::SeedableRng;
//!
//! let sigma = Model::BandedGeometric.covariance(5);
//! assert_eq!(sigma[(0, 2)], 0.6f64.powi(2));
//! let sampler = Sampler::gaussian(&sigma)?;
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let x = sampler.sample(&mut rng);
//! assert_eq!(x.len(), 5);
//! assert_eq!(relative_frobenius_error(&sigma, &sigma), 0.0);
//! # Ok::<(), ldpcov_lab::models::ModelError>(())
//! ```

pub mod data;
pub mod data_users;
pub mod metrics;
pub mod models;
pub mod sim;
