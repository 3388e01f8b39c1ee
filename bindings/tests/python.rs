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
//! * the aggregator: an in-process [`EmbeddedServer`] — the daemon's own gRPC service
//!   and in-memory store (what `serve --memory` runs) on a loopback port — passed to the
//!   script as `LDPCOV_URL`. The daemon binary belongs to another package, whose
//!   binaries a test of this one cannot ask cargo for; `run_tests.sh` run by hand
//!   starts the real binary instead.

use std::path::PathBuf;
use std::process::Command;

use ldpcov_aggregator::EmbeddedServer;
use ldpcov_aggregator::Limits;

/// The `cdylib` this test's build produced: `libldpcov_ffi.so` in the `deps/` directory
/// holding this test binary. (The copy in `target/<profile>/` is only refreshed by
/// `cargo build`, so it can be stale under `cargo test`.)
fn ffi_library() -> PathBuf {
    let name = format!(
        "{}ldpcov_ffi{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().expect("path of the test binary");
    let deps = exe.parent().expect("the test binary is in deps/");
    let library = deps.join(&name);
    assert!(library.is_file(), "{} not found", library.display());
    library
}

#[test]
fn python_bindings_end_to_end() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let server = runtime
        .block_on(EmbeddedServer::start(Limits::default()))
        .expect("start the in-process aggregator");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/run_tests.sh");
    let output = Command::new("bash")
        .arg(&script)
        .env("PYTHON", &python)
        .env("LDPCOV_FFI_LIB", ffi_library())
        .env("UNIFFI_BINDGEN", env!("CARGO_BIN_EXE_uniffi-bindgen"))
        .env("LDPCOV_URL", server.url())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    runtime
        .block_on(server.shutdown())
        .expect("stop the in-process aggregator");

    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        script.display(),
        output.status
    );
    // unittest's summary: every test ran, none was skipped but for a missing numpy.
    assert!(stderr.contains("\nOK"), "no unittest summary:\n{stderr}");
    eprintln!("{stderr}");
}
