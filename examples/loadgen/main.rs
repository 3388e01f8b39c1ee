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
//! # Your own data (`--data FILE`)
//!
//! `--data FILE` (CSV with or without a header, or a 2-D `.npy`) replaces the model:
//! each row is one user (every row once; `--users N` draws N rows with replacement,
//! seeded by `--seed`, and the errors then include that draw's sampling error), the dimension is the file's (a different `--dim` is refused)
//! and the truth is the file's population covariance. Raw data need `--clip-radius`
//! (chosen from public knowledge of the scale: the error for a missing one quotes the
//! file's largest row norm, a data-dependent value whose use is not private);
//! `--standardize` maps each column to mean 0 and sd 1 with the file's own moments (a
//! preprocessing the operator does on data they hold; a real deployment needs public
//! scales), scores against the correlation matrix and defaults R to √(2p). Devices
//! clip `x − c` about the collection's public centre `c` (`--centre`; 0 without one):
//! the summary's centring and clipped fraction are taken about it, and data far from
//! 0 without a centre get a warning (their clipped rows make the released covariance
//! shrink toward 0). A second-moment collection estimates (1/n)Σ(x − c)(x − c)ᵀ, so
//! the summary also gives the errors against it (a warning on stderr when the data
//! are not centred). The CSV dialect is RFC 4180 as pandas writes it (`ldpcov_csv`).
//! A bad file is refused with the reader's one-line error before anything is sent.
//! The rules live in `ldpcov_lab::data_users`.
//!
//! ```text
//! cargo run --release --example loadgen -- --data people.csv --clip-radius 250
//! cargo run --release --example loadgen -- --data people.csv --standardize --users 100000 --json
//! ```
//!
//! # Load test mode (`--duration-secs`)
//!
//! `--clients N --duration-secs S` replaces the fixed number of users by a
//! time-bounded closed loop: N independent clients, each an
//! [`AggregatorClient`](ldpcov::client::AggregatorClient) with
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
//!
//! # The shuffle model (`--relay`)
//!
//! `--relay` puts an embedded `ldpcov-relay` between the users and the embedded
//! aggregator: a shuffled rank-one collection, each user sealing its report and sending
//! it under its own device token, the relay forwarding shuffled batches of at least
//! `--shuffle-min-batch` (default: all users). `--central-epsilon E` picks each
//! report's ε0 so that the batches are (E, 10⁻⁶)-DP against the aggregator. The summary
//! adds ε0, the central ε and the planner's local-only errors at the same n.
//!
//! ```text
//! cargo run --release --example loadgen -- --relay --central-epsilon 1 --users 100000 --dim 20
//! ```
//!
//! # Two aggregators (`--privacy-model two-aggregator`)
//!
//! Two embedded aggregators, a leader and a helper (docs/PRIVACY.md §10): each user
//! secret-shares its clipped vector with a Prio3 validity proof, the helper's share
//! sealed to the helper's own key, and uploads to the leader; both verify every report
//! and each adds its own noise to its share of the GaussCov release of `--release-rho`.
//!
//! ```text
//! cargo run --release --example loadgen -- --privacy-model two-aggregator --users 100000 --dim 20
//! ```
//!
//! Modules: `args` (the command line), `setup` (the aggregator, the collection and
//! the data — a model or a file —, shared by both modes), `accuracy` (the fixed number of users), `load`
//! (the load test), `relay` (the embedded relay of `--relay`) and `report` (their
//! summaries, JSON or readable).

mod accuracy;
mod args;
mod load;
mod relay;
mod report;
mod setup;

use anyhow::{Result, bail};

use crate::args::Args;
use crate::setup::Setup;

#[tokio::main]
async fn main() {
    // One line and exit status 1 on any error (no backtrace, no cause chain on
    // further lines), whatever RUST_BACKTRACE says.
    if let Err(e) = run().await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse_resolved();
    args.validate()?;
    let mut setup = Setup::prepare(&args).await?;
    match args.duration_secs {
        Some(secs) => {
            let summary = load::run(&args, secs, &mut setup).await?;
            if args.json {
                println!("{}", serde_json::to_string(&summary)?);
            } else {
                report::print_load(&summary);
            }
            if let Some(server) = setup.embedded {
                server.shutdown().await?;
            }
            if !summary.errors.is_empty() {
                bail!("{} submit calls failed", summary.error_count);
            }
        }
        None => {
            let summary = accuracy::run(&args, &mut setup).await?;
            if args.json {
                println!("{}", serde_json::to_string(&summary)?);
            } else {
                report::print_human(&summary);
            }
            if let Some(relay) = setup.relay {
                relay.shutdown().await?;
            }
            if let Some(server) = setup.embedded {
                server.shutdown().await?;
            }
            if let Some(helper) = setup.helper {
                helper.shutdown().await?;
            }
        }
    }
    Ok(())
}
