//! End-to-end tests of the daemon's Prometheus metrics: counted exactly, a busy
//! address refused.

use ldpcov_client::AggregatorClient;
use ldpcov_fixtures::metrics::{scrape, series};

use support::admin::*;
use support::daemon::*;

use crate::support;

/// A loopback address that was free a moment ago.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("local addr").to_string()
}

#[test]
fn metrics_count_exactly_what_the_daemon_received() {
    let data = tempfile::tempdir().expect("temp dir");
    let metrics_addr = free_addr();
    let daemon = Daemon::serve(&[
        "--data-dir",
        data.path().to_str().expect("utf-8 temp path"),
        "--metrics-listen",
        &metrics_addr,
    ]);
    assert!(
        daemon.log().contains("serving Prometheus metrics"),
        "{}",
        daemon.log()
    );
    create_with(&daemon.url, "m", "--min-reports", "10").json();

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    // Payload bytes sent per collection label, to compare with the counter.
    let (bytes_m, bytes_unknown) = runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let collection = client.collection("m").await.expect("fetch m");
        let mut reports = Vec::new();
        for i in 0..16 {
            let x = [0.1 * i as f64, -0.2, 0.3, 0.05 * i as f64];
            reports.push(client.prepare_report(&collection, &x).expect("report"));
        }
        let truncated = |r: &ldpcov_proto::v1::Report| {
            let mut bad = r.clone();
            bad.payload.truncate(bad.payload.len() - 4);
            bad.report_id[0] ^= 0xff;
            bad
        };
        let mut bytes_m = 0u64;
        let mut sent = |r: &ldpcov_proto::v1::Report| bytes_m += r.payload.len() as u64;
        // Unary: 5 new, then 2 of them again (duplicates).
        for r in reports[..5].iter().chain(&reports[..2]) {
            sent(r);
            client.submit_report(r.clone()).await.expect("unary submit");
        }
        // A stream of 7 new and 1 already counted.
        let batch: Vec<_> = reports[5..12]
            .iter()
            .chain(&reports[..1])
            .cloned()
            .collect();
        batch.iter().for_each(&mut sent);
        let response = client.submit_stream(batch).await.expect("stream");
        assert_eq!((response.accepted, response.duplicates), (7, 1));
        // Unary, a payload one entry short: INVALID_ARGUMENT.
        let bad = truncated(&reports[12]);
        sent(&bad);
        let err = client.submit_report(bad).await.expect_err("short payload");
        assert!(
            err.to_string().contains("InvalidArgument") || err.to_string().contains("invalid"),
            "{err}"
        );
        // A stream of 3 new, then a short one: the 3 are counted, the stream fails.
        let mut batch: Vec<_> = reports[12..15].to_vec();
        batch.push(truncated(&reports[15]));
        batch.iter().for_each(&mut sent);
        client
            .submit_stream(batch)
            .await
            .expect_err("short payload in a stream");
        // An unknown collection: NOT_FOUND, labelled `_unknown`.
        let mut stray = reports[15].clone();
        stray.collection_id = "no-such-collection".into();
        let bytes_unknown = stray.payload.len() as u64;
        client
            .submit_report(stray)
            .await
            .expect_err("unknown collection");
        (bytes_m, bytes_unknown)
    });
    estimate(&daemon.url, "m", &["--format", "json"]).json();

    let text = scrape(&metrics_addr, COMMAND_TIMEOUT);
    let m = [("collection", "m")];
    let check = |name: &str, labels: &[(&str, &str)], want: f64| {
        let got = series(&text, name, labels);
        assert_eq!(got, want, "{name} {labels:?}:\n{text}");
    };
    check("ldpcov_reports_accepted_total", &m, 15.0);
    check("ldpcov_reports_duplicate_total", &m, 3.0);
    check(
        "ldpcov_reports_rejected_total",
        &[("collection", "m"), ("code", "invalid_argument")],
        2.0,
    );
    check(
        "ldpcov_reports_rejected_total",
        &[("collection", "_unknown"), ("code", "not_found")],
        1.0,
    );
    check("ldpcov_report_bytes_received_total", &m, bytes_m as f64);
    check(
        "ldpcov_report_bytes_received_total",
        &[("collection", "_unknown")],
        bytes_unknown as f64,
    );
    // 5 + 2 + 1 + 1 unary calls, 2 streams.
    check(
        "ldpcov_submit_duration_seconds_count",
        &[("rpc", "SubmitReport")],
        9.0,
    );
    check(
        "ldpcov_submit_duration_seconds_count",
        &[("rpc", "SubmitReports")],
        2.0,
    );
    // Every valid report reached the store once: 15 counted + 3 duplicates.
    check(
        "ldpcov_commit_batch_reports_sum",
        &[("store", "redb")],
        18.0,
    );
    let commits = series(
        &text,
        "ldpcov_commit_batch_reports_count",
        &[("store", "redb")],
    );
    assert!(
        (1.0..=18.0 + 1.0).contains(&commits),
        "{commits} commits:\n{text}"
    );
    check(
        "ldpcov_estimate_duration_seconds_count",
        &[("target", "covariance")],
        1.0,
    );
    check("ldpcov_collections", &[], 1.0);
    // Nothing of a report but its size: no report id, no payload value.
    assert!(!text.contains("report_id"), "{text}");
}

#[test]
fn a_busy_metrics_address_is_refused_with_one_line() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("local addr").to_string();
    let line = run(&[
        "serve",
        "--memory",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &addr,
    ])
    .fails_with("cannot serve metrics on");
    assert!(line.contains(&addr), "{line}");
    // And a malformed one is refused by the argument parser, before anything starts.
    let run = run(&["serve", "--memory", "--metrics-listen", "localhost"]);
    assert_eq!(run.status.code(), Some(2), "{}", run.describe());
    assert!(
        run.stderr.contains("--metrics-listen"),
        "{}",
        run.describe()
    );
}
