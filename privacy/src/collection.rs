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
use crate::limits::{
    MAX_CENTRE_MAGNITUDE, MAX_CLIP_RADIUS, MAX_DIM, MAX_ENTRIES, MAX_EPSILON, MAX_ID_LEN,
    MAX_NAME_BYTES, MAX_NORM_BINS, MIN_CLIP_RADIUS, MIN_DELTA,
};
use crate::mechanism::{
    GaussianReport, NoiseModel, OffDiagonalWeighting, RankOneReport, RawVectorReport,
    ReportMechanism, Unbiasing,
};
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

/// Name of the calibration recorded in [`CollectionParams::calibration`].
pub const CALIBRATION_NAME: &str = "analytic-gaussian/balle-wang-2018";
/// Name of the calibration recorded for a central collection: no noise in reports,
/// a zCDP budget spent by the releases.
pub const CENTRAL_CALIBRATION_NAME: &str = "central/zcdp-budget";

/// The bounds only a new collection must meet (see [`Collection::create`]): R, δ and
/// the centre within the ranges whose derived quantities stay finite with margin,
/// printable names. Stored collections are not held to them, so none becomes
/// unreadable.
fn validate_new_spec(spec: &CollectionSpec) -> Result<(), SpecError> {
    let out_of_range = |field: String, value: f64, range: &'static str| SpecError::OutOfRange {
        field,
        value,
        range,
    };
    let r = spec.clip_radius;
    if !(MIN_CLIP_RADIUS..=MAX_CLIP_RADIUS).contains(&r) {
        return Err(out_of_range("clip_radius".into(), r, "[1e-100, 1e100]"));
    }
    // A rank-one collection's δ is 0 (checked by from_spec).
    if spec.local_mechanism != LocalMechanism::RankOne as i32 && spec.delta < MIN_DELTA {
        return Err(out_of_range("delta".into(), spec.delta, "[1e-100, 1)"));
    }
    if let Some(index) = spec
        .centre
        .iter()
        .position(|v| v.abs() > MAX_CENTRE_MAGNITUDE)
    {
        return Err(out_of_range(
            format!("centre[{index}]"),
            spec.centre[index],
            "[-1e100, 1e100]",
        ));
    }
    for (index, name) in spec.variable_names.iter().enumerate() {
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return Err(SpecError::NameNotPrintable {
                index,
                code: c as u32,
            });
        }
    }
    Ok(())
}

/// Checks the optional public centre: empty, or exactly `dim` finite values.
fn validate_centre(centre: &[f64], dim: usize) -> Result<(), SpecError> {
    if !(centre.is_empty() || centre.len() == dim) {
        return Err(SpecError::CentreLength {
            expected: dim,
            got: centre.len(),
        });
    }
    match centre.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(SpecError::CentreNonFinite {
            index,
            value: centre[index],
        }),
        None => Ok(()),
    }
}

/// Checks the optional variable names: empty, or exactly `dim` distinct non-empty
/// names of at most [`MAX_NAME_BYTES`] bytes.
fn validate_names(names: &[String], dim: usize) -> Result<(), SpecError> {
    if !(names.is_empty() || names.len() == dim) {
        return Err(SpecError::NamesLength {
            expected: dim,
            got: names.len(),
        });
    }
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(SpecError::NameEmpty { index });
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(SpecError::NameTooLong {
                index,
                bytes: name.len(),
            });
        }
        if let Some(first) = seen.insert(name.as_str(), index) {
            return Err(SpecError::NameDuplicate {
                name: name.clone(),
                first,
                second: index,
            });
        }
    }
    Ok(())
}

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

/// Checks a collection id: 1–128 characters from `[A-Za-z0-9._-]`.
pub fn validate_collection_id(id: &str) -> Result<(), SpecError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SpecError::CollectionId(
            id.chars().take(MAX_ID_LEN + 8).collect(),
        ))
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
    /// collection becomes unreadable): R between [`MIN_CLIP_RADIUS`] and [`MAX_CLIP_RADIUS`],
    /// δ ≥ [`MIN_DELTA`], centre magnitudes ≤ [`MAX_CENTRE_MAGNITUDE`], variable names
    /// without control characters. They are checked after every check of
    /// [`from_spec`](Collection::from_spec), whose messages keep precedence.
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
        if !(clip_radius.is_finite() && clip_radius > 0.0) {
            return Err(SpecError::ClipRadius(clip_radius));
        }
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
                zcdp_rho_for_epsilon(epsilon, delta),
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
            let gaussian =
                GaussianReport::calibrate(dim, has_mean, weighting, epsilon, delta, encoding)?;
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
        let agrees = params.entries as usize == local.entries()
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
            central_weighting: match self.central_weighting {
                None => CentralWeighting::Unspecified,
                Some(OffDiagonalWeighting::Svec) => CentralWeighting::Svec,
                Some(OffDiagonalWeighting::Raw) => CentralWeighting::Triu,
            } as i32,
        }
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
    /// collection's norm bins.
    pub fn entries(&self) -> usize {
        self.mechanism.entries()
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
            entries: self.entries() as u32,
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
mod tests {
    use super::*;
    use ldpcov_accounting::calibration::{analytic_sigma, gaussian_delta, std_normal_cdf};

    fn spec(dim: u32, epsilon: f64, delta: f64) -> CollectionSpec {
        CollectionSpec {
            collection_id: "c1".into(),
            dim,
            epsilon,
            delta,
            clip_radius: 1.0,
            min_reports: 10,
            encoding: 0,
            ..Default::default()
        }
    }

    #[test]
    fn derived_parameters_are_private_for_the_grid_sensitivity() {
        for &(dim, eps, delta) in &[(1, 1.0, 1e-6), (20, 1.0, 1e-6), (1000, 0.1, 1e-9)] {
            let c = Collection::from_spec(&spec(dim, eps, delta)).unwrap();
            let d = (dim as usize) * (dim as usize + 1) / 2;
            assert_eq!(c.entries(), d);
            let want_sens = 2f64.sqrt() + (d as f64).sqrt() / c.grid_scale();
            assert_eq!(c.sensitivity(), want_sens);
            // The sensitivity is never below the true √2.
            assert!(c.sensitivity() > 2f64.sqrt());
            // σ meets δ at that sensitivity.
            assert!(gaussian_delta(c.sensitivity(), eps, c.sigma()) <= delta * (1.0 + 1e-9));
            // Every honest value fits the i32 wire.
            assert!(c.max_abs_grid_value() <= i64::from(i32::MAX));
            let bound = ((1.0 + VALIDATION_SIGMAS * c.sigma()) * c.grid_scale()).ceil();
            assert_eq!(c.max_abs_grid_value() as f64, bound);
            assert_eq!(c.wire_max(), c.max_abs_grid_value());
        }
    }

    /// `t` meets the per-entry tail target of its derivation, and is the smallest
    /// value to 0.01 that does (a looser bound would be a longer poisoning lever).
    #[test]
    fn validation_sigmas_meet_the_tail_target_and_no_more() {
        let chernoff = |t: f64| 2.0 * (-t * t / 2.0).exp();
        let t = VALIDATION_SIGMAS;
        assert!(chernoff(t) <= VALIDATION_TAIL, "{}", chernoff(t));
        assert!(
            chernoff(t - 0.01) > VALIDATION_TAIL,
            "{}",
            chernoff(t - 0.01)
        );
        // The continuous Gaussian's exact tail lies below the Chernoff bound.
        assert!(2.0 * std_normal_cdf(-t) < chernoff(t));
        // The coarse encodings' range sits inside it; the grid headroom outside.
        assert!(WIRE_CLAMP_SIGMAS < t && t < GRID_HEADROOM_SIGMAS);
    }

    /// The grid is still the finest with `(1 + 50σ)·2^k ≤ i32::MAX`: tightening the
    /// validation bound changed neither k, nor Δ, nor σ.
    #[test]
    fn the_grid_keeps_its_own_headroom() {
        // k pinned from an independent computation (mpmath bisection of the analytic
        // Gaussian, the rule above), which the code before the tightening also gave.
        for &(dim, eps, delta, k) in &[
            (1, 1.0, 1e-6, 22),
            (20, 1.0, 1e-6, 22),
            (1000, 0.1, 1e-9, 19),
        ] {
            let c = Collection::from_spec(&spec(dim, eps, delta)).unwrap();
            assert_eq!(c.grid_bits(), k, "p = {dim}");
            let fits = |k: u32| {
                let scale = f64::from(1u32 << k);
                let sens = std::f64::consts::SQRT_2 + (c.entries() as f64).sqrt() / scale;
                let sigma = analytic_sigma(sens, eps, delta).unwrap();
                ((1.0 + 50.0 * sigma) * scale).ceil() <= f64::from(i32::MAX)
            };
            assert!(fits(c.grid_bits()));
            assert!(c.grid_bits() == MAX_GRID_BITS || !fits(c.grid_bits() + 1));
        }
    }

    /// The poisoning lever: the most one accepted report can add to one summed entry,
    /// `max_abs_grid_value / 2^k` unit-ball units, in units of an honest report's noise
    /// sd σ. An honest entry is signal (|s| ≤ 1) plus noise, so the lever is the bound
    /// `t + 1/σ` (i32) or `6 + 1/σ` plus less than one wire step (i16/i8); it was
    /// `50 + 1/σ` for i32 before. `--nocapture` prints the table docs/PRIVACY.md quotes.
    #[test]
    fn the_poisoning_lever_is_the_bound_in_sigmas() {
        for &(dim, eps) in &[(20, 0.5), (20, 1.0), (20, 4.0), (200, 1.0)] {
            for encoding in [Encoding::I32Le, Encoding::I16Le, Encoding::I8] {
                let mut s = spec(dim, eps, 1e-6);
                s.encoding = encoding as i32;
                let c = Collection::from_spec(&s).unwrap();
                let lever = c.max_abs_grid_value() as f64 / c.sigma_grid();
                let floor = |t: f64| t + 1.0 / c.sigma();
                let old = floor(GRID_HEADROOM_SIGMAS);
                println!(
                    "p={dim} eps={eps} {encoding:?}: sigma={:.4} lever={lever:.3} (i32 before: {old:.3})",
                    c.sigma()
                );
                let (t, slack) = match encoding {
                    Encoding::I32Le => (VALIDATION_SIGMAS, 1.0),
                    _ => (WIRE_CLAMP_SIGMAS, c.wire_max() as f64 + 1.0),
                };
                // Rounding up to whole grid units (and wire steps) adds < slack units.
                assert!(lever >= floor(t), "{lever}");
                assert!(lever < floor(t) + slack / c.sigma_grid(), "{lever}");
                assert!(lever < floor(VALIDATION_SIGMAS) + 1e-3, "{lever}");
            }
        }
    }

    /// ‖v(u) − v(u')‖ for the joint statistic `v(u) = (w·u, triu(uuᵀ))`, packed in the
    /// layout's order, computed directly from its definition.
    fn joint_distance(w: f64, u: &[f64], v: &[f64]) -> f64 {
        let p = u.len();
        let first = u.iter().zip(v).map(|(a, b)| (w * a - w * b).powi(2));
        let second =
            crate::layout::triangle_pairs(p).map(|(i, j)| (u[i] * u[j] - v[i] * v[j]).powi(2));
        first.chain(second).sum::<f64>().sqrt()
    }

    /// Δ₀(w) is the closed form `(2 + w²)/√2` (w ≤ √2), `2w` beyond; the pair of the
    /// derivation's attaining step reaches it; random pairs and the tempting wrong
    /// answers (orthogonal pair: √(2 + 2w²); antipodal pair: 2w) stay below it.
    #[test]
    fn joint_sensitivity_is_the_closed_form_and_is_attained() {
        use rand::{Rng, SeedableRng};
        let sqrt2 = std::f64::consts::SQRT_2;
        // Pinned: (2 + 1/4)/√2 = 2.25/√2 = 1.5909902576697319 (9/(4√2) to 17 digits).
        assert!((joint_base_sensitivity(MEAN_WEIGHT) - 1.590_990_257_669_732).abs() < 1e-15);
        assert_eq!(MEAN_WEIGHT, 0.5);
        assert!((joint_base_sensitivity(0.0) - sqrt2).abs() < 1e-15);
        for &w in &[0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 1.2, sqrt2, 1.5, 2.0] {
            let closed = if w <= sqrt2 {
                (2.0 + w * w) / sqrt2
            } else {
                2.0 * w
            };
            assert!(
                (joint_base_sensitivity(w) - closed).abs() <= 1e-15 * closed,
                "w = {w}"
            );
            // The attaining pair: u = (cos t, −sin t), u' = (−sin t, cos t), sin 2t =
            // min(w²/2, 1), padded with zeros to p coordinates.
            let t = (w * w / 2.0).min(1.0).asin() / 2.0;
            for p in [2usize, 3, 6] {
                let mut u = vec![0.0; p];
                let mut v = vec![0.0; p];
                (u[0], u[1]) = (t.cos(), -t.sin());
                (v[0], v[1]) = (-t.sin(), t.cos());
                let attained = joint_distance(w, &u, &v);
                assert!(
                    (attained - closed).abs() <= 1e-12 * closed,
                    "w = {w}, p = {p}: {attained} vs {closed}"
                );
            }
            // The wrong candidates fall short for 0 < w < √2.
            if w > 0.0 && w < sqrt2 {
                assert!((2.0 + 2.0 * w * w).sqrt() < closed - 1e-3 * w * w * w * w);
                assert!(2.0 * w < closed - 1e-6);
            }
        }
        // Random pairs in the unit ball never exceed Δ₀ (p = 4, w = 1/2).
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let w = MEAN_WEIGHT;
        let mut best: f64 = 0.0;
        for _ in 0..20_000 {
            let mut draw = || {
                let g: Vec<f64> = (0..4).map(|_| rng.random_range(-1.0..1.0)).collect();
                let n = g.iter().map(|x| x * x).sum::<f64>().sqrt().max(1.0);
                g.into_iter().map(|x| x / n).collect::<Vec<f64>>()
            };
            let (u, v) = (draw(), draw());
            best = best.max(joint_distance(w, &u, &v));
        }
        assert!(best <= joint_base_sensitivity(w) * (1.0 + 1e-12), "{best}");
    }

    /// A new collection estimates mean and covariance: p + d entries, w = 1/2, σ
    /// calibrated to `Δ₀(1/2) + √(p + d)·2⁻ᵏ` exactly as the second moment is to
    /// `√2 + √d·2⁻ᵏ`, and pinned against the 50-digit reference of
    /// `docs/calibration_reference.py` (σ = 5.974598181957314 at Δ = √2, ε = 1,
    /// δ = 10⁻⁶; σ is linear in Δ). Using √2 (−11 %), 2w = 1 (−37 %) or
    /// √(2 + 2w²) = 1.581 (−0.6 %) in place of Δ₀ moves σ by far more than 1e-9.
    #[test]
    fn joint_collection_calibrates_to_the_joint_sensitivity() {
        for &dim in &[2u32, 20, 300] {
            let c = Collection::create(&spec(dim, 1.0, 1e-6)).unwrap();
            let p = dim as usize;
            let d = p * (p + 1) / 2;
            assert_eq!(c.moments(), Moments::MeanAndCovariance);
            assert_eq!(
                (c.entries(), c.mean_entries(), c.second_moment_entries()),
                (p + d, p, d)
            );
            assert_eq!(c.mean_weight(), 0.5);
            let base = 2.25 / std::f64::consts::SQRT_2;
            assert!((c.base_sensitivity() - base).abs() < 1e-15);
            // A new collection's report is svec-weighted: its rounding term carries the
            // margin for the rounding of √2·uᵢ.
            let grid_term = ((p + d) as f64).sqrt() / c.grid_scale() * (1.0 + SVEC_ROUNDING_MARGIN);
            assert_eq!(c.sensitivity(), c.base_sensitivity() + grid_term);
            let sigma_ref = 5.974_598_181_957_314 / std::f64::consts::SQRT_2 * (base + grid_term);
            assert!(
                (c.sigma() / sigma_ref - 1.0).abs() < 1e-9,
                "p = {dim}: {} vs {sigma_ref}",
                c.sigma()
            );
            // σ meets δ at Δ and is the smallest that does (to bisection precision).
            assert!(gaussian_delta(c.sensitivity(), 1.0, c.sigma()) <= 1e-6 * (1.0 + 1e-9));
            assert!(gaussian_delta(c.sensitivity(), 1.0, c.sigma() * (1.0 - 1e-9)) > 1e-6);
            // The validation bound is today's rule on the joint σ.
            let bound = ((1.0 + VALIDATION_SIGMAS * c.sigma()) * c.grid_scale()).ceil();
            assert_eq!(c.max_abs_grid_value() as f64, bound);
            // The parameters carry the resolved mode and round-trip.
            let params = c.params();
            assert_eq!(
                params.spec.as_ref().unwrap().moments,
                Moments::MeanAndCovariance as i32
            );
            assert_eq!(
                (params.entries as usize, params.mean_entries as usize),
                (p + d, p)
            );
            assert_eq!(Collection::from_params(&params).unwrap(), c);
        }
    }

    /// The stored path and the create path differ only on an unspecified `moments`;
    /// explicit values mean the same on both, and the second moment is unchanged.
    #[test]
    fn unspecified_moments_mean_second_moment_when_stored_and_joint_when_created() {
        let old = spec(20, 1.0, 1e-6);
        assert_eq!(old.moments, 0);
        let stored = Collection::from_spec(&old).unwrap();
        assert_eq!(stored.moments(), Moments::SecondMoment);
        assert_eq!((stored.entries(), stored.mean_weight()), (210, 0.0));
        assert_eq!(stored.base_sensitivity(), std::f64::consts::SQRT_2);
        let created = Collection::create(&old).unwrap();
        assert_eq!(created.moments(), Moments::MeanAndCovariance);
        // So does an unspecified local mechanism: the raw weighting stored collections
        // were created with, the svec weighting for new ones.
        assert_eq!(
            stored.spec().local_mechanism,
            LocalMechanism::GaussianTriu as i32
        );
        assert_eq!(
            created.spec().local_mechanism,
            LocalMechanism::Gaussian as i32
        );
        for m in [Moments::SecondMoment, Moments::MeanAndCovariance] {
            for mechanism in [LocalMechanism::Gaussian, LocalMechanism::GaussianTriu] {
                let mut s = old.clone();
                s.moments = m as i32;
                s.local_mechanism = mechanism as i32;
                assert_eq!(
                    Collection::create(&s).unwrap(),
                    Collection::from_spec(&s).unwrap()
                );
                assert_eq!(Collection::from_spec(&s).unwrap().moments, m);
            }
        }
        // The spec written back carries the resolved value: it reads back the same on
        // the stored path.
        assert_eq!(Collection::from_spec(&created.spec()).unwrap(), created);
        assert_eq!(Collection::from_spec(&stored.spec()).unwrap(), stored);
        // Old parameters (no moments, no mean fields) still re-derive.
        let mut old_params = stored.params();
        old_params.spec.as_mut().unwrap().moments = 0;
        assert_eq!(Collection::from_params(&old_params).unwrap(), stored);
        // A server claiming the joint mode with the second moment's σ is refused.
        let mut lying = created.params();
        lying.sigma = stored.sigma();
        assert!(matches!(
            Collection::from_params(&lying),
            Err(SpecError::ParamsMismatch { .. })
        ));
    }

    #[test]
    fn bad_moments_centres_and_names_are_refused_precisely() {
        let base = spec(3, 1.0, 1e-6);
        let refused = |f: &dyn Fn(&mut CollectionSpec)| {
            let mut s = base.clone();
            f(&mut s);
            let a = Collection::create(&s).unwrap_err();
            assert_eq!(
                Collection::from_spec(&s).unwrap_err().to_string(),
                a.to_string()
            );
            a.to_string()
        };
        assert_eq!(
            refused(&|s| s.moments = 3),
            "unknown moments 3 (1 = second moment, 2 = mean and covariance, 0 = the default)"
        );
        assert_eq!(
            refused(&|s| s.centre = vec![1.0, 2.0]),
            "centre has 2 values; it must be empty or have dim = 3"
        );
        assert_eq!(
            refused(&|s| s.centre = vec![1.0, f64::NAN, 2.0]),
            "centre[1] = NaN must be a finite number"
        );
        assert_eq!(
            refused(&|s| s.centre = vec![f64::INFINITY, 1.0, 2.0]),
            "centre[0] = inf must be a finite number"
        );
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            refused(&|s| s.variable_names = names(&["a", "b"])),
            "2 variable names given; there must be none or dim = 3"
        );
        assert_eq!(
            refused(&|s| s.variable_names = names(&["a", "", "c"])),
            "variable name 1 is empty"
        );
        assert_eq!(
            refused(&|s| s.variable_names = names(&["a", "b", "a"])),
            "variable name \"a\" appears twice (positions 0 and 2)"
        );
        let long = "é".repeat(33); // 66 bytes, 33 characters
        assert_eq!(
            refused(&|s| s.variable_names = vec!["a".into(), long.clone(), "c".into()]),
            "variable name 1 has 66 bytes of UTF-8; at most 64 are allowed"
        );
        // At the limits: accepted, and carried through the spec.
        let mut s = base.clone();
        s.centre = vec![-1e100, 0.0, 5.0];
        s.variable_names = vec!["é".repeat(32), "b".into(), "B".into()];
        let c = Collection::create(&s).unwrap();
        assert_eq!(
            (c.centre().to_vec(), c.variable_names().to_vec()),
            (s.centre.clone(), s.variable_names.clone())
        );
        assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
    }

    #[test]
    fn grid_rounding_costs_little_sensitivity_at_p_1000() {
        let c = Collection::from_spec(&spec(1000, 1.0, 1e-6)).unwrap();
        assert!(
            c.sensitivity() / 2f64.sqrt() - 1.0 < 1e-2,
            "{}",
            c.sensitivity()
        );
    }

    #[test]
    fn coarse_encodings_cover_six_sigma_and_fit_the_grid() {
        for (encoding, wire_max) in [(Encoding::I16Le, 32_767i64), (Encoding::I8, 127)] {
            let mut s = spec(100, 1.0, 1e-6);
            s.encoding = encoding as i32;
            let c = Collection::from_spec(&s).unwrap();
            assert_eq!(c.wire_max(), wire_max);
            let covered = (c.wire_step() * c.wire_max()) as f64;
            let needed = (1.0 + 6.0 * c.sigma()) * c.grid_scale();
            // step = ceil(needed / wire_max): covers the range, overshooting by < wire_max.
            assert!(covered >= needed && covered < needed + wire_max as f64);
            // The wire range is the validation bound.
            assert_eq!(c.wire_step() * c.wire_max(), c.max_abs_grid_value());
            // The same noise calibration as i32: the encoding is post-processing.
            let i32c = Collection::from_spec(&spec(100, 1.0, 1e-6)).unwrap();
            assert_eq!((c.sigma(), c.grid_bits()), (i32c.sigma(), i32c.grid_bits()));
            assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
        }
    }

    #[test]
    fn params_round_trip_and_tampering_is_caught() {
        let c = Collection::from_spec(&spec(5, 1.0, 1e-6)).unwrap();
        assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
        let mut p = c.params();
        p.sigma *= 0.5;
        assert!(matches!(
            Collection::from_params(&p),
            Err(SpecError::ParamsMismatch { .. })
        ));
    }

    #[test]
    fn rejects_nonsense_specs() {
        assert!(matches!(
            Collection::from_spec(&spec(0, 1.0, 1e-6)),
            Err(SpecError::Dim(0))
        ));
        assert!(Collection::from_spec(&spec(MAX_DIM as u32 + 1, 1.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, 0.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, -1.0, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, f64::INFINITY, 1e-6)).is_err());
        // Noise below one grid unit: refused rather than handed to an integer sampler.
        assert!(Collection::from_spec(&spec(3, 1e12, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, 1e3, 1e-6)).is_err());
        assert!(Collection::from_spec(&spec(3, MAX_EPSILON, 1e-6)).is_ok());
        assert!(Collection::from_spec(&spec(3, 1.0, 0.0)).is_err());
        assert!(Collection::from_spec(&spec(3, 1.0, 1.0)).is_err());
        assert!(Collection::from_spec(&spec(3, 1.0, f64::NAN)).is_err());
        let mut s = spec(3, 1.0, 1e-6);
        s.clip_radius = 0.0;
        assert!(Collection::from_spec(&s).is_err());
        s.clip_radius = 1.0;
        s.min_reports = 0;
        assert!(Collection::from_spec(&s).is_err());
        s.min_reports = 1;
        s.encoding = 99;
        assert!(Collection::from_spec(&s).is_err());
        s.encoding = 4;
        assert!(Collection::from_spec(&s).is_err());
        s.encoding = 0;
        for bad in ["", "a b", "x/y", &"a".repeat(129)] {
            s.collection_id = bad.to_string();
            assert!(Collection::from_spec(&s).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn absurd_numbers_and_control_characters_are_refused_on_create_only() {
        let base = spec(3, 1.0, 1e-6);
        let refused = |f: &dyn Fn(&mut CollectionSpec)| {
            let mut s = base.clone();
            f(&mut s);
            // The stored path still reads it: no stored collection becomes unreadable.
            assert!(Collection::from_spec(&s).is_ok());
            Collection::create(&s).unwrap_err().to_string()
        };
        assert_eq!(
            refused(&|s| s.clip_radius = 1e308),
            "clip_radius = 1e308 is outside the allowed range [1e-100, 1e100]"
        );
        assert_eq!(
            refused(&|s| s.clip_radius = 5e-324),
            "clip_radius = 5e-324 is outside the allowed range [1e-100, 1e100]"
        );
        assert_eq!(
            refused(&|s| s.delta = 5e-324),
            "delta = 5e-324 is outside the allowed range [1e-100, 1)"
        );
        assert_eq!(
            refused(&|s| s.centre = vec![0.0, -1e300, 0.0]),
            "centre[1] = -1e300 is outside the allowed range [-1e100, 1e100]"
        );
        assert_eq!(
            refused(&|s| s.variable_names = vec!["a".into(), "b".into(), "c\0".into()]),
            "variable name 2 contains a control character (U+0000); names must be printable"
        );
        assert_eq!(
            refused(&|s| s.variable_names = vec!["a\tb".into(), "b".into(), "c".into()]),
            "variable name 0 contains a control character (U+0009); names must be printable"
        );
        // At the bounds: accepted.
        let mut s = base.clone();
        (s.clip_radius, s.delta) = (1e100, 1e-100);
        Collection::create(&s).unwrap();
        s.clip_radius = 1e-100;
        Collection::create(&s).unwrap();
    }

    #[test]
    fn numbers_in_messages_are_short() {
        let mut s = spec(3, 1.0, 1e-6);
        s.epsilon = 1e300;
        assert_eq!(
            Collection::create(&s).unwrap_err().to_string(),
            "epsilon 1e300 must be a positive number of at most 100"
        );
        assert_eq!(crate::limits::ShortNumber(-0.0).to_string(), "0");
        assert_eq!(crate::limits::ShortNumber(0.5).to_string(), "0.5");
        assert_eq!(crate::limits::ShortNumber(1e-5).to_string(), "1e-5");
    }
}
