//! The rank-one sampler against its specification (parameters from
//! `ldpcov_privacy::mechanism::rank_one`): the density ratio of two inputs within e^ε, the moments
//! the estimator relies on, round counts that do not depend on the input, the fast
//! exp(−x) bounds of the tilt coin, the triangular dither's exact moments and the exact
//! Bernoulli(exp(−x)).
//!
//! Significance as in the parent module: z-tests accept |z| < 5 (5.7·10⁻⁷ two-sided);
//! where a maximum over many bins is taken, 5.5 (one-sided 1.9·10⁻⁸ per bin, below
//! 10⁻⁵ over the 256 bins and 6 pairs of a check).

use super::{RandomBits, Z, assert_binomial};
use crate::bigint::exp_neg_bounds;
use crate::{
    BernoulliExpNeg, CapShape, RankOneRounds, RankOneSampler, RankOneSamplerError, TriangularDither,
};
use ldpcov_privacy::mechanism::rank_one::{
    Cap, GAMMA_BITS, INPUT_BITS, LATTICE_BITS, RankOneParams, cap_probability_units, grid_input,
    lift_to_sphere,
};
use num_bigint::BigUint;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha12Rng;

/// The bin-ratio threshold: a maximum over at most 256 bins × 6 ordered pairs.
const Z_MAX: f64 = 5.5;

fn shape(cap: Cap) -> CapShape {
    match cap {
        Cap::Symmetric => CapShape::Symmetric,
        Cap::OneSided => CapShape::OneSided,
    }
}

/// The sampler of `params`, with the cap weight set for `epsilon_run` instead of the
/// nominal ε if given (a deliberately broken mechanism).
fn sampler(params: &RankOneParams, epsilon_run: Option<f64>) -> RankOneSampler {
    let units = epsilon_run.map_or(params.cap_probability_units, |e| {
        cap_probability_units(e, params.moments.cap_mass)
    });
    RankOneSampler::new(
        shape(params.cap),
        LATTICE_BITS,
        INPUT_BITS,
        params.gamma_units,
        GAMMA_BITS,
        params.tilt,
        units,
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

/// `n` reports at p = 1: a histogram over a 16 × 16 grid of bins of width ½ on
/// `[−4, 4]²` (the outer bins extend to infinity) and the count in `region`.
/// `off_sphere` reports with the direction as given, without the norm check.
fn histogram_p1(
    s: &RankOneSampler,
    v: &[i64],
    n: usize,
    seed: u64,
    off_sphere: bool,
    region: &dyn Fn(f64, f64) -> bool,
) -> (Vec<u64>, u64) {
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
    let mut h = vec![0u64; 256];
    let mut in_region = 0;
    let mut k = [0i64; 2];
    for _ in 0..n {
        if off_sphere {
            s.sample_unchecked(&mut bits, v, &mut k);
        } else {
            s.sample(&mut bits, v, &mut k).unwrap();
        }
        let (y1, y2) = (coordinate(k[0]), coordinate(k[1]));
        let bin = |x: f64| ((x * 2.0).floor() + 8.0).clamp(0.0, 15.0) as usize;
        h[16 * bin(y1) + bin(y2)] += 1;
        in_region += u64::from(region(y1, y2));
    }
    (h, in_region)
}

/// The privacy excess of `(c_a, c_b)` for one event: given `N = c_a + c_b`, under
/// `P_a = e^ε·P_b` (the boundary of ε-LDP, with equal report counts) `c_b` is
/// Binomial(N, π), `π = 1/(1 + e^ε)`; fewer `c_b` than that means `P_a > e^ε P_b`.
/// Returns `(Nπ − c_b)/√(Nπ(1 − π))` (a standard normal at most, under ε-LDP), or
/// −∞ when `Nπ < 10` (too few for the normal approximation).
fn excess(ca: u64, cb: u64, epsilon: f64) -> f64 {
    let pi = 1.0 / (1.0 + epsilon.exp());
    let mean = (ca + cb) as f64 * pi;
    if mean < 10.0 {
        return f64::NEG_INFINITY;
    }
    (mean - cb as f64) / (mean * (1.0 - pi)).sqrt()
}

/// The worst bin excess over all ordered pairs of histograms.
fn worst_bin(hists: &[Vec<u64>], epsilon: f64) -> f64 {
    let mut worst = f64::NEG_INFINITY;
    for (i, a) in hists.iter().enumerate() {
        for (j, b) in hists.iter().enumerate() {
            if i != j {
                for (&ca, &cb) in a.iter().zip(b) {
                    worst = worst.max(excess(ca, cb, epsilon));
                }
            }
        }
    }
    worst
}

/// The number of reports at p = 1 per ε: enough that the region "in the cap of u = 1,
/// off the cap of u = 0 (or −1)" has `Nπ ≥ 15` expected reports of the second input
/// (`N ≈ n·p̂`, `π ≈ e^{−ε}`).
fn reports_at(eps: f64) -> usize {
    if eps <= 2.0 {
        100_000
    } else if eps <= 8.0 {
        150_000
    } else {
        2_000_000
    }
}

/// Empirical privacy at p = 1 (ũ ∈ R²) for u = 1, −1, 0 at ε = 1, 8 and 12, both caps:
///
/// * every bin, for every ordered pair, within e^ε: the conditional-binomial excess
///   ([`excess`]) below 5.5 wherever `Nπ ≥ 10`;
/// * the event `R` = "in the cap of u = 1, off the cap of the other input" (chosen before
///   looking at the data), where the true ratio is `p̂(1 − Q′)/((1 − p̂)·Q·…) ≈ e^{ε_n}`:
///   its excess below 5, and (the check is tight) the counts inconsistent with a ratio
///   below `¾·e^ε` at no more than 5 sd: `(c_b − Nπ_¾)/√(Nπ_¾) < 5`, `π_¾ = 1/(1 + ¾e^ε)`.
///   A sampler that weighted the cap as for ε/2 fails this by far (next test).
#[test]
fn bin_ratios_stay_within_e_epsilon_at_p1() {
    let inputs = [lifted(&[1.0]), lifted(&[-1.0]), lifted(&[0.0])];
    for (cap, eps) in [
        (Cap::OneSided, 1.0),
        (Cap::Symmetric, 1.0),
        (Cap::OneSided, 8.0),
        (Cap::Symmetric, 8.0),
        (Cap::Symmetric, 12.0),
    ] {
        let params = RankOneParams::new(1, eps, cap).unwrap();
        let s = sampler(&params, None);
        let (region, other) = event_r(&params);
        let n = reports_at(eps);
        let runs: Vec<_> = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| histogram_p1(&s, v, n, 10 + i as u64, false, &region))
            .collect();
        let hists: Vec<_> = runs.iter().map(|r| r.0.clone()).collect();
        let z = worst_bin(&hists, eps);
        assert!(z < Z_MAX, "{cap:?} ε {eps}: a bin exceeds e^ε by {z:.1} sd");
        let (ca, cb) = (runs[0].1, runs[other].1);
        let z = excess(ca, cb, eps);
        assert!(
            z.is_finite() && z < Z,
            "{cap:?} ε {eps}: R exceeds e^ε by {z:.1} sd"
        );
        let half = (ca + cb) as f64 / (1.0 + 0.75 * eps.exp());
        let z_tight = (cb as f64 - half) / half.sqrt();
        assert!(
            z_tight < Z,
            "{cap:?} ε {eps}: R's ratio {:.1} is below ¾e^ε by {z_tight:.1} sd: not tight",
            ca as f64 / cb as f64
        );
    }
}

/// The event R of the tests (in the cap of u = 1 and off the cap of the other input)
/// and the other input's index: u = 0 (index 2) for the symmetric cap, whose cap is
/// `|y₂| ≥ γ`; u = −1 (index 1) for the one-sided cap (`y₁ ≤ −γ`).
fn event_r(params: &RankOneParams) -> (Box<dyn Fn(f64, f64) -> bool>, usize) {
    let g = params.gamma;
    match params.cap {
        Cap::Symmetric => (
            Box::new(move |y1: f64, y2: f64| y1.abs() >= g && y2.abs() < g),
            2,
        ),
        Cap::OneSided => (Box::new(move |y1: f64, _| y1 >= g), 1),
    }
}

/// The same checks catch broken mechanisms: (a) the cap weighted as for 2ε while
/// claiming ε (R's ratio is then e^{2ε}: at ε = 1 and 8 the other input's count in R
/// falls to about `Nπ·e^{−ε}`, beyond 5 sd); (b) the cap weighted as for ε/2 (the
/// tightness check against `¾·e^ε` fails: the ratio is `e^{ε/2}`); (c) an input off the sphere (norm ½, whose cap
/// `|y₁| ≥ 2γ` has a much smaller mass `Q`: in the bins `|y₁| ≥ 2γ, |y₂| < γ` the ratio
/// to u = 0 is `e^ε·q/Q ≈ 12·e^ε` at ε = 1).
#[test]
fn broken_mechanisms_fail_the_bin_ratio_check() {
    let inputs = [lifted(&[1.0]), lifted(&[-1.0]), lifted(&[0.0])];
    for (cap, eps) in [(Cap::OneSided, 1.0), (Cap::Symmetric, 8.0)] {
        let params = RankOneParams::new(1, eps, cap).unwrap();
        let (region, other) = event_r(&params);
        let n = reports_at(eps);
        let count = |s: &RankOneSampler, i: usize| {
            histogram_p1(s, &inputs[i], n, 20 + i as u64, false, &region).1
        };
        let broken = sampler(&params, Some(2.0 * eps));
        let z = excess(count(&broken, 0), count(&broken, other), eps);
        assert!(
            z > Z_MAX,
            "{cap:?} ε {eps}: weight for 2ε not caught ({z:.1} sd)"
        );
        let lax = sampler(&params, Some(0.5 * eps));
        let (ca, cb) = (count(&lax, 0), count(&lax, other));
        let half = (ca + cb) as f64 / (1.0 + 0.75 * eps.exp());
        let z_tight = (cb as f64 - half) / half.sqrt();
        assert!(
            z_tight > Z,
            "{cap:?} ε {eps}: weight for ε/2 not caught ({z_tight:.1} sd)"
        );
    }

    let eps = 1.0;
    let params = RankOneParams::new(1, eps, Cap::Symmetric).unwrap();
    let s = sampler(&params, None);
    let half = [1i64 << (INPUT_BITS - 1), 0];
    let none = |_: f64, _: f64| false;
    let hists = [
        histogram_p1(&s, &half, 100_000, 30, true, &none).0,
        histogram_p1(&s, &lifted(&[0.0]), 100_000, 31, false, &none).0,
    ];
    let z = worst_bin(&hists, eps);
    assert!(
        z > Z_MAX,
        "an input off the sphere not caught: worst excess {z:.1} sd"
    );
}

/// One report's moments at p = 3, ε = 1, 8 and 12, both caps: `E[yyᵀ] = I + κũũᵀ` and
/// (one-sided) `E[y] = cũ` entry by entry within 5 standard errors of the exact
/// variance (`CapMoments::second_moment_entry_variance`, `mean_entry_variance`), and
/// the sample variance of each `yᵢyⱼ` within 5 of its own standard errors (from the
/// sample's fourth central moment) of that closed form (which checks e₄: at ε = 8 its
/// term changes the variance of `y₃²` several-fold). 30 000 reports per case.
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
        for (seed, eps) in [(1u64, 1.0), (2, 8.0), (3, 12.0)] {
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

/// The rounds per report do not depend on the input, at ε = 1, 8 and 12: for five
/// directions (the axes of u, its negative, a mixed vector, u = 0) the total off-cap
/// rounds of 10 000 reports within 5 standard errors of `n/(1 − q)` and the cap
/// rounds within 5 of `n/A` (negative binomial: a Geometric(s) has mean `1/s` and
/// variance `(1 − s)/s²`); an input off the sphere (norm 0.9: `A = e^{λγ − 0.405λ²}Φ̄(γ/0.9)`,
/// 0.19 instead of 0.22 at ε = 1, 0.07 instead of 0.1 at ε = 12) fails the cap test by
/// more than 10 sd.
#[test]
fn rounds_do_not_depend_on_the_input() {
    let n = 10_000u64;
    let rounds = |s: &RankOneSampler, v: &[i64], seed: u64, off: bool| {
        let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
        let mut k = vec![0i64; v.len()];
        let mut total = RankOneRounds::default();
        for _ in 0..n {
            let r = if off {
                s.sample_unchecked(&mut bits, v, &mut k)
            } else {
                s.sample(&mut bits, v, &mut k).unwrap()
            };
            total.off_cap += r.off_cap;
            total.cap += r.cap;
        }
        total
    };
    // Standardised distance of a sum of n Geometric(success) from its mean.
    let z_of = |total: u64, success: f64| {
        let nf = n as f64;
        (total as f64 - nf / success) / (nf * (1.0 - success)).sqrt() * success
    };
    for cap in [Cap::Symmetric, Cap::OneSided] {
        for (eps, seed) in [(1.0, 100u64), (8.0, 200), (12.0, 300)] {
            let params = RankOneParams::new(3, eps, cap).unwrap();
            let s = sampler(&params, None);
            let (off, on) = params.expected_rounds();
            let dirs = [
                [1.0, 0.0, 0.0],
                [0.0, 0.0, -1.0],
                [0.5, -0.3, 0.6],
                [0.1, 0.2, -0.05],
                [0.0, 0.0, 0.0],
            ];
            for (i, u) in dirs.iter().enumerate() {
                let r = rounds(&s, &lifted(u), seed + i as u64, false);
                let (z_off, z_cap) = (z_of(r.off_cap, 1.0 / off), z_of(r.cap, 1.0 / on));
                assert!(
                    z_off.abs() < Z && z_cap.abs() < Z,
                    "{cap:?} ε {eps} u {u:?}: rounds {z_off:.1} / {z_cap:.1} sd from n/(1 − q), n/A"
                );
            }
            // Norm 0.9 (norm ½ would make A astronomically small at ε = 12).
            let short = [(0.9 * (1u64 << INPUT_BITS) as f64) as i64, 0, 0, 0];
            let r = rounds(&s, &short, seed + 50, true);
            let z = z_of(r.cap, 1.0 / on);
            assert!(
                z.abs() > Z,
                "{cap:?} ε {eps}: an off-sphere input's cap rounds not detected ({z:.1} sd)"
            );
        }
    }
}

/// The tilt coin's fast bounds contain `exp(−x/2^{K+m})·2^64` (checked against the
/// big-integer bounds at 64 bits) and are at most `2^12` units apart (so the slow path
/// runs with probability below `2^−52`), over exponents from 0 to past 44 and random
/// fractions; and the coin's frequency is `exp(−x)` at a few exponents (including one
/// just above an integer and 0).
#[test]
fn tilt_coin_bounds_are_certified_and_tight() {
    let params = RankOneParams::new(3, 8.0, Cap::Symmetric).unwrap();
    let s = sampler(&params, None);
    let shift = LATTICE_BITS + INPUT_BITS;
    let den = BigUint::from(1u32) << shift;
    let mut rng = ChaCha12Rng::seed_from_u64(77);
    let to_u128 = |b: &BigUint| u128::try_from(b).unwrap();
    for i in 0..4000u64 {
        let n = u128::from(i % 50);
        let frac = u128::from(rng.next_u64()) << (shift - 64) | u128::from(rng.next_u64() & 0xffff);
        let x = match i {
            0 => 0,
            1 => 1,
            2 => (1u128 << shift) - 1,
            _ => (n << shift) | (frac & ((1u128 << shift) - 1)),
        };
        let (lo, hi) = s.exp_neg_fast(x);
        let (e_lo, e_hi) = exp_neg_bounds(&BigUint::from(x), &den, 64);
        let (e_lo, e_hi) = (to_u128(&e_lo), to_u128(&e_hi));
        assert!(
            lo <= e_hi && hi >= e_lo,
            "x {x}: fast [{lo}, {hi}] vs exact [{e_lo}, {e_hi}]"
        );
        assert!(hi - lo <= 1 << 12, "x {x}: width {}", hi - lo);
    }
    // λ = 3 at ε = 8: the coin is Bernoulli(exp(−3·over/2^{K+m})).
    let lambda = f64::from(params.tilt);
    for x in [0.0, 0.3, 1.0 + 1e-9, 2.75] {
        let over = (x / lambda * 2f64.powi(shift as i32)) as u128;
        let p = (-lambda * over as f64 / 2f64.powi(shift as i32)).exp();
        let trials = 40_000u64;
        let hits = (0..trials)
            .filter(|_| s.tilt_coin(&mut rng, over, true))
            .count() as u64;
        assert_binomial(hits, trials, p, &format!("tilt coin exp(-{x})"));
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
    let new = |k, m, g, b, l, p| RankOneSampler::new(CapShape::Symmetric, k, m, g, b, l, p);
    assert!(matches!(
        new(0, 40, 1, 16, 1, 1),
        Err(RankOneSamplerError::LatticeBits(0))
    ));
    assert!(matches!(
        new(51, 40, 1, 16, 1, 1),
        Err(RankOneSamplerError::LatticeBits(51))
    ));
    assert!(matches!(
        new(40, 41, 1, 16, 1, 1),
        Err(RankOneSamplerError::InputBits(41))
    ));
    assert!(matches!(
        new(40, 40, 0, 16, 1, 1),
        Err(RankOneSamplerError::Gamma { .. })
    ));
    assert!(matches!(
        new(4, 4, 1, 16, 1, 1),
        Err(RankOneSamplerError::Gamma { .. })
    ));
    assert!(matches!(
        new(40, 40, 1, 16, 0, 1),
        Err(RankOneSamplerError::Tilt(0))
    ));
    assert!(matches!(
        new(40, 40, 1, 16, 256, 1),
        Err(RankOneSamplerError::Tilt(256))
    ));
    assert!(matches!(
        new(40, 40, 1, 16, 1, 0),
        Err(RankOneSamplerError::CapProbability)
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
