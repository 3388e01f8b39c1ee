//! End-to-end tests of `create` and `status` against a real daemon: bad specs are
//! refused and create nothing, the spec's moments, centre and names, no server.

use support::admin::*;
use support::daemon::*;

use crate::support;

#[test]
fn bad_specs_are_refused_and_create_nothing() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    for (i, (flag, value)) in [
        ("--epsilon", "0"),
        ("--epsilon", "-1"),
        ("--dim", "0"),
        ("--delta", "1"),
        ("--delta", "0"),
        ("--clip-radius", "0"),
        ("--min-reports", "0"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bad-{i}");
        create_with(url, &id, flag, value).fails_with("InvalidArgument");
        status(url, &id).fails_with("NotFound");
    }
    // A bad id.
    create(url, "bad id!", &[]).fails_with("InvalidArgument");
    // The daemon is still healthy.
    let params = create(url, "good", &[]).json();
    assert_eq!(params["collection_id"], "good");
}

/// `create --moments/--centre/--names` (inline and from files) reach the spec and come
/// back in `create` and `status`; bad values are one-line errors that create nothing.
#[test]
fn create_takes_moments_centre_and_names() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let p = create(
        url,
        "joint-c",
        &["--centre", "-1.5,2,0,1e3", "--names", "a,b,c,d"],
    )
    .json();
    assert_eq!(p["moments"], "MOMENTS_MEAN_AND_COVARIANCE");
    assert_eq!(p["centre"], serde_json::json!([-1.5, 2.0, 0.0, 1000.0]));
    assert_eq!(p["variable_names"], serde_json::json!(["a", "b", "c", "d"]));
    let st = status(url, "joint-c").json();
    assert_eq!(st["params"], p, "{st}");
    let p = create(url, "second", &["--moments", "second-moment"]).json();
    assert_eq!(p["moments"], "MOMENTS_SECOND_MOMENT");
    assert_eq!(
        (p["entries"].as_u64(), p["mean_entries"].as_u64()),
        (Some(10), Some(0))
    );
    // Files: numbers separated by commas, spaces or newlines; one name per line.
    let dir = tempfile::tempdir().expect("tempdir");
    let centre = dir.path().join("centre.txt");
    std::fs::write(&centre, "1, 2\n3 4\n").expect("write");
    let names = dir.path().join("names.txt");
    std::fs::write(&names, "x, with a comma\ny\nz\nw\n").expect("write");
    let (c, n) = (
        centre.to_str().expect("utf-8"),
        names.to_str().expect("utf-8"),
    );
    let p = create(url, "files", &["--centre-file", c, "--names-file", n]).json();
    assert_eq!(p["centre"], serde_json::json!([1.0, 2.0, 3.0, 4.0]));
    assert_eq!(p["variable_names"][0], "x, with a comma");
    // Refusals: the server's precise message, nothing created.
    for (i, (extra, needle)) in [
        (vec!["--centre", "1,2,3"], "centre has 3 values"),
        (
            vec!["--centre", "1,2,NaN,4"],
            "centre[2] = NaN must be a finite number",
        ),
        (vec!["--names", "a,b,a,c"], "appears twice"),
        (vec!["--names", "a,b,c"], "3 variable names given"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bad-joint-{i}");
        let line = create(url, &id, &extra).fails_with("InvalidArgument");
        assert!(line.contains(needle), "{line}");
        status(url, &id).fails_with("NotFound");
    }
    std::fs::write(&centre, "1, 2, x, 4").expect("write");
    let line = create(url, "bad-file", &["--centre-file", c]).fails_with("not a number");
    assert!(line.contains("value 3"), "{line}");
    // An unknown --moments is a usage error of clap's (exit 2, with the choices).
    let r = create(url, "bad-moments", &["--moments", "third"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.describe());
    assert!(r.stderr.contains("mean-and-covariance"), "{}", r.describe());
    status(url, "bad-file").fails_with("NotFound");
}

#[test]
fn create_without_a_server_fails_with_one_line() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("local addr").port()
    };
    let server = format!("http://127.0.0.1:{port}");
    let line = create(&server, "nobody-home", &[]).fails_with("cannot connect");
    assert!(line.contains(&server), "{line}");
    status(&server, "nobody-home").fails_with("cannot connect");
}

/// `create --mechanism`: a new local collection defaults to the svec-weighted Gaussian
/// report; `gaussian-triu` is the raw weighting, whose off-diagonal noise sd is σ (the
/// svec one's σ/√2); `rank-one` goes without `--delta` (pure ε), is i16 and shows its
/// parameters in `create` and `status`. A rank-one collection with a δ, and a Gaussian
/// one without, are one-line errors that create nothing.
#[test]
fn create_chooses_the_mechanism() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let g = create(url, "g", &[]).json();
    assert_eq!(g["local_mechanism"], "LOCAL_MECHANISM_GAUSSIAN");
    assert_eq!(g["rank_one"], serde_json::Value::Null);
    let sigma = g["sigma"].as_f64().unwrap();
    let off = g["off_diagonal_noise_sd"].as_f64().unwrap();
    assert!((off * 2f64.sqrt() / sigma - 1.0).abs() < 1e-12, "{g}");
    let t = create(url, "t", &["--mechanism", "gaussian-triu"]).json();
    assert_eq!(t["local_mechanism"], "LOCAL_MECHANISM_GAUSSIAN_TRIU");
    assert_eq!(t["off_diagonal_noise_sd"], t["sigma"]);
    let r = run(&[
        "create",
        "--server",
        url,
        "--id",
        "r",
        "--dim",
        "4",
        "--epsilon",
        "2",
        "--clip-radius",
        "1",
        "--min-reports",
        "10",
        "--mechanism",
        "rank-one",
    ])
    .json();
    assert_eq!(r["local_mechanism"], "LOCAL_MECHANISM_RANK_ONE");
    assert_eq!(r["delta"], 0.0);
    assert_eq!(r["encoding"], "ENCODING_I16_LE");
    assert!(r["rank_one"]["kappa"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(status(url, "r").json()["params"], r);
    create(url, "r2", &["--mechanism", "rank-one"]).fails_with("pure epsilon");
    status(url, "r2").fails_with("NotFound");
    run(&[
        "create",
        "--server",
        url,
        "--id",
        "g2",
        "--dim",
        "4",
        "--epsilon",
        "2",
        "--clip-radius",
        "1",
        "--min-reports",
        "10",
    ])
    .fails_with("--delta is required");
    status(url, "g2").fails_with("NotFound");
}
