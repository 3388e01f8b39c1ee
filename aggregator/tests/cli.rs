//! End-to-end tests of the `ldpcov-aggregator` binary: a real daemon (`serve`) in a
//! child process, driven by the admin commands (`create`, `status`, `estimate`) as
//! further child processes and fed reports by `ldpcov_client::AggregatorClient`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ldpcov_client::AggregatorClient;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ldpcov-aggregator");

/// Longest a daemon may take to announce its address.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest one admin command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a daemon may take to exit after SIGTERM.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

const P: usize = 4;
const MIN_REPORTS: u64 = 50;
const REPORTS: u64 = 60;

/// Every environment variable the binary reads, removed from the children's
/// environment so that the tests see only what they set themselves.
const LDPCOV_VARS: &[&str] = &[
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
    "LDPCOV_TOKEN",
    "LDPCOV_TOKEN_FILE",
    "LDPCOV_CA_CERT",
    "LDPCOV_DATA_DIR",
    "LDPCOV_MEMORY",
    "LDPCOV_STORE",
    "LDPCOV_PG_POOL_SIZE",
    "LDPCOV_METRICS_LISTEN",
];

fn command() -> Command {
    let mut cmd = Command::new(BIN);
    for var in LDPCOV_VARS {
        cmd.env_remove(var);
    }
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Removes ANSI escape sequences (colours of the tracing output).
fn strip_ansi(line: &str) -> String {
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
struct Daemon {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    url: String,
    /// Everything the daemon wrote to stderr so far (ANSI stripped).
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Daemon {
    fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Starts `serve --memory` with `extra` flags (tokens, TLS, limits).
    fn start_with(extra: &[&str]) -> Daemon {
        Daemon::serve(&[&["--memory"], extra].concat())
    }

    /// Starts `serve` with `flags` (which choose the store).
    fn serve(flags: &[&str]) -> Daemon {
        let mut child = command()
            .args(["serve", "--listen", "127.0.0.1:0", "--log", "info"])
            .args(flags)
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

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    #[cfg(unix)]
    /// Sends SIGTERM and waits (bounded) for the daemon to exit; returns its status
    /// and its complete stderr.
    fn terminate(&mut self) -> (ExitStatus, String) {
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
fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
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

/// What one admin command did.
struct Run {
    args: Vec<String>,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn describe(&self) -> String {
        format!(
            "`ldpcov-aggregator {}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.status,
            self.stdout,
            self.stderr
        )
    }

    /// Asserts success and parses stdout as JSON.
    fn json(&self) -> Value {
        assert!(self.status.success(), "{}", self.describe());
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.describe()))
    }

    /// Asserts a clean failure: exit code 1, exactly one non-empty stderr line
    /// containing `needle`, no panic, nothing on stdout. Returns the line.
    fn fails_with(&self, needle: &str) -> String {
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
fn run_with_env(args: &[&str], envs: &[(&str, &str)]) -> Run {
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

fn run(args: &[&str]) -> Run {
    run_with_env(args, &[])
}

fn create(server: &str, id: &str, extra: &[&str]) -> Run {
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
fn create_with(server: &str, id: &str, flag: &str, value: &str) -> Run {
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

fn status(server: &str, id: &str) -> Run {
    run(&["status", "--server", server, "--id", id])
}

fn estimate(server: &str, id: &str, extra: &[&str]) -> Run {
    let mut args = vec!["estimate", "--server", server, "--id", id];
    args.extend_from_slice(extra);
    run(&args)
}

/// Submits `n` reports of deterministic vectors with the client library.
fn submit_reports(url: &str, id: &str, n: u64) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(url)
            .await
            .unwrap_or_else(|e| panic!("client cannot connect to {url}: {e}"));
        let collection = client
            .collection(id)
            .await
            .unwrap_or_else(|e| panic!("client cannot fetch {id}: {e}"));
        assert_eq!(collection.dim, P);
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

/// The `p × p` matrix of an `estimate --format json` document, parsed from the JSON
/// *text* with `str::parse::<f64>` (correctly rounded, so exact for the shortest
/// round-trip representation serde_json writes) rather than serde_json's
/// best-effort float parser.
fn json_matrix_exact(text: &str) -> Vec<f64> {
    let start = text.find("\"matrix\"").expect("JSON has a matrix");
    let rest = &text[start + "\"matrix\"".len()..];
    let open = rest.find('[').expect("matrix is an array");
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.expect("matrix array is closed");
    rest[open..close]
        .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<f64>()
                .unwrap_or_else(|e| panic!("bad number {t:?}: {e}"))
        })
        .collect()
}

fn assert_symmetric(m: &[f64], what: &str) {
    assert_eq!(m.len(), P * P, "{what}: {m:?}");
    for i in 0..P {
        for j in 0..P {
            assert!(m[i * P + j].is_finite(), "{what}: {m:?}");
            assert_eq!(m[i * P + j], m[j * P + i], "{what} not symmetric: {m:?}");
        }
    }
}

/// Checks the estimate JSON document and returns its matrix (row-major, exact).
fn check_estimate_json(run: &Run) -> (Value, Vec<f64>) {
    let doc = run.json();
    assert_eq!(doc["dim"], P as u64, "{}", run.describe());
    assert_eq!(doc["reports"], REPORTS, "{}", run.describe());
    let rows = doc["matrix"].as_array().expect("matrix array");
    assert_eq!(rows.len(), P, "{}", run.describe());
    let approx: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            let r = r.as_array().expect("matrix row array");
            assert_eq!(r.len(), P);
            r.iter()
                .map(|v| v.as_f64().expect("number"))
                .collect::<Vec<_>>()
        })
        .collect();
    let exact = json_matrix_exact(&run.stdout);
    assert_eq!(exact.len(), P * P, "{}", run.describe());
    for (a, e) in approx.iter().zip(&exact) {
        assert!(
            (a - e).abs() <= 1e-12 * e.abs().max(1.0),
            "text parse {e} vs serde {a}"
        );
    }
    assert_symmetric(&exact, "json matrix");
    (doc, exact)
}

/// Parses an NPY v1 file holding a `p × p` little-endian float64 C-order array.
fn read_npy(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(bytes.len() > 10, "npy too short: {bytes:?}");
    assert_eq!(&bytes[..6], b"\x93NUMPY", "npy magic");
    assert_eq!(bytes[6], 1, "npy major version");
    assert_eq!(bytes[7], 0, "npy minor version");
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let data_start = 10 + header_len;
    assert!(bytes.len() >= data_start, "npy header overruns the file");
    assert_eq!(data_start % 16, 0, "npy data not aligned");
    let header = std::str::from_utf8(&bytes[10..data_start]).expect("npy header is ASCII");
    assert!(header.ends_with('\n'), "npy header: {header:?}");
    let compact: String = header.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(compact.contains("'descr':'<f8'"), "npy header: {header:?}");
    assert!(
        compact.contains("'fortran_order':False"),
        "npy header: {header:?}"
    );
    // A Python tuple: `(4, 4)` or, as npyz writes it, `(4, 4, )`.
    let shape_start = compact.find("'shape':(").expect("npy header has a shape") + 9;
    let shape_len = compact[shape_start..]
        .find(')')
        .expect("shape tuple closed");
    let shape: Vec<usize> = compact[shape_start..shape_start + shape_len]
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("shape entry is an integer"))
        .collect();
    assert_eq!(shape, [P, P], "npy header: {header:?}");
    let data = &bytes[data_start..];
    assert_eq!(data.len(), 8 * P * P, "npy data length");
    data.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn read_csv(path: &Path) -> Vec<f64> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), P, "csv:\n{text}");
    lines
        .iter()
        .flat_map(|line| {
            let fields: Vec<f64> = line
                .split(',')
                .map(|f| {
                    f.trim()
                        .parse::<f64>()
                        .unwrap_or_else(|e| panic!("csv field {f:?}: {e}\n{text}"))
                })
                .collect();
            assert_eq!(fields.len(), P, "csv:\n{text}");
            fields
        })
        .collect()
}

#[test]
fn create_status_submit_and_estimate_in_every_format() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let id = "cli-e2e";

    // create: public parameters as JSON.
    let params = create(url, id, &[]).json();
    assert_eq!(params["collection_id"], id);
    assert_eq!(params["dim"], 4);
    assert_eq!(params["epsilon"], 1.0);
    assert_eq!(params["delta"], 1e-6);
    assert_eq!(params["clip_radius"], 2.0);
    assert_eq!(params["min_reports"], MIN_REPORTS);
    assert_eq!(params["encoding"], "ENCODING_I32_LE");
    // The default estimates mean and covariance: p + d = 4 + 10 entries per report.
    assert_eq!(params["moments"], "MOMENTS_MEAN_AND_COVARIANCE");
    assert_eq!(params["entries"], 14);
    assert_eq!(params["mean_entries"], 4);
    assert_eq!(params["mean_weight"], 0.5);
    let sigma = params["sigma"].as_f64().expect("sigma is a number");
    assert!(sigma.is_finite() && sigma > 0.0, "{params}");
    let grid_bits = params["grid_bits"].as_u64().expect("grid_bits is a number");
    assert!((1..=24).contains(&grid_bits), "{params}");
    assert!(params["sensitivity"].as_f64().expect("sensitivity") > 1.4);
    assert!(params["rho"].as_f64().expect("rho") > 0.0);
    assert!(params["max_abs_grid_value"].as_i64().expect("bound") > 0);
    assert_eq!(params["wire_step"], 1);
    // Variables are unordered unless declared; `--ordered-variables` declares them,
    // and `status` shows it.
    assert_eq!(params["ordered_variables"], false, "{params}");
    let ordered = create(url, "cli-ordered", &["--ordered-variables"]).json();
    assert_eq!(ordered["ordered_variables"], true, "{ordered}");
    let st = status(url, "cli-ordered").json();
    assert_eq!(st["params"]["ordered_variables"], true, "{st}");

    // Same id again, other parameters: refused, one line.
    let line = create_with(url, id, "--epsilon", "2").fails_with("AlreadyExists");
    assert!(line.starts_with("error:"), "{line}");
    // Same id, same parameters: an idempotent no-op returning the same parameters.
    assert_eq!(create(url, id, &[]).json(), params);

    // status before any report.
    let st = status(url, id).json();
    assert_eq!(st["reports"], 0, "{st}");
    assert_eq!(st["releasable"], false, "{st}");
    assert_eq!(st["params"]["sigma"], params["sigma"], "{st}");
    assert_eq!(st["params"]["min_reports"], MIN_REPORTS, "{st}");

    // estimate below the minimum.
    estimate(url, id, &[]).fails_with("FailedPrecondition");

    // Unknown collection.
    status(url, "no-such-collection").fails_with("NotFound");

    submit_reports(url, id, REPORTS);

    let st = status(url, id).json();
    assert_eq!(st["reports"], REPORTS, "{st}");
    assert_eq!(st["releasable"], true, "{st}");

    // JSON on stdout (default rule: cross-validation).
    let default_run = estimate(url, id, &["--format", "json"]);
    let (doc, json_m) = check_estimate_json(&default_run);
    assert_eq!(doc["collection_id"], id);
    assert_eq!(doc["sigma"], params["sigma"]);
    assert_eq!(doc["psd_projected"], true, "{doc}");
    assert!(
        doc["threshold"].as_f64().expect("threshold") >= 0.0,
        "{doc}"
    );
    let rule = doc["threshold_rule"].as_str().expect("rule");
    assert!(rule.starts_with("cv("), "{doc}");
    assert!(rule.contains("threshold=simplest within 1 SE"), "{doc}");
    // --smallest-mean-threshold reaches the server's cross-validation.
    let (smallest, _) = check_estimate_json(&estimate(url, id, &["--smallest-mean-threshold"]));
    let rule = smallest["threshold_rule"].as_str().expect("rule");
    assert!(
        rule.starts_with("cv(") && rule.contains("threshold=smallest mean"),
        "{smallest}"
    );
    // --unordered: cross-validation without banding and Toeplitz candidates.
    let (unordered, _) = check_estimate_json(&estimate(url, id, &["--unordered"]));
    let rule = unordered["threshold_rule"].as_str().expect("rule");
    assert!(rule.starts_with("cv(") && rule.contains('→'), "{unordered}");
    assert!(
        !rule.contains("toeplitz") && !rule.contains("banded"),
        "{unordered}"
    );
    assert!(doc["entry_noise_sd"].as_f64().expect("sd") > 0.0, "{doc}");
    assert!(!doc["threshold_rule"].as_str().expect("rule").is_empty());

    let dir = tempfile::tempdir().expect("tempdir");

    // CSV and NPY to a file (a header + 128 data bytes): the same matrix, exactly.
    let written = |format: &str| {
        let path = dir.path().join(format!("estimate.{format}"));
        let path_str = path.to_str().expect("utf-8 path");
        let r = estimate(url, id, &["--format", format, "--out", path_str]);
        assert!(r.status.success(), "{}", r.describe());
        assert!(r.stdout.is_empty(), "{}", r.describe());
        assert!(
            r.stderr.contains(&format!("wrote {format}")),
            "{}",
            r.describe()
        );
        path
    };
    let csv_path = written("csv");
    let csv_path_str = csv_path.to_str().expect("utf-8 path");
    let csv_m = read_csv(&csv_path);
    assert_eq!(csv_m, json_m, "csv and json matrices differ");
    let npy_m = read_npy(&written("npy"));
    assert_eq!(npy_m, json_m, "npy and json matrices differ");

    // NPY needs a file.
    let line = estimate(url, id, &["--format", "npy"]).fails_with("--out");
    assert!(line.contains("npy"), "{line}");

    // Explicit universal threshold with c = 4: λ = 4·σ_n·√(ln p) with γ = 0.
    let r = estimate(url, id, &["--threshold", "universal", "--c", "4"]);
    let (doc4, m4) = check_estimate_json(&r);
    let sd = doc4["entry_noise_sd"].as_f64().expect("entry_noise_sd");
    let lambda = doc4["threshold"].as_f64().expect("threshold");
    let want = 4.0 * sd * 4f64.ln().sqrt();
    assert!((lambda - want).abs() <= 1e-12 * want, "{doc4}");
    assert_eq!(m4.len(), json_m.len());

    // No threshold, no PSD projection: the raw average.
    let r = estimate(url, id, &["--threshold", "none", "--no-psd"]);
    let (raw, raw_m) = check_estimate_json(&r);
    assert_eq!(raw["threshold"], 0.0, "{raw}");
    assert_eq!(raw["psd_projected"], false, "{raw}");
    assert_eq!(raw["clamped_eigenvalues"], 0, "{raw}");
    assert_eq!(raw["surviving_entries"], 10, "{raw}");
    assert_symmetric(&raw_m, "raw matrix");

    // A bad threshold parameter is the server's InvalidArgument, one line.
    estimate(url, id, &["--threshold", "universal", "--c=-1"]).fails_with("InvalidArgument");

    // Bulk shrinkage with the grids given on the command line: the rule reports them
    // and its choice; a τ above 2 is refused by the server.
    let bulk = [
        "--threshold",
        "bulk-shrink",
        "--alphas",
        "0,0.5",
        "--taus",
        "1,2",
    ];
    let (doc, _) = check_estimate_json(&estimate(url, id, &bulk));
    let rule = doc["threshold_rule"].as_str().expect("rule");
    assert!(
        rule.starts_with("bulk-shrink(alphas=[0.0, 0.5], taus=[1.0, 2.0])")
            && rule.contains(", tau "),
        "{doc}"
    );
    estimate(url, id, &["--threshold", "bulk-shrink", "--taus", "2.5"])
        .fails_with("InvalidArgument");

    // Environment variables instead of flags.
    let r = run_with_env(
        &["status"],
        &[("LDPCOV_SERVER", url), ("LDPCOV_COLLECTION", id)],
    );
    let st = r.json();
    assert_eq!(st["reports"], REPORTS, "{st}");
    assert_eq!(st["params"]["collection_id"], id, "{st}");
    let r = run_with_env(
        &["estimate"],
        &[
            ("LDPCOV_SERVER", url),
            ("LDPCOV_COLLECTION", id),
            ("LDPCOV_FORMAT", "csv"),
            ("LDPCOV_OUT", csv_path_str),
            ("LDPCOV_THRESHOLD", "none"),
            ("LDPCOV_NO_PSD", "true"),
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert_eq!(read_csv(&csv_path), raw_m, "env-configured csv differs");

    assert!(
        !daemon.log().contains("panicked"),
        "daemon stderr:\n{}",
        daemon.log()
    );
}

#[test]
fn bad_specs_are_refused_and_create_nothing() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    for (i, (flag, value)) in [
        ("--epsilon", "0"),
        ("--epsilon", "-1"),
        ("--dim", "0"),
        ("--delta", "1"),
        ("--delta", "0"),
        ("--clip-radius", "0"),
        ("--min-reports", "0"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bad-{i}");
        create_with(url, &id, flag, value).fails_with("InvalidArgument");
        status(url, &id).fails_with("NotFound");
    }
    // A bad id.
    create(url, "bad id!", &[]).fails_with("InvalidArgument");
    // The daemon is still healthy.
    let params = create(url, "good", &[]).json();
    assert_eq!(params["collection_id"], "good");
}

/// `create --moments/--centre/--names` (inline and from files) reach the spec and come
/// back in `create` and `status`; bad values are one-line errors that create nothing.
#[test]
fn create_takes_moments_centre_and_names() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let p = create(
        url,
        "joint-c",
        &["--centre", "-1.5,2,0,1e3", "--names", "a,b,c,d"],
    )
    .json();
    assert_eq!(p["moments"], "MOMENTS_MEAN_AND_COVARIANCE");
    assert_eq!(p["centre"], serde_json::json!([-1.5, 2.0, 0.0, 1000.0]));
    assert_eq!(p["variable_names"], serde_json::json!(["a", "b", "c", "d"]));
    let st = status(url, "joint-c").json();
    assert_eq!(st["params"], p, "{st}");
    let p = create(url, "second", &["--moments", "second-moment"]).json();
    assert_eq!(p["moments"], "MOMENTS_SECOND_MOMENT");
    assert_eq!(
        (p["entries"].as_u64(), p["mean_entries"].as_u64()),
        (Some(10), Some(0))
    );
    // Files: numbers separated by commas, spaces or newlines; one name per line.
    let dir = tempfile::tempdir().expect("tempdir");
    let centre = dir.path().join("centre.txt");
    std::fs::write(&centre, "1, 2\n3 4\n").expect("write");
    let names = dir.path().join("names.txt");
    std::fs::write(&names, "x, with a comma\ny\nz\nw\n").expect("write");
    let (c, n) = (
        centre.to_str().expect("utf-8"),
        names.to_str().expect("utf-8"),
    );
    let p = create(url, "files", &["--centre-file", c, "--names-file", n]).json();
    assert_eq!(p["centre"], serde_json::json!([1.0, 2.0, 3.0, 4.0]));
    assert_eq!(p["variable_names"][0], "x, with a comma");
    // Refusals: the server's precise message, nothing created.
    for (i, (extra, needle)) in [
        (vec!["--centre", "1,2,3"], "centre has 3 values"),
        (
            vec!["--centre", "1,2,NaN,4"],
            "centre[2] = NaN must be a finite number",
        ),
        (vec!["--names", "a,b,a,c"], "appears twice"),
        (vec!["--names", "a,b,c"], "3 variable names given"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bad-joint-{i}");
        let line = create(url, &id, &extra).fails_with("InvalidArgument");
        assert!(line.contains(needle), "{line}");
        status(url, &id).fails_with("NotFound");
    }
    std::fs::write(&centre, "1, 2, x, 4").expect("write");
    let line = create(url, "bad-file", &["--centre-file", c]).fails_with("not a number");
    assert!(line.contains("value 3"), "{line}");
    // An unknown --moments is a usage error of clap's (exit 2, with the choices).
    let r = create(url, "bad-moments", &["--moments", "third"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.describe());
    assert!(r.stderr.contains("mean-and-covariance"), "{}", r.describe());
    status(url, "bad-file").fails_with("NotFound");
}

#[cfg(unix)]
#[test]
fn sigterm_shuts_the_daemon_down_gracefully() {
    let mut daemon = Daemon::start();
    // Make sure it is really serving first.
    let params = create(&daemon.url, "before-shutdown", &[]).json();
    assert_eq!(params["collection_id"], "before-shutdown");
    let (status, log) = daemon.terminate();
    assert!(
        status.success(),
        "daemon exited with {status} after SIGTERM; stderr:\n{log}"
    );
    assert!(log.contains("SIGTERM"), "stderr:\n{log}");
    assert!(log.contains("shut down"), "stderr:\n{log}");
    // No tokens configured: the daemon says so.
    assert!(log.contains("WITHOUT AUTHENTICATION"), "stderr:\n{log}");
    assert!(!log.contains("panicked"), "stderr:\n{log}");
}

#[test]
fn create_without_a_server_fails_with_one_line() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("local addr").port()
    };
    let server = format!("http://127.0.0.1:{port}");
    let line = create(&server, "nobody-home", &[]).fails_with("cannot connect");
    assert!(line.contains(&server), "{line}");
    status(&server, "nobody-home").fails_with("cannot connect");
}

const ADMIN_TOKEN: &str = "cli-admin-secret-0123456789";
const SUBMIT_TOKEN: &str = "cli-submit-secret-0123456789";

#[cfg(unix)]
#[test]
fn tokens_guard_the_admin_commands_and_never_reach_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let admin_file = dir.path().join("admin.token");
    std::fs::write(&admin_file, format!("{ADMIN_TOKEN}\n")).expect("write token");
    let admin_path = admin_file.to_str().expect("utf-8 path");
    let mut daemon = Daemon::start_with(&[
        "--admin-token-file",
        admin_path,
        "--submit-token",
        SUBMIT_TOKEN,
    ]);
    let url = daemon.url.clone();
    let url = url.as_str();

    create(url, "guarded", &[]).fails_with("Unauthenticated");
    create(url, "guarded", &["--token", "wrong-token"]).fails_with("Unauthenticated");
    create(url, "guarded", &["--token", SUBMIT_TOKEN]).fails_with("PermissionDenied");
    let params = create(url, "guarded", &["--token-file", admin_path]).json();
    assert_eq!(params["collection_id"], "guarded");
    // The environment variable works too.
    let with_env = run_with_env(
        &["status", "--server", url, "--id", "guarded"],
        &[("LDPCOV_TOKEN", SUBMIT_TOKEN)],
    );
    assert_eq!(with_env.json()["reports"], 0);
    status(url, "guarded").fails_with("Unauthenticated");
    estimate(url, "guarded", &["--token", SUBMIT_TOKEN]).fails_with("PermissionDenied");

    // close: admin only; afterwards submits fail, status says closed.
    run(&[
        "close",
        "--server",
        url,
        "--id",
        "guarded",
        "--token",
        SUBMIT_TOKEN,
    ])
    .fails_with("PermissionDenied");
    let closed = run(&[
        "close",
        "--server",
        url,
        "--id",
        "guarded",
        "--token",
        ADMIN_TOKEN,
    ])
    .json();
    assert_eq!(closed["closed"], true);
    let st = run(&[
        "status",
        "--server",
        url,
        "--id",
        "guarded",
        "--token",
        ADMIN_TOKEN,
    ])
    .json();
    assert_eq!(st["closed"], true);

    let (exit, log) = daemon.terminate();
    assert!(exit.success(), "{log}");
    assert!(log.contains("access control on"), "{log}");
    assert!(!log.contains("WITHOUT AUTHENTICATION"), "{log}");
    assert!(log.contains("collection closed"), "{log}");
    for secret in [ADMIN_TOKEN, SUBMIT_TOKEN] {
        assert!(!log.contains(secret), "a token reached the log:\n{log}");
    }
}

#[test]
fn submit_tokens_without_an_admin_token_are_refused_at_startup() {
    let run = run(&[
        "serve",
        "--memory",
        "--listen",
        "127.0.0.1:0",
        "--submit-token",
        SUBMIT_TOKEN,
    ]);
    let line = run.fails_with("admin token");
    assert!(!line.contains(SUBMIT_TOKEN), "{line}");
}

#[test]
fn the_cli_talks_tls_with_a_custom_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("rcgen");
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).expect("write cert");
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).expect("write key");
    let (cert_path, key_path) = (
        cert_file.to_str().expect("utf-8"),
        key_file.to_str().expect("utf-8"),
    );
    let daemon = Daemon::start_with(&["--tls-cert", cert_path, "--tls-key", key_path]);
    let port = daemon.url.rsplit(':').next().expect("port");
    let https = format!("https://localhost:{port}");
    let params = create(&https, "over-tls", &["--ca-cert", cert_path]).json();
    assert_eq!(params["collection_id"], "over-tls");
    let st = run(&[
        "status",
        "--server",
        &https,
        "--id",
        "over-tls",
        "--ca-cert",
        cert_path,
    ])
    .json();
    assert_eq!(st["reports"], 0);
    // Without the CA the bundled web PKI roots do not trust the certificate.
    status(&https, "over-tls").fails_with("cannot connect");
    // Plaintext to the TLS port fails with one line.
    let run = status(&daemon.url, "over-tls");
    assert_eq!(run.status.code(), Some(1), "{}", run.describe());
    // A key file that is not PEM: refused at startup.
    std::fs::write(&key_file, "not pem").expect("write");
    let run = run_with_env(
        &[
            "serve",
            "--memory",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert_path,
            "--tls-key",
            key_path,
        ],
        &[],
    );
    run.fails_with("not PEM");
}

/// Decodes an 8-bit RGB(A) PNG: (width, height, pixels, channels).
fn decode_png(path: &Path) -> (u32, u32, Vec<u8>, usize) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = png::Decoder::new(file)
        .read_info()
        .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf, channels)
}

#[test]
fn estimate_draws_a_png_heatmap_and_refuses_bad_names() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let id = "cli-png";
    create(url, id, &[]).json();
    submit_reports(url, id, REPORTS);
    let dir = tempfile::tempdir().expect("tempdir");
    let arg = |p: &Path| p.to_str().expect("utf-8 path").to_string();

    // The released matrix (the estimate is a deterministic function of the sums).
    let (doc, m) = check_estimate_json(&estimate(url, id, &[]));
    let matrix = nalgebra::DMatrix::from_row_slice(P, P, &m);

    // Names from a data file's header (semicolons, a quoted cell: the data dialect).
    let data = dir.path().join("data.csv");
    std::fs::write(&data, "\nheight; weight;\"age\";x\n1;2;3;4\n").expect("write data");
    let names: Vec<String> = ["height", "weight", "age", "x"].map(String::from).to_vec();
    let png_path = dir.path().join("cov.png");
    let r = estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &arg(&png_path),
            "--names-from",
            &arg(&data),
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert!(r.stdout.is_empty(), "{}", r.describe());
    assert!(r.stderr.contains("wrote png"), "{}", r.describe());

    // The expected geometry comes from the heatmap module itself, for the same matrix,
    // title and names.
    let released = ldpcov_proto::v1::Estimate {
        collection_id: id.into(),
        reports: REPORTS,
        threshold_rule: doc["threshold_rule"].as_str().expect("rule").into(),
        ..Default::default()
    };
    let title = ldpcov_aggregator::plot_title(&released, ldpcov_aggregator::Plotted::Covariance);
    assert!(
        title.contains(id) && title.contains(&format!("n = {REPORTS}")),
        "{title}"
    );
    let reference = dir.path().join("reference.png");
    let layout = ldpcov_aggregator::write_heatmap(&reference, &matrix, &title, Some(&names))
        .expect("reference heatmap");
    let img = decode_png(&png_path);
    assert_eq!((img.0, img.1), (layout.width, layout.height), "{layout:?}");
    assert_eq!(
        std::fs::read(&png_path).expect("png"),
        std::fs::read(&reference).expect("reference png"),
        "the CLI's picture differs from the heatmap of the JSON matrix"
    );
    // Every cell has the diverging colour of its entry on the scale ±max|a_ij|.
    let limit = m.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for i in 0..P {
        for j in 0..P {
            let (x, y) = layout.cell_center(i, j);
            let k = (y as usize * img.0 as usize + x as usize) * img.3;
            let want = ldpcov_aggregator::diverging_color(matrix[(i, j)], limit);
            assert_eq!(
                (img.2[k], img.2[k + 1], img.2[k + 2]),
                (want.0, want.1, want.2),
                "cell ({i},{j}) = {}",
                matrix[(i, j)]
            );
        }
    }

    // --names: the same picture as the header's names gave.
    let named = dir.path().join("named.png");
    let r = estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &arg(&named),
            "--names",
            "height,weight,age,x",
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert_eq!(
        std::fs::read(&named).expect("named png"),
        std::fs::read(&png_path).expect("png"),
        "--names and --names-from with the same names draw the same picture"
    );

    // Refusals: one line, exit 1, no file written.
    let refused = dir.path().join("refused.png");
    let out = arg(&refused);
    estimate(
        url,
        id,
        &["--format", "png", "--out", &out, "--names", "a,b,c"],
    )
    .fails_with("3 axis names for 4 variables");
    estimate(
        url,
        id,
        &["--format", "png", "--out", &out, "--names", "a,b,c,d,e"],
    )
    .fails_with("5 axis names for 4 variables");
    let headerless = dir.path().join("headerless.csv");
    std::fs::write(&headerless, "1,2,3,4\n").expect("write");
    estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &out,
            "--names-from",
            &arg(&headerless),
        ],
    )
    .fails_with("line 1 is data, not a header");
    let missing = dir.path().join("missing.csv");
    estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &out,
            "--names-from",
            &arg(&missing),
        ],
    )
    .fails_with("cannot read");
    let line = estimate(url, id, &["--format", "png"]).fails_with("--out");
    assert!(line.contains("png"), "{line}");
    estimate(url, id, &["--format", "csv", "--names", "a,b,c,d"])
        .fails_with("apply only to --format png");
    assert!(!refused.exists(), "a refused command wrote {out}");
}

#[test]
fn a_bad_postgres_store_is_refused_with_one_line() {
    let conflict = "--store cannot be combined with --memory or --data-dir";
    let url = "postgres://ann@127.0.0.1:1/ldpcov";
    run(&["serve", "--store", url, "--memory"]).fails_with(conflict);
    run(&["serve", "--store", url, "--data-dir", "/nonexistent/x"]).fails_with(conflict);
    let line = run(&["serve", "--store", "mysql://ann:pw-secret@db/x"])
        .fails_with("is not a postgres://USER@HOST:PORT/DB URL");
    assert!(!line.contains("pw-secret"), "{line}");
    run(&["serve", "--store", "postgres://ann@db:notaport/x"]).fails_with("invalid PostgreSQL URL");
    run(&["serve", "--store", url, "--pg-pool-size", "0"]).fails_with("--pg-pool-size");
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("local addr").port()
    };
    let unreachable = format!("postgres://ann:pw-secret@127.0.0.1:{port}/ldpcov");
    let line = run(&["serve", "--store", &unreachable])
        .fails_with("cannot open the PostgreSQL store postgres://ann:***@127.0.0.1");
    assert!(!line.contains("pw-secret"), "{line}");
}

#[cfg(unix)]
#[test]
fn two_daemons_share_one_postgres_database() {
    let pg = ldpcov_pg_cluster::PgCluster::start_or_panic();
    let url = pg.database_or_panic("cli");
    let mut first = Daemon::serve(&["--store", &url]);
    create(&first.url, "shared", &[]).json();
    submit_reports(&first.url, "shared", REPORTS);
    // A second daemon on the same database sees the collection and its reports, and
    // counts what it receives into the same sums.
    let mut second = Daemon::serve(&["--store", &url, "--pg-pool-size", "2"]);
    assert_eq!(status(&second.url, "shared").json()["reports"], REPORTS);
    submit_reports(&second.url, "shared", 5);
    assert_eq!(status(&first.url, "shared").json()["reports"], REPORTS + 5);
    let (status_first, log) = first.terminate();
    assert!(status_first.success(), "{log}");
    assert!(log.contains("store=\"postgres\""), "{log}");
    assert!(!log.contains("ldpcov-data"), "{log}");
    let (status_second, log) = second.terminate();
    assert!(status_second.success(), "{log}");
}

#[test]
fn estimate_png_draws_what_a_mean_and_covariance_collection_releases() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    // The default collection releases the mean, the second moment and the correlation.
    create(url, "joint-png", &[]).json();
    submit_reports(url, "joint-png", REPORTS);
    let (doc, _) = check_estimate_json(&estimate(url, "joint-png", &[]));
    let released = ldpcov_proto::v1::Estimate {
        collection_id: "joint-png".into(),
        reports: REPORTS,
        threshold_rule: doc["threshold_rule"].as_str().expect("rule").into(),
        ..Default::default()
    };
    for (what, plotted) in [
        ("correlation", ldpcov_aggregator::Plotted::Correlation),
        ("second-moment", ldpcov_aggregator::Plotted::SecondMoment),
        ("mean", ldpcov_aggregator::Plotted::Mean),
    ] {
        let path = dir.path().join(format!("{what}.png"));
        let out = path.to_str().expect("utf-8 path");
        let r = estimate(
            url,
            "joint-png",
            &["--format", "png", "--out", out, "--what", what],
        );
        assert!(r.status.success(), "{what}: {}", r.describe());
        let (width, height, _, _) = decode_png(&path);
        assert!(width > 0 && height > 0);
        // A mean is one row of p cells: wider than tall; a matrix is p rows.
        if what == "mean" {
            assert!(width > height, "{what}: {width}×{height}");
        }
        let title = ldpcov_aggregator::plot_title(&released, plotted);
        assert!(title.starts_with(&plotted.name().to_string()), "{title}");
    }
    // A second-moment collection has neither a mean nor a separate second moment
    // (its correlation, of the released matrix, it has): one line, no file.
    create(url, "m2-png", &["--moments", "second-moment"]).json();
    submit_reports(url, "m2-png", REPORTS);
    for what in ["second-moment", "mean"] {
        let path = dir.path().join(format!("m2-{what}.png"));
        estimate(
            url,
            "m2-png",
            &[
                "--format",
                "png",
                "--out",
                path.to_str().expect("utf-8"),
                "--what",
                what,
            ],
        )
        .fails_with("only mean-and-covariance collections release it");
        assert!(!path.exists(), "{what}: a file was written");
    }
    estimate(url, "joint-png", &["--what", "mean"])
        .fails_with("--what applies only to --format png");
}

/// A loopback address that was free a moment ago.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("local addr").to_string()
}

/// The body of `GET /metrics` on `addr` (HTTP/1.0: no chunked encoding).
fn scrape(addr: &str) -> String {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("cannot connect to the metrics endpoint {addr}: {e}"));
    stream
        .set_read_timeout(Some(COMMAND_TIMEOUT))
        .expect("read timeout");
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end in {response:?}"));
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "{head}"
    );
    body.to_string()
}

/// The value of the series `name` with exactly the labels `labels` in a Prometheus
/// text exposition, or 0 when it is absent (a counter never incremented).
fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    want.sort();
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, mut have) = match key.split_once('{') {
            Some((m, rest)) => (
                m,
                rest.trim_end_matches('}')
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            None => (key, Vec::new()),
        };
        have.sort();
        if metric == name && have == want {
            assert!(
                found.is_none(),
                "series {name} {labels:?} appears twice:\n{text}"
            );
            found = Some(
                value
                    .parse::<f64>()
                    .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}")),
            );
        }
    }
    found.unwrap_or(0.0)
}

#[test]
fn metrics_count_exactly_what_the_daemon_received() {
    let data = tempfile::tempdir().expect("temp dir");
    let metrics_addr = free_addr();
    let daemon = Daemon::serve(&[
        "--data-dir",
        data.path().to_str().expect("utf-8 temp path"),
        "--metrics-listen",
        &metrics_addr,
    ]);
    assert!(
        daemon.log().contains("serving Prometheus metrics"),
        "{}",
        daemon.log()
    );
    create_with(&daemon.url, "m", "--min-reports", "10").json();

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    // Payload bytes sent per collection label, to compare with the counter.
    let (bytes_m, bytes_unknown) = runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let collection = client.collection("m").await.expect("fetch m");
        let mut reports = Vec::new();
        for i in 0..16 {
            let x = [0.1 * i as f64, -0.2, 0.3, 0.05 * i as f64];
            reports.push(client.prepare_report(&collection, &x).expect("report"));
        }
        let truncated = |r: &ldpcov_proto::v1::Report| {
            let mut bad = r.clone();
            bad.payload.truncate(bad.payload.len() - 4);
            bad.report_id[0] ^= 0xff;
            bad
        };
        let mut bytes_m = 0u64;
        let mut sent = |r: &ldpcov_proto::v1::Report| bytes_m += r.payload.len() as u64;
        // Unary: 5 new, then 2 of them again (duplicates).
        for r in reports[..5].iter().chain(&reports[..2]) {
            sent(r);
            client.submit_report(r.clone()).await.expect("unary submit");
        }
        // A stream of 7 new and 1 already counted.
        let batch: Vec<_> = reports[5..12]
            .iter()
            .chain(&reports[..1])
            .cloned()
            .collect();
        batch.iter().for_each(&mut sent);
        let response = client.submit_stream(batch).await.expect("stream");
        assert_eq!((response.accepted, response.duplicates), (7, 1));
        // Unary, a payload one entry short: INVALID_ARGUMENT.
        let bad = truncated(&reports[12]);
        sent(&bad);
        let err = client.submit_report(bad).await.expect_err("short payload");
        assert!(
            err.to_string().contains("InvalidArgument") || err.to_string().contains("invalid"),
            "{err}"
        );
        // A stream of 3 new, then a short one: the 3 are counted, the stream fails.
        let mut batch: Vec<_> = reports[12..15].to_vec();
        batch.push(truncated(&reports[15]));
        batch.iter().for_each(&mut sent);
        client
            .submit_stream(batch)
            .await
            .expect_err("short payload in a stream");
        // An unknown collection: NOT_FOUND, labelled `_unknown`.
        let mut stray = reports[15].clone();
        stray.collection_id = "no-such-collection".into();
        let bytes_unknown = stray.payload.len() as u64;
        client
            .submit_report(stray)
            .await
            .expect_err("unknown collection");
        (bytes_m, bytes_unknown)
    });
    estimate(&daemon.url, "m", &["--format", "json"]).json();

    let text = scrape(&metrics_addr);
    let m = [("collection", "m")];
    let check = |name: &str, labels: &[(&str, &str)], want: f64| {
        let got = series(&text, name, labels);
        assert_eq!(got, want, "{name} {labels:?}:\n{text}");
    };
    check("ldpcov_reports_accepted_total", &m, 15.0);
    check("ldpcov_reports_duplicate_total", &m, 3.0);
    check(
        "ldpcov_reports_rejected_total",
        &[("collection", "m"), ("code", "invalid_argument")],
        2.0,
    );
    check(
        "ldpcov_reports_rejected_total",
        &[("collection", "_unknown"), ("code", "not_found")],
        1.0,
    );
    check("ldpcov_report_bytes_received_total", &m, bytes_m as f64);
    check(
        "ldpcov_report_bytes_received_total",
        &[("collection", "_unknown")],
        bytes_unknown as f64,
    );
    // 5 + 2 + 1 + 1 unary calls, 2 streams.
    check(
        "ldpcov_submit_duration_seconds_count",
        &[("rpc", "SubmitReport")],
        9.0,
    );
    check(
        "ldpcov_submit_duration_seconds_count",
        &[("rpc", "SubmitReports")],
        2.0,
    );
    // Every valid report reached the store once: 15 counted + 3 duplicates.
    check(
        "ldpcov_commit_batch_reports_sum",
        &[("store", "redb")],
        18.0,
    );
    let commits = series(
        &text,
        "ldpcov_commit_batch_reports_count",
        &[("store", "redb")],
    );
    assert!(
        (1.0..=18.0 + 1.0).contains(&commits),
        "{commits} commits:\n{text}"
    );
    check(
        "ldpcov_estimate_duration_seconds_count",
        &[("target", "covariance")],
        1.0,
    );
    check("ldpcov_collections", &[], 1.0);
    // Nothing of a report but its size: no report id, no payload value.
    assert!(!text.contains("report_id"), "{text}");
}

#[test]
fn a_busy_metrics_address_is_refused_with_one_line() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("local addr").to_string();
    let line = run(&[
        "serve",
        "--memory",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &addr,
    ])
    .fails_with("cannot serve metrics on");
    assert!(line.contains(&addr), "{line}");
    // And a malformed one is refused by the argument parser, before anything starts.
    let run = run(&["serve", "--memory", "--metrics-listen", "localhost"]);
    assert_eq!(run.status.code(), Some(2), "{}", run.describe());
    assert!(
        run.stderr.contains("--metrics-listen"),
        "{}",
        run.describe()
    );
}

/// The packed upper triangle (`i ≤ j`) of a full row-major `p × p` matrix.
fn upper_triangle(full: &[f64], p: usize) -> Vec<f64> {
    (0..p)
        .flat_map(|i| (i..p).map(move |j| (i, j)))
        .map(|(i, j)| full[i * p + j])
        .collect()
}

/// A central collection end to end through the real daemon (redb, restarted) and the
/// CLI: raw vectors in, releases that spend a durable budget out.
///
/// * The GaussCov release's noise scale: every packed entry of the released average
///   minus the exact average of what was sent, over the reported noise sd, is
///   N(0, 1) if the calibration is right, so `Σ z²` over the d = 820 entries is
///   χ²₈₂₀. Laurent & Massart (2000, Lemma 1) give `P(χ² ≥ d + 2√(dx) + 2x) ≤ e^{−x}`
///   and `P(χ² ≤ d − 2√(dx)) ≤ e^{−x}`; at `x = ln 10⁹` the band is [559, 1122], so
///   an honest daemon fails this with probability below 2·10⁻⁹ (its noise is seeded
///   by the OS, as it must be). The sensitivity 1 the papers print (variance × 1/2)
///   lands near 410 and twice the variance near 1640: both outside.
/// * The reported noise sd is pinned exactly: `R²/(n√ρ)` (sensitivity √2·2^30 grid
///   units, σ = Δ/√(2ρ)).
#[test]
fn central_collection_releases_spend_a_durable_budget() {
    const CP: usize = 40;
    const CN: usize = 300;
    const R: f64 = 2.0;
    let data = tempfile::tempdir().expect("temp dir");
    let dir = data.path().to_str().expect("utf-8 temp path").to_string();
    let mut daemon = Daemon::serve(&["--data-dir", &dir]);
    let params = run(&[
        "create",
        "--server",
        &daemon.url,
        "--id",
        "curated",
        "--dim",
        "40",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "100",
        "--moments",
        "second-moment",
        "--privacy-model",
        "central",
    ])
    .json();
    assert_eq!(params["privacy_model"], "PRIVACY_MODEL_CENTRAL");
    assert_eq!(params["encoding"], "ENCODING_RAW_I32_LE");
    assert_eq!(params["sigma"], 0.0);
    assert_eq!(params["grid_bits"], 30);
    // ρ from (ε, δ): (√(ln(1/δ) + ε) − √ln(1/δ))².
    let l = (1e6f64).ln();
    let budget = ((l + 2.0).sqrt() - l.sqrt()).powi(2);
    let rho_budget = params["rho"].as_f64().expect("rho");
    assert!((rho_budget - budget).abs() < 1e-12 * budget, "{rho_budget}");
    // Served without TLS and tokens: the daemon warns that raw vectors are exposed.
    assert!(
        daemon
            .log()
            .contains("central collection served without TLS and a submit token"),
        "{}",
        daemon.log()
    );
    run(&[
        "create",
        "--server",
        &daemon.url,
        "--id",
        "local",
        "--dim",
        "40",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "100",
    ])
    .json();

    // Users' vectors; the exact packed sums of what was sent, from the payloads.
    let xs: Vec<Vec<f64>> = (0..CN)
        .map(|k| {
            (0..CP)
                .map(|j| 0.6 * ((k as f64) * 0.37 + (j as f64) * 1.3).sin() + 0.1)
                .collect()
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let exact_sums: Vec<i64> = runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let central = client.collection("curated").await.expect("fetch");
        let local = client.collection("local").await.expect("fetch local");
        // A device never perturbs for (nor sends raw vectors to) the wrong model.
        assert!(matches!(
            client.prepare_report(&central, &xs[0]),
            Err(ldpcov_client::ClientError::CentralCollection { .. })
        ));
        assert!(matches!(
            client.submit_to_trusted_curator(&local, &xs[0]).await,
            Err(ldpcov_client::ClientError::LocalCollection { .. })
        ));
        let mut sums = vec![0i64; CP * (CP + 1) / 2];
        let mut reports = Vec::new();
        for x in &xs {
            let id = ldpcov_client::random_report_id().expect("id");
            let report = ldpcov_client::trusted_curator_report(&central, x, id).expect("report");
            let u: Vec<i64> = report
                .payload
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            let mut k = 0;
            for i in 0..CP {
                for j in i..CP {
                    sums[k] += u[i] * u[j];
                    k += 1;
                }
            }
            reports.push(report);
        }
        // Bad reports first: each refused with INVALID_ARGUMENT, nothing counted.
        let good = reports[0].clone();
        let mut outside = good.clone();
        outside.payload = ldpcov_client::proto::wire::encode_raw(&{
            let mut v = vec![0i32; CP];
            v[0] = 1 << 15;
            v[1] = 1;
            v
        });
        let mut short = good.clone();
        short.payload.truncate(4 * (CP - 1));
        let mut perturbed = good.clone();
        perturbed.encoding = ldpcov_client::proto::v1::Encoding::I32Le as i32;
        let mut raw_to_local = good.clone();
        raw_to_local.collection_id = "local".into();
        for (what, bad, needle) in [
            ("outside the ball", outside, "unit ball"),
            ("wrong length", short, "payload has 156 bytes"),
            (
                "perturbed to central",
                perturbed,
                "cannot go to a Central collection",
            ),
            (
                "raw to local",
                raw_to_local,
                "cannot go to a Local collection",
            ),
        ] {
            match client.submit_report(bad).await {
                Err(ldpcov_client::ClientError::Status(s)) => {
                    assert_eq!(s.code(), tonic::Code::InvalidArgument, "{what}: {s:?}");
                    assert!(s.message().contains(needle), "{what}: {}", s.message());
                }
                other => panic!("{what}: expected INVALID_ARGUMENT, got {other:?}"),
            }
        }
        let response = client.submit_stream(reports).await.expect("submit");
        assert_eq!(response.accepted, CN as u64);
        sums
    });
    let status_of = |url: &str| status(url, "curated").json();
    let st = status_of(&daemon.url);
    assert_eq!(st["reports"], CN as u64);
    assert_eq!(st["rho_budget"].as_f64(), Some(rho_budget));
    assert_eq!(st["rho_spent"].as_f64(), Some(0.0));
    assert_eq!(status(&daemon.url, "local").json()["reports"], 0);

    // No release named: refused, nothing spent.
    estimate(&daemon.url, "curated", &[]).fails_with("InvalidArgument");
    // Rules that would look at exact per-fold statistics: refused.
    estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "gauss-cov",
            "--release-rho",
            "0.05",
            "--threshold",
            "cv",
        ],
    )
    .fails_with("per-report statistics");
    // A release on a local collection: refused.
    estimate(
        &daemon.url,
        "local",
        &["--release", "gauss-cov", "--release-rho", "0.05"],
    )
    .fails_with("release is for central collections");
    assert_eq!(status_of(&daemon.url)["rho_spent"].as_f64(), Some(0.0));

    let gauss = [
        "--release",
        "gauss-cov",
        "--release-rho",
        "0.05",
        "--threshold",
        "none",
        "--no-psd",
    ];
    let first = estimate(&daemon.url, "curated", &gauss);
    let doc = first.json();
    let matrix = json_matrix_exact(&first.stdout);
    assert_eq!(matrix.len(), CP * CP);
    let release = &doc["release"];
    assert_eq!(release["mechanism"], "gauss-cov");
    assert_eq!(release["rho_spent_by_this_call"].as_f64(), Some(0.05));
    assert_eq!(release["rho_spent"].as_f64(), Some(0.05));
    let sd = doc["entry_noise_sd"].as_f64().expect("noise sd");
    let want_sd = R * R / (CN as f64 * 0.05f64.sqrt());
    assert!((sd - want_sd).abs() < 1e-12 * want_sd, "{sd} vs {want_sd}");
    let unit = (1u64 << 30) as f64;
    let z2: f64 = upper_triangle(&matrix, CP)
        .iter()
        .zip(&exact_sums)
        .map(|(m, &s)| {
            let exact = R * R * s as f64 / (unit * CN as f64);
            ((m - exact) / sd).powi(2)
        })
        .sum();
    assert!(
        (559.0..=1122.0).contains(&z2),
        "Σz² = {z2} outside the χ²₈₂₀ band"
    );

    // The same release again: from the ledger, bit for bit, at no cost.
    let again = estimate(&daemon.url, "curated", &gauss);
    assert_eq!(
        json_matrix_exact(&again.stdout),
        json_matrix_exact(&first.stdout)
    );
    assert_eq!(
        again.json()["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    // Post-processing of the same release (the default rule, PSD projection): free.
    let post = estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.05"],
    )
    .json();
    assert_eq!(
        post["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    assert!(
        post["threshold_rule"]
            .as_str()
            .unwrap_or("")
            .contains("bulk"),
        "{post}"
    );
    // Synthetic rows from the release: post-processing (free), reproducible by seed.
    let synth = |name: &str| {
        let path = data.path().join(name);
        let run = estimate(
            &daemon.url,
            "curated",
            &[
                "--release",
                "gauss-cov",
                "--release-rho",
                "0.05",
                "--synthetic-rows",
                "500",
                "--synthetic-out",
                path.to_str().expect("utf-8"),
                "--synthetic-seed",
                "7",
            ],
        );
        assert_eq!(
            run.json()["release"]["rho_spent_by_this_call"].as_f64(),
            Some(0.0)
        );
        std::fs::read_to_string(path).expect("synthetic rows written")
    };
    let (a, b) = (synth("a.csv"), synth("b.csv"));
    assert_eq!(a, b, "same seed, same rows");
    let lines: Vec<&str> = a.lines().collect();
    assert_eq!(lines.len(), 501);
    assert_eq!(lines[0].split(',').count(), CP);
    assert_eq!(lines[0].split(',').next(), Some("x0"));
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.split(',').all(|v| v.parse::<f64>().is_ok()))
    );
    // SeparateCov takes only the `none` rule.
    estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "separate-cov",
            "--release-rho",
            "0.01",
            "--threshold",
            "universal",
        ],
    )
    .fails_with("only the `none` rule");

    // Beyond the budget: RESOURCE_EXHAUSTED, nothing spent.
    estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.02"],
    )
    .fails_with("ResourceExhausted");
    assert_eq!(status_of(&daemon.url)["rho_spent"].as_f64(), Some(0.05));
    // Pure DP: ε = 0.1 spends ρ = ε²/2 = 0.005; its noise sd is the discrete
    // Laplace's at scale t = ⌈(p + 1)·2^30/ε⌉.
    let lap = estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "laplace-cov",
            "--release-epsilon",
            "0.1",
            "--threshold",
            "none",
        ],
    )
    .json();
    let close = |v: &Value, want: f64| {
        let got = v.as_f64().unwrap_or(f64::NAN);
        assert!((got - want).abs() < 1e-15, "{got} vs {want}");
    };
    close(&lap["release"]["rho_spent_by_this_call"], 0.005);
    let t = ((CP as f64 + 1.0) * unit / 0.1).ceil();
    let q = (-1.0 / t).exp();
    let lap_sd = R * R * (2.0 * q).sqrt() / (1.0 - q) / (unit * CN as f64);
    let got = lap["entry_noise_sd"].as_f64().expect("sd");
    assert!((got - lap_sd).abs() < 1e-9 * lap_sd, "{got} vs {lap_sd}");
    // SeparateCov through the daemon: its noise is on the eigenvalues, sd
    // Δ_λ/√(2·ρ/2) grid units over 2^30·n, times R² (Δ_λ ≈ √2·2^30: the rounding and
    // eigensolver terms are below 10⁻⁶ of it here).
    let sep = estimate(
        &daemon.url,
        "curated",
        &["--release", "separate-cov", "--release-rho", "0.01"],
    )
    .json();
    assert_eq!(sep["release"]["mechanism"], "separate-cov");
    close(&sep["release"]["rho_spent_by_this_call"], 0.01);
    let sep_sd = sep["entry_noise_sd"].as_f64().expect("sd");
    let want = R * R * std::f64::consts::SQRT_2 / (2.0 * 0.005f64).sqrt() / CN as f64;
    assert!((sep_sd / want - 1.0).abs() < 1e-5, "{sep_sd} vs {want}");
    let spent = 0.05 + 0.005 + 0.01;
    close(&status_of(&daemon.url)["rho_spent"], spent);

    // Restart on the same file: the budget and the recorded release survive.
    let (exit, _) = daemon.terminate();
    assert!(exit.success());
    drop(daemon);
    let daemon = Daemon::serve(&["--data-dir", &dir]);
    close(&status_of(&daemon.url)["rho_spent"], spent);
    let after = estimate(&daemon.url, "curated", &gauss);
    assert_eq!(
        json_matrix_exact(&after.stdout),
        json_matrix_exact(&first.stdout)
    );
    assert_eq!(
        after.json()["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    // A new release (another ρ) beyond what is left: refused after the restart too.
    estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.03"],
    )
    .fails_with("ResourceExhausted");
    close(&status_of(&daemon.url)["rho_spent"], spent);
}

/// AdaptiveCov through the daemon and the CLI: a central collection with norm bins
/// releases at a radius 2^-j·R it reports, with its private trace, spending its ρ once;
/// a collection without bins, and bins on a local collection, are refused.
#[test]
fn adaptive_cov_releases_through_the_cli() {
    let daemon = Daemon::start();
    let args = |id: &str, model: &str, bins: &str| -> Vec<String> {
        [
            "create",
            "--server",
            &daemon.url,
            "--id",
            id,
            "--dim",
            "4",
            "--epsilon",
            "2",
            "--delta",
            "1e-6",
            "--clip-radius",
            "2",
            "--min-reports",
            "10",
            "--moments",
            "second-moment",
            "--privacy-model",
            model,
            "--norm-bins",
            bins,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let create_run = |a: Vec<String>| run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    create_run(args("binned-local", "local", "4")).fails_with("norm_bins is for central");
    let params = create_run(args("binned", "central", "6")).json();
    assert_eq!(params["norm_bins"], 6);
    // d = 10 entries, then 6 bins of 2d + 1.
    assert_eq!(params["entries"], 10 + 6 * 21);
    create_run(args("plain", "central", "0")).json();

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        for id in ["binned", "plain"] {
            let c = client.collection(id).await.expect("fetch");
            for k in 0..400 {
                let a = k as f64 * 0.31;
                // Norm 0.6 of R = 2 (unit-ball norm 0.3): bin 1.
                let x = [0.6 * a.cos(), 0.6 * a.sin(), 0.0, 0.0];
                client
                    .submit_to_trusted_curator(&c, &x)
                    .await
                    .expect("submit");
            }
        }
    });
    let adaptive = ["--release", "adaptive-cov", "--release-rho", "0.04"];
    estimate(&daemon.url, "plain", &adaptive).fails_with("norm_bins");
    let doc = estimate(&daemon.url, "binned", &adaptive).json();
    let release = &doc["release"];
    assert_eq!(release["mechanism"], "adaptive-cov");
    assert_eq!(release["rho_spent_by_this_call"].as_f64(), Some(0.04));
    let radius = release["radius"].as_f64().expect("radius");
    let j = (2.0 / radius).log2();
    assert!(
        (j - j.round()).abs() < 1e-12 && (0.0..6.0).contains(&j),
        "radius {radius}"
    );
    assert!(release["trace"].as_f64().expect("trace").is_finite());
    // Asked again: the same release, free.
    let again = estimate(&daemon.url, "binned", &adaptive).json();
    assert_eq!(
        again["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    assert_eq!(again["matrix"], doc["matrix"]);
    assert_eq!(
        status(&daemon.url, "binned").json()["rho_spent"].as_f64(),
        Some(0.04)
    );
    // Private cross-validation: the folds released at ρ together (parallel
    // composition), the default rule (CV) then runs on them; spent once.
    let folds = ["--release", "gauss-cov-folds", "--release-rho", "0.02"];
    let cv = estimate(&daemon.url, "binned", &folds).json();
    assert_eq!(cv["release"]["mechanism"], "gauss-cov-folds");
    assert_eq!(cv["release"]["rho_spent_by_this_call"].as_f64(), Some(0.02));
    assert!(
        cv["threshold_rule"]
            .as_str()
            .unwrap_or("")
            .starts_with("cv"),
        "{}",
        cv["threshold_rule"]
    );
    // √K = √5 times GaussCov's entry noise at the same ρ: R²·√5/(n√ρ).
    let sd = cv["entry_noise_sd"].as_f64().expect("sd");
    let want = 4.0 * 5f64.sqrt() / (400.0 * 0.02f64.sqrt());
    assert!((sd / want - 1.0).abs() < 1e-12, "{sd} vs {want}");
    // The adaptive threshold would need sums of squares: refused, nothing spent.
    let mut adaptive_rule = folds.to_vec();
    adaptive_rule.extend(["--threshold", "adaptive"]);
    estimate(&daemon.url, "binned", &adaptive_rule).fails_with("sums of squares");
    let spent = status(&daemon.url, "binned").json()["rho_spent"]
        .as_f64()
        .expect("spent");
    assert!((spent - 0.06).abs() < 1e-15, "{spent}");
    // The pure-DP variants spend ρ = ε²/2: 0.005 and 0.00125.
    let lap = estimate(
        &daemon.url,
        "binned",
        &[
            "--release",
            "adaptive-cov-laplace",
            "--release-epsilon",
            "0.1",
        ],
    )
    .json();
    assert_eq!(lap["release"]["mechanism"], "adaptive-cov-laplace");
    let sep = estimate(
        &daemon.url,
        "binned",
        &[
            "--release",
            "separate-cov-laplace",
            "--release-epsilon",
            "0.05",
        ],
    )
    .json();
    assert_eq!(sep["release"]["mechanism"], "separate-cov-laplace");
    let spent = status(&daemon.url, "binned").json()["rho_spent"]
        .as_f64()
        .expect("spent");
    assert!((spent - 0.06625).abs() < 1e-15, "{spent}");
    // Nothing left for another: refused, nothing spent.
    estimate(
        &daemon.url,
        "binned",
        &["--release", "laplace-cov", "--release-epsilon", "0.1"],
    )
    .fails_with("ResourceExhausted");

    // Seed 004's compressed release: opt-in at creation, labelled, spends nothing.
    let mut local = args("compressed-local", "local", "0");
    local.push("--allow-compressed-release".into());
    create_run(local).fails_with("allow_compressed_release is for central");
    let mut compressed = args("compressed", "central", "0");
    compressed.push("--allow-compressed-release".into());
    assert_eq!(
        create_run(compressed).json()["allow_compressed_release"],
        true
    );
    let ask = ["--release", "compressed-not-dp", "--compressed-rows", "30"];
    estimate(&daemon.url, "plain", &ask).fails_with("allow_compressed_release");
    // No report yet: below the minimum, nothing recorded.
    estimate(&daemon.url, "compressed", &ask).fails_with("FailedPrecondition");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let c = client.collection("compressed").await.expect("fetch");
        for k in 0..50 {
            let x = [0.1 * k as f64 / 50.0, 0.3, -0.2, 0.0];
            client
                .submit_to_trusted_curator(&c, &x)
                .await
                .expect("submit");
        }
    });
    let doc = estimate(&daemon.url, "compressed", &ask).json();
    assert_eq!(
        doc["release"]["mechanism"],
        "compressed (NOT differentially private)"
    );
    assert_eq!(doc["release"]["rho_spent_by_this_call"].as_f64(), Some(0.0));
    assert_eq!(
        status(&daemon.url, "compressed").json()["rho_spent"].as_f64(),
        Some(0.0)
    );
}
