//! The TypeScript client (`clients/typescript`, `@ldpcov/client`) against this crate's
//! real daemons: runs `npm ci` then `npm test` there with `LDPCOV_AGGREGATOR_BIN` and
//! `LDPCOV_RELAY_BIN` set to the `system-aggregator` and `system-relay` binaries cargo
//! built for these tests (exactly `ldpcov-aggregator`'s and `ldpcov-relay`'s `main`), so
//! that the package's end-to-end tests (`test/e2e.test.ts`: the client over gRPC-Web
//! creates collections, sends reports for every mechanism, and the daemon's count moves
//! by exactly what was sent; bad input and the budget ledger send nothing;
//! `test/e2e-shuffle.test.ts`: sealed reports sent over gRPC-Web, as a browser must, to
//! the real relay (`ldpcov-relay serve --grpc-web`), which forwards them as one shuffled
//! batch once the window holds the minimum, opened and counted by the daemon) run on
//! every `cargo test`. The test lives in this crate because only a crate's own tests get
//! its binaries' paths (`CARGO_BIN_EXE_*`) from cargo. Fails, never skips, when Node.js
//! ≥ 18 or npm is missing or a daemon cannot start (the package's tests fail without
//! either variable).
//!
//! The browser test (`npm run test:browser`: headless Chromium, Debian's `chromium` at
//! `/usr/bin/chromium` or `$CHROMIUM`, driven by playwright-core, loads a page that
//! uses the bundled package to send reports to the daemon over gRPC-Web) runs here
//! too, and fails when Chromium is missing.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

// The relay the shuffled-collection end-to-end test sends sealed reports to.
use crate::support::relay::RELAY_BIN;

/// The two tests share the package directory (`npm ci`, `tsc` into `dist`): one at a time.
static PACKAGE: Mutex<bool> = Mutex::new(false);

/// Holds the package directory, after one `npm ci` and a Node.js version check.
fn package() -> MutexGuard<'static, bool> {
    let mut installed = PACKAGE.lock().unwrap_or_else(|e| e.into_inner());
    if !*installed {
        let version = check(&run("node", &["--version"]), "node --version");
        let major: u32 = version
            .trim()
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(
            major >= 18,
            "Node.js {version} is too old: the client needs ≥ 18"
        );
        check(
            &run("npm", &["ci", "--no-audit", "--no-fund"]),
            "npm ci (clients/typescript)",
        );
        *installed = true;
    }
    installed
}

const BIN: &str = env!("CARGO_BIN_EXE_system-aggregator");

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/typescript")
}

fn run(program: &str, args: &[&str]) -> Output {
    let program = if program == "npm" {
        std::env::var("NPM").unwrap_or_else(|_| "npm".into())
    } else {
        program.to_string()
    };
    let mut command = Command::new(&program);
    // The daemon the tests start sees only the flags they give it.
    for (key, _) in std::env::vars() {
        if key.starts_with("LDPCOV_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .current_dir(package_dir())
        .env("LDPCOV_AGGREGATOR_BIN", BIN)
        .env("LDPCOV_RELAY_BIN", RELAY_BIN)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{program} {}` ({e}): the TypeScript client's tests need Node.js ≥ 18 and npm on PATH",
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

/// node --test's summary: tests ran, none failed, none was skipped; returns the count.
fn passed(stdout: &str) -> u32 {
    let count = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {key} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
    };
    let (pass, fail, skipped) = (count("pass"), count("fail"), count("skipped"));
    assert!(
        pass.is_some_and(|p| p > 0) && fail == Some(0) && skipped == Some(0),
        "unexpected node --test summary (pass {pass:?}, fail {fail:?}, skipped {skipped:?}):\n{stdout}"
    );
    pass.unwrap_or(0)
}

#[test]
fn typescript_client_against_the_real_daemon() {
    let _package = package();
    let stdout = check(&run("npm", &["test"]), "npm test (clients/typescript)");
    let pass = passed(&stdout);
    assert!(
        stdout.contains("e2e-rank-one"),
        "the end-to-end tests did not run:\n{stdout}"
    );
    assert!(
        stdout.contains("e2e-shuffled"),
        "the shuffled-collection end-to-end test did not run:\n{stdout}"
    );
    eprintln!(
        "TypeScript client: {pass} tests passed, the end-to-end ones against {BIN} and {RELAY_BIN}"
    );
}

#[test]
fn typescript_client_in_headless_chromium() {
    let _package = package();
    let stdout = check(
        &run("npm", &["run", "test:browser"]),
        "npm run test:browser (clients/typescript)",
    );
    let pass = passed(&stdout);
    assert!(
        stdout.contains("no request body the page sent holds a raw input value"),
        "the browser tests did not run:\n{stdout}"
    );
    eprintln!("TypeScript client in Chromium: {pass} tests passed");
}
