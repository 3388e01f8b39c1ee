//! The transport-free core: subtract the collection's public centre (if any), clip,
//! then hand the clipped vector to the collection's report mechanism
//! ([`crate::mechanism`]): for a local collection, the statistic on the collection's
//! grid — `triu(u·uᵀ)`, preceded by the mean block `w·u` when the collection estimates
//! mean and covariance — plus noise, encoded (`docs/PRIVACY.md` §2).
//!
//! Nothing here touches the network or an async runtime, so apps that ship reports
//! their own way can use it with `default-features = false`.

use crate::{ClientError, mechanism};
use ldpcov_noise::NoiseSampler;
use ldpcov_privacy::wire::{REPORT_ID_LEN, encode_payload};
use ldpcov_privacy::{Collection, ReportId, ReportMechanism};
use ldpcov_proto::v1::Report;
use rand::rngs::OsRng;
use rand::{Rng, RngCore, SeedableRng, TryRngCore};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;

/// Relative safety margin of the clip: `u = (1 − 2⁻³²)·x / max(R, ‖x‖)`.
///
/// The sensitivity `√2 + √d·2⁻ᵏ` the noise is calibrated to assumes `‖u‖₂ ≤ 1` for
/// the floating-point `u` actually used. Computing `‖x‖` and the quotients in f64
/// leaves a relative error below `(p + 10)·2⁻⁵³ ≤ 2⁻⁴⁰` for `p ≤ 4096`; shrinking by
/// `2⁻³²` absorbs it with room to spare, and biases the signal by less than 10⁻⁹.
pub const CLIP_MARGIN: f64 = 1.0 / 4_294_967_296.0;

/// **Not private — for simulations and benchmarks only.** A floating-point Gaussian
/// `N(0, σ²)` draw rounded to the nearest integer, from a ChaCha20 stream.
///
/// Its variance is `σ² + 1/12` for all practical purposes. This is the floating-point
/// construction the literature warns about (Mironov 2012; Jin et al. 2022): its low
/// bits can leak the value it was added to, so it carries no proof. The client
/// library never uses it by default; real reports use the exact
/// [`DiscreteGaussianSampler`](crate::DiscreteGaussianSampler).
///
/// Its `Debug` output never shows the generator state.
pub struct FloatGaussianNotPrivate {
    rng: ChaCha20Rng,
}

impl FloatGaussianNotPrivate {
    /// A **deterministic** sampler for simulations, tests and benchmarks: its only
    /// constructor, named so that no call site can build one without saying so.
    ///
    /// The noise is a function of `seed`: anyone who knows or guesses the seed can
    /// subtract it and recover `x·xᵀ`; and even with a secret seed the rounded float
    /// Gaussian carries no privacy proof. Reports built with it are **not private**;
    /// never use it on real data.
    pub fn from_seed_for_simulation_not_private(seed: u64) -> Self {
        FloatGaussianNotPrivate {
            rng: ChaCha20Rng::seed_from_u64(seed),
        }
    }
}

impl std::fmt::Debug for FloatGaussianNotPrivate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FloatGaussianNotPrivate")
            .finish_non_exhaustive()
    }
}

impl NoiseSampler for FloatGaussianNotPrivate {
    /// # Panics
    /// If `sigma_grid` is negative, NaN or infinite (a caller bug: [`Perturber`] only
    /// passes the σ of a validated collection).
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        assert!(
            sigma_grid.is_finite() && sigma_grid >= 0.0,
            "noise sd {sigma_grid} must be finite and non-negative"
        );
        let z: f64 = self.rng.sample(StandardNormal);
        // `as` saturates; |σ·z| < 2^63 for every σ a collection can have.
        (sigma_grid * z).round() as i64
    }

    fn uniform_below(&mut self, bound: u64) -> u64 {
        self.rng.random_range(0..bound.max(1))
    }

    fn next_word(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn kind(&self) -> &'static str {
        "float-gaussian-NOT-PRIVATE"
    }
}

/// A fresh random report id: 16 bytes straight from the operating system's random
/// number generator (`getrandom`, a CSPRNG), so ids are unique across devices and
/// carry no information about the device or the data.
pub fn random_report_id() -> Result<ReportId, ClientError> {
    let mut id = [0u8; REPORT_ID_LEN];
    OsRng.try_fill_bytes(&mut id)?;
    Ok(ReportId(id))
}

/// Turns a user's vector into the perturbed, grid-rounded report of one collection,
/// through the collection's report mechanism.
///
/// A [`Collection`] always holds exactly what its spec derives (it cannot be edited
/// after it is built), so the perturber uses it as it is: nothing is re-derived per
/// report.
#[derive(Debug, Clone)]
pub struct Perturber {
    collection: Collection,
}

impl Perturber {
    /// A perturber for `collection`.
    pub fn new(collection: Collection) -> Self {
        Perturber { collection }
    }

    /// The collection.
    pub fn collection(&self) -> &Collection {
        &self.collection
    }

    /// Checks `x` and returns the unit-ball vector `u` the report is built from:
    /// `u = (1 − 2⁻³²)·y / max(R, ‖y‖)` (see [`CLIP_MARGIN`]) with `y = x − c` for the
    /// collection's public centre `c` (`y = x` without one).
    ///
    /// Fails with [`ClientError::Dimension`] if `x.len() ≠ p`, then with
    /// [`ClientError::NonFinite`] at the first NaN or infinite coordinate of `x` (or of
    /// `x − c`, which overflows only for coordinates near ±1.8·10³⁰⁸). The norm is
    /// computed on `y / max|yᵢ|`, so huge finite coordinates neither overflow nor lose
    /// the direction.
    pub fn clip(&self, x: &[f64]) -> Result<Vec<f64>, ClientError> {
        clip(&self.collection, x)
    }

    /// The perturbed report entries, in grid units: the packed upper triangle of
    /// `u·uᵀ` (`u` from [`clip`](Perturber::clip)), preceded for a mean-and-covariance
    /// collection by the mean block `w·u` ([`Collection::mean_weight`]).
    ///
    /// Mean block: for each `i`, `round(w·uᵢ·2ᵏ)`. Then for each `(i, j)`, `i ≤ j`, in
    /// [`triangle_pairs`](ldpcov_privacy::layout::triangle_pairs) order:
    /// `round(uᵢ·uⱼ·2ᵏ)` (nearest integer, ties away from zero, decided on the exact
    /// product; [`GaussianReport::statistic`](ldpcov_privacy::mechanism::GaussianReport::statistic)).
    /// Each entry gets one independent draw of `noise` with sd
    /// [`Collection::sigma_grid`] (calibrated to the sensitivity of the whole report)
    /// and is clamped to `±max_abs_grid_value`. The clamp acts on the already-noisy
    /// value, so it is post-processing and costs no privacy; an honest entry reaches it
    /// with probability at most 10⁻¹² (`ldpcov_privacy::collection::VALIDATION_SIGMAS`).
    ///
    /// For a rank-one collection the result is what the aggregator sums for the report
    /// ([`RankOneReport::expand`](ldpcov_privacy::mechanism::RankOneReport::expand) of
    /// its wire values: the mean block `y` and the products `yᵢyⱼ`, grid `2^−22`); its
    /// noise is the mechanism's, not additive.
    ///
    /// Input errors ([`clip`](Perturber::clip)) are reported before any noise is drawn;
    /// a central collection is refused ([`ClientError::CentralCollection`]).
    pub fn perturb(
        &self,
        x: &[f64],
        noise: &mut (impl NoiseSampler + ?Sized),
    ) -> Result<Vec<i32>, ClientError> {
        let u = self.clip(x)?;
        let values = mechanism::perturb(&self.collection, &u, noise)?;
        Ok(match self.collection.mechanism() {
            ReportMechanism::RankOne(report) => report.expand(&values),
            _ => values,
        })
    }

    /// A complete [`Report`] for `x`: perturbed entries encoded in the collection's
    /// encoding, tagged with `report_id` (reuse the same id, and the same report, when
    /// resending).
    pub fn report(
        &self,
        x: &[f64],
        noise: &mut (impl NoiseSampler + ?Sized),
        report_id: ReportId,
    ) -> Result<Report, ClientError> {
        let u = self.clip(x)?;
        report_of_clipped(&self.collection, &u, noise, report_id)
    }

    /// Re-quantises noisy grid-unit entries to the collection's wire step: unchanged
    /// for i32; for i16/i8, `v/step` rounded up with probability equal to its
    /// fractional part (unbiased: `E[wire·step] = v`) and clamped to `±wire_max`.
    ///
    /// This acts on values that already carry the calibrated noise, so it is
    /// post-processing and costs no privacy. It adds at most `step²/4` (on average
    /// `step²/6`) of variance per entry; see `docs/BENCHMARKS.md` for the figures.
    /// A rank-one report's entries are returned unchanged (its device dithers the draw
    /// itself: build its wire report with [`report`](Perturber::report)).
    pub fn to_wire(&self, entries: &[i32], noise: &mut (impl NoiseSampler + ?Sized)) -> Vec<i32> {
        mechanism::to_wire(self.collection.mechanism(), entries, noise)
    }
}

/// Refuses a vector report to `collection` while its radius is being chosen
/// ([`ClientError::RadiusPending`]): its R is 0 until then.
pub(crate) fn refuse_pending_radius(collection: &Collection) -> Result<(), ClientError> {
    match collection.radius_phase() {
        Some(phase) if collection.radius_pending() => Err(ClientError::RadiusPending {
            id: collection.id().to_string(),
            phase: phase.phase_collection_id().to_string(),
        }),
        _ => Ok(()),
    }
}

/// [`Perturber::clip`] for `collection`.
pub(crate) fn clip(collection: &Collection, x: &[f64]) -> Result<Vec<f64>, ClientError> {
    let dim = collection.dim();
    let x = centred(collection, x)?;
    let (max_abs, s) = norm_parts(&x);
    if max_abs == 0.0 {
        return Ok(vec![0.0; dim]);
    }
    let keep = 1.0 - CLIP_MARGIN;
    let radius = collection.clip_radius();
    // ‖x‖ = max_abs·s may overflow to +∞ only when it exceeds R: the test stays right.
    if max_abs * s <= radius {
        Ok(x.iter().map(|v| v / radius * keep).collect())
    } else {
        Ok(x.iter().map(|v| v / max_abs / s * keep).collect())
    }
}

/// `‖x − c‖` for `collection`'s centre `c` (none: `‖x‖`), after the same input checks
/// as [`clip`]: what a device's radius-phase report is of. `+∞` when it overflows.
pub(crate) fn centred_norm(collection: &Collection, x: &[f64]) -> Result<f64, ClientError> {
    let (max_abs, s) = norm_parts(&centred(collection, x)?);
    Ok(max_abs * s)
}

/// `x − c` after the input checks: `x` has the collection's dimension and finite
/// coordinates, and so does `x − c`.
fn centred<'a>(
    collection: &Collection,
    x: &'a [f64],
) -> Result<std::borrow::Cow<'a, [f64]>, ClientError> {
    let dim = collection.dim();
    if x.len() != dim {
        return Err(ClientError::Dimension {
            expected: dim,
            got: x.len(),
        });
    }
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        return Err(ClientError::NonFinite { index });
    }
    if collection.centre().is_empty() {
        return Ok(std::borrow::Cow::Borrowed(x));
    }
    let centred: Vec<f64> = x
        .iter()
        .zip(collection.centre())
        .map(|(v, c)| v - c)
        .collect();
    if let Some(index) = centred.iter().position(|v| !v.is_finite()) {
        return Err(ClientError::NonFinite { index });
    }
    Ok(std::borrow::Cow::Owned(centred))
}

/// `(max|xᵢ|, s)` with `‖x‖ = max|xᵢ|·s`: `s = ‖x‖ / max|xᵢ|` lies in `[1, √p]`, so
/// neither overflows nor underflows (`s` is 0 for the zero vector).
fn norm_parts(x: &[f64]) -> (f64, f64) {
    let max_abs = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if max_abs == 0.0 {
        return (0.0, 0.0);
    }
    let s = x
        .iter()
        .map(|v| {
            let t = v / max_abs;
            t * t
        })
        .sum::<f64>()
        .sqrt();
    (max_abs, s)
}

/// The complete perturbed [`Report`] of `collection` for the clipped vector `u`:
/// noise, wire step, encoding ([`Perturber::report`] after the clip).
pub(crate) fn report_of_clipped(
    collection: &Collection,
    u: &[f64],
    noise: &mut (impl NoiseSampler + ?Sized),
    report_id: ReportId,
) -> Result<Report, ClientError> {
    let entries = mechanism::perturb(collection, u, noise)?;
    let wire = mechanism::to_wire(collection.mechanism(), &entries, noise);
    Ok(Report {
        collection_id: collection.id().to_string(),
        report_id: report_id.0.to_vec(),
        encoding: collection.encoding() as i32,
        payload: encode_payload(collection, &wire),
    })
}

/// A **trusted-curator** report for a central collection: `x` clipped exactly as a
/// local report is ([`Perturber::clip`]: centre, radius R), put on the grid `2^−15`
/// inside the unit ball exactly, and sent **without noise** — the operator sees it.
/// Privacy comes only from the noise the aggregator adds to each release. Refuses a
/// local collection ([`ClientError::LocalCollection`]), a two-aggregator collection
/// ([`ClientError::TwoAggregatorCollection`]), a collection whose radius is still
/// being chosen ([`ClientError::RadiusPending`]: see
/// [`trusted_curator_radius_phase_report`]) and bad input (wrong length, NaN or
/// infinite values).
pub fn trusted_curator_report(
    collection: &Collection,
    x: &[f64],
    report_id: ReportId,
) -> Result<Report, ClientError> {
    refuse_pending_radius(collection)?;
    if collection.is_two_aggregator() {
        // Its vectors are secret-shared, never sent whole (the same grid, another path).
        return Err(ClientError::TwoAggregatorCollection {
            id: collection.id().to_string(),
        });
    }
    let ReportMechanism::RawVector(raw) = collection.mechanism() else {
        return Err(ClientError::LocalCollection {
            id: collection.id().to_string(),
        });
    };
    let u = clip(collection, x)?;
    Ok(Report {
        collection_id: collection.id().to_string(),
        report_id: report_id.0.to_vec(),
        encoding: ldpcov_proto::v1::Encoding::RawI32Le as i32,
        payload: mechanism::raw_vector_payload(raw, &u)?,
    })
}

#[cfg(test)]
mod tests;

/// A **trusted-curator** radius-phase report for a central collection whose radius is
/// still being chosen: the exact one-hot vector of the interval `‖x − c‖` falls in, to
/// the phase's own central collection (its curator adds the noise once, to the release
/// the radius is chosen from). Refuses a collection with no pending phase, a local one
/// (its phase report is perturbed on the device:
/// [`ReportBuilder::radius_phase_report`](crate::ReportBuilder::radius_phase_report))
/// and bad input.
pub fn trusted_curator_radius_phase_report(
    collection: &Collection,
    x: &[f64],
    report_id: ReportId,
) -> Result<Report, ClientError> {
    let (phase, one_hot) = radius_phase_vector(collection, x)?;
    trusted_curator_report(&phase, &one_hot, report_id)
}

/// The phase's collection of `collection`, whose radius is still being chosen, and the
/// vector a device reports to it for `x`: the one-hot interval of `‖x − c‖` (after the
/// input checks). [`ClientError::NoRadiusPhase`] without a pending phase.
pub(crate) fn radius_phase_vector(
    collection: &Collection,
    x: &[f64],
) -> Result<(Collection, Vec<f64>), ClientError> {
    let settings = collection
        .radius_phase()
        .filter(|_| collection.radius_pending())
        .ok_or_else(|| ClientError::NoRadiusPhase {
            id: collection.id().to_string(),
        })?;
    let norm = centred_norm(collection, x)?;
    let phase = Collection::from_spec(settings.phase_spec())?;
    Ok((phase, settings.one_hot(norm)))
}
