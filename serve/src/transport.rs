//! The tonic server builder with a daemon's connection limits and optional TLS.

use std::time::Duration;

use tonic::transport::{Identity, Server, ServerTlsConfig};

/// The default HTTP/2 keepalive: the server pings every connection this often.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);

/// The default keepalive timeout: a connection whose peer does not answer a ping
/// within this long is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The default TLS handshake timeout.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`server_builder`] configures on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// HTTP/2 streams (concurrent calls) one connection may open.
    pub max_concurrent_streams: u32,
    /// Calls handled at once on one connection; more wait.
    pub max_calls_per_connection: usize,
    /// A call still running after this long is cancelled.
    pub request_timeout: Duration,
    /// The server sends an HTTP/2 PING on every connection this often.
    pub keepalive_interval: Duration,
    /// A connection whose peer does not answer a PING within this long is closed.
    pub keepalive_timeout: Duration,
    /// A TLS handshake not finished after this long fails.
    pub handshake_timeout: Duration,
}

impl ConnectionLimits {
    /// 256 streams and 256 calls per connection, [`KEEPALIVE_INTERVAL`],
    /// [`KEEPALIVE_TIMEOUT`], [`HANDSHAKE_TIMEOUT`], and `request_timeout` per call.
    pub fn with_request_timeout(request_timeout: Duration) -> Self {
        ConnectionLimits {
            max_concurrent_streams: 256,
            max_calls_per_connection: 256,
            request_timeout,
            keepalive_interval: KEEPALIVE_INTERVAL,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            handshake_timeout: HANDSHAKE_TIMEOUT,
        }
    }
}

/// The TLS configuration of a server presenting this PEM certificate chain and key
/// (whether the key parses and matches is checked when the server starts).
pub fn tls_from_pem(cert_pem: impl AsRef<[u8]>, key_pem: impl AsRef<[u8]>) -> ServerTlsConfig {
    ServerTlsConfig::new().identity(Identity::from_pem(cert_pem, key_pem))
}

/// A tonic server with `limits` (streams and calls per connection, keepalive, call
/// timeout) and, given `tls`, TLS with the limits' handshake timeout.
pub fn server_builder(
    limits: &ConnectionLimits,
    tls: Option<ServerTlsConfig>,
) -> Result<Server, tonic::transport::Error> {
    let builder = Server::builder()
        .max_concurrent_streams(limits.max_concurrent_streams)
        .concurrency_limit_per_connection(limits.max_calls_per_connection)
        .http2_keepalive_interval(Some(limits.keepalive_interval))
        .http2_keepalive_timeout(Some(limits.keepalive_timeout))
        .timeout(limits.request_timeout);
    match tls {
        Some(tls) => builder.tls_config(tls.timeout(limits.handshake_timeout)),
        None => Ok(builder),
    }
}
