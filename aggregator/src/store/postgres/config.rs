//! How a [`PostgresStore`] is set up ([`PostgresConfig`]) and
//! why it could not be opened ([`PostgresError`]).

use std::time::Duration;

use thiserror::Error;

use crate::store::{DEFAULT_BATCH_DELAY, DEFAULT_BATCH_SIZE, DEFAULT_FOLD_BYTES};
#[cfg(doc)]
use {super::PostgresStore, crate::store::StoreError};

/// Connection pool, group commit and folding settings of a [`PostgresStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostgresConfig {
    /// Connections this replica keeps to PostgreSQL at most (the group-commit task
    /// uses one at a time; reads, creates, closes and the folder share the rest).
    pub pool_size: usize,
    /// Longest wait for a connection: to connect, or for a free one from the pool.
    /// Past it the operation fails with [`StoreError::Unavailable`].
    pub connect_timeout: Duration,
    /// A group of batches is committed as soon as it holds this many reports (0 is
    /// treated as 1).
    pub batch_size: usize,
    /// A group is committed at most this long after its first batch arrived.
    pub batch_delay: Duration,
    /// How often this replica folds appended report logs and deltas into the bases
    /// (zero: never in the background, nor on the size trigger; [`PostgresStore::fold`]
    /// still does).
    pub fold_interval: Duration,
    /// Rows (report logs and deltas) one fold transaction adds at most (bounds its
    /// duration and how many rows it holds locked).
    pub fold_batch: usize,
    /// Rows of folded sums (shards) each collection keeps: folders on different
    /// replicas each lock one and fold at the same time. Shards are created when
    /// missing (at open, with a collection), never removed: a replica configured
    /// with fewer only leaves the others to replicas that use them.
    pub fold_shards: usize,
    /// The size trigger: this replica folds as soon as it has appended this many bytes
    /// of report logs since it last did (besides every `fold_interval`).
    pub fold_bytes: u64,
    /// How long this replica trusts its cached spec and closed flag of a collection
    /// before reading them again: bounds how long it serves a collection that another
    /// replica deleted (and perhaps created anew) — see "Cache" in [`PostgresStore`].
    pub cache_ttl: Duration,
}

impl Default for PostgresConfig {
    /// 8 connections, 10 s to connect; the stores' group-commit defaults
    /// (1024 reports or 5 ms); folds of at most 64 rows every second or per 64 MiB of
    /// report logs appended, into 4 shards.
    fn default() -> Self {
        PostgresConfig {
            pool_size: 8,
            connect_timeout: Duration::from_secs(10),
            batch_size: DEFAULT_BATCH_SIZE,
            batch_delay: DEFAULT_BATCH_DELAY,
            fold_interval: Duration::from_secs(1),
            fold_batch: 64,
            fold_shards: 4,
            fold_bytes: DEFAULT_FOLD_BYTES,
            cache_ttl: Duration::from_secs(5),
        }
    }
}

/// Why the PostgreSQL store could not be opened.
#[derive(Debug, Error)]
pub enum PostgresError {
    /// The connection URL cannot be parsed.
    #[error("invalid PostgreSQL URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// The connection pool cannot be built.
    #[error("cannot build the connection pool: {0}")]
    Pool(#[from] deadpool_postgres::BuildError),
    /// No connection could be made.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[from] deadpool_postgres::PoolError),
    /// A statement failed.
    #[error("PostgreSQL: {0}")]
    Db(#[from] tokio_postgres::Error),
    /// A migration failed (nothing of it was applied).
    #[error("schema migration {name} failed: {source}")]
    Migration {
        /// The migration.
        name: &'static str,
        /// The cause.
        source: tokio_postgres::Error,
    },
    /// The database was migrated by a newer version of the aggregator.
    #[error("the database schema is at version {found}, newer than this aggregator's {known}")]
    Newer {
        /// The newest applied version.
        found: i64,
        /// The newest version this aggregator knows.
        known: i64,
    },
}
