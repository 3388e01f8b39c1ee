//! Per-device limits on the relay's device calls (`SubmitSealedReport`,
//! `GetCollection`): at most [`DeviceLimits::max_in_flight`] calls of one device token
//! handled at once and [`DeviceLimits::calls_per_second`] on average (a token bucket
//! holding two seconds' worth). Checked from the call's headers, with the token, before
//! the call takes a slot of the relay's global limit: one device that opens a thousand
//! calls and never sends their bodies holds a few slots, not all of them, and the
//! others' calls go on. A call over a limit is refused RESOURCE_EXHAUSTED, counted in
//! `ldpcov_relay_device_calls_limited_total{limit}` (`in_flight`, `rate`) and logged
//! at WARN at most every [`LOG_EVERY`] (without the device id).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::Status;

use crate::token::DeviceId;

/// Shortest time between two WARN lines about limited devices.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);
/// Devices tracked before idle ones are forgotten.
const MAX_TRACKED: usize = 100_000;

/// The limits of one device token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceLimits {
    /// Calls of one device handled at once (more are refused).
    pub max_in_flight: u32,
    /// Calls of one device per second on average; bursts of twice as many pass.
    pub calls_per_second: u32,
}

#[derive(Debug)]
struct Entry {
    in_flight: u32,
    tokens: f64,
    refilled: Instant,
}

#[derive(Debug)]
struct Inner {
    limits: DeviceLimits,
    devices: Mutex<HashMap<String, Entry>>,
    last_log: Mutex<Option<Instant>>,
}

/// Counts each device's calls in flight and its call rate. Cloning shares the counts.
#[derive(Debug, Clone)]
pub struct DeviceLimiter {
    inner: Arc<Inner>,
}

/// A device's call in flight: released when dropped.
#[derive(Debug)]
pub struct InFlight {
    inner: Arc<Inner>,
    device: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut devices = self.inner.devices.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = devices.get_mut(&self.device) {
            e.in_flight = e.in_flight.saturating_sub(1);
        }
    }
}

impl DeviceLimiter {
    /// A limiter enforcing `limits` (each at least 1: [`crate::RelayLimits`] checks).
    pub fn new(limits: DeviceLimits) -> Self {
        DeviceLimiter {
            inner: Arc::new(Inner {
                limits,
                devices: Mutex::default(),
                last_log: Mutex::default(),
            }),
        }
    }

    fn burst(&self) -> f64 {
        2.0 * f64::from(self.inner.limits.calls_per_second.max(1))
    }

    /// Admits one call of `device` now, or refuses it RESOURCE_EXHAUSTED.
    pub fn admit(&self, device: &DeviceId) -> Result<InFlight, Status> {
        self.admit_at(device, Instant::now())
    }

    fn admit_at(&self, device: &DeviceId, now: Instant) -> Result<InFlight, Status> {
        let limits = self.inner.limits;
        let burst = self.burst();
        let key = String::from_utf8_lossy(device.as_bytes()).into_owned();
        let refused = {
            let mut devices = self.inner.devices.lock().unwrap_or_else(|p| p.into_inner());
            if devices.len() >= MAX_TRACKED && !devices.contains_key(&key) {
                // Forget the devices with nothing in flight and a full bucket.
                let rate = f64::from(limits.calls_per_second.max(1));
                devices.retain(|_, e| {
                    let tokens = e.tokens + now.duration_since(e.refilled).as_secs_f64() * rate;
                    e.in_flight > 0 || tokens < burst
                });
            }
            let e = devices.entry(key.clone()).or_insert(Entry {
                in_flight: 0,
                tokens: burst,
                refilled: now,
            });
            let elapsed = now.saturating_duration_since(e.refilled).as_secs_f64();
            e.tokens = (e.tokens + elapsed * f64::from(limits.calls_per_second)).min(burst);
            e.refilled = now;
            if e.in_flight >= limits.max_in_flight {
                Some("in_flight")
            } else if e.tokens < 1.0 {
                Some("rate")
            } else {
                e.tokens -= 1.0;
                e.in_flight += 1;
                None
            }
        };
        let Some(limit) = refused else {
            return Ok(InFlight {
                inner: Arc::clone(&self.inner),
                device: key,
            });
        };
        metrics::counter!("ldpcov_relay_device_calls_limited_total", "limit" => limit).increment(1);
        let log = {
            let mut last = self
                .inner
                .last_log
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
            if due {
                *last = Some(now);
            }
            due
        };
        if log {
            tracing::warn!(
                limit,
                max_in_flight = limits.max_in_flight,
                calls_per_second = limits.calls_per_second,
                "refused a device's call over its per-device limit (RESOURCE_EXHAUSTED); logged at most every 10 s"
            );
        }
        Err(match limit {
            "in_flight" => Status::resource_exhausted(format!(
                "this device already has {} calls in flight at the relay (--max-device-calls-in-flight): wait for their answers",
                limits.max_in_flight
            )),
            _ => Status::resource_exhausted(format!(
                "this device calls the relay more than {} times a second (--max-device-calls-per-second): retry later",
                limits.calls_per_second
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(in_flight: u32, rate: u32) -> DeviceLimiter {
        DeviceLimiter::new(DeviceLimits {
            max_in_flight: in_flight,
            calls_per_second: rate,
        })
    }

    #[test]
    fn calls_in_flight_are_bounded_per_device_and_released_on_drop() {
        let l = limiter(2, 1000);
        let a = DeviceId::new("a").expect("id");
        let b = DeviceId::new("b").expect("id");
        let now = Instant::now();
        let first = l.admit_at(&a, now).expect("1st");
        let _second = l.admit_at(&a, now).expect("2nd");
        let third = l.admit_at(&a, now).expect_err("3rd in flight");
        assert_eq!(third.code(), tonic::Code::ResourceExhausted);
        // Another device is not affected.
        let _other = l.admit_at(&b, now).expect("another device");
        drop(first);
        l.admit_at(&a, now).expect("a slot freed");
    }

    #[test]
    fn the_rate_is_a_bucket_of_two_seconds() {
        // 5 calls a second: a burst of 10 passes, the 11th is refused; half a second
        // later 2.5 more tokens: two calls pass, the third is refused.
        let l = limiter(u32::MAX, 5);
        let a = DeviceId::new("a").expect("id");
        let t0 = Instant::now();
        for i in 0..10 {
            drop(
                l.admit_at(&a, t0)
                    .unwrap_or_else(|e| panic!("call {i}: {e}")),
            );
        }
        let refused = l.admit_at(&a, t0).expect_err("over the burst");
        assert!(refused.message().contains("times a second"), "{refused}");
        let t1 = t0 + Duration::from_millis(500);
        drop(l.admit_at(&a, t1).expect("refilled 1"));
        drop(l.admit_at(&a, t1).expect("refilled 2"));
        l.admit_at(&a, t1).expect_err("only 2.5 tokens came back");
    }
}
