//! `serve`: run the relay until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ldpcov_relay::constants::{
    DEFAULT_MIN_BATCH_SIZE, DEFAULT_MIN_BATCH_WINDOW_SECONDS, LAYER_KEY_FILE,
};
use ldpcov_relay::{
    CloseRule, DeviceTokenIssuer, RelayLimits, RelayOptions, RelayStore, Revocations, Secret,
    StoreOptions, Upstream, serve,
};
use ldpcov_serve::ServeFlags;

use super::Relay;

/// The flags of `serve`.
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "LDPCOV_RELAY_LISTEN", default_value = "127.0.0.1:50061")]
    listen: SocketAddr,
    /// The aggregator's URL (`https://` for TLS).
    #[arg(long, env = "LDPCOV_RELAY_AGGREGATOR")]
    aggregator: String,
    /// PEM CA certificate to trust for an https aggregator (default: the web PKI).
    #[arg(long, env = "LDPCOV_RELAY_AGGREGATOR_CA_CERT")]
    aggregator_ca_cert: Option<PathBuf>,
    /// File holding the relay token the aggregator knows (its --relay-token-file).
    #[arg(long, env = "LDPCOV_RELAY_RELAY_TOKEN_FILE")]
    relay_token_file: PathBuf,
    /// File holding the device-token secret (64 hex digits: 32 random bytes).
    #[arg(long, env = "LDPCOV_RELAY_DEVICE_TOKEN_SECRET_FILE")]
    device_token_secret_file: PathBuf,
    /// Directory of the relay's durable store (created if missing; made 0700, its
    /// file 0600).
    #[arg(long, env = "LDPCOV_RELAY_DATA_DIR")]
    data_dir: PathBuf,
    /// Start a new, empty store when the store file is empty (0 bytes) or not a relay
    /// store (a non-empty one is kept, renamed `<file>.refused-<unix seconds>`).
    /// Without it the relay refuses to start on such a file.
    #[arg(long, env = "LDPCOV_RELAY_INIT_EMPTY")]
    init_empty: bool,
    /// A file of revoked device ids, one a line (`#` comments): every token of these
    /// devices is refused. Read again within a second of a change.
    #[arg(long, env = "LDPCOV_RELAY_REVOKED_DEVICES_FILE")]
    revoked_devices_file: Option<PathBuf>,
    /// Also accept version 1 device tokens, which never expire (a migration).
    #[arg(long, env = "LDPCOV_RELAY_ACCEPT_UNEXPIRING_DEVICE_TOKENS")]
    accept_unexpiring_device_tokens: bool,
    /// File holding the admin token for GetRelayStatus (without it, refused).
    #[arg(long, env = "LDPCOV_RELAY_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// For tests only: serve devices without TLS (anyone on the path can link a
    /// device to the sealed bytes the relay forwards). Logs a warning at start.
    #[arg(
        long,
        env = "LDPCOV_RELAY_INSECURE_PLAINTEXT",
        conflicts_with = "tls_cert"
    )]
    insecure_plaintext: bool,
    /// The relay's floor on a batch: collections announcing a smaller min_batch_size
    /// are refused, and no batch of fewer reports is ever formed. The central ε a
    /// device is promised is computed at this size, whatever the aggregator says.
    #[arg(long, env = "LDPCOV_RELAY_MIN_BATCH_SIZE", default_value_t = DEFAULT_MIN_BATCH_SIZE)]
    min_batch_size: u64,
    /// The relay's floor on the batch window, seconds: collections announcing a
    /// shorter batch_window_seconds are refused (0: the collection's own).
    #[arg(long, env = "LDPCOV_RELAY_MIN_BATCH_WINDOW_SECONDS", default_value_t = DEFAULT_MIN_BATCH_WINDOW_SECONDS)]
    min_batch_window_seconds: u64,
    /// Most reports from devices new to this relay (first seen in the window) one
    /// window of a collection takes; the next new device is refused RESOURCE_EXHAUSTED
    /// until a later window. Bounds what a token issuer minting device ids (Sybils)
    /// can put in one batch. 0: no cap (each batch's share of new devices is still
    /// shown by `status`).
    #[arg(
        long,
        env = "LDPCOV_RELAY_MAX_NEW_DEVICES_PER_WINDOW",
        default_value_t = 0
    )]
    max_new_devices_per_window: u64,
    /// How long the aggregator may be unreachable before the relay's health turns
    /// NOT_SERVING, seconds (reports are still stored meanwhile; at least 1).
    #[arg(long, env = "LDPCOV_RELAY_AGGREGATOR_OUTAGE_GRACE_SECS", default_value_t = ldpcov_relay::monitor::OUTAGE_GRACE.as_secs())]
    aggregator_outage_grace_secs: u64,
    /// The file holding the secret of the relay's own HPKE key (the layer every
    /// device report carries): created (0600, 32 random bytes in hex) when absent.
    /// Default: `relay-layer.key` in --data-dir.
    #[arg(long, env = "LDPCOV_RELAY_LAYER_KEY_FILE")]
    layer_key_file: Option<PathBuf>,
    /// How often due windows become batches and stored batches are sent (ms).
    #[arg(
        long,
        env = "LDPCOV_RELAY_BATCH_CHECK_INTERVAL_MS",
        default_value_t = 1000
    )]
    batch_check_interval_ms: u64,
    /// Largest request accepted, bytes.
    #[arg(long, env = "LDPCOV_RELAY_MAX_MESSAGE_BYTES", default_value_t = RelayLimits::default().max_message_bytes)]
    max_message_bytes: usize,
    /// Calls handled at once over all connections (more wait).
    #[arg(long, env = "LDPCOV_RELAY_MAX_CONCURRENT_REQUESTS", default_value_t = RelayLimits::default().max_concurrent_requests)]
    max_concurrent_requests: usize,
    /// HTTP/2 streams one connection may open.
    #[arg(long, env = "LDPCOV_RELAY_MAX_CONCURRENT_STREAMS", default_value_t = RelayLimits::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// Calls handled at once on one connection.
    #[arg(long, env = "LDPCOV_RELAY_MAX_CALLS_PER_CONNECTION", default_value_t = RelayLimits::default().max_calls_per_connection)]
    max_calls_per_connection: usize,
    /// Calls running longer than this many seconds are cancelled.
    #[arg(long, env = "LDPCOV_RELAY_REQUEST_TIMEOUT_SECS", default_value_t = RelayLimits::default().request_timeout.as_secs())]
    request_timeout_secs: u64,
    /// Calls of one device token handled at once; more are refused
    /// RESOURCE_EXHAUSTED (a device that stalls its calls holds at most this many
    /// slots of --max-concurrent-requests).
    #[arg(long, env = "LDPCOV_RELAY_MAX_DEVICE_CALLS_IN_FLIGHT", default_value_t = RelayLimits::default().max_device_calls_in_flight)]
    max_device_calls_in_flight: u32,
    /// Calls of one device token per second on average (bursts of twice as many
    /// pass); more are refused RESOURCE_EXHAUSTED.
    #[arg(long, env = "LDPCOV_RELAY_MAX_DEVICE_CALLS_PER_SECOND", default_value_t = RelayLimits::default().max_device_calls_per_second)]
    max_device_calls_per_second: u32,
    #[command(flatten)]
    shared: ServeFlags<Relay>,
}

/// The bytes of PEM file `path` (`what` names it in errors).
fn read_pem(path: &PathBuf, what: &str) -> Result<Vec<u8>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        bail!("{what} {} is not PEM (no -----BEGIN line)", path.display());
    }
    Ok(bytes)
}

impl ServeArgs {
    /// Checks every flag, opens the store, listens and serves until a shutdown signal.
    pub(crate) async fn run(self) -> Result<()> {
        if self.shared.tls_cert.is_none() && !self.insecure_plaintext {
            bail!(
                "the relay serves devices over TLS only: give --tls-cert and --tls-key (--insecure-plaintext is for tests)"
            );
        }
        if self.min_batch_size < 2 {
            bail!(
                "--min-batch-size must be at least 2, got {}",
                self.min_batch_size
            );
        }
        let grpc_web = self.shared.grpc_web_options()?;
        let relay_token = Secret::from_file(&self.relay_token_file, "relay token")?;
        let mut issuer = DeviceTokenIssuer::from_file(&self.device_token_secret_file)?
            .accepting_unexpiring(self.accept_unexpiring_device_tokens);
        if let Some(path) = &self.revoked_devices_file {
            let revocations = Revocations::from_file(path)?;
            tracing::info!(path = %path.display(), revoked = revocations.len(), "revocation list read");
            issuer = issuer.with_revocations(revocations);
        }
        let admin = self
            .admin_token_file
            .as_ref()
            .map(|p| Secret::from_file(p, "admin token"))
            .transpose()?;
        if admin.is_none() {
            tracing::warn!("no --admin-token-file: GetRelayStatus is refused");
        }
        let ca = self
            .aggregator_ca_cert
            .as_ref()
            .map(|p| read_pem(p, "CA certificate"))
            .transpose()?;
        let upstream = Upstream::new(&self.aggregator, relay_token, ca)?;
        let tls = match self.shared.tls_files() {
            Some((cert, key)) => Some((
                read_pem(cert, "certificate")?,
                read_pem(key, "private key")?,
            )),
            None => None,
        };
        if self.batch_check_interval_ms == 0 {
            bail!("--batch-check-interval-ms must be at least 1");
        }
        let limits = RelayLimits {
            max_message_bytes: self.max_message_bytes,
            max_concurrent_requests: self.max_concurrent_requests,
            max_concurrent_streams: self.max_concurrent_streams,
            max_calls_per_connection: self.max_calls_per_connection,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            handshake_timeout: Duration::from_secs(self.shared.handshake_timeout_secs),
            idle_timeout: Duration::from_secs(self.shared.idle_timeout_secs),
            keepalive_interval: Duration::from_secs(self.shared.keepalive_interval_secs),
            keepalive_timeout: Duration::from_secs(self.shared.keepalive_timeout_secs),
            max_device_calls_in_flight: self.max_device_calls_in_flight,
            max_device_calls_per_second: self.max_device_calls_per_second,
        };
        let store_options = StoreOptions {
            init_empty: self.init_empty,
            ..StoreOptions::with_key(issuer.device_tag_key())
        };
        let store = Arc::new(
            RelayStore::open_with(&self.data_dir, &store_options).with_context(|| {
                format!("cannot open the relay store in {}", self.data_dir.display())
            })?,
        );
        if let Some(addr) = self.shared.metrics_listen {
            ldpcov_serve::install_prometheus_exporter(addr, &[])?;
        }
        let layer_key_file = self
            .layer_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(LAYER_KEY_FILE));
        let layer_secret = ldpcov_seal::MasterSecret::load_or_create(&layer_key_file)
            .with_context(|| {
                format!(
                    "cannot read or create the relay's layer key {}",
                    layer_key_file.display()
                )
            })?;
        let layer_key = Arc::new(ldpcov_seal::RelayKey::from_secret(&layer_secret));
        tracing::info!(key_id = layer_key.key_id(), "the relay's layer key");
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .with_context(|| format!("cannot listen on {}", self.listen))?;
        let addr = listener.local_addr()?;
        if self.insecure_plaintext {
            tracing::warn!(
                "--insecure-plaintext: serving devices WITHOUT TLS, for tests only; anyone on the network path can link a device to the report the relay forwards"
            );
        }
        tracing::info!(
            %addr,
            tls = tls.is_some(),
            min_batch_size = self.min_batch_size,
            min_batch_window_seconds = self.min_batch_window_seconds,
            data_dir = %self.data_dir.display(),
            "ldpcov relay listening"
        );
        let options = RelayOptions {
            admin,
            tls,
            limits,
            batch_check_interval: Duration::from_millis(self.batch_check_interval_ms),
            floor: CloseRule {
                min_batch_size: self.min_batch_size,
                window_seconds: self.min_batch_window_seconds,
            },
            grpc_web,
            layer_key: Some(layer_key),
            new_device_cap: self.max_new_devices_per_window,
            outage_grace: Duration::from_secs(self.aggregator_outage_grace_secs),
            ..RelayOptions::new(upstream, issuer)
        };
        let shutdown = async {
            ldpcov_serve::shutdown_signal().await;
        };
        serve(store, options, listener, shutdown).await?;
        tracing::info!("ldpcov relay stopped");
        Ok(())
    }
}
