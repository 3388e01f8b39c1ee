//! Reaching either daemon over the wire: a call with a bearer token
//! ([`with_token`]), a channel ([`channel`]), a unary call whose body comes as a
//! client stream ([`unary_with_body`]: with `futures::stream::pending()` its headers
//! go out and its body never comes, as a slow or hostile client holds a call open;
//! [`hanging_calls`]: many of them),
//! a connection's close ([`closed_within`]), and a gRPC-Web client over HTTP/1.1
//! ([`web`]: tonic-web's client layer over hyper's HTTP/1 client, as a browser's
//! transport would) with its CORS preflights ([`assert_cors_preflights`]).

use std::time::{Duration, Instant};

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tonic::body::Body;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::http::{Method, Request as HttpRequest, StatusCode, Uri};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_web::{GrpcWebCall, GrpcWebClientLayer, GrpcWebClientService};
use tower::Layer;

/// `message` with `authorization: Bearer <token>` (none: without a token).
pub(crate) fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// A channel to `url`, connected.
pub(crate) async fn channel(url: &str) -> Channel {
    Channel::from_shared(url.to_string())
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

/// The unary method `path` called as a client stream of `body`, with `token`.
pub(crate) async fn unary_with_body<Req, Resp>(
    channel: Channel,
    path: &'static str,
    token: Option<&str>,
    body: impl futures::Stream<Item = Req> + Send + 'static,
) -> Result<Resp, Status>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    grpc.client_streaming(
        with_token(body, token),
        PathAndQuery::from_static(path),
        tonic_prost::ProstCodec::<Req, Resp>::default(),
    )
    .await
    .map(tonic::Response::into_inner)
}

/// `connections × per_connection` calls of the unary method `path` at `url` with
/// `token`, each on its own stream of one of `connections` connections, whose body
/// never comes (they hold the call open until the server ends it): the tasks, each
/// ending with the call's answer.
pub(crate) async fn hanging_calls<Req, Resp>(
    url: &str,
    path: &'static str,
    token: Option<&str>,
    connections: usize,
    per_connection: usize,
) -> Vec<JoinHandle<Result<Resp, Status>>>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let mut hanging = Vec::with_capacity(connections * per_connection);
    for _ in 0..connections {
        let channel = channel(url).await;
        for _ in 0..per_connection {
            let channel = channel.clone();
            let token = token.map(str::to_string);
            hanging.push(tokio::spawn(async move {
                unary_with_body::<Req, Resp>(
                    channel,
                    path,
                    token.as_deref(),
                    futures::stream::pending(),
                )
                .await
            }));
        }
    }
    hanging
}

/// Asserts that every one of `hanging` ([`hanging_calls`] without a token) was
/// refused UNAUTHENTICATED from its headers alone (its body never came), within 30 s,
/// and that there were `expected` of them.
pub(crate) async fn assert_refused_unauthenticated<Resp>(
    hanging: Vec<JoinHandle<Result<Resp, Status>>>,
    expected: usize,
) {
    let mut refused = 0;
    for call in hanging {
        let result = timeout(Duration::from_secs(30), call)
            .await
            .expect("a token-less call must be refused without its body")
            .expect("task");
        let Err(status) = result else {
            panic!("a token-less call was answered");
        };
        assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
        refused += 1;
    }
    assert_eq!(refused, expected);
}

/// Three connections to `addr` that start no call: one silent (nothing sent), one
/// dribbling (8 bytes of the HTTP/2 client preface), one idle (the whole preface and
/// an empty SETTINGS frame: a complete HTTP/2 handshake).
pub(crate) async fn connections_without_calls(
    addr: impl tokio::net::ToSocketAddrs + Copy,
) -> (TcpStream, TcpStream, TcpStream) {
    let silent = TcpStream::connect(addr).await.expect("connect");
    let mut dribbling = TcpStream::connect(addr).await.expect("connect");
    dribbling.write_all(b"PRI * HT").await.expect("write");
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .expect("write");
    (silent, dribbling, idle)
}

/// Reads until the server closes the connection (EOF or an error) and returns how
/// long that took; `None` if it is still open after `limit`.
pub(crate) async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
    .map(|()| started.elapsed())
}

/// A gRPC-Web client service over HTTP/1.1.
pub(crate) type WebService = GrpcWebClientService<Client<HttpConnector, GrpcWebCall<Body>>>;

/// A gRPC-Web service over HTTP/1.1 to `url`, and `url` as the clients' origin.
pub(crate) fn web(url: &str) -> (WebService, Uri) {
    let http1 = Client::builder(TokioExecutor::new()).build_http::<GrpcWebCall<Body>>();
    (
        GrpcWebClientLayer::new().layer(http1),
        url.parse().expect("daemon url"),
    )
}

/// CORS: a preflight for `method_url` (a method's whole URL) from `allowed_origin` is
/// answered with that origin and allows the `authorization` header; one from another
/// origin gets no allow-origin header (the browser then withholds the answer).
pub(crate) async fn assert_cors_preflights(method_url: &str, allowed_origin: &str) {
    let http1 = Client::builder(TokioExecutor::new()).build_http::<Body>();
    for (from, allowed) in [(allowed_origin, true), ("http://evil.example", false)] {
        let preflight = HttpRequest::builder()
            .method(Method::OPTIONS)
            .uri(method_url)
            .header("origin", from)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,x-grpc-web",
            )
            .body(Body::empty())
            .expect("request");
        let response = http1.request(preflight).await.expect("preflight");
        assert_eq!(response.status(), StatusCode::OK, "{from}");
        let header = response.headers().get("access-control-allow-origin");
        if allowed {
            assert_eq!(
                header.map(|h| h.as_bytes()),
                Some(allowed_origin.as_bytes())
            );
            let headers = response
                .headers()
                .get("access-control-allow-headers")
                .map(|h| h.to_str().unwrap_or("").to_ascii_lowercase())
                .unwrap_or_default();
            assert!(headers.contains("authorization"), "{headers}");
        } else {
            assert!(header.is_none(), "{from}: {header:?}");
        }
    }
}
