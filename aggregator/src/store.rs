//! Where collections and their exact integer accumulators live.
//!
//! [`Store`] is the seam a durable store plugs into; [`MemoryStore`] keeps everything
//! in memory. A store receives only reports that were already validated, and applies
//! a batch atomically: after an error nothing of the batch is counted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use ldpcov_proto::{Collection, ReportId};
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
    /// The store cannot go on (poisoned lock, I/O, ...).
    #[error("store failure: {0}")]
    Internal(String),
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
}

/// Number of cross-validation folds every collection keeps. Reports go to fold
/// [`ReportId::fold`]`(FOLDS)`; the estimators hold one fold out at a time.
pub const FOLDS: usize = 5;

/// Exact integer accumulators of one collection: per-fold sums (the total is their
/// sum) and per-entry sums of squares.
///
/// Each entry is below 2^31 in magnitude, so the i64 sums cannot overflow before 2^32
/// reports, and each square is below 2^62, so the u128 sums of squares cannot overflow
/// before 2^66.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accumulator {
    /// Reports counted.
    pub count: u64,
    /// Reports counted per fold.
    pub fold_counts: Vec<u64>,
    /// Packed per-entry sums in grid units, one vector per fold.
    pub fold_sums: Vec<Vec<i64>>,
    /// Packed per-entry sums of squared grid values.
    pub sum_squares: Vec<u128>,
}

impl Accumulator {
    /// Empty accumulators for `entries` packed entries and `folds` folds.
    pub fn new(entries: usize, folds: usize) -> Self {
        let folds = folds.max(1);
        Accumulator {
            count: 0,
            fold_counts: vec![0; folds],
            fold_sums: vec![vec![0; entries]; folds],
            sum_squares: vec![0; entries],
        }
    }

    /// Number of packed entries.
    pub fn entries(&self) -> usize {
        self.sum_squares.len()
    }

    /// Adds one report to `fold` (exactly; order does not matter).
    pub fn add(&mut self, fold: usize, entries: &[i32]) {
        debug_assert_eq!(entries.len(), self.entries());
        let sums = &mut self.fold_sums[fold];
        for ((s, q), &v) in sums
            .iter_mut()
            .zip(self.sum_squares.iter_mut())
            .zip(entries)
        {
            let v = i64::from(v);
            *s += v;
            *q += (v * v) as u128;
        }
        self.fold_counts[fold] += 1;
        self.count += 1;
    }

    /// The per-entry sums over all folds.
    pub fn sums(&self) -> Vec<i64> {
        let mut total = vec![0i64; self.entries()];
        for fold in &self.fold_sums {
            for (t, &v) in total.iter_mut().zip(fold) {
                *t += v;
            }
        }
        total
    }

    /// Adds another accumulator with the same shape (shards merge exactly).
    pub fn merge(&mut self, other: &Accumulator) {
        for (mine, theirs) in self.fold_sums.iter_mut().zip(&other.fold_sums) {
            for (s, &v) in mine.iter_mut().zip(theirs) {
                *s += v;
            }
        }
        for (q, &v) in self.sum_squares.iter_mut().zip(&other.sum_squares) {
            *q += v;
        }
        for (c, &v) in self.fold_counts.iter_mut().zip(&other.fold_counts) {
            *c += v;
        }
        self.count += other.count;
    }
}

struct CollectionState {
    collection: Arc<Collection>,
    inner: Mutex<Counted>,
}

struct Counted {
    acc: Accumulator,
    seen: HashSet<ReportId>,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::CollectionSpec;

    fn collection(id: &str, dim: u32) -> Collection {
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
    async fn wrong_length_batch_changes_nothing() {
        let s = MemoryStore::new();
        s.create_collection(collection("a", 2)).await.unwrap();
        let mut bad = report(9, 1);
        bad.entries.pop();
        assert!(s.submit("a", vec![report(1, 1), bad]).await.is_err());
        assert_eq!(s.count("a").await.unwrap(), 0);
    }

    #[test]
    fn sharded_sums_equal_one_shard() {
        let reports: Vec<Vec<i32>> = (0..50)
            .map(|k| vec![k * 1_000_003 % 9973 - 5000; 4])
            .collect();
        let mut one = Accumulator::new(4, 3);
        let (mut a, mut b) = (Accumulator::new(4, 3), Accumulator::new(4, 3));
        for (k, r) in reports.iter().enumerate() {
            one.add(k % 3, r);
            if k % 2 == 0 {
                a.add(k % 3, r)
            } else {
                b.add(k % 3, r)
            }
        }
        a.merge(&b);
        assert_eq!(a, one);
        let direct: i64 = reports.iter().map(|r| i64::from(r[0])).sum();
        assert_eq!(one.sums()[0], direct);
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let mut acc = Accumulator::new(1, 1);
        for _ in 0..1000 {
            acc.add(0, &[i32::MAX]);
            acc.add(0, &[-i32::MAX]);
        }
        assert_eq!(acc.sums(), vec![0]);
        assert_eq!(acc.sum_squares[0], 2000 * (i32::MAX as u128).pow(2));
    }
}
