//! The relay's source of "now": the system clock, or a test's.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The source of "now" (unix seconds); tests move it.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}
