//! Tests of [`MemoryStore`] and helpers for the other store tests.

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

#[tokio::test]
async fn delete_removes_everything_and_the_id_starts_from_scratch() {
    let s = MemoryStore::new();
    s.create_collection(collection("a", 2)).await.unwrap();
    s.submit("a", vec![report(1, 5), report(2, 5)])
        .await
        .unwrap();
    s.close_collection("a").await.unwrap();
    assert_eq!(s.delete_collection("a").await, Ok(2));
    assert_eq!(s.count("a").await, Err(StoreError::NotFound("a".into())));
    assert_eq!(
        s.delete_collection("a").await,
        Err(StoreError::NotFound("a".into()))
    );
    assert_eq!(
        s.submit("a", vec![report(3, 5)]).await,
        Err(StoreError::NotFound("a".into()))
    );
    // Created again: open, empty, old ids count again.
    s.create_collection(collection("a", 2)).await.unwrap();
    assert!(!s.is_closed("a").await.unwrap());
    assert_eq!(
        s.submit("a", vec![report(1, 5)]).await.unwrap(),
        BatchOutcome {
            accepted: 1,
            duplicates: 0
        }
    );
}
