//! The database's tables: opening (and creating) them, and loading the mirror.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use ldpcov_proto::Collection;
use ldpcov_proto::v1::CollectionSpec;
use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::codec::decode_accumulator;
use super::{DurableError, Entry, FORMAT_VERSION, Mirror};
use crate::accumulator::{Accumulator, FOLDS};

pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const COLLECTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("collections");
pub(super) const ACCUMULATORS: TableDefinition<&str, &[u8]> = TableDefinition::new("accumulators");
pub(super) const SEEN: TableDefinition<(&str, [u8; 16]), ()> = TableDefinition::new("seen_report_ids");
pub(super) const CLOSED: TableDefinition<&str, ()> = TableDefinition::new("closed_collections");

fn db_err<E: Into<redb::Error>>(e: E) -> DurableError {
    DurableError::Db(e.into())
}

/// Opens the database with a page cache of `cache_size` bytes, creates missing tables,
/// checks the format and loads the mirror.
pub(super) fn open_db(path: &Path, cache_size: usize) -> Result<(Database, Mirror), DurableError> {
    let db = redb::Builder::new()
        .set_cache_size(cache_size)
        .create(path)
        .map_err(db_err)?;
    let txn = db.begin_write().map_err(db_err)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let format = meta.get("format").map_err(db_err)?.map(|v| v.value());
        match format {
            None => {
                meta.insert("format", FORMAT_VERSION).map_err(db_err)?;
            }
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(DurableError::Corrupt(format!(
                    "store format {other}, this version reads {FORMAT_VERSION}"
                )));
            }
        }
        txn.open_table(COLLECTIONS).map_err(db_err)?;
        txn.open_table(ACCUMULATORS).map_err(db_err)?;
        txn.open_table(SEEN).map_err(db_err)?;
        txn.open_table(CLOSED).map_err(db_err)?;
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
        let spec = CollectionSpec::decode(value.value())
            .map_err(|e| DurableError::Corrupt(format!("spec of collection {id:?}: {e}")))?;
        let collection = Collection::from_spec(&spec)
            .map_err(|e| DurableError::Corrupt(format!("spec of collection {id:?}: {e}")))?;
        if collection.id != id {
            return Err(DurableError::Corrupt(format!(
                "collection stored under {id:?} is {:?}",
                collection.id
            )));
        }
        let acc = match accumulators.get(id.as_str()).map_err(db_err)? {
            Some(blob) => decode_accumulator(blob.value())
                .map_err(|e| DurableError::Corrupt(format!("collection {id:?}: {e}")))?,
            None => Accumulator::new(collection.entries, FOLDS),
        };
        if acc.entries() != collection.entries || acc.fold_sums.len() != FOLDS {
            return Err(DurableError::Corrupt(format!(
                "collection {id:?}: accumulators of {} entries × {} folds, expected {} × {FOLDS}",
                acc.entries(),
                acc.fold_sums.len(),
                collection.entries
            )));
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
            return Err(DurableError::Corrupt(format!(
                "unknown collection {id:?} is marked closed"
            )));
        }
    }
    Ok(mirror)
}
