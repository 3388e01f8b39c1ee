//! The two-aggregator calls: a device's upload to the leader, the leader's
//! `VerifyShares` to the helper, and the checks of a new two-aggregator collection
//! (`crate::two_aggregator` holds the protocol).

use std::sync::Arc;

use ldpcov_central::{Mechanism, ReleaseBudget};
use ldpcov_estimate::Accumulator;
use ldpcov_noise::DiscreteGaussianSampler;
use ldpcov_privacy::{Collection, ReportId};
use ldpcov_proto::v1::{
    CentralRelease, CollectionParams, GetCollectionRequest, ReleaseShareRequest,
    ReleaseShareResponse, StoredCentralRelease, TwoAggregatorReport,
    UploadTwoAggregatorReportResponse, VerifySharesRequest, VerifySharesResponse,
};
use ldpcov_seal::{CollectionKeys, KeySchedule};
use prost::Message;
use tonic::Code;
use tonic::{Request, Status};

use super::{AggregatorService, estimate_status, invalid, store_status};
use crate::auth::Right;
use crate::store::QueuedUpload;
use crate::two_aggregator::{
    NoisyShare, RoundContext, TwoAggregatorRole, combine, helper_verdicts, noisy_share,
};

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
        let now = super::keys::unix_now();
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

    /// The body of `ReleaseShare` (the helper): its noisy share of a GaussCov release
    /// over exactly the leader's count, at least the collection's minimum, recorded in
    /// the helper's own ledger against its own budget (the same release asked again is
    /// answered from the ledger, with the same noise, at no cost).
    pub(super) async fn release_share_of(
        &self,
        request: Request<ReleaseShareRequest>,
    ) -> Result<ReleaseShareResponse, Status> {
        self.auth.check(request.metadata(), Right::Leader)?;
        if !matches!(
            self.two_aggregator.as_deref(),
            Some(TwoAggregatorRole::Helper { .. })
        ) {
            return Err(Status::failed_precondition(
                "this aggregator is not a two-aggregator helper",
            ));
        }
        let request = request.into_inner();
        let c = self.collection(&request.collection_id).await?;
        let release = request
            .release
            .ok_or_else(|| invalid("the request names no release"))?;
        let (rho, key) = two_aggregator_release(&c, &release, request.reports)?;
        let snapshot = self.store.snapshot(c.id()).await.map_err(store_status)?;
        let n = snapshot.acc.count;
        if n != request.reports {
            return Err(Status::failed_precondition(format!(
                "the helper counted {n} reports of {}, the leader asks for a release over {}: retry once the leader's uploads are all verified",
                c.id(),
                request.reports
            )));
        }
        if n < c.min_reports() {
            return Err(estimate_status(
                ldpcov_estimate::EstimateError::BelowMinimum {
                    have: n,
                    need: c.min_reports(),
                },
            ));
        }
        let recorded = match self
            .store
            .recorded_release(c.id(), &key)
            .await
            .map_err(store_status)?
        {
            Some(r) => r,
            None => {
                self.ensure_budget_left(&c, rho).await?;
                let drawn = draw_noisy_share(&c, snapshot.acc, rho).await?;
                let body = ReleaseShareResponse {
                    noisy_share: drawn.share,
                    reports: n,
                    noise_sd_grid: drawn.noise_sd_grid,
                    off_diagonal_noise_sd_grid: drawn.off_diagonal_noise_sd_grid,
                    rho_spent: 0.0,
                };
                let r = self
                    .store
                    .record_release(c.id(), &key, rho, c.rho(), body.encode_to_vec())
                    .await
                    .map_err(store_status)?;
                tracing::info!(
                    collection = %c.id(), rho, reports = n, spent = r.spent, budget = c.rho(),
                    fresh = r.fresh, "two-aggregator helper share released"
                );
                r
            }
        };
        let mut answer = ReleaseShareResponse::decode(recorded.body.as_slice()).map_err(|e| {
            Status::internal(format!("the ledger holds an unreadable share release: {e}"))
        })?;
        answer.rho_spent = recorded.spent;
        Ok(answer)
    }

    /// The leader's draw of a two-aggregator release: the helper's noisy share first (its
    /// count must be the leader's: no upload may be waiting), then the leader's own, and
    /// their sum: the central sums with two independent noises, each of the release's σ.
    pub(super) async fn draw_two_aggregator_release(
        &self,
        c: &Arc<Collection>,
        acc: Accumulator,
        release: &CentralRelease,
    ) -> Result<StoredCentralRelease, Status> {
        let n = acc.count;
        let (rho, _) = two_aggregator_release(c, release, n)?;
        let verifier = self.verifier.as_ref().ok_or_else(|| {
            Status::failed_precondition(
                "only the collection's leader releases a two-aggregator estimate",
            )
        })?;
        let queued = self
            .store
            .queued_count(c.id())
            .await
            .map_err(store_status)?;
        if queued > 0 {
            return Err(Status::failed_precondition(format!(
                "{queued} uploads of {} are still being verified with the helper: retry once they are counted",
                c.id()
            )));
        }
        let helper = verifier
            .helper()
            .release_share(ReleaseShareRequest {
                collection_id: c.id().to_string(),
                release: Some(*release),
                reports: n,
            })
            .await
            .map_err(|s| {
                Status::new(
                    if s.code() == Code::ResourceExhausted {
                        Code::ResourceExhausted
                    } else {
                        Code::FailedPrecondition
                    },
                    format!("the helper did not release its share: {}", s.message()),
                )
            })?
            .into_inner();
        if helper.reports != n {
            return Err(Status::failed_precondition(format!(
                "the helper released a share over {} reports, not {n}",
                helper.reports
            )));
        }
        let own = draw_noisy_share(c, acc, rho).await?;
        let sums = combine(c, n, &own.share, &helper.noisy_share)
            .map_err(|e| Status::internal(format!("the two shares do not combine: {e}")))?;
        let sd = |a: f64, b: f64| (a * a + b * b).sqrt();
        Ok(StoredCentralRelease {
            rho,
            reports: n,
            noise_sd_grid: sd(own.noise_sd_grid, helper.noise_sd_grid),
            off_diagonal_noise_sd_grid: sd(
                own.off_diagonal_noise_sd_grid,
                helper.off_diagonal_noise_sd_grid,
            ),
            sums,
            radius: 1.0,
            ..Default::default()
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
            .map(super::keys::public_key_message)
            .collect();
    }
    Ok(())
}

/// The ρ and ledger key of a two-aggregator release: GaussCov only (its noise does not
/// depend on the data, so each side draws its own).
fn two_aggregator_release(
    c: &Collection,
    release: &CentralRelease,
    reports: u64,
) -> Result<(f64, Vec<u8>), Status> {
    if !c.is_two_aggregator() {
        return Err(Status::failed_precondition(format!(
            "collection {} is not a two-aggregator collection",
            c.id()
        )));
    }
    match super::central::parse_release(release)? {
        (Mechanism::GaussCov, budget @ ReleaseBudget::Rho(rho)) => Ok((
            rho,
            super::central::ledger_key(Mechanism::GaussCov, budget, reports),
        )),
        (other, _) => Err(invalid(format!(
            "a two-aggregator collection releases gauss_cov only (each aggregator adds its own noise, independent of the data), not {}",
            other.name()
        ))),
    }
}

/// This aggregator's noisy share of a release of `rho`, drawn off the async runtime with
/// the operating system's randomness.
async fn draw_noisy_share(
    c: &Arc<Collection>,
    acc: Accumulator,
    rho: f64,
) -> Result<NoisyShare, Status> {
    let c = Arc::clone(c);
    tokio::task::spawn_blocking(move || {
        let mut sampler = DiscreteGaussianSampler::from_os_rng().map_err(|e| {
            Status::internal(format!("no randomness from the operating system: {e}"))
        })?;
        noisy_share(&c, &acc, rho, &mut sampler).map_err(|e| Status::internal(e.to_string()))
    })
    .await
    .map_err(|e| Status::internal(format!("release task failed: {e}")))?
}
