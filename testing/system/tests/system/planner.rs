//! The planner (`ldpcov_privacy::plan`, `ldpcov-aggregator plan`) against simulation:
//! for each local mechanism at three (p, ε, n) points, the root mean square Frobenius
//! error of the raw average over repeated simulated collections is within 10 % of the
//! prediction.
//!
//! Each repetition draws n users from the canonical Model 1 (R = √(2p), so ‖u‖² varies
//! between users), perturbs them with the real `Perturber` (exact samplers, fixed
//! seeds), averages and unbiases the sums with the estimator's own `average`, and
//! subtracts the users' exact second moment `M_n` (clipped data): what remains is the
//! mechanism's noise. `E‖M̂ − M_n‖²_F = R⁴·v̄/n` with `v̄` the users' average per-report
//! variance; the planner evaluates `v` at the users' mean squared norm (for the rank-one
//! report `v` is quadratic in `s` with a small `s²` coefficient, so the Jensen gap is
//! far below the tolerance; the Gaussian report's `v` is constant).
//!
//! Tolerance: over `K` repetitions the mean of `‖E‖²` has relative sd at most
//! `√(κ₄/(K·m))`, `m ≈ p²/2` independent entries and `κ₄ ≤ 8` the excess kurtosis bound
//! of a product of two Gaussians (2 for a Gaussian entry): ≤ 0.035 at p = 20, K = 32,
//! so its square root has relative sd ≤ 0.018 and 10 % is more than 5 sd.

use ldpcov_client::{DiscreteGaussianSampler, Perturber};
use ldpcov_estimate::{Accumulator, EstimationInput, average};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_privacy::Collection;
use ldpcov_privacy::plan;
use ldpcov_proto::v1::{CollectionSpec, Encoding, LocalMechanism, Moments};
use nalgebra::DMatrix;
use rand::SeedableRng;

/// Repetitions per point.
const REPS: u64 = 32;

fn collection(p: usize, epsilon: f64, mechanism: LocalMechanism) -> Collection {
    let rank_one = mechanism == LocalMechanism::RankOne;
    Collection::create(&CollectionSpec {
        collection_id: "plan".into(),
        dim: p as u32,
        epsilon,
        delta: if rank_one { 0.0 } else { 1e-6 },
        clip_radius: (2.0 * p as f64).sqrt(),
        min_reports: 1,
        moments: Moments::SecondMoment as i32,
        encoding: if rank_one {
            Encoding::Unspecified
        } else {
            Encoding::I32Le
        } as i32,
        local_mechanism: mechanism as i32,
        ..Default::default()
    })
    .expect("a valid spec")
}

/// `(RMS of ‖M̂ − M_n‖_F over the repetitions, mean ‖u‖² of the users)`.
fn simulate(c: &Collection, n: u64, seed: u64) -> (f64, f64) {
    let p = c.dim();
    let sampler = Sampler::gaussian(&Model::BandedGeometric.covariance(p)).unwrap();
    let perturber = Perturber::new(c.clone());
    let input = EstimationInput::from_collection(c);
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let r2 = c.clip_radius() * c.clip_radius();
    let (mut squares, mut norms) = (0.0, 0.0);
    for _ in 0..REPS {
        let mut acc = Accumulator::new(c.entries(), 1);
        let mut exact = DMatrix::<f64>::zeros(p, p);
        for _ in 0..n {
            let x = sampler.sample(&mut rng);
            let u = perturber.clip(&x).unwrap();
            let u = nalgebra::DVector::from_vec(u);
            norms += u.norm_squared();
            exact += &u * u.transpose();
            acc.add(0, &perturber.perturb(&x, &mut noise).unwrap());
        }
        let m_hat = average(&input, &acc.sums(), n).unwrap();
        let err = (m_hat - exact * (r2 / n as f64)).norm();
        squares += err * err;
    }
    ((squares / REPS as f64).sqrt(), norms / (REPS * n) as f64)
}

#[test]
fn planned_errors_are_within_ten_percent_of_simulation() {
    for mechanism in [
        LocalMechanism::Gaussian,
        LocalMechanism::GaussianTriu,
        LocalMechanism::RankOne,
    ] {
        for (k, (p, epsilon, n)) in [(20, 1.0, 2000u64), (30, 4.0, 1000), (40, 2.0, 500)]
            .into_iter()
            .enumerate()
        {
            let c = collection(p, epsilon, mechanism);
            let (simulated, s) = simulate(&c, n, 100 + k as u64);
            let planned = plan::raw_average_error(&c, n, s);
            let ratio = simulated / planned;
            println!(
                "{}: p = {p}, ε = {epsilon}, n = {n}: simulated {simulated:.4}, planned {planned:.4} (ratio {ratio:.3}, s = {s:.3})",
                mechanism.as_str_name()
            );
            assert!(
                (ratio - 1.0).abs() <= 0.1,
                "{}: p = {p}, ε = {epsilon}, n = {n}: simulated {simulated} vs planned {planned}",
                mechanism.as_str_name()
            );
            // The inverse: the users the simulated error needs are within 21 % of n.
            let users = plan::users_for_error(&c, simulated, s);
            assert!(
                (users as f64 / n as f64 - 1.0).abs() <= 0.21,
                "{users} users for {simulated}"
            );
        }
    }
}
