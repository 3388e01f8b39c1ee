//! The transport's defences, through the real daemon: callers without a token cannot
//! take the shared concurrency slots, and silent or idle connections are closed; a
//! legitimate large report over a slow link is not cut by them.

use std::time::Duration;

use futures::StreamExt;
use ldpcov_proto::v1::{CollectionStatus, GetStatusRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use support::admin::run;
use support::daemon::*;
use support::grpc::{
    assert_refused_unauthenticated, channel, closed_within, connections_without_calls,
    hanging_calls, unary_with_body,
};

use crate::support;

const ADMIN: &str = "transport-admin-secret";
const SUBMIT: &str = "transport-submit-secret";
const GET_STATUS: &str = "/ldpcov.v1.Aggregator/GetStatus";

/// Issue 31, item 1: 1 100 calls without a token that send their headers and never
/// their body (more than the 1 024 slots of `--max-concurrent-requests`, spread over
/// 11 connections) once held every slot until the request timeout, so that a normal
/// client's GetStatus and the health check waited minutes. Now they are refused
/// `UNAUTHENTICATED` from their headers, before a slot is taken, and the normal
/// client and the health check answer. (No timing is asserted beyond the generous
/// bounds that tell "answered" from "stuck".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_less_calls_that_hang_do_not_stall_a_normal_client_or_the_health_check() {
    let daemon = Daemon::start_with(&["--admin-token", ADMIN, "--submit-token", SUBMIT]);
    let hanging =
        hanging_calls::<GetStatusRequest, CollectionStatus>(&daemon.url, GET_STATUS, None, 11, 100)
            .await;
    // Let the hanging calls reach the server first.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let normal = channel(&daemon.url).await;
    let answer = timeout(
        Duration::from_secs(10),
        unary_with_body::<GetStatusRequest, CollectionStatus>(
            normal.clone(),
            GET_STATUS,
            Some(SUBMIT),
            futures::stream::iter([GetStatusRequest {
                collection_id: "nothing-here".to_string(),
            }]),
        ),
    )
    .await
    .expect("a normal client's GetStatus must answer while token-less calls hang");
    // The collection does not exist: NOT_FOUND is the service's own answer.
    let status = answer.expect_err("no such collection");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    let health = timeout(
        Duration::from_secs(10),
        HealthClient::new(normal).check(HealthCheckRequest {
            service: "ldpcov.v1.Aggregator".to_string(),
        }),
    )
    .await
    .expect("the health check must answer while token-less calls hang")
    .expect("health check");
    assert_eq!(health.into_inner().status, ServingStatus::Serving as i32);

    // Every token-less call was refused from its headers alone: its body never came.
    assert_refused_unauthenticated(hanging, 1100).await;
}

/// Issue 31, item 2: silent TCP connections and connections that sent the HTTP/2
/// preface and then nothing were never closed. With `--handshake-timeout-secs 1` a
/// connection that sends nothing, or less than the preface, is closed; with
/// `--idle-timeout-secs 2` one that finished the handshake and starts no call is
/// closed; a call in flight longer than the idle timeout (a GetStatus whose body
/// comes after 5 s) keeps its connection and is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_idle_connections_are_closed_but_a_slow_call_is_not() {
    let daemon = Daemon::start_with(&["--handshake-timeout-secs", "1", "--idle-timeout-secs", "2"]);
    let addr = daemon.url.trim_start_matches("http://").to_string();
    let limit = Duration::from_secs(20);

    let (mut silent, mut dribbling, mut idle) = connections_without_calls(addr.as_str()).await;

    // A call whose body comes after 5 s: in flight for longer than the idle timeout.
    let slow = tokio::spawn({
        let channel = channel(&daemon.url).await;
        async move {
            let body = futures::stream::once(async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                GetStatusRequest {
                    collection_id: "nothing-here".to_string(),
                }
            });
            unary_with_body::<GetStatusRequest, CollectionStatus>(
                channel,
                GET_STATUS,
                None,
                body.boxed(),
            )
            .await
        }
    });

    assert!(
        closed_within(&mut silent, limit).await.is_some(),
        "a silent connection is still open after {limit:?}"
    );
    assert!(
        closed_within(&mut dribbling, limit).await.is_some(),
        "a connection that sent 8 bytes of the preface is still open after {limit:?}"
    );
    assert!(
        closed_within(&mut idle, limit).await.is_some(),
        "an idle HTTP/2 connection is still open after {limit:?}"
    );
    let answer = timeout(limit, slow)
        .await
        .expect("the slow call ends")
        .expect("task");
    let status = answer.expect_err("no such collection");
    assert_eq!(
        status.code(),
        Code::NotFound,
        "the slow call was cut: {status:?}"
    );
}

/// Bytes a second the throttling proxy forwards from the client to the daemon.
const SLOW_LINK_RATE: f64 = 1.0e6;

/// A TCP proxy on `127.0.0.1:0` in front of `upstream` that forwards what clients send
/// in chunks of at most 4 KiB at [`SLOW_LINK_RATE`] (what the daemon sends back goes
/// through unthrottled). Returns its address.
async fn slow_link(upstream: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let addr = listener.local_addr().expect("proxy address").to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                });
                let start = tokio::time::Instant::now();
                let mut sent = 0usize;
                let mut buf = [0u8; 4096];
                loop {
                    let n = match client_read.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    sent += n;
                    // Keep the average at the rate: wait until `sent` bytes are due.
                    let due = start + Duration::from_secs_f64(sent as f64 / SLOW_LINK_RATE);
                    tokio::time::sleep_until(due).await;
                }
                let _ = server_write.shutdown().await;
            });
        }
    });
    addr
}

/// Issue 31, "done when": the new timeouts must not cut a legitimate p = 1000 stream
/// on a slow link. The daemon runs at its default settings (handshake, idle,
/// keepalive and request timeouts, message sizes, concurrency limits); a p = 1000
/// Gaussian report in i32 (501 500 entries, about 2 MB) goes through a proxy that
/// forwards at 1 MB/s in 4 KiB chunks, as a `SubmitReports` stream. It is counted:
/// the count moves by exactly one. The transfer takes at least 2 s (checked, so the
/// throttle is known to have acted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p1000_report_over_a_slow_link_is_counted_at_the_default_settings() {
    const P: usize = 1000;
    let daemon = Daemon::start();
    let url = daemon.url.clone();
    let created = tokio::task::spawn_blocking(move || {
        run(&[
            "create",
            "--server",
            &url,
            "--id",
            "wide",
            "--dim",
            "1000",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--clip-radius",
            "2",
            "--min-reports",
            "50",
            "--encoding",
            "i32",
        ])
    })
    .await
    .expect("create");
    created.json();

    let mut direct = ldpcov_client::AggregatorClient::connect(daemon.url.clone())
        .await
        .expect("direct client");
    let before = direct.status("wide").await.expect("status").reports;
    assert_eq!(before, 0);

    let proxy = slow_link(daemon.url.trim_start_matches("http://").to_string()).await;
    let mut slow = ldpcov_client::AggregatorClient::connect(format!("http://{proxy}"))
        .await
        .expect("client through the slow link");
    let collection = slow.collection("wide").await.expect("collection");
    let x: Vec<f64> = (0..P).map(|i| ((i % 7) as f64 - 3.0) / 100.0).collect();
    let report = slow.prepare_report(&collection, &x).expect("report");
    let bytes = report.payload.len();
    assert!(bytes >= 4 * 501_500, "{bytes} payload bytes");

    let started = std::time::Instant::now();
    let response = timeout(Duration::from_secs(60), slow.submit_stream(vec![report]))
        .await
        .expect("the stream ends")
        .expect("a p = 1000 report over a slow link is accepted");
    let took = started.elapsed();
    assert_eq!(response.accepted, 1);
    assert_eq!(response.duplicates, 0);
    assert!(
        took.as_secs_f64() >= 0.9 * bytes as f64 / SLOW_LINK_RATE,
        "the throttle did not act: {bytes} bytes in {took:?}"
    );
    let after = direct.status("wide").await.expect("status").reports;
    assert_eq!(after, before + 1);
}
