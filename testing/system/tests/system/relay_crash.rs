//! Crash test of shuffled collections through both real daemons, each durable: the
//! `ldpcov-aggregator` binary (redb store and HPKE secret in a temporary `--data-dir`)
//! behind the `ldpcov-relay` binary (its own redb store), with devices sealing real
//! rank-one reports of two shuffled collections (minimum batch 10, window 1 s, so that
//! a batch is formed every second or so per collection while the test runs).
//!
//! The aggregator is killed with SIGKILL at random (seeded) moments while the relay
//! forwards batches to it — before a batch call, in the middle of one, or after its
//! commit but before the relay saw the answer — and restarted on the same directory;
//! then the relay and the aggregator are killed together a few times. Devices resend a
//! report (same submission id, same sealed bytes) until the relay acknowledges it,
//! each device once (a new device id per report: one report per device per window).
//!
//! At the end, after topping up the last windows and waiting until the relay holds
//! no batch, for each collection: the aggregator's count equals the number of reports
//! the relay acknowledged, its estimate is readable, and its store (opened directly)
//! holds exactly the integer accumulators of the acknowledged reports — so every
//! acknowledged report is counted once, none twice and nothing else. A relay that lost
//! a batch, or an aggregator that counted a resent batch (or a report resent in another
//! batch) again, fails it.

use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ldpcov_aggregator::{DurableConfig, DurableStore, Store};
use ldpcov_client::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_client::proto::v1::{GetCollectionRequest, GetEstimateRequest};
use ldpcov_client::{
    AggregatorClient, Collection, DiscreteGaussianSampler, PreparedRelayReport, ReportId,
    RetryPolicy, active_key, seal_report,
};
use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_privacy::mechanism::ReportEntries;
use ldpcov_privacy::wire::decode_payload;
use ldpcov_relay::DeviceTokenIssuer;
use ldpcov_seal::PublicKeyConfig;
use rand::{Rng, SeedableRng};
use tonic::transport::{Channel, Endpoint};

use crate::support;
use support::crash::{free_port, kill, spawn_serve, transient, wait_ready};
use support::embedded::RELAY_TOKEN;
use support::fake_aggregator::shuffled_spec;
use support::relay::{RelayFiles, relay_status, spawn_relay};

/// Kills of the aggregator alone, then of both daemons at once.
const AGGREGATOR_KILLS: usize = 15;
const BOTH_KILLS: usize = 4;
/// Concurrent device pools (each a sequence of devices), alternating collections.
const POOLS: u64 = 4;
const MIN_BATCH: u64 = 10;
const COLLECTIONS: [&str; 2] = ["shuffled-a", "shuffled-b"];
const DIM: u32 = 4;
const ADMIN: &str = "aggregator-admin-token-0123";
const RELAY_ADMIN: &str = "relay-admin-token-0123";
const DEVICE_SECRET: [u8; 32] = [0x42; 32];

/// A shuffled collection as a device sees it: its parameters and active key.
#[derive(Clone)]
struct Target {
    collection: Collection,
    key: PublicKeyConfig,
    /// The relay's own key (its layer over every report).
    relay_key: PublicKeyConfig,
}

/// One device's report: prepared and sealed as `prepare_relay_report` does (so that the
/// test knows its entries), sent with `submit_relay_report` under the device's own
/// token until the relay acknowledges it (the same bytes and submission id every
/// time). Returns its id and entries.
async fn report_until_acknowledged(
    maker: &mut AggregatorClient,
    target: &Target,
    relay: &Channel,
    aggregator_url: &str,
    device_id: &str,
    x: &[f64],
) -> (ReportId, ReportEntries) {
    let report = maker
        .prepare_report(&target.collection, x)
        .expect("prepare a report");
    let prepared = PreparedRelayReport {
        report_id: ReportId::try_from(report.report_id.as_slice()).expect("report id"),
        request: seal_report(&target.collection, &target.key, &target.relay_key, &report)
            .expect("seal"),
    };
    let token = DeviceTokenIssuer::from_bytes(DEVICE_SECRET)
        .issue(device_id)
        .expect("device token");
    let mut device = AggregatorClient::connect_lazy(aggregator_url)
        .expect("client")
        .with_relay(relay.clone(), &token)
        .expect("relay")
        .with_retry(RetryPolicy::no_retries())
        .with_timeout(Duration::from_secs(5));
    loop {
        match device.submit_relay_report(&prepared).await {
            Ok(_) => break,
            Err(e) if transient(&e) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) => panic!("non-transient failure for device {device_id}: {e}"),
        }
    }
    let entries = decode_payload(&target.collection, report.encoding, &report.payload)
        .expect("decode the report's entries");
    (prepared.report_id, entries)
}

/// A pool of devices reporting to `target` one after another until `stop`; returns
/// the acknowledged reports.
async fn device_pool(
    relay_url: String,
    aggregator_url: String,
    target: Target,
    pool: u64,
    stop: Arc<AtomicBool>,
) -> Vec<(ReportId, ReportEntries)> {
    let mut maker = AggregatorClient::connect_lazy(aggregator_url.clone())
        .expect("client")
        .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(pool));
    let relay = Endpoint::from_shared(relay_url)
        .expect("relay URL")
        .connect_lazy();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xde0_0000 + pool);
    let mut acked = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let x: Vec<f64> = (0..DIM).map(|_| rng.random_range(-0.5..0.5)).collect();
        let device = format!("dev-{pool}-{n}");
        n += 1;
        acked.push(
            report_until_acknowledged(&mut maker, &target, &relay, &aggregator_url, &device, &x)
                .await,
        );
    }
    acked
}

/// How long from now, `skip` later, until the next whole unix second.
fn until_next_second(skip: Duration) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        + skip;
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    skip + (Duration::from_secs(1) - into)
}

/// The aggregator's flags: its durable store, the relay's token, the admin token (the
/// HPKE secret is the default `hpke-secret.hex` in the data directory, so the keys
/// survive every restart).
fn aggregator_flags(dir: &Path) -> Vec<OsString> {
    vec![
        "--data-dir".into(),
        dir.join("aggregator").into(),
        "--relay-token-file".into(),
        dir.join("relay-token").into(),
        "--admin-token-file".into(),
        dir.join("admin-token").into(),
    ]
}

fn restart_aggregator(addr: SocketAddr, dir: &Path) -> Child {
    spawn_serve(addr, &aggregator_flags(dir), &dir.join("aggregator.log"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_aggregator_under_the_relay_loses_and_double_counts_nothing() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(dir.join("relay-token"), RELAY_TOKEN).expect("write");
    std::fs::write(dir.join("admin-token"), ADMIN).expect("write");
    std::fs::write(dir.join("relay-admin-token"), RELAY_ADMIN).expect("write");
    std::fs::write(dir.join("device-secret"), hex::encode(DEVICE_SECRET)).expect("write");
    let files = RelayFiles {
        relay_token: dir.join("relay-token"),
        device_secret: dir.join("device-secret"),
        admin_token: dir.join("relay-admin-token"),
        data: dir.join("relay"),
        log: dir.join("relay.log"),
        layer_key: None,
    };
    let aggregator_addr = free_port();
    let aggregator_url = format!("http://{aggregator_addr}");
    let relay_addr = free_port();
    let relay_url = format!("http://{relay_addr}");

    let mut aggregator = restart_aggregator(aggregator_addr, dir);
    wait_ready(&aggregator_url).await;
    let mut admin = AggregatorClient::connect(aggregator_url.clone())
        .await
        .expect("connect")
        .with_token(ADMIN.into())
        .expect("token");
    let mut raw = RawClient::connect(aggregator_url.clone())
        .await
        .expect("connect");
    // The relay binary's layer key: its default file in its data directory, created
    // here first (the relay then reads this one).
    std::fs::create_dir_all(&files.data).expect("relay data dir");
    let relay_key = ldpcov_seal::RelayKey::from_secret(
        &ldpcov_seal::MasterSecret::load_or_create(
            files.data.join(ldpcov_relay::constants::LAYER_KEY_FILE),
        )
        .expect("the relay's layer key"),
    )
    .public_config();
    let mut targets = Vec::new();
    for id in COLLECTIONS {
        admin
            .create_collection(shuffled_spec(id, MIN_BATCH, 1))
            .await
            .expect("create");
        let params = raw
            .get_collection(GetCollectionRequest {
                collection_id: id.into(),
            })
            .await
            .expect("parameters")
            .into_inner();
        let keys = &params.shuffle.as_ref().expect("shuffled").keys;
        targets.push(Target {
            collection: Collection::from_params(&params).expect("collection"),
            key: active_key(keys).expect("active key"),
            relay_key: relay_key.clone(),
        });
    }
    let mut relay = spawn_relay(relay_addr, &aggregator_url, &files, &[]);
    wait_ready(&relay_url).await;

    let stop = Arc::new(AtomicBool::new(false));
    let pools: Vec<_> = (0..POOLS)
        .map(|p| {
            tokio::spawn(device_pool(
                relay_url.clone(),
                aggregator_url.clone(),
                targets[p as usize % COLLECTIONS.len()].clone(),
                p,
                stop.clone(),
            ))
        })
        .collect();

    // The aggregator alone, at random moments, half of them aimed at batch calls.
    // Windows are 1 s long in unix seconds and reports arrive all the time, so each
    // window becomes due at a whole second and the relay (checking every 20 ms) sends
    // its batch then; opening and committing a batch of a few hundred reports takes
    // tens of milliseconds. An aimed kill lands a random 0–120 ms after a whole
    // second: before, during or just after a batch call (the ones just after its
    // commit make the relay resend a batch the aggregator has counted). Sometimes the
    // aggregator is killed again before it is back up.
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0a66);
    for _ in 0..AGGREGATOR_KILLS {
        if rng.random_bool(0.5) {
            let skip = Duration::from_millis(rng.random_range(0..1000));
            let offset = Duration::from_millis(rng.random_range(0..120));
            tokio::time::sleep(until_next_second(skip) + offset).await;
        } else {
            tokio::time::sleep(Duration::from_millis(rng.random_range(100..1200))).await;
        }
        kill(&mut aggregator);
        aggregator = restart_aggregator(aggregator_addr, dir);
        if rng.random_bool(0.7) {
            wait_ready(&aggregator_url).await;
        }
    }
    // Both at once: the moment the aggregator's count moves (it has committed a
    // batch; the relay may not have deleted it yet, and then sends it again after the
    // restart; the relay first), or at a random moment, in either order.
    for _ in 0..BOTH_KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..1200))).await;
        let aimed = rng.random_bool(0.7);
        if aimed {
            let before = admin.status(COLLECTIONS[0]).await.map_or(0, |s| s.reports);
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline
                && admin.status(COLLECTIONS[0]).await.map_or(0, |s| s.reports) == before
            {
            }
        }
        if aimed || rng.random_bool(0.5) {
            kill(&mut relay);
            kill(&mut aggregator);
        } else {
            kill(&mut aggregator);
            kill(&mut relay);
        }
        aggregator = restart_aggregator(aggregator_addr, dir);
        relay = spawn_relay(relay_addr, &aggregator_url, &files, &[]);
        wait_ready(&aggregator_url).await;
        wait_ready(&relay_url).await;
    }
    wait_ready(&aggregator_url).await;
    wait_ready(&relay_url).await;
    let load_secs = started.elapsed().as_secs_f64();
    // Every device finishes: each resends its last report until acknowledged.
    stop.store(true, Ordering::SeqCst);
    let mut acked: Vec<Vec<(ReportId, ReportEntries)>> = vec![Vec::new(); COLLECTIONS.len()];
    for (p, task) in pools.into_iter().enumerate() {
        acked[p % COLLECTIONS.len()].extend(task.await.expect("device pool"));
    }

    // Top up each last window to the minimum, then wait until the relay holds nothing.
    // The bound is above the relay's longest backoff between two attempts at a batch
    // (60 s, reached only after six failures in a row).
    let mut fillers: Vec<AggregatorClient> = (0..COLLECTIONS.len() as u64)
        .map(|i| {
            AggregatorClient::connect_lazy(aggregator_url.clone())
                .expect("client")
                .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(100 + i))
        })
        .collect();
    let relay_channel = Endpoint::from_shared(relay_url.clone())
        .expect("relay URL")
        .connect_lazy();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut filler = 0;
    loop {
        assert!(Instant::now() < deadline, "the relay did not drain");
        let mut drained = true;
        for (i, id) in COLLECTIONS.iter().enumerate() {
            let status = relay_status(&relay_url, id, RELAY_ADMIN)
                .await
                .expect("relay status");
            if status.window_reports > 0 || status.pending_batches > 0 {
                drained = false;
            }
            if status.window_reports > 0 && status.window_reports < MIN_BATCH {
                let device = format!("filler-{filler}");
                filler += 1;
                acked[i].push(
                    report_until_acknowledged(
                        &mut fillers[i],
                        &targets[i],
                        &relay_channel,
                        &aggregator_url,
                        &device,
                        &[0.1, 0.1, 0.1, 0.1],
                    )
                    .await,
                );
            }
        }
        if drained {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The daemons' view: counts and a readable estimate.
    let mut forwarded_reports = 0;
    for (i, id) in COLLECTIONS.iter().enumerate() {
        let status = admin.status(id).await.expect("status");
        assert_eq!(
            status.reports,
            acked[i].len() as u64,
            "{id}: the aggregator's count is not the number of reports the relay acknowledged"
        );
        let estimate = admin
            .estimate(GetEstimateRequest {
                collection_id: id.to_string(),
                ..Default::default()
            })
            .await
            .expect("estimate");
        assert_eq!(
            estimate.upper_triangle.len(),
            (DIM * (DIM + 1) / 2) as usize
        );
        forwarded_reports += relay_status(&relay_url, id, RELAY_ADMIN)
            .await
            .expect("relay status")
            .forwarded_reports;
    }
    kill(&mut relay);
    kill(&mut aggregator);

    // The store's exact accumulators are those of the acknowledged reports.
    let store = DurableStore::open(&dir.join("aggregator"), DurableConfig::default())
        .expect("open the aggregator's store");
    let mut total = 0;
    for (i, target) in targets.iter().enumerate() {
        let collection = &target.collection;
        let mut ids = HashSet::new();
        for (id, _) in &acked[i] {
            assert!(ids.insert(*id), "a report id was acknowledged twice");
        }
        let mut expected = Accumulator::new(collection.entries(), FOLDS);
        let refs: Vec<_> = acked[i].iter().map(|(id, e)| (id.fold(FOLDS), e)).collect();
        expected.add_reports(&refs);
        let got = store.snapshot(collection.id()).await.expect("snapshot").acc;
        assert_eq!(got.count, expected.count, "lost or double-counted reports");
        assert_eq!(got.fold_counts, expected.fold_counts);
        assert_eq!(got.fold_sums, expected.fold_sums);
        assert_eq!(got.sum_squares, expected.sum_squares);
        total += acked[i].len();
    }

    // What the kills hit, from the relay's log (no token in it either).
    let log = std::fs::read_to_string(&files.log).expect("relay log");
    let failed_calls = log.matches("cannot forward a batch").count();
    let forwarded = log.matches("batch forwarded").count();
    let with_duplicates = log
        .lines()
        .filter(|l| l.contains("batch forwarded") && !l.contains("duplicates=0"))
        .count();
    assert!(!log.contains(RELAY_TOKEN) && !log.contains(RELAY_ADMIN));
    eprintln!(
        "{AGGREGATOR_KILLS} aggregator kills + {BOTH_KILLS} of both in {load_secs:.1} s: \
         {total} reports acknowledged by the relay ({} and {}), counted exactly once; \
         {forwarded} batches forwarded ({forwarded_reports} reports), {failed_calls} failed \
         batch calls, {with_duplicates} batches resent after their commit (duplicates \
         found); {:.1} s in all",
        acked[0].len(),
        acked[1].len(),
        started.elapsed().as_secs_f64()
    );
    assert!(total >= 200, "too little load: {total}");
}
