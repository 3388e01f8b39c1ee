//! Issue 55: a relay that one closed collection, one outage or one wrong token cannot
//! take down — against the real aggregator (in-process, its gRPC server) and the
//! relay's real gRPC server (in-process, `ldpcov_relay::serve`), or its binary where
//! the exit is the point:
//!
//! * a collection closed, and another deleted, at the aggregator with reports pending
//!   at the relay: both retired with their counts in the relay's status, their
//!   devices refused FAILED_PRECONDITION, while the relay stays SERVING and another
//!   collection is forwarded and counted;
//! * the aggregator down for 30 s: health NOT_SERVING within the grace period (10 s,
//!   plus one check), SERVING within 1 s of its return, and the reports the relay
//!   acknowledged meanwhile counted afterwards;
//! * a relay token the aggregator refuses: the binary exits at start, one line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ldpcov_aggregator::{Limits, MemoryStore, ServeOptions};
use ldpcov_client::AggregatorClient;
use ldpcov_relay::{DeviceTokenIssuer, RelayOptions, RelayStore, Secret, Upstream};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::support;
use crate::support::embedded::RELAY_TOKEN;
use crate::support::fake_aggregator::shuffled_spec;
use crate::support::relay::InProcessRelay;

const ADMIN: &str = "availability-aggregator-admin";
const RELAY_ADMIN: &str = "availability-relay-admin";
const SECRET: [u8; 32] = [0x55; 32];

/// The tests of this file take turns: the outage test times health transitions.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An in-process relay over a durable store in a temporary directory.
struct Relay {
    url: String,
    _dir: tempfile::TempDir,
    relay: InProcessRelay,
}

impl Relay {
    /// Serves a relay forwarding to `aggregator`: a floor of 2 reports, no window
    /// minimum, a batch check every 50 ms, collection views kept for `view_ttl`.
    async fn start(aggregator: &str, view_ttl: Duration) -> Relay {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(RelayStore::open(&dir.path().join("data")).expect("store"));
        let upstream = Upstream::new(
            aggregator,
            Secret::new(RELAY_TOKEN, "relay").expect("token"),
            None,
        )
        .expect("upstream")
        .with_collection_ttl(view_ttl);
        let options = RelayOptions {
            admin: Some(Secret::new(RELAY_ADMIN, "admin").expect("admin")),
            batch_check_interval: Duration::from_millis(50),
            floor: ldpcov_relay::CloseRule {
                min_batch_size: 2,
                window_seconds: 0,
            },
            ..RelayOptions::new(upstream, DeviceTokenIssuer::from_bytes(SECRET))
        };
        let relay = InProcessRelay::serve(store, options).await;
        Relay {
            url: relay.url(),
            _dir: dir,
            relay,
        }
    }

    async fn channel(&self) -> Channel {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(c) = Channel::from_shared(self.url.clone())
                .expect("url")
                .connect()
                .await
            {
                return c;
            }
            assert!(Instant::now() < deadline, "the relay did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) {
        let _ = self.relay.stop().await;
    }
}

async fn health(channel: &Channel) -> i32 {
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map_or(-1, |r| r.into_inner().status)
}

/// A device that reads the collection from the relay and sends one real report
/// (sealed to the aggregator's key, then to the relay's).
async fn report(
    relay: &str,
    collection: &str,
    device: &str,
    seed: u64,
) -> Result<bool, ldpcov_client::ClientError> {
    let token = DeviceTokenIssuer::from_bytes(SECRET)
        .issue(device)
        .expect("token");
    let channel = Channel::from_shared(relay.to_string())
        .expect("url")
        .connect_lazy();
    let mut client = AggregatorClient::connect_lazy("http://127.0.0.1:9")
        .expect("lazy")
        .with_relay(channel, &token)?;
    let collection = client.collection(collection).await?;
    let x: Vec<f64> = (0..collection.dim())
        .map(|i| 0.1 * ((seed + i as u64) % 5) as f64)
        .collect();
    client.submit(&collection, &x).await.map(|o| !o.duplicate)
}

/// The reports the aggregator at `url` counts for `id` (0 while it cannot answer).
async fn counted(url: &str, id: &str) -> u64 {
    let Ok(client) = AggregatorClient::connect(url.to_string()).await else {
        return 0;
    };
    let mut admin = client.with_token(ADMIN.into()).expect("token");
    admin.status(id).await.map_or(0, |s| s.reports)
}

async fn relay_status(url: &str, id: &str) -> ldpcov_proto::v1::RelayStatus {
    support::relay::relay_status(url, id, RELAY_ADMIN)
        .await
        .expect("relay status")
}

/// Polls `check` every 50 ms for at most `limit`.
async fn within<F, Fut>(limit: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// Today's main acknowledged reports of a closed collection, then retried its batch
/// forever with health flapping, and stayed NOT_SERVING after a delete. Now each is
/// retired with its count, its devices are refused, and the relay stays SERVING and
/// forwards the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_and_deleted_collections_are_retired_and_the_relay_stays_serving() {
    let _turn = SERIAL.lock().await;
    let (aggregator, mut admin) = support::embedded::embedded_aggregator(ADMIN).await;
    // Batches of 3: two reports stay pending in each window.
    for id in ["kept", "closed", "deleted"] {
        admin
            .create_collection(shuffled_spec(id, 3, 1))
            .await
            .expect("create");
    }
    // Views kept 1 s: the relay sees a close or a delete within about a second.
    let relay = Relay::start(&aggregator.url(), Duration::from_secs(1)).await;
    let channel = relay.channel().await;
    for id in ["closed", "deleted", "kept"] {
        for d in 0..2 {
            let stored = report(&relay.url, id, &format!("{id}-{d}"), d)
                .await
                .expect("stored");
            assert!(stored);
        }
    }
    assert_eq!(relay_status(&relay.url, "closed").await.window_reports, 2);

    admin.close_collection("closed").await.expect("close");
    admin.delete_collection("deleted").await.expect("delete");
    // Health is sampled all along: never NOT_SERVING.
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let took = within(Duration::from_secs(15), "both retired", || {
        let samples = Arc::clone(&samples);
        let channel = channel.clone();
        let url = relay.url.clone();
        async move {
            let h = health(&channel).await;
            samples.lock().expect("samples").push(h);
            let closed = relay_status(&url, "closed").await;
            let deleted = relay_status(&url, "deleted").await;
            !closed.retired.is_empty() && !deleted.retired.is_empty()
        }
    })
    .await;
    println!("retired {took:?} after the close and the delete");
    let closed = relay_status(&relay.url, "closed").await;
    assert_eq!(closed.retired, "closed");
    assert_eq!(closed.retired_window_reports, 2, "{closed:?}");
    assert_eq!((closed.window_reports, closed.pending_batches), (0, 0));
    let deleted = relay_status(&relay.url, "deleted").await;
    assert_eq!(deleted.retired, "deleted");
    assert_eq!(deleted.retired_window_reports, 2, "{deleted:?}");

    // Their devices are refused, precisely; nothing stored.
    for id in ["closed", "deleted"] {
        let refused = report(&relay.url, id, &format!("{id}-late"), 9)
            .await
            .expect_err("a retired collection takes no report");
        let text = refused.to_string();
        assert!(text.contains("no more reports"), "{id}: {text}");
        assert!(text.contains(id), "{id}: {text}");
    }
    assert_eq!(relay_status(&relay.url, "closed").await.window_reports, 0);

    // The relay keeps serving the other collection: its third report completes the
    // batch, which the aggregator counts.
    assert!(
        report(&relay.url, "kept", "kept-2", 2)
            .await
            .expect("stored")
    );
    within(
        Duration::from_secs(15),
        "the kept batch is counted",
        || async { counted(&aggregator.url(), "kept").await == 3 },
    )
    .await;
    let mut samples = samples.lock().expect("samples").clone();
    for _ in 0..10 {
        samples.push(health(&channel).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        samples.iter().all(|s| *s == ServingStatus::Serving as i32),
        "health left SERVING: {samples:?}"
    );
    assert_eq!(relay_status(&relay.url, "kept").await.forwarded_reports, 3);
    relay.stop().await;
    aggregator.shutdown().await.expect("shutdown");
}

/// The aggregator over `store` on `addr` (restartable on the same address), with a
/// fixed HPKE master secret so that its keys survive the restart.
async fn aggregator_on(
    addr: SocketAddr,
    store: Arc<MemoryStore>,
    secret: Arc<ldpcov_seal::MasterSecret>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = ServeOptions {
        limits: Limits::default(),
        auth: Arc::new(support::embedded::aggregator_auth(ADMIN)),
        shuffle_secret: Some(secret),
        ..ServeOptions::default()
    };
    let task = tokio::spawn(async move {
        ldpcov_aggregator::serve_with(store, options, listener, async move {
            let _ = stopped.await;
        })
        .await
        .expect("aggregator");
    });
    (stop, task)
}

/// Today's main stayed SERVING with the aggregator down, refused devices
/// UNAVAILABLE and showed a pending age of 0. Now health is NOT_SERVING within the
/// grace period, SERVING within 1 s of the aggregator's return, and the reports
/// acknowledged meanwhile are counted after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregator_outage_shows_in_health_and_loses_no_report() {
    let _turn = SERIAL.lock().await;
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let url = format!("http://{addr}");
    let store = Arc::new(MemoryStore::new());
    let secret = Arc::new(ldpcov_seal::MasterSecret::generate().expect("secret"));
    let (stop, task) = aggregator_on(addr, Arc::clone(&store), Arc::clone(&secret)).await;
    let mut admin = AggregatorClient::connect(url.clone())
        .await
        .expect("connect")
        .with_token(ADMIN.into())
        .expect("token");
    admin
        .create_collection(shuffled_spec("outage", 2, 1))
        .await
        .expect("create");
    let relay = Relay::start(&url, Duration::from_secs(60)).await;
    let channel = relay.channel().await;
    // Two devices before the outage: the relay has its view, the batch is counted.
    for d in 0..2 {
        assert!(
            report(&relay.url, "outage", &format!("before-{d}"), d)
                .await
                .expect("stored")
        );
    }
    within(
        Duration::from_secs(15),
        "the first batch is counted",
        || async { counted(&url, "outage").await == 2 },
    )
    .await;
    assert_eq!(health(&channel).await, ServingStatus::Serving as i32);

    // The aggregator goes away.
    let _ = stop.send(());
    let _ = task.await;
    let down = Instant::now();
    // Devices are still served from the relay's view, and their reports stored.
    for d in 0..4 {
        assert!(
            report(&relay.url, "outage", &format!("during-{d}"), 10 + d)
                .await
                .expect("stored during the outage")
        );
    }
    let grace = ldpcov_relay::monitor::OUTAGE_GRACE;
    // NOT_SERVING once no check has found the aggregator answering for the grace
    // period: at most grace + one failing check (250 ms) after it went away (+ 1 s
    // for a loaded machine), and not before grace − one accepting check's pace (5 s:
    // the last answer may be that old).
    let limit = (grace + Duration::from_millis(1500)).saturating_sub(down.elapsed());
    within(limit, "NOT_SERVING", || async {
        health(&channel).await == ServingStatus::NotServing as i32
    })
    .await;
    let not_serving_after = down.elapsed();
    println!("NOT_SERVING {not_serving_after:?} after the aggregator went away");
    assert!(
        not_serving_after >= grace - ldpcov_relay::monitor::CHECK_EVERY,
        "NOT_SERVING before the grace period: {not_serving_after:?}"
    );
    let status = relay_status(&relay.url, "outage").await;
    assert!(status.aggregator.starts_with("unreachable"), "{status:?}");
    assert_eq!(status.window_reports, 4, "{status:?}");
    // Down for 30 s in all.
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(down.elapsed())).await;

    let (stop, task) = aggregator_on(addr, Arc::clone(&store), secret).await;
    let back = within(Duration::from_secs(1), "SERVING again", || async {
        health(&channel).await == ServingStatus::Serving as i32
    })
    .await;
    println!("SERVING {back:?} after the aggregator came back");
    let took = within(
        Duration::from_secs(10),
        "the outage's reports counted",
        || async { counted(&url, "outage").await == 6 },
    )
    .await;
    println!("counted {took:?} after SERVING");
    assert_eq!(
        relay_status(&relay.url, "outage").await.aggregator,
        "accepted"
    );
    relay.stop().await;
    let _ = stop.send(());
    let _ = task.await;
}

/// Today's main took a relay token the aggregator refuses and found out at the first
/// batch, possibly hours later. Now the binary exits at start with one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_token_the_aggregator_refuses_stops_the_relay_at_start() {
    let fake = support::fake_aggregator::FakeAggregator::default();
    fake.state().relay_token = Some("the-token-the-aggregator-knows".into());
    let aggregator = fake.serve().await;
    let dir = tempfile::tempdir().expect("tempdir");
    super::daemon::write_secrets(dir.path());
    let addr = support::crash::free_port();
    let mut child = super::daemon::spawn(
        addr,
        &format!("http://{aggregator}"),
        dir.path(),
        &dir.path().join("data"),
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the relay kept running with a refused token"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success());
    let log = std::fs::read_to_string(dir.path().join("relay.log")).expect("log");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.contains("refuses this relay's token") && last.contains("Unauthenticated"),
        "{log}"
    );
    // Nothing was served: the port is free.
    assert!(std::net::TcpStream::connect(addr).is_err());
}
