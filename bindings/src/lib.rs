//! ldpcov for apps: a small **blocking** API over [`ldpcov_client`], from which
//! `uniffi` generates the Kotlin, Swift and Python bindings (`bindings/generate.sh`).
//!
//! * [`Device`] — what an app embeds: fetch a collection, then
//!   [`Device::submit`] a vector. The report is built exactly as
//!   [`ldpcov_client::AggregatorClient`] builds it — input checks first, clipping to
//!   the collection's radius, the **exact discrete Gaussian** noise (the client's
//!   default, OS-seeded; no other sampler can be chosen from the bindings), the
//!   optional budget ledger charged on disk before any noise is drawn — and sent with
//!   retries that resend the same bytes under the same report id.
//!   A two-aggregator collection's report is instead split into two Prio3 shares on
//!   the device, the helper's sealed to the key the helper itself publishes
//!   ([`HelperConfig`]), and uploaded to the leader.
//! * [`Admin`] — operator calls for scripts and quickstarts: create a collection, read
//!   its status, close it, fetch the released estimate (computed by the aggregator
//!   daemon, never on the device).
//!
//! **Threading.** Every call blocks until the aggregator has answered (or the retries
//! are spent). Call it from a background thread — a Kotlin coroutine on
//! `Dispatchers.IO`, a Swift `Task.detached` or background queue, a Python thread or a
//! plain script — never from an app's UI thread. Each object owns a small
//! multi-threaded tokio runtime that drives its gRPC connection; calls on one object
//! are serialised, and separate objects are independent. Do not call these methods
//! from inside a tokio runtime (Rust callers should use `ldpcov_client` directly).
//!
//! Errors are one enum, [`LdpcovError`], an exception hierarchy in the bindings.

uniffi::setup_scaffolding!();

mod admin;
mod device;
mod error;
mod test_vectors;

pub use admin::{Admin, CollectionSpecInput, CollectionStatusInfo, EstimateInfo};
pub use device::{Device, HelperConfig, LedgerConfig, PolicyConfig, RelayConfig, SubmitResult};

pub use error::LdpcovError;
pub use test_vectors::{
    TestVectorReport, collection_params_for_test_vectors, reports_with_seed_for_test_vectors,
};

use ldpcov_client::proto::v1::{Encoding as ProtoEncoding, LocalMechanism};
use ldpcov_client::{AggregatorClient, Collection};
use tokio::runtime::Runtime;

/// Wire encoding of a collection's reports (the noise and its calibration are the
/// same for all three; the coarser ones trade resolution for bandwidth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum WireEncoding {
    /// Little-endian i32 on the collection's fine grid (the default).
    I32,
    /// Little-endian i16 in units of the collection's wire step.
    I16,
    /// One signed byte per entry in units of the collection's wire step.
    I8,
    /// Central collections: the clipped vector itself, not perturbed (the operator
    /// sees it). This client builds no such report.
    Raw,
}

impl WireEncoding {
    fn from_proto(encoding: ProtoEncoding) -> Self {
        match encoding {
            ProtoEncoding::I16Le => WireEncoding::I16,
            ProtoEncoding::I8 => WireEncoding::I8,
            ProtoEncoding::RawI32Le => WireEncoding::Raw,
            // `Collection` normalises an unspecified encoding to i32.
            ProtoEncoding::I32Le | ProtoEncoding::Unspecified => WireEncoding::I32,
        }
    }

    fn to_proto(self) -> ProtoEncoding {
        match self {
            WireEncoding::I32 => ProtoEncoding::I32Le,
            WireEncoding::I16 => ProtoEncoding::I16Le,
            WireEncoding::I8 => ProtoEncoding::I8,
            WireEncoding::Raw => ProtoEncoding::RawI32Le,
        }
    }
}

/// How a device perturbs its report (local collections; see the project's README for
/// which to pick).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Mechanism {
    /// (ε, δ): discrete Gaussian noise on every entry of `(w·u, svec(uuᵀ))` (the default
    /// of a new collection).
    Gaussian,
    /// (ε, δ): the original Gaussian report, off-diagonal products carried as they are.
    GaussianTriu,
    /// Pure ε (δ = 0): one rank-one PrivUnitG draw, `p` i16 numbers per report.
    RankOne,
}

impl Mechanism {
    fn from_proto(mechanism: LocalMechanism) -> Option<Self> {
        match mechanism {
            LocalMechanism::Gaussian => Some(Mechanism::Gaussian),
            LocalMechanism::GaussianTriu => Some(Mechanism::GaussianTriu),
            LocalMechanism::RankOne => Some(Mechanism::RankOne),
            LocalMechanism::Unspecified => None,
        }
    }

    fn to_proto(self) -> LocalMechanism {
        match self {
            Mechanism::Gaussian => LocalMechanism::Gaussian,
            Mechanism::GaussianTriu => LocalMechanism::GaussianTriu,
            Mechanism::RankOne => LocalMechanism::RankOne,
        }
    }
}

/// A collection's parameters as this device re-derived them from its spec (never the
/// server's numbers taken on trust).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct CollectionInfo {
    /// Collection id.
    pub collection_id: String,
    /// Dimension p of the vectors.
    pub dim: u32,
    /// How a device perturbs its report (`None` for a central collection).
    pub mechanism: Option<Mechanism>,
    /// ε of one report.
    pub epsilon: f64,
    /// δ of one report (0 for the rank-one mechanism, which is pure ε).
    pub delta: f64,
    /// Clip radius R: vectors are scaled into the ball of radius R.
    pub clip_radius: f64,
    /// Per-entry Gaussian noise standard deviation σ, in unit-ball units (0 for the
    /// rank-one mechanism, whose noise is not additive).
    pub sigma: f64,
    /// zCDP ρ of one report (what a budget ledger adds up).
    pub rho: f64,
    /// Reports needed before an estimate is released.
    pub min_reports: u64,
    /// Wire encoding of the reports.
    pub encoding: WireEncoding,
    /// Reports go through a relay, sealed, in shuffled batches (see `RelayConfig`).
    pub shuffled: bool,
    /// A two-aggregator collection: each report is split into two secret shares, one
    /// for the leader (this device's aggregator) and one sealed to the helper (see
    /// `HelperConfig`); neither sees `x`.
    pub two_aggregator: bool,
    /// With a radius phase: the collection devices report their norm's interval to
    /// (`<id>.radius`); `None` without one.
    pub radius_phase_collection_id: Option<String>,
    /// The radius phase has not chosen the radius yet (`clip_radius` is 0):
    /// `Device::submit` sends the norm's interval, not the vector.
    pub radius_pending: bool,
}

impl From<&Collection> for CollectionInfo {
    fn from(c: &Collection) -> Self {
        CollectionInfo {
            collection_id: c.id().to_string(),
            // `Collection` comes from a spec whose `dim` is a u32.
            dim: u32::try_from(c.dim()).unwrap_or(u32::MAX),
            mechanism: Mechanism::from_proto(c.mechanism().local_mechanism()),
            epsilon: c.epsilon(),
            delta: c.delta(),
            clip_radius: c.clip_radius(),
            sigma: c.sigma(),
            rho: c.rho(),
            min_reports: c.min_reports(),
            encoding: WireEncoding::from_proto(c.encoding()),
            shuffled: c.shuffle().is_some(),
            two_aggregator: c.is_two_aggregator(),
            radius_phase_collection_id: c
                .radius_phase()
                .map(|phase| phase.phase_collection_id().to_string()),
            radius_pending: c.radius_pending(),
        }
    }
}

/// The runtime an object owns: two worker threads drive its connection while the
/// caller's thread blocks in `block_on`.
fn new_runtime() -> Result<Runtime, LdpcovError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ldpcov-ffi")
        .enable_all()
        .build()
        .map_err(|e| LdpcovError::Internal {
            reason: format!("cannot start the tokio runtime: {e}"),
        })
}

/// Connects a client: plain HTTP/2 for `http://` URLs, TLS for `https://` ones
/// (trusting `ca_pem` if given, else the bundled web PKI roots), with the bearer
/// token if any.
fn connect(
    runtime: &Runtime,
    url: String,
    token: Option<String>,
    ca_pem: Option<String>,
) -> Result<AggregatorClient, LdpcovError> {
    let tls = url.starts_with("https://");
    if ca_pem.is_some() && !tls {
        return Err(LdpcovError::InvalidInput {
            reason: "a CA certificate is only used with an https:// URL".into(),
        });
    }
    let client = runtime.block_on(async {
        if tls {
            AggregatorClient::connect_with_tls(url, ca_pem.as_deref().map(str::as_bytes)).await
        } else {
            AggregatorClient::connect(url).await
        }
    })?;
    Ok(match token {
        Some(token) => client.with_token(token)?,
        None => client,
    })
}

/// Locks `mutex`; a poisoned lock (a panic in an earlier call) is an error, not a panic.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, LdpcovError> {
    mutex.lock().map_err(|_| LdpcovError::Internal {
        reason: "an earlier call on this object panicked".into(),
    })
}
