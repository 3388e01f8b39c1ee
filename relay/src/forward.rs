//! The background task: every check interval it turns due windows into batches
//! ([`RelayStore::form_batches`], never below the relay's floor) and sends every
//! stored batch to the aggregator ([`Upstream::send_batch`]), oldest first.
//!
//! Before forming a collection's batch and before each attempt at sending one, it
//! fetches the collection's parameters afresh and admits them through the [`Gate`]: a
//! collection that changed its privacy settings after the relay pinned them (or no
//! longer meets the relay's floor) keeps its window open and its batches stored, not
//! forwarded, while the change persists.
//!
//! A batch the aggregator acknowledges (OK, with accepted + duplicates + refused =
//! batch size) is deleted durably; its refused reports are logged by code and counted.
//! A batch that fails stays and is sent again — same id, same order — after an
//! exponential backoff from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`] (without jitter:
//! `ldpcov_proto::retry::Backoff`, the device client's policy too), per batch, so that
//! one collection's failures delay no other. A report is never sent alone and a batch
//! is never dropped before the aggregator acknowledged it; a batch sent again after a
//! crash counts nothing twice, since the aggregator counts each report id once.
//!
//! Once the aggregator accepts the relay again after it could not be reached or
//! refused it ([`Monitor::accepting`](crate::Monitor::accepting)), the forwarder
//! checks at once and the batches that failed for want of it are sent at once: their
//! backoff is reset.
//!
//! **A collection closed or deleted at the aggregator is retired** (the [`Gate`] finds
//! it on the fresh lookup before a window is formed or a batch sent): its windows and
//! batches are dropped with a count in the relay's status, and nothing else stops.
//! The relay's health is the [`Monitor`](crate::Monitor)'s: a collection's refusal is
//! never the relay's.
//!
//! Metrics (set every tick): `ldpcov_relay_pending_batches`,
//! `ldpcov_relay_pending_batch_reports`, `ldpcov_relay_oldest_pending_batch_age_seconds`
//! (how long the oldest stored batch, or the longest-due window not yet formed into
//! one, has waited; 0 without either), and the counter
//! `ldpcov_relay_upstream_failures_total{reason}` of failed calls to the aggregator by
//! reason (`unauthenticated`, `permission_denied`, `failed_precondition`,
//! `unavailable`, `deadline_exceeded`, `other`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ldpcov_proto::retry::Backoff;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::gate::Gate;
use crate::store::{PendingBatch, RelayStore};
use crate::upstream::Upstream;

/// The first wait before a failed batch is sent again.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts at a batch.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Longest one batch call may take.
pub const BATCH_TIMEOUT: Duration = Duration::from_secs(300);

struct Retry {
    next: Instant,
    backoff: Duration,
    /// The attempt failed for want of the aggregator (unreachable, or the collection
    /// could not be looked up): reset once it answers again.
    unreachable: bool,
}

/// The reason label of a failed call to the aggregator.
fn failure_reason(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Unauthenticated => "unauthenticated",
        tonic::Code::PermissionDenied => "permission_denied",
        tonic::Code::FailedPrecondition => "failed_precondition",
        tonic::Code::Unavailable => "unavailable",
        tonic::Code::DeadlineExceeded => "deadline_exceeded",
        _ => "other",
    }
}

/// The forwarder's state: when each failed batch may be tried again.
pub struct Forwarder {
    store: Arc<RelayStore>,
    gate: Gate,
    upstream: Upstream,
    clock: Clock,
    first_backoff: Duration,
    retries: HashMap<u64, Retry>,
    /// True while the aggregator accepts the relay (the [`crate::Monitor`]'s).
    accepting: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder").finish_non_exhaustive()
    }
}

impl Forwarder {
    /// A forwarder of `store`'s batches to the aggregator of `gate`, reading the time
    /// from `clock`.
    pub fn new(store: Arc<RelayStore>, gate: Gate, clock: Clock) -> Self {
        Forwarder {
            store,
            upstream: gate.upstream().clone(),
            gate,
            clock,
            first_backoff: FIRST_BACKOFF,
            retries: HashMap::new(),
            accepting: None,
        }
    }

    /// Wakes the forwarder when the aggregator accepts the relay again (`accepting`
    /// turns true): it checks at once and sends the batches that waited for it.
    pub fn with_accepting(mut self, accepting: watch::Receiver<bool>) -> Self {
        self.accepting = Some(accepting);
        self
    }

    /// Sets the pending-batch gauges.
    async fn export_pending(&self) {
        let store = Arc::clone(&self.store);
        let now = (self.clock)();
        let floor = self.gate.floor();
        let summary = tokio::task::spawn_blocking(move || {
            Ok::<_, crate::StoreError>((
                store.pending_summary()?,
                store.oldest_due_window(now, floor)?,
            ))
        })
        .await;
        if let Ok(Ok(((count, reports, oldest), due))) = summary {
            metrics::gauge!("ldpcov_relay_pending_batches").set(count as f64);
            metrics::gauge!("ldpcov_relay_pending_batch_reports").set(reports as f64);
            // A window due but not formed (its collection could not be admitted: the
            // aggregator unreachable) waits as a batch would.
            let age = [oldest, due]
                .into_iter()
                .flatten()
                .map(|since| now.saturating_sub(since))
                .max()
                .unwrap_or(0);
            metrics::gauge!("ldpcov_relay_oldest_pending_batch_age_seconds").set(age as f64);
        }
    }

    /// Replaces [`FIRST_BACKOFF`] (tests).
    pub fn with_first_backoff(mut self, backoff: Duration) -> Self {
        self.first_backoff = backoff;
        self
    }

    /// Runs [`tick`](Self::tick) every `interval` until `shutdown` resolves.
    pub async fn run(
        mut self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut every = tokio::time::interval(interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        let mut accepting = self.accepting.clone();
        loop {
            let back = async {
                match accepting.as_mut() {
                    Some(rx) => {
                        if rx.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                        *rx.borrow_and_update()
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = every.tick() => { self.tick().await; }
                true = back => {
                    self.resume();
                    self.tick().await;
                }
            }
        }
    }

    /// Forms the due batches, then sends every stored batch whose backoff has passed.
    /// Returns how many batches the aggregator acknowledged.
    pub async fn tick(&mut self) -> usize {
        let now = (self.clock)();
        let floor = self.gate.floor();
        let store = Arc::clone(&self.store);
        let due = match tokio::task::spawn_blocking(move || store.due_collections(now, floor)).await
        {
            Ok(Ok(due)) => due,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot list the due windows");
                Vec::new()
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot list the due windows");
                Vec::new()
            }
        };
        // Every collection with an open window is looked at on its cached view (one
        // lookup per collection per view TTL): one closed or deleted at the
        // aggregator is retired even while no device calls and its window is not due.
        let store = Arc::clone(&self.store);
        if let Ok(Ok(open)) = tokio::task::spawn_blocking(move || store.window_collections()).await
        {
            for id in open {
                let _ = self.gate.admit(&id, None).await;
            }
        }
        // Admitted now, on the aggregator's current answer: those whose settings
        // changed (or that are unreachable) keep their windows open.
        let mut admitted: HashMap<String, bool> = HashMap::new();
        let mut allowed = Vec::new();
        for id in due {
            if self.admit(&id, &mut admitted).await {
                allowed.push(id);
            }
        }
        let formed = if allowed.is_empty() {
            Ok(Vec::new())
        } else {
            self.store.form_batches(now, floor, Some(allowed)).await
        };
        match formed {
            Ok(formed) => {
                for b in &formed {
                    let new_devices = self
                        .store
                        .batch_new_devices(&b.collection_id, b.seq)
                        .ok()
                        .flatten()
                        .unwrap_or(0);
                    tracing::info!(collection = %b.collection_id, reports = b.size, new_devices, "batch formed");
                    metrics::counter!("ldpcov_relay_batches_formed_total", "collection" => b.collection_id.clone())
                        .increment(1);
                    metrics::gauge!("ldpcov_relay_last_batch_new_device_share", "collection" => b.collection_id.clone())
                        .set(new_devices as f64 / b.size.max(1) as f64);
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot form batches"),
        }
        let store = Arc::clone(&self.store);
        let pending = match tokio::task::spawn_blocking(move || store.pending_batches()).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot list the stored batches");
                return 0;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot list the stored batches");
                return 0;
            }
        };
        self.retries
            .retain(|seq, _| pending.iter().any(|b| b.seq == *seq));
        let mut sent = 0;
        for batch in pending {
            if self
                .retries
                .get(&batch.seq)
                .is_some_and(|r| Instant::now() < r.next)
            {
                continue;
            }
            let ok = self.admit(&batch.collection_id, &mut admitted).await;
            if !ok {
                // Backed off like a failed call, so logged at that pace.
                tracing::warn!(
                    collection = %batch.collection_id,
                    "cannot forward a batch; will retry: the aggregator cannot be reached, or the collection is refused now"
                );
            }
            let outcome = if ok {
                self.forward(&batch).await
            } else {
                Outcome::Unreachable
            };
            if outcome == Outcome::Acknowledged {
                self.retries.remove(&batch.seq);
                sent += 1;
            } else {
                let backoff = Backoff {
                    first: self.first_backoff,
                    max: MAX_BACKOFF,
                    jitter: false,
                }
                .next(self.retries.get(&batch.seq).map(|r| r.backoff));
                self.retries.insert(
                    batch.seq,
                    Retry {
                        next: Instant::now() + backoff,
                        backoff,
                        unreachable: outcome == Outcome::Unreachable,
                    },
                );
            }
        }
        self.export_pending().await;
        sent
    }

    /// The aggregator accepts the relay again: the batches that failed for want of it
    /// are due now.
    fn resume(&mut self) {
        let now = Instant::now();
        for retry in self.retries.values_mut() {
            if retry.unreachable {
                retry.next = now;
                retry.backoff = Duration::ZERO;
            }
        }
    }

    /// Whether collection `id` is admitted on a fresh answer of the aggregator (once
    /// per tick: `seen` remembers).
    async fn admit(&mut self, id: &str, seen: &mut HashMap<String, bool>) -> bool {
        if let Some(ok) = seen.get(id) {
            return *ok;
        }
        let ok = match self.gate.admit(id, Some(Duration::ZERO)).await {
            Ok(_) => true,
            Err(status) => {
                // The gate's own refusals (NOT_FOUND, FAILED_PRECONDITION) are about
                // the collection; the others come from the aggregator.
                if !matches!(
                    status.code(),
                    tonic::Code::NotFound | tonic::Code::FailedPrecondition
                ) {
                    metrics::counter!("ldpcov_relay_upstream_failures_total", "reason" => failure_reason(status.code()))
                        .increment(1);
                }
                // The gate logged a change of settings (once, as an ERROR); an
                // unreachable aggregator shows in the batch calls' failures.
                tracing::debug!(
                    collection = %id,
                    code = ?status.code(),
                    message = status.message(),
                    "not forming or forwarding a collection's batches now"
                );
                false
            }
        };
        seen.insert(id.to_string(), ok);
        ok
    }

    /// One attempt at one batch.
    async fn forward(&mut self, batch: &PendingBatch) -> Outcome {
        let store = Arc::clone(&self.store);
        let seq = batch.seq;
        let reports = match tokio::task::spawn_blocking(move || store.batch_reports(seq)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot read a stored batch");
                return Outcome::Failed;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read a stored batch");
                return Outcome::Failed;
            }
        };
        if reports.len() as u64 != batch.size {
            tracing::error!(
                collection = %batch.collection_id,
                stored = reports.len(),
                size = batch.size,
                "a stored batch has lost reports; not sending it"
            );
            return Outcome::Failed;
        }
        let collection = batch.collection_id.clone();
        match self
            .upstream
            .send_batch(batch, reports, BATCH_TIMEOUT)
            .await
        {
            Ok(response) => {
                let refused = response.refused.len() as u64;
                let total = response.accepted + response.duplicates + refused;
                if total != batch.size {
                    tracing::warn!(
                        collection = %collection,
                        size = batch.size,
                        total,
                        "the aggregator's answer does not add up to the batch size"
                    );
                }
                let mut codes: HashMap<i32, u64> = HashMap::new();
                for r in &response.refused {
                    *codes.entry(r.code).or_default() += 1;
                }
                for (code, n) in codes {
                    let name = format!("{:?}", tonic::Code::from_i32(code));
                    tracing::warn!(collection = %collection, code = %name, reports = n, "the aggregator refused reports of a batch");
                    metrics::counter!("ldpcov_relay_reports_refused_by_aggregator_total", "collection" => collection.clone(), "code" => name)
                        .increment(n);
                }
                match self.store.forwarded(batch.seq).await {
                    Ok(_) => {
                        tracing::info!(
                            collection = %collection,
                            reports = batch.size,
                            accepted = response.accepted,
                            duplicates = response.duplicates,
                            refused,
                            "batch forwarded"
                        );
                        metrics::counter!("ldpcov_relay_batches_forwarded_total", "collection" => collection.clone())
                            .increment(1);
                        metrics::counter!("ldpcov_relay_reports_forwarded_total", "collection" => collection)
                            .increment(batch.size);
                        Outcome::Acknowledged
                    }
                    Err(e) => {
                        // Sent again later: the aggregator counts nothing twice.
                        tracing::error!(error = %e, "cannot delete a forwarded batch");
                        Outcome::Failed
                    }
                }
            }
            Err(status) => {
                tracing::warn!(
                    collection = %collection,
                    code = ?status.code(),
                    message = status.message(),
                    "cannot forward a batch; will retry"
                );
                metrics::counter!("ldpcov_relay_forward_failures_total", "collection" => collection)
                    .increment(1);
                metrics::counter!("ldpcov_relay_upstream_failures_total", "reason" => failure_reason(status.code()))
                    .increment(1);
                if matches!(
                    status.code(),
                    tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
                ) {
                    Outcome::Unreachable
                } else {
                    Outcome::Failed
                }
            }
        }
    }
}

/// What became of one attempt at a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Acknowledged and deleted.
    Acknowledged,
    /// The aggregator could not be reached (or the collection not looked up).
    Unreachable,
    /// Refused, or the relay failed: retried after the backoff.
    Failed,
}
