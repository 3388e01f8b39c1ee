//! Folding deltas into the base, and reading a consistent snapshot (design in the docs
//! of `PostgresStore`).
//!
//! **Invariant:** a fold changes where sums are kept, never their total: it adds a
//! set of deltas into the base and deletes exactly those deltas in one transaction,
//! under the base row's lock, so two folders never add the same delta.

use std::pin::pin;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Pool};
use futures::StreamExt;
use ldpcov_privacy::Collection;
use prost::Message;
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

use super::{corrupt, db_error, pool_error, to_u64};
use crate::store::codec::{Corruption, decode_accumulators, decode_collection, encode_accumulator};
use crate::store::{Cause, StoreError};
use ldpcov_estimate::{Accumulator, FOLDS};

/// Folds every collection with deltas, each in transactions of at most `max` deltas,
/// until none is left that this replica may fold; returns the deltas folded.
pub(super) async fn fold_all(pool: &Pool, max: usize) -> Result<u64, StoreError> {
    let ids: Vec<String> = {
        let client = pool.get().await.map_err(pool_error)?;
        client
            .query("SELECT DISTINCT collection FROM deltas", &[])
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let mut folded = 0;
    for id in ids {
        loop {
            let n = fold_collection(pool, &id, max).await?;
            folded += n;
            if n < max as u64 {
                break;
            }
        }
    }
    Ok(folded)
}

/// The background folder of one replica: [`fold_all`] every `interval`.
pub(super) async fn fold_periodically(pool: Pool, interval: Duration, max: usize) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match fold_all(&pool, max).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deltas = n, "deltas folded"),
            Err(e) => tracing::warn!(error = %e, "folding failed; retried at the next tick"),
        }
    }
}

/// Adds up to `max` of collection `id`'s oldest deltas into its base and deletes them,
/// in one transaction. Returns 0 without waiting when another replica holds the base.
async fn fold_collection(pool: &Pool, id: &str, max: usize) -> Result<u64, StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let txn = client.transaction().await.map_err(db_error)?;
    let Some(row) = txn
        .query_opt(
            "SELECT b.count, b.acc, c.spec FROM bases b JOIN collections c ON c.id = b.collection
             WHERE b.collection = $1 FOR UPDATE OF b SKIP LOCKED",
            &[&id],
        )
        .await
        .map_err(db_error)?
    else {
        return Ok(0);
    };
    let collection = decode_collection(id, row.get::<_, &[u8]>(2)).map_err(corrupt)?;
    let mut base = decode(id, &collection, row.get::<_, Option<&[u8]>>(1))?;
    check_count(id, &base, row.get(0))?;
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let params: [&(dyn ToSql + Sync); 2] = [&id, &limit];
    let mut seqs: Vec<i64> = Vec::new();
    {
        let stream = txn
            .query_raw(
                "SELECT seq, count, acc FROM deltas WHERE collection = $1 ORDER BY seq LIMIT $2",
                params,
            )
            .await
            .map_err(db_error)?;
        let mut stream = pin!(stream);
        while let Some(row) = stream.next().await {
            let row = row.map_err(db_error)?;
            let delta = decode(id, &collection, Some(row.get::<_, &[u8]>(2)))?;
            check_count(id, &delta, row.get(1))?;
            base.merge(&delta);
            seqs.push(row.get(0));
        }
    }
    if seqs.is_empty() {
        return Ok(0);
    }
    let count = i64::try_from(base.count)
        .map_err(|_| StoreError::internal(Cause::Inconsistent("count exceeds i64".into())))?;
    txn.execute(
        "UPDATE bases SET count = $2, acc = $3 WHERE collection = $1",
        &[&id, &count, &encode_accumulator(&base)],
    )
    .await
    .map_err(db_error)?;
    let deleted = txn
        .execute(
            "DELETE FROM deltas WHERE collection = $1 AND seq = ANY($2)",
            &[&id, &seqs],
        )
        .await
        .map_err(db_error)?;
    if deleted != seqs.len() as u64 {
        // Someone removed deltas without the base lock: fold nothing.
        return Err(StoreError::internal(Cause::Inconsistent(format!(
            "collection {id:?}: folded {} deltas but deleted {deleted}",
            seqs.len()
        ))));
    }
    txn.commit().await.map_err(db_error)?;
    Ok(seqs.len() as u64)
}

/// The accumulators of `collection`: its base plus every delta, read in one REPEATABLE
/// READ transaction (one committed state) and merged one row at a time.
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
    let row = txn
        .query_opt("SELECT count, acc FROM bases WHERE collection = $1", &[&id])
        .await
        .map_err(db_error)?
        .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
    let mut acc = decode(id, collection, row.get::<_, Option<&[u8]>>(1))?;
    check_count(id, &acc, row.get(0))?;
    {
        let params: [&(dyn ToSql + Sync); 1] = [&id];
        let stream = txn
            .query_raw(
                "SELECT count, acc FROM deltas WHERE collection = $1",
                params,
            )
            .await
            .map_err(db_error)?;
        let mut stream = pin!(stream);
        while let Some(row) = stream.next().await {
            let row = row.map_err(db_error)?;
            let delta = decode(id, collection, Some(row.get::<_, &[u8]>(1)))?;
            check_count(id, &delta, row.get(0))?;
            acc.merge(&delta);
        }
    }
    txn.commit().await.map_err(db_error)?;
    Ok(acc)
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
