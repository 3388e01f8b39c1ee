//! Crash test of the PostgreSQL store across replicas: three real daemon processes
//! (`serve --store postgres://…`) share one throwaway database under load from several
//! clients. Replicas are killed with SIGKILL at random moments (seeded) and restarted,
//! and the database itself is stopped once with `pg_ctl -m immediate` (a crash: no
//! checkpoint, recovery from the WAL at the next start) and started again. A client
//! resends a report until some replica acknowledges it, moving to the next replica on
//! every transient failure, always with the same report id.
//!
//! A second test kills a replica in the middle of a fold (its fold transaction holds,
//! written but not committed, through fault injection) while another replica takes
//! reports: nothing folded is lost, nothing is folded twice, and the sums are exact
//! with the rows still unfolded and after they are folded.
//!
//! At the end the merged exact sums (every replica's partial sums, read through a fresh
//! store handle) must equal the accumulators of the set of acknowledged reports:
//! nothing lost, nothing counted twice — whatever replica counted a report, and even
//! when a commit's answer was lost with the replica or the database.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ldpcov_aggregator::{PostgresConfig, PostgresStore, Store};
use ldpcov_client::AggregatorClient;
use ldpcov_client::proto::v1::{Encoding, LocalMechanism};
use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_pg_cluster::PgCluster;
use rand::{Rng, SeedableRng};

use ldpcov_fixtures::spec;
use support::crash::{
    free_port, kill, kill_if_running, run_client, spawn_serve, spawn_serve_with_env, wait_ready,
};

use crate::support;

const REPLICAS: usize = 3;
const KILLS: usize = 30;
/// The kill after which the database is crashed and restarted.
const DATABASE_CRASH_AT: usize = 12;
const CLIENTS: usize = 6;
const DIM: u32 = 4;
const COLLECTION: &str = "replicas";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_and_the_database_crash_and_nothing_is_lost_or_counted_twice() {
    let mut cluster = PgCluster::start_or_panic();
    let db = cluster.database_or_panic("replicas");
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("replicas.log");
    let addrs: Vec<SocketAddr> = (0..REPLICAS).map(|_| free_port()).collect();
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let started = Instant::now();

    // The first replica applies the migrations; the others then find them applied.
    let mut replicas = vec![spawn_serve(addrs[0], &["--store", db.as_str()], &log)];
    wait_ready(&urls[0]).await;
    for addr in &addrs[1..] {
        replicas.push(spawn_serve(*addr, &["--store", db.as_str()], &log));
    }
    for url in &urls[1..] {
        wait_ready(url).await;
    }
    let mut admin = AggregatorClient::connect(urls[0].clone())
        .await
        .expect("connect");
    admin
        .create_collection(spec(COLLECTION, DIM).encoding(Encoding::I32Le).build())
        .await
        .expect("create");
    // Created on one replica, visible on every other.
    let collection = admin.collection(COLLECTION).await.expect("collection");
    for url in &urls[1..] {
        let mut other = AggregatorClient::connect(url.clone())
            .await
            .expect("connect");
        assert_eq!(
            other.collection(COLLECTION).await.expect("collection"),
            collection
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let failovers = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            tokio::spawn(run_client(
                urls.clone(),
                collection.clone(),
                2000 + c as u64,
                stop.clone(),
                acks.clone(),
                failovers.clone(),
            ))
        })
        .collect();

    let mut rng = rand::rngs::StdRng::seed_from_u64(0xbadd_b10c);
    for k in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
        if k == DATABASE_CRASH_AT {
            // The database crashes under load and comes back: in-flight commits fail
            // (or succeed without an answer); replicas reconnect through their pools.
            cluster.stop().expect("pg_ctl -m immediate stop");
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..300))).await;
            cluster.restart().expect("restart PostgreSQL");
        }
        let r = rng.random_range(0..REPLICAS);
        kill_if_running(&mut replicas[r]);
        replicas[r] = spawn_serve(addrs[r], &["--store", db.as_str()], &log);
        if rng.random_bool(0.5) {
            wait_ready(&urls[r]).await;
        }
    }
    // Every replica up (one started while the database was down exits: start it again).
    for (r, replica) in replicas.iter_mut().enumerate() {
        if replica.try_wait().expect("try_wait").is_some() {
            *replica = spawn_serve(addrs[r], &["--store", db.as_str()], &log);
        }
        wait_ready(&urls[r]).await;
    }
    // Let every client finish: each resends its last reports until acknowledged.
    stop.store(true, Ordering::SeqCst);
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.expect("client task"));
    }
    for replica in &mut replicas {
        kill_if_running(replica);
    }

    let mut expected = Accumulator::new(collection.entries(), FOLDS);
    let mut ids = std::collections::HashSet::new();
    for (id, _) in &acked {
        assert!(ids.insert(*id), "a report id was acknowledged twice");
    }
    let refs: Vec<_> = acked.iter().map(|(id, e)| (id.fold(FOLDS), e)).collect();
    expected.add_reports(&refs);
    let store = PostgresStore::open(&db, PostgresConfig::default())
        .await
        .expect("open the store");
    let got = store.snapshot(COLLECTION).await.expect("snapshot").acc;
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let failovers = failovers.load(Ordering::Relaxed);
    let refused_commits = log_text.matches("not committed").count();
    eprintln!(
        "{KILLS} replica kills and one database crash, {} acknowledged reports ({} acknowledgements), {failovers} failovers, {refused_commits} failed commits logged, {:.1} s",
        acked.len(),
        acks.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    // The failures really happened: clients moved to another replica, and the
    // database crash failed commits in flight.
    assert!(failovers > 0, "no client ever failed over");
    assert!(
        !log_text.contains("panicked"),
        "a replica panicked:\n{log_text}"
    );
    assert!(acked.len() >= 200, "too little load: {}", acked.len());
    assert_eq!(got.count, expected.count, "lost or double-counted reports");
    assert_eq!(got.fold_counts, expected.fold_counts);
    assert_eq!(got.fold_sums, expected.fold_sums);
    assert_eq!(got.sum_squares, expected.sum_squares);
}

/// The accumulators of the acknowledged reports `acked` (each id acknowledged once).
fn expected_sums(
    collection: &ldpcov_client::Collection,
    acked: &[(
        ldpcov_client::ReportId,
        ldpcov_privacy::mechanism::ReportEntries,
    )],
) -> Accumulator {
    let mut ids = std::collections::HashSet::new();
    for (id, _) in acked {
        assert!(ids.insert(*id), "a report id was acknowledged twice");
    }
    let mut expected = Accumulator::new(collection.entries(), FOLDS);
    let refs: Vec<_> = acked.iter().map(|(id, e)| (id.fold(FOLDS), e)).collect();
    expected.add_reports(&refs);
    expected
}

/// Waits (at most a minute) until `log` holds `line`.
async fn wait_for_log(log: &std::path::Path, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(line)
    {
        assert!(Instant::now() < deadline, "no {line:?} in the log");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_in_the_middle_of_a_fold_loses_and_doubles_nothing() {
    const HOLDING: &str = "fold holding its transaction before the commit";
    let cluster = PgCluster::start_or_panic();
    let db = cluster.database_or_panic("midfold");
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("midfold.log");
    let (folder_addr, ingest_addr) = (free_port(), free_port());
    let (folder_url, ingest_url) = (
        format!("http://{folder_addr}"),
        format!("http://{ingest_addr}"),
    );
    // The folder folds every 100 ms and holds each fold open for a minute before its
    // commit; the ingesting replica never folds.
    let folder_flags = ["--store", db.as_str(), "--fold-interval-ms", "100"];
    let hold = [("LDPCOV_FAULT_FOLD_HOLD_MS", "60000")];
    let mut ingest = spawn_serve(
        ingest_addr,
        &["--store", db.as_str(), "--fold-interval-ms", "0"],
        &log,
    );
    wait_ready(&ingest_url).await;
    // Rank-one reports at p = 16: small batches are appended as report logs.
    let mut spec = spec("midfold", 16).build();
    spec.local_mechanism = LocalMechanism::RankOne as i32;
    spec.encoding = Encoding::Unspecified as i32;
    spec.delta = 0.0;
    let mut admin = AggregatorClient::connect(ingest_url.clone())
        .await
        .expect("connect");
    admin.create_collection(spec).await.expect("create");
    let collection = admin.collection("midfold").await.expect("collection");

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let failovers = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..4)
        .map(|c| {
            tokio::spawn(run_client(
                vec![ingest_url.clone()],
                collection.clone(),
                7000 + c,
                stop.clone(),
                acks.clone(),
                failovers.clone(),
            ))
        })
        .collect();
    let store = PostgresStore::open(
        &db,
        PostgresConfig {
            fold_interval: Duration::ZERO,
            ..PostgresConfig::default()
        },
    )
    .await
    .expect("open the store");
    while store.pending_deltas().await.expect("pending") < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Two folds die in the middle, one after the other, under load.
    for _ in 0..2 {
        let mut folder = spawn_serve_with_env(folder_addr, &folder_flags, &hold, &log);
        wait_for_log(&log, HOLDING).await;
        kill(&mut folder);
        // Its transaction is rolled back: the next fold holds again (the log is reset
        // so that the wait sees the new line).
        std::fs::write(&log, "").expect("reset the log");
    }
    // A replica that folds for real, while the clients still send.
    let mut folder = spawn_serve(folder_addr, &folder_flags, &log);
    wait_ready(&folder_url).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.expect("client task"));
    }
    kill(&mut folder);
    kill(&mut ingest);
    let expected = expected_sums(&collection, &acked);
    assert!(acked.len() >= 50, "too little load: {}", acked.len());
    // Exact with whatever is still unfolded, then after everything is folded.
    assert_eq!(
        store.snapshot("midfold").await.expect("snapshot").acc,
        expected
    );
    assert_eq!(store.count("midfold").await.expect("count"), expected.count);
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.pending_deltas().await.expect("pending") > 0 {
        store.fold().await.expect("fold");
        assert!(Instant::now() < deadline, "rows still unfolded after 30 s");
    }
    let folded = store.snapshot("midfold").await.expect("snapshot").acc;
    assert_eq!(
        folded.count, expected.count,
        "lost or double-counted reports"
    );
    assert_eq!(folded, expected);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !log_text.contains("panicked"),
        "a replica panicked:\n{log_text}"
    );
}
