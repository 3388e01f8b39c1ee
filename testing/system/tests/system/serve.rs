//! End-to-end tests of the daemon's life: graceful shutdown on SIGTERM, the PostgreSQL
//! store refused when bad and shared by two daemons.

use support::admin::*;
use support::daemon::*;

use crate::support;

#[cfg(unix)]
#[test]
fn sigterm_shuts_the_daemon_down_gracefully() {
    let mut daemon = Daemon::start();
    // Make sure it is really serving first.
    let params = create(&daemon.url, "before-shutdown", &[]).json();
    assert_eq!(params["collection_id"], "before-shutdown");
    let (status, log) = daemon.terminate();
    assert!(
        status.success(),
        "daemon exited with {status} after SIGTERM; stderr:\n{log}"
    );
    assert!(log.contains("SIGTERM"), "stderr:\n{log}");
    assert!(log.contains("shut down"), "stderr:\n{log}");
    // No tokens configured: the daemon says so.
    assert!(log.contains("WITHOUT AUTHENTICATION"), "stderr:\n{log}");
    assert!(!log.contains("panicked"), "stderr:\n{log}");
}

#[test]
fn a_bad_postgres_store_is_refused_with_one_line() {
    let conflict = "--store cannot be combined with --memory or --data-dir";
    let url = "postgres://ann@127.0.0.1:1/ldpcov";
    run(&["serve", "--store", url, "--memory"]).fails_with(conflict);
    run(&["serve", "--store", url, "--data-dir", "/nonexistent/x"]).fails_with(conflict);
    let line = run(&["serve", "--store", "mysql://ann:pw-secret@db/x"])
        .fails_with("is not a postgres://USER@HOST:PORT/DB URL");
    assert!(!line.contains("pw-secret"), "{line}");
    run(&["serve", "--store", "postgres://ann@db:notaport/x"]).fails_with("invalid PostgreSQL URL");
    run(&["serve", "--store", url, "--pg-pool-size", "0"]).fails_with("--pg-pool-size");
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("local addr").port()
    };
    let unreachable = format!("postgres://ann:pw-secret@127.0.0.1:{port}/ldpcov");
    let line = run(&["serve", "--store", &unreachable])
        .fails_with("cannot open the PostgreSQL store postgres://ann:***@127.0.0.1");
    assert!(!line.contains("pw-secret"), "{line}");
}

#[cfg(unix)]
#[test]
fn two_daemons_share_one_postgres_database() {
    let pg = ldpcov_pg_cluster::PgCluster::start_or_panic();
    let url = pg.database_or_panic("cli");
    let mut first = Daemon::serve(&["--store", &url]);
    create(&first.url, "shared", &[]).json();
    submit_reports(&first.url, "shared", REPORTS);
    // A second daemon on the same database sees the collection and its reports, and
    // counts what it receives into the same sums.
    let mut second = Daemon::serve(&["--store", &url, "--pg-pool-size", "2"]);
    assert_eq!(status(&second.url, "shared").json()["reports"], REPORTS);
    submit_reports(&second.url, "shared", 5);
    assert_eq!(status(&first.url, "shared").json()["reports"], REPORTS + 5);
    let (status_first, log) = first.terminate();
    assert!(status_first.success(), "{log}");
    assert!(log.contains("store=\"postgres\""), "{log}");
    assert!(!log.contains("ldpcov-data"), "{log}");
    let (status_second, log) = second.terminate();
    assert!(status_second.success(), "{log}");
}

/// Issue 31, item 4: a 0-byte `ldpcov.redb` used to start as an empty store without a
/// word. It is refused with one line and exit 1, and the file is left as it was;
/// `--init-empty` starts an empty store in it, which then restarts without the flag.
/// A file that is not a redb database is refused too.
#[cfg(unix)]
#[test]
fn an_empty_or_foreign_database_file_is_refused_unless_init_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let file = dir.path().join("ldpcov.redb");
    std::fs::write(&file, b"").expect("write");
    let args = ["serve", "--listen", "127.0.0.1:0", "--data-dir", data];
    let line =
        run(&args).fails_with("is not an ldpcov database; move it away or pass --init-empty");
    assert!(line.contains("ldpcov.redb is empty (0 bytes)"), "{line}");
    assert_eq!(std::fs::metadata(&file).expect("file").len(), 0);

    let mut daemon = Daemon::serve(&["--data-dir", data, "--init-empty"]);
    create(&daemon.url, "after-init", &[]).json();
    let (status, log) = daemon.terminate();
    assert!(status.success(), "{log}");
    let mut again = Daemon::serve(&["--data-dir", data]);
    let status_json = status_of(&again.url, "after-init");
    assert_eq!(status_json["params"]["collection_id"], "after-init");
    again.terminate();

    std::fs::write(&file, b"not a database at all\n").expect("write");
    run(&args).fails_with("does not start with a redb header: it is not an ldpcov database");
}

fn status_of(url: &str, id: &str) -> serde_json::Value {
    status(url, id).json()
}

/// The offsets of every accumulator blob in `bytes` that counts `reports` reports
/// (magic `LDPACC01`, report count at byte 24 of the blob).
fn blobs_counting(bytes: &[u8], reports: u64) -> Vec<usize> {
    (0..bytes.len().saturating_sub(32))
        .filter(|&i| {
            &bytes[i..i + 8] == b"LDPACC01" && bytes[i + 24..i + 32] == reports.to_le_bytes()
        })
        .collect()
}

/// Issue 31, item 3 (at open): a database file with flipped bytes in its middle used
/// to open with the right counts and make redb panic at the first write. redb's
/// integrity check now runs before anything is served, and a file it cannot repair
/// is refused with one line naming the file, what was still readable and what to do,
/// exit 1. The damage is real: a store written by the daemon (two collections, one
/// with reports), stopped cleanly, then 64 bytes inverted inside the accumulator blob
/// of the last commit (its page checksum no longer matches; with two-phase commit redb
/// does not fall back to an older commit). Nothing of the file is rewritten by the
/// refusal but the one bit by which redb marks a file it opened as needing recovery
/// (the god byte's `RECOVERY_REQUIRED`). Damage to redb's own structures (the last
/// page) makes redb panic while opening instead: refused too, the last line naming
/// the file.
#[cfg(unix)]
#[test]
fn a_database_that_fails_the_integrity_check_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let file = dir.path().join("ldpcov.redb");
    let mut daemon = Daemon::serve(&["--data-dir", data]);
    create(&daemon.url, "with-reports", &[]).json();
    create(&daemon.url, "empty", &[]).json();
    submit_reports(&daemon.url, "with-reports", REPORTS);
    let (status, log) = daemon.terminate();
    assert!(status.success(), "{log}");

    // The clean file starts (the check passes without a warning).
    let mut clean = Daemon::serve(&["--data-dir", data]);
    assert_eq!(status_of(&clean.url, "with-reports")["reports"], REPORTS);
    let (status, log) = clean.terminate();
    assert!(status.success(), "{log}");
    assert!(!log.contains("integrity check"), "{log}");

    let original = std::fs::read(&file).expect("read the store");
    let mut bytes = original.clone();
    let blobs = blobs_counting(&bytes, REPORTS);
    assert!(
        !blobs.is_empty(),
        "no accumulator blob counting {REPORTS} reports"
    );
    for &blob in &blobs {
        // Past the blob's 32-byte header: the fold counts and sums.
        for b in &mut bytes[blob + 48..blob + 112] {
            *b ^= 0xff;
        }
    }
    std::fs::write(&file, &bytes).expect("write the damaged store");

    let args = ["serve", "--listen", "127.0.0.1:0", "--data-dir", data];
    let line = run(&args).fails_with("failed redb's integrity check and cannot be repaired");
    assert!(
        line.contains(&format!("{} failed", file.display())),
        "{line}"
    );
    assert!(line.ends_with("restore it from a backup"), "{line}");
    assert!(
        line.contains(&format!(
            "2 collections with {REPORTS} reports were still readable"
        )),
        "{line}"
    );
    // redb's verdict appears once (it used to be printed again as the error's source).
    assert_eq!(line.matches("DB corrupted").count(), 1, "{line}");

    // The refusal rewrote nothing but redb's recovery flag in the god byte (offset 9).
    let after = std::fs::read(&file).expect("read the store again");
    assert_eq!(after.len(), bytes.len());
    let changed: Vec<usize> = (0..after.len()).filter(|&i| after[i] != bytes[i]).collect();
    assert!(
        changed.iter().all(|&i| i == 9),
        "bytes changed at {changed:?}"
    );
    const RECOVERY_REQUIRED: u8 = 2;
    assert_eq!(after[9] & !RECOVERY_REQUIRED, bytes[9] & !RECOVERY_REQUIRED);
    // Refused again, the same way: the flag changes nothing of the verdict.
    run(&args).fails_with("failed redb's integrity check and cannot be repaired");

    // Damage to redb's own pages: the original file with its last page inverted.
    let mut bytes = original;
    let last = bytes.len() - 4096;
    for b in &mut bytes[last + 64..last + 128] {
        *b ^= 0xff;
    }
    std::fs::write(&file, &bytes).expect("write the damaged store");
    let refused = run(&args);
    assert_eq!(refused.status.code(), Some(1), "{}", refused.describe());
    let last_line = refused.stderr.lines().last().unwrap_or_default();
    assert!(
        last_line.starts_with("error: ")
            && last_line.contains(&file.display().to_string())
            && last_line.contains("restore it from a backup"),
        "{}",
        refused.describe()
    );
    let after = std::fs::read(&file).expect("read the store again");
    assert!((0..after.len()).all(|i| i == 9 || after[i] == bytes[i]));
}

/// Issue 31, item 3 (while running), through the real daemon: a panic on the durable
/// store's commit thread (redb panics so on some damaged files) used to leave the
/// daemon SERVING while every write failed. The test build's fault injection
/// (`LDPCOV_FAULT_PANIC_AT_COMMIT=2`, compiled only with the aggregator's
/// `fault-injection` feature, which only this crate's dev-dependency enables) makes
/// the second batch commit panic. The write that hit it is refused `UNAVAILABLE`
/// naming the file, an open health `Watch` turns `NOT_SERVING`, a later write is
/// refused `UNAVAILABLE`, and the daemon exits 1 within the 5 s drain with its last
/// stderr line naming the file. The collection committed before the panic survives.
#[cfg(unix)]
#[test]
fn a_commit_thread_panic_turns_health_not_serving_and_exits_the_daemon_with_one_line() {
    use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
    use std::time::{Duration, Instant};
    use tonic::Code;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("utf-8 path");
    let file = dir.path().join("ldpcov.redb").display().to_string();
    let mut daemon = Daemon::serve_with_env(
        &["--data-dir", data],
        &[("LDPCOV_FAULT_PANIC_AT_COMMIT", "2")],
    );
    // Commit 1: the collection.
    create(&daemon.url, "doomed", &[]).json();

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let panicked_at = runtime.block_on(async {
        let channel = tonic::transport::Channel::from_shared(daemon.url.clone())
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut watch = HealthClient::new(channel.clone())
            .watch(HealthCheckRequest {
                service: "ldpcov.v1.Aggregator".to_string(),
            })
            .await
            .expect("health watch")
            .into_inner();
        let first = watch.message().await.expect("watch").expect("a status");
        assert_eq!(first.status, ServingStatus::Serving as i32);

        let mut client = ldpcov_client::AggregatorClient::connect(daemon.url.clone())
            .await
            .expect("client");
        let collection = client.collection("doomed").await.expect("collection");
        let mut raw = RawClient::new(channel);
        let report = client
            .prepare_report(&collection, &[0.5, 0.1, -0.2, 0.3])
            .expect("report");
        // Commit 2 panics.
        let panicked_at = Instant::now();
        let status = raw
            .submit_report(report)
            .await
            .expect_err("the commit panicked");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(
            status
                .message()
                .contains(&format!("the commit thread panicked while writing {file}")),
            "{status:?}"
        );

        // Health turns NOT_SERVING (the watch is an in-flight call: the drain waits
        // for it, so it sees the change).
        let not_serving = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(update)) = watch.message().await {
                if update.status == ServingStatus::NotServing as i32 {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(not_serving, Ok(true), "health never turned NOT_SERVING");

        // A later write is refused as well: by the store (it takes no more writes:
        // UNAVAILABLE) or, once the drain began, by the transport (UNAVAILABLE, or
        // CANCELLED when the connection closes under the call). Either way nothing is
        // counted: the restart below finds 0 reports.
        let report = client
            .prepare_report(&collection, &[0.1, 0.1, 0.1, 0.1])
            .expect("report");
        let later = raw.submit_report(report).await.expect_err("no more writes");
        // (The connection's GOAWAY can also reach the call first, which tonic reports
        // as INTERNAL "h2 protocol error".)
        let closed_under_it =
            later.code() == Code::Internal && later.message().contains("h2 protocol error");
        assert!(
            matches!(later.code(), Code::Unavailable | Code::Cancelled) || closed_under_it,
            "{later:?}"
        );
        drop(watch);
        panicked_at
    });

    let status = wait_timeout(&mut daemon.child, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("the daemon did not exit; stderr:\n{}", daemon.log()));
    let exited_after = panicked_at.elapsed();
    if let Some(reader) = daemon.reader.take() {
        let _ = reader.join();
    }
    let log = daemon.log();
    assert_eq!(status.code(), Some(1), "{log}");
    // FATAL_DRAIN is 5 s; a second of slack for the exit itself.
    assert!(
        exited_after < Duration::from_secs(6),
        "{exited_after:?}; {log}"
    );
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: the commit thread panicked while writing ")
            && last.contains(&file)
            && last.contains("injected storage engine panic")
            && last.contains("restore the file from a backup"),
        "last line {last:?}; stderr:\n{log}"
    );
    assert_eq!(log.matches("error: ").count(), 1, "{log}");

    // The collection committed before the panic is there after a restart without the
    // fault, and writes work again.
    let mut again = Daemon::serve(&["--data-dir", data]);
    assert_eq!(status_of(&again.url, "doomed")["reports"], 0);
    submit_reports(&again.url, "doomed", 5);
    assert_eq!(status_of(&again.url, "doomed")["reports"], 5);
    let (status, log) = again.terminate();
    assert!(status.success(), "{log}");
}
