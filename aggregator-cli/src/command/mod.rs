//! The `ldpcov-aggregator` command line: the aggregator daemon (`serve`) and the admin
//! commands that talk to a running daemon (`create`, `status`, `estimate`, `close`,
//! `delete`), `compact` on a stopped daemon's data directory, and `plan`, which needs
//! no daemon. The binary's `main` is [`main`]; the system tests' helper binary runs the
//! same function, so the tests drive exactly this code.
//!
//! Every flag can also be set by an environment variable (shown in `--help`).
//!
//! Each subcommand is a module owning its flags (`Options`) and its `run`; `admin`
//! holds what the admin commands share (connection, TLS, token, JSON output); the
//! flags both daemons declare are `ldpcov-serve`'s (`DaemonCommandLine`,
//! `ServeFlags`) under the aggregator's environment variables (`Aggregator`). This
//! module only parses the command line, sets up logging and the runtime, and
//! dispatches.

mod admin;
mod close;
mod compact;
mod create;
mod delete;
mod estimate;
mod plan;
mod serve;
mod status;

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use ldpcov_serve::{DaemonCommandLine, DaemonFlags};

/// The aggregator's environment variables (`LDPCOV_…`) and help texts of the flags it
/// shares with the relay.
pub(crate) struct Aggregator;

impl DaemonFlags for Aggregator {
    const BINARY: &'static str = "ldpcov-aggregator";
    const ABOUT: &'static str = "ldpcov aggregator daemon and admin CLI";
    const ENV_PREFIX: &'static str = "LDPCOV";
    const TLS_CERT_HELP: &'static str = "PEM certificate chain: serve TLS (needs --tls-key)";
    const GRPC_WEB_HELP: &'static str = "Also answer gRPC-Web (for browsers; HTTP/1.1 is accepted on the same port), with the same tokens and limits as native gRPC";
    const GRPC_WEB_ORIGIN_HELP: &'static str = "An origin whose pages may call the daemon over gRPC-Web (`https://app.example.com`; repeat or comma-separate for several). Without one, no cross-origin page may";
    const METRICS_LISTEN_HELP: &'static str = "Serve Prometheus metrics over HTTP on this address (`GET /metrics`): reports accepted, duplicate and rejected per collection, bytes received, submit, commit and estimate durations, collections. Off by default";
}

/// The command line.
type Cli = DaemonCommandLine<Aggregator, Command>;

/// The subcommands.
#[derive(Subcommand)]
enum Command {
    /// Run the aggregator daemon until SIGTERM or Ctrl-C.
    Serve(serve::Options),
    /// Create a collection on a running daemon and print its public parameters.
    Create(create::Options),
    /// Print a collection's report count and parameters as JSON.
    Status(status::Options),
    /// Close a collection: it takes no more reports (status and estimates still work).
    /// Prints its status as JSON.
    Close(close::Options),
    /// Fetch the estimate and write it as JSON, CSV or NPY.
    Estimate(estimate::Options),
    /// Delete a collection for good: its spec, sums and seen report ids (needs --yes).
    /// Prints how many reports it had counted as JSON.
    Delete(delete::Options),
    /// Predict, before collecting, each local mechanism's error of the raw average
    /// and bytes per report at (p, ε, δ, R, users), or the users a target error needs.
    /// Prints JSON; contacts no daemon.
    Plan(plan::Options),
    /// Shrink the database file of a stopped daemon (redb reuses freed pages but never
    /// shrinks the file by itself). Prints the sizes before and after as JSON.
    Compact(compact::Options),
}

impl Command {
    async fn run(self) -> Result<()> {
        match self {
            Command::Serve(o) => o.run().await,
            Command::Create(o) => o.run().await,
            Command::Status(o) => status::run(o).await,
            Command::Close(o) => close::run(o).await,
            Command::Estimate(o) => o.run().await,
            Command::Delete(o) => o.run().await,
            Command::Compact(o) => o.run(),
            Command::Plan(o) => o.run(),
        }
    }
}

/// Runs the `ldpcov-aggregator` command line on the process's arguments and
/// environment: parses them (exit 2 with clap's message when they do not parse), sets
/// up logging, runs the subcommand, and returns exit 1 with a one-line reason on error.
/// A closed standard output (`status | head`) ends a command quietly, with success:
/// output is written with `write!` (never `println!`, which panics), and its
/// `BrokenPipe` error stops here.
pub fn main() -> ExitCode {
    ldpcov_serve::process::main(|cli: Cli| {
        quiet_broken_pipe(ldpcov_serve::process::block_on(cli.command.run()))
    })
}

/// `result`, with an error caused by a closed standard output (`BrokenPipe`) turned
/// into success: the reader has all it wanted.
fn quiet_broken_pipe(result: Result<()>) -> Result<()> {
    match result {
        Err(e)
            if e.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command's help, long and short, with its subcommands' (depth first).
    fn helps(command: &mut clap::Command, out: &mut Vec<(String, String)>) {
        let name = command.get_name().to_string();
        out.push((name.clone(), command.render_long_help().to_string()));
        out.push((name, command.render_help().to_string()));
        for sub in command.get_subcommands_mut() {
            helps(sub, out);
        }
    }

    /// clap shows doc comments as help: rustdoc link markup (`[a](b)`) must not reach
    /// it.
    #[test]
    fn no_help_shows_rustdoc_links() {
        let mut cli = Cli::command();
        cli.build();
        let mut all = Vec::new();
        helps(&mut cli, &mut all);
        assert!(all.len() > 8, "{} helps", all.len());
        for (name, help) in all {
            assert!(
                !help.contains("]("),
                "`{name} --help` shows link markup:\n{help}"
            );
        }
    }

    #[test]
    fn a_closed_stdout_is_a_quiet_success() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let wrapped = anyhow::Error::from(pipe).context("writing the estimate");
        assert!(quiet_broken_pipe(Err(wrapped)).is_ok());
        let other = anyhow::anyhow!("Unavailable: connection refused");
        assert!(quiet_broken_pipe(Err(other)).is_err());
    }
}
