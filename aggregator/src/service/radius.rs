//! Collections with a radius phase (`ldpcov_privacy::radius`). The phase's own
//! collection, `<id>.radius`, is created before the main one and is an ordinary
//! collection of the main one's trust model: devices report their one-hot norm
//! interval to it (noisy, or to a curator who adds the noise once). Once an
//! operator closes it, the main collection is served with the radius chosen from the
//! phase's noisy sums (a local phase's, or a central phase's one release) — never of a
//! raw norm.
//! The radius is not stored: a closed collection's sums never change, so every call
//! and every replica of the store derives the same one (kept in memory once derived).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ldpcov_estimate::{EstimateOptions, EstimationInput};
use ldpcov_privacy::Collection;
use ldpcov_privacy::radius::{PHASE_COLLECTION_SUFFIX, RadiusPhase};
use ldpcov_proto::v1::get_estimate_request::Threshold;
use ldpcov_proto::v1::{CentralMechanism, CentralRelease, GetEstimateRequest, NoThreshold};
use tonic::Status;

use super::status::{estimate_status, store_status};
use super::{AggregatorService, Target};
use crate::store::{Snapshot, StoreError};

/// Main collections already served with their chosen radius: the pending collection
/// as stored, and the one with the radius.
pub(super) type ChosenRadii = Arc<Mutex<RadiusMap>>;

/// Main collection id → (the collection as stored, the collection with its radius).
pub(super) type RadiusMap = HashMap<String, (Arc<Collection>, Arc<Collection>)>;

impl AggregatorService {
    /// Creates `main`'s phase collection, if it has a radius phase (before `main`, so
    /// that no main collection exists without its phase). A different collection under
    /// the phase's id is refused `ALREADY_EXISTS`.
    pub(super) async fn create_radius_phase(&self, main: &Collection) -> Result<(), Status> {
        let Some(settings) = main.radius_phase() else {
            return Ok(());
        };
        let phase = Collection::from_spec(settings.phase_spec())
            .map_err(|e| Status::invalid_argument(format!("radius phase: {e}")))?;
        match self.store.create_collection(phase).await {
            Ok(_) => Ok(()),
            Err(StoreError::AlreadyExists(id)) => Err(Status::already_exists(format!(
                "collection {id} exists with other parameters: its id is the radius phase's of {}",
                main.id()
            ))),
            Err(e) => Err(store_status(e)),
        }
    }

    /// `c` as devices and estimators see it: with a radius phase whose collection is
    /// closed, the radius that phase chose; otherwise `c` itself.
    pub(super) async fn with_chosen_radius(
        &self,
        c: Arc<Collection>,
    ) -> Result<Arc<Collection>, Status> {
        let Some(settings) = c.radius_phase().filter(|_| c.radius_pending()) else {
            return Ok(c);
        };
        let phase_id = settings.phase_collection_id().to_string();
        let cached = self.lock_radii()?.get(c.id()).cloned();
        if let Some((_, chosen)) =
            cached.filter(|(pending, _)| Arc::ptr_eq(pending, &c) || **pending == *c)
        {
            return Ok(chosen);
        }
        match self.store.is_closed(&phase_id).await {
            Ok(true) => {}
            Ok(false) | Err(StoreError::NotFound(_)) => return Ok(c),
            Err(e) => return Err(store_status(e)),
        }
        let snapshot = self.store.snapshot(&phase_id).await.map_err(store_status)?;
        let reports = snapshot.acc.count;
        let radius = self.chosen_radius(&c, snapshot).await?;
        let chosen = Arc::new(
            c.with_chosen_radius(radius)
                .map_err(|e| Status::internal(format!("radius phase of {}: {e}", c.id())))?,
        );
        tracing::info!(
            collection = %c.id(), radius, phase_reports = reports,
            "clip radius chosen by the radius phase"
        );
        self.lock_radii()?
            .insert(c.id().to_string(), (c, Arc::clone(&chosen)));
        Ok(chosen)
    }

    /// The main collection whose radius phase has the id `id`, if there is one.
    pub(super) async fn main_of_phase(&self, id: &str) -> Result<Option<Arc<Collection>>, Status> {
        let Some(main_id) = id.strip_suffix(PHASE_COLLECTION_SUFFIX) else {
            return Ok(None);
        };
        match self.store.collection(main_id).await {
            Ok(main) => Ok(main
                .radius_phase()
                .is_some_and(|s| s.phase_collection_id() == id)
                .then_some(main)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(store_status(e)),
        }
    }

    /// The main collection of `phase` if it is a radius phase's collection, refusing to
    /// close it before it holds `min_reports` reports: no radius could be chosen from
    /// it, and a closed phase cannot reopen.
    pub(super) async fn check_phase_closable(
        &self,
        phase: &Collection,
    ) -> Result<Option<Arc<Collection>>, Status> {
        let Some(main) = self.main_of_phase(phase.id()).await? else {
            return Ok(None);
        };
        let reports = self.store.count(phase.id()).await.map_err(store_status)?;
        if reports < phase.min_reports() {
            return Err(Status::failed_precondition(format!(
                "collection {} is the radius phase of {}: it holds {reports} reports, fewer than its min_reports {}, too few to choose the radius from; close it later",
                phase.id(),
                main.id(),
                phase.min_reports()
            )));
        }
        Ok(Some(main))
    }

    /// Forgets the radius chosen for `main_id` (the collection was deleted).
    pub(super) fn forget_radius(&self, main_id: &str) -> Result<(), Status> {
        self.lock_radii()?.remove(main_id);
        Ok(())
    }

    fn lock_radii(&self) -> Result<std::sync::MutexGuard<'_, RadiusMap>, Status> {
        self.chosen_radii
            .lock()
            .map_err(|_| Status::internal("the chosen radii's lock is poisoned"))
    }

    /// The radius `main`'s phase chooses from its closed collection's snapshot: the
    /// unbiased average's diagonal (the norm intervals' noisy frequencies), then the
    /// planner's rule ([`RadiusPhase::choose_collection_radius`]). A local phase's sums
    /// carry the devices' noise; a central phase's are first released, once, with
    /// GaussCov noise at its whole budget — recorded like any release, so every call
    /// (and a GetEstimate naming that release) reads the same noise.
    async fn chosen_radius(&self, main: &Collection, phase: Snapshot) -> Result<f64, Status> {
        let n = phase.acc.count;
        if n == 0 {
            return Err(Status::failed_precondition(format!(
                "the radius phase of {} closed with no report: no radius can be chosen",
                main.id()
            )));
        }
        let (input, sums) = if phase.collection.is_central() {
            let c = Arc::clone(&phase.collection);
            let request = GetEstimateRequest {
                collection_id: c.id().to_string(),
                threshold: Some(Threshold::None(NoThreshold {})),
                release: Some(CentralRelease {
                    mechanism: CentralMechanism::GaussCov as i32,
                    rho: c.rho(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let mut options = EstimateOptions::default();
            let released = self
                .central_input(&c, &request, &mut options, &Target::Covariance, phase)
                .await?;
            (released.input, released.acc.sums())
        } else {
            (
                EstimationInput::from_collection(&phase.collection),
                phase.acc.sums(),
            )
        };
        let average = ldpcov_estimate::average(&input, &sums, n).map_err(estimate_status)?;
        let frequencies: Vec<f64> = (0..average.nrows()).map(|i| average[(i, i)]).collect();
        RadiusPhase::choose_collection_radius(main, &frequencies, n)
            .map(|chosen| chosen.radius)
            .map_err(|e| Status::internal(format!("radius phase of {}: {e}", main.id())))
    }
}
