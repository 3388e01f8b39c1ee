//! Tests of the device-side perturbation: calibration, grids and bounds, the report
//! bytes pinned for fixed seeds, and the noise's distribution.

use super::*;
use ldpcov_accounting::calibration::std_normal_cdf;
use ldpcov_privacy::SpecError;
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_privacy::wire::decode_payload;
use ldpcov_proto::v1::CollectionSpec;
use rand::Rng;

/// Test-only sampler: no noise at all.
struct ZeroNoise;
impl NoiseSampler for ZeroNoise {
    fn sample_grid(&mut self, _sigma_grid: f64) -> i64 {
        0
    }
}

/// Test-only sampler that counts draws.
#[derive(Default)]
struct Counting(usize);
impl NoiseSampler for Counting {
    fn sample_grid(&mut self, _sigma_grid: f64) -> i64 {
        self.0 += 1;
        0
    }
}

/// Test-only sampler returning a fixed value.
struct Constant(i64);
impl NoiseSampler for Constant {
    fn sample_grid(&mut self, _sigma_grid: f64) -> i64 {
        self.0
    }
}

/// Test-only sampler with a wrong σ (to check the variance test has power).
struct Scaled(FloatGaussianNotPrivate, f64);
impl NoiseSampler for Scaled {
    fn sample_grid(&mut self, sigma_grid: f64) -> i64 {
        self.0.sample_grid(sigma_grid * self.1)
    }
}

fn spec(dim: u32, epsilon: f64, delta: f64, clip_radius: f64) -> CollectionSpec {
    CollectionSpec {
        collection_id: "test".into(),
        dim,
        epsilon,
        delta,
        clip_radius,
        min_reports: 1,
        encoding: 0,
        ..Default::default()
    }
}

fn collection(dim: u32, clip_radius: f64) -> Collection {
    Collection::from_spec(&spec(dim, 1.0, 1e-6, clip_radius)).expect("valid spec")
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The sensitivity the noise is calibrated to is attained, not just bounded: the
/// noiseless grid statistic the real [`Perturber`] builds for two neighbouring
/// inputs differs by at most `Δ·2ᵏ` in ℓ₂, Δ as [`Collection::from_spec`] announces
/// it, and the pair `R·e₁`, `R·e₂` comes within rounding of it.
///
/// Rounding slack of that pair: u = (1 − 2⁻³²)·eᵢ, so the only non-zero entries are
/// the two diagonal ones, `round((1 − 2⁻³²)²·2ᵏ)`; `(1 − 2⁻³²)²·2ᵏ > 2ᵏ − 2ᵏ⁻³¹ ≥ 2ᵏ − ½`
/// (k ≤ 30), so each is at least `2ᵏ − ½` (in fact exactly 2ᵏ) and the difference has
/// norm at least `√2·(2ᵏ − ½) > √2·2ᵏ − 1`, while `Δ·2ᵏ = √2·2ᵏ + √d`: the announced
/// Δ exceeds what this pair attains by at most `(√d + 1)·2⁻ᵏ`, and an announced Δ of
/// 1 (+ the rounding term) would be exceeded by `(√2 − 1)·2ᵏ − √d`.
#[test]
fn sensitivity_is_attained_through_the_perturber() {
    use ldpcov_proto::v1::LocalMechanism;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;
    use rand_distr::{Distribution, StandardNormal};
    for (dim, radius, mechanism) in [
        (2u32, 1.0, LocalMechanism::GaussianTriu),
        (5, 3.0, LocalMechanism::GaussianTriu),
        (12, 0.5, LocalMechanism::GaussianTriu),
        (2, 1.0, LocalMechanism::Gaussian),
        (5, 3.0, LocalMechanism::Gaussian),
        (12, 0.5, LocalMechanism::Gaussian),
    ] {
        let mut s = spec(dim, 1.0, 1e-6, radius);
        s.local_mechanism = mechanism as i32;
        let c = Collection::from_spec(&s).expect("valid spec");
        let p = Perturber::new(c.clone());
        let scale = c.grid_scale();
        let bound = c.sensitivity() * scale;
        let grid = |x: &[f64]| -> Vec<f64> {
            let v = p.perturb(x, &mut ZeroNoise).expect("valid input");
            v.into_iter().map(f64::from).collect()
        };
        let dist = |x: &[f64], y: &[f64]| {
            let (a, b) = (grid(x), grid(y));
            a.iter()
                .zip(&b)
                .map(|(s, t)| (s - t) * (s - t))
                .sum::<f64>()
                .sqrt()
        };
        let d = dim as usize;
        let e = |i: usize, len: f64| -> Vec<f64> {
            (0..d).map(|j| if j == i { len } else { 0.0 }).collect()
        };
        // R·e₁ vs R·e₂: the worst pair, within rounding of the bound.
        let worst = dist(&e(0, radius), &e(1, radius));
        assert!(worst <= bound, "p = {dim}: {worst} > Δ·2ᵏ = {bound}");
        assert!(
            worst >= 2f64.sqrt() * scale - 1.0,
            "p = {dim}: R·e₁, R·e₂ give {worst}, below √2·2ᵏ − 1"
        );
        // R·(e₁ + e₂)/√2 vs R·(e₁ − e₂)/√2: uuᵀ − u'u'ᵀ is off-diagonal, of Frobenius
        // norm √2. The svec report carries it in full (within rounding: 2 entries of
        // ½ each), the raw one as 1 (its triangle holds each pair once): a factor other
        // than √2 on the off-diagonal products would exceed Δ or fall short of √2.
        let h = radius / 2f64.sqrt();
        let mut plus = vec![0.0; d];
        let mut minus = vec![0.0; d];
        (plus[0], plus[1]) = (h, h);
        (minus[0], minus[1]) = (h, -h);
        let off = dist(&plus, &minus);
        assert!(off <= bound, "p = {dim}: off-diagonal pair {off} > {bound}");
        if mechanism == LocalMechanism::Gaussian {
            assert!(
                off >= 2f64.sqrt() * scale - 2.0,
                "p = {dim}: svec off-diagonal pair {off}"
            );
        } else {
            assert!(
                (off - scale).abs() <= 2.0,
                "p = {dim}: raw off-diagonal pair {off}"
            );
        }
        // Vectors far beyond R (clipped) and x vs −x.
        let long = e(0, 1e6 * radius);
        let other_long = e(d - 1, -1e6 * radius);
        assert!(dist(&long, &other_long) <= bound, "p = {dim}: clipped pair");
        let mut rng = ChaCha12Rng::seed_from_u64(u64::from(dim));
        for _ in 0..300 {
            let mut draw = |len: f64| -> Vec<f64> {
                let g: Vec<f64> = (0..d).map(|_| StandardNormal.sample(&mut rng)).collect();
                let n = norm(&g);
                g.iter().map(|v| v / n * len).collect()
            };
            // Lengths inside, on and far outside the ball.
            let x = draw(radius * 0.7);
            let y = draw(radius * 40.0);
            let neg: Vec<f64> = y.iter().map(|v| -v).collect();
            for (a, b, what) in [(&x, &y, "random"), (&y, &neg, "x vs −x")] {
                let got = dist(a, b);
                assert!(got <= bound, "p = {dim}, {what}: {got} > {bound}");
            }
        }
    }
}

#[test]
fn input_errors_come_before_any_noise() {
    let p = Perturber::new(collection(3, 2.0));
    let mut counting = Counting::default();
    let cases: [(&[f64], &str); 5] = [
        (&[1.0, 2.0], "dim"),
        (&[1.0, 2.0, 3.0, 4.0], "dim"),
        (&[f64::NAN, 2.0], "dim"),
        (&[1.0, 2.0, f64::NAN], "nan"),
        (&[1.0, f64::NEG_INFINITY, f64::INFINITY], "inf"),
    ];
    for (x, kind) in cases {
        let err = p.perturb(x, &mut counting).unwrap_err();
        match (kind, err) {
            ("dim", ClientError::Dimension { expected: 3, got }) => assert_eq!(got, x.len()),
            ("nan", ClientError::NonFinite { index: 2 }) => {}
            ("inf", ClientError::NonFinite { index: 1 }) => {}
            (kind, err) => panic!("{kind}: unexpected {err}"),
        }
        let id = ReportId([7; 16]);
        assert!(p.report(x, &mut counting, id).is_err());
    }
    assert_eq!(counting.0, 0, "noise was drawn for a rejected input");
    // The messages are one precise line.
    let msg = p.perturb(&[1.0], &mut counting).unwrap_err().to_string();
    assert_eq!(msg, "vector has 1 coordinates, the collection expects 3");
}

/// A collection cannot be edited after it is built (the `compile_fail` example on
/// [`Collection`]), so the only way to a lowered σ is a server's tampered
/// parameters: refused when the collection is derived, before any perturber exists
/// and any noise is drawn.
#[test]
fn tampered_collection_is_refused_before_any_noise() {
    let c = collection(3, 1.0);
    let mut params = c.params();
    params.sigma *= 0.5;
    assert!(matches!(
        Collection::from_params(&params).map_err(ClientError::from),
        Err(ClientError::Params(SpecError::ParamsMismatch { .. }))
    ));
    // The untampered parameters give the same collection back.
    assert_eq!(Collection::from_params(&c.params()).unwrap(), c);
}

#[test]
fn vectors_inside_the_ball_are_scaled_by_one_over_r() {
    let r = 5.0;
    let p = Perturber::new(collection(4, r));
    let x = [1.0, -2.0, 0.5, 3.0]; // ‖x‖ ≈ 3.77 < 5
    let u = p.clip(&x).unwrap();
    for (ui, xi) in u.iter().zip(x) {
        assert!(
            (ui - xi / r).abs() <= 1e-9 * (xi / r).abs(),
            "{ui} vs {xi}/{r}"
        );
    }
    assert!(norm(&u) < 1.0);
    // On the sphere of radius R exactly: still scaled by 1/R, norm just below 1.
    let x = [3.0, 4.0, 0.0, 0.0];
    let u = p.clip(&x).unwrap();
    assert!(norm(&u) <= 1.0 && norm(&u) > 1.0 - 1e-9);
    assert_eq!(p.clip(&[0.0; 4]).unwrap(), vec![0.0; 4]);
}

#[test]
fn long_vectors_are_projected_to_the_unit_sphere() {
    let r = 2.0;
    let p = Perturber::new(collection(3, r));
    let x = [2.0 * 10.0 * 0.6, 0.0, -2.0 * 10.0 * 0.8]; // ‖x‖ = 10R
    let scaled: Vec<f64> = x.iter().map(|v| v / 10.0).collect(); // ‖x/10‖ = R
    let (u, w) = (p.clip(&x).unwrap(), p.clip(&scaled).unwrap());
    for (a, b) in u.iter().zip(&w) {
        assert!((a - b).abs() <= 1e-15, "{a} vs {b}");
    }
    assert!((norm(&u) - 1.0).abs() < 1e-9 && norm(&u) <= 1.0);
    // Same signal on the grid.
    assert_eq!(
        p.perturb(&x, &mut ZeroNoise).unwrap(),
        p.perturb(&scaled, &mut ZeroNoise).unwrap()
    );
    // Huge finite coordinates: no overflow, the direction survives.
    let u = p.clip(&[f64::MAX, f64::MAX, -f64::MAX]).unwrap();
    let third = 1.0 / 3f64.sqrt();
    for (a, b) in u.iter().zip([third, third, -third]) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }
    assert!(norm(&u) <= 1.0);
    // Tiny (subnormal) coordinates stay finite.
    let u = p.clip(&[5e-324, 0.0, -1e-310]).unwrap();
    assert!(u.iter().all(|v| v.is_finite() && v.abs() < 1e-300));
}

#[test]
fn clipped_norm_never_exceeds_one() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for dim in [1u32, 2, 7, 50, 300] {
        let p = Perturber::new(collection(dim, 1.0));
        for _ in 0..200 {
            let scale = 10f64.powi(rng.random_range(-3..=3));
            let x: Vec<f64> = (0..dim)
                .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
                .collect();
            let u = p.clip(&x).unwrap();
            // The margin is 2⁻³² against rounding errors of order 2⁻⁴⁰.
            assert!(norm(&u) <= 1.0 - CLIP_MARGIN / 2.0, "dim {dim}");
        }
    }
}

#[test]
fn zero_noise_gives_the_rounded_signal_in_triangle_order() {
    let c = collection(5, 3.0);
    let p = Perturber::new(c.clone());
    let x = [0.3, -1.1, 2.0, 0.0, -0.7];
    let u = p.clip(&x).unwrap();
    let scale = 2f64.powi(c.grid_bits() as i32);
    let want: Vec<i32> = triangle_pairs(5)
        .map(|(i, j)| (u[i] * u[j] * scale).round() as i32)
        .collect();
    let got = p.perturb(&x, &mut ZeroNoise).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.len(), 15);
    // Spot-check the layout against explicit positions: (0,0), (0,1), (1,1), (4,4).
    let cell = |i: usize, j: usize| ((x[i] / 3.0) * (x[j] / 3.0) * scale).round() as i32;
    for (k, (i, j)) in [(0, (0, 0)), (1, (0, 1)), (5, (1, 1)), (14, (4, 4))] {
        assert!((got[k] - cell(i, j)).abs() <= 1, "entry {k} = ({i},{j})");
    }
    // The report carries exactly these entries.
    let id = ReportId([3; 16]);
    let report = p.report(&x, &mut ZeroNoise, id).unwrap();
    assert_eq!(report.collection_id, "test");
    assert_eq!(report.report_id, vec![3; 16]);
    assert_eq!(
        decode_payload(&c, report.encoding, &report.payload)
            .unwrap()
            .to_dense(),
        want
    );
}

#[test]
fn noisy_entries_are_clamped_to_the_validation_bound() {
    let c = collection(3, 1.0);
    let p = Perturber::new(c.clone());
    let bound = c.max_abs_grid_value() as i32;
    for (noise, want) in [(i64::MAX, bound), (i64::MIN, -bound)] {
        let entries = p.perturb(&[1.0, -1.0, 0.5], &mut Constant(noise)).unwrap();
        assert!(entries.iter().all(|&v| v == want));
        let report = p.report(&[1.0, -1.0, 0.5], &mut Constant(noise), ReportId([0; 16]));
        let report = report.unwrap();
        assert!(decode_payload(&c, report.encoding, &report.payload).is_ok());
    }
}

/// Mean and variance of `samples` against N(0, var).
///
/// Standard errors for N independent draws: the mean has se σ/√N; the second
/// moment about the known mean 0, m₂ = Σz²/N, has se σ²·√(2/N) for a Gaussian
/// (Var z² = 2σ⁴; rounding changes the kurtosis negligibly). We accept within 6 se:
/// a false alarm has probability about 2·10⁻⁹ per check.
fn moments_match(samples: &[i64], var: f64) -> Result<(), String> {
    let n = samples.len() as f64;
    let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / n;
    let m2 = samples.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
    let (se_mean, se_var) = (var.sqrt() / n.sqrt(), var * (2.0 / n).sqrt());
    if mean.abs() > 6.0 * se_mean {
        return Err(format!("mean {mean} vs 0 (se {se_mean})"));
    }
    if (m2 - var).abs() > 6.0 * se_var {
        return Err(format!("variance {m2} vs {var} (se {se_var})"));
    }
    Ok(())
}

#[test]
fn rounded_gaussian_has_the_right_moments() {
    let c = collection(10, 1.0);
    for (sigma, n, seed) in [(c.sigma_grid(), 200_000, 1), (3.0, 400_000, 2)] {
        let mut g = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(seed);
        let samples: Vec<i64> = (0..n).map(|_| g.sample_grid(sigma)).collect();
        // Rounding to integers adds a (nearly) uniform ±½ error: variance + 1/12.
        moments_match(&samples, sigma * sigma + 1.0 / 12.0)
            .unwrap_or_else(|e| panic!("sigma {sigma}: {e}"));
    }
    assert!(c.sigma_grid() > 1e6, "the real σ in grid units is large");
    // At σ = 3 the mass at 0 is that of N(0, 9) on [-½, ½]: checks nearest-integer
    // rounding (floor or truncation would move it). se = √(q(1-q)/N).
    let mut g = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(4);
    let n = 400_000;
    let zeros = (0..n).filter(|_| g.sample_grid(3.0) == 0).count() as f64 / n as f64;
    let q = std_normal_cdf(0.5 / 3.0) - std_normal_cdf(-0.5 / 3.0);
    assert!((zeros - q).abs() < 6.0 * (q * (1.0 - q) / n as f64).sqrt());
    // σ = 0 adds nothing.
    assert!((0..100).all(|_| g.sample_grid(0.0) == 0));
}

#[test]
fn seeded_samplers_are_deterministic_and_debug_hides_state() {
    let mut a = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(9);
    let mut b = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(9);
    for _ in 0..100 {
        assert_eq!(a.sample_grid(1e6), b.sample_grid(1e6));
    }
    assert_eq!(format!("{a:?}"), "FloatGaussianNotPrivate { .. }");
}

#[test]
fn report_ids_are_random() {
    let a = random_report_id().unwrap();
    let b = random_report_id().unwrap();
    assert_ne!(a, b);
}

/// The noise a full report carries (perturb minus zero-noise perturb) has, per
/// entry, the variance of the analytic Gaussian mechanism at Δ = √2 + √d·2⁻ᵏ in
/// grid units, pinned to an independent 50-digit reference
/// (`docs/calibration_reference.py`: σ = 5.974598181957314 at Δ = √2, ε = 1,
/// δ = 10⁻⁶; σ is linear in Δ). Fails if σ is off by √2 either way.
#[test]
fn report_noise_has_the_calibrated_variance() {
    let c = collection(60, 1.0);
    let p = Perturber::new(c.clone());
    let scale = c.grid_scale();
    let delta_grid = 2f64.sqrt() + (c.entries() as f64).sqrt() / scale;
    let sigma_ref = 5.974_598_181_957_314 * delta_grid / 2f64.sqrt() * scale;
    assert!((c.sigma_grid() / sigma_ref - 1.0).abs() < 1e-9);

    let noise_of = |sampler: &mut dyn NoiseSampler, reports: usize| -> Vec<i64> {
        let mut data = ChaCha20Rng::seed_from_u64(21);
        let mut out = Vec::new();
        for _ in 0..reports {
            let x: Vec<f64> = (0..c.dim())
                .map(|_| data.sample::<f64, _>(StandardNormal))
                .collect();
            let noisy = p.perturb(&x, sampler).unwrap();
            let clean = p.perturb(&x, &mut ZeroNoise).unwrap();
            out.extend(
                noisy
                    .iter()
                    .zip(&clean)
                    .map(|(&a, &b)| i64::from(a) - i64::from(b)),
            );
        }
        out
    };
    // 30 reports × 1830 entries = 54 900 draws: 6 se of the variance is 3.6 %.
    let var = sigma_ref * sigma_ref + 1.0 / 12.0;
    let noise = noise_of(
        &mut FloatGaussianNotPrivate::from_seed_for_simulation_not_private(8),
        30,
    );
    assert_eq!(noise.len(), 30 * 1830);
    moments_match(&noise, var).unwrap();
    // Independent draws per entry: consecutive differences have variance 2σ².
    let diffs: Vec<i64> = noise.windows(2).map(|w| w[1] - w[0]).collect();
    let n = diffs.len() as f64;
    let m2 = diffs.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
    // se of that mean: D = z' − z has Var D² = 8σ⁴, and neighbours (correlation −½)
    // have Cov(D², D'²) = 2·(σ²)² , so Var(mean) ≈ (8 + 2·2)σ⁴/n = 12σ⁴/n; relative
    // to 2σ² that is √(12/n)/2. A sampler reusing one draw per report fails this.
    assert!((m2 / (2.0 * var) - 1.0).abs() < 6.0 * (12.0 / n).sqrt() / 2.0);
    // The same check has power: σ·√2 and σ/√2 are both caught.
    for factor in [2f64.sqrt(), 1.0 / 2f64.sqrt()] {
        let mut wrong = Scaled(
            FloatGaussianNotPrivate::from_seed_for_simulation_not_private(8),
            factor,
        );
        assert!(moments_match(&noise_of(&mut wrong, 30), var).is_err());
    }
}

/// A mean-and-covariance collection (the CreateCollection default), with `centre`.
fn joint(dim: u32, epsilon: f64, clip_radius: f64, centre: Vec<f64>) -> Collection {
    let mut s = spec(dim, epsilon, 1e-6, clip_radius);
    s.centre = centre;
    let c = Collection::create(&s).expect("valid spec");
    assert!(c.has_mean());
    c
}

/// The joint report's signal: `round(w·uᵢ·2ᵏ)` then the products, with `u` from
/// `(x − c)/R` computed here independently of [`Perturber::clip`].
#[test]
fn joint_report_is_the_mean_block_then_the_triangle_of_the_centred_vector() {
    let (r, centre) = (3.0, vec![10.0, -4.0, 0.5]);
    let c = joint(3, 1.0, r, centre.clone());
    let p = Perturber::new(c.clone());
    let x = [10.3, -5.1, 2.5];
    let y: Vec<f64> = x.iter().zip(&centre).map(|(a, b)| a - b).collect();
    assert!(norm(&y) < r);
    let u: Vec<f64> = y.iter().map(|v| v / r * (1.0 - CLIP_MARGIN)).collect();
    let scale = c.grid_scale();
    let mut want: Vec<i32> = u
        .iter()
        .map(|ui| (0.5 * ui * scale).round() as i32)
        .collect();
    // A new collection carries off-diagonal products ×√2 (svec).
    want.extend(triangle_pairs(3).map(|(i, j)| {
        let factor = if i == j {
            1.0
        } else {
            std::f64::consts::SQRT_2
        };
        (factor * u[i] * u[j] * scale).round() as i32
    }));
    let got = p.perturb(&x, &mut ZeroNoise).unwrap();
    assert_eq!(got.len(), 3 + 6);
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1, "entry {k}: {a} vs {b}");
    }
    // The report decodes to p + d entries.
    let report = p.report(&x, &mut ZeroNoise, ReportId([1; 16])).unwrap();
    assert_eq!(
        decode_payload(&c, report.encoding, &report.payload)
            .unwrap()
            .to_dense(),
        got
    );
    // x − c overflowing is an input error, raised before any noise.
    // (A new collection's centre is bounded by 1e100; a stored one is not.)
    let mut far_spec = spec(2, 1.0, 1e-6, 1.0);
    far_spec.centre = vec![-f64::MAX, 0.0];
    far_spec.moments = ldpcov_proto::v1::Moments::MeanAndCovariance as i32;
    let far = Collection::from_spec(&far_spec).expect("a stored spec takes any finite centre");
    let mut counting = Counting::default();
    assert!(matches!(
        Perturber::new(far).perturb(&[f64::MAX, 0.0], &mut counting),
        Err(ClientError::NonFinite { index: 0 })
    ));
    assert_eq!(counting.0, 0);
}

/// The joint sensitivity is attained through the real perturber: the pair of the
/// derivation, `R·(cos t, −sin t, 0…)` and `R·(−sin t, cos t, 0…)` with
/// `sin 2t = w²/2`, lands within rounding of `Δ·2ᵏ` (each of the `p + d` entries is
/// rounded by at most ½, so the pair is at least `Δ₀·2ᵏ − √(p + d)`, less the clip
/// margin's `2·2⁻³²·Δ₀·2ᵏ < 1`), above what `√(2 + 2w²)` would allow
/// (`(Δ₀ − √2.5)·2ᵏ ≈ 0.0099·2ᵏ` exceeds `√(p + d) + 1` at these k), and random
/// pairs never exceed `Δ·2ᵏ`.
#[test]
fn joint_sensitivity_is_attained_through_the_perturber() {
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;
    for (dim, radius) in [(2u32, 1.0), (6, 2.5)] {
        let c = joint(dim, 1.0, radius, Vec::new());
        let p = Perturber::new(c.clone());
        let scale = c.grid_scale();
        let grid = |x: &[f64]| -> Vec<f64> {
            let v = p.perturb(x, &mut ZeroNoise).expect("valid input");
            v.into_iter().map(f64::from).collect()
        };
        let dist = |x: &[f64], y: &[f64]| {
            let (a, b) = (grid(x), grid(y));
            a.iter()
                .zip(&b)
                .map(|(s, t)| (s - t) * (s - t))
                .sum::<f64>()
                .sqrt()
        };
        let t = (0.25f64 / 2.0).asin() / 2.0;
        let d = dim as usize;
        let mut x = vec![0.0; d];
        let mut y = vec![0.0; d];
        (x[0], x[1]) = (radius * t.cos(), -radius * t.sin());
        (y[0], y[1]) = (-radius * t.sin(), radius * t.cos());
        let worst = dist(&x, &y);
        let slack = (c.entries() as f64).sqrt() + 1.0;
        assert!(worst <= c.sensitivity() * scale, "p = {dim}: {worst}");
        assert!(
            worst >= c.base_sensitivity() * scale - slack,
            "p = {dim}: {worst}"
        );
        assert!(worst > 2.5f64.sqrt() * scale + slack, "p = {dim}: {worst}");
        let mut rng = ChaCha12Rng::seed_from_u64(u64::from(dim));
        for _ in 0..300 {
            let a: Vec<f64> = (0..d)
                .map(|_| radius * rng.random_range(-1.0..1.0))
                .collect();
            let b: Vec<f64> = (0..d)
                .map(|_| radius * rng.random_range(-1.0..1.0))
                .collect();
            assert!(dist(&a, &b) <= c.sensitivity() * scale);
        }
    }
}

/// The noise of a joint report (perturb minus zero-noise perturb, exact discrete
/// Gaussian) has, on the mean block and on the triangle alike, the variance of the
/// analytic Gaussian at `Δ = Δ₀(1/2) + √(p + d)·2⁻ᵏ`, pinned to the 50-digit
/// reference (σ = 5.974598181957314·Δ/√2 at ε = 1, δ = 10⁻⁶). 400 reports at
/// p = 30: 12 000 mean-block draws (6 se of the variance: 6·√(2/12000) = 7.7 %) and
/// 186 000 triangle draws (2.0 %). A mean block without noise, or noise at the
/// second moment's σ (Δ = √2: −21 % variance), fails.
#[test]
fn joint_report_noise_has_the_calibrated_variance_on_both_blocks() {
    use crate::DiscreteGaussianSampler;
    let c = joint(30, 1.0, 1.0, Vec::new());
    let p = Perturber::new(c.clone());
    let scale = c.grid_scale();
    // (A new collection's svec report: its rounding term carries the margin.)
    let delta = 2.25 / 2f64.sqrt()
        + (c.entries() as f64).sqrt() / scale
            * (1.0 + ldpcov_privacy::collection::SVEC_ROUNDING_MARGIN);
    let sigma_ref = 5.974_598_181_957_314 * delta / 2f64.sqrt() * scale;
    assert!((c.sigma_grid() / sigma_ref - 1.0).abs() < 1e-9);
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(17);
    let mut data = ChaCha20Rng::seed_from_u64(22);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for _ in 0..400 {
        let x: Vec<f64> = (0..30)
            .map(|_| 0.3 + 0.1 * data.sample::<f64, _>(StandardNormal))
            .collect();
        let noisy = p.perturb(&x, &mut noise).unwrap();
        let clean = p.perturb(&x, &mut ZeroNoise).unwrap();
        let diff = noisy
            .iter()
            .zip(&clean)
            .map(|(&a, &b)| i64::from(a) - i64::from(b));
        for (k, z) in diff.enumerate() {
            if k < 30 {
                first.push(z)
            } else {
                second.push(z)
            }
        }
    }
    assert_eq!((first.len(), second.len()), (12_000, 186_000));
    // The exact discrete Gaussian's variance is σ_g² up to e^{−2π²σ_g²}: nil here.
    let var = sigma_ref * sigma_ref;
    moments_match(&first, var).unwrap_or_else(|e| panic!("mean block: {e}"));
    moments_match(&second, var).unwrap_or_else(|e| panic!("triangle: {e}"));
}

/// The mean block averaged over many reports is `w·ū` (ū the average of the
/// centred, clipped inputs, computed here independently), to within the noise of
/// an average of N = 20 000 draws (sd σ_g/√N; bound 6 sd) plus ½ grid unit of
/// rounding. At ε = 100 the noise is small enough (σ ≈ 0.16) for the bound
/// (≈ 0.007 unit-ball units) to catch a wrong weight (w = 1 doubles block means of
/// 0.06–0.25) or a missing centre.
#[test]
fn joint_mean_block_averages_to_w_times_the_mean_of_u() {
    let (r, centre) = (4.0, vec![100.0, -50.0, 7.0, 0.0]);
    let c = joint(4, 100.0, r, centre.clone());
    assert!(c.sigma() < 0.2, "{}", c.sigma());
    let p = Perturber::new(c.clone());
    let mut noise = crate::DiscreteGaussianSampler::from_seed_for_simulation(5);
    let mut data = ChaCha20Rng::seed_from_u64(6);
    let n = 20_000;
    let shift = [1.5, -1.0, 0.5, 2.0];
    let (mut block, mut u_sum) = (vec![0f64; 4], vec![0f64; 4]);
    for _ in 0..n {
        let y: Vec<f64> = shift
            .iter()
            .map(|s| s + data.sample::<f64, _>(StandardNormal))
            .collect();
        let x: Vec<f64> = y.iter().zip(&centre).map(|(a, b)| a + b).collect();
        // u = (1 − 2⁻³²)·y / max(R, ‖y‖), y = x − c (recovered exactly enough: the
        // centres are integers, so x − c = y up to one rounding of x).
        let yn = norm(&y);
        for (s, v) in u_sum.iter_mut().zip(&y) {
            *s += v / r.max(yn) * (1.0 - CLIP_MARGIN);
        }
        let report = p.perturb(&x, &mut noise).unwrap();
        for (b, &v) in block.iter_mut().zip(&report[..4]) {
            *b += f64::from(v);
        }
    }
    let nf = n as f64;
    let bound = (6.0 * c.sigma_grid() / nf.sqrt() + 0.5) / c.grid_scale();
    for i in 0..4 {
        let got = block[i] / nf / c.grid_scale();
        let want = 0.5 * u_sum[i] / nf;
        assert!(
            (got - want).abs() < bound,
            "coordinate {i}: {got} vs w·ū = {want} (bound {bound})"
        );
        assert!(
            want.abs() > 5.0 * bound,
            "coordinate {i}: the test needs signal"
        );
    }
}

fn coarse(dim: u32, encoding: ldpcov_proto::v1::Encoding) -> Collection {
    let mut s = spec(dim, 1.0, 1e-6, 1.0);
    s.encoding = encoding as i32;
    Collection::from_spec(&s).expect("valid spec")
}

#[test]
fn stochastic_rounding_is_unbiased_with_the_exact_extra_variance() {
    use ldpcov_proto::v1::Encoding;
    for encoding in [Encoding::I16Le, Encoding::I8] {
        let c = coarse(40, encoding);
        let per = Perturber::new(c.clone());
        let mut noise = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(21);
        let x: Vec<f64> = (0..40).map(|i| ((i as f64) * 0.7).cos() * 0.1).collect();
        let step = c.wire_step();
        // Extra error e = wire·step − v of stochastic rounding, given r = v mod step:
        // e = step − r w.p. r/step, −r otherwise: E e = 0, E e² = r(step − r).
        let (mut sum_e, mut sum_e2, mut expected_e2, mut n) = (0f64, 0f64, 0f64, 0f64);
        for _ in 0..200 {
            let entries = per.perturb(&x, &mut noise).unwrap();
            let wire = per.to_wire(&entries, &mut noise);
            for (&v, &w) in entries.iter().zip(&wire) {
                let (v, w) = (i64::from(v), i64::from(w));
                assert!(w.abs() <= c.wire_max());
                let e = (w * step - v) as f64;
                let r = v.rem_euclid(step) as f64;
                sum_e += e;
                sum_e2 += e * e;
                expected_e2 += r * (step as f64 - r);
                n += 1.0;
            }
        }
        // n = 164 000 draws; |e| < step, so the mean has sd < step/√n and
        // mean(e²) has sd < step²/√n: allow 6 sd.
        let s = step as f64;
        assert!(
            (sum_e / n).abs() < 6.0 * s / n.sqrt(),
            "{encoding:?} bias {}",
            sum_e / n
        );
        assert!(
            (sum_e2 - expected_e2).abs() / n < 6.0 * s * s / n.sqrt(),
            "{encoding:?}: mean e² {} vs exact {}",
            sum_e2 / n,
            expected_e2 / n
        );
        // The target: at most 1% extra variance over the noise (i8 ≈ 0.04%).
        let ratio = (sum_e2 / n) / (c.sigma_grid() * c.sigma_grid());
        assert!(ratio < 0.01, "{encoding:?}: extra variance ratio {ratio}");
    }
}

#[test]
fn coarse_reports_decode_to_the_coarse_grid() {
    use ldpcov_proto::v1::Encoding;
    let c = coarse(5, Encoding::I8);
    let per = Perturber::new(c.clone());
    let mut noise = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(5);
    let report = per
        .report(&[0.3; 5], &mut noise, ReportId([1; 16]))
        .unwrap();
    assert_eq!(report.payload.len(), c.entries());
    assert_eq!(report.encoding, Encoding::I8 as i32);
    let grid = decode_payload(&c, report.encoding, &report.payload)
        .unwrap()
        .to_dense();
    assert!(grid.iter().all(|v| i64::from(*v) % c.wire_step() == 0));
    // Exact values stay exact: a multiple of the step is never moved.
    let exact = vec![3 * c.wire_step() as i32; c.entries()];
    assert_eq!(per.to_wire(&exact, &mut noise), vec![3; c.entries()]);
    // Clamped at ±wire_max.
    let huge = vec![i32::MAX; c.entries()];
    assert_eq!(per.to_wire(&huge, &mut noise), vec![127; c.entries()]);
}
/// FNV-1a 64 digests of [`report_bytes_are_pinned_for_fixed_seeds`]' reports,
/// computed on the code before the mechanism seam.
const PINNED_DIGESTS: [u64; 4] = [
    17_802_752_532_057_831_351,
    13_859_845_676_083_041_841,
    525_376_500_262_623_122,
    1_024_843_022_614_045_639,
];

/// The bytes a device sends are pinned for fixed seeds: i32, i16 and i8 reports,
/// second moment and mean and covariance (with a centre), the exact sampler and the
/// simulation sampler. The FNV-1a 64 digests were computed by this test on the code
/// before the mechanism seam (commit 7fac390); a change of sampler usage, rounding,
/// clamp or encoding moves them.
#[test]
fn report_bytes_are_pinned_for_fixed_seeds() {
    use crate::DiscreteGaussianSampler;
    use ldpcov_proto::v1::{Encoding, Moments};
    // FNV-1a 64.
    let digest = |bytes: &[u8]| {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let mut got = Vec::new();
    for (k, (encoding, moments)) in [
        (Encoding::I32Le, Moments::SecondMoment),
        (Encoding::I16Le, Moments::MeanAndCovariance),
        (Encoding::I8, Moments::SecondMoment),
        (Encoding::I8, Moments::MeanAndCovariance),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = spec(7, 1.0, 1e-6, 2.0);
        s.encoding = encoding as i32;
        s.moments = moments as i32;
        if moments == Moments::MeanAndCovariance {
            s.centre = vec![0.5, -0.25, 0.0, 1.0, 2.0, -1.0, 0.125];
        }
        let c = Collection::from_spec(&s).expect("valid spec");
        let per = Perturber::new(c);
        let mut data = ChaCha20Rng::seed_from_u64(40 + k as u64);
        let mut exact = DiscreteGaussianSampler::from_seed_for_simulation(50 + k as u64);
        let mut float = FloatGaussianNotPrivate::from_seed_for_simulation_not_private(60);
        let mut bytes = Vec::new();
        for _ in 0..20 {
            let x: Vec<f64> = (0..7)
                .map(|_| data.sample::<f64, _>(StandardNormal))
                .collect();
            let a = per.report(&x, &mut exact, ReportId([k as u8; 16])).unwrap();
            let b = per.report(&x, &mut float, ReportId([9; 16])).unwrap();
            bytes.extend(a.payload);
            bytes.extend(b.payload);
        }
        got.push(digest(&bytes));
    }
    assert_eq!(got, PINNED_DIGESTS);
}
