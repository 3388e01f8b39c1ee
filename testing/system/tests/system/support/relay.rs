//! The relay daemon next to the aggregator's: [`RELAY_BIN`] is this package's
//! `system-relay` binary (the product's `main`), found through `CARGO_BIN_EXE_*` and
//! never built by a test. [`spawn_relay`] starts `serve` at a fixed address with its
//! stderr appended to a log file, as the crash tests need (killed with
//! [`super::crash::kill`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use std::net::SocketAddr;

/// The relay's files: its tokens, the device-token secret, its store and its log.
pub(crate) struct RelayFiles {
    /// The relay's token at the aggregator (also the aggregator's --relay-token-file).
    pub(crate) relay_token: PathBuf,
    /// The device-token secret (64 hex digits).
    pub(crate) device_secret: PathBuf,
    /// The relay's admin token (GetRelayStatus).
    pub(crate) admin_token: PathBuf,
    /// `--data-dir`.
    pub(crate) data: PathBuf,
    /// Where its stderr is appended.
    pub(crate) log: PathBuf,
}

/// The relay under test: this package's `system-relay` binary (exactly
/// `ldpcov-relay`'s `main`), built by the same cargo run as this test.
pub(crate) const RELAY_BIN: &str = env!("CARGO_BIN_EXE_system-relay");

/// A `ldpcov-relay` command with a clean environment (none of its `LDPCOV_RELAY_*`
/// variables, no RUST_LOG).
pub(crate) fn relay_command() -> Command {
    let mut cmd = Command::new(RELAY_BIN);
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|n| n.starts_with("LDPCOV_RELAY_"))
        {
            cmd.env_remove(name);
        }
    }
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Starts the relay's `serve` on `addr`, forwarding to `aggregator` (a URL), checking
/// for due windows and stored batches every 20 ms, with `extra` flags; its stderr is
/// appended to `files.log`.
pub(crate) fn spawn_relay(
    addr: SocketAddr,
    aggregator: &str,
    files: &RelayFiles,
    extra: &[&str],
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&files.log)
        .expect("open the relay log");
    relay_command()
        .args(["--log", "info", "serve", "--listen"])
        .arg(addr.to_string())
        .args(["--aggregator", aggregator, "--relay-token-file"])
        .arg(&files.relay_token)
        .arg("--device-token-secret-file")
        .arg(&files.device_secret)
        .arg("--admin-token-file")
        .arg(&files.admin_token)
        .arg("--data-dir")
        .arg(&files.data)
        .args(["--batch-check-interval-ms", "20"])
        // Tests: devices in plaintext, and the tests' small batches.
        .args(["--insecure-plaintext", "--min-batch-size", "2"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn the relay")
}
