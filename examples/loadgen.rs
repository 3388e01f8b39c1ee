//! Load generator: simulates many users, each perturbing its own vector on "its
//! device" with the client library, and streams the reports to an aggregator over
//! gRPC. At the end it fetches the estimate and prints its error against the true
//! covariance.
//!
//! By default it starts an embedded in-memory aggregator on 127.0.0.1:0;
//! `--aggregator URL` targets a running daemon instead.
//!
//! ```text
//! cargo run --release --example loadgen                  # defaults, embedded server
//! cargo run --release --example loadgen -- --json        # last line: one JSON object
//! cargo run --release --example loadgen -- --aggregator http://127.0.0.1:50051 --users 100000
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpcov::aggregator::server::EmbeddedServer;
use ldpcov::aggregator::service::Limits;
use ldpcov::client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov::metrics::{estimate_matrix, relative_frobenius_error, relative_spectral_error};
use ldpcov::models::{Model, Sampler, Tails};
use ldpcov::proto::v1::{
    CollectionSpec, Encoding, GetEstimateRequest, NoThreshold, get_estimate_request,
};
use rand::SeedableRng;
use serde::Serialize;

#[derive(Clone, Copy, ValueEnum)]
enum DataModel {
    /// Seed 001 Model 1: σ_ij = 0.6^|i−j|.
    Model1,
    /// Seed 001 Model 2: banded 1, 0.6, 0.3.
    Model2,
    /// Seed 000's sparse model U = (Ũ + 50 I)/200.
    Sparse000,
}

#[derive(Clone, Copy, ValueEnum)]
enum WireEncoding {
    /// 4 bytes per entry, on the fine grid.
    I32,
    /// 2 bytes per entry, stochastically rounded to a coarser grid.
    I16,
    /// 1 byte per entry, stochastically rounded to a coarser grid.
    I8,
}

#[derive(Clone, Copy, ValueEnum)]
enum Distribution {
    /// Gaussian.
    Gaussian,
    /// Multivariate t with 5 degrees of freedom (seed 001's heavy tails).
    T5,
}

#[derive(Parser)]
#[command(about = "Simulate many ldpcov users against an aggregator")]
struct Args {
    /// Number of simulated users (one report each).
    #[arg(long, default_value_t = 1_000_000)]
    users: u64,
    /// Dimension p.
    #[arg(long, default_value_t = 10)]
    dim: u32,
    /// ε of each report.
    #[arg(long, default_value_t = 1.0)]
    epsilon: f64,
    /// δ of each report.
    #[arg(long, default_value_t = 1e-6)]
    delta: f64,
    /// Clip radius R (default √(2p), as in the canonical benchmark).
    #[arg(long)]
    clip_radius: Option<f64>,
    /// Data model.
    #[arg(long, value_enum, default_value_t = DataModel::Model1)]
    model: DataModel,
    /// Sparsity sr of the sparse000 model.
    #[arg(long, default_value_t = 0.2)]
    sparsity: f64,
    /// Tails of the data.
    #[arg(long, value_enum, default_value_t = Distribution::Gaussian)]
    distribution: Distribution,
    /// Wire encoding of the reports.
    #[arg(long, value_enum, default_value_t = WireEncoding::I32)]
    encoding: WireEncoding,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Reports per SubmitReports stream.
    #[arg(long, default_value_t = 1024)]
    batch: usize,
    /// Seed of the data (the privacy noise always comes from the OS).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// URL of a running aggregator (default: start one in-process).
    #[arg(long)]
    aggregator: Option<String>,
    /// Collection id (default: loadgen-<seed>-<dim>).
    #[arg(long)]
    collection: Option<String>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Bearer token for a guarded aggregator (the admin token: loadgen creates the
    /// collection and submits). Default: none.
    #[arg(long, env = "LDPCOV_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Serialize)]
struct Summary {
    users: u64,
    accepted: u64,
    duplicates: u64,
    dim: u32,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
    sigma: f64,
    sensitivity: f64,
    entry_noise_sd: f64,
    model: String,
    threshold: f64,
    threshold_rule: String,
    surviving_entries: u64,
    clamped_eigenvalues: u32,
    rel_spectral_error: f64,
    rel_frobenius_error: f64,
    rel_spectral_error_no_threshold: f64,
    rel_frobenius_error_no_threshold: f64,
    predicted_rel_spectral_noise: f64,
    elapsed_sec: f64,
    reports_per_sec: f64,
    bytes_per_report: usize,
    embedded_server: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.users == 0 || args.concurrency == 0 || args.batch == 0 {
        bail!("--users, --concurrency and --batch must be at least 1");
    }
    let p = args.dim as usize;
    let clip_radius = args.clip_radius.unwrap_or_else(|| (2.0 * p as f64).sqrt());
    let model = match args.model {
        DataModel::Model1 => Model::BandedGeometric,
        DataModel::Model2 => Model::Tridiagonal2,
        DataModel::Sparse000 => Model::SparseSeed000 {
            sparsity: args.sparsity,
            seed: args.seed,
        },
    };
    let scale = model.covariance(p);
    let (tails, truth) = match args.distribution {
        Distribution::Gaussian => (Tails::Gaussian, scale.clone()),
        // The covariance of a t_ν vector with scale Σ is Σ·ν/(ν−2).
        Distribution::T5 => (Tails::StudentT { nu: 5.0 }, &scale * (5.0 / 3.0)),
    };
    let sampler = Arc::new(Sampler::new(&scale, tails).context("data model")?);

    let embedded = match &args.aggregator {
        Some(_) => None,
        None => Some(EmbeddedServer::start(Limits::default()).await?),
    };
    let url = match (&args.aggregator, &embedded) {
        (Some(u), _) => u.clone(),
        (None, Some(e)) => e.url(),
        (None, None) => unreachable!("embedded server started above"),
    };
    let mut admin = AggregatorClient::connect(url.clone()).await?;
    if let Some(token) = &args.token {
        admin = admin.with_token(token.clone())?;
    }
    let id = args
        .collection
        .clone()
        .unwrap_or_else(|| format!("loadgen-{}-{}", args.seed, args.dim));
    let spec = CollectionSpec {
        collection_id: id.clone(),
        dim: args.dim,
        epsilon: args.epsilon,
        delta: args.delta,
        clip_radius,
        min_reports: args.users.min(1000),
        encoding: match args.encoding {
            WireEncoding::I32 => Encoding::I32Le,
            WireEncoding::I16 => Encoding::I16Le,
            WireEncoding::I8 => Encoding::I8,
        } as i32,
    };
    // Reuse an existing collection of that id (say, created with the admin CLI).
    let collection = match admin.collection(&id).await {
        Ok(existing) => existing,
        Err(e)
            if e.status()
                .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
        {
            admin.create_collection(spec).await?;
            admin.collection(&id).await?
        }
        Err(e) => return Err(e.into()),
    };
    if collection.dim != p {
        bail!(
            "collection {id} has dimension {}, not --dim {p}",
            collection.dim
        );
    }
    let clip_radius = collection.clip_radius;
    let already = admin.status(&id).await?.reports;

    let bar = if args.json {
        ProgressBar::with_draw_target(Some(args.users), ProgressDrawTarget::hidden())
    } else {
        ProgressBar::new(args.users)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} reports  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );

    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let share = args.users / args.concurrency as u64
            + u64::from((w as u64) < args.users % args.concurrency as u64);
        let (sampler, collection, url, bar) = (
            sampler.clone(),
            collection.clone(),
            url.clone(),
            bar.clone(),
        );
        let (batch, seed, token) = (args.batch, args.seed, args.token.clone());
        workers.push(tokio::spawn(async move {
            let mut client = AggregatorClient::connect(url)
                .await?
                .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_os_rng()?));
            if let Some(token) = token {
                client = client.with_token(token)?;
            }
            let mut rng = rand::rngs::StdRng::seed_from_u64(
                seed.wrapping_mul(1_000_003).wrapping_add(w as u64),
            );
            let (mut accepted, mut duplicates, mut bytes) = (0u64, 0u64, 0usize);
            let mut left = share;
            while left > 0 {
                let n = left.min(batch as u64) as usize;
                let mut reports = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = sampler.sample(&mut rng);
                    let report = client.prepare_report(&collection, &x)?;
                    bytes = report.payload.len();
                    reports.push(report);
                }
                let r = client.submit_stream(reports).await?;
                accepted += r.accepted;
                duplicates += r.duplicates;
                bar.inc(n as u64);
                left -= n as u64;
            }
            anyhow::Ok((accepted, duplicates, bytes))
        }));
    }
    let (mut accepted, mut duplicates, mut bytes_per_report) = (0u64, 0u64, 0usize);
    for w in workers {
        let (a, d, b) = w.await.context("worker panicked")??;
        accepted += a;
        duplicates += d;
        bytes_per_report = bytes_per_report.max(b);
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();

    let fetch = |rule| GetEstimateRequest {
        collection_id: id.clone(),
        threshold: Some(rule),
        skip_psd_projection: false,
        ..Default::default()
    };
    // The server's default rule (K-fold cross-validation) is the headline.
    let est = admin
        .estimate(GetEstimateRequest {
            collection_id: id.clone(),
            ..Default::default()
        })
        .await?;
    let raw = admin
        .estimate(fetch(get_estimate_request::Threshold::None(NoThreshold {})))
        .await?;
    let (m, m_raw) = (estimate_matrix(&est), estimate_matrix(&raw));
    // ‖W‖₂ of a p×p symmetric noise matrix with i.i.d. N(0, s²) entries is about 2√p·s.
    let predicted = 2.0 * (p as f64).sqrt() * est.entry_noise_sd
        / ldpcov::metrics::spectral_norm_symmetric(&truth);
    let summary = Summary {
        users: args.users,
        accepted,
        duplicates,
        dim: args.dim,
        epsilon: collection.epsilon,
        delta: collection.delta,
        clip_radius,
        sigma: collection.sigma,
        sensitivity: collection.sensitivity,
        entry_noise_sd: est.entry_noise_sd,
        model: model.name(),
        threshold: est.threshold,
        threshold_rule: est.threshold_rule.clone(),
        surviving_entries: est.surviving_entries,
        clamped_eigenvalues: est.clamped_eigenvalues,
        rel_spectral_error: relative_spectral_error(&m, &truth),
        rel_frobenius_error: relative_frobenius_error(&m, &truth),
        rel_spectral_error_no_threshold: relative_spectral_error(&m_raw, &truth),
        rel_frobenius_error_no_threshold: relative_frobenius_error(&m_raw, &truth),
        predicted_rel_spectral_noise: predicted,
        elapsed_sec: elapsed.as_secs_f64(),
        reports_per_sec: args.users as f64 / elapsed.as_secs_f64().max(1e-9),
        bytes_per_report,
        embedded_server: embedded.is_some(),
    };
    if already > 0 {
        eprintln!("note: collection {id} already held {already} reports before this run");
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_human(&summary, elapsed);
    }
    if let Some(server) = embedded {
        server.shutdown().await?;
    }
    Ok(())
}

fn print_human(s: &Summary, elapsed: Duration) {
    println!(
        "ldpcov loadgen: {} users, p = {}, {} data",
        s.users, s.dim, s.model
    );
    println!(
        "  privacy per report: ε = {}, δ = {:e}, R = {:.3}, Δ = {:.6}, σ = {:.4} (analytic Gaussian)",
        s.epsilon, s.delta, s.clip_radius, s.sensitivity, s.sigma
    );
    println!(
        "  sent {} reports in {:.2} s: {:.0} reports/s, {} payload bytes each ({} accepted, {} duplicates)",
        s.users,
        elapsed.as_secs_f64(),
        s.reports_per_sec,
        s.bytes_per_report,
        s.accepted,
        s.duplicates
    );
    println!(
        "  noise sd of each averaged entry R²σ/√n = {:.4}; predicted relative spectral noise ≈ {:.3}",
        s.entry_noise_sd, s.predicted_rel_spectral_noise
    );
    println!(
        "  {}: threshold {:.4}, {} entries kept, {} eigenvalues clamped",
        s.threshold_rule, s.threshold, s.surviving_entries, s.clamped_eigenvalues
    );
    println!(
        "  relative error vs the true covariance: spectral {:.4}, Frobenius {:.4}",
        s.rel_spectral_error, s.rel_frobenius_error
    );
    println!(
        "  (no threshold + PSD: spectral {:.4}, Frobenius {:.4})",
        s.rel_spectral_error_no_threshold, s.rel_frobenius_error_no_threshold
    );
}
