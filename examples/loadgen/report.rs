//! The results of both modes: what `--json` prints as one object, and the readable
//! summary printed otherwise.

use std::collections::BTreeMap;

use ldpcov::privacy::Collection;
use ldpcov_lab::data_users::{CENTRED_TOLERANCE, DataUsers};
use serde::Serialize;

/// The main job's result (`--json` prints it as one object).
#[derive(Serialize)]
pub(crate) struct Summary {
    pub(crate) users: u64,
    pub(crate) accepted: u64,
    pub(crate) duplicates: u64,
    pub(crate) dim: u32,
    /// The local mechanism (`LOCAL_MECHANISM_…`; unspecified for a central collection).
    pub(crate) mechanism: &'static str,
    /// Who adds the noise (`PRIVACY_MODEL_…`).
    pub(crate) privacy_model: &'static str,
    pub(crate) epsilon: f64,
    pub(crate) delta: f64,
    pub(crate) clip_radius: f64,
    pub(crate) sigma: f64,
    pub(crate) sensitivity: f64,
    /// Central collections: the ρ of the release the estimates post-process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) central_release_rho: Option<f64>,
    pub(crate) entry_noise_sd: f64,
    pub(crate) model: String,
    pub(crate) threshold: f64,
    pub(crate) threshold_rule: String,
    pub(crate) surviving_entries: u64,
    pub(crate) clamped_eigenvalues: u32,
    pub(crate) rel_spectral_error: f64,
    pub(crate) rel_frobenius_error: f64,
    pub(crate) rel_spectral_error_no_threshold: f64,
    pub(crate) rel_frobenius_error_no_threshold: f64,
    pub(crate) predicted_rel_spectral_noise: f64,
    /// The planner's relative Frobenius noise of the raw average
    /// (`ldpcov_privacy::plan::raw_average_error` over ‖Σ‖_F).
    pub(crate) planned_rel_frobenius_noise: f64,
    pub(crate) elapsed_sec: f64,
    pub(crate) reports_per_sec: f64,
    pub(crate) bytes_per_report: usize,
    pub(crate) embedded_server: bool,
    /// With `--data`: the file, its centring and the errors against its second moment
    /// (null for a model).
    pub(crate) data: Option<DataSummary>,
    /// With `--relay`: the shuffled collection's guarantee and the local-only errors
    /// (null otherwise).
    pub(crate) shuffle: Option<ShuffleSummary>,
    /// What clipping costs: the clipping bias and the error against what the devices'
    /// clipped vectors make reachable.
    pub(crate) clipping: ClippingSummary,
    /// With `--radius-phase`: the phase and the radius it chose (null otherwise).
    pub(crate) radius_phase: Option<RadiusPhaseSummary>,
}

/// A radius phase's run: its budget, its candidates and the radius it chose.
#[derive(Serialize)]
pub(crate) struct RadiusPhaseSummary {
    pub(crate) phase_collection_id: String,
    /// The phase's share of each device's ρ.
    pub(crate) share: f64,
    /// ε of the norm report and of the main report (at the collection's δ); `epsilon`
    /// is the device's total.
    pub(crate) phase_epsilon: f64,
    pub(crate) main_epsilon: f64,
    pub(crate) candidates: Vec<f64>,
    pub(crate) chosen_radius: f64,
    /// Norm reports the phase's collection accepted.
    pub(crate) reports: u64,
}

/// What clipping costs. `C` is the matrix the collection estimates once its devices
/// clip: the covariance of the clipped vectors `c + R·u` (`u` the device's clip of
/// `(x − c)/R`), or for a second-moment collection their second moment about the
/// centre `c`; over the file's rows, or for a model over a seeded sample of
/// [`CLIPPED_SAMPLE`](crate::accuracy::CLIPPED_SAMPLE) draws. No estimator reaches
/// closer to the truth than `C` on average: the bias is clipping's, the rest the
/// estimate's.
#[derive(Debug, Serialize)]
pub(crate) struct ClippingSummary {
    /// Rows (or draws) farther than the clip radius from the centre.
    pub(crate) clipped_fraction: f64,
    /// Rows (or draws) `C` was computed over.
    pub(crate) rows: usize,
    /// `‖C − truth‖₂ / ‖truth‖₂`: the clipping bias.
    pub(crate) rel_spectral_bias: f64,
    /// `‖C − truth‖_F / ‖truth‖_F`.
    pub(crate) rel_frobenius_bias: f64,
    /// `‖estimate − C‖₂ / ‖C‖₂`: the estimate's error against what clipping leaves.
    pub(crate) rel_spectral_error_vs_clipped: f64,
    /// `‖estimate − C‖_F / ‖C‖_F`.
    pub(crate) rel_frobenius_error_vs_clipped: f64,
}

/// What a `--relay` run adds: ε0 of each report (what the relay and aggregator
/// together learn), the central (ε, δ) against the aggregator at the minimum batch,
/// and the planner's relative Frobenius noise of the raw average had the same n users
/// reported locally at ε = the central ε (rank-one, and the default Gaussian at
/// δ = 1e-6).
#[derive(Serialize)]
pub(crate) struct ShuffleSummary {
    pub(crate) local_epsilon: f64,
    pub(crate) central_epsilon: f64,
    pub(crate) central_delta: f64,
    pub(crate) min_batch_size: u64,
    pub(crate) planned_rel_frobenius_noise_local_rank_one: Option<f64>,
    pub(crate) planned_rel_frobenius_noise_local_gaussian: Option<f64>,
}

/// What a `--data` run adds to the summary. The main errors (`rel_*_error`) are
/// against [`Summary::model`]'s truth: the file's covariance (its correlation with
/// `--standardize`); these are against the file's second moment about the
/// collection's centre `(1/n) Σ (x − c)(x − c)ᵀ` of the rows sent, which is what a
/// second-moment collection estimates.
#[derive(Serialize)]
pub(crate) struct DataSummary {
    pub(crate) file: String,
    pub(crate) rows: usize,
    pub(crate) standardized: bool,
    /// What `rel_*_error` compares against.
    pub(crate) truth: &'static str,
    /// Where the rows sit against the collection's centre and radius.
    #[serde(flatten)]
    pub(crate) placement: DataPlacement,
    pub(crate) rel_spectral_error_vs_second_moment: f64,
    pub(crate) rel_frobenius_error_vs_second_moment: f64,
    pub(crate) rel_spectral_error_vs_second_moment_no_threshold: f64,
    pub(crate) rel_frobenius_error_vs_second_moment_no_threshold: f64,
    /// With `--standardize`: the relative spectral error of the correlation matrix
    /// the estimate returns with it (`correlation`) against the file's. Clipping
    /// shrinks the covariance; normalising by its own diagonal cancels most of that.
    pub(crate) rel_spectral_error_of_correlation: Option<f64>,
    /// The same in Frobenius norm.
    pub(crate) rel_frobenius_error_of_correlation: Option<f64>,
}

/// Where a data file's rows sit as the collection's devices see them: about its public
/// centre (about 0 without one), clipped to its radius.
#[derive(Debug, Serialize)]
pub(crate) struct DataPlacement {
    /// The collection's public centre (empty: none, the rows are taken about 0).
    pub(crate) centre: Vec<f64>,
    /// `max_abs_mean_over_sd ≤ centred_tolerance`: only then are covariance and second
    /// moment about the centre close.
    pub(crate) centred: bool,
    /// `max_j |mean_j − centre_j| / sd_j`.
    pub(crate) max_abs_mean_over_sd: f64,
    pub(crate) centred_tolerance: f64,
    /// Fraction of the file's rows farther than the clip radius from the centre
    /// (clipped on the device).
    pub(crate) clipped_fraction: f64,
}

impl DataPlacement {
    /// The rows of `users` against `collection`'s centre and clip radius.
    pub(crate) fn of(users: &DataUsers, collection: &Collection) -> Self {
        let centre = collection.centre();
        DataPlacement {
            centre: centre.to_vec(),
            centred: users.is_centred(centre),
            max_abs_mean_over_sd: users.max_abs_mean_over_sd(centre),
            centred_tolerance: CENTRED_TOLERANCE,
            clipped_fraction: users.clipped_fraction(collection.clip_radius(), centre),
        }
    }
}

/// The load test's result (`--json` prints it as one object).
#[derive(Serialize)]
pub(crate) struct LoadSummary {
    pub(crate) mode: &'static str,
    pub(crate) clients: usize,
    pub(crate) duration_sec: f64,
    pub(crate) elapsed_sec: f64,
    pub(crate) dim: usize,
    /// The local mechanism (`LOCAL_MECHANISM_…`).
    pub(crate) mechanism: &'static str,
    pub(crate) epsilon: f64,
    pub(crate) delta: f64,
    pub(crate) clip_radius: f64,
    pub(crate) sigma: f64,
    pub(crate) encoding: String,
    pub(crate) min_reports: u64,
    pub(crate) noise_sampler: &'static str,
    pub(crate) bytes_per_report: usize,
    /// Submit calls made (accepted + duplicates + errors).
    pub(crate) calls: u64,
    pub(crate) accepted: u64,
    pub(crate) duplicates: u64,
    pub(crate) error_count: u64,
    /// Errors by gRPC status code (`Other` for failures without a status).
    pub(crate) errors: BTreeMap<String, u64>,
    pub(crate) reports_per_sec: f64,
    /// Latency of the SubmitReport call alone (not the perturbation), ms.
    pub(crate) latency_ms_mean: f64,
    pub(crate) latency_ms_p50: f64,
    pub(crate) latency_ms_p90: f64,
    pub(crate) latency_ms_p99: f64,
    pub(crate) latency_ms_p999: f64,
    pub(crate) latency_ms_max: f64,
    /// Process whose VmRSS was sampled (None: not sampled).
    pub(crate) rss_pid: Option<u32>,
    pub(crate) rss_mib_start: Option<f64>,
    pub(crate) rss_mib_after_warmup: Option<f64>,
    pub(crate) rss_mib_end: Option<f64>,
    pub(crate) rss_mib_max: Option<f64>,
    pub(crate) warmup_sec: f64,
    /// Accepted reports at the warm-up sample.
    pub(crate) reports_at_warmup: u64,
    /// (rss_end − rss_after_warmup) per million reports accepted in between, MiB.
    pub(crate) rss_growth_mib_per_million_reports: Option<f64>,
    /// (seconds since start, VmRSS MiB, accepted reports so far), once per second.
    pub(crate) rss_samples: Vec<(f64, f64, u64)>,
    pub(crate) reports_before: u64,
    pub(crate) server_reports_after: u64,
    pub(crate) embedded_server: bool,
}

/// Prints the main job's summary.
pub(crate) fn print_human(s: &Summary) {
    let source = match &s.data {
        Some(_) => s.model.clone(),
        None => format!("{} data", s.model),
    };
    println!("ldpcov loadgen: {} users, p = {}, {source}", s.users, s.dim);
    match s.central_release_rho {
        Some(rho) if s.privacy_model == "PRIVACY_MODEL_TWO_AGGREGATOR" => println!(
            "  two aggregators (no trusted party): budget ε = {}, δ = {:e} in all; this release ρ = {rho:.6} (GaussCov noise added by each aggregator to its share, Δ = {:.6}), R = {:.3}",
            s.epsilon, s.delta, s.sensitivity, s.clip_radius
        ),
        Some(rho) => println!(
            "  central (trusted curator): budget ε = {}, δ = {:e} in all; this release ρ = {rho:.6} (GaussCov on the exact sums, Δ = {:.6}), R = {:.3}",
            s.epsilon, s.delta, s.sensitivity, s.clip_radius
        ),
        None if s.mechanism == "LOCAL_MECHANISM_RANK_ONE" => println!(
            "  privacy per report: ε = {} (pure, rank-one PrivUnitG), R = {:.3}",
            s.epsilon, s.clip_radius
        ),
        None => println!(
            "  privacy per report: ε = {}, δ = {:e}, R = {:.3}, Δ = {:.6}, σ = {:.4} (analytic Gaussian, {})",
            s.epsilon, s.delta, s.clip_radius, s.sensitivity, s.sigma, s.mechanism
        ),
    }
    if let Some(r) = &s.radius_phase {
        println!(
            "  radius chosen privately: R = {:.4} of {} candidates ({:.3} to {:.3}) from {} norm reports to {} at ε = {:.4}; main reports at ε = {:.4} (ρ shares {} / {}: ε = {} in all)",
            r.chosen_radius,
            r.candidates.len(),
            r.candidates.first().copied().unwrap_or(0.0),
            r.candidates.last().copied().unwrap_or(0.0),
            r.reports,
            r.phase_collection_id,
            r.phase_epsilon,
            r.main_epsilon,
            r.share,
            1.0 - r.share,
            s.epsilon
        );
    }
    if let Some(sh) = &s.shuffle {
        println!(
            "  shuffled through a relay: ε0 = {:.3} per report (against relay and aggregator together), central ε = {:.4} at δ = {:e} against the aggregator (batches of ≥ {})",
            sh.local_epsilon, sh.central_epsilon, sh.central_delta, sh.min_batch_size
        );
        println!(
            "  local-only at ε = {:.4} and the same n (planned relative Frobenius noise of the raw average): rank-one {}, Gaussian {}",
            sh.central_epsilon,
            sh.planned_rel_frobenius_noise_local_rank_one
                .map_or("n/a".into(), |v| format!("{v:.4}")),
            sh.planned_rel_frobenius_noise_local_gaussian
                .map_or("n/a".into(), |v| format!("{v:.4}")),
        );
    }
    println!(
        "  sent {} reports in {:.2} s: {:.0} reports/s, {} payload bytes each ({} accepted, {} duplicates)",
        s.users, s.elapsed_sec, s.reports_per_sec, s.bytes_per_report, s.accepted, s.duplicates
    );
    println!(
        "  noise sd of each averaged off-diagonal entry = {:.4}; predicted relative spectral noise ≈ {:.3}, planned relative Frobenius noise of the raw average ≈ {:.3}",
        s.entry_noise_sd, s.predicted_rel_spectral_noise, s.planned_rel_frobenius_noise
    );
    println!(
        "  {}: threshold {:.4}, {} entries kept, {} eigenvalues clamped",
        s.threshold_rule, s.threshold, s.surviving_entries, s.clamped_eigenvalues
    );
    let truth = s.data.as_ref().map_or("the true covariance", |d| d.truth);
    println!(
        "  relative error vs {truth}: spectral {:.4}, Frobenius {:.4}",
        s.rel_spectral_error, s.rel_frobenius_error
    );
    println!(
        "  (no threshold + PSD: spectral {:.4}, Frobenius {:.4})",
        s.rel_spectral_error_no_threshold, s.rel_frobenius_error_no_threshold
    );
    let c = &s.clipping;
    println!(
        "  relative error vs the clipped covariance (what the clipped vectors make reachable): spectral {:.4}, Frobenius {:.4}",
        c.rel_spectral_error_vs_clipped, c.rel_frobenius_error_vs_clipped
    );
    println!(
        "  clipping bias (the clipped covariance vs {truth}): spectral {:.4}, Frobenius {:.4}; {:.2}% of {} {} clipped at R = {:.3}",
        c.rel_spectral_bias,
        c.rel_frobenius_bias,
        100.0 * c.clipped_fraction,
        c.rows,
        if s.data.is_some() { "rows" } else { "draws" },
        s.clip_radius
    );
    if let Some(d) = &s.data {
        println!(
            "  relative error vs the file's second moment (1/n)Σxxᵀ: spectral {:.4}, Frobenius {:.4} (no threshold + PSD: {:.4}, {:.4})",
            d.rel_spectral_error_vs_second_moment,
            d.rel_frobenius_error_vs_second_moment,
            d.rel_spectral_error_vs_second_moment_no_threshold,
            d.rel_frobenius_error_vs_second_moment_no_threshold
        );
        if let (Some(spectral), Some(frobenius)) = (
            d.rel_spectral_error_of_correlation,
            d.rel_frobenius_error_of_correlation,
        ) {
            println!(
                "  its correlation matrix (the estimate's `correlation`) vs the file's: spectral {spectral:.4}, Frobenius {frobenius:.4}"
            );
        }
        let p = &d.placement;
        let (about, minus) = if p.centre.is_empty() {
            ("0 (no public centre)", "")
        } else {
            ("the public centre c", " − c")
        };
        println!(
            "  data: {} rows, {}centred about {about} (max |mean{minus}|/sd = {:.3}, tolerance {}), {:.2}% of rows clipped",
            d.rows,
            if p.centred { "" } else { "NOT " },
            p.max_abs_mean_over_sd,
            p.centred_tolerance,
            100.0 * p.clipped_fraction
        );
    }
}

/// Prints the load test's summary.
pub(crate) fn print_load(s: &LoadSummary) {
    let opt = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.1}"));
    println!(
        "ldpcov loadgen, load test: {} clients (unary SubmitReport, one connection each) for {:.0} s, p = {}, {}, ε = {}, δ = {:e}, {} noise",
        s.clients, s.duration_sec, s.dim, s.encoding, s.epsilon, s.delta, s.noise_sampler
    );
    println!(
        "  {} accepted, {} duplicates, {} errors {:?} in {:.1} s: {:.0} reports/s ({} payload bytes each)",
        s.accepted,
        s.duplicates,
        s.error_count,
        s.errors,
        s.elapsed_sec,
        s.reports_per_sec,
        s.bytes_per_report
    );
    println!(
        "  submit latency (network call only), ms: mean {:.2}, p50 {:.2}, p90 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2}",
        s.latency_ms_mean,
        s.latency_ms_p50,
        s.latency_ms_p90,
        s.latency_ms_p99,
        s.latency_ms_p999,
        s.latency_ms_max
    );
    let whose = match (s.rss_pid, s.embedded_server) {
        (None, _) => "not sampled (pass --server-pid)".to_string(),
        (Some(pid), true) => format!("this process {pid}: embedded server and clients"),
        (Some(pid), false) => format!("daemon pid {pid}"),
    };
    println!(
        "  resident memory ({whose}), MiB: start {}, after {:.0} s warm-up {}, end {}, max {}; growth after warm-up {} MiB per million reports",
        opt(s.rss_mib_start),
        s.warmup_sec,
        opt(s.rss_mib_after_warmup),
        opt(s.rss_mib_end),
        opt(s.rss_mib_max),
        s.rss_growth_mib_per_million_reports
            .map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
    );
    println!(
        "  collection: {} reports before, {} after (server count)",
        s.reports_before, s.server_reports_after
    );
}
