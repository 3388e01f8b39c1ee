//! Runs the Python bindings' end-to-end test (`bindings/python/run_tests.sh`) from
//! `cargo test`, so that `cargo test --workspace` covers the bindings.
//!
//! Cargo must not be called from here: `cargo test` holds the build directory lock, so
//! a nested `cargo build` would wait for it forever. Everything the script needs is
//! already built by this test's own build instead:
//! * the shared library: `libldpcov_ffi.so` is the `cdylib` output of this package's
//!   library, which cargo builds before linking this test, into the test binary's own
//!   `deps/` directory;
//! * the bindgen: this package's `uniffi-bindgen` binary (`CARGO_BIN_EXE_uniffi-bindgen`);
//! * the aggregator: an in-process `EmbeddedServer` — the daemon's own gRPC service
//!   and in-memory store (what `serve --memory` runs) on a loopback port — passed to the
//!   script as `LDPCOV_URL`. The daemon binary belongs to another package, whose
//!   binaries a test of this one cannot ask cargo for; `run_tests.sh` run by hand
//!   starts the real binary instead;
//! * the relay: `ldpcov-relay`'s library, in process in front of that aggregator
//!   (`common/relay.rs`), passed as `LDPCOV_RELAY_URL` with a device token per report
//!   of the shuffled collection's test (run by hand, that test skips);
//! * the helper of two-aggregator collections: a second in-process aggregator, passed
//!   as `LDPCOV_HELPER_URL` (run by hand, that test skips too).

use crate::common;

#[test]
fn python_bindings_end_to_end() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = common::run_script_against_embedded_server(
        "python/run_tests.sh",
        &[("PYTHON", python.as_ref())],
    );
    // unittest's summary: every test ran, none was skipped but for a missing numpy.
    assert!(
        out.stderr.contains("\nOK"),
        "no unittest summary:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    // The shuffled collection's test ran (it skips only without the harness's relay)
    // and the aggregator counted the batch the relay forwarded.
    assert!(
        out.stderr
            .contains("sealed reports counted through the relay"),
        "the shuffled-collection test did not run:\n{}",
        out.stderr
    );
    // The two-aggregator collection's test ran (it skips only without the harness's
    // helper) and both aggregators counted its reports.
    assert!(
        out.stderr
            .contains("reports counted by the leader and the helper"),
        "the two-aggregator test did not run:\n{}",
        out.stderr
    );
    eprintln!("{}(in {:.1?})", out.stderr, out.elapsed);
}
