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
//!
//! What protects the server from slow or silent clients (every number is a field of
//! [`TransportLimits`] and a flag of `ldpcov-aggregator serve`):
//!
//! * a call to `ldpcov.v1.Aggregator` is authenticated from its headers
//!   ([`AuthConfig::check_headers`]) *before* it takes a slot of the global limit
//!   (`max_concurrent_requests`), so a call without a valid token is refused
//!   `UNAUTHENTICATED` at once, whether or not its body ever arrives; health and
//!   reflection are outside the global limit (they never wait behind aggregator
//!   calls);
//! * per connection: at most `max_concurrent_streams` HTTP/2 streams and
//!   `max_calls_per_connection` calls being handled (more wait);
//! * a new connection must send its first 24 bytes (the HTTP/2 preface, or a TLS
//!   ClientHello) and finish a TLS handshake within `handshake_timeout`;
//! * a connection with no call in flight for `idle_timeout` is closed (HTTP/2
//!   keepalive pings do not count as activity);
//! * HTTP/2 keepalive: the server pings every `keepalive_interval` and closes a
//!   connection whose peer does not answer within `keepalive_timeout`;
//! * the accept loop backs off [`ACCEPT_BACKOFF`] on an accept error such as
//!   EMFILE/ENFILE (out of file descriptors) instead of spinning.
//!
//! The connection guards, the call tracking and the auth-first layer are
//! `ldpcov-serve`'s ([`ldpcov_serve::incoming`], [`ldpcov_serve::TrackCallsLayer`],
//! [`ldpcov_serve::AuthFirstLayer`]), shared with the relay; this module gives them the
//! aggregator's token check ([`AuthConfig::check_headers`]).

use ldpcov_seal::MasterSecret;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ldpcov_proto::v1::aggregator_server::AggregatorServer;
use ldpcov_serve::{
    AuthFirstLayer, ConnectionLimits, Health, TrackCallsLayer, grpc_web as with_grpc_web, incoming,
    router, server_builder,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::server::NamedService;
use tonic::service::LayerExt;

use crate::auth::AuthConfig;
use crate::service::{AggregatorService, Limits};
use crate::store::{MemoryStore, Store};
use crate::tls::ServerTls;
use crate::two_aggregator::{LeaderVerifier, TwoAggregatorRole};

/// How long the accept loop waits after an accept error (EMFILE, ENFILE, ENOBUFS, ...)
/// before it accepts again, instead of spinning on the error (`ldpcov-serve`'s, which
/// the relay shares).
pub use ldpcov_serve::ACCEPT_BACKOFF;

/// gRPC-Web for browsers (`serve --grpc-web`) and an origin it cannot use:
/// `ldpcov-serve`'s, which the relay shares.
pub use ldpcov_serve::{GrpcWebOptions, OriginError};

/// Transport limits of the gRPC server; the message size limits stay in
/// [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportLimits {
    /// HTTP/2 streams (concurrent calls) one connection may open.
    pub max_concurrent_streams: u32,
    /// Calls handled at once over all connections; more wait for a slot. Taken only
    /// after a call's token was checked; health and reflection do not take one.
    pub max_concurrent_requests: usize,
    /// Calls handled at once on one connection; more wait.
    pub max_calls_per_connection: usize,
    /// A call still running after this long is cancelled (`CANCELLED`). Also bounds
    /// a `SubmitReports` stream: send very long uploads as several streams.
    pub request_timeout: Duration,
    /// A new connection that has not sent its first 24 bytes (the HTTP/2 preface or a
    /// TLS ClientHello), or not finished its TLS handshake, after this long is closed.
    pub handshake_timeout: Duration,
    /// A connection with no call in flight for this long is closed.
    pub idle_timeout: Duration,
    /// GetEstimate calls computing at once; one more is refused `RESOURCE_EXHAUSTED`
    /// (see [`AggregatorService::with_max_concurrent_estimates`]).
    pub max_concurrent_estimates: usize,
    /// The server sends an HTTP/2 PING on every connection this often.
    pub keepalive_interval: Duration,
    /// A connection whose peer does not answer a PING within this long is closed.
    pub keepalive_timeout: Duration,
}

impl Default for TransportLimits {
    /// 256 streams and 256 calls per connection, 1024 calls at once, 300 s per call,
    /// 10 s to handshake, 300 s idle, twice the cores' estimates at once, a keepalive
    /// PING every 60 s answered within 20 s.
    fn default() -> Self {
        TransportLimits {
            max_concurrent_streams: 256,
            max_concurrent_requests: 1024,
            max_calls_per_connection: 256,
            request_timeout: Duration::from_secs(300),
            handshake_timeout: ldpcov_serve::HANDSHAKE_TIMEOUT,
            idle_timeout: Duration::from_secs(300),
            max_concurrent_estimates: crate::service::default_max_concurrent_estimates(),
            keepalive_interval: ldpcov_serve::KEEPALIVE_INTERVAL,
            keepalive_timeout: ldpcov_serve::KEEPALIVE_TIMEOUT,
        }
    }
}

impl TransportLimits {
    /// The name of the first limit that is zero, if any.
    fn zero(&self) -> Option<&'static str> {
        [
            ("max_concurrent_streams", self.max_concurrent_streams == 0),
            ("max_concurrent_requests", self.max_concurrent_requests == 0),
            (
                "max_calls_per_connection",
                self.max_calls_per_connection == 0,
            ),
            ("request_timeout", self.request_timeout.is_zero()),
            ("handshake_timeout", self.handshake_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            (
                "max_concurrent_estimates",
                self.max_concurrent_estimates == 0,
            ),
            ("keepalive_interval", self.keepalive_interval.is_zero()),
            ("keepalive_timeout", self.keepalive_timeout.is_zero()),
        ]
        .into_iter()
        .find_map(|(name, zero)| zero.then_some(name))
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
    /// Also answer gRPC-Web (HTTP/1.1 and HTTP/2, `application/grpc-web*`), for
    /// browsers; `None`: native gRPC only.
    pub grpc_web: Option<GrpcWebOptions>,
    /// The secret shuffled collections' HPKE keys are derived from
    /// ([`AggregatorService::with_shuffle_secret`]); `None`: one drawn for this server
    /// alone.
    pub shuffle_secret: Option<Arc<MasterSecret>>,
    /// The daemon's two-aggregator role (`None`: two-aggregator collections are
    /// refused). A helper takes `VerifyShares` from the leader's token, derived from
    /// the peer secret; a leader runs its verifier task while it serves.
    pub two_aggregator: Option<TwoAggregatorRole>,
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
    /// The helper's leader token clashes with another token.
    #[error("tokens: {0}")]
    Auth(#[from] crate::auth::AuthError),
    /// The reflection service could not read a file descriptor set.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// The name the health service reports the aggregator under: `ldpcov.v1.Aggregator`.
pub const HEALTH_SERVICE_NAME: &str = <AggregatorServer<AggregatorService> as NamedService>::NAME;

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
        grpc_web,
        shuffle_secret,
        two_aggregator,
    } = options;
    if let Some(name) = transport.zero() {
        return Err(ServeError::Limit(name));
    }
    let auth = match &two_aggregator {
        Some(TwoAggregatorRole::Helper { peer }) => Arc::new(
            (*auth)
                .clone()
                .with_leader_token(peer.leader_token())
                .map_err(ServeError::Auth)?,
        ),
        _ => auth,
    };
    let verifier = match &two_aggregator {
        Some(TwoAggregatorRole::Leader(config)) => {
            Some(LeaderVerifier::new(Arc::clone(&store), config.clone())?)
        }
        _ => None,
    };
    // Follows the store's write health until the shutdown signal.
    let health = Health::new(HEALTH_SERVICE_NAME);
    let follower = health
        .follow(store.write_health(), || {
            tracing::warn!("the store refuses writes: health NOT_SERVING");
        })
        .await;
    let shutdown = async move {
        shutdown.await;
        follower.stop().await;
        tracing::info!("shutting down: health NOT_SERVING, draining calls");
    };
    let mut service = AggregatorService::new(store, limits);
    if let Some(secret) = shuffle_secret {
        service = service.with_shuffle_secret(secret);
    }
    if let Some(role) = two_aggregator {
        tracing::info!(role = role.name(), "serving two-aggregator collections");
        service = service.with_two_aggregator(role, verifier.clone());
    }
    let verifier_task = verifier.map(|v| tokio::spawn(v.run()));
    let service = service
        .with_auth(Arc::clone(&auth))
        .with_max_concurrent_estimates(transport.max_concurrent_estimates)
        .with_transport_security(tls.is_some());
    // Cloned before the layers wrap it: the collections gauge reads the store through it.
    let gauge_service = metrics.then(|| service.clone());
    let service = AggregatorServer::new(service)
        .max_decoding_message_size(limits.max_decoding_message_size())
        .max_encoding_message_size(limits.max_encoding_message_size());
    // The token first (from the headers alone), then one semaphore shared by every
    // connection: a global bound on aggregator calls in flight that a caller without
    // a valid token never holds.
    let service = tower::ServiceBuilder::new()
        .layer(AuthFirstLayer::new(
            move |path, headers| match crate::auth::right_before_body(path) {
                Some(right) => auth.check_headers(headers, right),
                None => Ok(()),
            },
        ))
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            transport.max_concurrent_requests,
        ))
        .named_layer(service);
    let connection = ConnectionLimits {
        max_concurrent_streams: transport.max_concurrent_streams,
        max_calls_per_connection: transport.max_calls_per_connection,
        request_timeout: transport.request_timeout,
        keepalive_interval: transport.keepalive_interval,
        keepalive_timeout: transport.keepalive_timeout,
        handshake_timeout: transport.handshake_timeout,
        idle_timeout: transport.idle_timeout,
    };
    let builder = server_builder(&connection, tls.as_ref().map(ServerTls::config))?;
    if let Some(web) = &grpc_web {
        tracing::info!(origins = ?Some(web.allowed_origins()), "gRPC-Web enabled");
    }
    // With --grpc-web: HTTP/1.1 accepted, CORS (answering preflights) outside the
    // gRPC-Web translation; the call tracking and every service layer as on native gRPC.
    let router = router(
        &mut with_grpc_web(builder.layer(TrackCallsLayer), grpc_web.as_ref()),
        &health,
    )?
    .add_service(service);
    let gauge = gauge_service.map(|service| {
        tokio::spawn(async move {
            let mut every = tokio::time::interval(COLLECTIONS_GAUGE_INTERVAL);
            loop {
                every.tick().await;
                service.refresh_collections_gauge().await;
            }
        })
    });
    let served = router
        .serve_with_incoming_shutdown(incoming(listener, &connection), shutdown)
        .await;
    if let Some(gauge) = gauge {
        gauge.abort();
    }
    if let Some(task) = verifier_task {
        task.abort();
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
