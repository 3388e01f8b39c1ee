//! The `ldpcov-relay` command line: the anonymising relay daemon of shuffled
//! collections (`serve`) and the device-token tool (`issue-device-token`). Every flag
//! can also be set by an environment variable (shown in `--help`); errors are one line
//! and a non-zero exit. The binary's `main` is [`main`]; the system tests' helper
//! binary runs the same function, so the tests drive exactly this code.
//!
//! Each subcommand is a module owning its flags and its `run`; the flags both daemons
//! declare are `ldpcov-serve`'s ([`DaemonCommandLine`],
//! [`ServeFlags`](ldpcov_serve::ServeFlags)) under the relay's environment variables
//! (`Relay`). This module only parses the command line, sets up logging and the
//! runtime, and dispatches.

mod issue;
mod serve;

use std::process::ExitCode;

use clap::Subcommand;
use ldpcov_serve::{DaemonCommandLine, DaemonFlags};

/// The relay's environment variables (`LDPCOV_RELAY_…`) and help texts of the flags
/// it shares with the aggregator.
pub(crate) struct Relay;

impl DaemonFlags for Relay {
    const BINARY: &'static str = "ldpcov-relay";
    const ABOUT: &'static str = "ldpcov anonymising relay for shuffled collections";
    const ENV_PREFIX: &'static str = "LDPCOV_RELAY";
    const TLS_CERT_HELP: &'static str = "PEM certificate chain: serve TLS (needs --tls-key). Required unless --insecure-plaintext: devices' reports must not cross the network linkable to the bytes the relay forwards";
    const GRPC_WEB_HELP: &'static str = "Also answer gRPC-Web (for browser devices; HTTP/1.1 is accepted on the same port), with the same device tokens and limits as native gRPC";
    const GRPC_WEB_ORIGIN_HELP: &'static str = "An origin whose pages may call the relay over gRPC-Web (`https://app.example.com`; repeat or comma-separate for several). Without one, no cross-origin page may. Needs --grpc-web";
    const METRICS_LISTEN_HELP: &'static str =
        "Serve Prometheus metrics over HTTP on this address (`GET /metrics`)";
}

/// The command line.
type Cli = DaemonCommandLine<Relay, Command>;

/// The subcommands.
#[derive(Subcommand)]
enum Command {
    /// Run the relay until SIGTERM or Ctrl-C.
    Serve(Box<serve::ServeArgs>),
    /// Print the device token of a device id (the relay operator's token issuer's job
    /// in production: never the aggregator's operator's, docs/PRIVACY.md §9.1).
    IssueDeviceToken(issue::IssueArgs),
}

/// Runs the `ldpcov-relay` command line on the process's arguments and environment:
/// parses them, sets up logging, runs the subcommand, and returns exit 1 with a
/// one-line reason on error.
pub fn main() -> ExitCode {
    // A panic (the store engine on a damaged file, caught and reported by the store)
    // is one ERROR line, without a backtrace.
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "internal error");
    }));
    ldpcov_serve::process::main(|cli: Cli| match cli.command {
        Command::IssueDeviceToken(args) => args.run(),
        Command::Serve(args) => ldpcov_serve::process::block_on(args.run()),
    })
}
