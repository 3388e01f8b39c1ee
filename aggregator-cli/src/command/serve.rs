//! `serve`: run the aggregator daemon until SIGTERM or Ctrl-C.

use ldpcov_seal::MasterSecret;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ldpcov_aggregator::Limits;
use ldpcov_aggregator::ServerTls;
use ldpcov_aggregator::{AuthConfig, SubmitToken, Token};
use ldpcov_aggregator::{DurableConfig, DurableStore};
use ldpcov_aggregator::{ServeOptions, TransportLimits, serve_with};
use ldpcov_serve::ServeFlags;

use super::Aggregator;
use ldpcov_aggregator::two_aggregator::{LeaderConfig, PeerSecret, TwoAggregatorRole};
use ldpcov_aggregator::{MemoryStore, Store};
use ldpcov_aggregator::{PostgresConfig, PostgresStore};

/// How long the daemon drains calls after its store stopped for good before it exits.
const FATAL_DRAIN: Duration = Duration::from_secs(5);

/// Resolves with the reason once the durable store's commit thread stopped for good.
type StoreFailed = std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>>;

/// Where `serve` keeps its data unless told otherwise.
pub(crate) const DEFAULT_DATA_DIR: &str = "ldpcov-data";
/// The HPKE master secret's file name in --data-dir.
pub(crate) const HPKE_SECRET_FILE: &str = "hpke-secret.hex";

/// The flags of `serve`.
#[derive(clap::Args)]
pub(crate) struct Options {
    /// Address to listen on.
    #[arg(long, env = "LDPCOV_LISTEN", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Largest collection dimension accepted (sets the gRPC message size limits).
    #[arg(long, env = "LDPCOV_MAX_DIM", default_value_t = Limits::default().max_dim)]
    max_dim: usize,
    /// Directory of the embedded durable store, the default (created if missing;
    /// default `./ldpcov-data`).
    #[arg(long, env = "LDPCOV_DATA_DIR", conflicts_with = "memory")]
    data_dir: Option<PathBuf>,
    /// Keep everything in memory instead (lost when the daemon stops).
    #[arg(long, env = "LDPCOV_MEMORY")]
    memory: bool,
    /// Keep everything in PostgreSQL instead: `postgres://USER[:PASSWORD]@HOST:PORT/DB`
    /// (libpq URL parameters such as `connect_timeout` are accepted). Any number of
    /// daemons may share one database. Not with --memory or --data-dir. Prefer the
    /// environment variable when the URL holds a password.
    #[arg(long, env = "LDPCOV_STORE", hide_env_values = true, value_name = "URL")]
    store: Option<String>,
    /// Connections to PostgreSQL this daemon keeps at most (with --store): one commits
    /// the batches, the others serve reads, creates, closes and folding.
    #[arg(long, env = "LDPCOV_PG_POOL_SIZE", default_value_t = PostgresConfig::default().pool_size)]
    pg_pool_size: usize,
    /// Group commit: commit a batch once it holds this many reports.
    #[arg(long, env = "LDPCOV_BATCH_SIZE", default_value_t = DurableConfig::default().batch_size)]
    batch_size: usize,
    /// Group commit: commit a batch at most this many milliseconds after it opened.
    #[arg(long, env = "LDPCOV_BATCH_DELAY_MS", default_value_t = DurableConfig::default().batch_delay.as_millis() as u64)]
    batch_delay_ms: u64,
    /// Page cache of the durable store in MiB: bounds its resident memory, which
    /// otherwise grows with the report-id table (the file is cached by the OS too).
    #[arg(long, env = "LDPCOV_CACHE_MIB", default_value_t = (DurableConfig::default().cache_size >> 20) as u64)]
    cache_mib: u64,
    /// Folding: reports committed in compact form (appended) are folded into the
    /// accumulators at most this many milliseconds later (0: only on the size trigger,
    /// and with --data-dir at shutdown). Default: 10 000 with --data-dir, 1 000 with
    /// --store.
    #[arg(long, env = "LDPCOV_FOLD_INTERVAL_MS")]
    fold_interval_ms: Option<u64>,
    /// Folding: fold once this many MiB of compact reports are appended (with
    /// --data-dir: per collection, which bounds what a start replays; with --store: by
    /// this daemon since its last fold).
    #[arg(long, env = "LDPCOV_FOLD_MIB", default_value_t = DurableConfig::default().fold_bytes >> 20)]
    fold_mib: u64,
    /// Start an empty store over a database file of 0 bytes (otherwise refused: an
    /// empty file where the database should be usually means the data is gone).
    #[arg(long, env = "LDPCOV_INIT_EMPTY")]
    init_empty: bool,
    #[command(flatten)]
    access: AccessArgs,
    #[command(flatten)]
    shared: ServeFlags<Aggregator>,
}

/// The daemon's access control, TLS and transport limits.
#[derive(clap::Args)]
struct AccessArgs {
    /// Admin token: needed by create, close and estimate. Prefer the file or the
    /// environment variable (command lines are visible to other local users).
    #[arg(long, env = "LDPCOV_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// File holding the admin token (surrounding whitespace ignored).
    #[arg(long, env = "LDPCOV_ADMIN_TOKEN_FILE", conflicts_with = "admin_token")]
    admin_token_file: Option<PathBuf>,
    /// Submit token, `TOKEN` (any collection) or `COLLECTION=TOKEN` (one collection);
    /// repeatable, comma-separated in the environment variable. When set, submits,
    /// status and parameter reads need a submit token or the admin token. Needs an
    /// admin token.
    #[arg(
        long = "submit-token",
        env = "LDPCOV_SUBMIT_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    submit_tokens: Vec<String>,
    /// File of submit tokens, one `TOKEN` or `COLLECTION=TOKEN` per line (blank lines
    /// and lines starting with # ignored).
    #[arg(long, env = "LDPCOV_SUBMIT_TOKEN_FILE")]
    submit_token_file: Option<PathBuf>,
    /// File of relay tokens, one per line (blank lines and lines starting with #
    /// ignored): the relays that may send shuffled collections' batches
    /// (docs/PRIVACY.md §9). Without it, batches are refused.
    #[arg(long, env = "LDPCOV_RELAY_TOKEN_FILE")]
    relay_token_file: Option<PathBuf>,
    /// File of the 32-byte secret (hex) that shuffled collections' HPKE keys are
    /// derived from; created (mode 0600) if missing. Default: `hpke-secret.hex` in
    /// --data-dir; with --memory a secret drawn for this run; with --store, required
    /// for shuffled collections to outlive a restart and to open on every replica
    /// (give every replica the same file).
    #[arg(long, env = "LDPCOV_HPKE_SECRET_FILE")]
    hpke_secret_file: Option<PathBuf>,
    /// This daemon's half of two-aggregator collections (`leader`: takes devices'
    /// uploads and verifies them with its helper; `helper`: verifies the leader's
    /// batches). Without it, two-aggregator collections are refused. Needs
    /// --peer-secret-file; a leader also --helper-url.
    #[arg(long, env = "LDPCOV_TWO_AGGREGATOR_ROLE", value_enum)]
    two_aggregator_role: Option<RoleArg>,
    /// The helper's gRPC URL (a leader only), `http://…` or `https://…`.
    #[arg(long, env = "LDPCOV_HELPER_URL")]
    helper_url: Option<String>,
    /// CA certificate (PEM) the helper's TLS certificate is checked against (default:
    /// the web PKI roots).
    #[arg(long, env = "LDPCOV_HELPER_CA")]
    helper_ca: Option<PathBuf>,
    /// File of the 32-byte secret (hex) the leader and its helper share: the leader's
    /// token at the helper and each collection's Prio3 verify key are derived from it.
    /// The helper creates it (mode 0600) if missing; its operator gives the leader's a
    /// copy, which a leader requires.
    #[arg(long, env = "LDPCOV_PEER_SECRET_FILE")]
    peer_secret_file: Option<PathBuf>,
    /// HTTP/2 streams (concurrent calls) one connection may open.
    #[arg(long, env = "LDPCOV_MAX_CONCURRENT_STREAMS", default_value_t = TransportLimits::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// Calls handled at once over all connections (more wait). A call takes a slot
    /// only after its token was checked; health and reflection take none.
    #[arg(long, env = "LDPCOV_MAX_CONCURRENT_REQUESTS", default_value_t = TransportLimits::default().max_concurrent_requests)]
    max_concurrent_requests: usize,
    /// Calls handled at once on one connection (more wait).
    #[arg(long, env = "LDPCOV_MAX_CALLS_PER_CONNECTION", default_value_t = TransportLimits::default().max_calls_per_connection)]
    max_calls_per_connection: usize,
    /// Calls running longer than this are cancelled (also bounds one report stream).
    #[arg(long, env = "LDPCOV_REQUEST_TIMEOUT_SECS", default_value_t = TransportLimits::default().request_timeout.as_secs())]
    request_timeout_secs: u64,
    /// GetEstimate calls computing at once (default: twice the cores); one more is
    /// refused RESOURCE_EXHAUSTED at once.
    #[arg(long, env = "LDPCOV_MAX_CONCURRENT_ESTIMATES", default_value_t = TransportLimits::default().max_concurrent_estimates)]
    max_concurrent_estimates: usize,
}

/// `--two-aggregator-role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RoleArg {
    /// Takes devices' uploads; verifies them with the helper.
    Leader,
    /// Verifies the leader's batches.
    Helper,
}

impl AccessArgs {
    /// The two-aggregator role from its flags (checked before anything is opened).
    fn two_aggregator(&self) -> Result<Option<TwoAggregatorRole>> {
        let Some(role) = self.two_aggregator_role else {
            if self.helper_url.is_some() || self.peer_secret_file.is_some() {
                anyhow::bail!("--helper-url and --peer-secret-file need --two-aggregator-role");
            }
            return Ok(None);
        };
        let path = self
            .peer_secret_file
            .as_ref()
            .context("--two-aggregator-role needs --peer-secret-file")?;
        match role {
            RoleArg::Helper => {
                if self.helper_url.is_some() || self.helper_ca.is_some() {
                    anyhow::bail!(
                        "--helper-url and --helper-ca are a leader's flags, not a helper's"
                    );
                }
                let secret = MasterSecret::load_or_create(path)
                    .with_context(|| format!("cannot load the peer secret {}", path.display()))?;
                Ok(Some(TwoAggregatorRole::Helper {
                    peer: Arc::new(PeerSecret::new(secret)),
                }))
            }
            RoleArg::Leader => {
                let helper_url = self
                    .helper_url
                    .clone()
                    .context("--two-aggregator-role leader needs --helper-url")?;
                if !path.exists() {
                    anyhow::bail!(
                        "the peer secret {} does not exist: a leader uses a copy of its helper's",
                        path.display()
                    );
                }
                let secret = MasterSecret::load_or_create(path)
                    .with_context(|| format!("cannot load the peer secret {}", path.display()))?;
                let helper_tls = match &self.helper_ca {
                    Some(ca) => Some(ldpcov_aggregator::client_config(Some(
                        &ldpcov_aggregator::read_ca(ca)?,
                    ))),
                    None => None,
                };
                Ok(Some(TwoAggregatorRole::Leader(LeaderConfig {
                    helper_url,
                    helper_tls,
                    peer: Arc::new(PeerSecret::new(secret)),
                })))
            }
        }
    }

    /// The admin and submit tokens, from the flags and the token files.
    fn auth(&self) -> Result<AuthConfig> {
        let admin = match (&self.admin_token, &self.admin_token_file) {
            (Some(t), _) => Some(Token::new(t, "admin")?),
            (None, Some(path)) => Some(Token::from_file(path, "admin")?),
            (None, None) => None,
        };
        let mut submit = self
            .submit_tokens
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| SubmitToken::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(path) = &self.submit_token_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read submit token file {}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                submit.push(
                    SubmitToken::parse(line)
                        .with_context(|| format!("{} line {}", path.display(), n + 1))?,
                );
            }
            ldpcov_seal::warn_if_loose(path, "submit token");
        }
        let mut relay = Vec::new();
        if let Some(path) = &self.relay_token_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read relay token file {}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                relay.push(
                    Token::new(line, "relay")
                        .with_context(|| format!("{} line {}", path.display(), n + 1))?,
                );
            }
            ldpcov_seal::warn_if_loose(path, "relay token");
        }
        Ok(AuthConfig::new(admin, submit)?.with_relay_tokens(relay)?)
    }

    /// The transport limits (with the shared flags' times), each at least 1.
    fn transport(&self, shared: &ServeFlags<Aggregator>) -> Result<TransportLimits> {
        let checks: [(&str, bool); 9] = [
            (
                "--max-concurrent-estimates",
                self.max_concurrent_estimates == 0,
            ),
            ("--max-concurrent-streams", self.max_concurrent_streams == 0),
            (
                "--max-concurrent-requests",
                self.max_concurrent_requests == 0,
            ),
            (
                "--max-calls-per-connection",
                self.max_calls_per_connection == 0,
            ),
            ("--request-timeout-secs", self.request_timeout_secs == 0),
            (
                "--handshake-timeout-secs",
                shared.handshake_timeout_secs == 0,
            ),
            ("--idle-timeout-secs", shared.idle_timeout_secs == 0),
            (
                "--keepalive-interval-secs",
                shared.keepalive_interval_secs == 0,
            ),
            (
                "--keepalive-timeout-secs",
                shared.keepalive_timeout_secs == 0,
            ),
        ];
        if let Some((flag, _)) = checks.iter().find(|(_, zero)| *zero) {
            anyhow::bail!("{flag} must be at least 1");
        }
        Ok(TransportLimits {
            max_concurrent_streams: self.max_concurrent_streams,
            max_concurrent_requests: self.max_concurrent_requests,
            max_calls_per_connection: self.max_calls_per_connection,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            handshake_timeout: Duration::from_secs(shared.handshake_timeout_secs),
            idle_timeout: Duration::from_secs(shared.idle_timeout_secs),
            max_concurrent_estimates: self.max_concurrent_estimates,
            keepalive_interval: Duration::from_secs(shared.keepalive_interval_secs),
            keepalive_timeout: Duration::from_secs(shared.keepalive_timeout_secs),
        })
    }
}

impl Options {
    /// Checks every option, opens the store, listens and serves until a shutdown
    /// signal; the store commits what is pending when the service is dropped.
    pub(crate) async fn run(self) -> Result<()> {
        let Options {
            listen,
            max_dim,
            data_dir,
            memory,
            store: store_url,
            pg_pool_size,
            batch_size,
            batch_delay_ms,
            cache_mib,
            fold_interval_ms,
            fold_mib,
            init_empty,
            access,
            shared,
        } = self;
        if max_dim == 0 || max_dim > ldpcov_privacy::limits::MAX_DIM {
            anyhow::bail!(
                "--max-dim {max_dim} must be between 1 and {}",
                ldpcov_privacy::limits::MAX_DIM
            );
        }
        if batch_size == 0 {
            anyhow::bail!("--batch-size must be at least 1");
        }
        let grpc_web = shared.grpc_web_options()?;
        if let Some(url) = &store_url {
            if memory || data_dir.is_some() {
                anyhow::bail!("--store cannot be combined with --memory or --data-dir");
            }
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                anyhow::bail!(
                    "--store {} is not a postgres://USER@HOST:PORT/DB URL",
                    redacted(url)
                );
            }
            if pg_pool_size == 0 {
                anyhow::bail!("--pg-pool-size must be at least 1");
            }
        }
        // Check every option before anything is opened or created.
        let auth = access.auth()?;
        let two_aggregator = access.two_aggregator()?;
        let tls = match shared.tls_files() {
            Some((cert, key)) => Some(ServerTls::from_files(cert, key)?),
            None => None,
        };
        let transport = access.transport(&shared)?;
        // The HPKE master secret of shuffled collections: the flag's file, else one
        // beside the durable store, else (memory, PostgreSQL) drawn for this run.
        let secret_file = access.hpke_secret_file.clone().or_else(|| {
            (store_url.is_none() && !memory).then(|| {
                data_dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR))
                    .join(HPKE_SECRET_FILE)
            })
        });
        // Bound before the store is opened: a busy or bad address fails fast.
        let metrics_listen = shared.metrics_listen;
        if let Some(addr) = metrics_listen {
            ldpcov_serve::install_prometheus_exporter(
                addr,
                &ldpcov_aggregator::histogram_buckets(),
            )?;
            ldpcov_aggregator::describe_metrics();
            tracing::info!(%addr, "serving Prometheus metrics");
        }
        // Resolves (durable store only) once the commit thread stopped for good.
        let mut store_failed: Option<StoreFailed> = None;
        let fold_bytes = fold_mib
            .checked_mul(1 << 20)
            .context("--fold-mib is too large")?;
        let store: Arc<dyn Store> = if let Some(url) = &store_url {
            let defaults = PostgresConfig::default();
            let config = PostgresConfig {
                pool_size: pg_pool_size,
                batch_size,
                batch_delay: Duration::from_millis(batch_delay_ms),
                fold_interval: fold_interval_ms
                    .map_or(defaults.fold_interval, Duration::from_millis),
                fold_bytes,
                ..defaults
            };
            let store = PostgresStore::open(url, config)
                .await
                .with_context(|| format!("cannot open the PostgreSQL store {}", redacted(url)))?;
            tracing::info!(
                url = %redacted(url), pg_pool_size, batch_size, batch_delay_ms,
                "PostgreSQL store ready"
            );
            Arc::new(store)
        } else if memory {
            tracing::warn!("in-memory store: everything is lost when the daemon stops");
            Arc::new(MemoryStore::new())
        } else {
            let data_dir = data_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
            let cache_size = usize::try_from(cache_mib)
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .context("--cache-mib is too large")?;
            let defaults = DurableConfig::default();
            let config = DurableConfig {
                batch_size,
                batch_delay: Duration::from_millis(batch_delay_ms),
                cache_size,
                init_empty,
                fold_interval: fold_interval_ms
                    .map_or(defaults.fold_interval, Duration::from_millis),
                fold_bytes,
            };
            let dir = data_dir.clone();
            let store = tokio::task::spawn_blocking(move || DurableStore::open(&dir, config))
                .await?
                .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
            tracing::info!(
                data_dir = %data_dir.display(), batch_size, batch_delay_ms, cache_mib,
                "durable store ready"
            );
            store_failed = Some(Box::pin(store.failed()));
            Arc::new(store)
        };
        let shuffle_secret = match &secret_file {
            Some(path) => Some(Arc::new(MasterSecret::load_or_create(path).with_context(
                || format!("cannot load the HPKE secret {}", path.display()),
            )?)),
            None => {
                if store_url.is_some() {
                    tracing::warn!(
                        "no --hpke-secret-file: shuffled collections' keys are drawn for this run and replica only"
                    );
                }
                None
            }
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        let kind = match (&store_url, memory) {
            (Some(_), _) => "postgres",
            (None, true) => "memory",
            (None, false) => "durable",
        };
        if auth.is_open() {
            tracing::warn!(
                "running WITHOUT AUTHENTICATION: anyone who can reach this port may create, close and estimate collections (set --admin-token-file, and --submit-token-file to guard submits)"
            );
        } else {
            // Counts only: tokens are never logged.
            tracing::info!(
                admin_token = true,
                submit_tokens = auth.submit_tokens(),
                relay_tokens = auth.relay_tokens(),
                submits_need_token = auth.submit_guarded(),
                "access control on"
            );
        }
        if tls.is_none() && !addr.ip().is_loopback() {
            tracing::warn!(%addr, "serving plaintext gRPC on a non-loopback address (set --tls-cert and --tls-key)");
        }
        tracing::info!(
            %addr, max_dim, store = kind, tls = tls.is_some(),
            max_concurrent_streams = transport.max_concurrent_streams,
            max_concurrent_requests = transport.max_concurrent_requests,
            max_calls_per_connection = transport.max_calls_per_connection,
            request_timeout_secs = transport.request_timeout.as_secs(),
            handshake_timeout_secs = transport.handshake_timeout.as_secs(),
            idle_timeout_secs = transport.idle_timeout.as_secs(),
            max_concurrent_estimates = transport.max_concurrent_estimates,
            keepalive_interval_secs = transport.keepalive_interval.as_secs(),
            "ldpcov aggregator listening"
        );
        // A store that stopped for good (its commit thread panicked) ends the daemon
        // like a shutdown signal, but it exits non-zero with the reason, after at most
        // FATAL_DRAIN of draining: the supervisor restarts it (or an operator looks
        // at the file).
        let (failure_tx, mut failure_rx) = tokio::sync::watch::channel(None::<String>);
        let shutdown = async move {
            let failed = async {
                match store_failed {
                    Some(failed) => failed.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                signal = ldpcov_serve::shutdown_signal() => {
                    tracing::info!("{signal}: shutting down");
                }
                reason = failed => {
                    tracing::error!("the store cannot write any more: shutting down");
                    failure_tx.send_replace(Some(reason));
                }
            }
        };
        let served = serve_with(
            store,
            ServeOptions {
                limits: Limits { max_dim },
                transport,
                auth: Arc::new(auth),
                tls,
                metrics: metrics_listen.is_some(),
                grpc_web,
                shuffle_secret,
                two_aggregator,
            },
            listener,
            shutdown,
        );
        let drain_after_failure = async {
            let _ = failure_rx.wait_for(Option::is_some).await;
            tokio::time::sleep(FATAL_DRAIN).await;
        };
        tokio::select! {
            served = served => served?,
            () = drain_after_failure => {}
        }
        if let Some(reason) = failure_rx.borrow().clone() {
            anyhow::bail!("{reason}");
        }
        // The service is gone: the last handle commits what is pending when dropped.
        tracing::info!("shut down");
        Ok(())
    }
}

/// `url` with its password (if any) replaced by `***`, for messages and logs.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redacted("postgres://ann:s3cr:et@db:5432/x?sslmode=disable"),
            "postgres://ann:***@db:5432/x?sslmode=disable"
        );
        assert_eq!(redacted("postgres://ann@db/x"), "postgres://ann@db/x");
        assert_eq!(redacted("nonsense"), "nonsense");
    }
}
