//! The relay's side of the aggregator: its collections' public parameters and state
//! (`GetStatus`: the parameters with the published keys, and whether the collection
//! is closed; cached), the batch stream (`SubmitShuffledBatch`), and the check that
//! the aggregator accepts the relay's token ([`Upstream::check_token`]: a batch
//! stream with no chunk, which counts nothing), whose last verdict is
//! [`Upstream::reach`].
//!
//! During an outage (the last token check failed, or a fetch fails), a lookup that
//! may be served from the cache gets the last good answer, up to one key rotation
//! old: devices' reports are still stored and wait for the aggregator. A lookup that
//! asks for a fresh answer (`max_age` zero: the forwarder's) gets the failure.
//!
//! Every call carries `authorization: Bearer <relay token>` and nothing else of the
//! relay's: no device token, device id, address or per-report time. One batch is one
//! call.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldpcov_privacy::shuffle::ShuffleSettings;
use ldpcov_proto::v1::aggregator_client::AggregatorClient;
use ldpcov_proto::v1::{
    GetStatusRequest, HpkeKeyState, HpkePublicKey, SealedReport, ShuffledBatchChunk,
    ShuffledBatchResponse,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

use crate::batch_rule::CloseRule;
use crate::pin::PinnedSettings;
use crate::store::PendingBatch;
use crate::token::Secret;

/// How long a collection's parameters are used before they are fetched again.
pub const COLLECTION_TTL: Duration = Duration::from_secs(60);
/// How long a refusal of the aggregator (unknown or unshuffled collection) is reused.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// Parameters at least this old are fetched again when a report names a key id they
/// do not list (the keys rotate).
pub const KEY_REFRESH_AGE: Duration = Duration::from_secs(2);
/// Most collections cached; beyond, the cache is emptied.
const MAX_CACHED: usize = 10_000;
/// Most reports in one message of a batch stream.
pub const CHUNK_REPORTS: usize = 1000;
/// Most bytes of sealed reports in one message of a batch stream.
pub const CHUNK_BYTES: usize = 2 << 20;
/// Longest a `GetCollection` may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the aggregator connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The aggregator URL does not parse.
    #[error("invalid aggregator URL {0:?}: give http://HOST:PORT or https://HOST:PORT")]
    Url(String),
    /// The CA certificate could not be read.
    #[error("cannot read the aggregator CA certificate {path}")]
    Ca {
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TLS could not be configured.
    #[error("aggregator TLS: {0}")]
    Tls(#[from] tonic::transport::Error),
}

/// What the relay needs of a shuffled collection.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionInfo {
    /// When its window becomes a batch, as the aggregator announces it (the relay
    /// closes windows by the larger of this and its own floor: [`crate::Gate`]).
    pub rule: CloseRule,
    /// The settings its guarantee depends on, as announced now.
    pub pinned: Arc<PinnedSettings>,
    /// The published keys, as the aggregator sent them (what the relay serves
    /// devices).
    pub keys: Vec<HpkePublicKey>,
    /// The key ids published as active or pending (empty: the aggregator publishes
    /// none, and the key schedule decides).
    pub key_ids: Vec<u32>,
    /// The key rotation period, seconds.
    pub key_rotation_seconds: u64,
    /// Largest sealed ciphertext accepted, bytes.
    pub max_ciphertext: usize,
    /// The aggregator closed the collection: it takes no more reports.
    pub closed: bool,
}

impl CollectionInfo {
    /// Whether a report sealed to `key_id` is acceptable now: an active or pending key
    /// of the published ones, or, when none is published, the key of the current
    /// period or the next (`⌊now / rotation⌋`, ldpcov-seal's schedule).
    pub fn accepts_key(&self, key_id: u32, now: u64) -> bool {
        if !self.key_ids.is_empty() {
            return self.key_ids.contains(&key_id);
        }
        let current = now / self.key_rotation_seconds.max(1);
        let key_id = u64::from(key_id);
        key_id == current || key_id == current + 1
    }

    /// From `GetCollection`'s answer: FAILED_PRECONDITION for a collection that is not
    /// shuffled.
    pub fn from_params(
        id: &str,
        params: &ldpcov_proto::v1::CollectionParams,
    ) -> Result<Self, Status> {
        let spec = params
            .spec
            .as_ref()
            .ok_or_else(|| Status::internal("the aggregator sent parameters without a spec"))?;
        let shuffle = spec.shuffle.as_ref().ok_or_else(|| {
            Status::failed_precondition(format!(
                "collection {id} is not shuffled: send its reports to the aggregator directly"
            ))
        })?;
        let settings = ShuffleSettings::from_spec(shuffle).map_err(|e| {
            Status::failed_precondition(format!("collection {id}: bad shuffle settings: {e}"))
        })?;
        let key_ids = params
            .shuffle
            .as_ref()
            .map(|s| {
                s.keys
                    .iter()
                    .filter(|k| {
                        matches!(
                            HpkeKeyState::try_from(k.state),
                            Ok(HpkeKeyState::Active | HpkeKeyState::Pending)
                        )
                    })
                    .map(|k| k.key_id)
                    .collect()
            })
            .unwrap_or_default();
        // The plaintext is an encoded Report: at most 4 bytes per entry (i32), the
        // collection id, the report id and framing; the AEAD adds a 16-byte tag.
        let entries = params.entries as usize;
        let pinned = PinnedSettings::from_params(params).ok_or_else(|| {
            Status::internal("the aggregator sent shuffle settings without a spec")
        })?;
        Ok(CollectionInfo {
            pinned: Arc::new(pinned),
            keys: params
                .shuffle
                .as_ref()
                .map(|s| s.keys.clone())
                .unwrap_or_default(),
            rule: CloseRule {
                min_batch_size: settings.min_batch_size(),
                window_seconds: settings.batch_window_seconds(),
            },
            key_ids,
            key_rotation_seconds: settings.key_rotation_seconds(),
            max_ciphertext: 4 * entries + 1024,
            closed: false,
        })
    }
}

struct Cached {
    fetched: Instant,
    result: Result<Arc<CollectionInfo>, Status>,
    /// The last good answer and when it came (served during an outage).
    good: Option<(Instant, Arc<CollectionInfo>)>,
}

/// The relay's view of the aggregator, as its last token check found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Not checked yet.
    Unknown,
    /// It answers and accepts the relay's token.
    Accepted,
    /// It could not be reached (or did not answer in time) since `since`.
    Unreachable {
        /// Since when: the last check it answered accepting the relay (or, without
        /// one since its start or since it last refused the relay, the first failed
        /// check).
        since: Instant,
        /// The last failure.
        message: String,
    },
    /// It answers and refuses the relay's token (UNAUTHENTICATED, PERMISSION_DENIED,
    /// or FAILED_PRECONDITION: it takes batches from no relay).
    Refused {
        /// Its status code.
        code: Code,
        /// Its message.
        message: String,
    },
}

impl Reach {
    /// One line for the relay's status: `accepted`, `unreachable for N s`,
    /// `refused: …` or `unknown`.
    pub fn describe(&self) -> String {
        match self {
            Reach::Unknown => "unknown".into(),
            Reach::Accepted => "accepted".into(),
            Reach::Unreachable { since, message } => {
                format!("unreachable for {} s: {message}", since.elapsed().as_secs())
            }
            Reach::Refused { code, message } => format!("refused: {code:?}: {message}"),
        }
    }
}

/// Longest a token check may take.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The aggregator, as the relay sees it. Cloning shares the connection and the cache.
#[derive(Clone)]
pub struct Upstream {
    channel: Channel,
    token: Secret,
    cache: Arc<Mutex<HashMap<String, Cached>>>,
    ttl: Duration,
    reach: Arc<Mutex<Reach>>,
    /// When a token check last found the aggregator accepting the relay.
    last_accepted: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

impl Upstream {
    /// A lazy connection to `url` (`https://` uses TLS: `ca_pem` if given, else the
    /// web PKI roots), presenting `token`.
    pub fn new(url: &str, token: Secret, ca_pem: Option<Vec<u8>>) -> Result<Self, UpstreamError> {
        let mut endpoint =
            Endpoint::from_shared(url.to_string()).map_err(|_| UpstreamError::Url(url.into()))?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(UpstreamError::Url(url.into()));
        }
        if url.starts_with("https://") {
            let tls = match ca_pem {
                Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
                None => ClientTlsConfig::new().with_webpki_roots(),
            };
            endpoint = endpoint.tls_config(tls)?;
        }
        let channel = endpoint
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .connect_lazy();
        Ok(Upstream {
            channel,
            token,
            cache: Arc::default(),
            ttl: COLLECTION_TTL,
            reach: Arc::new(Mutex::new(Reach::Unknown)),
            last_accepted: Arc::default(),
        })
    }

    /// Replaces [`COLLECTION_TTL`] (tests: a collection whose settings change).
    pub fn with_collection_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        let value = format!("Bearer {}", self.token.expose());
        match value.parse() {
            Ok(v) => {
                request.metadata_mut().insert("authorization", v);
            }
            // Secret::new admits visible ASCII only, always a valid header value.
            Err(_) => unreachable!("a checked token is a valid header value"),
        }
        request
    }

    fn cached(
        &self,
        id: &str,
        max_age: Option<Duration>,
    ) -> Option<Result<Arc<CollectionInfo>, Status>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache.get(id)?;
        let ttl = if entry.result.is_ok() {
            self.ttl
        } else {
            NEGATIVE_TTL.min(self.ttl)
        };
        let ttl = max_age.map_or(ttl, |m| m.min(ttl));
        (!ttl.is_zero() && entry.fetched.elapsed() < ttl).then(|| entry.result.clone())
    }

    /// The aggregator as the last token check found it.
    pub fn reach(&self) -> Reach {
        self.reach.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the last token check found the aggregator accepting the relay's token.
    pub fn token_accepted(&self) -> bool {
        self.reach() == Reach::Accepted
    }

    /// Checks that the aggregator accepts the relay's token: a `SubmitShuffledBatch`
    /// stream with no chunk (it counts nothing), within 5 s. Records the
    /// verdict ([`reach`](Self::reach)) and returns the aggregator's status on failure.
    pub async fn check_token(&self) -> Result<(), Status> {
        let mut request = self.request(tokio_stream::iter(Vec::<ShuffledBatchChunk>::new()));
        request.set_timeout(CHECK_TIMEOUT);
        let mut client = AggregatorClient::new(self.channel.clone());
        let result = client.submit_shuffled_batch(request).await.map(drop);
        let now = match &result {
            Ok(()) => {
                *self.last_accepted.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Instant::now());
                Reach::Accepted
            }
            // FAILED_PRECONDITION: it takes batches from no relay at all.
            Err(s) if is_refusal(s.code()) || s.code() == Code::FailedPrecondition => {
                Reach::Refused {
                    code: s.code(),
                    message: s.message().to_string(),
                }
            }
            Err(s) => {
                let last_accepted = *self.last_accepted.lock().unwrap_or_else(|p| p.into_inner());
                let since = match &*self.reach.lock().unwrap_or_else(|p| p.into_inner()) {
                    Reach::Unreachable { since, .. } => *since,
                    Reach::Accepted => last_accepted.unwrap_or_else(Instant::now),
                    Reach::Unknown | Reach::Refused { .. } => Instant::now(),
                };
                Reach::Unreachable {
                    since,
                    message: format!("{:?}: {}", s.code(), s.message()),
                }
            }
        };
        *self.reach.lock().unwrap_or_else(|p| p.into_inner()) = now;
        result
    }

    /// A collection's parameters and state, from the cache (fresher than `max_age`,
    /// and than the TTLs) or fetched (`GetStatus`). NOT_FOUND and FAILED_PRECONDITION
    /// (not shuffled) are the aggregator's answer; a failure to reach it, or its
    /// refusal of the relay's token, is UNAVAILABLE — unless `max_age` is not zero and
    /// a good answer less than one key rotation old is at hand: that answer then
    /// (an outage; see the module docs).
    pub async fn collection(
        &self,
        id: &str,
        max_age: Option<Duration>,
    ) -> Result<Arc<CollectionInfo>, Status> {
        if let Some(hit) = self.cached(id, max_age) {
            return hit;
        }
        let stale_ok = max_age != Some(Duration::ZERO);
        // During a known outage, the last good answer without a call that would fail.
        if stale_ok
            && !matches!(self.reach(), Reach::Accepted | Reach::Unknown)
            && let Some(good) = self.last_good(id)
        {
            return Ok(good);
        }
        let mut client = AggregatorClient::new(self.channel.clone());
        let mut request = self.request(GetStatusRequest {
            collection_id: id.to_string(),
        });
        request.set_timeout(LOOKUP_TIMEOUT);
        let result = match client.get_status(request).await {
            Ok(status) => {
                let status = status.into_inner();
                match &status.params {
                    Some(params) => CollectionInfo::from_params(id, params).map(|mut info| {
                        info.closed = status.closed;
                        Arc::new(info)
                    }),
                    None => Err(Status::internal(
                        "the aggregator sent a status without parameters",
                    )),
                }
            }
            Err(s) if s.code() == Code::NotFound => Err(Status::not_found(format!(
                "collection {id} not found at the aggregator"
            ))),
            Err(s) => {
                if is_refusal(s.code()) {
                    tracing::error!(code = ?s.code(), "the aggregator refused the relay's token");
                } else {
                    tracing::warn!(code = ?s.code(), message = s.message(), "cannot fetch a collection from the aggregator");
                }
                if stale_ok && let Some(good) = self.last_good(id) {
                    return Ok(good);
                }
                // Not cached: the next report tries again.
                return Err(Status::unavailable(
                    "the relay cannot reach the aggregator; retry later",
                ));
            }
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        let good = match &result {
            Ok(info) => Some((Instant::now(), Arc::clone(info))),
            Err(_) => None,
        };
        let entry = cache.entry(id.to_string()).or_insert(Cached {
            fetched: Instant::now(),
            result: result.clone(),
            good: None,
        });
        entry.fetched = Instant::now();
        entry.result = result.clone();
        // A refusal of the collection itself (NOT_FOUND, not shuffled) ends its
        // good answer too: only an outage is bridged.
        entry.good = good;
        result
    }

    /// The last good answer for `id`, if less than one key rotation old.
    fn last_good(&self, id: &str) -> Option<Arc<CollectionInfo>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let (at, info) = cache.get(id)?.good.as_ref()?;
        let limit = Duration::from_secs(info.key_rotation_seconds.max(1));
        (at.elapsed() < limit).then(|| Arc::clone(info))
    }

    /// Sends one stored batch as one `SubmitShuffledBatch` call: chunks of at most
    /// [`CHUNK_REPORTS`] reports or [`CHUNK_BYTES`] bytes, each repeating the header.
    pub async fn send_batch(
        &self,
        batch: &PendingBatch,
        reports: Vec<SealedReport>,
        timeout: Duration,
    ) -> Result<ShuffledBatchResponse, Status> {
        let chunks = chunk(batch, reports);
        let mut request = self.request(tokio_stream::iter(chunks));
        request.set_timeout(timeout);
        let mut client = AggregatorClient::new(self.channel.clone())
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        client
            .submit_shuffled_batch(request)
            .await
            .map(tonic::Response::into_inner)
    }
}

/// Whether a status refuses the relay itself (its token, or batches altogether), not
/// a collection or the network.
pub(crate) fn is_refusal(code: Code) -> bool {
    matches!(code, Code::Unauthenticated | Code::PermissionDenied)
}

/// A batch's messages (see [`Upstream::send_batch`]); at least one, even for an empty
/// list.
pub fn chunk(batch: &PendingBatch, reports: Vec<SealedReport>) -> Vec<ShuffledBatchChunk> {
    let header = |reports| ShuffledBatchChunk {
        collection_id: batch.collection_id.clone(),
        batch_id: batch.batch_id.to_vec(),
        batch_size: batch.size,
        reports,
    };
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for report in reports {
        let len = report.ciphertext.len() + report.enc.len() + 16;
        if !current.is_empty() && (current.len() >= CHUNK_REPORTS || bytes + len > CHUNK_BYTES) {
            chunks.push(header(std::mem::take(&mut current)));
            bytes = 0;
        }
        bytes += len;
        current.push(report);
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(header(current));
    }
    chunks
}
