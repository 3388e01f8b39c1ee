//! The two-aggregator calls: a device's upload to the leader, the leader's
//! `VerifyShares` to the helper, and the checks of a new two-aggregator collection
//! (`crate::two_aggregator` holds the protocol).

use std::sync::Arc;

use ldpcov_privacy::{Collection, ReportId};
use ldpcov_proto::v1::{
    CollectionParams, GetCollectionRequest, TwoAggregatorReport, UploadTwoAggregatorReportResponse,
    VerifySharesRequest, VerifySharesResponse,
};
use ldpcov_seal::{CollectionKeys, KeySchedule};
use prost::Message;
use tonic::{Request, Status};

use super::{AggregatorService, invalid, store_status};
use crate::auth::Right;
use crate::store::QueuedUpload;
use crate::two_aggregator::{RoundContext, TwoAggregatorRole, helper_verdicts};

/// The helper's HPKE keys rotate daily and stay usable for a week (the shuffled
/// collections' defaults).
const HELPER_KEY_ROTATION_SECONDS: u64 = ldpcov_privacy::shuffle::DEFAULT_KEY_ROTATION_SECONDS;
const HELPER_KEY_GRACE_ROTATIONS: u32 = ldpcov_privacy::shuffle::DEFAULT_KEY_GRACE_ROTATIONS;

impl AggregatorService {
    /// The helper's keys of a two-aggregator collection (`None` unless this daemon is
    /// its helper).
    pub(super) fn helper_keys(&self, c: &Collection) -> Result<Option<CollectionKeys>, Status> {
        if !c.is_two_aggregator()
            || !matches!(
                self.two_aggregator.as_deref(),
                Some(TwoAggregatorRole::Helper { .. })
            )
        {
            return Ok(None);
        }
        let schedule = KeySchedule::new(HELPER_KEY_ROTATION_SECONDS, HELPER_KEY_GRACE_ROTATIONS)
            .map_err(|e| Status::internal(format!("key schedule of {}: {e}", c.id())))?;
        CollectionKeys::new(&self.shuffle_secret, c.id(), schedule)
            .map(Some)
            .map_err(|e| Status::internal(format!("keys of {}: {e}", c.id())))
    }

    /// Checks a new two-aggregator collection against this daemon's role: refused
    /// without one; a leader asks its helper for the same collection first (the
    /// helper's operator creates it there), so that both agree on every parameter.
    pub(super) async fn check_two_aggregator_create(&self, c: &Collection) -> Result<(), Status> {
        match self.two_aggregator.as_deref() {
            None => Err(Status::failed_precondition(
                "this aggregator takes no two-aggregator role: serve it with --two-aggregator-role leader or helper (and --peer-secret-file)",
            )),
            Some(TwoAggregatorRole::Helper { .. }) => Ok(()),
            Some(TwoAggregatorRole::Leader(config)) => {
                let verifier = self
                    .verifier
                    .as_ref()
                    .ok_or_else(|| Status::internal("a leader without its verifier"))?;
                let params: CollectionParams = verifier
                    .helper()
                    .get_collection(GetCollectionRequest { collection_id: c.id().to_string() })
                    .await
                    .map_err(|s| match s.code() {
                        tonic::Code::NotFound => Status::failed_precondition(format!(
                            "the helper at {} has no collection {:?}: its operator creates it there first, with the same spec",
                            config.helper_url, c.id()
                        )),
                        _ => Status::unavailable(format!(
                            "cannot ask the helper at {} about collection {:?}: {}",
                            config.helper_url, c.id(), s.message()
                        )),
                    })?
                    .into_inner();
                let helper = Collection::from_params(&params).map_err(|e| {
                    Status::failed_precondition(format!(
                        "the helper's collection {:?} does not re-derive: {e}",
                        c.id()
                    ))
                })?;
                if helper != *c {
                    return Err(Status::failed_precondition(format!(
                        "the helper's collection {:?} has another spec than this one: both must be created with the same spec",
                        c.id()
                    )));
                }
                if params
                    .two_aggregator
                    .is_none_or(|t| t.helper_keys.is_empty())
                {
                    return Err(Status::failed_precondition(format!(
                        "the aggregator at {} serves collection {:?} without helper keys: it is not a two-aggregator helper",
                        config.helper_url,
                        c.id()
                    )));
                }
                Ok(())
            }
        }
    }

    /// The body of `UploadTwoAggregatorReport` (the leader).
    pub(super) async fn upload(
        &self,
        request: Request<TwoAggregatorReport>,
    ) -> Result<UploadTwoAggregatorReportResponse, Status> {
        self.auth.check(
            request.metadata(),
            Right::Submit(&request.get_ref().collection_id),
        )?;
        let Some(verifier) = self.verifier.as_ref() else {
            return Err(Status::failed_precondition(
                "this aggregator is not a two-aggregator leader: upload to the collection's leader",
            ));
        };
        let report = request.into_inner();
        let c = self.collection(&report.collection_id).await?;
        let circuit = c.two_aggregator().ok_or_else(|| {
            Status::failed_precondition(format!(
                "collection {} is not a two-aggregator collection",
                c.id()
            ))
        })?;
        self.ensure_open(c.id()).await?;
        let report_id = ReportId::try_from(report.report_id.as_slice())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if report.helper_share.is_none() {
            return Err(invalid("the upload carries no helper share"));
        }
        let vdaf =
            ldpcov_prio::collection_prio3(&circuit).map_err(|e| Status::internal(e.to_string()))?;
        ldpcov_prio::exchange::check_upload(&vdaf, &report.public_share, &report.leader_share)
            .map_err(|e| {
                Status::invalid_argument(format!("the upload's shares do not decode: {e}"))
            })?;
        let queued = self
            .store
            .queue_upload(
                c.id(),
                QueuedUpload {
                    report_id,
                    body: report.encode_to_vec(),
                },
            )
            .await
            .map_err(store_status)?;
        verifier.wake();
        Ok(UploadTwoAggregatorReportResponse { duplicate: !queued })
    }

    /// The body of `VerifyShares` (the helper).
    pub(super) async fn verify_shares_batch(
        &self,
        request: Request<VerifySharesRequest>,
    ) -> Result<VerifySharesResponse, Status> {
        self.auth.check(request.metadata(), Right::Leader)?;
        let Some(TwoAggregatorRole::Helper { peer }) = self.two_aggregator.as_deref() else {
            return Err(Status::failed_precondition(
                "this aggregator is not a two-aggregator helper",
            ));
        };
        let request = request.into_inner();
        let c = self.collection(&request.collection_id).await?;
        let circuit = c.two_aggregator().ok_or_else(|| {
            Status::failed_precondition(format!(
                "collection {} is not a two-aggregator collection",
                c.id()
            ))
        })?;
        if request.reports.len() > crate::two_aggregator::VERIFY_BATCH {
            return Err(invalid(format!(
                "a verification batch holds at most {} reports",
                crate::two_aggregator::VERIFY_BATCH
            )));
        }
        let mut reports = Vec::with_capacity(request.reports.len());
        for r in request.reports {
            let id = ReportId::try_from(r.report_id.as_slice())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            reports.push((id, r));
        }
        let keys = self
            .helper_keys(&c)?
            .ok_or_else(|| Status::internal("a helper without keys"))?;
        let verify_key = peer.verify_key(c.id());
        // One verification at a time per collection: a report id is verified once, even
        // when two requests carry it at once.
        let lock = self.collection_lock(c.id());
        let _guard = lock.lock().await;
        let ids: Vec<ReportId> = reports.iter().map(|(id, _)| *id).collect();
        let recorded = self
            .store
            .verdicts(c.id(), &ids)
            .await
            .map_err(store_status)?;
        let vdaf =
            ldpcov_prio::collection_prio3(&circuit).map_err(|e| Status::internal(e.to_string()))?;
        let ctx = ldpcov_prio::context(c.id());
        let now = super::shuffle::unix_now();
        let decided = tokio::task::spawn_blocking(move || {
            let round = RoundContext {
                vdaf: &vdaf,
                verify_key: &verify_key,
                ctx: &ctx,
            };
            helper_verdicts(&round, &keys, now, reports, recorded)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        let outcome = self
            .store
            .submit_with_verdicts(c.id(), decided.counted, decided.record)
            .await
            .map_err(store_status)?;
        crate::telemetry::counted(c.id(), outcome.accepted, outcome.duplicates);
        Ok(VerifySharesResponse {
            verdicts: decided.answer,
        })
    }

    /// The lock serializing one collection's verifications at the helper.
    fn collection_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.verify_locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(id.to_string()).or_default())
    }
}

/// The collection's params with the helper's published keys (helper only).
pub(super) fn with_helper_keys(
    params: &mut CollectionParams,
    keys: Option<CollectionKeys>,
    now: u64,
) -> Result<(), Status> {
    if let (Some(keys), Some(two)) = (keys, params.two_aggregator.as_mut()) {
        let published = keys
            .published(now)
            .map_err(|e| Status::internal(format!("keys: {e}")))?;
        two.helper_keys = published
            .iter()
            .map(super::shuffle::public_key_message)
            .collect();
    }
    Ok(())
}
