//! gRPC-Web on the `ldpcov-relay` binary (`serve --grpc-web --grpc-web-origin`), what a
//! browser device speaks: a client speaking gRPC-Web over HTTP/1.1 (tonic-web's client
//! layer over hyper's HTTP/1 client, as a browser's transport would) reads the pinned
//! collection and submits sealed reports, which the relay forwards as one batch; the
//! relay's own checks hold for it as for native gRPC (the device token before
//! anything, duplicates, tonic's decoding status made precise); CORS preflights are
//! answered for the allowed origin only; a relay without the flag does not speak it.

use std::path::Path;
use std::process::Child;

use ldpcov_proto::v1::relay_client::RelayClient;
use ldpcov_proto::v1::{GetCollectionRequest, RelayReport, RelayReportResponse};
use ldpcov_relay::DeviceTokenIssuer;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::{Code, Request};

use super::daemon::{SECRET, spawn, wait_until, write_secrets};
use crate::support;
use crate::support::crash::{free_port, kill as stop, wait_ready};
use crate::support::fake_aggregator::{FakeAggregator, sealed, shuffled_spec};
use crate::support::grpc::{assert_cors_preflights, web, with_token};

const ORIGIN: &str = "http://localhost:8080";
const COLLECTION: &str = "web";

/// The relay binary in `dir`, started with `flags` in front of a fake aggregator that
/// holds [`COLLECTION`] (minimum batch 2), once it answers: the fake (alive while it
/// is held), the relay's URL and its process.
async fn start_relay(dir: &Path, flags: &[&str]) -> (FakeAggregator, String, Child) {
    write_secrets(dir);
    let fake = FakeAggregator::default();
    fake.add(shuffled_spec(COLLECTION, 2, 1), true);
    let aggregator = format!("http://{}", fake.serve().await);
    let addr = free_port();
    let url = format!("http://{addr}");
    let relay = spawn(addr, &aggregator, dir, &dir.join("data"), flags);
    wait_ready(&url).await;
    (fake, url, relay)
}

/// `message` with device `device`'s token (none: without a token).
fn as_device<T>(message: T, device: Option<&str>) -> Request<T> {
    let token = device.map(|device| {
        DeviceTokenIssuer::from_bytes(SECRET)
            .issue(device)
            .expect("device id")
    });
    with_token(message, token.as_deref())
}

/// A report of [`COLLECTION`] whose sealed bytes carry `tag`.
fn report(tag: u64) -> RelayReport {
    RelayReport {
        collection_id: COLLECTION.into(),
        submission_id: tag.to_le_bytes().repeat(2),
        outer: Some(support::relay::outer(COLLECTION, &sealed(tag))),
    }
}

/// Not a `RelayReport`: field 1 is a varint where the relay expects a string.
#[derive(Clone, PartialEq, prost::Message)]
struct NotARelayReport {
    #[prost(uint64, tag = "1")]
    collection_id: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_web_reads_submits_and_forwards_with_the_relays_checks_and_cors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let (fake, url, mut relay) =
        start_relay(dir, &["--grpc-web", "--grpc-web-origin", ORIGIN]).await;
    let (service, origin) = web(&url);
    let mut client = RelayClient::with_origin(service.clone(), origin.clone());

    // The pinned collection over gRPC-Web, with a device token; refused without one.
    let lookup = || GetCollectionRequest {
        collection_id: COLLECTION.into(),
    };
    let refused = client
        .get_collection(as_device(lookup(), None))
        .await
        .expect_err("no device token");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let params = client
        .get_collection(as_device(lookup(), Some("phone-1")))
        .await
        .expect("GetCollection over gRPC-Web")
        .into_inner();
    assert_eq!(
        params.spec.as_ref().map(|s| s.collection_id.as_str()),
        Some(COLLECTION)
    );
    let shuffle = params.shuffle.expect("a shuffled collection");
    assert_eq!(shuffle.min_batch_size, 2);
    assert!(!shuffle.keys.is_empty(), "the keys of the relay's view");

    // A sealed report is stored once; without a token nothing is.
    let no_token = client
        .submit_sealed_report(as_device(report(1), None))
        .await
        .expect_err("no device token");
    assert_eq!(no_token.code(), Code::Unauthenticated, "{no_token:?}");
    let stored = client
        .submit_sealed_report(as_device(report(1), Some("phone-1")))
        .await
        .expect("SubmitSealedReport over gRPC-Web")
        .into_inner();
    assert!(!stored.duplicate);
    let again = client
        .submit_sealed_report(as_device(report(1), Some("phone-1")))
        .await
        .expect("a resend")
        .into_inner();
    assert!(again.duplicate, "the same submission is stored once");

    // An undecodable message: INVALID_ARGUMENT, the relay's own rewrite of tonic's
    // INTERNAL, as on native gRPC.
    let mut grpc = tonic::client::Grpc::with_origin(service.clone(), origin.clone());
    grpc.ready().await.expect("ready");
    let garbage = grpc
        .unary(
            as_device(NotARelayReport { collection_id: 7 }, Some("phone-3")),
            PathAndQuery::from_static("/ldpcov.v1.Relay/SubmitSealedReport"),
            tonic_prost::ProstCodec::<NotARelayReport, RelayReportResponse>::default(),
        )
        .await
        .expect_err("an undecodable message");
    assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage:?}");

    // A second device completes the batch: the relay forwards both reports, and
    // nothing else, to the aggregator.
    assert!(
        !client
            .submit_sealed_report(as_device(report(2), Some("phone-2")))
            .await
            .expect("the second device's report")
            .into_inner()
            .duplicate
    );
    wait_until(
        "the batch of the gRPC-Web reports reached the aggregator",
        || {
            let accepted = fake.state().accepted;
            async move { accepted == 2 }
        },
    )
    .await;
    {
        let state = fake.state();
        assert!(state.violations.is_empty(), "{:?}", state.violations);
        assert_eq!(state.calls.len(), 1, "one batch");
        let mut tags: Vec<u64> = state.calls[0]
            .reports()
            .iter()
            .map(support::fake_aggregator::tag)
            .collect();
        tags.sort_unstable();
        assert_eq!(tags, [1, 2]);
    }

    assert_cors_preflights(&format!("{url}/ldpcov.v1.Relay/SubmitSealedReport"), ORIGIN).await;
    stop(&mut relay);
    let log = std::fs::read_to_string(dir.join("relay.log")).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("gRPC-Web enabled") && l.contains(ORIGIN)),
        "the relay logs that gRPC-Web is on, with its origins:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_the_relay_does_not_speak_grpc_web() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (_fake, url, mut relay) = start_relay(tmp.path(), &[]).await;
    let (service, origin) = web(&url);
    let mut client = RelayClient::with_origin(service, origin);
    let refused = client
        .get_collection(as_device(
            GetCollectionRequest {
                collection_id: COLLECTION.into(),
            },
            Some("phone-1"),
        ))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let refused = client
        .submit_sealed_report(as_device(report(1), Some("phone-1")))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // The native call still works: the relay is up, it only does not speak gRPC-Web.
    let mut native = RelayClient::connect(url.clone()).await.expect("connect");
    native
        .get_collection(as_device(
            GetCollectionRequest {
                collection_id: COLLECTION.into(),
            },
            Some("phone-1"),
        ))
        .await
        .expect("native GetCollection");
    stop(&mut relay);
}
