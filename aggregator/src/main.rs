//! `ldpcov-aggregator`: the aggregator daemon (`serve`) and the admin commands that
//! talk to a running daemon (`create`, `status`, `estimate`, `close`).
//!
//! Every flag can also be set by an environment variable (shown in `--help`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ldpcov_aggregator::auth::{AuthConfig, SubmitToken, Token};
use ldpcov_aggregator::durable::{DurableConfig, DurableStore};
use ldpcov_aggregator::output::{Format, write_estimate};
use ldpcov_aggregator::server::{ServeOptions, TransportLimits, serve_with};
use ldpcov_aggregator::service::Limits;
use ldpcov_aggregator::store::{MemoryStore, Store};
use ldpcov_aggregator::tls::{self, ServerTls};
use ldpcov_proto::v1::aggregator_client::AggregatorClient;
use ldpcov_proto::v1::{
    AdaptiveThreshold, CloseCollectionRequest, CollectionSpec, CollectionStatus,
    CreateCollectionRequest, CrossValidatedThreshold, Encoding, EstimateTarget, GetEstimateRequest,
    GetStatusRequest, NoThreshold, PrecisionParams, Seed001Threshold, ThresholdKind,
    UniversalThreshold, get_estimate_request,
};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Where `serve` keeps its data unless told otherwise.
const DEFAULT_DATA_DIR: &str = "ldpcov-data";

#[derive(Parser)]
#[command(
    name = "ldpcov-aggregator",
    version,
    about = "ldpcov aggregator daemon and admin CLI"
)]
struct Cli {
    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(long, env = "LDPCOV_LOG", default_value = "info", global = true)]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the aggregator daemon until SIGTERM or Ctrl-C.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "LDPCOV_LISTEN", default_value = "127.0.0.1:50051")]
        listen: SocketAddr,
        /// Largest collection dimension accepted (sets the gRPC message size limits).
        #[arg(long, env = "LDPCOV_MAX_DIM", default_value_t = Limits::default().max_dim)]
        max_dim: usize,
        /// Directory of the durable store (created if missing).
        #[arg(long, env = "LDPCOV_DATA_DIR", default_value = DEFAULT_DATA_DIR, conflicts_with = "memory")]
        data_dir: PathBuf,
        /// Keep everything in memory instead (lost when the daemon stops).
        #[arg(long, env = "LDPCOV_MEMORY")]
        memory: bool,
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
        #[command(flatten)]
        access: AccessArgs,
    },
    /// Create a collection on a running daemon and print its public parameters.
    Create {
        #[command(flatten)]
        server: ServerArgs,
        /// Collection id.
        #[arg(long, env = "LDPCOV_COLLECTION")]
        id: String,
        /// Dimension p of each user's vector.
        #[arg(long, env = "LDPCOV_DIM")]
        dim: u32,
        /// ε of one report.
        #[arg(long, env = "LDPCOV_EPSILON")]
        epsilon: f64,
        /// δ of one report.
        #[arg(long, env = "LDPCOV_DELTA")]
        delta: f64,
        /// Clip radius R.
        #[arg(long, env = "LDPCOV_CLIP_RADIUS")]
        clip_radius: f64,
        /// Reports needed before an estimate is released.
        #[arg(long, env = "LDPCOV_MIN_REPORTS")]
        min_reports: u64,
        /// Wire encoding of reports (i16 and i8 re-quantise the noisy entries).
        #[arg(long, env = "LDPCOV_ENCODING", value_enum, default_value_t = WireEncoding::I32)]
        encoding: WireEncoding,
    },
    /// Print a collection's report count and parameters as JSON.
    Status {
        #[command(flatten)]
        server: ServerArgs,
        /// Collection id.
        #[arg(long, env = "LDPCOV_COLLECTION")]
        id: String,
    },
    /// Close a collection: it takes no more reports (status and estimates still work).
    /// Prints its status as JSON.
    Close {
        #[command(flatten)]
        server: ServerArgs,
        /// Collection id.
        #[arg(long, env = "LDPCOV_COLLECTION")]
        id: String,
    },
    /// Fetch the estimate and write it as JSON, CSV or NPY.
    Estimate {
        #[command(flatten)]
        server: ServerArgs,
        /// Collection id.
        #[arg(long, env = "LDPCOV_COLLECTION")]
        id: String,
        /// Threshold rule (cv: K-fold cross-validation, the server's default).
        #[arg(long, env = "LDPCOV_THRESHOLD", value_enum, default_value_t = Rule::Cv)]
        threshold: Rule,
        /// Soft instead of hard thresholding (for cv: only soft candidates).
        #[arg(long, env = "LDPCOV_SOFT")]
        soft: bool,
        /// ξ of the seed 001 threshold.
        #[arg(long, env = "LDPCOV_XI", default_value_t = 0.0)]
        xi: f64,
        /// η of the entry-adaptive threshold.
        #[arg(long, env = "LDPCOV_ETA", default_value_t = 2.0)]
        eta: f64,
        /// Eigenvalue floor of the PSD projection (> 0: positive definite).
        #[arg(long, env = "LDPCOV_PSD_FLOOR", default_value_t = 0.0)]
        psd_floor: f64,
        /// What to estimate; the output files hold this matrix.
        #[arg(long, env = "LDPCOV_TARGET", value_enum, default_value_t = Target::Covariance)]
        target: Target,
        /// Penalty λ of the precision targets (default: chosen by cross-validation).
        #[arg(long, env = "LDPCOV_LAMBDA")]
        lambda: Option<f64>,
        /// Initial ADMM ρ of the graphical lasso.
        #[arg(long, env = "LDPCOV_RHO", default_value_t = 100.0)]
        rho: f64,
        /// Iteration cap of the graphical lasso.
        #[arg(long, env = "LDPCOV_MAX_ITERATIONS", default_value_t = 2000)]
        max_iterations: u32,
        /// γ of the universal threshold.
        #[arg(long, env = "LDPCOV_GAMMA", default_value_t = 0.0)]
        gamma: f64,
        /// c of the universal threshold (multiple of the noise level).
        #[arg(long, env = "LDPCOV_C", default_value_t = 4.0)]
        c: f64,
        /// Threshold the diagonal too (as seed 000 prints it).
        #[arg(long, env = "LDPCOV_THRESHOLD_DIAGONAL")]
        threshold_diagonal: bool,
        /// For cv: the variables have no natural order (do not try banding or
        /// Toeplitz band averaging).
        #[arg(long, env = "LDPCOV_UNORDERED")]
        unordered: bool,
        /// Skip the PSD projection.
        #[arg(long, env = "LDPCOV_NO_PSD")]
        no_psd: bool,
        /// Output format.
        #[arg(long, env = "LDPCOV_FORMAT", value_enum, default_value_t = Format::Json)]
        format: Format,
        /// Output file (default: standard output, except for npy which needs a file).
        #[arg(long, env = "LDPCOV_OUT")]
        out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum WireEncoding {
    /// 4 bytes per entry on the fine grid.
    I32,
    /// 2 bytes per entry (coarse grid, stochastic rounding).
    I16,
    /// 1 byte per entry (coarse grid, stochastic rounding).
    I8,
}

#[derive(Clone, Copy, ValueEnum)]
enum Rule {
    /// K-fold cross-validation over none, noise-form and adaptive thresholds,
    /// banding and Toeplitz averaging (unless --unordered).
    Cv,
    /// Cai & Liu's entry-adaptive threshold (--eta).
    Adaptive,
    /// Seed 001's LDP threshold with the 1/√n fixed (--xi).
    Seed001,
    /// Seed 000's universal threshold (--gamma, --c).
    Universal,
    /// No threshold.
    None,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Target {
    /// The covariance matrix.
    Covariance,
    /// Ridge (ROPE) precision matrix.
    PrecisionRidge,
    /// Graphical-lasso precision matrix and graph.
    PrecisionGlasso,
}

/// The daemon's access control, TLS and transport limits (issue 5).
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
    /// PEM certificate chain: serve TLS (needs --tls-key).
    #[arg(long, env = "LDPCOV_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "LDPCOV_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// HTTP/2 streams (concurrent calls) one connection may open.
    #[arg(long, env = "LDPCOV_MAX_CONCURRENT_STREAMS", default_value_t = TransportLimits::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// Calls handled at once over all connections (more wait).
    #[arg(long, env = "LDPCOV_MAX_CONCURRENT_REQUESTS", default_value_t = TransportLimits::default().max_concurrent_requests)]
    max_concurrent_requests: usize,
    /// Calls running longer than this are cancelled (also bounds one report stream).
    #[arg(long, env = "LDPCOV_REQUEST_TIMEOUT_SECS", default_value_t = TransportLimits::default().request_timeout.as_secs())]
    request_timeout_secs: u64,
}

impl AccessArgs {
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
        }
        Ok(AuthConfig::new(admin, submit)?)
    }

    fn tls(&self) -> Result<Option<ServerTls>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(ServerTls::from_files(cert, key)?)),
            _ => Ok(None),
        }
    }

    fn transport(&self) -> Result<TransportLimits> {
        if self.max_concurrent_streams == 0
            || self.max_concurrent_requests == 0
            || self.request_timeout_secs == 0
        {
            anyhow::bail!(
                "--max-concurrent-streams, --max-concurrent-requests and --request-timeout-secs must be at least 1"
            );
        }
        Ok(TransportLimits {
            max_concurrent_streams: self.max_concurrent_streams,
            max_concurrent_requests: self.max_concurrent_requests,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
        })
    }
}

#[derive(clap::Args)]
struct ServerArgs {
    /// URL of the running aggregator (`https://` for TLS).
    #[arg(long, env = "LDPCOV_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Bearer token sent with every call (the admin token for create, close and
    /// estimate). Prefer the file or the environment variable.
    #[arg(long, env = "LDPCOV_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// File holding the bearer token (surrounding whitespace ignored).
    #[arg(long, env = "LDPCOV_TOKEN_FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// PEM CA certificate to trust for an `https://` server (default: the public web
    /// PKI roots).
    #[arg(long, env = "LDPCOV_CA_CERT")]
    ca_cert: Option<PathBuf>,
}

/// Adds `authorization: Bearer <token>` to every call, when a token is set.
#[derive(Clone)]
struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Client = AggregatorClient<InterceptedService<Channel, BearerToken>>;

impl ServerArgs {
    async fn connect(&self) -> Result<Client> {
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => Some(t.trim().to_string()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read token file {}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let header = match token {
            Some(t) => {
                let mut value: MetadataValue<Ascii> = format!("Bearer {t}")
                    .parse()
                    .map_err(|_| anyhow::anyhow!("the token must be visible ASCII"))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut endpoint = Endpoint::from_shared(self.server.clone())
            .with_context(|| format!("invalid server URL {}", self.server))?;
        if self.server.starts_with("https://") {
            let ca = match &self.ca_cert {
                Some(path) => Some(tls::read_ca(path)?),
                None => None,
            };
            endpoint = endpoint
                .tls_config(tls::client_config(ca.as_deref()))
                .context("TLS configuration")?;
        } else if self.ca_cert.is_some() {
            anyhow::bail!("--ca-cert needs an https:// server URL");
        }
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("cannot connect to {}", self.server))?;
        Ok(
            AggregatorClient::with_interceptor(channel, BearerToken(header))
                .max_decoding_message_size(usize::MAX),
        )
    }
}

fn status_error(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", s.code(), s.message())
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve {
            listen,
            max_dim,
            data_dir,
            memory,
            batch_size,
            batch_delay_ms,
            cache_mib,
            access,
        } => {
            if max_dim == 0 || max_dim > ldpcov_proto::collection::MAX_DIM {
                anyhow::bail!(
                    "--max-dim {max_dim} must be between 1 and {}",
                    ldpcov_proto::collection::MAX_DIM
                );
            }
            if batch_size == 0 {
                anyhow::bail!("--batch-size must be at least 1");
            }
            // Check every option before anything is opened or created.
            let auth = access.auth()?;
            let tls = access.tls()?;
            let transport = access.transport()?;
            let store: Arc<dyn Store> = if memory {
                tracing::warn!("in-memory store: everything is lost when the daemon stops");
                Arc::new(MemoryStore::new())
            } else {
                let cache_size = usize::try_from(cache_mib)
                    .ok()
                    .and_then(|m| m.checked_mul(1 << 20))
                    .context("--cache-mib is too large")?;
                let config = DurableConfig {
                    batch_size,
                    batch_delay: std::time::Duration::from_millis(batch_delay_ms),
                    cache_size,
                };
                let dir = data_dir.clone();
                let store = tokio::task::spawn_blocking(move || DurableStore::open(&dir, config))
                    .await?
                    .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
                tracing::info!(
                    data_dir = %data_dir.display(), batch_size, batch_delay_ms, cache_mib,
                    "durable store ready"
                );
                Arc::new(store)
            };
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            let addr = listener.local_addr()?;
            let kind = if memory { "memory" } else { "durable" };
            if auth.is_open() {
                tracing::warn!(
                    "running WITHOUT AUTHENTICATION: anyone who can reach this port may create, close and estimate collections (set --admin-token-file, and --submit-token-file to guard submits)"
                );
            } else {
                // Counts only: tokens are never logged.
                tracing::info!(
                    admin_token = true,
                    submit_tokens = auth.submit_tokens(),
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
                request_timeout_secs = transport.request_timeout.as_secs(),
                "ldpcov aggregator listening"
            );
            serve_with(
                store,
                ServeOptions {
                    limits: Limits { max_dim },
                    transport,
                    auth: Arc::new(auth),
                    tls,
                },
                listener,
                shutdown_signal(),
            )
            .await?;
            // The service is gone: the last handle commits what is pending when dropped.
            tracing::info!("shut down");
            Ok(())
        }
        Command::Create {
            server,
            id,
            dim,
            epsilon,
            delta,
            clip_radius,
            min_reports,
            encoding,
        } => {
            let spec = CollectionSpec {
                collection_id: id,
                dim,
                epsilon,
                delta,
                clip_radius,
                min_reports,
                encoding: match encoding {
                    WireEncoding::I32 => Encoding::I32Le,
                    WireEncoding::I16 => Encoding::I16Le,
                    WireEncoding::I8 => Encoding::I8,
                } as i32,
            };
            let params = server
                .connect()
                .await?
                .create_collection(CreateCollectionRequest { spec: Some(spec) })
                .await
                .map_err(status_error)?
                .into_inner();
            println!("{}", serde_json::to_string_pretty(&params_json(&params))?);
            Ok(())
        }
        Command::Status { server, id } => {
            let status = server
                .connect()
                .await?
                .get_status(GetStatusRequest { collection_id: id })
                .await
                .map_err(status_error)?
                .into_inner();
            println!("{}", serde_json::to_string_pretty(&status_json(&status))?);
            Ok(())
        }
        Command::Close { server, id } => {
            let status = server
                .connect()
                .await?
                .close_collection(CloseCollectionRequest { collection_id: id })
                .await
                .map_err(status_error)?
                .into_inner();
            println!("{}", serde_json::to_string_pretty(&status_json(&status))?);
            Ok(())
        }
        Command::Estimate {
            server,
            id,
            threshold,
            soft,
            xi,
            eta,
            psd_floor,
            target,
            lambda,
            rho,
            max_iterations,
            gamma,
            c,
            threshold_diagonal,
            unordered,
            no_psd,
            format,
            out,
        } => {
            if format == Format::Npy && out.is_none() {
                anyhow::bail!("--format npy needs --out FILE");
            }
            use get_estimate_request::Threshold;
            let threshold = match threshold {
                Rule::Cv => Threshold::CrossValidated(CrossValidatedThreshold {
                    threshold_diagonal,
                    unordered_variables: unordered,
                    ..Default::default()
                }),
                Rule::Adaptive => Threshold::Adaptive(AdaptiveThreshold {
                    eta,
                    threshold_diagonal,
                }),
                Rule::Seed001 => Threshold::Seed001(Seed001Threshold {
                    xi,
                    threshold_diagonal,
                }),
                Rule::None => Threshold::None(NoThreshold {}),
                Rule::Universal => Threshold::Universal(UniversalThreshold {
                    gamma,
                    c,
                    threshold_diagonal,
                }),
            };
            let wire_target = match target {
                Target::Covariance => EstimateTarget::Covariance,
                Target::PrecisionRidge => EstimateTarget::PrecisionRidge,
                Target::PrecisionGlasso => EstimateTarget::PrecisionGlasso,
            };
            let estimate = server
                .connect()
                .await?
                .get_estimate(GetEstimateRequest {
                    collection_id: id,
                    threshold: Some(threshold),
                    skip_psd_projection: no_psd,
                    threshold_kind: if soft {
                        ThresholdKind::Soft as i32
                    } else {
                        ThresholdKind::Unspecified as i32
                    },
                    psd_floor,
                    target: wire_target as i32,
                    precision: Some(PrecisionParams {
                        lambda,
                        rho,
                        max_iterations,
                        penalize_diagonal: false,
                    }),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            match out {
                Some(path) => {
                    let mut file = std::io::BufWriter::new(
                        std::fs::File::create(&path)
                            .with_context(|| format!("cannot create {}", path.display()))?,
                    );
                    write_estimate(&estimate, format, &mut file)?;
                    file.flush()?;
                    eprintln!(
                        "wrote {} ({}×{}, {} reports) to {}",
                        format_name(format),
                        estimate.dim,
                        estimate.dim,
                        estimate.reports,
                        path.display()
                    );
                }
                None => {
                    let stdout = std::io::stdout();
                    let mut lock = stdout.lock();
                    write_estimate(&estimate, format, &mut lock)?;
                }
            }
            Ok(())
        }
    }
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Json => "json",
        Format::Csv => "csv",
        Format::Npy => "npy",
    }
}

fn status_json(status: &CollectionStatus) -> serde_json::Value {
    serde_json::json!({
        "reports": status.reports,
        "releasable": status.releasable,
        "closed": status.closed,
        "params": status.params.as_ref().map(params_json),
    })
}

fn params_json(p: &ldpcov_proto::v1::CollectionParams) -> serde_json::Value {
    let spec = p.spec.clone().unwrap_or_default();
    serde_json::json!({
        "collection_id": spec.collection_id,
        "dim": spec.dim,
        "epsilon": spec.epsilon,
        "delta": spec.delta,
        "clip_radius": spec.clip_radius,
        "min_reports": spec.min_reports,
        "encoding": Encoding::try_from(spec.encoding).map(|e| e.as_str_name()).unwrap_or("unknown"),
        "entries": p.entries,
        "grid_bits": p.grid_bits,
        "sensitivity": p.sensitivity,
        "sigma": p.sigma,
        "rho": p.rho,
        "max_abs_grid_value": p.max_abs_grid_value,
        "wire_step": p.wire_step,
        "wire_max": p.wire_max,
        "calibration": p.calibration,
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("Ctrl-C: shutting down"),
        _ = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
