//! The `ldpcov.v1.Aggregator` gRPC service: validation, status codes, and the glue
//! between the wire, the [`Store`] and the [`ldpcov_estimate`] crate (the mapping
//! between messages and estimator options and results is `convert`; the statuses of
//! errors are `status`; central collections' releases are `central`).
//!
//! Every request is validated completely before the store is touched, so a rejected
//! request changes nothing.

use std::sync::Arc;
use std::time::Instant;

use ldpcov_privacy::{Collection, ReportId, collection::validate_collection_id, wire};
use ldpcov_proto::v1::aggregator_server::Aggregator;
use ldpcov_proto::v1::{
    CloseCollectionRequest, CollectionParams, CollectionStatus, CreateCollectionRequest,
    DeleteCollectionRequest, DeleteCollectionResponse, Estimate, GetCollectionRequest,
    GetEstimateRequest, GetStatusRequest, ListCollectionsRequest, ListCollectionsResponse,
    ReleaseShareRequest, ReleaseShareResponse, Report, ShuffledBatchChunk, ShuffledBatchResponse,
    SubmitReportResponse, SubmitReportsResponse, TwoAggregatorReport,
    UploadTwoAggregatorReportResponse, VerifySharesRequest, VerifySharesResponse,
};
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::{AuthConfig, Right};
use crate::store::{Store, StoreError, ValidReport};
use crate::telemetry;
use crate::two_aggregator::{LeaderVerifier, TwoAggregatorRole};
use ldpcov_estimate::{self as estimate, EstimationInput, estimate_precision};
use ldpcov_seal::MasterSecret;

mod central;
mod convert;
mod keys;
mod radius;
mod shuffle;
mod status;
mod two_aggregator;

pub use shuffle::{BATCH_ID_LEN, MAX_BATCH_SIZE};

use convert::{
    Analysis, Target, check_principal_components, estimate_response, options_from_request,
};
pub use convert::{MAX_ESTIMATE_CANDIDATES, MAX_ESTIMATE_LIST};
pub(crate) use status::store_status;
use status::{estimate_status, invalid};

/// Reports of one stream are handed to the store in batches of at most this many.
pub const STREAM_BATCH: usize = 256;

/// The metrics label of reports whose collection was not found (or not looked up,
/// e.g. for want of a token): never the client-chosen id, which would let a client
/// create any number of series.
const UNKNOWN_COLLECTION: &str = "_unknown";

/// Server-wide limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest collection dimension this server accepts.
    pub max_dim: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_dim: 2048 }
    }
}

impl Limits {
    /// Largest gRPC message this server needs to decode: one i32 report at `max_dim`
    /// (`p + d` entries with the mean block), plus framing. Never below tonic's
    /// default of 4 MiB.
    pub fn max_decoding_message_size(&self) -> usize {
        let d = ldpcov_privacy::layout::triangle_len(self.max_dim);
        (4 * (d + self.max_dim) + 64 * 1024).max(4 << 20)
    }

    /// Largest gRPC message this server sends: an estimate at `max_dim` (f64 entries of
    /// the covariance, the precision matrix, the second moment and the correlation,
    /// a graph of at most d edges, the mean and the names).
    pub fn max_encoding_message_size(&self) -> usize {
        let d = ldpcov_privacy::layout::triangle_len(self.max_dim);
        let names = self.max_dim * (ldpcov_privacy::limits::MAX_NAME_BYTES + 2);
        (48 * d + 8 * self.max_dim + names + 64 * 1024).max(4 << 20)
    }
}

/// The gRPC service over a [`Store`]. Cloning shares the store.
#[derive(Clone)]
pub struct AggregatorService {
    store: Arc<dyn Store>,
    limits: Limits,
    auth: Arc<AuthConfig>,
    transport_secure: bool,
    /// One permit per estimate allowed to run at once.
    estimates: Arc<tokio::sync::Semaphore>,
    max_estimates: usize,
    /// The secret every shuffled collection's HPKE keys are derived from (and, on a
    /// two-aggregator helper, the helper's keys).
    shuffle_secret: Arc<MasterSecret>,
    /// This daemon's two-aggregator role, if any.
    two_aggregator: Option<Arc<TwoAggregatorRole>>,
    /// A leader's verifier (woken by uploads; asks the helper).
    verifier: Option<LeaderVerifier>,
    /// A helper's per-collection verification locks.
    verify_locks: VerifyLocks,
    /// Main collections served with the radius their closed phase chose.
    chosen_radii: radius::ChosenRadii,
}

/// A helper's per-collection verification locks.
type VerifyLocks =
    Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

/// Default of [`AggregatorService::with_max_concurrent_estimates`]: twice the cores.
pub fn default_max_concurrent_estimates() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl AggregatorService {
    /// A service over `store` with server-wide `limits`.
    pub fn new(store: Arc<dyn Store>, limits: Limits) -> Self {
        AggregatorService {
            store,
            limits,
            auth: Arc::new(AuthConfig::default()),
            transport_secure: false,
            estimates: Arc::new(tokio::sync::Semaphore::new(
                default_max_concurrent_estimates(),
            )),
            max_estimates: default_max_concurrent_estimates(),
            // Replaced by the daemon's persistent secret (`with_shuffle_secret`); an
            // in-memory service (tests, the embedded default) draws its own.
            shuffle_secret: Arc::new(
                MasterSecret::generate().expect("the OS random generator is available"),
            ),
            two_aggregator: None,
            verifier: None,
            verify_locks: VerifyLocks::default(),
            chosen_radii: radius::ChosenRadii::default(),
        }
    }

    /// Serves two-aggregator collections in `role`; a leader counts through `verifier`
    /// (whose task the caller runs: [`LeaderVerifier::run`]).
    pub fn with_two_aggregator(
        mut self,
        role: TwoAggregatorRole,
        verifier: Option<LeaderVerifier>,
    ) -> Self {
        self.two_aggregator = Some(Arc::new(role));
        self.verifier = verifier;
        self
    }

    /// Derives shuffled collections' HPKE keys from `secret` (default: a secret drawn
    /// for this service alone, so reports sealed for it open nowhere else and not
    /// after a restart). A daemon keeps it in a file (`serve --hpke-secret-file`);
    /// replicas of one store share it.
    pub fn with_shuffle_secret(mut self, secret: Arc<MasterSecret>) -> Self {
        self.shuffle_secret = secret;
        self
    }

    /// Lets at most `n` (at least 1) GetEstimate calls compute at once; a call beyond
    /// that is refused `RESOURCE_EXHAUSTED` at once (default:
    /// [`default_max_concurrent_estimates`]). A call whose client went away keeps its
    /// slot until its computation, which cannot be interrupted, has ended: the bound is
    /// on the CPU the estimates use, not on the calls still waiting for them.
    pub fn with_max_concurrent_estimates(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.estimates = Arc::new(tokio::sync::Semaphore::new(n));
        self.max_estimates = n;
        self
    }

    /// Records that the server runs behind TLS (default: not). Only used to warn when
    /// a central collection, whose reports are raw vectors, is served without it.
    pub fn with_transport_security(mut self, tls: bool) -> Self {
        self.transport_secure = tls;
        self
    }

    /// Requires the tokens of `auth` (default: open, no tokens). See
    /// [`AuthConfig`](crate::AuthConfig) for which call needs what.
    pub fn with_auth(mut self, auth: Arc<AuthConfig>) -> Self {
        self.auth = auth;
        self
    }

    /// Sets the collections gauge from the store (a failure is logged, never the
    /// caller's error: the write it follows has succeeded).
    pub async fn refresh_collections_gauge(&self) {
        match self.store.collection_count().await {
            Ok(n) => telemetry::collections(n),
            Err(e) => tracing::warn!(error = %e, "cannot count the collections for the metrics"),
        }
    }

    /// Fails with `FAILED_PRECONDITION` if the collection was closed.
    async fn ensure_open(&self, id: &str) -> Result<(), Status> {
        if self.store.is_closed(id).await.map_err(store_status)? {
            return Err(store_status(StoreError::Closed(id.to_string())));
        }
        Ok(())
    }

    async fn status_of(&self, c: &Arc<Collection>) -> Result<CollectionStatus, Status> {
        let reports = self.store.count(c.id()).await.map_err(store_status)?;
        let closed = self.store.is_closed(c.id()).await.map_err(store_status)?;
        let (rho_budget, rho_spent) = if c.is_central() || c.is_two_aggregator() {
            let spent = self
                .store
                .budget_spent(c.id())
                .await
                .map_err(store_status)?;
            (c.rho(), spent)
        } else {
            (0.0, 0.0)
        };
        Ok(CollectionStatus {
            params: Some(self.params_of(c)?),
            reports,
            releasable: reports >= c.min_reports(),
            closed,
            rho_budget,
            rho_spent,
            shuffle_delivered: self.delivered(c).await?,
        })
    }

    async fn collection(&self, id: &str) -> Result<Arc<Collection>, Status> {
        validate_collection_id(id).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let stored = self.store.collection(id).await.map_err(store_status)?;
        self.with_chosen_radius(stored).await
    }

    /// The body of `SubmitReports`: validates and stores the stream's reports in
    /// batches, counting them in the metrics batch by batch.
    async fn submit_stream(
        &self,
        request: Request<Streaming<Report>>,
    ) -> Result<SubmitReportsResponse, Status> {
        // The token is checked once for the stream, and against each collection the
        // stream switches to.
        self.auth.check(request.metadata(), Right::AnySubmit)?;
        let metadata = request.metadata().clone();
        let mut stream = request.into_inner();
        let mut total = SubmitReportsResponse::default();
        let mut batch = Pending::default();
        let mut current: Option<Arc<Collection>> = None;
        let mut index: u64 = 0;
        // On a bad report: commit what came before it, then fail with its status.
        let mut failure: Option<Status> = None;
        while let Some(item) = stream.next().await {
            let report = match item {
                Ok(r) => r,
                Err(status) => {
                    failure = Some(status);
                    break;
                }
            };
            // A stream may mix collections; flush when it switches.
            let same = current
                .as_ref()
                .is_some_and(|c| c.id() == report.collection_id);
            if !same {
                if let Some(c) = &current {
                    batch.flush(&*self.store, c.id(), &mut total).await?;
                }
                let looked_up = match self
                    .auth
                    .check(&metadata, Right::Submit(&report.collection_id))
                {
                    Ok(()) => match self.collection(&report.collection_id).await {
                        Ok(c) => match Self::ensure_direct(&c) {
                            Ok(()) => self.ensure_open(c.id()).await.map(|()| c),
                            Err(status) => Err(status),
                        },
                        Err(status) => Err(status),
                    },
                    Err(status) => Err(status),
                };
                match looked_up {
                    Ok(c) => current = Some(c),
                    Err(status) => {
                        telemetry::bytes_received(UNKNOWN_COLLECTION, report.payload.len() as u64);
                        telemetry::rejected(UNKNOWN_COLLECTION, status.code(), 1);
                        failure = Some(status);
                        current = None;
                        break;
                    }
                }
            }
            let Some(collection) = current.as_ref() else {
                break;
            };
            batch.bytes += report.payload.len() as u64;
            match Self::validate(collection, &report) {
                Ok(v) => batch.reports.push(v),
                Err(status) => {
                    telemetry::rejected(collection.id(), status.code(), 1);
                    failure = Some(status);
                    break;
                }
            }
            index += 1;
            if batch.reports.len() >= STREAM_BATCH {
                batch
                    .flush(&*self.store, collection.id(), &mut total)
                    .await?;
            }
        }
        if let Some(c) = &current {
            batch.flush(&*self.store, c.id(), &mut total).await?;
        }
        match failure {
            None => Ok(total),
            Some(status) => Err(Status::new(
                status.code(),
                format!(
                    "report {index} (0-based) of the stream: {}; the {} reports before it were counted ({} duplicates)",
                    status.message(),
                    total.accepted,
                    total.duplicates
                ),
            )),
        }
    }

    /// Validates one report against its collection (already looked up).
    fn validate(collection: &Collection, report: &Report) -> Result<ValidReport, Status> {
        let report_id = ReportId::try_from(report.report_id.as_slice())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let entries = wire::decode_payload(collection, report.encoding, &report.payload)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(ValidReport { report_id, entries })
    }
}

#[tonic::async_trait]
impl Aggregator for AggregatorService {
    async fn create_collection(
        &self,
        request: Request<CreateCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        self.auth.check(request.metadata(), Right::Admin)?;
        let spec = request
            .into_inner()
            .spec
            .ok_or_else(|| Status::invalid_argument("request carries no collection spec"))?;
        // The create path: an unspecified `moments` means mean and covariance, and the
        // resolved value is what the store keeps and every answer shows.
        let collection =
            Collection::create(&spec).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if collection.is_two_aggregator() {
            self.check_two_aggregator_create(&collection).await?;
        }
        if collection.dim() > self.limits.max_dim {
            return Err(Status::invalid_argument(format!(
                "dimension {} exceeds this server's limit of {}",
                collection.dim(),
                self.limits.max_dim
            )));
        }
        self.create_radius_phase(&collection).await?;
        let created = self
            .store
            .create_collection(collection)
            .await
            .map_err(store_status)?;
        tracing::info!(
            collection = %created.id(), dim = created.dim(), epsilon = created.epsilon(),
            delta = created.delta(), sigma = created.sigma(), central = created.is_central(),
            "collection created"
        );
        if created.is_central() && !(self.transport_secure && self.auth.submit_guarded()) {
            tracing::warn!(
                collection = %created.id(), tls = self.transport_secure,
                submit_token = self.auth.submit_guarded(),
                "central collection served without TLS and a submit token: devices' raw vectors can be read on the network or sent by anyone; serve with --tls-cert/--tls-key and --submit-token-file"
            );
        }
        self.refresh_collections_gauge().await;
        Ok(Response::new(self.params_of(&created)?))
    }

    async fn get_collection(
        &self,
        request: Request<GetCollectionRequest>,
    ) -> Result<Response<CollectionParams>, Status> {
        let id = &request.get_ref().collection_id;
        self.auth.check(request.metadata(), Right::Read(id))?;
        let c = self.collection(id).await?;
        Ok(Response::new(self.params_of(&c)?))
    }

    async fn submit_report(
        &self,
        request: Request<Report>,
    ) -> Result<Response<SubmitReportResponse>, Status> {
        let started = Instant::now();
        let bytes = request.get_ref().payload.len() as u64;
        // The metrics label: the collection once it was found.
        let mut found: Option<Arc<Collection>> = None;
        let result = async {
            self.auth.check(
                request.metadata(),
                Right::Submit(&request.get_ref().collection_id),
            )?;
            let report = request.into_inner();
            let collection = found.insert(self.collection(&report.collection_id).await?);
            Self::ensure_direct(collection)?;
            self.ensure_open(collection.id()).await?;
            let valid = Self::validate(collection, &report)?;
            self.store
                .submit(collection.id(), vec![valid])
                .await
                .map_err(store_status)
        }
        .await;
        let label = found.as_ref().map_or(UNKNOWN_COLLECTION, |c| c.id());
        telemetry::bytes_received(label, bytes);
        match &result {
            Ok(outcome) => telemetry::counted(label, outcome.accepted, outcome.duplicates),
            Err(status) => telemetry::rejected(label, status.code(), 1),
        }
        telemetry::submit_duration("SubmitReport", started.elapsed());
        result.map(|outcome| {
            Response::new(SubmitReportResponse {
                duplicate: outcome.duplicates > 0,
            })
        })
    }

    async fn submit_reports(
        &self,
        request: Request<Streaming<Report>>,
    ) -> Result<Response<SubmitReportsResponse>, Status> {
        let started = Instant::now();
        let result = self.submit_stream(request).await;
        telemetry::submit_duration("SubmitReports", started.elapsed());
        result.map(Response::new)
    }

    async fn upload_two_aggregator_report(
        &self,
        request: Request<TwoAggregatorReport>,
    ) -> Result<Response<UploadTwoAggregatorReportResponse>, Status> {
        self.upload(request).await.map(Response::new)
    }

    async fn verify_shares(
        &self,
        request: Request<VerifySharesRequest>,
    ) -> Result<Response<VerifySharesResponse>, Status> {
        self.verify_shares_batch(request).await.map(Response::new)
    }

    async fn release_share(
        &self,
        request: Request<ReleaseShareRequest>,
    ) -> Result<Response<ReleaseShareResponse>, Status> {
        self.release_share_of(request).await.map(Response::new)
    }

    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<CollectionStatus>, Status> {
        let id = &request.get_ref().collection_id;
        self.auth.check(request.metadata(), Right::Read(id))?;
        let c = self.collection(id).await?;
        Ok(Response::new(self.status_of(&c).await?))
    }

    async fn close_collection(
        &self,
        request: Request<CloseCollectionRequest>,
    ) -> Result<Response<CollectionStatus>, Status> {
        self.auth.check(request.metadata(), Right::Admin)?;
        let c = self.collection(&request.get_ref().collection_id).await?;
        let main = self.check_phase_closable(&c).await?;
        self.store
            .close_collection(c.id())
            .await
            .map_err(store_status)?;
        let status = self.status_of(&c).await?;
        tracing::info!(collection = %c.id(), reports = status.reports, "collection closed");
        if let Some(main) = main {
            // The main collection's radius, chosen now (and logged) rather than by
            // the first device that asks.
            self.with_chosen_radius(main).await?;
        }
        Ok(Response::new(status))
    }

    async fn delete_collection(
        &self,
        request: Request<DeleteCollectionRequest>,
    ) -> Result<Response<DeleteCollectionResponse>, Status> {
        self.auth.check(request.metadata(), Right::Admin)?;
        let id = &request.get_ref().collection_id;
        validate_collection_id(id).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if let Some(main) = self.main_of_phase(id).await? {
            return Err(Status::failed_precondition(format!(
                "collection {id} is the radius phase of {}, whose radius it sets: delete {} (which deletes both)",
                main.id(),
                main.id()
            )));
        }
        let phase = match self.store.collection(id).await {
            Ok(c) => c
                .radius_phase()
                .map(|s| s.phase_collection_id().to_string()),
            Err(_) => None,
        };
        let reports = self
            .store
            .delete_collection(id)
            .await
            .map_err(store_status)?;
        self.forget_radius(id)?;
        if let Some(phase) = phase {
            match self.store.delete_collection(&phase).await {
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(store_status(e)),
            }
            tracing::info!(collection = %phase, "radius phase deleted with its collection");
        }
        tracing::info!(collection = %id, reports, "collection deleted");
        self.refresh_collections_gauge().await;
        Ok(Response::new(DeleteCollectionResponse { reports }))
    }

    async fn list_collections(
        &self,
        request: Request<ListCollectionsRequest>,
    ) -> Result<Response<ListCollectionsResponse>, Status> {
        self.auth.check(request.metadata(), Right::Admin)?;
        let ids = self.store.collection_ids().await.map_err(store_status)?;
        let mut collections = Vec::with_capacity(ids.len());
        for id in ids {
            match self.store.collection(&id).await {
                Ok(c) => {
                    let c = self.with_chosen_radius(c).await?;
                    collections.push(self.status_of(&c).await?)
                }
                // Deleted between the listing and now: not listed.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(store_status(e)),
            }
        }
        Ok(Response::new(ListCollectionsResponse { collections }))
    }

    async fn get_estimate(
        &self,
        request: Request<GetEstimateRequest>,
    ) -> Result<Response<Estimate>, Status> {
        self.auth.check(request.metadata(), Right::Admin)?;
        let started = Instant::now();
        let req = request.into_inner();
        let c = self.collection(&req.collection_id).await?;
        if c.is_two_aggregator() && self.verifier.is_none() {
            // A helper's share alone is uniformly random: only the leader combines.
            return Err(Status::failed_precondition(format!(
                "collection {} is a two-aggregator collection: its estimate is released by its leader, which combines both aggregators' noisy shares",
                c.id()
            )));
        }
        let (mut options, target) = options_from_request(&req)?;
        check_principal_components(&req, c.dim())?;
        // Validated: now the budget of estimates at once, before any work.
        let permit = Arc::clone(&self.estimates)
            .try_acquire_owned()
            .map_err(|_| {
                Status::resource_exhausted(format!(
                    "{} estimates are already running, this server's limit (--max-concurrent-estimates); retry later",
                    self.max_estimates
                ))
            })?;
        let snapshot = self.store.snapshot(c.id()).await.map_err(store_status)?;
        // A central collection's estimators act on a recorded noisy release; a local
        // one's on its sums, whose noise the devices added.
        let (input, acc, release) = if c.is_central() || c.is_two_aggregator() {
            let r = self
                .central_input(&c, &req, &mut options, &target, snapshot)
                .await?;
            (r.input, r.acc, Some(r.info))
        } else {
            if req.release.is_some() {
                return Err(invalid(
                    "release is for central collections: a local collection's reports carry their own noise",
                ));
            }
            (EstimationInput::from_collection(&c), snapshot.acc, None)
        };
        // The per-report Gaussian σ (CollectionParams.sigma; a central release's
        // equivalent, that of its diagonal entries in the svec weighting); 0 for the
        // rank-one report, whose noise is not additive.
        let sigma = match input.noise() {
            ldpcov_estimate::NoiseModel::IidGaussian { sigma }
            | ldpcov_estimate::NoiseModel::SplitGaussian { sigma, .. } => sigma,
            _ => 0.0,
        };
        // The eigendecompositions take a while at large p: keep them off the reactor.
        let task_target = target.clone();
        let task_collection = c.clone();
        let task_request = req.clone();
        // The permit moves into the task: if the client goes away, this future is
        // dropped but the computation runs to its end (it has no cancellation points)
        // and keeps its slot until then; its result is dropped.
        let (result, precision, analysis) = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let (result, precision) = match task_target {
                Target::Covariance => estimate::estimate(&input, &acc, &options).map(|r| (r, None)),
                Target::Precision(method, lambda) => {
                    estimate_precision(&input, &acc, &options, &method, lambda)
                        .map(|pr| (pr.covariance.clone(), Some(pr)))
                }
            }
            .map_err(estimate_status)?;
            let analysis = Analysis::compute(
                &task_collection,
                &input,
                &acc,
                &result.matrix,
                &task_request,
            )?;
            Ok::<_, Status>((result, precision, analysis))
        })
        .await
        .map_err(|e| Status::internal(format!("estimator task failed: {e}")))??;
        tracing::info!(
            collection = %c.id(), reports = result.reports, threshold = result.threshold,
            rule = %result.rule, surviving = result.surviving_entries,
            clamped = result.clamped_eigenvalues, target = ?target, "estimate released"
        );
        telemetry::estimate_duration(
            match target {
                Target::Covariance => "covariance",
                Target::Precision(..) => "precision",
            },
            started.elapsed(),
        );
        let mut response =
            estimate_response(&c, &target, sigma, &result, precision, release, analysis);
        response.shuffle_delivered = self.delivered(&c).await?;
        Ok(Response::new(response))
    }

    async fn submit_shuffled_batch(
        &self,
        request: Request<Streaming<ShuffledBatchChunk>>,
    ) -> Result<Response<ShuffledBatchResponse>, Status> {
        self.shuffled_batch(request).await.map(Response::new)
    }
}

/// The validated reports of a stream not yet handed to the store, and the payload
/// bytes received for them (validated or not).
#[derive(Default)]
struct Pending {
    reports: Vec<ValidReport>,
    bytes: u64,
}

impl Pending {
    /// Hands the batch to the store and counts it in `total` and in the metrics (as
    /// rejected with the store's status if the store fails it).
    async fn flush(
        &mut self,
        store: &dyn Store,
        id: &str,
        total: &mut SubmitReportsResponse,
    ) -> Result<(), Status> {
        telemetry::bytes_received(id, std::mem::take(&mut self.bytes));
        if self.reports.is_empty() {
            return Ok(());
        }
        let reports = std::mem::take(&mut self.reports);
        let n = reports.len() as u64;
        match store.submit(id, reports).await.map_err(store_status) {
            Ok(outcome) => {
                telemetry::counted(id, outcome.accepted, outcome.duplicates);
                total.accepted += outcome.accepted;
                total.duplicates += outcome.duplicates;
                Ok(())
            }
            Err(status) => {
                telemetry::rejected(id, status.code(), n);
                Err(status)
            }
        }
    }
}
