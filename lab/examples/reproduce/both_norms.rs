//! `reproduce both-norms`: the default estimate against the plain projected average
//! ("none + PSD") and the trivial estimates — the zero matrix, the diagonal alone and
//! the scaled identity (the mean variance times I) — in both norms, with the
//! repetitions' spread, on real data sets (`--data`) and on Model 1 at low n
//! (`--model1-ps`, the side-by-side cells of `reproduce mechanisms` where the noise
//! swamps the signal). "before" is the default without the trivial candidates and
//! the spectral-norm guard (`CrossValidation::trivial_candidates`,
//! `CrossValidation::spectral_norm_guard`), on the same reports.
//!
//! Real data: the population fast path of `reproduce unordered` (M the mean clipped
//! `xxᵀ` of the standardized rows at `R = √(2p)`, target the correlation matrix).
//! Model 1: the population fast path with `M = Σ`, `R = √(2p)`.

use crate::unordered::{Truth, real};
use crate::{MechanismArg, Out, chosen_candidate, seed_of};
use anyhow::Result;
use ldpcov_estimate::{
    CrossValidation, EstimateOptions, EstimationInput, RegularisationRule, average, estimate,
};
use ldpcov_lab::models::Model;
use ldpcov_lab::sim::{self, mean_se};
use nalgebra::DMatrix;
use serde_json::json;

/// `reproduce both-norms`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Real data sets as NAME=PATH (`python3 lab/docs/experiments/write_real_data.py`).
    #[arg(long = "data")]
    data: Vec<String>,
    /// Users for the real data sets.
    #[arg(long, value_delimiter = ',', default_value = "200000,1000000")]
    ns: Vec<u64>,
    /// Privacy levels ε.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    epsilons: Vec<f64>,
    /// Model 1 at these dimensions (the low-n cells), `R = √(2p)`.
    #[arg(long, value_delimiter = ',')]
    model1_ps: Vec<usize>,
    /// Users for Model 1.
    #[arg(long, value_delimiter = ',', default_value = "20000")]
    model1_ns: Vec<u64>,
    /// The local report mechanisms (population fast path: the Gaussian reports).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "gaussian")]
    mechanisms: Vec<MechanismArg>,
    /// Repetitions per point.
    #[arg(long, default_value_t = 4)]
    reps: usize,
    /// The data sets' clip radius as a multiple of the standardized rows' mean squared
    /// norm, `R = √(k·p)` (as `reproduce unordered`).
    #[arg(long, default_value_t = 2.0)]
    data_clip_factor: f64,
    /// Score the data sets' estimates against M, the clipped second moment every
    /// estimator targets, instead of the correlation matrix (the clipping bias then
    /// counts against none).
    #[arg(long)]
    score_clipped: bool,
}

/// The rules compared, in output order (the trivial ones are computed from the
/// average directly).
const RULES: [&str; 6] = [
    "none+psd",
    "zero",
    "diagonal",
    "scaled identity",
    "before",
    "default",
];

/// Runs the points and prints one table.
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    anyhow::ensure!(
        !args.mechanisms.contains(&MechanismArg::RankOne),
        "both-norms runs the Gaussian reports (population fast path) only"
    );
    let mut points: Vec<(Truth, u64, f64, MechanismArg)> = Vec::new();
    for spec in &args.data {
        for &n in &args.ns {
            for &epsilon in &args.epsilons {
                for &m in &args.mechanisms {
                    let mut truth = real(spec, args.data_clip_factor, false)?;
                    if args.score_clipped {
                        truth.target = truth.m.clone();
                    }
                    points.push((truth, n, epsilon, m));
                }
            }
        }
    }
    for &p in &args.model1_ps {
        for &n in &args.model1_ns {
            for &epsilon in &args.epsilons {
                for &m in &args.mechanisms {
                    let sigma = Model::BandedGeometric.covariance(p);
                    points.push((
                        Truth {
                            name: format!("model1 p={p}"),
                            target: sigma.clone(),
                            m: sigma,
                            clip_radius: (2.0 * p as f64).sqrt(),
                            score_correlation: false,
                        },
                        n,
                        epsilon,
                        m,
                    ));
                }
            }
        }
    }
    out.text(format!(
        "# both norms: relative spectral / Frobenius error, mean ± sd over {} repetitions; paired differences default − reference as mean ± s.e.",
        args.reps
    ));
    out.text("\n| data | n | ε | mechanism | none+PSD | zero | diagonal | scaled identity | before | default | default − none+PSD | default − best trivial | default chose |");
    out.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (truth, n, epsilon, mechanism) in &points {
        let reps = sim::parallel_reps(args.reps.max(1), out.threads, |rep| {
            run_rep(truth, *n, *epsilon, *mechanism, rep)
        });
        let reps: Vec<(Vec<(f64, f64)>, String)> = reps.into_iter().collect::<Result<_>>()?;
        let column = |k: usize, norm: usize| -> Vec<f64> {
            reps.iter()
                .map(|(e, _)| if norm == 0 { e[k].0 } else { e[k].1 })
                .collect()
        };
        let cell = |k: usize| {
            let (s, f) = (column(k, 0), column(k, 1));
            let sd = |v: &[f64]| mean_se(v).1 * (v.len() as f64).sqrt();
            format!(
                "{:.3} ± {:.3} / {:.3} ± {:.3}",
                mean_se(&s).0,
                sd(&s),
                mean_se(&f).0,
                sd(&f)
            )
        };
        let def = RULES.len() - 1;
        let paired = |reference: &dyn Fn(usize, usize) -> f64| {
            let mut out = Vec::new();
            for norm in 0..2 {
                let d: Vec<f64> = (0..reps.len())
                    .map(|r| {
                        let e = reps[r].0[def];
                        (if norm == 0 { e.0 } else { e.1 }) - reference(r, norm)
                    })
                    .collect();
                let (m, se) = mean_se(&d);
                out.push(format!("{m:+.3} ± {se:.3}"));
            }
            out.join(" / ")
        };
        let pick = |e: (f64, f64), norm: usize| if norm == 0 { e.0 } else { e.1 };
        let vs_none = paired(&|r, norm| pick(reps[r].0[0], norm));
        // The better trivial estimate per norm (mean over the repetitions), paired.
        let best_trivial = |norm: usize| {
            (1..4)
                .min_by(|&a, &b| {
                    mean_se(&column(a, norm))
                        .0
                        .total_cmp(&mean_se(&column(b, norm)).0)
                })
                .unwrap_or(1)
        };
        let (bs, bf) = (best_trivial(0), best_trivial(1));
        let vs_trivial = paired(&|r, norm| pick(reps[r].0[if norm == 0 { bs } else { bf }], norm));
        let mut chose: Vec<String> = reps.iter().map(|(_, c)| c.clone()).collect();
        chose.dedup();
        out.text(format!(
            "| {} | {:.0e} | {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            truth.name,
            *n as f64,
            epsilon,
            mechanism.name(),
            cell(0),
            cell(1),
            cell(2),
            cell(3),
            cell(4),
            cell(5),
            vs_none,
            vs_trivial,
            chose.join("; ")
        ));
        out.row(json!({
            "experiment": "both-norms", "data": truth.name, "n": n, "epsilon": epsilon,
            "mechanism": mechanism.name(),
            "errors": RULES.iter().enumerate().map(|(k, name)| json!({
                "rule": name, "spectral": column(k, 0), "frobenius": column(k, 1),
            })).collect::<Vec<_>>(),
            "default_chose": chose,
        }));
    }
    Ok(())
}

/// One repetition: per rule of [`RULES`], the relative (spectral, Frobenius) error,
/// and the default's choice.
fn run_rep(
    truth: &Truth,
    n: u64,
    epsilon: f64,
    mechanism: MechanismArg,
    rep: usize,
) -> Result<(Vec<(f64, f64)>, String)> {
    let p = truth.m.nrows();
    let c = mechanism.collection(p, epsilon, truth.clip_radius, false)?;
    let input = EstimationInput::from_collection(&c);
    let signal = sim::SignalSums::population(&c, &truth.m, n);
    let seed = seed_of(&[60, p as u64, n, epsilon.to_bits(), rep as u64]);
    let acc = sim::add_noise(&c, &signal, seed);
    let y = average(&input, &acc.sums(), acc.count)?;
    let clamp = |d: f64| d.max(0.0);
    let diagonal = DMatrix::from_fn(p, p, |i, j| if i == j { clamp(y[(i, i)]) } else { 0.0 });
    let scaled = DMatrix::identity(p, p) * clamp(y.trace() / p as f64);
    let run = |options: &EstimateOptions| -> Result<(DMatrix<f64>, String)> {
        let e = estimate(&input, &acc, options)?;
        Ok((e.matrix, e.rule))
    };
    let (none, _) = run(&EstimateOptions {
        rule: RegularisationRule::None,
        ..Default::default()
    })?;
    let (before, _) = run(&EstimateOptions {
        rule: RegularisationRule::CrossValidated(CrossValidation {
            trivial_candidates: false,
            spectral_norm_guard: false,
            ..Default::default()
        }),
        ..Default::default()
    })?;
    let (default, rule) = run(&EstimateOptions::default())?;
    let errors = [
        none,
        DMatrix::zeros(p, p),
        diagonal,
        scaled,
        before,
        default,
    ]
    .iter()
    .map(|m| truth.errors(m))
    .collect();
    let mut chose = chosen_candidate(&rule);
    if let Some((_, refused)) = rule.split_once("spectral-norm guard refused ") {
        chose.push_str(&format!(" [refused {}]", refused.trim_end_matches(')')));
    }
    Ok((errors, chose))
}
