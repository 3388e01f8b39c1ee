//! The local mechanisms side by side: for each p and ε, the raw average's and the
//! default estimate's error with the raw-weighted Gaussian report, the svec Gaussian
//! report and the rank-one report at the same n, on the same target (docs/BENCHMARKS.md
//! "Local mechanisms").
//!
//! Model 1 (`σ_ij = 0.6^|i−j|`, `tr Σ = p`) at `R = √(2p)`, second-moment collections.
//! Every mechanism sees the estimand `M = Σ`: the Gaussian reports on the population
//! fast path (`sim::SignalSums::population`, noise drawn per fold), the rank-one report
//! per user (its noise is the draw itself) from the unclipped eigen-axis mixture
//! (`Sampler::eigen_mixture`: second moment Σ, every norm `√p ≤ R`, so no user is
//! clipped; its sampling error, O(1/√n), is left in and counts against it). The clipping
//! bias of real data is the same for every mechanism and is measured elsewhere
//! (`unordered --per-user`).

use crate::{MechanismArg, Out, UserData, chosen_candidate, seed_of};
use anyhow::Result;
use ldpcov_estimate::{EstimateOptions, EstimationInput, RegularisationRule, estimate};
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::models::Model;
use ldpcov_lab::sim;
use ldpcov_privacy::plan;
use serde_json::json;

/// `reproduce mechanisms`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Dimensions.
    #[arg(long, value_delimiter = ',', default_value = "20,100,1000")]
    ps: Vec<usize>,
    /// Privacy levels ε.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2,4,8")]
    epsilons: Vec<f64>,
    /// Numbers of users (every mechanism gets the same n).
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    ns: Vec<u64>,
    /// The mechanisms compared.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "gaussian-triu,gaussian,rank-one"
    )]
    mechanisms: Vec<MechanismArg>,
    /// Repetitions per point (errors are their means).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// The relative Frobenius error of the raw average whose user count is printed
    /// ("users for target": the raw average's error falls as 1/√n).
    #[arg(long, default_value_t = 0.5)]
    target: f64,
}

/// One row: a mechanism at (p, ε, n).
struct Row {
    p: usize,
    epsilon: f64,
    n: u64,
    mechanism: MechanismArg,
    bytes: usize,
    raw: (f64, f64),
    none_psd: (f64, f64),
    default: (f64, f64),
    predicted_raw_frobenius: f64,
    users_for_target: f64,
    rule: String,
    secs: f64,
}

/// Runs the comparison and prints one table (or JSON rows).
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    anyhow::ensure!(
        args.target > 0.0 && args.target.is_finite(),
        "--target must be a positive number"
    );
    let mut points = Vec::new();
    for &p in &args.ps {
        for &n in &args.ns {
            for &epsilon in &args.epsilons {
                for &mechanism in &args.mechanisms {
                    points.push((p, n, epsilon, mechanism));
                }
            }
        }
    }
    out.text(format!(
        "# local mechanisms side by side: Model 1, R = √(2p), second moment, δ = 1e-6 for the Gaussian reports; errors relative to Σ (spectral / Frobenius), mean of {} repetitions; raw = the unbiased average, no projection; users for target = n·(raw Frobenius / {})²",
        args.reps.max(1),
        args.target
    ));
    let rows = sim::parallel_reps(points.len(), out.threads, |i| {
        let (p, n, epsilon, mechanism) = points[i];
        run_point(p, n, epsilon, mechanism, args.reps.max(1), args.target)
    });
    out.text(
        "\n| p | ε | n | mechanism | bytes/report | raw: spectral / Frobenius | none + PSD | default | default chose | predicted raw Frobenius | users for target | s |",
    );
    out.text("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let row = row?;
        out.text(format!(
            "| {} | {} | {:.0e} | `{}` | {} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} | {} | {:.3} | {:.3e} | {:.0} |",
            row.p,
            row.epsilon,
            row.n as f64,
            row.mechanism.name(),
            row.bytes,
            row.raw.0,
            row.raw.1,
            row.none_psd.0,
            row.none_psd.1,
            row.default.0,
            row.default.1,
            row.rule,
            row.predicted_raw_frobenius,
            row.users_for_target,
            row.secs,
        ));
        out.row(json!({
            "experiment": "mechanisms", "p": row.p, "epsilon": row.epsilon, "n": row.n,
            "mechanism": row.mechanism.name(), "bytes_per_report": row.bytes,
            "raw_rel_spectral": row.raw.0, "raw_rel_frobenius": row.raw.1,
            "none_psd_rel_spectral": row.none_psd.0, "none_psd_rel_frobenius": row.none_psd.1,
            "default_rel_spectral": row.default.0, "default_rel_frobenius": row.default.1,
            "default_rule": row.rule,
            "predicted_raw_rel_frobenius": row.predicted_raw_frobenius,
            "users_for_target": row.users_for_target, "target": args.target,
            "seconds": row.secs,
        }));
    }
    Ok(())
}

fn run_point(
    p: usize,
    n: u64,
    epsilon: f64,
    mechanism: MechanismArg,
    reps: usize,
    target: f64,
) -> Result<Row> {
    let started = std::time::Instant::now();
    let truth = Model::BandedGeometric.covariance(p);
    let r = (2.0 * p as f64).sqrt();
    let c = mechanism.collection(p, epsilon, r, false)?;
    let input = EstimationInput::from_collection(&c);
    let raw_options = EstimateOptions {
        rule: RegularisationRule::None,
        skip_psd_projection: true,
        ..Default::default()
    };
    let none_psd_options = EstimateOptions {
        rule: RegularisationRule::None,
        ..Default::default()
    };
    let (mut raw, mut none_psd, mut default) = ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    let mut rules = Vec::new();
    for rep in 0..reps {
        let seed = seed_of(&[40, p as u64, n, epsilon.to_bits(), rep as u64]);
        let acc = match mechanism {
            MechanismArg::RankOne => {
                let users = UserData::Unclipped.sampler(&truth, r)?;
                sim::per_user(&c, &users, n, seed, seed_of(&[41, seed]))
            }
            MechanismArg::Gaussian | MechanismArg::GaussianTriu => {
                let signal = sim::SignalSums::population(&c, &truth, n);
                sim::add_noise(&c, &signal, seed_of(&[42, seed]))
            }
        };
        let add = |total: &mut (f64, f64), opts: &EstimateOptions| -> Result<String> {
            let est = estimate(&input, &acc, opts)?;
            total.0 += relative_spectral_error(&est.matrix, &truth) / reps as f64;
            total.1 += relative_frobenius_error(&est.matrix, &truth) / reps as f64;
            Ok(est.rule)
        };
        add(&mut raw, &raw_options)?;
        add(&mut none_psd, &none_psd_options)?;
        let rule = add(&mut default, &EstimateOptions::default())?;
        rules.push(chosen_candidate(&rule));
    }
    rules.dedup();
    let rule = rules.join("; ");
    // The planner's raw-average error at the data's mean squared norm ‖u‖² = tr Σ/R²
    // = ½, relative to ‖Σ‖_F.
    let predicted = plan::raw_average_error(&c, n, 0.5) / truth.norm();
    Ok(Row {
        p,
        epsilon,
        n,
        mechanism,
        bytes: c.payload_bytes(),
        raw,
        none_psd,
        default,
        predicted_raw_frobenius: predicted,
        users_for_target: n as f64 * (raw.1 / target).powi(2),
        rule,
        secs: started.elapsed().as_secs_f64(),
    })
}
