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
    let second = crate::layout::triangle_pairs(p).map(|(i, j)| (u[i] * u[j] - v[i] * v[j]).powi(2));
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
