//! The flags both daemons declare, declared once: the command line itself
//! ([`DaemonCommandLine`]: the binary's name, version and about line, `--log`
//! ([`LogFlag`], global) and the daemon's subcommands) and the shared flags of `serve`
//! ([`ServeFlags`]: TLS, the handshake, idle and keepalive times, gRPC-Web and its
//! origins, the metrics address), flattened into the daemon's `serve` with
//! `#[command(flatten)]`.
//!
//! Each daemon keeps its own environment variables (`LDPCOV_TLS_CERT` for the
//! aggregator, `LDPCOV_RELAY_TLS_CERT` for the relay: [`DaemonFlags::ENV_PREFIX`]) and
//! its own words where a help text speaks of what the daemon does; flag names,
//! defaults and the other help texts are the same for both.
//!
//! ```
//! use clap::Parser;
//! use ldpcov_serve::{DaemonFlags, ServeFlags};
//!
//! struct Demo;
//! impl DaemonFlags for Demo {
//!     const BINARY: &'static str = "demo";
//!     const ABOUT: &'static str = "a demo daemon";
//!     const ENV_PREFIX: &'static str = "DEMO";
//!     const TLS_CERT_HELP: &'static str = "PEM certificate chain: serve TLS (needs --tls-key)";
//!     const GRPC_WEB_HELP: &'static str = "Also answer gRPC-Web";
//!     const GRPC_WEB_ORIGIN_HELP: &'static str = "An origin whose pages may call the daemon";
//!     const METRICS_LISTEN_HELP: &'static str = "Serve Prometheus metrics on this address";
//! }
//!
//! #[derive(Parser)]
//! struct Serve {
//!     #[command(flatten)]
//!     shared: ServeFlags<Demo>,
//! }
//!
//! let serve = Serve::try_parse_from(["serve", "--grpc-web", "--idle-timeout-secs", "9"])?;
//! assert!(serve.shared.grpc_web);
//! assert_eq!(serve.shared.idle_timeout_secs, 9);
//! assert_eq!(serve.shared.handshake_timeout_secs, 10);
//! assert!(serve.shared.grpc_web_options()?.is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::transport::{HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use crate::web::{GrpcWebFlagsError, GrpcWebOptions};

/// One daemon's names for the shared flags: the prefix of its environment variables
/// and the help texts that say what this daemon does (one paragraph each, without a
/// final period, as clap shows a one-paragraph doc comment).
pub trait DaemonFlags: Send + Sync + 'static {
    /// The binary's name (`--help`, `--version`, usage errors).
    const BINARY: &'static str;
    /// The binary's one-line description (`--help`).
    const ABOUT: &'static str;
    /// The prefix of every environment variable, without the final `_` (`LDPCOV`,
    /// `LDPCOV_RELAY`).
    const ENV_PREFIX: &'static str;
    /// The help of `--tls-cert`.
    const TLS_CERT_HELP: &'static str;
    /// The help of `--grpc-web`.
    const GRPC_WEB_HELP: &'static str;
    /// The help of `--grpc-web-origin`.
    const GRPC_WEB_ORIGIN_HELP: &'static str;
    /// The help of `--metrics-listen`.
    const METRICS_LISTEN_HELP: &'static str;
}

/// The environment variable `name` of daemon `D`: `{ENV_PREFIX}_{name}`.
fn env<D: DaemonFlags>(name: &str) -> String {
    format!("{}_{name}", D::ENV_PREFIX)
}

/// A daemon's whole command line: `--log` and the daemon's subcommands `C`, under its
/// binary's name.
#[derive(clap::Parser)]
#[command(name = D::BINARY, version, about = D::ABOUT)]
pub struct DaemonCommandLine<D: DaemonFlags, C: clap::Subcommand> {
    /// `--log`.
    #[command(flatten)]
    pub log: LogFlag<D>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: C,
}

impl<D: DaemonFlags, C: clap::Subcommand> crate::DaemonCli for DaemonCommandLine<D, C> {
    fn log_filter(&self) -> &str {
        &self.log.log
    }
}

/// `--log`, the log filter, on every subcommand (`global`).
#[derive(clap::Args)]
pub struct LogFlag<D: DaemonFlags> {
    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(long, env = env::<D>("LOG"), default_value = "info", global = true)]
    pub log: String,
    /// Whose environment variables.
    #[arg(skip)]
    daemon: PhantomData<D>,
}

/// The flags of `serve` both daemons have.
#[derive(clap::Args)]
pub struct ServeFlags<D: DaemonFlags> {
    /// PEM certificate chain: serve TLS (with --tls-key).
    #[arg(long, env = env::<D>("TLS_CERT"), requires = "tls_key", help = D::TLS_CERT_HELP)]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = env::<D>("TLS_KEY"), requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A new connection that has not sent the HTTP/2 preface (plaintext) or finished
    /// its TLS handshake after this many seconds is closed.
    #[arg(long, env = env::<D>("HANDSHAKE_TIMEOUT_SECS"), default_value_t = HANDSHAKE_TIMEOUT.as_secs())]
    pub handshake_timeout_secs: u64,
    /// A connection with no call in flight for this many seconds is closed (clients
    /// reconnect on their next call).
    #[arg(long, env = env::<D>("IDLE_TIMEOUT_SECS"), default_value_t = IDLE_TIMEOUT.as_secs())]
    pub idle_timeout_secs: u64,
    /// Send an HTTP/2 keepalive PING on every connection this often (seconds).
    #[arg(long, env = env::<D>("KEEPALIVE_INTERVAL_SECS"), default_value_t = KEEPALIVE_INTERVAL.as_secs())]
    pub keepalive_interval_secs: u64,
    /// Close a connection whose peer has not answered a keepalive PING after this
    /// many seconds.
    #[arg(long, env = env::<D>("KEEPALIVE_TIMEOUT_SECS"), default_value_t = KEEPALIVE_TIMEOUT.as_secs())]
    pub keepalive_timeout_secs: u64,
    /// Also answer gRPC-Web (HTTP/1.1 accepted on the same port).
    #[arg(long, env = env::<D>("GRPC_WEB"), help = D::GRPC_WEB_HELP)]
    pub grpc_web: bool,
    /// The origins whose pages may call the daemon over gRPC-Web.
    #[arg(
        long = "grpc-web-origin",
        env = env::<D>("GRPC_WEB_ORIGINS"),
        value_name = "ORIGIN",
        value_delimiter = ',',
        help = D::GRPC_WEB_ORIGIN_HELP
    )]
    pub grpc_web_origins: Vec<String>,
    /// Serve Prometheus metrics over HTTP on this address (`GET /metrics`).
    #[arg(long, env = env::<D>("METRICS_LISTEN"), value_name = "ADDR", help = D::METRICS_LISTEN_HELP)]
    pub metrics_listen: Option<SocketAddr>,
    /// Whose environment variables and help texts.
    #[arg(skip)]
    daemon: PhantomData<D>,
}

impl<D: DaemonFlags> ServeFlags<D> {
    /// The gRPC-Web policy `--grpc-web` and `--grpc-web-origin` ask for
    /// ([`GrpcWebOptions::from_flags`]).
    pub fn grpc_web_options(&self) -> Result<Option<GrpcWebOptions>, GrpcWebFlagsError> {
        GrpcWebOptions::from_flags(self.grpc_web, &self.grpc_web_origins)
    }

    /// The TLS certificate and key files, when `--tls-cert` and `--tls-key` are set.
    pub fn tls_files(&self) -> Option<(&PathBuf, &PathBuf)> {
        self.tls_cert.as_ref().zip(self.tls_key.as_ref())
    }
}
