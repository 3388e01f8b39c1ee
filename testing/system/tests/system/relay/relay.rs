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
use ldpcov_relay::{CloseRule, DeviceTokenIssuer, RelayOptions, RelayStore, Secret, Upstream};
use tonic::{Code, Request};

use crate::support;
use crate::support::embedded::RELAY_TOKEN;
use crate::support::fake_aggregator::{ACTIVE_KEY, FakeAggregator, sealed, shuffled_spec, tag};
use crate::support::relay::InProcessRelay;

const ADMIN: &str = "relay-admin-token";

struct Relay {
    addr: SocketAddr,
    issuer: DeviceTokenIssuer,
    dir: tempfile::TempDir,
    relay: InProcessRelay,
}

/// How a test relay runs: its floor (min batch, min window) and how long it caches a
/// collection's parameters.
#[derive(Clone, Copy)]
struct Config {
    floor: CloseRule,
    collection_ttl: Duration,
    new_device_cap: u64,
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
            new_device_cap: 0,
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
            layer_key: Some(support::relay::layer_key()),
            new_device_cap: config.new_device_cap,
            ..RelayOptions::new(upstream, issuer.clone())
        };
        let relay = InProcessRelay::serve(store, options).await;
        Relay {
            addr: relay.addr,
            issuer,
            dir,
            relay,
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
            outer: Some(support::relay::outer(collection, &report)),
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
    async fn stop(self) -> tempfile::TempDir {
        self.relay
            .stop()
            .await
            .expect("the relay stopped")
            .expect("serve");
        self.dir
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
                        outer: Some(support::relay::outer("s", &sealed(d as u64))),
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

/// Sets the bytes of `key_id`'s public key in the fake's answer for `collection`.
fn set_key_bytes(fake: &FakeAggregator, collection: &str, key_id: u32, byte: u8) {
    let mut state = fake.state();
    let params = state.collections.get_mut(collection).expect("collection");
    let shuffle = params.shuffle.as_mut().expect("shuffled");
    for key in &mut shuffle.keys {
        if key.key_id == key_id {
            key.public_key = vec![byte; 32];
        }
    }
}

/// The key bytes the relay serves a device for `key_id`.
fn served_key(params: &ldpcov_proto::v1::CollectionParams, key_id: u32) -> Vec<u8> {
    params
        .shuffle
        .as_ref()
        .expect("shuffled")
        .keys
        .iter()
        .find(|k| k.key_id == key_id)
        .expect("the key")
        .public_key
        .clone()
}

/// A key partition: the aggregator answers other key bytes under a key id the relay
/// pinned (an aggregator with two master secrets behind one address would, after the
/// relay's cache expired). The relay serves devices only the first bytes, and holds
/// the collection while the aggregator answers others: devices are refused, no batch
/// is formed or forwarded, the status says why and counts the conflict — across a
/// restart. When the aggregator answers the pinned bytes again, the held window
/// (sealed to the pinned key only) is forwarded.
#[tokio::test]
async fn a_key_partition_holds_the_collection_and_devices_only_see_pinned_bytes() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 2, 1), true);
    let config = Config {
        collection_ttl: Duration::from_millis(100),
        ..Config::default()
    };
    let aggregator = fake.serve().await;
    let relay = Relay::start_with(aggregator, tempfile::tempdir().expect("dir"), config).await;
    let view = relay
        .get_collection("d0", "s")
        .await
        .expect("the relay's view");
    assert_eq!(served_key(&view, ACTIVE_KEY), vec![1; 32]);
    let relay_key = view
        .shuffle
        .as_ref()
        .and_then(|s| s.relay_key.clone())
        .expect("the relay's key");
    assert_eq!(
        relay_key.public_key,
        support::relay::layer_key()
            .public_config()
            .public_key
            .to_vec()
    );
    // One report in the window (a batch needs 2): pinned-key reports waiting.
    assert!(
        !relay
            .submit(Some(&relay.token("d0")), "s", 1, sealed(1))
            .await
            .expect("stored")
    );

    // The aggregator now answers other bytes under the same id.
    set_key_bytes(&fake, "s", ACTIVE_KEY, 2);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let held = relay.get_collection("d1", "s").await.expect_err("held");
    assert_eq!(held.code(), Code::FailedPrecondition, "{held:?}");
    assert!(held.message().contains("is held"), "{}", held.message());
    let refused = relay
        .submit(Some(&relay.token("d1")), "s", 2, sealed(2))
        .await
        .expect_err("held");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    let status = relay.status("s").await;
    assert!(status.held.contains("key id 100"), "{}", status.held);
    assert!(status.key_conflicts >= 1);
    assert!(status.last_key_conflict > 0);
    assert_eq!(status.window_reports, 1);

    // Across a restart the first bytes stay pinned: still held.
    let dir = relay.stop().await;
    let relay = Relay::start_with(aggregator, dir, config).await;
    let held = relay
        .get_collection("d1", "s")
        .await
        .expect_err("held after a restart");
    assert_eq!(held.code(), Code::FailedPrecondition);
    assert!(relay.status("s").await.key_conflicts >= 1);
    // A second device's report cannot complete the batch meanwhile.
    assert!(
        relay
            .submit(Some(&relay.token("d1")), "s", 2, sealed(2))
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        fake.state().calls.is_empty(),
        "a held collection forwarded a batch"
    );

    // The pinned bytes again: served, and the batch forms and is forwarded.
    set_key_bytes(&fake, "s", ACTIVE_KEY, 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let view = relay.get_collection("d1", "s").await.expect("served again");
    assert_eq!(served_key(&view, ACTIVE_KEY), vec![1; 32]);
    assert!(relay.status("s").await.held.is_empty());
    assert!(
        !relay
            .submit(Some(&relay.token("d1")), "s", 2, sealed(2))
            .await
            .expect("stored")
    );
    wait_for("the batch", || !fake.state().calls.is_empty()).await;
    let calls = fake.state().calls.clone();
    let mut tags: Vec<u64> = calls[0].reports().iter().map(tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, [1, 2]);
    relay.stop().await;
}

/// The hop test: the bytes a device sends the relay and the bytes the aggregator
/// receives share no 32-byte window (the relay's layer makes them differ entirely),
/// while the aggregator does receive each device's inner sealed report intact.
#[tokio::test]
async fn the_bytes_a_device_sends_share_no_32_byte_window_with_what_the_aggregator_receives() {
    use prost::Message;
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 3, 1), true);
    let relay = Relay::start(fake.serve().await).await;
    // Real HPKE ciphertexts (random-looking bytes), as a device's inner report is.
    let aggregator_key =
        ldpcov_seal::RelayKey::from_secret(&ldpcov_seal::MasterSecret::from_bytes([9; 32]));
    let mut sent = Vec::new();
    let mut inner = Vec::new();
    for d in 0..3u8 {
        let mut config = aggregator_key.public_config();
        config.key_id = ACTIVE_KEY;
        let plaintext: Vec<u8> = (0..200u32).map(|i| (i * 7 + u32::from(d)) as u8).collect();
        let sealed = ldpcov_seal::seal_with_os_rng(&config, "s", &plaintext).expect("seal");
        let sealed = SealedReport {
            key_id: sealed.key_id,
            enc: sealed.enc,
            ciphertext: sealed.ciphertext,
        };
        let request = RelayReport {
            collection_id: "s".into(),
            submission_id: vec![d; 16],
            outer: Some(support::relay::outer("s", &sealed)),
        };
        sent.push(request.encode_to_vec());
        inner.push(sealed);
        let mut call = Request::new(request);
        call.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", relay.token(&format!("hop-{d}")))
                .parse()
                .expect("ascii"),
        );
        relay
            .client()
            .await
            .submit_sealed_report(call)
            .await
            .expect("stored");
    }
    wait_for("the batch", || !fake.state().calls.is_empty()).await;
    let received: Vec<u8> = fake.state().calls[0]
        .chunks
        .iter()
        .flat_map(|c| c.encode_to_vec())
        .collect();
    let windows: std::collections::HashSet<&[u8]> = received.windows(32).collect();
    for bytes in &sent {
        assert!(
            bytes.windows(32).all(|w| !windows.contains(w)),
            "a 32-byte window of a device's request reached the aggregator"
        );
    }
    // What the aggregator gets is each inner sealed report, unchanged.
    let mut got = fake.state().calls[0].reports();
    got.sort_by(|a, b| a.enc.cmp(&b.enc));
    inner.sort_by(|a, b| a.enc.cmp(&b.enc));
    assert_eq!(got, inner);
    relay.stop().await;
}

/// The Sybil cap: with a cap of 3 new devices per window, the fourth device new to the
/// relay is refused RESOURCE_EXHAUSTED and nothing of it is stored; the status shows
/// the window's new devices and each batch's. A device the relay stored a report of
/// before the window opened is not new.
#[tokio::test]
async fn the_new_device_cap_refuses_the_cap_plus_first_new_device_and_status_shows_the_share() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 3, 1), true);
    fake.add(shuffled_spec("t", 2, 3600), true);
    let config = Config {
        new_device_cap: 3,
        ..Config::default()
    };
    let relay = Relay::start_with(
        fake.serve().await,
        tempfile::tempdir().expect("dir"),
        config,
    )
    .await;
    for d in 0..3u8 {
        relay
            .submit(
                Some(&relay.token(&format!("d{d}"))),
                "s",
                d,
                sealed(u64::from(d)),
            )
            .await
            .expect("stored");
    }
    let status = relay.status("s").await;
    assert_eq!(
        (
            status.window_reports,
            status.window_new_devices,
            status.new_device_cap
        ),
        (3, 3, 3)
    );
    let refused = relay
        .submit(Some(&relay.token("d3")), "s", 3, sealed(3))
        .await
        .expect_err("above the cap");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        relay.status("s").await.window_reports,
        3,
        "nothing of it stored"
    );
    wait_for("the batch", || !fake.state().calls.is_empty()).await;
    let status = relay.status("s").await;
    assert_eq!(status.recent_batches.len(), 1);
    assert_eq!(
        (
            status.recent_batches[0].reports,
            status.recent_batches[0].new_devices
        ),
        (3, 3)
    );
    // A later window of another collection: d0 was first seen before it opened (a
    // second later at least), so it is not new; a fresh id is.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    relay
        .submit(Some(&relay.token("d0")), "t", 10, sealed(10))
        .await
        .expect("stored");
    relay
        .submit(Some(&relay.token("fresh")), "t", 11, sealed(11))
        .await
        .expect("stored");
    let status = relay.status("t").await;
    assert_eq!((status.window_reports, status.window_new_devices), (2, 1));
    relay.stop().await;
}

/// A collection whose central δ is at least 1/n at the relay's floor is refused: δ·n
/// ≥ 1 allows a mechanism that publishes a report outright. (The aggregator refuses to
/// create one; a hostile aggregator announces it anyway, as the fake does here.)
#[tokio::test]
async fn a_delta_of_at_least_one_over_n_at_the_floor_is_refused() {
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec("s", 4, 1), true);
    if let Some(shuffle) = fake
        .state()
        .collections
        .get_mut("s")
        .and_then(|p| p.spec.as_mut())
        .and_then(|spec| spec.shuffle.as_mut())
    {
        shuffle.central_delta = 0.3;
    }
    let relay = Relay::start(fake.serve().await).await;
    let refused = relay
        .get_collection("d0", "s")
        .await
        .expect_err("δ·n = 1.2");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains("δ·n ≥ 1"),
        "{}",
        refused.message()
    );
    let refused = relay
        .submit(Some(&relay.token("d0")), "s", 1, sealed(1))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    relay.stop().await;
}
