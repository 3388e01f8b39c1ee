//! Runs the Kotlin bindings' JUnit tests (`bindings/kotlin`, Maven, through
//! `bindings/kotlin/run_tests.sh`) from `cargo test`, so that `cargo test --workspace`
//! compiles the generated Kotlin on the JVM and drives a real aggregator with it, and
//! then tests the packaged jar: `mvn package` puts the native library in the jar (JNA's
//! resource path), the jar is installed into a scratch Maven repository, and a scratch
//! project depending only on it and JNA (`bindings/kotlin/package-test`) sends a report
//! that the aggregator counts, with no `jna.library.path` and no `LD_LIBRARY_PATH`.
//!
//! As in `python.rs`, cargo is not called from here (it holds the build directory
//! lock): the script gets the `cdylib` this test's build put in `deps/` (JNA loads it
//! from there through `jna.library.path` in the bindings' own tests, and the jar
//! carries a copy of it), this package's `uniffi-bindgen` binary, an in-process
//! `EmbeddedServer` as `LDPCOV_URL`, and the real relay (`ldpcov-relay`'s library, in
//! process: `common/relay.rs`) in front of it as `LDPCOV_RELAY_URL`, with a device token
//! per report of the shuffled collection's test.
//!
//! Java and Maven are required: without them the test fails, it does not skip. Maven's
//! build directory and the scratch repository are kept under cargo's
//! (`CARGO_TARGET_TMPDIR`), so a second run recompiles only what changed; the first run
//! on a machine downloads the Kotlin compiler, JNA, JUnit and the jar and install
//! plugins from Maven Central into `~/.m2` (the scratch repository is seeded from it).

use std::path::{Path, PathBuf};

use crate::common;

/// `name="value"` of an XML start tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// (tests, failures + errors, skipped) summed over Surefire's XML reports.
fn surefire_totals(reports: &Path) -> (u64, u64, u64) {
    let mut totals = (0, 0, 0);
    let entries = std::fs::read_dir(reports)
        .unwrap_or_else(|e| panic!("no Surefire reports in {}: {e}", reports.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let is_report = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("TEST-") && n.ends_with(".xml"));
        if !is_report {
            continue;
        }
        let xml = std::fs::read_to_string(&path).expect("a readable Surefire report");
        let start = xml.find("<testsuite ").expect("a <testsuite> element");
        let end = start + xml[start..].find('>').expect("the end of <testsuite>");
        let tag = &xml[start..end];
        let count = |name| -> u64 {
            attribute(tag, name)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{}: no {name} count", path.display()))
        };
        totals.0 += count("tests");
        totals.1 += count("failures") + count("errors");
        totals.2 += count("skipped");
    }
    totals
}

/// Asserts that the Surefire reports in `reports` count at least `at_least` tests, all
/// passed and none skipped; returns the count.
fn assert_all_passed(what: &str, reports: &Path, at_least: u64, out: &common::ScriptOutput) -> u64 {
    let (tests, failed, skipped) = surefire_totals(reports);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(tests >= at_least, "{what}: only {tests} JUnit tests ran");
    assert_eq!(failed, 0, "{what}: JUnit failures:\n{stdout}\n{stderr}");
    assert_eq!(
        skipped, 0,
        "{what}: JUnit tests were skipped:\n{stdout}\n{stderr}"
    );
    tests
}

#[test]
fn kotlin_bindings_end_to_end() {
    let build_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kotlin-bindings");
    let reports = build_dir.join("maven/surefire-reports");
    let package_reports = build_dir.join("package-test/target/surefire-reports");
    // Reports of an earlier run must not count for this one.
    for dir in [&reports, &package_reports] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).expect("remove the old Surefire reports");
        }
    }
    let out = common::run_script_against_embedded_server(
        "kotlin/run_tests.sh",
        &[("LDPCOV_KOTLIN_BUILD_DIR", build_dir.as_os_str())],
    );
    // Every JUnit test ran and passed; none was skipped: the bindings' own suite, then
    // the scratch project's test of the installed jar.
    let tests = assert_all_passed("bindings", &reports, 16, &out);
    let package_tests = assert_all_passed("packaged jar", &package_reports, 1, &out);
    eprintln!(
        "Kotlin (JVM): {tests} JUnit tests and {package_tests} of the installed jar passed in {:.1?}",
        out.elapsed
    );
}
