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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio_stream::StreamExt;
    use tonic::metadata::MetadataValue;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    use super::*;
    use crate::{Health, router};

    /// A header list over h2's limit (hyper's default, 16 KiB) but under 4 times it
    /// fails its own call (HTTP 431 and a reset of that stream, which tonic reports as
    /// `UNKNOWN`) and leaves the connection open: the next call on the same channel
    /// is served on the same connection. (Counting connections matters: a channel
    /// reconnects after a GOAWAY, so the next call succeeding alone proves nothing.)
    #[tokio::test]
    async fn an_oversized_header_fails_its_call_alone() {
        let health = Health::new("ldpcov.v1.Relay");
        let limits = ConnectionLimits::with_request_timeout(Duration::from_secs(60));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map({
            let accepted = Arc::clone(&accepted);
            move |connection| {
                accepted.fetch_add(1, Ordering::SeqCst);
                connection
            }
        });
        let mut builder = server_builder(&limits, None).expect("builder");
        let server = router(&mut builder, &health)
            .expect("router")
            .serve_with_incoming(incoming);
        let server = tokio::spawn(server);
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut client = HealthClient::new(channel);
        let check = || HealthCheckRequest {
            service: String::new(),
        };

        // Just over the limit, and just under 4 times it (64 KiB: h2 decodes and drops
        // a header block up to that size; a larger one is a connection error, GOAWAY,
        // by its design: docs/OPERATIONS.md says so).
        for size in [20_000, 60_000] {
            let mut oversized = tonic::Request::new(check());
            let value: MetadataValue<_> = "x".repeat(size).parse().expect("ASCII");
            oversized.metadata_mut().insert("x-oversized", value);
            let refused = client.check(oversized).await.expect_err("refused");
            assert_eq!(refused.code(), tonic::Code::Unknown, "{size}: {refused:?}");
            assert!(refused.message().contains("431"), "{size}: {refused:?}");

            let served = client.check(check()).await.expect("served");
            assert_eq!(served.into_inner().status, 1, "SERVING");
            assert_eq!(accepted.load(Ordering::SeqCst), 1, "{size}: one connection");
        }
        server.abort();
    }
}
