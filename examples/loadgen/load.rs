//! Load test mode (`--duration-secs`): `--clients` closed-loop unary submitters for
//! a fixed time, an HDR histogram of the submit latency and the resident memory of
//! the server (see the docs of `main.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use ldpcov::client::{AggregatorClient, DiscreteGaussianSampler, RetryPolicy};
use ldpcov::privacy::Collection;
use rand::SeedableRng;

use crate::args::Args;
use crate::report::LoadSummary;
use crate::setup::{Setup, Source, build_report};

/// Runs the load test for `secs` seconds and summarises it, with the server's report
/// count before and after.
pub(crate) async fn run(args: &Args, secs: u64, setup: &mut Setup) -> Result<LoadSummary> {
    let load = LoadRun {
        url: setup.url.clone(),
        token: args.token.clone(),
        clients: args.clients.unwrap_or(200),
        duration: Duration::from_secs(secs),
        warmup: Duration::from_secs(args.warmup_secs.unwrap_or(10)),
        seed: args.seed,
        rss_pid: match (args.server_pid, &setup.embedded) {
            (Some(pid), _) => Some(pid),
            (None, Some(_)) => Some(std::process::id()),
            (None, None) => None,
        },
    };
    let mut summary = run_load(load, setup.collection.clone(), setup.source.clone()).await?;
    summary.reports_before = setup.reports_before;
    summary.server_reports_after = setup.admin.status(&setup.id).await?.reports;
    summary.embedded_server = setup.embedded.is_some();
    Ok(summary)
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
    source: Arc<Source>,
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
        let (collection, source, counter) =
            (collection.clone(), source.clone(), accepted_so_far.clone());
        tasks.push(tokio::spawn(async move {
            let mut result = ClientResult {
                latency_us: latency_histogram()?,
                accepted: 0,
                duplicates: 0,
                errors: BTreeMap::new(),
                bytes_per_report: 0,
            };
            while Instant::now() < deadline {
                let x = source.draw(&mut lc.rng);
                // Perturbation, encoding and id: before the clock starts.
                let report = build_report(&mut lc.client, &collection, &x)?;
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
        dim: collection.dim(),
        mechanism: collection.mechanism().local_mechanism().as_str_name(),
        epsilon: collection.epsilon(),
        delta: collection.delta(),
        clip_radius: collection.clip_radius(),
        sigma: collection.sigma(),
        encoding: format!("{:?}", collection.encoding()),
        min_reports: collection.min_reports(),
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
