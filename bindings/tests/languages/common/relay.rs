//! The relay of the bindings' end-to-end tests: the real one, `ldpcov-relay`'s library
//! (`ldpcov_relay::serve`, what the `ldpcov-relay serve` daemon runs) in this process,
//! with its durable store in a temporary directory, as `examples/loadgen/relay.rs`
//! starts it. It forwards shuffled collections' reports to the in-process aggregator
//! with [`RELAY_TOKEN`], keeps at most one report per device token and collection, and
//! forms a batch of a window, on its check every [`BATCH_CHECK_INTERVAL`], once the
//! window is the collection's `batch_window_seconds` old and holds at least the
//! collection's minimum, never fewer than [`RELAY_MIN_BATCH`] (its floor).

use std::sync::Arc;
use std::time::Duration;

use ldpcov_relay::{DeviceTokenIssuer, RelayOptions, RelayStore, Secret, ServeError, Upstream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The relay token the in-process aggregator takes batches from.
pub(crate) const RELAY_TOKEN: &str = "bindings-test-relay-token";
/// The relay's floor: it refuses a collection announcing a smaller minimum batch and
/// never forwards fewer reports. The scripts create their shuffled collection with
/// this minimum and send it this many reports, one per device token.
pub(crate) const RELAY_MIN_BATCH: u64 = 5;
/// How often the relay forms due batches and forwards them.
const BATCH_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// The secret the relay's device tokens are keyed with (a test's: fixed).
const DEVICE_TOKEN_SECRET: [u8; 32] = [0x5e; 32];

/// A relay running in this process: its URL and its device token issuer.
pub(crate) struct EmbeddedRelay {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    issuer: DeviceTokenIssuer,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
    /// The store's directory, removed once the relay is gone.
    _dir: tempfile::TempDir,
}

impl EmbeddedRelay {
    /// Starts the relay on `127.0.0.1:0`, forwarding to the aggregator at
    /// `aggregator_url` with [`RELAY_TOKEN`]. Call it inside the runtime that is to
    /// drive the relay.
    pub(crate) async fn start(aggregator_url: &str) -> Self {
        let dir = tempfile::tempdir().expect("a directory for the relay's store");
        let store = Arc::new(RelayStore::open(dir.path()).expect("open the relay's store"));
        let upstream = Upstream::new(
            aggregator_url,
            Secret::new(RELAY_TOKEN, "relay").expect("a valid relay token"),
            None,
        )
        .expect("the aggregator's URL");
        let issuer = DeviceTokenIssuer::from_bytes(DEVICE_TOKEN_SECRET);
        let mut options = RelayOptions::new(upstream, issuer.clone());
        options.batch_check_interval = BATCH_CHECK_INTERVAL;
        options.floor.min_batch_size = RELAY_MIN_BATCH;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the relay");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("the relay's address")
        );
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(ldpcov_relay::serve(store, options, listener, async {
            // A dropped sender (a test that panicked) stops the relay too.
            let _ = rx.await;
        }));
        EmbeddedRelay {
            url,
            issuer,
            shutdown: Some(tx),
            task,
            _dir: dir,
        }
    }

    /// `n` device tokens of distinct devices (`bindings-device-0`, ...): the relay
    /// takes one report per device token and collection.
    pub(crate) fn device_tokens(&self, n: u64) -> Vec<String> {
        (0..n)
            .map(|i| {
                self.issuer
                    .issue(&format!("bindings-device-{i}"))
                    .expect("a device token")
            })
            .collect()
    }

    /// Stops the relay (its calls drained, its forwarder stopped) and waits for it;
    /// panics if it failed.
    pub(crate) async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        (&mut self.task)
            .await
            .expect("the relay's task")
            .expect("the relay served until shut down");
    }
}
