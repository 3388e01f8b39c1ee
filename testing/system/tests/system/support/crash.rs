//! The crash tests' load and daemons: a daemon at a fixed loopback address that logs to
//! a file and is killed with SIGKILL ([`spawn_serve`], [`kill`]), and device pools that
//! resend every report until it is acknowledged ([`run_client`]).

use std::ffi::OsStr;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ldpcov_client::proto::v1::Report;
use ldpcov_client::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_client::{
    AggregatorClient, ClientError, Collection, DiscreteGaussianSampler, ReportId, RetryPolicy,
};
use ldpcov_privacy::mechanism::ReportEntries;
use ldpcov_privacy::wire::decode_payload;
use rand::{Rng, SeedableRng};
use tonic::Code;

use super::daemon::command;

/// A loopback address that was free a moment ago.
pub(crate) fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr")
}

/// Starts `serve` on `addr` with the store chosen by `store` (`--data-dir DIR`,
/// `--store URL`, and any further flags: tokens), small batches, and its stderr
/// appended to `log`.
pub(crate) fn spawn_serve<S: AsRef<OsStr>>(addr: SocketAddr, store: &[S], log: &Path) -> Child {
    spawn_serve_with_env(addr, store, &[], log)
}

/// [`spawn_serve`] with these environment variables set (fault injection).
pub(crate) fn spawn_serve_with_env<S: AsRef<OsStr>>(
    addr: SocketAddr,
    store: &[S],
    env: &[(&str, &str)],
    log: &Path,
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the daemon log");
    command()
        .args(["--log", "info", "serve", "--listen"])
        .arg(addr.to_string())
        .args(store)
        .args(["--batch-delay-ms", "2", "--batch-size", "64"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn the daemon")
}

/// Waits until `url` accepts connections (a daemon opens its store before it listens).
pub(crate) async fn wait_ready(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if RawClient::connect(url.to_string()).await.is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "daemon {url} did not come up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`wait_ready`] for a daemon this test spawned: fails at once, showing the end of its
/// `log`, if it exited before it listened (a daemon that cannot start fails the test).
pub(crate) async fn wait_started(url: &str, child: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("poll the daemon") {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            panic!("daemon {url} exited ({status}) before it listened; its log ends:\n{tail}");
        }
        if RawClient::connect(url.to_string()).await.is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "daemon {url} did not come up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGKILLs a running daemon and reaps it.
pub(crate) fn kill(child: &mut Child) {
    child.kill().expect("SIGKILL the daemon");
    child.wait().expect("reap the daemon");
}

/// SIGKILLs a daemon that may have exited by itself (one cannot start while its
/// database is down) and reaps it.
pub(crate) fn kill_if_running(child: &mut Child) {
    let _ = child.kill();
    child.wait().expect("reap the daemon");
}

/// Errors a dead daemon or database explains; anything else is a bug.
pub(crate) fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Transport(_) => true,
        ClientError::Status(s) => matches!(
            s.code(),
            Code::Unavailable | Code::Unknown | Code::DeadlineExceeded | Code::Cancelled
        ),
        _ => false,
    }
}

/// One simulated device pool: sends reports of `collection` (unary or in small
/// streams) to one of `urls` and, on a transient failure, resends them to the next (the
/// same one when there is one); returns the acknowledged reports. Counts the
/// acknowledged sends in `acked_total` and the failovers in `failovers`.
pub(crate) async fn run_client(
    urls: Vec<String>,
    collection: Collection,
    seed: u64,
    stop: Arc<AtomicBool>,
    acked_total: Arc<AtomicU64>,
    failovers: Arc<AtomicU64>,
) -> Vec<(ReportId, ReportEntries)> {
    // Builds the reports (no network: `prepare_report` only perturbs).
    let mut maker = AggregatorClient::connect_lazy(urls[0].clone())
        .expect("client")
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            seed,
        )));
    let mut clients: Vec<AggregatorClient> = urls
        .iter()
        .map(|url| {
            AggregatorClient::connect_lazy(url.clone())
                .expect("client")
                .with_retry(RetryPolicy::no_retries())
                .with_timeout(Duration::from_secs(5))
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut target = (seed as usize) % clients.len();
    let mut acked = Vec::new();
    let mut pending: Vec<Report> = Vec::new();
    loop {
        if pending.is_empty() {
            if stop.load(Ordering::SeqCst) {
                return acked;
            }
            let n = if rng.random_bool(0.25) { 8 } else { 1 };
            for _ in 0..n {
                let x: Vec<f64> = (0..collection.dim())
                    .map(|_| rng.random_range(-1.0..1.0))
                    .collect();
                pending.push(maker.prepare_report(&collection, &x).expect("prepare"));
            }
        }
        let client = &mut clients[target];
        let result = if pending.len() == 1 {
            client.submit_report(pending[0].clone()).await.map(|_| ())
        } else {
            client.submit_stream(pending.clone()).await.map(|r| {
                assert_eq!(r.accepted + r.duplicates, pending.len() as u64);
            })
        };
        match result {
            Ok(()) => {
                for r in pending.drain(..) {
                    let id = ReportId::try_from(r.report_id.as_slice()).expect("id");
                    let entries =
                        decode_payload(&collection, r.encoding, &r.payload).expect("payload");
                    acked.push((id, entries));
                }
                acked_total.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if transient(&e) => {
                failovers.fetch_add(1, Ordering::Relaxed);
                target = (target + 1) % urls.len();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("non-transient failure: {e}"),
        }
    }
}
