//! Crash tests of the two-aggregator protocol (docs/PRIVACY.md §10) through the real
//! daemon binary: a helper and a leader (`serve --two-aggregator-role helper|leader`),
//! each on its own redb data directory, sharing one peer secret file (the helper creates
//! it). Concurrent devices upload Prio3 shares to the leader, resending each upload (the
//! same bytes, so the same report id) until the leader acknowledges it; a few uploads
//! are invalid (a tampered leader share, a helper share sealed for another report).
//!
//! [`sigkill_of_either_aggregator_loses_and_double_counts_nothing`] SIGKILLs the helper
//! and the leader, six times each in a seeded order after seeded delays, and restarts
//! each on the same directory and port (sometimes killing a restart before it
//! listens). Most kills first wait (up to 1.5 s) for the middle of a batch, the helper
//! having counted more than the leader; how many kills left the stores in that state
//! is printed, not asserted (it depends on timing: the window lasts milliseconds).
//! [`uploads_while_the_helper_is_down_are_queued_and_counted_once_it_is_back`] keeps
//! the helper down for 2 s while uploads continue: the leader acknowledges them
//! (queued) and counts nothing until the helper is back.
//!
//! At the end the daemons are stopped and both stores opened directly. Why the
//! assertions prove that nothing was lost or counted twice:
//! * every upload was acknowledged, and a last valid upload (the sentinel) is sent
//!   after all others: the leader's queue is in arrival order and each batch is
//!   dequeued in the transaction that counts it, so once the leader's count reaches
//!   the number of valid uploads, nothing acknowledged is waiting any more, and the
//!   leader's queue must be empty (`queued_count` = 0);
//! * each store counted exactly the valid uploads: its count is their number, and
//!   offered every valid report id again it finds all of them counted already
//!   (duplicates), every invalid one not (accepted): exactly that set, each once;
//! * the two stores' aggregate shares combine (`unshard`) to exactly the integer sums
//!   Σ triu(x xᵀ) and Σ x of the valid reports' grid vectors: a report counted twice
//!   by either store, or by one and not the other (its share alone is uniformly
//!   random), or an invalid one counted, would change the sums.

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ldpcov_aggregator::two_aggregator::aggregate_share;
use ldpcov_aggregator::{DurableConfig, DurableStore, Store, ValidReport};
use ldpcov_client::{Collection, ReportBuilder, ReportId, active_key, two_aggregator_measurement};
use ldpcov_prio::Field;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, CreateCollectionRequest, GetCollectionRequest, GetStatusRequest,
    TwoAggregatorReport,
};
use prio::vdaf::{AggregateShare, Collector};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

use crate::support::crash::{free_port, kill, spawn_serve, wait_started};

/// The collection's dimension p: each report's Prio3 proof is cheap.
const DIM: u32 = 3;
const ID: &str = "two-crash";

/// A daemon of the pair: its flags, its port and log, and its process while it runs.
struct Daemon {
    addr: SocketAddr,
    args: Vec<OsString>,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts the process on the same port and directory (not waiting for it).
    fn spawn(&mut self) {
        assert!(self.child.is_none(), "already running");
        self.child = Some(spawn_serve(self.addr, &self.args, &self.log));
    }

    /// Waits until it listens; fails if it exited.
    async fn wait(&mut self) {
        let url = self.url();
        let child = self.child.as_mut().expect("spawned");
        wait_started(&url, child, &self.log).await;
    }

    async fn start(&mut self) {
        self.spawn();
        self.wait().await;
    }

    /// SIGKILL.
    fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        kill(&mut child);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A helper and a leader, each on its own data directory, and the collection created on
/// both.
struct Pair {
    helper: Daemon,
    leader: Daemon,
    helper_dir: PathBuf,
    leader_dir: PathBuf,
    collection: Collection,
    _tmp: tempfile::TempDir,
}

fn flags(items: &[&OsStr]) -> Vec<OsString> {
    items.iter().map(|s| s.to_os_string()).collect()
}

/// Starts the helper (which creates the peer secret), then the leader, and creates the
/// collection on both, the helper first.
async fn start_pair() -> Pair {
    let tmp = tempfile::tempdir().expect("tempdir");
    let secret = tmp.path().join("peer-secret.hex");
    let helper_dir = tmp.path().join("helper");
    let leader_dir = tmp.path().join("leader");
    let mut helper = Daemon {
        addr: free_port(),
        args: flags(&[
            OsStr::new("--data-dir"),
            helper_dir.as_os_str(),
            OsStr::new("--two-aggregator-role"),
            OsStr::new("helper"),
            OsStr::new("--peer-secret-file"),
            secret.as_os_str(),
        ]),
        log: tmp.path().join("helper.log"),
        child: None,
    };
    helper.start().await;
    assert!(secret.exists(), "the helper created no peer secret");
    let helper_url = helper.url();
    let mut leader = Daemon {
        addr: free_port(),
        args: flags(&[
            OsStr::new("--data-dir"),
            leader_dir.as_os_str(),
            OsStr::new("--two-aggregator-role"),
            OsStr::new("leader"),
            OsStr::new("--peer-secret-file"),
            secret.as_os_str(),
            OsStr::new("--helper-url"),
            OsStr::new(&helper_url),
        ]),
        log: tmp.path().join("leader.log"),
        child: None,
    };
    leader.start().await;
    let spec = CollectionSpec {
        dim: DIM,
        ..crate::in_process::two_aggregator::spec(ID)
    };
    let mut params = None;
    for url in [helper.url(), leader.url()] {
        let mut raw = RawClient::connect(url).await.expect("connect");
        raw.create_collection(CreateCollectionRequest {
            spec: Some(spec.clone()),
        })
        .await
        .expect("create");
        params = Some(
            raw.get_collection(GetCollectionRequest {
                collection_id: ID.into(),
            })
            .await
            .expect("params")
            .into_inner(),
        );
    }
    let collection = Collection::from_params(&params.expect("params")).expect("collection");
    Pair {
        helper,
        leader,
        helper_dir,
        leader_dir,
        collection,
        _tmp: tmp,
    }
}

/// The uploads of a test: valid ones with their grid vectors, and invalid ones.
struct Uploads {
    /// The valid uploads but the sentinel, in a seeded order with the invalid ones.
    mixed: Vec<TwoAggregatorReport>,
    /// The last valid upload, sent after all others.
    sentinel: TwoAggregatorReport,
    /// Every valid report's id and grid vector (the sentinel's included).
    valid: Vec<(ReportId, Vec<i64>)>,
    invalid: Vec<ReportId>,
}

/// `valid` valid uploads of seeded vectors (the helper's active key taken from the
/// helper) and `invalid` invalid ones: a tampered leader share (its proof fails) or a
/// helper share sealed for another report (it does not open for this one), alternately.
async fn build_uploads(pair: &Pair, seed: u64, valid: usize, invalid: usize) -> Uploads {
    let mut helper = RawClient::connect(pair.helper.url())
        .await
        .expect("connect");
    let params = helper
        .get_collection(GetCollectionRequest {
            collection_id: ID.into(),
        })
        .await
        .expect("helper params")
        .into_inner();
    let key = active_key(&params.two_aggregator.expect("two-aggregator").helper_keys)
        .expect("the helper's active key");
    let collection = &pair.collection;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut builder = ReportBuilder::new().expect("builder");
    let id = |r: &TwoAggregatorReport| ReportId::try_from(r.report_id.as_slice()).expect("id");
    let mut good = Vec::new();
    let mut vectors = Vec::new();
    for _ in 0..valid {
        let x: Vec<f64> = (0..DIM).map(|_| rng.random_range(-1.5..1.5)).collect();
        let report = builder
            .two_aggregator_report(collection, &key, &x)
            .expect("report");
        let grid = two_aggregator_measurement(collection, &x).expect("grid");
        vectors.push((id(&report), grid));
        good.push(report);
    }
    let mut bad = Vec::new();
    for (k, other) in good.iter().enumerate().take(invalid) {
        let x = [0.3, -0.2, 0.1];
        let mut report = builder
            .two_aggregator_report(collection, &key, &x)
            .expect("report");
        if k % 2 == 0 {
            let last = report.leader_share.len() - 1;
            report.leader_share[last - 20] ^= 1;
        } else {
            report.helper_share = other.helper_share.clone();
        }
        bad.push(report);
    }
    let invalid_ids = bad.iter().map(id).collect();
    let sentinel = good.pop().expect("at least one valid upload");
    let mut mixed = good;
    for report in bad {
        let at = rng.random_range(0..=mixed.len());
        mixed.insert(at, report);
    }
    Uploads {
        mixed,
        sentinel,
        valid: vectors,
        invalid: invalid_ids,
    }
}

/// A client of the leader whose calls time out (a dead daemon's call must fail).
fn client(url: &str) -> RawClient<Channel> {
    let channel = Endpoint::from_shared(url.to_string())
        .expect("url")
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(5))
        .connect_lazy();
    RawClient::new(channel)
}

/// Uploads `report` until the leader acknowledges it (the same bytes each time);
/// returns how often it was resent.
async fn upload(raw: &mut RawClient<Channel>, report: &TwoAggregatorReport) -> u64 {
    let mut resends = 0;
    loop {
        match raw.upload_two_aggregator_report(report.clone()).await {
            Ok(_) => return resends,
            Err(s)
                if matches!(
                    s.code(),
                    Code::Unavailable | Code::Unknown | Code::DeadlineExceeded | Code::Cancelled
                ) =>
            {
                resends += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(s) => panic!("upload refused: {s:?}"),
        }
    }
}

/// One device pool: `reports` uploaded one after another, `pace` apart; counts the
/// acknowledged ones in `acked`; returns the resends.
async fn run_uploads(
    url: String,
    reports: Vec<TwoAggregatorReport>,
    pace: Duration,
    acked: Arc<AtomicU64>,
) -> u64 {
    let mut raw = client(&url);
    let mut resends = 0;
    for report in &reports {
        resends += upload(&mut raw, report).await;
        acked.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(pace).await;
    }
    resends
}

/// `clients` device pools, each taking every `clients`-th of `uploads`.
fn start_clients(
    url: &str,
    uploads: &[TwoAggregatorReport],
    clients: usize,
    pace: Duration,
    acked: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..clients)
        .map(|c| {
            let mine = uploads.iter().skip(c).step_by(clients).cloned().collect();
            tokio::spawn(run_uploads(url.to_string(), mine, pace, acked.clone()))
        })
        .collect()
}

/// The reports a daemon says it counted (`None` if it does not answer).
async fn counted(url: &str) -> Option<u64> {
    tokio::time::timeout(Duration::from_secs(2), async {
        let mut raw = RawClient::connect(url.to_string()).await.ok()?;
        let status = raw
            .get_status(GetStatusRequest {
                collection_id: ID.into(),
            })
            .await
            .ok()?;
        Some(status.into_inner().reports)
    })
    .await
    .ok()
    .flatten()
}

/// Sends the sentinel, then waits until the leader (and so the helper, which counts
/// first) has counted `n` reports; never more on the way.
async fn drain(pair: &Pair, uploads: &Uploads) {
    let n = uploads.valid.len() as u64;
    upload(&mut client(&pair.leader.url()), &uploads.sentinel).await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (l, h) = (
            counted(&pair.leader.url()).await,
            counted(&pair.helper.url()).await,
        );
        assert!(
            l.unwrap_or(0) <= n && h.unwrap_or(0) <= n,
            "counted more than the {n} valid uploads: leader {l:?}, helper {h:?}"
        );
        if l == Some(n) && h == Some(n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not all counted: leader {l:?}, helper {h:?} of {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What one store holds: its count, queue, aggregate share, and how many of the valid
/// and of the invalid report ids it had counted (found by offering each id again with
/// zero entries: a counted id is a duplicate).
async fn inspect(dir: &Path, uploads: &Uploads) -> (u64, u64, AggregateShare<Field>, u64, u64) {
    let store = DurableStore::open(dir, DurableConfig::default()).expect("open store");
    let snapshot = store.snapshot(ID).await.expect("snapshot");
    let queued = store.queued_count(ID).await.expect("queued");
    let share = aggregate_share(&snapshot.acc);
    let zero = |id: &ReportId| ValidReport {
        report_id: *id,
        entries: vec![0i32; snapshot.acc.entries()].into(),
    };
    let valid: Vec<_> = uploads.valid.iter().map(|(id, _)| zero(id)).collect();
    let seen_valid = store.submit(ID, valid).await.expect("resubmit").duplicates;
    let invalid: Vec<_> = uploads.invalid.iter().map(zero).collect();
    let seen_invalid = store
        .submit(ID, invalid)
        .await
        .expect("resubmit")
        .duplicates;
    (snapshot.acc.count, queued, share, seen_valid, seen_invalid)
}

/// Stops both daemons and checks their stores (see the module docs).
async fn stop_and_check(mut pair: Pair, uploads: &Uploads) {
    pair.leader.kill();
    pair.helper.kill();
    let n = uploads.valid.len() as u64;
    let vdaf = ldpcov_prio::collection_prio3(&pair.collection.two_aggregator().expect("two"))
        .expect("prio3");
    let mut shares = Vec::new();
    for (name, dir) in [("leader", &pair.leader_dir), ("helper", &pair.helper_dir)] {
        let (count, queued, share, seen_valid, seen_invalid) = inspect(dir, uploads).await;
        assert_eq!(count, n, "{name}: counted {count} of {n} valid uploads");
        assert_eq!(queued, 0, "{name}: uploads left in the queue");
        assert_eq!(seen_valid, n, "{name}: valid report ids not counted");
        assert_eq!(seen_invalid, 0, "{name}: invalid reports counted");
        shares.push(share);
    }
    let d = DIM as usize;
    let mut want_y = vec![0i128; d * (d + 1) / 2];
    let mut want_x = vec![0i128; d];
    for (_, grid) in &uploads.valid {
        let mut t = 0;
        for i in 0..d {
            want_x[i] += i128::from(grid[i]);
            for j in i..d {
                want_y[t] += i128::from(grid[i] * grid[j]);
                t += 1;
            }
        }
    }
    let sum = vdaf.unshard(&(), shares, n as usize).expect("unshard");
    assert_eq!(sum.y, want_y, "Σ triu(x xᵀ) of the valid reports");
    assert_eq!(sum.x.as_ref(), Some(&want_x), "Σ x of the valid reports");
}

/// The reports a daemon counted, through `raw` (`None` if it does not answer at once).
async fn status(raw: &mut RawClient<Channel>) -> Option<u64> {
    let call = raw.get_status(GetStatusRequest {
        collection_id: ID.into(),
    });
    match tokio::time::timeout(Duration::from_millis(500), call).await {
        Ok(Ok(status)) => Some(status.into_inner().reports),
        _ => None,
    }
}

/// Waits, up to `within`, for the middle of a batch: the helper has counted more than
/// the leader (it committed a batch the leader has not yet). Whether a kill then came
/// in time is read from the stores afterwards.
async fn await_mid_batch(pair: &Pair, within: Duration) {
    let (mut leader, mut helper) = (client(&pair.leader.url()), client(&pair.helper.url()));
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let (Some(l), Some(h)) = tokio::join!(status(&mut leader), status(&mut helper))
            && h > l
        {
            return;
        }
    }
}

/// The count of the store in `dir` (its daemon is not running).
async fn stored_count(dir: &Path) -> u64 {
    let store = DurableStore::open(dir, DurableConfig::default()).expect("open the store");
    store.count(ID).await.expect("count")
}

const CLIENTS: usize = 4;
const VALID: usize = 480;
const INVALID: usize = 6;
/// Kills of each daemon.
const KILLS_EACH: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_either_aggregator_loses_and_double_counts_nothing() {
    let started = Instant::now();
    let mut pair = start_pair().await;
    let uploads = build_uploads(&pair, 0x2a66, VALID, INVALID).await;
    let acked = Arc::new(AtomicU64::new(0));
    let clients = start_clients(
        &pair.leader.url(),
        &uploads.mixed,
        CLIENTS,
        Duration::from_millis(50),
        &acked,
    );

    // Either daemon, in a seeded order, each after a seeded delay; most kills wait for
    // the middle of a batch (the helper has counted it, the leader not yet). A restart
    // is sometimes killed again before it listens.
    let mut rng = ChaCha8Rng::seed_from_u64(0x6b11);
    let mut victims: Vec<bool> = (0..2 * KILLS_EACH).map(|k| k % 2 == 0).collect();
    for k in (1..victims.len()).rev() {
        victims.swap(k, rng.random_range(0..=k));
    }
    // Kills that left a batch counted by the helper and not by the leader.
    let (mut leader_mid_batch, mut helper_mid_batch) = (0, 0);
    for leader in victims {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..400))).await;
        if rng.random_bool(0.8) {
            await_mid_batch(&pair, Duration::from_millis(1500)).await;
        }
        if leader {
            pair.leader.kill();
            let helper_count = counted(&pair.helper.url()).await;
            let leader_count = stored_count(&pair.leader_dir).await;
            leader_mid_batch += usize::from(helper_count.is_some_and(|h| h > leader_count));
            pair.leader.spawn();
            if rng.random_bool(0.8) {
                pair.leader.wait().await;
            }
        } else {
            pair.helper.kill();
            let helper_count = stored_count(&pair.helper_dir).await;
            let leader_count = counted(&pair.leader.url()).await;
            helper_mid_batch += usize::from(leader_count.is_some_and(|l| helper_count > l));
            pair.helper.spawn();
            if rng.random_bool(0.8) {
                pair.helper.wait().await;
            }
        }
    }
    pair.helper.wait().await;
    pair.leader.wait().await;
    let kills_done = started.elapsed();
    let mut resends = 0;
    for c in clients {
        resends += c.await.expect("client");
    }
    assert_eq!(acked.load(Ordering::SeqCst), uploads.mixed.len() as u64);
    drain(&pair, &uploads).await;
    eprintln!(
        "{} kills in {:.1} s: {} uploads ({resends} resends); mid-batch: leader {leader_mid_batch}, \
         helper {helper_mid_batch} times; all counted at {:.1} s",
        2 * KILLS_EACH,
        kills_done.as_secs_f64(),
        uploads.mixed.len() + 1,
        started.elapsed().as_secs_f64()
    );
    assert!(resends > 0, "no upload met a dead leader");
    stop_and_check(pair, &uploads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_while_the_helper_is_down_are_queued_and_counted_once_it_is_back() {
    let started = Instant::now();
    let mut pair = start_pair().await;
    let uploads = build_uploads(&pair, 0xd0e5, 120, 2).await;
    let acked = Arc::new(AtomicU64::new(0));
    let clients = start_clients(
        &pair.leader.url(),
        &uploads.mixed,
        2,
        Duration::from_millis(40),
        &acked,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    pair.helper.kill();
    let acked_before = acked.load(Ordering::SeqCst);
    // A batch the helper answered just before its kill may still be committed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counted_before = counted(&pair.leader.url()).await.expect("leader status");
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let (acked_during, counted_during) = (
        acked.load(Ordering::SeqCst) - acked_before,
        counted(&pair.leader.url()).await.expect("leader status"),
    );
    assert!(
        acked_during >= 20,
        "the leader acknowledged {acked_during} uploads without its helper"
    );
    assert_eq!(
        counted_during, counted_before,
        "the leader counted reports without its helper"
    );
    pair.helper.start().await;
    for c in clients {
        c.await.expect("client");
    }
    drain(&pair, &uploads).await;
    eprintln!(
        "{acked_during} uploads acknowledged while the helper was down; all counted at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    stop_and_check(pair, &uploads).await;
}
