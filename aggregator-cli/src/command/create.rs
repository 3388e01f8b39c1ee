//! `create`: create a collection on a running daemon and print its public parameters.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use ldpcov_csv::strip_bom;
use ldpcov_proto::v1::{
    CentralWeighting, CollectionSpec, CreateCollectionRequest, Encoding, LocalMechanism, Moments,
    PrivacyModel, RadiusPhaseSpec, ShuffleSpec,
};

use super::admin::{ServerArgs, params_json, print_json, status_error};

/// The flags of `create`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
    /// Dimension p of each user's vector.
    #[arg(long, env = "LDPCOV_DIM")]
    dim: u32,
    /// ε of one report (local), or of all releases together (central).
    #[arg(long, env = "LDPCOV_EPSILON")]
    epsilon: f64,
    /// δ of one report (local), or of all releases together (central). Required,
    /// except for `--mechanism rank-one`, which is pure ε (δ = 0).
    #[arg(long, env = "LDPCOV_DELTA")]
    delta: Option<f64>,
    /// How a device perturbs its report (local collections; default `gaussian`). See
    /// the README's table: `rank-one` needs far fewer users for the same error.
    #[arg(long, env = "LDPCOV_MECHANISM", value_enum)]
    mechanism: Option<MechanismArg>,
    /// Clip radius R (or --radius-phase-share: chosen from the users' norms).
    #[arg(
        long,
        env = "LDPCOV_CLIP_RADIUS",
        required_unless_present = "radius_phase_share",
        conflicts_with = "radius_phase_share"
    )]
    clip_radius: Option<f64>,
    /// Reports needed before an estimate is released.
    #[arg(long, env = "LDPCOV_MIN_REPORTS")]
    min_reports: u64,
    /// Wire encoding of reports (local collections; default i32): i16 and i8
    /// re-quantise the noisy entries.
    #[arg(long, env = "LDPCOV_ENCODING", value_enum)]
    encoding: Option<WireEncoding>,
    /// Who adds the noise. `central`: devices send their clipped vectors and the
    /// operator SEES them; each estimate is a release that spends the collection's
    /// budget (ε, δ). Serve such a collection with TLS and a submit token.
    #[arg(long, env = "LDPCOV_PRIVACY_MODEL", value_enum, default_value_t = PrivacyModelArg::Local)]
    privacy_model: PrivacyModelArg,
    /// Central collections: how Gaussian releases weight the off-diagonal sums
    /// (default `svec`: half their noise variance at the same ρ; `triu` matches a
    /// central collection created before the weighting existed).
    #[arg(long, env = "LDPCOV_CENTRAL_WEIGHTING", value_enum)]
    central_weighting: Option<CentralWeightingArg>,
    /// Central second-moment collections: dyadic norm bins to keep for
    /// `estimate --release adaptive-cov` (0: none; at most 15).
    #[arg(long, env = "LDPCOV_NORM_BINS", default_value_t = 0)]
    norm_bins: u32,
    /// Central second-moment collections: allow the compressed (random-projection) release, which
    /// is NOT differentially private (every device sees this flag).
    #[arg(long, env = "LDPCOV_ALLOW_COMPRESSED_RELEASE")]
    allow_compressed_release: bool,
    /// The variables have a natural order (time, position, …): the default estimate
    /// may then try banding and Toeplitz averaging. Off by default.
    #[arg(long, env = "LDPCOV_ORDERED_VARIABLES")]
    ordered_variables: bool,
    /// What to estimate (default: mean and covariance).
    #[arg(long, env = "LDPCOV_MOMENTS", value_enum)]
    moments: Option<MomentsArg>,
    /// Public centre c, p comma-separated numbers in data units: devices report
    /// clip((x − c)/R). Must not come from this collection's data.
    #[arg(
        long,
        env = "LDPCOV_CENTRE",
        value_delimiter = ',',
        allow_hyphen_values = true,
        conflicts_with = "centre_file"
    )]
    centre: Vec<f64>,
    /// File holding the centre: p numbers separated by commas, spaces or newlines.
    #[arg(long, env = "LDPCOV_CENTRE_FILE")]
    centre_file: Option<PathBuf>,
    /// Variable names, p comma-separated (distinct, non-empty, ≤ 64 bytes each).
    #[arg(
        long,
        env = "LDPCOV_NAMES",
        value_delimiter = ',',
        conflicts_with = "names_file"
    )]
    names: Vec<String>,
    /// File holding the variable names, one per line (names may contain commas).
    #[arg(long, env = "LDPCOV_NAMES_FILE")]
    names_file: Option<PathBuf>,
    /// Make the collection shuffled (docs/PRIVACY.md §9): devices seal their reports
    /// and send them through a relay, which forwards batches of at least this many;
    /// direct reports are refused. Needs --mechanism rank-one.
    #[arg(long, env = "LDPCOV_SHUFFLE_MIN_BATCH")]
    shuffle_min_batch: Option<u64>,
    /// Shortest batch window of the relay, seconds (default 3600).
    #[arg(
        long,
        env = "LDPCOV_SHUFFLE_WINDOW_SECS",
        requires = "shuffle_min_batch"
    )]
    shuffle_window_secs: Option<u64>,
    /// δ of the shuffled collection's central guarantee (default 1e-6).
    #[arg(long, env = "LDPCOV_SHUFFLE_DELTA", requires = "shuffle_min_batch")]
    shuffle_delta: Option<f64>,
    /// The collection's HPKE key rotates this often, seconds (default 86400).
    #[arg(long, env = "LDPCOV_KEY_ROTATION_SECS", requires = "shuffle_min_batch")]
    key_rotation_secs: Option<u64>,
    /// Rotations a superseded key still opens reports for (default 7).
    #[arg(
        long,
        env = "LDPCOV_KEY_GRACE_ROTATIONS",
        requires = "shuffle_min_batch"
    )]
    key_grace_rotations: Option<u32>,
    /// Choose R privately (docs/USAGE.md, "Choosing the clip radius"): devices first
    /// spend this share of their budget (in (0, 1), e.g. 0.1) reporting their norm's
    /// interval to the collection `<id>.radius`; closing it sets R. Local Gaussian
    /// collections and central ones.
    #[arg(long, env = "LDPCOV_RADIUS_PHASE_SHARE")]
    radius_phase_share: Option<f64>,
    /// The smallest candidate radius (default √p/4).
    #[arg(long, requires = "radius_phase_share")]
    radius_phase_smallest: Option<f64>,
    /// The largest candidate radius (default 16·√p).
    #[arg(long, requires = "radius_phase_share")]
    radius_phase_largest: Option<f64>,
    /// Candidate radii, geometric from the smallest to the largest (default 13).
    #[arg(long, requires = "radius_phase_share")]
    radius_phase_radii: Option<u32>,
}

/// `--moments`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum MomentsArg {
    /// Reports carry triu(uuᵀ); the estimate is the second moment about the centre.
    SecondMoment,
    /// Reports carry (u/2, triu(uuᵀ)); the estimate is the mean and the covariance.
    MeanAndCovariance,
}

/// Reads a centre file: numbers separated by commas and/or whitespace.
fn read_centre(path: &Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --centre-file {}", path.display()))?;
    strip_bom(&text)
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .enumerate()
        .map(|(i, t)| {
            t.parse::<f64>().map_err(|_| {
                anyhow::anyhow!(
                    "--centre-file {}: value {} ({t:?}) is not a number",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

/// Reads a names file: one name per line (a final newline is not an empty name, a
/// leading UTF-8 byte order mark is not part of the first name).
fn read_names(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --names-file {}", path.display()))?;
    let names: Vec<String> = strip_bom(&text)
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    if names.is_empty() {
        bail!("--names-file {} holds no names", path.display());
    }
    Ok(names)
}

/// `--mechanism`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MechanismArg {
    /// (ε, δ): the report (w·u, svec(uuᵀ)) plus discrete Gaussian noise on every entry,
    /// off-diagonal products carried ×√2 (half the off-diagonal noise variance of
    /// `gaussian-triu`). p(p+1)/2 (+ p) numbers per report.
    Gaussian,
    /// (ε, δ): the original Gaussian report, off-diagonal products carried as they are.
    GaussianTriu,
    /// Pure ε (δ = 0): one rank-one PrivUnitG draw per report, p i16 numbers.
    RankOne,
}

/// `--privacy-model`.
#[derive(Clone, Copy, ValueEnum)]
enum PrivacyModelArg {
    /// Each device perturbs its own report (nobody sees a raw vector).
    Local,
    /// Trusted curator: raw clipped vectors, noise added once per release.
    Central,
}

/// `--central-weighting`.
#[derive(Clone, Copy, ValueEnum)]
enum CentralWeightingArg {
    /// Noise σ² on the mean and diagonal sums, σ²/2 on the off-diagonal ones.
    Svec,
    /// Noise σ² on every sum: the original release.
    Triu,
}

/// `--encoding`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum WireEncoding {
    /// 4 bytes per entry on the fine grid.
    I32,
    /// 2 bytes per entry (coarse grid, stochastic rounding).
    I16,
    /// 1 byte per entry (coarse grid, stochastic rounding).
    I8,
}

impl MechanismArg {
    /// The spec's value.
    pub(crate) fn to_proto(self) -> LocalMechanism {
        match self {
            MechanismArg::Gaussian => LocalMechanism::Gaussian,
            MechanismArg::GaussianTriu => LocalMechanism::GaussianTriu,
            MechanismArg::RankOne => LocalMechanism::RankOne,
        }
    }
}

impl MomentsArg {
    /// The spec's value.
    pub(crate) fn to_proto(self) -> Moments {
        match self {
            MomentsArg::SecondMoment => Moments::SecondMoment,
            MomentsArg::MeanAndCovariance => Moments::MeanAndCovariance,
        }
    }
}

impl WireEncoding {
    /// The spec's value.
    pub(crate) fn to_proto(self) -> Encoding {
        match self {
            WireEncoding::I32 => Encoding::I32Le,
            WireEncoding::I16 => Encoding::I16Le,
            WireEncoding::I8 => Encoding::I8,
        }
    }
}

impl Options {
    /// Sends the spec; the daemon validates it and derives the parameters.
    pub(crate) async fn run(self) -> Result<()> {
        let centre = match &self.centre_file {
            Some(path) => read_centre(path)?,
            None => self.centre,
        };
        let variable_names = match &self.names_file {
            Some(path) => read_names(path)?,
            // A name pasted from a file's first line may carry its byte order mark.
            None => self
                .names
                .iter()
                .map(|n| strip_bom(n).to_string())
                .collect(),
        };
        let moments = self
            .moments
            .map_or(Moments::Unspecified, MomentsArg::to_proto);
        let rank_one = self.mechanism == Some(MechanismArg::RankOne);
        let delta = match self.delta {
            Some(delta) => delta,
            None if rank_one => 0.0,
            None => bail!(
                "--delta is required (only --mechanism rank-one, which is pure epsilon, goes without)"
            ),
        };
        let spec = CollectionSpec {
            collection_id: self.id,
            dim: self.dim,
            epsilon: self.epsilon,
            delta,
            clip_radius: self.clip_radius.unwrap_or(0.0),
            min_reports: self.min_reports,
            encoding: self
                .encoding
                .map_or(Encoding::Unspecified, WireEncoding::to_proto) as i32,
            privacy_model: match self.privacy_model {
                PrivacyModelArg::Local => PrivacyModel::Local,
                PrivacyModelArg::Central => PrivacyModel::Central,
            } as i32,
            norm_bins: self.norm_bins,
            allow_compressed_release: self.allow_compressed_release,
            ordered_variables: self.ordered_variables,
            moments: moments as i32,
            centre,
            variable_names,
            local_mechanism: self
                .mechanism
                .map_or(LocalMechanism::Unspecified, MechanismArg::to_proto)
                as i32,
            central_weighting: match self.central_weighting {
                None => CentralWeighting::Unspecified,
                Some(CentralWeightingArg::Svec) => CentralWeighting::Svec,
                Some(CentralWeightingArg::Triu) => CentralWeighting::Triu,
            } as i32,
            // 0 takes the server's default at create.
            shuffle: self.shuffle_min_batch.map(|min_batch_size| ShuffleSpec {
                min_batch_size,
                batch_window_seconds: self.shuffle_window_secs.unwrap_or(0),
                central_delta: self.shuffle_delta.unwrap_or(0.0),
                key_rotation_seconds: self.key_rotation_secs.unwrap_or(0),
                key_grace_rotations: self.key_grace_rotations.unwrap_or(0),
            }),
            radius_phase: self.radius_phase_share.map(|share| RadiusPhaseSpec {
                share,
                smallest_radius: self.radius_phase_smallest.unwrap_or(0.0),
                largest_radius: self.radius_phase_largest.unwrap_or(0.0),
                radii: self.radius_phase_radii.unwrap_or(0),
            }),
        };
        let params = self
            .server
            .connect()
            .await?
            .create_collection(CreateCollectionRequest { spec: Some(spec) })
            .await
            .map_err(status_error)?
            .into_inner();
        print_json(&params_json(&params))
    }
}
