//! A collection's radius phase as its spec sets it: the defaults, the checks, the
//! split of a device's budget between the two reports, and the phase's own
//! collection. Device and aggregator derive all of it from the spec with this code,
//! like every other parameter.
//!
//! The phase's collection is an ordinary collection in the main collection's trust
//! model: the second moment of the one-hot vector of the device's norm interval, whose
//! diagonal is the intervals' frequencies (`e_k e_kᵀ` has a single 1, on the diagonal)
//! — with Gaussian noise on each report (local), or the exact vectors summed by a
//! curator who releases them once with Gaussian noise (central). The one-hot vector is
//! in the unit ball, so the L2 sensitivity is √2 — that of [`super::RadiusPhase`]'s
//! one-hot report — and the calibration, grid and validation are those of every
//! collection of the model.

use ldpcov_proto::v1::{
    CentralWeighting, CollectionSpec, Encoding, LocalMechanism, Moments, PrivacyModel,
    RadiusPhaseParams, RadiusPhaseSpec,
};

use super::bins::NormBins;
use crate::SpecError;

/// The phase's share of a device's ρ when the spec leaves it 0.
pub const DEFAULT_SHARE: f64 = 0.1;
/// Candidate radii when the spec leaves their number 0: ratio `√2` between `√p/4` and
/// `16·√p`.
pub const DEFAULT_RADII: u32 = 13;
/// The phase's collection id is the main collection's followed by this.
pub const PHASE_COLLECTION_SUFFIX: &str = ".radius";

/// Relative tolerance of the bisections on ε (and of a chosen radius against the
/// candidate it must be).
const RELATIVE_TOLERANCE: f64 = 1e-12;

/// A collection's radius phase, derived from its spec: the candidate radii, the
/// phase's collection and the ε of both reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RadiusPhaseSettings {
    spec: RadiusPhaseSpec,
    bins: NormBins,
    phase: CollectionSpec,
    phase_rho: f64,
    main_epsilon: f64,
}

impl RadiusPhaseSettings {
    /// The CreateCollection defaults for a collection of dimension `dim`: every 0 field
    /// takes the default written in the .proto.
    pub fn resolve(spec: &RadiusPhaseSpec, dim: usize) -> RadiusPhaseSpec {
        let root_p = (dim as f64).sqrt();
        let or = |value: f64, default: f64| if value == 0.0 { default } else { value };
        RadiusPhaseSpec {
            share: or(spec.share, DEFAULT_SHARE),
            smallest_radius: or(spec.smallest_radius, root_p / 4.0),
            largest_radius: or(spec.largest_radius, 16.0 * root_p),
            radii: if spec.radii == 0 {
                DEFAULT_RADII
            } else {
                spec.radii
            },
        }
    }

    /// Derives the phase of `main`, whose `radius_phase` is `phase`; `rho_of` is the
    /// ρ of one report of a collection without a phase (the collection's own
    /// derivation). Refused unless `main` is a local Gaussian collection, the share is
    /// in (0, 1), the radii are a valid geometric sequence and `main.clip_radius` is
    /// 0 (not chosen yet) or one of them.
    pub(crate) fn derive(
        main: &CollectionSpec,
        phase: &RadiusPhaseSpec,
        rho_of: &dyn Fn(&CollectionSpec) -> Result<f64, SpecError>,
    ) -> Result<Self, SpecError> {
        let refuse = |why: String| SpecError::RadiusPhase(why);
        let model = PrivacyModel::try_from(main.privacy_model);
        let central = model == Ok(PrivacyModel::Central);
        let local = matches!(model, Ok(PrivacyModel::Unspecified | PrivacyModel::Local));
        let gaussian = matches!(
            LocalMechanism::try_from(main.local_mechanism),
            Ok(LocalMechanism::Unspecified
                | LocalMechanism::Gaussian
                | LocalMechanism::GaussianTriu)
        );
        if !(central || local && gaussian) || main.shuffle.is_some() {
            return Err(refuse(
                "only local collections with the Gaussian mechanism and central collections have one (not shuffled, rank-one or two-aggregator collections, yet)"
                    .into(),
            ));
        }
        if !(phase.share > 0.0 && phase.share < 1.0) {
            return Err(refuse(format!(
                "its share of the budget must be in (0, 1), got {}",
                phase.share
            )));
        }
        let bins = NormBins::geometric(
            phase.smallest_radius,
            phase.largest_radius,
            phase.radii as usize,
        )
        .map_err(|e| refuse(e.to_string()))?;
        let r = main.clip_radius;
        let is_candidate = bins
            .edges()
            .iter()
            .any(|&e| (e - r).abs() <= RELATIVE_TOLERANCE * e);
        if r != 0.0 && !is_candidate {
            return Err(refuse(format!(
                "clip_radius {r} is neither 0 (not chosen yet) nor one of the candidate radii"
            )));
        }
        let phase_id = format!("{}{PHASE_COLLECTION_SUFFIX}", main.collection_id);
        crate::collection::validate::validate_collection_id(&phase_id)
            .map_err(|e| refuse(format!("its collection id {phase_id:?}: {e}")))?;
        // The main report alone at the spec's (ε, δ): the budget both reports share.
        let alone = CollectionSpec {
            radius_phase: None,
            clip_radius: 1.0,
            ..main.clone()
        };
        let total = rho_of(&alone)?;
        let main_epsilon = largest_epsilon(&alone, (1.0 - phase.share) * total, rho_of)?;
        // In the main collection's trust model: a device's noisy one-hot report, or
        // its exact one-hot vector to a curator who adds the noise once.
        let phase_alone = CollectionSpec {
            collection_id: phase_id,
            dim: bins.len() as u32,
            epsilon: main.epsilon,
            delta: main.delta,
            clip_radius: 1.0,
            min_reports: main.min_reports,
            moments: Moments::SecondMoment as i32,
            ..if central {
                CollectionSpec {
                    encoding: Encoding::RawI32Le as i32,
                    privacy_model: PrivacyModel::Central as i32,
                    central_weighting: CentralWeighting::Svec as i32,
                    ..Default::default()
                }
            } else {
                CollectionSpec {
                    encoding: Encoding::I32Le as i32,
                    privacy_model: PrivacyModel::Local as i32,
                    local_mechanism: LocalMechanism::Gaussian as i32,
                    ..Default::default()
                }
            }
        };
        let phase_epsilon = largest_epsilon(&phase_alone, phase.share * total, rho_of)?;
        let phase_spec = CollectionSpec {
            epsilon: phase_epsilon,
            ..phase_alone
        };
        let phase_rho = rho_of(&phase_spec)?;
        Ok(RadiusPhaseSettings {
            spec: *phase,
            bins,
            phase: phase_spec,
            phase_rho,
            main_epsilon,
        })
    }

    /// The settings as the spec writes them (defaults resolved).
    pub fn spec(&self) -> RadiusPhaseSpec {
        self.spec
    }

    /// The phase's share of the device's ρ.
    pub fn share(&self) -> f64 {
        self.spec.share
    }

    /// The norm bins, whose edges are the candidate radii.
    pub fn bins(&self) -> &NormBins {
        &self.bins
    }

    /// The spec of the phase's own collection (`<id>.radius`), built by
    /// [`Collection::from_spec`](crate::Collection::from_spec).
    pub fn phase_spec(&self) -> &CollectionSpec {
        &self.phase
    }

    /// The phase's collection id.
    pub fn phase_collection_id(&self) -> &str {
        &self.phase.collection_id
    }

    /// ε of the phase's report (at the main collection's δ).
    pub fn phase_epsilon(&self) -> f64 {
        self.phase.epsilon
    }

    /// zCDP ρ of the phase's report.
    pub fn phase_rho(&self) -> f64 {
        self.phase_rho
    }

    /// ε of the main report (at the collection's δ), below the spec's.
    pub fn main_epsilon(&self) -> f64 {
        self.main_epsilon
    }

    /// The phase report's vector for a device whose `‖x − c‖` is `norm`: 1 at its
    /// interval, 0 elsewhere (the phase's collection then clips nothing: its norm is 1).
    pub fn one_hot(&self, norm: f64) -> Vec<f64> {
        self.bins.one_hot(norm)
    }

    /// The parameters a device reads, `radius_chosen` as given.
    pub fn params(&self, radius_chosen: bool) -> RadiusPhaseParams {
        RadiusPhaseParams {
            phase_collection_id: self.phase.collection_id.clone(),
            radii: self.bins.edges().to_vec(),
            phase_epsilon: self.phase.epsilon,
            phase_rho: self.phase_rho,
            main_epsilon: self.main_epsilon,
            radius_chosen,
        }
    }
}

/// Whether a server's radius-phase parameters `served` are the local ones, `derived`: the
/// same phase collection and state, and every number within a relative 10⁻⁹ (the
/// radii are powers, and the ε's bisections over the calibration, whose last digits may
/// differ between platforms' maths libraries).
pub(crate) fn phase_params_agree(
    served: Option<&RadiusPhaseParams>,
    derived: Option<&RadiusPhaseParams>,
) -> bool {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    match (served, derived) {
        (None, None) => true,
        (Some(s), Some(d)) => {
            s.phase_collection_id == d.phase_collection_id
                && s.radius_chosen == d.radius_chosen
                && s.radii.len() == d.radii.len()
                && s.radii.iter().zip(&d.radii).all(|(a, b)| close(*a, *b))
                && close(s.phase_epsilon, d.phase_epsilon)
                && close(s.phase_rho, d.phase_rho)
                && close(s.main_epsilon, d.main_epsilon)
        }
        _ => false,
    }
}

/// The largest ε in (0, `spec.epsilon`] whose ρ (`rho_of` at that ε) is at most
/// `rho`, by bisection to a relative 10⁻¹². An ε whose derivation fails (a σ too large
/// for any grid) counts as too small.
fn largest_epsilon(
    spec: &CollectionSpec,
    rho: f64,
    rho_of: &dyn Fn(&CollectionSpec) -> Result<f64, SpecError>,
) -> Result<f64, SpecError> {
    let at = |epsilon: f64| {
        rho_of(&CollectionSpec {
            epsilon,
            ..spec.clone()
        })
    };
    let (mut low, mut high) = (0.0, spec.epsilon);
    while high - low > RELATIVE_TOLERANCE * spec.epsilon {
        let mid = 0.5 * (low + high);
        match at(mid) {
            Ok(r) if r > rho => high = mid,
            _ => low = mid,
        }
    }
    if low == 0.0 {
        return Err(SpecError::RadiusPhase(format!(
            "no ε spends at most ρ {rho} in collection {}",
            spec.collection_id
        )));
    }
    // The lower end must derive (and spend at most ρ): the last failure otherwise.
    match at(low)? {
        spent if spent <= rho => Ok(low),
        spent => Err(SpecError::RadiusPhase(format!(
            "collection {}: ρ {spent} at ε {low} exceeds its share {rho}",
            spec.collection_id
        ))),
    }
}
