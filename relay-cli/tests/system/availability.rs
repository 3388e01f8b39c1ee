//! A relay that one wrong token cannot take down quietly: a relay token the
//! aggregator refuses makes the binary exit at start, with one line (the relay's
//! outages and retired collections are relay/tests/system/availability.rs).

use std::time::{Duration, Instant};

use crate::daemon;
use crate::support::FakeAggregator;

/// Today's main took a relay token the aggregator refuses and found out at the first
/// batch, possibly hours later. Now the binary exits at start with one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_token_the_aggregator_refuses_stops_the_relay_at_start() {
    let fake = FakeAggregator::default();
    fake.state().relay_token = Some("the-token-the-aggregator-knows".into());
    let aggregator = fake.serve().await;
    let dir = tempfile::tempdir().expect("tempdir");
    daemon::write_secrets(dir.path());
    let addr = daemon::free_port();
    let mut child = daemon::spawn(
        addr,
        &format!("http://{aggregator}"),
        dir.path(),
        &dir.path().join("data"),
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the relay kept running with a refused token"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success());
    let log = std::fs::read_to_string(dir.path().join("relay.log")).expect("log");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.contains("refuses this relay's token") && last.contains("Unauthenticated"),
        "{log}"
    );
    // Nothing was served: the port is free.
    assert!(std::net::TcpStream::connect(addr).is_err());
}
