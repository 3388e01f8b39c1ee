//! Where collections and their exact integer accumulators live.
//!
//! [`Store`] is the seam a durable store plugs into; [`MemoryStore`] keeps everything
//! in memory. A store receives only reports that were already validated, and applies
//! a batch atomically: after an error nothing of the batch is counted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use ldpcov_proto::{Collection, ReportId};

pub use ldpcov_estimate::{Accumulator, FOLDS};
use thiserror::Error;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// No collection with this id.
    #[error("collection {0:?} does not exist")]
    NotFound(String),
    /// A different collection with this id exists.
    #[error("collection {0:?} already exists with other parameters")]
    AlreadyExists(String),
    /// The collection was closed: it takes no more reports.
    #[error("collection {0:?} is closed and takes no more reports")]
    Closed(String),
    /// The store cannot go on (poisoned lock, I/O, ...).
    #[error("store failure: {0}")]
    Internal(String),
    /// The operation did not take effect but may succeed if retried (a failed commit,
    /// a store shutting down). Resending the same report ids is safe.
    #[error("store temporarily unavailable: {0}")]
    Unavailable(String),
}

/// A report that passed validation: its id and grid-unit entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidReport {
    /// Client-chosen id; counted at most once per collection.
    pub report_id: ReportId,
    /// d entries in grid units.
    pub entries: Vec<i32>,
}

/// What a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchOutcome {
    /// Reports newly counted.
    pub accepted: u64,
    /// Reports whose id was already counted (ignored).
    pub duplicates: u64,
}

/// A consistent copy of a collection's accumulators.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The collection.
    pub collection: Arc<Collection>,
    /// The accumulators.
    pub acc: Accumulator,
}

/// Collections and their accumulators.
#[tonic::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates a collection. Creating one that exists with the same parameters is a
    /// no-op that returns it; with other parameters it is [`StoreError::AlreadyExists`].
    async fn create_collection(
        &self,
        collection: Collection,
    ) -> Result<Arc<Collection>, StoreError>;
    /// The collection with this id.
    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError>;
    /// Counts a batch of validated reports for collection `id`, skipping ids already
    /// counted (also within the batch). All or nothing.
    async fn submit(&self, id: &str, reports: Vec<ValidReport>)
    -> Result<BatchOutcome, StoreError>;
    /// Reports counted so far.
    async fn count(&self, id: &str) -> Result<u64, StoreError>;
    /// A consistent copy of the accumulators.
    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError>;

    /// Closes collection `id` for good: from then on [`submit`](Store::submit) fails
    /// with [`StoreError::Closed`] (checked atomically with the batch), while
    /// [`count`](Store::count) and [`snapshot`](Store::snapshot) keep working.
    /// Closing a closed collection is a no-op.
    ///
    /// Added with issue 5. The default refuses, so a store that predates it still
    /// compiles; a durable store must override it (and
    /// [`is_closed`](Store::is_closed)) and persist the flag, as `DurableStore` does.
    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        Err(StoreError::Internal(format!(
            "this store cannot close collections (asked to close {id:?})"
        )))
    }

    /// Whether collection `id` is closed. The default: never (see
    /// [`close_collection`](Store::close_collection)).
    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        self.collection(id).await.map(|_| false)
    }
}

struct CollectionState {
    collection: Arc<Collection>,
    inner: Mutex<Counted>,
}

struct Counted {
    acc: Accumulator,
    seen: HashSet<ReportId>,
    /// Set by `close_collection`; checked under the same lock as every batch.
    closed: bool,
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

    fn state(&self, id: &str) -> Result<Arc<CollectionState>, StoreError> {
        let map = self
            .collections
            .read()
            .map_err(|_| StoreError::Internal("collection map lock poisoned".into()))?;
        map.get(id)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }

    fn lock(state: &CollectionState) -> Result<std::sync::MutexGuard<'_, Counted>, StoreError> {
        state
            .inner
            .lock()
            .map_err(|_| StoreError::Internal("accumulator lock poisoned".into()))
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
            .map_err(|_| StoreError::Internal("collection map lock poisoned".into()))?;
        if let Some(existing) = map.get(&collection.id) {
            return if *existing.collection == collection {
                Ok(existing.collection.clone())
            } else {
                Err(StoreError::AlreadyExists(collection.id))
            };
        }
        let collection = Arc::new(collection);
        map.insert(
            collection.id.clone(),
            Arc::new(CollectionState {
                collection: collection.clone(),
                inner: Mutex::new(Counted {
                    acc: Accumulator::new(collection.entries, FOLDS),
                    seen: HashSet::new(),
                    closed: false,
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
        let state = self.state(id)?;
        if let Some(bad) = reports
            .iter()
            .find(|r| r.entries.len() != state.collection.entries)
        {
            return Err(StoreError::Internal(format!(
                "unvalidated report with {} entries reached the store",
                bad.entries.len()
            )));
        }
        let mut counted = Self::lock(&state)?;
        if counted.closed {
            return Err(StoreError::Closed(id.to_string()));
        }
        let mut outcome = BatchOutcome::default();
        for report in &reports {
            if counted.seen.insert(report.report_id) {
                counted
                    .acc
                    .add(report.report_id.fold(FOLDS), &report.entries);
                outcome.accepted += 1;
            } else {
                outcome.duplicates += 1;
            }
        }
        Ok(outcome)
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
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    /// A small valid collection for store tests.
    pub(crate) fn collection(id: &str, dim: u32) -> Collection {
        Collection::from_spec(&CollectionSpec {
            collection_id: id.into(),
            dim,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            encoding: 0,
        })
        .unwrap()
    }

    fn report(id: u8, v: i32) -> ValidReport {
        ValidReport {
            report_id: ReportId([id; 16]),
            entries: vec![v; 3],
        }
    }

    #[tokio::test]
    async fn dedupes_within_and_across_batches() {
        let s = MemoryStore::new();
        s.create_collection(collection("a", 2)).await.unwrap();
        let o = s
            .submit("a", vec![report(1, 5), report(2, 7), report(1, 100)])
            .await
            .unwrap();
        assert_eq!(
            o,
            BatchOutcome {
                accepted: 2,
                duplicates: 1
            }
        );
        let o = s.submit("a", vec![report(2, 100)]).await.unwrap();
        assert_eq!(
            o,
            BatchOutcome {
                accepted: 0,
                duplicates: 1
            }
        );
        let snap = s.snapshot("a").await.unwrap();
        assert_eq!(snap.acc.count, 2);
        assert_eq!(snap.acc.sums(), vec![12; 3]);
        assert_eq!(snap.acc.sum_squares, vec![25 + 49; 3]);
        let (f1, f2) = (ReportId([1; 16]).fold(FOLDS), ReportId([2; 16]).fold(FOLDS));
        assert_eq!(snap.acc.fold_counts.iter().sum::<u64>(), 2);
        assert_eq!(snap.acc.fold_sums[f1][0] + snap.acc.fold_sums[f2][0], 12);
    }

    #[tokio::test]
    async fn create_is_idempotent_and_conflicts_are_refused() {
        let s = MemoryStore::new();
        s.create_collection(collection("a", 2)).await.unwrap();
        s.create_collection(collection("a", 2)).await.unwrap();
        assert_eq!(
            s.create_collection(collection("a", 3)).await,
            Err(StoreError::AlreadyExists("a".into()))
        );
        assert_eq!(s.count("zz").await, Err(StoreError::NotFound("zz".into())));
    }

    #[tokio::test]
    async fn a_closed_collection_refuses_batches_but_keeps_its_sums() {
        let s = MemoryStore::new();
        s.create_collection(collection("a", 2)).await.unwrap();
        s.submit("a", vec![report(1, 5)]).await.unwrap();
        assert!(!s.is_closed("a").await.unwrap());
        s.close_collection("a").await.unwrap();
        s.close_collection("a").await.unwrap();
        assert!(s.is_closed("a").await.unwrap());
        assert_eq!(
            s.submit("a", vec![report(2, 5)]).await,
            Err(StoreError::Closed("a".into()))
        );
        assert_eq!(s.count("a").await.unwrap(), 1);
        assert_eq!(s.snapshot("a").await.unwrap().acc.sums(), vec![5; 3]);
        assert_eq!(
            s.close_collection("zz").await,
            Err(StoreError::NotFound("zz".into()))
        );
    }

    #[tokio::test]
    async fn wrong_length_batch_changes_nothing() {
        let s = MemoryStore::new();
        s.create_collection(collection("a", 2)).await.unwrap();
        let mut bad = report(9, 1);
        bad.entries.pop();
        assert!(s.submit("a", vec![report(1, 1), bad]).await.is_err());
        assert_eq!(s.count("a").await.unwrap(), 0);
    }
}
