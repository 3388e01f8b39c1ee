//! Wang & Xu's three sweeps (`000_ce90c25c0138f23a.txt`, "Differentially Private High
//! Dimensional Sparse Covariance Matrix Estimation"): relative ℓ₂ (spectral) and ℓ₁ error against
//! n for the sparse model `U = (Ũ + 50·I)/200`, x ~ N(0, U), δ = 1/n:
//! sparsity sr ∈ {0.1, 0.2, 0.3, 0.5} (p = 100, ε = 1), p ∈ {50, 100, 200, 500}
//! (sr = 0.2, ε = 1), ε ∈ {0.1, 0.5, 1, 2} (p = 200, sr = 0.2).
//!
//! Ũ's values are unspecified in the paper: [`Model::SparseWangXu`] draws them
//! uniformly from [−1, 1] (one fixed Ũ per setting, seed 0). No paper clips: we use
//! R = √(2·tr U) = √(p/2). Sum-of-noise path (the signal is still simulated user by
//! user). Estimators: Wang & Xu Alg. 2 as printed (γ = 0, c = 4, diagonal thresholded)
//! + PSD, the same with the diagonal exempt, raw + PSD, and the product default (CV).

use crate::{Out, plot, seed_of};
use anyhow::Result;
use ldpcov_estimate::{
    EstimateOptions, EstimationInput, RegularisationRule, UniversalThreshold, estimate,
};
use ldpcov_lab::metrics::{relative_l1_error, relative_spectral_error};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_lab::sim::{self, Path};
use serde_json::json;

/// Options of the Wang & Xu sweeps.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Repetitions per point (the paper: 20).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Numbers of users.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    ns: Vec<u64>,
    /// Sweeps to run: sparsity, dim, epsilon.
    #[arg(long, value_delimiter = ',', default_value = "sparsity,dim,epsilon")]
    sweeps: Vec<String>,
    /// Largest p of the dimension sweep (the paper goes to 500).
    #[arg(long, default_value_t = 500)]
    max_dim: usize,
    /// Directory for the PNG plots (none if not given).
    #[arg(long)]
    plot_dir: Option<std::path::PathBuf>,
}

/// One point of a sweep: (sr, p, ε).
#[derive(Clone, Copy)]
struct Point {
    sparsity: f64,
    p: usize,
    epsilon: f64,
}

fn estimators() -> Vec<(&'static str, EstimateOptions)> {
    let universal = |diag: bool| EstimateOptions {
        rule: RegularisationRule::Universal(UniversalThreshold {
            gamma: 0.0,
            c: 4.0,
            threshold_diagonal: diag,
        }),
        ..Default::default()
    };
    vec![
        ("wang-xu Alg2 (diag thresholded)", universal(true)),
        ("wang-xu Alg2 (diag exempt)", universal(false)),
        (
            "none+psd",
            EstimateOptions {
                rule: RegularisationRule::None,
                ..Default::default()
            },
        ),
        ("cv default", EstimateOptions::default()),
    ]
}

/// Runs the sweeps and draws the plots.
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    let ests = estimators();
    out.text(format!(
        "# Wang & Xu sweeps: path {} (per-user signal, one noise draw per fold and entry), {} reps, δ = 1/n, R = √(p/2); mean (s.e.) of relative ℓ₂ | ℓ₁ error",
        Path::SumOfNoise.name(),
        args.reps
    ));
    for sweep in &args.sweeps {
        let (label, points): (&str, Vec<(String, Point)>) = match sweep.as_str() {
            "sparsity" => (
                "sr",
                [0.1, 0.2, 0.3, 0.5]
                    .iter()
                    .map(|&s| {
                        (
                            format!("sr={s}"),
                            Point {
                                sparsity: s,
                                p: 100,
                                epsilon: 1.0,
                            },
                        )
                    })
                    .collect(),
            ),
            "dim" => (
                "p",
                [50, 100, 200, 500]
                    .iter()
                    .filter(|&&p| p <= args.max_dim)
                    .map(|&p| {
                        (
                            format!("p={p}"),
                            Point {
                                sparsity: 0.2,
                                p,
                                epsilon: 1.0,
                            },
                        )
                    })
                    .collect(),
            ),
            "epsilon" => (
                "ε",
                [0.1, 0.5, 1.0, 2.0]
                    .iter()
                    .map(|&e| {
                        (
                            format!("eps={e}"),
                            Point {
                                sparsity: 0.2,
                                p: 200,
                                epsilon: e,
                            },
                        )
                    })
                    .collect(),
            ),
            other => anyhow::bail!("unknown sweep {other} (sparsity, dim, epsilon)"),
        };
        // curves[estimator][point] = Vec<(n, mean ℓ₂, mean ℓ₁)>
        let mut curves = vec![vec![Vec::new(); points.len()]; ests.len()];
        for (pi, (name, pt)) in points.iter().enumerate() {
            let model = Model::SparseWangXu {
                sparsity: pt.sparsity,
                seed: 0,
            };
            let truth = model.covariance(pt.p);
            let sampler = Sampler::gaussian(&truth)?;
            let r = (pt.p as f64 / 2.0).sqrt();
            for &n in &args.ns {
                let c = sim::collection(pt.p, pt.epsilon, 1.0 / n as f64, r)?;
                let started = std::time::Instant::now();
                let reps = sim::parallel_reps(args.reps, out.threads, |rep| {
                    let seed =
                        seed_of(&[4, pt.p as u64, (pt.sparsity * 100.0) as u64, n, rep as u64]);
                    let signals = sim::simulate_signal(&[&c], &sampler, n, seed);
                    let acc = sim::add_noise(&c, &signals[0], seed ^ (pt.epsilon * 1e3) as u64);
                    ests.iter()
                        .map(|(_, o)| {
                            let m = estimate(&EstimationInput::from_collection(&c), &acc, o)
                                .expect("estimate")
                                .matrix;
                            (
                                relative_spectral_error(&m, &truth),
                                relative_l1_error(&m, &truth),
                            )
                        })
                        .collect::<Vec<_>>()
                });
                out.text(format!(
                    "\nsweep {sweep}: {name} n={n:.0e} ({:.0} s)",
                    started.elapsed().as_secs_f64()
                ));
                for (k, (est, _)) in ests.iter().enumerate() {
                    let l2: Vec<f64> = reps.iter().map(|r| r[k].0).collect();
                    let l1: Vec<f64> = reps.iter().map(|r| r[k].1).collect();
                    let (m2, s2) = sim::mean_se(&l2);
                    let (m1, s1) = sim::mean_se(&l1);
                    curves[k][pi].push((n as f64, m2, m1));
                    out.text(format!(
                        "  {est:<34} {m2:>9.4} ({s2:.4}) {m1:>9.4} ({s1:.4})"
                    ));
                    out.row(json!({
                        "experiment": "wang-xu", "sweep": sweep, "setting": name,
                        "sparsity": pt.sparsity, "p": pt.p, "epsilon": pt.epsilon,
                        "n": n, "delta": 1.0 / n as f64, "clip_radius": r, "reps": args.reps,
                        "path": Path::SumOfNoise.name(), "estimator": est,
                        "rel_l2_mean": m2, "rel_l2_se": s2, "rel_l1_mean": m1, "rel_l1_se": s1,
                    }));
                }
            }
        }
        if let Some(dir) = &args.plot_dir {
            std::fs::create_dir_all(dir)?;
            for (metric, idx) in [("l2", 1usize), ("l1", 2)] {
                let file = dir.join(format!("wang_xu_{sweep}_{metric}.png"));
                let series: Vec<plot::Series> = [0usize, 3]
                    .iter()
                    .flat_map(|&k| {
                        let curves = &curves;
                        points
                            .iter()
                            .enumerate()
                            .map(move |(pi, (name, _))| plot::Series {
                                label: format!("{} {name}", if k == 0 { "wang-xu" } else { "cv" }),
                                color: pi,
                                dashed: k == 0,
                                points: curves[k][pi]
                                    .iter()
                                    .map(|t| (t.0, if idx == 1 { t.1 } else { t.2 }))
                                    .collect(),
                            })
                    })
                    .collect();
                let title = format!("Wang & Xu, {label} sweep: relative {metric} error vs n");
                let text = plot::draw(&file, &title, &series)?;
                out.text(format!(
                    "  plot {} ({})",
                    file.display(),
                    if text { "with text" } else { "no text" }
                ));
            }
        }
    }
    Ok(())
}
