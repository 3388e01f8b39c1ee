//! The `ldpcov-relay` binary's two outward faces besides its gRPC service:
//!
//! * forwarding **over TLS with the relay's own token** (`--aggregator https://…
//!   --aggregator-ca-cert`): the real aggregator server (in process) serves TLS with a
//!   self-signed certificate; a relay trusting it as its CA forwards devices' sealed
//!   reports and the aggregator counts them; a relay that does not trust it (web PKI
//!   roots only) cannot forward a stored batch and keeps it (still pending after a
//!   failed call), and the same batch is counted once the relay is restarted with the
//!   CA — not lost;
//! * its **Prometheus endpoint** (`--metrics-listen`): the counters of stored,
//!   duplicate and refused reports, of batches formed and forwarded, of forwarded
//!   reports and of failed batch calls move by exactly what the test did.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ldpcov_aggregator::{EmbeddedServer, MemoryStore, ServeOptions, ServerTls};
use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_fixtures::metrics::{scrape, series};
use ldpcov_proto::v1::relay_client::RelayClient;
use ldpcov_proto::v1::{RelayReport, RelayStatus, SealedReport};
use ldpcov_relay::{CloseRule, DeviceId, DeviceTokenIssuer, RelayStore, StoreOptions, Submission};

use crate::support;
use crate::support::crash::{free_port, kill as stop, wait_ready};
use crate::support::embedded::RELAY_TOKEN;
use crate::support::fake_aggregator::{FakeAggregator, sealed, shuffled_spec};
use crate::support::grpc::with_token;
use crate::support::relay::{RelayFiles, spawn_relay, write_relay_secrets};

pub(crate) const ADMIN: &str = "daemon-test-relay-admin";
const AGGREGATOR_ADMIN: &str = "daemon-test-aggregator-admin";
pub(crate) const SECRET: [u8; 32] = [0x77; 32];
const MIN: u64 = 10;
/// Longest the tests wait for something the relay does every 20 ms (a batch formed
/// one window, 1 s, after its first report, then sent; a retry 1 s after a failure):
/// generous for a loaded 2-core machine.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The relay's secrets and directories in `dir`.
pub(crate) fn write_secrets(dir: &Path) {
    write_relay_secrets(dir, SECRET, ADMIN);
}

/// `serve` on `addr` with the files [`write_secrets`] wrote in `dir`, forwarding to
/// `aggregator`, store in `data`, with `extra` flags.
pub(crate) fn spawn(
    addr: SocketAddr,
    aggregator: &str,
    dir: &Path,
    data: &Path,
    extra: &[&str],
) -> Child {
    spawn_relay(addr, aggregator, &RelayFiles::in_dir(dir, data), extra)
}

/// Polls `check` every 20 ms until it returns true, failing with `what` after [`WAIT`].
pub(crate) async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn status(url: &str, collection: &str) -> RelayStatus {
    support::relay::relay_status(url, collection, ADMIN)
        .await
        .expect("the relay's status")
}

/// Sends `report` as device `device`; the relay's answer (`duplicate`) or status.
async fn send(url: &str, device: &str, report: RelayReport) -> Result<bool, tonic::Status> {
    let token = DeviceTokenIssuer::from_bytes(SECRET)
        .issue(device)
        .expect("device id");
    send_with_token(url, &token, report).await
}

async fn send_with_token(
    url: &str,
    token: &str,
    report: RelayReport,
) -> Result<bool, tonic::Status> {
    let mut client = RelayClient::connect(url.to_string())
        .await
        .expect("connect to the relay");
    client
        .submit_sealed_report(with_token(report, Some(token)))
        .await
        .map(|r| r.into_inner().duplicate)
}

/// A self-signed certificate for `localhost`: (certificate PEM, key PEM).
fn self_signed() -> (String, String) {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("rcgen certificate");
    (key.cert.pem(), key.signing_key.serialize_pem())
}

/// Real sealed reports of the shuffled collection `id` (sealed to the aggregator's key,
/// as a relay forwards them), from the aggregator at `url` (TLS, trusting `ca`).
async fn sealed_reports(url: &str, ca: &[u8], id: &str, n: u64) -> Vec<SealedReport> {
    let mut device = AggregatorClient::connect_with_tls(url.to_string(), Some(ca))
        .await
        .expect("connect over TLS")
        .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(7));
    let collection = device.collection(id).await.expect("collection");
    let mut out = Vec::new();
    for i in 0..n {
        let x = [0.2, -0.1, 0.05 * i as f64, 0.0];
        out.push(
            device
                .prepare_sealed_report(&collection, &x)
                .await
                .expect("prepare")
                .1,
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_over_tls_with_the_ca_and_keeps_the_batch_without_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write_secrets(dir);
    let (cert, key) = self_signed();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &cert).expect("write");
    let auth = support::embedded::aggregator_auth(AGGREGATOR_ADMIN);
    let aggregator = EmbeddedServer::start_with_options(
        Arc::new(MemoryStore::new()),
        ServeOptions {
            tls: Some(ServerTls::from_pem(cert.as_bytes(), key.as_bytes())),
            auth: Arc::new(auth),
            ..ServeOptions::default()
        },
    )
    .await
    .expect("TLS aggregator");
    let https = format!("https://localhost:{}", aggregator.addr().port());
    let mut admin = AggregatorClient::connect_with_tls(https.clone(), Some(cert.as_bytes()))
        .await
        .expect("connect over TLS")
        .with_token(AGGREGATOR_ADMIN.into())
        .expect("token");
    for id in ["tls", "kept"] {
        admin
            .create_collection(shuffled_spec(id, MIN, 1))
            .await
            .expect("create");
    }
    let ca_flag = [
        "--aggregator-ca-cert",
        ca_file.to_str().expect("utf-8 path"),
    ];

    // With the CA: devices' reports are looked up, batched and forwarded over TLS.
    let addr = free_port();
    let url = format!("http://{addr}");
    let mut relay = spawn(addr, &https, dir, &dir.join("data"), &ca_flag);
    wait_ready(&url).await;
    for (i, sealed) in sealed_reports(&https, cert.as_bytes(), "tls", MIN)
        .await
        .into_iter()
        .enumerate()
    {
        let request = RelayReport {
            collection_id: "tls".into(),
            submission_id: vec![i as u8; 16],
            outer: Some(support::relay::outer("tls", &sealed)),
        };
        let duplicate = send(&url, &format!("dev-{i}"), request)
            .await
            .expect("the relay looks the collection up over TLS and stores the report");
        assert!(!duplicate);
    }
    wait_until("the batch is forwarded", || async {
        let s = status(&url, "tls").await;
        s.forwarded_batches == 1 && s.pending_batches == 0
    })
    .await;
    assert_eq!(admin.status("tls").await.expect("status").reports, MIN);
    stop(&mut relay);

    // Without the CA (web PKI roots only): a batch stored in its data directory is
    // not forwarded, and stays.
    let data = dir.join("data-kept");
    {
        // The daemon's device tag key (from its device-token secret): the binary
        // refuses a store written with another.
        let key = DeviceTokenIssuer::from_bytes(SECRET).device_tag_key();
        let store =
            RelayStore::open_with(&data, &StoreOptions::with_key(key)).expect("relay store");
        for (i, sealed) in sealed_reports(&https, cert.as_bytes(), "kept", MIN)
            .await
            .into_iter()
            .enumerate()
        {
            store
                .submit(Submission {
                    collection_id: "kept".into(),
                    device: DeviceId::new(&format!("kept-{i}")).expect("device id"),
                    submission_id: [i as u8; 16],
                    sealed: sealed.clone(),
                    now: 1_000,
                    rule: CloseRule {
                        min_batch_size: MIN,
                        window_seconds: 1,
                    },
                    new_device_cap: 0,
                })
                .await
                .expect("store a report");
        }
        let formed = store.form_due_batches(2_000).await.expect("form");
        assert_eq!(formed.len(), 1);
        assert_eq!(formed[0].size, MIN);
    }
    let log = dir.join("relay.log");
    let failures_before = read(&log).matches("cannot forward a batch").count();
    let mut relay = spawn(addr, &https, dir, &data, &[]);
    wait_ready(&url).await;
    wait_until("a batch call fails without the CA", || async {
        read(&log).matches("cannot forward a batch").count() > failures_before
    })
    .await;
    let kept = status(&url, "kept").await;
    assert_eq!((kept.pending_batches, kept.pending_batch_reports), (1, MIN));
    assert_eq!(kept.forwarded_batches, 0);
    assert_eq!(admin.status("kept").await.expect("status").reports, 0);
    stop(&mut relay);

    // The same directory with the CA: the kept batch arrives and is counted.
    let mut relay = spawn(addr, &https, dir, &data, &ca_flag);
    wait_ready(&url).await;
    wait_until("the kept batch is forwarded", || async {
        let s = status(&url, "kept").await;
        s.forwarded_batches == 1 && s.pending_batches == 0
    })
    .await;
    assert_eq!(admin.status("kept").await.expect("status").reports, MIN);
    stop(&mut relay);
    let log = read(&log);
    assert!(!log.contains(RELAY_TOKEN) && !log.contains(ADMIN));
    aggregator.shutdown().await.expect("shutdown");
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn fake_report(tag: u64) -> RelayReport {
    RelayReport {
        collection_id: "m".into(),
        submission_id: tag.to_le_bytes().repeat(2),
        outer: Some(support::relay::outer("m", &sealed(tag))),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_the_relay_stored_refused_and_forwarded() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    write_secrets(dir);
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("m", MIN, 1), true);
    // The first batch call fails (UNAVAILABLE): one failure, then a retry 1 s later.
    fake.state().fail_next = 1;
    let aggregator = fake.serve().await;
    let metrics = free_port();
    let addr = free_port();
    let url = format!("http://{addr}");
    let metrics_flag = metrics.to_string();
    let mut relay = spawn(
        addr,
        &format!("http://{aggregator}"),
        dir,
        &dir.join("data"),
        &["--metrics-listen", &metrics_flag],
    );
    wait_ready(&url).await;
    let m = [("collection", "m")];
    let text = scrape(&metrics.to_string(), WAIT);
    assert_eq!(series(&text, "ldpcov_relay_reports_stored_total", &m), 0.0);

    // One report short of the minimum, so that the window cannot close yet: a resend
    // (same submission id), a bad token and a second report of a device go to the same
    // open window.
    for tag in 0..MIN - 1 {
        assert!(
            !send(&url, &format!("dev-{tag}"), fake_report(tag))
                .await
                .expect("stored")
        );
    }
    assert!(
        send(&url, "dev-0", fake_report(0))
            .await
            .expect("duplicate")
    );
    let bad = send_with_token(&url, "v1.dev-0.00", fake_report(99)).await;
    assert_eq!(
        bad.expect_err("bad token").code(),
        tonic::Code::Unauthenticated
    );
    let again = send(&url, "dev-1", fake_report(100)).await;
    assert_eq!(
        again.expect_err("second").code(),
        tonic::Code::AlreadyExists
    );
    let last = MIN - 1;
    assert!(
        !send(&url, &format!("dev-{last}"), fake_report(last))
            .await
            .expect("stored")
    );

    wait_until("the batch is forwarded after one failure", || async {
        status(&url, "m").await.forwarded_batches == 1
    })
    .await;
    let text = scrape(&metrics.to_string(), WAIT);
    let count = |name: &str, labels: &[(&str, &str)]| series(&text, name, labels);
    assert_eq!(count("ldpcov_relay_reports_stored_total", &m), MIN as f64);
    assert_eq!(count("ldpcov_relay_reports_duplicate_total", &m), 1.0);
    assert_eq!(
        count(
            "ldpcov_relay_reports_refused_total",
            &[("reason", "unauthenticated")]
        ),
        1.0
    );
    assert_eq!(
        count(
            "ldpcov_relay_reports_refused_total",
            &[("reason", "already_reported")]
        ),
        1.0
    );
    assert_eq!(count("ldpcov_relay_batches_formed_total", &m), 1.0);
    assert_eq!(count("ldpcov_relay_forward_failures_total", &m), 1.0);
    assert_eq!(count("ldpcov_relay_batches_forwarded_total", &m), 1.0);
    assert_eq!(
        count("ldpcov_relay_reports_forwarded_total", &m),
        MIN as f64
    );
    assert_eq!(fake.state().accepted, MIN);
    stop(&mut relay);
}
