//! A validated collection: the operator's [`CollectionSpec`] plus every parameter
//! derived from it (grid, sensitivity, σ, ρ, validation bound).
//!
//! Both sides derive the parameters with the same code, so a device never has to
//! trust the noise level a server tells it.
//!
//! Two entry points read a spec, and they differ only in what an unspecified
//! `moments` means: [`Collection::create`] is the CreateCollection path (unspecified
//! means [`Moments::MeanAndCovariance`], what a new user needs), [`Collection::from_spec`]
//! the path of a spec that was stored or sent by a server (unspecified means
//! [`Moments::SecondMoment`]: such a spec predates the field, and its collection must
//! keep the parameters it was created with). [`Collection::spec`] always writes the
//! resolved value, so a spec stored by this code reads back the same on both paths.
//! `local_mechanism` and `central_weighting` are resolved the same way: unspecified
//! means the weighting of collections stored before the field existed on the stored
//! path (the raw triangle) and the `svec` weighting at CreateCollection.

use std::sync::OnceLock;

use crate::SpecError;
use crate::layout::triangle_len;
use crate::limits::{MAX_DIM, MAX_ENTRIES, MAX_EPSILON, MAX_NORM_BINS};
use crate::mechanism::{
    GaussianReport, NoiseModel, OffDiagonalWeighting, RankOneReport, RawVectorReport,
    ReportMechanism, Unbiasing,
};
use crate::radius::settings::{RadiusPhaseSettings, phase_params_agree};
use crate::shuffle::{ShuffleSettings, ShuffledPrivacy};
use crate::two_aggregator::TwoAggregatorCircuit;
use ldpcov_accounting::calibration::{pure_dp_rho, zcdp_rho, zcdp_rho_for_epsilon};
use ldpcov_proto::v1::{
    CentralWeighting, CollectionParams, CollectionSpec, Encoding, LocalMechanism, Moments,
    PrivacyModel, RankOneParams, ShuffleParams,
};

pub use crate::mechanism::gaussian::{
    GRID_HEADROOM_SIGMAS, MAX_GRID_BITS, MIN_GRID_BITS, MIN_SIGMA_GRID, SVEC_ROUNDING_MARGIN,
    VALIDATION_SIGMAS, VALIDATION_TAIL, WIRE_CLAMP_SIGMAS,
};
pub use crate::mechanism::raw_vector::{CENTRAL_COORDINATE_BITS, CENTRAL_GRID_BITS};
pub use crate::mechanism::{Entry, MEAN_WEIGHT, joint_base_sensitivity};
pub use validate::validate_collection_id;
use validate::{validate_centre, validate_names, validate_new_spec};

pub(crate) mod validate;

/// Name of the calibration recorded in [`CollectionParams::calibration`].
pub const CALIBRATION_NAME: &str = "analytic-gaussian/balle-wang-2018";
/// Name of the calibration recorded for a central collection: no noise in reports,
/// a zCDP budget spent by the releases.
pub const CENTRAL_CALIBRATION_NAME: &str = "central/zcdp-budget";

/// A collection whose spec is valid, with its derived parameters and its report
/// mechanism.
///
/// Every field is private and set once, by [`create`](Collection::create),
/// [`from_spec`](Collection::from_spec) or [`from_params`](Collection::from_params):
/// a `Collection` always holds exactly what its spec derives, so code that is handed
/// one never needs to re-derive it. To change a spec field, build a new collection
/// from a modified [`spec`](Collection::spec).
///
/// ```compile_fail
/// # use ldpcov_privacy::Collection;
/// # use ldpcov_proto::v1::CollectionSpec;
/// # let spec = CollectionSpec { collection_id: "c".into(), dim: 2, epsilon: 1.0,
/// #     delta: 1e-6, clip_radius: 1.0, min_reports: 1, ..Default::default() };
/// let mut c = Collection::from_spec(&spec).unwrap();
/// c.sigma *= 0.5; // a derived parameter cannot be edited
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Collection {
    id: String,
    dim: usize,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
    min_reports: u64,
    moments: Moments,
    centre: Vec<f64>,
    variable_names: Vec<String>,
    ordered_variables: bool,
    privacy_model: PrivacyModel,
    allow_compressed_release: bool,
    central_weighting: Option<OffDiagonalWeighting>,
    rho: f64,
    mechanism: ReportMechanism,
    shuffle: Option<ShuffleSettings>,
    /// The radius phase, when the spec sets one (boxed: most collections have none).
    radius_phase: Option<Box<RadiusPhaseSettings>>,
    /// The central guarantee of a shuffled collection, computed once on demand.
    shuffled_privacy: LazyShuffledPrivacy,
}

/// A cache of [`Collection::shuffled_privacy`]: a function of the other fields, so it
/// takes no part in comparisons (a computed and a fresh copy are equal).
#[derive(Debug, Clone, Default)]
struct LazyShuffledPrivacy(OnceLock<Option<ShuffledPrivacy>>);

impl PartialEq for LazyShuffledPrivacy {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Collection {
    /// The CreateCollection path: like [`from_spec`](Collection::from_spec), except
    /// that an unspecified `moments` means [`Moments::MeanAndCovariance`] and, for a
    /// local collection, an unspecified `local_mechanism` means
    /// [`LocalMechanism::Gaussian`] and, for a central collection, an unspecified
    /// `central_weighting` means [`CentralWeighting::Svec`] (see the module docs). The
    /// returned collection's [`spec`](Collection::spec) carries the resolved values.
    ///
    /// A new collection is also held to bounds a stored one is not (so no stored
    /// collection becomes unreadable): R between [`MIN_CLIP_RADIUS`] and
    /// [`MAX_CLIP_RADIUS`], δ ≥ [`MIN_DELTA`], centre magnitudes ≤
    /// [`MAX_CENTRE_MAGNITUDE`], variable names without control characters. They are
    /// checked after every check of [`from_spec`](Collection::from_spec), whose
    /// messages keep precedence.
    ///
    /// [`MIN_CLIP_RADIUS`]: crate::limits::MIN_CLIP_RADIUS
    /// [`MAX_CLIP_RADIUS`]: crate::limits::MAX_CLIP_RADIUS
    /// [`MIN_DELTA`]: crate::limits::MIN_DELTA
    /// [`MAX_CENTRE_MAGNITUDE`]: crate::limits::MAX_CENTRE_MAGNITUDE
    pub fn create(spec: &CollectionSpec) -> Result<Self, SpecError> {
        let mut resolved = spec.clone();
        if spec.moments == Moments::Unspecified as i32 {
            resolved.moments = Moments::MeanAndCovariance as i32;
        }
        let local = matches!(
            PrivacyModel::try_from(spec.privacy_model),
            Ok(PrivacyModel::Unspecified | PrivacyModel::Local)
        );
        if local && spec.local_mechanism == LocalMechanism::Unspecified as i32 {
            resolved.local_mechanism = LocalMechanism::Gaussian as i32;
        }
        if !local && spec.central_weighting == CentralWeighting::Unspecified as i32 {
            resolved.central_weighting = CentralWeighting::Svec as i32;
        }
        if let Some(shuffle) = &spec.shuffle {
            resolved.shuffle = Some(ShuffleSettings::create(shuffle)?.spec());
        }
        if let Some(phase) = &spec.radius_phase {
            if spec.clip_radius != 0.0 {
                return Err(SpecError::RadiusPhase(format!(
                    "clip_radius must be 0 at creation (the phase chooses it), got {}",
                    spec.clip_radius
                )));
            }
            resolved.radius_phase = Some(RadiusPhaseSettings::resolve(phase, spec.dim as usize));
        }
        let collection = Self::from_spec(&resolved)?;
        validate_new_spec(&resolved)?;
        Ok(collection)
    }

    /// Validates `spec` and derives the grid, sensitivity and noise. This is the path
    /// of a stored spec or of one sent by a server: an unspecified `moments` means
    /// [`Moments::SecondMoment`] and an unspecified `local_mechanism` of a local
    /// collection means [`LocalMechanism::GaussianTriu`] and an unspecified
    /// `central_weighting` of a central collection [`CentralWeighting::Triu`]: the
    /// weightings collections stored before those fields existed were created with
    /// (new collections go through [`create`](Collection::create)).
    ///
    /// The report mechanism is derived here: a local collection's Gaussian report is
    /// calibrated by the rule [`GaussianReport`] documents (the finest grid whose
    /// headroom fits an i32, σ for the sensitivity with its rounding term, the
    /// validation bound and wire range), a central collection's raw-vector report
    /// needs no calibration and spends the zCDP budget of (ε, δ).
    pub fn from_spec(spec: &CollectionSpec) -> Result<Self, SpecError> {
        validate_collection_id(&spec.collection_id)?;
        let dim = spec.dim as usize;
        if dim == 0 || dim > MAX_DIM {
            return Err(SpecError::Dim(spec.dim));
        }
        let (epsilon, delta, clip_radius) = (spec.epsilon, spec.delta, spec.clip_radius);
        if !(epsilon.is_finite() && epsilon > 0.0 && epsilon <= MAX_EPSILON) {
            return Err(SpecError::Epsilon(epsilon));
        }
        let privacy_model = match PrivacyModel::try_from(spec.privacy_model) {
            Ok(PrivacyModel::Unspecified | PrivacyModel::Local) => PrivacyModel::Local,
            Ok(PrivacyModel::Central) => PrivacyModel::Central,
            Ok(PrivacyModel::TwoAggregator) => PrivacyModel::TwoAggregator,
            Err(_) => return Err(SpecError::PrivacyModel(spec.privacy_model)),
        };
        // The server side adds the noise: a central collection's curator, or a
        // two-aggregator collection's two aggregators, whose reports are the same raw
        // vectors, secret-shared (crate::two_aggregator).
        let central = privacy_model != PrivacyModel::Local;
        let local_mechanism = match LocalMechanism::try_from(spec.local_mechanism) {
            Ok(LocalMechanism::Unspecified) if !central => LocalMechanism::GaussianTriu,
            Ok(LocalMechanism::Unspecified) => LocalMechanism::Unspecified,
            Ok(_) if central => {
                return Err(SpecError::LocalMechanismForCentral(spec.local_mechanism));
            }
            Ok(m) => m,
            Err(_) => return Err(SpecError::LocalMechanism(spec.local_mechanism)),
        };
        let central_weighting = match CentralWeighting::try_from(spec.central_weighting) {
            Ok(CentralWeighting::Unspecified) if central => Some(OffDiagonalWeighting::Raw),
            Ok(CentralWeighting::Unspecified) => None,
            Ok(_) if !central => {
                return Err(SpecError::CentralWeightingForLocal(spec.central_weighting));
            }
            Ok(CentralWeighting::Svec) => Some(OffDiagonalWeighting::Svec),
            Ok(CentralWeighting::Triu) => Some(OffDiagonalWeighting::Raw),
            Err(_) => return Err(SpecError::CentralWeighting(spec.central_weighting)),
        };
        let rank_one = local_mechanism == LocalMechanism::RankOne;
        if rank_one {
            // Pure ε-LDP: no δ is spent, and a δ in the spec would suggest otherwise.
            if delta != 0.0 {
                return Err(SpecError::RankOneDelta(delta));
            }
        } else if !(delta > 0.0 && delta < 1.0) {
            return Err(SpecError::Delta(delta));
        }
        // A radius phase: R is 0 or a candidate; the main report spends the ε left.
        let radius_phase = match &spec.radius_phase {
            Some(phase) => Some(Box::new(RadiusPhaseSettings::derive(spec, phase, &|s| {
                Collection::from_spec(s).map(|c| c.rho)
            })?)),
            None if !(clip_radius.is_finite() && clip_radius > 0.0) => {
                return Err(SpecError::ClipRadius(clip_radius));
            }
            None => None,
        };
        let report_epsilon = radius_phase
            .as_ref()
            .map_or(epsilon, |phase| phase.main_epsilon());
        if spec.min_reports == 0 {
            return Err(SpecError::MinReports);
        }
        let encoding = match Encoding::try_from(spec.encoding) {
            Ok(Encoding::Unspecified) if central => Encoding::RawI32Le,
            Ok(Encoding::Unspecified) if rank_one => Encoding::I16Le,
            Ok(Encoding::Unspecified) => Encoding::I32Le,
            Ok(e) => e,
            Err(_) => return Err(SpecError::Encoding(spec.encoding)),
        };
        if rank_one && encoding != Encoding::I16Le {
            return Err(SpecError::RankOneEncoding(encoding));
        }
        if central != (encoding == Encoding::RawI32Le) {
            return Err(SpecError::EncodingForModel {
                encoding,
                privacy_model,
            });
        }
        let moments = match Moments::try_from(spec.moments) {
            Ok(Moments::Unspecified | Moments::SecondMoment) => Moments::SecondMoment,
            Ok(Moments::MeanAndCovariance) => Moments::MeanAndCovariance,
            Err(_) => return Err(SpecError::Moments(spec.moments)),
        };
        validate_centre(&spec.centre, dim)?;
        validate_names(&spec.variable_names, dim)?;
        let has_mean = moments == Moments::MeanAndCovariance;
        // Norm bins and the compressed release: central second-moment collections only.
        let central_second_moment = privacy_model == PrivacyModel::Central && !has_mean;
        if spec.allow_compressed_release && !central_second_moment {
            return Err(SpecError::CompressedModel);
        }
        if spec.norm_bins > 0 && !central_second_moment {
            return Err(SpecError::NormBinsModel);
        }
        if spec.norm_bins > MAX_NORM_BINS {
            return Err(SpecError::NormBins(spec.norm_bins));
        }
        let (mechanism, rho) = if central {
            // Reports carry no noise; the exact sums' replace-one sensitivity is Δ₀
            // (√2, or Δ₀(w) with the mean block) with no rounding term, since every
            // report is on the grid and inside the unit ball exactly (docs/PRIVACY.md,
            // "Central collections"). The budget is the ρ whose (ε, δ)-DP conversion
            // meets the spec.
            let raw = RawVectorReport::new(dim, has_mean, spec.norm_bins as usize);
            if raw.entries() > MAX_ENTRIES {
                return Err(SpecError::TooManyEntries {
                    entries: raw.entries(),
                    max: MAX_ENTRIES,
                });
            }
            (
                ReportMechanism::RawVector(raw),
                zcdp_rho_for_epsilon(report_epsilon, delta),
            )
        } else if rank_one {
            // Pure ε-LDP implies ε²/2-zCDP (Bun & Steinke 2016, Proposition 1.4): the ρ a
            // device's ledger composes.
            let report = RankOneReport::new(dim, has_mean, epsilon)?;
            (ReportMechanism::RankOne(report), pure_dp_rho(epsilon))
        } else {
            let weighting = if local_mechanism == LocalMechanism::Gaussian {
                OffDiagonalWeighting::Svec
            } else {
                OffDiagonalWeighting::Raw
            };
            let gaussian = GaussianReport::calibrate(
                dim,
                has_mean,
                weighting,
                report_epsilon,
                delta,
                encoding,
            )?;
            let rho = zcdp_rho(gaussian.sensitivity(), gaussian.sigma());
            (ReportMechanism::Gaussian(gaussian), rho)
        };
        let shuffle = match &spec.shuffle {
            None => None,
            Some(_) if central || !rank_one => {
                return Err(SpecError::ShuffleMechanism(
                    if privacy_model == PrivacyModel::TwoAggregator {
                        "a two-aggregator collection"
                    } else if central {
                        "a central collection"
                    } else {
                        local_mechanism.as_str_name()
                    },
                ));
            }
            Some(s) => Some(ShuffleSettings::from_spec(s)?),
        };
        Ok(Collection {
            id: spec.collection_id.clone(),
            dim,
            epsilon,
            delta,
            clip_radius,
            min_reports: spec.min_reports,
            moments,
            centre: spec.centre.clone(),
            variable_names: spec.variable_names.clone(),
            ordered_variables: spec.ordered_variables,
            privacy_model,
            allow_compressed_release: spec.allow_compressed_release,
            central_weighting,
            rho,
            mechanism,
            shuffle,
            radius_phase,
            shuffled_privacy: LazyShuffledPrivacy::default(),
        })
    }

    /// Re-derives a collection from parameters received from a server and checks
    /// that every derived field agrees with local arithmetic (an unspecified
    /// `moments` is read as by [`from_spec`](Collection::from_spec): a server that
    /// predates the field collects the second moment).
    pub fn from_params(params: &CollectionParams) -> Result<Self, SpecError> {
        let spec = params.spec.as_ref().ok_or(SpecError::MissingSpec)?;
        let local = Self::from_spec(spec)?;
        let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
        let agrees = params.entries as usize == local.mechanism.entries()
            && params.grid_bits == local.grid_bits()
            && same(params.sigma, local.sigma())
            && same(params.sensitivity, local.sensitivity())
            && params.max_abs_grid_value == local.max_abs_grid_value()
            && params.wire_step == local.wire_step()
            && params.wire_max == local.wire_max()
            && params.mean_weight == local.mean_weight()
            && params.mean_entries as usize == local.mean_entries()
            && same(params.base_sensitivity, local.base_sensitivity())
            && params.rank_one == local.params().rank_one
            && phase_params_agree(
                params.radius_phase.as_ref(),
                local.params().radius_phase.as_ref(),
            )
            && match (&params.two_aggregator, local.two_aggregator()) {
                (None, None) => true,
                (Some(params), Some(circuit)) => circuit.agrees_with(params),
                _ => false,
            };
        if agrees {
            Ok(local)
        } else {
            Err(SpecError::ParamsMismatch {
                server_sigma: params.sigma,
                local_sigma: local.sigma(),
            })
        }
    }

    /// The spec this collection was built from (encoding and moments made explicit).
    pub fn spec(&self) -> CollectionSpec {
        CollectionSpec {
            collection_id: self.id.clone(),
            dim: self.dim as u32,
            epsilon: self.epsilon,
            delta: self.delta,
            clip_radius: self.clip_radius,
            min_reports: self.min_reports,
            encoding: self.encoding() as i32,
            ordered_variables: self.ordered_variables,
            moments: self.moments as i32,
            centre: self.centre.clone(),
            variable_names: self.variable_names.clone(),
            privacy_model: self.privacy_model as i32,
            norm_bins: self.norm_bins() as u32,
            allow_compressed_release: self.allow_compressed_release,
            local_mechanism: self.mechanism.local_mechanism() as i32,
            shuffle: self.shuffle.as_ref().map(ShuffleSettings::spec),
            radius_phase: self.radius_phase.as_ref().map(|phase| phase.spec()),
            central_weighting: match self.central_weighting {
                None => CentralWeighting::Unspecified,
                Some(OffDiagonalWeighting::Svec) => CentralWeighting::Svec,
                Some(OffDiagonalWeighting::Raw) => CentralWeighting::Triu,
            } as i32,
        }
    }

    /// The radius phase, if the spec sets one (R chosen from the users' noisy norms).
    pub fn radius_phase(&self) -> Option<&RadiusPhaseSettings> {
        self.radius_phase.as_deref()
    }

    /// True while a radius phase has not chosen R (it is 0): no main report is built.
    pub fn radius_pending(&self) -> bool {
        self.radius_phase.is_some() && self.clip_radius == 0.0
    }

    /// This collection with the radius its phase chose (a candidate, else refused).
    pub fn with_chosen_radius(&self, radius: f64) -> Result<Collection, SpecError> {
        if self.radius_phase.is_none() {
            let why = format!("collection {} has no radius phase", self.id);
            return Err(SpecError::RadiusPhase(why));
        }
        Collection::from_spec(&CollectionSpec {
            clip_radius: radius,
            ..self.spec()
        })
    }

    /// ε of one report: the spec's, or with a radius phase the main report's.
    pub fn report_epsilon(&self) -> f64 {
        self.radius_phase
            .as_ref()
            .map_or(self.epsilon, |phase| phase.main_epsilon())
    }

    /// The shuffle settings of a shuffled collection (its reports come only through a
    /// relay, sealed, in batches), `None` otherwise.
    pub fn shuffle(&self) -> Option<&ShuffleSettings> {
        self.shuffle.as_ref()
    }

    /// A shuffled collection's central guarantee at its minimum batch size
    /// ([`ShuffledPrivacy::of_reports`]), computed on the
    /// first call (milliseconds) and kept; `None` for a collection that is not shuffled.
    pub fn shuffled_privacy(&self) -> Option<ShuffledPrivacy> {
        *self.shuffled_privacy.0.get_or_init(|| {
            let settings = self.shuffle.as_ref()?;
            // from_spec checked everything shuffled_privacy checks (a rank-one local
            // collection, 2 ≤ n, 0 < δ < 1), so an error here is a bug; it is logged
            // by the caller as a missing guarantee rather than a panic.
            ShuffledPrivacy::of_reports(
                &self.mechanism,
                self.epsilon,
                self.delta,
                settings.min_batch_size(),
                settings.central_delta(),
            )
            .ok()
        })
    }

    /// The central guarantee of this shuffled collection for batches of at least
    /// `batch` reports (its announced one is at the minimum batch size,
    /// [`shuffled_privacy`](Self::shuffled_privacy)): what batches that held fewer
    /// valid reports than announced delivered. Never above ε0, which a batch of any
    /// size, even one report, keeps (the report itself is ε0-LDP). `None` for a
    /// collection that is not shuffled.
    pub fn shuffled_privacy_at(&self, batch: u64) -> Option<ShuffledPrivacy> {
        let settings = self.shuffle.as_ref()?;
        let bound = ShuffledPrivacy::of_reports(
            &self.mechanism,
            self.epsilon,
            self.delta,
            batch,
            settings.central_delta(),
        )
        .ok();
        Some(ShuffledPrivacy {
            min_batch: batch,
            local_epsilon: self.epsilon,
            central_epsilon: bound.map_or(self.epsilon, |b| b.central_epsilon.min(self.epsilon)),
            central_delta: settings.central_delta(),
        })
    }

    /// Collection id (1–128 characters from `[A-Za-z0-9._-]`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Dimension p.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// ε of one report (local), or of the whole release budget (central).
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// δ of one report (local), or of the whole release budget (central).
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// Clip radius R.
    pub fn clip_radius(&self) -> f64 {
        self.clip_radius
    }

    /// Minimum number of reports before an estimate is released.
    pub fn min_reports(&self) -> u64 {
        self.min_reports
    }

    /// Wire encoding of reports (resolved: never [`Encoding::Unspecified`]).
    pub fn encoding(&self) -> Encoding {
        self.mechanism.encoding()
    }

    /// What is estimated (resolved: never [`Moments::Unspecified`]).
    pub fn moments(&self) -> Moments {
        self.moments
    }

    /// Public centre in data units (empty: none); devices report `clip((x − c)/R)`.
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// Variable names (empty: none).
    pub fn variable_names(&self) -> &[String] {
        &self.variable_names
    }

    /// The variables have a natural order (`CollectionSpec.ordered_variables`): the
    /// default cross-validation may then try banding and Toeplitz averaging.
    pub fn ordered_variables(&self) -> bool {
        self.ordered_variables
    }

    /// Who adds the noise (resolved: never [`PrivacyModel::Unspecified`]). In a
    /// central collection reports are raw clipped vectors, [`sigma`](Self::sigma) is 0,
    /// [`rho`](Self::rho) is the total release budget and the entries are on the grid
    /// `2^−30` ([`CENTRAL_GRID_BITS`]).
    pub fn privacy_model(&self) -> PrivacyModel {
        self.privacy_model
    }

    /// Central second-moment collections, opt-in: the compressed release, which is
    /// NOT differentially private, may be asked for.
    pub fn allow_compressed_release(&self) -> bool {
        self.allow_compressed_release
    }

    /// The report mechanism, derived once from the spec.
    pub fn mechanism(&self) -> &ReportMechanism {
        &self.mechanism
    }

    /// The noise of one report's entries, as the estimators read it.
    pub fn noise_model(&self) -> NoiseModel {
        self.mechanism.noise()
    }

    /// Entries the aggregator sums per report: `d = p(p+1)/2` for the second moment,
    /// `p + d` for the joint report (the mean block first), plus a central
    /// collection's norm bins; for a two-aggregator collection, the limbs of each
    /// aggregator's share of those (`TwoAggregatorCircuit::share_entries`: its combined
    /// sums are the mechanism's entries).
    pub fn entries(&self) -> usize {
        match self.two_aggregator() {
            Some(circuit) => circuit.share_entries(),
            None => self.mechanism.entries(),
        }
    }

    /// Weight `w` of the mean block ([`MEAN_WEIGHT`]; 0 for the second moment).
    pub fn mean_weight(&self) -> f64 {
        self.mechanism.mean_weight()
    }

    /// Sensitivity before grid rounding: [`joint_base_sensitivity`]`(w)`, or √2.
    pub fn base_sensitivity(&self) -> f64 {
        self.mechanism.base_sensitivity()
    }

    /// k: entries are multiples of 2^-k in unit-ball units.
    pub fn grid_bits(&self) -> u32 {
        self.mechanism.grid_bits()
    }

    /// L2 sensitivity of the grid-rounded report, unit-ball units:
    /// `base_sensitivity + √entries·2^-k` (central: `base_sensitivity`).
    pub fn sensitivity(&self) -> f64 {
        self.mechanism.sensitivity()
    }

    /// Per-entry noise sd of one report in unit-ball units (0 for a central
    /// collection).
    pub fn sigma(&self) -> f64 {
        self.mechanism.sigma()
    }

    /// zCDP ρ of one report (local), or the total release budget (central).
    pub fn rho(&self) -> f64 {
        self.rho
    }

    /// Largest accepted |entry| in grid units, the validation bound: for i32
    /// `ceil((1 + tσ)·2^k)` with `t` = [`VALIDATION_SIGMAS`]; for i16/i8 the wire range
    /// `wire_step·wire_max`, which covers `(1 + 6σ)·2^k`. Devices clamp to it.
    pub fn max_abs_grid_value(&self) -> i64 {
        self.mechanism.max_abs_grid_value()
    }

    /// Grid units per wire unit: 1 for i32; for i16/i8 the coarse step
    /// `ceil((1 + 6σ)·2^k / wire_max)`.
    pub fn wire_step(&self) -> i64 {
        self.mechanism.wire_step()
    }

    /// Largest |wire value|: `max_abs_grid_value` for i32, 32 767 for i16, 127 for i8.
    pub fn wire_max(&self) -> i64 {
        self.mechanism.wire_max()
    }

    /// Dyadic norm bins kept by a central second-moment collection (0: none): each
    /// adds `2d + 1` entries after the second moment (see
    /// [`wire::decode_payload`](crate::wire::decode_payload)).
    pub fn norm_bins(&self) -> usize {
        match &self.mechanism {
            ReportMechanism::RawVector(raw) => raw.norm_bins(),
            ReportMechanism::Gaussian(_) | ReportMechanism::RankOne(_) => 0,
        }
    }

    /// The public parameters sent to clients.
    pub fn params(&self) -> CollectionParams {
        CollectionParams {
            spec: Some(self.spec()),
            // The mechanism's entries: for a two-aggregator collection, those of the
            // combined sums, not of each aggregator's share limbs.
            entries: self.mechanism.entries() as u32,
            grid_bits: self.grid_bits(),
            sensitivity: self.sensitivity(),
            sigma: self.sigma(),
            rho: self.rho,
            max_abs_grid_value: self.max_abs_grid_value(),
            calibration: if self.privacy_model != PrivacyModel::Local {
                CENTRAL_CALIBRATION_NAME
            } else {
                CALIBRATION_NAME
            }
            .to_string(),
            wire_step: self.wire_step(),
            wire_max: self.wire_max(),
            mean_weight: self.mean_weight(),
            mean_entries: self.mean_entries() as u32,
            base_sensitivity: self.base_sensitivity(),
            diagonal_noise_sd: self.unbiased_report_noise_sd(Entry::Diagonal),
            off_diagonal_noise_sd: self.unbiased_report_noise_sd(Entry::OffDiagonal),
            mean_noise_sd: if self.has_mean() {
                self.unbiased_report_noise_sd(Entry::Mean)
            } else {
                0.0
            },
            rank_one: match &self.mechanism {
                ReportMechanism::RankOne(r) => {
                    let p = r.params();
                    Some(RankOneParams {
                        gamma_units: p.gamma_units,
                        gamma: p.gamma,
                        nominal_epsilon: p.nominal_epsilon,
                        eta: p.eta,
                        kappa: p.moments.kappa,
                        mean_scale: p.moments.mean_scale,
                        dither_variance: crate::mechanism::rank_one::RankOneParams::wire_step_and_dither_variance().1,
                        expected_rounds: p.expected_iterations(),
                    })
                }
                _ => None,
            },
            shuffle: self.shuffle.as_ref().map(|settings| {
                let privacy = self.shuffled_privacy();
                ShuffleParams {
                    local_epsilon: self.epsilon,
                    central_epsilon: privacy.map_or(f64::NAN, |p| p.central_epsilon),
                    central_delta: settings.central_delta(),
                    min_batch_size: settings.min_batch_size(),
                    keys: Vec::new(),
                    relay_key: None,
                }
            }),
            two_aggregator: self.two_aggregator().map(|circuit| circuit.params()),
            radius_phase: self
                .radius_phase
                .as_ref()
                .map(|phase| phase.params(self.clip_radius > 0.0)),
        }
    }

    /// How averaged summed entries become unbiased estimates (the mechanism's).
    pub fn unbiasing(&self) -> Unbiasing {
        self.mechanism.unbiasing()
    }

    /// The noise sd of one report's unbiased estimate of an entry of the mean or second
    /// moment of `u`, unit-ball units (to leading order in `‖u‖` for the rank-one
    /// report): the [`NoiseModel`]'s sd over the [`Unbiasing`] divisor.
    pub fn unbiased_report_noise_sd(&self, entry: Entry) -> f64 {
        self.noise_model().unbiased_sd(&self.unbiasing(), entry)
    }

    /// How a central collection's Gaussian releases weight the off-diagonal sums
    /// (`CollectionSpec.central_weighting`, resolved): [`OffDiagonalWeighting::Svec`]
    /// adds noise of variance σ²/2 to them instead of σ² at the same ρ
    /// (docs/PRIVACY.md §6b). `None` for a local collection.
    pub fn central_weighting(&self) -> Option<OffDiagonalWeighting> {
        self.central_weighting
    }

    /// Whether this is a central (trusted-curator) collection.
    pub fn is_central(&self) -> bool {
        self.privacy_model == PrivacyModel::Central
    }

    /// Whether this is a two-aggregator collection (its reports are secret-shared
    /// between a leader and a helper, never sent in the clear).
    pub fn is_two_aggregator(&self) -> bool {
        self.privacy_model == PrivacyModel::TwoAggregator
    }

    /// A two-aggregator collection's validity circuit, `None` for another model.
    pub fn two_aggregator(&self) -> Option<TwoAggregatorCircuit> {
        self.is_two_aggregator()
            .then(|| TwoAggregatorCircuit::new(self.dim, self.has_mean()))
    }

    /// The central (trusted-curator) collection of the same spec: a two-aggregator
    /// collection's combined shares are its sums, and its sensitivity, noise and release
    /// budget are theirs.
    pub fn central_twin(&self) -> Result<Collection, SpecError> {
        let mut spec = self.spec();
        spec.privacy_model = PrivacyModel::Central as i32;
        Collection::from_spec(&spec)
    }

    /// Bytes of one report's payload: `entries × bytes per entry`, or `4·p` for a
    /// central collection's raw vector.
    pub fn payload_bytes(&self) -> usize {
        self.mechanism.payload_bytes()
    }

    /// Entries of the moments a release covers: the mean block (if any) and the
    /// second moment, without a central collection's norm bins.
    pub fn release_entries(&self) -> usize {
        self.mean_entries() + self.second_moment_entries()
    }

    /// Whether reports carry the mean block ([`Moments::MeanAndCovariance`]).
    pub fn has_mean(&self) -> bool {
        self.moments == Moments::MeanAndCovariance
    }

    /// Entries of the mean block at the start of a report: `p`, or 0 without one.
    pub fn mean_entries(&self) -> usize {
        if self.has_mean() { self.dim } else { 0 }
    }

    /// Entries of the second-moment block (the last ones of a report): `d = p(p+1)/2`.
    pub fn second_moment_entries(&self) -> usize {
        triangle_len(self.dim)
    }

    /// `2^k`: grid units per unit-ball unit.
    pub fn grid_scale(&self) -> f64 {
        f64::from(1u32 << self.grid_bits())
    }

    /// Noise sd in grid units, `σ·2^k`.
    pub fn sigma_grid(&self) -> f64 {
        self.sigma() * self.grid_scale()
    }

    /// Noise sd of one off-diagonal entry of the unbiased average of `n` reports, in
    /// data units: `R²·σ_off/√n` (`σ_off` = [`unbiased_report_noise_sd`](Self::unbiased_report_noise_sd)
    /// of an off-diagonal entry: σ, σ/√2 for the `svec` Gaussian report, 1/κ rank-one).
    pub fn mean_entry_noise_sd(&self, n: u64) -> f64 {
        self.clip_radius * self.clip_radius * self.unbiased_report_noise_sd(Entry::OffDiagonal)
            / (n as f64).sqrt()
    }
}

#[cfg(test)]
mod tests;
