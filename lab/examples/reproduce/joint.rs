//! Mean and covariance from one report on non-centred data (lab/docs/REPRODUCTION.md,
//! "Non-centred data"): the heavy-tailed paper's Model 1 shifted by `shift` in every coordinate,
//! p = 20, through the same perturbation ([`sim::simulate_signal`] runs the real
//! `Perturber`) and estimator ([`estimate`]) as the product, for the mean-and-covariance
//! report and the second moment, with and without a public centre, next to the same
//! users' data centred exactly.

use crate::{Out, seed_of};
use anyhow::Result;
use ldpcov_estimate::{EstimateOptions, EstimationInput, estimate};
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_lab::sim::{self, Path};
use ldpcov_privacy::Collection;
use ldpcov_proto::v1::Moments;
use serde_json::json;

/// Options of the non-centred data experiment.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Repetitions.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Number of users.
    #[arg(long, default_value_t = 1_000_000)]
    n: u64,
    /// Privacy level ε (δ = 1e-6).
    #[arg(long, default_value_t = 1.0)]
    epsilon: f64,
    /// Shift of every coordinate's mean.
    #[arg(long, default_value_t = 5.0)]
    shift: f64,
    /// Error of the rough public centre in every coordinate (centre = shift − this).
    #[arg(long, default_value_t = 0.5)]
    centre_error: f64,
}

/// One configuration: which data, which collection.
struct Row {
    name: &'static str,
    shifted: bool,
    collection: Collection,
}

/// Runs the experiment.
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    let p = 20usize;
    let delta = 1e-6;
    let base_r = (2.0 * p as f64).sqrt();
    let truth = Model::BandedGeometric.covariance(p);
    let centred = Sampler::gaussian(&truth)?;
    let shifted = centred.clone().with_mean(vec![args.shift; p]);
    let mu_norm = args.shift * (p as f64).sqrt();
    let rough = vec![args.shift - args.centre_error; p];
    let rough_r = base_r + args.centre_error * (p as f64).sqrt();
    let wide_r = base_r + mu_norm;
    use Moments::{MeanAndCovariance as Joint, SecondMoment as Second};
    let c = |r: f64, m: Moments, centre: Vec<f64>| {
        sim::collection_with(p, args.epsilon, delta, r, m, centre)
    };
    let rows = [
        Row {
            name: "centred data, second moment, R=√(2p)",
            shifted: false,
            collection: c(base_r, Second, Vec::new())?,
        },
        Row {
            name: "centred data, mean+cov, R=√(2p)",
            shifted: false,
            collection: c(base_r, Joint, Vec::new())?,
        },
        Row {
            name: "shifted, mean+cov, centre=μ, R=√(2p)",
            shifted: true,
            collection: c(base_r, Joint, vec![args.shift; p])?,
        },
        Row {
            name: "shifted, mean+cov, rough centre",
            shifted: true,
            collection: c(rough_r, Joint, rough.clone())?,
        },
        Row {
            name: "shifted, mean+cov, no centre",
            shifted: true,
            collection: c(wide_r, Joint, Vec::new())?,
        },
        Row {
            name: "shifted, second moment, rough centre",
            shifted: true,
            collection: c(rough_r, Second, rough)?,
        },
        Row {
            name: "shifted, second moment, no centre",
            shifted: true,
            collection: c(wide_r, Second, Vec::new())?,
        },
    ];
    out.text(format!(
        "# non-centred data: Model 1 + {} in every coordinate, p = {p}, ε = {}, δ = {delta}, n = {:.0e}, {} reps, path {}; default estimate (cv), mean (s.e.) of relative spectral | Frobenius error; rough centre = {}·1, R = {rough_r:.3}; no centre: R = {wide_r:.3}",
        args.shift,
        args.epsilon,
        args.n as f64,
        args.reps,
        Path::SumOfNoise.name(),
        args.shift - args.centre_error,
    ));
    let started = std::time::Instant::now();
    // Per rep: per row (spectral, Frobenius, max |mean error|).
    let results: Vec<Vec<(f64, f64, f64)>> = sim::parallel_reps(args.reps, out.threads, |rep| {
        let seed = seed_of(&[7, args.n, rep as u64]);
        let mut errs = Vec::new();
        for (k, row) in rows.iter().enumerate() {
            let sampler = if row.shifted { &shifted } else { &centred };
            // The same seed: the same users (the shift is added to the same draws).
            let signals = sim::simulate_signal(&[&row.collection], sampler, args.n, seed);
            let noise_seed = seed_of(&[8, args.n, rep as u64, k as u64]);
            let acc = sim::add_noise(&row.collection, &signals[0], noise_seed);
            let est = estimate(
                &EstimationInput::from_collection(&row.collection),
                &acc,
                &EstimateOptions::default(),
            )
            .expect("estimate");
            let want = if row.shifted { args.shift } else { 0.0 };
            let mean_err = est
                .moments
                .mean
                .as_ref()
                .map(|m| m.iter().map(|v| (v - want).abs()).fold(0.0, f64::max))
                .unwrap_or(f64::NAN);
            errs.push((
                relative_spectral_error(&est.matrix, &truth),
                relative_frobenius_error(&est.matrix, &truth),
                mean_err,
            ));
        }
        errs
    });
    let secs = started.elapsed().as_secs_f64();
    let mut base = (f64::NAN, f64::NAN);
    out.text(format!(
        "  {:<40} {:>17} {:>17} {:>10} {:>11}",
        "configuration", "spectral", "Frobenius", "Frob/row1", "max|μ̂−μ|"
    ));
    for (k, row) in rows.iter().enumerate() {
        let spec: Vec<f64> = results.iter().map(|r| r[k].0).collect();
        let frob: Vec<f64> = results.iter().map(|r| r[k].1).collect();
        let mean: Vec<f64> = results.iter().map(|r| r[k].2).collect();
        let (ms, ss) = sim::mean_se(&spec);
        let (mf, sf) = sim::mean_se(&frob);
        let (mm, _) = sim::mean_se(&mean);
        if k == 0 {
            base = (ms, mf);
        }
        out.text(format!(
            "  {:<40} {ms:>9.4} ({ss:.4}) {mf:>9.4} ({sf:.4}) {:>10.3} {mm:>11.4}",
            row.name,
            mf / base.1
        ));
        out.row(json!({
            "experiment": "non-centred", "path": Path::SumOfNoise.name(), "model": "model1",
            "p": p, "n": args.n, "epsilon": args.epsilon, "delta": delta,
            "shift": args.shift, "configuration": row.name,
            "clip_radius": row.collection.clip_radius(), "reps": args.reps,
            "rel_spectral_mean": ms, "rel_spectral_se": ss,
            "rel_frobenius_mean": mf, "rel_frobenius_se": sf,
            "frobenius_ratio_to_centred_second_moment": mf / base.1,
            "max_abs_mean_error": mm,
        }));
    }
    out.text(format!("  ({secs:.0} s)"));
    Ok(())
}
