//! What one replica caches of the shared database ([`Cache`]): only what never
//! changes for one incarnation of a collection, each fact trusted for
//! [`PostgresConfig::cache_ttl`](super::PostgresConfig::cache_ttl).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use ldpcov_privacy::Collection;

use super::PostgresStore;
use super::errors::corrupt;
use crate::store::codec::{Corruption, decode_collection};
use crate::store::{Cause, StoreError};

/// What one replica caches: only what never changes for one incarnation of a
/// collection (its spec; a close is final), each with the time it was read, trusted
/// for [`PostgresConfig::cache_ttl`] (another replica may delete the collection).
#[derive(Default)]
pub(super) struct Cache {
    collections: RwLock<HashMap<String, (Arc<Collection>, Instant)>>,
    closed: RwLock<HashMap<String, Instant>>,
}

impl PostgresStore {
    /// The cached collection, if read less than the TTL ago.
    pub(super) fn cached(&self, id: &str) -> Result<Option<Arc<Collection>>, StoreError> {
        let map = self
            .cache
            .collections
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection cache")))?;
        Ok(map
            .get(id)
            .filter(|(_, at)| at.elapsed() < self.config.cache_ttl)
            .map(|(c, _)| c.clone()))
    }

    /// Caches `collection` as read now; an equal cached one is kept (and refreshed).
    pub(super) fn remember(
        &self,
        collection: Arc<Collection>,
    ) -> Result<Arc<Collection>, StoreError> {
        let mut map = self
            .cache
            .collections
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection cache")))?;
        let now = Instant::now();
        let entry = map
            .entry(collection.id().to_string())
            .or_insert((collection.clone(), now));
        if entry.0 != collection {
            *entry = (collection, now);
        } else {
            entry.1 = now;
        }
        Ok(entry.0.clone())
    }

    /// Drops everything cached about `id` (it was deleted, here or elsewhere).
    pub(super) fn forget(&self, id: &str) -> Result<(), StoreError> {
        self.cache
            .collections
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("collection cache")))?
            .remove(id);
        self.cache
            .closed
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("closed cache")))?
            .remove(id);
        Ok(())
    }

    /// The collection whose spec is stored under `id`, checked and cached.
    pub(super) fn decoded(&self, id: &str, spec: &[u8]) -> Result<Arc<Collection>, StoreError> {
        let collection = decode_collection(id, spec).map_err(corrupt)?;
        if collection.id() != id {
            return Err(corrupt(Corruption::IdMismatch {
                id: id.to_string(),
                found: collection.id().to_string(),
            }));
        }
        self.remember(Arc::new(collection))
    }

    /// Whether `id` was seen closed less than the TTL ago.
    pub(super) fn known_closed(&self, id: &str) -> Result<bool, StoreError> {
        let map = self
            .cache
            .closed
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("closed cache")))?;
        Ok(map
            .get(id)
            .is_some_and(|at| at.elapsed() < self.config.cache_ttl))
    }

    pub(super) fn remember_closed(&self, id: &str) -> Result<(), StoreError> {
        self.cache
            .closed
            .write()
            .map_err(|_| StoreError::internal(Cause::Poisoned("closed cache")))?
            .insert(id.to_string(), Instant::now());
        Ok(())
    }
}
