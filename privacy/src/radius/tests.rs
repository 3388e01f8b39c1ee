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
            assert!(phase_rho <= share * total && phase_rho >= share * total * (1.0 - 1e-9));
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

fn phase_spec(dim: u32) -> CollectionSpec {
    CollectionSpec {
        clip_radius: 0.0,
        radius_phase: Some(ldpcov_proto::v1::RadiusPhaseSpec::default()),
        ..spec(dim)
    }
}

/// A collection with a radius phase: the defaults resolved, R pending, and the two
/// reports' ρ adding to the collection's alone (never more, short of it by ≤ 10⁻⁹);
/// the phase's collection is an ordinary Gaussian second-moment collection of the
/// one-hot vector, whose sensitivity is √2 plus the grid's rounding term.
#[test]
fn a_collection_with_a_radius_phase_splits_its_budget_between_two_reports() {
    for dim in [3u32, 20] {
        let alone = Collection::create(&spec(dim)).unwrap();
        let c = Collection::create(&phase_spec(dim)).unwrap();
        assert!(c.radius_pending());
        assert_eq!(c.clip_radius(), 0.0);
        let phase = c.radius_phase().unwrap();
        let root_p = (dim as f64).sqrt();
        assert_eq!(phase.share(), DEFAULT_SHARE);
        assert_eq!(phase.bins().edges().len(), DEFAULT_RADII as usize);
        assert!((phase.bins().edges()[0] - root_p / 4.0).abs() < 1e-12);
        assert!((phase.bins().edges()[12] - 16.0 * root_p).abs() < 1e-12);
        let total = alone.rho();
        let spent = phase.phase_rho() + c.rho();
        assert!(spent <= total * (1.0 + 1e-12), "p {dim}: {spent} > {total}");
        assert!(spent >= total * (1.0 - 1e-9), "p {dim}: {spent} < {total}");
        assert!(phase.phase_rho() <= DEFAULT_SHARE * total);
        // The main report is noisier than the collection's alone, at a lower ε.
        assert!(c.sigma() > alone.sigma());
        assert!(c.report_epsilon() < c.epsilon());
        assert_eq!(c.epsilon(), 1.0);
        let pc = Collection::from_spec(phase.phase_spec()).unwrap();
        assert_eq!(pc.id(), format!("radius{PHASE_COLLECTION_SUFFIX}"));
        assert_eq!(pc.dim(), DEFAULT_RADII as usize + 1);
        assert_eq!(pc.clip_radius(), 1.0);
        assert!(!pc.has_mean());
        assert_eq!(pc.rho(), phase.phase_rho());
        let rounding = pc.sensitivity() - std::f64::consts::SQRT_2;
        assert!(rounding > 0.0 && rounding < 1e-3, "{}", pc.sensitivity());
        assert!(
            (pc.sigma() - pc.sensitivity() / (2.0 * pc.rho()).sqrt()).abs() < 1e-12 * pc.sigma()
        );
        // The one-hot vector of a norm: 1 in its interval.
        let v = phase.one_hot(root_p);
        assert_eq!(v.iter().sum::<f64>(), 1.0);
        assert_eq!(v[phase.bins().bin_of(root_p)], 1.0);
    }
}

/// A device re-derives the phase from the spec: parameters that claim a smaller
/// phase ε, another main ε or other radii are refused; a chosen radius must be one
/// of the candidates.
#[test]
fn a_radius_phase_is_re_derived_by_the_device_and_its_radius_is_a_candidate() {
    let c = Collection::create(&phase_spec(5)).unwrap();
    let params = c.params();
    assert_eq!(Collection::from_params(&params).unwrap(), c);
    let served = params.radius_phase.clone().unwrap();
    assert!(!served.radius_chosen);
    assert_eq!(served.phase_collection_id, "radius.radius");
    for tamper in [
        |p: &mut ldpcov_proto::v1::RadiusPhaseParams| p.phase_epsilon *= 0.5,
        |p: &mut ldpcov_proto::v1::RadiusPhaseParams| p.main_epsilon *= 1.5,
        |p: &mut ldpcov_proto::v1::RadiusPhaseParams| p.radii[3] *= 1.1,
        |p: &mut ldpcov_proto::v1::RadiusPhaseParams| p.radius_chosen = true,
    ] {
        let mut bad = params.clone();
        tamper(bad.radius_phase.as_mut().unwrap());
        assert!(Collection::from_params(&bad).is_err(), "{bad:?}");
    }
    // The last digits of a power or a bisection may differ between platforms: a
    // relative 10⁻¹² is accepted, 10⁻⁶ is not.
    let mut rounded = params.clone();
    let phase = rounded.radius_phase.as_mut().unwrap();
    phase.radii[3] *= 1.0 + 1e-12;
    phase.main_epsilon *= 1.0 - 1e-12;
    assert_eq!(Collection::from_params(&rounded).unwrap(), c);
    rounded.radius_phase.as_mut().unwrap().phase_rho *= 1.0 + 1e-6;
    assert!(Collection::from_params(&rounded).is_err());
    let mut lowered = params.clone();
    lowered.sigma *= 0.5;
    assert!(Collection::from_params(&lowered).is_err());
    let edge = c.radius_phase().unwrap().bins().edges()[4];
    let chosen = c.with_chosen_radius(edge).unwrap();
    assert!(!chosen.radius_pending());
    assert_eq!(chosen.clip_radius(), edge);
    assert_eq!(chosen.sigma(), c.sigma());
    assert!(chosen.params().radius_phase.unwrap().radius_chosen);
    assert!(c.with_chosen_radius(edge * 1.01).is_err());
    assert!(
        Collection::create(&spec(5))
            .unwrap()
            .with_chosen_radius(edge)
            .is_err()
    );
}

/// What cannot have a radius phase is refused at creation, each with its reason.
#[test]
fn a_radius_phase_is_refused_where_it_cannot_run() {
    let refused = |s: CollectionSpec| match Collection::create(&s) {
        Err(crate::SpecError::RadiusPhase(why)) => why,
        other => panic!("{other:?}"),
    };
    let why = refused(CollectionSpec {
        clip_radius: 2.0,
        ..phase_spec(4)
    });
    assert!(why.contains("clip_radius must be 0"), "{why}");
    let why = refused(CollectionSpec {
        privacy_model: ldpcov_proto::v1::PrivacyModel::TwoAggregator as i32,
        ..phase_spec(4)
    });
    assert!(why.contains("only local collections"), "{why}");
    let why = refused(CollectionSpec {
        local_mechanism: ldpcov_proto::v1::LocalMechanism::RankOne as i32,
        delta: 0.0,
        ..phase_spec(4)
    });
    assert!(why.contains("only local collections"), "{why}");
    for (share, smallest, largest, radii) in [
        (1.0, 0.0, 0.0, 0),
        (-0.5, 0.0, 0.0, 0),
        (0.1, 4.0, 2.0, 0),
        (0.1, 0.0, 0.0, 65),
        (0.1, 0.0, 0.0, 1),
    ] {
        let why = refused(CollectionSpec {
            radius_phase: Some(ldpcov_proto::v1::RadiusPhaseSpec {
                share,
                smallest_radius: smallest,
                largest_radius: largest,
                radii,
            }),
            ..phase_spec(4)
        });
        assert!(!why.is_empty());
    }
    let why = refused(CollectionSpec {
        collection_id: "x".repeat(125),
        ..phase_spec(4)
    });
    assert!(why.contains("collection id"), "{why}");
}

/// A central collection's phase is central too (the curator sees the one-hot vectors
/// and adds the noise once): its release budget and the main one add up to the
/// collection's, exactly as zCDP budgets do (no grid term).
#[test]
fn a_central_collections_radius_phase_is_a_central_collection() {
    let spec = CollectionSpec {
        privacy_model: ldpcov_proto::v1::PrivacyModel::Central as i32,
        ..phase_spec(6)
    };
    let c = Collection::create(&spec).unwrap();
    let alone = ldpcov_accounting::calibration::zcdp_rho_for_epsilon(1.0, 1e-6);
    let phase = c.radius_phase().unwrap();
    let pc = Collection::from_spec(phase.phase_spec()).unwrap();
    assert!(pc.is_central());
    assert_eq!(pc.rho(), phase.phase_rho());
    let spent = phase.phase_rho() + c.rho();
    assert!(spent <= alone * (1.0 + 1e-12) && spent >= alone * (1.0 - 1e-9));
    assert!((phase.phase_rho() / alone - DEFAULT_SHARE).abs() < 1e-9);
}
