//! Runs the TypeScript client's tests that need no daemon (`clients/typescript`: `npm ci`,
//! then `npm run test:unit`, which compiles with `tsc` and runs `node --test` on the
//! vector, sampler, client and ledger tests) from `cargo test`, so that the TypeScript
//! client is held to the same vectors as the Rust one. Its end-to-end tests against the
//! real daemon run from `cli/tests/typescript_client.rs`. Fails, never skips, when
//! Node.js or npm is missing.

use std::path::PathBuf;
use std::process::{Command, Output};

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/typescript")
}

fn run(program: &str, args: &[&str]) -> Output {
    let npm = std::env::var("NPM").unwrap_or_else(|_| "npm".into());
    let program = if program == "npm" {
        npm.as_str()
    } else {
        program
    };
    Command::new(program)
        .args(args)
        .current_dir(package_dir())
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

#[test]
fn typescript_client_passes_the_shared_vectors() {
    let node = run("node", &["--version"]);
    let version = check(&node, "node --version");
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
    let stdout = check(
        &run("npm", &["run", "test:unit"]),
        "npm run test:unit (clients/typescript)",
    );
    // node --test's summary: tests ran, none failed, none was skipped.
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
    eprintln!("TypeScript client: {} tests passed", pass.unwrap_or(0));
}
