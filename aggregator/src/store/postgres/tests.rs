//! PostgreSQL-specific tests, each on its own throwaway cluster (`ldpcov-pg-cluster`):
//! replicas sharing one database, folding, reopening, migrations, a database that goes
//! away, closes racing batches. The store contract is in `store/contract.rs`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ldpcov_pg_cluster::PgCluster;
use ldpcov_privacy::ReportId;

use super::*;
use crate::store::contract;
use crate::store::tests::collection;
use ldpcov_estimate::{Accumulator, FOLDS};

fn report(id: u32, entries: usize) -> ValidReport {
    let mut bytes = [0u8; 16];
    bytes[4..8].copy_from_slice(&id.to_be_bytes());
    ValidReport {
        report_id: ReportId(bytes),
        // Entries depend on the id only: a repeated id is a retry of the same report.
        entries: (0..entries)
            .map(|j| (id as i32).wrapping_mul(2_654_435) ^ (j as i32 * 977))
            .collect::<Vec<_>>()
            .into(),
    }
}

fn expected(entries: usize, ids: impl IntoIterator<Item = u32>) -> Accumulator {
    let mut acc = Accumulator::new(entries, FOLDS);
    for id in ids.into_iter().collect::<HashSet<_>>() {
        let r = report(id, entries);
        acc.add(r.report_id.fold(FOLDS), &r.entries.to_dense());
    }
    acc
}

/// Group commit as in production but a short delay; no background folding unless asked.
fn config() -> PostgresConfig {
    PostgresConfig {
        batch_delay: Duration::from_millis(2),
        fold_interval: Duration::ZERO,
        ..PostgresConfig::default()
    }
}

async fn open(url: &str, config: PostgresConfig) -> Arc<PostgresStore> {
    Arc::new(PostgresStore::open(url, config).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_count_each_overlapping_id_once_and_merge_exactly() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("replicas");
    // Replica B folds in the background while both submit: folds race the batches.
    let a = open(&url, config()).await;
    let b = open(
        &url,
        PostgresConfig {
            fold_interval: Duration::from_millis(20),
            fold_batch: 3,
            ..config()
        },
    )
    .await;
    a.create_collection(collection("c", 4)).await.unwrap();
    b.create_collection(collection("c", 4)).await.unwrap();
    let entries = collection("c", 4).entries();
    // 8 tasks per replica, each 12 batches of 10 ids from a window of 400 ids that
    // the tasks of both replicas share: most ids are sent several times, concurrently.
    let mut tasks = Vec::new();
    for (r, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        for t in 0..8u32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut sent = Vec::new();
                let mut accepted = 0;
                for k in 0..12u32 {
                    let ids: Vec<u32> = (0..10u32)
                        .map(|j| (t * 37 + k * 53 + j * 11 + r as u32 * 5) % 400)
                        .collect();
                    let batch = ids.iter().map(|&id| report(id, entries)).collect();
                    accepted += store.submit("c", batch).await.unwrap().accepted;
                    sent.extend(ids);
                }
                (sent, accepted)
            }));
        }
    }
    let mut sent = Vec::new();
    let mut accepted = 0;
    for t in tasks {
        let (ids, n) = t.await.unwrap();
        sent.extend(ids);
        accepted += n;
    }
    let want = expected(entries, sent.iter().copied());
    assert!(want.count > 200, "the test must overlap many ids");
    assert_eq!(
        accepted, want.count,
        "each id accepted by exactly one replica"
    );
    assert_eq!(a.snapshot("c").await.unwrap().acc, want);
    assert_eq!(b.snapshot("c").await.unwrap().acc, want);
    assert_eq!(a.count("c").await.unwrap(), want.count);
    // B's background folder may hold the collection's base row (`FOR UPDATE SKIP
    // LOCKED`) while A folds, and A then skips it: fold until nothing is pending
    // (bounded), the sums staying exact throughout.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        a.fold().await.unwrap();
        if a.pending_deltas().await.unwrap() == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "deltas still pending after 10 s of folding"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(a.snapshot("c").await.unwrap().acc, want);
    assert_eq!(b.snapshot("c").await.unwrap().acc, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folding_preserves_the_snapshot_exactly() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("fold");
    let s = open(
        &url,
        PostgresConfig {
            fold_batch: 4,
            ..config()
        },
    )
    .await;
    s.create_collection(collection("c", 3)).await.unwrap();
    let entries = collection("c", 3).entries();
    for k in 0..10u32 {
        let batch = (0..5).map(|j| report(k * 5 + j, entries)).collect();
        s.submit("c", batch).await.unwrap();
    }
    assert_eq!(s.pending_deltas().await.unwrap(), 10, "one delta per batch");
    let before = s.snapshot("c").await.unwrap();
    assert_eq!(before.acc, expected(entries, 0..50));
    // Ten deltas in transactions of at most four: three folds.
    assert_eq!(s.fold().await.unwrap(), 10);
    assert_eq!(s.pending_deltas().await.unwrap(), 0);
    assert_eq!(s.snapshot("c").await.unwrap(), before);
    // A second round on top of a non-empty base, with repeats of folded ids.
    s.submit("c", (45..60).map(|id| report(id, entries)).collect())
        .await
        .unwrap();
    let mid = s.snapshot("c").await.unwrap();
    assert_eq!(mid.acc, expected(entries, 0..60));
    assert_eq!(s.fold().await.unwrap(), 1);
    assert_eq!(s.snapshot("c").await.unwrap(), mid);
    assert_eq!(s.count("c").await.unwrap(), 60);
}

/// Rows of `table` (`appended`, `deltas`) now.
async fn rows(s: &PostgresStore, table: &str) -> i64 {
    let client = s.pool.get().await.unwrap();
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

/// A small batch is appended as a report log, a batch whose log would be larger than
/// the blob as a dense delta; a fold skips a shard another transaction holds and folds
/// into the next one; the sums are exact throughout and each row is folded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_append_or_delta_by_bytes_and_folds_skip_held_shards() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("shards");
    let s = open(
        &url,
        PostgresConfig {
            fold_shards: 2,
            ..config()
        },
    )
    .await;
    s.create_collection(collection("c", 3)).await.unwrap();
    let entries = collection("c", 3).entries();
    for k in 0..3u32 {
        s.submit(
            "c",
            vec![report(2 * k, entries), report(2 * k + 1, entries)],
        )
        .await
        .unwrap();
    }
    assert_eq!(
        (rows(&s, "appended").await, rows(&s, "deltas").await),
        (3, 0)
    );
    let big = crate::store::codec::accumulator_blob_len(entries) / (7 + 4 * entries) + 1;
    let big = big as u32;
    s.submit(
        "c",
        (100..100 + big).map(|id| report(id, entries)).collect(),
    )
    .await
    .unwrap();
    assert_eq!(
        (rows(&s, "appended").await, rows(&s, "deltas").await),
        (3, 1)
    );
    let want = expected(entries, (0..6).chain(100..100 + big));
    assert_eq!(s.snapshot("c").await.unwrap().acc, want);
    // Another transaction holds shard 0: the fold goes to shard 1, without waiting.
    let mut holder = s.pool.get().await.unwrap();
    let held = holder.transaction().await.unwrap();
    held.query(
        "SELECT 1 FROM bases WHERE collection = 'c' AND shard = 0 FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(s.fold().await.unwrap(), 4);
    let counts: Vec<(i32, i64)> = {
        let client = s.pool.get().await.unwrap();
        client
            .query(
                "SELECT shard, count FROM bases WHERE collection = 'c' ORDER BY shard",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    assert_eq!(counts, vec![(0, 0), (1, i64::from(6 + big))]);
    assert_eq!(s.pending_deltas().await.unwrap(), 0);
    assert_eq!(s.snapshot("c").await.unwrap().acc, want);
    held.rollback().await.unwrap();
    // A later batch folds into shard 0, the first free one; the sums merge exactly.
    s.submit("c", vec![report(6, entries), report(0, entries)])
        .await
        .unwrap();
    assert_eq!(s.fold().await.unwrap(), 1);
    let want = expected(entries, (0..7).chain(100..100 + big));
    assert_eq!(s.snapshot("c").await.unwrap().acc, want);
    assert_eq!(s.count("c").await.unwrap(), want.count);
    assert_eq!(s.delete_collection("c").await, Ok(want.count));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_store_sees_everything_committed() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("reopen");
    let entries = collection("c", 2).entries();
    let before = {
        let s = open(&url, config()).await;
        s.create_collection(collection("c", 2)).await.unwrap();
        s.create_collection(collection("d", 2)).await.unwrap();
        s.submit("c", (0..30).map(|id| report(id, entries)).collect())
            .await
            .unwrap();
        s.fold().await.unwrap();
        s.submit("c", (20..40).map(|id| report(id, entries)).collect())
            .await
            .unwrap();
        s.close_collection("d").await.unwrap();
        s.snapshot("c").await.unwrap()
    };
    let s = open(&url, config()).await;
    assert_eq!(s.snapshot("c").await.unwrap(), before);
    assert_eq!(before.acc, expected(entries, 0..40));
    assert!(s.is_closed("d").await.unwrap());
    assert!(!s.is_closed("c").await.unwrap());
    // The seen ids survived too.
    let o = s
        .submit("c", (35..45).map(|id| report(id, entries)).collect())
        .await
        .unwrap();
    assert_eq!((o.accepted, o.duplicates), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_apply_each_migration_once() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("migrate");
    let opened =
        futures::future::join_all((0..4).map(|_| PostgresStore::open(&url, config()))).await;
    let stores: Vec<PostgresStore> = opened.into_iter().map(Result::unwrap).collect();
    let client = stores[0].pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT version, name FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    let applied: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let known: Vec<(i64, String)> = schema::MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_string()))
        .collect();
    assert_eq!(applied, known);
    // A schema newer than this binary's is refused.
    client
        .execute(
            "INSERT INTO schema_migrations (version, name) VALUES (999, 'future')",
            &[],
        )
        .await
        .unwrap();
    let refused = PostgresStore::open(&url, config()).await;
    assert!(
        matches!(refused, Err(PostgresError::Newer { found: 999, .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_is_down_is_unavailable_and_nothing_is_partial() {
    let mut pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("down");
    let s = open(
        &url,
        PostgresConfig {
            connect_timeout: Duration::from_secs(2),
            ..config()
        },
    )
    .await;
    s.create_collection(collection("c", 2)).await.unwrap();
    let entries = collection("c", 2).entries();
    s.submit("c", (0..10).map(|id| report(id, entries)).collect())
        .await
        .unwrap();
    let health = s.write_health();
    assert!(*health.borrow());
    pg.stop().unwrap();
    let refused = s
        .submit("c", (10..20).map(|id| report(id, entries)).collect())
        .await;
    assert!(
        matches!(refused, Err(StoreError::Unavailable(_))),
        "{refused:?}"
    );
    // The failed commit turned the write health off (gRPC health: NOT_SERVING).
    assert!(!*health.borrow());
    assert!(matches!(
        s.count("c").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        s.snapshot("c").await,
        Err(StoreError::Unavailable(_))
    ));
    pg.restart().unwrap();
    // Nothing of the refused batch was counted; resending it counts it all.
    assert_eq!(s.count("c").await.unwrap(), 10);
    let o = s
        .submit("c", (10..20).map(|id| report(id, entries)).collect())
        .await
        .unwrap();
    assert_eq!(o.accepted, 10);
    // … and the next commit turned it on again.
    assert!(*health.borrow());
    assert_eq!(s.snapshot("c").await.unwrap().acc, expected(entries, 0..20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_racing_a_close_is_counted_entirely_or_refused() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("close");
    let a = open(&url, config()).await;
    let b = open(&url, config()).await;
    // Several rounds, one collection each: a batch in flight when the close lands is
    // likely in every round, so a missing lock shows in almost every run.
    for round in 0..4 {
        let id = format!("c{round}");
        a.create_collection(collection(&id, 2)).await.unwrap();
        let entries = collection(&id, 2).entries();
        let mut tasks = Vec::new();
        for t in 0..12u32 {
            let s = if t % 2 == 0 { a.clone() } else { b.clone() };
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                let mut counted = Vec::new();
                for k in 0..20u32 {
                    // Large batches keep each transaction open a while after its
                    // closed check: a close lands inside that window often.
                    let ids: Vec<u32> = (0..100).map(|j| t * 10_000 + k * 100 + j).collect();
                    let batch = ids.iter().map(|&id| report(id, entries)).collect();
                    match s.submit(&id, batch).await {
                        Ok(o) => {
                            assert_eq!(o.accepted, 100);
                            counted.extend(ids);
                        }
                        Err(StoreError::Closed(_)) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                counted
            }));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        b.close_collection(&id).await.unwrap();
        // Once the close returned, nothing more is counted (a batch that had read the
        // flag before the close would otherwise commit after it).
        let at_close = a.snapshot(&id).await.unwrap();
        let mut counted = Vec::new();
        for t in tasks {
            counted.extend(t.await.unwrap());
        }
        let after = a.snapshot(&id).await.unwrap();
        assert_eq!(after, at_close, "round {round}: counted after the close");
        // Exactly the acknowledged batches are in the sums: none half counted.
        assert!(after.acc.count > 0 && after.acc.count < 12 * 20 * 100);
        assert_eq!(after.acc, expected(entries, counted));
        assert!(a.is_closed(&id).await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_one_connection_sees_other_replicas_creates() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("creates");
    let a = open(&url, config()).await;
    // One connection, a short wait: an operation that needed a second connection
    // while holding the first would time out.
    let b = open(
        &url,
        PostgresConfig {
            pool_size: 1,
            connect_timeout: Duration::from_secs(2),
            ..config()
        },
    )
    .await;
    a.create_collection(collection("c", 2)).await.unwrap();
    // b has never seen "c": its creates go to the database.
    assert_eq!(
        b.create_collection(collection("c", 3)).await,
        Err(StoreError::AlreadyExists("c".into()))
    );
    assert_eq!(
        *b.create_collection(collection("c", 2)).await.unwrap(),
        collection("c", 2)
    );
    let entries = collection("c", 2).entries();
    b.submit("c", (0..5).map(|id| report(id, entries)).collect())
        .await
        .unwrap();
    assert_eq!(a.count("c").await.unwrap(), 5);
    a.close_collection("c").await.unwrap();
    assert!(b.is_closed("c").await.unwrap());
    assert_eq!(
        b.submit("c", vec![report(9, entries)]).await,
        Err(StoreError::Closed("c".into()))
    );
    // "r" is removed and created anew with other parameters by another replica (here
    // by hand): b's cached spec no longer matches, so its batch counts nothing.
    a.create_collection(collection("r", 2)).await.unwrap();
    b.submit("r", vec![report(1, entries)]).await.unwrap();
    let other = prost::Message::encode_to_vec(&collection("r", 3).spec());
    a.pool
        .get()
        .await
        .unwrap()
        .execute("UPDATE collections SET spec = $1 WHERE id = 'r'", &[&other])
        .await
        .unwrap();
    assert_eq!(
        b.submit("r", vec![report(2, entries)]).await,
        Err(StoreError::NotFound("r".into()))
    );
    assert_eq!(a.count("r").await.unwrap(), 1);
}

/// Replica A deletes a collection that replicas B and C have cached (C also as closed)
/// and creates it anew with other parameters. B never counts a report validated for
/// the old one into the new one, C never answers a snapshot of the new sums with the
/// old spec, and after the cache TTL both serve the new spec, open, with the new sums.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_deleted_and_created_anew_elsewhere_is_never_served_stale() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("recreate");
    let ttl = Duration::from_millis(300);
    let short = || PostgresConfig {
        cache_ttl: ttl,
        ..config()
    };
    let (a, b, c) = (
        open(&url, config()).await,
        open(&url, short()).await,
        open(&url, short()).await,
    );
    let old = collection("c", 3);
    a.create_collection(old.clone()).await.unwrap();
    let n = old.entries();
    b.submit("c", (1..=4).map(|k| report(k, n)).collect())
        .await
        .unwrap();
    assert_eq!(*b.collection("c").await.unwrap(), old);
    a.close_collection("c").await.unwrap();
    assert!(c.is_closed("c").await.unwrap());
    assert_eq!(*c.collection("c").await.unwrap(), old);

    // A deletes it and creates it anew: the same dimension (so old reports still have
    // the right length), another ε.
    assert_eq!(a.delete_collection("c").await, Ok(4));
    let new = Collection::from_spec(&ldpcov_proto::v1::CollectionSpec {
        epsilon: 2.0,
        ..old.spec()
    })
    .unwrap();
    assert_eq!(new.entries(), n);
    a.create_collection(new.clone()).await.unwrap();
    a.submit("c", (10..=12).map(|k| report(k, n)).collect())
        .await
        .unwrap();

    // B still holds the old spec: a batch validated against it is refused, not
    // counted into the new collection.
    assert_eq!(
        b.submit("c", vec![report(20, n)]).await,
        Err(StoreError::NotFound("c".into()))
    );
    assert_eq!(a.count("c").await.unwrap(), 3);
    // C still holds the old spec: its snapshot is refused, not read with it.
    assert_eq!(
        c.snapshot("c").await.map(|s| s.acc),
        Err(StoreError::NotFound("c".into()))
    );

    // After the TTL both read the new incarnation: new spec, open, the new sums.
    tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    for replica in [&b, &c] {
        assert_eq!(*replica.collection("c").await.unwrap(), new);
        assert!(!replica.is_closed("c").await.unwrap());
    }
    let o = c.submit("c", vec![report(21, n)]).await.unwrap();
    assert_eq!((o.accepted, o.duplicates), (1, 0));
    assert_eq!(
        b.snapshot("c").await.unwrap().acc,
        expected(n, [10, 11, 12, 21])
    );
}

/// Two replicas recording releases of one collection at once never spend more than
/// its budget together: 2 × 5 releases of ρ = 1/4 against a budget of 1 record 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_recording_releases_never_overspend_together() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("ledger");
    let (a, b) = (open(&url, config()).await, open(&url, config()).await);
    a.create_collection(collection("c", 2)).await.unwrap();
    let tasks: Vec<_> = (0..10u8)
        .map(|k| {
            let s = if k % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { s.record_release("c", &[k], 0.25, 1.0, vec![k]).await })
        })
        .collect();
    let mut recorded = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => {
                assert!(r.fresh);
                recorded += 1;
            }
            Err(StoreError::BudgetExhausted { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(recorded, 4);
    assert_eq!(b.budget_spent("c").await, Ok(1.0));
    assert_eq!(a.budget_spent("c").await, Ok(1.0));
}

/// Two replicas counting chunks of the same shuffled batches at once (overlapping
/// report ids): every report is counted once and in one batch's tally, the upserts of
/// both replicas add up, and the tallies are there after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_add_up_a_shuffled_batch_tally_that_survives_a_reopen() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("tallies");
    let batches = [[1u8; 16], [2u8; 16]];
    let (a, b) = (open(&url, config()).await, open(&url, config()).await);
    a.create_collection(collection("c", 2)).await.unwrap();
    b.create_collection(collection("c", 2)).await.unwrap();
    let entries = collection("c", 2).entries();
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let s = if t % 2 == 0 { a.clone() } else { b.clone() };
            let batch = batches[(t / 2 % 2) as usize];
            tokio::spawn(async move {
                let mut accepted = 0;
                for k in 0..6u32 {
                    let chunk = (0..8u32)
                        .map(|j| report((t * 11 + k * 8 + j) % 100, entries))
                        .collect();
                    accepted += s.submit_to_batch("c", batch, chunk).await.unwrap().accepted;
                }
                (batch, accepted)
            })
        })
        .collect();
    let mut want = [0u64; 2];
    for t in tasks {
        let (batch, n) = t.await.unwrap();
        want[usize::from(batch[0] - 1)] += n;
    }
    let counted = a.count("c").await.unwrap();
    assert_eq!(want[0] + want[1], counted);
    drop((a, b));
    let s = open(&url, config()).await;
    assert_eq!(s.counted_in_batch("c", batches[0]).await, Ok(want[0]));
    assert_eq!(s.counted_in_batch("c", batches[1]).await, Ok(want[1]));
    assert_eq!(s.counted_in_batch("c", [3; 16]).await, Ok(0));
    assert_eq!(s.delete_collection("c").await, Ok(counted));
    assert_eq!(rows(&s, "shuffled_batch_counts").await, 0);
}

/// A database written before the batch tallies (schema 4, reports counted) takes
/// migration 5 at open and keeps everything: the reports count as before, in no tally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_schema_4_opens_with_its_reports_and_empty_tallies() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("schema4");
    let entries = collection("c", 2).entries();
    {
        let s = open(&url, config()).await;
        s.create_collection(collection("c", 2)).await.unwrap();
        s.submit("c", (0..20).map(|id| report(id, entries)).collect())
            .await
            .unwrap();
        s.record_delivered_batch("c", 20).await.unwrap();
        // Back to schema 4, as an older aggregator left it.
        let client = s.pool.get().await.unwrap();
        client
            .batch_execute(
                "DROP TABLE shuffled_batch_counts;
                 DELETE FROM schema_migrations WHERE version = 5",
            )
            .await
            .unwrap();
    }
    let s = open(&url, config()).await;
    assert_eq!(s.snapshot("c").await.unwrap().acc, expected(entries, 0..20));
    assert_eq!(
        s.delivered_batches("c").await.map(|d| d.smallest),
        Ok(Some(20))
    );
    assert_eq!(s.counted_in_batch("c", [1; 16]).await, Ok(0));
    let o = s
        .submit_to_batch(
            "c",
            [1; 16],
            (15..25).map(|id| report(id, entries)).collect(),
        )
        .await
        .unwrap();
    assert_eq!((o.accepted, o.duplicates), (5, 5));
    assert_eq!(s.counted_in_batch("c", [1; 16]).await, Ok(5));
}

/// A database of schema 5 takes migration 6 at open, its collections kept; a leader's
/// queue (in arrival order) and a helper's verdicts are then in the database with the
/// counts they went with: a new store on it (another replica, or a restart) has all of
/// them, the queue's dedupe included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_and_the_verdicts_survive_a_reopen_with_their_counts() {
    let pg = PgCluster::start_or_panic();
    let url = pg.database_or_panic("two_aggregator");
    let entries = collection("leader", 2).entries();
    let upload = |k: u32, body: &[u8]| crate::store::QueuedUpload {
        report_id: report(k, 0).report_id,
        body: body.to_vec(),
    };
    let rid = |k: u32| report(k, 0).report_id;
    {
        let s = open(&url, config()).await;
        s.create_collection(collection("leader", 2)).await.unwrap();
        s.create_collection(collection("helper", 2)).await.unwrap();
        // Back to schema 5, as an older aggregator left it.
        let client = s.pool.get().await.unwrap();
        client
            .batch_execute(
                "DROP TABLE queued_uploads, verdicts;
                 DELETE FROM schema_migrations WHERE version = 6",
            )
            .await
            .unwrap();
    }
    {
        let s = open(&url, config()).await;
        for k in [5, 2, 9, 7] {
            assert_eq!(
                s.queue_upload("leader", upload(k, &[k as u8; 4])).await,
                Ok(true)
            );
        }
        assert_eq!(
            s.submit_from_queue("leader", vec![report(9, entries)], vec![rid(9)])
                .await
                .map(|o| o.accepted),
            Ok(1)
        );
        assert_eq!(
            s.submit_with_verdicts(
                "helper",
                vec![report(1, entries)],
                vec![(rid(1), b"yes".to_vec()), (rid(2), b"no".to_vec())]
            )
            .await
            .map(|o| o.accepted),
            Ok(1)
        );
        s.close_collection("helper").await.unwrap();
    }
    let s = open(&url, config()).await;
    assert_eq!(
        s.queued_uploads("leader", 10).await,
        Ok(vec![
            upload(5, &[5; 4]),
            upload(2, &[2; 4]),
            upload(7, &[7; 4])
        ])
    );
    assert_eq!(s.queued_count("leader").await, Ok(3));
    assert_eq!(
        s.snapshot("leader").await.unwrap().acc,
        expected(entries, [9])
    );
    assert_eq!(
        s.verdicts("helper", &[rid(1), rid(2), rid(3)]).await,
        Ok(vec![Some(b"yes".to_vec()), Some(b"no".to_vec()), None])
    );
    assert_eq!(s.count("helper").await, Ok(1));
    // Still deduped, still ordered: a queued id stays queued once, a new one goes last.
    assert_eq!(
        s.queue_upload("leader", upload(2, b"again")).await,
        Ok(false)
    );
    assert_eq!(s.queue_upload("leader", upload(1, b"new")).await, Ok(true));
    assert_eq!(
        s.queued_uploads("leader", 10)
            .await
            .map(|q| q.iter().map(|u| u.report_id).collect::<Vec<_>>()),
        Ok(vec![rid(5), rid(2), rid(7), rid(1)])
    );
    // The helper still verifies on its closed collection, keeping its first verdict.
    assert_eq!(
        s.submit_with_verdicts(
            "helper",
            vec![report(2, entries)],
            vec![(rid(2), b"other".to_vec())]
        )
        .await
        .map(|o| o.accepted),
        Ok(1)
    );
    assert_eq!(
        s.verdicts("helper", &[rid(2)]).await,
        Ok(vec![Some(b"no".to_vec())])
    );
    assert_eq!(s.delete_collection("leader").await, Ok(1));
    assert_eq!(rows(&s, "queued_uploads").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_keeps_the_contract() {
    let pg = PgCluster::start_or_panic();
    contract::run_all(|case| {
        let url = pg.database_or_panic(case);
        async move {
            let config = PostgresConfig {
                batch_delay: std::time::Duration::from_millis(2),
                ..PostgresConfig::default()
            };
            Arc::new(PostgresStore::open(&url, config).await.unwrap())
        }
    })
    .await;
}
