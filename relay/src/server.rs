//! Serving the relay: `ldpcov.v1.Relay`, gRPC health and reflection (both without
//! tokens), transport limits, optional TLS, and the forwarder in the background.
//!
//! Before serving, the relay checks that the aggregator accepts its token
//! ([`Upstream::check_token`]): refused, [`serve`] fails at once
//! ([`ServeError::RelayTokenRefused`]); unreachable, it serves and keeps checking.
//!
//! Health: `""` and `ldpcov.v1.Relay` are SERVING exactly while the store's last
//! commit succeeded, the aggregator neither refuses the relay's token nor has been
//! unreachable for [`RelayOptions::outage_grace`] (the [`Monitor`]), and no shutdown
//! has begun. A collection's refusal (closed, deleted, held) is never the relay's:
//! it does not touch health.
//!
//! The transport is the aggregator's, from `ldpcov-serve` (every number a field of
//! [`RelayLimits`] and a flag of `ldpcov-relay serve`):
//!
//! * a call's token is checked from its headers ([`RelayService::check_headers`])
//!   *before* it takes a slot of the global limit (`max_concurrent_requests`): a call
//!   without a valid device or admin token is refused UNAUTHENTICATED at once, whether
//!   or not its body ever arrives; health and reflection take no slot;
//! * per connection: at most `max_concurrent_streams` streams and
//!   `max_calls_per_connection` calls being handled (more wait);
//! * a new connection must send its first 24 bytes and finish a TLS handshake within
//!   `handshake_timeout`; one with no call in flight for `idle_timeout` is closed;
//!   HTTP/2 keepalive pings every `keepalive_interval`, answered within
//!   `keepalive_timeout`;
//! * the accept loop backs off on EMFILE/ENFILE instead of spinning;
//! * a message that does not decode is refused INVALID_ARGUMENT, one larger than
//!   `max_message_bytes` RESOURCE_EXHAUSTED (tonic's own INTERNAL and OUT_OF_RANGE
//!   rewritten).
//!
//! With [`RelayOptions::grpc_web`] (`serve --grpc-web`, for browser devices) the relay
//! also answers gRPC-Web over HTTP/1.1 and HTTP/2, behind a CORS policy naming the
//! allowed origins (`--grpc-web-origin`): `ldpcov-serve`'s [`GrpcWebOptions`], the
//! aggregator's own, outside every layer above, so a browser's call meets the same
//! token check, limits and status rewriting as a native one.

use ldpcov_seal::RelayKey;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ldpcov_proto::v1::relay_server::RelayServer;
use ldpcov_serve::{
    AuthFirstLayer, BoxFuture, ConnectionLimits, GrpcWebOptions, Health, TrackCallsLayer,
    grpc_web as with_grpc_web, incoming, router, server_builder,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::service::LayerExt;
use tower::{Layer, Service};

use crate::batch_rule::CloseRule;
use crate::clock::{Clock, system_clock};
use crate::device_limits::DeviceLimits;
use crate::forward::Forwarder;
use crate::gate::{DEFAULT_MIN_BATCH_SIZE, DEFAULT_MIN_BATCH_WINDOW_SECONDS, Gate};
use crate::monitor::Monitor;
use crate::service::RelayService;
use crate::store::RelayStore;
use crate::token::{DeviceTokenIssuer, Secret};
use crate::upstream::{Reach, Upstream};

/// The name the health service reports the relay under: `ldpcov.v1.Relay`.
pub const HEALTH_SERVICE_NAME: &str = <RelayServer<RelayService> as NamedService>::NAME;

/// The file of the relay's layer-key secret in its data directory (`serve
/// --layer-key-file` overrides it).
pub const LAYER_KEY_FILE: &str = "relay-layer.key";

/// Transport limits of the relay's gRPC server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayLimits {
    /// Largest request accepted, bytes.
    pub max_message_bytes: usize,
    /// Calls handled at once over all connections (more wait).
    pub max_concurrent_requests: usize,
    /// HTTP/2 streams one connection may open.
    pub max_concurrent_streams: u32,
    /// Calls handled at once on one connection.
    pub max_calls_per_connection: usize,
    /// A call running longer is cancelled.
    pub request_timeout: Duration,
    /// A new connection that has not sent its first 24 bytes (the HTTP/2 preface, or a
    /// TLS ClientHello), or not finished its TLS handshake, after this long is closed.
    pub handshake_timeout: Duration,
    /// A connection with no call in flight for this long is closed.
    pub idle_timeout: Duration,
    /// The server sends an HTTP/2 PING on every connection this often.
    pub keepalive_interval: Duration,
    /// A connection whose peer does not answer a PING within this long is closed.
    pub keepalive_timeout: Duration,
    /// Calls of one device token handled at once (more are refused
    /// RESOURCE_EXHAUSTED): a device that stalls its calls holds at most this many
    /// slots of `max_concurrent_requests`.
    pub max_device_calls_in_flight: u32,
    /// Calls of one device token per second on average (bursts of twice as many
    /// pass; more are refused RESOURCE_EXHAUSTED).
    pub max_device_calls_per_second: u32,
}

impl Default for RelayLimits {
    /// 4 MiB messages, 1024 calls at once, 256 streams and calls per connection, 60 s
    /// per call, 10 s to handshake, 300 s idle, a keepalive PING every 60 s answered
    /// within 20 s (the aggregator's transport defaults, `ldpcov_serve`); per device
    /// token 4 calls in flight and 10 calls a second (a device needs two calls per
    /// collection: its lookup and its report).
    fn default() -> Self {
        RelayLimits {
            max_message_bytes: 4 << 20,
            max_concurrent_requests: 1024,
            max_concurrent_streams: 256,
            max_calls_per_connection: 256,
            request_timeout: Duration::from_secs(60),
            handshake_timeout: ldpcov_serve::HANDSHAKE_TIMEOUT,
            idle_timeout: ldpcov_serve::IDLE_TIMEOUT,
            keepalive_interval: ldpcov_serve::KEEPALIVE_INTERVAL,
            keepalive_timeout: ldpcov_serve::KEEPALIVE_TIMEOUT,
            max_device_calls_in_flight: 4,
            max_device_calls_per_second: 10,
        }
    }
}

impl RelayLimits {
    /// The per-connection limits: these streams, calls, call timeout, keepalive,
    /// handshake and idle timeouts.
    fn connection(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_concurrent_streams: self.max_concurrent_streams,
            max_calls_per_connection: self.max_calls_per_connection,
            request_timeout: self.request_timeout,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            handshake_timeout: self.handshake_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

/// Everything [`serve`] needs besides the store and the listener.
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// The aggregator.
    pub upstream: Upstream,
    /// Checks device tokens.
    pub issuer: DeviceTokenIssuer,
    /// Guards `GetRelayStatus` (none: refused).
    pub admin: Option<Secret>,
    /// PEM certificate chain and key: serve TLS.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    /// Transport limits.
    pub limits: RelayLimits,
    /// How often the forwarder forms due batches and sends stored ones.
    pub batch_check_interval: Duration,
    /// The relay's own floor: collections announcing a smaller `min_batch_size` or a
    /// shorter window are refused, and no batch holds fewer reports.
    pub floor: CloseRule,
    /// Also answer gRPC-Web (HTTP/1.1 and HTTP/2, `application/grpc-web*`), for
    /// browser devices, behind its CORS policy; `None`: native gRPC only.
    pub grpc_web: Option<GrpcWebOptions>,
    /// The relay's own HPKE key, whose layer every device report carries
    /// (`ldpcov_seal::RelayKey`); `None`: a fresh random key for this run (an
    /// in-process relay). The daemon keeps its key's secret in its data directory.
    pub layer_key: Option<Arc<RelayKey>>,
    /// Most reports from devices new to the relay in one window of a collection
    /// (`serve --max-new-devices-per-window`); 0: no cap.
    pub new_device_cap: u64,
    /// How long the aggregator may be unreachable before the relay's health is
    /// NOT_SERVING (`serve --aggregator-outage-grace-secs`; default
    /// [`crate::monitor::OUTAGE_GRACE`]).
    pub outage_grace: Duration,
}

impl RelayOptions {
    /// Default limits, no admin token, no TLS, a check every second, the default
    /// floor ([`DEFAULT_MIN_BATCH_SIZE`] reports, no window minimum), no gRPC-Web.
    pub fn new(upstream: Upstream, issuer: DeviceTokenIssuer) -> Self {
        RelayOptions {
            upstream,
            issuer,
            admin: None,
            tls: None,
            limits: RelayLimits::default(),
            batch_check_interval: Duration::from_secs(1),
            floor: CloseRule {
                min_batch_size: DEFAULT_MIN_BATCH_SIZE,
                window_seconds: DEFAULT_MIN_BATCH_WINDOW_SECONDS,
            },
            grpc_web: None,
            layer_key: None,
            new_device_cap: 0,
            outage_grace: crate::monitor::OUTAGE_GRACE,
        }
    }
}

/// Why the relay could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The gRPC transport failed (TLS configuration included).
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// A limit is zero.
    #[error("{0} must be at least 1")]
    Limit(&'static str),
    /// The floor on batches admits batches of fewer than 2 reports.
    #[error("the relay's minimum batch size must be at least 2, got {0}")]
    Floor(u64),
    /// No key for the relay's layer could be made (the OS random number generator).
    #[error("the relay's layer key: {0}")]
    LayerKey(#[from] ldpcov_seal::SecretError),
    /// The aggregator refuses the relay's token (checked before serving).
    #[error(
        "the aggregator refuses this relay's token ({code:?}: {message}): check --relay-token-file against the aggregator's --relay-token-file"
    )]
    RelayTokenRefused {
        /// The aggregator's status code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
    /// The store could not be read.
    #[error("the relay store: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Serves the relay on `listener` until `shutdown` resolves, with the forwarder
/// running beside it; then drains calls and stops the forwarder.
pub async fn serve(
    store: Arc<RelayStore>,
    options: RelayOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_with_clock(store, options, listener, shutdown, system_clock()).await
}

/// [`serve`] with a clock (tests).
pub async fn serve_with_clock(
    store: Arc<RelayStore>,
    options: RelayOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
    clock: Clock,
) -> Result<(), ServeError> {
    let RelayOptions {
        upstream,
        issuer,
        admin,
        tls,
        limits,
        batch_check_interval,
        floor,
        grpc_web,
        layer_key,
        new_device_cap,
        outage_grace,
    } = options;
    let layer_key = match layer_key {
        Some(key) => key,
        None => Arc::new(RelayKey::generate()?),
    };
    if floor.min_batch_size < 2 {
        return Err(ServeError::Floor(floor.min_batch_size));
    }
    for (name, zero) in [
        ("max_message_bytes", limits.max_message_bytes == 0),
        (
            "max_concurrent_requests",
            limits.max_concurrent_requests == 0,
        ),
        ("batch_check_interval", batch_check_interval.is_zero()),
        ("aggregator_outage_grace", outage_grace.is_zero()),
        (
            "max_device_calls_in_flight",
            limits.max_device_calls_in_flight == 0,
        ),
        (
            "max_device_calls_per_second",
            limits.max_device_calls_per_second == 0,
        ),
    ] {
        if zero {
            return Err(ServeError::Limit(name));
        }
    }
    let connection = limits.connection();
    if let Some(name) = connection.zero() {
        return Err(ServeError::Limit(name));
    }
    // The relay token, before anything is served: a refusal is a configuration
    // error found now, not at the first batch.
    match upstream.check_token().await {
        Ok(()) => tracing::info!("the aggregator accepts this relay's token"),
        Err(status) => match upstream.reach() {
            Reach::Refused { code, message } => {
                return Err(ServeError::RelayTokenRefused { code, message });
            }
            _ => tracing::warn!(
                code = ?status.code(),
                message = status.message(),
                "cannot reach the aggregator at start: serving anyway, checking again every 250 ms"
            ),
        },
    }
    let monitor = Monitor::new(upstream.clone(), outage_grace);
    let gate = Gate::new(upstream, Arc::clone(&store), floor)?.with_clock(Arc::clone(&clock));
    let forwarder = Forwarder::new(Arc::clone(&store), gate.clone(), Arc::clone(&clock))
        .with_accepting(monitor.accepting());
    let health = Health::new(HEALTH_SERVICE_NAME);
    let follower = health
        .follow(both(store.write_health(), monitor.health()), || {
            tracing::warn!(
                "the relay store refuses writes, or the aggregator refuses the relay or has been unreachable for the grace period: health NOT_SERVING"
            );
        })
        .await;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (monitor_stop, monitor_stopped) = tokio::sync::oneshot::channel::<()>();
    let monitor = tokio::spawn(monitor.run(async move {
        let _ = monitor_stopped.await;
    }));
    let forwarder = tokio::spawn(forwarder.run(batch_check_interval, async move {
        let _ = stop_rx.await;
    }));
    let shutdown = async move {
        shutdown.await;
        follower.stop().await;
        tracing::info!("shutting down: health NOT_SERVING, draining calls");
    };
    let service = RelayService::new(Arc::clone(&store), gate, issuer, admin, layer_key)
        .with_new_device_cap(new_device_cap)
        .with_device_limits(DeviceLimits {
            max_in_flight: limits.max_device_calls_in_flight,
            calls_per_second: limits.max_device_calls_per_second,
        })
        .with_clock(clock);
    let checker = service.clone();
    let service = RelayServer::new(service)
        .max_decoding_message_size(limits.max_message_bytes)
        .max_encoding_message_size(64 << 10);
    // The token first (from the headers alone), then one semaphore shared by every
    // connection that a caller without a valid token never holds, then tonic's
    // decoding statuses made precise.
    let service = tower::ServiceBuilder::new()
        .layer(AuthFirstLayer::with_guard(move |path, headers| {
            checker.check_headers(path, headers)
        }))
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            limits.max_concurrent_requests,
        ))
        .layer(DecodeStatusesLayer)
        .named_layer(service);
    let tls = tls.map(|(cert, key)| ldpcov_serve::tls_from_pem(cert, key));
    let builder = server_builder(&connection, tls)?;
    if let Some(web) = &grpc_web {
        tracing::info!(origins = ?web.allowed_origins(), "gRPC-Web enabled");
    }
    // With gRPC-Web: HTTP/1.1 accepted, CORS (answering preflights) outside the
    // gRPC-Web translation; the call tracking and every service layer as on native gRPC.
    let served = router(
        &mut with_grpc_web(builder.layer(TrackCallsLayer), grpc_web.as_ref()),
        &health,
    )?
    .add_service(service)
    .serve_with_incoming_shutdown(incoming(listener, &connection), shutdown)
    .await;
    let _ = stop_tx.send(());
    let _ = monitor_stop.send(());
    let _ = forwarder.await;
    let _ = monitor.await;
    served?;
    Ok(())
}

/// A watch that is true exactly while both `a` and `b` are (until either sender is
/// gone).
fn both(mut a: watch::Receiver<bool>, mut b: watch::Receiver<bool>) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(*a.borrow_and_update() && *b.borrow_and_update());
    tokio::spawn(async move {
        loop {
            let changed = tokio::select! {
                r = a.changed() => r,
                r = b.changed() => r,
            };
            if changed.is_err() {
                return;
            }
            let now = *a.borrow_and_update() && *b.borrow_and_update();
            tx.send_if_modified(|v| std::mem::replace(v, now) != now);
        }
    });
    rx
}

/// The `SubmitSealedReport` path (its refusals are counted).
const SUBMIT_PATH: &str = "/ldpcov.v1.Relay/SubmitSealedReport";

/// Rewrites tonic's statuses for a request it could not decode: INTERNAL ("failed to
/// decode Protobuf message") becomes INVALID_ARGUMENT and OUT_OF_RANGE ("decoded
/// message length too large") RESOURCE_EXHAUSTED; the client sent bad input, the
/// relay did not fail. Both happen before the handler runs, so nothing was stored.
#[derive(Debug, Clone, Copy)]
struct DecodeStatusesLayer;

impl<S> Layer<S> for DecodeStatusesLayer {
    type Service = DecodeStatuses<S>;

    fn layer(&self, inner: S) -> DecodeStatuses<S> {
        DecodeStatuses { inner }
    }
}

/// The service of [`DecodeStatusesLayer`].
#[derive(Debug, Clone)]
struct DecodeStatuses<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for DecodeStatuses<S>
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

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let submit = request.uri().path() == SUBMIT_PATH;
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match precise(response.headers()) {
                Some((reason, status)) => {
                    if submit {
                        metrics::counter!("ldpcov_relay_reports_refused_total", "reason" => reason)
                            .increment(1);
                    }
                    status.into_http()
                }
                None => response,
            })
        })
    }
}

/// The precise status (and its refusal reason) for a trailers-only response carrying
/// one of tonic's decoding statuses; `None` for every other response.
fn precise(headers: &http::HeaderMap) -> Option<(&'static str, tonic::Status)> {
    let status = tonic::Status::from_header_map(headers)?;
    let message = status.message();
    match status.code() {
        tonic::Code::Internal if message.starts_with("failed to decode Protobuf message") => {
            Some((
                "undecodable",
                tonic::Status::invalid_argument(format!(
                    "the request is not a valid protobuf message of this method: {message}"
                )),
            ))
        }
        tonic::Code::OutOfRange if message.contains("decoded message length too large") => Some((
            "oversize",
            tonic::Status::resource_exhausted(format!(
                "the request is larger than this relay accepts (--max-message-bytes): {message}"
            )),
        )),
        _ => None,
    }
}
