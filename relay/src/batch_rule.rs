//! The batch rule: when a window of sealed reports becomes a batch. The one place the
//! relay's privacy-relevant rule is written — a batch's size is what the central ε
//! every device of a shuffled collection is promised rests on (docs/PRIVACY.md §9) —
//! as a pure function of a window's age and count, the collection's rule and the
//! relay's floor; the store ([`RelayStore`](crate::RelayStore)) only applies it.
//!
//! A window becomes due once it is at least `window_seconds` old **and** holds at
//! least `min_batch_size` reports, each the larger of the window's rule (fixed when it
//! opened) and the relay's floor, and never fewer than one report. A window past its
//! time but short of reports stays open until it has enough.
//!
//! ```
//! use ldpcov_relay::CloseRule;
//!
//! let rule = CloseRule { min_batch_size: 100, window_seconds: 60 };
//! let floor = CloseRule { min_batch_size: 200, window_seconds: 0 };
//! // Opened at 1 000 s: old enough at 1 060, but the floor asks for 200 reports.
//! assert!(!rule.is_due(floor, 1_000, 150, 1_060));
//! assert!(rule.is_due(floor, 1_000, 200, 1_060));
//! assert!(!rule.is_due(floor, 1_000, 200, 1_059));
//! assert_eq!(rule.due_from(floor, 1_000), 1_060);
//! ```

/// When a window becomes a batch: at least `window_seconds` after it opened, and
/// holding at least `min_batch_size` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseRule {
    /// Fewest reports in a batch.
    pub min_batch_size: u64,
    /// Shortest window, seconds.
    pub window_seconds: u64,
}

impl CloseRule {
    /// The rule a window of this rule closes by under the relay's `floor`: each field
    /// the larger of the two, and at least one report.
    pub fn at_least(self, floor: CloseRule) -> CloseRule {
        CloseRule {
            min_batch_size: self.min_batch_size.max(floor.min_batch_size).max(1),
            window_seconds: self.window_seconds.max(floor.window_seconds),
        }
    }

    /// Whether a window of this rule, opened at `opened` (unix seconds) and holding
    /// `reports`, may become a batch at `now` under `floor`.
    pub fn is_due(self, floor: CloseRule, opened: u64, reports: u64, now: u64) -> bool {
        let rule = self.at_least(floor);
        now >= opened.saturating_add(rule.window_seconds) && reports >= rule.min_batch_size
    }

    /// When a window of this rule opened at `opened` is old enough under `floor` (unix
    /// seconds): the time it became due, once it holds enough reports.
    pub fn due_from(self, floor: CloseRule, opened: u64) -> u64 {
        opened.saturating_add(self.at_least(floor).window_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: CloseRule = CloseRule {
        min_batch_size: 0,
        window_seconds: 0,
    };

    #[test]
    fn a_window_is_due_when_old_enough_and_full_enough_under_the_stricter_rule() {
        let rule = CloseRule {
            min_batch_size: 10,
            window_seconds: 30,
        };
        // Its own rule: both conditions, at their exact bounds.
        assert!(rule.is_due(NONE, 100, 10, 130));
        assert!(!rule.is_due(NONE, 100, 9, 130));
        assert!(!rule.is_due(NONE, 100, 10, 129));
        // A stricter floor wins on each field separately.
        let floor = CloseRule {
            min_batch_size: 20,
            window_seconds: 10,
        };
        assert!(!rule.is_due(floor, 100, 19, 1_000));
        assert!(rule.is_due(floor, 100, 20, 130));
        assert_eq!(rule.due_from(floor, 100), 130);
        let slow = CloseRule {
            min_batch_size: 0,
            window_seconds: 60,
        };
        assert_eq!(rule.due_from(slow, 100), 160);
        assert!(!rule.is_due(slow, 100, 10, 159));
    }

    #[test]
    fn an_empty_window_is_never_due_and_time_does_not_overflow() {
        assert!(!NONE.is_due(NONE, 0, 0, u64::MAX));
        assert!(NONE.is_due(NONE, 0, 1, 0));
        let forever = CloseRule {
            min_batch_size: 1,
            window_seconds: u64::MAX,
        };
        assert!(!forever.is_due(NONE, 5, 1, u64::MAX - 1));
        assert_eq!(forever.due_from(NONE, 5), u64::MAX);
    }
}
