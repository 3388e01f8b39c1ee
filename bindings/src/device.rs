//! [`Device`]: what an app embeds to report its vectors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldpcov_client::{
    AggregatorClient, BudgetLedger, BudgetLimits, Collection, PrivacyPolicy, ShufflePolicy,
};
use tokio::runtime::Runtime;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::{CollectionInfo, LdpcovError, connect, lock, new_runtime};

/// The device's persistent privacy budget: every report's zCDP ρ is written to a file
/// in `dir` before the report is built, and a report that would exceed a budget is
/// refused with `LdpcovError.BudgetExceeded`. Budgets are stated as ε at `delta`; the
/// defaults are the Rust client's (ε = 10 lifetime, ε = 4 per 30 days, δ = 10⁻⁶).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct LedgerConfig {
    /// Directory of the ledger file (app-private storage; one process at a time).
    pub dir: String,
    /// Budget over the device's whole life.
    #[uniffi(default = 10.0)]
    pub lifetime_epsilon: f64,
    /// Budget over any trailing period of `period_days` days.
    #[uniffi(default = 4.0)]
    pub period_epsilon: f64,
    /// Length of the period, in days; 0 for no period budget (the lifetime budget
    /// still applies).
    #[uniffi(default = 30)]
    pub period_days: u32,
    /// δ at which the budgets are stated.
    #[uniffi(default = 1e-6)]
    pub delta: f64,
}

impl LedgerConfig {
    fn limits(&self) -> BudgetLimits {
        BudgetLimits {
            lifetime_epsilon: self.lifetime_epsilon,
            period_epsilon: (self.period_days > 0).then_some(self.period_epsilon),
            period: Duration::from_secs(u64::from(self.period_days) * 24 * 3600),
            delta: self.delta,
        }
    }
}

/// The weakest privacy this device agrees to give: collections asking for a larger ε
/// or δ per report are refused with `LdpcovError.PolicyRefused`, whatever the server
/// says. `None` keeps the client's default policy (ε ≤ 10, δ ≤ 10⁻³).
///
/// With `min_shuffle_batch` and `max_central_epsilon` (both or neither), the device
/// also insists on shuffling: a collection that is not shuffled, whose batches may be
/// smaller, or whose central ε (computed on the device from the collection's ε0, batch
/// floor and δ) is larger, is refused before any noise is drawn.
#[derive(Debug, Clone, Copy, PartialEq, uniffi::Record)]
pub struct PolicyConfig {
    /// Largest ε of one report.
    pub max_epsilon: f64,
    /// Largest δ of one report.
    pub max_delta: f64,
    /// Smallest batch floor of a shuffled collection accepted (`None`: shuffling not
    /// required).
    #[uniffi(default = None)]
    pub min_shuffle_batch: Option<u64>,
    /// Largest central ε of a shuffled collection accepted (`None`: shuffling not
    /// required).
    #[uniffi(default = None)]
    pub max_central_epsilon: Option<f64>,
}

impl PolicyConfig {
    /// The client's policy: InvalidInput when only one of the shuffle bounds is given.
    fn policy(&self) -> Result<PrivacyPolicy, LdpcovError> {
        let shuffle = match (self.min_shuffle_batch, self.max_central_epsilon) {
            (Some(min_batch), Some(max_central_epsilon)) => Some(ShufflePolicy {
                min_batch,
                max_central_epsilon,
            }),
            (None, None) => None,
            _ => {
                return Err(LdpcovError::InvalidInput {
                    reason: "give both min_shuffle_batch and max_central_epsilon, or neither"
                        .into(),
                });
            }
        };
        Ok(PrivacyPolicy {
            max_epsilon: self.max_epsilon,
            max_delta: self.max_delta,
            shuffle,
        })
    }
}

/// The relay a shuffled collection's reports go through (`ldpcov-relay`, run by another
/// party than the aggregator's operator): the device seals each report to the
/// collection's key, so the relay cannot read it, and the relay forwards the reports to
/// the aggregator in shuffled batches.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RelayConfig {
    /// The relay's URL: `http://host:port`, or `https://` for TLS.
    pub url: String,
    /// The device's relay token (`ldpcov-relay issue-device-token`).
    pub token: String,
    /// A PEM CA certificate to trust for an `https://` relay (else the public web PKI).
    #[uniffi(default)]
    pub ca_pem: Option<String>,
}

/// The helper of two-aggregator collections (the second `ldpcov-aggregator`, run by
/// another operator than the leader, this device's aggregator): the device asks the
/// helper itself for the key it seals the helper's share to, so the leader, which
/// carries the sealed share, never holds both shares.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct HelperConfig {
    /// The helper's URL: `http://host:port`, or `https://` for TLS.
    pub url: String,
    /// A PEM CA certificate to trust for an `https://` helper (else the public web PKI).
    #[uniffi(default)]
    pub ca_pem: Option<String>,
}

/// What happened to a submitted report.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SubmitResult {
    /// The random 16-byte report id, in hex.
    pub report_id: String,
    /// The aggregator had already counted this id (an earlier attempt got through but
    /// its answer was lost), or for a shuffled collection the relay had already
    /// stored it; the report is counted exactly once either way.
    pub duplicate: bool,
    /// Calls made, retries included.
    pub attempts: u32,
}

/// A device: reports vectors to one aggregator under the collections' local
/// differential privacy.
///
/// Every method blocks until the aggregator has answered: call it from a background
/// thread, never from the UI thread (see the crate documentation).
#[derive(uniffi::Object)]
pub struct Device {
    // Dropped before the runtime that drives it.
    state: Mutex<DeviceState>,
    runtime: Runtime,
}

struct DeviceState {
    client: AggregatorClient,
    /// Collections already fetched and re-derived, by id.
    collections: HashMap<String, Collection>,
}

#[uniffi::export]
impl Device {
    /// Connects to the aggregator at `url` (`http://host:port`, or `https://` for TLS,
    /// trusting `ca_pem` — a PEM CA certificate — if given, else the public web PKI).
    ///
    /// `token` is the submit token the aggregator requires, if any. With `ledger`, every
    /// report is charged to that persistent budget first; `policy` bounds the (ε, δ)
    /// this device accepts. `relay` is where shuffled collections' reports go (sealed);
    /// without it, `submit` refuses a shuffled collection with `LdpcovError.Sealing`.
    /// `helper` is the helper of two-aggregator collections; without it, `collection`
    /// and `submit` refuse such a collection with `LdpcovError.TwoAggregator`. The
    /// relay and the helper are connected on first use.
    #[uniffi::constructor(default(
        token = None,
        ca_pem = None,
        ledger = None,
        policy = None,
        relay = None,
        helper = None
    ))]
    pub fn connect(
        url: String,
        token: Option<String>,
        ca_pem: Option<String>,
        ledger: Option<LedgerConfig>,
        policy: Option<PolicyConfig>,
        relay: Option<RelayConfig>,
        helper: Option<HelperConfig>,
    ) -> Result<Arc<Self>, LdpcovError> {
        let runtime = new_runtime()?;
        let mut client = match relay {
            // A device with a relay asks the relay alone for shuffled collections: it
            // opens no connection to the aggregator unless it reports to a local one.
            Some(relay) => {
                let aggregator = lazy_channel(&runtime, url, ca_pem, "aggregator")?;
                let mut client = AggregatorClient::from_channel(aggregator)?;
                if let Some(token) = token {
                    client = client.with_token(token)?;
                }
                let channel = lazy_channel(&runtime, relay.url, relay.ca_pem, "relay")?;
                client.with_relay(channel, &relay.token)?
            }
            None => connect(&runtime, url, token, ca_pem)?,
        };
        if let Some(helper) = helper {
            client =
                client.with_helper(lazy_channel(&runtime, helper.url, helper.ca_pem, "helper")?);
        }
        if let Some(config) = ledger {
            client = client.with_ledger(BudgetLedger::open(&config.dir, config.limits())?);
        }
        if let Some(policy) = policy {
            client = client.with_privacy_policy(policy.policy()?);
        }
        Ok(Arc::new(Device {
            state: Mutex::new(DeviceState {
                client,
                collections: HashMap::new(),
            }),
            runtime,
        }))
    }

    /// Fetches a collection's parameters, re-derives them locally and checks them
    /// against the privacy policy (`ServerMismatch`, `PolicyRefused` otherwise).
    pub fn collection(&self, collection_id: String) -> Result<CollectionInfo, LdpcovError> {
        let mut state = lock(&self.state)?;
        let collection = self.fetch(&mut state, &collection_id)?;
        Ok(CollectionInfo::from(&collection))
    }

    /// Perturbs `x` locally and submits it to the collection (a shuffled collection's
    /// report sealed to the collection's key and sent to the relay instead; the budget
    /// is charged the same ε).
    ///
    /// Input errors (`x` of the wrong length, a NaN or infinite coordinate) raise
    /// `InvalidInput` before any noise is drawn or budget spent. The report — `x`
    /// clipped to the collection's radius, `triu(x·xᵀ)` on the collection's grid plus
    /// exact discrete Gaussian noise, a fresh random id — is complete before any
    /// network call; retries resend the same bytes under the same id, so a report is
    /// counted at most once. The collection's parameters are fetched on first use and
    /// kept for the object's lifetime (fetched again while a radius phase is choosing
    /// the radius: until it has, what is sent is the noisy interval of `x`'s norm, to
    /// the phase's collection, charged to the ledger as its own report).
    pub fn submit(&self, collection_id: String, x: Vec<f64>) -> Result<SubmitResult, LdpcovError> {
        let mut state = lock(&self.state)?;
        // Kept once fetched, but fetched again while its radius is being chosen: once
        // the phase is closed, the vector goes instead of its norm's interval.
        let collection = match state.collections.get(&collection_id) {
            Some(collection) if !collection.radius_pending() => collection.clone(),
            _ => self.fetch(&mut state, &collection_id)?,
        };
        let outcome = self
            .runtime
            .block_on(state.client.submit(&collection, &x))?;
        tracing::debug!(
            collection = %collection_id,
            attempts = outcome.attempts,
            duplicate = outcome.duplicate,
            "report submitted"
        );
        Ok(SubmitResult {
            report_id: hex::encode(outcome.report_id.0),
            duplicate: outcome.duplicate,
            attempts: outcome.attempts,
        })
    }

    /// The noise sampler every report uses: `"exact-discrete-gaussian"` (the bindings
    /// offer no other).
    pub fn noise_sampler_kind(&self) -> Result<String, LdpcovError> {
        Ok(lock(&self.state)?.client.noise_sampler_kind().to_string())
    }

    /// The lifetime privacy spent so far, as ε at the ledger's δ; `None` without a
    /// ledger.
    pub fn spent_epsilon(&self) -> Result<Option<f64>, LdpcovError> {
        Ok(lock(&self.state)?
            .client
            .ledger()
            .map(BudgetLedger::lifetime_epsilon))
    }
}

/// A channel to `what` (the relay, a relay device's aggregator, or the helper): plain
/// HTTP/2 for `http://` URLs, TLS for `https://` ones (trusting `ca_pem` if given, else the bundled web PKI roots), connected on first use.
fn lazy_channel(
    runtime: &Runtime,
    url: String,
    ca_pem: Option<String>,
    what: &str,
) -> Result<Channel, LdpcovError> {
    let invalid = |reason: String| LdpcovError::InvalidInput { reason };
    let tls = url.starts_with("https://");
    if ca_pem.is_some() && !tls {
        return Err(invalid(format!(
            "a {what} CA certificate is only used with an https:// URL"
        )));
    }
    let mut endpoint =
        Endpoint::from_shared(url).map_err(|e| invalid(format!("bad {what} URL: {e}")))?;
    if tls {
        let config = match ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_webpki_roots(),
        };
        endpoint = endpoint
            .tls_config(config)
            .map_err(|e| invalid(format!("{what} TLS configuration: {e}")))?;
    }
    // A lazy channel spawns its connection task on the runtime that drives it.
    let _guard = runtime.enter();
    Ok(endpoint.connect_lazy())
}

impl Device {
    /// Fetches, checks and caches a collection.
    fn fetch(&self, state: &mut DeviceState, id: &str) -> Result<Collection, LdpcovError> {
        let collection = self.runtime.block_on(state.client.collection(id))?;
        state.collections.insert(id.to_string(), collection.clone());
        Ok(collection)
    }
}
