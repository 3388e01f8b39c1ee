//! Running the service: on a listener until a shutdown signal, or embedded in-process
//! on `127.0.0.1:0` for tests, examples and the load generator.
//!
//! Next to `ldpcov.v1.Aggregator` the server serves the standard gRPC health service
//! (`grpc.health.v1.Health`) and server reflection (`grpc.reflection.v1` and
//! `v1alpha`), both without tokens (they reveal only the schema and whether the
//! server is up). Health: `""` (the whole server) and `ldpcov.v1.Aggregator` are
//! `SERVING` exactly while the store accepts writes ([`Store::write_health`]) and the
//! server is not shutting down; both turn `NOT_SERVING` as soon as the shutdown signal
//! completes, before in-flight calls are drained.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ldpcov_proto::v1::aggregator_server::AggregatorServer;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::auth::AuthConfig;
use crate::service::{AggregatorService, Limits};
use crate::store::{MemoryStore, Store};
use crate::tls::ServerTls;

/// Transport limits of the gRPC server; the message size limits stay in
/// [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportLimits {
    /// HTTP/2 streams (concurrent calls) one connection may open.
    pub max_concurrent_streams: u32,
    /// Calls handled at once over all connections; more wait for a slot.
    pub max_concurrent_requests: usize,
    /// A call still running after this long is cancelled (`CANCELLED`). Also bounds
    /// a `SubmitReports` stream: send very long uploads as several streams.
    pub request_timeout: Duration,
}

impl Default for TransportLimits {
    /// 256 streams per connection, 1024 calls at once, 300 s per call.
    fn default() -> Self {
        TransportLimits {
            max_concurrent_streams: 256,
            max_concurrent_requests: 1024,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// Everything [`serve_with`] needs besides the store and the listener.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Dimension and message size limits.
    pub limits: Limits,
    /// Streams, concurrency and timeout.
    pub transport: TransportLimits,
    /// Tokens (default: open).
    pub auth: Arc<AuthConfig>,
    /// TLS certificate and key (default: plaintext).
    pub tls: Option<ServerTls>,
    /// Keep the `ldpcov_collections` gauge current: set at start and every
    /// [`COLLECTIONS_GAUGE_INTERVAL`] (other replicas may create or delete collections).
    /// Set when the daemon exports metrics (`serve --metrics-listen`).
    pub metrics: bool,
}

/// How often the collections gauge is refreshed when [`ServeOptions::metrics`] is set.
pub const COLLECTIONS_GAUGE_INTERVAL: Duration = Duration::from_secs(15);

impl From<Limits> for ServeOptions {
    fn from(limits: Limits) -> Self {
        ServeOptions {
            limits,
            ..ServeOptions::default()
        }
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or reading the listen address failed.
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    /// The gRPC transport failed.
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// A limit is zero.
    #[error("{0} must be at least 1")]
    Limit(&'static str),
    /// The reflection service could not read a file descriptor set.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// The name the health service reports the aggregator under: `ldpcov.v1.Aggregator`.
pub const HEALTH_SERVICE_NAME: &str = <AggregatorServer<AggregatorService> as NamedService>::NAME;

/// Sets `""` and [`HEALTH_SERVICE_NAME`] to `status`.
async fn set_health(reporter: &HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter
        .set_service_status(HEALTH_SERVICE_NAME, status)
        .await;
}

fn serving(healthy: bool) -> ServingStatus {
    if healthy {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Serves `store` on `listener` until `shutdown` completes, then drains in-flight calls.
/// Open (no tokens), plaintext, default [`TransportLimits`].
pub async fn serve(
    store: Arc<dyn Store>,
    limits: Limits,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_with(store, limits.into(), listener, shutdown).await
}

/// [`serve`] with tokens, TLS and transport limits.
pub async fn serve_with(
    store: Arc<dyn Store>,
    options: ServeOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let ServeOptions {
        limits,
        transport,
        auth,
        tls,
        metrics,
    } = options;
    if transport.max_concurrent_streams == 0 {
        return Err(ServeError::Limit("max_concurrent_streams"));
    }
    if transport.max_concurrent_requests == 0 {
        return Err(ServeError::Limit("max_concurrent_requests"));
    }
    if transport.request_timeout.is_zero() {
        return Err(ServeError::Limit("request_timeout"));
    }
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut write_health = store.write_health();
    let healthy = *write_health.borrow_and_update();
    set_health(&reporter, serving(healthy)).await;
    // Follows the store's write health until the shutdown signal.
    let follower = {
        let reporter = reporter.clone();
        tokio::spawn(async move {
            while write_health.changed().await.is_ok() {
                let healthy = *write_health.borrow_and_update();
                if !healthy {
                    tracing::warn!("the store refuses writes: health NOT_SERVING");
                }
                set_health(&reporter, serving(healthy)).await;
            }
        })
    };
    let shutdown = async move {
        shutdown.await;
        // Stop following first, so that nothing turns SERVING again afterwards.
        follower.abort();
        let _ = follower.await;
        set_health(&reporter, ServingStatus::NotServing).await;
        tracing::info!("shutting down: health NOT_SERVING, draining calls");
    };
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(ldpcov_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    // Older grpcurl and grpc_cli only speak v1alpha.
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(ldpcov_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let service = AggregatorService::new(store, limits)
        .with_auth(auth)
        .with_transport_security(tls.is_some());
    let gauge = if metrics {
        let service = service.clone();
        Some(tokio::spawn(async move {
            let mut every = tokio::time::interval(COLLECTIONS_GAUGE_INTERVAL);
            loop {
                every.tick().await;
                service.refresh_collections_gauge().await;
            }
        }))
    } else {
        None
    };
    let service = AggregatorServer::new(service)
        .max_decoding_message_size(limits.max_decoding_message_size())
        .max_encoding_message_size(limits.max_encoding_message_size());
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(transport.max_concurrent_streams)
        .timeout(transport.request_timeout);
    if let Some(tls) = &tls {
        builder = builder.tls_config(tls.config())?;
    }
    let served = builder
        // One semaphore shared by every connection: a global bound on calls in flight.
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            transport.max_concurrent_requests,
        ))
        .add_service(service)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await;
    if let Some(gauge) = gauge {
        gauge.abort();
    }
    served?;
    Ok(())
}

/// An aggregator running inside this process (tests, examples, the load generator).
pub struct EmbeddedServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl EmbeddedServer {
    /// Starts an in-memory aggregator on `127.0.0.1:0`.
    pub async fn start(limits: Limits) -> Result<Self, ServeError> {
        Self::start_with_store(Arc::new(MemoryStore::new()), limits).await
    }

    /// Starts an aggregator over `store` on `127.0.0.1:0`.
    pub async fn start_with_store(
        store: Arc<dyn Store>,
        limits: Limits,
    ) -> Result<Self, ServeError> {
        Self::start_with_options(store, limits.into()).await
    }

    /// Starts an aggregator over `store` with tokens, TLS or transport limits on
    /// `127.0.0.1:0`. With TLS, connect to `https://localhost:PORT` (see
    /// [`addr`](EmbeddedServer::addr)).
    pub async fn start_with_options(
        store: Arc<dyn Store>,
        options: ServeOptions,
    ) -> Result<Self, ServeError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(serve_with(store, options, listener, async {
            let _ = rx.await;
        }));
        Ok(EmbeddedServer {
            addr,
            shutdown: Some(tx),
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
        }
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
