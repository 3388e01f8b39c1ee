//! `estimate`: fetch the estimate and write it as JSON, CSV or NPY, or draw it as a
//! PNG heatmap (diverging colours centred at 0, colour bar, axis names from `--names`
//! or a CSV header).

use std::io::Write;
use std::path::PathBuf;

use crate::{
    Banner, Format, HeatmapPanel, Part, Scale, ScreeBar, component_loadings, mean_vector,
    part_matrix, plot_title, raw_eigenvalues, read_csv_header, strip_bom, variable_names,
    write_components, write_estimate, write_heatmaps, write_part, write_vector,
};
use anyhow::{Context, Result};
use clap::ValueEnum;
use ldpcov_proto::v1::Estimate;
use ldpcov_proto::v1::get_estimate_request::Threshold;
use ldpcov_proto::v1::{
    AdaptiveThreshold, BulkShrinkage, CentralMechanism, CentralRelease, CrossValidatedThreshold,
    EstimateTarget, FactorModel, GetCollectionRequest, GetEstimateRequest, LdpNoiseThreshold,
    NoThreshold, PrecisionParams, SpectralLoss, SpectralShrinkage, ThresholdKind,
    UniversalThreshold,
};

use super::admin::{ServerArgs, status_error};

/// The flags of `estimate`.
#[derive(clap::Args)]
pub(crate) struct Options {
    #[command(flatten)]
    server: ServerArgs,
    /// Collection id.
    #[arg(long, env = "LDPCOV_COLLECTION")]
    id: String,
    /// Threshold rule. Default: the server's — K-fold cross-validation for a local
    /// collection, bulk-shrink (SURE on the release's known noise) for a central one.
    #[arg(long, env = "LDPCOV_THRESHOLD", value_enum)]
    threshold: Option<Rule>,
    /// Central collections: the release to post-process, which spends budget the
    /// first time it is asked for (the same release with no new report is free).
    #[arg(long, env = "LDPCOV_RELEASE", value_enum)]
    release: Option<ReleaseArg>,
    /// ρ (zCDP) the release spends (gauss-cov, separate-cov).
    #[arg(long, env = "LDPCOV_RELEASE_RHO", requires = "release")]
    release_rho: Option<f64>,
    /// ε (pure DP) the release spends (laplace-cov).
    #[arg(long, env = "LDPCOV_RELEASE_EPSILON", requires = "release")]
    release_epsilon: Option<f64>,
    /// m, the rows of the compressed release (compressed-not-dp).
    #[arg(long, env = "LDPCOV_COMPRESSED_ROWS", requires = "release")]
    compressed_rows: Option<u32>,
    /// Soft instead of hard thresholding (for cv: only soft candidates).
    #[arg(long, env = "LDPCOV_SOFT")]
    soft: bool,
    /// ξ of the ldp-noise threshold.
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
    /// Threshold the diagonal too (as Wang & Xu print it).
    #[arg(long, env = "LDPCOV_THRESHOLD_DIAGONAL")]
    threshold_diagonal: bool,
    /// For cv: the variables have no natural order (do not try banding or
    /// Toeplitz band averaging).
    #[arg(long, env = "LDPCOV_UNORDERED")]
    unordered: bool,
    /// For cv: when a threshold wins, release the one with the smallest mean held-out
    /// loss instead of the simplest within one standard error of it (the default when
    /// the data show no off-diagonal signal, z ≤ 3).
    #[arg(long, env = "LDPCOV_SMALLEST_MEAN_THRESHOLD")]
    smallest_mean_threshold: bool,
    /// For cv: release the chosen candidate alone instead of stacking it with the other
    /// family's best (the default when the data show off-diagonal signal, z > 3).
    #[arg(long, env = "LDPCOV_NO_STACKING")]
    no_stacking: bool,
    /// For cv: do not weigh the trivial estimates (the diagonal alone, the scaled
    /// identity, the zero matrix where the variances are not told from zero), so that
    /// a threshold, structure or spectral estimate is released even where a trivial
    /// one would do better.
    #[arg(long, env = "LDPCOV_NO_TRIVIAL_ESTIMATES")]
    no_trivial_estimates: bool,
    /// For spectral and factor: the number of spikes (< dim; default: those above the
    /// noise bulk edge).
    #[arg(long, env = "LDPCOV_RANK")]
    rank: Option<u32>,
    /// For spectral: the loss the shrunk spikes are optimal for.
    #[arg(long, env = "LDPCOV_LOSS", value_enum, default_value_t = Loss::Balanced)]
    loss: Loss,
    /// For bulk-shrink: candidate weights α ∈ [0, 1], comma-separated (default:
    /// 0, 0.1, …, 1), chosen by Stein's unbiased risk estimate.
    #[arg(long, env = "LDPCOV_ALPHAS", value_delimiter = ',')]
    alphas: Vec<f64>,
    /// For bulk-shrink: candidate edge soft thresholds τ ∈ [0, 2] in units of σ_n√p,
    /// comma-separated (default: 1, 1.5, 2; 2 is none), chosen with α.
    #[arg(long, env = "LDPCOV_TAUS", value_delimiter = ',')]
    taus: Vec<f64>,
    /// Skip the PSD projection.
    #[arg(long, env = "LDPCOV_NO_PSD")]
    no_psd: bool,
    /// Output format.
    #[arg(long, env = "LDPCOV_FORMAT", value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Output file (default: standard output, except for npy and png which need a
    /// file).
    #[arg(long, env = "LDPCOV_OUT")]
    out: Option<PathBuf>,
    /// For png: the variables' names on the axes, comma-separated, one per variable.
    #[arg(
        long,
        env = "LDPCOV_NAMES",
        value_delimiter = ',',
        conflicts_with = "names_from"
    )]
    names: Option<Vec<String>>,
    /// For png: take the axis names from the header line of this CSV data file (the
    /// file the users' data came from; read in the data reader's dialect).
    #[arg(long, env = "LDPCOV_NAMES_FROM")]
    names_from: Option<PathBuf>,
    /// Also draw this many synthetic rows from the released mean and covariance
    /// (post-processing: the release's guarantee, no user's values) and write them as
    /// CSV to --synthetic-out.
    #[arg(long, env = "LDPCOV_SYNTHETIC_ROWS", requires = "synthetic_out")]
    synthetic_rows: Option<usize>,
    /// CSV file of the synthetic rows (header: the variable names, or x1, x2, …).
    #[arg(long, env = "LDPCOV_SYNTHETIC_OUT", requires = "synthetic_rows")]
    synthetic_out: Option<PathBuf>,
    /// Seed of the synthetic rows' generator (default: from the operating system).
    #[arg(long, env = "LDPCOV_SYNTHETIC_SEED")]
    synthetic_seed: Option<u64>,
    /// For csv, npy and png: what to write or draw (default: the released matrix, i.e.
    /// the covariance, drawn beside its correlation, or for a precision target the
    /// precision matrix). second-moment and mean exist for mean-and-covariance
    /// collections, raw and standard-errors with --error-bars, components with --pca
    /// (png: a scree plot beside the loadings). Axis names default to the
    /// collection's variable names.
    #[arg(long, env = "LDPCOV_WHAT", value_enum)]
    what: Option<What>,
    /// The top K principal components of the released matrix (eigenvalues,
    /// explained-variance ratios, loadings, and whether each stands above the noise,
    /// beside the raw eigenvalue that flag tests): in the JSON output, or with --what
    /// components. Post-processing: no budget.
    #[arg(long, env = "LDPCOV_PCA", value_name = "K")]
    pca: Option<u32>,
    /// With --pca: the components of the correlation rather than of the covariance
    /// (variables on different scales).
    #[arg(long, env = "LDPCOV_PCA_CORRELATION", requires = "pca")]
    pca_correlation: bool,
    /// Release the error bars: the raw (unregularised) matrix with the standard error
    /// of each entry, and its correlations with theirs (in the JSON output, or with
    /// --what raw / standard-errors). Post-processing: no budget.
    #[arg(long, env = "LDPCOV_ERROR_BARS")]
    error_bars: bool,
}

/// `--what`.
#[derive(Clone, Copy, ValueEnum)]
enum What {
    /// The covariance estimate.
    Covariance,
    /// Its correlation matrix.
    Correlation,
    /// The second moment M̂.
    SecondMoment,
    /// The mean μ̂ (a one-row heatmap).
    Mean,
    /// The raw (unregularised) matrix (with --error-bars).
    Raw,
    /// The standard errors of the raw matrix's entries (with --error-bars).
    StandardErrors,
    /// The principal components (with --pca): K × p loadings; png: scree and loadings.
    Components,
}

impl What {
    /// The part of an estimate it names.
    fn part(self) -> Part {
        match self {
            What::Covariance => Part::Covariance,
            What::Correlation => Part::Correlation,
            What::SecondMoment => Part::SecondMoment,
            What::Mean => Part::Mean,
            What::Raw => Part::Raw,
            What::StandardErrors => Part::StandardErrors,
            What::Components => Part::Components,
        }
    }
}

/// `--loss`.
#[derive(Clone, Copy, ValueEnum)]
enum Loss {
    /// Within 0.8 % of the Frobenius optimum and 11 % of the operator-norm optimum.
    Balanced,
    /// Frobenius norm.
    Frobenius,
    /// Operator (spectral) norm: the de-biased spike itself.
    Operator,
}

/// `--threshold`.
#[derive(Clone, Copy, ValueEnum)]
enum Rule {
    /// K-fold cross-validation over none, noise-form and adaptive thresholds,
    /// banding and Toeplitz averaging (unless --unordered).
    Cv,
    /// Cai & Liu's entry-adaptive threshold (--eta).
    Adaptive,
    /// The heavy-tailed LDP threshold ξ√(log p/n) + 4σ_n√(log p) (--xi; `seed001`
    /// is a hidden alias, its old name).
    #[value(alias = "seed001")]
    LdpNoise,
    /// Wang & Xu's universal threshold (--gamma, --c).
    Universal,
    /// No threshold.
    None,
    /// Spike shrinkage against the known noise level (--rank, --loss).
    Spectral,
    /// Low rank plus diagonal (--rank).
    Factor,
    /// Spikes over a shrunk bulk, weight chosen by SURE (--alphas).
    BulkShrink,
}

/// `--release`.
// The values are Dong, Liang & Yi's mechanism names (gauss-cov, separate-cov, laplace-cov).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, ValueEnum)]
enum ReleaseArg {
    /// Every entry plus discrete Gaussian noise (--release-rho).
    GaussCov,
    /// GaussCov of each cross-validation fold at --release-rho (parallel composition):
    /// K× the noise variance, but cross-validation (then the default rule) is private.
    GaussCovFolds,
    /// Noisy eigenvalues with GaussCov's eigenvectors (--release-rho; second moment).
    SeparateCov,
    /// Every entry plus discrete Laplace noise, pure DP (--release-epsilon).
    LaplaceCov,
    /// Private trace, a clipping radius by the sparse vector technique, GaussCov of
    /// the clipped data (--release-rho; collections created with --norm-bins).
    AdaptiveCov,
    /// Pure-DP SeparateCov: Laplace eigenvalues and LaplaceCov eigenvectors
    /// (--release-epsilon; second moment).
    SeparateCovLaplace,
    /// Pure-DP AdaptiveCov (--release-epsilon; collections created with --norm-bins).
    AdaptiveCovLaplace,
    /// The compressed (random-projection) release ΦX, NOT differentially private
    /// (--compressed-rows; collections created with --allow-compressed-release).
    CompressedNotDp,
}

/// `--target`.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Target {
    /// The covariance matrix.
    Covariance,
    /// Ridge (ROPE) precision matrix.
    PrecisionRidge,
    /// Graphical-lasso precision matrix and graph.
    PrecisionGlasso,
}

impl Options {
    /// The request these flags describe.
    fn request(&self) -> GetEstimateRequest {
        let threshold_diagonal = self.threshold_diagonal;
        let threshold = match self.threshold {
            // The server's default, unless a cv flag is given.
            None if !(threshold_diagonal
                || self.unordered
                || self.smallest_mean_threshold
                || self.no_stacking
                || self.no_trivial_estimates) =>
            {
                None
            }
            None | Some(Rule::Cv) => Some(Threshold::CrossValidated(CrossValidatedThreshold {
                threshold_diagonal,
                unordered_variables: self.unordered,
                smallest_mean_threshold: self.smallest_mean_threshold,
                no_stacking: self.no_stacking,
                no_trivial_estimates: self.no_trivial_estimates,
                ..Default::default()
            })),
            Some(Rule::Adaptive) => Some(Threshold::Adaptive(AdaptiveThreshold {
                eta: self.eta,
                threshold_diagonal,
            })),
            Some(Rule::LdpNoise) => Some(Threshold::LdpNoise(LdpNoiseThreshold {
                xi: self.xi,
                threshold_diagonal,
            })),
            Some(Rule::None) => Some(Threshold::None(NoThreshold {})),
            Some(Rule::Universal) => Some(Threshold::Universal(UniversalThreshold {
                gamma: self.gamma,
                c: self.c,
                threshold_diagonal,
            })),
            Some(Rule::Spectral) => Some(Threshold::Spectral(SpectralShrinkage {
                loss: match self.loss {
                    Loss::Balanced => SpectralLoss::Balanced,
                    Loss::Frobenius => SpectralLoss::Frobenius,
                    Loss::Operator => SpectralLoss::Operator,
                } as i32,
                rank: self.rank,
            })),
            Some(Rule::Factor) => Some(Threshold::Factor(FactorModel { rank: self.rank })),
            Some(Rule::BulkShrink) => Some(Threshold::BulkShrink(BulkShrinkage {
                alphas: self.alphas.clone(),
                taus: self.taus.clone(),
            })),
        };
        let release = self.release.map(|r| CentralRelease {
            mechanism: match r {
                ReleaseArg::GaussCov => CentralMechanism::GaussCov,
                ReleaseArg::GaussCovFolds => CentralMechanism::GaussCovFolds,
                ReleaseArg::SeparateCov => CentralMechanism::SeparateCov,
                ReleaseArg::LaplaceCov => CentralMechanism::LaplaceCov,
                ReleaseArg::AdaptiveCov => CentralMechanism::AdaptiveCov,
                ReleaseArg::CompressedNotDp => CentralMechanism::CompressedNotDp,
                ReleaseArg::SeparateCovLaplace => CentralMechanism::SeparateCovLaplace,
                ReleaseArg::AdaptiveCovLaplace => CentralMechanism::AdaptiveCovLaplace,
            } as i32,
            rho: self.release_rho.unwrap_or(0.0),
            epsilon: self.release_epsilon.unwrap_or(0.0),
            compressed_rows: self.compressed_rows.unwrap_or(0),
        });
        let target = match self.target {
            Target::Covariance => EstimateTarget::Covariance,
            Target::PrecisionRidge => EstimateTarget::PrecisionRidge,
            Target::PrecisionGlasso => EstimateTarget::PrecisionGlasso,
        };
        GetEstimateRequest {
            collection_id: self.id.clone(),
            threshold,
            skip_psd_projection: self.no_psd,
            threshold_kind: if self.soft {
                ThresholdKind::Soft as i32
            } else {
                ThresholdKind::Unspecified as i32
            },
            psd_floor: self.psd_floor,
            target: target as i32,
            precision: Some(PrecisionParams {
                lambda: self.lambda,
                rho: self.rho,
                max_iterations: self.max_iterations,
                penalize_diagonal: false,
            }),
            release,
            principal_components: self.pca.unwrap_or(0),
            principal_components_of_correlation: self.pca_correlation,
            // With --pca too: the raw matrix holds the eigenvalues the components'
            // noise-edge flags test, which the outputs show beside the flags.
            error_bars: self.error_bars,
        }
    }

    /// Fetches the estimate and writes it to `--out` or standard output.
    pub(crate) async fn run(self) -> Result<()> {
        if self.out.is_none() && matches!(self.format, Format::Npy | Format::Png) {
            anyhow::bail!("--format {} needs --out FILE", format_name(self.format));
        }
        if self.format != Format::Png && (self.names.is_some() || self.names_from.is_some()) {
            anyhow::bail!("--names and --names-from apply only to --format png");
        }
        if self.format == Format::Json && self.what.is_some() {
            anyhow::bail!("--what applies to csv, npy and png (the JSON output holds every part)");
        }
        if self.pca == Some(0) {
            anyhow::bail!("--pca needs K ≥ 1 components");
        }
        match self.what {
            Some(What::Components) if self.pca.is_none() => {
                anyhow::bail!("--what components needs --pca K")
            }
            Some(What::Raw | What::StandardErrors) if !self.error_bars => {
                anyhow::bail!("--what raw and standard-errors need --error-bars")
            }
            _ => {}
        }
        // The names file is read before anything is fetched: a bad one stops here.
        let names = match (&self.names, &self.names_from) {
            // A name pasted from a file's first line may carry its byte order mark.
            (Some(names), _) => Some(names.iter().map(|n| strip_bom(n).to_string()).collect()),
            (None, Some(path)) => Some(read_csv_header(path)?),
            (None, None) => None,
        };
        let mut client = self.server.connect().await?;
        let estimate = client
            .get_estimate(self.request())
            .await
            .map_err(status_error)?
            .into_inner();
        let raw = raw_eigenvalues(&estimate);
        let raw = raw.as_deref();
        if let (Some(rows), Some(path)) = (self.synthetic_rows, &self.synthetic_out) {
            // A second-moment collection's rows are drawn about its centre.
            let mean = if estimate.mean.is_empty() {
                client
                    .get_collection(GetCollectionRequest {
                        collection_id: self.id.clone(),
                    })
                    .await
                    .map_err(status_error)?
                    .into_inner()
                    .spec
                    .map(|s| s.centre)
                    .unwrap_or_default()
            } else {
                estimate.mean.clone()
            };
            write_synthetic(&estimate, &mean, rows, self.synthetic_seed, path)?;
        }
        match (&self.out, self.format) {
            (Some(path), Format::Png) => {
                let what = self
                    .what
                    .map_or_else(|| Part::released(&estimate), What::part);
                // Without --what, a covariance is drawn beside its correlation.
                let beside_correlation = self.what.is_none() && what == Part::Covariance;
                let layout = draw_png(
                    &estimate,
                    raw,
                    what,
                    beside_correlation,
                    path,
                    names.as_deref(),
                )?;
                // What is shown: p × p, a mean's p, or the loadings' p × k.
                let shape = match what {
                    Part::Mean => estimate.dim.to_string(),
                    Part::Components => format!("{} × {}", estimate.dim, layout.cols),
                    _ => format!("{} × {}", estimate.dim, estimate.dim),
                };
                eprintln!(
                    "wrote png ({}, {shape}, {} reports, {}×{} pixels) to {}",
                    what.name(),
                    estimate.reports,
                    layout.width,
                    layout.height,
                    path.display()
                );
            }
            (Some(path), _) => {
                let mut file = std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("cannot create {}", path.display()))?,
                );
                match self.what {
                    Some(what) => write_part(&estimate, raw, what.part(), self.format, &mut file)?,
                    None => write_estimate(&estimate, raw, self.format, &mut file)?,
                }
                file.flush()?;
                eprintln!(
                    "wrote {} ({}×{}, {} reports) to {}",
                    format_name(self.format),
                    estimate.dim,
                    estimate.dim,
                    estimate.reports,
                    path.display()
                );
            }
            (None, _) => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                match self.what {
                    Some(what) => write_part(&estimate, raw, what.part(), self.format, &mut lock)?,
                    None => write_estimate(&estimate, raw, self.format, &mut lock)?,
                }
            }
        }
        // Only once the output is written: a refused request prints its one-line
        // reason alone.
        if let Some(verdict) = &estimate.verdict
            && !verdict.sufficient
        {
            eprintln!("warning: {}", verdict.summary);
        }
        Ok(())
    }
}

/// Draws `what` of `estimate` as a heatmap titled with the collection, n and the
/// rule, under a banner of the estimate's verdict (the covariance beside its
/// correlation when `beside_correlation`; the components as a scree plot, with the
/// raw eigenvalues `raw` their flags test, beside the loadings; standard errors on a
/// sequential scale from 0), to the PNG file `path`; refuses a number of names other
/// than p before drawing anything.
fn draw_png(
    estimate: &Estimate,
    raw: Option<&[f64]>,
    what: Part,
    beside_correlation: bool,
    path: &std::path::Path,
    names: Option<&[String]>,
) -> Result<crate::Layout> {
    let p = estimate.dim as usize;
    if let Some(names) = names
        && names.len() != p
    {
        anyhow::bail!(
            "{} axis names for {} variables (--names / --names-from must give one per variable)",
            names.len(),
            p
        );
    }
    // Without --names, the collection's names, else x1 … xp.
    let names = names.map_or_else(|| variable_names(estimate), <[String]>::to_vec);
    let names = Some(names.as_slice());
    let banner = estimate.verdict.as_ref().map(|v| Banner {
        text: &v.summary,
        warning: !v.sufficient,
    });
    let title = plot_title(estimate, what);
    let panel = |matrix, title, scale| HeatmapPanel {
        matrix,
        title,
        scale,
    };
    match what {
        Part::Mean => {
            let mean = mean_vector(estimate)?;
            Ok(write_vector(path, &mean, &title, names, banner)?)
        }
        Part::Components => {
            let loadings = component_loadings(estimate)?.transpose();
            let pcs = estimate.principal_components.as_ref();
            let bars: Vec<ScreeBar> = pcs
                .iter()
                .flat_map(|pc| &pc.components)
                .enumerate()
                .map(|(k, c)| ScreeBar {
                    ratio: c.explained_variance_ratio,
                    above_noise_edge: c.above_noise_edge,
                    raw_eigenvalue: raw.and_then(|r| r.get(k).copied()),
                })
                .collect();
            let edge = pcs.map_or(f64::NAN, |pc| pc.noise_edge);
            Ok(write_components(
                path, &bars, edge, &loadings, &title, names, banner,
            )?)
        }
        // The covariance beside its correlation: the scales of the variables and how
        // they move together, in one picture.
        Part::Covariance if beside_correlation => {
            let covariance = part_matrix(estimate, Part::Covariance)?;
            let correlation = part_matrix(estimate, Part::Correlation)?;
            let correlation_title = plot_title(estimate, Part::Correlation);
            let panels = [
                panel(&covariance, &title, Scale::Diverging),
                panel(&correlation, &correlation_title, Scale::Diverging),
            ];
            let layouts = write_heatmaps(path, &panels, names, banner)?;
            Ok(layouts[0])
        }
        _ => {
            let matrix = part_matrix(estimate, what)?;
            // Standard errors are never negative: one-sided from 0.
            let scale = if what == Part::StandardErrors {
                Scale::Sequential
            } else {
                Scale::Diverging
            };
            let layouts = write_heatmaps(path, &[panel(&matrix, &title, scale)], names, banner)?;
            Ok(layouts[0])
        }
    }
}

/// Draws `rows` synthetic rows of `N(mean, Σ̂)` from the released covariance and
/// writes them as CSV to `path`.
fn write_synthetic(
    estimate: &Estimate,
    mean: &[f64],
    rows: usize,
    seed: Option<u64>,
    path: &std::path::Path,
) -> Result<()> {
    use rand::SeedableRng;
    let p = estimate.dim as usize;
    let full = ldpcov_privacy::layout::unpack_symmetric(p, &estimate.upper_triangle);
    let sigma = nalgebra::DMatrix::from_row_slice(p, p, &full);
    let mut rng = match seed {
        Some(s) => rand_chacha::ChaCha20Rng::seed_from_u64(s),
        None => rand_chacha::ChaCha20Rng::from_os_rng(),
    };
    let drawn = ldpcov_estimate::synthetic_rows(mean, &sigma, rows, &mut rng)
        .context("cannot draw synthetic rows from the estimate")?;
    // The csv writer buffers.
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut csv = csv::Writer::from_writer(file);
    csv.write_record(variable_names(estimate))?;
    for row in &drawn {
        csv.write_record(row.iter().map(|v| format!("{v:e}")))?;
    }
    csv.flush()?;
    eprintln!(
        "wrote {rows} synthetic rows ({p} columns, drawn from the released estimate) to {}",
        path.display()
    );
    Ok(())
}

/// The name of `--format`'s value, for the message after writing a file.
fn format_name(f: Format) -> &'static str {
    match f {
        Format::Json => "json",
        Format::Csv => "csv",
        Format::Npy => "npy",
        Format::Png => "png",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_proto::v1::{ErrorBars, PrincipalComponent, PrincipalComponents, SignalVerdict};

    /// A hand-made estimate of `p` variables: variances about 1350, a few
    /// correlations, error bars, three components, and `verdict`.
    fn sample(p: usize, names: bool, verdict: Option<SignalVerdict>) -> Estimate {
        let cov = nalgebra::DMatrix::from_fn(p, p, |i, j| {
            let s = 1350.0 / (1.0 + 0.1 * i as f64);
            let t = 1350.0 / (1.0 + 0.1 * j as f64);
            let r = if i == j {
                1.0
            } else {
                0.6f64.powi((i as i32 - j as i32).abs())
            };
            r * (s * t).sqrt()
        });
        let corr = ldpcov_estimate::correlation(&cov);
        let pack = |m: &nalgebra::DMatrix<f64>| ldpcov_estimate::matrix_to_packed(m);
        let se = cov.map(|v| 0.05 * v.abs() + 1.0);
        let (values, vectors) = ldpcov_estimate::symmetric_eigen(&cov).unwrap();
        let components = (0..3)
            .map(|r| PrincipalComponent {
                eigenvalue: values[p - 1 - r],
                explained_variance_ratio: values[p - 1 - r] / cov.trace(),
                loadings: (0..p).map(|i| vectors[(i, p - 1 - r)]).collect(),
                above_noise_edge: r == 0,
                raw_eigenvalue: values[p - 1 - r],
            })
            .collect();
        Estimate {
            collection_id: "survey".into(),
            dim: p as u32,
            reports: 2000,
            threshold_rule: "cv(diagonal=exempt): noise(c=2, hard)".into(),
            upper_triangle: pack(&cov),
            correlation: pack(&corr),
            variable_names: if names {
                (0..p)
                    .map(|i| match i {
                        0 => "systolic_blood_pressure_morning_mmhg".to_string(),
                        1 => "weight, kg".to_string(),
                        _ => format!("v{i}"),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            verdict,
            error_bars: Some(ErrorBars {
                raw_upper_triangle: pack(&cov),
                standard_errors: pack(&se),
                raw_correlation: pack(&corr),
                correlation_standard_errors: pack(&corr.map(|v| 0.1 * (1.0 - v * v))),
                method: "empirical".into(),
            }),
            principal_components: Some(PrincipalComponents {
                of_correlation: false,
                total_variance: cov.trace(),
                noise_edge: values[p - 2] * 1.2,
                components,
            }),
            ..Default::default()
        }
    }

    /// Renders the sample pictures into `$LDPCOV_PICTURES_DIR` (for looking at them:
    /// `LDPCOV_PICTURES_DIR=/tmp/pics cargo test -p ldpcov-aggregator-cli --lib render -- --ignored`).
    #[test]
    #[ignore]
    fn render_sample_pictures() {
        let dir = PathBuf::from(std::env::var("LDPCOV_PICTURES_DIR").unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        let hopeless = SignalVerdict {
            sufficient: false,
            summary: "insufficient: the noise is 37× the signal and no correlation stands out \
                      of it; about 5 400 000 reports (have 2000) would bring it to half the signal"
                .into(),
            ..Default::default()
        };
        let named = sample(10, true, None);
        let mut zero = sample(6, false, Some(hopeless));
        zero.upper_triangle.iter_mut().for_each(|v| *v = 0.0);
        zero.correlation = vec![f64::NAN; zero.correlation.len()];
        let mut nan = sample(6, false, None);
        let packed = ldpcov_privacy::layout::triangle_index(6, 1, 4);
        nan.correlation[packed] = f64::NAN;
        let wide = sample(30, false, None);
        let cases = [
            ("covariance", &named, Part::Covariance, true),
            ("components", &named, Part::Components, false),
            ("standard-errors", &named, Part::StandardErrors, false),
            ("hopeless", &zero, Part::Covariance, true),
            ("nan-correlation", &nan, Part::Correlation, false),
            ("unnamed-30", &wide, Part::Covariance, false),
        ];
        for (name, e, what, beside) in cases {
            let path = dir.join(format!("{name}.png"));
            let raw = raw_eigenvalues(e);
            match draw_png(e, raw.as_deref(), what, beside, &path, None) {
                Ok(layout) => eprintln!("{name}: {layout:?}"),
                Err(err) => eprintln!("{name}: {err:#}"),
            }
        }
    }
}
