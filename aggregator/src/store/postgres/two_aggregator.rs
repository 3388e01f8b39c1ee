//! A two-aggregator collection's state outside the batches: a leader's upload queued
//! (`queued_uploads`), and the reads of the queue and of a helper's verdicts
//! (`verdicts`). The queue is drained, and verdicts are recorded, by the batches that
//! count their reports (`commit.rs`, `Along`).

use prost::Message;

use super::PostgresStore;
use super::errors::{db_error, pool_error, to_u64};
use crate::store::{Cause, QueuedUpload, Store, StoreError};
use ldpcov_privacy::ReportId;

impl PostgresStore {
    /// Queues `upload` for collection `id` (see `Store::queue_upload`) in a
    /// transaction of its own that holds the collection row `FOR SHARE`, as a batch
    /// does: a concurrent close waits for it, and it sees a close committed before;
    /// a concurrent delete either waits for it (and deletes the upload with the rest)
    /// or leaves it no row (`NotFound`). A report id already queued, by any replica,
    /// inserts nothing (`ON CONFLICT DO NOTHING`: `false`).
    pub(super) async fn enqueue(&self, id: &str, upload: QueuedUpload) -> Result<bool, StoreError> {
        // The upload was validated against this replica's cached spec.
        let cached = self.collection(id).await?.spec().encode_to_vec();
        if self.known_closed(id)? {
            return Err(StoreError::Closed(id.to_string()));
        }
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client.transaction().await.map_err(db_error)?;
        let row = txn
            .query_opt(
                "SELECT closed, spec FROM collections WHERE id = $1 FOR SHARE",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        // Missing, or created anew by another replica: that collection is gone.
        let Some(row) = row.filter(|row| row.get::<_, &[u8]>(1) == cached.as_slice()) else {
            self.forget(id)?;
            return Err(StoreError::NotFound(id.to_string()));
        };
        if row.get::<_, bool>(0) {
            self.remember_closed(id)?;
            return Err(StoreError::Closed(id.to_string()));
        }
        let inserted = txn
            .execute(
                "INSERT INTO queued_uploads (collection, report_id, body) VALUES ($1, $2, $3)
                 ON CONFLICT (collection, report_id) DO NOTHING",
                &[&id, &upload.report_id.0.as_slice(), &upload.body],
            )
            .await
            .map_err(db_error)?;
        txn.commit().await.map_err(db_error)?;
        Ok(inserted == 1)
    }

    /// The oldest `limit` uploads queued for `id`, oldest first (one statement: the
    /// collection's row, missing for `NotFound`, and its uploads).
    pub(super) async fn read_queue(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.pool.get().await.map_err(pool_error)?;
        let rows = client
            .query(
                "SELECT q.report_id, q.body FROM collections c
                 LEFT JOIN LATERAL (
                     SELECT seq, report_id, body FROM queued_uploads
                     WHERE collection = c.id ORDER BY seq LIMIT $2
                 ) q ON true
                 WHERE c.id = $1
                 ORDER BY q.seq",
                &[&id, &limit],
            )
            .await
            .map_err(db_error)?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let mut uploads = Vec::with_capacity(rows.len());
        for row in rows {
            let (Some(report_id), Some(body)) = (
                row.get::<_, Option<&[u8]>>(0),
                row.get::<_, Option<Vec<u8>>>(1),
            ) else {
                // The collection's row without an upload: the queue is empty.
                continue;
            };
            uploads.push(QueuedUpload {
                report_id: report_id16(report_id)?,
                body,
            });
        }
        Ok(uploads)
    }

    /// How many uploads of `id` are queued.
    pub(super) async fn count_queue(&self, id: &str) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                "SELECT (SELECT count(*) FROM queued_uploads WHERE collection = c.id)
                 FROM collections c WHERE c.id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        to_u64(row.get::<_, i64>(0))
    }

    /// The verdict recorded for each of `report_ids` of `id`, in their order (one
    /// statement: the collection's row, missing for `NotFound`, and its verdicts).
    pub(super) async fn read_verdicts(
        &self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let ids: Vec<&[u8]> = report_ids.iter().map(|r| r.0.as_slice()).collect();
        let client = self.pool.get().await.map_err(pool_error)?;
        let rows = client
            .query(
                "SELECT v.report_id, v.verdict FROM collections c
                 LEFT JOIN verdicts v
                   ON v.collection = c.id AND v.report_id = ANY($2::bytea[])
                 WHERE c.id = $1",
                &[&id, &ids],
            )
            .await
            .map_err(db_error)?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            if let (Some(report_id), Some(verdict)) = (
                row.get::<_, Option<&[u8]>>(0),
                row.get::<_, Option<Vec<u8>>>(1),
            ) {
                found.insert(report_id16(report_id)?, verdict);
            }
        }
        Ok(report_ids.iter().map(|r| found.get(r).cloned()).collect())
    }
}

/// A stored report id (16 bytes by the tables' checks).
fn report_id16(bytes: &[u8]) -> Result<ReportId, StoreError> {
    bytes.try_into().map(ReportId).map_err(|_| {
        StoreError::internal(Cause::Inconsistent(format!(
            "a stored report id of {} bytes",
            bytes.len()
        )))
    })
}
