//! Mean-and-covariance collections with the rank-one mechanism (issue 30): one
//! one-sided report at ε per user (today's product path) against a split of ε between
//! a symmetric report (ε_s = s·ε, the second moment) and a one-sided report
//! ((1 − s)·ε, used only for the mean), at equal n, on non-centred data
//! (docs/BENCHMARKS.md, "Mean and covariance: one report or a split ε").
//!
//! Every report is drawn by the product's exact lattice sampler through
//! [`sim::per_user`] (clip, lift, `RankOneSampler`, dither, wire encoding, decoding,
//! accumulation), and every estimate comes from the product's [`estimate`] with no
//! regularisation and no PSD projection:
//!
//! * **one-sided**: `Σ̂ = M̂ − μ̂μ̂ᵀ + Cov(μ̂)` of one mean-and-covariance collection,
//!   exactly what the aggregator releases raw (`Cov(μ̂) = (I + (κ₁ − c²)M̂)/(c²n)`);
//! * **split s**: `M̂` from a second-moment collection at `s·ε` (symmetric cap), `μ̂`
//!   from a mean-and-covariance collection at `(1 − s)·ε` (one-sided cap, its second
//!   moment unused), and `Σ̂ = M̂ − μ̂μ̂ᵀ + Cov(μ̂)` with the mean report's `κ₁`, `c`
//!   and the symmetric report's `M̂` (`E[μ̂μ̂ᵀ] = μμᵀ + Cov(μ̂)`, so the correction
//!   makes `Σ̂` unbiased as in the product). Each report has its own variance-optimal γ
//!   (`RankOneParams`). The same users (same seed) report to both collections.
//!
//! The data are in the unit ball (R = 1): Gaussian with covariance `Σ` of trace
//! `--trace` (Model 1, `σ_ij ∝ 0.6^|i−j|`, or a dense 3-factor model) and a mean of
//! norm ‖μ‖ along a fixed random direction; users outside the ball are clipped as on
//! a device (the fraction is printed). Errors are relative to the population `Σ`
//! (Frobenius and spectral), and, for the check against the analytic prediction,
//! `‖Σ̂ − S‖_F/‖Σ‖_F` with `S` the users' own (clipped) covariance.
//!
//! **Prediction** (unit-ball units, to first order in 1/n plus the `δμδμᵀ` term that
//! a noisy mean adds at small `(1 − s)ε`): with the users' `sₖ = ‖uₖ‖²`,
//! `E‖Σ̂ − S‖²_F ≈ avgₖ V_M(sₖ)/n + 2‖μ‖²tr C + 2μᵀCμ + (tr C)² + ‖C‖²_F − X`, where
//! `V_M(s) = [p(p+1) + 2κs(p+1) + (2κ² + e₄)s²]/κ²` is one report's second-moment
//! variance (`CapMoments::second_moment_total_variance`, with the symmetric κ for the
//! split, κ₁ for the one-sided report), `C = Cov(μ̂) = (I + (κ₁ − c²)M)/(c²n)` the mean
//! report's, and `X` the covariance of `M̂` and `μ̂` when both come from the same
//! one-sided report (0 for the split): with `E[t³] = c(γ² + 2)`,
//! `Cov(yᵢyⱼ, yᵢ) = c(ũᵢδᵢⱼ + ũⱼ) + c(γ² − 1 − κ₁)ũᵢ²ũⱼ`, so
//! `X = 4/(nκ₁)·[(p + 1)‖μ‖² + (γ² − 1 − κ₁)⟨μ, avgₖ sₖuₖ⟩]`: the one report's
//! second moment and mean err in the same direction and the `μδμᵀ + δμμᵀ` terms
//! partly cancel `δM`. Against `Σ` add the sampling error `((tr Σ)² + ‖Σ‖²_F)/n`
//! (Gaussian users).

use crate::{Out, seed_of, unordered};
use anyhow::{Context, Result};
use ldpcov_client::Perturber;
use ldpcov_estimate::{
    EstimateOptions, EstimationInput, RegularisationRule, estimate, packed_to_matrix,
};
use ldpcov_lab::metrics::{relative_frobenius_error, relative_spectral_error};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_lab::sim;
use ldpcov_privacy::mechanism::rank_one::{CapMoments, RankOneParams};
use ldpcov_privacy::{Collection, ReportMechanism};
use ldpcov_proto::v1::{CollectionSpec, LocalMechanism, Moments};
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use serde_json::json;

/// `reproduce mean-cov`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Dimensions.
    #[arg(long, value_delimiter = ',', default_value = "20,100")]
    ps: Vec<usize>,
    /// Privacy levels ε of the whole collection (per user).
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2,4,8")]
    epsilons: Vec<f64>,
    /// Users per collection (every scheme gets the same n, the same users).
    #[arg(long, default_value_t = 100_000)]
    n: u64,
    /// Users at ε ≥ `--large-epsilon` (the exact sampler's rounds grow like e^ε).
    #[arg(long, default_value_t = 20_000)]
    n_large: u64,
    /// ε from which `--n-large` users are simulated.
    #[arg(long, default_value_t = 8.0)]
    large_epsilon: f64,
    /// Shares s of ε given to the symmetric report (the rest to the mean report).
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.6,0.7,0.8,0.9")]
    shares: Vec<f64>,
    /// The fixed rule's share (independent of the data), measured as its own scheme.
    #[arg(long, default_value_t = 0.75)]
    rule_share: f64,
    /// Data cases `model@‖μ‖` (model: model1 or factor3).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "model1@0,model1@0.3,model1@0.6,factor3@0.3"
    )]
    cases: Vec<String>,
    /// tr Σ of the data (unit ball: E‖x‖² = tr Σ + ‖μ‖²).
    #[arg(long, default_value_t = 0.25)]
    trace: f64,
    /// Repetitions (errors are their means; the same users across schemes and ε).
    #[arg(long, default_value_t = 2)]
    reps: usize,
}

/// How a mean-and-covariance collection's ε is used.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scheme {
    /// One one-sided report at ε (the product today).
    OneSided,
    /// A symmetric report at `s·ε` and a one-sided mean report at `(1 − s)·ε`.
    Split {
        /// s.
        share: f64,
        /// Whether this is the fixed rule's share.
        rule: bool,
    },
}

impl Scheme {
    /// The printed name.
    fn name(&self) -> String {
        match *self {
            Scheme::OneSided => "one-sided".into(),
            Scheme::Split { share, rule: false } => format!("split s={share}"),
            Scheme::Split { share, rule: true } => format!("split rule s={share}"),
        }
    }
}

/// One data case: a population covariance, its mean and the users' sampler.
struct Case {
    /// `model@‖μ‖` as given.
    label: String,
    /// ‖μ‖.
    mean_norm: f64,
    /// The population covariance Σ (unit-ball units).
    truth: DMatrix<f64>,
    /// Gaussian users with mean μ and covariance Σ.
    sampler: Sampler,
}

/// The users of one (p, case, rep): their seed and the statistics the prediction and
/// the mechanism-only error need.
struct Users {
    /// Seed of the users' stream ([`sim::per_user`]'s `seed`).
    seed: u64,
    /// How many (the first `n` of the stream).
    n: u64,
    /// Their mean `μ` (after clipping).
    mean: DVector<f64>,
    /// Their second moment `M = avg uuᵀ`.
    second: DMatrix<f64>,
    /// Their covariance `S = M − μμᵀ`.
    cov: DMatrix<f64>,
    /// `avg ‖u‖²`.
    avg_s: f64,
    /// `avg ‖u‖⁴`.
    avg_s2: f64,
    /// `avg ‖u‖²·u`.
    s_weighted_mean: DVector<f64>,
    /// `avg ‖x‖²` before clipping.
    avg_x2: f64,
    /// Fraction of users clipped.
    clipped: f64,
}

/// One measured scheme at one (p, case, rep, ε).
struct Point {
    /// `‖Σ̂ − Σ‖_F/‖Σ‖_F`.
    frobenius: f64,
    /// `‖Σ̂ − Σ‖₂/‖Σ‖₂`.
    spectral: f64,
    /// `‖Σ̂ − S‖_F/‖Σ‖_F` (the mechanism's error only).
    mechanism: f64,
    /// Predicted `‖Σ̂ − S‖_F/‖Σ‖_F`.
    predicted_mechanism: f64,
    /// Predicted `‖Σ̂ − Σ‖_F/‖Σ‖_F`.
    predicted: f64,
    /// Seconds.
    secs: f64,
}

/// A job: one scheme at one (p, case, rep, ε).
struct Job {
    /// Dimension.
    p: usize,
    /// Index of the data case (in `--cases`).
    case: usize,
    /// Repetition (selects the users).
    rep: usize,
    /// The collection's ε.
    epsilon: f64,
    /// Users.
    n: u64,
    /// One-sided or split.
    scheme: Scheme,
    /// Expected lattice draws (for scheduling the expensive jobs first).
    cost: f64,
}

/// Runs the comparison and prints the tables (or JSON rows).
pub(crate) fn run(args: &Args, out: Out) -> Result<()> {
    anyhow::ensure!(
        args.trace > 0.0 && args.trace < 1.0,
        "--trace must be in (0, 1)"
    );
    anyhow::ensure!(
        args.n > 1 && args.n_large > 1,
        "--n and --n-large must be > 1"
    );
    for &s in args.shares.iter().chain([&args.rule_share]) {
        anyhow::ensure!(s > 0.0 && s < 1.0, "share {s} must be in (0, 1)");
    }
    let reps = args.reps.max(1);
    let mut schemes = vec![Scheme::OneSided];
    schemes.extend(
        args.shares
            .iter()
            .map(|&share| Scheme::Split { share, rule: false }),
    );
    if !args.shares.contains(&args.rule_share) {
        schemes.push(Scheme::Split {
            share: args.rule_share,
            rule: true,
        });
    }
    // Cases per p, then the users of every (p, case, rep).
    let mut cases: Vec<(usize, Vec<Case>)> = Vec::new();
    for &p in &args.ps {
        let list = args
            .cases
            .iter()
            .map(|c| case(c, p, args.trace))
            .collect::<Result<Vec<_>>>()?;
        cases.push((p, list));
    }
    let mut user_keys = Vec::new();
    for (pi, (_, list)) in cases.iter().enumerate() {
        for ci in 0..list.len() {
            for rep in 0..reps {
                user_keys.push((pi, ci, rep));
            }
        }
    }
    out.text(format!(
        "# mean and covariance, rank-one: one one-sided report vs a split ε (symmetric at s·ε + one-sided mean at (1 − s)·ε); R = 1, tr Σ = {}, n = {} ({} at ε ≥ {}), mean of {reps} repetitions, raw Σ̂ (no regularisation, no PSD projection)",
        args.trace, args.n, args.n_large, args.large_epsilon
    ));
    let started = std::time::Instant::now();
    let users: Vec<Vec<Users>> = sim::parallel_reps(user_keys.len(), out.threads, |i| {
        let (pi, ci, rep) = user_keys[i];
        let (p, list) = &cases[pi];
        let seed = seed_of(&[70, *p as u64, ci as u64, rep as u64]);
        users_of(&list[ci], *p, &[args.n, args.n_large], seed)
    })
    .into_iter()
    .collect::<Result<_>>()?;
    let users_of_job = |pi: usize, job: &Job| -> Option<&Users> {
        let k = user_keys
            .iter()
            .position(|&k| k == (pi, job.case, job.rep))?;
        users[k].iter().find(|u| u.n == job.n)
    };
    out.text(format!(
        "# users drawn in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    let mut jobs = Vec::new();
    for (p, list) in &cases {
        for ci in 0..list.len() {
            for rep in 0..reps {
                for &epsilon in &args.epsilons {
                    let n = if epsilon >= args.large_epsilon {
                        args.n_large
                    } else {
                        args.n
                    };
                    for &scheme in &schemes {
                        jobs.push(Job {
                            p: *p,
                            case: ci,
                            rep,
                            epsilon,
                            n,
                            scheme,
                            cost: cost(*p, epsilon, n, scheme)?,
                        });
                    }
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[b].cost.total_cmp(&jobs[a].cost));
    let results = sim::parallel_reps(order.len(), out.threads, |k| {
        let job = &jobs[order[k]];
        let pi = cases
            .iter()
            .position(|(p, _)| *p == job.p)
            .expect("p of a job is in the grid");
        let list = &cases[pi].1;
        let u = users_of_job(pi, job).context("every job's users were drawn")?;
        run_job(job, &list[job.case], u)
    });
    let mut points: Vec<Option<Point>> = (0..jobs.len()).map(|_| None).collect();
    for (k, r) in order.iter().zip(results) {
        points[*k] = Some(r?);
    }
    let total_secs = started.elapsed().as_secs_f64();
    print_tables(
        args, out, &cases, &users, &user_keys, &jobs, &points, &schemes,
    )?;
    out.text(format!("\n# total {total_secs:.0} s"));
    Ok(())
}

/// The case `model@‖μ‖` at dimension p, Σ scaled to trace `trace`.
fn case(spec: &str, p: usize, trace: f64) -> Result<Case> {
    let (model, norm) = spec
        .split_once('@')
        .with_context(|| format!("case {spec}: expected model@mean-norm"))?;
    let mean_norm: f64 = norm
        .parse()
        .with_context(|| format!("case {spec}: mean norm {norm}"))?;
    anyhow::ensure!(
        (0.0..1.0).contains(&mean_norm),
        "case {spec}: the mean norm must be in [0, 1)"
    );
    let shape = match model {
        "model1" => Model::BandedGeometric.covariance(p),
        "factor3" => unordered::factor_model(p, 3, seed_of(&[10, 3, p as u64])),
        other => anyhow::bail!("case {spec}: unknown model {other} (model1, factor3)"),
    };
    let truth = &shape * (trace / shape.trace());
    // A fixed direction, not aligned with the variables or the leading eigenvector.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed_of(&[71, p as u64]));
    let direction = DVector::<f64>::from_fn(p, |_, _| rng.sample(StandardNormal)).normalize();
    let mean = direction * mean_norm;
    let sampler = Sampler::gaussian(&truth)?.with_mean(mean.iter().copied().collect());
    Ok(Case {
        label: spec.to_string(),
        mean_norm,
        truth,
        sampler,
    })
}

/// A rank-one simulation collection, R = 1, pure ε (δ = 0).
fn rank_one_collection(p: usize, epsilon: f64, moments: Moments) -> Result<Collection> {
    let base = sim::collection_with(p, epsilon, 1e-6, 1.0, moments, Vec::new())?;
    Ok(Collection::from_spec(&CollectionSpec {
        local_mechanism: LocalMechanism::RankOne as i32,
        delta: 0.0,
        encoding: 0,
        ..base.spec()
    })?)
}

/// The rank-one parameters of a collection.
fn params_of(c: &Collection) -> Result<&RankOneParams> {
    match c.mechanism() {
        ReportMechanism::RankOne(r) => Ok(r.params()),
        _ => anyhow::bail!("not a rank-one collection"),
    }
}

/// The collections of a scheme: (second-moment source, mean source), the same
/// collection for the one-sided scheme.
fn collections(p: usize, epsilon: f64, scheme: Scheme) -> Result<(Collection, Collection)> {
    Ok(match scheme {
        Scheme::OneSided => {
            let c = rank_one_collection(p, epsilon, Moments::MeanAndCovariance)?;
            (c.clone(), c)
        }
        Scheme::Split { share, .. } => (
            rank_one_collection(p, share * epsilon, Moments::SecondMoment)?,
            rank_one_collection(p, (1.0 - share) * epsilon, Moments::MeanAndCovariance)?,
        ),
    })
}

/// Expected lattice draws of a job: `n·(p + 1)·Σ 1/Z` over its reports.
fn cost(p: usize, epsilon: f64, n: u64, scheme: Scheme) -> Result<f64> {
    let (a, b) = collections(p, epsilon, scheme)?;
    let mut rounds = params_of(&a)?.expected_iterations();
    if scheme != Scheme::OneSided {
        rounds += params_of(&b)?.expected_iterations();
    }
    Ok(n as f64 * (p as f64 + 1.0) * rounds)
}

/// Draws the users of the stream [`sim::per_user`] draws with `seed` (the same
/// vectors, clipped at R = 1 by the product's `Perturber::clip`) and returns the
/// statistics of its first `n` for each `n` of `sizes`.
fn users_of(case: &Case, p: usize, sizes: &[u64], seed: u64) -> Result<Vec<Users>> {
    let clipper = Perturber::new(rank_one_collection(p, 1.0, Moments::SecondMoment)?);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let batch = 512usize;
    let mut block = DMatrix::<f64>::zeros(batch, p);
    let mut second = DMatrix::<f64>::zeros(p, p);
    let mut sum = DVector::<f64>::zeros(p);
    let mut s_weighted = DVector::<f64>::zeros(p);
    let (mut sum_s, mut sum_s2, mut sum_x2, mut clipped) = (0.0, 0.0, 0.0, 0u64);
    let mut filled = 0usize;
    let mut out = Vec::new();
    let last = sizes.iter().copied().max().unwrap_or(0);
    for drawn in 1..=last {
        let x = case.sampler.sample(&mut rng);
        let _ = sim::simulated_report_id(&mut rng);
        let u = clipper.clip(&x)?;
        let x2: f64 = x.iter().map(|v| v * v).sum();
        let s: f64 = u.iter().map(|v| v * v).sum();
        sum_x2 += x2;
        sum_s += s;
        sum_s2 += s * s;
        if x2 > 1.0 {
            clipped += 1;
        }
        for (i, &v) in u.iter().enumerate() {
            sum[i] += v;
            s_weighted[i] += s * v;
            block[(filled, i)] = v;
        }
        filled += 1;
        let snapshot = sizes.contains(&drawn);
        if filled == batch || snapshot {
            let rows = block.rows(0, filled);
            second.gemm_tr(1.0, &rows, &rows, 1.0);
            filled = 0;
        }
        if snapshot && !out.iter().any(|u: &Users| u.n == drawn) {
            let nf = drawn as f64;
            let mean = &sum / nf;
            let second = &second / nf;
            let cov = &second - &mean * mean.transpose();
            out.push(Users {
                seed,
                n: drawn,
                mean,
                second,
                cov,
                avg_s: sum_s / nf,
                avg_s2: sum_s2 / nf,
                s_weighted_mean: &s_weighted / nf,
                avg_x2: sum_x2 / nf,
                clipped: clipped as f64 / nf,
            });
        }
    }
    Ok(out)
}

/// Measures one job: the scheme's reports through the product path, its raw Σ̂, the
/// errors and the prediction.
fn run_job(job: &Job, case: &Case, users: &Users) -> Result<Point> {
    let started = std::time::Instant::now();
    let raw = EstimateOptions {
        rule: RegularisationRule::None,
        skip_psd_projection: true,
        ..Default::default()
    };
    let (second_c, mean_c) = collections(job.p, job.epsilon, job.scheme)?;
    let noise = |kind: u64| {
        seed_of(&[
            72,
            users.seed,
            job.epsilon.to_bits(),
            kind,
            match job.scheme {
                Scheme::OneSided => 0,
                Scheme::Split { share, .. } => share.to_bits(),
            },
        ])
    };
    let estimate_of = |c: &Collection, kind: u64| -> Result<_> {
        let acc = sim::per_user(c, &case.sampler, job.n, users.seed, noise(kind));
        Ok(estimate(&EstimationInput::from_collection(c), &acc, &raw)?)
    };
    let sigma_hat = match job.scheme {
        // The aggregator's own de-biased Σ̂ = M̂ − μ̂μ̂ᵀ + Cov(μ̂).
        Scheme::OneSided => estimate_of(&mean_c, 1)?.matrix,
        Scheme::Split { .. } => {
            let second = estimate_of(&second_c, 2)?;
            let mean = estimate_of(&mean_c, 3)?;
            let m_hat = packed_to_matrix(job.p, &second.moments.second_moment);
            let mu_hat = DVector::from_vec(
                mean.moments
                    .mean
                    .context("a mean-and-covariance estimate has a mean")?,
            );
            let (a, b) = mean_covariance(params_of(&mean_c)?.moments, job.n);
            // R = 1: unit-ball and data units coincide.
            &m_hat - &mu_hat * mu_hat.transpose() + DMatrix::identity(job.p, job.p) * a + &m_hat * b
        }
    };
    let truth_norm = case.truth.norm();
    let mse = predicted_mse(job, &second_c, &mean_c, users)?;
    let sampling = (case.truth.trace().powi(2) + truth_norm.powi(2)) / job.n as f64;
    Ok(Point {
        frobenius: relative_frobenius_error(&sigma_hat, &case.truth),
        spectral: relative_spectral_error(&sigma_hat, &case.truth),
        mechanism: (&sigma_hat - &users.cov).norm() / truth_norm,
        predicted_mechanism: mse.sqrt() / truth_norm,
        predicted: (mse + sampling).sqrt() / truth_norm,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// `(a, b)` with `Cov(μ̂) = a·I + b·M` for the mean of `n` one-sided reports with
/// moments `m`: `a = 1/(c²n)`, `b = (κ₁ − c²)/(c²n)` (the aggregator's correction).
fn mean_covariance(m: CapMoments, n: u64) -> (f64, f64) {
    let d = m.mean_scale * m.mean_scale * n as f64;
    (1.0 / d, (m.kappa - m.mean_scale * m.mean_scale) / d)
}

/// The predicted `E‖Σ̂ − S‖²_F` of a scheme on these users (module docs): the
/// second-moment report's variance, the mean's `μδμᵀ + δμμᵀ` and `δμδμᵀ − Cov(μ̂)`
/// terms and, for one report carrying both, minus their covariance `X`.
fn predicted_mse(
    job: &Job,
    second_c: &Collection,
    mean_c: &Collection,
    users: &Users,
) -> Result<f64> {
    let p = job.p as f64;
    let nf = job.n as f64;
    let sm = params_of(second_c)?.moments;
    let mean_params = params_of(mean_c)?;
    let mm = mean_params.moments;
    let k = sm.kappa;
    let second = (p * (p + 1.0)
        + 2.0 * k * (p + 1.0) * users.avg_s
        + (2.0 * k * k + sm.excess_fourth_moment) * users.avg_s2)
        / (k * k * nf);
    let (a, b) = mean_covariance(mm, job.n);
    let mu2 = users.mean.norm_squared();
    let tr_c = a * p + b * users.second.trace();
    let mu_c_mu = a * mu2 + b * (users.mean.transpose() * &users.second * &users.mean)[(0, 0)];
    let c_frob2 =
        a * a * p + 2.0 * a * b * users.second.trace() + b * b * users.second.norm_squared();
    let mean_terms = 2.0 * mu2 * tr_c + 2.0 * mu_c_mu + tr_c * tr_c + c_frob2;
    let shared = match job.scheme {
        Scheme::OneSided => {
            let k1 = mm.kappa;
            let g = mean_params.gamma;
            4.0 / (nf * k1)
                * ((p + 1.0) * mu2 + (g * g - 1.0 - k1) * users.mean.dot(&users.s_weighted_mean))
        }
        Scheme::Split { .. } => 0.0,
    };
    Ok(second + mean_terms - shared)
}

/// Means over reps of a job's fields: (Frobenius, spectral, mechanism, predicted
/// mechanism, predicted, seconds).
type Means = [f64; 6];

/// Prints the per-scheme table, the summary per (p, case, ε) and the JSON rows.
#[allow(clippy::too_many_arguments)]
fn print_tables(
    args: &Args,
    out: Out,
    cases: &[(usize, Vec<Case>)],
    users: &[Vec<Users>],
    user_keys: &[(usize, usize, usize)],
    jobs: &[Job],
    points: &[Option<Point>],
    schemes: &[Scheme],
) -> Result<()> {
    let reps = args.reps.max(1);
    let mean_of = |p: usize, ci: usize, epsilon: f64, scheme: Scheme| -> Result<(Means, u64)> {
        let mut m = [0.0; 6];
        let mut n = 0;
        for (job, point) in jobs.iter().zip(points) {
            if job.p == p && job.case == ci && job.epsilon == epsilon && job.scheme == scheme {
                let pt = point.as_ref().context("every job ran")?;
                let v = [
                    pt.frobenius,
                    pt.spectral,
                    pt.mechanism,
                    pt.predicted_mechanism,
                    pt.predicted,
                    pt.secs,
                ];
                for (acc, x) in m.iter_mut().zip(v) {
                    *acc += x / reps as f64;
                }
                n = job.n;
            }
        }
        Ok((m, n))
    };
    out.text("\n## data\n");
    out.text("| p | case | ‖μ‖ | tr Σ | E‖x‖² (measured) | clipped | ‖Σ‖_F |");
    out.text("|---|---|---|---|---|---|---|");
    for (pi, (p, list)) in cases.iter().enumerate() {
        for (ci, c) in list.iter().enumerate() {
            let (x2, clipped): (f64, f64) = user_keys
                .iter()
                .zip(users)
                .filter(|((a, b, _), _)| *a == pi && *b == ci)
                .filter_map(|(_, u)| u.iter().find(|u| u.n == args.n))
                .map(|u| (u.avg_x2 / reps as f64, u.clipped / reps as f64))
                .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
            out.text(format!(
                "| {p} | {} | {} | {} | {:.3} ({:.3}) | {:.2} % | {:.4} |",
                c.label,
                c.mean_norm,
                args.trace,
                args.trace + c.mean_norm * c.mean_norm,
                x2,
                100.0 * clipped,
                c.truth.norm()
            ));
            out.row(json!({
                "experiment": "mean-cov", "table": "data", "p": p, "case": c.label,
                "mean_norm": c.mean_norm, "trace": args.trace,
                "expected_x2": args.trace + c.mean_norm * c.mean_norm,
                "measured_x2": x2, "clipped_fraction": clipped, "truth_frobenius": c.truth.norm(),
            }));
        }
    }
    out.text("\n## every scheme\n");
    out.text("| p | case | ε | n | scheme | Frobenius / spectral vs Σ | predicted Frobenius | mechanism only: measured / predicted | vs one-sided | s/rep |");
    out.text("|---|---|---|---|---|---|---|---|---|---|");
    let mut summary = Vec::new();
    for (p, list) in cases {
        for (ci, c) in list.iter().enumerate() {
            for &epsilon in &args.epsilons {
                let (one, _) = mean_of(*p, ci, epsilon, Scheme::OneSided)?;
                let mut best: Option<(f64, f64)> = None;
                let mut rule = f64::NAN;
                for &scheme in schemes {
                    let (m, n) = mean_of(*p, ci, epsilon, scheme)?;
                    let ratio = m[0] / one[0];
                    if let Scheme::Split { share, rule: r } = scheme {
                        if best.is_none_or(|(_, b)| ratio < b) {
                            best = Some((share, ratio));
                        }
                        if r || share == args.rule_share {
                            rule = ratio;
                        }
                    }
                    out.text(format!(
                        "| {p} | {} | {epsilon} | {:.0e} | {} | {:.3} / {:.3} | {:.3} | {:.3} / {:.3} | {:.2} | {:.0} |",
                        c.label, n as f64, scheme.name(), m[0], m[1], m[4], m[2], m[3], ratio, m[5]
                    ));
                    out.row(json!({
                        "experiment": "mean-cov", "table": "scheme", "p": p, "case": c.label,
                        "mean_norm": c.mean_norm, "epsilon": epsilon, "n": n,
                        "scheme": scheme.name(),
                        "share": match scheme { Scheme::OneSided => None, Scheme::Split { share, .. } => Some(share) },
                        "rel_frobenius": m[0], "rel_spectral": m[1],
                        "mechanism_rel_frobenius": m[2],
                        "predicted_mechanism_rel_frobenius": m[3],
                        "predicted_rel_frobenius": m[4],
                        "ratio_to_one_sided": ratio, "seconds_per_rep": m[5], "reps": reps,
                    }));
                }
                let (best_share, best_ratio) = best.unwrap_or((f64::NAN, f64::NAN));
                summary.push((
                    *p,
                    c.label.clone(),
                    epsilon,
                    one[0],
                    best_share,
                    best_ratio,
                    rule,
                ));
            }
        }
    }
    out.text(format!(
        "\n## summary: split / one-sided Frobenius error (below 1: the split wins)\n\n| p | case | ε | one-sided | best s | best split / one-sided | rule s = {} / one-sided |",
        args.rule_share
    ));
    out.text("|---|---|---|---|---|---|---|");
    for (p, label, epsilon, one, share, ratio, rule) in summary {
        out.text(format!(
            "| {p} | {label} | {epsilon} | {one:.3} | {share} | {ratio:.2} | {rule:.2} |"
        ));
        out.row(json!({
            "experiment": "mean-cov", "table": "summary", "p": p, "case": label,
            "epsilon": epsilon, "one_sided_rel_frobenius": one, "best_share": share,
            "best_ratio": ratio, "rule_share": args.rule_share, "rule_ratio": rule,
        }));
    }
    Ok(())
}
