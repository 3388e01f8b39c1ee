//! The PostgreSQL store: [`PostgresStore`] (its docs hold the design: tables, one
//! transaction per group of batches, folding, consistency, failure handling), shared by
//! any number of stateless aggregator replicas.
//!
//! Files: `config.rs` (its settings and open errors), `schema.rs` (the migrations in
//! `aggregator/migrations/`), `commit.rs` (the group-commit task and the batch
//! transaction), `fold.rs` (adding deltas into the base and reading a consistent
//! snapshot), `cache.rs` (what a replica caches), `errors.rs` (driver failures as store
//! errors), `two_aggregator.rs` (a two-aggregator leader's queue and helper's
//! verdicts, outside the batches), `tests.rs` (PostgreSQL-specific tests on a
//! throwaway cluster; the store contract is checked in `store/contract.rs`).

mod cache;
mod commit;
mod config;
mod errors;
mod fold;
mod schema;
#[cfg(test)]
mod tests;
mod two_aggregator;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use ldpcov_privacy::{Collection, ReportId};
use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

use super::{
    BatchOutcome, Cause, DeliveredBatches, QueuedUpload, RecordedRelease, Snapshot, Store,
    StoreError, ValidReport, check_release,
};

use super::Along;
use cache::Cache;
use commit::{Committer, Submission};
pub use config::{PostgresConfig, PostgresError};
use errors::{corrupt, db_error, pool_error, to_u64};

/// A [`Store`] in a PostgreSQL database that any number of aggregator replicas
/// (processes) share; each replica is stateless beyond a cache of immutable facts.
///
/// # Driver
///
/// `tokio-postgres` with a `deadpool-postgres` pool: the store's code is plain SQL on
/// one async driver, with explicit transactions whose isolation level is chosen per
/// use (READ COMMITTED with row locks for batches and folds, REPEATABLE READ for
/// snapshots), streamed row reads (a p = 1000 accumulator is tens of MB) and no
/// compile-time database connection (`sqlx`'s checked queries need one, or a cached
/// query file kept in step). Connections are plaintext (`NoTls`): run the database on
/// a private network or loopback.
///
/// # Tables
///
/// Created by the migrations in `aggregator/migrations/` (applied at open, see
/// `schema.rs`; recorded in `schema_migrations`):
///
/// | table         | key                      | holds                                      |
/// |---------------|--------------------------|--------------------------------------------|
/// | `collections` | `id`                     | `spec` (`CollectionSpec` protobuf bytes, as the redb store keeps it), `closed` |
/// | `bases`       | (`collection`, `shard`)  | `count`, `acc`: folded accumulators, [`PostgresConfig::fold_shards`] rows per collection |
/// | `appended`    | (`collection`, `seq`)    | `count`, `reports`: one committed batch's counted reports as a report log; `appended_at` |
/// | `deltas`      | (`collection`, `seq`)    | `count`, `acc`: one committed batch's partial accumulators |
/// | `seen`        | (`collection`, `report_id`) | — (every counted report id)             |
/// | `shuffled_batch_counts` | (`collection`, `batch_id`) | `accepted`: reports counted under that shuffled batch |
/// | `queued_uploads` | (`collection`, `seq`), unique (`collection`, `report_id`) | `body`: a two-aggregator leader's queued upload |
/// | `verdicts`    | (`collection`, `report_id`) | `verdict`: a two-aggregator helper's verdict |
///
/// Accumulators (`acc`) are blobs in the durable store's format (see `DurableStore`,
/// "Accumulator blob"): exact per-fold `i64` sums and `u128` sums of squares, added
/// in Rust, never as SQL numbers. Report logs are the compact form of a batch's
/// reports (`store/codec.rs`, "Report log": a rank-one report's vector, p integers). A
/// collection's accumulators are all its base shards plus its deltas plus its report
/// logs.
///
/// # One transaction per group of batches
///
/// Each replica runs one group-commit task (the semantics of `DurableStore`'s commit
/// thread, on tokio): concurrent [`submit`](Store::submit) calls that arrive within
/// [`PostgresConfig::batch_delay`] (or until [`PostgresConfig::batch_size`] reports)
/// are committed in one transaction, and a caller is answered only after it committed.
/// Per collection in the group, sorted by id, the transaction
///
/// 1. locks the `collections` row `FOR SHARE` and reads `closed`: a missing row answers
///    that collection's batches with [`StoreError::NotFound`], a closed one with
///    [`StoreError::Closed`], and neither counts anything;
/// 2. removes the group's own repeated ids (the first occurrence, in arrival order,
///    is the one that may count), then inserts the ids, sorted, into `seen` with
///    `ON CONFLICT DO NOTHING … RETURNING`: exactly the returned ids are counted, the
///    others are duplicates;
/// 3. inserts one row holding the counted reports: an `appended` row with their report
///    log when that is smaller than an accumulator blob (rank-one reports; any report
///    in small batches), else a `deltas` row with their partial accumulators (Gaussian
///    reports at large p in full batches). One row per collection and group: the
///    group's multi-row insert is already made inside the log;
/// 4. for chunks of shuffled batches ([`Store::submit_to_batch`]), adds what each
///    counted to its batch's `shuffled_batch_counts` row (one upsert, rows in batch
///    id order), so a tally commits or rolls back with its reports; likewise a
///    two-aggregator leader's batches ([`Store::submit_from_queue`]) delete their
///    `queued_uploads` rows and a helper's ([`Store::submit_with_verdicts`]) insert
///    their `verdicts` (`ON CONFLICT DO NOTHING`: the first stays). These two count
///    on a closed collection too.
///
/// If any statement or the commit fails, the transaction is rolled back and every
/// caller of the group gets the same error, counting nothing: [`StoreError::Unavailable`]
/// when the database is unreachable or the failure is transient (connection lost,
/// serialization failure, deadlock, server shutting down), [`StoreError::Internal`]
/// otherwise. A connection lost during `COMMIT` leaves the outcome unknown
/// ([`Cause::CommitOutcomeUnknown`]); retrying with the same ids is safe, as `seen`
/// then reports them as duplicates.
///
/// # Replicas
///
/// A report id counts at most once per collection across every replica: the primary
/// key of `seen` is checked in the transaction that adds the report's delta, so a
/// concurrent insert of the same id by another replica waits for that transaction and
/// then either skips the id (it committed) or counts it (it rolled back). Ids are
/// inserted in sorted order so that two replicas cannot deadlock on each other's ids
/// (if PostgreSQL still reports a deadlock, the group fails as Unavailable, to be
/// retried). [`close_collection`](Store::close_collection) updates the `collections`
/// row, which waits for every batch holding its `FOR SHARE` lock and makes every later
/// batch see `closed`: a batch that races a close is counted entirely before it or
/// refused.
///
/// # Write amplification and folding
///
/// A batch never rewrites a collection's accumulators: it inserts one row whose size
/// follows what arrived, the report log (4 bytes per value: 4 KB per rank-one report at
/// p = 1000, stored uncompressed out of line) or, when smaller, the dense delta of
/// `d·(8·FOLDS + 16)` bytes (28 MB at p = 1000, before PostgreSQL's compression), plus
/// one `seen` row per report.
///
/// Folding moves report logs and deltas into the base shards, exactly once. Any replica
/// folds, every [`PostgresConfig::fold_interval`] (the collections whose oldest report
/// log is that old, or that have deltas: once one replica folded a collection, the
/// others find its logs too young, so more replicas do not mean more folds) and as soon
/// as it has appended [`PostgresConfig::fold_bytes`] of logs since its last fold
/// (everything): per collection, one
/// transaction locks one base shard `FOR UPDATE SKIP LOCKED` (the first no other
/// folder holds), takes up to [`PostgresConfig::fold_batch`] of the oldest logs and
/// deltas `FOR UPDATE SKIP LOCKED` (rows another folder holds are skipped, never
/// waited for), adds them into the shard in Rust, writes the shard and deletes exactly
/// those rows, then commits. So two folders never add the same row (its row lock) nor
/// write the same shard (the shard's lock), replicas fold different rows into
/// different shards at the same time, and batches, which touch neither, are never
/// blocked. A folder that dies mid-fold (a killed replica, a lost connection) leaves
/// its transaction to be rolled back: its rows are still unfolded and are folded later
/// by anyone. A base shard is rewritten once per fold, not per batch.
///
/// [`snapshot`](Store::snapshot) reads every base shard, delta and report log in one
/// REPEATABLE READ transaction: it sees one committed state, before or after any fold,
/// and a fold moves sums from rows into a shard without changing their total; so an
/// estimate is exact whatever is still unfolded (it costs adding those logs once more).
/// Rows are streamed and added one at a time, so a snapshot holds one accumulator and
/// one row in memory.
///
/// # Cache
///
/// A replica caches collection specs (immutable once created) and closed flags (a
/// close is final), nothing else: counts and sums are always read from the database.
/// Only a delete (on any replica) ends a collection's incarnation, so each cached fact
/// is trusted for [`PostgresConfig::cache_ttl`] (5 s by default) and dropped at once
/// when the database shows the collection gone or different. A batch's transaction
/// compares the stored spec with the cached one it was validated against and refuses
/// the batch ([`StoreError::NotFound`]) if they differ, and a snapshot reads the spec
/// in its own transaction and refuses the same way, so a collection removed and
/// created anew under the same id by another replica never receives reports, nor
/// answers estimates, for the old one; for at most the TTL another replica may still
/// show the old spec to `GetCollection` (devices then get `NOT_FOUND` on submit and
/// fetch it again).
///
/// # Removing a collection
///
/// One transaction: lock the `bases` rows `FOR UPDATE` (waits for the folds) and the
/// `collections` row `FOR UPDATE` (waits for the batches holding it), delete the
/// collection's `seen`, `shuffled_batch_counts`, `queued_uploads`, `verdicts`,
/// `deltas`, `appended`, `bases`, `releases`, `delivered_batches` and `collections`
/// rows, commit, then drop the
/// collection from this replica's cache; other replicas' batches then find no row.
pub struct PostgresStore {
    pool: Pool,
    cache: Arc<Cache>,
    /// Written by the group-commit task: see [`Store::write_health`].
    write_healthy: tokio::sync::watch::Sender<bool>,
    tx: Option<mpsc::UnboundedSender<Submission>>,
    committer: Option<JoinHandle<()>>,
    folder: Option<JoinHandle<()>>,
    config: PostgresConfig,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST:PORT/DB`,
    /// or any form `tokio_postgres::Config` parses), applies the missing schema
    /// migrations, and starts this replica's group-commit and folding tasks. Must be
    /// called within a tokio runtime.
    pub async fn open(url: &str, config: PostgresConfig) -> Result<Self, PostgresError> {
        let mut pg = tokio_postgres::Config::from_str(url).map_err(PostgresError::Url)?;
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(config.connect_timeout);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("ldpcov-aggregator");
        }
        let manager = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(config.connect_timeout))
            .create_timeout(Some(config.connect_timeout))
            .build()?;
        let applied = {
            let mut client = pool.get().await?;
            let applied = schema::migrate(&mut client).await?;
            client
                .execute(ENSURE_SHARDS, &[&None::<&str>, &shards(&config)])
                .await?;
            applied
        };
        let cache = Arc::new(Cache::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let (write_healthy, _) = tokio::sync::watch::channel(true);
        let fold_now = Arc::new(tokio::sync::Notify::new());
        let committer = tokio::spawn(
            Committer {
                pool: pool.clone(),
                rx,
                batch_size: config.batch_size.max(1),
                batch_delay: config.batch_delay,
                write_healthy: write_healthy.clone(),
                fold_now: fold_now.clone(),
                fold_bytes: config.fold_bytes,
            }
            .run(),
        );
        let folder = (!config.fold_interval.is_zero()).then(|| {
            tokio::spawn(fold::fold_periodically(
                pool.clone(),
                config.fold_interval,
                config.fold_batch.max(1),
                fold_now,
            ))
        });
        tracing::info!(
            migrations_applied = applied,
            pool_size = config.pool_size,
            "PostgreSQL store opened"
        );
        Ok(PostgresStore {
            pool,
            cache,
            write_healthy,
            tx: Some(tx),
            committer: Some(committer),
            folder,
            config,
        })
    }

    /// Folds every collection's report logs and deltas into its base shards now (what
    /// the background task does every [`PostgresConfig::fold_interval`]); returns the
    /// number of rows folded. Snapshots are the same before and after.
    pub async fn fold(&self) -> Result<u64, StoreError> {
        fold::fold_all(&self.pool, self.config.fold_batch.max(1), Duration::ZERO).await
    }

    /// Rows not yet folded, report logs and deltas, over all collections (operators
    /// and tests).
    pub async fn pending_deltas(&self) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM deltas) + (SELECT count(*) FROM appended)",
                &[],
            )
            .await
            .map_err(db_error)?;
        to_u64(row.get::<_, i64>(0))
    }
}

impl Drop for PostgresStore {
    /// Stops the folder (a fold in flight is rolled back by the server) and lets the
    /// group-commit task finish the groups already sent, then end.
    fn drop(&mut self) {
        if let Some(folder) = self.folder.take() {
            folder.abort();
        }
        self.tx.take();
        self.committer.take();
    }
}

/// Creates the missing base shards (`$2` per collection) of collection `$1`, or of
/// every collection when `$1` is NULL.
const ENSURE_SHARDS: &str = "INSERT INTO bases (collection, shard, count)
     SELECT c.id, s, 0 FROM collections c, generate_series(0, $2::integer - 1) AS s
     WHERE $1::text IS NULL OR c.id = $1
     ON CONFLICT DO NOTHING";

/// [`PostgresConfig::fold_shards`] as the `integer` of [`ENSURE_SHARDS`] (at least 1).
fn shards(config: &PostgresConfig) -> i32 {
    i32::try_from(config.fold_shards.max(1)).unwrap_or(i32::MAX)
}

#[tonic::async_trait]
impl Store for PostgresStore {
    async fn create_collection(
        &self,
        collection: Collection,
    ) -> Result<Arc<Collection>, StoreError> {
        if let Some(c) = self.cached(collection.id())? {
            return if *c == collection {
                Ok(c)
            } else {
                Err(StoreError::AlreadyExists(collection.id().to_string()))
            };
        }
        let spec = collection.spec().encode_to_vec();
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client.transaction().await.map_err(db_error)?;
        let inserted = txn
            .execute(
                "INSERT INTO collections (id, spec) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&collection.id(), &spec],
            )
            .await
            .map_err(db_error)?;
        if inserted == 1 {
            txn.execute(
                ENSURE_SHARDS,
                &[&Some(collection.id()), &shards(&self.config)],
            )
            .await
            .map_err(db_error)?;
            txn.commit().await.map_err(db_error)?;
            tracing::debug!(collection = %collection.id(), "collection created");
            return self.remember(Arc::new(collection));
        }
        // It exists (created by this or another replica): the same parameters or not.
        // Read on this connection: a pool of one must not wait for a second.
        let row = txn
            .query_one(
                "SELECT spec FROM collections WHERE id = $1",
                &[&collection.id()],
            )
            .await
            .map_err(db_error)?;
        let existing = self.decoded(collection.id(), row.get::<_, &[u8]>(0))?;
        txn.commit().await.map_err(db_error)?;
        if *existing == collection {
            Ok(existing)
        } else {
            Err(StoreError::AlreadyExists(collection.id().to_string()))
        }
    }

    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        if let Some(c) = self.cached(id)? {
            return Ok(c);
        }
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt("SELECT spec FROM collections WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        self.decoded(id, row.get::<_, &[u8]>(0))
    }

    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Nothing, reports).await
    }

    async fn submit_to_batch(
        &self,
        id: &str,
        batch: [u8; 16],
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Tally(batch), reports).await
    }

    async fn counted_in_batch(&self, id: &str, batch: [u8; 16]) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                "SELECT b.accepted FROM collections c
                 LEFT JOIN shuffled_batch_counts b
                   ON b.collection = c.id AND b.batch_id = $2
                 WHERE c.id = $1",
                &[&id, &batch.as_slice()],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        row.get::<_, Option<i64>>(0).map_or(Ok(0), to_u64)
    }

    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        // One statement: one snapshot of the bases, the deltas and the report logs.
        let row = client
            .query_one(
                "SELECT (SELECT sum(count) FROM bases WHERE collection = $1)::bigint,
                        (COALESCE((SELECT sum(count) FROM deltas WHERE collection = $1), 0)
                         + COALESCE((SELECT sum(count) FROM appended WHERE collection = $1), 0)
                        )::bigint",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        let folded: i64 = row
            .get::<_, Option<i64>>(0)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        to_u64(folded)?
            .checked_add(to_u64(row.get::<_, i64>(1))?)
            .ok_or_else(|| StoreError::internal(Cause::Inconsistent("count overflows".into())))
    }

    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        let collection = self.collection(id).await?;
        let acc = match fold::read_consistent(&self.pool, &collection).await {
            Err(StoreError::NotFound(e)) => {
                self.forget(id)?;
                return Err(StoreError::NotFound(e));
            }
            other => other?,
        };
        Ok(Snapshot { collection, acc })
    }

    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let updated = client
            .execute("UPDATE collections SET closed = true WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        if updated == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        tracing::info!(collection = %id, "collection closed");
        self.remember_closed(id)
    }

    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        if self.known_closed(id)? {
            return Ok(true);
        }
        let client = self.pool.get().await.map_err(pool_error)?;
        let Some(row) = client
            .query_opt("SELECT closed FROM collections WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?
        else {
            self.forget(id)?;
            return Err(StoreError::NotFound(id.to_string()));
        };
        let closed: bool = row.get(0);
        if closed {
            self.remember_closed(id)?;
        }
        Ok(closed)
    }

    /// The transaction of "Removing a collection" (see the type's docs). A batch of
    /// another replica that raced it finds no `collections` row and is refused with
    /// `NotFound`; one that committed first is deleted with the rest.
    async fn record_delivered_batch(&self, id: &str, valid: u64) -> Result<(), StoreError> {
        let valid = i64::try_from(valid).map_err(|_| {
            StoreError::internal(Cause::Inconsistent(format!(
                "a batch of {valid} valid reports of {id:?} does not fit a bigint"
            )))
        })?;
        let client = self.pool.get().await.map_err(pool_error)?;
        // One statement: a collection that does not exist (or was deleted) inserts
        // nothing and is NotFound.
        let rows = client
            .execute(
                "INSERT INTO delivered_batches (collection, batches, smallest)
                 SELECT id, 1, $2 FROM collections WHERE id = $1
                 ON CONFLICT (collection) DO UPDATE
                 SET batches = delivered_batches.batches + 1,
                     smallest = LEAST(delivered_batches.smallest, EXCLUDED.smallest)",
                &[&id, &valid],
            )
            .await
            .map_err(db_error)?;
        if rows == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    async fn delivered_batches(&self, id: &str) -> Result<DeliveredBatches, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                "SELECT d.batches, d.smallest FROM collections c
                 LEFT JOIN delivered_batches d ON d.collection = c.id
                 WHERE c.id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        match (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1)) {
            (Some(batches), Some(smallest)) => Ok(DeliveredBatches {
                batches: to_u64(batches)?,
                smallest: Some(to_u64(smallest)?),
            }),
            _ => Ok(DeliveredBatches::default()),
        }
    }

    async fn recorded_release(
        &self,
        id: &str,
        key: &[u8],
    ) -> Result<Option<RecordedRelease>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        // One statement: the release and the total spent from one snapshot.
        let row = client
            .query_opt(
                "SELECT (SELECT COALESCE(sum(rho), 0) FROM releases WHERE collection = c.id),
                        r.rho, r.body
                 FROM collections c
                 LEFT JOIN releases r ON r.collection = c.id AND r.key = $2
                 WHERE c.id = $1",
                &[&id, &key],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let spent: f64 = row.get(0);
        Ok(row.get::<_, Option<f64>>(1).map(|rho| RecordedRelease {
            body: row.get::<_, Option<Vec<u8>>>(2).unwrap_or_default(),
            rho,
            spent,
            fresh: false,
        }))
    }

    async fn record_release(
        &self,
        id: &str,
        key: &[u8],
        rho: f64,
        budget: f64,
        body: Vec<u8>,
    ) -> Result<RecordedRelease, StoreError> {
        check_release(rho, budget)?;
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client.transaction().await.map_err(db_error)?;
        // FOR UPDATE: recorders of this collection, on every replica, take turns.
        if txn
            .query_opt("SELECT 1 FROM collections WHERE id = $1 FOR UPDATE", &[&id])
            .await
            .map_err(db_error)?
            .is_none()
        {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let spent: f64 = txn
            .query_one(
                "SELECT COALESCE(sum(rho), 0) FROM releases WHERE collection = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .get(0);
        if let Some(row) = txn
            .query_opt(
                "SELECT rho, body FROM releases WHERE collection = $1 AND key = $2",
                &[&id, &key],
            )
            .await
            .map_err(db_error)?
        {
            return Ok(RecordedRelease {
                rho: row.get(0),
                body: row.get(1),
                spent,
                fresh: false,
            });
        }
        if spent + rho > budget {
            return Err(StoreError::BudgetExhausted {
                id: id.to_string(),
                spent,
                requested: rho,
                budget,
            });
        }
        txn.execute(
            "INSERT INTO releases (collection, key, rho, body) VALUES ($1, $2, $3, $4)",
            &[&id, &key, &rho, &body],
        )
        .await
        .map_err(db_error)?;
        txn.commit().await.map_err(db_error)?;
        Ok(RecordedRelease {
            body,
            rho,
            spent: spent + rho,
            fresh: true,
        })
    }

    async fn budget_spent(&self, id: &str) -> Result<f64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                "SELECT (SELECT COALESCE(sum(rho), 0) FROM releases WHERE collection = c.id)
                 FROM collections c WHERE c.id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        Ok(row.get(0))
    }

    async fn collection_count(&self) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_one("SELECT count(*) FROM collections", &[])
            .await
            .map_err(db_error)?;
        let count: i64 = row.get(0);
        Ok(count.max(0) as u64)
    }

    async fn collection_ids(&self) -> Result<Vec<String>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let rows = client
            .query("SELECT id FROM collections ORDER BY id", &[])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn queue_upload(&self, id: &str, upload: QueuedUpload) -> Result<bool, StoreError> {
        self.enqueue(id, upload).await
    }

    async fn queued_uploads(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        self.read_queue(id, limit).await
    }

    async fn queued_count(&self, id: &str) -> Result<u64, StoreError> {
        self.count_queue(id).await
    }

    async fn submit_from_queue(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        done: Vec<ReportId>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Dequeue(done), reports).await
    }

    async fn verdicts(
        &self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.read_verdicts(id, report_ids).await
    }

    async fn submit_with_verdicts(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        verdicts: Vec<(ReportId, Vec<u8>)>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Verdicts(verdicts), reports)
            .await
    }

    /// False after a group of batches failed to commit (e.g. the database is down),
    /// true again after the next group commits.
    fn write_health(&self) -> tokio::sync::watch::Receiver<bool> {
        self.write_healthy.subscribe()
    }

    async fn delete_collection(&self, id: &str) -> Result<u64, StoreError> {
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client.transaction().await.map_err(db_error)?;
        // Every shard: waits for the folds holding one.
        txn.query(
            "SELECT 1 FROM bases WHERE collection = $1 FOR UPDATE",
            &[&id],
        )
        .await
        .map_err(db_error)?;
        if txn
            .query_opt("SELECT 1 FROM collections WHERE id = $1 FOR UPDATE", &[&id])
            .await
            .map_err(db_error)?
            .is_none()
        {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let reports: i64 = txn
            .query_one(
                "SELECT (COALESCE((SELECT sum(count) FROM bases WHERE collection = $1), 0)
                       + COALESCE((SELECT sum(count) FROM deltas WHERE collection = $1), 0)
                       + COALESCE((SELECT sum(count) FROM appended WHERE collection = $1), 0)
                       )::bigint",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .get(0);
        for table in [
            "seen",
            "shuffled_batch_counts",
            "queued_uploads",
            "verdicts",
            "deltas",
            "appended",
            "bases",
            "releases",
            "delivered_batches",
        ] {
            txn.execute(
                &format!("DELETE FROM {table} WHERE collection = $1"),
                &[&id],
            )
            .await
            .map_err(db_error)?;
        }
        txn.execute("DELETE FROM collections WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        txn.commit().await.map_err(db_error)?;
        self.forget(id)?;
        tracing::info!(collection = %id, reports, "collection deleted");
        to_u64(reports)
    }
}
