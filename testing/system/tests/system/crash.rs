//! Crash test of the durable store: the real daemon binary runs on a temporary data
//! directory under load from several concurrent clients and is killed with SIGKILL at
//! random moments (seeded), then restarted on the same directory. Clients resend every
//! report until it is acknowledged (same id, so resending is safe). At the end the
//! store is opened directly and its exact integer accumulators must equal those of the
//! set of acknowledged reports: nothing lost, nothing counted twice — for a Gaussian
//! collection and a rank-one one side by side.
//!
//! A second test kills the daemon while a DeleteCollection is in flight: the store
//! must then hold either the whole collection (accumulators and seen report ids) or
//! nothing of it. A third kills it while central releases are being recorded: the
//! privacy budget spent must stay exactly the sum of the recorded releases, and every
//! acknowledged release must still be there.

use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ldpcov_aggregator::Store;
use ldpcov_aggregator::{DurableConfig, DurableStore};
use ldpcov_client::proto::v1::{
    CentralMechanism, CentralRelease, CollectionSpec, DeleteCollectionRequest, Encoding,
    GetEstimateRequest, GetStatusRequest, LocalMechanism, Moments, NoThreshold, PrivacyModel,
    Report, get_estimate_request::Threshold,
};
use ldpcov_client::{AggregatorClient, Collection};
use ldpcov_client::{ReportId, proto::v1::aggregator_client::AggregatorClient as RawClient};
use ldpcov_estimate::{Accumulator, FOLDS};
use rand::{Rng, SeedableRng};

use ldpcov_fixtures::spec;
use support::crash::{free_port, kill, run_client, spawn_serve, wait_ready};

use crate::support;

const KILLS: usize = 22;
const CLIENTS: usize = 6;
const DIM: u32 = 4;
const COLLECTION: &str = "crash";
const RANK_ONE: &str = "crash-rank-one";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_nothing_and_counts_nothing_twice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let log = tmp.path().join("daemon.log");
    let addr = free_port();
    let url = format!("http://{addr}");
    let started = Instant::now();

    let mut daemon = spawn_serve(addr, &[OsStr::new("--data-dir"), data.as_os_str()], &log);
    wait_ready(&url).await;
    let mut admin = AggregatorClient::connect(url.clone())
        .await
        .expect("connect");
    admin
        .create_collection(spec(COLLECTION, DIM).encoding(Encoding::I32Le).build())
        .await
        .expect("create");
    // Half the clients report to a rank-one collection: its i16 reports are expanded on
    // ingest, and must survive the kills as exactly.
    admin
        .create_collection(CollectionSpec {
            local_mechanism: LocalMechanism::RankOne as i32,
            delta: 0.0,
            ..spec(RANK_ONE, DIM).epsilon(2.0).build()
        })
        .await
        .expect("create rank-one");
    let collections = [
        admin.collection(COLLECTION).await.expect("collection"),
        admin.collection(RANK_ONE).await.expect("collection"),
    ];

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            tokio::spawn(run_client(
                vec![url.clone()],
                collections[c % 2].clone(),
                1000 + c as u64,
                stop.clone(),
                acks.clone(),
                Arc::default(),
            ))
        })
        .collect();

    // Kill at random moments: sometimes during start-up and recovery, mostly under load.
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for _ in 0..KILLS {
        let delay = Duration::from_millis(rng.random_range(0..400));
        tokio::time::sleep(delay).await;
        kill(&mut daemon);
        daemon = spawn_serve(addr, &[OsStr::new("--data-dir"), data.as_os_str()], &log);
        if rng.random_bool(0.7) {
            wait_ready(&url).await;
        }
    }
    wait_ready(&url).await;
    // Let every client finish: each resends its last report until acknowledged.
    stop.store(true, Ordering::SeqCst);
    let mut acked = [Vec::new(), Vec::new()];
    for (c, t) in tasks.into_iter().enumerate() {
        acked[c % 2].extend(t.await.expect("client task"));
    }
    kill(&mut daemon);

    let store = DurableStore::open(&data, DurableConfig::default()).expect("open store");
    for (collection, acked) in collections.iter().zip(&acked) {
        // The expected accumulators of the acknowledged reports.
        let mut expected = Accumulator::new(collection.entries(), FOLDS);
        let mut ids = std::collections::HashSet::new();
        for (id, _) in acked {
            assert!(ids.insert(*id), "a report id was acknowledged twice");
        }
        // Through the same batched addition as the daemon's (a rank-one report's
        // off-diagonal sums of squares are summed from rounded squares).
        let refs: Vec<_> = acked.iter().map(|(id, e)| (id.fold(FOLDS), e)).collect();
        expected.add_reports(&refs);
        let got = store.snapshot(collection.id()).await.expect("snapshot").acc;
        eprintln!(
            "{}: {KILLS} kills, {} acknowledged reports ({} acknowledgements in all), {:.1} s",
            collection.id(),
            acked.len(),
            acks.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        );
        assert!(acked.len() >= 100, "too little load: {}", acked.len());
        assert_eq!(got.count, expected.count, "lost or double-counted reports");
        assert_eq!(got.fold_counts, expected.fold_counts);
        assert_eq!(got.fold_sums, expected.fold_sums);
        assert_eq!(got.sum_squares, expected.sum_squares);
    }
}

/// Rounds of create, fill, delete-and-SIGKILL.
const DELETE_ROUNDS: u64 = 12;
/// Reports in each collection that is deleted.
const DELETE_REPORTS: usize = 1500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_sigkill_leaves_the_whole_collection_or_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let log = tmp.path().join("daemon.log");
    let addr = free_port();
    let url = format!("http://{addr}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xde1e7e);
    let (mut kept, mut deleted) = (0, 0);
    for round in 0..DELETE_ROUNDS {
        let id = format!("victim-{round}");
        let collection_spec = spec(&id, DIM)
            .encoding(Encoding::I32Le)
            // Explicit, so the local `from_spec` and the server's create agree.
            .moments(Moments::SecondMoment)
            .build();
        let collection = Collection::from_spec(&collection_spec).expect("spec");
        let mut daemon = spawn_serve(addr, &[OsStr::new("--data-dir"), data.as_os_str()], &log);
        wait_ready(&url).await;
        let mut admin = AggregatorClient::connect(url.clone())
            .await
            .expect("connect");
        admin
            .create_collection(collection_spec)
            .await
            .expect("create");
        let reports: Vec<(ReportId, Vec<i32>)> = (0..DELETE_REPORTS)
            .map(|_| {
                let id = ReportId(rng.random());
                let entries = (0..collection.entries())
                    .map(|_| rng.random_range(-1000..1000))
                    .collect();
                (id, entries)
            })
            .collect();
        let wire: Vec<Report> = reports
            .iter()
            .map(|(rid, entries)| Report {
                collection_id: id.clone(),
                report_id: rid.0.to_vec(),
                encoding: Encoding::I32Le as i32,
                payload: entries.iter().flat_map(|v| v.to_le_bytes()).collect(),
            })
            .collect();
        let sent = admin.submit_stream(wire).await.expect("fill");
        assert_eq!(sent.accepted, DELETE_REPORTS as u64);
        // The delete, and a SIGKILL at a random moment around its commit.
        let delete = {
            let url = url.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let mut raw = RawClient::connect(url).await.expect("connect");
                raw.delete_collection(DeleteCollectionRequest { collection_id: id })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..2_500))).await;
        kill(&mut daemon);
        let answered = delete.await.expect("delete task").is_ok();

        let store = DurableStore::open(&data, DurableConfig::default()).expect("open store");
        let mut expected = Accumulator::new(collection.entries(), FOLDS);
        for (rid, entries) in &reports {
            expected.add(rid.fold(FOLDS), entries);
        }
        let valid: Vec<_> = reports
            .iter()
            .map(|(rid, entries)| ldpcov_aggregator::ValidReport {
                report_id: *rid,
                entries: entries.clone().into(),
            })
            .collect();
        match store.snapshot(&id).await {
            Ok(snapshot) => {
                assert!(
                    !answered,
                    "round {round}: delete acknowledged, collection still there"
                );
                assert_eq!(snapshot.acc, expected, "round {round}: partial collection");
                // Its seen report ids are all still there.
                let again = store.submit(&id, valid).await.expect("resubmit");
                assert_eq!(again.duplicates, DELETE_REPORTS as u64, "round {round}");
                kept += 1;
            }
            Err(ldpcov_aggregator::StoreError::NotFound(_)) => {
                // Nothing of it is left: created again, every old id counts anew.
                store
                    .create_collection(collection.clone())
                    .await
                    .expect("recreate");
                let again = store.submit(&id, valid).await.expect("resubmit");
                assert_eq!(
                    again.accepted, DELETE_REPORTS as u64,
                    "round {round}: seen ids left"
                );
                store.delete_collection(&id).await.expect("clean up");
                deleted += 1;
            }
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    eprintln!("{DELETE_ROUNDS} deletes raced SIGKILL: {kept} kept whole, {deleted} deleted whole");
}

/// Releases raced against SIGKILL in [`central_releases_racing_sigkill_keep_the_budget_exact`].
const RELEASE_ROUNDS: u64 = 12;

/// The GetEstimate request of round `round`'s release: GaussCov at its own ρ (so each
/// round is a new ledger key), no threshold, no projection (the noisy average itself).
fn release_request(round: u64) -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: "curated".into(),
        threshold: Some(Threshold::None(NoThreshold {})),
        skip_psd_projection: true,
        release: Some(CentralRelease {
            mechanism: CentralMechanism::GaussCov as i32,
            rho: release_rho(round),
            epsilon: 0.0,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// ρ of round `round`'s release; all of them together fit the budget (ε = 1 at
/// δ = 10⁻⁶ gives ρ ≈ 0.0177; Σ over 12 rounds of 0.0001·(r + 1) = 0.0078).
fn release_rho(round: u64) -> f64 {
    0.0001 * (round + 1) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn central_releases_racing_sigkill_keep_the_budget_exact() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let log = tmp.path().join("daemon.log");
    let addr = free_port();
    let url = format!("http://{addr}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xb0d9e7);
    let mut daemon = spawn_serve(addr, &[OsStr::new("--data-dir"), data.as_os_str()], &log);
    wait_ready(&url).await;
    let mut client = AggregatorClient::connect(url.clone())
        .await
        .expect("connect");
    let params = client
        .create_collection(
            spec("curated", DIM)
                .moments(Moments::SecondMoment)
                .privacy_model(PrivacyModel::Central)
                .build(),
        )
        .await
        .expect("create");
    let collection = Collection::from_params(&params).expect("params");
    for k in 0..200 {
        let x: Vec<f64> = (0..DIM)
            .map(|j| ((k * 7 + j as u64) % 5) as f64 * 0.2 - 0.4)
            .collect();
        client
            .submit_to_trusted_curator(&collection, &x)
            .await
            .expect("submit");
    }
    // Each round asks for a new release and kills the daemon at a random moment
    // around its commit; what was acknowledged is kept to compare.
    let mut acknowledged = Vec::new();
    for round in 0..RELEASE_ROUNDS {
        let call = {
            let url = url.clone();
            tokio::spawn(async move {
                // On a loaded machine the kill may come before the connection: that
                // release was never asked for, so nothing is acknowledged.
                let mut raw = RawClient::connect(url)
                    .await
                    .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                raw.get_estimate(release_request(round)).await
            })
        };
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..4_000))).await;
        kill(&mut daemon);
        if let Ok(answer) = call.await.expect("estimate task") {
            acknowledged.push((round, answer.into_inner().upper_triangle));
        }
        daemon = spawn_serve(addr, &[OsStr::new("--data-dir"), data.as_os_str()], &log);
        wait_ready(&url).await;
    }
    // Every acknowledged release is still recorded: asked again, it is free and the
    // same numbers. Then every round's release is asked (recording the lost ones), and
    // the budget spent must be exactly the sum of all of them: nothing lost, nothing
    // spent twice.
    let mut raw = RawClient::connect(url.clone()).await.expect("connect");
    for (round, numbers) in &acknowledged {
        let again = raw
            .get_estimate(release_request(*round))
            .await
            .expect("acknowledged release again")
            .into_inner();
        assert_eq!(again.release_rho_spent, 0.0, "round {round}: spent again");
        assert_eq!(
            &again.upper_triangle, numbers,
            "round {round}: other numbers"
        );
    }
    for round in 0..RELEASE_ROUNDS {
        raw.get_estimate(release_request(round))
            .await
            .expect("every release");
    }
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: "curated".into(),
        })
        .await
        .expect("status")
        .into_inner();
    let total: f64 = (0..RELEASE_ROUNDS).map(release_rho).sum();
    assert!(
        (status.rho_spent - total).abs() < 1e-12,
        "spent {} for releases of {total} in all",
        status.rho_spent
    );
    kill(&mut daemon);
    eprintln!(
        "{RELEASE_ROUNDS} releases raced SIGKILL, {} acknowledged before it",
        acknowledged.len()
    );
}
