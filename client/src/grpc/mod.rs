//! The async gRPC client (feature `grpc`, on by default): [`AggregatorClient`].

use crate::NoiseSampler;
use crate::perturb::random_report_id;
use crate::report_builder::{PreparedRelayReport, ReportBuilder, require_shuffled};
use crate::{BudgetLedger, ClientError, PrivacyPolicy};
use ldpcov_privacy::{Collection, ReportId};
use ldpcov_proto::retry::Backoff;
pub use ldpcov_proto::retry::is_retryable;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::relay_client::RelayClient as RawRelayClient;
use ldpcov_proto::v1::{
    CloseCollectionRequest, CollectionParams, CollectionSpec, CollectionStatus,
    CreateCollectionRequest, DeleteCollectionRequest, Estimate, GetCollectionRequest,
    GetEstimateRequest, GetStatusRequest, RelayReport, Report, SealedReport, SubmitReportsResponse,
};
use ldpcov_seal::PublicKeyConfig;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Response, Status};

/// Adds `authorization: Bearer <token>` to every call when a token is set.
#[derive(Clone, Default)]
struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Stub = RawClient<InterceptedService<Channel, BearerToken>>;
type RelayStub = RawRelayClient<InterceptedService<Channel, BearerToken>>;

/// Builds a bearer-token interceptor (see [`AggregatorClient::with_token`]).
fn bearer_token(token: &str) -> Result<BearerToken, ClientError> {
    let token = token.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ClientError::InvalidToken);
    }
    let mut value: MetadataValue<Ascii> = format!("Bearer {token}")
        .parse()
        .map_err(|_| ClientError::InvalidToken)?;
    value.set_sensitive(true);
    Ok(BearerToken(Some(value)))
}

/// Largest gRPC message sent or accepted: 256 MiB (an estimate at p = 4096 is 67 MB).
pub const MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// How failed calls are retried: exponential backoff with jitter.
///
/// The n-th retry waits a uniformly random time in `[b/2, b]` with
/// `b = min(initial_backoff·2ⁿ⁻¹, max_backoff)`. Only transient failures are retried
/// (see [`is_retryable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls made at most, the first included (0 is treated as 1).
    pub max_attempts: u32,
    /// Backoff before the first retry.
    pub initial_backoff: Duration,
    /// Cap on the backoff.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts, backoff 50 ms doubling up to 2 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The backoff between attempts: from `initial_backoff`, doubling, capped at
    /// `max_backoff`, with jitter.
    fn backoff(&self) -> Backoff {
        Backoff {
            first: self.initial_backoff,
            max: self.max_backoff,
            jitter: true,
        }
    }

    /// One attempt, no retries.
    pub fn no_retries() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
}

/// What happened to a submitted report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitOutcome {
    /// The id the report was sent under.
    pub report_id: ReportId,
    /// The aggregator had already counted this id (typically: an earlier attempt got
    /// through but its acknowledgement was lost). The report is counted exactly once
    /// either way.
    pub duplicate: bool,
    /// Calls made, retries included.
    pub attempts: u32,
}

/// An ldpcov aggregator client: fetch collections, submit reports, admin calls.
///
/// [`AggregatorClient::submit`] builds the whole report — clip, noise, encoding, a
/// fresh random report id — before touching the network, then sends it with retries
/// that resend the *same* bytes under the *same* id: the aggregator counts an id at
/// most once, so a retry after a lost acknowledgement is harmless, and no second noisy
/// copy of `x` ever leaves the device.
///
/// ```no_run
/// use ldpcov_client::{AggregatorClient, RetryPolicy};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), ldpcov_client::ClientError> {
/// let mut client = AggregatorClient::connect("http://127.0.0.1:50051")
///     .await?
///     .with_retry(RetryPolicy {
///         max_attempts: 8,
///         ..RetryPolicy::default()
///     })
///     .with_timeout(Duration::from_secs(10));
/// // Parameters are re-derived locally and checked against the privacy policy.
/// let collection = client.collection("survey-2024").await?;
/// let x = vec![0.0; collection.dim()];
/// let outcome = client.submit(&collection, &x).await?;
/// println!("sent in {} attempt(s)", outcome.attempts);
/// # Ok(())
/// # }
/// ```
///
/// It holds one OS-seeded exact [`DiscreteGaussianSampler`](crate::DiscreteGaussianSampler) for its whole lifetime (replace it with
/// [`with_noise_sampler`](AggregatorClient::with_noise_sampler) in simulations). It
/// never logs vectors, reports or payloads; retries are logged at `debug` level with
/// the method name and status code only.
pub struct AggregatorClient {
    channel: Channel,
    inner: Stub,
    retry: RetryPolicy,
    timeout: Option<Duration>,
    /// Builds every report this client sends (policy, clip, id, ledger, noise, seal).
    pub(crate) device: ReportBuilder,
    /// The relay shuffled collections' reports go through, with the device's token.
    relay: Option<RelayStub>,
    /// The active key of each shuffled collection fetched, as its server declared it.
    active_keys: HashMap<String, PublicKeyConfig>,
    /// The relay's own key, from its last answer (the layer every report to it gets).
    relay_key: Option<PublicKeyConfig>,
    /// The helper of two-aggregator collections, asked for its keys directly.
    helper: Option<Stub>,
    /// The helper's active key of each two-aggregator collection fetched, as the helper
    /// itself published it.
    helper_keys: HashMap<String, PublicKeyConfig>,
}

impl std::fmt::Debug for AggregatorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorClient")
            .field("retry", &self.retry)
            .field("device", &self.device)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

mod two_aggregator;

impl AggregatorClient {
    /// Connects to the aggregator at `url` (e.g. `http://127.0.0.1:50051`) now, failing
    /// with [`ClientError::Transport`] if the URL is bad or the server unreachable.
    pub async fn connect(url: impl Into<String>) -> Result<Self, ClientError> {
        let channel = Endpoint::from_shared(url.into())?.connect().await?;
        Self::from_channel(channel)
    }

    /// Like [`connect`](AggregatorClient::connect) but connects on the first call (a
    /// server that is not up yet then shows up as a retryable `UNAVAILABLE`). Fails only
    /// on a bad URL.
    pub fn connect_lazy(url: impl Into<String>) -> Result<Self, ClientError> {
        let channel = Endpoint::from_shared(url.into())?.connect_lazy();
        Self::from_channel(channel)
    }

    /// Connects over TLS to an `https://` URL now. `ca_pem` is the PEM certificate
    /// of the CA to trust (e.g. a private CA or a self-signed server certificate);
    /// `None` trusts the public web PKI roots bundled with the client.
    pub async fn connect_with_tls(
        url: impl Into<String>,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, ClientError> {
        let tls = match ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_webpki_roots(),
        };
        let channel = Endpoint::from_shared(url.into())?
            .tls_config(tls)?
            .connect()
            .await?;
        Self::from_channel(channel)
    }

    /// A client over an existing channel (for TLS or custom endpoint settings).
    /// Fails only if the operating system's random number generator does.
    pub fn from_channel(channel: Channel) -> Result<Self, ClientError> {
        Ok(AggregatorClient {
            inner: Self::stub(channel.clone(), BearerToken::default()),
            channel,
            retry: RetryPolicy::default(),
            timeout: None,
            device: ReportBuilder::new()?,
            relay: None,
            active_keys: HashMap::new(),
            relay_key: None,
            helper: None,
            helper_keys: HashMap::new(),
        })
    }

    /// Sends shuffled collections' reports through the relay on `channel`, with the
    /// device's relay token (`ldpcov-relay issue-device-token`), sealed to the
    /// collection's key so that the relay cannot read them (docs/PRIVACY.md §9).
    /// Without a relay, [`submit`](Self::submit) refuses a shuffled collection.
    pub fn with_relay(mut self, channel: Channel, device_token: &str) -> Result<Self, ClientError> {
        let stub = RawRelayClient::with_interceptor(channel, bearer_token(device_token)?)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        self.relay = Some(stub);
        Ok(self)
    }

    fn stub(channel: Channel, token: BearerToken) -> Stub {
        RawClient::with_interceptor(channel, token)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }

    /// Sends `authorization: Bearer <token>` with every call from now on (a submit
    /// token for devices, the admin token for admin calls). Fails with
    /// [`ClientError::InvalidToken`] unless the token is visible ASCII.
    pub fn with_token(mut self, token: String) -> Result<Self, ClientError> {
        self.inner = Self::stub(self.channel.clone(), bearer_token(&token)?);
        Ok(self)
    }

    /// Sets the retry policy (default: [`RetryPolicy::default`]).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the privacy floor checked on every collection (default:
    /// [`PrivacyPolicy::default`]).
    pub fn with_privacy_policy(mut self, policy: PrivacyPolicy) -> Self {
        self.device = self.device.with_privacy_policy(policy);
        self
    }

    /// Gives up on an attempt after `timeout` (a retryable `DEADLINE_EXCEEDED`).
    /// Default: no timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Replaces the noise sampler, e.g. by
    /// [`DiscreteGaussianSampler::from_seed_for_simulation`](crate::DiscreteGaussianSampler::from_seed_for_simulation) in simulations. Anything but a
    /// cryptographically seeded sampler makes the reports non-private. Takes any
    /// sampler, boxed (`Box<dyn NoiseSampler + Send>`) or not.
    pub fn with_noise_sampler(mut self, noise: impl NoiseSampler + Send + 'static) -> Self {
        self.device = self.device.with_noise_sampler(noise);
        self
    }

    /// The kind of noise sampler in use (`"exact-discrete-gaussian"` unless replaced).
    pub fn noise_sampler_kind(&self) -> &'static str {
        self.device.noise_sampler_kind()
    }

    /// Charges every report this client builds to `ledger` first: a report that would
    /// exceed the device's budget is refused with [`ClientError::Budget`] before any
    /// noise is drawn, and a report is only built once its spend is on disk. Resending
    /// a prepared report (retries) spends nothing more.
    pub fn with_ledger(mut self, ledger: BudgetLedger) -> Self {
        self.device = self.device.with_ledger(ledger);
        self
    }

    /// The budget ledger, if one is attached.
    pub fn ledger(&self) -> Option<&BudgetLedger> {
        self.device.ledger()
    }

    /// Fetches a collection's parameters, re-derives them locally from the spec and
    /// checks them against the privacy policy.
    ///
    /// With a relay ([`with_relay`](Self::with_relay)) the parameters come from the
    /// relay alone — its pinned copy, the same for every device, with the key bytes it
    /// pinned and its own key — and no call reaches the aggregator, which so never
    /// learns which device asks or when (docs/PRIVACY.md §9). A relay serves shuffled
    /// collections only: use a client without a relay for the others.
    ///
    /// Fails with [`ClientError::Params`] if the server's derived parameters (σ, grid,
    /// bound) disagree with the local derivation — a server cannot lower the noise —
    /// and with [`ClientError::PolicyViolation`] if ε or δ exceed the policy.
    pub async fn collection(&mut self, id: &str) -> Result<Collection, ClientError> {
        let request = GetCollectionRequest {
            collection_id: id.to_string(),
        };
        let params = match self.relay.clone() {
            Some(relay) => {
                retrying(
                    self.retry,
                    self.timeout,
                    "Relay/GetCollection",
                    relay,
                    |mut c| {
                        let request = request.clone();
                        async move { c.get_collection(request).await }
                    },
                )
                .await
                .map_err(|(status, _)| status)?
                .0
            }
            None => {
                self.call("GetCollection", |mut c| {
                    let request = request.clone();
                    async move { c.get_collection(request).await }
                })
                .await
                .map_err(|(status, _)| status)?
                .0
            }
        };
        // The one derivation of this collection on the device: its σ, grid and bound
        // are checked against the server's, so a server cannot lower the noise.
        let collection = Collection::from_params(&params)?;
        if collection.id() != id {
            return Err(ClientError::CollectionMismatch {
                requested: id.to_string(),
                got: collection.id().to_string(),
            });
        }
        self.device.policy().check(&collection)?;
        if self.relay.is_some() {
            // The relay's copy must be a shuffled collection's, with the relay's key.
            let shuffle = match (&params.shuffle, collection.shuffle()) {
                (Some(shuffle), Some(_)) => shuffle,
                _ => {
                    return Err(ClientError::RelayMismatch {
                        id: id.to_string(),
                        reason: "the relay answered a collection that is not shuffled".into(),
                    });
                }
            };
            let relay_key =
                crate::shuffle::relay_key(shuffle).map_err(|e| ClientError::RelayMismatch {
                    id: id.to_string(),
                    reason: e.to_string(),
                })?;
            self.relay_key = Some(relay_key);
        }
        if collection.is_two_aggregator() {
            self.fetch_helper_key(&collection).await?;
        }
        // A shuffled collection's active key, kept for sealing (refetched when its
        // period ends); a collection without a usable one fails when a report is sealed.
        if let Some(shuffle) = &params.shuffle {
            match crate::shuffle::active_key(&shuffle.keys) {
                Ok(key) => {
                    self.active_keys.insert(id.to_string(), key);
                }
                Err(_) => {
                    self.active_keys.remove(id);
                }
            }
        }
        Ok(collection)
    }

    /// Builds a shuffled collection's report for `x` and seals it to the collection's
    /// active key only: the report exactly as [`prepare_report`](Self::prepare_report)
    /// builds it (ledger charged, noise drawn), encoded and sealed — what a relay
    /// forwards to the aggregator, and what [`prepare_relay_report`](Self::prepare_relay_report)
    /// wraps in the relay's layer. Fetches the collection again first when its active
    /// key is unknown or its period has ended.
    pub async fn prepare_sealed_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<(ReportId, SealedReport), ClientError> {
        require_shuffled(collection)?;
        let key = self.fresh_active_key(collection).await?;
        self.device.sealed_report(collection, &key, x)
    }

    /// The collection's active key, fetched again when unknown or past its period (or,
    /// with a relay, when the relay's key is unknown).
    async fn fresh_active_key(
        &mut self,
        collection: &Collection,
    ) -> Result<PublicKeyConfig, ClientError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let fresh = self
            .active_keys
            .get(collection.id())
            .is_some_and(|k| now < k.active_until)
            && (self.relay.is_none() || self.relay_key.is_some());
        if !fresh {
            let refetched = self.collection(collection.id()).await?;
            if &refetched != collection {
                return Err(ClientError::CollectionMismatch {
                    requested: collection.id().to_string(),
                    got: refetched.id().to_string(),
                });
            }
        }
        self.active_keys
            .get(collection.id())
            .cloned()
            .ok_or_else(|| {
                ClientError::Sealing("the collection publishes no usable active key".into())
            })
    }

    /// Builds a shuffled collection's report for `x` and seals it for the relay:
    /// [`prepare_sealed_report`](Self::prepare_sealed_report), then that sealed once
    /// more to the relay's own key ([`seal_for_relay`](crate::seal_for_relay)), under a
    /// fresh submission id. Resend the result with
    /// [`submit_relay_report`](Self::submit_relay_report).
    pub async fn prepare_relay_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<PreparedRelayReport, ClientError> {
        if self.relay.is_none() {
            return Err(ClientError::Sealing(format!(
                "collection {} is shuffled: its reports go through a relay (with_relay)",
                collection.id()
            )));
        }
        require_shuffled(collection)?;
        let key = self.fresh_active_key(collection).await?;
        let relay_key = self.relay_key.clone().ok_or_else(|| {
            ClientError::Sealing("no relay key: the relay's answer had none".into())
        })?;
        self.device.relay_report(collection, &key, &relay_key, x)
    }

    /// Sends a sealed report to the relay, retrying transient failures with the same
    /// bytes and submission id (the relay stores a submission once).
    pub async fn submit_relay_report(
        &mut self,
        prepared: &PreparedRelayReport,
    ) -> Result<SubmitOutcome, ClientError> {
        let relay = self
            .relay
            .clone()
            .ok_or_else(|| ClientError::Sealing("no relay configured (with_relay)".into()))?;
        let request = Arc::new(prepared.request.clone());
        let (response, attempts) = retrying(
            self.retry,
            self.timeout,
            "SubmitSealedReport",
            relay,
            |mut c| {
                let request = RelayReport::clone(&request);
                async move { c.submit_sealed_report(request).await }
            },
        )
        .await
        .map_err(|(status, _)| status)?;
        Ok(SubmitOutcome {
            report_id: prepared.report_id,
            duplicate: response.duplicate,
            attempts,
        })
    }

    /// Builds a complete report for `x` without sending it: checks the collection
    /// against the privacy policy, clips, draws the noise, encodes, and picks a
    /// fresh random report id.
    ///
    /// Keep the report and resend it (with [`submit_report`](Self::submit_report)) if
    /// sending fails; building a second report for the same `x` spends the privacy
    /// budget again.
    pub fn prepare_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<Report, ClientError> {
        self.device.report(collection, x)
    }

    /// Builds the radius-phase report of `x` for a collection whose clip radius is
    /// still being chosen, without sending it
    /// ([`ReportBuilder::radius_phase_report`](crate::ReportBuilder::radius_phase_report)):
    /// send it with [`submit_report`](Self::submit_report) or in a stream.
    pub fn prepare_radius_phase_report(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<Report, ClientError> {
        self.device.radius_phase_report(collection, x)
    }

    /// Perturbs `x` and submits it: the report (noise, bytes, random id) is built
    /// completely before any network call, then sent with retries that reuse the same
    /// report and id.
    ///
    /// For a collection whose clip radius is still being chosen
    /// ([`Collection::radius_pending`]), what is sent is the radius-phase report of `x`
    /// ([`ReportBuilder::radius_phase_report`](crate::ReportBuilder::radius_phase_report):
    /// the noisy interval of its norm, to the phase's collection). Fetch the collection
    /// again once the phase is closed, and submit the vector itself.
    pub async fn submit(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<SubmitOutcome, ClientError> {
        if collection.shuffle().is_some() {
            // A shuffled collection: sealed, through the relay (refused before any
            // noise is drawn when no relay is configured).
            if self.relay.is_none() {
                return Err(ClientError::Sealing(format!(
                    "collection {} is shuffled: its reports go through a relay (with_relay)",
                    collection.id()
                )));
            }
            let prepared = self.prepare_relay_report(collection, x).await?;
            return self.submit_relay_report(&prepared).await;
        }
        if collection.is_two_aggregator() {
            let report = self.prepare_two_aggregator_report(collection, x)?;
            return self.upload_two_aggregator_report(report).await;
        }
        if collection.radius_pending() {
            // The radius is still being chosen: the norm's interval, to the phase.
            let report = self.prepare_radius_phase_report(collection, x)?;
            return self.submit_report(report).await;
        }
        let report = self.prepare_report(collection, x)?;
        self.submit_report(report).await
    }

    /// **Trusted curator only**: sends `x`, clipped and on the grid but WITHOUT noise,
    /// to a central collection, whose operator sees it
    /// ([`trusted_curator_report`](crate::trusted_curator_report)); retried like
    /// [`submit_report`](Self::submit_report). Refuses a local collection: there,
    /// [`submit`](Self::submit) perturbs on the device.
    pub async fn submit_to_trusted_curator(
        &mut self,
        collection: &Collection,
        x: &[f64],
    ) -> Result<SubmitOutcome, ClientError> {
        let report = if collection.radius_pending() {
            // The radius is still being chosen: the norm's interval, to the phase.
            crate::trusted_curator_radius_phase_report(collection, x, random_report_id()?)?
        } else {
            crate::trusted_curator_report(collection, x, random_report_id()?)?
        };
        self.submit_report(report).await
    }

    /// Sends a prebuilt report, retrying transient failures with the same bytes.
    pub async fn submit_report(&mut self, report: Report) -> Result<SubmitOutcome, ClientError> {
        let report_id = ReportId::try_from(report.report_id.as_slice())?;
        self.send_retried(
            "SubmitReport",
            report_id,
            report,
            |mut c, report| async move { c.submit_report(report).await },
            |r| r.duplicate,
        )
        .await
    }

    /// Sends one report message `message` (carrying `report_id`) through `method`,
    /// retrying transient failures with the same bytes; `duplicate` reads whether the
    /// server had already counted the id.
    async fn send_retried<M, R, F, Fut>(
        &mut self,
        method: &'static str,
        report_id: ReportId,
        message: M,
        mut send: F,
        duplicate: fn(&R) -> bool,
    ) -> Result<SubmitOutcome, ClientError>
    where
        M: Clone,
        F: FnMut(Stub, M) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let message = Arc::new(message);
        let (response, attempts) = self
            .call(method, |c| send(c, M::clone(&message)))
            .await
            .map_err(|(status, _)| status)?;
        Ok(SubmitOutcome {
            report_id,
            duplicate: duplicate(&response),
            attempts,
        })
    }

    /// Sends prebuilt reports on one client stream (`SubmitReports`). On a retryable
    /// failure the whole batch is sent again: reports counted by a failed attempt come
    /// back as duplicates, so `accepted + duplicates` always equals the batch size but
    /// `accepted` counts only what the last attempt added.
    pub async fn submit_stream(
        &mut self,
        reports: Vec<Report>,
    ) -> Result<SubmitReportsResponse, ClientError> {
        for report in &reports {
            ReportId::try_from(report.report_id.as_slice())?;
        }
        let reports: Arc<[Report]> = reports.into();
        let (response, _) = self
            .call("SubmitReports", |mut c| {
                let reports = Arc::clone(&reports);
                async move {
                    let stream =
                        tokio_stream::iter(0..reports.len()).map(move |i| reports[i].clone());
                    c.submit_reports(stream).await
                }
            })
            .await
            .map_err(|(status, _)| status)?;
        Ok(response)
    }

    /// Admin: creates a collection and returns its parameters.
    ///
    /// Retried like any call; if a retry meets `ALREADY_EXISTS` (the first attempt got
    /// through, its answer was lost), the existing collection is fetched and returned
    /// when its spec equals `spec`.
    pub async fn create_collection(
        &mut self,
        spec: CollectionSpec,
    ) -> Result<CollectionParams, ClientError> {
        let request = CreateCollectionRequest {
            spec: Some(spec.clone()),
        };
        let result = self
            .call("CreateCollection", |mut c| {
                let request = request.clone();
                async move { c.create_collection(request).await }
            })
            .await;
        match result {
            Ok((params, _)) => Ok(params),
            Err((status, attempts)) if status.code() == Code::AlreadyExists && attempts > 1 => {
                let request = GetCollectionRequest {
                    collection_id: spec.collection_id.clone(),
                };
                let existing = self
                    .call("GetCollection", |mut c| {
                        let request = request.clone();
                        async move { c.get_collection(request).await }
                    })
                    .await;
                match existing {
                    Ok((params, _)) if same_spec(params.spec.as_ref(), &spec) => Ok(params),
                    _ => Err(ClientError::Status(status)),
                }
            }
            Err((status, _)) => Err(ClientError::Status(status)),
        }
    }

    /// Count and parameters of a collection.
    pub async fn status(&mut self, id: &str) -> Result<CollectionStatus, ClientError> {
        let request = GetStatusRequest {
            collection_id: id.to_string(),
        };
        let (status, _) = self
            .call("GetStatus", |mut c| {
                let request = request.clone();
                async move { c.get_status(request).await }
            })
            .await
            .map_err(|(status, _)| status)?;
        Ok(status)
    }

    /// Admin: closes a collection (it takes no more reports) and returns its status.
    pub async fn close_collection(&mut self, id: &str) -> Result<CollectionStatus, ClientError> {
        let request = CloseCollectionRequest {
            collection_id: id.to_string(),
        };
        let (status, _) = self
            .call("CloseCollection", |mut c| {
                let request = request.clone();
                async move { c.close_collection(request).await }
            })
            .await
            .map_err(|(status, _)| status)?;
        Ok(status)
    }

    /// Admin: deletes a collection for good (spec, sums, seen report ids) and returns
    /// the number of reports it had counted. A retry after a lost answer may find the
    /// collection already gone (`NOT_FOUND`). Deleting refunds no privacy budget: the
    /// device's ledger is kept on the device.
    pub async fn delete_collection(&mut self, id: &str) -> Result<u64, ClientError> {
        let request = DeleteCollectionRequest {
            collection_id: id.to_string(),
        };
        let (response, _) = self
            .call("DeleteCollection", |mut c| {
                let request = request.clone();
                async move { c.delete_collection(request).await }
            })
            .await
            .map_err(|(status, _)| status)?;
        Ok(response.reports)
    }

    /// Admin: the released estimate.
    pub async fn estimate(&mut self, request: GetEstimateRequest) -> Result<Estimate, ClientError> {
        let (estimate, _) = self
            .call("GetEstimate", |mut c| {
                let request = request.clone();
                async move { c.get_estimate(request).await }
            })
            .await
            .map_err(|(status, _)| status)?;
        Ok(estimate)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry policy is spent.
    /// Returns the answer or the last status, with the number of attempts made.
    // `&mut self`, not `&self`: the future then needs only `AggregatorClient: Send`
    // (the boxed noise sampler is `Send`, not `Sync`).
    async fn call<T, F, Fut>(
        &mut self,
        method: &'static str,
        attempt: F,
    ) -> Result<(T, u32), (Status, u32)>
    where
        F: FnMut(Stub) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        retrying(
            self.retry,
            self.timeout,
            method,
            self.inner.clone(),
            attempt,
        )
        .await
    }
}

/// Calls `attempt` on clones of `stub` until it succeeds, fails for good, or `retry`
/// gives up, with the number of attempts made.
async fn retrying<S, T, F, Fut>(
    retry: RetryPolicy,
    timeout: Option<Duration>,
    method: &'static str,
    stub: S,
    mut attempt: F,
) -> Result<(T, u32), (Status, u32)>
where
    S: Clone,
    F: FnMut(S) -> Fut,
    Fut: Future<Output = Result<Response<T>, Status>>,
{
    {
        let max_attempts = retry.max_attempts.max(1);
        let policy = retry.backoff();
        let mut backoff = policy.next(None);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let call = attempt(stub.clone());
            let result = match timeout {
                Some(limit) => match tokio::time::timeout(limit, call).await {
                    Ok(result) => result,
                    Err(_) => Err(Status::deadline_exceeded(format!(
                        "{method}: no answer within {limit:?}"
                    ))),
                },
                None => call.await,
            };
            match result {
                Ok(response) => return Ok((response.into_inner(), attempts)),
                Err(status) if attempts < max_attempts && is_retryable(&status) => {
                    let wait = policy.wait(backoff);
                    tracing::debug!(
                        method,
                        attempt = attempts,
                        code = ?status.code(),
                        wait_ms = wait.as_millis() as u64,
                        "retrying aggregator call"
                    );
                    tokio::time::sleep(wait).await;
                    backoff = policy.next(Some(backoff));
                }
                Err(status) => {
                    tracing::debug!(method, attempts, code = ?status.code(), "aggregator call failed");
                    return Err((status, attempts));
                }
            }
        }
    }
}

/// Whether `existing` (as the server returned it) describes the same collection as
/// `ours` (as sent to CreateCollection) after normalisation: an unspecified encoding
/// made explicit, and an unspecified `moments` read as the create path reads it.
fn same_spec(existing: Option<&CollectionSpec>, ours: &CollectionSpec) -> bool {
    match (
        existing.map(Collection::from_spec),
        Collection::create(ours),
    ) {
        (Some(Ok(existing)), Ok(ours)) => existing.spec() == ours.spec(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
