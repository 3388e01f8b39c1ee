//! The relay's admission of a shuffled collection: the aggregator's answer
//! ([`Upstream::collection`]) checked against the relay's own floor and against the
//! settings the relay pinned the first time it accepted the collection
//! ([`PinnedSettings`]). Devices' calls and the forwarder both pass through it, so a
//! collection that asks for less than the relay's floor, or that changed its privacy
//! settings, gets no report stored and no batch formed or forwarded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Status;

use crate::pin::PinnedSettings;
use crate::store::{CloseRule, RelayStore, StoreError};
use crate::upstream::{CollectionInfo, Upstream};

/// The relay's default floor on a batch: no batch of fewer reports is formed, and a
/// collection announcing a smaller minimum is refused. At 1000 reports a rank-one
/// report of ε0 = 2 is worth a central ε of at most 0.55 at δ = 10⁻⁶ (docs/PRIVACY.md
/// §9); below a few hundred, amplification is negligible for the ε0 in use, and a
/// batch that small is the aggregator's way to undo the shuffle.
pub const DEFAULT_MIN_BATCH_SIZE: u64 = 1000;
/// The relay's default floor on the batch window, seconds: none beyond the
/// collection's own (the guarantee rests on the batch floor; the window bounds only
/// how often batches leave).
pub const DEFAULT_MIN_BATCH_WINDOW_SECONDS: u64 = 0;

/// A collection the relay accepts now.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The aggregator's current answer (keys, size bound).
    pub info: Arc<CollectionInfo>,
    /// The settings pinned at first sight (equal to the current ones).
    pub pinned: Arc<PinnedSettings>,
    /// The close rule of its windows: the larger of the announced and the relay's.
    pub rule: CloseRule,
}

/// See the module docs. Cloning shares everything.
#[derive(Clone)]
pub struct Gate {
    upstream: Upstream,
    store: Arc<RelayStore>,
    floor: CloseRule,
    pins: Arc<Mutex<HashMap<String, Arc<PinnedSettings>>>>,
    logged: Arc<Mutex<HashSet<LoggedChange>>>,
}

/// A settings change already logged at ERROR: the collection and the changed spec's
/// digest (logged once per change, not once per report).
type LoggedChange = (String, [u8; 32]);

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("floor", &self.floor)
            .finish_non_exhaustive()
    }
}

fn store_status(e: StoreError) -> Status {
    tracing::error!(error = %e, "relay store failed");
    Status::unavailable("the relay cannot store reports right now; retry later")
}

impl Gate {
    /// Admits collections of `upstream` that meet `floor`, pinning them in `store`.
    pub fn new(upstream: Upstream, store: Arc<RelayStore>, floor: CloseRule) -> Self {
        Gate {
            upstream,
            store,
            floor,
            pins: Arc::default(),
            logged: Arc::default(),
        }
    }

    /// The relay's floor.
    pub fn floor(&self) -> CloseRule {
        self.floor
    }

    /// The aggregator.
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// Admits collection `id` (its parameters from the cache if fresher than
    /// `max_age`): the aggregator's refusals as [`Upstream::collection`] gives them;
    /// FAILED_PRECONDITION when it announces a smaller batch or a shorter window than
    /// the relay's floor, or settings other than the pinned ones; UNAVAILABLE when the
    /// store fails. The first admission pins the settings, durably.
    pub async fn admit(&self, id: &str, max_age: Option<Duration>) -> Result<Admitted, Status> {
        let info = self.upstream.collection(id, max_age).await?;
        let now = Arc::clone(&info.pinned);
        let pinned = match self.pinned(id).await? {
            Some(p) => p,
            None => {
                // First sight: only a collection the relay accepts is pinned.
                self.check_floor(id, &now)?;
                let stored = self
                    .store
                    .pin(id, (*now).clone())
                    .await
                    .map_err(store_status)?;
                let stored = Arc::new(stored);
                let earlier = self
                    .pins
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_string(), Arc::clone(&stored));
                // Concurrent first calls all pin (idempotently): the first one logs.
                if earlier.is_none() {
                    tracing::info!(
                        collection = id,
                        min_batch_size = stored.min_batch_size,
                        batch_window_seconds = stored.batch_window_seconds,
                        "pinned a collection's privacy settings"
                    );
                }
                stored
            }
        };
        let changes = pinned.differences(&now);
        if !changes.is_empty() {
            let changes = changes.join(", ");
            let first = {
                let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
                if logged.len() >= 10_000 {
                    logged.clear();
                }
                logged.insert((id.to_string(), now.spec_digest))
            };
            if first {
                tracing::error!(
                    collection = id,
                    changes = %changes,
                    "the aggregator changed a collection's privacy settings after the relay pinned them: refusing its reports and holding its batches"
                );
            }
            return Err(Status::failed_precondition(format!(
                "collection {id} changed its privacy settings after the relay pinned them: {changes}"
            )));
        }
        // The relay's floor may have been raised since the collection was pinned.
        self.check_floor(id, &pinned)?;
        let rule = CloseRule {
            min_batch_size: pinned.min_batch_size.max(self.floor.min_batch_size),
            window_seconds: pinned.batch_window_seconds.max(self.floor.window_seconds),
        };
        Ok(Admitted { info, pinned, rule })
    }

    async fn pinned(&self, id: &str) -> Result<Option<Arc<PinnedSettings>>, Status> {
        if let Some(p) = self.pins.lock().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Ok(Some(Arc::clone(p)));
        }
        let store = Arc::clone(&self.store);
        let key = id.to_string();
        let stored = tokio::task::spawn_blocking(move || store.pinned(&key))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(store_status)?;
        Ok(stored.map(|p| {
            let p = Arc::new(p);
            let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
            if pins.len() >= 10_000 {
                pins.clear();
            }
            pins.insert(id.to_string(), Arc::clone(&p));
            p
        }))
    }

    fn check_floor(&self, id: &str, settings: &PinnedSettings) -> Result<(), Status> {
        if settings.min_batch_size < self.floor.min_batch_size {
            return Err(Status::failed_precondition(format!(
                "collection {id} announces batches of at least {} reports, below this relay's floor of {}: the relay does not serve it",
                settings.min_batch_size, self.floor.min_batch_size
            )));
        }
        if settings.batch_window_seconds < self.floor.window_seconds {
            return Err(Status::failed_precondition(format!(
                "collection {id} announces a batch window of {} s, shorter than this relay's minimum of {} s: the relay does not serve it",
                settings.batch_window_seconds, self.floor.window_seconds
            )));
        }
        Ok(())
    }
}
