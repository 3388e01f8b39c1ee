//! What operators use, through the real gRPC server: server reflection (what
//! `grpcurl list` / `describe` call), the gRPC health service (SERVING, NOT_SERVING
//! once shutdown begins) and DeleteCollection (everything gone, the id reusable from
//! scratch, unknown ids refused). Health after a failed commit is tested in the
//! aggregator's unit tests, where the commit-failure hooks are reachable.

use ldpcov_fixtures as fixtures;
use std::time::Duration;

use ldpcov_aggregator::{EmbeddedServer, Limits};
use ldpcov_client::AggregatorClient;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CloseCollectionRequest, CollectionSpec, CreateCollectionRequest, DeleteCollectionRequest,
    GetCollectionRequest, GetEstimateRequest, GetStatusRequest, Moments, Report,
};
use prost::Message;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

use crate::support::grpc::channel;

fn spec(id: &str, dim: u32) -> CollectionSpec {
    // Reports below are d = p(p+1)/2 entries long: the second-moment layout.
    fixtures::spec(id, dim)
        .moments(Moments::SecondMoment)
        .build()
}

/// One reflection request on its own stream, as grpcurl sends them.
async fn reflect(url: &str, request: MessageRequest) -> MessageResponse {
    let mut client = ServerReflectionClient::new(channel(url).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let ServerReflectionResponse {
        message_response, ..
    } = responses.next().await.unwrap().unwrap();
    message_response.unwrap()
}

#[tokio::test]
async fn reflection_lists_the_services_and_describes_the_aggregator() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    // `grpcurl -plaintext HOST:PORT list`
    let MessageResponse::ListServicesResponse(list) =
        reflect(&server.url(), MessageRequest::ListServices(String::new())).await
    else {
        panic!("ListServices did not answer with a list");
    };
    let mut names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "ldpcov.v1.Aggregator",
        ]
    );
    // `grpcurl -plaintext HOST:PORT describe ldpcov.v1.Aggregator`
    let MessageResponse::FileDescriptorResponse(files) = reflect(
        &server.url(),
        MessageRequest::FileContainingSymbol("ldpcov.v1.Aggregator".into()),
    )
    .await
    else {
        panic!("FileContainingSymbol did not answer with descriptors");
    };
    let file = files
        .file_descriptor_proto
        .iter()
        .map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap())
        .find(|f| f.name() == "ldpcov/v1/ldpcov.proto")
        .expect("the descriptor of ldpcov/v1/ldpcov.proto");
    assert_eq!(file.package(), "ldpcov.v1");
    let service = file
        .service
        .iter()
        .find(|s| s.name() == "Aggregator")
        .expect("service Aggregator");
    let mut methods: Vec<_> = service.method.iter().map(|m| m.name()).collect();
    methods.sort();
    assert_eq!(
        methods,
        [
            "CloseCollection",
            "CreateCollection",
            "DeleteCollection",
            "GetCollection",
            "GetEstimate",
            "GetStatus",
            "ListCollections",
            "ReleaseShare",
            "SubmitReport",
            "SubmitReports",
            "SubmitShuffledBatch",
            "UploadTwoAggregatorReport",
            "VerifyShares",
        ]
    );
    // A message type resolves too (what `describe ldpcov.v1.Report` needs).
    let MessageResponse::FileDescriptorResponse(_) = reflect(
        &server.url(),
        MessageRequest::FileContainingSymbol("ldpcov.v1.Report".into()),
    )
    .await
    else {
        panic!("ldpcov.v1.Report does not resolve");
    };
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn health_is_serving_and_turns_not_serving_once_shutdown_begins() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut health = HealthClient::new(channel(&server.url()).await);
    for service in ["", "ldpcov.v1.Aggregator"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status();
        assert_eq!(status, ServingStatus::Serving, "service {service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    // A watcher (what a load balancer keeps open) sees the shutdown begin.
    let mut watch = health
        .watch(HealthCheckRequest {
            service: "ldpcov.v1.Aggregator".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.next().await.unwrap().unwrap().status();
    assert_eq!(first, ServingStatus::Serving);
    let stopping = tokio::spawn(server.shutdown());
    let next = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("no health update within 10 s of the shutdown signal")
        .unwrap()
        .unwrap()
        .status();
    assert_eq!(next, ServingStatus::NotServing);
    // The open watch is an in-flight call: the drain waits for it to end.
    drop(watch);
    drop(health);
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the server drains once the watcher is gone")
        .unwrap()
        .unwrap();
}

/// A valid all-zero i32 report with this id (zero is within every validation bound).
fn zero_report(collection: &str, dim: usize, id: u8) -> Report {
    Report {
        collection_id: collection.into(),
        report_id: vec![id; 16],
        encoding: 0,
        payload: vec![0; 4 * dim * (dim + 1) / 2],
    }
}

#[tokio::test]
async fn delete_removes_the_collection_everywhere_and_the_id_starts_from_scratch() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut client = AggregatorClient::connect(server.url()).await.unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let create = |id: &str| CreateCollectionRequest {
        spec: Some(spec(id, 3)),
    };
    raw.create_collection(create("a")).await.unwrap();
    raw.create_collection(create("b")).await.unwrap();
    for id in 1..=4u8 {
        raw.submit_report(zero_report("a", 3, id)).await.unwrap();
        raw.submit_report(zero_report("b", 3, id)).await.unwrap();
    }
    raw.close_collection(CloseCollectionRequest {
        collection_id: "a".into(),
    })
    .await
    .unwrap();
    assert_eq!(client.delete_collection("a").await.unwrap(), 4);

    // NOT_FOUND everywhere.
    let id = || "a".to_string();
    let codes = [
        raw.get_collection(GetCollectionRequest {
            collection_id: id(),
        })
        .await
        .map(drop),
        raw.get_status(GetStatusRequest {
            collection_id: id(),
        })
        .await
        .map(drop),
        raw.get_estimate(GetEstimateRequest {
            collection_id: id(),
            ..Default::default()
        })
        .await
        .map(drop),
        raw.close_collection(CloseCollectionRequest {
            collection_id: id(),
        })
        .await
        .map(drop),
        raw.submit_report(zero_report("a", 3, 9)).await.map(drop),
        raw.delete_collection(DeleteCollectionRequest {
            collection_id: id(),
        })
        .await
        .map(drop),
    ];
    for (k, result) in codes.into_iter().enumerate() {
        assert_eq!(result.unwrap_err().code(), Code::NotFound, "call {k}");
    }
    // Unknown and invalid ids: refused, nothing changed.
    let unknown = raw
        .delete_collection(DeleteCollectionRequest {
            collection_id: "zz".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let invalid = raw
        .delete_collection(DeleteCollectionRequest {
            collection_id: "no spaces".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(invalid.code(), Code::InvalidArgument);
    let b = raw
        .get_status(GetStatusRequest {
            collection_id: "b".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.reports, 4);

    // Created again: open, empty, and an old report id counts again.
    raw.create_collection(create("a")).await.unwrap();
    let again = raw
        .submit_report(zero_report("a", 3, 1))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !again.duplicate,
        "an id seen before the delete must count anew"
    );
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: "a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((status.reports, status.closed), (1, false));
    server.shutdown().await.unwrap();
}
