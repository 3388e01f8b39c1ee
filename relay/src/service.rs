//! The `ldpcov.v1.Relay` service: device authentication, validation and the store.
//!
//! `SubmitSealedReport`, in order (every check before the store is touched):
//!
//! 1. the device token (`authorization: Bearer v2.<device id>.<expires>.<MAC>`, not
//!    expired, its device not revoked), else UNAUTHENTICATED — checked from the
//!    call's headers before the call takes a slot of the server's global limit
//!    ([`RelayService::check_headers`]), and again here;
//! 2. the request's shape: a valid collection id, a 16-byte submission id, the
//!    relay's layer (`outer`) with a 32-byte `enc` and a ciphertext of at least the
//!    AEAD tag, else INVALID_ARGUMENT (a report without the layer — an older client's
//!    — is refused so);
//! 3. the collection at the aggregator, admitted by the [`Gate`]: NOT_FOUND passed
//!    through, FAILED_PRECONDITION when it is not shuffled, announces less than the
//!    relay's floor, has δ·n ≥ 1 at it, changed its privacy settings after the relay
//!    pinned them, is held for other key bytes under a pinned key id, or was closed or
//!    deleted at the aggregator (retired), UNAVAILABLE when the aggregator cannot be
//!    reached and the relay has no recent view of the collection (during an outage a
//!    collection it serves is admitted on its last view);
//! 4. the relay's layer opened with the relay's key ([`RelayKey`]): FAILED_PRECONDITION
//!    for another relay key id (the device holds a stale copy), INVALID_ARGUMENT when
//!    it does not open or does not hold a `SealedReport` with a 32-byte `enc` and a
//!    ciphertext of at least the tag;
//! 5. the inner ciphertext's size against the collection's bound (INVALID_ARGUMENT) and
//!    its key id against the collection's active and pending keys
//!    (FAILED_PRECONDITION): the relay refuses what the aggregator would refuse
//!    without reading it;
//! 6. the store: stored (acknowledged once on disk) in the window of its (collection,
//!    key id), `duplicate: true` for the same submission id again (even after its
//!    window became a batch) or the same sealed bytes again, ALREADY_EXISTS for
//!    another report of a device that already reported to the collection, and for
//!    its submission id again with other bytes (the new bytes are not stored),
//!    RESOURCE_EXHAUSTED for a device new to the relay when the window already holds
//!    the relay's cap of new devices (`serve --max-new-devices-per-window`).
//!
//! A request that does not decode is refused INVALID_ARGUMENT, one larger than the
//! server's message limit RESOURCE_EXHAUSTED (by the server, before the handler).
//!
//! `GetCollection` (a device token) answers the relay's pinned copy of the
//! collection's parameters with the keys of its current view as pinned (each key id's
//! first bytes), the relay's own key (`shuffle.relay_key`), the relay's effective
//! floor as `shuffle.min_batch_size` and the central ε the relay computes at it
//! (`ldpcov_accounting::amplification::shuffled_epsilon`). Everything a device of a
//! shuffled collection needs comes from here: it never calls the aggregator.
//!
//! `GetRelayStatus` needs the relay's admin token; without one configured it is
//! refused (PERMISSION_DENIED).
//!
//! Nothing here logs a token, a device id or a report.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ldpcov_proto::v1::relay_server::Relay;
use ldpcov_proto::v1::{
    CollectionParams, GetCollectionRequest, HpkeKeyState, HpkePublicKey, RelayReport,
    RelayReportResponse, RelayStatus, RelayStatusRequest, SealedReport,
};
use ldpcov_seal::{OpenError, RelayKey};
use prost::Message;
use tonic::codegen::http;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::clock::{Clock, system_clock};
use crate::device_limits::{DeviceLimiter, DeviceLimits};
use crate::gate::Gate;
use crate::store::{RelayStore, StoreError, Submission, SubmitOutcome};
use crate::token::{DeviceId, DeviceTokenIssuer, Secret};
use crate::upstream::KEY_REFRESH_AGE;

/// Bytes of an HPKE `enc` (an X25519 public key).
pub const ENC_LEN: usize = 32;
/// Bytes of the AEAD tag every ciphertext ends with.
pub const TAG_LEN: usize = 16;

/// Bytes the relay's layer may add to the inner report's ciphertext bound: the
/// `SealedReport` framing (key id, `enc`, lengths) and the layer's AEAD tag.
pub const OUTER_OVERHEAD: usize = 64;

/// The relay's gRPC service. Cloning shares everything.
#[derive(Clone)]
pub struct RelayService {
    store: Arc<RelayStore>,
    gate: Gate,
    issuer: DeviceTokenIssuer,
    admin: Option<Secret>,
    clock: Clock,
    layer_key: Arc<RelayKey>,
    /// Most reports from new devices per window (0: no cap).
    new_device_cap: u64,
    /// Central ε by (ε0, floor, δ) bits: computed once each.
    epsilons: Arc<Mutex<HashMap<EpsilonKey, f64>>>,
    /// Each device's calls in flight and call rate (none: unlimited).
    device_limiter: Option<DeviceLimiter>,
}

/// The bits of (ε0, batch floor, central δ) a central ε was computed for.
type EpsilonKey = (u64, u64, u64);

impl std::fmt::Debug for RelayService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayService").finish_non_exhaustive()
    }
}

fn bearer(metadata: &MetadataMap) -> Option<&str> {
    metadata
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn bearer_header(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// The calls that need a device token.
const DEVICE_PATHS: [&str; 2] = [
    "/ldpcov.v1.Relay/SubmitSealedReport",
    "/ldpcov.v1.Relay/GetCollection",
];
/// The call that needs the admin token.
const ADMIN_PATH: &str = "/ldpcov.v1.Relay/GetRelayStatus";

fn refused(reason: &'static str, status: Status) -> Status {
    metrics::counter!("ldpcov_relay_reports_refused_total", "reason" => reason).increment(1);
    status
}

fn lookup_reason(s: &Status) -> &'static str {
    match s.code() {
        tonic::Code::NotFound => "not_found",
        tonic::Code::FailedPrecondition if s.message().contains("after the relay pinned") => {
            "settings_changed"
        }
        tonic::Code::FailedPrecondition if s.message().contains("this relay's") => "below_floor",
        tonic::Code::FailedPrecondition if s.message().contains("δ·n") => "delta_too_large",
        tonic::Code::FailedPrecondition if s.message().contains("is held") => "key_conflict",
        tonic::Code::FailedPrecondition if s.message().contains("takes no more reports") => {
            "retired"
        }
        tonic::Code::FailedPrecondition => "not_shuffled",
        _ => "aggregator_unavailable",
    }
}

fn store_status(e: StoreError) -> Status {
    tracing::error!(error = %e, "relay store failed");
    Status::unavailable("the relay cannot store reports right now; retry later")
}

impl RelayService {
    /// The service over `store`, checking device tokens with `issuer`, admitting
    /// collections with `gate`, opening the relay's layer with `layer_key`; `admin`
    /// guards `GetRelayStatus`.
    pub fn new(
        store: Arc<RelayStore>,
        gate: Gate,
        issuer: DeviceTokenIssuer,
        admin: Option<Secret>,
        layer_key: Arc<RelayKey>,
    ) -> Self {
        RelayService {
            store,
            gate,
            issuer,
            admin,
            clock: system_clock(),
            layer_key,
            new_device_cap: 0,
            epsilons: Arc::default(),
            device_limiter: None,
        }
    }

    /// Limits each device token's calls in flight and calls per second
    /// ([`DeviceLimiter`]), checked with the token from the call's headers.
    pub fn with_device_limits(mut self, limits: DeviceLimits) -> Self {
        self.device_limiter = Some(DeviceLimiter::new(limits));
        self
    }

    /// Caps the reports from devices new to the relay in one window of a collection
    /// (0: no cap; see [`RelayStore`]'s module docs).
    pub fn with_new_device_cap(mut self, cap: u64) -> Self {
        self.new_device_cap = cap;
        self
    }

    /// The relay's own key as devices get it.
    fn relay_key_message(&self) -> HpkePublicKey {
        let c = self.layer_key.public_config();
        HpkePublicKey {
            key_id: c.key_id,
            kem_id: u32::from(c.kem_id),
            kdf_id: u32::from(c.kdf_id),
            aead_id: u32::from(c.aead_id),
            public_key: c.public_key.to_vec(),
            state: HpkeKeyState::Active as i32,
            not_before: c.not_before,
            not_after: c.not_after,
            active_until: c.active_until,
        }
    }

    /// The central ε of `eps0` reports in batches of `n` at `delta`, cached.
    async fn central_epsilon(&self, eps0: f64, n: u64, delta: f64) -> Result<f64, Status> {
        let key = (eps0.to_bits(), n, delta.to_bits());
        if let Some(e) = self
            .epsilons
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(*e);
        }
        let epsilon = tokio::task::spawn_blocking(move || {
            ldpcov_accounting::amplification::shuffled_epsilon(eps0, n, delta)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| {
            Status::failed_precondition(format!("no central epsilon for this collection: {e}"))
        })?;
        let mut cache = self.epsilons.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= 10_000 {
            cache.clear();
        }
        cache.insert(key, epsilon);
        Ok(epsilon)
    }

    /// Replaces the clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The check the server runs on every call's headers before the call takes a slot
    /// of its global limit: a device token for `SubmitSealedReport` and
    /// `GetCollection`, then the device's limits (RESOURCE_EXHAUSTED over them; the
    /// returned guard holds its call in flight), the admin token for
    /// `GetRelayStatus` (refused as the handlers would refuse them: UNAUTHENTICATED,
    /// or PERMISSION_DENIED without an admin token configured); every other path
    /// (health, reflection) passes.
    pub fn check_headers(
        &self,
        path: &str,
        headers: &http::HeaderMap,
    ) -> Result<Option<ldpcov_serve::HeldGuard>, Status> {
        if DEVICE_PATHS.contains(&path) {
            let device = self.device_from(bearer_header(headers))?;
            match &self.device_limiter {
                Some(limiter) => {
                    let in_flight = limiter.admit(&device).map_err(|s| {
                        if path == DEVICE_PATHS[0] {
                            refused("device_limit", s)
                        } else {
                            s
                        }
                    })?;
                    Ok(Some(Box::new(in_flight)))
                }
                None => Ok(None),
            }
        } else if path == ADMIN_PATH {
            self.admin_from(bearer_header(headers)).map(|()| None)
        } else {
            Ok(None)
        }
    }

    fn admin_from(&self, token: Option<&str>) -> Result<(), Status> {
        let Some(admin) = &self.admin else {
            return Err(Status::permission_denied(
                "this relay has no admin token: start it with --admin-token-file",
            ));
        };
        if !token.is_some_and(|t| admin.matches(t)) {
            return Err(Status::unauthenticated("missing or invalid admin token"));
        }
        Ok(())
    }

    /// Opens the relay's layer of a report of collection `id`: the inner sealed report.
    fn open_layer(&self, id: &str, outer: SealedReport) -> Result<SealedReport, Status> {
        let key_id = outer.key_id;
        let outer = ldpcov_seal::SealedReport {
            key_id,
            enc: outer.enc,
            ciphertext: outer.ciphertext,
        };
        let inner = match self.layer_key.open_owned(id, outer) {
            Ok(inner) => inner,
            Err(OpenError::UnknownKey { .. }) => {
                return Err(refused(
                    "relay_key",
                    Status::failed_precondition(format!(
                        "the report is sealed to relay key id {key_id}, this relay's is {}: fetch the collection from the relay again and reseal",
                        self.layer_key.key_id()
                    )),
                ));
            }
            Err(_) => {
                return Err(refused(
                    "relay_layer",
                    Status::invalid_argument(
                        "the relay's layer does not open (sealed for another collection, or damaged)",
                    ),
                ));
            }
        };
        SealedReport::decode(inner.as_slice()).map_err(|_| {
            refused(
                "relay_layer",
                Status::invalid_argument("the relay's layer does not hold a sealed report"),
            )
        })
    }

    fn device(&self, metadata: &MetadataMap) -> Result<DeviceId, Status> {
        self.device_from(bearer(metadata))
    }

    fn device_from(&self, token: Option<&str>) -> Result<DeviceId, Status> {
        let now = (self.clock)();
        token
            .and_then(|t| self.issuer.verify_at(t, now))
            .ok_or_else(|| {
                refused(
                    "unauthenticated",
                    Status::unauthenticated(
                        "missing, invalid, expired or revoked device token (authorization: Bearer v2.<device id>.<expires>.<mac>): ask the relay operator's token issuer for a new one",
                    ),
                )
            })
    }
}

#[tonic::async_trait]
impl Relay for RelayService {
    async fn submit_sealed_report(
        &self,
        request: Request<RelayReport>,
    ) -> Result<Response<RelayReportResponse>, Status> {
        let device = self.device(request.metadata())?;
        let report = request.into_inner();
        let bad = |why: String| refused("invalid_argument", Status::invalid_argument(why));
        let id = report.collection_id;
        ldpcov_privacy::collection::validate_collection_id(&id).map_err(|e| bad(e.to_string()))?;
        let submission_id: [u8; 16] = report.submission_id.as_slice().try_into().map_err(|_| {
            bad(format!(
                "submission_id must be 16 bytes, got {}",
                report.submission_id.len()
            ))
        })?;
        let outer = report.outer.ok_or_else(|| {
            bad("the report has no relay layer (outer): seal it to the relay's key from Relay/GetCollection (an older client sends the sealed report bare; update it)".into())
        })?;
        if outer.enc.len() != ENC_LEN {
            return Err(bad(format!(
                "outer.enc must be {ENC_LEN} bytes, got {}",
                outer.enc.len()
            )));
        }
        if outer.ciphertext.len() < TAG_LEN {
            return Err(bad(format!(
                "outer.ciphertext must be at least {TAG_LEN} bytes (the AEAD tag), got {}",
                outer.ciphertext.len()
            )));
        }
        let refuse = |s: Status| refused(lookup_reason(&s), s);
        let mut admitted = self.gate.admit(&id, None).await.map_err(refuse)?;
        let mut info = Arc::clone(&admitted.info);
        // The layer adds the inner report's framing (key id, enc) and its own tag.
        if outer.ciphertext.len() > info.max_ciphertext + OUTER_OVERHEAD {
            return Err(bad(format!(
                "outer.ciphertext of {} bytes is larger than a report of collection {id} can be ({} bytes)",
                outer.ciphertext.len(),
                info.max_ciphertext + OUTER_OVERHEAD
            )));
        }
        let sealed = self.open_layer(&id, outer)?;
        if sealed.enc.len() != ENC_LEN {
            return Err(bad(format!(
                "the inner sealed report's enc must be {ENC_LEN} bytes, got {}",
                sealed.enc.len()
            )));
        }
        if sealed.ciphertext.len() < TAG_LEN {
            return Err(bad(format!(
                "the inner sealed report's ciphertext must be at least {TAG_LEN} bytes (the AEAD tag), got {}",
                sealed.ciphertext.len()
            )));
        }
        if sealed.ciphertext.len() > info.max_ciphertext {
            return Err(bad(format!(
                "sealed.ciphertext of {} bytes is larger than a report of collection {id} can be ({} bytes)",
                sealed.ciphertext.len(),
                info.max_ciphertext
            )));
        }
        let now = (self.clock)();
        if !info.accepts_key(sealed.key_id, now) {
            // The keys rotate: look again before refusing.
            admitted = self
                .gate
                .admit(&id, Some(KEY_REFRESH_AGE))
                .await
                .map_err(refuse)?;
            info = Arc::clone(&admitted.info);
            if !info.accepts_key(sealed.key_id, now) {
                return Err(refused(
                    "key_id",
                    Status::failed_precondition(format!(
                        "key id {} is not an active or pending key of collection {id}: fetch the collection's keys again and reseal",
                        sealed.key_id
                    )),
                ));
            }
        }
        let outcome = self
            .store
            .submit(Submission {
                collection_id: id.clone(),
                device,
                submission_id,
                sealed,
                now,
                rule: admitted.rule,
                new_device_cap: self.new_device_cap,
            })
            .await
            .map_err(|e| refused("store", store_status(e)))?;
        match outcome {
            SubmitOutcome::Stored => {
                metrics::counter!("ldpcov_relay_reports_stored_total", "collection" => id)
                    .increment(1);
                Ok(Response::new(RelayReportResponse { duplicate: false }))
            }
            SubmitOutcome::Duplicate => {
                metrics::counter!("ldpcov_relay_reports_duplicate_total", "collection" => id)
                    .increment(1);
                Ok(Response::new(RelayReportResponse { duplicate: true }))
            }
            SubmitOutcome::SubmissionIdReused => Err(refused(
                "submission_id_reused",
                Status::already_exists(format!(
                    "this device already stored other bytes under this submission id in collection {id}: a resend must carry the same sealed report (the new bytes were not stored)"
                )),
            )),
            SubmitOutcome::NewDeviceCapReached => Err(refused(
                "new_device_cap",
                Status::resource_exhausted(format!(
                    "collection {id}'s current window already holds this relay's cap of {} reports from devices new to the relay: try again in a later window",
                    self.new_device_cap
                )),
            )),
            SubmitOutcome::Retired => Err(refused(
                "retired",
                match self.gate.retired(&id) {
                    Some(_) => Status::failed_precondition(format!(
                        "collection {id} is closed or deleted at the aggregator: this relay takes no more reports of it"
                    )),
                    None => Status::failed_precondition(format!(
                        "collection {id} was retired at this relay: it takes no more reports of it"
                    )),
                },
            )),
            SubmitOutcome::DeviceAlreadyReported => Err(refused(
                "already_reported",
                Status::already_exists(format!(
                    "this device already sent a report to collection {id}: a device sends one report per shuffled collection"
                )),
            )),
        }
    }

    async fn get_collection(
        &self,
        request: Request<GetCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        self.device(request.metadata())?;
        let id = request.into_inner().collection_id;
        ldpcov_privacy::collection::validate_collection_id(&id)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let admitted = self.gate.admit(&id, None).await?;
        let mut params = admitted
            .pinned
            .params()
            .map_err(|e| store_status(e.into()))?;
        let central_epsilon = self
            .central_epsilon(
                admitted.pinned.epsilon,
                admitted.rule.min_batch_size,
                admitted.pinned.central_delta,
            )
            .await?;
        let shuffle = params.shuffle.get_or_insert_default();
        shuffle.local_epsilon = admitted.pinned.epsilon;
        shuffle.min_batch_size = admitted.rule.min_batch_size;
        shuffle.central_delta = admitted.pinned.central_delta;
        shuffle.central_epsilon = central_epsilon;
        shuffle.keys = admitted.keys;
        shuffle.relay_key = Some(self.relay_key_message());
        Ok(Response::new(params))
    }

    async fn get_relay_status(
        &self,
        request: Request<RelayStatusRequest>,
    ) -> Result<Response<RelayStatus>, Status> {
        self.admin_from(bearer(request.metadata()))?;
        let id = request.into_inner().collection_id;
        ldpcov_privacy::collection::validate_collection_id(&id)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let store = Arc::clone(&self.store);
        let status = tokio::task::spawn_blocking(move || store.status(&id))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(store_status)?;
        let mut status = status;
        status.new_device_cap = self.new_device_cap;
        status.held = self.gate.held(&status.collection_id).unwrap_or_default();
        status.aggregator = self.gate.upstream().reach().describe();
        Ok(Response::new(status))
    }
}
