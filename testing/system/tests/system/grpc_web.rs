//! gRPC-Web on the real daemon (`serve --grpc-web`): a client speaking gRPC-Web over
//! HTTP/1.1 (tonic-web's client layer over hyper's HTTP/1 client, as a browser's
//! transport would) creates a collection, submits a real report and reads the count;
//! tokens and health behave as on native gRPC; CORS preflights are answered for the
//! allowed origin only; a daemon without the flag does not speak it; bad flags are
//! refused with one line.

use ldpcov_client::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_client::proto::v1::{CreateCollectionRequest, GetStatusRequest, Report};
use ldpcov_client::{Collection, DiscreteGaussianSampler, Perturber, ReportId};
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use support::admin::run;
use support::daemon::*;
use support::grpc::{assert_cors_preflights, web, with_token};

use crate::support;

const ADMIN: &str = "web-admin-secret";
const SUBMIT: &str = "web-submit-secret";
const ORIGIN: &str = "http://localhost:8080";

/// A real report for `collection` (exact sampler, fixed seed), tagged `id`.
fn report(collection: &Collection, id: u8) -> Report {
    let perturber = Perturber::new(collection.clone());
    let x: Vec<f64> = (0..collection.dim()).map(|i| 0.1 * i as f64).collect();
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(u64::from(id));
    perturber
        .report(&x, &mut noise, ReportId([id; 16]))
        .expect("valid input")
}

#[tokio::test]
async fn grpc_web_calls_count_and_keep_tokens_health_and_cors() {
    let daemon = Daemon::start_with(&[
        "--admin-token",
        ADMIN,
        "--submit-token",
        SUBMIT,
        "--grpc-web",
        "--grpc-web-origin",
        ORIGIN,
    ]);
    let (service, origin) = web(&daemon.url);
    let mut client = RawClient::with_origin(service.clone(), origin.clone());

    // Create over gRPC-Web, with the admin token; refused without it.
    let spec = ldpcov_fixtures::spec("web", 4).min_reports(1).build();
    let refused = client
        .create_collection(with_token(
            CreateCollectionRequest {
                spec: Some(spec.clone()),
            },
            None,
        ))
        .await
        .expect_err("no token");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let params = client
        .create_collection(with_token(
            CreateCollectionRequest { spec: Some(spec) },
            Some(ADMIN),
        ))
        .await
        .expect("create over gRPC-Web")
        .into_inner();
    let collection = Collection::from_params(&params).expect("the daemon's parameters");

    // A report counts exactly once; without the submit token nothing is counted.
    let first = report(&collection, 1);
    let no_token = client
        .submit_report(with_token(report(&collection, 2), None))
        .await
        .expect_err("no token");
    assert_eq!(no_token.code(), Code::Unauthenticated, "{no_token:?}");
    let answer = client
        .submit_report(with_token(first.clone(), Some(SUBMIT)))
        .await
        .expect("submit over gRPC-Web")
        .into_inner();
    assert!(!answer.duplicate);
    let again = client
        .submit_report(with_token(first, Some(SUBMIT)))
        .await
        .expect("resubmit")
        .into_inner();
    assert!(again.duplicate, "the same report id counts once");
    // A bad payload: INVALID_ARGUMENT, nothing counted.
    let mut bad = report(&collection, 3);
    bad.payload.pop();
    let invalid = client
        .submit_report(with_token(bad, Some(SUBMIT)))
        .await
        .expect_err("short payload");
    assert_eq!(invalid.code(), Code::InvalidArgument, "{invalid:?}");
    let status = client
        .get_status(with_token(
            GetStatusRequest {
                collection_id: "web".into(),
            },
            Some(ADMIN),
        ))
        .await
        .expect("status over gRPC-Web")
        .into_inner();
    assert_eq!(status.reports, 1);

    // The native client sees the same count.
    let mut native = ldpcov_client::AggregatorClient::connect(daemon.url.clone())
        .await
        .expect("native connect")
        .with_token(ADMIN.to_string())
        .expect("token");
    assert_eq!(
        native.status("web").await.expect("native status").reports,
        1
    );

    // Health over gRPC-Web.
    let mut health = HealthClient::with_origin(service.clone(), origin.clone());
    let serving = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health over gRPC-Web")
        .into_inner();
    assert_eq!(serving.status, ServingStatus::Serving as i32);

    assert_cors_preflights(
        &format!("{}/ldpcov.v1.Aggregator/SubmitReport", daemon.url),
        ORIGIN,
    )
    .await;
}

#[tokio::test]
async fn without_the_flag_the_daemon_does_not_speak_grpc_web() {
    let daemon = Daemon::start();
    let (service, origin) = web(&daemon.url);
    let mut health = HealthClient::with_origin(service, origin);
    let refused = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

#[test]
fn bad_grpc_web_flags_are_refused_with_one_line() {
    run(&["serve", "--memory", "--grpc-web-origin", ORIGIN]).fails_with("needs --grpc-web");
    for bad in [
        "https://app.example.com/",
        "https://app.example.com/path",
        "app.example.com",
        "ftp://app.example.com",
    ] {
        run(&["serve", "--memory", "--grpc-web", "--grpc-web-origin", bad])
            .fails_with("is not an origin");
    }
}
