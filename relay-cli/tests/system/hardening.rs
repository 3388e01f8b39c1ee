//! The relay as hard as the aggregator, where a process limit or a flag of the binary
//! is the point (the rest runs in process: relay/tests/system/hardening.rs):
//!
//! * out of file descriptors, the accept loop does not spin a core;
//! * a 0-byte store file is refused at start, with one line naming the file and
//!   `--init-empty`, and a new store is started with `--init-empty`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::time::timeout;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::support;
use support::{FakeAggregator, RELAY_TOKEN};

const SECRET: [u8; 32] = [42; 32];

/// One test at a time: the CPU a relay uses is measured.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const BIN: &str = env!("CARGO_BIN_EXE_ldpcov-relay");

/// The CPU time (user + system) process `pid` has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // The fields after the command name (in parentheses, which may hold spaces).
    let rest = stat.rsplit_once(')').expect("stat format").1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields[i].parse::<u64>().expect("a number");
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after the name.
    field(11) + field(12)
}

/// `ldpcov-relay serve` in a shell that first lowers its file descriptor limit to
/// `nofile`; stderr to `dir/relay.log`.
fn spawn_limited(
    addr: SocketAddr,
    aggregator: SocketAddr,
    dir: &std::path::Path,
    nofile: u32,
    extra: &[&str],
) -> std::process::Child {
    std::fs::write(dir.join("relay-token"), RELAY_TOKEN).expect("write");
    std::fs::write(dir.join("device-secret"), hex::encode(SECRET)).expect("write");
    let log = std::fs::File::create(dir.join("relay.log")).expect("log");
    let mut cmd = std::process::Command::new("sh");
    for (name, _) in std::env::vars() {
        if name.starts_with("LDPCOV_RELAY_") {
            cmd.env_remove(name);
        }
    }
    cmd.arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(["--log", "info", "serve", "--listen"])
        .arg(addr.to_string())
        .arg("--aggregator")
        .arg(format!("http://{aggregator}"))
        .arg("--relay-token-file")
        .arg(dir.join("relay-token"))
        .arg("--device-token-secret-file")
        .arg(dir.join("device-secret"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--insecure-plaintext", "--min-batch-size", "2"])
        .args(extra)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn the relay")
}

async fn serving(url: &str) -> bool {
    let Ok(endpoint) = Channel::from_shared(url.to_string()) else {
        return false;
    };
    let Ok(Ok(channel)) = timeout(Duration::from_secs(2), endpoint.connect()).await else {
        return false;
    };
    matches!(
        timeout(Duration::from_secs(2), support::relay_health(channel)).await,
        Ok(status) if status == ServingStatus::Serving as i32
    )
}

/// Item 2: at the file descriptor limit the accept loop spun a full core (every
/// accept failed with EMFILE at once and was retried at once). The relay runs with
/// `ulimit -n 64` and 150 silent connections queue up behind the limit: over 2 s it
/// uses well under half a second of CPU, stays up, and serves again once the
/// connections are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_accept_loop_does_not_spin() {
    let _turn = SERIAL.lock().await;
    let fake = FakeAggregator::default();
    let aggregator = fake.serve().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let url = format!("http://{addr}");
    let mut child = spawn_limited(
        addr,
        aggregator,
        dir.path(),
        64,
        &["--handshake-timeout-secs", "30"],
    );
    let started = Instant::now();
    while !serving(&url).await {
        assert!(
            started.elapsed() < Duration::from_secs(30)
                && child.try_wait().expect("wait").is_none(),
            "the relay did not come up: {}",
            std::fs::read_to_string(dir.path().join("relay.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut connections = Vec::new();
    for _ in 0..150 {
        connections.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_ticks(child.id());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_ticks(child.id()) - before;
    let log = std::fs::read_to_string(dir.path().join("relay.log")).unwrap_or_default();
    println!("CPU over 2 s at the fd limit: {used} ticks");
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the relay exited: {log}"
    );
    assert!(
        used < 50,
        "{used} ticks of CPU in 2 s at the fd limit: the accept loop spins"
    );
    assert!(log.contains("backing off"), "no back-off logged: {log}");
    drop(connections);
    let started = Instant::now();
    while !serving(&url).await {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the relay did not serve again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
}

/// Item 3 through the binary: a 0-byte store file stops `serve` at start with one line
/// naming the file and `--init-empty`; with `--init-empty` it starts on a new store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_refuses_a_zero_byte_store_unless_init_empty() {
    let _turn = SERIAL.lock().await;
    let fake = FakeAggregator::default();
    let aggregator = fake.serve().await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("data")).expect("mkdir");
    let file = dir
        .path()
        .join("data")
        .join(ldpcov_relay::constants::DB_FILE);
    std::fs::write(&file, b"").expect("write");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let mut child = spawn_limited(addr, aggregator, dir.path(), 1024, &[]);
    let status = child.wait().expect("wait");
    let log = std::fs::read_to_string(dir.path().join("relay.log")).expect("log");
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("not an ldpcov relay store") && log.contains("--init-empty"),
        "{log}"
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "one error line: {log}");
    assert!(
        !log.contains("panicked") && !log.contains("backtrace"),
        "{log}"
    );
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), 0);

    let mut child = spawn_limited(addr, aggregator, dir.path(), 1024, &["--init-empty"]);
    let url = format!("http://{addr}");
    let started = Instant::now();
    while !serving(&url).await {
        assert!(
            started.elapsed() < Duration::from_secs(30)
                && child.try_wait().expect("wait").is_none(),
            "the relay did not start with --init-empty: {}",
            std::fs::read_to_string(dir.path().join("relay.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    assert!(std::fs::metadata(&file).expect("stat").len() > 0);
}
