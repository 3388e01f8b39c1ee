//! [`MemoryStore`]: every collection, accumulator and seen report id in memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use ldpcov_privacy::{Collection, ReportId};

use super::{
    Accumulator, BatchOutcome, Cause, DeliveredBatches, FOLDS, QueuedUpload, RecordedRelease,
    Snapshot, Store, StoreError, ValidReport, check_lengths, check_release,
};

struct CollectionState {
    collection: Arc<Collection>,
    inner: Mutex<Counted>,
}

struct Counted {
    acc: Accumulator,
    seen: HashSet<ReportId>,
    /// Set by `close_collection`; checked under the same lock as every batch.
    closed: bool,
    /// Set by `delete_collection` (after removing the state from the map), under the
    /// same lock: a batch that finds it set fails with `NotFound`.
    deleted: bool,
    /// Recorded releases by key: (ρ spent, body).
    releases: HashMap<Vec<u8>, (f64, Vec<u8>)>,
    /// What the shuffled batches delivered.
    delivered: DeliveredBatches,
    /// Reports counted under each shuffled batch id (`Store::submit_to_batch`),
    /// changed under the same lock as the sums they were counted into.
    batches: HashMap<[u8; 16], u64>,
    /// A two-aggregator leader's queued uploads, by arrival number (oldest first).
    queue: BTreeMap<u64, QueuedUpload>,
    /// The arrival number of each queued report id.
    queued: HashMap<ReportId, u64>,
    /// The next arrival number.
    next_upload: u64,
    /// A two-aggregator helper's verdicts, by report id.
    verdicts: HashMap<ReportId, Vec<u8>>,
}

impl Counted {
    fn spent(&self) -> f64 {
        self.releases.values().map(|(rho, _)| rho).sum()
    }
}

/// A [`Store`] in memory: everything is lost when the process ends.
#[derive(Default)]
pub struct MemoryStore {
    collections: RwLock<HashMap<String, Arc<CollectionState>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `reports` (see [`Store::submit`]) and, for a chunk of shuffled batch
    /// `batch`, adds the reports it counted to that batch's tally, under one lock.
    fn count_reports(
        &self,
        id: &str,
        batch: Option<[u8; 16]>,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let state = self.state(id)?;
        check_lengths(&state.collection, &reports)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        if counted.closed {
            return Err(StoreError::Closed(id.to_string()));
        }
        Ok(Self::count_locked(&mut counted, batch, &reports))
    }

    /// Counts `reports` into `counted` (held locked by the caller), skipping counted ids.
    fn count_locked(
        counted: &mut Counted,
        batch: Option<[u8; 16]>,
        reports: &[ValidReport],
    ) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        let mut fresh = Vec::with_capacity(reports.len());
        for report in reports {
            if counted.seen.insert(report.report_id) {
                fresh.push((report.report_id.fold(FOLDS), &report.entries));
                outcome.accepted += 1;
            } else {
                outcome.duplicates += 1;
            }
        }
        counted.acc.add_reports(&fresh);
        if let Some(batch) = batch
            && outcome.accepted > 0
        {
            let tally = counted.batches.entry(batch).or_insert(0);
            *tally = tally.saturating_add(outcome.accepted);
        }
        outcome
    }

    fn state(&self, id: &str) -> Result<Arc<CollectionState>, StoreError> {
        let map = self
            .collections
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection map")))?;
        map.get(id)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    fn lock(state: &CollectionState) -> Result<std::sync::MutexGuard<'_, Counted>, StoreError> {
        state
            .inner
            .lock()
            .map_err(|_| StoreError::internal(Cause::Poisoned("accumulator")))
    }
}

#[tonic::async_trait]
impl Store for MemoryStore {
    async fn create_collection(
        &self,
        collection: Collection,
    ) -> Result<Arc<Collection>, StoreError> {
        let mut map = self
            .collections
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection map")))?;
        if let Some(existing) = map.get(collection.id()) {
            return if *existing.collection == collection {
                Ok(existing.collection.clone())
            } else {
                Err(StoreError::AlreadyExists(collection.id().to_string()))
            };
        }
        let collection = Arc::new(collection);
        map.insert(
            collection.id().to_string(),
            Arc::new(CollectionState {
                collection: collection.clone(),
                inner: Mutex::new(Counted {
                    acc: Accumulator::new(collection.entries(), FOLDS),
                    seen: HashSet::new(),
                    closed: false,
                    deleted: false,
                    releases: HashMap::new(),
                    delivered: DeliveredBatches::default(),
                    batches: HashMap::new(),
                    queue: BTreeMap::new(),
                    queued: HashMap::new(),
                    next_upload: 0,
                    verdicts: HashMap::new(),
                }),
            }),
        );
        Ok(collection)
    }

    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        Ok(self.state(id)?.collection.clone())
    }

    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, None, reports)
    }

    async fn submit_to_batch(
        &self,
        id: &str,
        batch: [u8; 16],
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Some(batch), reports)
    }

    async fn counted_in_batch(&self, id: &str, batch: [u8; 16]) -> Result<u64, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(counted.batches.get(&batch).copied().unwrap_or(0))
    }

    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        let state = self.state(id)?;
        let count = Self::lock(&state)?.acc.count;
        Ok(count)
    }

    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        Ok(Snapshot {
            collection: state.collection.clone(),
            acc: counted.acc.clone(),
        })
    }

    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        let state = self.state(id)?;
        Self::lock(&state)?.closed = true;
        Ok(())
    }

    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        let state = self.state(id)?;
        let closed = Self::lock(&state)?.closed;
        Ok(closed)
    }

    async fn recorded_release(
        &self,
        id: &str,
        key: &[u8],
    ) -> Result<Option<RecordedRelease>, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let spent = counted.spent();
        Ok(counted
            .releases
            .get(key)
            .map(|(rho, body)| RecordedRelease {
                body: body.clone(),
                rho: *rho,
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
        let state = self.state(id)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let spent = counted.spent();
        if let Some((old_rho, old_body)) = counted.releases.get(key) {
            return Ok(RecordedRelease {
                body: old_body.clone(),
                rho: *old_rho,
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
        counted.releases.insert(key.to_vec(), (rho, body.clone()));
        Ok(RecordedRelease {
            body,
            rho,
            spent: spent + rho,
            fresh: true,
        })
    }

    async fn budget_spent(&self, id: &str) -> Result<f64, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(counted.spent())
    }

    async fn collection_count(&self) -> Result<u64, StoreError> {
        let map = self
            .collections
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection map")))?;
        Ok(map.len() as u64)
    }

    async fn collection_ids(&self) -> Result<Vec<String>, StoreError> {
        let map = self
            .collections
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection map")))?;
        let mut ids: Vec<String> = map.keys().cloned().collect();
        ids.sort();
        Ok(ids)
    }

    async fn record_delivered_batch(&self, id: &str, valid: u64) -> Result<(), StoreError> {
        let state = self.state(id)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        counted.delivered = counted.delivered.with_batch(valid);
        Ok(())
    }

    async fn delivered_batches(&self, id: &str) -> Result<DeliveredBatches, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        Ok(counted.delivered)
    }

    async fn queue_upload(&self, id: &str, upload: QueuedUpload) -> Result<bool, StoreError> {
        let state = self.state(id)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        if counted.closed {
            return Err(StoreError::Closed(id.to_string()));
        }
        if counted.queued.contains_key(&upload.report_id) {
            return Ok(false);
        }
        let n = counted.next_upload;
        counted.next_upload += 1;
        counted.queued.insert(upload.report_id, n);
        counted.queue.insert(n, upload);
        Ok(true)
    }

    async fn queued_uploads(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(counted.queue.values().take(limit).cloned().collect())
    }

    async fn queued_count(&self, id: &str) -> Result<u64, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        Ok(counted.queue.len() as u64)
    }

    async fn submit_from_queue(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        done: Vec<ReportId>,
    ) -> Result<BatchOutcome, StoreError> {
        let state = self.state(id)?;
        check_lengths(&state.collection, &reports)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let outcome = Self::count_locked(&mut counted, None, &reports);
        for report_id in done {
            if let Some(n) = counted.queued.remove(&report_id) {
                counted.queue.remove(&n);
            }
        }
        Ok(outcome)
    }

    async fn verdicts(
        &self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let state = self.state(id)?;
        let counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(report_ids
            .iter()
            .map(|r| counted.verdicts.get(r).cloned())
            .collect())
    }

    async fn submit_with_verdicts(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        verdicts: Vec<(ReportId, Vec<u8>)>,
    ) -> Result<BatchOutcome, StoreError> {
        let state = self.state(id)?;
        check_lengths(&state.collection, &reports)?;
        let mut counted = Self::lock(&state)?;
        if counted.deleted {
            return Err(StoreError::NotFound(id.to_string()));
        }
        for (report_id, verdict) in verdicts {
            counted.verdicts.entry(report_id).or_insert(verdict);
        }
        Ok(Self::count_locked(&mut counted, None, &reports))
    }

    async fn delete_collection(&self, id: &str) -> Result<u64, StoreError> {
        let mut map = self
            .collections
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection map")))?;
        let state = map
            .remove(id)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        // A batch that looked the collection up before the removal may still hold its
        // state: mark it deleted under the batch lock, so such a batch fails with
        // NotFound instead of counting into a collection nobody can see.
        let mut counted = Self::lock(&state)?;
        counted.deleted = true;
        Ok(counted.acc.count)
    }
}
