//! The relay's admission of a shuffled collection: the aggregator's answer
//! ([`Upstream::collection`]) checked against the relay's own floor and against the
//! settings the relay pinned the first time it accepted the collection
//! ([`PinnedSettings`]) and the key bytes it pinned for each key id the first time it
//! saw it ([`RelayStore::pin_keys`]). Devices' calls and the forwarder both pass
//! through it, so a collection that asks for less than the relay's floor, whose δ is
//! at least 1/n at that floor, that changed its privacy settings, or whose aggregator
//! answers other key bytes under a pinned key id (a key partition: one "batch" opened
//! as many small groups, each under its own secret) is **held**: no report stored, no
//! batch formed or forwarded, an ERROR logged once, the reason in the relay's status
//! ([`Gate::held`]) and the gauge `ldpcov_relay_collection_held`, while it lasts.
//! Devices are served only the pinned key bytes ([`Admitted::keys`]).
//!
//! A collection the relay serves (pinned) that the aggregator answers closed, or no
//! longer knows (NOT_FOUND while it accepts the relay's token: the right aggregator,
//! not a misconfigured one), is **retired** ([`RelayStore::retire`]): its reports
//! still held are dropped with a count, durably, and every later call about it is
//! refused FAILED_PRECONDITION, for good (a collection created again under the same
//! id is not served by this relay). Logged at WARN, counted in
//! `ldpcov_relay_collections_retired_total{reason}` and
//! `ldpcov_relay_reports_retired_total{reason}`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldpcov_proto::v1::{HpkeKeyState, HpkePublicKey};
use tonic::Status;

use crate::batch_rule::CloseRule;
use crate::pin::PinnedSettings;
use crate::store::{RelayStore, RetireReason, Retired, StoreError};
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
    /// The published keys as the relay serves them to devices: each key id's bytes as
    /// pinned at first sight (equal to the aggregator's current answer, or the
    /// collection would be held).
    pub keys: Vec<HpkePublicKey>,
}

/// See the module docs. Cloning shares everything.
#[derive(Clone)]
pub struct Gate {
    upstream: Upstream,
    store: Arc<RelayStore>,
    floor: CloseRule,
    pins: Arc<Mutex<HashMap<String, Arc<PinnedSettings>>>>,
    logged: Arc<Mutex<HashSet<LoggedChange>>>,
    /// Key bytes pinned, by (collection, key id): a cache of the store's.
    key_pins: Arc<Mutex<HashMap<KeyPin, [u8; 32]>>>,
    /// Key conflicts already logged and counted: (collection, key id, the new bytes).
    conflicts: Arc<Mutex<HashSet<KeyConflict>>>,
    /// Held while a conflict is recorded, so that no caller answers "held" before the
    /// conflict is in the store (the status counts it) and none counts it twice.
    conflict_writes: Arc<tokio::sync::Mutex<()>>,
    /// Why each held collection is held, as last found.
    held: Arc<Mutex<HashMap<String, String>>>,
    /// The retired collections (all of them: read from the store at start).
    retired: Arc<Mutex<HashMap<String, Retired>>>,
    clock: crate::clock::Clock,
}

/// A pinned key: (collection, key id).
type KeyPin = (String, u32);
/// Other bytes answered for a pinned key: (collection, key id, the bytes).
type KeyConflict = (String, u32, [u8; 32]);

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
    /// Fails when the store cannot list its retired collections.
    pub fn new(
        upstream: Upstream,
        store: Arc<RelayStore>,
        floor: CloseRule,
    ) -> Result<Self, StoreError> {
        let retired = store.retired_all()?;
        Ok(Gate {
            upstream,
            store,
            floor,
            pins: Arc::default(),
            logged: Arc::default(),
            key_pins: Arc::default(),
            conflicts: Arc::default(),
            conflict_writes: Arc::default(),
            held: Arc::default(),
            retired: Arc::new(Mutex::new(retired)),
            clock: crate::clock::system_clock(),
        })
    }

    /// Whether (and how) collection `id` was retired.
    pub fn retired(&self, id: &str) -> Option<Retired> {
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .copied()
    }

    /// The refusal of a call about retired collection `id`.
    fn retired_status(id: &str, r: &Retired) -> Status {
        Status::failed_precondition(format!(
            "collection {id} was {} at the aggregator: this relay takes no more reports of it (retired at {}, {} reports it held dropped)",
            r.reason.as_str(),
            r.at,
            r.window_reports + r.batch_reports
        ))
    }

    /// Retires collection `id` (see the module docs) and returns the refusal.
    async fn retire(&self, id: &str, reason: RetireReason) -> Status {
        match self.store.retire(id, reason, (self.clock)()).await {
            Ok(r) => {
                let first = self
                    .retired
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_string(), r)
                    .is_none();
                if first {
                    let dropped = r.window_reports + r.batch_reports;
                    tracing::warn!(
                        collection = id,
                        reason = reason.as_str(),
                        window_reports = r.window_reports,
                        batch_reports = r.batch_reports,
                        "the aggregator {} a collection this relay served: retired it (its reports still held dropped: they can never be counted); its devices are refused from now on",
                        reason.as_str()
                    );
                    metrics::counter!("ldpcov_relay_collections_retired_total", "reason" => reason.as_str())
                        .increment(1);
                    metrics::counter!("ldpcov_relay_reports_retired_total", "reason" => reason.as_str())
                        .increment(dropped);
                    self.set_held(id, None);
                }
                Self::retired_status(id, &r)
            }
            Err(e) => store_status(e),
        }
    }

    /// Replaces the clock that dates key conflicts (tests).
    pub fn with_clock(mut self, clock: crate::clock::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Why collection `id` is held now (`None`: it is not, as last checked).
    pub fn held(&self, id: &str) -> Option<String> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    fn set_held(&self, id: &str, reason: Option<&str>) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let was = match reason {
            Some(r) => {
                if held.len() >= 10_000 && !held.contains_key(id) {
                    held.clear();
                }
                held.insert(id.to_string(), r.to_string()).is_some()
            }
            None => held.remove(id).is_some(),
        };
        if was != reason.is_some() {
            metrics::gauge!("ldpcov_relay_collection_held", "collection" => id.to_string())
                .set(if reason.is_some() { 1.0 } else { 0.0 });
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
        if let Some(r) = self.retired(id) {
            return Err(Self::retired_status(id, &r));
        }
        let info = match self.upstream.collection(id, max_age).await {
            Ok(info) => info,
            Err(status)
                if status.code() == tonic::Code::NotFound
                    && self.upstream.token_accepted()
                    && self.pinned(id).await?.is_some() =>
            {
                return Err(self.retire(id, RetireReason::Deleted).await);
            }
            Err(status) => return Err(status),
        };
        if info.closed {
            if self.pinned(id).await?.is_some() {
                return Err(self.retire(id, RetireReason::Closed).await);
            }
            return Err(Status::failed_precondition(format!(
                "collection {id} is closed at the aggregator: it takes no more reports"
            )));
        }
        match self.admit_info(id, info).await {
            Ok(admitted) => {
                self.set_held(id, None);
                Ok(admitted)
            }
            Err(status) => {
                if status.code() == tonic::Code::FailedPrecondition {
                    self.set_held(id, Some(status.message()));
                }
                Err(status)
            }
        }
    }

    async fn admit_info(&self, id: &str, info: Arc<CollectionInfo>) -> Result<Admitted, Status> {
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
        let keys = self.pinned_keys(id, &info.keys).await?;
        Ok(Admitted {
            info,
            pinned,
            rule,
            keys,
        })
    }

    /// The published keys with their pinned bytes: pins the bytes of key ids seen for
    /// the first time; FAILED_PRECONDITION (the collection held) when the aggregator
    /// answers other bytes for a pinned id. Keys of another length are left to the
    /// device, which refuses them.
    async fn pinned_keys(
        &self,
        id: &str,
        published: &[HpkePublicKey],
    ) -> Result<Vec<HpkePublicKey>, Status> {
        let candidates: Vec<(u32, [u8; 32])> = published
            .iter()
            .filter(|k| {
                matches!(
                    HpkeKeyState::try_from(k.state),
                    Ok(HpkeKeyState::Active | HpkeKeyState::Pending)
                )
            })
            .filter_map(|k| Some((k.key_id, k.public_key.as_slice().try_into().ok()?)))
            .collect();
        let mut pinned = Vec::with_capacity(candidates.len());
        let mut missing = Vec::new();
        {
            let cache = self.key_pins.lock().unwrap_or_else(|p| p.into_inner());
            for &(key_id, bytes) in &candidates {
                match cache.get(&(id.to_string(), key_id)) {
                    Some(first) => pinned.push((key_id, *first)),
                    None => missing.push((key_id, bytes)),
                }
            }
        }
        if !missing.is_empty() {
            // First sight here (or since a restart): the store keeps the first bytes.
            let stored = self
                .store
                .pin_keys(id, missing)
                .await
                .map_err(store_status)?;
            let mut cache = self.key_pins.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= 100_000 {
                cache.clear();
            }
            for &(key_id, first) in &stored {
                cache.insert((id.to_string(), key_id), first);
            }
            pinned.extend(stored);
        }
        for &(key_id, bytes) in &candidates {
            let first = pinned
                .iter()
                .find(|(k, _)| *k == key_id)
                .map(|(_, b)| *b)
                .unwrap_or(bytes);
            if first != bytes {
                let conflict = (id.to_string(), key_id, bytes);
                let _writing = self.conflict_writes.lock().await;
                let new = !self
                    .conflicts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains(&conflict);
                if new {
                    tracing::error!(
                        collection = id,
                        key_id,
                        "the aggregator answered other public-key bytes for a key id the relay pinned: a key partition would split the batch; holding the collection (no report taken, no batch forwarded)"
                    );
                    self.store
                        .record_key_conflict(id, (self.clock)())
                        .await
                        .map_err(store_status)?;
                    metrics::counter!("ldpcov_relay_key_conflicts_total", "collection" => id.to_string())
                        .increment(1);
                    // Counted once recorded: a failed write is retried by the next call.
                    self.conflicts
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(conflict);
                }
                return Err(Status::failed_precondition(format!(
                    "collection {id} is held: the aggregator now answers other public-key bytes for key id {key_id} than the relay pinned at first sight; the relay takes no report and forwards no batch of it while this lasts"
                )));
            }
        }
        Ok(published
            .iter()
            .filter_map(|k| {
                let (_, first) = pinned.iter().find(|(key_id, _)| *key_id == k.key_id)?;
                let mut k = k.clone();
                k.public_key = first.to_vec();
                Some(k)
            })
            .collect())
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
        // δ at the batch floor: δ·n ≥ 1 lets a mechanism publish a report outright.
        let n = settings.min_batch_size.max(self.floor.min_batch_size);
        if settings.central_delta * n as f64 >= 1.0 {
            return Err(Status::failed_precondition(format!(
                "collection {id} asks for central δ = {:e} at batches of {n} reports: δ·n ≥ 1, a guarantee that allows a report to be revealed; the relay does not serve it",
                settings.central_delta
            )));
        }
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
