//! The key schedule at the exact boundaries.

use ldpcov_seal::{KeySchedule, KeyState, KeyWindow, ScheduleError};

const R: u64 = 3600;

#[test]
fn states_at_the_boundaries() {
    let s = KeySchedule::new(R, 2).expect("schedule");
    let k = 10u32;
    let c = u64::from(k);
    let at = |t: u64| s.state(k, t);
    assert_eq!(at((c - 1) * R - 1), KeyState::Unknown);
    assert_eq!(at((c - 1) * R), KeyState::Pending);
    assert_eq!(at(c * R - 1), KeyState::Pending);
    assert_eq!(at(c * R), KeyState::Active);
    assert_eq!(at((c + 1) * R - 1), KeyState::Active);
    assert_eq!(at((c + 1) * R), KeyState::Retired);
    assert_eq!(at((c + 3) * R - 1), KeyState::Retired);
    assert_eq!(at((c + 3) * R), KeyState::Expired);
    assert_eq!(at(u64::MAX), KeyState::Expired);
    assert_eq!(s.state(0, 0), KeyState::Active);
    assert_eq!(s.state(1, 0), KeyState::Pending);
    assert_eq!(s.state(2, 0), KeyState::Unknown);
    assert!(KeyState::Retired.opens() && KeyState::Active.opens());
    assert!(!KeyState::Pending.opens() && !KeyState::Expired.opens());

    // The window agrees with the schedule.
    let w = s.window(k);
    assert_eq!(
        w,
        KeyWindow {
            key_id: k,
            not_before: c * R,
            active_until: (c + 1) * R,
            not_after: (c + 3) * R
        }
    );
    for t in [
        c * R - 1,
        c * R,
        (c + 1) * R - 1,
        (c + 1) * R,
        (c + 3) * R - 1,
        (c + 3) * R,
    ] {
        assert_eq!(w.state_at(t), s.state(k, t), "t = {t}");
    }
}

#[test]
fn without_grace_a_key_expires_when_it_stops_being_active() {
    let s = KeySchedule::new(60, 0).expect("schedule");
    assert_eq!(s.state(5, 6 * 60 - 1), KeyState::Active);
    assert_eq!(s.state(5, 6 * 60), KeyState::Expired);
}

#[test]
fn published_keys_are_pending_then_active() {
    let s = KeySchedule::new(R, 1).expect("schedule");
    let [pending, active] = s.published(10 * R).expect("published");
    assert_eq!((pending.key_id, active.key_id), (11, 10));
    let [pending, active] = s.published(10 * R - 1).expect("published");
    assert_eq!((pending.key_id, active.key_id), (10, 9));
    assert_eq!(active.not_after, 11 * R);
}

#[test]
fn invalid_schedules_and_times_are_refused() {
    assert_eq!(
        KeySchedule::new(59, 1),
        Err(ScheduleError::RotationTooShort(59))
    );
    let s = KeySchedule::new(60, u32::MAX).expect("schedule");
    assert_eq!(
        s.current_key_id(u64::MAX),
        Err(ScheduleError::KeyIdOverflow(u64::MAX))
    );
    let last = (u64::from(u32::MAX) - 1) * 60;
    assert_eq!(s.current_key_id(last), Ok(u32::MAX - 1));
    assert_eq!(
        s.current_key_id(last + 60),
        Err(ScheduleError::KeyIdOverflow(last + 60))
    );
    // Total for any input.
    assert_eq!(s.state(u32::MAX, u64::MAX), KeyState::Expired);
    assert_eq!(s.state(u32::MAX, last), KeyState::Pending);
    assert_eq!(s.state(0, u64::MAX), KeyState::Expired);
    assert_eq!(
        s.window(u32::MAX).not_after,
        (u64::from(u32::MAX) + 1 + u64::from(u32::MAX)) * 60
    );
    let huge = KeySchedule::new(u64::MAX, 3).expect("schedule");
    assert_eq!(huge.window(7).not_after, u64::MAX);
}
