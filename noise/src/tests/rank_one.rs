//! The rank-one sampler against its specification (parameters from
//! `ldpcov_privacy::mechanism::rank_one`): the density ratio of two inputs within e^ε, the moments
//! the estimator relies on, an input-independent acceptance rate, the triangular
//! dither's exact moments and the exact Bernoulli(exp(−x)).
//!
//! Significance as in the parent module: z-tests accept |z| < 5 (5.7·10⁻⁷ two-sided);
//! where a maximum over many bins is taken, 5.5 (one-sided 1.9·10⁻⁸ per bin, below
//! 10⁻⁵ over the 256 bins and 9 pairs of a check).

use super::{RandomBits, Z, assert_binomial};
use crate::{BernoulliExpNeg, CapShape, RankOneSampler, RankOneSamplerError, TriangularDither};
use ldpcov_privacy::mechanism::rank_one::{
    Cap, GAMMA_BITS, INPUT_BITS, LATTICE_BITS, RankOneParams, grid_input, lift_to_sphere,
};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

/// The bin-ratio threshold: a maximum over at most 256 bins × 9 ordered pairs.
const Z_MAX: f64 = 5.5;

fn shape(cap: Cap) -> CapShape {
    match cap {
        Cap::Symmetric => CapShape::Symmetric,
        Cap::OneSided => CapShape::OneSided,
    }
}

/// The sampler of `params`, run at `epsilon_run` instead of the nominal ε if given
/// (a deliberately broken mechanism).
fn sampler(params: &RankOneParams, epsilon_run: Option<f64>) -> RankOneSampler {
    RankOneSampler::new(
        shape(params.cap),
        LATTICE_BITS,
        INPUT_BITS,
        params.gamma_units,
        GAMMA_BITS,
        epsilon_run.unwrap_or(params.nominal_epsilon),
    )
    .unwrap()
}

fn lifted(u: &[f64]) -> Vec<i64> {
    lift_to_sphere(&grid_input(u).unwrap()).unwrap()
}

/// `k·2^−K` as an f64 (the rounding here is the test's, not the mechanism's).
fn coordinate(k: i64) -> f64 {
    k as f64 / (1u64 << LATTICE_BITS) as f64
}

/// Histogram of `n` reports at p = 1 over a 16 × 16 grid of bins of width ½ on
/// `[−4, 4]²` (the outer bins extend to infinity), and the total rejection rounds.
/// `off_sphere` reports with the direction as given, without the norm check.
fn histogram_p1(s: &RankOneSampler, v: &[i64], n: usize, seed: u64, off_sphere: bool) -> Vec<u64> {
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
    let mut h = vec![0u64; 256];
    let mut k = [0i64; 2];
    for _ in 0..n {
        if off_sphere {
            s.sample_unchecked(&mut bits, v, &mut k);
        } else {
            s.sample(&mut bits, v, &mut k).unwrap();
        }
        let bin = |x: i64| ((coordinate(x) * 2.0).floor() + 8.0).clamp(0.0, 15.0) as usize;
        h[16 * bin(k[0]) + bin(k[1])] += 1;
    }
    h
}

/// The largest standardised excess `(c_a − e^ε c_b)/√(c_a + e^{2ε} c_b)` over bins with
/// at least 50 reports between the two inputs, and the largest observed ratio
/// `c_a/c_b` over bins where both have at least 400. Under ε-LDP every bin has
/// `P_a ≤ e^ε P_b`, so the excess is at most a standard normal (Poisson counts).
fn excess(a: &[u64], b: &[u64], epsilon: f64) -> (f64, f64) {
    let e = epsilon.exp();
    let (mut z_max, mut ratio_max) = (f64::NEG_INFINITY, 0.0f64);
    for (&ca, &cb) in a.iter().zip(b) {
        let (ca, cb) = (ca as f64, cb as f64);
        if ca + cb >= 50.0 {
            z_max = z_max.max((ca - e * cb) / (ca + e * e * cb).sqrt());
        }
        if ca >= 400.0 && cb >= 400.0 {
            ratio_max = ratio_max.max(ca / cb);
        }
    }
    (z_max, ratio_max)
}

/// The worst excess and ratio over all ordered pairs of histograms.
fn worst_pair(hists: &[Vec<u64>], epsilon: f64) -> (f64, f64) {
    let mut worst = (f64::NEG_INFINITY, 0.0f64);
    for (i, a) in hists.iter().enumerate() {
        for (j, b) in hists.iter().enumerate() {
            if i != j {
                let (z, r) = excess(a, b, epsilon);
                worst = (worst.0.max(z), worst.1.max(r));
            }
        }
    }
    worst
}

/// Empirical privacy at p = 1 (ũ ∈ R²) for u = 1, −1, 0: 100 000 reports per input,
/// every bin's frequency ratio within e^ε (standardised excess below 5.5), and the
/// bound nearly attained (some well-filled bin has a ratio above 0.75·e^ε: in a bin
/// inside one input's cap and outside the other's the true ratio is e^{ε_nominal},
/// so the check is tight, not vacuous).
#[test]
fn bin_ratios_stay_within_e_epsilon_at_p1() {
    let inputs = [lifted(&[1.0]), lifted(&[-1.0]), lifted(&[0.0])];
    for (cap, eps) in [
        (Cap::OneSided, 1.0),
        (Cap::Symmetric, 1.0),
        (Cap::Symmetric, 2.0),
    ] {
        let params = RankOneParams::new(1, eps, cap).unwrap();
        let s = sampler(&params, None);
        let hists: Vec<_> = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| histogram_p1(&s, v, 100_000, 10 + i as u64, false))
            .collect();
        let (z, ratio) = worst_pair(&hists, eps);
        assert!(z < Z_MAX, "{cap:?} ε {eps}: a bin exceeds e^ε by {z:.1} sd");
        assert!(
            ratio > 0.75 * eps.exp(),
            "{cap:?} ε {eps}: largest ratio {ratio:.2}, the check is not tight"
        );
    }
}

/// The same check catches broken mechanisms: (a) the off-cap weight e^{−2ε} while
/// claiming ε (the bin ratio reaches e^{2ε}); (b) an input off the sphere (norm ½, so
/// its cap `|y₁| ≥ 2γ` has a smaller normal mass and its normaliser differs: at ε = 2
/// the ratio reaches e^ε·Z/Z′ ≈ 1.8·e^ε in the bins `|y₁| ≥ 2γ, |y₂| < γ`, which
/// hold about 1.6 % of the reports: 400 000 reports put the excess near 9 sd).
#[test]
fn broken_mechanisms_fail_the_bin_ratio_check() {
    let inputs = [lifted(&[1.0]), lifted(&[-1.0]), lifted(&[0.0])];
    let eps = 1.0;
    let params = RankOneParams::new(1, eps, Cap::OneSided).unwrap();
    let broken = sampler(&params, Some(2.0 * eps));
    let hists: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, v)| histogram_p1(&broken, v, 100_000, 20 + i as u64, false))
        .collect();
    let (z, _) = worst_pair(&hists, eps);
    assert!(z > Z_MAX, "r = e^-2ε not caught: worst excess {z:.1} sd");

    let eps = 2.0;
    let params = RankOneParams::new(1, eps, Cap::Symmetric).unwrap();
    let s = sampler(&params, None);
    let half = [1i64 << (INPUT_BITS - 1), 0];
    let hists = [
        histogram_p1(&s, &half, 400_000, 30, true),
        histogram_p1(&s, &lifted(&[0.0]), 400_000, 31, false),
    ];
    let (z, _) = worst_pair(&hists, eps);
    assert!(
        z > Z_MAX,
        "an input off the sphere not caught: worst excess {z:.1} sd"
    );
}

/// One report's moments at p = 3: `E[yyᵀ] = I + κũũᵀ` and (one-sided) `E[y] = cũ`
/// entry by entry within 5 standard errors of the exact variance
/// (`CapMoments::second_moment_entry_variance`), and the sample variance of each
/// `yᵢyⱼ` within 5 of its own standard errors of that formula (which checks e₄: at
/// ε = 4 its term moves the variance by half). 30 000 reports per case.
#[test]
fn second_moment_and_mean_are_unbiased() {
    let u = [0.5, -0.3, 0.6];
    let v = lifted(&u);
    let a: Vec<f64> = v
        .iter()
        .map(|&x| x as f64 / (1u64 << INPUT_BITS) as f64)
        .collect();
    let n = 30_000usize;
    for cap in [Cap::Symmetric, Cap::OneSided] {
        for (seed, eps) in [(1u64, 1.0), (2, 4.0)] {
            let params = RankOneParams::new(3, eps, cap).unwrap();
            let m = params.moments;
            let s = sampler(&params, None);
            let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
            let mut k = [0i64; 4];
            let mut sum1 = [0f64; 4];
            // Power sums 1..4 of yᵢyⱼ, i ≤ j.
            let mut pow = [[[0f64; 4]; 4]; 4];
            for _ in 0..n {
                s.sample(&mut bits, &v, &mut k).unwrap();
                let y = k.map(coordinate);
                for i in 0..4 {
                    sum1[i] += y[i];
                    for j in i..4 {
                        let x = y[i] * y[j];
                        for (p, slot) in pow[i][j].iter_mut().enumerate() {
                            *slot += x.powi(p as i32 + 1);
                        }
                    }
                }
            }
            let nf = n as f64;
            for i in 0..4 {
                if cap == Cap::OneSided {
                    let mean = sum1[i] / nf;
                    let want = m.mean_scale * a[i];
                    let se = (m.mean_entry_variance(a[i] * a[i]) * m.mean_scale * m.mean_scale
                        / nf)
                        .sqrt();
                    assert!(
                        (mean - want).abs() < Z * se,
                        "{cap:?} ε {eps}: E y{i} = {mean}, want {want} (se {se})"
                    );
                }
                for j in i..4 {
                    let [s1, s2, s3, s4] = pow[i][j].map(|x| x / nf);
                    let want = f64::from(u8::from(i == j)) + m.kappa * a[i] * a[j];
                    let var = m.second_moment_entry_variance(a[i] * a[i], a[j] * a[j], i == j)
                        * m.kappa
                        * m.kappa;
                    let se = (var / nf).sqrt();
                    assert!(
                        (s1 - want).abs() < Z * se,
                        "{cap:?} ε {eps}: E y{i}y{j} = {s1}, want {want} (se {se})"
                    );
                    // Sample variance and its standard error from the central moments.
                    let c2 = s2 - s1 * s1;
                    let c4 = s4 - 4.0 * s3 * s1 + 6.0 * s2 * s1 * s1 - 3.0 * s1.powi(4);
                    let se_var = ((c4 - c2 * c2) / nf).sqrt();
                    assert!(
                        (c2 - var).abs() < Z * se_var,
                        "{cap:?} ε {eps}: Var y{i}y{j} = {c2}, want {var} (se {se_var})"
                    );
                }
            }
        }
    }
}

/// The rounds per report do not depend on the input: for five directions (the axes
/// of u, its negative, a mixed vector, u = 0) the total rounds of 20 000 reports is
/// within 5 standard errors of `n/Z` (negative binomial: variance `n(1 − Z)/Z²`); an
/// input off the sphere (norm ½, whose cap mass differs) fails the same test.
#[test]
fn acceptance_rate_does_not_depend_on_the_input() {
    let n = 20_000u64;
    let rounds = |s: &RankOneSampler, v: &[i64], seed: u64, off: bool| {
        let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
        let mut k = vec![0i64; v.len()];
        (0..n)
            .map(|_| {
                if off {
                    s.sample_unchecked(&mut bits, v, &mut k)
                } else {
                    s.sample(&mut bits, v, &mut k).unwrap()
                }
            })
            .sum::<u64>()
    };
    let z_of = |total: u64, zacc: f64| {
        let nf = n as f64;
        (total as f64 - nf / zacc) / (nf * (1.0 - zacc)).sqrt() * zacc
    };
    for cap in [Cap::Symmetric, Cap::OneSided] {
        let params = RankOneParams::new(3, 2.0, cap).unwrap();
        let s = sampler(&params, None);
        let zacc = params.moments.acceptance;
        let dirs = [
            [1.0, 0.0, 0.0],
            [0.0, 0.0, -1.0],
            [0.5, -0.3, 0.6],
            [0.1, 0.2, -0.05],
            [0.0, 0.0, 0.0],
        ];
        for (i, u) in dirs.iter().enumerate() {
            let z = z_of(rounds(&s, &lifted(u), 100 + i as u64, false), zacc);
            assert!(z.abs() < Z, "{cap:?} u {u:?}: rounds {z:.1} sd from n/Z");
        }
        let half = [1i64 << (INPUT_BITS - 1), 0, 0, 0];
        let z = z_of(rounds(&s, &half, 200, true), zacc);
        assert!(
            z.abs() > Z,
            "{cap:?}: an off-sphere input's rate not detected ({z:.1} sd)"
        );
    }
}

#[test]
fn sampler_refuses_bad_inputs_and_parameters() {
    let params = RankOneParams::new(2, 1.0, Cap::Symmetric).unwrap();
    let s = sampler(&params, None);
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(5));
    let mut out = [0i64; 3];
    let one = 1i64 << INPUT_BITS;
    assert_eq!(
        s.sample(&mut bits, &[one, 0], &mut out),
        Err(RankOneSamplerError::Length {
            input: 2,
            output: 3
        })
    );
    assert_eq!(
        s.sample(&mut bits, &[one / 2, 0, 0], &mut out),
        Err(RankOneSamplerError::NotOnSphere)
    );
    assert_eq!(
        s.sample(&mut bits, &[one, 1, 0], &mut out),
        Err(RankOneSamplerError::NotOnSphere)
    );
    assert_eq!(
        s.sample(&mut bits, &[one + 1, 0, 0], &mut out),
        Err(RankOneSamplerError::NotOnSphere)
    );
    // The band's lower edge is accepted, one below it is not.
    let edge = (((1u128 << (2 * INPUT_BITS)) - (2u128 << INPUT_BITS)) as f64).sqrt() as i64;
    assert!(s.sample(&mut bits, &[edge + 1, 0, 0], &mut out).is_ok());
    assert_eq!(
        s.sample(&mut bits, &[edge - 1, 0, 0], &mut out),
        Err(RankOneSamplerError::NotOnSphere)
    );
    assert!(s.sample(&mut bits, &lifted(&[0.3, -0.4]), &mut out).is_ok());
    let new = |k, m, g, b, e| RankOneSampler::new(CapShape::Symmetric, k, m, g, b, e);
    assert!(matches!(
        new(0, 40, 1, 16, 1.0),
        Err(RankOneSamplerError::LatticeBits(0))
    ));
    assert!(matches!(
        new(51, 40, 1, 16, 1.0),
        Err(RankOneSamplerError::LatticeBits(51))
    ));
    assert!(matches!(
        new(40, 61, 1, 16, 1.0),
        Err(RankOneSamplerError::InputBits(61))
    ));
    assert!(matches!(
        new(40, 40, 0, 16, 1.0),
        Err(RankOneSamplerError::Gamma { .. })
    ));
    assert!(matches!(
        new(4, 4, 1, 16, 1.0),
        Err(RankOneSamplerError::Gamma { .. })
    ));
    assert!(matches!(
        new(40, 40, 1, 16, -1.0),
        Err(RankOneSamplerError::Epsilon(_))
    ));
    assert!(matches!(
        new(40, 40, 1, 16, f64::NAN),
        Err(RankOneSamplerError::Epsilon(_))
    ));
}

/// The dither's first and second error moments are exactly 0 and ¼ coarse unit² for
/// every fine value, enumerated over every dither value (b = 1, 3, 5; fine values
/// covering every fractional position, both signs): the sums over the `2^{2b+1}`
/// equally likely dithers are compared as integers. A rectangular dither (only U₁)
/// would give `f(1 − f)`-dependent second moments and fail.
#[test]
fn dither_moments_are_exact_for_every_value() {
    for b in [1u32, 3, 5] {
        let d = TriangularDither::new(b).unwrap();
        let count = 1i128 << (2 * b + 1);
        let span = 3i64 << b;
        for value in -span..=span {
            let (mut s1, mut s2) = (0i128, 0i128);
            for r in 0..(1u64 << (2 * b + 1)) {
                // Error in fine units: output·2^b − value.
                let e = i128::from(d.quantise_with(value, r)) * (1 << b) - i128::from(value);
                assert!(
                    e.abs() < 3 << (b - 1),
                    "b {b} value {value}: error {e} beyond 1.5 steps"
                );
                s1 += e;
                s2 += e * e;
            }
            assert_eq!(s1, 0, "b {b} value {value}: biased");
            // E[e²] = ¼·2^{2b} fine units².
            assert_eq!(
                4 * s2,
                count << (2 * b),
                "b {b} value {value}: second moment"
            );
        }
    }
    assert!(TriangularDither::new(0).is_err() && TriangularDither::new(32).is_err());
}

/// The wire dither as deployed (b = K − 11 = 29) from a real bit stream: mean error
/// and second moment within 5 standard errors (error sd ½ step; `e²` has variance
/// `E[e⁴] − 1/16 ≤ 1.5⁴`) at a few values, and the i16 clamp.
#[test]
fn wire_dither_is_unbiased_from_random_bits() {
    let b = LATTICE_BITS - 11;
    let d = TriangularDither::new(b).unwrap();
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(9));
    let n = 200_000;
    for value in [0i64, 1, (1 << b) / 3, -(5 << b) - 12345, (1 << (b - 1)) + 1] {
        let (mut s1, mut s2) = (0f64, 0f64);
        for _ in 0..n {
            let e = (d.quantise(value, &mut bits) as f64) - value as f64 / (1u64 << b) as f64;
            s1 += e;
            s2 += e * e;
        }
        let (m1, m2) = (s1 / n as f64, s2 / n as f64);
        assert!(
            m1.abs() < Z * (0.25 / n as f64).sqrt(),
            "value {value}: mean error {m1}"
        );
        assert!(
            (m2 - 0.25).abs() < Z * (5.0625 / n as f64).sqrt(),
            "value {value}: E e² {m2}"
        );
    }
    assert_eq!(d.quantise_i16(40_000 << b, &mut bits), i16::MAX);
    assert_eq!(d.quantise_i16(-(40_000 << b), &mut bits), -i16::MAX);
}

/// BernoulliExpNeg reads the f64 exactly and has frequency exp(−x).
#[test]
fn exact_bernoulli_of_an_f64() {
    let b = BernoulliExpNeg::new(0.75).unwrap();
    let (num, den) = b.exponent();
    assert_eq!(num * 4u32, den * 3u32);
    let b = BernoulliExpNeg::new(3.0).unwrap();
    assert_eq!(
        b.exponent().0,
        &(num_bigint::BigUint::from(3u32) * b.exponent().1)
    );
    assert!(BernoulliExpNeg::new(-0.5).is_err() && BernoulliExpNeg::new(f64::INFINITY).is_err());
    let mut rng = ChaCha12Rng::seed_from_u64(3);
    for x in [0.0, 1e-300, 0.4, 1.5, 4.25] {
        let b = BernoulliExpNeg::new(x).unwrap();
        let n = 50_000u64;
        let k = (0..n).filter(|_| b.sample(&mut rng)).count() as u64;
        assert_binomial(k, n, (-x).exp(), &format!("Bernoulli(exp(-{x}))"));
    }
}
