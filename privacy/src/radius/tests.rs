use super::*;
use crate::plan::radius_tradeoff;
use ldpcov_accounting::calibration::zcdp_rho;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

fn spec(dim: u32) -> CollectionSpec {
    CollectionSpec {
        dim,
        ..crate::plan::tests::radius_spec()
    }
}

#[test]
fn bins_are_geometric_and_every_norm_has_exactly_one_bin() {
    let bins = NormBins::geometric(1.0, 16.0, 5).unwrap();
    for (e, want) in bins.edges().iter().zip([1.0, 2.0, 4.0, 8.0, 16.0]) {
        assert!((e - want).abs() < 1e-12, "{:?}", bins.edges());
    }
    assert_eq!(bins.len(), 6);
    // An edge belongs to the bin above it.
    let cases = [
        (0.0, 0),
        (0.99, 0),
        (1.0, 1),
        (3.9, 2),
        (15.99, 4),
        (16.0, 5),
        (1e300, 5),
        (f64::INFINITY, 5),
    ];
    for (norm, bin) in cases {
        assert_eq!(bins.bin_of(norm), bin, "norm {norm}");
    }
    assert_eq!(bins.upper_norm(0), 1.0);
    assert_eq!(bins.upper_norm(4), 16.0);
    assert!((bins.upper_norm(5) - 32.0).abs() < 1e-9);
    for (smallest, largest, edges) in [
        (0.0, 1.0, 4),
        (2.0, 1.0, 4),
        (1.0, f64::INFINITY, 4),
        (f64::NAN, 1.0, 4),
        (1.0, 2.0, 1),
        (1.0, 2.0, 65),
    ] {
        assert!(
            NormBins::geometric(smallest, largest, edges).is_err(),
            "{smallest} {largest} {edges}"
        );
    }
}

#[test]
fn the_noise_is_calibrated_to_the_one_hot_sensitivity() {
    let phase = RadiusPhase::new(NormBins::geometric(0.5, 8.0, 5).unwrap(), 0.01).unwrap();
    // Any two users' reports differ by exactly √2 in L2: the sensitivity the noise is
    // calibrated to.
    let norms: Vec<f64> = (0..phase.bins().len())
        .map(|b| phase.bins().upper_norm(b) * 0.99)
        .collect();
    for &a in &norms {
        for &b in &norms {
            let (ra, rb) = (phase.one_hot(a), phase.one_hot(b));
            assert_eq!(ra.iter().sum::<f64>(), 1.0);
            let d = ra
                .iter()
                .zip(&rb)
                .map(|(x, y)| (x - y) * (x - y))
                .sum::<f64>()
                .sqrt();
            let expected = if phase.bins().bin_of(a) == phase.bins().bin_of(b) {
                0.0
            } else {
                ONE_HOT_SENSITIVITY
            };
            assert_eq!(d, expected);
        }
    }
    // ρ = Δ²/(2σ²): σ = 1/√ρ = 10 at ρ = 0.01.
    assert!((phase.sigma() - 10.0).abs() < 1e-12);
    assert!((zcdp_rho(ONE_HOT_SENSITIVITY, phase.sigma()) - phase.rho()).abs() < 1e-15);
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            RadiusPhase::new(phase.bins().clone(), rho).is_err(),
            "{rho}"
        );
    }
}

#[test]
fn the_split_spends_exactly_the_collections_rho() {
    for dim in [3, 20, 100] {
        let total = Collection::create(&spec(dim)).unwrap().rho();
        for share in [0.05, 0.2, 0.5] {
            let (phase_rho, main) = split_budget(&spec(dim), share).unwrap();
            let main_rho = Collection::create(&main).unwrap().rho();
            assert!((phase_rho - share * total).abs() <= 1e-15 * total);
            // Never more than the collection alone, and short of it by at most 10⁻⁹.
            assert!(
                phase_rho + main_rho <= total * (1.0 + 1e-12),
                "p {dim} share {share}"
            );
            assert!(
                phase_rho + main_rho >= total * (1.0 - 1e-9),
                "p {dim} share {share}"
            );
            assert!(main.epsilon < 1.0 && main.epsilon > 0.0);
            assert_eq!(main.delta, 1e-6);
        }
    }
    for share in [0.0, 1.0, -0.1, f64::NAN] {
        assert!(split_budget(&spec(3), share).is_err(), "{share}");
    }
}

/// The frequencies read off noisy sums are unbiased with sd `σ/√n` per bin: with a
/// fixed seed, every bin's standardized error is within 4.5 (each |Z| > 4.5 has
/// probability 7·10⁻⁶, so ≈ 5·10⁻⁵ over 7 bins), and their sum of squares, χ² with 7
/// degrees of freedom when the noise has the stated sd, is within 7 ± 5·√14 (a noise
/// √2 too small or too large puts it at 3.5 or 14 on average and out of range with the
/// spread of 7 bins only rarely; a noise 2× off, at 1.75 or 28, fails).
#[test]
fn frequencies_from_noisy_sums_are_unbiased_with_the_stated_sd() {
    let phase = RadiusPhase::new(NormBins::geometric(0.5, 16.0, 6).unwrap(), 0.02).unwrap();
    let n = 20_000u64;
    let mut rng = ChaCha8Rng::seed_from_u64(56);
    let truth = [0.05, 0.1, 0.3, 0.3, 0.15, 0.07, 0.03];
    let mut sums = vec![0.0; phase.bins().len()];
    let mut counts = [0u64; 7];
    for u in 0..n {
        // Users spread over the bins in the proportions `truth` (deterministically).
        let mut cumulative = 0.0;
        let position = (u as f64 + 0.5) / n as f64;
        let bin = truth
            .iter()
            .position(|f| {
                cumulative += f;
                position < cumulative
            })
            .unwrap_or(6);
        counts[bin] += 1;
        let norm = phase.bins().upper_norm(bin) * 0.99;
        for (s, x) in sums.iter_mut().zip(phase.one_hot(norm)) {
            let z: f64 = StandardNormal.sample(&mut rng);
            *s += x + phase.sigma() * z;
        }
    }
    let estimated = phase.frequencies(&sums, n).unwrap();
    let sd = phase.sigma() / (n as f64).sqrt();
    let mut chi2 = 0.0;
    for (bin, f) in estimated.iter().enumerate() {
        let exact = counts[bin] as f64 / n as f64;
        let z = (f - exact) / sd;
        assert!(z.abs() < 4.5, "bin {bin}: {f} vs {exact} (z = {z})");
        chi2 += z * z;
    }
    let spread = 5.0 * 14f64.sqrt();
    assert!((7.0 - spread..7.0 + spread).contains(&chi2), "χ² {chi2}");
    assert!(phase.frequencies(&sums[1..], n).is_err());
    assert!(phase.frequencies(&sums, 0).is_err());
}

#[test]
fn the_choice_is_the_planners_on_the_binned_distribution() {
    // Noise-free sums: no bin is read as empty.
    let phase = RadiusPhase::new(NormBins::geometric(1.0, 32.0, 11).unwrap(), 0.01)
        .unwrap()
        .with_empty_bin_sds(0.0)
        .unwrap();
    let (_, main) = split_budget(&spec(10), 0.2).unwrap();
    // Norms of a population with a heavy tail, binned without noise.
    let norms: Vec<f64> = (0..1000)
        .map(|i| {
            if i % 10 == 0 {
                20.0
            } else {
                3.0 + (i % 7) as f64 * 0.2
            }
        })
        .collect();
    let mut sums = vec![0.0; phase.bins().len()];
    for &v in &norms {
        sums[phase.bins().bin_of(v)] += 1.0;
    }
    let binned: Vec<f64> = norms
        .iter()
        .map(|&v| phase.bins().upper_norm(phase.bins().bin_of(v)))
        .collect();
    for n in [1_000u64, 1_000_000, 100_000_000] {
        let chosen = phase.choose_radius(&main, n, &sums, 1000).unwrap();
        let planner =
            best_radius(&radius_tradeoff(&main, n, &binned, phase.bins().edges()).unwrap())
                .unwrap();
        assert_eq!(chosen.radius, planner.radius, "n = {n}");
        assert!((chosen.total() - planner.total()).abs() <= 1e-9 * planner.total());
    }
    // More users, less noise: the radius grows to take in the tail.
    let small = phase.choose_radius(&main, 1_000, &sums, 1000).unwrap();
    let large = phase
        .choose_radius(&main, 100_000_000, &sums, 1000)
        .unwrap();
    assert!(
        large.radius > small.radius,
        "{} vs {}",
        large.radius,
        small.radius
    );
    assert!(large.radius >= 20.0);
}

/// A far bin whose estimate is within the empty-bin threshold is read as empty: noise
/// there cannot pull the radius out to it; the same bin well above the threshold does.
#[test]
fn a_far_bin_at_noise_level_does_not_move_the_radius() {
    let n = 1_000_000u64;
    // σ/√n = 10/1000 = 0.01: the threshold is 0.035.
    let phase = RadiusPhase::new(NormBins::geometric(1.0, 32.0, 11).unwrap(), 0.01).unwrap();
    assert_eq!(DEFAULT_EMPTY_BIN_SDS, 3.5);
    let (_, main) = split_budget(&spec(10), 0.2).unwrap();
    let bulk = phase.bins().bin_of(3.0);
    let far = phase.bins().len() - 1;
    let with_far = |share: f64| {
        let mut sums = vec![0.0; phase.bins().len()];
        sums[bulk] = (1.0 - share) * n as f64;
        sums[far] = share * n as f64;
        phase.choose_radius(&main, n, &sums, n).unwrap()
    };
    let none = with_far(0.0);
    // The upper edge of the bulk's bin: no one clipped, least noise.
    assert!((none.radius - 4.0).abs() < 1e-9, "{}", none.radius);
    // 3 sds of noise in the top bin: read as empty.
    assert_eq!(with_far(0.03).radius, none.radius);
    // 20 % of users out there: real, and the radius follows them.
    assert!(with_far(0.2).radius > 16.0, "{}", with_far(0.2).radius);
    assert!(phase.clone().with_empty_bin_sds(-1.0).is_err());
}
