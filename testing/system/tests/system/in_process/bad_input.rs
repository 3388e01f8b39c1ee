//! Bad input the end-to-end suite does not already cover (docs/BAD_INPUT.md lists
//! every class and the test that pins it): malformed protobuf, oversized messages,
//! more nonsense specs, closed collections, missing or wrong tokens, and the transport
//! limits (request timeout, concurrency limit). Each case checks the status code and
//! that nothing changed.

use ldpcov_fixtures as fixtures;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use bytes::{Buf, BufMut};
use futures::StreamExt;
use ldpcov_aggregator::Limits;
use ldpcov_aggregator::constants::STREAM_BATCH;
use ldpcov_aggregator::{AuthConfig, SubmitToken, Token};
use ldpcov_aggregator::{BatchOutcome, MemoryStore, Snapshot, Store, StoreError, ValidReport};
use ldpcov_aggregator::{EmbeddedServer, ServeOptions, TransportLimits};
use ldpcov_client::{
    AggregatorClient, ClientError, DiscreteGaussianSampler, NoiseSampler, Perturber, RetryPolicy,
};
use ldpcov_privacy::Collection;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CloseCollectionRequest, CollectionSpec, CreateCollectionRequest, Encoding,
    GetCollectionRequest, GetEstimateRequest, GetStatusRequest, Moments, NoThreshold, Report,
    SubmitReportsResponse, get_estimate_request,
};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Status};

/// A second-moment collection: the hand-made payloads below have its d entries (the
/// mean-and-covariance default's refusals are in `tests/system/joint_moments.rs`).
fn spec(id: &str, dim: u32) -> CollectionSpec {
    fixtures::spec(id, dim)
        .encoding(Encoding::I32Le)
        .moments(Moments::SecondMoment)
        .build()
}

fn estimate_request(id: &str) -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: id.into(),
        threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
        skip_psd_projection: true,
        ..Default::default()
    }
}

async fn client(url: &str, seed: u64) -> AggregatorClient {
    crate::support::embedded::seeded_client(url, seed)
        .await
        .with_retry(RetryPolicy::no_retries())
}

fn code(e: &ClientError) -> Code {
    e.status().map(|s| s.code()).unwrap_or(Code::Ok)
}

/// A codec that sends and receives raw bytes: the request body is whatever the test
/// wants, not necessarily a valid protobuf.
#[derive(Default)]
struct RawBytes;
struct RawCoder;

impl Codec for RawBytes {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCoder;
    type Decoder = RawCoder;
    fn encoder(&mut self) -> RawCoder {
        RawCoder
    }
    fn decoder(&mut self) -> RawCoder {
        RawCoder
    }
}

impl Encoder for RawCoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut v = vec![0; src.remaining()];
        src.copy_to_slice(&mut v);
        Ok(Some(v))
    }
}

async fn raw_unary(url: &str, method: &'static str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
    let channel = Channel::from_shared(url.to_string())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    grpc.unary(
        tonic::Request::new(body),
        PathAndQuery::from_static(method),
        RawBytes,
    )
    .await
    .map(|r| r.into_inner())
}

#[tokio::test]
async fn malformed_protobuf_is_refused_and_changes_nothing() {
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 1).await;
    admin.create_collection(spec("m", 2)).await.unwrap();
    let collection = admin.collection("m").await.unwrap();
    let good = admin.prepare_report(&collection, &[0.5, 0.5]).unwrap();

    // Sanity: the raw path accepts the encoded good report.
    raw_unary(
        &url,
        "/ldpcov.v1.Aggregator/SubmitReport",
        good.encode_to_vec(),
    )
    .await
    .expect("a valid report through the raw codec");

    let mut truncated = good.encode_to_vec();
    truncated.truncate(truncated.len() - 3);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid tag (field 0)", vec![0x00, 0x01]),
        (
            "varint never ends",
            vec![0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        ),
        ("length past the end", vec![0x12, 0x50, 0x01]),
        ("truncated valid report", truncated),
        ("string field with a varint wire type", vec![0x08, 0x01]),
        ("collection id not UTF-8", vec![0x0A, 0x02, 0xC3, 0x28]),
        ("garbage", vec![0xFF; 64]),
    ];
    for (name, body) in cases {
        let err = raw_unary(&url, "/ldpcov.v1.Aggregator/SubmitReport", body)
            .await
            .expect_err(name);
        // tonic-prost maps a prost DecodeError to INTERNAL (documented in
        // docs/BAD_INPUT.md); the service never sees the request.
        assert_eq!(err.code(), Code::Internal, "{name}: {}", err.message());
        assert!(
            err.message().contains("failed to decode"),
            "{name}: {}",
            err.message()
        );
    }
    // An empty body decodes as an all-default Report: an unknown (empty) collection id.
    let err = raw_unary(&url, "/ldpcov.v1.Aggregator/SubmitReport", Vec::new())
        .await
        .expect_err("empty body");
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    assert_eq!(admin.status("m").await.unwrap().reports, 1);
    server.shutdown().await.unwrap();
}

/// tonic 0.14's decoder answers OUT_OF_RANGE for a message above the limit (grpc-go
/// and grpc-core say RESOURCE_EXHAUSTED). The client does not retry OUT_OF_RANGE,
/// which is right: resending the same bytes cannot help.
#[tokio::test]
async fn an_oversized_message_is_out_of_range() {
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 2).await;
    admin.create_collection(spec("big", 2)).await.unwrap();
    let limit = Limits { max_dim: 16 }.max_decoding_message_size();
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    let report = Report {
        collection_id: "big".into(),
        report_id: vec![7; 16],
        encoding: Encoding::I32Le as i32,
        payload: vec![0; limit + 1],
    };
    let err = raw.submit_report(report.clone()).await.expect_err("unary");
    assert_eq!(err.code(), Code::OutOfRange, "{}", err.message());
    assert!(err.message().contains("too large"), "{}", err.message());
    let err = raw
        .submit_reports(tokio_stream::iter(vec![report]))
        .await
        .expect_err("stream");
    assert_eq!(err.code(), Code::OutOfRange, "{}", err.message());
    assert!(err.message().contains("too large"), "{}", err.message());
    assert_eq!(admin.status("big").await.unwrap().reports, 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn nonsense_specs_are_invalid_argument_and_create_nothing() {
    let max = ldpcov_privacy::limits::MAX_DIM;
    let server = EmbeddedServer::start(Limits { max_dim: max })
        .await
        .unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let with = |id: &str, f: &dyn Fn(&mut CollectionSpec)| {
        let mut s = spec(id, 3);
        f(&mut s);
        s
    };
    let cases = vec![
        ("ε NaN", with("n1", &|s| s.epsilon = f64::NAN)),
        ("ε ∞", with("n2", &|s| s.epsilon = f64::INFINITY)),
        ("δ < 0", with("n3", &|s| s.delta = -0.1)),
        ("δ > 1", with("n4", &|s| s.delta = 2.0)),
        ("δ NaN", with("n5", &|s| s.delta = f64::NAN)),
        ("R < 0", with("n6", &|s| s.clip_radius = -1.0)),
        ("R NaN", with("n7", &|s| s.clip_radius = f64::NAN)),
        ("R ∞", with("n8", &|s| s.clip_radius = f64::INFINITY)),
        ("p above MAX_DIM", with("n9", &|s| s.dim = max as u32 + 1)),
        ("p = u32::MAX", with("n10", &|s| s.dim = u32::MAX)),
        ("unknown encoding", with("n11", &|s| s.encoding = 99)),
        (
            "ε so small no report can carry the noise",
            with("n12", &|s| s.epsilon = 1e-300),
        ),
        ("empty id", with("", &|_| {})),
        ("id too long", with(&"x".repeat(129), &|_| {})),
        // Numbers whose derived quantities overflow or underflow, names that are not
        // printable (the create path's bounds, `Collection::create`).
        ("R = 1e308", with("n13", &|s| s.clip_radius = 1e308)),
        ("R = 5e-324", with("n14", &|s| s.clip_radius = 5e-324)),
        ("δ = 5e-324", with("n15", &|s| s.delta = 5e-324)),
        (
            "centre 1e300",
            with("n16", &|s| s.centre = vec![0.0, 1e300, 0.0]),
        ),
        (
            "name with NUL",
            with("n17", &|s| {
                s.variable_names = vec!["a".into(), "b\0".into(), "c".into()]
            }),
        ),
        (
            "name with a newline",
            with("n18", &|s| {
                s.variable_names = vec!["a\nb".into(), "b".into(), "c".into()]
            }),
        ),
    ];
    support::checks::assert_specs_refused(&mut raw, cases).await;
    server.shutdown().await.unwrap();
}

/// A two-aggregator collection is a valid spec that an aggregator in no two-aggregator
/// role cannot serve: FAILED_PRECONDITION naming the flag, and nothing is created.
#[tokio::test]
async fn a_two_aggregator_collection_needs_a_role_and_creates_nothing() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let mut two = spec("two", 3);
    two.privacy_model = ldpcov_proto::v1::PrivacyModel::TwoAggregator as i32;
    // Its vectors are on the central grid: no local encoding.
    two.encoding = Encoding::Unspecified as i32;
    let err = raw
        .create_collection(CreateCollectionRequest { spec: Some(two) })
        .await
        .expect_err("a two-aggregator collection");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert!(
        err.message().contains("--two-aggregator-role"),
        "{}",
        err.message()
    );
    let e = raw
        .get_status(GetStatusRequest {
            collection_id: "two".into(),
        })
        .await
        .expect_err("nothing created");
    assert_eq!(e.code(), Code::NotFound);
    server.shutdown().await.unwrap();
}

/// Estimate options beyond the range where the estimators' arithmetic stays finite:
/// INVALID_ARGUMENT naming the field, before any work, and the collection unchanged.
#[tokio::test]
async fn absurd_estimate_options_are_invalid_argument() {
    use ldpcov_proto::v1::{EstimateTarget, PrecisionParams};
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let mut admin = client(&server.url(), 7).await;
    admin.create_collection(spec("e", 2)).await.unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let precision = |target: EstimateTarget, params: PrecisionParams| GetEstimateRequest {
        skip_psd_projection: false,
        target: target as i32,
        precision: Some(params),
        ..estimate_request("e")
    };
    let cases = vec![
        (
            "psd_floor",
            GetEstimateRequest {
                skip_psd_projection: false,
                psd_floor: 1e308,
                ..estimate_request("e")
            },
        ),
        (
            "rho",
            precision(
                EstimateTarget::PrecisionGlasso,
                PrecisionParams {
                    rho: 1e300,
                    ..Default::default()
                },
            ),
        ),
        (
            "lambda",
            precision(
                EstimateTarget::PrecisionGlasso,
                PrecisionParams {
                    lambda: Some(1e300),
                    ..Default::default()
                },
            ),
        ),
        (
            "ridge lambda",
            precision(
                EstimateTarget::PrecisionRidge,
                PrecisionParams {
                    lambda: Some(1e300),
                    ..Default::default()
                },
            ),
        ),
    ];
    for (field, request) in cases {
        let err = raw.get_estimate(request).await.expect_err(field);
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{field}: {}",
            err.message()
        );
        assert!(
            err.message().contains(field)
                && (err.message().contains("1e300") || err.message().contains("1e308")),
            "{field}: {}",
            err.message()
        );
    }
    assert_eq!(admin.status("e").await.unwrap().reports, 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_closed_collection_refuses_reports_but_still_estimates() {
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 3).await;
    admin.create_collection(spec("c", 2)).await.unwrap();
    admin.create_collection(spec("other", 2)).await.unwrap();
    let collection = admin.collection("c").await.unwrap();
    let first = admin.prepare_report(&collection, &[0.5, 0.1]).unwrap();
    admin.submit_report(first.clone()).await.unwrap();
    let before = admin.estimate(estimate_request("c")).await.unwrap();

    let status = admin.close_collection("c").await.unwrap();
    assert!(status.closed);
    assert_eq!(status.reports, 1);
    // Idempotent.
    assert!(admin.close_collection("c").await.unwrap().closed);

    let late = admin.prepare_report(&collection, &[0.1, 0.5]).unwrap();
    let err = admin.submit_report(late.clone()).await.expect_err("unary");
    assert_eq!(code(&err), Code::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("closed"), "{err}");
    // Even a resend of an already counted report: closed wins, nothing changes.
    let err = admin.submit_report(first).await.expect_err("resend");
    assert_eq!(code(&err), Code::FailedPrecondition, "{err}");
    let err = admin
        .submit_stream(vec![late.clone()])
        .await
        .expect_err("stream");
    assert_eq!(code(&err), Code::FailedPrecondition, "{err}");
    // A stream that switches to the closed collection keeps what came before.
    let other = admin.collection("other").await.unwrap();
    let to_other = admin.prepare_report(&other, &[0.2, 0.2]).unwrap();
    let err = admin
        .submit_stream(vec![to_other, late])
        .await
        .expect_err("mixed stream");
    assert_eq!(code(&err), Code::FailedPrecondition, "{err}");
    assert_eq!(admin.status("other").await.unwrap().reports, 1);
    assert!(!admin.status("other").await.unwrap().closed);

    let status = admin.status("c").await.unwrap();
    assert!(status.closed);
    assert_eq!(status.reports, 1);
    let after = admin.estimate(estimate_request("c")).await.unwrap();
    assert_eq!(before.upper_triangle, after.upper_triangle);
    // Parameters stay readable.
    admin.collection("c").await.unwrap();

    let err = admin.close_collection("nope").await.expect_err("unknown");
    assert_eq!(code(&err), Code::NotFound);
    let err = admin.close_collection("a b").await.expect_err("bad id");
    assert_eq!(code(&err), Code::InvalidArgument);
    server.shutdown().await.unwrap();
}

const ADMIN: &str = "admin-0123456789abcdef";
const SUBMIT: &str = "submit-0123456789abcdef";
const SCOPED: &str = "scoped-0123456789abcdef";

async fn guarded_server() -> EmbeddedServer {
    let auth = AuthConfig::new(
        Some(Token::new(ADMIN, "admin").unwrap()),
        vec![
            SubmitToken::parse(SUBMIT).unwrap(),
            SubmitToken::parse(&format!("a={SCOPED}")).unwrap(),
        ],
    )
    .unwrap();
    EmbeddedServer::start_with_options(
        Arc::new(MemoryStore::new()),
        ServeOptions {
            limits: Limits { max_dim: 16 },
            auth: Arc::new(auth),
            ..ServeOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn as_caller(url: &str, token: Option<&str>) -> AggregatorClient {
    let c = client(url, 9).await;
    match token {
        Some(t) => c.with_token(t.to_string()).unwrap(),
        None => c,
    }
}

#[tokio::test]
async fn missing_invalid_or_insufficient_tokens_are_refused() {
    let server = guarded_server().await;
    let url = server.url();
    let mut admin = as_caller(&url, Some(ADMIN)).await;
    admin.create_collection(spec("a", 2)).await.unwrap();
    admin.create_collection(spec("b", 2)).await.unwrap();
    let a = admin.collection("a").await.unwrap();
    let b = admin.collection("b").await.unwrap();
    let report_a = admin.prepare_report(&a, &[0.3, 0.3]).unwrap();
    let report_b = admin.prepare_report(&b, &[0.3, 0.3]).unwrap();

    use Code::{PermissionDenied as Denied, Unauthenticated as Unauth};
    // (token, create, estimate, close b, submit a, submit b, status b, get b)
    type Row = (Option<&'static str>, [Option<Code>; 7]);
    let table: [Row; 5] = [
        (None, [Some(Unauth); 7]),
        (Some("not-a-token"), [Some(Unauth); 7]),
        (
            Some(SUBMIT),
            [
                Some(Denied),
                Some(Denied),
                Some(Denied),
                None,
                None,
                None,
                None,
            ],
        ),
        (
            Some(SCOPED),
            [
                Some(Denied),
                Some(Denied),
                Some(Denied),
                None,
                Some(Denied),
                Some(Denied),
                Some(Denied),
            ],
        ),
        (Some(ADMIN), [None; 7]),
    ];
    for (token, want) in table {
        let mut c = as_caller(&url, token).await;
        let got = [
            c.create_collection(spec("new", 2)).await.err(),
            c.estimate(estimate_request("a")).await.err(),
            // Closing last in the row would change later rows: close an unknown id,
            // which needs the right before it can say NOT_FOUND.
            c.close_collection("unknown").await.err(),
            c.submit_report(report_a.clone()).await.err(),
            c.submit_report(report_b.clone()).await.err(),
            c.status("b").await.err(),
            c.collection("b").await.err(),
        ];
        let got: Vec<Option<Code>> = got.iter().map(|e| e.as_ref().map(code)).collect::<Vec<_>>();
        // The admin's close of an unknown collection gets past the check: NOT_FOUND.
        let mut want = want.to_vec();
        if token == Some(ADMIN) {
            want[2] = Some(Code::NotFound);
        }
        // The admin token creates "new" once; later rows see the earlier state only
        // through counts, checked below.
        assert_eq!(got, want, "token {token:?}");
        if token == Some(ADMIN) {
            break;
        }
        // Refused calls changed nothing.
        let status = admin.status("new").await;
        assert!(status.is_err(), "{token:?} created a collection");
    }
    // Counts: submit a by SUBMIT, SCOPED and ADMIN (same id: counted once); b by
    // SUBMIT and ADMIN (once).
    assert_eq!(admin.status("a").await.unwrap().reports, 1);
    assert_eq!(admin.status("b").await.unwrap().reports, 1);

    // A stream whose token is scoped to "a" fails when it switches to "b", after
    // committing the reports for "a".
    let fresh_a = admin.prepare_report(&a, &[0.1, 0.1]).unwrap();
    let fresh_b = admin.prepare_report(&b, &[0.1, 0.1]).unwrap();
    let mut scoped = as_caller(&url, Some(SCOPED)).await;
    let err = scoped
        .submit_stream(vec![fresh_a, fresh_b.clone()])
        .await
        .expect_err("scoped stream");
    assert_eq!(code(&err), Denied, "{err}");
    assert_eq!(admin.status("a").await.unwrap().reports, 2);
    assert_eq!(admin.status("b").await.unwrap().reports, 1);
    // No token on a stream: refused before anything is read.
    let mut anonymous = as_caller(&url, None).await;
    let err = anonymous
        .submit_stream(vec![fresh_b])
        .await
        .expect_err("anonymous stream");
    assert_eq!(code(&err), Unauth);
    assert_eq!(admin.status("b").await.unwrap().reports, 1);

    // Raw metadata forms: wrong scheme, empty bearer.
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    for header in ["Basic YWRtaW4=", "Bearer ", &format!("Token {ADMIN}")] {
        let mut req = tonic::Request::new(GetCollectionRequest {
            collection_id: "a".into(),
        });
        req.metadata_mut()
            .insert("authorization", header.parse().unwrap());
        let err = raw.get_collection(req).await.expect_err(header);
        assert_eq!(err.code(), Unauth, "{header}");
    }
    let mut req = tonic::Request::new(CloseCollectionRequest {
        collection_id: "a".into(),
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {SUBMIT}").parse().unwrap());
    assert_eq!(raw.close_collection(req).await.unwrap_err().code(), Denied);
    assert!(!admin.status("a").await.unwrap().closed);
    // Tokens that cannot be sent are refused by the client.
    let c = client(&url, 1).await;
    assert!(matches!(
        c.with_token("two words".into()),
        Err(ClientError::InvalidToken)
    ));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_admin_token_alone_leaves_submits_open() {
    let auth = AuthConfig::new(Some(Token::new(ADMIN, "admin").unwrap()), Vec::new()).unwrap();
    let server = EmbeddedServer::start_with_options(
        Arc::new(MemoryStore::new()),
        ServeOptions {
            limits: Limits { max_dim: 16 },
            auth: Arc::new(auth),
            ..ServeOptions::default()
        },
    )
    .await
    .unwrap();
    let url = server.url();
    let mut admin = as_caller(&url, Some(ADMIN)).await;
    admin.create_collection(spec("o", 2)).await.unwrap();
    let mut device = as_caller(&url, None).await;
    let o = device.collection("o").await.unwrap();
    device.submit(&o, &[0.1, 0.2]).await.unwrap();
    assert_eq!(device.status("o").await.unwrap().reports, 1);
    let err = device.estimate(estimate_request("o")).await.unwrap_err();
    assert_eq!(code(&err), Code::Unauthenticated);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_encoding_other_than_the_collections_is_invalid_argument() {
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 4).await;
    admin.create_collection(spec("e", 2)).await.unwrap();
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    // i16 entries of the right count for an i32 collection, and the i32 length too.
    for payload_len in [3 * 2, 3 * 4] {
        let report = Report {
            collection_id: "e".into(),
            report_id: vec![3; 16],
            encoding: Encoding::I16Le as i32,
            payload: vec![0; payload_len],
        };
        let err = raw.submit_report(report).await.expect_err("mismatch");
        assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
        assert!(
            err.message().contains("does not match"),
            "{}",
            err.message()
        );
    }
    assert_eq!(admin.status("e").await.unwrap().reports, 0);
    server.shutdown().await.unwrap();
}

/// A server with the given store, which the test can read directly (no gRPC call, so
/// no concurrency slot needed), and the given transport limits.
async fn limited_server<S: Store>(
    transport: TransportLimits,
    id: &str,
    store: Arc<S>,
) -> (EmbeddedServer, Arc<S>, RawClient<Channel>, Vec<Report>) {
    let options = ServeOptions {
        limits: Limits { max_dim: 16 },
        transport,
        ..ServeOptions::default()
    };
    let server = EmbeddedServer::start_with_options(store.clone(), options)
        .await
        .unwrap();
    let url = server.url();
    let mut admin = client(&url, 5).await;
    admin.create_collection(spec(id, 2)).await.unwrap();
    let collection = admin.collection(id).await.unwrap();
    let reports = (0..STREAM_BATCH + 1)
        .map(|i| {
            let x = [0.5, (i % 7) as f64 / 10.0];
            admin.prepare_report(&collection, &x).unwrap()
        })
        .collect();
    let raw = RawClient::connect(url).await.unwrap();
    (server, store, raw, reports)
}

/// A [`MemoryStore`] that reports the size of every batch it counts on a channel: the
/// service calls `submit` from inside the call, so a batch arriving is the event
/// "this call holds a concurrency slot".
struct WatchedStore {
    inner: MemoryStore,
    batches: tokio::sync::mpsc::UnboundedSender<usize>,
}

impl WatchedStore {
    fn new() -> (Arc<Self>, tokio::sync::mpsc::UnboundedReceiver<usize>) {
        let (batches, rx) = tokio::sync::mpsc::unbounded_channel();
        let store = WatchedStore {
            inner: MemoryStore::new(),
            batches,
        };
        (Arc::new(store), rx)
    }
}

#[tonic::async_trait]
impl Store for WatchedStore {
    async fn create_collection(&self, c: Collection) -> Result<Arc<Collection>, StoreError> {
        self.inner.create_collection(c).await
    }
    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        self.inner.collection(id).await
    }
    async fn collection_count(&self) -> Result<u64, StoreError> {
        self.inner.collection_count().await
    }
    async fn collection_ids(&self) -> Result<Vec<String>, StoreError> {
        self.inner.collection_ids().await
    }
    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let n = reports.len();
        let outcome = self.inner.submit(id, reports).await?;
        // The receiver may be gone once the test has what it needs.
        let _ = self.batches.send(n);
        Ok(outcome)
    }
    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        self.inner.count(id).await
    }
    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        self.inner.snapshot(id).await
    }
    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        self.inner.close_collection(id).await
    }
    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.is_closed(id).await
    }
}

/// A `SubmitReports` call whose stream sends `reports` and then stays open until
/// `release` fires (or is dropped). Runs on its own task and its own connection.
fn held_stream(
    mut raw: RawClient<Channel>,
    reports: Vec<Report>,
    release: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<Result<SubmitReportsResponse, Status>> {
    let stream = reports_then_hold(reports, release);
    tokio::spawn(async move { raw.submit_reports(stream).await.map(|r| r.into_inner()) })
}

fn reports_then_hold(
    reports: Vec<Report>,
    release: tokio::sync::oneshot::Receiver<()>,
) -> impl futures::Stream<Item = Report> + Send + 'static {
    // The reports, then an item that never comes until `release` fires; the stream
    // ends after it.
    let hold = futures::stream::once(release).filter_map(|_| async { None });
    futures::stream::iter(reports).chain(hold)
}

/// `--request-timeout-secs`: tonic's server timeout ends a call still running after
/// the timeout with `CANCELLED` ("Timeout expired"). The call here is a report stream
/// held open without ever ending (1 s timeout; the stream would wait forever), so the
/// outcome does not depend on timing. The one report it sent was still in the
/// service's unflushed batch: nothing is counted, and the concurrency slot is freed.
#[tokio::test]
async fn a_call_running_past_the_request_timeout_is_cancelled_and_counts_nothing() {
    let transport = TransportLimits {
        max_concurrent_requests: 1,
        request_timeout: Duration::from_secs(1),
        ..TransportLimits::default()
    };
    let (server, store, raw, reports) =
        limited_server(transport, "t", Arc::new(MemoryStore::new())).await;
    let (_release, never) = tokio::sync::oneshot::channel();
    let started = Instant::now();
    let call = held_stream(raw.clone(), reports[..1].to_vec(), never);
    let err = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the server must end the call")
        .unwrap()
        .expect_err("timed out");
    assert_eq!(err.code(), Code::Cancelled, "{}", err.message());
    assert_eq!(err.message(), "Timeout expired");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(store.count("t").await.unwrap(), 0);
    // The only slot (max_concurrent_requests = 1) was released: a normal call works.
    let (release, go) = tokio::sync::oneshot::channel();
    let _ = release.send(());
    let ok = held_stream(raw, reports[..1].to_vec(), go)
        .await
        .unwrap()
        .expect("after the timeout");
    assert_eq!(ok.accepted, 1);
    assert_eq!(store.count("t").await.unwrap(), 1);
    server.shutdown().await.unwrap();
}

/// `--max-concurrent-requests`: calls beyond the limit wait for a slot (tower's
/// global concurrency limit, shared by all connections) and then succeed: no error.
/// With a limit of 1, stream A sends a full service batch (so its reports are
/// counted while the call is still open: proof that A holds the slot) and stays open;
/// stream B, on another connection, sends one report and ends. Every batch the store
/// counts is an event the test waits on (`WatchedStore`): A's batch, then nothing
/// while A holds the slot, then B's one report only after A is released.
#[tokio::test]
async fn calls_beyond_max_concurrent_requests_wait_for_a_slot() {
    let transport = TransportLimits {
        max_concurrent_requests: 1,
        ..TransportLimits::default()
    };
    let (store, mut batches) = WatchedStore::new();
    let (server, store, raw, reports) = limited_server(transport, "w", store).await;
    let (release_a, hold_a) = tokio::sync::oneshot::channel();
    let a = held_stream(raw, reports[..STREAM_BATCH].to_vec(), hold_a);
    let first = tokio::time::timeout(Duration::from_secs(60), batches.recv())
        .await
        .expect("stream A never got in");
    assert_eq!(first, Some(STREAM_BATCH), "A's full batch first");
    let other = RawClient::connect(server.url()).await.unwrap();
    let (release_b, hold_b) = tokio::sync::oneshot::channel();
    let _ = release_b.send(());
    let b = held_stream(other, reports[STREAM_BATCH..].to_vec(), hold_b);
    // With a free slot B's report reaches the store within milliseconds, and this
    // wait ends on that event with a failure. With the limit held nothing can come:
    // the wait runs out, which is the passing case (its length only bounds how long
    // a broken limit gets to show itself, it cannot make a correct limit fail).
    if let Ok(batch) = tokio::time::timeout(Duration::from_secs(3), batches.recv()).await {
        panic!("B's batch {batch:?} was counted although A held the only slot");
    }
    assert!(!b.is_finished(), "B ran although A held the only slot");
    assert!(!a.is_finished());
    assert_eq!(store.count("w").await.unwrap(), STREAM_BATCH as u64);
    assert!(
        batches.try_recv().is_err(),
        "a batch was counted while A held the slot"
    );

    let _ = release_a.send(());
    let a = tokio::time::timeout(Duration::from_secs(60), a)
        .await
        .expect("A ends once released")
        .unwrap()
        .expect("A succeeds");
    let b = tokio::time::timeout(Duration::from_secs(60), b)
        .await
        .expect("B gets the slot after A")
        .unwrap()
        .expect("B waited, then succeeded");
    assert_eq!((a.accepted, a.duplicates), (STREAM_BATCH as u64, 0));
    assert_eq!((b.accepted, b.duplicates), (1, 0));
    assert_eq!(store.count("w").await.unwrap(), STREAM_BATCH as u64 + 1);
    // B's report was counted after the release, in a batch of its own.
    let mut after = Vec::new();
    while let Ok(n) = batches.try_recv() {
        after.push(n);
    }
    after.retain(|&n| n > 0);
    assert_eq!(after, vec![1], "batches counted after A's release");
    server.shutdown().await.unwrap();
}

/// The validation bound through the real server, for every encoding: an entry exactly
/// at the bound (`±max_abs_grid_value` grid units for i32, i.e. `±(1 + tσ)·2^k`;
/// `±wire_max` wire units for i16/i8) is counted, one unit beyond is `INVALID_ARGUMENT`
/// and changes nothing (count and estimate). docs/PRIVACY.md, "What the server
/// validates", derives the bound.
#[tokio::test]
async fn entries_at_the_validation_bound_count_and_one_unit_beyond_is_refused() {
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 5).await;
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    for encoding in [Encoding::I32Le, Encoding::I16Le, Encoding::I8] {
        let id = format!("bound-{}", encoding as i32);
        admin
            .create_collection(CollectionSpec {
                encoding: encoding as i32,
                ..spec(&id, 2)
            })
            .await
            .unwrap();
        let collection = admin.collection(&id).await.unwrap();
        let (wire_max, step) = (collection.wire_max(), collection.wire_step());
        // The wire range is the validation bound, in grid units.
        assert_eq!(wire_max * step, collection.max_abs_grid_value());
        let payload = |values: [i64; 3]| -> Vec<u8> {
            values
                .iter()
                .flat_map(|&v| match encoding {
                    Encoding::I32Le => i32::try_from(v).unwrap().to_le_bytes().to_vec(),
                    Encoding::I16Le => i16::try_from(v).unwrap().to_le_bytes().to_vec(),
                    _ => i8::try_from(v).unwrap().to_le_bytes().to_vec(),
                })
                .collect()
        };
        let report = |values: [i64; 3], tag: u8| Report {
            collection_id: id.clone(),
            report_id: vec![tag; 16],
            encoding: encoding as i32,
            payload: payload(values),
        };
        let inside = raw
            .submit_report(report([wire_max, -wire_max, 0], 1))
            .await
            .expect("an entry at the bound is accepted")
            .into_inner();
        assert!(!inside.duplicate);
        assert_eq!(admin.status(&id).await.unwrap().reports, 1);
        let before = admin.estimate(estimate_request(&id)).await.unwrap();
        // Counted exactly: one report, R = 1, so the mean is the entry in unit-ball units
        // (the off-diagonal entry divided by √2: a new collection's report is svec).
        let at_bound = collection.max_abs_grid_value() as f64 / collection.grid_scale();
        let off_diagonal = -at_bound / std::f64::consts::SQRT_2;
        for (got, want) in before.upper_triangle[..2]
            .iter()
            .zip([at_bound, off_diagonal])
        {
            assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
        }
        // One wire unit beyond, on either side (i16/i8 can only go below: −32 768, −128).
        let mut beyond = vec![[0, -wire_max - 1, 0]];
        if encoding == Encoding::I32Le {
            beyond.push([wire_max + 1, 0, 0]);
        }
        for (k, values) in beyond.into_iter().enumerate() {
            let err = raw
                .submit_report(report(values, 2 + k as u8))
                .await
                .expect_err("one unit beyond the bound");
            assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
            assert!(err.message().contains("is outside"), "{}", err.message());
        }
        assert_eq!(admin.status(&id).await.unwrap().reports, 1);
        let after = admin.estimate(estimate_request(&id)).await.unwrap();
        assert_eq!(before.upper_triangle, after.upper_triangle);
    }
    server.shutdown().await.unwrap();
}

/// The exact sampler, recording the largest |draw| in units of its sd.
struct Recording {
    inner: DiscreteGaussianSampler,
    max_sigmas: f64,
}

impl NoiseSampler for Recording {
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        let z = self.inner.sample_grid(sigma_grid);
        self.max_sigmas = self.max_sigmas.max(z.unsigned_abs() as f64 / sigma_grid);
        z
    }
}

/// Honest reports never reach the validation bound, at a small σ (ε = 20, where the
/// signal's `1` is a large part of `1 + tσ`) and with the signal at its extreme (each
/// report is `R·e_j`, so one diagonal entry is `1`).
///
/// Each entry reaches the bound with probability at most `2·e^{−t²/2} ≤ 10⁻¹²`
/// (`VALIDATION_SIGMAS`' derivation), so N ≈ 10⁶ entries all stay inside except with
/// probability ≤ 10⁻⁶. Two checks: no entry is clamped (signal plus noise reaches
/// `±(1 + tσ)·2^k`), and no noise draw reaches `tσ_g` (the tail the bound's derivation
/// is about; at ε = 20 the signal's 1 is 2.3σ, so for the many zero-signal entries the
/// first check alone has that much extra margin). Not vacuous: the largest of 10⁶ draws
/// exceeds 4σ except with probability `(1 − 2Φ̄(4))^{10⁶} = e^{−63}`, so the tail is
/// explored; a t of 4.9 (tail 10⁻⁶ per entry) would be reached with probability ≈ 0.6,
/// a t of 4 about 63 times.
#[test]
fn honest_reports_at_small_sigma_never_reach_the_validation_bound() {
    let c = ldpcov_privacy::Collection::from_spec(&CollectionSpec {
        epsilon: 20.0,
        ..spec("tail", 44)
    })
    .unwrap();
    let bound = c.max_abs_grid_value();
    let perturber = Perturber::new(c.clone());
    let mut noise = Recording {
        inner: DiscreteGaussianSampler::from_seed_for_simulation(2024),
        max_sigmas: 0.0,
    };
    let reports = 1_000_000usize.div_ceil(c.entries());
    let mut hits = 0usize;
    for r in 0..reports {
        let mut x = vec![0.0; c.dim()];
        x[r % c.dim()] = if r % 2 == 0 { 1.0 } else { -1.0 };
        let entries = perturber.perturb(&x, &mut noise).unwrap();
        hits += entries
            .iter()
            .filter(|v| i64::from(v.abs()) >= bound)
            .count();
    }
    assert!(reports * c.entries() >= 1_000_000);
    assert_eq!(hits, 0, "honest entries clamped at ±{bound}");
    assert!(
        noise.max_sigmas > 4.0 && noise.max_sigmas < ldpcov_privacy::collection::VALIDATION_SIGMAS,
        "largest draw {} σ",
        noise.max_sigmas
    );
}

/// Issue 31, item 5: one GetEstimate with 10⁵ noise scales took 139 CPU-s. Every list
/// of an estimate request is bounded (`MAX_ESTIMATE_LIST`, 64 values) and so is the
/// number of candidates its grids combine (`MAX_ESTIMATE_CANDIDATES`, 1024): beyond,
/// `INVALID_ARGUMENT` naming the field and the bound, before any work (the collection
/// has no reports, so a request that got past validation would answer
/// `FAILED_PRECONDITION` instead, as the in-bound request at the end shows).
#[tokio::test]
async fn estimate_lists_beyond_their_bounds_are_invalid_argument_before_any_work() {
    use get_estimate_request::Threshold;
    use ldpcov_aggregator::constants::{MAX_ESTIMATE_CANDIDATES, MAX_ESTIMATE_LIST};
    use ldpcov_proto::v1::{BulkShrinkage, CrossValidatedThreshold};
    let server = EmbeddedServer::start(Limits { max_dim: 16 }).await.unwrap();
    let mut admin = client(&server.url(), 7).await;
    admin.create_collection(spec("budget", 2)).await.unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let grid = |n: usize| (1..=n).map(|k| k as f64 / 10.0).collect::<Vec<_>>();
    let over = MAX_ESTIMATE_LIST + 1;
    let with = |threshold: Threshold| GetEstimateRequest {
        threshold: Some(threshold),
        skip_psd_projection: false,
        ..estimate_request("budget")
    };
    let cv = |c: CrossValidatedThreshold| with(Threshold::CrossValidated(c));
    let cases = vec![
        (
            "cross_validated.noise_scales has 65 values; at most 64",
            cv(CrossValidatedThreshold {
                noise_scales: grid(100_000),
                ..Default::default()
            }),
        ),
        (
            "cross_validated.adaptive_scales has 65 values",
            cv(CrossValidatedThreshold {
                adaptive_scales: grid(over),
                ..Default::default()
            }),
        ),
        (
            "cross_validated.diagonal_shrinkage has 65 values",
            cv(CrossValidatedThreshold {
                diagonal_shrinkage: vec![0.5; over],
                ..Default::default()
            }),
        ),
        (
            "cross_validated.bandwidths has 65 values",
            cv(CrossValidatedThreshold {
                bandwidths: (1..=over as u32).collect(),
                ..Default::default()
            }),
        ),
        (
            "diagonal_shrinkage make 4096 candidates; at most 1024",
            cv(CrossValidatedThreshold {
                noise_scales: grid(32),
                adaptive_scales: grid(32),
                diagonal_shrinkage: vec![0.5; 64],
                ..Default::default()
            }),
        ),
        (
            "bulk_shrink.alphas has 65 values",
            with(Threshold::BulkShrink(BulkShrinkage {
                alphas: vec![0.5; over],
                taus: vec![],
            })),
        ),
        (
            "bulk_shrink.taus has 65 values",
            with(Threshold::BulkShrink(BulkShrinkage {
                alphas: vec![],
                taus: vec![1.0; over],
            })),
        ),
        (
            "alphas × taus make 4096 candidates",
            with(Threshold::BulkShrink(BulkShrinkage {
                alphas: vec![0.5; 64],
                taus: vec![1.0; 64],
            })),
        ),
    ];
    // The first case's message names the real count, not 65.
    let mut first = true;
    for (want, request) in cases {
        let started = Instant::now();
        let err = raw.get_estimate(request).await.expect_err(want);
        assert_eq!(err.code(), Code::InvalidArgument, "{want}: {err:?}");
        let want = if first {
            first = false;
            "cross_validated.noise_scales has 100000 values; at most 64"
        } else {
            want
        };
        assert!(err.message().contains(want), "{want}: {}", err.message());
        // Refused before any work: far below the seconds 10⁵ candidates took.
        assert!(started.elapsed() < Duration::from_secs(5), "{want}");
    }
    assert_eq!(MAX_ESTIMATE_CANDIDATES, 1024);
    // At the bounds: past validation (the empty collection then refuses the estimate).
    let err = raw
        .get_estimate(cv(CrossValidatedThreshold {
            noise_scales: grid(MAX_ESTIMATE_LIST),
            adaptive_scales: grid(MAX_ESTIMATE_LIST),
            diagonal_shrinkage: vec![0.5; 8],
            bandwidths: (1..=MAX_ESTIMATE_LIST as u32).collect(),
            ..Default::default()
        }))
        .await
        .expect_err("no reports");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(admin.status("budget").await.unwrap().reports, 0);
    server.shutdown().await.unwrap();
}

/// A store whose `snapshot` (the first thing an estimate does after taking its slot)
/// reports that it was entered and then waits until the gate opens.
struct GatedStore {
    inner: MemoryStore,
    entered: tokio::sync::mpsc::UnboundedSender<()>,
    gate: tokio::sync::watch::Receiver<bool>,
}

#[tonic::async_trait]
impl Store for GatedStore {
    async fn create_collection(&self, c: Collection) -> Result<Arc<Collection>, StoreError> {
        self.inner.create_collection(c).await
    }
    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        self.inner.collection(id).await
    }
    async fn collection_count(&self) -> Result<u64, StoreError> {
        self.inner.collection_count().await
    }
    async fn collection_ids(&self) -> Result<Vec<String>, StoreError> {
        self.inner.collection_ids().await
    }
    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.inner.submit(id, reports).await
    }
    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        self.inner.count(id).await
    }
    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        let _ = self.entered.send(());
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        self.inner.snapshot(id).await
    }
    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        self.inner.close_collection(id).await
    }
    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.is_closed(id).await
    }
}

/// `--max-concurrent-estimates`: with a limit of 1, an estimate that holds the slot
/// (its snapshot waits on a gate) makes a second one fail `RESOURCE_EXHAUSTED` at once,
/// naming the limit; once the first ends, the slot is free again.
#[tokio::test]
async fn estimates_beyond_max_concurrent_estimates_are_resource_exhausted() {
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let (open, gate) = tokio::sync::watch::channel(false);
    let store = Arc::new(GatedStore {
        inner: MemoryStore::new(),
        entered: entered_tx,
        gate,
    });
    let transport = TransportLimits {
        max_concurrent_estimates: 1,
        ..TransportLimits::default()
    };
    let options = ServeOptions {
        limits: Limits { max_dim: 16 },
        transport,
        ..ServeOptions::default()
    };
    let server = EmbeddedServer::start_with_options(store, options)
        .await
        .unwrap();
    let mut admin = client(&server.url(), 3).await;
    admin.create_collection(spec("busy", 2)).await.unwrap();
    let raw = RawClient::connect(server.url()).await.unwrap();
    let first = {
        let mut raw = raw.clone();
        tokio::spawn(async move { raw.get_estimate(estimate_request("busy")).await })
    };
    tokio::time::timeout(Duration::from_secs(30), entered.recv())
        .await
        .expect("the first estimate reaches the store")
        .expect("sender alive");
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        raw.clone().get_estimate(estimate_request("busy")),
    )
    .await
    .expect("refused at once, not queued")
    .expect_err("the only slot is taken");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("--max-concurrent-estimates"),
        "{}",
        err.message()
    );
    open.send_replace(true);
    let first = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the first estimate ends")
        .unwrap()
        .expect_err("no reports");
    assert_eq!(first.code(), Code::FailedPrecondition, "{first:?}");
    // The slot is free again.
    let third = raw
        .clone()
        .get_estimate(estimate_request("busy"))
        .await
        .expect_err("no reports");
    assert_eq!(third.code(), Code::FailedPrecondition, "{third:?}");
    server.shutdown().await.unwrap();
}
