//! Serving the relay: `ldpcov.v1.Relay`, gRPC health and reflection (both without
//! tokens), transport limits, optional TLS, and the forwarder in the background.
//!
//! Health: `""` and `ldpcov.v1.Relay` are SERVING exactly while the store's last
//! commit succeeded and no shutdown has begun.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ldpcov_proto::v1::relay_server::RelayServer;
use ldpcov_serve::{ConnectionLimits, Health, router, server_builder};
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::service::LayerExt;

use crate::forward::Forwarder;
use crate::gate::{DEFAULT_MIN_BATCH_SIZE, DEFAULT_MIN_BATCH_WINDOW_SECONDS, Gate};
use crate::service::{Clock, RelayService, system_clock};
use crate::store::{CloseRule, RelayStore};
use crate::token::{DeviceTokenIssuer, Secret};
use crate::upstream::Upstream;

/// The name the health service reports the relay under: `ldpcov.v1.Relay`.
pub const HEALTH_SERVICE_NAME: &str = <RelayServer<RelayService> as NamedService>::NAME;

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
}

impl Default for RelayLimits {
    /// 4 MiB messages, 1024 calls at once, 256 streams and calls per connection, 60 s
    /// per call.
    fn default() -> Self {
        RelayLimits {
            max_message_bytes: 4 << 20,
            max_concurrent_requests: 1024,
            max_concurrent_streams: 256,
            max_calls_per_connection: 256,
            request_timeout: Duration::from_secs(60),
        }
    }
}

impl RelayLimits {
    /// The per-connection limits: these streams, calls and call timeout, with the
    /// default keepalive and TLS handshake timeout.
    fn connection(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_concurrent_streams: self.max_concurrent_streams,
            max_calls_per_connection: self.max_calls_per_connection,
            ..ConnectionLimits::with_request_timeout(self.request_timeout)
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
}

impl RelayOptions {
    /// Default limits, no admin token, no TLS, a check every second, the default
    /// floor ([`DEFAULT_MIN_BATCH_SIZE`] reports, no window minimum).
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
    } = options;
    if floor.min_batch_size < 2 {
        return Err(ServeError::Floor(floor.min_batch_size));
    }
    for (name, zero) in [
        ("max_message_bytes", limits.max_message_bytes == 0),
        (
            "max_concurrent_requests",
            limits.max_concurrent_requests == 0,
        ),
        ("max_concurrent_streams", limits.max_concurrent_streams == 0),
        (
            "max_calls_per_connection",
            limits.max_calls_per_connection == 0,
        ),
        ("request_timeout", limits.request_timeout.is_zero()),
        ("batch_check_interval", batch_check_interval.is_zero()),
    ] {
        if zero {
            return Err(ServeError::Limit(name));
        }
    }
    let health = Health::new(HEALTH_SERVICE_NAME);
    let follower = health
        .follow(store.write_health(), || {
            tracing::warn!("the relay store refuses writes: health NOT_SERVING");
        })
        .await;
    let gate = Gate::new(upstream, Arc::clone(&store), floor);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let forwarder = tokio::spawn(
        Forwarder::new(Arc::clone(&store), gate.clone(), Arc::clone(&clock)).run(
            batch_check_interval,
            async move {
                let _ = stop_rx.await;
            },
        ),
    );
    let shutdown = async move {
        shutdown.await;
        follower.stop().await;
        tracing::info!("shutting down: health NOT_SERVING, draining calls");
    };
    let service = RelayService::new(Arc::clone(&store), gate, issuer, admin).with_clock(clock);
    let service = RelayServer::new(service)
        .max_decoding_message_size(limits.max_message_bytes)
        .max_encoding_message_size(64 << 10);
    let service = tower::ServiceBuilder::new()
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            limits.max_concurrent_requests,
        ))
        .named_layer(service);
    let tls = tls.map(|(cert, key)| ldpcov_serve::tls_from_pem(cert, key));
    let mut builder = server_builder(&limits.connection(), tls)?;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let served = router(&mut builder, &health)?
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    let _ = stop_tx.send(());
    let _ = forwarder.await;
    served?;
    Ok(())
}
