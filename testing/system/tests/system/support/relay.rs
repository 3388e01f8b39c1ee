//! The relay daemon: [`RELAY_BIN`] is this package's `system-relay` binary (the
//! product's `main`), found through `CARGO_BIN_EXE_*` and never built by a test.
//! [`relay_command`] is the one way to run it (a clean environment);
//! [`spawn_relay`] starts `serve` at a fixed address with its stderr appended to a log
//! file (waited for with [`super::crash::wait_ready`], killed with
//! [`super::crash::kill`]). [`InProcessRelay`] is the one way to serve a relay in
//! process. Also what devices need of any relay, in process or not:
//! its layer key ([`layer_key`], [`outer`]) and its status ([`relay_status`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use ldpcov_proto::v1::SealedReport;
use tonic::Request;

use super::embedded::RELAY_TOKEN;

/// The relay's files: its tokens, the device-token secret, its store and its log.
pub(crate) struct RelayFiles {
    /// The relay's token at the aggregator (also the aggregator's --relay-token-file).
    pub(crate) relay_token: PathBuf,
    /// The device-token secret (64 hex digits).
    pub(crate) device_secret: PathBuf,
    /// The relay's admin token (GetRelayStatus).
    pub(crate) admin_token: PathBuf,
    /// `--data-dir`.
    pub(crate) data: PathBuf,
    /// Where its stderr is appended.
    pub(crate) log: PathBuf,
    /// `--layer-key-file` (`None`: the relay's default, in its data directory).
    pub(crate) layer_key: Option<PathBuf>,
}

impl RelayFiles {
    /// The files in `dir` (`relay-token`, `device-secret`, `admin-token`, `layer-key`,
    /// `relay.log`), the store in `data`.
    pub(crate) fn in_dir(dir: &Path, data: &Path) -> RelayFiles {
        RelayFiles {
            relay_token: dir.join("relay-token"),
            device_secret: dir.join("device-secret"),
            admin_token: dir.join("admin-token"),
            data: data.to_path_buf(),
            log: dir.join("relay.log"),
            layer_key: Some(dir.join("layer-key")),
        }
    }
}

/// The relay under test: this package's `system-relay` binary (exactly
/// `ldpcov-relay`'s `main`), built by the same cargo run as this test.
pub(crate) const RELAY_BIN: &str = env!("CARGO_BIN_EXE_system-relay");

/// A `ldpcov-relay` command with a clean environment (none of its `LDPCOV_RELAY_*`
/// variables, no RUST_LOG).
pub(crate) fn relay_command() -> Command {
    let mut cmd = Command::new(RELAY_BIN);
    clean_relay_environment(&mut cmd);
    cmd
}

/// The relay run by `sh` after `prelude` (a shell command such as `ulimit -n 64`),
/// with the clean environment of [`relay_command`]; arguments go to the relay.
pub(crate) fn relay_command_after(prelude: &str) -> Command {
    let mut cmd = Command::new("sh");
    clean_relay_environment(&mut cmd);
    cmd.arg("-c")
        .arg(format!("{prelude} && exec \"$0\" \"$@\""))
        .arg(RELAY_BIN);
    cmd
}

fn clean_relay_environment(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|n| n.starts_with("LDPCOV_RELAY_"))
        {
            cmd.env_remove(name);
        }
    }
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
}

/// Writes the relay's secrets for [`RelayFiles::in_dir`]`(dir, …)`: its token at the
/// aggregator ([`RELAY_TOKEN`]), the device-token secret `device_secret`, its admin
/// token `admin` and its layer key ([`write_layer_key`]).
pub(crate) fn write_relay_secrets(dir: &Path, device_secret: [u8; 32], admin: &str) {
    let files = RelayFiles::in_dir(dir, dir);
    std::fs::write(&files.relay_token, RELAY_TOKEN).expect("write the relay token");
    std::fs::write(&files.device_secret, hex::encode(device_secret))
        .expect("write the device-token secret");
    std::fs::write(&files.admin_token, admin).expect("write the admin token");
    write_layer_key(&dir.join("layer-key"));
}

/// Starts the relay's `serve` on `addr`, forwarding to `aggregator` (a URL), checking
/// for due windows and stored batches every 20 ms, with `extra` flags; its stderr is
/// appended to `files.log`.
pub(crate) fn spawn_relay(
    addr: SocketAddr,
    aggregator: &str,
    files: &RelayFiles,
    extra: &[&str],
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&files.log)
        .expect("open the relay log");
    let mut cmd = relay_command();
    cmd.args(["--log", "info", "serve", "--listen"])
        .arg(addr.to_string())
        .args(["--aggregator", aggregator, "--relay-token-file"])
        .arg(&files.relay_token)
        .arg("--device-token-secret-file")
        .arg(&files.device_secret)
        .arg("--admin-token-file")
        .arg(&files.admin_token)
        .arg("--data-dir")
        .arg(&files.data);
    if let Some(layer_key) = &files.layer_key {
        cmd.arg("--layer-key-file").arg(layer_key);
    }
    cmd.args(["--batch-check-interval-ms", "20"])
        // Tests: devices in plaintext, and the tests' small batches.
        .args(["--insecure-plaintext", "--min-batch-size", "2"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn the relay")
}

/// The relay at `url`'s status of `collection`, asked with the admin token `admin`;
/// `None` when the relay cannot be reached, refuses or does not answer within 5 s (a
/// crash test polls through restarts).
pub(crate) async fn relay_status(
    url: &str,
    collection: &str,
    admin: &str,
) -> Option<ldpcov_proto::v1::RelayStatus> {
    let mut client = ldpcov_proto::v1::relay_client::RelayClient::connect(url.to_string())
        .await
        .ok()?;
    let mut request = Request::new(ldpcov_proto::v1::RelayStatusRequest {
        collection_id: collection.into(),
    });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {admin}").parse().ok()?);
    request.set_timeout(std::time::Duration::from_secs(5));
    client
        .get_relay_status(request)
        .await
        .ok()
        .map(|r| r.into_inner())
}

/// The secret of the in-process test relays' layer key ([`layer_key`]).
pub(crate) const LAYER_SECRET: [u8; 32] = [0x4c; 32];

/// Writes [`LAYER_SECRET`] as a relay binary's `--layer-key-file` (the file format of
/// `ldpcov_seal::MasterSecret`), so that [`outer`] seals to that relay too.
pub(crate) fn write_layer_key(path: &std::path::Path) {
    std::fs::write(path, format!("{}\n", hex::encode(LAYER_SECRET))).expect("write the layer key");
}

/// The in-process test relays' own key (`RelayOptions::layer_key`): fixed, so that a
/// restarted relay opens what its devices sealed before.
pub(crate) fn layer_key() -> Arc<ldpcov_seal::RelayKey> {
    Arc::new(ldpcov_seal::RelayKey::from_secret(
        &ldpcov_seal::MasterSecret::from_bytes(LAYER_SECRET),
    ))
}

/// The key of the relay binary whose data directory is `data_dir` (its default
/// `relay-layer.key` there, created now if the relay has not created it yet: the
/// relay then reads this one).
pub(crate) fn layer_key_in(data_dir: &std::path::Path) -> Arc<ldpcov_seal::RelayKey> {
    std::fs::create_dir_all(data_dir).expect("data dir");
    let secret = ldpcov_seal::MasterSecret::load_or_create(
        data_dir.join(ldpcov_relay::constants::LAYER_KEY_FILE),
    )
    .expect("the relay's layer key file");
    Arc::new(ldpcov_seal::RelayKey::from_secret(&secret))
}

/// `sealed` as a device sends it to a relay with `key`: under the relay's layer.
pub(crate) fn outer_with(
    key: &ldpcov_seal::RelayKey,
    collection: &str,
    sealed: &SealedReport,
) -> SealedReport {
    ldpcov_client::seal_for_relay(collection, &key.public_config(), sealed).expect("the layer")
}

/// `sealed` under the in-process test relays' layer ([`layer_key`]).
pub(crate) fn outer(collection: &str, sealed: &SealedReport) -> SealedReport {
    outer_with(&layer_key(), collection, sealed)
}

/// A relay served in process (`ldpcov_relay::serve`) on `127.0.0.1:0`, until
/// [`stop`](InProcessRelay::stop) or until dropped.
pub(crate) struct InProcessRelay {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ldpcov_relay::ServeError>>,
}

impl InProcessRelay {
    /// Serves `store` with `options` on a free loopback port.
    pub(crate) async fn serve(
        store: Arc<ldpcov_relay::RelayStore>,
        options: ldpcov_relay::RelayOptions,
    ) -> InProcessRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(ldpcov_relay::serve(store, options, listener, async move {
            let _ = stopped.await;
        }));
        InProcessRelay {
            addr,
            stop: Some(stop),
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Asks the relay to stop and waits for it, 30 s at the most: what `serve`
    /// returned, `None` if it was still running.
    pub(crate) async fn stop(mut self) -> Option<Result<(), ldpcov_relay::ServeError>> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(std::time::Duration::from_secs(30), self.task)
            .await
            .ok()
            .map(|joined| joined.expect("the relay task"))
    }
}
