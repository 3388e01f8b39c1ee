//! Ingest benchmark of the server alone: how many reports (and payload bytes) per
//! second one daemon, or several on one PostgreSQL database, takes in, next to what
//! loopback TCP moves on the same machine in the same run.
//!
//! ```text
//! cargo bench -p ldpcov-system-tests --bench ingest -- --json
//! cargo bench -p ldpcov-system-tests --bench ingest -- --ps 1000 --encodings i32 --stores memory
//! ```
//!
//! For every (p, encoding, store) case it starts the real daemon binary
//! (`ldpcov-aggregator serve`: `--memory`, `--data-dir` on a temporary directory, or
//! `--store postgres://…` on a throwaway cluster, with 1 or 3 replicas), creates a
//! collection, and builds every report BEFORE the clock starts (a pool of distinct
//! perturbed payloads from the simulation sampler — its values only matter to the
//! server through their size, not their privacy — reused under distinct report ids).
//! The clock then runs while `--connections` connections, spread over the replicas,
//! each send their share as `SubmitReports` streams of `--stream-len` reports, until
//! the last stream is acknowledged; the daemon's count is then checked to be exactly
//! the number sent. The daemons' CPU time (user + system, from `/proc/PID/stat`) over
//! the same interval gives the CPU per report. The bytes the store wrote from the start
//! of the clock until what the case sent is folded (redb: the daemon's `write_bytes`
//! from `/proc/PID/io`, read once it stayed put for 12 s; PostgreSQL: the WAL written,
//! from `pg_current_wal_lsn()`, read once no delta or appended row is left) give the
//! bytes written per report. The loopback reference streams the same
//! number of bytes over the same number of plain TCP connections inside this process.
//!
//! Client and server share the machine's cores, so the figures bound the server from
//! below; the CPU per report is the server's own cost.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use ldpcov_client::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_client::proto::v1::{
    CollectionSpec, CreateCollectionRequest, Encoding, GetStatusRequest, LocalMechanism, Moments,
    Report,
};
use ldpcov_client::{Collection, FloatGaussianNotPrivate, Perturber, ReportId};
use ldpcov_pg_cluster::PgCluster;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

const DAEMON: &str = env!("CARGO_BIN_EXE_system-aggregator");

/// Command line.
#[derive(Parser, Debug, Clone)]
#[command(about = "Ingest benchmark of the aggregator daemon alone")]
pub(crate) struct Args {
    /// Dimensions p.
    #[arg(long, value_delimiter = ',', default_value = "100,1000")]
    pub(crate) ps: Vec<usize>,
    /// Wire encodings of the Gaussian report (i32, i16, i8), or `rank-one` for the
    /// rank-one report (p i16).
    #[arg(long, value_delimiter = ',', default_value = "i32,i8")]
    pub(crate) encodings: Vec<String>,
    /// Stores: memory, redb, pg1 (one replica on PostgreSQL), pg3 (three replicas).
    #[arg(long, value_delimiter = ',', default_value = "memory,redb,pg1,pg3")]
    pub(crate) stores: Vec<String>,
    /// Payload bytes sent per case, in MiB (the number of reports follows).
    #[arg(long, default_value_t = 256)]
    pub(crate) payload_mib: u64,
    /// At most this many reports per case.
    #[arg(long, default_value_t = 40_000)]
    pub(crate) max_reports: usize,
    /// Concurrent connections (spread round-robin over the replicas).
    #[arg(long, default_value_t = 4)]
    pub(crate) connections: usize,
    /// Reports per `SubmitReports` stream.
    #[arg(long, default_value_t = 32)]
    pub(crate) stream_len: usize,
    /// One JSON object per case instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// A few seconds in all: p = 8, memory and redb, 2 MiB (a smoke test).
    #[arg(long)]
    pub(crate) quick: bool,
    /// Run the daemon under this command (e.g. `valgrind --tool=callgrind`), split at
    /// spaces: for profiling the server's hot path.
    #[arg(long)]
    pub(crate) daemon_prefix: Option<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    pub(crate) bench: bool,
}

impl Args {
    /// The smoke-test configuration (used by `tests/system/ingest_bench.rs`).
    #[allow(dead_code)]
    pub(crate) fn quick() -> Args {
        let mut args = Args::parse_from(["ingest", "--quick"]);
        args.apply_quick();
        args
    }

    fn apply_quick(&mut self) {
        if self.quick {
            self.ps = vec![8];
            self.stores = vec!["memory".into(), "redb".into()];
            self.payload_mib = 2;
            self.max_reports = 2_000;
        }
    }
}

/// Where the daemons keep their sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreKind {
    Memory,
    Redb,
    Postgres { replicas: usize },
}

impl StoreKind {
    fn parse(s: &str) -> Result<StoreKind> {
        Ok(match s {
            "memory" => StoreKind::Memory,
            "redb" => StoreKind::Redb,
            "pg1" => StoreKind::Postgres { replicas: 1 },
            "pg3" => StoreKind::Postgres { replicas: 3 },
            other => bail!("unknown store {other:?} (memory, redb, pg1, pg3)"),
        })
    }

    fn name(self) -> String {
        match self {
            StoreKind::Memory => "memory".into(),
            StoreKind::Redb => "redb".into(),
            StoreKind::Postgres { replicas } => format!("postgres×{replicas}"),
        }
    }
}

/// What the reports of a case are: a Gaussian report in an encoding, or the rank-one
/// report (`p` i16).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    /// The (svec) Gaussian report in this encoding.
    Gaussian(Encoding),
    /// The rank-one report.
    RankOne,
}

impl std::fmt::Display for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wire::Gaussian(e) => write!(f, "{e:?}"),
            Wire::RankOne => write!(f, "RankOne"),
        }
    }
}

fn parse_encoding(s: &str) -> Result<Wire> {
    Ok(match s {
        "i32" => Wire::Gaussian(Encoding::I32Le),
        "i16" => Wire::Gaussian(Encoding::I16Le),
        "i8" => Wire::Gaussian(Encoding::I8),
        "rank-one" => Wire::RankOne,
        other => bail!("unknown encoding {other:?} (i32, i16, i8, rank-one)"),
    })
}

/// One measured case.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CaseResult {
    /// Dimension.
    pub(crate) p: usize,
    /// Wire encoding.
    pub(crate) encoding: String,
    /// Store (and replicas).
    pub(crate) store: String,
    /// Reports sent (and counted).
    pub(crate) reports: usize,
    /// Payload bytes sent.
    pub(crate) payload_bytes: u64,
    /// Wall time from the first send to the last acknowledgement.
    pub(crate) seconds: f64,
    /// Reports per second.
    pub(crate) reports_per_s: f64,
    /// Payload bytes per second.
    pub(crate) payload_bytes_per_s: f64,
    /// Loopback TCP bytes per second measured just before (same bytes, connections).
    pub(crate) loopback_bytes_per_s: f64,
    /// `payload_bytes_per_s / loopback_bytes_per_s`.
    pub(crate) ratio_to_loopback: f64,
    /// The daemons' CPU seconds (user + system) per report.
    pub(crate) daemon_cpu_s_per_report: f64,
    /// Connections used.
    pub(crate) connections: usize,
    /// PostgreSQL only: the database's size after the case (`pg_database_size`).
    pub(crate) database_bytes: Option<u64>,
    /// Bytes the store wrote per report, from the start of the clock until the case's
    /// reports were folded: redb, the daemon's `write_bytes` (`/proc/PID/io`);
    /// PostgreSQL, the WAL written (`pg_current_wal_lsn()`); `None` for the memory
    /// store.
    pub(crate) written_bytes_per_report: Option<f64>,
}

/// A running daemon, killed when dropped.
struct Daemon {
    child: Child,
    url: String,
}

impl Daemon {
    fn start(store_flags: &[String], prefix: Option<&str>) -> Result<Daemon> {
        let mut command = match prefix {
            Some(prefix) => {
                let mut words = prefix.split_whitespace();
                let mut c = Command::new(words.next().context("empty --daemon-prefix")?);
                c.args(words).arg(DAEMON);
                c
            }
            None => Command::new(DAEMON),
        };
        let mut child = command
            // The address is announced at info level.
            .args(["--log", "info", "serve", "--listen", "127.0.0.1:0"])
            .args(store_flags)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {DAEMON}"))?;
        let stderr = child.stderr.take().context("daemon stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("ldpcov aggregator listening")
                    && let Some(addr) = line
                        .split_whitespace()
                        .find_map(|f| f.strip_prefix("addr="))
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(addr) => Ok(Daemon {
                child,
                url: format!("http://{addr}"),
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow!("the daemon did not announce its address"))
            }
        }
    }

    /// Bytes this process caused to be written to storage so far (`write_bytes` of
    /// `/proc/PID/io`).
    fn written_bytes(&self) -> Result<u64> {
        let path = format!("/proc/{}/io", self.child.id());
        let io = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        io.lines()
            .find_map(|line| line.strip_prefix("write_bytes:"))
            .context("no write_bytes in /proc/PID/io")?
            .trim()
            .parse()
            .context("write_bytes")
    }

    /// User + system CPU seconds so far.
    fn cpu_seconds(&self, tick: f64) -> Result<f64> {
        let path = format!("/proc/{}/stat", self.child.id());
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .context("stat format")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the file: 12 and 13 after ')'.
        let ticks: f64 = fields
            .get(11..13)
            .context("stat fields")?
            .iter()
            .map(|f| f.parse::<f64>())
            .sum::<Result<f64, _>>()?;
        Ok(ticks / tick)
    }
}

impl Drop for Daemon {
    /// SIGTERM first (a profiler wrapping the daemon then writes its output), SIGKILL
    /// after 60 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "TERM"])
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Clock ticks per second (`getconf CLK_TCK`).
fn clock_tick() -> Result<f64> {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("getconf CLK_TCK")?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// Bytes per second of `bytes` sent over `connections` loopback TCP connections
/// (1 MiB writes; the reader threads discard what they read).
fn loopback(bytes: u64, connections: usize) -> Result<f64> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let per = bytes / connections as u64;
    let readers = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut threads = Vec::new();
        for _ in 0..connections {
            let (mut sock, _) = listener.accept()?;
            threads.push(std::thread::spawn(move || -> std::io::Result<u64> {
                let mut buf = vec![0u8; 1 << 20];
                let mut total = 0u64;
                loop {
                    let n = sock.read(&mut buf)?;
                    if n == 0 {
                        return Ok(total);
                    }
                    total += n as u64;
                }
            }));
        }
        let mut total = 0;
        for t in threads {
            total += t
                .join()
                .map_err(|_| std::io::Error::other("reader panicked"))??;
        }
        Ok(total)
    });
    let started = Instant::now();
    let writers: Vec<_> = (0..connections)
        .map(|_| {
            std::thread::spawn(move || -> std::io::Result<()> {
                let mut sock = std::net::TcpStream::connect(addr)?;
                let chunk = vec![7u8; 1 << 20];
                let mut left = per;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    sock.write_all(&chunk[..n])?;
                    left -= n as u64;
                }
                sock.shutdown(std::net::Shutdown::Write)
            })
        })
        .collect();
    for w in writers {
        w.join().map_err(|_| anyhow!("writer panicked"))??;
    }
    let received = readers.join().map_err(|_| anyhow!("reader panicked"))??;
    let secs = started.elapsed().as_secs_f64();
    if received != per * connections as u64 {
        bail!(
            "loopback lost bytes: {received} of {}",
            per * connections as u64
        );
    }
    Ok(received as f64 / secs)
}

async fn channel(url: &str) -> Result<Channel> {
    Endpoint::from_shared(url.to_string())?
        .connect()
        .await
        .with_context(|| format!("connect to {url}"))
}

fn raw(channel: Channel) -> RawClient<Channel> {
    RawClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

/// One query on the database at `url`, on a connection of its own.
async fn query_one(url: &str, sql: &str) -> Result<tokio_postgres::Row> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    let row = client.query_one(sql, &[]).await;
    drop(client);
    let _ = driver.await;
    Ok(row?)
}

/// WAL bytes PostgreSQL has written so far (the current WAL position).
async fn wal_bytes(url: &str) -> Result<u64> {
    let row = query_one(
        url,
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint",
    )
    .await?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// Rows not yet folded into the bases: deltas, and report logs where the schema has
/// them.
async fn unfolded_rows(url: &str) -> Result<i64> {
    let with_logs = query_one(
        url,
        "SELECT (SELECT count(*) FROM deltas) + (SELECT count(*) FROM appended)",
    )
    .await;
    Ok(match with_logs {
        Ok(row) => row.get(0),
        Err(_) => query_one(url, "SELECT count(*) FROM deltas").await?.get(0),
    })
}

/// Bytes written so far by the store of a case: the daemon's for redb, PostgreSQL's WAL
/// for PostgreSQL, none for the memory store.
async fn store_written_bytes(
    store: StoreKind,
    daemons: &[Daemon],
    db_url: Option<&str>,
) -> Result<Option<u64>> {
    Ok(match (store, db_url) {
        (StoreKind::Redb, _) => Some(daemons[0].written_bytes()?),
        (StoreKind::Postgres { .. }, Some(url)) => Some(wal_bytes(url).await?),
        _ => None,
    })
}

/// Waits (at most 2 minutes) until what the case sent is folded: PostgreSQL, no delta or
/// report log left; redb, the daemon's written bytes unchanged for 12 s (its folds run
/// on size, and 10 s after the first report appended since the last one).
async fn wait_folded(store: StoreKind, daemons: &[Daemon], db_url: Option<&str>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    match (store, db_url) {
        (StoreKind::Postgres { .. }, Some(url)) => {
            while unfolded_rows(url).await? > 0 {
                if Instant::now() > deadline {
                    bail!("rows still unfolded after 2 minutes");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        (StoreKind::Redb, _) => {
            let mut last = (daemons[0].written_bytes()?, Instant::now());
            while last.1.elapsed() < Duration::from_secs(12) {
                if Instant::now() > deadline {
                    bail!("the daemon still writes after 2 minutes");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                let now = daemons[0].written_bytes()?;
                if now != last.0 {
                    last = (now, Instant::now());
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The reports of one case: a pool of distinct payloads under distinct ids.
fn build_reports(collection: &Collection, count: usize, seed: u64) -> Result<Vec<Report>> {
    let perturber = Perturber::new(collection.clone());
    let mut noise = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(seed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let pool: Vec<Vec<u8>> = (0..count.min(64))
        .map(|_| {
            let x: Vec<f64> = (0..collection.dim())
                .map(|_| rng.random_range(-1.0..1.0) / (collection.dim() as f64).sqrt())
                .collect();
            perturber
                .report(&x, &mut noise, ReportId(rng.random()))
                .map(|r| r.payload)
        })
        .collect::<Result<_, _>>()?;
    Ok((0..count)
        .map(|i| Report {
            collection_id: collection.id().to_string(),
            report_id: ReportId(rng.random()).0.to_vec(),
            encoding: collection.encoding() as i32,
            payload: pool[i % pool.len()].clone(),
        })
        .collect())
}

/// Runs one case.
async fn run_case(
    args: &Args,
    p: usize,
    wire: Wire,
    store: StoreKind,
    tick: f64,
) -> Result<CaseResult> {
    let tmp = tempfile::tempdir()?;
    // Keep the cluster alive for the case.
    let mut cluster: Option<PgCluster> = None;
    let mut db_url: Option<String> = None;
    let flags: Vec<String> = match store {
        StoreKind::Memory => vec!["--memory".into()],
        StoreKind::Redb => vec![
            "--data-dir".into(),
            tmp.path().join("data").display().to_string(),
        ],
        StoreKind::Postgres { .. } => {
            let c = PgCluster::start().map_err(|e| anyhow!("PostgreSQL: {e}"))?;
            let url = c
                .create_database("ingest")
                .map_err(|e| anyhow!("PostgreSQL: {e}"))?;
            cluster = Some(c);
            db_url = Some(url.clone());
            vec!["--store".into(), url]
        }
    };
    let replicas = match store {
        StoreKind::Postgres { replicas } => replicas,
        _ => 1,
    };
    let prefix = args.daemon_prefix.as_deref();
    let mut daemons = vec![Daemon::start(&flags, prefix)?];
    for _ in 1..replicas {
        daemons.push(Daemon::start(&flags, prefix)?);
    }
    let spec = CollectionSpec {
        collection_id: "ingest".into(),
        dim: p as u32,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 1.0,
        min_reports: 1,
        encoding: match wire {
            Wire::Gaussian(encoding) => encoding,
            Wire::RankOne => Encoding::Unspecified,
        } as i32,
        moments: Moments::SecondMoment as i32,
        ..Default::default()
    };
    let spec = match wire {
        Wire::Gaussian(_) => spec,
        Wire::RankOne => CollectionSpec {
            delta: 0.0,
            local_mechanism: LocalMechanism::RankOne as i32,
            ..spec
        },
    };
    let mut admin = raw(channel(&daemons[0].url).await?);
    let params = admin
        .create_collection(CreateCollectionRequest {
            spec: Some(spec.clone()),
        })
        .await?
        .into_inner();
    let collection = Collection::from_params(&params)?;
    let bytes_per_report = {
        let probe = build_reports(&collection, 1, 1)?;
        probe[0].payload.len() as u64
    };
    let count =
        ((args.payload_mib << 20) / bytes_per_report).clamp(1, args.max_reports as u64) as usize;
    let reports = build_reports(&collection, count, 42)?;
    let payload_bytes: u64 = reports.iter().map(|r| r.payload.len() as u64).sum();
    let loopback_bytes_per_s = loopback(payload_bytes, args.connections)?;

    // Connections first, then the clock.
    let mut clients = Vec::new();
    for c in 0..args.connections {
        clients.push(raw(channel(&daemons[c % daemons.len()].url).await?));
    }
    let mut shares: Vec<Vec<Report>> = vec![Vec::new(); args.connections];
    for (i, r) in reports.into_iter().enumerate() {
        shares[i % args.connections].push(r);
    }
    let cpu_before: f64 = daemons
        .iter()
        .map(|d| d.cpu_seconds(tick))
        .sum::<Result<f64>>()?;
    let written_before = store_written_bytes(store, &daemons, db_url.as_deref()).await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (mut client, share) in clients.into_iter().zip(shares) {
        let stream_len = args.stream_len.max(1);
        tasks.push(tokio::spawn(async move {
            let mut share = share;
            let mut accepted = 0u64;
            while !share.is_empty() {
                let rest = share.split_off(share.len().min(stream_len));
                let chunk = std::mem::replace(&mut share, rest);
                let response = client
                    .submit_reports(tokio_stream::iter(chunk))
                    .await?
                    .into_inner();
                accepted += response.accepted;
            }
            Ok::<u64, tonic::Status>(accepted)
        }));
    }
    let mut accepted = 0;
    for t in tasks {
        accepted += t.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_after: f64 = daemons
        .iter()
        .map(|d| d.cpu_seconds(tick))
        .sum::<Result<f64>>()?;
    let counted = admin
        .get_status(GetStatusRequest {
            collection_id: "ingest".into(),
        })
        .await?
        .into_inner()
        .reports;
    if accepted != count as u64 || counted != count as u64 {
        bail!("sent {count} reports, {accepted} accepted, {counted} counted");
    }
    wait_folded(store, &daemons, db_url.as_deref()).await?;
    let written_after = store_written_bytes(store, &daemons, db_url.as_deref()).await?;
    let written_bytes_per_report = written_before
        .zip(written_after)
        .map(|(before, after)| after.saturating_sub(before) as f64 / count as f64);
    drop(daemons);
    let database_bytes = match &db_url {
        Some(url) => Some(
            query_one(url, "SELECT pg_database_size(current_database())")
                .await?
                .get::<_, i64>(0)
                .max(0) as u64,
        ),
        None => None,
    };
    drop(cluster);
    let payload_bytes_per_s = payload_bytes as f64 / seconds;
    Ok(CaseResult {
        p,
        encoding: wire.to_string(),
        store: store.name(),
        reports: count,
        payload_bytes,
        seconds,
        reports_per_s: count as f64 / seconds,
        payload_bytes_per_s,
        loopback_bytes_per_s,
        ratio_to_loopback: payload_bytes_per_s / loopback_bytes_per_s,
        daemon_cpu_s_per_report: (cpu_after - cpu_before) / count as f64,
        connections: args.connections,
        database_bytes,
        written_bytes_per_report,
    })
}

/// Runs every case of `args`, printing as it goes.
pub(crate) async fn run(args: &Args) -> Result<Vec<CaseResult>> {
    let tick = clock_tick()?;
    let encodings: Vec<Wire> = args
        .encodings
        .iter()
        .map(|e| parse_encoding(e))
        .collect::<Result<_>>()?;
    let stores: Vec<StoreKind> = args
        .stores
        .iter()
        .map(|s| StoreKind::parse(s))
        .collect::<Result<_>>()?;
    if args.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let mut results = Vec::new();
    if !args.json {
        println!(
            "| p | encoding | store | reports | reports/s | payload MB/s | loopback MB/s | ratio | daemon CPU µs/report | written KB/report |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
    }
    for &p in &args.ps {
        for &encoding in &encodings {
            for &store in &stores {
                let r = run_case(args, p, encoding, store, tick)
                    .await
                    .with_context(|| format!("p = {p}, {encoding}, {}", store.name()))?;
                if args.json {
                    println!("{}", serde_json::to_string(&r)?);
                } else {
                    println!(
                        "| {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.2} | {:.0} | {} |",
                        r.p,
                        r.encoding,
                        r.store,
                        r.reports,
                        r.reports_per_s,
                        r.payload_bytes_per_s / 1e6,
                        r.loopback_bytes_per_s / 1e6,
                        r.ratio_to_loopback,
                        r.daemon_cpu_s_per_report * 1e6,
                        r.written_bytes_per_report
                            .map_or("–".to_string(), |b| format!("{:.1}", b / 1e3)),
                    );
                }
                results.push(r);
            }
        }
    }
    Ok(results)
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let mut args = Args::parse();
    args.apply_quick();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run(&args))?;
    Ok(())
}
