//! A two-aggregator collection's state on the commit thread: the leader's upload queue
//! (`queued_uploads`, `queued_report_ids`) and the helper's verdicts (`verdicts`).
//!
//! An upload is queued in the open batch, like a close: it joins the batch's
//! transaction and is answered once that committed. Its collection's close is checked
//! in order with the batch, as a submission's is. The queue is drained, and verdicts
//! are recorded, by submissions that carry them (`Along::Dequeue`,
//! `Along::Verdicts`: `tables::dequeue`, `tables::record_verdicts`), in the transaction
//! that counts their reports. Reads are of
//! committed state, answered at once even while a batch is open.

use std::sync::atomic::Ordering;

use ldpcov_durable::Group;
use ldpcov_privacy::ReportId;
use redb::{ReadableDatabase, ReadableTable};

use super::command::Reply;
use super::commit::{Committer, Waiting};
use super::tables::{QUEUED_IDS, UPLOADS, VERDICTS, seq_range};
use crate::store::{QueuedUpload, StoreError};

impl Committer {
    /// Adds a leader's upload to the open batch (see `Store::queue_upload`): refused
    /// on a missing or closed collection (a close earlier in this batch: once it is
    /// committed), ignored (`false`) if its report id is queued already, the open
    /// batch's uploads included.
    pub(super) fn add_queue(
        &self,
        group: &mut Group<'_, Self>,
        id: String,
        upload: QueuedUpload,
        reply: Reply<bool>,
    ) {
        if group.state().closing.contains(&id) {
            group.wait(Waiting::QueueRefused(reply, id));
            return;
        }
        if !group.state().created(&id) {
            match self.shared.entry(&id) {
                Ok(e) if e.closed.load(Ordering::SeqCst) => {
                    let _ = reply.send(Err(StoreError::Closed(id)));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            }
        }
        group.add_weight(1);
        let fresh = group.write(|txn, _| {
            let mut ids = txn.open_table(QUEUED_IDS)?;
            let key = (id.as_str(), upload.report_id.0);
            if ids.get(key)?.is_some() {
                return Ok(false);
            }
            let mut uploads = txn.open_table(UPLOADS)?;
            // After the collection's newest upload (the table also sees the open
            // batch's): the key order is the arrival order.
            let seq = uploads
                .range(seq_range(&id))?
                .next_back()
                .transpose()?
                .map_or(0, |(key, _)| key.value().1.saturating_add(1));
            uploads.insert(
                (id.as_str(), seq),
                (upload.report_id.0, upload.body.as_slice()),
            )?;
            ids.insert(key, seq)?;
            Ok(true)
        });
        // A failed write fails the whole batch: its answer is then the error.
        group.wait(Waiting::Queued(reply, fresh.unwrap_or(false)));
    }

    /// The oldest `limit` uploads queued for `id`, oldest first, from committed state.
    pub(super) fn read_queue(
        &mut self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        self.shared.entry(id)?;
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(UPLOADS).map_err(StoreError::internal)?;
        let mut uploads = Vec::new();
        for row in table
            .range(seq_range(id))
            .map_err(StoreError::internal)?
            .take(limit)
        {
            let (_, value) = row.map_err(StoreError::internal)?;
            let (report_id, body) = value.value();
            uploads.push(QueuedUpload {
                report_id: ReportId(report_id),
                body: body.to_vec(),
            });
        }
        Ok(uploads)
    }

    /// How many uploads of `id` are queued, from committed state.
    pub(super) fn queued_count(&mut self, id: &str) -> Result<u64, StoreError> {
        self.shared.entry(id)?;
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(UPLOADS).map_err(StoreError::internal)?;
        let mut count = 0u64;
        for row in table.range(seq_range(id)).map_err(StoreError::internal)? {
            row.map_err(StoreError::internal)?;
            count += 1;
        }
        Ok(count)
    }

    /// The verdict recorded for each of `report_ids` of `id` (same order), from
    /// committed state.
    pub(super) fn read_verdicts(
        &mut self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.shared.entry(id)?;
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(VERDICTS).map_err(StoreError::internal)?;
        report_ids
            .iter()
            .map(|r| {
                Ok(table
                    .get((id, r.0))
                    .map_err(StoreError::internal)?
                    .map(|v| v.value().to_vec()))
            })
            .collect()
    }
}
