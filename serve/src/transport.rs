//! The tonic server builder with a daemon's connection limits and optional TLS.

use std::time::Duration;

use tonic::transport::{Identity, Server, ServerTlsConfig};

/// The default HTTP/2 keepalive: the server pings every connection this often.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);

/// The default keepalive timeout: a connection whose peer does not answer a ping
/// within this long is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The default idle timeout: a connection with no call in flight for this long is
/// closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

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
    /// A new connection that has not sent its first 24 bytes (the HTTP/2 preface or a
    /// TLS ClientHello), or not finished its TLS handshake, after this long is closed
    /// (the first part by [`incoming`](crate::incoming)'s guard).
    pub handshake_timeout: Duration,
    /// A connection with no call in flight for this long is closed (by
    /// [`incoming`](crate::incoming)'s guard, with [`TrackCallsLayer`](crate::TrackCallsLayer)
    /// counting the calls).
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    /// 256 streams and 256 calls per connection, [`KEEPALIVE_INTERVAL`],
    /// [`KEEPALIVE_TIMEOUT`], [`HANDSHAKE_TIMEOUT`], [`IDLE_TIMEOUT`], and
    /// `request_timeout` per call.
    pub fn with_request_timeout(request_timeout: Duration) -> Self {
        ConnectionLimits {
            max_concurrent_streams: 256,
            max_calls_per_connection: 256,
            request_timeout,
            keepalive_interval: KEEPALIVE_INTERVAL,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
        }
    }

    /// The name of the first limit that is zero, if any (a daemon refuses to start
    /// with it).
    pub fn zero(&self) -> Option<&'static str> {
        [
            ("max_concurrent_streams", self.max_concurrent_streams == 0),
            (
                "max_calls_per_connection",
                self.max_calls_per_connection == 0,
            ),
            ("request_timeout", self.request_timeout.is_zero()),
            ("keepalive_interval", self.keepalive_interval.is_zero()),
            ("keepalive_timeout", self.keepalive_timeout.is_zero()),
            ("handshake_timeout", self.handshake_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
        ]
        .into_iter()
        .find_map(|(name, zero)| zero.then_some(name))
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
