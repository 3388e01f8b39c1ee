//! The Python package for analysts (`clients/python`, distribution `ldpcov-analyst`,
//! import `ldpcov`) against this crate's real daemon.
//!
//! [`python_client_against_the_real_daemon`] builds the wheel (`pip wheel` on a copy
//! of the package, so the source tree gets no build directory), installs it into a
//! fresh virtual environment (`python3 -m venv`; numpy, pandas, grpcio and protobuf
//! come from PyPI as the wheel's dependencies, pytest beside them), starts
//! `ldpcov-aggregator serve --memory` with an admin token, creates four collections
//! with the CLI (a named mean-and-covariance one holding a planted one-factor model,
//! an unnamed second-moment one, a central one, an empty one), sends their reports
//! with the Rust client (the devices' part, which the analyst's package does not do),
//! and runs the package's pytest suite (`clients/python/tests`) against the daemon:
//! the address, the token and what was planted reach it in `LDPCOV_TEST_*`
//! variables, the binary in `LDPCOV_AGGREGATOR_BIN` (the planner is compared with
//! `ldpcov-aggregator plan`). Every test must pass and none may skip.
//!
//! [`python_stubs_match_the_proto`] regenerates the package's committed gRPC stubs
//! (`clients/python/scripts/generate.py --check`, grpcio-tools at the version the
//! script pins, in its own virtual environment) and fails when they differ from what
//! the .proto generates.
//!
//! The test lives in this crate because only a crate's own tests get its binary's path
//! (`CARGO_BIN_EXE_*`) from cargo. Fails, never skips, when Python ≥ 3.10 with `venv`
//! and pip is missing (`python3` on PATH, or `$PYTHON`), PyPI cannot be reached, or the
//! daemon cannot start. The virtual environments and the wheel are left in
//! `target/tmp/python_client/` for a look after a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ldpcov_client::{AggregatorClient, ReportId};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use serde_json::json;

use support::admin::run;
use support::daemon::Daemon;

mod support;

const BIN: &str = env!("CARGO_BIN_EXE_ldpcov-aggregator");
const ADMIN_TOKEN: &str = "py-admin-secret";

/// The planted one-factor model of the `survey` collection: x = μ + ℓ·f + diag(d)·e.
const NAMES: [&str; 5] = ["height", "weight", "age", "income", "score"];
const MEAN: [f64; 5] = [0.5, -0.3, 0.2, 0.0, 0.4];
const LOADINGS: [f64; 5] = [0.9, 0.8, 0.7, 0.6, 0.1];
const NOISE: [f64; 5] = [0.4, 0.5, 0.6, 0.7, 0.8];
const SURVEY_REPORTS: usize = 20_000;
const MOMENT_REPORTS: usize = 300;
const CENTRAL_REPORTS: usize = 2_000;

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../clients/python")
}

/// A scratch directory of its own for each test, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("python_client")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot empty {}: {e}", dir.display()));
    }
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Runs `program` with no `LDPCOV_*` variable but those in `envs`.
fn run_in(program: &Path, args: &[&str], cwd: &Path, envs: &[(&str, String)]) -> Output {
    let mut command = Command::new(program);
    for (key, _) in std::env::vars() {
        if key.starts_with("LDPCOV_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .current_dir(cwd)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{} {}` ({e}): the Python client's tests need Python ≥ 3.10 with venv and pip",
                program.display(),
                args.join(" ")
            )
        })
}

fn check(output: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`{what}` failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    stdout
}

/// A fresh virtual environment in `dir/venv`; returns its interpreter.
fn venv(dir: &Path) -> PathBuf {
    let python3 = PathBuf::from(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()));
    let version = check(
        &run_in(
            &python3,
            &["-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            dir,
            &[],
        ),
        "python3 --version",
    );
    let (major, minor) = version
        .trim()
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .unwrap_or((0, 0));
    assert!(
        (major, minor) >= (3, 10),
        "Python {} is too old: the package needs ≥ 3.10",
        version.trim()
    );
    let env = dir.join("venv");
    let env_str = env.to_str().expect("utf-8 scratch path");
    check(
        &run_in(&python3, &["-m", "venv", env_str], dir, &[]),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    );
    let python = env.join("bin").join("python");
    assert!(python.exists(), "no interpreter at {}", python.display());
    python
}

/// Copies the package's source (not its build by-products) to `to`.
fn copy_package(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the package copy");
    for entry in std::fs::read_dir(from).expect("read the package directory") {
        let entry = entry.expect("directory entry");
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if ["build", "dist", "__pycache__", ".pytest_cache"].contains(&name.as_ref())
            || name.ends_with(".egg-info")
        {
            continue;
        }
        let path = entry.path();
        if entry.file_type().expect("file type").is_dir() {
            copy_package(&path, &to.join(&*name));
        } else {
            std::fs::copy(&path, to.join(&*name))
                .unwrap_or_else(|e| panic!("cannot copy {}: {e}", path.display()));
        }
    }
}

/// The planted survey's covariance ℓℓᵀ + diag(d²).
fn survey_covariance() -> Vec<Vec<f64>> {
    (0..5)
        .map(|i| {
            (0..5)
                .map(|j| LOADINGS[i] * LOADINGS[j] + if i == j { NOISE[i] * NOISE[i] } else { 0.0 })
                .collect()
        })
        .collect()
}

/// Creates the four collections and sends their reports; returns what pytest is told.
fn fill(url: &str) -> serde_json::Value {
    let create = |args: &[&str]| {
        let mut all = vec!["create", "--server", url, "--token", ADMIN_TOKEN];
        all.extend_from_slice(args);
        run(&all).json()
    };
    let names = NAMES.join(",");
    create(&[
        "--id",
        "survey",
        "--dim",
        "5",
        "--epsilon",
        "8",
        "--delta",
        "1e-6",
        "--clip-radius",
        "4",
        "--min-reports",
        "100",
        "--names",
        &names,
    ]);
    create(&[
        "--id",
        "moments",
        "--dim",
        "3",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "50",
        "--moments",
        "second-moment",
        "--mechanism",
        "gaussian-triu",
    ]);
    create(&[
        "--id",
        "curated",
        "--dim",
        "4",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--clip-radius",
        "3",
        "--min-reports",
        "100",
        "--privacy-model",
        "central",
        "--names",
        "a,b,c,d",
    ]);
    create(&[
        "--id",
        "empty",
        "--dim",
        "2",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--clip-radius",
        "1",
        "--min-reports",
        "50",
    ]);

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x9e7_a11a);
    // The central reports' ids (a device picks them at random).
    let mut ids = rand::rngs::StdRng::seed_from_u64(0x1d5);
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(url)
            .await
            .unwrap_or_else(|e| panic!("client cannot connect to {url}: {e}"));
        let mut normal = || -> f64 { rng.sample(StandardNormal) };

        let survey = client.collection("survey").await.expect("fetch survey");
        let reports: Vec<_> = (0..SURVEY_REPORTS)
            .map(|_| {
                let f = normal();
                let x: Vec<f64> = (0..5)
                    .map(|i| MEAN[i] + LOADINGS[i] * f + NOISE[i] * normal())
                    .collect();
                client.prepare_report(&survey, &x).expect("survey report")
            })
            .collect();
        let sent = client.submit_stream(reports).await.expect("send survey");
        assert_eq!(sent.accepted, SURVEY_REPORTS as u64);

        let moments = client.collection("moments").await.expect("fetch moments");
        let reports: Vec<_> = (0..MOMENT_REPORTS)
            .map(|_| {
                let x: Vec<f64> = (0..3).map(|_| 0.7 * normal()).collect();
                client.prepare_report(&moments, &x).expect("moments report")
            })
            .collect();
        let sent = client.submit_stream(reports).await.expect("send moments");
        assert_eq!(sent.accepted, MOMENT_REPORTS as u64);

        let curated = client.collection("curated").await.expect("fetch curated");
        let reports: Vec<_> = (0..CENTRAL_REPORTS)
            .map(|_| {
                let f = normal();
                let x: Vec<f64> = (0..4)
                    .map(|i| 1.0 + 0.8 * f * if i % 2 == 0 { 1.0 } else { -1.0 } + 0.5 * normal())
                    .collect();
                ldpcov_client::trusted_curator_report(&curated, &x, ReportId(ids.random()))
                    .expect("curated report")
            })
            .collect();
        let sent = client.submit_stream(reports).await.expect("send curated");
        assert_eq!(sent.accepted, CENTRAL_REPORTS as u64);
    });

    json!({
        "survey": {
            "names": NAMES,
            "reports": SURVEY_REPORTS,
            "epsilon": 8.0,
            "delta": 1e-6,
            "clip_radius": 4.0,
            "mean": MEAN,
            "loadings": LOADINGS,
            "covariance": survey_covariance(),
        },
        "moments": { "reports": MOMENT_REPORTS, "dim": 3 },
        "curated": { "reports": CENTRAL_REPORTS, "names": ["a", "b", "c", "d"] },
        "empty": { "reports": 0 },
    })
}

/// pytest's last line: tests passed, none failed, errored or skipped; returns it.
fn summary(stdout: &str) -> String {
    let last = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('=') && l.contains(" in "))
        .unwrap_or_default()
        .to_string();
    assert!(
        last.contains(" passed")
            && !["failed", "error", "skipped", "xfail", "xpass", "deselected"]
                .iter()
                .any(|w| last.contains(w)),
        "unexpected pytest summary {last:?}:\n{stdout}"
    );
    last
}

#[test]
fn python_client_against_the_real_daemon() {
    let dir = scratch("analyst");
    let python = venv(&dir);
    let source = dir.join("source");
    copy_package(&package_dir(), &source);
    let wheels = dir.join("wheels");
    let wheels_str = wheels.to_str().expect("utf-8 path").to_string();
    check(
        &run_in(
            &python,
            &["-m", "pip", "wheel", "--no-deps", "-w", &wheels_str, "."],
            &source,
            &[],
        ),
        "pip wheel clients/python",
    );
    let wheel = std::fs::read_dir(&wheels)
        .expect("read the wheel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .unwrap_or_else(|| panic!("pip wheel wrote no .whl into {}", wheels.display()));
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("ldpcov_analyst-") && name.ends_with("-py3-none-any.whl"),
        "not a pure-Python wheel of ldpcov-analyst: {name}"
    );
    let wheel_str = wheel.to_str().expect("utf-8 path");
    check(
        &run_in(
            &python,
            &["-m", "pip", "install", wheel_str, "pytest>=8"],
            &dir,
            &[],
        ),
        "pip install the wheel and pytest (from PyPI)",
    );

    let daemon = Daemon::start_with(&["--admin-token", ADMIN_TOKEN]);
    let fixture = fill(&daemon.url);
    let output = run_in(
        &python,
        &["-m", "pytest", "-v", "-rA", "tests"],
        &source,
        &[
            ("LDPCOV_AGGREGATOR_BIN", BIN.to_string()),
            ("LDPCOV_TEST_SERVER", daemon.url.clone()),
            ("LDPCOV_TEST_ADMIN_TOKEN", ADMIN_TOKEN.to_string()),
            ("LDPCOV_TEST_FIXTURE", fixture.to_string()),
            ("LDPCOV_TEST_EXPECT_INSTALLED", "1".to_string()),
        ],
    );
    let stdout = check(&output, "pytest (clients/python/tests)");
    let last = summary(&stdout);
    assert!(
        stdout.contains("test_pca_recovers_the_planted_factor PASSED"),
        "the end-to-end tests did not run:\n{stdout}"
    );
    eprintln!("Python client ({name}): {last} against {BIN}");
}

#[test]
fn python_stubs_match_the_proto() {
    let dir = scratch("generate");
    let python = venv(&dir);
    let script = package_dir().join("scripts").join("generate.py");
    let text = std::fs::read_to_string(&script)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", script.display()));
    let pinned = text
        .lines()
        .find_map(|l| l.strip_prefix("GRPCIO_TOOLS = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("{} pins no GRPCIO_TOOLS", script.display()));
    check(
        &run_in(
            &python,
            &["-m", "pip", "install", &format!("grpcio-tools=={pinned}")],
            &dir,
            &[],
        ),
        "pip install grpcio-tools (from PyPI)",
    );
    let script = script.to_str().expect("utf-8 path");
    let stdout = check(
        &run_in(&python, &[script, "--check"], &dir, &[]),
        "clients/python/scripts/generate.py --check",
    );
    assert!(stdout.contains("match"), "{stdout}");
}
