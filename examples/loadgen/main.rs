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
//!
//! # Load test mode (`--duration-secs`)
//!
//! `--clients N --duration-secs S` replaces the fixed number of users by a
//! time-bounded closed loop: N independent clients, each an [`AggregatorClient`] with
//! its own connection, each repeatedly building one report (its own data, real
//! perturbation with the client's default exact discrete Gaussian sampler) and sending
//! it with a unary `SubmitReport`, until S seconds have passed. Retries are off, so
//! every failed call is counted as an error (by gRPC status code). The latency of every
//! `SubmitReport` call is recorded in an HDR histogram (1 µs to 60 s, 3 significant
//! digits); it times the network call only — from sending the prebuilt report to
//! its acknowledgement — not the perturbation. With the embedded server the clients
//! and the server share the process and its cores, so it includes their scheduling.
//!
//! Resident memory (VmRSS from `/proc/PID/status`, Linux) is sampled once per second:
//! of the daemon given by `--server-pid PID` (with `--aggregator`), or of this process
//! with the embedded server (which then includes the clients). It is reported at the
//! start, after `--warmup-secs` (default 10), at the end and as the maximum, with the
//! growth from warm-up to end per million accepted reports. No estimate is fetched.
//!
//! ```text
//! target/release/ldpcov-aggregator serve --data-dir /tmp/ldpcov-load &
//! cargo run --release --example loadgen -- --aggregator http://127.0.0.1:50051 \
//!     --server-pid $! --clients 200 --duration-secs 60 --json
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpcov::aggregator::server::EmbeddedServer;
use ldpcov::aggregator::service::Limits;
use ldpcov::client::{AggregatorClient, DiscreteGaussianSampler, RetryPolicy};
use ldpcov::metrics::{estimate_matrix, relative_frobenius_error, relative_spectral_error};
use ldpcov::models::{Model, Sampler, Tails};
use ldpcov::proto::Collection;
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
    /// Load test: run for this many seconds instead of a fixed number of users
    /// (closed loop of --clients unary submitters; see the file's docs).
    #[arg(long, conflicts_with_all = ["users", "concurrency", "batch"])]
    duration_secs: Option<u64>,
    /// Load test: concurrent clients, each with its own connection [default: 200].
    #[arg(long, requires = "duration_secs")]
    clients: Option<usize>,
    /// Load test: resident memory is also reported after this many seconds
    /// [default: 10].
    #[arg(long, requires = "duration_secs")]
    warmup_secs: Option<u64>,
    /// Load test: process id of the daemon at --aggregator, whose resident memory
    /// is sampled (default: this process, with the embedded server).
    #[arg(long, requires_all = ["duration_secs", "aggregator"])]
    server_pid: Option<u32>,
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
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    if args.users == 0 || args.concurrency == 0 || args.batch == 0 || args.clients == Some(0) {
        bail!("--users, --concurrency, --batch and --clients must be at least 1");
    }
    if args.duration_secs == Some(0) {
        bail!("--duration-secs must be at least 1");
    }
    // clap drops `requires` when the required flag conflicts with one given (--users).
    if args.duration_secs.is_none()
        && (args.clients.is_some() || args.warmup_secs.is_some() || args.server_pid.is_some())
    {
        bail!("--clients, --warmup-secs and --server-pid need --duration-secs (load test mode)");
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
        min_reports: match args.duration_secs {
            Some(_) => 1000,
            None => args.users.min(1000),
        },
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
    if already > 0 {
        tracing::warn!(collection = %id, reports = already, "the collection already held reports before this run");
    }

    if let Some(secs) = args.duration_secs {
        let load = LoadRun {
            url: url.clone(),
            token: args.token.clone(),
            clients: args.clients.unwrap_or(200),
            duration: Duration::from_secs(secs),
            warmup: Duration::from_secs(args.warmup_secs.unwrap_or(10)),
            seed: args.seed,
            rss_pid: match (args.server_pid, &embedded) {
                (Some(pid), _) => Some(pid),
                (None, Some(_)) => Some(std::process::id()),
                (None, None) => None,
            },
        };
        let mut summary = run_load(load, collection, sampler).await?;
        summary.reports_before = already;
        summary.server_reports_after = admin.status(&id).await?.reports;
        summary.embedded_server = embedded.is_some();
        if args.json {
            println!("{}", serde_json::to_string(&summary)?);
        } else {
            print_load(&summary);
        }
        if let Some(server) = embedded {
            server.shutdown().await?;
        }
        if !summary.errors.is_empty() {
            bail!("{} submit calls failed", summary.error_count);
        }
        return Ok(());
    }

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

/// What the load test needs besides the collection and the data sampler.
struct LoadRun {
    url: String,
    token: Option<String>,
    clients: usize,
    duration: Duration,
    warmup: Duration,
    seed: u64,
    /// Whose resident memory to sample (None: not sampled).
    rss_pid: Option<u32>,
}

/// The load test's result (`--json` prints it as one object).
#[derive(Serialize)]
struct LoadSummary {
    mode: &'static str,
    clients: usize,
    duration_sec: f64,
    elapsed_sec: f64,
    dim: usize,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
    sigma: f64,
    encoding: String,
    min_reports: u64,
    noise_sampler: &'static str,
    bytes_per_report: usize,
    /// Submit calls made (accepted + duplicates + errors).
    calls: u64,
    accepted: u64,
    duplicates: u64,
    error_count: u64,
    /// Errors by gRPC status code (`Other` for failures without a status).
    errors: BTreeMap<String, u64>,
    reports_per_sec: f64,
    /// Latency of the SubmitReport call alone (not the perturbation), ms.
    latency_ms_mean: f64,
    latency_ms_p50: f64,
    latency_ms_p90: f64,
    latency_ms_p99: f64,
    latency_ms_p999: f64,
    latency_ms_max: f64,
    /// Process whose VmRSS was sampled (None: not sampled).
    rss_pid: Option<u32>,
    rss_mib_start: Option<f64>,
    rss_mib_after_warmup: Option<f64>,
    rss_mib_end: Option<f64>,
    rss_mib_max: Option<f64>,
    warmup_sec: f64,
    /// Accepted reports at the warm-up sample.
    reports_at_warmup: u64,
    /// (rss_end − rss_after_warmup) per million reports accepted in between, MiB.
    rss_growth_mib_per_million_reports: Option<f64>,
    /// (seconds since start, VmRSS MiB, accepted reports so far), once per second.
    rss_samples: Vec<(f64, f64, u64)>,
    reports_before: u64,
    server_reports_after: u64,
    embedded_server: bool,
}

/// Resident set size of process `pid` in KiB (`VmRSS` in `/proc/PID/status`).
fn vm_rss_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .with_context(|| format!("no VmRSS line in {path}"))?;
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("unreadable VmRSS line in {path}: {line:?}"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// One closed-loop client: its own connection, its own data stream, no retries.
struct LoadClient {
    client: AggregatorClient,
    rng: rand::rngs::StdRng,
}

/// What one client measured.
struct ClientResult {
    latency_us: Histogram<u64>,
    accepted: u64,
    duplicates: u64,
    errors: BTreeMap<String, u64>,
    bytes_per_report: usize,
}

fn latency_histogram() -> Result<Histogram<u64>> {
    // 1 µs to 60 s in microseconds, 3 significant digits; slower calls saturate at 60 s.
    Histogram::new_with_bounds(1, 60_000_000, 3).context("latency histogram")
}

async fn run_load(
    run: LoadRun,
    collection: Collection,
    sampler: Arc<Sampler>,
) -> Result<LoadSummary> {
    // Connect every client first, so the clock starts with all of them ready.
    let mut clients = Vec::with_capacity(run.clients);
    for c in 0..run.clients {
        let mut client = AggregatorClient::connect(run.url.clone())
            .await
            .with_context(|| format!("connecting client {c} to {}", run.url))?
            .with_retry(RetryPolicy::no_retries())
            .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_os_rng()?));
        if let Some(token) = &run.token {
            client = client.with_token(token.clone())?;
        }
        let rng = rand::rngs::StdRng::seed_from_u64(
            run.seed.wrapping_mul(1_000_003).wrapping_add(c as u64),
        );
        clients.push(LoadClient { client, rng });
    }
    let noise_sampler = clients
        .first()
        .map(|c| c.client.noise_sampler_kind())
        .unwrap_or("none");
    let rss = |pid: Option<u32>| -> Option<u64> {
        let pid = pid?;
        match vm_rss_kib(pid) {
            Ok(kib) => Some(kib),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot sample resident memory");
                None
            }
        }
    };
    let rss_start = rss(run.rss_pid);
    tracing::info!(
        clients = run.clients,
        duration_secs = run.duration.as_secs(),
        rss_pid = run.rss_pid,
        rss_mib = rss_start.map(mib),
        "load test starting"
    );

    let accepted_so_far = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + run.duration;
    let mut tasks = Vec::with_capacity(clients.len());
    for mut lc in clients {
        let (collection, sampler, counter) =
            (collection.clone(), sampler.clone(), accepted_so_far.clone());
        tasks.push(tokio::spawn(async move {
            let mut result = ClientResult {
                latency_us: latency_histogram()?,
                accepted: 0,
                duplicates: 0,
                errors: BTreeMap::new(),
                bytes_per_report: 0,
            };
            while Instant::now() < deadline {
                let x = sampler.sample(&mut lc.rng);
                // Perturbation, encoding and id: before the clock starts.
                let report = lc.client.prepare_report(&collection, &x)?;
                result.bytes_per_report = report.payload.len();
                let sent = Instant::now();
                let outcome = lc.client.submit_report(report).await;
                let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                result.latency_us.saturating_record(micros.max(1));
                match outcome {
                    Ok(o) if o.duplicate => result.duplicates += 1,
                    Ok(_) => {
                        result.accepted += 1;
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        let code = e
                            .status()
                            .map(|s| format!("{:?}", s.code()))
                            .unwrap_or_else(|| "Other".to_string());
                        if result.errors.values().sum::<u64>() == 0 {
                            tracing::warn!(error = %e, "submit failed (first error of this client)");
                        }
                        *result.errors.entry(code).or_default() += 1;
                    }
                }
            }
            anyhow::Ok(result)
        }));
    }

    // Sample resident memory once per second until every client is done.
    let mut samples: Vec<(f64, f64, u64)> = Vec::new();
    let (mut rss_warm, mut reports_at_warmup) = (None, 0u64);
    let mut rss_max = rss_start;
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(started) + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_log = started;
    let mut all_done = std::pin::pin!(futures::future::join_all(tasks));
    let results = loop {
        tokio::select! {
            results = &mut all_done => break results,
            _ = tick.tick() => {}
        }
        let t = started.elapsed();
        let done = accepted_so_far.load(Ordering::Relaxed);
        if let Some(kib) = rss(run.rss_pid) {
            samples.push((t.as_secs_f64(), mib(kib), done));
            rss_max = rss_max.max(Some(kib));
            if rss_warm.is_none() && t >= run.warmup {
                rss_warm = Some(kib);
                reports_at_warmup = done;
            }
        }
        if last_log.elapsed() >= Duration::from_secs(10) {
            last_log = Instant::now();
            tracing::info!(
                elapsed_secs = t.as_secs(),
                accepted = done,
                reports_per_sec = (done as f64 / t.as_secs_f64()).round(),
                rss_mib = samples.last().map(|s| s.1),
                "load test running"
            );
        }
    };
    let elapsed = started.elapsed();
    let mut latency = latency_histogram()?;
    let (mut accepted, mut duplicates, mut bytes_per_report) = (0u64, 0u64, 0usize);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for result in results {
        let r = result.context("load client panicked")??;
        latency
            .add(&r.latency_us)
            .context("merging latency histograms")?;
        accepted += r.accepted;
        duplicates += r.duplicates;
        bytes_per_report = bytes_per_report.max(r.bytes_per_report);
        for (code, n) in r.errors {
            *errors.entry(code).or_default() += n;
        }
    }
    let rss_end = rss(run.rss_pid);
    rss_max = rss_max.max(rss_end);
    if let Some(kib) = rss_end {
        samples.push((elapsed.as_secs_f64(), mib(kib), accepted));
    }
    if rss_warm.is_none() && run.rss_pid.is_some() {
        tracing::warn!("the run ended before the warm-up did: no after-warm-up memory figure");
    }
    let growth = match (rss_warm, rss_end) {
        (Some(w), Some(e)) if accepted > reports_at_warmup => {
            Some((e as f64 - w as f64) / 1024.0 / ((accepted - reports_at_warmup) as f64 / 1e6))
        }
        _ => None,
    };
    let ms = |us: u64| us as f64 / 1000.0;
    let error_count = errors.values().sum();
    Ok(LoadSummary {
        mode: "load",
        clients: run.clients,
        duration_sec: run.duration.as_secs_f64(),
        elapsed_sec: elapsed.as_secs_f64(),
        dim: collection.dim,
        epsilon: collection.epsilon,
        delta: collection.delta,
        clip_radius: collection.clip_radius,
        sigma: collection.sigma,
        encoding: format!("{:?}", collection.encoding),
        min_reports: collection.min_reports,
        noise_sampler,
        bytes_per_report,
        calls: accepted + duplicates + error_count,
        accepted,
        duplicates,
        error_count,
        errors,
        reports_per_sec: accepted as f64 / elapsed.as_secs_f64().max(1e-9),
        latency_ms_mean: latency.mean() / 1000.0,
        latency_ms_p50: ms(latency.value_at_quantile(0.50)),
        latency_ms_p90: ms(latency.value_at_quantile(0.90)),
        latency_ms_p99: ms(latency.value_at_quantile(0.99)),
        latency_ms_p999: ms(latency.value_at_quantile(0.999)),
        latency_ms_max: ms(latency.max()),
        rss_pid: run.rss_pid,
        rss_mib_start: rss_start.map(mib),
        rss_mib_after_warmup: rss_warm.map(mib),
        rss_mib_end: rss_end.map(mib),
        rss_mib_max: rss_max.map(mib),
        warmup_sec: run.warmup.as_secs_f64(),
        reports_at_warmup,
        rss_growth_mib_per_million_reports: growth,
        rss_samples: samples,
        reports_before: 0,
        server_reports_after: 0,
        embedded_server: false,
    })
}

fn print_load(s: &LoadSummary) {
    let opt = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.1}"));
    println!(
        "ldpcov loadgen, load test: {} clients (unary SubmitReport, one connection each) for {:.0} s, p = {}, {}, ε = {}, δ = {:e}, {} noise",
        s.clients, s.duration_sec, s.dim, s.encoding, s.epsilon, s.delta, s.noise_sampler
    );
    println!(
        "  {} accepted, {} duplicates, {} errors {:?} in {:.1} s: {:.0} reports/s ({} payload bytes each)",
        s.accepted,
        s.duplicates,
        s.error_count,
        s.errors,
        s.elapsed_sec,
        s.reports_per_sec,
        s.bytes_per_report
    );
    println!(
        "  submit latency (network call only), ms: mean {:.2}, p50 {:.2}, p90 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2}",
        s.latency_ms_mean,
        s.latency_ms_p50,
        s.latency_ms_p90,
        s.latency_ms_p99,
        s.latency_ms_p999,
        s.latency_ms_max
    );
    let whose = match (s.rss_pid, s.embedded_server) {
        (None, _) => "not sampled (pass --server-pid)".to_string(),
        (Some(pid), true) => format!("this process {pid}: embedded server and clients"),
        (Some(pid), false) => format!("daemon pid {pid}"),
    };
    println!(
        "  resident memory ({whose}), MiB: start {}, after {:.0} s warm-up {}, end {}, max {}; growth after warm-up {} MiB per million reports",
        opt(s.rss_mib_start),
        s.warmup_sec,
        opt(s.rss_mib_after_warmup),
        opt(s.rss_mib_end),
        opt(s.rss_mib_max),
        s.rss_growth_mib_per_million_reports
            .map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
    );
    println!(
        "  collection: {} reports before, {} after (server count)",
        s.reports_before, s.server_reports_after
    );
}
