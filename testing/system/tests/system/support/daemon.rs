//! A daemon for the tests: `ldpcov-aggregator serve` in a child process with a clean
//! environment, its address read from its log ([`Daemon`]), killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_system-aggregator");

/// Longest a daemon may take to announce its address.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest one admin command may run.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a daemon may take to exit after SIGTERM.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Every environment variable the binary reads, removed from the children's
/// environment so that the tests see only what they set themselves.
pub(crate) const LDPCOV_VARS: &[&str] = &[
    "LDPCOV_LOG",
    "LDPCOV_LISTEN",
    "LDPCOV_MAX_DIM",
    "LDPCOV_SERVER",
    "LDPCOV_COLLECTION",
    "LDPCOV_DIM",
    "LDPCOV_EPSILON",
    "LDPCOV_DELTA",
    "LDPCOV_CLIP_RADIUS",
    "LDPCOV_MIN_REPORTS",
    "LDPCOV_ENCODING",
    "LDPCOV_THRESHOLD",
    "LDPCOV_GAMMA",
    "LDPCOV_C",
    "LDPCOV_THRESHOLD_DIAGONAL",
    "LDPCOV_NO_PSD",
    "LDPCOV_FORMAT",
    "LDPCOV_OUT",
    "LDPCOV_NAMES",
    "LDPCOV_NAMES_FROM",
    "LDPCOV_WHAT",
    "LDPCOV_ADMIN_TOKEN",
    "LDPCOV_ADMIN_TOKEN_FILE",
    "LDPCOV_SUBMIT_TOKENS",
    "LDPCOV_SUBMIT_TOKEN_FILE",
    "LDPCOV_TLS_CERT",
    "LDPCOV_TLS_KEY",
    "LDPCOV_MAX_CONCURRENT_STREAMS",
    "LDPCOV_MAX_CONCURRENT_REQUESTS",
    "LDPCOV_REQUEST_TIMEOUT_SECS",
    "LDPCOV_MAX_CALLS_PER_CONNECTION",
    "LDPCOV_HANDSHAKE_TIMEOUT_SECS",
    "LDPCOV_IDLE_TIMEOUT_SECS",
    "LDPCOV_KEEPALIVE_INTERVAL_SECS",
    "LDPCOV_KEEPALIVE_TIMEOUT_SECS",
    "LDPCOV_INIT_EMPTY",
    "LDPCOV_MAX_CONCURRENT_ESTIMATES",
    "LDPCOV_TOKEN",
    "LDPCOV_TOKEN_FILE",
    "LDPCOV_CA_CERT",
    "LDPCOV_DATA_DIR",
    "LDPCOV_MEMORY",
    "LDPCOV_STORE",
    "LDPCOV_PG_POOL_SIZE",
    "LDPCOV_METRICS_LISTEN",
    "LDPCOV_FAULT_PANIC_AT_COMMIT",
    "LDPCOV_FOLD_INTERVAL_MS",
    "LDPCOV_FOLD_MIB",
    "LDPCOV_FAULT_FOLD_HOLD_MS",
];

pub(crate) fn command() -> Command {
    let mut cmd = Command::new(BIN);
    for var in LDPCOV_VARS {
        cmd.env_remove(var);
    }
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Removes ANSI escape sequences (colours of the tracing output).
pub(crate) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A running `ldpcov-aggregator serve`, killed when dropped.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// Everything the daemon wrote to stderr so far (ANSI stripped).
    pub(crate) log: Arc<Mutex<String>>,
    pub(crate) reader: Option<JoinHandle<()>>,
}

impl Daemon {
    pub(crate) fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Starts `serve --memory` with `extra` flags (tokens, TLS, limits).
    pub(crate) fn start_with(extra: &[&str]) -> Daemon {
        Daemon::serve(&[&["--memory"], extra].concat())
    }

    /// Starts `serve` with `flags` (which choose the store).
    pub(crate) fn serve(flags: &[&str]) -> Daemon {
        Daemon::serve_with_env(flags, &[])
    }

    /// Starts `serve` with `flags` and the environment variables `envs`.
    pub(crate) fn serve_with_env(flags: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let mut child = command()
            .args(["serve", "--listen", "127.0.0.1:0", "--log", "info"])
            .args(flags)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot spawn the aggregator daemon");
        let stderr = child.stderr.take().expect("daemon stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let line = strip_ansi(&line);
                    if line.contains("ldpcov aggregator listening")
                        && let Some(addr) = line
                            .split_whitespace()
                            .find_map(|field| field.strip_prefix("addr="))
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(addr.to_string());
                    }
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            })
        };
        let mut daemon = Daemon {
            child,
            url: String::new(),
            log,
            reader: Some(reader),
        };
        match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(addr) => daemon.url = format!("http://{addr}"),
            Err(e) => {
                let _ = daemon.child.kill();
                let _ = daemon.child.wait();
                panic!(
                    "daemon did not announce its address ({e}); stderr:\n{}",
                    daemon.log()
                );
            }
        }
        daemon
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    #[cfg(unix)]
    /// Sends SIGTERM and waits (bounded) for the daemon to exit; returns its status
    /// and its complete stderr.
    pub(crate) fn terminate(&mut self) -> (ExitStatus, String) {
        // kill(1) rather than kill(2): the workspace forbids unsafe code. The child has
        // not been reaped yet, so its pid is still ours.
        let sent = Command::new("kill")
            .args(["-s", "TERM"])
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill(1)");
        assert!(sent.success(), "kill -s TERM failed: {sent}");
        let status = wait_timeout(&mut self.child, SHUTDOWN_TIMEOUT);
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "daemon still running {SHUTDOWN_TIMEOUT:?} after SIGTERM; stderr:\n{}",
                self.log()
            );
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.log())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Polls `child` until it exits or `limit` passes.
pub(crate) fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
