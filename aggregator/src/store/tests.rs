//! Helpers for the store tests (the contract every store keeps, `MemoryStore`
//! included, is checked in `contract.rs`).

use super::*;

/// A small valid collection for store tests (the shared fixture spec).
pub(crate) fn collection(id: &str, dim: u32) -> Collection {
    ldpcov_fixtures::spec(id, dim).collection()
}

fn report(id: u8, v: i32) -> ValidReport {
    ValidReport {
        report_id: ReportId([id; 16]),
        entries: vec![v; 3].into(),
    }
}

/// Memory-store specific: the contract suite covers the rest.
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
