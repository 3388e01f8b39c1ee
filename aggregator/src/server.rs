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

use ldpcov_seal::MasterSecret;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use ldpcov_proto::v1::aggregator_server::AggregatorServer;
use ldpcov_serve::{ConnectionLimits, Health, router, server_builder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::service::LayerExt;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};
use tower::{Layer, Service};

use crate::auth::AuthConfig;
use crate::service::{AggregatorService, Limits};
use crate::store::{MemoryStore, Store};
use crate::tls::ServerTls;

/// How long the accept loop waits after an accept error (EMFILE, ENFILE, ENOBUFS, ...)
/// before it accepts again, instead of spinning on the error.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Bytes a new connection must send within the handshake timeout: the HTTP/2 client
/// preface (`PRI * HTTP/2.0...`, 24 bytes); a TLS ClientHello is longer.
const PREFACE_LEN: usize = 24;

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
}

/// gRPC-Web for browsers (`serve --grpc-web`): the same services, tokens and limits as
/// native gRPC, translated by `tonic-web`, behind a CORS policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcWebOptions {
    /// Origins whose pages may call the daemon; a request from any other origin gets
    /// no CORS headers, so the browser refuses to hand the page the answer. Empty: no
    /// cross-origin page may call it (same-origin pages and non-browser gRPC-Web
    /// clients still can).
    allowed_origins: Vec<http::HeaderValue>,
}

/// An origin `serve --grpc-web-origin` cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--grpc-web-origin {0:?} is not an origin: give the scheme and host (and port) only, e.g. https://app.example.com or http://localhost:8080"
)]
pub struct OriginError(pub String);

impl GrpcWebOptions {
    /// gRPC-Web with these allowed origins, each `http://` or `https://`, a host and an
    /// optional port, and nothing else (no path, not even `/`: a browser's `Origin`
    /// header has none, so such an entry would never match).
    pub fn with_origins<'a>(
        origins: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, OriginError> {
        let allowed_origins = origins
            .into_iter()
            .map(|origin| {
                let bad = || OriginError(origin.to_string());
                let uri: http::Uri = origin.parse().map_err(|_| bad())?;
                let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
                let bare = uri
                    .authority()
                    .is_some_and(|a| origin == format!("{}://{a}", uri.scheme_str().unwrap_or("")));
                if !(scheme_ok && bare) {
                    return Err(bad());
                }
                http::HeaderValue::from_str(origin).map_err(|_| bad())
            })
            .collect::<Result<_, _>>()?;
        Ok(GrpcWebOptions { allowed_origins })
    }

    /// The allowed origins.
    pub fn allowed_origins(&self) -> &[http::HeaderValue] {
        &self.allowed_origins
    }

    /// The CORS layer: the allowed origins, POST and OPTIONS, the headers a gRPC-Web
    /// client sends (the token's `authorization` among them) and exposes
    /// (`grpc-status`, `grpc-message`), preflight answers cached for a day.
    fn cors(&self) -> tower_http::cors::CorsLayer {
        use http::header::{AUTHORIZATION, CONTENT_TYPE};
        use http::{HeaderName, Method};
        use tower_http::cors::{AllowOrigin, CorsLayer};
        let names = |list: &[&'static str]| -> Vec<HeaderName> {
            list.iter().map(|n| HeaderName::from_static(n)).collect()
        };
        let mut allowed = vec![AUTHORIZATION, CONTENT_TYPE];
        allowed.extend(names(&["x-grpc-web", "x-user-agent", "grpc-timeout"]));
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(self.allowed_origins.iter().cloned()))
            .allow_methods([Method::POST, Method::OPTIONS])
            .allow_headers(allowed)
            .expose_headers(names(&[
                "grpc-status",
                "grpc-message",
                "grpc-status-details-bin",
            ]))
            .max_age(Duration::from_secs(24 * 3600))
    }
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
    } = options;
    if let Some(name) = transport.zero() {
        return Err(ServeError::Limit(name));
    }
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
        .layer(AuthFirstLayer { auth })
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
    };
    let mut builder = server_builder(&connection, tls.as_ref().map(ServerTls::config))?;
    if grpc_web.is_some() {
        // gRPC-Web clients speak HTTP/1.1 (browsers without TLS always do).
        builder = builder.accept_http1(true);
        tracing::info!(
            origins = ?grpc_web.as_ref().map(|w| &w.allowed_origins),
            "gRPC-Web enabled"
        );
    }
    // CORS (answering preflights) outside the gRPC-Web translation, both only with
    // --grpc-web; the call tracking and every service layer as on native gRPC.
    let cors = tower::util::option_layer(grpc_web.as_ref().map(GrpcWebOptions::cors));
    let web = tower::util::option_layer(grpc_web.as_ref().map(|_| tonic_web::GrpcWebLayer::new()));
    let router = router(
        &mut builder.layer(TrackCallsLayer).layer(cors).layer(web),
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
        .serve_with_incoming_shutdown(incoming(listener, transport), shutdown)
        .await;
    if let Some(gauge) = gauge {
        gauge.abort();
    }
    served?;
    Ok(())
}

/// The listener's connections, each wrapped in a [`GuardedStream`]. An accept error
/// is logged (once per run of errors) and followed by [`ACCEPT_BACKOFF`] of sleep:
/// out of file descriptors, accepting again at once would only fail again and spin
/// a core. Errors that concern one connection only (aborted, reset) retry at once.
fn incoming(
    listener: TcpListener,
    transport: TransportLimits,
) -> impl futures::Stream<Item = Result<GuardedStream, io::Error>> {
    futures::stream::unfold(listener, move |listener| async move {
        let mut failing = false;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    if failing {
                        tracing::info!("accepting connections again");
                    }
                    return Some((Ok(GuardedStream::new(stream, &transport)), listener));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            error = %e,
                            backoff_ms = ACCEPT_BACKOFF.as_millis() as u64,
                            "cannot accept connections (out of file descriptors?): backing off"
                        );
                        failing = true;
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    })
}

/// One connection's calls in flight and when the last one started or ended.
#[derive(Debug)]
struct ConnState {
    calls: AtomicUsize,
    opened: Instant,
    /// Milliseconds after `opened` of the last start or end of a call.
    last_change_ms: AtomicU64,
}

impl ConnState {
    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_change_ms.store(ms, Ordering::SeqCst);
    }

    /// When the connection last changed between busy and idle.
    fn last_change(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_change_ms.load(Ordering::SeqCst))
    }
}

/// A call in flight on a connection, from its headers until its response body is
/// dropped (sent or abandoned).
struct CallGuard(Arc<ConnState>);

impl CallGuard {
    fn new(state: Arc<ConnState>) -> Self {
        state.calls.fetch_add(1, Ordering::SeqCst);
        state.touch();
        CallGuard(state)
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the server knows about a connection: its addresses and its calls.
#[derive(Debug, Clone)]
struct ConnectionInfo {
    tcp: TcpConnectInfo,
    state: Arc<ConnState>,
}

/// An accepted TCP connection that fails its reads (and so is closed by the server)
/// once it has not sent [`PREFACE_LEN`] bytes within the handshake timeout, or has had
/// no call in flight for the idle timeout.
struct GuardedStream {
    inner: TcpStream,
    state: Arc<ConnState>,
    timer: Pin<Box<tokio::time::Sleep>>,
    received: usize,
    handshake_deadline: Instant,
    idle_timeout: Duration,
}

impl GuardedStream {
    fn new(inner: TcpStream, transport: &TransportLimits) -> Self {
        let opened = Instant::now();
        let handshake_deadline = opened + transport.handshake_timeout;
        GuardedStream {
            inner,
            state: Arc::new(ConnState {
                calls: AtomicUsize::new(0),
                opened,
                last_change_ms: AtomicU64::new(0),
            }),
            timer: Box::pin(tokio::time::sleep_until(handshake_deadline)),
            received: 0,
            handshake_deadline,
            idle_timeout: transport.idle_timeout,
        }
    }

    /// Polls the timer; the error to end the connection with once a deadline passed.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            let now = Instant::now();
            let handshaking = self.received < PREFACE_LEN;
            if handshaking && now >= self.handshake_deadline {
                return Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within the handshake timeout",
                ));
            }
            let idle_deadline = if self.state.calls.load(Ordering::SeqCst) == 0 {
                self.state.last_change() + self.idle_timeout
            } else {
                now + self.idle_timeout
            };
            if idle_deadline <= now {
                return Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for the idle timeout",
                ));
            }
            let next = if handshaking {
                idle_deadline.min(self.handshake_deadline)
            } else {
                idle_deadline
            };
            self.timer.as_mut().reset(next);
        }
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            tcp: self.inner.connect_info(),
            state: Arc::clone(&self.state),
        }
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if let Poll::Ready(result) = Pin::new(&mut this.inner).poll_read(cx, buf) {
            this.received = this
                .received
                .saturating_add(buf.filled().len().saturating_sub(before));
            return Poll::Ready(result);
        }
        match this.expired(cx) {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Counts every call on its connection ([`CallGuard`]) until its response body is
/// dropped, and makes the TCP addresses available to `Request::remote_addr`.
#[derive(Debug, Clone, Copy)]
struct TrackCallsLayer;

impl<S> Layer<S> for TrackCallsLayer {
    type Service = TrackCalls<S>;

    fn layer(&self, inner: S) -> TrackCalls<S> {
        TrackCalls { inner }
    }
}

/// The service of [`TrackCallsLayer`].
#[derive(Debug, Clone)]
struct TrackCalls<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for TrackCalls<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let info = request
            .extensions()
            .get::<ConnectionInfo>()
            .or_else(|| {
                request
                    .extensions()
                    .get::<TlsConnectInfo<ConnectionInfo>>()
                    .map(|tls| tls.get_ref())
            })
            .cloned();
        let guard = info.map(|info| {
            request.extensions_mut().insert(info.tcp);
            CallGuard::new(info.state)
        });
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match guard {
                Some(guard) => response.map(|body| {
                    tonic::body::Body::new(TrackedBody {
                        inner: body,
                        _call: guard,
                    })
                }),
                None => response,
            })
        })
    }
}

/// A response body that holds its call's [`CallGuard`].
struct TrackedBody {
    inner: tonic::body::Body,
    _call: CallGuard,
}

impl http_body::Body for TrackedBody {
    type Data = tonic::codegen::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Refuses an aggregator call whose headers carry no token good enough for its
/// method ([`AuthConfig::check_headers`]) before the inner service (the global
/// concurrency limit) is even asked for a slot.
#[derive(Debug, Clone)]
struct AuthFirstLayer {
    auth: Arc<AuthConfig>,
}

impl<S> Layer<S> for AuthFirstLayer {
    type Service = AuthFirst<S>;

    fn layer(&self, inner: S) -> AuthFirst<S> {
        AuthFirst {
            inner,
            auth: Arc::clone(&self.auth),
        }
    }
}

/// The service of [`AuthFirstLayer`].
#[derive(Debug, Clone)]
struct AuthFirst<S> {
    inner: S,
    auth: Arc<AuthConfig>,
}

impl<S, B> Service<http::Request<B>> for AuthFirst<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    /// Always ready: the inner service (the global limit, which takes its slot when
    /// polled ready) is polled only for a call that passed the check.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if let Some(right) = crate::auth::right_before_body(request.uri().path())
            && let Err(status) = self.auth.check_headers(request.headers(), right)
        {
            return Box::pin(async move { Ok(status.into_http()) });
        }
        // The clone that was polled ready is the one called.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            futures::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            inner.call(request).await
        })
    }
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
