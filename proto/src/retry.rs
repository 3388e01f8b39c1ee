//! How the two callers that retry gRPC calls wait and what they retry: the device
//! client (`ldpcov-client`, a call retried a few times with jitter) and the relay's
//! forwarder (`ldpcov-relay`, a batch retried until the aggregator acknowledges it).
//! Each keeps its own numbers (first delay, cap, attempts); the doubling, the cap, the
//! jitter and the transient status codes are here, once.
//!
//! ```
//! use std::time::Duration;
//! use ldpcov_proto::retry::{Backoff, is_retryable};
//!
//! let backoff = Backoff {
//!     first: Duration::from_millis(50),
//!     max: Duration::from_millis(150),
//!     jitter: false,
//! };
//! let first = backoff.next(None);
//! let second = backoff.next(Some(first));
//! assert_eq!((first, second), (Duration::from_millis(50), Duration::from_millis(100)));
//! assert_eq!(backoff.next(Some(second)), Duration::from_millis(150), "capped");
//! assert_eq!(backoff.wait(second), second, "no jitter");
//! assert!(is_retryable(&tonic::Status::unavailable("down")));
//! assert!(!is_retryable(&tonic::Status::invalid_argument("bad")));
//! ```

use std::time::Duration;

use rand::Rng;
use tonic::{Code, Status};

/// Exponential backoff with a cap and optional jitter: the first retry waits `first`,
/// each later one twice the one before, never more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The backoff before the first retry.
    pub first: Duration,
    /// The cap on the backoff.
    pub max: Duration,
    /// Whether a wait is drawn uniformly in `[b/2, b]` for backoff `b` (so that many
    /// callers do not retry in step) rather than `b` itself.
    pub jitter: bool,
}

impl Backoff {
    /// The backoff after `previous` (`None`: before the first retry): `first`, then
    /// twice the previous one, at most `max`.
    pub fn next(&self, previous: Option<Duration>) -> Duration {
        match previous {
            None => self.first.min(self.max),
            Some(previous) => previous.saturating_mul(2).min(self.max),
        }
    }

    /// How long to wait for `backoff`: itself, or with [`jitter`](Self::jitter) a
    /// uniformly random time in `[backoff/2, backoff]`.
    pub fn wait(&self, backoff: Duration) -> Duration {
        if self.jitter {
            rand::rng().random_range(backoff / 2..=backoff)
        } else {
            backoff
        }
    }
}

/// Whether a failed call may succeed if sent again: `UNAVAILABLE`,
/// `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`, and `UNKNOWN` when it was
/// raised locally by the transport (not sent by the server). Never `INVALID_ARGUMENT`,
/// `NOT_FOUND`, `FAILED_PRECONDITION` and the like: resending cannot fix those.
pub fn is_retryable(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted => {
            true
        }
        // tonic attaches the underlying error to statuses it makes from transport
        // failures; statuses decoded from a server's trailers carry none.
        Code::Unknown => {
            std::error::Error::source(status).is_some()
                || status.message().starts_with("Service was not ready")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses() {
        assert!(is_retryable(&Status::unavailable("x")));
        assert!(is_retryable(&Status::aborted("x")));
        assert!(!is_retryable(&Status::invalid_argument("x")));
        assert!(!is_retryable(&Status::not_found("x")));
        assert!(!is_retryable(&Status::unknown("from the server")));
        // What tonic makes of a local transport failure: UNKNOWN with the cause attached.
        let local = Status::from_error(Box::new(std::io::Error::other("connection reset")));
        assert_eq!(local.code(), Code::Unknown);
        assert!(is_retryable(&local));
    }

    #[test]
    fn backoff_jitter_stays_in_range() {
        let backoff = Backoff {
            first: Duration::from_millis(80),
            max: Duration::from_secs(1),
            jitter: true,
        };
        let b = Duration::from_millis(80);
        for _ in 0..100 {
            let w = backoff.wait(b);
            assert!(w >= b / 2 && w <= b);
        }
        assert_eq!(backoff.wait(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap_and_restarts_from_zero() {
        let backoff = Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
            jitter: false,
        };
        let mut waits = Vec::new();
        let mut previous = None;
        for _ in 0..8 {
            let next = backoff.next(previous);
            waits.push(next.as_secs());
            previous = Some(next);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        // A backoff reset to zero stays zero (the relay's resumed batches).
        assert_eq!(backoff.next(Some(Duration::ZERO)), Duration::ZERO);
        // A first backoff above the cap is capped.
        let capped = Backoff {
            first: Duration::from_secs(90),
            ..backoff
        };
        assert_eq!(capped.next(None), Duration::from_secs(60));
    }
}
