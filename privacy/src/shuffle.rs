//! The shuffle model's settings of a collection (`CollectionSpec.shuffle`,
//! docs/PRIVACY.md §9): devices seal their reports to the aggregator's HPKE key and
//! send them to an anonymising relay, which forwards them only in shuffled batches of
//! at least [`ShuffleSettings::min_batch_size`].
//!
//! [`ShuffleSettings::create`] resolves a new spec's zeros to the defaults below;
//! [`ShuffleSettings::from_spec`] checks a stored or received one, so that the
//! relay, the aggregator and every device read the same numbers. The central (ε, δ)
//! is [`crate::plan::shuffled_privacy`] at the minimum batch size, computed on demand
//! (it takes milliseconds, see [`ldpcov_accounting::amplification`]), never part of what a client
//! re-derives: a device's own guarantee is the local ε.
//!
//! ```
//! use ldpcov_privacy::shuffle::{ShuffleSettings, DEFAULT_BATCH_WINDOW_SECONDS};
//! use ldpcov_proto::v1::ShuffleSpec;
//!
//! let s = ShuffleSettings::create(&ShuffleSpec { min_batch_size: 1000, ..Default::default() })?;
//! assert_eq!(s.batch_window_seconds(), DEFAULT_BATCH_WINDOW_SECONDS);
//! assert_eq!(s.spec().central_delta, 1e-6);
//! // A stored spec is taken as it is: a zero is an error there.
//! assert!(ShuffleSettings::from_spec(&ShuffleSpec { min_batch_size: 1000, ..Default::default() }).is_err());
//! # Ok::<(), ldpcov_privacy::SpecError>(())
//! ```

use crate::SpecError;
use crate::mechanism::ReportMechanism;
use ldpcov_proto::v1::ShuffleSpec;

/// Batch window when the spec leaves it 0: one hour.
pub const DEFAULT_BATCH_WINDOW_SECONDS: u64 = 3600;
/// Longest batch window: 31 days.
pub const MAX_BATCH_WINDOW_SECONDS: u64 = 31 * 86_400;
/// Largest central δ a spec that leaves it 0 gets ([`default_central_delta`]).
pub const DEFAULT_CENTRAL_DELTA: f64 = 1e-6;

/// The central δ of a spec that leaves it 0: the largest power of ten at most
/// `1/(10·min_batch_size)`, and at most [`DEFAULT_CENTRAL_DELTA`]. A δ near `1/n` would
/// allow the mechanism that publishes one user's report in the clear with probability
/// `δ·n`; a tenth of that keeps the failure probability well below one user per batch.
///
/// ```
/// use ldpcov_privacy::shuffle::default_central_delta;
///
/// assert_eq!(default_central_delta(1000), 1e-6);
/// assert_eq!(default_central_delta(1_000_000), 1e-7);
/// assert_eq!(default_central_delta(2_500_000), 1e-8);
/// ```
pub fn default_central_delta(min_batch_size: u64) -> f64 {
    let exponent = (10.0 * min_batch_size.max(1) as f64).log10().ceil() as i32;
    // 10^-e as a literal-exact power of ten (`powi` of 0.1 accumulates rounding).
    let power = format!("1e-{exponent}")
        .parse::<f64>()
        .unwrap_or(f64::MIN_POSITIVE);
    power.min(DEFAULT_CENTRAL_DELTA)
}
/// Key rotation period when the spec leaves it 0: one day.
pub const DEFAULT_KEY_ROTATION_SECONDS: u64 = 86_400;
/// Shortest key rotation period.
pub const MIN_KEY_ROTATION_SECONDS: u64 = 60;
/// Longest key rotation period: one year.
pub const MAX_KEY_ROTATION_SECONDS: u64 = 366 * 86_400;
/// Rotations a superseded key still opens reports for when the spec leaves it 0.
pub const DEFAULT_KEY_GRACE_ROTATIONS: u32 = 7;
/// Most rotations a superseded key may still open reports for.
pub const MAX_KEY_GRACE_ROTATIONS: u32 = 1000;
/// Largest minimum batch size: the amplification bound's cost grows as √n (about
/// 0.4 s at 10⁸), and no deployment batches more users than that.
pub const MAX_MIN_BATCH_SIZE: u64 = 100_000_000;

/// A collection's validated shuffle settings. Built only by [`create`](Self::create)
/// and [`from_spec`](Self::from_spec).
#[derive(Debug, Clone, PartialEq)]
pub struct ShuffleSettings {
    spec: ShuffleSpec,
}

impl ShuffleSettings {
    /// The CreateCollection path: zeros take the defaults, then
    /// [`from_spec`](Self::from_spec)'s checks.
    pub fn create(spec: &ShuffleSpec) -> Result<Self, SpecError> {
        let mut resolved = *spec;
        if resolved.batch_window_seconds == 0 {
            resolved.batch_window_seconds = DEFAULT_BATCH_WINDOW_SECONDS;
        }
        if resolved.central_delta == 0.0 {
            resolved.central_delta = default_central_delta(resolved.min_batch_size);
        }
        if resolved.key_rotation_seconds == 0 {
            resolved.key_rotation_seconds = DEFAULT_KEY_ROTATION_SECONDS;
        }
        if resolved.key_grace_rotations == 0 {
            resolved.key_grace_rotations = DEFAULT_KEY_GRACE_ROTATIONS;
        }
        let settings = Self::from_spec(&resolved)?;
        if resolved.central_delta * resolved.min_batch_size as f64 >= 1.0 {
            return Err(SpecError::OutOfRange {
                field: "shuffle.central_delta".into(),
                value: resolved.central_delta,
                range: "below 1/min_batch_size (a delta of 1/n or more allows one report in the clear per batch; the default is at most 1/(10 n))",
            });
        }
        Ok(settings)
    }

    /// The stored (or server-sent) path: every field must be in range as it is.
    pub fn from_spec(spec: &ShuffleSpec) -> Result<Self, SpecError> {
        let range = |field: &str, value: f64, range: &'static str| SpecError::OutOfRange {
            field: format!("shuffle.{field}"),
            value,
            range,
        };
        if !(2..=MAX_MIN_BATCH_SIZE).contains(&spec.min_batch_size) {
            return Err(range(
                "min_batch_size",
                spec.min_batch_size as f64,
                "[2, 1e8]",
            ));
        }
        if !(1..=MAX_BATCH_WINDOW_SECONDS).contains(&spec.batch_window_seconds) {
            return Err(range(
                "batch_window_seconds",
                spec.batch_window_seconds as f64,
                "[1, 2678400] (0 at create: 3600)",
            ));
        }
        if !(spec.central_delta > 0.0 && spec.central_delta < 1.0) {
            return Err(range(
                "central_delta",
                spec.central_delta,
                "(0, 1) (0 at create: at most 1/(10 min_batch_size) and 1e-6)",
            ));
        }
        if !(MIN_KEY_ROTATION_SECONDS..=MAX_KEY_ROTATION_SECONDS)
            .contains(&spec.key_rotation_seconds)
        {
            return Err(range(
                "key_rotation_seconds",
                spec.key_rotation_seconds as f64,
                "[60, 31622400] (0 at create: 86400)",
            ));
        }
        if !(1..=MAX_KEY_GRACE_ROTATIONS).contains(&spec.key_grace_rotations) {
            return Err(range(
                "key_grace_rotations",
                f64::from(spec.key_grace_rotations),
                "[1, 1000] (0 at create: 7)",
            ));
        }
        Ok(Self { spec: *spec })
    }

    /// The settings as stored and returned (defaults resolved).
    pub fn spec(&self) -> ShuffleSpec {
        self.spec
    }

    /// Fewest reports in a batch the aggregator accepts.
    pub fn min_batch_size(&self) -> u64 {
        self.spec.min_batch_size
    }

    /// Shortest batch window of the relay, seconds.
    pub fn batch_window_seconds(&self) -> u64 {
        self.spec.batch_window_seconds
    }

    /// δ of the central guarantee.
    pub fn central_delta(&self) -> f64 {
        self.spec.central_delta
    }

    /// The HPKE key rotation period, seconds.
    pub fn key_rotation_seconds(&self) -> u64 {
        self.spec.key_rotation_seconds
    }

    /// Rotations a superseded key still opens reports for.
    pub fn key_grace_rotations(&self) -> u32 {
        self.spec.key_grace_rotations
    }
}

/// The central guarantee of a collection whose reports reach the aggregator through a
/// shuffler ([`ShuffledPrivacy::of_reports`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShuffledPrivacy {
    /// The smallest batch the aggregator accepts: every user is in exactly one batch
    /// of at least this many reports.
    pub min_batch: u64,
    /// ε0 of one report: what any single party that sees it learns (the shuffler, or
    /// the aggregator colluding with it).
    pub local_epsilon: f64,
    /// ε against the aggregator alone, at `central_delta`
    /// ([`shuffled_epsilon`](ldpcov_accounting::amplification::shuffled_epsilon)).
    pub central_epsilon: f64,
    /// δ of the central guarantee.
    pub central_delta: f64,
}

/// Why [`ShuffledPrivacy::of_reports`] has no answer for a collection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShuffleError {
    /// An (ε0, δ0) mechanism: the bound is for pure ε0 reports.
    #[error(
        "the shuffling bound is for pure epsilon0 reports (the rank-one mechanism); a {mechanism} report has delta0 = {delta} > 0, which would add about n*delta0 to the central delta"
    )]
    NotPure {
        /// The collection's mechanism.
        mechanism: &'static str,
        /// Its δ0.
        delta: f64,
    },
    /// A central collection: its reports carry no local noise to amplify.
    #[error("a central collection's reports are not locally private: there is nothing to amplify")]
    Central,
    /// Bad batch size or δ.
    #[error(transparent)]
    Amplification(#[from] ldpcov_accounting::amplification::AmplificationError),
}

impl ShuffledPrivacy {
    /// The central (ε, δ) against the aggregator of reports of `mechanism` (at
    /// `local_epsilon`, `local_delta`) that arrive shuffled in batches of at least
    /// `min_batch`, at `central_delta`: the numerical amplification bound of
    /// [`ldpcov_accounting::amplification`]. Each user is in one batch (parallel
    /// composition across batches), so the smallest batch sets the guarantee. Refused
    /// for the Gaussian mechanisms, whose δ0 > 0 the bound does not cover, and for
    /// central collections (raw vectors).
    pub fn of_reports(
        mechanism: &ReportMechanism,
        local_epsilon: f64,
        local_delta: f64,
        min_batch: u64,
        central_delta: f64,
    ) -> Result<Self, ShuffleError> {
        match mechanism {
            ReportMechanism::RankOne(_) => {}
            ReportMechanism::RawVector(_) => return Err(ShuffleError::Central),
            other => {
                return Err(ShuffleError::NotPure {
                    mechanism: other.local_mechanism().as_str_name(),
                    delta: local_delta,
                });
            }
        }
        let central_epsilon = ldpcov_accounting::amplification::shuffled_epsilon(
            local_epsilon,
            min_batch,
            central_delta,
        )?;
        Ok(Self {
            min_batch,
            local_epsilon,
            central_epsilon,
            central_delta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min_batch_size: u64) -> ShuffleSpec {
        ShuffleSpec {
            min_batch_size,
            ..Default::default()
        }
    }

    #[test]
    fn create_resolves_every_default_and_from_spec_accepts_the_result() {
        let s = ShuffleSettings::create(&spec(500)).unwrap();
        let resolved = s.spec();
        assert_eq!(resolved.batch_window_seconds, DEFAULT_BATCH_WINDOW_SECONDS);
        assert_eq!(resolved.central_delta, DEFAULT_CENTRAL_DELTA);
        assert_eq!(resolved.key_rotation_seconds, DEFAULT_KEY_ROTATION_SECONDS);
        assert_eq!(resolved.key_grace_rotations, DEFAULT_KEY_GRACE_ROTATIONS);
        assert_eq!(ShuffleSettings::from_spec(&resolved).unwrap(), s);
    }

    #[test]
    fn every_field_out_of_range_is_refused_with_its_name() {
        let good = ShuffleSettings::create(&spec(500)).unwrap().spec();
        let cases: [(&str, ShuffleSpec); 8] = [
            (
                "min_batch_size",
                ShuffleSpec {
                    min_batch_size: 1,
                    ..good
                },
            ),
            (
                "min_batch_size",
                ShuffleSpec {
                    min_batch_size: MAX_MIN_BATCH_SIZE + 1,
                    ..good
                },
            ),
            (
                "batch_window_seconds",
                ShuffleSpec {
                    batch_window_seconds: MAX_BATCH_WINDOW_SECONDS + 1,
                    ..good
                },
            ),
            (
                "central_delta",
                ShuffleSpec {
                    central_delta: 1.0,
                    ..good
                },
            ),
            (
                "central_delta",
                ShuffleSpec {
                    central_delta: f64::NAN,
                    ..good
                },
            ),
            (
                "key_rotation_seconds",
                ShuffleSpec {
                    key_rotation_seconds: 59,
                    ..good
                },
            ),
            (
                "key_grace_rotations",
                ShuffleSpec {
                    key_grace_rotations: MAX_KEY_GRACE_ROTATIONS + 1,
                    ..good
                },
            ),
            (
                "key_grace_rotations",
                ShuffleSpec {
                    key_grace_rotations: 0,
                    ..good
                },
            ),
        ];
        for (field, bad) in cases {
            let err = ShuffleSettings::from_spec(&bad).unwrap_err().to_string();
            assert!(err.contains(&format!("shuffle.{field}")), "{err}");
        }
    }

    fn collection_spec(
        mechanism: ldpcov_proto::v1::LocalMechanism,
        delta: f64,
    ) -> ldpcov_proto::v1::CollectionSpec {
        ldpcov_proto::v1::CollectionSpec {
            collection_id: "shuffled".into(),
            dim: 4,
            epsilon: 8.0,
            delta,
            clip_radius: 1.0,
            min_reports: 1,
            local_mechanism: mechanism as i32,
            shuffle: Some(spec(1_000_000)),
            ..Default::default()
        }
    }

    #[test]
    fn a_shuffled_collection_needs_the_rank_one_mechanism_and_shows_its_central_guarantee() {
        use crate::Collection;
        use ldpcov_proto::v1::{LocalMechanism, PrivacyModel};
        let c = Collection::create(&collection_spec(LocalMechanism::RankOne, 0.0)).unwrap();
        let params = c.params().shuffle.unwrap();
        // ε0 = 8 at n = 10⁶, δ = 1e-6: 0.3037 by the variation-ratio bound (FMT21: 0.444).
        assert_eq!(params.local_epsilon, 8.0);
        assert!(params.central_epsilon > 0.3036 && params.central_epsilon < 0.3038);
        assert_eq!(params.central_delta, 1e-6);
        assert_eq!(params.min_batch_size, 1_000_000);
        // The stored spec round-trips with its defaults resolved.
        let stored = c.spec();
        assert_eq!(
            stored.shuffle.unwrap().key_rotation_seconds,
            DEFAULT_KEY_ROTATION_SECONDS
        );
        assert_eq!(Collection::from_spec(&stored).unwrap(), c);
        assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
        // Not a pure mechanism, or central: refused.
        for bad in [
            collection_spec(LocalMechanism::Gaussian, 1e-6),
            collection_spec(LocalMechanism::GaussianTriu, 1e-6),
            ldpcov_proto::v1::CollectionSpec {
                privacy_model: PrivacyModel::Central as i32,
                local_mechanism: 0,
                ..collection_spec(LocalMechanism::Unspecified, 1e-6)
            },
        ] {
            let err = Collection::create(&bad).unwrap_err();
            assert!(matches!(err, SpecError::ShuffleMechanism(_)), "{err}");
        }
        // A collection without the field is not shuffled.
        let plain = Collection::create(&ldpcov_proto::v1::CollectionSpec {
            shuffle: None,
            ..collection_spec(LocalMechanism::RankOne, 0.0)
        })
        .unwrap();
        assert!(plain.shuffle().is_none() && plain.shuffled_privacy().is_none());
        assert!(plain.params().shuffle.is_none());
    }
}
