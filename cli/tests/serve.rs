//! End-to-end tests of the daemon's life: graceful shutdown on SIGTERM, the PostgreSQL
//! store refused when bad and shared by two daemons.

use support::admin::*;
use support::daemon::*;

mod support;

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
