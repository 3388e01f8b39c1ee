//! The ldpcov aggregator: it receives perturbed reports over gRPC, sums them exactly,
//! and releases a thresholded, positive semi-definite covariance estimate computed by
//! the `ldpcov-estimate` crate ([`ldpcov_estimate`]).
//!
//! The modules are private; what other crates use is re-exported here:
//!
//! * bearer tokens: [`AuthConfig`], [`Token`], [`SubmitToken`] (who may call what);
//! * TLS (rustls) for the daemon and the CLI: [`ServerTls`], [`client_config`];
//! * the `ldpcov.v1.Aggregator` gRPC service (validation, status codes):
//!   [`AggregatorService`], [`Limits`];
//! * storage: the [`Store`] trait and its backend-neutral errors ([`StoreError`],
//!   [`Cause`]), [`MemoryStore`], and the backends under it: the durable store
//!   [`DurableStore`] (redb, group commit) and [`PostgresStore`] (PostgreSQL, shared by
//!   any number of aggregator replicas);
//! * serving on a listener ([`serve`], [`serve_with`], [`ServeOptions`]) or embedded
//!   in-process ([`EmbeddedServer`]);
//! * metrics: [`histogram_buckets`] and [`describe_metrics`] for `ldpcov-serve`'s exporter;
//! * the fixed limits and tuning values (batch and list bounds, file names, folds,
//!   back-offs): [`constants`].
//!
//! This library is the server. The daemon and admin CLI (the `ldpcov-aggregator`
//! binary) and the presentation of estimates (JSON, CSV, NPY, PNG) are the
//! `ldpcov-aggregator-cli` crate.
//!
//! ```
//! use ldpcov_aggregator::{EmbeddedServer, Limits, MemoryStore, Store};
//! use ldpcov_proto::v1::CollectionSpec;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! // An in-memory aggregator on 127.0.0.1:0, as the tests and the load generator use it.
//! let server = EmbeddedServer::start(Limits { max_dim: 16 }).await?;
//! assert!(server.url().starts_with("http://127.0.0.1:"));
//! server.shutdown().await?;
//!
//! // The store on its own: a collection starts with no reports.
//! let store = MemoryStore::new();
//! let spec = CollectionSpec {
//!     collection_id: "doc".into(), dim: 2, epsilon: 1.0, delta: 1e-6,
//!     clip_radius: 1.0, min_reports: 1, ..Default::default()
//! };
//! let collection = ldpcov_privacy::Collection::from_spec(&spec)?;
//! store.create_collection(collection).await?;
//! assert_eq!(store.count("doc").await?, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod auth;
mod server;
mod service;
mod store;
mod telemetry;
mod tls;
pub mod two_aggregator;

/// The aggregator's fixed limits and tuning values: what a test, an operator's tool or
/// another daemon may need to agree with, kept out of the crate's entry points.
pub mod constants {
    pub use crate::auth::MAX_TOKEN_LEN;
    pub use crate::server::{ACCEPT_BACKOFF, COLLECTIONS_GAUGE_INTERVAL, HEALTH_SERVICE_NAME};
    pub use crate::service::{
        BATCH_ID_LEN, MAX_BATCH_SIZE, MAX_ESTIMATE_CANDIDATES, MAX_ESTIMATE_LIST, STREAM_BATCH,
        default_max_concurrent_estimates,
    };
    pub use crate::store::FOLDS;
    pub use crate::store::redb::{DB_FILE, DEFAULT_CACHE_SIZE, FORMAT_VERSION};
    pub use crate::tls::EXPIRY_WARNING;
}

pub use auth::{AuthConfig, AuthError, Right, SubmitToken, Token, right_before_body};
pub use server::{
    EmbeddedServer, GrpcWebOptions, OriginError, ServeError, ServeOptions, TransportLimits, serve,
    serve_with,
};
pub use service::{AggregatorService, Limits};
#[cfg(feature = "postgres")]
pub use store::postgres::{PostgresConfig, PostgresError, PostgresStore};
pub use store::redb::{DurableConfig, DurableError, DurableStore};
pub use store::{
    Accumulator, BackendError, BatchOutcome, Cause, CodecError, Corruption, DeliveredBatches,
    MemoryStore, QueuedUpload, RecordedRelease, Snapshot, Store, StoreError, ValidReport,
};
pub use telemetry::{describe_metrics, histogram_buckets};
pub use tls::{ServerTls, TlsError, client_config, read_ca};
