//! What the admin commands (`create`, `status`, `close`, `estimate`) share: the flags
//! naming the running daemon, the connection to it (TLS, bearer token), the
//! collection-status call of `status` and `close`, and the JSON they print.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use ldpcov_aggregator::{client_config, read_ca};
use ldpcov_proto::v1::aggregator_client::AggregatorClient;
use ldpcov_proto::v1::{
    CentralWeighting, CollectionParams, CollectionStatus, Encoding, LocalMechanism, Moments,
    PrivacyModel,
};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Where the daemon is and how to authenticate to it.
#[derive(clap::Args)]
pub(crate) struct ServerArgs {
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
pub(crate) struct BearerToken(Option<MetadataValue<Ascii>>);

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

/// The generated gRPC client with the bearer token attached.
pub(crate) type Client = AggregatorClient<InterceptedService<Channel, BearerToken>>;

impl ServerArgs {
    /// Reads the token, configures TLS for `https://` and connects.
    pub(crate) async fn connect(&self) -> Result<Client> {
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
                Some(path) => Some(read_ca(path)?),
                None => None,
            };
            endpoint = endpoint
                .tls_config(client_config(ca.as_deref()))
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

/// The flags of a command that names one collection and prints the status the daemon
/// answers with (`status`, `close`).
#[derive(clap::Args)]
pub(crate) struct CollectionArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
}

impl CollectionArgs {
    /// Connects, makes `call` with the collection id and prints the status it answers
    /// with as JSON ([`status_json`]).
    pub(crate) async fn print_status<F, Fut>(self, call: F) -> Result<()>
    where
        F: FnOnce(Client, String) -> Fut,
        Fut: Future<Output = Result<tonic::Response<CollectionStatus>, tonic::Status>>,
    {
        let client = self.server.connect().await?;
        let status = call(client, self.id)
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&status_json(&status))
    }
}

/// A gRPC status as a one-line error: `Code: message`.
pub(crate) fn status_error(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", s.code(), s.message())
}

/// Prints a JSON value, pretty, on standard output (through the locked handle: an
/// error, never a panic, when the reader has gone; `main` ends quietly on it).
pub(crate) fn print_json(value: &serde_json::Value) -> Result<()> {
    // Serialised first, so that a write error stays an `io::Error` (BrokenPipe).
    let text = serde_json::to_string_pretty(value)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// A collection's status (`status`, `close`) as JSON.
pub(crate) fn status_json(status: &CollectionStatus) -> serde_json::Value {
    serde_json::json!({
        "reports": status.reports,
        "releasable": status.releasable,
        "closed": status.closed,
        "rho_budget": status.rho_budget,
        // `+ 0.0` turns a -0 (a budget spent by nothing) into 0.
        "rho_spent": status.rho_spent + 0.0,
        "params": status.params.as_ref().map(params_json),
        "shuffle_delivered": status.shuffle_delivered.as_ref().map(delivered_json),
    })
}

/// What a shuffled collection's completed batches delivered (`status`), as JSON.
fn delivered_json(d: &ldpcov_proto::v1::ShuffleDelivered) -> serde_json::Value {
    serde_json::json!({
        "batches": d.batches,
        "smallest_batch": d.smallest_batch,
        "central_epsilon": d.central_epsilon,
        "central_delta": d.central_delta,
    })
}

/// A collection's public parameters (`create`, and inside [`status_json`]) as JSON.
pub(crate) fn params_json(p: &CollectionParams) -> serde_json::Value {
    let spec = p.spec.clone().unwrap_or_default();
    serde_json::json!({
        "collection_id": spec.collection_id,
        "dim": spec.dim,
        "epsilon": spec.epsilon,
        "delta": spec.delta,
        "clip_radius": spec.clip_radius,
        "min_reports": spec.min_reports,
        "encoding": Encoding::try_from(spec.encoding).map(|e| e.as_str_name()).unwrap_or("unknown"),
        "ordered_variables": spec.ordered_variables,
        "moments": Moments::try_from(spec.moments).map(|m| m.as_str_name()).unwrap_or("unknown"),
        "centre": spec.centre,
        "variable_names": spec.variable_names,
        "privacy_model": PrivacyModel::try_from(spec.privacy_model).map(|m| m.as_str_name()).unwrap_or("unknown"),
        "norm_bins": spec.norm_bins,
        "allow_compressed_release": spec.allow_compressed_release,
        "local_mechanism": LocalMechanism::try_from(spec.local_mechanism).map(|m| m.as_str_name()).unwrap_or("unknown"),
        "central_weighting": CentralWeighting::try_from(spec.central_weighting).map(|m| m.as_str_name()).unwrap_or("unknown"),
        "entries": p.entries,
        "mean_entries": p.mean_entries,
        "mean_weight": p.mean_weight,
        "base_sensitivity": p.base_sensitivity,
        "grid_bits": p.grid_bits,
        "sensitivity": p.sensitivity,
        "sigma": p.sigma,
        "rho": p.rho,
        "max_abs_grid_value": p.max_abs_grid_value,
        "wire_step": p.wire_step,
        "wire_max": p.wire_max,
        "calibration": p.calibration,
        "diagonal_noise_sd": p.diagonal_noise_sd,
        "off_diagonal_noise_sd": p.off_diagonal_noise_sd,
        "mean_noise_sd": p.mean_noise_sd,
        "rank_one": p.rank_one.as_ref().map(|r| serde_json::json!({
            "gamma": r.gamma,
            "gamma_units": r.gamma_units,
            "nominal_epsilon": r.nominal_epsilon,
            "eta": r.eta,
            "kappa": r.kappa,
            "mean_scale": r.mean_scale,
            "dither_variance": r.dither_variance,
            "expected_rounds": r.expected_rounds,
        })),
        "shuffle": p.shuffle.as_ref().map(|s| shuffle_json(s, spec.shuffle.unwrap_or_default())),
        "radius_phase": p.radius_phase.as_ref().map(|r| radius_phase_json(r, spec.radius_phase.unwrap_or_default())),
    })
}

/// A radius phase's settings and derived parameters.
fn radius_phase_json(
    r: &ldpcov_proto::v1::RadiusPhaseParams,
    settings: ldpcov_proto::v1::RadiusPhaseSpec,
) -> serde_json::Value {
    serde_json::json!({
        "phase_collection_id": r.phase_collection_id,
        "share": settings.share,
        "radii": r.radii,
        "phase_epsilon": r.phase_epsilon,
        "phase_rho": r.phase_rho,
        "main_epsilon": r.main_epsilon,
        "radius_chosen": r.radius_chosen,
    })
}

/// A shuffled collection's guarantee, settings and published keys.
fn shuffle_json(
    s: &ldpcov_proto::v1::ShuffleParams,
    settings: ldpcov_proto::v1::ShuffleSpec,
) -> serde_json::Value {
    let keys: Vec<serde_json::Value> = s
        .keys
        .iter()
        .map(|k| {
            serde_json::json!({
                "key_id": k.key_id,
                "state": ldpcov_proto::v1::HpkeKeyState::try_from(k.state).map(|s| s.as_str_name()).unwrap_or("unknown"),
                "public_key": hex::encode(&k.public_key),
                "not_before": k.not_before,
                "active_until": k.active_until,
                "not_after": k.not_after,
            })
        })
        .collect();
    serde_json::json!({
        "local_epsilon": s.local_epsilon,
        "central_epsilon": s.central_epsilon,
        "central_delta": s.central_delta,
        "min_batch_size": s.min_batch_size,
        "batch_window_seconds": settings.batch_window_seconds,
        "key_rotation_seconds": settings.key_rotation_seconds,
        "key_grace_rotations": settings.key_grace_rotations,
        "keys": keys,
    })
}
