//! The database's tables: opening (and creating) them, and loading the mirror.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, RwLock};

use ldpcov_durable::{FileState, begin_durable, catch_panic, inspect};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{DurableConfig, DurableError, Entry, FORMAT_VERSION, Mirror, Shared};
use crate::store::Cause;
use crate::store::codec::{
    Corruption, blob_report_count, decode_accumulators, decode_collection, fold_report_log,
};
use ldpcov_estimate::FOLDS;
use ldpcov_privacy::ReportId;

pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const COLLECTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("collections");
pub(super) const ACCUMULATORS: TableDefinition<&str, &[u8]> = TableDefinition::new("accumulators");
pub(super) const SEEN: TableDefinition<(&str, [u8; 16]), ()> =
    TableDefinition::new("seen_report_ids");
pub(super) const CLOSED: TableDefinition<&str, ()> = TableDefinition::new("closed_collections");
/// A ledger row's key: (collection id, request key).
pub(super) type ReleaseKey = (&'static str, &'static [u8]);
/// A ledger row's value: (ρ spent, release body).
pub(super) type ReleaseValue = (f64, &'static [u8]);
/// The release ledger.
pub(super) const RELEASES: TableDefinition<ReleaseKey, ReleaseValue> =
    TableDefinition::new("releases");

/// A committed batch's counted reports not yet folded into the collection's
/// accumulator blob: (collection id, commit number) → report log (see `codec`).
pub(super) const APPENDED: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("appended_reports");

/// The key range of every row of collection `id` in a table keyed by (collection id,
/// sequence number): `appended_reports`, `queued_uploads`.
pub(super) fn seq_range(id: &str) -> std::ops::RangeInclusive<(&str, u64)> {
    (id, 0)..=(id, u64::MAX)
}

/// The format this version still opens and upgrades in place: the same tables, without
/// `appended_reports` (which an older version would ignore, so the upgrade is one way).
const UPGRADABLE_FORMAT: u64 = 1;

/// What each shuffled collection's completed batches delivered: (batches recorded,
/// fewest valid reports in one).
pub(super) const DELIVERED: TableDefinition<&str, (u64, u64)> =
    TableDefinition::new("delivered_batches");

/// Reports counted under each shuffled batch: (collection id, relay batch id) →
/// reports its sends counted (`Store::submit_to_batch`), written in the transaction
/// that counts them.
pub(super) const BATCH_COUNTS: TableDefinition<(&str, [u8; 16]), u64> =
    TableDefinition::new("shuffled_batch_counts");

/// The key range of every row of collection `id` in a table keyed by (collection id,
/// 16-byte id): `seen_report_ids`, `shuffled_batch_counts`, `queued_report_ids`,
/// `verdicts`.
pub(super) fn id_range(id: &str) -> std::ops::RangeInclusive<(&str, [u8; 16])> {
    (id, [0u8; 16])..=(id, [0xffu8; 16])
}

/// A two-aggregator leader's queued uploads (`Store::queue_upload`): (collection id,
/// arrival number) → (report id, upload body). Arrival numbers grow per collection, so
/// the key order is the arrival order.
pub(super) const UPLOADS: TableDefinition<SeqKey, QueuedValue> =
    TableDefinition::new("queued_uploads");

/// A key of a table keyed by (collection id, sequence number).
pub(super) type SeqKey = (&'static str, u64);
/// A queued upload's row: (report id, upload body).
pub(super) type QueuedValue = ([u8; 16], &'static [u8]);

/// The arrival number of each queued upload: (collection id, report id) → its key in
/// `queued_uploads`; written and removed with that row.
pub(super) const QUEUED_IDS: TableDefinition<(&str, [u8; 16]), u64> =
    TableDefinition::new("queued_report_ids");

/// A two-aggregator helper's verdicts (`Store::submit_with_verdicts`): (collection id,
/// report id) → the verdict bytes, written in the transaction that counts the reports.
pub(super) const VERDICTS: TableDefinition<(&str, [u8; 16]), &[u8]> =
    TableDefinition::new("verdicts");

fn db_err<E: Into<redb::Error>>(e: E) -> DurableError {
    DurableError::Db(e.into())
}

/// Refuses, before redb touches it, a file that cannot be our database: 0 bytes
/// (unless `init_empty`), or not starting with redb's magic number. A missing file is
/// fine (a new store). Returns whether the file existed with content.
fn check_file(path: &Path, init_empty: bool) -> Result<bool, DurableError> {
    let state = inspect(path).map_err(|source| DurableError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match state {
        FileState::Missing => Ok(false),
        FileState::Redb => Ok(true),
        FileState::Empty if init_empty => {
            tracing::warn!(path = %path.display(), "the database file is empty: starting an empty store in it (--init-empty)");
            Ok(false)
        }
        FileState::Empty => Err(DurableError::NotLdpcov {
            path: path.to_path_buf(),
            why: "is empty (0 bytes)",
            hint: " or pass --init-empty to start an empty store in it",
        }),
        FileState::NotRedb => Err(DurableError::NotLdpcov {
            path: path.to_path_buf(),
            why: "does not start with a redb header",
            hint: "",
        }),
    }
}

/// Opens the database with the page cache of `config`, creates missing tables,
/// checks the format and loads the mirror (returned, not written into `shared`). At
/// `startup` the file is checked first (see `DurableStore`, "On start": not empty
/// unless `init_empty`, a redb file, redb's integrity check); a reopen after a failed
/// commit skips those checks.
pub(super) fn open_db(
    path: &Path,
    config: &DurableConfig,
    shared: &Shared,
    startup: bool,
) -> Result<(Database, Mirror), DurableError> {
    let existed = startup && check_file(path, config.init_empty)?;
    if startup {
        // After the check: a refused file, and its directory, are left as they are.
        super::private::make_private(path)?;
    }
    let mut builder = redb::Builder::new();
    builder.set_cache_size(config.cache_size);
    let mut db = shared.create_db(&builder, path).map_err(db_err)?;
    if existed {
        match db.check_integrity() {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                path = %path.display(),
                "redb's integrity check found damage and repaired it (to the last intact commit)"
            ),
            Err(verdict) => {
                return Err(DurableError::Damaged {
                    path: path.to_path_buf(),
                    verdict,
                    readable: readable(&db),
                });
            }
        }
        // A redb file of another program: tables, but not our `meta` row.
        let txn = db.begin_read().map_err(db_err)?;
        let ours = match txn.open_table(META) {
            Ok(meta) => meta.get("format").map_err(db_err)?.is_some(),
            Err(redb::TableError::TableDoesNotExist(_)) => false,
            Err(e) => return Err(db_err(e)),
        };
        let tables = txn.list_tables().map_err(db_err)?.count();
        if !ours && tables > 0 {
            return Err(DurableError::NotLdpcov {
                path: path.to_path_buf(),
                why: "is a redb database without ldpcov's tables",
                hint: "",
            });
        }
    }
    let txn = begin_durable(&db)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let format = meta.get("format").map_err(db_err)?.map(|v| v.value());
        match format {
            None => {
                meta.insert("format", FORMAT_VERSION).map_err(db_err)?;
            }
            Some(FORMAT_VERSION) => {}
            Some(UPGRADABLE_FORMAT) => {
                meta.insert("format", FORMAT_VERSION).map_err(db_err)?;
                tracing::info!(
                    path = %path.display(), from = UPGRADABLE_FORMAT, to = FORMAT_VERSION,
                    "store format upgraded (appended reports)"
                );
            }
            Some(found) => {
                return Err(Corruption::Format {
                    found,
                    expected: FORMAT_VERSION,
                }
                .into());
            }
        }
        txn.open_table(COLLECTIONS).map_err(db_err)?;
        txn.open_table(ACCUMULATORS).map_err(db_err)?;
        txn.open_table(SEEN).map_err(db_err)?;
        txn.open_table(CLOSED).map_err(db_err)?;
        txn.open_table(RELEASES).map_err(db_err)?;
        txn.open_table(DELIVERED).map_err(db_err)?;
        txn.open_table(APPENDED).map_err(db_err)?;
        txn.open_table(BATCH_COUNTS).map_err(db_err)?;
        txn.open_table(UPLOADS).map_err(db_err)?;
        txn.open_table(QUEUED_IDS).map_err(db_err)?;
        txn.open_table(VERDICTS).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    let mirror = load_mirror(&db)?;
    Ok((db, mirror))
}

/// What a database that failed the integrity check still gives, in words: the number
/// of collections in its `collections` table and the reports their accumulator blobs
/// count. Best effort, for the refusal message only: a read that fails (or makes redb
/// panic: it does on some damaged pages) says that nothing was readable.
fn readable(db: &Database) -> String {
    let read = || -> Result<(usize, u64, usize), redb::Error> {
        let txn = db.begin_read()?;
        let collections = txn.open_table(COLLECTIONS)?;
        let accumulators = txn.open_table(ACCUMULATORS)?;
        let (mut found, mut reports, mut unreadable) = (0, 0u64, 0);
        for item in collections.iter()? {
            let (key, _) = item?;
            found += 1;
            let count = accumulators
                .get(key.value())?
                .map(|blob| blob_report_count(blob.value()));
            match count {
                Some(Some(n)) => reports = reports.saturating_add(n),
                // No blob yet: a collection without reports.
                None => {}
                Some(None) => unreadable += 1,
            }
        }
        Ok((found, reports, unreadable))
    };
    match catch_panic(read) {
        Ok(Ok((collections, reports, 0))) => {
            format!("{collections} collections with {reports} reports were still readable")
        }
        Ok(Ok((collections, reports, unreadable))) => format!(
            "{collections} collections were still readable, {unreadable} of them without their sums, the others with {reports} reports"
        ),
        Ok(Err(e)) => format!("its collections could not be read ({e})"),
        Err(_) => "reading its collections made redb panic".to_string(),
    }
}

fn load_mirror(db: &Database) -> Result<Mirror, DurableError> {
    let txn = db.begin_read().map_err(db_err)?;
    let collections = txn.open_table(COLLECTIONS).map_err(db_err)?;
    let accumulators = txn.open_table(ACCUMULATORS).map_err(db_err)?;
    let closed = txn.open_table(CLOSED).map_err(db_err)?;
    let appended = txn.open_table(APPENDED).map_err(db_err)?;
    let mut mirror = Mirror::new();
    for item in collections.iter().map_err(db_err)? {
        let (key, value) = item.map_err(db_err)?;
        let id = key.value().to_string();
        let collection = decode_collection(&id, value.value())?;
        if collection.id() != id {
            return Err(Corruption::IdMismatch {
                id,
                found: collection.id().to_string(),
            }
            .into());
        }
        let blob = accumulators.get(id.as_str()).map_err(db_err)?;
        let mut acc = decode_accumulators(&id, &collection, blob.as_ref().map(|b| b.value()))?;
        if acc.entries() != collection.entries() || acc.fold_sums.len() != FOLDS {
            return Err(Corruption::Shape {
                entries: acc.entries(),
                folds: acc.fold_sums.len(),
                expected: collection.entries(),
                id,
            }
            .into());
        }
        // The committed batches not yet folded: the sums are the blob's plus theirs.
        let (unfolded_bytes, unfolded_reports) = fold_appended(&appended, &id, &mut acc)?;
        let is_closed = closed.get(id.as_str()).map_err(db_err)?.is_some();
        mirror.insert(
            id,
            Arc::new(Entry {
                collection: Arc::new(collection),
                acc: RwLock::new(acc),
                closed: AtomicBool::new(is_closed),
                unfolded_bytes: AtomicU64::new(unfolded_bytes),
                unfolded_reports: AtomicU64::new(unfolded_reports),
            }),
        );
    }
    for item in appended.iter().map_err(db_err)? {
        let (key, _) = item.map_err(db_err)?;
        let (id, _) = key.value();
        if !mirror.contains_key(id) {
            return Err(Corruption::UnknownAppended { id: id.to_string() }.into());
        }
    }
    for item in closed.iter().map_err(db_err)? {
        let (key, _) = item.map_err(db_err)?;
        let id = key.value();
        if !mirror.contains_key(id) {
            return Err(Corruption::UnknownClosed { id: id.to_string() }.into());
        }
    }
    Ok(mirror)
}

/// Adds every appended row of collection `id` to `acc` (the collection's folded sums);
/// returns the rows' bytes and reports.
pub(super) fn fold_appended(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    id: &str,
    acc: &mut ldpcov_estimate::Accumulator,
) -> Result<(u64, u64), DurableError> {
    let mut bytes = 0u64;
    let mut reports = 0u64;
    for row in table.range(seq_range(id)).map_err(db_err)? {
        let (_, log) = row.map_err(db_err)?;
        let log = log.value();
        reports += fold_report_log(acc, log).map_err(|source| Corruption::Blob {
            id: id.to_string(),
            source,
        })?;
        bytes += log.len() as u64;
    }
    Ok((bytes, reports))
}

/// Removes the queued uploads of the `done` report ids of `id` (an id not queued is
/// ignored), in the transaction that counts their reports.
pub(super) fn dequeue(
    txn: &redb::WriteTransaction,
    id: &str,
    done: &[ReportId],
) -> Result<(), Cause> {
    let mut ids = txn.open_table(QUEUED_IDS)?;
    let mut uploads = txn.open_table(UPLOADS)?;
    for report_id in done {
        if let Some(seq) = ids.remove((id, report_id.0))? {
            uploads.remove((id, seq.value()))?;
        }
    }
    Ok(())
}

/// Records each of `verdicts` of `id` unless its report id has one already (the first
/// stays), in the transaction that counts their reports.
pub(super) fn record_verdicts(
    txn: &redb::WriteTransaction,
    id: &str,
    verdicts: Vec<(ReportId, Vec<u8>)>,
) -> Result<(), Cause> {
    let mut table = txn.open_table(VERDICTS)?;
    for (report_id, verdict) in verdicts {
        let key = (id, report_id.0);
        if table.get(key)?.is_none() {
            table.insert(key, verdict.as_slice())?;
        }
    }
    Ok(())
}
