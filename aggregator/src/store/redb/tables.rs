//! The database's tables: opening (and creating) them, and loading the mirror.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{DurableError, Entry, FORMAT_VERSION, Mirror, Shared};
use crate::store::codec::{Corruption, decode_accumulators, decode_collection};
use ldpcov_estimate::FOLDS;

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

fn db_err<E: Into<redb::Error>>(e: E) -> DurableError {
    DurableError::Db(e.into())
}

/// Begins a write transaction whose commit returns only once the database file is
/// fsynced ([`Durability::Immediate`], also redb's default: set explicitly so that the
/// acknowledgement of a report keeps meaning "on disk").
pub(super) fn begin_durable(db: &Database) -> Result<redb::WriteTransaction, redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    Ok(txn)
}

/// Opens the database with a page cache of `cache_size` bytes, creates missing tables,
/// checks the format and loads the mirror (returned, not written into `shared`).
pub(super) fn open_db(
    path: &Path,
    cache_size: usize,
    shared: &Shared,
) -> Result<(Database, Mirror), DurableError> {
    let mut builder = redb::Builder::new();
    builder.set_cache_size(cache_size);
    let db = shared.create_db(&builder, path).map_err(db_err)?;
    let txn = begin_durable(&db)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let format = meta.get("format").map_err(db_err)?.map(|v| v.value());
        match format {
            None => {
                meta.insert("format", FORMAT_VERSION).map_err(db_err)?;
            }
            Some(FORMAT_VERSION) => {}
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
    }
    txn.commit().map_err(db_err)?;
    let mirror = load_mirror(&db)?;
    Ok((db, mirror))
}

fn load_mirror(db: &Database) -> Result<Mirror, DurableError> {
    let txn = db.begin_read().map_err(db_err)?;
    let collections = txn.open_table(COLLECTIONS).map_err(db_err)?;
    let accumulators = txn.open_table(ACCUMULATORS).map_err(db_err)?;
    let closed = txn.open_table(CLOSED).map_err(db_err)?;
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
        let acc = decode_accumulators(&id, &collection, blob.as_ref().map(|b| b.value()))?;
        if acc.entries() != collection.entries() || acc.fold_sums.len() != FOLDS {
            return Err(Corruption::Shape {
                entries: acc.entries(),
                folds: acc.fold_sums.len(),
                expected: collection.entries(),
                id,
            }
            .into());
        }
        let is_closed = closed.get(id.as_str()).map_err(db_err)?.is_some();
        mirror.insert(
            id,
            Arc::new(Entry {
                collection: Arc::new(collection),
                acc: RwLock::new(acc),
                closed: AtomicBool::new(is_closed),
            }),
        );
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
