//! The relay daemon next to the aggregator's: `ldpcov-relay` is another package's
//! binary, so `env!("CARGO_BIN_EXE_…")` does not name it here. [`relay_bin`] finds it in
//! the directory of this package's `ldpcov-aggregator` (the same target directory and
//! profile) and builds it there with cargo when it is missing or older than its
//! sources (under `cargo test --workspace` it was built by the same run; under
//! `cargo test -p ldpcov-cli` it may not be). A failed build fails the test, never
//! skips it. [`spawn_relay`] starts `serve` at a fixed address with its stderr appended
//! to a log file, as the crash tests need (killed with [`super::crash::kill`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

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

/// The `ldpcov-relay` binary of this build, built first if needed (once per test
/// process).
pub(crate) fn relay_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(locate_or_build).clone()
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the cli crate is inside the workspace")
}

fn locate_or_build() -> PathBuf {
    let dir = Path::new(super::daemon::BIN)
        .parent()
        .expect("the aggregator binary's directory");
    let bin = dir.join(format!("ldpcov-relay{}", std::env::consts::EXE_SUFFIX));
    let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
    let sources = newest_source();
    if built.is_some_and(|b| b >= sources) {
        return bin;
    }
    // <target>/<profile dir>/ or <target>/<triple>/<profile dir>/ (CACHEDIR.TAG marks
    // cargo's target directory).
    let profile_dir = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile directory name");
    let profile = if profile_dir == "debug" {
        "dev"
    } else {
        profile_dir
    };
    let up = dir.parent().expect("target directory");
    let (target_dir, triple) = if up.join("CACHEDIR.TAG").exists() {
        (up, None)
    } else {
        (
            up.parent().expect("target directory"),
            up.file_name().and_then(|n| n.to_str()),
        )
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        .args(["build", "-p", "ldpcov-relay", "--bin", "ldpcov-relay"])
        .args(["--profile", profile, "--target-dir"])
        .arg(target_dir);
    if let Some(triple) = triple {
        cmd.args(["--target", triple]);
    }
    eprintln!("building the relay binary: {cmd:?}");
    let status = cmd.status().expect("run cargo to build ldpcov-relay");
    assert!(
        status.success(),
        "cannot build ldpcov-relay ({status}): {cmd:?}"
    );
    assert!(
        bin.exists(),
        "cargo built ldpcov-relay but not at {}",
        bin.display()
    );
    bin
}

/// The newest modification time among what the relay binary is built from: its crate,
/// the proto and serve crates it depends on (the relay depends on no other crate of
/// the workspace), the lock file and the workspace manifest.
fn newest_source() -> SystemTime {
    fn walk(path: &Path, newest: &mut SystemTime) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if meta.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "tests")
            {
                return;
            }
            if let Ok(entries) = std::fs::read_dir(path) {
                for entry in entries.flatten() {
                    walk(&entry.path(), newest);
                }
            }
        } else if let Ok(modified) = meta.modified() {
            *newest = (*newest).max(modified);
        }
    }
    let mut newest = SystemTime::UNIX_EPOCH;
    for part in ["relay", "serve", "proto", "Cargo.lock", "Cargo.toml"] {
        walk(&workspace().join(part), &mut newest);
    }
    newest
}

/// A `ldpcov-relay` command with a clean environment (none of its `LDPCOV_RELAY_*`
/// variables, no RUST_LOG).
pub(crate) fn relay_command() -> Command {
    let mut cmd = Command::new(relay_bin());
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
