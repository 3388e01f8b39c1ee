//! What a daemon binary's `main` does around its commands: parse the command line
//! (usage errors exit 2), log to stderr through the `--log` filter, start the async
//! runtime, print an error as one line and exit non-zero, and wait for the shutdown
//! signals.
//!
//! ```no_run
//! use clap::Parser;
//! use ldpcov_serve::process::{self, DaemonCli};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     /// Log filter (tracing-subscriber EnvFilter syntax).
//!     #[arg(long, default_value = "info")]
//!     log: String,
//! }
//!
//! impl DaemonCli for Cli {
//!     fn log_filter(&self) -> &str {
//!         &self.log
//!     }
//! }
//!
//! async fn run(_cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
//!     let signal = ldpcov_serve::shutdown_signal().await;
//!     tracing::info!("{signal}: shutting down");
//!     Ok(())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     process::main(|cli: Cli| process::block_on(run(cli)))
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::process::ExitCode;

/// A daemon's command line: a clap parser with a log filter.
pub trait DaemonCli: clap::Parser {
    /// The `--log` filter (tracing-subscriber `EnvFilter` syntax; an invalid one
    /// means `info`).
    fn log_filter(&self) -> &str;
}

/// A daemon binary's whole `main`: [`parse`] (usage errors exit 2, `--help` and
/// `--version` 0), [`init_logging`] with the parsed filter, then `run`, whose error
/// is printed by [`exit_code`].
pub fn main<C: DaemonCli, E: fmt::Display>(run: impl FnOnce(C) -> Result<(), E>) -> ExitCode {
    let cli = match parse::<C>() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    init_logging(cli.log_filter());
    exit_code(run(cli))
}

/// Parses the command line; on a usage error, `--help` or `--version` prints clap's
/// message and gives the exit code: 2 for an error (printed to stderr), success for
/// help and version.
pub fn parse<C: clap::Parser>() -> Result<C, ExitCode> {
    C::try_parse().map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// Logs to stderr through `filter` (`EnvFilter` syntax; `info` if it does not parse).
pub fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// The async runtime could not start. Its message already holds the OS error, which
/// is therefore not a `source` (an error chain prints it once).
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime: {0}")]
pub struct RuntimeError(pub std::io::Error);

/// Runs `future` to completion on a new multi-threaded runtime.
pub fn block_on<T, E: From<RuntimeError>>(
    future: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let runtime = tokio::runtime::Runtime::new().map_err(RuntimeError)?;
    runtime.block_on(future)
}

/// Success, or the error printed to stderr as one line `error: {e:#}` (an `anyhow`
/// chain joined by `: `) and a failure exit code.
pub fn exit_code<E: fmt::Display>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Which signal asked the daemon to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGINT (Ctrl-C).
    CtrlC,
    /// SIGTERM (Unix only).
    Terminate,
}

impl fmt::Display for ShutdownSignal {
    /// `Ctrl-C` or `SIGTERM`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShutdownSignal::CtrlC => "Ctrl-C",
            ShutdownSignal::Terminate => "SIGTERM",
        })
    }
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM, with the one that came. A signal that
/// cannot be listened for is logged as an error and never comes (the other still
/// can).
pub async fn shutdown_signal() -> ShutdownSignal {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => ShutdownSignal::CtrlC,
        _ = terminate => ShutdownSignal::Terminate,
    }
}
