//! The contract every [`Store`] keeps, as test functions generic over the store:
//! [`run_all`] runs them on a fresh store per case. [`MemoryStore`] is checked here; each
//! backend checks itself in its own tests (`redb/tests.rs`, `postgres/tests.rs`).
//!
//! Each case asserts what the trait documents: a report id counts at most once per
//! collection (within a batch, across batches, across concurrent tasks); creating is
//! idempotent and a conflicting create is refused; a closed collection refuses batches
//! and keeps its sums; a batch with a report of the wrong length changes nothing; a
//! snapshot is the exact sum of the accepted reports; a shuffled batch's tally holds
//! exactly the reports its chunks newly counted, so a report id is in one tally at most;
//! a two-aggregator leader's queue and helper's verdicts (`two_aggregator.rs`).

mod two_aggregator;

use std::future::Future;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::collection;
use super::*;

/// A report of `entries` entries, all `v`, with id `id`.
fn report(id: u32, v: i32, entries: usize) -> ValidReport {
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&id.to_le_bytes());
    ValidReport {
        report_id: ReportId(bytes),
        entries: vec![v; entries].into(),
    }
}

/// The accumulators of `reports`, each id counted once (its first occurrence).
fn expected(entries: usize, reports: &[ValidReport]) -> Accumulator {
    let mut acc = Accumulator::new(entries, FOLDS);
    let mut seen = std::collections::HashSet::new();
    let first: Vec<_> = reports
        .iter()
        .filter(|r| seen.insert(r.report_id))
        .map(|r| (r.report_id.fold(FOLDS), &r.entries))
        .collect();
    acc.add_reports(&first);
    acc
}

/// Runs every case, each on a store from `fresh(case name)`.
pub(crate) async fn run_all<S, F, Fut>(mut fresh: F)
where
    S: Store,
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Arc<S>>,
{
    dedupes_within_and_across_batches(fresh("dedupe").await).await;
    create_is_idempotent_and_conflicts_are_refused(fresh("create").await).await;
    a_closed_collection_refuses_batches_but_keeps_its_sums(fresh("closed").await).await;
    a_wrong_length_batch_changes_nothing(fresh("length").await).await;
    a_snapshot_is_the_exact_sum_of_the_accepted_reports(fresh("exact").await).await;
    concurrent_submits_count_every_report_once(fresh("concurrent").await).await;
    a_deleted_collection_is_gone_and_starts_from_scratch(fresh("delete").await).await;
    the_ledger_records_each_key_once_and_never_overspends(fresh("ledger").await).await;
    every_mechanism_is_stored_as_created(fresh("mechanisms").await).await;
    delivered_batches_keep_the_fewest_valid_reports(fresh("delivered").await).await;
    a_shuffled_batch_tallies_only_the_reports_it_counted(fresh("batch-tally").await).await;
    concurrent_chunks_tally_each_report_in_one_batch(fresh("batch-concurrent").await).await;
    two_aggregator::the_leader_queue_holds_each_upload_until_it_is_done(
        fresh("leader-queue").await,
    )
    .await;
    two_aggregator::the_helper_keeps_its_first_verdict_per_report(fresh("helper-verdicts").await)
        .await;
}

/// Two relay batch ids.
const B1: [u8; 16] = [0xb1; 16];
const B2: [u8; 16] = [0xb2; 16];

/// The tally of a shuffled batch (`submit_to_batch`, `counted_in_batch`): counting is
/// `submit`'s (one dedupe for direct reports and every batch), and a batch id's tally
/// grows by exactly the reports its chunks newly counted — a report id counted under
/// another batch, or directly, adds nothing to it. Per collection; a refused chunk
/// (wrong length, closed collection) adds nothing; gone with a deleted collection.
async fn a_shuffled_batch_tallies_only_the_reports_it_counted<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    s.create_collection(collection("b", 2)).await.unwrap();
    let n = collection("a", 2).entries();
    let reports = |ids: &[u32]| ids.iter().map(|&k| report(k, k as i32, n)).collect();
    let outcome = |accepted, duplicates| {
        Ok(BatchOutcome {
            accepted,
            duplicates,
        })
    };
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(0));
    // B1 in two chunks, the second repeating one report of the first.
    assert_eq!(
        s.submit_to_batch("a", B1, reports(&[1, 2, 3])).await,
        outcome(3, 0)
    );
    assert_eq!(
        s.submit_to_batch("a", B1, reports(&[3, 4])).await,
        outcome(1, 1)
    );
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(4));
    // B2 carries two of B1's reports and one new one: only the new one is B2's.
    assert_eq!(
        s.submit_to_batch("a", B2, reports(&[1, 2, 5])).await,
        outcome(1, 2)
    );
    assert_eq!(s.counted_in_batch("a", B2).await, Ok(1));
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(4));
    // B1 resent whole: all duplicates, its tally unchanged.
    assert_eq!(
        s.submit_to_batch("a", B1, reports(&[1, 2, 3, 4])).await,
        outcome(0, 4)
    );
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(4));
    // A direct report is in no tally, and no batch can claim it later.
    assert_eq!(s.submit("a", reports(&[6])).await, outcome(1, 0));
    assert_eq!(
        s.submit_to_batch("a", B2, reports(&[6])).await,
        outcome(0, 1)
    );
    assert_eq!(s.counted_in_batch("a", B2).await, Ok(1));
    assert_eq!(s.count("a").await, Ok(6));
    // The same batch id in another collection has its own tally.
    assert_eq!(
        s.submit_to_batch("b", B1, reports(&[1])).await,
        outcome(1, 0)
    );
    assert_eq!(s.counted_in_batch("b", B1).await, Ok(1));
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(4));
    // A refused chunk adds nothing: a wrong length, then a closed collection.
    let bad = vec![report(7, 1, n), report(8, 1, n - 1)];
    assert!(matches!(
        s.submit_to_batch("b", B1, bad).await,
        Err(StoreError::Internal(_))
    ));
    s.close_collection("b").await.unwrap();
    assert_eq!(
        s.submit_to_batch("b", B1, reports(&[7])).await,
        Err(StoreError::Closed("b".into()))
    );
    assert_eq!(s.counted_in_batch("b", B1).await, Ok(1));
    assert_eq!(s.count("b").await, Ok(1));
    // Unknown collections.
    let unknown = StoreError::NotFound("zz".into());
    assert_eq!(s.counted_in_batch("zz", B1).await, Err(unknown.clone()));
    assert_eq!(
        s.submit_to_batch("zz", B1, reports(&[1])).await,
        Err(unknown)
    );
    // Deleted with the collection; created again, every tally starts at 0.
    s.delete_collection("a").await.unwrap();
    assert_eq!(
        s.counted_in_batch("a", B1).await,
        Err(StoreError::NotFound("a".into()))
    );
    s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(0));
    assert_eq!(s.counted_in_batch("a", B2).await, Ok(0));
}

/// Chunks of two batches sent concurrently with overlapping report ids: each report is
/// counted once and sits in the tally of exactly one batch, so the tallies add up to
/// the count, and each is what its chunks were told they counted.
async fn concurrent_chunks_tally_each_report_in_one_batch<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    // 8 tasks × 6 chunks × 5 reports; task t sends under B1 (t even) or B2 (t odd) ids
    // from a window shared by every task.
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let batch = if t % 2 == 0 { B1 } else { B2 };
                let mut accepted = 0;
                for c in 0..6u32 {
                    let chunk = (0..5u32)
                        .map(|k| {
                            let id = (t * 7 + c * 5 + k) % 60;
                            report(id, id as i32, 3)
                        })
                        .collect();
                    accepted += s.submit_to_batch("a", batch, chunk).await.unwrap().accepted;
                }
                (batch, accepted)
            })
        })
        .collect();
    let (mut b1, mut b2) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            (B1, n) => b1 += n,
            (_, n) => b2 += n,
        }
    }
    assert_eq!(s.counted_in_batch("a", B1).await, Ok(b1));
    assert_eq!(s.counted_in_batch("a", B2).await, Ok(b2));
    assert_eq!(s.count("a").await, Ok(b1 + b2));
}

/// The record of completed shuffled batches: the batch tally and the fewest valid
/// reports in one, per collection, gone with a deleted collection; an unknown
/// collection is `NotFound` and records nothing.
async fn delivered_batches_keep_the_fewest_valid_reports<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    s.create_collection(collection("b", 2)).await.unwrap();
    assert_eq!(
        s.delivered_batches("a").await,
        Ok(DeliveredBatches::default())
    );
    for valid in [40, 37, 52, 37] {
        s.record_delivered_batch("a", valid).await.unwrap();
    }
    let a = DeliveredBatches {
        batches: 4,
        smallest: Some(37),
    };
    assert_eq!(s.delivered_batches("a").await, Ok(a));
    assert_eq!(
        s.delivered_batches("b").await,
        Ok(DeliveredBatches::default())
    );
    let unknown = StoreError::NotFound("zz".into());
    assert_eq!(
        s.record_delivered_batch("zz", 1).await,
        Err(unknown.clone())
    );
    assert_eq!(s.delivered_batches("zz").await, Err(unknown));
    s.delete_collection("a").await.unwrap();
    s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(
        s.delivered_batches("a").await,
        Ok(DeliveredBatches::default())
    );
}

/// Collections of each local mechanism come back as they were created (the spec
/// carries the mechanism), a collection of the same id and another mechanism is a
/// conflict, and a rank-one report's expanded entries are summed exactly.
async fn every_mechanism_is_stored_as_created<S: Store>(s: Arc<S>) {
    use ldpcov_privacy::ReportMechanism;
    use ldpcov_proto::v1::{CollectionSpec, LocalMechanism};
    let spec = |id: &str, mechanism: LocalMechanism| {
        let rank_one = mechanism == LocalMechanism::RankOne;
        CollectionSpec {
            local_mechanism: mechanism as i32,
            delta: if rank_one { 0.0 } else { 1e-6 },
            ..ldpcov_fixtures::spec(id, 3).build()
        }
    };
    for (id, mechanism) in [
        ("g", LocalMechanism::Gaussian),
        ("t", LocalMechanism::GaussianTriu),
        ("r", LocalMechanism::RankOne),
    ] {
        let c = Collection::create(&spec(id, mechanism)).unwrap();
        assert_eq!(*s.create_collection(c.clone()).await.unwrap(), c);
        assert_eq!(*s.collection(id).await.unwrap(), c);
        assert_eq!(c.spec().local_mechanism, mechanism as i32);
    }
    let other = Collection::create(&spec("g", LocalMechanism::GaussianTriu)).unwrap();
    assert_eq!(
        s.create_collection(other).await,
        Err(StoreError::AlreadyExists("g".into()))
    );
    let rank_one = s.collection("r").await.unwrap();
    let ReportMechanism::RankOne(r) = rank_one.mechanism() else {
        panic!("a rank-one collection");
    };
    let y = [32_767, -32_767, 5];
    let batch = vec![ValidReport {
        report_id: ReportId([7; 16]),
        entries: ReportEntries::OuterProduct(r.outer_product(y.to_vec()).unwrap()),
    }];
    s.submit("r", batch.clone()).await.unwrap();
    let got = s.snapshot("r").await.unwrap().acc;
    assert_eq!(got, expected(rank_one.entries(), &batch));
}

/// The release ledger: a key is recorded once (asked again, the stored body comes back
/// at no cost), a release beyond the budget is refused and records nothing, concurrent
/// recorders never overspend together, and a deleted collection's releases go with it.
async fn the_ledger_records_each_key_once_and_never_overspends<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(s.budget_spent("a").await, Ok(0.0));
    assert_eq!(s.recorded_release("a", b"k1").await, Ok(None));
    let first = s
        .record_release("a", b"k1", 0.25, 1.0, b"body-1".to_vec())
        .await
        .unwrap();
    assert_eq!(
        first,
        RecordedRelease {
            body: b"body-1".to_vec(),
            rho: 0.25,
            spent: 0.25,
            fresh: true
        }
    );
    // Asked again (even with another body and ρ): the recorded one, nothing spent.
    let again = s
        .record_release("a", b"k1", 0.5, 1.0, b"other".to_vec())
        .await
        .unwrap();
    assert_eq!(
        again,
        RecordedRelease {
            body: b"body-1".to_vec(),
            rho: 0.25,
            spent: 0.25,
            fresh: false
        }
    );
    assert_eq!(
        s.recorded_release("a", b"k1")
            .await
            .unwrap()
            .map(|r| r.body),
        Some(b"body-1".to_vec())
    );
    // Beyond the budget: refused, nothing recorded or spent.
    assert_eq!(
        s.record_release("a", b"k2", 0.875, 1.0, b"too much".to_vec())
            .await,
        Err(StoreError::BudgetExhausted {
            id: "a".into(),
            spent: 0.25,
            requested: 0.875,
            budget: 1.0
        })
    );
    assert_eq!(s.recorded_release("a", b"k2").await, Ok(None));
    assert_eq!(s.budget_spent("a").await, Ok(0.25));
    // Up to the budget exactly (dyadic ρ: exact in f64).
    let full = s
        .record_release("a", b"k3", 0.75, 1.0, b"rest".to_vec())
        .await
        .unwrap();
    assert_eq!((full.spent, full.fresh), (1.0, true));
    // Concurrent recorders of distinct keys on a fresh collection: 10 × ρ = 1/4
    // against a budget of 1 — exactly 4 are recorded.
    s.create_collection(collection("b", 2)).await.unwrap();
    let tasks: Vec<_> = (0..10u8)
        .map(|k| {
            let s = Arc::clone(&s);
            tokio::spawn(async move { s.record_release("b", &[k], 0.25, 1.0, vec![k]).await })
        })
        .collect();
    let mut recorded = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => {
                assert!(r.fresh && r.spent <= 1.0, "{r:?}");
                recorded += 1;
            }
            Err(StoreError::BudgetExhausted { spent, .. }) => assert!(spent <= 1.0),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(recorded, 4);
    assert_eq!(s.budget_spent("b").await, Ok(1.0));
    // Unknown collections.
    assert_eq!(
        s.budget_spent("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
    assert!(matches!(
        s.record_release("zz", b"k", 0.1, 1.0, vec![]).await,
        Err(StoreError::NotFound(_))
    ));
    // Deleted with the collection; created again, the ledger starts empty.
    s.delete_collection("a").await.unwrap();
    s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(s.budget_spent("a").await, Ok(0.0));
    assert_eq!(s.recorded_release("a", b"k1").await, Ok(None));
}

/// Delete: everything of the collection goes at once (sums, closed flag, seen ids,
/// its place in the listing), another collection is untouched, and the id can be
/// created again from scratch.
async fn a_deleted_collection_is_gone_and_starts_from_scratch<S: Store>(s: Arc<S>) {
    let (a, b) = (collection("a", 2), collection("b", 2));
    let n = a.entries();
    assert_eq!(s.collection_count().await, Ok(0));
    s.create_collection(a.clone()).await.unwrap();
    s.create_collection(b.clone()).await.unwrap();
    assert_eq!(s.collection_count().await, Ok(2));
    let ids = |v: &[&str]| Ok(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(s.collection_ids().await, ids(&["a", "b"]));
    let reports: Vec<_> = (1..=4).map(|k| report(k, 7, n)).collect();
    s.submit("a", reports.clone()).await.unwrap();
    s.submit("b", reports.clone()).await.unwrap();
    s.close_collection("a").await.unwrap();
    assert_eq!(s.delete_collection("a").await, Ok(4));
    assert_eq!(s.collection_count().await, Ok(1));
    assert_eq!(s.collection_ids().await, ids(&["b"]));
    let gone = StoreError::NotFound("a".into());
    assert_eq!(s.count("a").await, Err(gone.clone()));
    assert_eq!(s.delete_collection("a").await, Err(gone.clone()));
    assert_eq!(s.submit("a", vec![report(9, 1, n)]).await, Err(gone));
    assert_eq!(
        s.delete_collection("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
    assert_eq!(s.snapshot("b").await.unwrap().acc, expected(n, &reports));
    // Created again: open, empty, and the old report ids count again.
    s.create_collection(a).await.unwrap();
    assert_eq!(s.collection_count().await, Ok(2));
    assert!(!s.is_closed("a").await.unwrap());
    assert_eq!(s.count("a").await.unwrap(), 0);
    let o = s.submit("a", reports.clone()).await.unwrap();
    assert_eq!((o.accepted, o.duplicates), (4, 0));
    assert_eq!(s.snapshot("a").await.unwrap().acc, expected(n, &reports));
}

async fn dedupes_within_and_across_batches<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    let o = s
        .submit(
            "a",
            vec![report(1, 5, 3), report(2, 7, 3), report(1, 100, 3)],
        )
        .await
        .unwrap();
    assert_eq!(
        o,
        BatchOutcome {
            accepted: 2,
            duplicates: 1
        }
    );
    let o = s.submit("a", vec![report(2, 100, 3)]).await.unwrap();
    assert_eq!(
        o,
        BatchOutcome {
            accepted: 0,
            duplicates: 1
        }
    );
    let snap = s.snapshot("a").await.unwrap();
    assert_eq!(snap.acc.count, 2);
    assert_eq!(s.count("a").await.unwrap(), 2);
    assert_eq!(snap.acc.sums(), vec![12; 3]);
    assert_eq!(snap.acc.sum_squares, vec![25 + 49; 3]);
    assert_eq!(
        snap.acc,
        expected(3, &[report(1, 5, 3), report(2, 7, 3)]),
        "fold sums and counts"
    );
}

async fn create_is_idempotent_and_conflicts_are_refused<S: Store>(s: Arc<S>) {
    let c = s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(*c, collection("a", 2));
    let again = s.create_collection(collection("a", 2)).await.unwrap();
    assert_eq!(*again, collection("a", 2));
    // Creating it again is a no-op: still one collection.
    assert_eq!(s.collection_count().await, Ok(1));
    assert_eq!(
        s.create_collection(collection("a", 3)).await,
        Err(StoreError::AlreadyExists("a".into()))
    );
    assert_eq!(*s.collection("a").await.unwrap(), collection("a", 2));
    assert_eq!(s.count("zz").await, Err(StoreError::NotFound("zz".into())));
    assert_eq!(
        s.submit("zz", vec![report(1, 1, 3)]).await,
        Err(StoreError::NotFound("zz".into()))
    );
    assert!(matches!(
        s.snapshot("zz").await,
        Err(StoreError::NotFound(id)) if id == "zz"
    ));
}

async fn a_closed_collection_refuses_batches_but_keeps_its_sums<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    s.submit("a", vec![report(1, 5, 3)]).await.unwrap();
    assert!(!s.is_closed("a").await.unwrap());
    s.close_collection("a").await.unwrap();
    s.close_collection("a").await.unwrap();
    assert!(s.is_closed("a").await.unwrap());
    assert_eq!(
        s.submit("a", vec![report(2, 5, 3)]).await,
        Err(StoreError::Closed("a".into()))
    );
    assert_eq!(s.count("a").await.unwrap(), 1);
    assert_eq!(s.snapshot("a").await.unwrap().acc.sums(), vec![5; 3]);
    assert_eq!(
        s.close_collection("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
}

async fn a_wrong_length_batch_changes_nothing<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    let bad = report(9, 1, 2);
    let refused = s.submit("a", vec![report(1, 1, 3), bad]).await;
    assert!(
        matches!(&refused, Err(StoreError::Internal(c)) if matches!(**c, Cause::Unvalidated { entries: 2 })),
        "{refused:?}"
    );
    assert_eq!(s.count("a").await.unwrap(), 0);
    // Nothing of the refused batch was marked seen: its good report still counts.
    let o = s.submit("a", vec![report(1, 1, 3)]).await.unwrap();
    assert_eq!(o.accepted, 1);
}

async fn a_snapshot_is_the_exact_sum_of_the_accepted_reports<S: Store>(s: Arc<S>) {
    // dim 3: 6 entries. Extreme values make any float or narrow-integer path inexact.
    s.create_collection(collection("a", 3)).await.unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut all = Vec::new();
    for batch in 0..6 {
        let reports: Vec<ValidReport> = (0..40)
            .map(|k| {
                // Ids repeat across batches (a retry resends the same report).
                let id = rng.random_range(0..150u32);
                let mut r = report(id, 0, 6);
                let entries: Vec<i32> = (0..6)
                    .map(|j| match (id as usize + j + k + batch) % 3 {
                        0 => i32::MAX,
                        1 => -i32::MAX,
                        _ => (id as i32 * 7919 + j as i32) % 100_003,
                    })
                    .collect();
                r.entries = entries.into();
                r
            })
            .collect();
        s.submit("a", reports.clone()).await.unwrap();
        all.extend(reports);
    }
    let want = expected(6, &all);
    let snap = s.snapshot("a").await.unwrap();
    assert_eq!(snap.acc, want);
    assert_eq!(s.count("a").await.unwrap(), want.count);
    assert_eq!(*snap.collection, collection("a", 3));
}

async fn concurrent_submits_count_every_report_once<S: Store>(s: Arc<S>) {
    s.create_collection(collection("a", 2)).await.unwrap();
    // 16 tasks × 10 batches × 8 reports; task t sends ids t·40 .. t·40 + 80, so
    // neighbouring tasks overlap by half: 16·40 + 40 = 680 distinct ids of 1280 sent.
    // A repeated id carries the same entries (a retry), so the sums are determined.
    let tasks: Vec<_> = (0..16u32)
        .map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut outcome = BatchOutcome::default();
                for b in 0..10u32 {
                    let batch = (0..8u32)
                        .map(|k| {
                            let id = t * 40 + b * 8 + k;
                            report(id, id as i32 - 300, 3)
                        })
                        .collect();
                    let o = s.submit("a", batch).await.unwrap();
                    outcome.accepted += o.accepted;
                    outcome.duplicates += o.duplicates;
                }
                outcome
            })
        })
        .collect();
    let mut total = BatchOutcome::default();
    for t in tasks {
        let o = t.await.unwrap();
        total.accepted += o.accepted;
        total.duplicates += o.duplicates;
    }
    assert_eq!(total.accepted, 680);
    assert_eq!(total.duplicates, 1280 - 680);
    let all: Vec<ValidReport> = (0..680u32)
        .map(|id| report(id, id as i32 - 300, 3))
        .collect();
    assert_eq!(s.snapshot("a").await.unwrap().acc, expected(3, &all));
    assert_eq!(s.count("a").await.unwrap(), 680);
}

#[tokio::test]
async fn memory_store_keeps_the_contract() {
    run_all(|_| async { Arc::new(MemoryStore::new()) }).await;
}
