//! What the bindings' end-to-end tests share: the `cdylib` this test build produced and
//! a language's `run_tests.sh` run against an in-process aggregator, with the real relay
//! (`ldpcov-relay`'s library, [`relay`]) in front of it for shuffled collections and a
//! second in-process aggregator as its helper for two-aggregator collections.

mod relay;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use ldpcov_aggregator::two_aggregator::{LeaderConfig, PeerSecret, TwoAggregatorRole};
use ldpcov_aggregator::{AuthConfig, EmbeddedServer, Limits, MemoryStore, ServeOptions, Token};
use relay::{EmbeddedRelay, RELAY_MIN_BATCH, RELAY_TOKEN};

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

/// What a script printed.
pub(crate) struct ScriptOutput {
    /// Standard output.
    pub(crate) stdout: String,
    /// Standard error.
    pub(crate) stderr: String,
    /// Wall time of the script.
    pub(crate) elapsed: std::time::Duration,
}

/// Runs `bash bindings/<script>` with `LDPCOV_FFI_LIB` (this build's library),
/// `UNIFFI_BINDGEN` (this package's binary), `LDPCOV_URL` (an in-process aggregator,
/// open but for shuffled batches, which it takes from the relay's token only),
/// `LDPCOV_RELAY_URL` (an in-process `ldpcov-relay` forwarding to that aggregator),
/// `LDPCOV_RELAY_MIN_BATCH` (the relay's floor on a batch: the minimum the script's
/// shuffled collection is created with), `LDPCOV_RELAY_DEVICE_TOKENS` (that many device
/// tokens of distinct devices, comma-separated: the relay takes one report per device
/// and collection), `LDPCOV_HELPER_URL` (a second in-process aggregator, the helper of
/// two-aggregator collections, whose leader is `LDPCOV_URL`; they share a freshly
/// generated peer secret) and `envs`; stops the relay and both aggregators afterwards;
/// panics with both outputs unless the script succeeds.
pub(crate) fn run_script_against_embedded_server(
    script: &str,
    envs: &[(&str, &std::ffi::OsStr)],
) -> ScriptOutput {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let auth = AuthConfig::default()
        .with_relay_tokens(vec![
            Token::new(RELAY_TOKEN, "relay").expect("a relay token"),
        ])
        .expect("the relay token");
    let peer = Arc::new(PeerSecret::generate().expect("a peer secret"));
    let helper = runtime
        .block_on(EmbeddedServer::start_with_options(
            Arc::new(MemoryStore::new()),
            ServeOptions {
                two_aggregator: Some(TwoAggregatorRole::Helper { peer: peer.clone() }),
                ..ServeOptions::default()
            },
        ))
        .expect("start the in-process helper");
    let server = runtime
        .block_on(EmbeddedServer::start_with_options(
            Arc::new(MemoryStore::new()),
            ServeOptions {
                limits: Limits::default(),
                auth: Arc::new(auth),
                two_aggregator: Some(TwoAggregatorRole::Leader(LeaderConfig {
                    helper_url: helper.url(),
                    helper_tls: None,
                    peer,
                })),
                ..ServeOptions::default()
            },
        ))
        .expect("start the in-process aggregator");
    let relay = runtime.block_on(EmbeddedRelay::start(&server.url()));
    let device_tokens = relay.device_tokens(RELAY_MIN_BATCH).join(",");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script);
    let started = std::time::Instant::now();
    let output = Command::new("bash")
        .arg(&script)
        .env("LDPCOV_FFI_LIB", ffi_library())
        .env("UNIFFI_BINDGEN", env!("CARGO_BIN_EXE_uniffi-bindgen"))
        .env("LDPCOV_URL", server.url())
        .env("LDPCOV_RELAY_URL", &relay.url)
        .env("LDPCOV_RELAY_MIN_BATCH", RELAY_MIN_BATCH.to_string())
        .env("LDPCOV_RELAY_DEVICE_TOKENS", device_tokens)
        .env("LDPCOV_HELPER_URL", helper.url())
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let elapsed = started.elapsed();
    runtime.block_on(relay.shutdown());
    runtime
        .block_on(server.shutdown())
        .expect("stop the in-process aggregator");
    runtime
        .block_on(helper.shutdown())
        .expect("stop the in-process helper");

    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        script.display(),
        output.status
    );
    ScriptOutput {
        stdout,
        stderr,
        elapsed,
    }
}
