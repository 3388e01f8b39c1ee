//! End to end with the real aggregator: an embedded aggregator (relay token, its own
//! HPKE master secret), the relay in-process on a durable store, and devices that
//! build rank-one reports with `ldpcov_client` and seal them to the collection's
//! active key (`AggregatorClient::with_relay` + `submit`). The aggregator must count
//! exactly the reports the relay acknowledged, each once, and open every one of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_proto::v1::RelayStatusRequest;
use ldpcov_proto::v1::relay_client::RelayClient;
use ldpcov_relay::{DeviceTokenIssuer, RelayOptions, RelayStore, Secret, Upstream};
use rand::{Rng, SeedableRng};
use tonic::Request;

use crate::support;
use crate::support::embedded::RELAY_TOKEN;
use crate::support::fake_aggregator::shuffled_spec;
use crate::support::relay::InProcessRelay;

const ADMIN: &str = "aggregator-admin";
const RELAY_ADMIN: &str = "relay-admin";
const MIN: u64 = 20;
const DEVICES: u64 = 70;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aggregator_counts_exactly_what_the_relay_acknowledged() {
    // The aggregator: admin token, the relay's token; its HPKE secret is generated.
    let (aggregator, mut admin) = support::embedded::embedded_aggregator(ADMIN).await;
    admin
        .create_collection(shuffled_spec("e2e", MIN, 1))
        .await
        .expect("create");

    // The relay.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(RelayStore::open(dir.path()).expect("store"));
    let issuer = DeviceTokenIssuer::from_bytes([5; 32]);
    let upstream = Upstream::new(
        &aggregator.url(),
        Secret::new(RELAY_TOKEN, "relay").expect("token"),
        None,
    )
    .expect("upstream");
    let options = RelayOptions {
        admin: Some(Secret::new(RELAY_ADMIN, "admin").expect("admin")),
        batch_check_interval: Duration::from_millis(50),
        floor: ldpcov_relay::CloseRule {
            min_batch_size: MIN,
            window_seconds: 0,
        },
        ..RelayOptions::new(upstream, issuer.clone())
    };
    let relay = InProcessRelay::serve(store, options).await;
    let relay_url = relay.url();

    // Devices: each its own token and sampler, reports built and sealed by the client.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut stored = 0u64;
    for d in 0..DEVICES {
        let channel = tonic::transport::Endpoint::from_shared(relay_url.clone())
            .expect("url")
            .connect_lazy();
        let token = issuer.issue(&format!("phone-{d}")).expect("id");
        let mut device = AggregatorClient::connect(aggregator.url())
            .await
            .expect("connect")
            .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(100 + d))
            .with_relay(channel, &token)
            .expect("relay");
        let collection = device.collection("e2e").await.expect("collection");
        let x: Vec<f64> = (0..4).map(|_| rng.random_range(-0.5..0.5)).collect();
        let outcome = device.submit(&collection, &x).await.expect("submit");
        if !outcome.duplicate {
            stored += 1;
        }
        // A second report of this device in the same window is refused by the relay.
        if d == 0 {
            let err = device.submit(&collection, &x).await.expect_err("twice");
            assert!(err.to_string().contains("already sent a report"), "{err}");
        }
    }
    assert_eq!(stored, DEVICES);

    // Top up to the minimum (more devices), then wait for the aggregator's count.
    let mut relay_admin = RelayClient::connect(relay_url.clone())
        .await
        .expect("relay admin");
    let mut extra = DEVICES;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut request = Request::new(RelayStatusRequest {
            collection_id: "e2e".into(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {RELAY_ADMIN}").parse().expect("ascii"),
        );
        let status = relay_admin
            .get_relay_status(request)
            .await
            .expect("status")
            .into_inner();
        if status.window_reports == 0 && status.pending_batches == 0 {
            assert_eq!(status.forwarded_reports, stored);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the relay did not drain: {status:?}"
        );
        if status.window_reports > 0 && status.window_reports < MIN {
            let channel = tonic::transport::Endpoint::from_shared(relay_url.clone())
                .expect("url")
                .connect_lazy();
            let token = issuer.issue(&format!("phone-{extra}")).expect("id");
            let mut device = AggregatorClient::connect(aggregator.url())
                .await
                .expect("connect")
                .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(
                    100 + extra,
                ))
                .with_relay(channel, &token)
                .expect("relay");
            let collection = device.collection("e2e").await.expect("collection");
            device
                .submit(&collection, &[0.1, 0.2, -0.1, 0.0])
                .await
                .expect("submit");
            stored += 1;
            extra += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The aggregator opened and counted every acknowledged report, once.
    let count = admin.status("e2e").await.expect("status").reports;
    assert_eq!(count, stored);

    relay
        .stop()
        .await
        .expect("the relay stopped")
        .expect("relay served");
    aggregator.shutdown().await.expect("aggregator");
}
