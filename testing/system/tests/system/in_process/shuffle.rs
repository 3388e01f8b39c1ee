//! Shuffled collections on the aggregator, through the real gRPC server
//! (docs/PRIVACY.md §9): the published keys and central guarantee, the refusal of
//! direct reports, and the relay's batch stream — only with the relay's token, never
//! below the minimum batch size, each sealed report opened and checked alone (bad
//! ones refused by position, the rest counted), a resent batch counted once. The
//! relay daemon itself is tested in `relay/`.

use std::sync::Arc;

use crate::support::relay::InProcessRelay;
use ldpcov_aggregator::{AuthConfig, EmbeddedServer, Limits, MemoryStore, ServeOptions, Token};
use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, GetEstimateRequest, GetStatusRequest, HpkeKeyState, LocalMechanism, Report,
    SealedReport, ShuffleSpec, ShuffledBatchChunk, ShuffledBatchResponse,
};
use tonic::Code;
use tonic::metadata::MetadataValue;

const ADMIN: &str = "admin-secret";
const RELAY: &str = "relay-secret";
const MIN_BATCH: u64 = 40;

async fn server(relay_tokens: &[&str]) -> EmbeddedServer {
    server_on(Arc::new(MemoryStore::new()), relay_tokens).await
}

/// [`server`] on a given store.
async fn server_on(
    store: Arc<dyn ldpcov_aggregator::Store>,
    relay_tokens: &[&str],
) -> EmbeddedServer {
    let auth = AuthConfig::new(Some(Token::new(ADMIN, "admin").unwrap()), Vec::new())
        .unwrap()
        .with_relay_tokens(
            relay_tokens
                .iter()
                .map(|t| Token::new(t, "relay").unwrap())
                .collect(),
        )
        .unwrap();
    EmbeddedServer::start_with_options(
        store,
        ServeOptions {
            limits: Limits::default(),
            auth: Arc::new(auth),
            ..ServeOptions::default()
        },
    )
    .await
    .unwrap()
}

fn shuffled_spec(id: &str) -> CollectionSpec {
    CollectionSpec {
        collection_id: id.into(),
        dim: 6,
        epsilon: 4.0,
        delta: 0.0,
        clip_radius: 1.0,
        min_reports: 10,
        local_mechanism: LocalMechanism::RankOne as i32,
        shuffle: Some(ShuffleSpec {
            min_batch_size: MIN_BATCH,
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn admin(url: &str) -> AggregatorClient {
    AggregatorClient::connect(url.to_string())
        .await
        .unwrap()
        .with_token(ADMIN.into())
        .unwrap()
}

/// A device client of the aggregator at `url` whose relay is `relay`: it reads a
/// shuffled collection's keys from the relay's pinned copy (only
/// `prepare_relay_report` is used where the test plays the relay's batch stream).
async fn device(url: &str, relay: &Relay, seed: u64) -> AggregatorClient {
    named_device(url, relay, seed, "device")
}

/// [`device`] with the device id `name` (one report per device per collection).
fn named_device(url: &str, relay: &Relay, seed: u64, name: &str) -> AggregatorClient {
    let channel = tonic::transport::Endpoint::from_shared(relay.url.clone())
        .unwrap()
        .connect_lazy();
    // Lazily: a device of a shuffled collection never opens a connection to `url`.
    AggregatorClient::connect_lazy(url.to_string())
        .unwrap()
        .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(seed))
        .with_relay(channel, &relay.issuer.issue(name).unwrap())
        .unwrap()
}

/// A listener that counts the connections made to it and answers none: the address
/// devices are given as their aggregator, to show that they never call it.
async fn canary() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, connections)
}

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        MetadataValue::try_from(format!("Bearer {token}")).unwrap(),
    );
    request
}

/// Sends `reports` as one batch in chunks of 16, as a relay would.
async fn send_batch(
    url: &str,
    token: &str,
    collection: &str,
    batch_id: [u8; 16],
    batch_size: u64,
    reports: &[SealedReport],
) -> Result<ShuffledBatchResponse, tonic::Status> {
    let mut raw = RawClient::connect(url.to_string()).await.unwrap();
    let chunks: Vec<ShuffledBatchChunk> = reports
        .chunks(16)
        .map(|c| ShuffledBatchChunk {
            collection_id: collection.into(),
            batch_id: batch_id.to_vec(),
            batch_size,
            reports: c.to_vec(),
        })
        .collect();
    raw.submit_shuffled_batch(with_token(tokio_stream::iter(chunks), token))
        .await
        .map(tonic::Response::into_inner)
}

async fn count(url: &str, id: &str) -> u64 {
    let mut raw = RawClient::connect(url.to_string()).await.unwrap();
    raw.get_status(GetStatusRequest {
        collection_id: id.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .reports
}

/// `n` sealed reports of users at x = e₁/2 (any data would do: only counts are checked).
/// The keys come through a real in-process relay (a device reads them there), which
/// forwards nothing: the test sends the batch itself.
async fn sealed_reports(url: &str, id: &str, n: usize) -> Vec<SealedReport> {
    let relay = relay(url).await;
    let mut device = device(url, &relay, 7).await;
    let collection = device.collection(id).await.unwrap();
    let mut x = vec![0.0; collection.dim()];
    x[0] = 0.5;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(
            device
                .prepare_sealed_report(&collection, &x)
                .await
                .unwrap()
                .1,
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shuffled_collection_publishes_its_keys_and_central_guarantee_and_refuses_direct_reports()
{
    let server = server(&[RELAY]).await;
    let url = server.url();
    let params = admin(&url)
        .await
        .create_collection(shuffled_spec("s"))
        .await
        .unwrap();
    let shuffle = params.shuffle.expect("a shuffled collection's parameters");
    assert_eq!(shuffle.local_epsilon, 4.0);
    assert_eq!(shuffle.min_batch_size, MIN_BATCH);
    // Amplification at n = 40 is weak but real: 0 < ε < ε0.
    assert!(shuffle.central_epsilon > 0.0 && shuffle.central_epsilon < 4.0);
    let states: Vec<i32> = shuffle.keys.iter().map(|k| k.state).collect();
    assert_eq!(
        states,
        [HpkeKeyState::Pending as i32, HpkeKeyState::Active as i32]
    );
    assert!(shuffle.keys.iter().all(|k| k.public_key.len() == 32));

    // A direct report (a well-formed one, built by the client for this collection):
    // FAILED_PRECONDITION, nothing counted; the client's own submit refuses without a
    // relay before drawing noise.
    let mut plain = AggregatorClient::connect(url.clone()).await.unwrap();
    let collection = plain.collection("s").await.unwrap();
    let report = plain.prepare_report(&collection, &[0.0; 6]).unwrap();
    let status = plain.submit_report(report).await.unwrap_err();
    let status = status.status().unwrap();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("shuffled"), "{status:?}");
    let err = plain.submit(&collection, &[0.0; 6]).await.unwrap_err();
    assert!(err.to_string().contains("relay"), "{err}");
    assert_eq!(count(&url, "s").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_taken_from_the_relay_token_only_and_never_below_the_minimum() {
    let server = server(&[RELAY]).await;
    let url = server.url();
    admin(&url)
        .await
        .create_collection(shuffled_spec("s"))
        .await
        .unwrap();
    let reports = sealed_reports(&url, "s", MIN_BATCH as usize).await;
    // The admin token, no token, a wrong token: refused, nothing counted.
    for (token, code) in [
        (ADMIN, Code::PermissionDenied),
        ("wrong", Code::Unauthenticated),
    ] {
        let status = send_batch(&url, token, "s", [1; 16], MIN_BATCH, &reports)
            .await
            .unwrap_err();
        assert_eq!(status.code(), code, "{status:?}");
    }
    // One report short of the minimum: FAILED_PRECONDITION before anything is opened.
    let short = &reports[..MIN_BATCH as usize - 1];
    let status = send_batch(&url, RELAY, "s", [2; 16], MIN_BATCH - 1, short)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains("minimum batch size"),
        "{status:?}"
    );
    // A stream that announces the minimum but carries fewer: INVALID_ARGUMENT, and what
    // it did carry is said to be counted (a resent batch counts it once).
    let status = send_batch(&url, RELAY, "s", [3; 16], MIN_BATCH, short)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(count(&url, "s").await, MIN_BATCH - 1);
    // The whole batch: the missing report is counted, the others come back duplicates.
    let whole = send_batch(&url, RELAY, "s", [3; 16], MIN_BATCH, &reports)
        .await
        .unwrap();
    assert_eq!((whole.accepted, whole.duplicates), (1, MIN_BATCH - 1));
    assert_eq!(count(&url, "s").await, MIN_BATCH);
    // The estimate carries the guarantee its reports had.
    let estimate = admin(&url)
        .await
        .estimate(GetEstimateRequest {
            collection_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let shuffle = estimate.shuffle.expect("the estimate's shuffle guarantee");
    assert_eq!(
        (shuffle.local_epsilon, shuffle.min_batch_size),
        (4.0, MIN_BATCH)
    );
    assert!(shuffle.central_epsilon < 4.0 && shuffle.keys.is_empty());

    // An aggregator with no relay token takes no batch at all.
    let closed = server_without_relay().await;
    let status = send_batch(&closed.url(), RELAY, "s", [4; 16], MIN_BATCH, &reports)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
}

async fn server_without_relay() -> EmbeddedServer {
    server(&[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_counts_its_good_reports_once_and_refuses_bad_ones_by_position() {
    let server = server(&[RELAY]).await;
    let url = server.url();
    let mut admin = admin(&url).await;
    // ε0 = 1: at batches of 36–40 the bound amplifies (0.92 / 0.89 / 0.85 at
    // δ = 1e-6), so a batch that delivers fewer users shows a larger ε.
    let params = admin
        .create_collection(CollectionSpec {
            epsilon: 1.0,
            ..shuffled_spec("s")
        })
        .await
        .unwrap();
    admin
        .create_collection(shuffled_spec("other"))
        .await
        .unwrap();
    let mut reports = sealed_reports(&url, "s", MIN_BATCH as usize).await;
    // Position 5: a flipped ciphertext bit (the AEAD refuses it). Position 17: another
    // collection's report (its associated data binds it there: the relay cannot move
    // it). Position 30: a key id the collection never published.
    reports[5].ciphertext[3] ^= 1;
    reports[17] = sealed_reports(&url, "other", 1).await.remove(0);
    reports[30].key_id += 5;
    let response = send_batch(&url, RELAY, "s", [9; 16], MIN_BATCH, &reports)
        .await
        .unwrap();
    let refused: Vec<(u64, i32)> = response.refused.iter().map(|r| (r.index, r.code)).collect();
    assert_eq!(
        refused,
        [
            (5, Code::InvalidArgument as i32),
            (17, Code::InvalidArgument as i32),
            (30, Code::InvalidArgument as i32)
        ],
        "{:?}",
        response.refused
    );
    assert_eq!((response.accepted, response.duplicates), (MIN_BATCH - 3, 0));
    assert_eq!(count(&url, "s").await, MIN_BATCH - 3);
    assert_eq!(count(&url, "other").await, 0);
    // The batch delivered 37 users, not the 40 announced: status and estimates show
    // the guarantee at 37, which is weaker than the announced one (fewer users to hide
    // among) and computed by the privacy crate, not by the store.
    let (announced, delivered) = guarantee(&url, "s").await;
    assert_eq!(
        (delivered.batches, delivered.smallest_batch),
        (1, MIN_BATCH - 3)
    );
    let collection = ldpcov_privacy::Collection::from_spec(params.spec.as_ref().unwrap()).unwrap();
    let at_37 = collection.shuffled_privacy_at(MIN_BATCH - 3).unwrap();
    assert_eq!(delivered.central_epsilon, at_37.central_epsilon);
    assert!(
        delivered.central_epsilon > announced,
        "{delivered:?} {announced}"
    );
    assert!(
        delivered.central_epsilon < 4.0,
        "still amplified: {delivered:?}"
    );
    // The relay resends the batch (its acknowledgement was lost): nothing twice.
    let again = send_batch(&url, RELAY, "s", [9; 16], MIN_BATCH, &reports)
        .await
        .unwrap();
    assert_eq!((again.accepted, again.duplicates), (0, MIN_BATCH - 3));
    assert_eq!(count(&url, "s").await, MIN_BATCH - 3);
    // An empty ciphertext in the batch is refused too (another batch id: a new batch
    // whose good reports are all duplicates of the first batch's).
    let mut junk = reports.clone();
    junk[0].ciphertext = Report::default().payload;
    let response = send_batch(&url, RELAY, "s", [10; 16], MIN_BATCH, &junk)
        .await
        .unwrap();
    assert_eq!(response.refused.len(), 4);
    assert_eq!(response.duplicates, MIN_BATCH - 4);
    // Three completed batches (the resend counts as one). The last one's good reports
    // were all counted in the first batch: it delivered no user (a report id counts
    // toward one batch only), so the guarantee falls to no amplification.
    let (_, delivered) = guarantee(&url, "s").await;
    assert_eq!((delivered.batches, delivered.smallest_batch), (3, 0));
    assert_eq!(
        delivered.central_epsilon,
        collection.shuffled_privacy_at(0).unwrap().central_epsilon
    );
    assert!(delivered.central_epsilon > at_37.central_epsilon);
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    let estimate = raw
        .get_estimate(with_token(
            GetEstimateRequest {
                collection_id: "s".into(),
                ..Default::default()
            },
            ADMIN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(estimate.shuffle_delivered, Some(delivered));
}

/// The delivered figure counts a report id once per collection, toward the batch id
/// that first counted it: a batch padded with reports another batch counted delivers
/// only its new ones, while a batch resent under its own id (whole, or after a first
/// send broken part-way) gets its own earlier-counted reports back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_delivers_only_the_reports_first_counted_under_its_id() {
    let server = server(&[RELAY]).await;
    let url = server.url();
    let mut admin = admin(&url).await;
    // ε0 = 1: a batch of 40 amplifies (see above), one of 10 users does not.
    let params = admin
        .create_collection(CollectionSpec {
            epsilon: 1.0,
            ..shuffled_spec("s")
        })
        .await
        .unwrap();
    admin
        .create_collection(shuffled_spec("partial"))
        .await
        .unwrap();
    let n = MIN_BATCH as usize;
    let fresh = sealed_reports(&url, "s", n + 10).await;
    let (b1, new) = fresh.split_at(n);
    let delivered = |id: &'static str| {
        let url = url.clone();
        async move {
            let (_, d) = guarantee(&url, id).await;
            (d.batches, d.smallest_batch)
        }
    };
    // B1: 40 new reports, 40 users.
    let first = send_batch(&url, RELAY, "s", [1; 16], MIN_BATCH, b1)
        .await
        .unwrap();
    assert_eq!((first.accepted, first.duplicates), (MIN_BATCH, 0));
    assert_eq!(delivered("s").await, (1, MIN_BATCH));
    // B1 resent unchanged (its acknowledgement was lost): its duplicates are its own
    // reports, so it still delivered 40.
    let again = send_batch(&url, RELAY, "s", [1; 16], MIN_BATCH, b1)
        .await
        .unwrap();
    assert_eq!((again.accepted, again.duplicates), (0, MIN_BATCH));
    assert_eq!(delivered("s").await, (2, MIN_BATCH));
    // B2, another batch id: 10 new reports padded with 30 of B1's. Only the 10 are
    // its users, whatever it announces.
    let mut padded = new.to_vec();
    padded.extend_from_slice(&b1[..30]);
    let second = send_batch(&url, RELAY, "s", [2; 16], MIN_BATCH, &padded)
        .await
        .unwrap();
    assert_eq!((second.accepted, second.duplicates), (10, 30));
    assert_eq!(count(&url, "s").await, MIN_BATCH + 10);
    assert_eq!(delivered("s").await, (3, 10));
    let collection = ldpcov_privacy::Collection::from_spec(params.spec.as_ref().unwrap()).unwrap();
    let (_, shown) = guarantee(&url, "s").await;
    assert_eq!(
        shown.central_epsilon,
        collection.shuffled_privacy_at(10).unwrap().central_epsilon
    );
    assert!(
        shown.central_epsilon
            > collection
                .shuffled_privacy_at(MIN_BATCH)
                .unwrap()
                .central_epsilon
    );
    // B2 resent: it still delivered 10 (its 30 borrowed reports stay B1's).
    let resent = send_batch(&url, RELAY, "s", [2; 16], MIN_BATCH, &padded)
        .await
        .unwrap();
    assert_eq!((resent.accepted, resent.duplicates), (0, MIN_BATCH));
    assert_eq!(delivered("s").await, (4, 10));

    // A first send broken after its first chunk (16 reports counted, the batch not
    // complete, nothing recorded), then the whole batch resent: the first chunk's
    // reports come back as duplicates that are the batch's own, so it delivered 40.
    let reports = sealed_reports(&url, "partial", n).await;
    let broken = send_batch(&url, RELAY, "partial", [3; 16], MIN_BATCH, &reports[..16])
        .await
        .unwrap_err();
    assert_eq!(broken.code(), Code::InvalidArgument, "{broken:?}");
    assert_eq!(count(&url, "partial").await, 16);
    assert_eq!(delivered("partial").await, (0, 0));
    let whole = send_batch(&url, RELAY, "partial", [3; 16], MIN_BATCH, &reports)
        .await
        .unwrap();
    assert_eq!((whole.accepted, whole.duplicates), (MIN_BATCH - 16, 16));
    assert_eq!(delivered("partial").await, (1, MIN_BATCH));
}

/// A shuffled collection's announced central ε and what its batches delivered, from
/// its status.
async fn guarantee(url: &str, id: &str) -> (f64, ldpcov_proto::v1::ShuffleDelivered) {
    let mut raw = RawClient::connect(url.to_string()).await.unwrap();
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: id.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let announced = status.params.unwrap().shuffle.unwrap().central_epsilon;
    (announced, status.shuffle_delivered.unwrap())
}

/// An in-process `ldpcov-relay` (durable store in a temporary directory) forwarding
/// to `aggregator` with the relay token.
struct Relay {
    url: String,
    issuer: ldpcov_relay::DeviceTokenIssuer,
    /// Served until dropped.
    _relay: InProcessRelay,
    _dir: tempfile::TempDir,
}

async fn relay(aggregator: &str) -> Relay {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(ldpcov_relay::RelayStore::open(dir.path()).unwrap());
    let upstream = ldpcov_relay::Upstream::new(
        aggregator,
        ldpcov_relay::Secret::new(RELAY, "relay").unwrap(),
        None,
    )
    .unwrap();
    let issuer = ldpcov_relay::DeviceTokenIssuer::from_bytes([7; 32]);
    let mut options = ldpcov_relay::RelayOptions::new(upstream, issuer.clone());
    options.batch_check_interval = std::time::Duration::from_millis(100);
    options.floor.min_batch_size = MIN_BATCH;
    let relay = InProcessRelay::serve(store, options).await;
    Relay {
        url: relay.url(),
        issuer,
        _relay: relay,
        _dir: dir,
    }
}

/// Devices → the real relay → the real aggregator, each with its durable store. Every user sends x = u with
/// ‖u‖ = R = 1, so the second moment is exactly uuᵀ and the raw average's error is the
/// mechanism's noise alone: the planner's `raw_average_error(n, s = 1)` predicts its
/// Frobenius norm. The noise matrix has p(p+1)/2 = 820 weakly dependent entries at
/// p = 40, so its Frobenius norm has a relative sd of about 1/p = 2.5 %: a 10 % band
/// is 4 sd wide and fails for a wrong κ, dither or count (each moves it by > 10 %).
/// The count must equal what the relay acknowledged, once, and a device's second
/// report in the window is refused by the relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_through_the_real_relay_are_counted_once_with_the_planned_error() {
    const P: usize = 40;
    const N: u64 = 1200;
    const WINDOW_SECS: u64 = 30;
    // Both durable: the aggregator on redb in a temporary directory (the relay's store
    // is always durable).
    let data = tempfile::tempdir().unwrap();
    let store = ldpcov_aggregator::DurableStore::open(data.path(), Default::default()).unwrap();
    let server = server_on(Arc::new(store), &[RELAY]).await;
    let url = server.url();
    let spec = CollectionSpec {
        dim: P as u32,
        min_reports: 100,
        moments: ldpcov_proto::v1::Moments::SecondMoment as i32,
        // Every report must land in the first window, so that one batch carries all
        // of them: sending 1 200 takes a few seconds, the window 30.
        shuffle: Some(ShuffleSpec {
            min_batch_size: 1000,
            batch_window_seconds: WINDOW_SECS,
            ..Default::default()
        }),
        ..shuffled_spec("e2e")
    };
    admin(&url).await.create_collection(spec).await.unwrap();
    let relay = relay(&url).await;
    let u: Vec<f64> = (0..P).map(|_| 1.0 / (P as f64).sqrt()).collect();

    // One user through the client's own path (`with_relay` + `submit`) …
    let channel = tonic::transport::Endpoint::from_shared(relay.url.clone())
        .unwrap()
        .connect_lazy();
    let mut first = AggregatorClient::connect(url.clone())
        .await
        .unwrap()
        .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(1))
        .with_relay(channel.clone(), &relay.issuer.issue("user-0").unwrap())
        .unwrap();
    let collection = first.collection("e2e").await.unwrap();
    let outcome = first.submit(&collection, &u).await.unwrap();
    assert!(!outcome.duplicate);
    // … whose second report in the same window the relay refuses.
    let err = first.submit(&collection, &u).await.unwrap_err();
    assert_eq!(
        err.status().map(|s| s.code()),
        Some(Code::AlreadyExists),
        "{err}"
    );

    // The others: prepared by one client, each sent under its own device token.
    let mut device = device(&url, &relay, 2).await;
    let raw = ldpcov_proto::v1::relay_client::RelayClient::new(channel);
    let mut acknowledged = 1u64;
    for user in 1..N {
        let prepared = device.prepare_relay_report(&collection, &u).await.unwrap();
        let token = relay.issuer.issue(&format!("user-{user}")).unwrap();
        let response = raw
            .clone()
            .submit_sealed_report(with_token(prepared.request, &token))
            .await
            .unwrap()
            .into_inner();
        assert!(!response.duplicate);
        acknowledged += 1;
    }
    // Nothing reaches the aggregator before the window closes (30 s after the first
    // report, with ≥ 1 000 in it); then one batch carries them all.
    assert_eq!(count(&url, "e2e").await, 0);
    let started = std::time::Instant::now();
    while count(&url, "e2e").await < acknowledged {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(WINDOW_SECS + 60),
            "the aggregator counts {} of {acknowledged}",
            count(&url, "e2e").await
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(count(&url, "e2e").await, acknowledged);

    let estimate = admin(&url)
        .await
        .estimate(GetEstimateRequest {
            collection_id: "e2e".into(),
            threshold: Some(ldpcov_proto::v1::get_estimate_request::Threshold::None(
                ldpcov_proto::v1::NoThreshold {},
            )),
            skip_psd_projection: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut error2 = 0.0;
    for ((i, j), v) in ldpcov_privacy::layout::triangle_pairs(P).zip(&estimate.upper_triangle) {
        let e = v - u[i] * u[j];
        error2 += if i == j { e * e } else { 2.0 * e * e };
    }
    let planned = ldpcov_privacy::plan::raw_average_error(&collection, acknowledged, 1.0);
    let ratio = error2.sqrt() / planned;
    eprintln!("measured / planned Frobenius error of the raw average: {ratio:.4}");
    assert!((0.9..=1.1).contains(&ratio), "measured / planned = {ratio}");
}

/// Devices of a shuffled collection take everything from the relay — the spec and
/// derived parameters (re-derived on the device), the keys as the relay pinned them,
/// the relay's own key — and never call the aggregator, which so never learns which
/// device asked or when. Their aggregator address here is a canary that counts
/// connections; the relay forwards to the real aggregator, which counts every report:
/// the devices' reports arrive, and the canary saw no connection at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_of_a_shuffled_collection_never_call_the_aggregator() {
    let honest = server(&[RELAY]).await;
    let honest_url = honest.url();
    let mut spec = shuffled_spec("s");
    if let Some(shuffle) = spec.shuffle.as_mut() {
        shuffle.batch_window_seconds = 1;
    }
    admin(&honest_url)
        .await
        .create_collection(spec)
        .await
        .unwrap();
    let relay = relay(&honest_url).await;
    let (canary_url, connections) = canary().await;
    for d in 0..MIN_BATCH {
        let mut device = named_device(&canary_url, &relay, 100 + d, &format!("d{d}"));
        let collection = device.collection("s").await.unwrap();
        let outcome = device
            .submit(&collection, &[0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
            .await
            .unwrap();
        assert!(!outcome.duplicate);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while count(&honest_url, "s").await < MIN_BATCH {
        assert!(
            std::time::Instant::now() < deadline,
            "the relay's batch never arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(count(&honest_url, "s").await, MIN_BATCH);
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a device of a shuffled collection connected to the aggregator"
    );
}
