//! Central (trusted-aggregator) releases next to the local model (docs/REPRODUCTION.md
//! §7), with the mechanisms of `ldpcov-central`:
//!
//! * `--experiment local-vs-central`: the canonical benchmark's models (seed 001 Models 1
//!   and 2, p = 20, R = √(2p), δ = 10⁻⁶) at equal (ε, δ, n): the local default (5-fold
//!   CV) and none + PSD against central GaussCov + PSD and SeparateCov + PSD at the ρ
//!   whose zCDP-to-(ε, δ) conversion gives ε, ρ + 2√(ρ·ln(1/δ)) = ε.
//! * `--experiment seed002`: seed 002's trend of the error with n and ρ for GaussCov and
//!   SeparateCov, on its data generator as we read it (rows `G·U`, G standard Gaussian,
//!   U uniform on [0, 1]^{d×d}, centred, each row rescaled to norm `2^−b` with
//!   `P(b) ∝ (b + 1)^−3` over 10 bins), error in Frobenius norm against the exact
//!   `XᵀX/n` of the clipped rows, as the paper measures it.
//!
//! Simulation only: the noise is seeded, nothing produced here is private.

use crate::{Out, seed_of};
use anyhow::Result;
use ldpcov::central::{CENTRAL_GRID_BITS, CentralStatistics, gauss_cov, separate_cov};
use ldpcov::client::DiscreteGaussianSampler;
use ldpcov::estimate::{Accumulator, EstimateOptions, ThresholdRule, estimate, project_psd};
use ldpcov::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov::models::{Model, Sampler};
use ldpcov::sim;
use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Options of the central experiments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// `local-vs-central`, `seed002` or `seed001` (the central columns of its
    /// Tables 1–6).
    #[arg(long, default_value = "local-vs-central")]
    experiment: String,
    /// Repetitions per point.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Numbers of users.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    ns: Vec<u64>,
    /// Privacy levels ε (local-vs-central).
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2")]
    epsilons: Vec<f64>,
    /// zCDP budgets ρ (seed002).
    #[arg(long, value_delimiter = ',', default_value = "0.01,0.1,1")]
    rhos: Vec<f64>,
    /// Dimension of the seed 002 generator.
    #[arg(long, default_value_t = 50)]
    dim: usize,
    /// Seed 001 tables to run (seed001).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6")]
    tables: Vec<u8>,
}

/// The largest ρ whose conversion `ρ + 2√(ρ·ln(1/δ))` is at most ε (Bun & Steinke 2016,
/// Prop. 1.3): `ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))²`.
pub(crate) fn rho_for(epsilon: f64, delta: f64) -> f64 {
    let l = (1.0 / delta).ln();
    ((l + epsilon).sqrt() - l.sqrt()).powi(2)
}

/// The PSD projection of a released second moment, in data units.
fn psd_scaled(m: &DMatrix<f64>, r2: f64) -> DMatrix<f64> {
    let projected = project_psd(m).map(|(p, _)| p).unwrap_or_else(|_| m.clone());
    projected * r2
}

/// Runs the chosen experiment.
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    match args.experiment.as_str() {
        "local-vs-central" => local_vs_central(args, out),
        "seed002" => seed002(args, out),
        "seed001" => crate::papers::run_seed001_central(args.reps, &args.tables, out),
        other => {
            anyhow::bail!("unknown experiment {other} (local-vs-central, seed002 or seed001)")
        }
    }
}

fn local_vs_central(args: &Args, out: Out) -> Result<()> {
    let p = 20usize;
    let r = (2.0 * p as f64).sqrt();
    let delta = 1e-6;
    out.text(format!(
        "# local vs central: p = {p}, R = √(2p), δ = {delta}, {} reps; mean relative spectral | Frobenius error",
        args.reps
    ));
    out.text("| model | n | ε | ρ (central) | local default | local none+PSD | central GaussCov+PSD | central SeparateCov+PSD | local/central (spectral) |");
    out.text("|---|---|---|---|---|---|---|---|---|");
    for (m, model) in [(1u64, Model::BandedGeometric), (2, Model::Tridiagonal2)] {
        let truth = model.covariance(p);
        let sampler = Sampler::gaussian(&truth)?;
        for &n in &args.ns {
            for &epsilon in &args.epsilons {
                let c = sim::collection(p, epsilon, delta, r)?;
                let rho = rho_for(epsilon, delta);
                let reps = sim::parallel_reps(args.reps, out.threads, |rep| {
                    let seed = seed_of(&[70, m, n, rep as u64, epsilon.to_bits()]);
                    // Local: the sum-of-noise path (users' grid signal, noise per fold).
                    let signals = sim::simulate_signal(&[&c], &sampler, n, seed);
                    let acc: Accumulator = sim::add_noise(&c, &signals[0], seed ^ 1);
                    let local = estimate(&c, &acc, &EstimateOptions::default());
                    let none = estimate(
                        &c,
                        &acc,
                        &EstimateOptions {
                            rule: ThresholdRule::None,
                            ..Default::default()
                        },
                    );
                    // Central: the same kind of users, clipped at the same R.
                    let mut stats =
                        CentralStatistics::new(p, CENTRAL_GRID_BITS).expect("valid dimension");
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                    for _ in 0..n {
                        let x: Vec<f64> = sampler.sample(&mut rng).iter().map(|v| v / r).collect();
                        stats.add_vector(&x).expect("finite x");
                    }
                    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed ^ 2);
                    let gauss = gauss_cov(&stats, rho, &mut noise).expect("gauss_cov");
                    let separate = separate_cov(&stats, rho, &mut noise).expect("separate_cov");
                    let errors = |m: &DMatrix<f64>| {
                        (
                            relative_spectral_error(m, &truth),
                            relative_frobenius_error(m, &truth),
                        )
                    };
                    match (local, none) {
                        (Ok(local), Ok(none)) => Some([
                            errors(&local.matrix),
                            errors(&none.matrix),
                            errors(&psd_scaled(&gauss.matrix, r * r)),
                            errors(&psd_scaled(&separate.matrix, r * r)),
                        ]),
                        _ => None,
                    }
                });
                let reps: Vec<[(f64, f64); 4]> = reps.into_iter().flatten().collect();
                if reps.is_empty() {
                    continue;
                }
                let mean = |k: usize| {
                    let s = reps.iter().map(|r| r[k].0).sum::<f64>() / reps.len() as f64;
                    let f = reps.iter().map(|r| r[k].1).sum::<f64>() / reps.len() as f64;
                    (s, f)
                };
                let cols: Vec<(f64, f64)> = (0..4).map(mean).collect();
                let best_central = cols[2].0.min(cols[3].0);
                out.row(json!({
                    "experiment": "local-vs-central", "model": m, "n": n, "epsilon": epsilon,
                    "rho": rho, "local_default": cols[0], "local_none_psd": cols[1],
                    "central_gauss_cov_psd": cols[2], "central_separate_cov_psd": cols[3],
                }));
                out.text(format!(
                    "| {m} | {n} | {epsilon} | {rho:.2e} | {:.3} \\| {:.3} | {:.3} \\| {:.3} | {:.4} \\| {:.4} | {:.4} \\| {:.4} | {:.0}× |",
                    cols[0].0, cols[0].1, cols[1].0, cols[1].1, cols[2].0, cols[2].1,
                    cols[3].0, cols[3].1, cols[0].0 / best_central
                ));
            }
        }
    }
    Ok(())
}

/// One row of seed 002's generator: `G·U` rows (G ~ N(0, 1)^{1×d}, U fixed uniform
/// [0, 1]^{d×d}), centred by the column means of U (E[G·U] = 0 already; the paper
/// centres the sample), rescaled to norm `2^−b`, `P(b) ∝ (b + 1)^−3`, b < 10.
fn seed002_row<R: Rng>(u: &DMatrix<f64>, zipf: &[f64], rng: &mut R) -> Vec<f64> {
    let d = u.nrows();
    let g: Vec<f64> = (0..d)
        .map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal))
        .collect();
    let x: Vec<f64> = (0..d)
        .map(|j| (0..d).map(|i| g[i] * u[(i, j)]).sum())
        .collect();
    let norm = x
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    let pick: f64 = rng.random();
    let bin = zipf
        .iter()
        .position(|&c| pick < c)
        .unwrap_or(zipf.len() - 1);
    let scale = 2f64.powi(-(bin as i32)) / norm;
    x.iter().map(|v| v * scale).collect()
}

fn seed002(args: &Args, out: Out) -> Result<()> {
    let d = args.dim;
    // Cumulative Zipf(s = 3) over 10 bins.
    let weights: Vec<f64> = (0..10).map(|b| (b as f64 + 1.0).powi(-3)).collect();
    let total: f64 = weights.iter().sum();
    let zipf: Vec<f64> = weights
        .iter()
        .scan(0.0, |acc, w| {
            *acc += w / total;
            Some(*acc)
        })
        .collect();
    out.text(format!(
        "# seed 002 trend: d = {d}, {} reps; mean Frobenius error ‖Σ̂ − XᵀX/n‖_F (unit-ball units)",
        args.reps
    ));
    out.text("| n | ρ | GaussCov | SeparateCov | tr(XᵀX/n) |");
    out.text("|---|---|---|---|---|");
    let mut urng = rand_chacha::ChaCha8Rng::seed_from_u64(2002);
    let u = DMatrix::from_fn(d, d, |_, _| urng.random::<f64>());
    for &n in &args.ns {
        for &rho in &args.rhos {
            let reps = sim::parallel_reps(args.reps, out.threads, |rep| {
                let seed = seed_of(&[71, n, rep as u64, rho.to_bits()]);
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let mut stats = CentralStatistics::new(d, CENTRAL_GRID_BITS).expect("dimension");
                for _ in 0..n {
                    stats
                        .add_vector(&seed002_row(&u, &zipf, &mut rng))
                        .expect("finite row");
                }
                let exact = stats.exact_second_moment().expect("n > 0");
                let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed ^ 3);
                let g = gauss_cov(&stats, rho, &mut noise).expect("gauss_cov");
                let s = separate_cov(&stats, rho, &mut noise).expect("separate_cov");
                (
                    (&g.matrix - &exact).norm(),
                    (&s.matrix - &exact).norm(),
                    exact.trace(),
                )
            });
            let k = reps.len() as f64;
            let g = reps.iter().map(|r| r.0).sum::<f64>() / k;
            let s = reps.iter().map(|r| r.1).sum::<f64>() / k;
            let tr = reps.iter().map(|r| r.2).sum::<f64>() / k;
            out.row(json!({"experiment": "seed002", "n": n, "rho": rho, "d": d,
                "gauss_cov": g, "separate_cov": s, "trace": tr}));
            out.text(format!("| {n} | {rho} | {g:.5} | {s:.5} | {tr:.4} |"));
        }
    }
    Ok(())
}
