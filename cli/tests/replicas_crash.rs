//! Crash test of the PostgreSQL store across replicas: three real daemon processes
//! (`serve --store postgres://…`) share one throwaway database under load from several
//! clients. Replicas are killed with SIGKILL at random moments (seeded) and restarted,
//! and the database itself is stopped once with `pg_ctl -m immediate` (a crash: no
//! checkpoint, recovery from the WAL at the next start) and started again. A client
//! resends a report until some replica acknowledges it, moving to the next replica on
//! every transient failure, always with the same report id.
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
use ldpcov_client::proto::v1::Encoding;
use ldpcov_estimate::{Accumulator, FOLDS};
use ldpcov_pg_cluster::PgCluster;
use rand::{Rng, SeedableRng};

use ldpcov_fixtures::spec;
use support::crash::{free_port, kill_if_running, run_client, spawn_serve, wait_ready};

mod support;

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
