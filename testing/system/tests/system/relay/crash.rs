//! Crash test: the real `ldpcov-relay` binary on a temporary data directory, under load
//! from concurrent devices, is killed with SIGKILL at random (seeded) moments and
//! restarted on the same directory, while it forwards batches to an in-process fake
//! aggregator that counts each sealed report once. Devices resend a report (same
//! submission id, same bytes) until it is acknowledged. At the end every acknowledged
//! report has been counted exactly once, nothing unacknowledged was counted, no batch
//! was below the minimum, and a batch sent again kept its id and order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ldpcov_proto::v1::RelayReport;
use ldpcov_proto::v1::relay_client::RelayClient;
use ldpcov_relay::DeviceTokenIssuer;
use rand::{Rng, SeedableRng};
use tonic::Code;

use crate::support;
use crate::support::crash::{free_port, wait_ready};
use crate::support::embedded::RELAY_TOKEN;
use crate::support::fake_aggregator::{FakeAggregator, sealed, shuffled_spec, tag};
use crate::support::grpc::with_token;
use crate::support::relay::{RelayFiles, spawn_relay, write_relay_secrets};

const KILLS: usize = 20;
const DEVICES: u64 = 4;
const MIN: u64 = 10;
const ADMIN: &str = "crash-admin-token";
const SECRET: [u8; 32] = [0x33; 32];

fn transient(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

/// What one device pool did: acknowledged tags, and tags that needed a resend.
#[derive(Default)]
struct Outcome {
    acked: Vec<u64>,
    resent: HashSet<u64>,
}

/// The fake aggregator's report `tag`: a recognisable "ciphertext".
fn fake_report(tag: u64) -> RelayReport {
    RelayReport {
        collection_id: "s".into(),
        submission_id: tag.to_le_bytes().repeat(2),
        outer: Some(support::relay::outer("s", &sealed(tag))),
    }
}

/// Sends one report (tag, submission id) until acknowledged; true if it was resent.
async fn send_until_acked(url: &str, token: &str, tag: u64) -> bool {
    send_report_until_acked(url, token, tag, fake_report(tag)).await
}

/// Sends `report` until acknowledged; true if it was resent.
async fn send_report_until_acked(url: &str, token: &str, tag: u64, report: RelayReport) -> bool {
    let mut resent = false;
    loop {
        let attempt = async {
            let mut client = RelayClient::connect(url.to_string())
                .await
                .map_err(|_| Code::Unavailable)?;
            let mut request = with_token(report.clone(), Some(token));
            request.set_timeout(Duration::from_secs(5));
            client
                .submit_sealed_report(request)
                .await
                .map_err(|s| s.code())
        };
        match attempt.await {
            Ok(_) => return resent,
            Err(code) if transient(code) => {
                resent = true;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(code) => panic!("non-transient failure {code:?} for report {tag}"),
        }
    }
}

async fn device_pool(url: String, pool: u64, stop: Arc<AtomicBool>) -> Outcome {
    let issuer = DeviceTokenIssuer::from_bytes(SECRET);
    let mut outcome = Outcome::default();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        // A new device per report: no device reports twice in a window.
        let tag = pool * 1_000_000 + n;
        n += 1;
        let token = issuer.issue(&format!("dev-{tag}")).expect("id");
        if send_until_acked(&url, &token, tag).await {
            outcome.resent.insert(tag);
        }
        outcome.acked.push(tag);
    }
    outcome
}

async fn status(url: &str) -> Option<ldpcov_proto::v1::RelayStatus> {
    status_of(url, "s").await
}

async fn status_of(url: &str, collection: &str) -> Option<ldpcov_proto::v1::RelayStatus> {
    support::relay::relay_status(url, collection, ADMIN).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_report_and_counts_none_twice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = RelayFiles::in_dir(tmp.path(), &tmp.path().join("data"));
    write_relay_secrets(tmp.path(), SECRET, ADMIN);
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", MIN, 1), true);
    let aggregator = fake.serve().await;
    let addr = free_port();
    let url = format!("http://{addr}");
    let mut relay = spawn_relay(addr, &format!("http://{aggregator}"), &files, &[]);
    wait_ready(&url).await;

    let stop = Arc::new(AtomicBool::new(false));
    let pools: Vec<_> = (0..DEVICES)
        .map(|p| tokio::spawn(device_pool(url.clone(), p, stop.clone())))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0001);
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..500))).await;
        relay.kill().expect("SIGKILL");
        relay.wait().expect("reap");
        relay = spawn_relay(addr, &format!("http://{aggregator}"), &files, &[]);
        if rng.random_bool(0.7) {
            wait_ready(&url).await;
        }
    }
    wait_ready(&url).await;
    stop.store(true, Ordering::SeqCst);
    let mut acked = Vec::new();
    let mut resent = HashSet::new();
    for p in pools {
        let o = p.await.expect("device pool");
        acked.extend(o.acked);
        resent.extend(o.resent);
    }
    // Top up the last window to the minimum, then wait until every batch is forwarded.
    let issuer = DeviceTokenIssuer::from_bytes(SECRET);
    let mut filler = 9_000_000;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the relay did not drain");
        let Some(s) = status(&url).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if s.window_reports == 0 && s.pending_batches == 0 {
            break;
        }
        if s.window_reports > 0 && s.window_reports < MIN {
            let token = issuer.issue(&format!("filler-{filler}")).expect("id");
            send_until_acked(&url, &token, filler).await;
            acked.push(filler);
            filler += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.kill().expect("SIGKILL");
    relay.wait().expect("reap");

    let state = fake.state();
    assert!(state.violations.is_empty(), "{:?}", state.violations);
    // Every acknowledged report counted exactly once, nothing else counted.
    let acked_set: HashSet<u64> = acked.iter().copied().collect();
    assert_eq!(acked_set.len(), acked.len(), "a tag was acknowledged twice");
    let counted: HashSet<u64> = state
        .counted
        .iter()
        .map(|c| u64::from_le_bytes(c[..8].try_into().expect("tag")))
        .collect();
    let lost: Vec<_> = acked_set.difference(&counted).collect();
    let extra: Vec<_> = counted.difference(&acked_set).collect();
    assert!(
        lost.is_empty() && extra.is_empty(),
        "lost {lost:?}, extra {extra:?}"
    );
    assert_eq!(state.accepted, acked.len() as u64);
    // A batch sent more than once kept its id and order; a report in two different
    // batches is one whose device resent it after a crash lost the acknowledgement
    // (and its window closed meanwhile): the aggregator counts it once.
    let mut batches: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for call in &state.calls {
        let tags: Vec<u64> = call.reports().iter().map(tag).collect();
        assert!(tags.len() as u64 >= MIN);
        let previous = batches
            .entry(call.batch_id())
            .or_insert_with(|| tags.clone());
        assert_eq!(previous, &tags, "a batch was resent with another content");
    }
    let mut in_batches: HashMap<u64, usize> = HashMap::new();
    for tags in batches.values() {
        for t in tags {
            *in_batches.entry(*t).or_default() += 1;
        }
    }
    for (t, n) in &in_batches {
        assert!(
            *n == 1 || resent.contains(t),
            "report {t} in {n} batches, never resent"
        );
    }
    let resends = state.calls.len() - batches.len();
    eprintln!(
        "{} reports acknowledged and counted once; {} batches, {} batch resends, {} device resends, {} duplicates at the aggregator",
        acked.len(),
        batches.len(),
        resends,
        resent.len(),
        state.duplicates
    );
    assert!(acked.len() > 100, "too little load: {}", acked.len());
    // Logs: no token, no device id.
    let log = std::fs::read_to_string(&files.log).expect("log");
    assert!(!log.contains(RELAY_TOKEN) && !log.contains(ADMIN) && !log.contains("dev-"));
    assert!(!log.contains(&hex::encode(SECRET)));
}

/// A real report of collection "real" for `x`, sealed to the aggregator's key (read
/// from the aggregator by `maker`) and under the test relays' layer, submission id
/// from `tag`.
async fn real_report(
    maker: &mut ldpcov_client::AggregatorClient,
    collection: &ldpcov_client::Collection,
    x: &[f64],
    tag: u64,
) -> RelayReport {
    let (_, sealed) = maker
        .prepare_sealed_report(collection, x)
        .await
        .expect("prepare");
    RelayReport {
        collection_id: "real".into(),
        submission_id: tag.to_le_bytes().repeat(2),
        outer: Some(support::relay::outer("real", &sealed)),
    }
}

/// Real sealed reports of collection "real" by `pool`'s devices, sent until
/// acknowledged; returns how many were acknowledged.
async fn real_device_pool(
    relay_url: String,
    aggregator_url: String,
    pool: u64,
    stop: Arc<AtomicBool>,
) -> u64 {
    let issuer = DeviceTokenIssuer::from_bytes(SECRET);
    let mut maker = ldpcov_client::AggregatorClient::connect(aggregator_url)
        .await
        .expect("connect")
        .with_noise_sampler(ldpcov_client::DiscreteGaussianSampler::from_seed_for_simulation(pool));
    let collection = maker.collection("real").await.expect("collection");
    let mut acked = 0;
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let tag = pool * 1_000_000 + n;
        n += 1;
        let request = real_report(&mut maker, &collection, &[0.3, -0.2, 0.1, 0.0], tag).await;
        let token = issuer.issue(&format!("dev-{tag}")).expect("id");
        send_report_until_acked(&relay_url, &token, tag, request).await;
        acked += 1;
    }
    acked
}

/// As above with the real aggregator (an embedded one, in this process, opening the
/// sealed reports with its HPKE secret): its count must equal the reports the relay
/// acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_the_real_aggregator_counts_every_acknowledged_report_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = RelayFiles::in_dir(tmp.path(), &tmp.path().join("data"));
    write_relay_secrets(tmp.path(), SECRET, ADMIN);
    let (aggregator, mut admin) = support::embedded::embedded_aggregator("agg-admin").await;
    admin
        .create_collection(shuffled_spec("real", MIN, 1))
        .await
        .expect("create");
    let addr = free_port();
    let url = format!("http://{addr}");
    let mut relay = spawn_relay(addr, &format!("http://{}", aggregator.addr()), &files, &[]);
    wait_ready(&url).await;
    let stop = Arc::new(AtomicBool::new(false));
    let pools: Vec<_> = (0..DEVICES)
        .map(|p| {
            tokio::spawn(real_device_pool(
                url.clone(),
                aggregator.url(),
                p,
                stop.clone(),
            ))
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0002);
    for _ in 0..KILLS / 2 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..500))).await;
        relay.kill().expect("SIGKILL");
        relay.wait().expect("reap");
        relay = spawn_relay(addr, &format!("http://{}", aggregator.addr()), &files, &[]);
        if rng.random_bool(0.7) {
            wait_ready(&url).await;
        }
    }
    wait_ready(&url).await;
    stop.store(true, Ordering::SeqCst);
    let mut acked = 0;
    for p in pools {
        acked += p.await.expect("pool");
    }
    // Top up and drain, as above.
    let issuer = DeviceTokenIssuer::from_bytes(SECRET);
    let mut maker = ldpcov_client::AggregatorClient::connect(aggregator.url())
        .await
        .expect("connect");
    let collection = maker.collection("real").await.expect("collection");
    let mut filler = 9_000_000;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the relay did not drain");
        let Some(s) = status_of(&url, "real").await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if s.window_reports == 0 && s.pending_batches == 0 {
            break;
        }
        if s.window_reports > 0 && s.window_reports < MIN {
            let request = real_report(&mut maker, &collection, &[0.1, 0.1, 0.1, 0.1], filler).await;
            let token = issuer.issue(&format!("filler-{filler}")).expect("id");
            send_report_until_acked(&url, &token, filler, request).await;
            acked += 1;
            filler += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.kill().expect("SIGKILL");
    relay.wait().expect("reap");
    let counted = admin.status("real").await.expect("status").reports;
    eprintln!("real aggregator: {acked} reports acknowledged by the relay, {counted} counted");
    assert_eq!(counted, acked);
    assert!(acked > 50, "too little load: {acked}");
    aggregator.shutdown().await.expect("shutdown");
}
