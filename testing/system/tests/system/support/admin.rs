//! The admin commands as child processes ([`run`], [`Run`]), the standard collection
//! they create ([`create`]: dimension [`P`], [`MIN_REPORTS`]) and the reports the
//! tests feed it ([`submit_reports`]).

use std::io::Read;
use std::process::{ExitStatus, Stdio};

use ldpcov_client::AggregatorClient;
use serde_json::Value;

use super::daemon::{COMMAND_TIMEOUT, command, strip_ansi, wait_timeout};

pub(crate) const P: usize = 4;
pub(crate) const MIN_REPORTS: u64 = 50;
pub(crate) const REPORTS: u64 = 60;

/// What one admin command did.
pub(crate) struct Run {
    pub(crate) args: Vec<String>,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn describe(&self) -> String {
        format!(
            "`ldpcov-aggregator {}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.status,
            self.stdout,
            self.stderr
        )
    }

    /// Asserts success and parses stdout as JSON.
    pub(crate) fn json(&self) -> Value {
        assert!(self.status.success(), "{}", self.describe());
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.describe()))
    }

    /// Asserts a clean failure: exit code 1, exactly one non-empty stderr line
    /// containing `needle`, no panic, nothing on stdout. Returns the line.
    pub(crate) fn fails_with(&self, needle: &str) -> String {
        assert_eq!(self.status.code(), Some(1), "{}", self.describe());
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one stderr line: {}",
            self.describe()
        );
        assert!(
            lines[0].contains(needle),
            "expected {needle:?}: {}",
            self.describe()
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.describe());
        assert!(self.stdout.trim().is_empty(), "{}", self.describe());
        lines[0].to_string()
    }
}

/// Runs the binary with `args` and extra environment `envs`, bounded in time.
pub(crate) fn run_with_env(args: &[&str], envs: &[(&str, &str)]) -> Run {
    let mut cmd = command();
    cmd.args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("cannot spawn ldpcov-aggregator");
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = match wait_timeout(&mut child, COMMAND_TIMEOUT) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`ldpcov-aggregator {}` did not finish within {COMMAND_TIMEOUT:?}; stderr:\n{}",
                args.join(" "),
                err_thread.join().unwrap_or_default()
            );
        }
    };
    Run {
        args: args.iter().map(|s| s.to_string()).collect(),
        status,
        stdout: out_thread.join().unwrap_or_default(),
        stderr: strip_ansi(&err_thread.join().unwrap_or_default()),
    }
}

pub(crate) fn run(args: &[&str]) -> Run {
    run_with_env(args, &[])
}

pub(crate) fn create(server: &str, id: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "create",
        "--server",
        server,
        "--id",
        id,
        "--dim",
        "4",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "50",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// `create` with the standard spec except `flag` set to `value`.
pub(crate) fn create_with(server: &str, id: &str, flag: &str, value: &str) -> Run {
    let mut args: Vec<String> = ["create", "--server", server, "--id", id]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (f, v) in [
        ("--dim", "4"),
        ("--epsilon", "1"),
        ("--delta", "1e-6"),
        ("--clip-radius", "2"),
        ("--min-reports", "50"),
    ] {
        // `--flag=value`, so that negative values are not taken for flags.
        args.push(format!("{f}={}", if f == flag { value } else { v }));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

pub(crate) fn status(server: &str, id: &str) -> Run {
    run(&["status", "--server", server, "--id", id])
}

pub(crate) fn estimate(server: &str, id: &str, extra: &[&str]) -> Run {
    let mut args = vec!["estimate", "--server", server, "--id", id];
    args.extend_from_slice(extra);
    run(&args)
}

/// Submits `n` reports of deterministic vectors with the client library.
pub(crate) fn submit_reports(url: &str, id: &str, n: u64) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(url)
            .await
            .unwrap_or_else(|e| panic!("client cannot connect to {url}: {e}"));
        let collection = client
            .collection(id)
            .await
            .unwrap_or_else(|e| panic!("client cannot fetch {id}: {e}"));
        assert_eq!(collection.dim(), P);
        let reports: Vec<_> = (0..n)
            .map(|i| {
                let t = i as f64 / n as f64;
                let x = [1.0 - t, 0.5 * (t - 0.5), -0.25 + t, 0.1];
                client
                    .prepare_report(&collection, &x)
                    .unwrap_or_else(|e| panic!("cannot build report {i}: {e}"))
            })
            .collect();
        let response = client
            .submit_stream(reports)
            .await
            .unwrap_or_else(|e| panic!("cannot submit reports: {e}"));
        assert_eq!(response.accepted, n);
        assert_eq!(response.duplicates, 0);
    });
}
