//! What the store reports: a collection's status (`GetRelayStatus`) and the totals the
//! gauges read. Read-only: every function here runs one read transaction.

use super::*;

impl RelayStore {
    /// What the store holds for a collection.
    pub fn status(&self, collection_id: &str) -> Result<RelayStatus, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut status = RelayStatus {
                collection_id: collection_id.to_string(),
                ..Default::default()
            };
            let windows = txn.open_table(WINDOWS)?;
            for row in windows.range((collection_id, 0)..=(collection_id, u32::MAX))? {
                let w = Window::decode(row?.1.value())?;
                status.window_reports += w.reports;
                status.window_new_devices += w.new_devices;
                if status.window_opened == 0 || w.opened < status.window_opened {
                    status.window_opened = w.opened;
                }
            }
            for row in txn.open_table(BATCHES)?.iter()? {
                let (seq, bytes) = row?;
                let b = decode_batch(seq.value(), bytes.value())?;
                if b.collection_id == collection_id {
                    status.pending_batches += 1;
                    status.pending_batch_reports += b.size;
                }
            }
            let counters = txn.open_table(COUNTERS)?;
            let counter = |name: &str| -> Result<u64, StoreError> {
                Ok(counters
                    .get((collection_id, name))?
                    .map_or(0, |v| v.value()))
            };
            status.forwarded_batches = counter("forwarded_batches")?;
            status.forwarded_reports = counter("forwarded_reports")?;
            for row in txn
                .open_table(BATCH_HISTORY)?
                .range((collection_id, 0)..=(collection_id, u64::MAX))?
                .rev()
                .take(RECENT_BATCHES)
            {
                let (formed, reports, new_devices) = row?.1.value();
                status.recent_batches.push(RelayBatchRecord {
                    formed,
                    reports,
                    new_devices,
                });
            }
            if let Some(c) = txn.open_table(KEY_CONFLICTS)?.get(collection_id)? {
                (status.key_conflicts, status.last_key_conflict) = c.value();
            }
            if let Some(r) = txn.open_table(RETIRED)?.get(collection_id)? {
                let r = decode_retired(r.value())?;
                status.retired = r.reason.as_str().to_string();
                status.retired_at = r.at;
                status.retired_window_reports = r.window_reports;
                status.retired_batch_reports = r.batch_reports;
            }
            Ok(status)
        })
    }

    /// The stored batches: how many, their reports, and when the oldest was formed
    /// (unix seconds; `None` without a batch) — the pending-batch gauges.
    pub fn pending_summary(&self) -> Result<(u64, u64, Option<u64>), StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut count = 0;
            let mut reports = 0;
            for row in txn.open_table(BATCHES)?.iter()? {
                let (seq, bytes) = row?;
                count += 1;
                reports += decode_batch(seq.value(), bytes.value())?.size;
            }
            let oldest = txn
                .open_table(BATCH_FORMED)?
                .iter()?
                .next()
                .transpose()?
                .map(|(_, at)| at.value());
            Ok((count, reports, oldest))
        })
    }

    /// Reports in open windows and batches stored, over every collection (gauges).
    pub fn totals(&self) -> Result<(u64, u64), StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut window_reports = 0;
            for row in txn.open_table(WINDOWS)?.iter()? {
                window_reports += Window::decode(row?.1.value())?.reports;
            }
            let batches = txn.open_table(BATCHES)?.len()?;
            Ok((window_reports, batches))
        })
    }
}
