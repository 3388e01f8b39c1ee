//! Tests: the random-bit reservoir, the alias table and the envelope.

use super::*;

/// The reservoir hands out the generator's bit stream in order, each bit once.
#[test]
fn random_bits_hand_out_the_stream_once() {
    let mut rng = ChaCha12Rng::seed_from_u64(7);
    let words: Vec<u64> = (0..400).map(|_| rng.next_u64()).collect();
    let bit = |i: usize| (words[i / 64] >> (i % 64)) & 1;
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(7));
    let mut sizes = ChaCha12Rng::seed_from_u64(8);
    let mut pos = 0;
    while pos + 63 < 64 * words.len() {
        let k = sizes.random_range(0..=63u32);
        let got = bits.take(k);
        let want = (0..k as usize).fold(0u64, |acc, i| acc | bit(pos + i) << i);
        assert_eq!(got, want, "take({k}) at bit {pos}");
        pos += k as usize;
    }
    assert_eq!(format!("{bits:?}"), "RandomBits { .. }");
    // `sample` (fresh reservoir per call) is the same sampler.
    let dist = DiscreteGaussian::from_sigma(1.5).unwrap();
    let mut rng = ChaCha12Rng::seed_from_u64(9);
    let samples: Vec<i64> = (0..100_000).map(|_| dist.sample(&mut rng)).collect();
    let (m, probs) = dg_pmf(1.5);
    assert_chi2(&histogram(&samples, m), &probs, "sample() σ=1.5");
}

#[test]
fn alias_table_reproduces_the_weights_exactly() {
    let weights = [5u64, 0, 13, 1, 7, 6, 0, 0];
    let table = build_alias(&weights, 4);
    let mut mass = [0u64; 8];
    for (k, &(prob, alias)) in table.iter().enumerate() {
        mass[k] += prob;
        mass[alias as usize] += 4 - prob;
    }
    assert_eq!(mass, weights);
    // And for a real table.
    for sigma in [0.5, 3.0, 1e6] {
        let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
        let cap = 1u64 << dist.q_bits;
        let mut mass = vec![0u64; dist.table.len()];
        for (k, &e) in dist.table.iter().enumerate() {
            let prob = e & 0xffff_ffff;
            mass[k] += prob;
            mass[(e >> 32) as usize] += cap - prob;
        }
        for (i, bin) in dist.bins.iter().enumerate() {
            assert_eq!(mass[2 * i], bin.w_core);
            assert_eq!(mass[2 * i + 1], bin.w_cap);
        }
        assert_eq!(mass[dist.two_bins], dist.w_tail);
        assert_eq!(mass.iter().sum::<u64>(), cap * dist.table.len() as u64);
    }
}

/// κ as an exact fraction kn/2^ke, times m.
fn kappa_times(dist: &DiscreteGaussian, m: &BigUint) -> (BigUint, BigUint) {
    (BigUint::from(dist.kn) * m, pow2(dist.ke))
}

/// Independent check of the envelope: for every bin,
/// w_core ≤ κ·W·f(a+W−1) and κ·W·f(a) ≤ w_core + w_cap, with f evaluated directly
/// at 256 bits (not through the construction's recurrences); for the tail,
/// X0·B ≥ σ² and w_tail ≥ 2κ·B·f(X0). Also: the dummy weight is small.
fn assert_envelope(dist: &DiscreteGaussian) {
    let p = 256;
    let w = 1u64 << dist.w_bits;
    let f = |x: u64| {
        let (a, b) = dist.gamma(u128::from(x));
        exp_neg_bounds(&a, &b, p)
    };
    let (kw, den) = kappa_times(dist, &BigUint::from(w));
    for (i, bin) in dist.bins.iter().enumerate() {
        let a = i as u64 * w;
        let (_, fa_hi) = f(a);
        let (fb_lo, _) = f(a + w - 1);
        // w_core·den·2^p ≤ kw·f_lo(b−1)  and  kw·f_hi(a) ≤ (w_core + w_cap)·den·2^p
        assert!(
            (BigUint::from(bin.w_core) * &den) << p <= &kw * fb_lo,
            "bin {i}"
        );
        assert!(
            &kw * fa_hi <= (BigUint::from(bin.w_core + bin.w_cap) * &den) << p,
            "bin {i}"
        );
    }
    let b = 1u64 << dist.b_bits;
    assert!(&dist.d * dist.x0 * b >= dist.n, "X0·B ≥ σ²");
    let (_, fx0_hi) = f(dist.x0);
    let (k2b, den) = kappa_times(dist, &BigUint::from(2 * b));
    assert!(&k2b * fx0_hi <= (BigUint::from(dist.w_tail) * den) << p);
    let cap = 1u64 << dist.q_bits;
    let mut dummy = 0u64;
    for (k, &e) in dist.table.iter().enumerate() {
        let prob = e & 0xffff_ffff;
        for (piece, mass) in [(k, prob), ((e >> 32) as usize, cap - prob)] {
            if piece > dist.two_bins {
                dummy += mass;
            }
        }
    }
    let total = cap * dist.table.len() as u64;
    assert!(
        (dummy as f64) < 1e-3 * total as f64,
        "dummy {dummy} of {total}"
    );
}

#[test]
fn envelope_is_certified() {
    for sigma in [0.5, 1.0, 3.0, 20.0, 1e3, 1e6, 1.005e8, 2e9] {
        assert_envelope(&DiscreteGaussian::from_sigma(sigma).unwrap());
    }
    assert_envelope(&DiscreteGaussian::with_layout(
        Sigma2::from_ratio(9, 1).unwrap(),
        1,
        4,
    ));
    assert_envelope(&DiscreteGaussian::with_layout(
        Sigma2::from_ratio(2500, 1).unwrap(),
        2,
        4,
    ));
    assert_envelope(&DiscreteGaussian::new(
        Sigma2::from_ratio(1, 1 << 16).unwrap(),
    ));
}

/// The large-σ layouts take the cheap path: one word per proposal, caps of about 1 %.
#[test]
fn layout_of_the_production_sigmas() {
    for (sigma, single) in [
        (3.0, true),
        (1e6, true),
        (1.005e8, true),
        (2e9, true),
        (1e12, true),
        (1e15, false),
    ] {
        let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
        assert_eq!(dist.single_word, single, "σ = {sigma}");
        assert_eq!(dist.q_bits, ALIAS_BITS);
        let caps: u64 = dist.bins.iter().map(|b| b.w_cap).sum();
        let frac = caps as f64 / (dist.table.len() as f64 * (1u64 << dist.q_bits) as f64);
        assert!(frac < 0.015, "σ = {sigma}: caps {frac}");
    }
}

/// Whenever the fast cap test decides, the exact α (256-bit bounds) agrees. Points
/// are drawn at random and also right at the boundary u = ⌊α·2^64⌋ (±1), where the
/// fast test must abstain rather than guess.
#[test]
fn fast_cap_decisions_agree_with_the_exact_ones() {
    let mut rng = ChaCha12Rng::seed_from_u64(11);
    for sigma in [20.0, 1e3, 1e6, 1.005e8, 2e9] {
        let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
        let (mut decided, mut total) = (0, 0);
        for _ in 0..300 {
            let bin = rng.random_range(0..dist.bins.len());
            let off = rng.random::<u64>() & ((1 << dist.w_bits) - 1);
            let x = ((bin as u64) << dist.w_bits) | off;
            let b = dist.bins[bin];
            if b.w_cap == 0 {
                continue;
            }
            let (g_num, g_den) = dist.gamma(u128::from(x));
            let alpha = ExpAffine {
                s_num: BigUint::from(dist.kn) << dist.w_bits,
                s_den: pow2(dist.ke),
                c: BigUint::from(b.w_core),
                d: BigUint::from(b.w_cap),
                g_num,
                g_den,
            };
            let (lo, hi) = alpha.bounds(256);
            let boundary = u64::try_from(&(&lo >> 192u32)).unwrap_or(u64::MAX);
            for u in [
                rng.random::<u64>(),
                boundary,
                boundary.saturating_sub(1),
                boundary.saturating_add(1),
            ] {
                total += 1;
                match dist.cap_fast(bin, off, u) {
                    Some(true) => {
                        decided += 1;
                        assert!((BigUint::from(u) + 1u32) << 192u32 <= lo, "σ {sigma} x {x}");
                    }
                    Some(false) => {
                        decided += 1;
                        assert!(BigUint::from(u) << 192u32 >= hi, "σ {sigma} x {x}");
                    }
                    None => {}
                }
            }
        }
        // Random u decide; the three boundary points mostly abstain.
        assert!(
            decided * 4 >= total,
            "σ {sigma}: decided {decided} of {total}"
        );
    }
}
