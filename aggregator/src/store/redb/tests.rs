//! Tests of the durable store.

use super::hooks::{Event, TestHooks};
use super::*;
use crate::store::MemoryStore;
use crate::store::contract;
use ldpcov_privacy::ReportId;

use crate::store::tests::collection;

mod two_aggregator;

/// The unit tests' handles on the commit thread's hooks.
impl DurableStore {
    /// Makes the next `n` batch commits fail (the transaction is aborted just before
    /// its commit), to test failure handling.
    fn fail_next_commits(&self, n: u32) {
        self.shared.hooks.fail_next_commits(n);
    }

    /// The commit thread's test hooks.
    fn hooks(&self) -> &TestHooks {
        &self.shared.hooks
    }
}

/// The appended rows in the store file of `dir` (no store may hold it): how many, and
/// their bytes.
fn appended_rows(dir: &Path) -> (usize, usize) {
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(tables::APPENDED).unwrap();
    let mut rows = (0, 0);
    for row in table.iter().unwrap() {
        let (_, log) = row.unwrap();
        rows = (rows.0 + 1, rows.1 + log.value().len());
    }
    rows
}

fn report(id: u32, v: i32, entries: usize) -> ValidReport {
    let mut rid = [0u8; 16];
    rid[..4].copy_from_slice(&id.to_le_bytes());
    ValidReport {
        report_id: ReportId(rid),
        entries: (0..entries as i32)
            .map(|k| v * (k + 1) - 3)
            .collect::<Vec<_>>()
            .into(),
    }
}

/// A store on `dir` whose batches close at `batch_size` reports or after `delay`
/// (default page cache), shared between tasks.
fn open_batched(dir: &Path, batch_size: usize, delay: Duration) -> Arc<DurableStore> {
    Arc::new(
        DurableStore::open(
            dir,
            DurableConfig {
                batch_size,
                batch_delay: delay,
                ..DurableConfig::default()
            },
        )
        .unwrap(),
    )
}

/// A store on `dir`, which must already hold collection `id`, whose batch is committed
/// exactly when it holds `reports` reports (the delay is out of reach of any test): a
/// test decides what goes into one batch by what it submits, whatever the load.
fn open_sized(dir: &Path, reports: usize) -> Arc<DurableStore> {
    open_batched(dir, reports, Duration::from_secs(3600))
}

/// How many events of this kind the store has recorded.
fn count(events: &[Event], kind: Event) -> usize {
    events.iter().filter(|e| **e == kind).count()
}

/// Checks a store's event log: every commit follows an fsync of the database file made
/// after the last command of its batch arrived, and every answer of a committed batch
/// follows that commit. Returns the number of answers.
fn assert_answers_follow_fsynced_commits(events: &[Event]) -> usize {
    let (mut synced, mut committed, mut answers) = (false, false, 0);
    for (i, event) in events.iter().enumerate() {
        match event {
            Event::Added => (synced, committed) = (false, false),
            Event::Synced => synced = true,
            Event::Committed => {
                assert!(synced, "commit without an fsync (event {i}): {events:?}");
                (synced, committed) = (false, true);
            }
            Event::Answered => {
                assert!(
                    committed,
                    "answered before the commit (event {i}): {events:?}"
                );
                answers += 1;
            }
        }
    }
    answers
}

fn quick() -> DurableConfig {
    DurableConfig {
        batch_size: 64,
        batch_delay: Duration::from_millis(2),
        // A tiny page cache: the tests also exercise redb's eviction.
        cache_size: 64 * 1024,
        ..DurableConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_recovers_collections_sums_and_dedupe() {
    let dir = tempfile::tempdir().unwrap();
    let memory = MemoryStore::new();
    let (a, b) = (collection("a", 3), collection("b", 2));
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        for c in [&a, &b] {
            s.create_collection(c.clone()).await.unwrap();
            memory.create_collection(c.clone()).await.unwrap();
        }
        for k in 0..40u32 {
            let r = vec![
                report(k, k as i32 * 1000, a.entries()),
                report(k % 7, 1, a.entries()),
            ];
            let o1 = s.submit("a", r.clone()).await.unwrap();
            let o2 = memory.submit("a", r).await.unwrap();
            assert_eq!(o1, o2);
        }
        s.submit("b", vec![report(1, 9, b.entries())])
            .await
            .unwrap();
        memory
            .submit("b", vec![report(1, 9, b.entries())])
            .await
            .unwrap();
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(*s.collection("a").await.unwrap(), a);
    assert_eq!(*s.collection("b").await.unwrap(), b);
    for id in ["a", "b"] {
        assert_eq!(
            s.snapshot(id).await.unwrap().acc,
            memory.snapshot(id).await.unwrap().acc
        );
        assert_eq!(
            s.read_committed(id).await.unwrap().acc,
            memory.snapshot(id).await.unwrap().acc
        );
    }
    assert_eq!(s.count("a").await.unwrap(), 40);
    // A duplicate id across the restart is not recounted.
    let o = s
        .submit("a", vec![report(3, 55, a.entries())])
        .await
        .unwrap();
    assert_eq!(
        o,
        BatchOutcome {
            accepted: 0,
            duplicates: 1
        }
    );
    // The same report id in another collection is another report.
    let o = s
        .submit("b", vec![report(3, 55, b.entries())])
        .await
        .unwrap();
    assert_eq!(
        o,
        BatchOutcome {
            accepted: 1,
            duplicates: 0
        }
    );
    assert_eq!(s.count("a").await.unwrap(), 40);
    // Conflicting re-creation is refused, identical is a no-op, across restarts.
    assert_eq!(
        s.create_collection(collection("a", 4)).await,
        Err(StoreError::AlreadyExists("a".into()))
    );
    s.create_collection(a.clone()).await.unwrap();
    assert_eq!(s.count("zz").await, Err(StoreError::NotFound("zz".into())));
}

/// Small batches are appended as report logs and replayed exactly after a stop that
/// did not fold them (as a crash leaves them); a batch larger than the blob, the size
/// trigger and the interval each fold them into the blob, removing the rows, and every
/// snapshot (mirror and disk) equals the memory store's at every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_reports_are_replayed_exactly_and_folded_once() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 3);
    let d = c.entries();
    let memory = MemoryStore::new();
    memory.create_collection(c.clone()).await.unwrap();
    let config = |fold_interval, fold_bytes| DurableConfig {
        fold_interval,
        fold_bytes,
        ..quick()
    };
    let mut next = 0u32;
    // Submits `batches` batches of `size` reports to both stores, one at a time.
    async fn submit(
        s: &DurableStore,
        memory: &MemoryStore,
        next: &mut u32,
        batches: usize,
        size: usize,
        d: usize,
    ) {
        for _ in 0..batches {
            let reports: Vec<ValidReport> = (0..size)
                .map(|k| {
                    *next += 1;
                    report(*next, k as i32 - 3, d)
                })
                .collect();
            let o = s.submit("a", reports.clone()).await.unwrap();
            assert_eq!(o, memory.submit("a", reports).await.unwrap());
        }
    }
    async fn check(s: &DurableStore, memory: &MemoryStore) {
        let expected = memory.snapshot("a").await.unwrap().acc;
        assert_eq!(s.snapshot("a").await.unwrap().acc, expected);
        assert_eq!(s.read_committed("a").await.unwrap().acc, expected);
    }
    let hour = Duration::from_secs(3600);

    // Appended, never folded: the stop leaves the rows as a crash would.
    let s = DurableStore::open(dir.path(), config(hour, u64::MAX)).unwrap();
    s.create_collection(c.clone()).await.unwrap();
    submit(&s, &memory, &mut next, 10, 2, d).await;
    check(&s, &memory).await;
    s.hooks().keep_appended_at_stop();
    drop(s);
    assert_eq!(appended_rows(dir.path()).0, 10, "one row per batch");
    // Replayed at the start: the same sums, and a repeated id is still a duplicate.
    let s = DurableStore::open(dir.path(), config(hour, u64::MAX)).unwrap();
    check(&s, &memory).await;
    let again = s.submit("a", vec![report(1, 0, d)]).await.unwrap();
    assert_eq!(again.duplicates, 1);
    // A batch whose log is larger than the blob folds everything into the blob.
    let blob = crate::store::codec::accumulator_blob_len(d);
    let big = blob / (7 + 4 * d) + 1;
    submit(&s, &memory, &mut next, 1, big, d).await;
    check(&s, &memory).await;
    s.hooks().keep_appended_at_stop();
    drop(s);
    assert_eq!(
        appended_rows(dir.path()),
        (0, 0),
        "folded with the big batch"
    );

    // The size trigger: appended bytes never exceed the bound.
    let bound = 3 * (24 + 2 * (7 + 4 * d)) as u64;
    let s = DurableStore::open(dir.path(), config(hour, bound)).unwrap();
    submit(&s, &memory, &mut next, 10, 2, d).await;
    check(&s, &memory).await;
    s.hooks().keep_appended_at_stop();
    drop(s);
    let (rows, bytes) = appended_rows(dir.path());
    assert!(
        (1..=3).contains(&rows) && bytes as u64 <= bound,
        "{rows} rows, {bytes} bytes"
    );

    // The interval: folded once due, without another batch.
    let s = DurableStore::open(dir.path(), config(Duration::from_millis(50), u64::MAX)).unwrap();
    check(&s, &memory).await;
    submit(&s, &memory, &mut next, 3, 2, d).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    check(&s, &memory).await;
    s.hooks().keep_appended_at_stop();
    drop(s);
    assert_eq!(appended_rows(dir.path()), (0, 0), "folded when due");

    // A normal stop folds what is appended.
    let s = DurableStore::open(dir.path(), config(hour, u64::MAX)).unwrap();
    submit(&s, &memory, &mut next, 3, 2, d).await;
    drop(s);
    assert_eq!(appended_rows(dir.path()), (0, 0), "folded at the stop");
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    check(&s, &memory).await;
    assert_eq!(
        s.count("a").await.unwrap(),
        memory.count("a").await.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_commit_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    s.create_collection(c.clone()).await.unwrap();
    s.submit("a", vec![report(1, 5, c.entries())])
        .await
        .unwrap();
    let before = s.snapshot("a").await.unwrap().acc;
    drop(s);
    // Several submitters in one batch (committed at exactly their 6 reports): all of
    // them fail.
    let s = open_sized(dir.path(), 6);
    s.fail_next_commits(1);
    let tasks: Vec<_> = (10..16u32)
        .map(|k| {
            let s = s.clone();
            tokio::spawn(async move { s.submit("a", vec![report(k, 7, 3)]).await })
        })
        .collect();
    for t in tasks {
        assert!(matches!(t.await.unwrap(), Err(StoreError::Unavailable(_))));
    }
    assert_eq!(s.snapshot("a").await.unwrap().acc, before);
    assert_eq!(s.read_committed("a").await.unwrap().acc, before);
    // The failed ids were not remembered: resending counts them once.
    let o = s
        .submit("a", (10..16u32).map(|k| report(k, 7, 3)).collect())
        .await
        .unwrap();
    assert_eq!(
        o,
        BatchOutcome {
            accepted: 6,
            duplicates: 0
        }
    );
    assert_eq!(s.count("a").await.unwrap(), 7);
    // A failed creation leaves no collection behind (creations carry no reports: a
    // store with a short delay).
    drop(s);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(s.count("a").await.unwrap(), 7);
    s.fail_next_commits(1);
    assert!(matches!(
        s.create_collection(collection("new", 2)).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        s.collection("new").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.read_committed("new").await,
        Err(StoreError::NotFound(_))
    ));
    s.create_collection(collection("new", 2)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitters_are_acknowledged_only_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    DurableStore::open(dir.path(), quick())
        .unwrap()
        .create_collection(c.clone())
        .await
        .unwrap();
    // One batch of 8 one-report submits: committed when the 8th arrives.
    let s = open_sized(dir.path(), 8);
    let submit = |k: u32| {
        let s = s.clone();
        tokio::spawn(async move {
            // Two submitters share id 0: one of them sees a duplicate.
            let outcome = s.submit("a", vec![report(k / 2 * 2, 1, 3)]).await;
            // Acknowledged means committed: the database already has it.
            let on_disk = s.read_committed("a").await.unwrap().acc.count;
            (outcome, on_disk)
        })
    };
    let mut tasks: Vec<_> = (0..7u32).map(submit).collect();
    s.hooks()
        .wait_for("7 submits in the open batch", |e| {
            count(e, Event::Added) == 7
        })
        .await;
    // 7 of the 8 reports are in the open batch: nobody is answered, nothing is visible.
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "acknowledged before the commit"
    );
    assert_eq!(s.count("a").await.unwrap(), 0);
    assert_eq!(s.read_committed("a").await.unwrap().acc.count, 0);
    assert_eq!(count(&s.hooks().events(), Event::Committed), 0);
    tasks.push(submit(7));
    let mut accepted = 0;
    for t in tasks {
        let (outcome, on_disk) = t.await.unwrap();
        accepted += outcome.unwrap().accepted;
        assert_eq!(on_disk, 4);
    }
    assert_eq!(accepted, 4);
    assert_eq!(s.count("a").await.unwrap(), 4);
    // All 8 were answered, after one commit that followed an fsync.
    let events = s.hooks().events();
    assert_eq!(count(&events, Event::Committed), 1, "{events:?}");
    assert_eq!(assert_answers_follow_fsynced_commits(&events), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledgement_follows_an_fsynced_commit() {
    // SIGKILL keeps the page cache, so the crash test cannot tell a store that stops
    // fsyncing from one that does; this test can: the storage backend records every
    // fsync (sync_data) of the database file, and the commit thread records every
    // commit and every answer. Concurrent submitters, creations and a close over many
    // small batches: every acknowledgement must follow the commit of its batch, and
    // that commit an fsync made after the batch's last command arrived.
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(DurableStore::open(dir.path(), quick()).unwrap());
    s.create_collection(collection("a", 2)).await.unwrap();
    let tasks: Vec<_> = (0..48u32)
        .map(|k| {
            let s = s.clone();
            tokio::spawn(async move {
                if k % 16 == 15 {
                    s.create_collection(collection(&format!("c{k}"), 2))
                        .await
                        .map(|_| ())
                } else {
                    s.submit("a", vec![report(k, 1, 3), report(k + 100, 2, 3)])
                        .await
                        .map(|_| ())
                }
            })
        })
        .collect();
    let mut acknowledged = 0;
    for t in tasks {
        t.await.unwrap().unwrap();
        acknowledged += 1;
    }
    s.close_collection("c15").await.unwrap();
    acknowledged += 2; // the first creation and the close
    let events = s.hooks().events();
    assert!(count(&events, Event::Committed) >= 2, "{events:?}");
    assert_eq!(assert_answers_follow_fsynced_commits(&events), acknowledged);
    assert_eq!(s.count("a").await.unwrap(), 2 * 45);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_commits_without_waiting_for_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 1);
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
    }
    let s = open_batched(dir.path(), 4, Duration::from_secs(600));
    let entries = c.entries();
    let tasks: Vec<_> = (0..4u32)
        .map(|k| {
            let s = s.clone();
            tokio::spawn(async move { s.submit("a", vec![report(k, 1, entries)]).await })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    let done = tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("a full batch waited for the delay");
    assert!(done.into_iter().all(|r| r.unwrap().unwrap().accepted == 1));
    assert_eq!(s.read_committed("a").await.unwrap().acc.count, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_collection_refuses_submits_and_keeps_its_sums() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    s.create_collection(c.clone()).await.unwrap();
    s.create_collection(collection("b", 2)).await.unwrap();
    s.submit("a", (0..3u32).map(|k| report(k, 2, c.entries())).collect())
        .await
        .unwrap();
    let before = s.snapshot("a").await.unwrap().acc;
    assert!(!s.is_closed("a").await.unwrap());
    s.close_collection("a").await.unwrap();
    assert!(s.is_closed("a").await.unwrap());
    // Closing twice is a no-op.
    s.close_collection("a").await.unwrap();
    assert!(s.is_closed("a").await.unwrap());
    // New and already-seen ids alike are refused; nothing is counted.
    for k in [1u32, 7] {
        assert_eq!(
            s.submit("a", vec![report(k, 5, c.entries())]).await,
            Err(StoreError::Closed("a".into()))
        );
    }
    assert_eq!(
        s.submit("a", Vec::new()).await,
        Err(StoreError::Closed("a".into()))
    );
    assert_eq!(s.snapshot("a").await.unwrap().acc, before);
    assert_eq!(s.read_committed("a").await.unwrap().acc, before);
    assert_eq!(s.count("a").await.unwrap(), 3);
    // Other collections are unaffected.
    assert!(!s.is_closed("b").await.unwrap());
    s.submit("b", vec![report(1, 1, 3)]).await.unwrap();
    // Unknown collections.
    assert_eq!(
        s.close_collection("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
    assert_eq!(
        s.is_closed("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
    // A close whose commit fails does not close.
    s.fail_next_commits(1);
    assert!(matches!(
        s.close_collection("b").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(!s.is_closed("b").await.unwrap());
    s.submit("b", vec![report(2, 1, 3)]).await.unwrap();
    assert_eq!(s.count("b").await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closed_flag_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.create_collection(collection("b", 2)).await.unwrap();
        s.submit("a", vec![report(1, 3, c.entries())])
            .await
            .unwrap();
        s.close_collection("a").await.unwrap();
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert!(s.is_closed("a").await.unwrap());
    assert!(!s.is_closed("b").await.unwrap());
    assert_eq!(s.count("a").await.unwrap(), 1);
    assert_eq!(
        s.submit("a", vec![report(2, 3, c.entries())]).await,
        Err(StoreError::Closed("a".into()))
    );
    s.close_collection("a").await.unwrap();
    assert_eq!(s.count("a").await.unwrap(), 1);
    s.submit("b", vec![report(2, 3, 3)]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_is_ordered_with_the_submits_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.create_collection(collection("b", 2)).await.unwrap();
    }
    // One batch of 4 reports: a submit of 3 to "a", two closes (no reports), a submit to
    // "a" (refused, so it counts no report), and a submit of 1 to "b" that fills it.
    let s = open_sized(dir.path(), 4);
    // Each command is spawned only once the previous one is in the batch: they arrive
    // in this order.
    let arrived = |n: usize| {
        let s = s.clone();
        async move {
            s.hooks()
                .wait_for("the commands in the open batch", |e| {
                    count(e, Event::Added) == n
                })
                .await
        }
    };
    let before = {
        let s = s.clone();
        tokio::spawn(async move {
            s.submit("a", (0..3u32).map(|k| report(k, 1, 3)).collect())
                .await
        })
    };
    arrived(1).await;
    let close = {
        let s = s.clone();
        tokio::spawn(async move { s.close_collection("a").await })
    };
    arrived(2).await;
    let close_again = {
        let s = s.clone();
        tokio::spawn(async move { s.close_collection("a").await })
    };
    arrived(3).await;
    // Three are in the open batch (3 of its 4 reports): nothing is answered or visible.
    assert!(!before.is_finished() && !close.is_finished() && !close_again.is_finished());
    assert!(!s.is_closed("a").await.unwrap());
    let after = {
        let s = s.clone();
        tokio::spawn(async move { s.submit("a", vec![report(9, 1, 3)]).await })
    };
    arrived(4).await;
    assert!(!after.is_finished());
    let fill = {
        let s = s.clone();
        tokio::spawn(async move { s.submit("b", vec![report(9, 1, 3)]).await })
    };
    assert_eq!(
        before.await.unwrap(),
        Ok(BatchOutcome {
            accepted: 3,
            duplicates: 0
        })
    );
    assert_eq!(close.await.unwrap(), Ok(()));
    assert_eq!(close_again.await.unwrap(), Ok(()));
    assert_eq!(after.await.unwrap(), Err(StoreError::Closed("a".into())));
    assert_eq!(fill.await.unwrap().unwrap().accepted, 1);
    // All five were in that one batch.
    let events = s.hooks().events();
    assert_eq!(count(&events, Event::Added), 5, "{events:?}");
    assert_eq!(count(&events, Event::Committed), 1, "{events:?}");
    assert_eq!(assert_answers_follow_fsynced_commits(&events), 5);
    assert!(s.is_closed("a").await.unwrap());
    assert_eq!(s.count("a").await.unwrap(), 3);
    assert_eq!(s.read_committed("a").await.unwrap().acc.count, 3);
    // Recovery keeps both the flag and the sums.
    drop(s);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert!(s.is_closed("a").await.unwrap());
    assert_eq!(s.count("a").await.unwrap(), 3);
}

/// A collection stored before the `moments` field existed keeps meaning the second
/// moment after an upgrade, through the real server: its spec bytes (fields 1–7 only,
/// as the earlier code wrote them) decode to the parameters it was created with —
/// d = p(p+1)/2 entries, Δ = √2 + √d·2⁻ᵏ, σ of the analytic Gaussian at that Δ, pinned
/// to the 50-digit reference σ = 5.974598181957314·Δ/√2 (ε = 1, δ = 10⁻⁶) — GetCollection
/// shows SECOND_MOMENT explicitly, a device re-derives the same parameters and its
/// reports count, and an estimate is released. The create path would have made a
/// different (joint) collection of the same spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_stored_before_moments_existed_keeps_its_parameters() {
    use crate::{EmbeddedServer, Limits};
    use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
    use ldpcov_proto::v1::{
        CollectionSpec, Encoding, GetCollectionRequest, GetEstimateRequest, Moments,
    };
    use prost::Message;

    let dir = tempfile::tempdir().unwrap();
    let old = CollectionSpec {
        collection_id: "old".into(),
        dim: 4,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 2.0,
        min_reports: 3,
        encoding: Encoding::I32Le as i32,
        ..Default::default()
    };
    let bytes = old.encode_to_vec();
    // What the earlier code stored: no tag of field 8, 9 or 11 (keys 0x40, 0x4a, 0x5a
    // would follow the encoding field's 0x38 0x01 at the end).
    assert_eq!(&bytes[bytes.len() - 2..], &[0x38, 0x01]);
    drop(DurableStore::open(dir.path(), quick()).unwrap());
    {
        let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(super::tables::COLLECTIONS).unwrap();
            t.insert("old", bytes.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = Arc::new(DurableStore::open(dir.path(), quick()).unwrap());
    let c = store.collection("old").await.unwrap();
    assert_eq!(c.moments(), Moments::SecondMoment);
    assert_eq!(
        (c.entries(), c.mean_entries(), c.mean_weight()),
        (10, 0, 0.0)
    );
    assert_eq!(c.grid_bits(), 22);
    let sens = std::f64::consts::SQRT_2 + 10f64.sqrt() / f64::from(1u32 << 22);
    assert_eq!(c.sensitivity(), sens);
    let sigma_ref = 5.974_598_181_957_314 * sens / std::f64::consts::SQRT_2;
    assert!((c.sigma() / sigma_ref - 1.0).abs() < 1e-9, "{}", c.sigma());
    assert_ne!(*c, ldpcov_privacy::Collection::create(&old).unwrap());

    let server = EmbeddedServer::start_with_store(store.clone(), Limits::default())
        .await
        .unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let params = raw
        .get_collection(GetCollectionRequest {
            collection_id: "old".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let spec = params.spec.clone().unwrap();
    assert_eq!(spec.moments, Moments::SecondMoment as i32);
    assert_eq!((params.entries, params.mean_entries), (10, 0));
    assert_eq!(params.sigma, c.sigma());
    let mut device = ldpcov_client::AggregatorClient::connect(server.url())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(
            ldpcov_client::DiscreteGaussianSampler::from_seed_for_simulation(1),
        ));
    let fetched = device.collection("old").await.unwrap();
    assert_eq!(fetched, *c);
    for k in 0..3 {
        device
            .submit(&fetched, &[1.0, -0.5, 0.25, k as f64])
            .await
            .unwrap();
    }
    let estimate = raw
        .get_estimate(GetEstimateRequest {
            collection_id: "old".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(estimate.reports, 3);
    assert_eq!(estimate.moments, Moments::SecondMoment as i32);
    assert!(estimate.mean.is_empty() && estimate.second_moment.is_empty());
    assert_eq!(estimate.upper_triangle.len(), 10);
    server.shutdown().await.unwrap();
    // The stored bytes were not rewritten, and a restart reads the same collection.
    drop(raw);
    drop(device);
    let store = Arc::try_unwrap(store).ok();
    drop(store);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(*s.collection("old").await.unwrap(), *c);
    assert_eq!(s.count("old").await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_everything_durably_and_the_id_starts_from_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (collection("a", 2), collection("b", 2));
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    s.create_collection(a.clone()).await.unwrap();
    s.create_collection(b.clone()).await.unwrap();
    let reports: Vec<_> = (1..=5u32).map(|k| report(k, 3, a.entries())).collect();
    s.submit("a", reports.clone()).await.unwrap();
    s.submit("b", reports.clone()).await.unwrap();
    s.close_collection("a").await.unwrap();
    let b_before = s.snapshot("b").await.unwrap().acc;
    assert_eq!(s.delete_collection("a").await, Ok(5));
    for gone in [
        s.count("a").await.err(),
        s.collection("a").await.err(),
        s.is_closed("a").await.err(),
        s.read_committed("a").await.err(),
        s.delete_collection("a").await.err(),
        s.submit("a", reports.clone()).await.err(),
    ] {
        assert_eq!(gone, Some(StoreError::NotFound("a".into())));
    }
    assert_eq!(
        s.delete_collection("zz").await,
        Err(StoreError::NotFound("zz".into()))
    );
    drop(s);
    // After a restart: still gone, "b" untouched (its seen ids too), and "a" can be
    // created again from scratch: open, empty, and the old report ids count again.
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(s.count("a").await, Err(StoreError::NotFound("a".into())));
    assert_eq!(s.read_committed("b").await.unwrap().acc, b_before);
    assert_eq!(
        s.submit("b", reports.clone()).await.unwrap(),
        BatchOutcome {
            accepted: 0,
            duplicates: 5
        }
    );
    s.create_collection(a.clone()).await.unwrap();
    assert!(!s.is_closed("a").await.unwrap());
    assert_eq!(s.count("a").await.unwrap(), 0);
    assert_eq!(
        s.submit("a", reports).await.unwrap(),
        BatchOutcome {
            accepted: 5,
            duplicates: 0
        }
    );
    assert_eq!(s.read_committed("a").await.unwrap().acc, b_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delete_changes_nothing_and_write_health_follows_commits() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    let health = s.write_health();
    assert!(*health.borrow());
    s.create_collection(c.clone()).await.unwrap();
    s.submit("a", vec![report(1, 5, c.entries())])
        .await
        .unwrap();
    let before = s.snapshot("a").await.unwrap().acc;
    s.fail_next_commits(1);
    assert!(matches!(
        s.delete_collection("a").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(!*health.borrow(), "a failed commit must report unhealthy");
    assert_eq!(s.snapshot("a").await.unwrap().acc, before);
    assert_eq!(s.read_committed("a").await.unwrap().acc, before);
    // The next successful commit (a submit) makes the store healthy again.
    s.submit("a", vec![report(2, 5, c.entries())])
        .await
        .unwrap();
    assert!(*health.borrow());
    // A failed batch commit too.
    s.fail_next_commits(1);
    assert!(
        s.submit("a", vec![report(3, 5, c.entries())])
            .await
            .is_err()
    );
    assert!(!*health.borrow());
    assert_eq!(s.delete_collection("a").await, Ok(2));
    assert!(*health.borrow());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_commits_the_open_batch_first_and_later_batches_find_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    DurableStore::open(dir.path(), quick())
        .unwrap()
        .create_collection(c.clone())
        .await
        .unwrap();
    // Batches close only at 100 reports: the submit below waits in the open batch
    // until the delete arrives.
    let s = open_sized(dir.path(), 100);
    let submitter = {
        let s = s.clone();
        tokio::spawn(async move { s.submit("a", vec![report(1, 5, 3)]).await })
    };
    s.hooks()
        .wait_for("the submit to join the batch", |e| {
            count(e, Event::Added) == 1
        })
        .await;
    // The racing batch is committed whole before the delete, and deleted with it.
    assert_eq!(s.delete_collection("a").await, Ok(1));
    assert_eq!(
        submitter.await.unwrap(),
        Ok(BatchOutcome {
            accepted: 1,
            duplicates: 0
        })
    );
    assert_eq!(
        s.submit("a", vec![report(2, 5, 3)]).await,
        Err(StoreError::NotFound("a".into()))
    );
    assert_eq!(
        s.read_committed("a").await.err(),
        Some(StoreError::NotFound("a".into()))
    );
}

/// The gRPC health service of a real server follows the store's write health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_is_not_serving_after_a_failed_commit_until_one_succeeds() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    let s = Arc::new(DurableStore::open(dir.path(), quick()).unwrap());
    s.create_collection(c.clone()).await.unwrap();
    let server = crate::EmbeddedServer::start_with_store(s.clone(), crate::Limits::default())
        .await
        .unwrap();
    let channel = tonic::transport::Channel::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    // Polls until `service` reports `want` (the health task follows the store
    // asynchronously); at most 10 s.
    let mut wait_for = async |service: &str, want: ServingStatus| {
        for _ in 0..1000 {
            let got = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner()
                .status();
            if got == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{service:?} never became {want:?}");
    };
    for service in ["", crate::server::HEALTH_SERVICE_NAME] {
        wait_for(service, ServingStatus::Serving).await;
    }
    s.fail_next_commits(1);
    assert!(
        s.submit("a", vec![report(1, 5, c.entries())])
            .await
            .is_err()
    );
    for service in ["", crate::server::HEALTH_SERVICE_NAME] {
        wait_for(service, ServingStatus::NotServing).await;
    }
    s.submit("a", vec![report(1, 5, c.entries())])
        .await
        .unwrap();
    for service in ["", crate::server::HEALTH_SERVICE_NAME] {
        wait_for(service, ServingStatus::Serving).await;
    }
    drop(health);
    server.shutdown().await.unwrap();
}

/// A panic inside the storage engine's commit (redb panics on some damaged files) is
/// caught: the batch's caller gets `UNAVAILABLE`, write health turns `false` and stays
/// so (a later write fails too and never turns it back on), and `failed` resolves with
/// one line naming the database file. What was committed before stays on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_storage_engine_stops_writes_for_good_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.submit("a", vec![report(1, 5, c.entries())])
            .await
            .unwrap();
        let mut health = s.write_health();
        assert!(*health.borrow_and_update());
        let failed = s.failed();
        s.hooks().panic_next_commit();
        let err = s
            .submit("a", vec![report(2, 5, c.entries())])
            .await
            .expect_err("the commit panicked");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        // The caller is told why, with the file.
        assert!(
            err.to_string()
                .contains("the commit thread panicked while writing"),
            "{err}"
        );
        assert!(
            err.to_string().contains(&s.path().display().to_string()),
            "{err}"
        );
        let reason = tokio::time::timeout(Duration::from_secs(10), failed)
            .await
            .expect("failed resolves once the commit thread panicked");
        assert!(reason.contains("panicked"), "{reason}");
        assert!(reason.contains("injected storage engine panic"), "{reason}");
        assert!(reason.contains(&s.path().display().to_string()), "{reason}");
        assert!(!reason.contains('\n'), "{reason}");
        tokio::time::timeout(Duration::from_secs(10), health.wait_for(|h| !*h))
            .await
            .expect("write health turns false")
            .unwrap();
        // Nothing turns it back on: a later write fails as well.
        let later = s.submit("a", vec![report(3, 5, c.entries())]).await;
        assert!(
            matches!(&later, Err(StoreError::Unavailable(e)) if e.to_string().contains("takes no more writes")),
            "{later:?}"
        );
        assert!(!*s.write_health().borrow());
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(s.count("a").await.unwrap(), 1);
}

/// A 0-byte database file is refused (unless `init_empty`), a file that is not redb
/// is refused, a redb file of another program is refused; nothing is written to any
/// of them. A store created normally reopens.
#[test]
fn empty_and_foreign_database_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(DB_FILE);
    std::fs::write(&file, b"").unwrap();
    let err = DurableStore::open(dir.path(), quick()).unwrap_err();
    assert!(matches!(err, DurableError::NotLdpcov { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("is empty (0 bytes)"), "{text}");
    assert!(
        text.contains("is not an ldpcov database; move it away or pass --init-empty"),
        "{text}"
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        0,
        "nothing written"
    );
    let store = DurableStore::open(
        dir.path(),
        DurableConfig {
            init_empty: true,
            ..quick()
        },
    )
    .unwrap();
    drop(store);
    // Now a real (empty) store: it reopens without the flag.
    drop(DurableStore::open(dir.path(), quick()).unwrap());

    std::fs::write(&file, b"name,value\na,1\n").unwrap();
    let err = DurableStore::open(dir.path(), quick()).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not start with a redb header"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"name,value\na,1\n",
        "nothing written"
    );

    std::fs::remove_file(&file).unwrap();
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let table: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("theirs");
            txn.open_table(table).unwrap().insert("k", 1).unwrap();
        }
        txn.commit().unwrap();
    }
    let err = DurableStore::open(dir.path(), quick()).unwrap_err();
    assert!(err.to_string().contains("without ldpcov's tables"), "{err}");
}

/// After a failed commit, write health stays `false` through every further failing
/// commit (no flapping back to `true` between them) and turns `true` only with the
/// first commit that succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_health_stays_false_through_failing_commits_until_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("a", 2);
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    s.create_collection(c.clone()).await.unwrap();
    let mut health = s.write_health();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let follower = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while health.changed().await.is_ok() {
                seen.lock().unwrap().push(*health.borrow_and_update());
            }
        })
    };
    s.fail_next_commits(5);
    for n in 0..5 {
        assert!(
            s.submit("a", vec![report(n, 5, c.entries())])
                .await
                .is_err()
        );
        assert!(!*s.write_health().borrow(), "healthy after failure {n}");
    }
    s.submit("a", vec![report(9, 5, c.entries())])
        .await
        .unwrap();
    assert!(*s.write_health().borrow());
    tokio::time::sleep(Duration::from_millis(200)).await;
    follower.abort();
    assert_eq!(*seen.lock().unwrap(), vec![false, true]);
}

/// The release ledger is on disk: reopened, the store returns the same release at no
/// cost and counts the same ρ spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_ledger_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(crate::store::tests::collection("c", 2))
            .await
            .unwrap();
        let r = s
            .record_release("c", b"key", 0.5, 1.0, b"answer".to_vec())
            .await
            .unwrap();
        assert!(r.fresh);
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(s.budget_spent("c").await, Ok(0.5));
    let again = s
        .record_release("c", b"key", 0.5, 1.0, b"other".to_vec())
        .await
        .unwrap();
    assert_eq!(
        (again.body.as_slice(), again.fresh, again.spent),
        (&b"answer"[..], false, 0.5)
    );
    assert!(matches!(
        s.record_release("c", b"key2", 0.75, 1.0, vec![]).await,
        Err(StoreError::BudgetExhausted { .. })
    ));
}

/// The record of completed shuffled batches is on disk: reopened, the store has the
/// same tally and minimum, and keeps the minimum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_batches_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(crate::store::tests::collection("c", 2))
            .await
            .unwrap();
        s.record_delivered_batch("c", 41).await.unwrap();
        s.record_delivered_batch("c", 40).await.unwrap();
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    let want = crate::store::DeliveredBatches {
        batches: 2,
        smallest: Some(40),
    };
    assert_eq!(s.delivered_batches("c").await, Ok(want));
    s.record_delivered_batch("c", 45).await.unwrap();
    assert_eq!(
        s.delivered_batches("c")
            .await
            .map(|d| (d.batches, d.smallest)),
        Ok((3, Some(40)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    contract::run_all(|case| {
        let path = dir.path().join(case);
        async move {
            let config = DurableConfig {
                batch_delay: std::time::Duration::from_millis(2),
                ..DurableConfig::default()
            };
            Arc::new(DurableStore::open(&path, config).unwrap())
        }
    })
    .await;
}

/// A shuffled batch's tally is written in the transaction that counts its reports: a
/// failed commit adds neither, and both are on disk after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_tally_commits_with_its_reports_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let batch = [0x5a; 16];
    let c = collection("c", 2);
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        let chunk = |ids: std::ops::Range<u32>| ids.map(|k| report(k, 3, c.entries())).collect();
        assert_eq!(
            s.submit_to_batch("c", batch, chunk(0..16))
                .await
                .map(|o| o.accepted),
            Ok(16)
        );
        s.fail_next_commits(1);
        assert!(matches!(
            s.submit_to_batch("c", batch, chunk(16..40)).await,
            Err(StoreError::Unavailable(_))
        ));
        assert_eq!(s.counted_in_batch("c", batch).await, Ok(16));
        assert_eq!(s.count("c").await, Ok(16));
        // Resent whole: the first 16 come back as duplicates, the rest count now.
        assert_eq!(
            s.submit_to_batch("c", batch, chunk(0..40)).await,
            Ok(BatchOutcome {
                accepted: 24,
                duplicates: 16
            })
        );
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(s.counted_in_batch("c", batch).await, Ok(40));
    assert_eq!(s.counted_in_batch("c", [0; 16]).await, Ok(0));
    assert_eq!(s.count("c").await, Ok(40));
}

/// Sets the process's umask for its life and restores the previous one when dropped.
#[cfg(unix)]
struct Umask(rustix::fs::Mode);

#[cfg(unix)]
impl Umask {
    fn set(mask: rustix::fs::RawMode) -> Self {
        Umask(rustix::process::umask(rustix::fs::Mode::from_raw_mode(
            mask,
        )))
    }
}

#[cfg(unix)]
impl Drop for Umask {
    fn drop(&mut self) {
        rustix::process::umask(self.0);
    }
}

/// The permission bits of `path`, in octal (for the failure message).
#[cfg(unix)]
fn mode(path: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    format!(
        "{:04o}",
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    )
}

/// Under the usual umask 022 a new data directory would be 0755 and the file 0644:
/// they are made 0700 and 0600, and an existing store opened to other users is
/// tightened when it is opened again.
#[cfg(unix)]
#[test]
fn the_data_directory_and_the_database_file_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let file = dir.join(DB_FILE);
    {
        // 022 is the common default: the other tests running meanwhile see no change.
        let _umask = Umask::set(0o022);
        drop(DurableStore::open(&dir, quick()).unwrap());
    }
    assert_eq!(mode(&dir), "0700");
    assert_eq!(mode(&file), "0600");
    set(&dir, 0o755);
    set(&file, 0o644);
    drop(DurableStore::open(&dir, quick()).unwrap());
    assert_eq!(mode(&dir), "0700");
    assert_eq!(mode(&file), "0600");
    // A refused file and its directory are left as they were (the refusal is the one
    // line the daemon prints).
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join(DB_FILE), b"").unwrap();
    set(&other, 0o755);
    set(&other.join(DB_FILE), 0o644);
    assert!(matches!(
        DurableStore::open(&other, quick()),
        Err(DurableError::NotLdpcov { .. })
    ));
    assert_eq!(mode(&other), "0755");
    assert_eq!(mode(&other.join(DB_FILE)), "0644");
}
