//! Helpers for the store tests (the contract every store keeps, `MemoryStore`
//! included, is checked in `contract.rs`).

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
        ..Default::default()
    })
    .unwrap()
}
