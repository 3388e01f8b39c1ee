//! What the commit thread runs outside any batch: reads of committed state (answered
//! at once, even while a batch is open), and the writes that never share a
//! transaction (a delete, a release, a shuffled batch's record), each committed on its
//! own after the open batch. (The two-aggregator reads are in `two_aggregator.rs`.)

use ldpcov_durable::begin_durable;
use std::sync::Arc;

use redb::ReadableDatabase;

use super::command::{Command, LedgerRead};
use super::commit::Committer;
use super::hooks::Event;
use super::tables::{
    ACCUMULATORS, APPENDED, BATCH_COUNTS, CLOSED, COLLECTIONS, DELIVERED, META, QUEUED_IDS,
    RELEASES, ReleaseKey, ReleaseValue, SEEN, UPLOADS, VERDICTS, fold_appended, id_range,
    seq_range,
};
use crate::store::codec::{decode_accumulators, decode_collection};
use crate::store::{Cause, DeliveredBatches, RecordedRelease, Snapshot, StoreError};

impl Committer {
    /// The database for a write of its own, reopened if need be; `Unavailable` (and
    /// the write health false) if it cannot be.
    fn db_to_write(&mut self) -> Result<&redb::Database, StoreError> {
        if let Err(e) = self.db() {
            self.set_write_health(false);
            return Err(StoreError::unavailable(e));
        }
        self.db.as_ref().ok_or_else(|| {
            StoreError::unavailable(Cause::Mirror("the database closed while opening".into()))
        })
    }

    /// Runs a command outside any batch and answers it.
    pub(super) fn run_alone(&mut self, command: Command) {
        match command {
            Command::ReadCommitted { id, reply } => drop(reply.send(self.read_committed(&id))),
            Command::ReadBatch { id, batch, reply } => {
                drop(reply.send(self.read_batch(&id, batch)));
            }
            Command::Delete { id, reply } => drop(reply.send(self.delete(&id))),
            Command::ReadRelease { id, key, reply } => {
                drop(reply.send(self.read_release(&id, key.as_deref())));
            }
            Command::Release {
                id,
                key,
                rho,
                budget,
                body,
                reply,
            } => drop(reply.send(self.release(&id, &key, rho, budget, body))),
            Command::Delivered { id, valid, reply } => drop(reply.send(self.delivered(&id, valid))),
            Command::ReadQueue { id, limit, reply } => {
                drop(reply.send(self.read_queue(&id, limit)));
            }
            Command::QueuedCount { id, reply } => drop(reply.send(self.queued_count(&id))),
            Command::ReadVerdicts {
                id,
                report_ids,
                reply,
            } => drop(reply.send(self.read_verdicts(&id, &report_ids))),
            // Batched commands never get here; should one, it fails, unwritten.
            batched @ (Command::Submit { .. }
            | Command::Create { .. }
            | Command::Close { .. }
            | Command::Queue { .. }) => {
                batched.fail(StoreError::internal(Cause::Mirror(
                    "a batched command was run outside a batch".into(),
                )));
            }
        }
    }

    /// Collection `id` as committed: its spec and sums read from the database.
    fn read_committed(&mut self, id: &str) -> Result<Snapshot, StoreError> {
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let collections = txn.open_table(COLLECTIONS).map_err(StoreError::internal)?;
        let spec = collections
            .get(id)
            .map_err(StoreError::internal)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let collection = decode_collection(id, spec.value()).map_err(StoreError::internal)?;
        let accumulators = txn.open_table(ACCUMULATORS).map_err(StoreError::internal)?;
        let blob = accumulators.get(id).map_err(StoreError::internal)?;
        let mut acc = decode_accumulators(id, &collection, blob.as_ref().map(|b| b.value()))
            .map_err(StoreError::internal)?;
        // The committed batches not yet folded: the sums are the blob's plus theirs.
        let appended = txn.open_table(APPENDED).map_err(StoreError::internal)?;
        fold_appended(&appended, id, &mut acc)
            .map_err(|e| StoreError::internal(Cause::backend("appended reports", e)))?;
        Ok(Snapshot {
            collection: Arc::new(collection),
            acc,
        })
    }

    /// The reports counted under shuffled batch `shuffled` of `id` (0 for a batch never
    /// seen), from a read transaction of committed state.
    fn read_batch(&mut self, id: &str, shuffled: [u8; 16]) -> Result<u64, StoreError> {
        self.shared.entry(id)?;
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(BATCH_COUNTS).map_err(StoreError::internal)?;
        Ok(table
            .get((id, shuffled))
            .map_err(StoreError::internal)?
            .map_or(0, |v| v.value()))
    }

    /// The ρ spent by `id`'s releases and the release under `key`, from a read
    /// transaction of committed state.
    fn read_release(&mut self, id: &str, key: Option<&[u8]>) -> Result<LedgerRead, StoreError> {
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(RELEASES).map_err(StoreError::internal)?;
        read_ledger(&table, id, key).map_err(StoreError::internal)
    }

    /// Records a release in a transaction of its own (see `Store::record_release`):
    /// one write transaction reads the spent ρ and the key, then inserts, so nothing
    /// can overspend between the check and the write (this thread is the only writer).
    fn release(
        &mut self,
        id: &str,
        key: &[u8],
        rho: f64,
        budget: f64,
        body: Vec<u8>,
    ) -> Result<RecordedRelease, StoreError> {
        self.shared.entry(id)?;
        let db = self.db_to_write()?;
        let txn = begin_durable(db).map_err(|e| StoreError::unavailable(Cause::from(e)))?;
        let (spent, found) = {
            let table = txn.open_table(RELEASES).map_err(StoreError::internal)?;
            read_ledger(&table, id, Some(key)).map_err(StoreError::internal)?
        };
        if let Some((old_rho, old_body)) = found {
            let _ = txn.abort();
            return Ok(RecordedRelease {
                body: old_body,
                rho: old_rho,
                spent,
                fresh: false,
            });
        }
        if spent + rho > budget {
            let _ = txn.abort();
            return Err(StoreError::BudgetExhausted {
                id: id.to_string(),
                spent,
                requested: rho,
                budget,
            });
        }
        let written = (|| -> Result<(), Cause> {
            txn.open_table(RELEASES)?
                .insert((id, key), (rho, body.as_slice()))?;
            Ok(())
        })();
        let result = match written {
            Err(e) => Err(e),
            Ok(()) => txn.commit().map_err(Cause::from),
        };
        match result {
            Ok(()) => {
                self.set_write_health(true);
                Ok(RecordedRelease {
                    body,
                    rho,
                    spent: spent + rho,
                    fresh: true,
                })
            }
            Err(e) => {
                tracing::error!(error = %e, collection = %id, "release not recorded");
                self.set_write_health(false);
                // As after a failed batch: reopen before the next write.
                self.db = None;
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }

    /// Records a completed shuffled batch of `valid` valid reports of `id` (`Some`)
    /// in a transaction of its own, or reads the record from committed state (`None`).
    fn delivered(&mut self, id: &str, valid: Option<u64>) -> Result<DeliveredBatches, StoreError> {
        self.shared.entry(id)?;
        let db = self.db_to_write()?;
        let Some(valid) = valid else {
            let txn = db.begin_read().map_err(StoreError::internal)?;
            let table = txn.open_table(DELIVERED).map_err(StoreError::internal)?;
            return read_delivered(&table, id).map_err(StoreError::internal);
        };
        let written = (|| -> Result<(redb::WriteTransaction, DeliveredBatches), Cause> {
            let txn = begin_durable(db)?;
            let record = {
                let mut table = txn.open_table(DELIVERED)?;
                let record = read_delivered(&table, id)?.with_batch(valid);
                table.insert(id, (record.batches, record.smallest.unwrap_or(valid)))?;
                record
            };
            Ok((txn, record))
        })();
        let result = written.and_then(|(txn, record)| {
            txn.commit().map_err(Cause::from)?;
            Ok(record)
        });
        match result {
            Ok(record) => {
                self.set_write_health(true);
                Ok(record)
            }
            Err(e) => {
                tracing::error!(error = %e, collection = %id, "shuffled batch not recorded");
                self.set_write_health(false);
                // As after a failed batch: reopen before the next write.
                self.db = None;
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }

    /// Deletes collection `id` in a transaction of its own and, once that is
    /// committed, from the mirror. Returns the reports it had counted.
    fn delete(&mut self, id: &str) -> Result<u64, StoreError> {
        let count = {
            let entry = self.shared.entry(id)?;
            let acc = entry
                .acc
                .read()
                .map_err(|_| StoreError::internal(Cause::Poisoned("accumulator")))?;
            acc.count
        };
        let commit = self.commits + 1;
        let db = self.db_to_write()?;
        let written = (|| -> Result<redb::WriteTransaction, Cause> {
            let txn = begin_durable(db)?;
            {
                txn.open_table(COLLECTIONS)?.remove(id)?;
                txn.open_table(ACCUMULATORS)?.remove(id)?;
                txn.open_table(APPENDED)?
                    .retain_in(seq_range(id), |_, _| false)?;
                txn.open_table(CLOSED)?.remove(id)?;
                txn.open_table(DELIVERED)?.remove(id)?;
                txn.open_table(BATCH_COUNTS)?
                    .retain_in(id_range(id), |_, _| false)?;
                // A two-aggregator collection's queue and verdicts.
                txn.open_table(UPLOADS)?
                    .retain_in(seq_range(id), |_, _| false)?;
                txn.open_table(QUEUED_IDS)?
                    .retain_in(id_range(id), |_, _| false)?;
                txn.open_table(VERDICTS)?
                    .retain_in(id_range(id), |_, _| false)?;
                // Every release of this collection: keys (id, *) sort together.
                txn.open_table(RELEASES)?.retain_in::<(&str, &[u8]), _>(
                    (id, &[][..])..(next_id(id).as_str(), &[][..]),
                    |_, _| false,
                )?;
                // Every report id of this collection: keys (id, *) sort together.
                txn.open_table(SEEN)?
                    .retain_in(id_range(id), |_, _| false)?;
                txn.open_table(META)?.insert("commits", commit)?;
            }
            Ok(txn)
        })();
        let injected = self.shared.hooks.injected_failure();
        let result = match (written, injected) {
            (Err(e), _) => Err((e, true)),
            (Ok(_), Some(e)) => Err((e, false)),
            (Ok(txn), None) => txn.commit().map_err(|e| (Cause::from(e), true)),
        };
        match result {
            Ok(()) => {
                self.shared.hooks.record(Event::Committed);
                self.commits = commit;
                self.set_write_health(true);
                match self.shared.mirror.write() {
                    Ok(mut map) => {
                        map.remove(id);
                    }
                    Err(_) => {
                        tracing::error!("mirror lock poisoned after a delete; reloading from disk");
                        self.db = None;
                    }
                }
                tracing::info!(collection = %id, reports = count, "collection deleted");
                Ok(count)
            }
            Err((e, reopen)) => {
                tracing::error!(error = %e, collection = %id, "delete not committed; nothing was deleted");
                self.set_write_health(false);
                if reopen {
                    self.db = None;
                }
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }
}

/// `id`'s record of completed shuffled batches (the default when none was recorded).
fn read_delivered(
    table: &impl redb::ReadableTable<&'static str, (u64, u64)>,
    id: &str,
) -> Result<DeliveredBatches, Cause> {
    Ok(match table.get(id)? {
        Some(row) => {
            let (batches, smallest) = row.value();
            DeliveredBatches {
                batches,
                smallest: Some(smallest),
            }
        }
        None => DeliveredBatches::default(),
    })
}

/// The smallest string above every string that starts with `id` followed by anything
/// in key order (`id` plus U+10FFFF would do only for ASCII-free tails; a NUL-terminated
/// upper bound is exact for tuple keys, which compare `id` first): used as the end of
/// the range of `id`'s ledger rows.
fn next_id(id: &str) -> String {
    let mut next = id.to_string();
    next.push('\0');
    next
}

/// The ρ spent by `id`'s releases and the release under `key`.
fn read_ledger(
    table: &impl redb::ReadableTable<ReleaseKey, ReleaseValue>,
    id: &str,
    key: Option<&[u8]>,
) -> Result<LedgerRead, Cause> {
    let mut spent = 0.0;
    let mut found = None;
    for row in table.range::<(&str, &[u8])>((id, &[][..])..(next_id(id).as_str(), &[][..]))? {
        let (k, v) = row?;
        let (_, row_key) = k.value();
        let (rho, body) = v.value();
        spent += rho;
        if key == Some(row_key) {
            found = Some((rho, body.to_vec()));
        }
    }
    Ok((spent, found))
}
