//! Central (trusted-aggregator) releases next to the local model (lab/docs/REPRODUCTION.md
//! §7), with the mechanisms of `ldpcov-central`:
//!
//! * `--experiment local-vs-central`: the canonical benchmark's models (the heavy-tailed paper's Models 1
//!   and 2, p = 20, R = √(2p), δ = 10⁻⁶) at equal (ε, δ, n): the local default (5-fold
//!   CV) and none + PSD against central GaussCov + PSD and SeparateCov + PSD at the ρ
//!   whose zCDP-to-(ε, δ) conversion gives ε, ρ + 2√(ρ·ln(1/δ)) = ε.
//! * `--experiment dong-liang-yi` (formerly `seed002`): Dong, Liang & Yi's trend of the error with n and ρ for GaussCov,
//!   SeparateCov and AdaptiveCov, on its data generator as we read it (rows `G·U`, G
//!   standard Gaussian, U uniform on [0, 1]^{d×d}, centred, each row rescaled to norm
//!   `2^−b` with `P(b) ∝ (b + 1)^−s` over `--zipf-bins` bins), error in Frobenius norm
//!   against the exact `XᵀX/n` of the rows, as the paper measures it. The sums are a
//!   central collection's (with 15 norm bins), built by the daemon's own expansion
//!   (`ldpcov_privacy::wire::add_raw_vector`), and released by `release_sums`.
//! * `--experiment svec`: GaussCov's raw release (no projection) in the triangle and in
//!   the `svec` weighting new central collections use (docs/PRIVACY.md §6b), on the
//!   same sums and at the same ρ: the Frobenius error `‖Σ̂ − XᵀX/n‖_F` of each, and
//!   the predicted ratio `√((p + 1)/(2p))` (noise `p²σ²` against `p(p + 1)σ²/2`).
//!
//! The other experiments release in the triangle, the weighting of the collections
//! they reproduce (`from_spec` of a spec without `central_weighting`), so that their
//! documented numbers stay comparable.
//!
//! Simulation only: the noise is seeded, nothing produced here is private.

use crate::{Out, seed_of};
use anyhow::Result;
use ldpcov_central::{
    CENTRAL_GRID_BITS, CentralStatistics, Mechanism, OffDiagonalWeighting, ReleaseBudget,
    gauss_cov, release_sums, separate_cov,
};
use ldpcov_client::DiscreteGaussianSampler;
use ldpcov_estimate::{
    Accumulator, EstimateOptions, EstimationInput, RegularisationRule, estimate, project_psd,
};
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_lab::sim;
use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Options of the central experiments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// `local-vs-central`, `dong-liang-yi`, `heavy-tails` (the central columns of the
    /// heavy-tailed paper's
    /// Tables 1–6) or `svec` (GaussCov in the triangle and in the svec weighting).
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
    /// zCDP budgets ρ (dong-liang-yi).
    #[arg(long, value_delimiter = ',', default_value = "0.01,0.1,1")]
    rhos: Vec<f64>,
    /// Dimension of the Dong, Liang & Yi generator.
    #[arg(long, default_value_t = 50)]
    dim: usize,
    /// Norm bins of the Dong, Liang & Yi generator (the norm skew: rows get norm 2^−b,
    /// b < N); one table block per value.
    #[arg(long, value_delimiter = ',', default_value = "10")]
    zipf_bins: Vec<usize>,
    /// Zipf exponent s of the Dong, Liang & Yi generator, `P(b) ∝ (b + 1)^−s`.
    #[arg(long, default_value_t = 3.0)]
    zipf_exponent: f64,
    /// The heavy-tailed paper tables to run (heavy-tails).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6")]
    tables: Vec<u8>,
}

/// The largest ρ whose conversion `ρ + 2√(ρ·ln(1/δ))` is at most ε (Bun & Steinke 2016,
/// Prop. 1.3): `ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))²`.
pub(crate) fn rho_for(epsilon: f64, delta: f64) -> f64 {
    ldpcov_accounting::calibration::zcdp_rho_for_epsilon(epsilon, delta)
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
        // The old names (the papers' file numbers) stay accepted.
        "dong-liang-yi" | "seed002" => dong_liang_yi(args, out),
        "heavy-tails" | "seed001" => {
            crate::papers::run_heavy_tails_central(args.reps, &args.tables, out)
        }
        "svec" => svec(args, out),
        other => {
            anyhow::bail!(
                "unknown experiment {other} (local-vs-central, dong-liang-yi, heavy-tails or svec)"
            )
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
                    let input = EstimationInput::from_collection(&c);
                    let local = estimate(&input, &acc, &EstimateOptions::default());
                    let none = estimate(
                        &input,
                        &acc,
                        &EstimateOptions {
                            rule: RegularisationRule::None,
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
                    let raw = OffDiagonalWeighting::Raw;
                    let gauss = gauss_cov(&stats, rho, raw, &mut noise).expect("gauss_cov");
                    let separate =
                        separate_cov(&stats, rho, raw, &mut noise).expect("separate_cov");
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

/// One row of Dong, Liang & Yi's generator: `G·U` rows (G ~ N(0, 1)^{1×d}, U fixed uniform
/// [0, 1]^{d×d}), centred by the column means of U (E[G·U] = 0 already; the paper
/// centres the sample), rescaled to norm `2^−b`, `P(b) ∝ (b + 1)^−3`, b < 10.
fn dong_liang_yi_row<R: Rng>(u: &DMatrix<f64>, zipf: &[f64], rng: &mut R) -> Vec<f64> {
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

fn dong_liang_yi(args: &Args, out: Out) -> Result<()> {
    let d = args.dim;
    out.text(format!(
        "# Dong, Liang & Yi trend: d = {d}, Zipf exponent {}, {} reps; mean Frobenius error ‖Σ̂ − XᵀX/n‖_F (unit-ball units); AdaptiveCov's radius 2^−j (mean j)",
        args.zipf_exponent, args.reps
    ));
    out.text("| N bins | n | ρ | GaussCov | SeparateCov | AdaptiveCov (j) | tr(XᵀX/n) |");
    out.text("|---|---|---|---|---|---|---|");
    let mut urng = rand_chacha::ChaCha8Rng::seed_from_u64(2002);
    let u = DMatrix::from_fn(d, d, |_, _| urng.random::<f64>());
    // The collection the daemon would keep: central, second moment, 15 norm bins.
    let collection = ldpcov_privacy::Collection::from_spec(&ldpcov_proto::v1::CollectionSpec {
        collection_id: "dong-liang-yi".into(),
        dim: d as u32,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 1.0,
        min_reports: 1,
        moments: ldpcov_proto::v1::Moments::SecondMoment as i32,
        privacy_model: ldpcov_proto::v1::PrivacyModel::Central as i32,
        norm_bins: ldpcov_privacy::limits::MAX_NORM_BINS,
        ..Default::default()
    })?;
    let tri = d * (d + 1) / 2;
    for &bins in &args.zipf_bins {
        // Cumulative Zipf(s) over `bins` bins.
        let weights: Vec<f64> = (0..bins.max(1))
            .map(|b| (b as f64 + 1.0).powf(-args.zipf_exponent))
            .collect();
        let total: f64 = weights.iter().sum();
        let zipf: Vec<f64> = weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w / total;
                Some(*acc)
            })
            .collect();
        for &n in &args.ns {
            for &rho in &args.rhos {
                let reps = sim::parallel_reps(args.reps, out.threads, |rep| {
                    let seed = seed_of(&[71, n, rep as u64, rho.to_bits(), bins as u64]);
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                    let mut sums = vec![0i64; collection.entries()];
                    for _ in 0..n {
                        let row = dong_liang_yi_row(&u, &zipf, &mut rng);
                        let grid = ldpcov_privacy::wire::to_grid_unit_ball(&row, CENTRAL_GRID_BITS)
                            .expect("finite row");
                        ldpcov_privacy::wire::add_raw_vector(&collection, &grid, &mut sums)
                            .expect("inside the unit ball");
                    }
                    let stats =
                        CentralStatistics::from_sums(d, CENTRAL_GRID_BITS, n, sums[..tri].to_vec())
                            .expect("sums");
                    let exact = stats.exact_second_moment().expect("n > 0");
                    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed ^ 3);
                    let raw = OffDiagonalWeighting::Raw;
                    let g = gauss_cov(&stats, rho, raw, &mut noise).expect("gauss_cov");
                    let s = separate_cov(&stats, rho, raw, &mut noise).expect("separate_cov");
                    let a = release_sums(
                        &collection,
                        n,
                        &sums,
                        Mechanism::AdaptiveCov,
                        ReleaseBudget::Rho(rho),
                        &mut noise,
                    )
                    .expect("adaptive_cov");
                    let scale = 1.0 / (collection.grid_scale() * n as f64);
                    let packed: Vec<f64> = a.sums.iter().map(|&v| v as f64 * scale).collect();
                    let full = ldpcov_privacy::layout::unpack_symmetric(d, &packed);
                    let adaptive = DMatrix::from_row_slice(d, d, &full);
                    (
                        (&g.matrix - &exact).norm(),
                        (&s.matrix - &exact).norm(),
                        (&adaptive - &exact).norm(),
                        a.radius.recip().log2(),
                        exact.trace(),
                    )
                });
                let k = reps.len() as f64;
                let mean =
                    |f: fn(&(f64, f64, f64, f64, f64)) -> f64| reps.iter().map(f).sum::<f64>() / k;
                let (g, s, a, j, tr) = (
                    mean(|r| r.0),
                    mean(|r| r.1),
                    mean(|r| r.2),
                    mean(|r| r.3),
                    mean(|r| r.4),
                );
                out.row(
                    json!({"experiment": "dong-liang-yi", "zipf_bins": bins, "n": n, "rho": rho,
                    "d": d, "gauss_cov": g, "separate_cov": s, "adaptive_cov": a,
                    "adaptive_radius_exponent": j, "trace": tr}),
                );
                out.text(format!(
                    "| {bins} | {n} | {rho} | {g:.5} | {s:.5} | {a:.5} ({j:.1}) | {tr:.4} |"
                ));
            }
        }
    }
    Ok(())
}

/// GaussCov's raw release in both weightings on the same sums (module docs).
fn svec(args: &Args, out: Out) -> Result<()> {
    let d = args.dim;
    out.text(format!(
        "# GaussCov raw release, triangle vs svec: p = {d}, rows of norm 1 (Dong, Liang & Yi's generator, one bin), {} reps; mean Frobenius error ‖Σ̂ − XᵀX/n‖_F (unit-ball units)",
        args.reps
    ));
    out.text("| p | n | ρ | triangle | svec | svec/triangle | predicted √((p+1)/(2p)) |");
    out.text("|---|---|---|---|---|---|---|");
    let mut urng = rand_chacha::ChaCha8Rng::seed_from_u64(2002);
    let u = DMatrix::from_fn(d, d, |_, _| urng.random::<f64>());
    for &n in &args.ns {
        for &rho in &args.rhos {
            let reps = sim::parallel_reps(args.reps, out.threads, |rep| {
                let seed = seed_of(&[72, n, rep as u64, rho.to_bits(), d as u64]);
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let mut stats = CentralStatistics::new(d, CENTRAL_GRID_BITS).expect("dimension");
                for _ in 0..n {
                    stats
                        .add_vector(&dong_liang_yi_row(&u, &[1.0], &mut rng))
                        .expect("finite row");
                }
                let exact = stats.exact_second_moment().expect("n > 0");
                let error = |weighting| {
                    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed ^ 5);
                    let g = gauss_cov(&stats, rho, weighting, &mut noise).expect("gauss_cov");
                    (&g.matrix - &exact).norm()
                };
                (
                    error(OffDiagonalWeighting::Raw),
                    error(OffDiagonalWeighting::Svec),
                )
            });
            let k = reps.len() as f64;
            let raw = reps.iter().map(|r| r.0).sum::<f64>() / k;
            let svec = reps.iter().map(|r| r.1).sum::<f64>() / k;
            let predicted = ((d as f64 + 1.0) / (2.0 * d as f64)).sqrt();
            out.row(json!({"experiment": "svec", "p": d, "n": n, "rho": rho,
                "triangle": raw, "svec": svec, "predicted_ratio": predicted}));
            out.text(format!(
                "| {d} | {n} | {rho} | {raw:.4e} | {svec:.4e} | {:.3} | {predicted:.3} |",
                svec / raw
            ));
        }
    }
    Ok(())
}
