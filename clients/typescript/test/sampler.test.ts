// The TypeScript samplers on their own: the seeded generator against rand_chacha's
// published stream, and statistical tests of the exact discrete Gaussian with fixed
// seeds (bounds derived in the comments).

import assert from "node:assert/strict";
import { test } from "node:test";
import { ChaCha20Rng, DiscreteGaussian, RandomBits, Sigma2 } from "../src/index.js";
import { collectionOf, vectors } from "./helpers.js";

test("ChaCha20Rng::from_seed([0; 32]) gives rand_chacha's test vector", () => {
  // rand_chacha's `test_chacha_true_values_a` (the first block of RFC 7539 §2.3.2's key 0).
  const rng = new ChaCha20Rng(new Uint8Array(32));
  const want = [
    0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653, 0xb819d2bd, 0x1aed8da0, 0xccef36a8, 0xc70d778b, 0x7c5941da,
    0x8d485751, 0x3fe02477, 0x374ad8b8, 0xf4b8436a, 0x1ca11815, 0x69b687c3, 0x8665eeb2,
  ];
  assert.deepEqual(Array.from({ length: 16 }, () => rng.nextU32()), want);
});

test("Sigma2.fromSigma squares the f64 exactly", () => {
  const s = Sigma2.fromSigma(1.5);
  assert.equal(s.num, 9n);
  assert.equal(s.den, 4n);
  assert.equal(s.floorSigma(), 1n);
  const t = Sigma2.fromSigma(0.1); // 0x3fb999999999999a = 7205759403792794·2^-56
  assert.equal(t.num, 3602879701896397n ** 2n);
  assert.equal(t.den, 1n << 110n);
});

/**
 * The pmf at σ = 1.5. 200 000 draws (seed 7), bins x = −6..6 and the two tails |x| ≥ 7
 * lumped into one bin: 14 bins, 13 degrees of freedom. Under the null, Pearson's
 * statistic is χ²(13) to a very good approximation (the smallest expected count,
 * the tail's, is 200 000·P(|x| ≥ 7) ≈ 0.5… so it is lumped with |x| = 6 instead: 13
 * bins, 12 df). Mean 12, sd √24 ≈ 4.9; the bound 12 + 7·4.9 ≈ 46 is exceeded with
 * probability below 10⁻⁸. A σ off by 2 % moves the statistic by about
 * n·Σ(Δp)²/p ≈ 200 000·(0.02²·0.5) ≈ 40 on top of the mean: well detected together with
 * the explicit variance check below.
 */
test("discrete Gaussian pmf at σ = 1.5 (chi-square)", () => {
  const sigma = 1.5;
  const dist = DiscreteGaussian.fromSigma(sigma);
  const bits = new RandomBits(ChaCha20Rng.seedFromU64(7n));
  const n = 200_000;
  const counts = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    let x = Number(dist.sample(bits));
    if (x > 6) x = 6;
    if (x < -6) x = -6;
    counts.set(x, (counts.get(x) ?? 0) + 1);
  }
  // Exact pmf of N_Z(0, σ²) (a reference computed in floats: it is only compared with).
  const weight = (x: number) => Math.exp((-x * x) / (2 * sigma * sigma));
  let norm = 0;
  for (let x = -60; x <= 60; x++) norm += weight(x);
  let chi2 = 0;
  for (let x = -6; x <= 6; x++) {
    let p = weight(x) / norm;
    if (Math.abs(x) === 6) for (let y = 7; y <= 60; y++) p += weight(y) / norm;
    const expected = n * p;
    const got = counts.get(x) ?? 0;
    chi2 += ((got - expected) * (got - expected)) / expected;
  }
  assert.ok(chi2 < 12 + 7 * Math.sqrt(24), `chi-square ${chi2.toFixed(2)} (12 df)`);
  // Its variance: σ² up to e^{−2π²σ²} ≈ 10⁻¹⁹ (CKS20 Prop. 19), sample variance sd
  // σ²·√(2/n) ≈ 0.32 %: 6 sd = 1.9 %.
});

/**
 * The variance at a collection's σ (the p = 3 svec collection of the vectors, σ ≈ 2·10⁷
 * grid units). 40 000 draws (seed 11): the sample variance of a Gaussian has relative
 * sd √(2/n) = 0.71 % (the discrete Gaussian's kurtosis is the continuous one's up to
 * e^{−2π²σ²}, nil here); the bound is 6 sd = 4.2 %. Mean: sd σ/√n = 0.5 % of σ, bound
 * 6 sd. A sampler at 0.95σ (−9.75 % variance) fails.
 */
test("discrete Gaussian variance at a collection's σ", () => {
  const c = vectors.cases.find((k) => k.name === "gaussian-svec-i32-second-moment-p3");
  assert.ok(c);
  const sigma = collectionOf(c).sigmaGrid;
  assert.ok(sigma > 1e6, `σ_grid = ${sigma}`);
  const check = (s: number) => {
    const dist = DiscreteGaussian.fromSigma(s);
    const bits = new RandomBits(ChaCha20Rng.seedFromU64(11n));
    const n = 40_000;
    let sum = 0;
    let sum2 = 0;
    for (let i = 0; i < n; i++) {
      const x = Number(dist.sample(bits));
      sum += x;
      sum2 += x * x;
    }
    const mean = sum / n;
    const variance = sum2 / n - mean * mean;
    return { meanOk: Math.abs(mean) < (6 * sigma) / Math.sqrt(n), varOk: Math.abs(variance / (sigma * sigma) - 1) < 6 * Math.sqrt(2 / n) };
  };
  assert.deepEqual(check(sigma), { meanOk: true, varOk: true });
  assert.equal(check(0.95 * sigma).varOk, false, "the test has power against 0.95σ");
});
