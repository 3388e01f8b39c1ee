//! The leader's background task: queued uploads, a batch at a time per collection,
//! verified with the helper and counted.

use std::sync::Arc;
use std::time::Duration;

use ldpcov_privacy::Collection;
use ldpcov_proto::retry::Backoff;
use ldpcov_proto::v1::VerifySharesRequest;
use ldpcov_proto::v1::aggregator_client::AggregatorClient;
use tokio::sync::Notify;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use super::round::{RoundContext, leader_finish_batch, leader_start_batch};
use super::{LeaderConfig, VERIFY_BATCH};
use crate::store::{Store, StoreError};

/// How long the verifier waits for new uploads before it looks at the queues again (it is
/// woken at once by an upload to this process; uploads to another replica of the store
/// are seen within this delay).
pub const VERIFY_POLL: Duration = Duration::from_secs(1);

/// How long one `VerifyShares` call may take.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(60);

type HelperClient = AggregatorClient<InterceptedService<Channel, Bearer>>;

/// Adds the leader's bearer token to every call to the helper.
#[derive(Clone)]
pub(crate) struct Bearer(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// Why a batch was not counted (it stays queued and is sent again).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The helper refused or did not answer.
    #[error("the helper answered {code:?}: {message}", code = .0.code(), message = .0.message())]
    Helper(Status),
    /// The helper's answer does not match the request.
    #[error("{0}")]
    Answer(String),
    /// The collection's Prio3 instance cannot be built, or a worker failed.
    #[error("{0}")]
    Internal(String),
}

/// The leader's verifier: one task per leader daemon.
#[derive(Clone)]
pub struct LeaderVerifier {
    store: Arc<dyn Store>,
    config: LeaderConfig,
    helper: HelperClient,
    wake: Arc<Notify>,
}

impl LeaderVerifier {
    /// A verifier for `store`'s two-aggregator collections, towards the helper of
    /// `config` (connected lazily: an unreachable helper delays counting, never uploads).
    ///
    /// # Errors
    ///
    /// The helper's URL or TLS settings are unusable.
    pub fn new(
        store: Arc<dyn Store>,
        config: LeaderConfig,
    ) -> Result<Self, tonic::transport::Error> {
        let mut endpoint = Endpoint::from_shared(config.helper_url.clone())?
            .connect_timeout(Duration::from_secs(10))
            .timeout(VERIFY_TIMEOUT);
        if let Some(tls) = &config.helper_tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        } else if config.helper_url.starts_with("https://") {
            endpoint = endpoint.tls_config(crate::tls::client_config(None))?;
        }
        let value = format!("Bearer {}", config.peer.leader_token_text());
        let bearer = Bearer(
            value
                .parse()
                .expect("a hexadecimal token is a header value"),
        );
        let channel = endpoint.connect_lazy();
        let helper = AggregatorClient::with_interceptor(channel, bearer)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        Ok(LeaderVerifier {
            store,
            config,
            helper,
            wake: Arc::new(Notify::new()),
        })
    }

    /// Wakes the verifier (an upload was queued).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// A client of the helper, with the leader's token.
    pub(crate) fn helper(&self) -> HelperClient {
        self.helper.clone()
    }

    /// Runs until the task is aborted: every queue drained, batch by batch; after a
    /// failed batch, backs off (1 s doubling to 60 s) and tries again.
    pub async fn run(self) {
        let backoff = Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
            jitter: false,
        };
        let mut previous = None;
        loop {
            match self.drain_once().await {
                Ok(true) => previous = None,
                Ok(false) => {
                    previous = None;
                    let _ = tokio::time::timeout(VERIFY_POLL, self.wake.notified()).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, helper = %self.config.helper_url, "two-aggregator verification failed; the uploads stay queued");
                    let delay = backoff.next(previous);
                    previous = Some(delay);
                    tokio::time::sleep(backoff.wait(delay)).await;
                }
            }
        }
    }

    /// One batch of every two-aggregator collection with queued uploads. `Ok(true)` if a
    /// queue held a full batch (more may wait).
    pub async fn drain_once(&self) -> Result<bool, VerifyError> {
        let mut more = false;
        let mut first_error = None;
        for id in self.store.collection_ids().await? {
            let collection = match self.store.collection(&id).await {
                Ok(c) => c,
                Err(StoreError::NotFound(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            if !collection.is_two_aggregator() {
                continue;
            }
            match self.verify_batch(&collection).await {
                Ok(full) => more |= full,
                Err(e) => {
                    tracing::warn!(collection = %id, error = %e, "a two-aggregator batch was not counted");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if !more => Err(e),
            _ => Ok(more),
        }
    }

    /// Verifies and counts the oldest queued batch of `collection`. `Ok(true)` if it was
    /// full.
    async fn verify_batch(&self, collection: &Arc<Collection>) -> Result<bool, VerifyError> {
        let id = collection.id().to_string();
        let uploads = match self.store.queued_uploads(&id, VERIFY_BATCH).await {
            Ok(u) => u,
            Err(StoreError::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if uploads.is_empty() {
            return Ok(false);
        }
        let full = uploads.len() == VERIFY_BATCH;
        let circuit = collection
            .two_aggregator()
            .ok_or_else(|| VerifyError::Internal("not a two-aggregator collection".into()))?;
        let vdaf = Arc::new(
            ldpcov_prio::collection_prio3(&circuit)
                .map_err(|e| VerifyError::Internal(e.to_string()))?,
        );
        let verify_key = self.config.peer.verify_key(&id);
        let ctx = ldpcov_prio::context(&id);
        let done: Vec<_> = uploads.iter().map(|u| u.report_id).collect();
        let (started, vdaf, ctx) = {
            let (vdaf, ctx) = (Arc::clone(&vdaf), ctx.clone());
            tokio::task::spawn_blocking(move || {
                let round = RoundContext {
                    vdaf: &vdaf,
                    verify_key: &verify_key,
                    ctx: &ctx,
                };
                let started = leader_start_batch(&round, &uploads);
                (started, vdaf, ctx)
            })
            .await
            .map_err(|e| VerifyError::Internal(e.to_string()))?
        };
        let verdicts = if started.to_helper.is_empty() {
            Vec::new()
        } else {
            let request = VerifySharesRequest {
                collection_id: id.clone(),
                reports: started.to_helper.clone(),
            };
            self.helper()
                .verify_shares(request)
                .await
                .map_err(VerifyError::Helper)?
                .into_inner()
                .verdicts
        };
        let (valid, refused) = tokio::task::spawn_blocking(move || {
            let round = RoundContext {
                vdaf: &vdaf,
                verify_key: &verify_key,
                ctx: &ctx,
            };
            leader_finish_batch(&round, started, verdicts)
        })
        .await
        .map_err(|e| VerifyError::Internal(e.to_string()))?
        .map_err(|e| VerifyError::Answer(e.to_string()))?;
        let outcome = match self.store.submit_from_queue(&id, valid, done).await {
            Ok(o) => o,
            Err(StoreError::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        crate::telemetry::counted(&id, outcome.accepted, outcome.duplicates);
        if refused > 0 {
            crate::telemetry::rejected(&id, tonic::Code::InvalidArgument, refused);
        }
        tracing::debug!(collection = %id, accepted = outcome.accepted, duplicates = outcome.duplicates, refused, "two-aggregator batch counted");
        Ok(full)
    }
}
