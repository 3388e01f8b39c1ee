//! Folding appended report logs and deltas into the base shards, and reading a
//! consistent snapshot (design in the docs of `PostgresStore`).
//!
//! **Invariant:** a fold changes where sums are kept, never their total: it adds a
//! set of report logs and deltas into one base shard and deletes exactly those rows in
//! one transaction, holding the shard's row lock and each folded row's, so two folders
//! never add the same row and never write the same shard.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Pool};
use futures::StreamExt;
use ldpcov_privacy::Collection;
use prost::Message;
use tokio::sync::Notify;
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

use super::{corrupt, db_error, pool_error, to_u64};
use crate::store::codec::{
    Corruption, decode_accumulators, decode_collection, encode_accumulator, fold_report_log,
};
use crate::store::{Cause, StoreError};
use ldpcov_estimate::{Accumulator, FOLDS};

/// Folds every collection with deltas, or with a report log appended at least
/// `older_than` ago, each in transactions of at most `max` rows (of any age), until none
/// is left that this replica may fold; returns the rows folded. Then sets the gauge of
/// reports not yet folded, per collection.
///
/// `older_than` is what coordinates the replicas' schedules through the database: once
/// one replica folded a collection, the others find its logs younger than their interval
/// and leave them, so a collection is folded about once per interval however many
/// replicas there are (each fold rewrites a shard: 28 MB at p = 1000).
pub(super) async fn fold_all(
    pool: &Pool,
    max: usize,
    older_than: Duration,
) -> Result<u64, StoreError> {
    let ids: Vec<String> = {
        let client = pool.get().await.map_err(pool_error)?;
        let age = older_than.as_secs_f64();
        client
            .query(
                "SELECT collection FROM appended
                 WHERE appended_at <= now() - make_interval(secs => $1)
                 UNION SELECT collection FROM deltas",
                &[&age],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let mut folded = 0;
    for id in &ids {
        loop {
            let n = fold_collection(pool, id, max).await?;
            folded += n;
            if n < max as u64 {
                break;
            }
        }
    }
    if !ids.is_empty() {
        report_unfolded(pool, &ids).await?;
    }
    Ok(folded)
}

/// Sets the gauge of reports not yet folded of collections `ids` (0 for those with
/// none left).
async fn report_unfolded(pool: &Pool, ids: &[String]) -> Result<(), StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let rows = client
        .query(
            "SELECT collection, sum(count)::bigint FROM (
                 SELECT collection, count FROM appended
                 UNION ALL SELECT collection, count FROM deltas
             ) unfolded WHERE collection = ANY($1) GROUP BY collection",
            &[&ids],
        )
        .await
        .map_err(db_error)?;
    for id in ids {
        let reports = rows
            .iter()
            .find(|row| row.get::<_, &str>(0) == id.as_str())
            .map_or(0, |row| row.get::<_, i64>(1));
        crate::telemetry::unfolded_reports("postgres", id, reports.max(0) as u64);
    }
    Ok(())
}

/// The background folder of one replica: [`fold_all`] every `interval` (of what is an
/// interval old), and whenever `now` is notified (this replica appended `fold_bytes` of
/// report logs: everything).
pub(super) async fn fold_periodically(
    pool: Pool,
    interval: Duration,
    max: usize,
    now: Arc<Notify>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // On schedule, collections whose oldest report log is an interval old; on the
        // size trigger, every collection with something to fold.
        let older_than = tokio::select! {
            _ = ticks.tick() => interval,
            () = now.notified() => Duration::ZERO,
        };
        match fold_all(&pool, max, older_than).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(rows = n, "appended reports and deltas folded"),
            Err(e) => tracing::warn!(error = %e, "folding failed; retried at the next tick"),
        }
    }
}

/// Adds up to `max` of collection `id`'s oldest report logs and deltas that no other
/// folder holds into one of its base shards, and deletes them, in one transaction.
/// Returns 0 without waiting when every shard is held by another folder.
async fn fold_collection(pool: &Pool, id: &str, max: usize) -> Result<u64, StoreError> {
    let started = std::time::Instant::now();
    let mut client = pool.get().await.map_err(pool_error)?;
    let txn = client.transaction().await.map_err(db_error)?;
    let Some(row) = txn
        .query_opt(
            "SELECT b.shard, b.count, b.acc, c.spec FROM bases b
             JOIN collections c ON c.id = b.collection
             WHERE b.collection = $1 ORDER BY b.shard LIMIT 1 FOR UPDATE OF b SKIP LOCKED",
            &[&id],
        )
        .await
        .map_err(db_error)?
    else {
        return Ok(0);
    };
    let shard: i32 = row.get(0);
    let collection = decode_collection(id, row.get::<_, &[u8]>(3)).map_err(corrupt)?;
    let mut base = decode(id, &collection, row.get::<_, Option<&[u8]>>(2))?;
    check_count(id, &base, row.get(1))?;
    // The rows this fold takes: locked, so that no other folder takes them too.
    let logs = add_rows(&txn, &collection, &mut base, Rows::Appended, max, true).await?;
    let deltas = add_rows(
        &txn,
        &collection,
        &mut base,
        Rows::Deltas,
        max - logs.len(),
        true,
    )
    .await?;
    if logs.is_empty() && deltas.is_empty() {
        return Ok(0);
    }
    let count = i64::try_from(base.count)
        .map_err(|_| StoreError::internal(Cause::Inconsistent("count exceeds i64".into())))?;
    txn.execute(
        "UPDATE bases SET count = $3, acc = $4 WHERE collection = $1 AND shard = $2",
        &[&id, &shard, &count, &encode_accumulator(&base)],
    )
    .await
    .map_err(db_error)?;
    for (rows, seqs) in [(Rows::Appended, &logs), (Rows::Deltas, &deltas)] {
        if seqs.is_empty() {
            continue;
        }
        let deleted = txn
            .execute(
                &format!(
                    "DELETE FROM {} WHERE collection = $1 AND seq = ANY($2)",
                    rows.table()
                ),
                &[&id, seqs],
            )
            .await
            .map_err(db_error)?;
        if deleted != seqs.len() as u64 {
            // Someone removed rows this fold had locked: fold nothing.
            return Err(StoreError::internal(Cause::Inconsistent(format!(
                "collection {id:?}: folded {} rows of {} but deleted {deleted}",
                seqs.len(),
                rows.table()
            ))));
        }
    }
    fault::hold_fold(id, logs.len() + deltas.len()).await;
    txn.commit().await.map_err(db_error)?;
    crate::telemetry::fold("postgres", started.elapsed());
    Ok((logs.len() + deltas.len()) as u64)
}

/// The rows of a collection's sums that are not a base.
#[derive(Debug, Clone, Copy)]
enum Rows {
    /// `appended`: report logs.
    Appended,
    /// `deltas`: dense partial accumulators.
    Deltas,
}

impl Rows {
    fn table(self) -> &'static str {
        match self {
            Rows::Appended => "appended",
            Rows::Deltas => "deltas",
        }
    }
}

/// Adds `collection`'s rows of one kind to `acc`, oldest first, at most `limit` of
/// them, streamed one at a time; with `lock`, only rows no other transaction holds, each
/// locked `FOR UPDATE` until this transaction ends. Returns their `seq`s.
async fn add_rows(
    txn: &impl GenericClient,
    collection: &Collection,
    acc: &mut Accumulator,
    rows: Rows,
    limit: usize,
    lock: bool,
) -> Result<Vec<i64>, StoreError> {
    let id = collection.id();
    if lock && limit == 0 {
        return Ok(Vec::new());
    }
    let column = match rows {
        Rows::Appended => "reports",
        Rows::Deltas => "acc",
    };
    let sql = if lock {
        format!(
            "SELECT seq, count, {column} FROM {} WHERE collection = $1
             ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
            rows.table()
        )
    } else {
        format!(
            "SELECT seq, count, {column} FROM {} WHERE collection = $1 LIMIT $2",
            rows.table()
        )
    };
    let limit = if lock {
        i64::try_from(limit).unwrap_or(i64::MAX)
    } else {
        i64::MAX
    };
    let params: [&(dyn ToSql + Sync); 2] = [&id, &limit];
    let stream = txn
        .query_raw(sql.as_str(), params)
        .await
        .map_err(db_error)?;
    let mut stream = pin!(stream);
    let mut seqs = Vec::new();
    while let Some(row) = stream.next().await {
        let row = row.map_err(db_error)?;
        let column: i64 = row.get(1);
        let blob: &[u8] = row.get(2);
        match rows {
            Rows::Appended => {
                let added = fold_report_log(acc, blob).map_err(|source| {
                    corrupt(Corruption::Blob {
                        id: id.to_string(),
                        source,
                    })
                })?;
                if to_u64(column)? != added {
                    return Err(StoreError::internal(Cause::Inconsistent(format!(
                        "collection {id:?}: count column {column} disagrees with the report log's {added}"
                    ))));
                }
            }
            Rows::Deltas => {
                let delta = decode(id, collection, Some(blob))?;
                check_count(id, &delta, column)?;
                acc.merge(&delta);
            }
        }
        seqs.push(row.get(0));
    }
    Ok(seqs)
}

/// The accumulators of `collection`: all its base shards, deltas and report logs, read
/// in one REPEATABLE READ transaction (one committed state) and added one row at a
/// time.
pub(super) async fn read_consistent(
    pool: &Pool,
    collection: &Collection,
) -> Result<Accumulator, StoreError> {
    let id = collection.id();
    let mut client = pool.get().await.map_err(pool_error)?;
    let txn = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(db_error)?;
    // The spec in the same snapshot: sums of another incarnation of the collection
    // (deleted and created anew by another replica) are never read as this one's.
    let spec = collection.spec().encode_to_vec();
    let stored = txn
        .query_opt("SELECT spec FROM collections WHERE id = $1", &[&id])
        .await
        .map_err(db_error)?;
    if stored.is_none_or(|row| row.get::<_, &[u8]>(0) != spec.as_slice()) {
        return Err(StoreError::NotFound(id.to_string()));
    }
    let mut acc = Accumulator::new(collection.entries(), FOLDS);
    let mut shards = 0;
    {
        let params: [&(dyn ToSql + Sync); 1] = [&id];
        let stream = txn
            .query_raw("SELECT count, acc FROM bases WHERE collection = $1", params)
            .await
            .map_err(db_error)?;
        let mut stream = pin!(stream);
        while let Some(row) = stream.next().await {
            let row = row.map_err(db_error)?;
            let base = decode(id, collection, row.get::<_, Option<&[u8]>>(1))?;
            check_count(id, &base, row.get(0))?;
            acc.merge(&base);
            shards += 1;
        }
    }
    if shards == 0 {
        return Err(StoreError::NotFound(id.to_string()));
    }
    add_rows(&txn, collection, &mut acc, Rows::Deltas, 0, false).await?;
    add_rows(&txn, collection, &mut acc, Rows::Appended, 0, false).await?;
    txn.commit().await.map_err(db_error)?;
    Ok(acc)
}

/// Fault injection for the crash tests (feature `fault-injection`): a fold that holds
/// its transaction open, everything written but not committed, so that a test can kill
/// the replica in the middle of it.
mod fault {
    /// The environment variable: a fold holds its transaction this many milliseconds
    /// before committing (unset, 0 or not a number: never).
    #[cfg(feature = "fault-injection")]
    pub(super) const FOLD_HOLD_VAR: &str = "LDPCOV_FAULT_FOLD_HOLD_MS";

    /// Holds the fold of `rows` rows of collection `id` before its commit, if armed.
    #[cfg(feature = "fault-injection")]
    pub(super) async fn hold_fold(id: &str, rows: usize) {
        let ms = std::env::var(FOLD_HOLD_VAR)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if ms > 0 {
            tracing::warn!(
                collection = %id, rows, hold_ms = ms,
                "fold holding its transaction before the commit (fault injection)"
            );
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }

    /// Does nothing.
    #[cfg(not(feature = "fault-injection"))]
    pub(super) async fn hold_fold(_id: &str, _rows: usize) {}
}

/// Decodes a stored blob (empty accumulators for `None`) and checks its shape against
/// the collection: merging accumulators of another shape would not be exact.
fn decode(
    id: &str,
    collection: &Collection,
    blob: Option<&[u8]>,
) -> Result<Accumulator, StoreError> {
    let acc = decode_accumulators(id, collection, blob).map_err(corrupt)?;
    if acc.entries() != collection.entries() || acc.fold_sums.len() != FOLDS {
        return Err(corrupt(Corruption::Shape {
            id: id.to_string(),
            entries: acc.entries(),
            folds: acc.fold_sums.len(),
            expected: collection.entries(),
        }));
    }
    Ok(acc)
}

/// Checks a row's `count` column against its blob's count.
fn check_count(id: &str, acc: &Accumulator, column: i64) -> Result<(), StoreError> {
    if to_u64(column)? != acc.count {
        return Err(StoreError::internal(Cause::Inconsistent(format!(
            "collection {id:?}: count column {column} disagrees with the blob's {}",
            acc.count
        ))));
    }
    Ok(())
}
