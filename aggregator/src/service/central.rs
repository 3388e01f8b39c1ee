//! GetEstimate on a central collection: the release it post-processes.
//!
//! A central collection's sums are exact (the devices added no noise), so the
//! estimators never see them. Instead a request names a release — mechanism and ρ
//! (or ε) — and the service
//!
//! 1. looks it up in the store's ledger under a key made of the mechanism, its
//!    parameter and the report count (the same release asked again, with no new
//!    report, is answered from the ledger at no cost);
//! 2. otherwise draws it with `ldpcov_central::release_sums` (fresh noise from the
//!    exact samplers, seeded by the operating system) and records it with its ρ in
//!    one store transaction, refused with `RESOURCE_EXHAUSTED` beyond the budget;
//! 3. hands the noisy sums to the local estimators with an
//!    [`EstimationInput`] built from the release
//!    ([`EstimationInput::from_central_release`]: the release's entries and the
//!    per-report σ that gives its noise per averaged entry,
//!    `σ_eq = sd_grid/(2^30·√n)`, on the diagonal and, `σ_eq/√2` in a collection of
//!    the `svec` weighting, off it): everything after the release is post-processing.
//!    A release recorded before the ledger kept the off-diagonal sd (field 0) has the
//!    diagonal's, which is what the triangle it was drawn in has.
//!
//! Rules that need more than the release — cross-validation (fold sums), the adaptive
//! threshold (sums of squares), a cross-validated precision λ — are refused: a free
//! look at the exact per-fold statistics would not be private. The default rule is
//! SURE bulk shrinkage, whose risk estimate uses only the release and its known noise.

use std::sync::Arc;

use ldpcov_central::{Mechanism, ReleaseBudget, gauss_cov_folds, release_sums};
use ldpcov_estimate::{
    Accumulator, BulkShrinkage, EstimateOptions, EstimationInput, RegularisationRule,
};
use ldpcov_noise::DiscreteGaussianSampler;
use ldpcov_privacy::Collection;
use ldpcov_proto::v1::{
    CentralMechanism, CentralRelease, GetEstimateRequest, StoredCentralRelease,
    get_estimate_request::Threshold,
};
use prost::Message;
use tonic::Status;

use super::convert::ReleaseInfo;
use super::{AggregatorService, Target, estimate_status, invalid, store_status};
use crate::store::Snapshot;

/// What a central estimate works on, and what its release spent.
pub(super) struct CentralInput {
    /// What the estimators know about the release: its entries and its noise.
    pub(super) input: EstimationInput,
    /// The noisy release as sums.
    pub(super) acc: Accumulator,
    /// For the response.
    pub(super) info: ReleaseInfo,
}

/// The mechanism and budget a request's `release` names (INVALID_ARGUMENT otherwise).
pub(super) fn parse_release(
    release: &CentralRelease,
) -> Result<(Mechanism, ReleaseBudget), Status> {
    let positive = |name: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(invalid(format!(
                "release {name} = {v} must be a finite number > 0"
            )))
        }
    };
    match CentralMechanism::try_from(release.mechanism) {
        Ok(
            m @ (CentralMechanism::GaussCov
            | CentralMechanism::SeparateCov
            | CentralMechanism::AdaptiveCov
            | CentralMechanism::GaussCovFolds),
        ) => {
            if release.epsilon != 0.0 {
                return Err(invalid(
                    "gauss_cov, gauss_cov_folds, separate_cov and adaptive_cov spend a rho: leave release.epsilon unset",
                ));
            }
            let mechanism = match m {
                CentralMechanism::GaussCov => Mechanism::GaussCov,
                CentralMechanism::SeparateCov => Mechanism::SeparateCov,
                CentralMechanism::GaussCovFolds => Mechanism::GaussCovFolds,
                _ => Mechanism::AdaptiveCov,
            };
            Ok((mechanism, ReleaseBudget::Rho(positive("rho", release.rho)?)))
        }
        Ok(
            m @ (CentralMechanism::LaplaceCov
            | CentralMechanism::SeparateCovLaplace
            | CentralMechanism::AdaptiveCovLaplace),
        ) => {
            if release.rho != 0.0 {
                return Err(invalid(
                    "the pure-DP mechanisms spend an epsilon: leave release.rho unset",
                ));
            }
            let mechanism = match m {
                CentralMechanism::LaplaceCov => Mechanism::LaplaceCov,
                CentralMechanism::SeparateCovLaplace => Mechanism::SeparateCovLaplace,
                _ => Mechanism::AdaptiveCovLaplace,
            };
            Ok((
                mechanism,
                ReleaseBudget::Epsilon(positive("epsilon", release.epsilon)?),
            ))
        }
        Ok(CentralMechanism::CompressedNotDp) => {
            if release.rho != 0.0 || release.epsilon != 0.0 {
                return Err(invalid(
                    "compressed_not_dp spends no rho or epsilon (it is not differentially private): set release.compressed_rows only",
                ));
            }
            if !(1..=ldpcov_central::MAX_COMPRESSED_ROWS).contains(&release.compressed_rows) {
                return Err(invalid(format!(
                    "release.compressed_rows = {} must be between 1 and {}",
                    release.compressed_rows,
                    ldpcov_central::MAX_COMPRESSED_ROWS
                )));
            }
            Ok((
                Mechanism::CompressedNotDp,
                ReleaseBudget::CompressedRows(release.compressed_rows),
            ))
        }
        Ok(CentralMechanism::Unspecified) => Err(invalid(
            "release.mechanism is unset: name gauss_cov, separate_cov, laplace_cov, adaptive_cov or compressed_not_dp",
        )),
        Err(_) => Err(invalid(format!(
            "unknown release mechanism {}",
            release.mechanism
        ))),
    }
}

/// The ledger key of a release: mechanism, its parameter's exact bits, report count.
pub(super) fn ledger_key(mechanism: Mechanism, budget: ReleaseBudget, reports: u64) -> Vec<u8> {
    let (kind, value) = match budget {
        ReleaseBudget::Rho(r) => ("rho", r),
        ReleaseBudget::Epsilon(e) => ("epsilon", e),
        ReleaseBudget::CompressedRows(m) => ("rows", f64::from(m)),
    };
    format!(
        "central-release/v1/{}/{kind}={:016x}/n={reports}",
        mechanism.name(),
        value.to_bits()
    )
    .into_bytes()
}

/// Checks the estimate options against what a release supports, filling in the
/// central default (SURE bulk shrinkage; none after SeparateCov).
fn central_options(
    req: &GetEstimateRequest,
    mechanism: Mechanism,
    options: &mut EstimateOptions,
    target: &Target,
) -> Result<(), Status> {
    // Cross-validation on the released fold sums is post-processing of a private
    // release: the default rule there, as for a local collection.
    if mechanism == Mechanism::GaussCovFolds {
        if let Some(Threshold::Adaptive(_)) = &req.threshold {
            return Err(invalid(
                "the adaptive threshold needs per-report sums of squares that a central release does not have",
            ));
        }
        return Ok(());
    }
    match &req.threshold {
        None if matches!(
            mechanism,
            Mechanism::SeparateCov | Mechanism::SeparateCovLaplace | Mechanism::CompressedNotDp
        ) =>
        {
            options.rule = RegularisationRule::None
        }
        None => options.rule = RegularisationRule::BulkShrink(BulkShrinkage::default()),
        Some(Threshold::CrossValidated(_) | Threshold::Adaptive(_)) => {
            return Err(invalid(
                "cross-validation and the adaptive threshold need per-report statistics (fold sums, sums of squares) that a central release does not have: use none, universal, ldp_noise, spectral, factor or bulk_shrink",
            ));
        }
        Some(Threshold::None(_)) => {}
        Some(_)
            if matches!(
                mechanism,
                Mechanism::SeparateCov | Mechanism::SeparateCovLaplace
            ) =>
        {
            return Err(invalid(
                "separate_cov's noise is on the eigenvalues, not on each entry: only the `none` rule applies to it",
            ));
        }
        Some(_) if mechanism == Mechanism::CompressedNotDp => {
            return Err(invalid(
                "the compressed release's error is data-dependent (Wishart), not a known noise: only the `none` rule applies to it",
            ));
        }
        Some(_) => {}
    }
    if let Target::Precision(_, None) = target {
        return Err(invalid(
            "a cross-validated precision lambda needs fold sums that a central release does not have: give precision.lambda",
        ));
    }
    Ok(())
}

impl AggregatorService {
    /// Refuses a release of `rho` that the collection's ledger has no room for, before
    /// anything is drawn (`RESOURCE_EXHAUSTED`): an early answer, the ledger's
    /// transaction that records the release stays the authority.
    pub(super) async fn ensure_budget_left(&self, c: &Collection, rho: f64) -> Result<(), Status> {
        let spent = self
            .store
            .budget_spent(c.id())
            .await
            .map_err(store_status)?;
        if spent + rho > c.rho() {
            return Err(store_status(crate::store::StoreError::BudgetExhausted {
                id: c.id().to_string(),
                requested: rho,
                spent,
                budget: c.rho(),
            }));
        }
        Ok(())
    }

    /// The input of a central collection's estimate: the recorded release the request
    /// names, drawn and recorded first if it is new (module docs).
    pub(super) async fn central_input(
        &self,
        c: &Arc<Collection>,
        req: &GetEstimateRequest,
        options: &mut EstimateOptions,
        target: &Target,
        snapshot: Snapshot,
    ) -> Result<CentralInput, Status> {
        let release = req.release.ok_or_else(|| {
            invalid(
                "a central collection's estimate post-processes a release that spends its budget: set release {mechanism, rho} (or epsilon for laplace_cov)",
            )
        })?;
        let (mechanism, budget) = parse_release(&release)?;
        central_options(req, mechanism, options, target)?;
        let n = snapshot.acc.count;
        if n < c.min_reports() {
            return Err(estimate_status(
                ldpcov_estimate::EstimateError::BelowMinimum {
                    have: n,
                    need: c.min_reports(),
                },
            ));
        }
        let key = ledger_key(mechanism, budget, n);
        let recorded = match self
            .store
            .recorded_release(c.id(), &key)
            .await
            .map_err(store_status)?
        {
            Some(r) => r,
            None => {
                let rho = match budget {
                    ReleaseBudget::Rho(r) => r,
                    ReleaseBudget::Epsilon(e) => ldpcov_accounting::calibration::pure_dp_rho(e),
                    ReleaseBudget::CompressedRows(_) => {
                        tracing::warn!(
                            collection = %c.id(),
                            "compressed release: NOT differentially private; the collection allows it"
                        );
                        0.0
                    }
                };
                self.ensure_budget_left(c, rho).await?;
                let stored = if c.is_two_aggregator() {
                    // Each aggregator's noisy share, added: the helper's first.
                    self.draw_two_aggregator_release(c, snapshot.acc.clone(), &release)
                        .await?
                } else {
                    let collection = Arc::clone(c);
                    let acc = snapshot.acc.clone();
                    tokio::task::spawn_blocking(move || {
                        let mut sampler = DiscreteGaussianSampler::from_os_rng().map_err(|e| {
                            Status::internal(format!(
                                "no randomness from the operating system: {e}"
                            ))
                        })?;
                        draw_release(&collection, &acc, mechanism, budget, &mut sampler)
                            .map_err(|e| invalid(e.to_string()))
                    })
                    .await
                    .map_err(|e| Status::internal(format!("release task failed: {e}")))??
                };
                let stored = StoredCentralRelease {
                    mechanism: release.mechanism,
                    epsilon: release.epsilon,
                    ..stored
                };
                let r = self
                    .store
                    .record_release(c.id(), &key, stored.rho, c.rho(), stored.encode_to_vec())
                    .await
                    .map_err(store_status)?;
                tracing::info!(
                    collection = %c.id(), mechanism = mechanism.name(), rho = stored.rho,
                    reports = n, spent = r.spent, budget = c.rho(), fresh = r.fresh,
                    "central release recorded"
                );
                r
            }
        };
        let stored = StoredCentralRelease::decode(recorded.body.as_slice()).map_err(|e| {
            Status::internal(format!("the ledger holds an unreadable release: {e}"))
        })?;
        let radius = stored.radius;
        let trace = stored.trace;
        let (input, acc) = release_input(c, stored, n)?;
        Ok(CentralInput {
            input,
            acc,
            info: ReleaseInfo {
                release,
                radius: c.clip_radius() * radius,
                trace: c.clip_radius() * c.clip_radius() * trace / (c.grid_scale() * n as f64),
                rho_spent_now: if recorded.fresh { recorded.rho } else { 0.0 },
                rho_spent_total: recorded.spent,
            },
        })
    }
}

/// The accumulators and estimation input of a recorded release over `n` reports: its
/// sums (or fold sums) and the noise it was drawn with. A record without
/// `off_diagonal_noise_sd_grid` (0: written before the field, or a release of the
/// triangle) has the diagonal's sd off the diagonal too, so it answers exactly as it
/// did when it was recorded.
fn release_input(
    c: &Collection,
    stored: StoredCentralRelease,
    n: u64,
) -> Result<(EstimationInput, Accumulator), Status> {
    if stored.sums.len() != c.release_entries() || stored.reports != n {
        return Err(Status::internal(
            "the ledger's release does not match its key (entries or reports)",
        ));
    }
    let entries = c.release_entries();
    let folds = stored.fold_counts.len();
    let off_diagonal_sd_grid = if stored.off_diagonal_noise_sd_grid == 0.0 {
        stored.noise_sd_grid
    } else {
        stored.off_diagonal_noise_sd_grid
    };
    let (acc, total_sd_grid, total_off_sd_grid) = if folds == 0 {
        let mut acc = Accumulator::new(entries, 1);
        acc.count = n;
        acc.fold_counts[0] = n;
        acc.fold_sums[0] = stored.sums;
        (acc, stored.noise_sd_grid, off_diagonal_sd_grid)
    } else {
        if stored.fold_sums.len() != folds * entries {
            return Err(Status::internal(
                "the ledger's fold release does not match its collection",
            ));
        }
        let mut acc = Accumulator::new(entries, folds);
        acc.count = n;
        acc.fold_counts = stored.fold_counts;
        acc.fold_sums = stored
            .fold_sums
            .chunks(entries)
            .map(<[i64]>::to_vec)
            .collect();
        // The total of K fold sums carries √K times one fold's noise sd.
        let k = (folds as f64).sqrt();
        (acc, stored.noise_sd_grid * k, off_diagonal_sd_grid * k)
    };
    // The estimators see the released moments only, never the norm bins, with the
    // per-report σ whose average has the release's noise.
    let input =
        EstimationInput::from_central_release(c, entries, total_sd_grid, total_off_sd_grid, n);
    Ok((input, acc))
}

/// Draws the release a request names from the collection's exact accumulators: the
/// ledger record, without the request's own fields (mechanism, ε).
fn draw_release(
    collection: &Collection,
    acc: &Accumulator,
    mechanism: Mechanism,
    budget: ReleaseBudget,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<StoredCentralRelease, ldpcov_central::CentralError> {
    if mechanism == Mechanism::GaussCovFolds {
        let ReleaseBudget::Rho(rho) = budget else {
            return Err(ldpcov_central::CentralError::Parameter(
                "gauss_cov_folds spends a rho".into(),
            ));
        };
        let folds = gauss_cov_folds(collection, &acc.fold_counts, &acc.fold_sums, rho, sampler)?;
        let entries = collection.release_entries();
        let mut total = vec![0i64; entries];
        for fold in &folds.fold_sums {
            for (t, v) in total.iter_mut().zip(fold) {
                *t += v;
            }
        }
        return Ok(StoredCentralRelease {
            rho,
            reports: acc.count,
            noise_sd_grid: folds.noise_sd_grid,
            off_diagonal_noise_sd_grid: recorded_off_diagonal(
                folds.noise_sd_grid,
                folds.off_diagonal_noise_sd_grid,
            ),
            sums: total,
            radius: 1.0,
            fold_sums: folds.fold_sums.concat(),
            fold_counts: folds.fold_counts,
            ..Default::default()
        });
    }
    let noisy = release_sums(
        collection,
        acc.count,
        &acc.sums(),
        mechanism,
        budget,
        sampler,
    )?;
    Ok(StoredCentralRelease {
        rho: noisy.rho,
        reports: noisy.count,
        noise_sd_grid: noisy.noise_sd_grid,
        off_diagonal_noise_sd_grid: recorded_off_diagonal(
            noisy.noise_sd_grid,
            noisy.off_diagonal_noise_sd_grid,
        ),
        sums: noisy.sums,
        radius: noisy.radius,
        trace: noisy.trace,
        ..Default::default()
    })
}

/// The ledger's `off_diagonal_noise_sd_grid`: 0 when it equals the diagonal's (every
/// release of the triangle, recorded exactly as before the field existed), else the sd.
fn recorded_off_diagonal(diagonal: f64, off_diagonal: f64) -> f64 {
    if off_diagonal == diagonal {
        0.0
    } else {
        off_diagonal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_estimate::NoiseModel;
    use ldpcov_proto::v1::{CentralWeighting, CollectionSpec, Moments, PrivacyModel};

    fn central(weighting: CentralWeighting) -> Collection {
        Collection::from_spec(&CollectionSpec {
            central_weighting: weighting as i32,
            ..ldpcov_fixtures::spec("c", 3)
                .moments(Moments::SecondMoment)
                .privacy_model(PrivacyModel::Central)
                .build()
        })
        .unwrap()
    }

    /// A release recorded before the ledger kept the off-diagonal sd (no field 11, as
    /// an older version wrote it) answers with the noise it answered with then: the
    /// per-report σ `sd/(2^30·√n)` on every entry. An svec collection's release is
    /// recorded with σ/√2 off the diagonal and read back as such; a triangle's is
    /// recorded exactly as before (field 11 left at 0).
    #[test]
    fn recorded_releases_answer_with_the_noise_they_were_drawn_with() {
        let old = central(CentralWeighting::Unspecified);
        let n = 40u64;
        let record = StoredCentralRelease {
            mechanism: CentralMechanism::GaussCov as i32,
            rho: 0.01,
            reports: n,
            noise_sd_grid: 1.5e10,
            sums: vec![7; 6],
            radius: 1.0,
            ..Default::default()
        };
        let bytes = record.encode_to_vec();
        let (input, acc) = release_input(
            &old,
            StoredCentralRelease::decode(bytes.as_slice()).unwrap(),
            n,
        )
        .unwrap();
        let sigma = 1.5e10 / (old.grid_scale() * (n as f64).sqrt());
        assert_eq!(input.noise(), NoiseModel::IidGaussian { sigma });
        assert_eq!(acc.sums(), vec![7; 6]);

        let mut acc = Accumulator::new(6, 1);
        acc.count = n;
        acc.fold_counts[0] = n;
        let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(3);
        let gauss = ReleaseBudget::Rho(0.01);
        for (c, svec) in [(&old, false), (&central(CentralWeighting::Svec), true)] {
            for mechanism in [Mechanism::GaussCov, Mechanism::GaussCovFolds] {
                let stored = draw_release(c, &acc, mechanism, gauss, &mut sampler).unwrap();
                let sd = stored.noise_sd_grid;
                let want = if svec {
                    sd * std::f64::consts::FRAC_1_SQRT_2
                } else {
                    0.0
                };
                assert_eq!(stored.off_diagonal_noise_sd_grid, want, "{mechanism:?}");
                let bytes = stored.encode_to_vec();
                let (input, _) = release_input(
                    c,
                    StoredCentralRelease::decode(bytes.as_slice()).unwrap(),
                    n,
                )
                .unwrap();
                let noise = input.noise();
                let ratio = noise.off_diagonal_sd() / noise.diagonal_sd();
                let expected = if svec {
                    std::f64::consts::FRAC_1_SQRT_2
                } else {
                    1.0
                };
                assert!((ratio - expected).abs() < 1e-15, "{mechanism:?}: {ratio}");
                assert_eq!(matches!(noise, NoiseModel::SplitGaussian { .. }), svec);
            }
        }
    }
}
