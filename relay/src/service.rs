//! The `ldpcov.v1.Relay` service: device authentication, validation and the store.
//!
//! `SubmitSealedReport`, in order (every check before the store is touched):
//!
//! 1. the device token (`authorization: Bearer v1.<device id>.<MAC>`), else
//!    UNAUTHENTICATED;
//! 2. the request's shape: a valid collection id, a 16-byte submission id, a sealed
//!    report with a 32-byte `enc` and a ciphertext of at least the AEAD tag, else
//!    INVALID_ARGUMENT;
//! 3. the collection at the aggregator ([`Upstream::collection`]): NOT_FOUND passed
//!    through, FAILED_PRECONDITION when it is not shuffled, UNAVAILABLE when the
//!    aggregator cannot be reached;
//! 4. the ciphertext's size against the collection's bound (INVALID_ARGUMENT) and its
//!    key id against the collection's active and pending keys (FAILED_PRECONDITION):
//!    the relay refuses what the aggregator would refuse without reading it;
//! 5. the store: stored (acknowledged once on disk), `duplicate: true` for the same
//!    submission id again, ALREADY_EXISTS for another report of the same device in
//!    the same window.
//!
//! `GetRelayStatus` needs the relay's admin token; without one configured it is
//! refused (PERMISSION_DENIED).
//!
//! Nothing here logs a token, a device id or a report.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ldpcov_proto::v1::relay_server::Relay;
use ldpcov_proto::v1::{RelayReport, RelayReportResponse, RelayStatus, RelayStatusRequest};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::store::{RelayStore, StoreError, Submission, SubmitOutcome};
use crate::token::{DeviceId, DeviceTokenIssuer, Secret};
use crate::upstream::{KEY_REFRESH_AGE, Upstream};

/// Bytes of an HPKE `enc` (an X25519 public key).
pub const ENC_LEN: usize = 32;
/// Bytes of the AEAD tag every ciphertext ends with.
pub const TAG_LEN: usize = 16;

/// The source of "now" (unix seconds); tests move it.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

/// The relay's gRPC service. Cloning shares everything.
#[derive(Clone)]
pub struct RelayService {
    store: Arc<RelayStore>,
    upstream: Upstream,
    issuer: DeviceTokenIssuer,
    admin: Option<Secret>,
    clock: Clock,
}

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

fn refused(reason: &'static str, status: Status) -> Status {
    metrics::counter!("ldpcov_relay_reports_refused_total", "reason" => reason).increment(1);
    status
}

fn store_status(e: StoreError) -> Status {
    tracing::error!(error = %e, "relay store failed");
    Status::unavailable("the relay cannot store reports right now; retry later")
}

impl RelayService {
    /// The service over `store`, checking device tokens with `issuer`, looking
    /// collections up at `upstream`; `admin` guards `GetRelayStatus`.
    pub fn new(
        store: Arc<RelayStore>,
        upstream: Upstream,
        issuer: DeviceTokenIssuer,
        admin: Option<Secret>,
    ) -> Self {
        RelayService {
            store,
            upstream,
            issuer,
            admin,
            clock: system_clock(),
        }
    }

    /// Replaces the clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    fn device(&self, metadata: &MetadataMap) -> Result<DeviceId, Status> {
        bearer(metadata)
            .and_then(|t| self.issuer.verify(t))
            .ok_or_else(|| {
                refused(
                    "unauthenticated",
                    Status::unauthenticated(
                        "missing or invalid device token (authorization: Bearer v1.<device id>.<mac>)",
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
        let sealed = report
            .sealed
            .ok_or_else(|| bad("the sealed report is missing".into()))?;
        if sealed.enc.len() != ENC_LEN {
            return Err(bad(format!(
                "sealed.enc must be {ENC_LEN} bytes, got {}",
                sealed.enc.len()
            )));
        }
        if sealed.ciphertext.len() < TAG_LEN {
            return Err(bad(format!(
                "sealed.ciphertext must be at least {TAG_LEN} bytes (the AEAD tag), got {}",
                sealed.ciphertext.len()
            )));
        }
        let lookup_reason = |s: Status| {
            let reason = match s.code() {
                tonic::Code::NotFound => "not_found",
                tonic::Code::FailedPrecondition => "not_shuffled",
                _ => "aggregator_unavailable",
            };
            refused(reason, s)
        };
        let mut info = self
            .upstream
            .collection(&id, None)
            .await
            .map_err(lookup_reason)?;
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
            info = self
                .upstream
                .collection(&id, Some(KEY_REFRESH_AGE))
                .await
                .map_err(lookup_reason)?;
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
                rule: info.rule,
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
            SubmitOutcome::DeviceAlreadyReported => Err(refused(
                "already_reported",
                Status::already_exists(format!(
                    "this device already sent a report to collection {id} in the current batch window; send the next one after the window closes"
                )),
            )),
        }
    }

    async fn get_relay_status(
        &self,
        request: Request<RelayStatusRequest>,
    ) -> Result<Response<RelayStatus>, Status> {
        let Some(admin) = &self.admin else {
            return Err(Status::permission_denied(
                "this relay has no admin token: start it with --admin-token-file",
            ));
        };
        if !bearer(request.metadata()).is_some_and(|t| admin.matches(t)) {
            return Err(Status::unauthenticated("missing or invalid admin token"));
        }
        let id = request.into_inner().collection_id;
        ldpcov_privacy::collection::validate_collection_id(&id)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let store = Arc::clone(&self.store);
        let status = tokio::task::spawn_blocking(move || store.status(&id))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(store_status)?;
        Ok(Response::new(status))
    }
}
