//! The key schedule: which key ids exist, and what each may be used for, as a pure
//! function of the time.

/// The shortest rotation period [`KeySchedule::new`] accepts, in seconds.
pub const MIN_ROTATION_SECONDS: u64 = 60;

/// When keys rotate. Key id `k` covers the unix seconds
/// `[k·rotation_seconds, (k+1)·rotation_seconds)`: at time `t` the current key id is
/// `c = ⌊t / rotation_seconds⌋` and
///
/// * `c + 1` is [`KeyState::Pending`] (published ahead so devices and relays can cache
///   it; not sealed to, not opened),
/// * `c` is [`KeyState::Active`] (devices seal to it),
/// * `c − grace_rotations ..= c − 1` are [`KeyState::Retired`] (no longer published
///   for sealing, still opened: reports delayed by a relay's batching arrive late),
/// * older ids are [`KeyState::Expired`] and newer than `c + 1` are
///   [`KeyState::Unknown`]; both are refused.
///
/// Nothing is stored: any two processes with the same schedule and clock agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySchedule {
    rotation_seconds: u64,
    grace_rotations: u32,
}

/// Why a [`KeySchedule`] or a key id could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The rotation period is shorter than [`MIN_ROTATION_SECONDS`].
    #[error("rotation period {0} s is shorter than the minimum {MIN_ROTATION_SECONDS} s")]
    RotationTooShort(u64),
    /// The time is so far in the future that a key id would not fit in a u32.
    #[error("unix time {0} is past the last key id of this schedule")]
    KeyIdOverflow(u64),
}

/// What a key id may be used for at a given time (see [`KeySchedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyState {
    /// The next key: published, not yet sealed to or opened.
    Pending,
    /// The current key: devices seal to it; reports sealed to it are opened.
    Active,
    /// A recent key: no longer sealed to, reports sealed to it are still opened.
    Retired,
    /// Older than the grace period: refused.
    Expired,
    /// Newer than the pending key: refused.
    Unknown,
}

impl KeyState {
    /// Whether reports sealed to a key in this state are opened ([`Active`](Self::Active)
    /// or [`Retired`](Self::Retired)).
    pub fn opens(self) -> bool {
        matches!(self, Self::Active | Self::Retired)
    }
}

/// The validity window of one key id, in unix seconds. Every end is exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyWindow {
    /// The key id.
    pub key_id: u32,
    /// When the key becomes [`KeyState::Active`]: `key_id · rotation_seconds`.
    pub not_before: u64,
    /// When it stops being active (becomes [`KeyState::Retired`]):
    /// `(key_id + 1) · rotation_seconds`. Devices seal to it before this.
    pub active_until: u64,
    /// When it expires (reports sealed to it are no longer opened):
    /// `(key_id + 1 + grace_rotations) · rotation_seconds`.
    pub not_after: u64,
}

impl KeyWindow {
    /// The key's state at `now`, from the window alone (what a device holding a cached
    /// [`PublicKeyConfig`](crate::PublicKeyConfig) can tell): before `not_before`
    /// pending, then active, retired, expired.
    pub fn state_at(&self, now: u64) -> KeyState {
        if now < self.not_before {
            KeyState::Pending
        } else if now < self.active_until {
            KeyState::Active
        } else if now < self.not_after {
            KeyState::Retired
        } else {
            KeyState::Expired
        }
    }
}

impl KeySchedule {
    /// A schedule rotating every `rotation_seconds` (at least [`MIN_ROTATION_SECONDS`])
    /// whose keys are still opened for `grace_rotations` periods after they stop being
    /// active.
    pub fn new(rotation_seconds: u64, grace_rotations: u32) -> Result<Self, ScheduleError> {
        if rotation_seconds < MIN_ROTATION_SECONDS {
            return Err(ScheduleError::RotationTooShort(rotation_seconds));
        }
        Ok(Self {
            rotation_seconds,
            grace_rotations,
        })
    }

    /// The rotation period in seconds.
    pub fn rotation_seconds(&self) -> u64 {
        self.rotation_seconds
    }

    /// How many periods a key is still opened after it stops being active.
    pub fn grace_rotations(&self) -> u32 {
        self.grace_rotations
    }

    /// The active key id at unix time `now`: `⌊now / rotation_seconds⌋`, or an error if
    /// that or the pending id `+ 1` does not fit in a u32.
    pub fn current_key_id(&self, now: u64) -> Result<u32, ScheduleError> {
        let current = now / self.rotation_seconds;
        match u32::try_from(current) {
            Ok(id) if id < u32::MAX => Ok(id),
            _ => Err(ScheduleError::KeyIdOverflow(now)),
        }
    }

    /// The state of `key_id` at unix time `now`. Total: no overflow for any input.
    pub fn state(&self, key_id: u32, now: u64) -> KeyState {
        let current = now / self.rotation_seconds;
        let key = u64::from(key_id);
        if key > current.saturating_add(1) {
            KeyState::Unknown
        } else if key == current + 1 {
            KeyState::Pending
        } else if key == current {
            KeyState::Active
        } else if key + u64::from(self.grace_rotations) >= current {
            KeyState::Retired
        } else {
            KeyState::Expired
        }
    }

    /// The validity window of `key_id` (independent of the time). Products saturate at
    /// `u64::MAX`.
    pub fn window(&self, key_id: u32) -> KeyWindow {
        let at = |periods: u64| periods.saturating_mul(self.rotation_seconds);
        let key = u64::from(key_id);
        KeyWindow {
            key_id,
            not_before: at(key),
            active_until: at(key + 1),
            not_after: at(key + 1 + u64::from(self.grace_rotations)),
        }
    }

    /// The windows of the keys published at `now`: `[pending, active]`.
    pub fn published(&self, now: u64) -> Result<[KeyWindow; 2], ScheduleError> {
        let current = self.current_key_id(now)?;
        Ok([self.window(current + 1), self.window(current)])
    }
}
