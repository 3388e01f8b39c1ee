//! The relay in-process against a fake aggregator: device authentication and
//! validation, what a forwarded batch carries, and retries; and against a hostile one
//! (the same test double, answering what an aggregator that wants smaller crowds
//! would): the relay's floor, pinned settings (across a restart), one report per
//! device per collection, resends never in two batches, one key id per batch, and the
//! relay's own view of a collection for devices.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ldpcov_proto::v1::relay_client::RelayClient;
use ldpcov_proto::v1::{GetCollectionRequest, RelayReport, RelayStatusRequest, SealedReport};
use ldpcov_relay::{
    CloseRule, DeviceTokenIssuer, RelayOptions, RelayStore, Secret, Upstream, serve,
};
use tonic::{Code, Request};

use crate::support;
use support::{ACTIVE_KEY, FakeAggregator, RELAY_TOKEN, sealed, shuffled_spec, tag};

const ADMIN: &str = "relay-admin-token";

struct Relay {
    addr: SocketAddr,
    issuer: DeviceTokenIssuer,
    dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How a test relay runs: its floor (min batch, min window) and how long it caches a
/// collection's parameters.
#[derive(Clone, Copy)]
struct Config {
    floor: CloseRule,
    collection_ttl: Duration,
}

impl Default for Config {
    /// A floor of 2 reports (the tests' collections are small), the default TTL.
    fn default() -> Self {
        Config {
            floor: CloseRule {
                min_batch_size: 2,
                window_seconds: 0,
            },
            collection_ttl: ldpcov_relay::constants::COLLECTION_TTL,
        }
    }
}

impl Relay {
    async fn start(aggregator: SocketAddr) -> Relay {
        Self::start_with(
            aggregator,
            tempfile::tempdir().expect("tempdir"),
            Config::default(),
        )
        .await
    }

    /// A relay on the store in `dir` (a restart when it held one).
    async fn start_with(aggregator: SocketAddr, dir: tempfile::TempDir, config: Config) -> Relay {
        let store = Arc::new(RelayStore::open(dir.path()).expect("store"));
        let issuer = DeviceTokenIssuer::from_bytes([42; 32]);
        let upstream = Upstream::new(
            &format!("http://{aggregator}"),
            Secret::new(RELAY_TOKEN, "relay").expect("token"),
            None,
        )
        .expect("upstream")
        .with_collection_ttl(config.collection_ttl);
        let options = RelayOptions {
            admin: Some(Secret::new(ADMIN, "admin").expect("admin")),
            batch_check_interval: Duration::from_millis(50),
            floor: config.floor,
            ..RelayOptions::new(upstream, issuer.clone())
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(store, options, listener, async move {
                let _ = stopped.await;
            })
            .await
            .expect("serve");
        });
        Relay {
            addr,
            issuer,
            dir: Some(dir),
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn client(&self) -> RelayClient<tonic::transport::Channel> {
        RelayClient::connect(format!("http://{}", self.addr))
            .await
            .expect("connect")
    }

    async fn submit(
        &self,
        token: Option<&str>,
        collection: &str,
        submission: u8,
        report: SealedReport,
    ) -> Result<bool, tonic::Status> {
        let mut request = Request::new(RelayReport {
            collection_id: collection.into(),
            submission_id: vec![submission; 16],
            sealed: Some(report),
        });
        if let Some(t) = token {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {t}").parse().expect("ascii"),
            );
        }
        self.client()
            .await
            .submit_sealed_report(request)
            .await
            .map(|r| r.into_inner().duplicate)
    }

    fn token(&self, device: &str) -> String {
        self.issuer.issue(device).expect("device id")
    }

    async fn status(&self, collection: &str) -> ldpcov_proto::v1::RelayStatus {
        let mut request = Request::new(RelayStatusRequest {
            collection_id: collection.into(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {ADMIN}").parse().expect("ascii"),
        );
        self.client()
            .await
            .get_relay_status(request)
            .await
            .expect("status")
            .into_inner()
    }

    /// The relay's view of a collection, asked with `device`'s token.
    async fn get_collection(
        &self,
        device: &str,
        collection: &str,
    ) -> Result<ldpcov_proto::v1::CollectionParams, tonic::Status> {
        let mut request = Request::new(GetCollectionRequest {
            collection_id: collection.into(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.token(device))
                .parse()
                .expect("ascii"),
        );
        self.client()
            .await
            .get_collection(request)
            .await
            .map(tonic::Response::into_inner)
    }

    /// Stops the relay; its data directory, for a restart.
    async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("relay task");
        }
        self.dir.take().expect("the data directory")
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn devices_are_authenticated_and_reports_checked_before_storing() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 3, 3600), true);
    let mut plain = shuffled_spec("plain", 3, 3600);
    plain.shuffle = None;
    fake.add(plain, false);
    let relay = Relay::start(fake.serve().await).await;
    let code = |r: Result<bool, tonic::Status>| r.map_err(|s| s.code());

    // Tokens: missing, forged (another secret), altered.
    assert_eq!(
        code(relay.submit(None, "s", 1, sealed(1)).await),
        Err(Code::Unauthenticated)
    );
    let forged = DeviceTokenIssuer::from_bytes([1; 32])
        .issue("d1")
        .expect("id");
    assert_eq!(
        code(relay.submit(Some(&forged), "s", 1, sealed(1)).await),
        Err(Code::Unauthenticated)
    );
    let good = relay.token("d1");
    let altered = good.replacen(".d1.", ".d2.", 1);
    assert_ne!(altered, good);
    assert_eq!(
        code(relay.submit(Some(&altered), "s", 1, sealed(1)).await),
        Err(Code::Unauthenticated)
    );
    // Shape: bad collection id, short enc, a ciphertext shorter than the tag or
    // longer than any report of a p = 4 collection can be.
    assert_eq!(
        code(relay.submit(Some(&good), "no spaces", 1, sealed(1)).await),
        Err(Code::InvalidArgument)
    );
    let mut short_enc = sealed(1);
    short_enc.enc.pop();
    assert_eq!(
        code(relay.submit(Some(&good), "s", 1, short_enc).await),
        Err(Code::InvalidArgument)
    );
    let mut tiny = sealed(1);
    tiny.ciphertext.truncate(15);
    assert_eq!(
        code(relay.submit(Some(&good), "s", 1, tiny).await),
        Err(Code::InvalidArgument)
    );
    let mut huge = sealed(1);
    huge.ciphertext.resize(100_000, 0);
    assert_eq!(
        code(relay.submit(Some(&good), "s", 1, huge).await),
        Err(Code::InvalidArgument)
    );
    // The collection: unknown, not shuffled; a key that is neither active nor pending
    // (a retired one included).
    assert_eq!(
        code(relay.submit(Some(&good), "nope", 1, sealed(1)).await),
        Err(Code::NotFound)
    );
    assert_eq!(
        code(relay.submit(Some(&good), "plain", 1, sealed(1)).await),
        Err(Code::FailedPrecondition)
    );
    for key_id in [ACTIVE_KEY - 1, ACTIVE_KEY + 2, 0] {
        let mut r = sealed(1);
        r.key_id = key_id;
        assert_eq!(
            code(relay.submit(Some(&good), "s", 1, r).await),
            Err(Code::FailedPrecondition)
        );
    }
    // Nothing of the refused ones was stored.
    assert_eq!(relay.status("s").await.window_reports, 0);

    // Stored; the same submission again is a duplicate; another report of the same
    // device in the same window is refused with a clear message.
    assert_eq!(
        code(relay.submit(Some(&good), "s", 1, sealed(1)).await),
        Ok(false)
    );
    assert_eq!(
        code(relay.submit(Some(&good), "s", 1, sealed(1)).await),
        Ok(true)
    );
    let err = relay
        .submit(Some(&good), "s", 2, sealed(2))
        .await
        .expect_err("a second report in the window");
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(
        err.message().contains("already sent a report"),
        "{}",
        err.message()
    );
    // The pending key is fine too, for another device.
    let mut pending = sealed(3);
    pending.key_id = ACTIVE_KEY + 1;
    assert_eq!(
        code(
            relay
                .submit(Some(&relay.token("d3")), "s", 3, pending)
                .await
        ),
        Ok(false)
    );
    assert_eq!(relay.status("s").await.window_reports, 2);

    // The admin call needs the admin token.
    let mut client = relay.client().await;
    let err = client
        .get_relay_status(RelayStatusRequest {
            collection_id: "s".into(),
        })
        .await
        .expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated);
    // Every lookup the relay made carried its own token and nothing of the devices'.
    for lookup in &fake.state().lookups {
        assert!(lookup.contains(&("authorization".into(), format!("Bearer {RELAY_TOKEN}"))));
        assert!(
            !lookup
                .iter()
                .any(|(_, v)| v.contains("v2.d") || v.contains("v1.d")),
            "{lookup:?}"
        );
    }
    relay.stop().await;
}

/// The standard headers a tonic client sends; anything else would be the relay's.
const STANDARD_HEADERS: [&str; 5] = [
    "te",
    "content-type",
    "user-agent",
    "grpc-timeout",
    "grpc-accept-encoding",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_batch_carries_only_the_sealed_reports_of_at_least_the_minimum() {
    const MIN: u64 = 5;
    const DEVICES: u64 = 13;
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", MIN, 1), true);
    let relay = Relay::start(fake.serve().await).await;
    let mut tokens = Vec::new();
    let mut sent = Vec::new();
    for d in 0..DEVICES {
        let device = format!("device-{d}-identifiable");
        let token = relay.token(&device);
        let report = sealed(d);
        assert!(
            !relay
                .submit(Some(&token), "s", d as u8, report.clone())
                .await
                .expect("stored")
        );
        tokens.push((device, token));
        sent.push(report);
        // Spread the arrivals over time (several windows may close meanwhile).
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // Top up the last window until everything was forwarded.
    let mut extra = DEVICES;
    loop {
        let status = relay.status("s").await;
        if status.window_reports == 0 && status.pending_batches == 0 {
            break;
        }
        if status.window_reports > 0 && status.window_reports < MIN {
            let device = format!("filler-{extra}");
            let token = relay.token(&device);
            let report = sealed(extra);
            relay
                .submit(Some(&token), "s", extra as u8, report.clone())
                .await
                .expect("stored");
            tokens.push((device, token));
            sent.push(report);
            extra += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (violations, calls) = {
        let state = fake.state();
        (state.violations.clone(), state.calls.clone())
    };
    assert!(violations.is_empty(), "{:?}", violations);
    assert!(!calls.is_empty());
    let mut forwarded: Vec<SealedReport> = Vec::new();
    for call in &calls {
        // Metadata: the relay token and the standard gRPC headers, nothing else.
        for (name, value) in &call.metadata {
            assert!(
                name == "authorization" || STANDARD_HEADERS.contains(&name.as_str()),
                "unexpected metadata {name}: {value}"
            );
            for (device, token) in &tokens {
                assert!(!value.contains(device.as_str()) && !value.contains(token.as_str()));
            }
        }
        assert_eq!(
            call.metadata
                .iter()
                .filter(|(k, _)| k == "authorization")
                .count(),
            1
        );
        // Messages: only the header and the sealed reports; no device id or token in
        // their bytes.
        for chunk in &call.chunks {
            let bytes = prost::Message::encode_to_vec(chunk);
            for (device, token) in &tokens {
                assert!(!bytes.windows(device.len()).any(|w| w == device.as_bytes()));
                assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()));
            }
        }
        let reports = call.reports();
        assert!(
            reports.len() as u64 >= MIN,
            "a batch of {} < {MIN}",
            reports.len()
        );
        assert_eq!(call.batch_id().len(), 16);
        forwarded.extend(reports);
    }
    // Exactly the bytes received, each once (no failures were injected).
    let mut got: Vec<_> = forwarded
        .iter()
        .map(prost::Message::encode_to_vec)
        .collect();
    let mut want: Vec<_> = sent.iter().map(prost::Message::encode_to_vec).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let status = relay.status("s").await;
    assert_eq!(status.forwarded_reports, sent.len() as u64);
    assert_eq!(status.forwarded_batches, calls.len() as u64);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_is_resent_with_the_same_id_and_order_until_acknowledged() {
    const MIN: u64 = 4;
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", MIN, 1), true);
    fake.state().fail_next = 2;
    let relay = Relay::start(fake.serve().await).await;
    for d in 0..MIN {
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d as u8,
                sealed(d),
            )
            .await
            .expect("stored");
    }
    // Two failures (backoff 1 s, then 2 s), then the acknowledgement.
    wait_for("three attempts", || fake.state().calls.len() >= 3).await;
    wait_for("the batch deleted", || fake.state().accepted == MIN).await;
    let calls = fake.state().calls.clone();
    assert_eq!(calls.len(), 3);
    let first: Vec<u64> = calls[0].reports().iter().map(tag).collect();
    for c in &calls {
        assert_eq!(c.batch_id(), calls[0].batch_id());
        assert_eq!(c.reports().iter().map(tag).collect::<Vec<_>>(), first);
    }
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, (0..MIN).collect::<Vec<_>>());
    // Acknowledged: deleted, counted, never sent again.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = relay.status("s").await;
        if status.pending_batches == 0 {
            assert_eq!(
                (status.forwarded_batches, status.forwarded_reports),
                (1, MIN)
            );
            break;
        }
        assert!(Instant::now() < deadline, "the batch was not deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.state().calls.len(), 3);
    relay.stop().await;
}

#[tokio::test]
async fn without_published_keys_the_key_schedule_decides() {
    let fake = FakeAggregator::default();
    // key_rotation_seconds defaults to 86 400.
    fake.add(shuffled_spec("s", 3, 3600), false);
    let relay = Relay::start(fake.serve().await).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let current = (now / 86_400) as u32;
    for (i, (key_id, ok)) in [
        (current, true),
        (current + 1, true),
        (current - 1, false),
        (current + 2, false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = sealed(i as u64);
        r.key_id = key_id;
        let result = relay
            .submit(Some(&relay.token(&format!("d{i}"))), "s", i as u8, r)
            .await;
        assert_eq!(
            result.is_ok(),
            ok,
            "key {key_id} (current {current}): {result:?}"
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn health_is_serving() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    let fake = FakeAggregator::default();
    let relay = Relay::start(fake.serve().await).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", relay.addr))
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    for service in ["", "ldpcov.v1.Relay"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("check")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32);
    }
    relay.stop().await;
}

/// Measurement, not a check (`cargo test -p ldpcov-relay --release --test system --
/// --ignored --nocapture relay::submit_throughput`): `REPORTS` sealed reports from distinct
/// devices, `IN_FLIGHT` at a time, against the relay's durable store on this machine's
/// disk; prints the throughput and latency percentiles of `SubmitSealedReport`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run explicitly"]
async fn submit_throughput() {
    const REPORTS: u64 = 4000;
    for in_flight in [1usize, 16, 64] {
        let fake = FakeAggregator::default();
        fake.add(shuffled_spec("s", 1_000_000, 3600), true);
        let relay = Relay::start(fake.serve().await).await;
        let client = relay.client().await;
        let reports = if in_flight == 1 { REPORTS / 8 } else { REPORTS };
        let tokens: Vec<String> = (0..reports)
            .map(|d| relay.token(&format!("d{d}")))
            .collect();
        let started = Instant::now();
        let mut latencies: Vec<Duration> = futures::stream::iter(tokens.into_iter().enumerate())
            .map(|(d, token)| {
                let mut client = client.clone();
                async move {
                    let mut request = Request::new(RelayReport {
                        collection_id: "s".into(),
                        submission_id: (d as u128).to_le_bytes().to_vec(),
                        sealed: Some(sealed(d as u64)),
                    });
                    request.metadata_mut().insert(
                        "authorization",
                        format!("Bearer {token}").parse().expect("ascii"),
                    );
                    let t = Instant::now();
                    client.submit_sealed_report(request).await.expect("stored");
                    t.elapsed()
                }
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
        let elapsed = started.elapsed();
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
        eprintln!(
            "in flight {in_flight}: {reports} reports in {elapsed:.2?} = {:.0}/s; latency p50 {:.2?} p99 {:.2?}",
            reports as f64 / elapsed.as_secs_f64(),
            p(0.5),
            p(0.99)
        );
        assert_eq!(relay.status("s").await.window_reports, reports);
        relay.stop().await;
    }
}

/// A relay in a fresh directory in front of `fake`, with its own floor of
/// `min_batch_size` reports and `window_seconds`.
async fn start_with_floor(
    fake: &FakeAggregator,
    min_batch_size: u64,
    window_seconds: u64,
) -> Relay {
    let config = Config {
        floor: CloseRule {
            min_batch_size,
            window_seconds,
        },
        ..Config::default()
    };
    Relay::start_with(
        fake.serve().await,
        tempfile::tempdir().expect("dir"),
        config,
    )
    .await
}

/// A device's report `tag` under submission id `submission`, sealed to `key_id`.
fn sealed_to(tag_value: u64, key_id: u32) -> SealedReport {
    SealedReport {
        key_id,
        ..sealed(tag_value)
    }
}

/// Every report the fake aggregator received, per batch call (their tags).
fn batch_tags(fake: &FakeAggregator) -> Vec<Vec<u64>> {
    fake.state()
        .calls
        .iter()
        .map(|c| c.reports().iter().map(tag).collect())
        .collect()
}

#[tokio::test]
async fn a_collection_below_the_relays_floor_is_refused() {
    let fake = FakeAggregator::default();
    // The hostile aggregator asks for batches of 2 and a 1 s window.
    fake.add(shuffled_spec("small", 2, 1), true);
    fake.add(shuffled_spec("quick", 50, 1), true);
    fake.add(shuffled_spec("fine", 50, 60), true);
    let relay = start_with_floor(&fake, 50, 60).await;
    let token = relay.token("d1");
    let err = relay
        .submit(Some(&token), "small", 1, sealed(1))
        .await
        .expect_err("below the floor");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains(" 2 ") && err.message().contains(" 50"),
        "{}",
        err.message()
    );
    assert_eq!(err.message().lines().count(), 1);
    let err = relay
        .get_collection("d1", "small")
        .await
        .expect_err("below the floor");
    assert_eq!(err.code(), Code::FailedPrecondition);
    // A window shorter than the relay's minimum.
    let err = relay
        .submit(Some(&token), "quick", 1, sealed(1))
        .await
        .expect_err("window below the floor");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("1 s") && err.message().contains("60 s"),
        "{}",
        err.message()
    );
    assert_eq!(relay.status("small").await.window_reports, 0);
    assert_eq!(relay.status("quick").await.window_reports, 0);
    // At the floor: served.
    assert!(
        !relay
            .submit(Some(&token), "fine", 1, sealed(1))
            .await
            .expect("stored")
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_batch_below_the_relays_floor_is_formed() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 4, 1), true);
    let relay = start_with_floor(&fake, 4, 0).await;
    for d in 0..3u64 {
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d as u8,
                sealed(d),
            )
            .await
            .expect("stored");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(fake.state().calls.is_empty(), "a batch below the floor");
    relay
        .submit(Some(&relay.token("d3")), "s", 3, sealed(3))
        .await
        .expect("stored");
    wait_for("the batch", || fake.state().accepted == 4).await;
    assert!(batch_tags(&fake).iter().all(|b| b.len() >= 4));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_changed_mid_collection_are_refused_and_nothing_is_forwarded() {
    const WINDOW: u64 = 3;
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 3, WINDOW), true);
    let config = Config {
        collection_ttl: Duration::from_millis(100),
        ..Config::default()
    };
    let relay = Relay::start_with(
        fake.serve().await,
        tempfile::tempdir().expect("dir"),
        config,
    )
    .await;
    let opened = Instant::now();
    for d in 0..3u64 {
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d as u8,
                sealed(d),
            )
            .await
            .expect("stored");
    }
    // The aggregator now announces a larger ε0 (less noise per report) before the
    // full window is due.
    let mut changed = shuffled_spec("s", 3, WINDOW);
    changed.epsilon = 8.0;
    fake.add(changed, true);
    assert!(
        opened.elapsed() < Duration::from_secs(WINDOW),
        "too slow to test"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = relay
        .submit(Some(&relay.token("d3")), "s", 3, sealed(3))
        .await
        .expect_err("changed settings");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message()
            .contains("collection s changed its privacy settings after the relay pinned them")
            && err.message().contains("epsilon 4 → 8"),
        "{}",
        err.message()
    );
    let err = relay.get_collection("d3", "s").await.expect_err("changed");
    assert_eq!(err.code(), Code::FailedPrecondition);
    // A smaller batch is a change too.
    fake.add(shuffled_spec("s", 2, WINDOW), true);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = relay
        .submit(Some(&relay.token("d3")), "s", 3, sealed(3))
        .await
        .expect_err("changed settings");
    assert!(
        err.message().contains("min_batch_size 3 → 2"),
        "{}",
        err.message()
    );
    // The window is past its time and full, but nothing was forwarded.
    while opened.elapsed() < Duration::from_secs(WINDOW + 1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fake.state().calls.is_empty(), "forwarded after a change");
    assert_eq!(relay.status("s").await.window_reports, 3);
    // Back to the pinned settings: the window is forwarded.
    fake.add(shuffled_spec("s", 3, WINDOW), true);
    wait_for("the batch", || fake.state().accepted == 3).await;
    assert!(fake.state().violations.is_empty());
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_settings_survive_a_restart() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 3, 3600), true);
    let addr = fake.serve().await;
    let relay = Relay::start(addr).await;
    relay
        .submit(Some(&relay.token("d0")), "s", 0, sealed(0))
        .await
        .expect("stored");
    let dir = relay.stop().await;
    // While the relay was down, the aggregator lowered the minimum.
    fake.add(shuffled_spec("s", 2, 3600), true);
    let relay = Relay::start_with(addr, dir, Config::default()).await;
    let err = relay
        .submit(Some(&relay.token("d1")), "s", 1, sealed(1))
        .await
        .expect_err("changed while the relay was down");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("min_batch_size 3 → 2"),
        "{}",
        err.message()
    );
    assert_eq!(relay.status("s").await.window_reports, 1);
    // And the device record survived too: d0 cannot report again once it is back.
    fake.add(shuffled_spec("s", 3, 3600), true);
    let dir = relay.stop().await;
    let relay = Relay::start_with(addr, dir, Config::default()).await;
    let err = relay
        .submit(Some(&relay.token("d0")), "s", 9, sealed(9))
        .await
        .expect_err("a second report");
    assert_eq!(err.code(), Code::AlreadyExists);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_reports_once_per_collection_in_any_window() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 2, 1), true);
    let relay = Relay::start(fake.serve().await).await;
    let d0 = relay.token("d0");
    assert!(
        !relay
            .submit(Some(&d0), "s", 1, sealed(1))
            .await
            .expect("stored")
    );
    relay
        .submit(Some(&relay.token("d1")), "s", 2, sealed(2))
        .await
        .expect("stored");
    wait_for("the first batch", || fake.state().accepted == 2).await;
    // The window became a batch; the device's next report, in a later window, is
    // refused as a second report to the collection.
    let err = relay
        .submit(Some(&d0), "s", 3, sealed(3))
        .await
        .expect_err("a second report in a later window");
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(
        err.message().contains("already sent a report"),
        "{}",
        err.message()
    );
    // Its resend of the first submission stays an idempotent duplicate.
    assert!(
        relay
            .submit(Some(&d0), "s", 1, sealed(1))
            .await
            .expect("duplicate")
    );
    assert_eq!(relay.status("s").await.window_reports, 0);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_after_its_window_closed_never_reaches_a_second_batch() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 2, 1), true);
    let relay = Relay::start(fake.serve().await).await;
    let d0 = relay.token("d0");
    relay
        .submit(Some(&d0), "s", 1, sealed(1))
        .await
        .expect("stored");
    relay
        .submit(Some(&relay.token("d1")), "s", 2, sealed(2))
        .await
        .expect("stored");
    wait_for("the first batch", || fake.state().calls.len() == 1).await;
    // The acknowledgement was lost and the device resends the same sealed bytes under
    // a new submission id; someone else replays them under another device's token.
    assert!(
        relay
            .submit(Some(&d0), "s", 7, sealed(1))
            .await
            .expect("duplicate")
    );
    assert!(
        relay
            .submit(Some(&relay.token("d9")), "s", 8, sealed(1))
            .await
            .expect("duplicate")
    );
    for d in 3..5u64 {
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d as u8,
                sealed(d),
            )
            .await
            .expect("stored");
    }
    wait_for("the second batch", || fake.state().calls.len() == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let batches = batch_tags(&fake);
    assert_eq!(batches.len(), 2, "{batches:?}");
    let holding_1 = batches.iter().filter(|b| b.contains(&1)).count();
    assert_eq!(holding_1, 1, "{batches:?}");
    assert_eq!(fake.state().duplicates, 0);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_batch_holds_one_key_id() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 2, 1), true);
    let relay = Relay::start(fake.serve().await).await;
    // Devices around a key rotation: the active key and the pending one, interleaved.
    for d in 0..6u64 {
        let key_id = ACTIVE_KEY + (d % 2) as u32;
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d as u8,
                sealed_to(d, key_id),
            )
            .await
            .expect("stored");
    }
    wait_for("every report forwarded", || {
        fake.state()
            .calls
            .iter()
            .map(|c| c.reports().len())
            .sum::<usize>()
            == 6
    })
    .await;
    let calls = fake.state().calls.clone();
    assert!(calls.len() >= 2);
    for call in &calls {
        let reports = call.reports();
        assert!(
            reports.iter().all(|r| r.key_id == reports[0].key_id),
            "a batch mixing key ids: {:?}",
            reports.iter().map(|r| r.key_id).collect::<Vec<_>>()
        );
    }
    relay.stop().await;
}

#[tokio::test]
async fn the_relays_get_collection_answers_its_floor_and_its_own_central_epsilon() {
    const MIN: u64 = 1000;
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", MIN, 3600), true);
    // The aggregator's derived figures lie: a larger crowd, a smaller central ε.
    {
        let mut state = fake.state();
        let shuffle = state
            .collections
            .get_mut("s")
            .and_then(|p| p.shuffle.as_mut())
            .expect("shuffled");
        shuffle.min_batch_size = 1_000_000;
        shuffle.central_epsilon = 0.01;
    }
    let relay = start_with_floor(&fake, MIN, 0).await;
    // Devices are authenticated.
    let mut client = relay.client().await;
    let err = client
        .get_collection(GetCollectionRequest {
            collection_id: "s".into(),
        })
        .await
        .expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated);
    let a = relay.get_collection("d1", "s").await.expect("params");
    let b = relay.get_collection("d2", "s").await.expect("params");
    assert_eq!(
        prost::Message::encode_to_vec(&a),
        prost::Message::encode_to_vec(&b),
        "every device gets the same bytes"
    );
    let spec = a.spec.clone().expect("spec");
    let shuffle = a.shuffle.clone().expect("shuffle");
    let delta = spec.shuffle.expect("shuffle spec").central_delta;
    assert_eq!(shuffle.min_batch_size, MIN);
    assert_eq!(shuffle.local_epsilon, spec.epsilon);
    assert_eq!(shuffle.central_delta, delta);
    let expected =
        ldpcov_accounting::amplification::shuffled_epsilon(spec.epsilon, MIN, delta).expect("ε");
    assert_eq!(shuffle.central_epsilon, expected);
    assert!(expected > 0.01);
    // The keys of the relay's view: the aggregator's active and pending keys.
    let mut key_ids: Vec<u32> = shuffle.keys.iter().map(|k| k.key_id).collect();
    key_ids.sort_unstable();
    assert!(key_ids.contains(&ACTIVE_KEY) && key_ids.contains(&(ACTIVE_KEY + 1)));
    relay.stop().await;
}
