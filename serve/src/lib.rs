//! `ldpcov-serve`: the serving plumbing the two daemons share, the aggregator
//! (`ldpcov-aggregator serve`) and the relay (`ldpcov-relay serve`), and nothing of
//! either.
//!
//! * [`Health`] — the standard gRPC health service: `""` (the whole server) and the
//!   daemon's own service reported together; [`Health::follow`] keeps both SERVING
//!   exactly while the daemon's store accepts writes, and [`HealthFollower::stop`]
//!   (called once the shutdown signal completed) stops following and turns both
//!   NOT_SERVING before calls are drained.
//! * [`router`] — a router serving that health service and server reflection (v1 and
//!   v1alpha) listing only the services this daemon runs: `ldpcov.proto` declares
//!   both daemons' services, and a daemon must not advertise the other's.
//! * [`ConnectionLimits`] and [`server_builder`] — the tonic server with the
//!   per-connection limits, keepalive, call timeout and optional TLS
//!   ([`tls_from_pem`]) with its handshake timeout.
//! * [`incoming`], [`TrackCallsLayer`], [`AuthFirstLayer`] — what protects the server
//!   from slow, silent and unauthenticated clients (moved here from the aggregator so
//!   that the relay has exactly its protections): connections closed after the
//!   handshake and idle timeouts, the accept loop backing off
//!   ([`accept_backoff`]) when out of file descriptors, and a call's token checked
//!   from its headers before it takes a slot of the global concurrency limit.
//! * [`GrpcWebOptions`] and [`grpc_web`] — gRPC-Web for browsers, the same policy in
//!   both daemons: HTTP/1.1 accepted, `tonic-web`'s translation behind a CORS layer
//!   with the allowed origins ([`OriginError`] for one that is not an origin),
//!   outside every layer of the daemon's own, so a browser's call meets the same token
//!   check and limits as a native one.
//! * [`ServeFlags`] and [`LogFlag`] — the flags both daemons declare (TLS, handshake,
//!   idle and keepalive times, gRPC-Web and its origins, the metrics address, the log
//!   filter), declared once; each daemon keeps its environment variables' prefix and
//!   its own help texts through [`DaemonFlags`].
//! * [`install_prometheus_exporter`] — the Prometheus exporter of `--metrics-listen`,
//!   with the daemon's histogram buckets ([`Matcher`]).
//! * [`process`] — the daemon binaries' `main`: command line parsing (exit code 2 on
//!   usage errors), logging from the `--log` filter, the async runtime, one-line
//!   errors, and the shutdown signals (SIGTERM, Ctrl-C).
//!
//! The functions here never log what a daemon logs about its own state (its health
//! warnings, its shutdown line): those stay in the daemon, under its own log target, so
//! that a `--log` filter naming the daemon's crate keeps selecting them.
//!
//! ```
//! use std::time::Duration;
//! use ldpcov_serve::{ConnectionLimits, Health, router, server_builder};
//! use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! // A store's write health: true while it accepts writes.
//! let (writable, write_health) = tokio::sync::watch::channel(true);
//! let health = Health::new("ldpcov.v1.Relay");
//! let follower = health
//!     .follow(write_health, || eprintln!("the store refuses writes"))
//!     .await;
//! let limits = ConnectionLimits::with_request_timeout(Duration::from_secs(60));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let shutdown = async move {
//!     let _ = stopped.await;
//!     follower.stop().await;
//! };
//! // The daemon adds its own service with `.add_service(…)` here.
//! let server = router(&mut server_builder(&limits, None)?, &health)?
//!     .serve_with_incoming_shutdown(
//!         tokio_stream::wrappers::TcpListenerStream::new(listener),
//!         shutdown,
//!     );
//! let server = tokio::spawn(server);
//!
//! let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
//!     .connect()
//!     .await?;
//! let mut client = HealthClient::new(channel);
//! let check = |service: &str| HealthCheckRequest { service: service.into() };
//! let status = client.check(check("ldpcov.v1.Relay")).await?.into_inner().status;
//! assert_eq!(status, 1, "SERVING");
//! writable.send_replace(false);
//! tokio::time::sleep(Duration::from_millis(100)).await;
//! let status = client.check(check("")).await?.into_inner().status;
//! assert_eq!(status, 2, "NOT_SERVING");
//! drop(client);
//!
//! stop.send(()).expect("the server is running");
//! server.await??;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod connection;
mod flags;
mod health;
mod metrics;
pub mod process;
mod transport;
mod web;

pub use connection::{
    ACCEPT_BACKOFF, AuthFirst, AuthFirstLayer, BoxFuture, ConnectionInfo, GuardedStream,
    HeaderCheck, HeldGuard, TrackCalls, TrackCallsLayer, accept_backoff, incoming,
};
pub use flags::{DaemonCommandLine, DaemonFlags, LogFlag, ServeFlags};
pub use health::{Health, HealthFollower, router};
pub use metrics::{Matcher, MetricsError, install_prometheus_exporter};
pub use process::{DaemonCli, RuntimeError, ShutdownSignal, shutdown_signal};
pub use transport::{
    ConnectionLimits, HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT,
    server_builder, tls_from_pem,
};
pub use web::{GrpcWebFlagsError, GrpcWebLayers, GrpcWebOptions, OriginError, grpc_web};
