//! Schema migrations: the SQL files in `aggregator/migrations/`, applied at open.
//!
//! **Invariant:** migrations are applied in version order inside one transaction that
//! first takes a transaction-scoped advisory lock ([`MIGRATION_LOCK`]), so replicas
//! starting together apply each migration exactly once: the second waits for the
//! first, then finds every version in `schema_migrations` and applies nothing. A
//! database whose schema is newer than this binary's is refused. Migrations are never
//! edited once released: a change is a new file with the next version.

use deadpool_postgres::Client;

use super::PostgresError;

/// One schema migration.
pub(super) struct Migration {
    /// Its version: migrations are applied in increasing order.
    pub(super) version: i64,
    /// Its file name without `.sql`.
    pub(super) name: &'static str,
    /// Its SQL.
    pub(super) sql: &'static str,
}

/// Every migration, oldest first.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_initial",
        sql: include_str!("../../../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "0002_releases",
        sql: include_str!("../../../migrations/0002_releases.sql"),
    },
    Migration {
        version: 3,
        name: "0003_delivered_batches",
        sql: include_str!("../../../migrations/0003_delivered_batches.sql"),
    },
    Migration {
        version: 4,
        name: "0004_appended_reports",
        sql: include_str!("../../../migrations/0004_appended_reports.sql"),
    },
    Migration {
        version: 5,
        name: "0005_shuffled_batch_counts",
        sql: include_str!("../../../migrations/0005_shuffled_batch_counts.sql"),
    },
    Migration {
        version: 6,
        name: "0006_two_aggregator",
        sql: include_str!("../../../migrations/0006_two_aggregator.sql"),
    },
];

/// Key of the advisory lock migrations run under (`"ldpcov"` in ASCII, then 1).
pub(super) const MIGRATION_LOCK: i64 = 0x6c64_7063_6f76_0001;

/// Applies the missing migrations; returns how many were applied.
pub(super) async fn migrate(client: &mut Client) -> Result<usize, PostgresError> {
    let txn = client.transaction().await?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    bigint PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let applied: Vec<i64> = txn
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let known = MIGRATIONS.last().map_or(0, |m| m.version);
    if let Some(&found) = applied.iter().max()
        && found > known
    {
        return Err(PostgresError::Newer { found, known });
    }
    let mut count = 0;
    for m in MIGRATIONS {
        if applied.contains(&m.version) {
            continue;
        }
        txn.batch_execute(m.sql)
            .await
            .map_err(|source| PostgresError::Migration {
                name: m.name,
                source,
            })?;
        txn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await?;
        tracing::info!(migration = m.name, "schema migration applied");
        count += 1;
    }
    txn.commit().await?;
    Ok(count)
}
