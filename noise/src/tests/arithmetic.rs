//! Tests: arithmetic building blocks.

use super::*;

#[test]
fn big_exp_bounds_bracket_exp() {
    let cases: [(u64, u64); 10] = [
        (0, 1),
        (1, 3),
        (1, 1),
        (2, 1),
        (7, 5),
        (22, 7),
        (1, 1 << 40),
        (100, 3),
        (500, 1),
        (123_456_789, 1_000_000),
    ];
    for (a, b) in cases {
        let (big_a, big_b) = (BigUint::from(a), BigUint::from(b));
        let want = (-(a as f64) / b as f64).exp();
        for p in [64u64, 128, 300, 1000] {
            let (lo, hi) = exp_neg_bounds(&big_a, &big_b, p);
            assert!(lo <= hi);
            if want * 2f64.powi(p as i32) > 1e30 || p == 1000 {
                // Compare the leading digits: lo and hi within a few units.
                let width = &hi - &lo;
                assert!(width <= BigUint::from(8u32), "{a}/{b} p {p}: width {width}");
            }
            if p <= 300 && want > 1e-80 {
                let scale = 2f64.powi(p as i32);
                let lo_f = lo.to_string().parse::<f64>().unwrap() / scale;
                let hi_f = hi.to_string().parse::<f64>().unwrap() / scale;
                assert!(
                    lo_f <= want * (1.0 + 1e-14) && want <= hi_f * (1.0 + 1e-14),
                    "{a}/{b} p {p}: {lo_f} {want} {hi_f}"
                );
            }
            // Nested precisions agree: the bounds at p+64 lie inside those at p.
            let (lo2, hi2) = exp_neg_bounds(&big_a, &big_b, p + 64);
            assert!((&lo << 64u32) <= hi2 && lo2 <= (&hi << 64u32));
        }
    }
    // exp(-0) is exactly one; e^{-j} for j ≥ p short-cuts to [0, 1].
    assert_eq!(
        exp_neg_bounds(&BigUint::ZERO, &BigUint::from(5u32), 70),
        (pow2(70), pow2(70))
    );
    assert_eq!(
        exp_neg_bounds(&BigUint::from(200u32), &BigUint::from(1u32), 100),
        (BigUint::ZERO, BigUint::from(1u32))
    );
}

/// e^{-1/2}·2^400 against an independent evaluation with a 400-digit rational
/// series: Σ_{k<120} (−1/2)^k/k! with a common denominator.
#[test]
fn big_exp_matches_an_independent_series() {
    let k_max = 120u64;
    let mut den = BigUint::from(1u32);
    for k in 1..k_max {
        den *= 2 * k; // 2^k·k!
    }
    // Σ (−1)^k·den/(2^k k!)
    let (mut pos, mut neg) = (BigUint::ZERO, BigUint::ZERO);
    let mut term = den.clone();
    for k in 0..k_max {
        if k > 0 {
            term /= 2 * k;
        }
        if k % 2 == 0 {
            pos += &term;
        } else {
            neg += &term;
        }
    }
    let value = ((pos - neg) << 400u32) / &den;
    let (lo, hi) = exp_neg_bounds(&BigUint::from(1u32), &BigUint::from(2u32), 400);
    assert!(lo <= &value + 1u32 && value <= &hi + 1u32);
    assert!(&hi - &lo <= BigUint::from(4u32));
}

#[test]
fn fast_exp_bounds_bracket_the_big_bounds() {
    let mut rng = ChaCha12Rng::seed_from_u64(3);
    for i in 0..3000u64 {
        let g: u64 = match i {
            0 => 0,
            1 => (1 << 62) - 1,
            2 => 1,
            _ => rng.random_range(0..1u64 << 62) >> rng.random_range(0..62),
        };
        let (lo, hi) = exp_neg_q63(g, g);
        let (big_lo, big_hi) = exp_neg_bounds(&BigUint::from(g), &pow2(64), 63 + 64);
        // lo·2^64 ≤ e^{-γ}·2^127 ≤ hi·2^64
        assert!(BigUint::from(lo) << 64u32 <= big_hi, "g {g}");
        assert!(big_lo <= BigUint::from(hi) << 64u32, "g {g}");
        assert!(hi - lo <= 40, "g {g}: width {}", hi - lo);
        // An interval of γ: still bracketing both ends.
        let g2 = g
            .saturating_add(rng.random_range(0..1000))
            .min((1 << 62) - 1);
        let (lo2, hi2) = exp_neg_q63(g, g2);
        assert!(lo2 <= lo && hi2 >= hi);
    }
    assert_eq!(exp_neg_q63(0, 0), (1 << 63, 1 << 63));
}

#[test]
fn wide_multiply_and_shift() {
    let mut rng = ChaCha12Rng::seed_from_u64(4);
    for _ in 0..5000 {
        let a: u128 = rng.random::<u128>() >> rng.random_range(0..128);
        let b: u64 = rng.random::<u64>() >> rng.random_range(0..64);
        let s: u32 = rng.random_range(0..200);
        let exact = BigUint::from(a) * BigUint::from(b);
        let limbs = mul_u128_u64(a, b);
        let back = BigUint::from(limbs[0])
            + (BigUint::from(limbs[1]) << 64u32)
            + (BigUint::from(limbs[2]) << 128u32);
        assert_eq!(back, exact);
        let floor = &exact >> s;
        let ceil = shr_ceil(&exact, u64::from(s));
        match shr192_small(limbs, s) {
            Some((f, c)) => {
                assert_eq!(BigUint::from(f), floor);
                assert_eq!(BigUint::from(c), ceil);
            }
            None => assert!(ceil >= BigUint::from(1u64 << 62)),
        }
    }
}
