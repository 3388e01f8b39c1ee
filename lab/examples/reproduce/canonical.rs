//! The canonical accuracy benchmark (lab/docs/REPRODUCTION.md §1): the heavy-tailed paper's Models 1 and 2, Gaussian,
//! p = 20, R = √(2p), δ = 1e-6, ε ∈ {0.5, 1, 2}, n ∈ {1e5, 1e6, 1e7}; relative spectral
//! and Frobenius error of every estimator, and the ratio of the default (CV) to the
//! better of raw+PSD and Wang & Xu's universal rule.

use crate::{MechanismArg, Out, UserData, chosen_candidate, seed_of};
use anyhow::Result;
use ldpcov_estimate::{
    Accumulator, AdaptiveThreshold, CrossValidation, EstimateOptions, EstimationInput,
    LdpNoiseThreshold, RegularisationRule, ThresholdKind, UniversalThreshold, estimate,
};
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::models::{self, Model, Sampler};
use ldpcov_lab::sim::{self, Path};
use ldpcov_privacy::Collection;
use ldpcov_proto::v1::CollectionSpec;
use serde_json::json;

/// Options of the canonical benchmark.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Repetitions per point.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Numbers of users.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000,10000000")]
    ns: Vec<u64>,
    /// Privacy levels ε.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2")]
    epsilons: Vec<f64>,
    /// Models (1 and/or 2).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    models: Vec<u8>,
    /// Simulation path: `fast` (sum-of-noise) or `per-user`.
    #[arg(long, default_value = "fast")]
    path: String,
    /// Put the variables in a fixed random order (seeded): the models lose the band
    /// and Toeplitz structure that banding and Toeplitz averaging exploit, which shows
    /// what cross-validation does when the order carries no information.
    #[arg(long)]
    permute: bool,
    /// The local report mechanism (`rank-one` needs `--path per-user`: its noise is
    /// the draw itself, with no sum-of-noise shortcut).
    #[arg(long, value_enum, default_value = "gaussian-triu")]
    mechanism: MechanismArg,
    /// The per-user path's users: `gaussian` (N(0, Σ), clipped at R = √(2p) as real
    /// data are) or `unclipped` (the eigen-axis mixture with second moment Σ, no user
    /// clipped: the same target `M = Σ` as the sum-of-noise path).
    #[arg(long, value_enum, default_value = "gaussian")]
    user_data: UserData,
}

/// The estimators compared, in output order. The last two are computed on the same
/// users' noise-free accumulator (non-private floor).
pub(crate) fn estimators() -> Vec<(&'static str, EstimateOptions)> {
    let opts = |rule: RegularisationRule, kind: ThresholdKind| EstimateOptions {
        rule,
        kind,
        ..Default::default()
    };
    use ThresholdKind::{Hard, Soft};
    vec![
        ("none+psd", opts(RegularisationRule::None, Hard)),
        (
            "universal(c=4)",
            opts(
                RegularisationRule::Universal(UniversalThreshold::default()),
                Hard,
            ),
        ),
        (
            "universal(c=4) soft",
            opts(
                RegularisationRule::Universal(UniversalThreshold::default()),
                Soft,
            ),
        ),
        (
            "ldp_noise(xi=2)",
            opts(
                RegularisationRule::LdpNoise(LdpNoiseThreshold {
                    xi: 2.0,
                    threshold_diagonal: false,
                }),
                Hard,
            ),
        ),
        (
            "adaptive(eta=2)",
            opts(
                RegularisationRule::Adaptive(AdaptiveThreshold::default()),
                Hard,
            ),
        ),
        (
            "adaptive(eta=2) soft",
            opts(
                RegularisationRule::Adaptive(AdaptiveThreshold::default()),
                Soft,
            ),
        ),
        (
            "cv hard-only",
            opts(
                RegularisationRule::CrossValidated(CrossValidation {
                    kinds: vec![Hard],
                    ..Default::default()
                }),
                Hard,
            ),
        ),
        (
            "cv unordered",
            opts(
                RegularisationRule::CrossValidated(CrossValidation {
                    banding: false,
                    toeplitz: false,
                    ..Default::default()
                }),
                Hard,
            ),
        ),
        ("cv default", EstimateOptions::default()),
    ]
}

/// Names of the non-private floor estimators (on the noise-free accumulator).
pub(crate) const FLOORS: [&str; 2] = ["nonprivate raw+psd", "nonprivate adaptive(eta=2)"];

fn floor_options() -> [EstimateOptions; 2] {
    [
        EstimateOptions {
            rule: RegularisationRule::None,
            ..Default::default()
        },
        EstimateOptions {
            rule: RegularisationRule::Adaptive(AdaptiveThreshold::default()),
            ..Default::default()
        },
    ]
}

/// Errors of one repetition: per ε, per estimator (then floors), (spectral, Frobenius),
/// and the CV default's choice per ε.
type RepResult = (Vec<Vec<(f64, f64)>>, Vec<String>);

/// Runs the benchmark.
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    let p = 20usize;
    let r = (2.0 * p as f64).sqrt();
    let delta = args.mechanism.delta(1e-6);
    let path = match args.path.as_str() {
        "fast" | "sum-of-noise" => Path::SumOfNoise,
        "per-user" => Path::PerUser,
        other => anyhow::bail!("unknown path {other} (fast or per-user)"),
    };
    if path == Path::SumOfNoise && args.mechanism == MechanismArg::RankOne {
        anyhow::bail!("--mechanism rank-one needs --path per-user (no sum-of-noise shortcut)");
    }
    let ests = estimators();
    let floors = floor_options();
    let names: Vec<&str> = ests.iter().map(|(n, _)| *n).chain(FLOORS).collect();
    let order = if args.permute {
        "variables permuted (seed 2026)"
    } else {
        "natural variable order"
    };
    out.text(format!(
        "# canonical benchmark: path {}{}, mechanism {:?}, p = {p}, R = √(2p), δ = {delta}, {} reps, {order}; mean (s.e.) of relative spectral | Frobenius error",
        path.name(),
        if path == Path::PerUser {
            format!(" ({})", args.user_data.name())
        } else {
            String::new()
        },
        args.mechanism,
        args.reps
    ));
    // ratio rows: (model, ε, n, spectral ratio, Frobenius ratio)
    let mut ratios = Vec::new();
    for &m in &args.models {
        let model = match m {
            1 => Model::BandedGeometric,
            2 => Model::Tridiagonal2,
            other => anyhow::bail!("model {other}: the canonical benchmark has models 1 and 2"),
        };
        let truth = if args.permute {
            models::permute(&model.covariance(p), &models::random_permutation(p, 2026))
        } else {
            model.covariance(p)
        };
        let sampler = match path {
            Path::PerUser => args.user_data.sampler(&truth, r)?,
            Path::SumOfNoise => Sampler::gaussian(&truth)?,
        };
        // Models 1 and 2 in their given order are ordered (their covariances decay
        // with |i − j|), and the collection says so; permuted, they are not.
        let collections = args
            .epsilons
            .iter()
            .map(|&e| args.mechanism.collection(p, e, r, !args.permute))
            .collect::<Result<Vec<_>, _>>()?;
        // The non-private floors read the clipped data's own second moment: for the
        // rank-one mechanism, whose report carries no noise-free signal, from a
        // raw-weighted Gaussian twin of each collection (same p, R, order).
        let floor_collections = collections
            .iter()
            .map(|c| match args.mechanism {
                MechanismArg::RankOne => Collection::from_spec(&CollectionSpec {
                    delta: 1e-6,
                    local_mechanism: MechanismArg::GaussianTriu.to_proto() as i32,
                    ..c.spec()
                }),
                _ => Ok(c.clone()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        for &n in &args.ns {
            let started = std::time::Instant::now();
            let results: Vec<RepResult> = sim::parallel_reps(args.reps, out.threads, |rep| {
                let seed = seed_of(&[1, m as u64, n, rep as u64]);
                let refs: Vec<_> = floor_collections.iter().collect();
                let signals = sim::simulate_signal(&refs, &sampler, n, seed);
                let mut errs = Vec::new();
                let mut choices = Vec::new();
                for (ei, (c, floor_c)) in collections.iter().zip(&floor_collections).enumerate() {
                    let noise_seed = seed_of(&[2, m as u64, n, rep as u64, ei as u64]);
                    let acc: Accumulator = match path {
                        Path::SumOfNoise => {
                            sim::add_noise(c, sim::signal_for(&signals, c), noise_seed)
                        }
                        Path::PerUser => sim::per_user(c, &sampler, n, seed, noise_seed),
                    };
                    let free = sim::signal_for(&signals, floor_c).noise_free();
                    let mut row = Vec::new();
                    for (name, opts) in &ests {
                        let est = estimate(&EstimationInput::from_collection(c), &acc, opts)
                            .expect("estimate");
                        row.push((
                            relative_spectral_error(&est.matrix, &truth),
                            relative_frobenius_error(&est.matrix, &truth),
                        ));
                        if *name == "cv default" {
                            choices.push(chosen_candidate(&est.rule));
                        }
                    }
                    for opts in &floors {
                        let est = estimate(&EstimationInput::from_collection(floor_c), &free, opts)
                            .expect("estimate");
                        row.push((
                            relative_spectral_error(&est.matrix, &truth),
                            relative_frobenius_error(&est.matrix, &truth),
                        ));
                    }
                    errs.push(row);
                }
                (errs, choices)
            });
            let secs = started.elapsed().as_secs_f64();
            for (ei, &epsilon) in args.epsilons.iter().enumerate() {
                out.text(format!(
                    "\n{} ε={epsilon} n={n:.0e} ({secs:.0} s for all ε)",
                    model.name()
                ));
                out.text(format!(
                    "  {:<28} {:>17} {:>17}",
                    "estimator", "spectral", "Frobenius"
                ));
                let mut means = Vec::new();
                for (k, name) in names.iter().enumerate() {
                    let spec: Vec<f64> = results.iter().map(|r| r.0[ei][k].0).collect();
                    let frob: Vec<f64> = results.iter().map(|r| r.0[ei][k].1).collect();
                    let (ms, ss) = sim::mean_se(&spec);
                    let (mf, sf) = sim::mean_se(&frob);
                    means.push((ms, mf));
                    out.text(format!(
                        "  {name:<28} {ms:>9.4} ({ss:.4}) {mf:>9.4} ({sf:.4})"
                    ));
                    out.row(json!({
                        "experiment": "canonical", "path": path.name(), "model": model.name(),
                        "mechanism": format!("{:?}", args.mechanism),
                        "p": p, "n": n, "epsilon": epsilon, "delta": delta, "clip_radius": r,
                        "reps": args.reps, "estimator": name, "permuted": args.permute,
                        "private": !name.starts_with("nonprivate"),
                        "rel_spectral_mean": ms, "rel_spectral_se": ss,
                        "rel_frobenius_mean": mf, "rel_frobenius_se": sf,
                    }));
                }
                let idx = |n: &str| names.iter().position(|x| *x == n).expect("known");
                let (cv, none, uni) = (
                    means[idx("cv default")],
                    means[idx("none+psd")],
                    means[idx("universal(c=4)")],
                );
                let rs = cv.0 / none.0.min(uni.0);
                let rf = cv.1 / none.1.min(uni.1);
                let mut counts: Vec<(String, usize)> = Vec::new();
                for r in &results {
                    let c = &r.1[ei];
                    match counts.iter_mut().find(|(k, _)| k == c) {
                        Some((_, v)) => *v += 1,
                        None => counts.push((c.clone(), 1)),
                    }
                }
                counts.sort_by_key(|b| std::cmp::Reverse(b.1));
                let choice = counts
                    .iter()
                    .map(|(k, v)| format!("{k} ×{v}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                out.text(format!(
                    "  ratio cv/min(none+psd, universal): spectral {rs:.3}, Frobenius {rf:.3}; cv chose: {choice}"
                ));
                out.row(json!({
                    "experiment": "canonical-ratio", "path": path.name(), "model": model.name(),
                    "mechanism": format!("{:?}", args.mechanism),
                    "n": n, "epsilon": epsilon, "reps": args.reps, "permuted": args.permute,
                    "ratio_spectral": rs, "ratio_frobenius": rf, "cv_choices": choice,
                }));
                ratios.push((model.name(), epsilon, n, rs, rf));
            }
        }
    }
    out.text("\n# ratio table: cv default / min(none+psd, universal(c=4)), mean relative error");
    out.text(format!(
        "  {:<7} {:>4} {:>9} {:>9} {:>9}",
        "model", "ε", "n", "spectral", "Frobenius"
    ));
    for (m, e, n, rs, rf) in &ratios {
        out.text(format!(
            "  {m:<7} {e:>4} {:>9.0e} {rs:>9.3} {rf:>9.3}",
            *n as f64
        ));
    }
    let k = ratios.len().max(1) as f64;
    let mean_s = ratios.iter().map(|r| r.3).sum::<f64>() / k;
    let mean_f = ratios.iter().map(|r| r.4).sum::<f64>() / k;
    let max_s = ratios.iter().map(|r| r.3).fold(0.0, f64::max);
    let max_f = ratios.iter().map(|r| r.4).fold(0.0, f64::max);
    out.text(format!(
        "  average: spectral {mean_s:.3} (max {max_s:.3}), Frobenius {mean_f:.3} (max {max_f:.3}); issue target: average ≤ 0.7, never > 0.9"
    ));
    out.row(json!({
        "experiment": "canonical-ratio-summary", "path": path.name(), "points": ratios.len(),
        "permuted": args.permute,
        "mean_ratio_spectral": mean_s, "max_ratio_spectral": max_s,
        "mean_ratio_frobenius": mean_f, "max_ratio_frobenius": max_f,
    }));
    Ok(())
}
