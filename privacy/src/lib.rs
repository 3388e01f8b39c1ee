//! The privacy core of ldpcov: what a device and the aggregator must agree on, derived
//! by both from the same code so that neither has to trust the other's numbers.
//!
//! * [`Collection`] — a validated collection spec with its derived grid, sensitivity,
//!   σ and validation bound, and its report mechanism. A `Collection` cannot be edited
//!   after it is built.
//! * [`mechanism`] — the seam for report mechanisms, one type per mechanism: what a
//!   device computes, how it is encoded, how the aggregator checks and sums it, and the
//!   noise model the estimators read. The rank-one mechanism is in
//!   [`mechanism::rank_one`], the Gaussian ones in [`mechanism::gaussian`].
//! * [`wire`] — a collection's payloads: encoding and the one ingest check
//!   ([`wire::decode_payload`]); [`encoding`] and [`layout`] are its byte level.
//! * [`plan`] — the planner: the error a number of users gives, the users an error needs.
//! * [`shuffle`] — a shuffled collection's settings and its central guarantee.
//! * [`limits`] — the bounds a spec must meet (a leaf); [`SpecError`] — why one did not.
//!
//! The noise calibration and the amplification bounds are pure arithmetic in
//! `ldpcov-accounting`; the messages are `ldpcov-proto`'s.
//!
//! ```
//! use ldpcov_privacy::Collection;
//! use ldpcov_proto::v1::CollectionSpec;
//!
//! let spec = CollectionSpec {
//!     collection_id: "demo".into(),
//!     dim: 20,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 6.0,
//!     min_reports: 1000,
//!     encoding: 0,
//!     ..Default::default()
//! };
//! let c = Collection::from_spec(&spec)?;
//! // Local sensitivity √2, plus the grid rounding of 210 entries at 2^-k.
//! assert!(c.sensitivity() > 2f64.sqrt() && c.sensitivity() < 1.415);
//! // The analytic Gaussian mechanism needs less noise than the classic formula.
//! let classic = ldpcov_accounting::calibration::classic_sigma(c.sensitivity(), 1.0, 1e-6)?;
//! assert!(c.sigma() < classic);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod collection;
pub mod encoding;
mod error;
pub mod layout;
pub mod limits;
pub mod mechanism;
pub mod plan;
pub mod radius;
pub mod shuffle;
pub mod two_aggregator;
pub mod wire;

pub use collection::Collection;
pub use encoding::{ReportId, WireError};
pub use error::SpecError;
pub use mechanism::{NoiseModel, ReportMechanism};
