//! The relay's watch on the aggregator: [`Upstream::check_token`] every
//! [`CHECK_EVERY`] while the aggregator accepts the relay, every
//! [`CHECK_EVERY_FAILING`] while it does not, from the relay's start. What a device
//! would meet decides the relay's health ([`Monitor::health`]):
//!
//! * the aggregator **refuses** the relay's token (UNAUTHENTICATED, PERMISSION_DENIED,
//!   or FAILED_PRECONDITION: it takes batches from no relay): NOT_SERVING at once, an
//!   ERROR logged when it starts — a configuration error no retry mends;
//! * the aggregator **cannot be reached** (or does not answer within 5 s): a WARN at
//!   the first failed check, NOT_SERVING once no check has found it answering for
//!   [`OUTAGE_GRACE`] (an ERROR then) — within the grace period and one failing
//!   check's pace of the last answer, whatever the pace before. Reports
//!   of collections the relay already serves are still stored meanwhile (the last
//!   good view: see [`Upstream`]) and forwarded once it is back;
//! * it **accepts** again: SERVING at once (an INFO line), and the forwarder is woken
//!   ([`Monitor::accepting`]) to form and send what waited — within
//!   [`CHECK_EVERY_FAILING`] plus one batch check of the aggregator's return.
//!
//! Metrics: `ldpcov_relay_upstream_accepted` (1 while it accepts the relay),
//! `ldpcov_relay_upstream_refused` (1 while it refuses it),
//! `ldpcov_relay_upstream_unreachable_seconds` (how long it has been unreachable; 0
//! otherwise).

use std::time::Duration;

use tokio::sync::watch;

use crate::upstream::{Reach, Upstream};

/// How often the relay checks the aggregator while it accepts the relay.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);
/// How often the relay checks the aggregator while it does not.
pub const CHECK_EVERY_FAILING: Duration = Duration::from_millis(250);
/// How long the aggregator may be unreachable before the relay's health is
/// NOT_SERVING.
pub const OUTAGE_GRACE: Duration = Duration::from_secs(10);

/// See the module docs.
pub struct Monitor {
    upstream: Upstream,
    grace: Duration,
    healthy: watch::Sender<bool>,
    accepting: watch::Sender<bool>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Monitor {
    /// A monitor of `upstream`, NOT_SERVING after `grace` of outage.
    pub fn new(upstream: Upstream, grace: Duration) -> Self {
        Monitor {
            upstream,
            grace,
            healthy: watch::channel(true).0,
            accepting: watch::channel(false).0,
        }
    }

    /// True while the aggregator neither refuses the relay nor has been unreachable
    /// for the grace period: the relay's health follows it with the store's.
    pub fn health(&self) -> watch::Receiver<bool> {
        self.healthy.subscribe()
    }

    /// True while the last check found the aggregator accepting the relay.
    pub fn accepting(&self) -> watch::Receiver<bool> {
        self.accepting.subscribe()
    }

    /// Checks once and updates the health, the metrics and the logs.
    pub async fn check(&self) {
        let before = self.upstream.reach();
        let _ = self.upstream.check_token().await;
        let now = self.upstream.reach();
        let (healthy, accepting) = match &now {
            Reach::Unknown => (true, false),
            Reach::Accepted => {
                if before != Reach::Accepted && before != Reach::Unknown {
                    tracing::info!(
                        "the aggregator accepts this relay again: health SERVING, sending what waited"
                    );
                }
                (true, true)
            }
            Reach::Refused { code, message } => {
                if !matches!(&before, Reach::Refused { code: c, .. } if c == code) {
                    tracing::error!(
                        code = ?code,
                        message = %message,
                        "the aggregator refuses this relay's token (a configuration error: check --relay-token-file against the aggregator's --relay-token-file); health NOT_SERVING until it accepts it"
                    );
                }
                (false, false)
            }
            Reach::Unreachable { since, message } => {
                let out = since.elapsed() >= self.grace;
                if !matches!(before, Reach::Unreachable { .. }) {
                    tracing::warn!(
                        message = %message,
                        grace_seconds = self.grace.as_secs(),
                        "cannot reach the aggregator: reports are still stored and wait for it; health NOT_SERVING if this lasts the grace period"
                    );
                } else if out && *self.healthy.borrow() {
                    tracing::error!(
                        message = %message,
                        seconds = since.elapsed().as_secs(),
                        "the aggregator has been unreachable for the grace period: health NOT_SERVING until it answers"
                    );
                }
                (!out, false)
            }
        };
        metrics::gauge!("ldpcov_relay_upstream_accepted").set(f64::from(u8::from(accepting)));
        metrics::gauge!("ldpcov_relay_upstream_refused")
            .set(f64::from(u8::from(matches!(now, Reach::Refused { .. }))));
        let unreachable = match &now {
            Reach::Unreachable { since, .. } => since.elapsed().as_secs_f64(),
            _ => 0.0,
        };
        metrics::gauge!("ldpcov_relay_upstream_unreachable_seconds").set(unreachable);
        self.healthy
            .send_if_modified(|h| std::mem::replace(h, healthy) != healthy);
        self.accepting
            .send_if_modified(|a| std::mem::replace(a, accepting) != accepting);
    }

    /// Checks until `shutdown` resolves (see the module docs for the pace).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            self.check().await;
            let pause = if *self.accepting.borrow() {
                CHECK_EVERY
            } else {
                CHECK_EVERY_FAILING
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }
}
