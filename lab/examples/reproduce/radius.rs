//! `reproduce radius`: the private radius phase (`ldpcov_privacy::radius`) against the
//! fixed radius `R = √(2p)` on real data sets, at the same total budget per device,
//! scored against the data's own covariance (every clipped estimate pays its clipping
//! bias here): with `--units standardized` (the default) the correlation matrix of the
//! standardized rows, where `√(2p)` already knows the scale (`E‖x‖² = p`); with
//! `--units centred` the covariance of the rows in the data's own units, where it does
//! not, and the phase's candidates span `--range`.
//!
//! Per data set, n and repetition, on the population fast path (`n` users whose rows
//! are distributed as the data set's standardized rows):
//! * **fixed**: the collection's (ε, δ) spent on the main Gaussian report at
//!   `R = √(2p)`;
//! * **private**: `--share` of the collection's ρ spent on the one-hot norm report
//!   (bins from `√p/4` to `16·√p`, ratio `√2`), its noisy sums drawn as the exact bin
//!   counts plus `N(0, n·σ²)` per bin, the radius chosen by the planner's rule from
//!   those sums alone, then the main report at the lowered ε and the chosen R;
//! * **exact-histogram** (not private, a reference): the same rule on the exact bin
//!   frequencies, with the main report at the lowered ε.
//!
//! The default estimate of each, its relative spectral and Frobenius errors, and the
//! radii chosen.

use crate::{Out, seed_of};
use anyhow::{Context, Result};
use ldpcov_estimate::{EstimateOptions, EstimationInput, estimate};
use ldpcov_lab::data::DataSet;
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::sim::{self, mean_se};
use ldpcov_privacy::radius::{NormBins, RadiusPhase, split_budget};
use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;
use std::path::PathBuf;

/// `reproduce radius`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Real data sets as NAME=PATH (`python3 lab/docs/experiments/write_real_data.py`).
    #[arg(long = "data")]
    data: Vec<String>,
    /// Users.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    ns: Vec<u64>,
    /// Total privacy per device, ε (at δ = 10⁻⁶).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    epsilons: Vec<f64>,
    /// The radius phase's share of the collection's zCDP ρ.
    #[arg(long, default_value_t = 0.1)]
    share: f64,
    /// Repetitions per point.
    #[arg(long, default_value_t = 4)]
    reps: usize,
    /// The rule's empty-bin threshold, in noise sds.
    #[arg(long, default_value_t = ldpcov_privacy::radius::DEFAULT_EMPTY_BIN_SDS)]
    empty_bin_sds: f64,
    /// Edges of the norm bins from `√p/4` to `16·√p` (13: ratio √2; 7: ratio 2).
    #[arg(long, default_value_t = 13)]
    edges: usize,
    /// Also print the fixed-radius errors at every bin edge from `√p/2` to `8·√p`
    /// (the whole budget on the main report): where the best fixed radius lies.
    #[arg(long)]
    sweep: bool,
    /// The rows' units: `standardized` (each column to mean 0, sd 1; the target is the
    /// correlation matrix) or `centred` (each column to mean 0 in the data's own units;
    /// the target is the covariance, divided by n).
    #[arg(long, value_enum, default_value_t = Units::Standardized)]
    units: Units,
    /// The smallest and largest candidate radius (default `√p/4,16·√p`), in the rows'
    /// units: a user who does not know the data's scale gives a wide range.
    #[arg(long, value_delimiter = ',')]
    range: Vec<f64>,
}

/// `--units`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Units {
    Standardized,
    Centred,
}

/// δ of every collection.
const DELTA: f64 = 1e-6;

/// A data set's standardized rows, their norms and the target.
struct Data {
    name: String,
    rows: Vec<DVector<f64>>,
    target: DMatrix<f64>,
}

impl Data {
    fn read(spec: &str, units: Units) -> Result<Self> {
        let (name, path) = spec
            .split_once('=')
            .with_context(|| format!("--data {spec}: expected NAME=PATH"))?;
        let data = DataSet::read(&PathBuf::from(path)).with_context(|| format!("--data {spec}"))?;
        if units == Units::Standardized {
            let z = data.standardized()?;
            return Ok(Data {
                name: name.to_string(),
                rows: z.iter_rows().map(DVector::from_column_slice).collect(),
                target: data.correlation()?,
            });
        }
        let mean = data.mean();
        let rows: Vec<DVector<f64>> = data
            .iter_rows()
            .map(|r| DVector::from_column_slice(r) - &mean)
            .collect();
        let p = mean.len();
        let mut target = DMatrix::<f64>::zeros(p, p);
        for x in &rows {
            target += x * x.transpose();
        }
        target /= rows.len() as f64;
        Ok(Data {
            name: name.to_string(),
            rows,
            target,
        })
    }

    fn dim(&self) -> usize {
        self.target.nrows()
    }

    /// The mean of the rows' `xxᵀ` clipped at `r`: what a collection at radius `r`
    /// estimates.
    fn clipped_second_moment(&self, r: f64) -> DMatrix<f64> {
        let p = self.dim();
        let mut m = DMatrix::<f64>::zeros(p, p);
        for x in &self.rows {
            let x = x * (r / x.norm()).min(1.0);
            m += &x * x.transpose();
        }
        m / self.rows.len() as f64
    }

    /// The rows' frequency in each of `bins`.
    fn bin_frequencies(&self, bins: &NormBins) -> Vec<f64> {
        let mut f = vec![0.0; bins.len()];
        for x in &self.rows {
            f[bins.bin_of(x.norm())] += 1.0 / self.rows.len() as f64;
        }
        f
    }
}

/// The default estimate's (spectral, Frobenius) relative error against the target
/// for a main report at (`epsilon`, R = `r`) from `n` users.
fn main_report_errors(data: &Data, n: u64, epsilon: f64, r: f64, seed: u64) -> Result<(f64, f64)> {
    let c = sim::collection(data.dim(), epsilon, DELTA, r)?;
    let signal = sim::SignalSums::population(&c, &data.clipped_second_moment(r), n);
    let acc = sim::add_noise(&c, &signal, seed);
    let e = estimate(
        &EstimationInput::from_collection(&c),
        &acc,
        &EstimateOptions::default(),
    )?;
    Ok((
        relative_spectral_error(&e.matrix, &data.target),
        relative_frobenius_error(&e.matrix, &data.target),
    ))
}

/// One repetition: (fixed, private, exact-histogram) errors and the two chosen radii.
#[allow(clippy::type_complexity)]
fn run_rep(
    data: &Data,
    n: u64,
    epsilon: f64,
    args: &Args,
    rep: usize,
) -> Result<([(f64, f64); 3], f64, f64)> {
    let share = args.share;
    let p = data.dim();
    let root_p = (p as f64).sqrt();
    let fixed_r = (2.0 * p as f64).sqrt();
    let seed = seed_of(&[56, p as u64, n, epsilon.to_bits(), rep as u64]);
    let fixed = main_report_errors(data, n, epsilon, fixed_r, seed)?;

    let spec = sim::collection(p, epsilon, DELTA, fixed_r)?.spec();
    let (phase_rho, main) = split_budget(&spec, share)?;
    let (smallest, largest) = match args.range.as_slice() {
        [smallest, largest] => (*smallest, *largest),
        [] => (root_p / 4.0, 16.0 * root_p),
        other => anyhow::bail!("--range takes two numbers, smallest,largest: got {other:?}"),
    };
    let phase = RadiusPhase::new(
        NormBins::geometric(smallest, largest, args.edges)?,
        phase_rho,
    )?
    .with_empty_bin_sds(args.empty_bin_sds)?;
    let exact = data.bin_frequencies(phase.bins());
    // The phase's sums: the exact counts plus the sum of n reports' noise per bin.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5ad1);
    let spread = phase.sigma() * (n as f64).sqrt();
    let sums: Vec<f64> = exact
        .iter()
        .map(|f| {
            let z: f64 = StandardNormal.sample(&mut rng);
            f * n as f64 + spread * z
        })
        .collect();
    let chosen = phase.choose_radius(&main, n, &sums, n)?.radius;
    let private = main_report_errors(data, n, main.epsilon, chosen, seed)?;
    let exact_sums: Vec<f64> = exact.iter().map(|f| f * n as f64).collect();
    let reference = phase.choose_radius(&main, n, &exact_sums, n)?.radius;
    let exact_histogram = main_report_errors(data, n, main.epsilon, reference, seed)?;
    Ok(([fixed, private, exact_histogram], chosen, reference))
}

pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    anyhow::ensure!(!args.data.is_empty(), "give at least one --data NAME=PATH");
    out.text(format!(
        "# radius: default estimate's relative spectral / Frobenius error against the data's {}, mean over {} repetitions; the phase spends {} of ρ",
        match args.units {
            Units::Standardized => "correlation matrix (standardized rows)",
            Units::Centred => "covariance (centred rows in the data's own units)",
        },
        args.reps, args.share
    ));
    out.text("\n| data | p | n | ε | fixed R = √(2p) | private phase | R chosen (÷√p) | exact histogram (not private) | its R (÷√p) |");
    out.text("|---|---|---|---|---|---|---|---|---|");
    for spec in &args.data {
        let data = Data::read(spec, args.units)?;
        let root_p = (data.dim() as f64).sqrt();
        for &n in &args.ns {
            for &epsilon in &args.epsilons {
                let reps = sim::parallel_reps(args.reps.max(1), out.threads, |rep| {
                    run_rep(&data, n, epsilon, args, rep)
                });
                let reps: Vec<_> = reps.into_iter().collect::<Result<_>>()?;
                let mean = |arm: usize, norm: usize| {
                    let v: Vec<f64> = reps
                        .iter()
                        .map(|(e, _, _)| if norm == 0 { e[arm].0 } else { e[arm].1 })
                        .collect();
                    mean_se(&v).0
                };
                let cell = |arm: usize| format!("{:.3} / {:.3}", mean(arm, 0), mean(arm, 1));
                let radii = |k: usize| {
                    reps.iter()
                        .map(|r| if k == 0 { r.1 } else { r.2 })
                        .collect::<Vec<f64>>()
                };
                let show = |v: &[f64]| {
                    v.iter()
                        .map(|r| format!("{:.2}", r / root_p))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                out.text(format!(
                    "| {} | {} | {:.0e} | {} | {} | {} | {} | {} | {} |",
                    data.name,
                    data.dim(),
                    n as f64,
                    epsilon,
                    cell(0),
                    cell(1),
                    show(&radii(0)),
                    cell(2),
                    show(&radii(1)),
                ));
                if args.sweep {
                    for k in 0..9 {
                        let r = root_p * 0.5 * 2f64.sqrt().powi(k);
                        let errs = sim::parallel_reps(args.reps.max(1), out.threads, |rep| {
                            let seed = seed_of(&[57, data.dim() as u64, n, rep as u64]);
                            main_report_errors(&data, n, epsilon, r, seed)
                        });
                        let errs: Vec<(f64, f64)> = errs.into_iter().collect::<Result<_>>()?;
                        let s: Vec<f64> = errs.iter().map(|e| e.0).collect();
                        let f: Vec<f64> = errs.iter().map(|e| e.1).collect();
                        out.text(format!(
                            "|   sweep R = {:.2}·√p | | | | {:.3} / {:.3} | | | | |",
                            r / root_p,
                            mean_se(&s).0,
                            mean_se(&f).0
                        ));
                    }
                }
                out.row(json!({
                    "experiment": "radius", "data": data.name, "units": if args.units == Units::Standardized { "standardized" } else { "centred" }, "p": data.dim(), "n": n,
                    "epsilon": epsilon, "share": args.share,
                    "fixed": [mean(0, 0), mean(0, 1)],
                    "private": [mean(1, 0), mean(1, 1)],
                    "exact_histogram": [mean(2, 0), mean(2, 1)],
                    "chosen_radius": radii(0), "exact_histogram_radius": radii(1),
                }));
            }
        }
    }
    Ok(())
}
