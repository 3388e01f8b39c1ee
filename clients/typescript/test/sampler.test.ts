// The TypeScript samplers on their own: the seeded generator against rand_chacha's
// published stream, statistical tests of the exact discrete Gaussian and of the rank-one
// mixture sampler with fixed seeds (bounds derived in the comments, each test shown to
// fail on a broken sampler), and the rank-one parameters' privacy arithmetic.
//
// Significance: z-tests accept |z| < 5 (5.7·10⁻⁷ two-sided per check).

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  capProbabilityUnits,
  type Cap,
  MAX_RANK_ONE_EPSILON,
  privacyLossBound,
  type RankOneParams,
  rankOneExpectedRounds,
  rankOneParams,
  stdNormalCdf,
} from "../src/calibration.js";
import { expNegBounds } from "../src/bigmath.js";
import { ChaCha20Rng, DiscreteGaussian, RandomBits, Sigma2 } from "../src/index.js";
import { liftedInput } from "../src/mechanism/rank_one.js";
import { RankOneSampler } from "../src/noise.js";
import type { WordSource } from "../src/rng.js";
import { collectionOf, vectors } from "./helpers.js";

const Z = 5;

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

// ---- the rank-one mixture sampler (noise/src/rank_one.rs, docs/PRIVACY.md §8.3–8.4) ----

const K = 40;
const M = 40;
const SCALE = 2 ** (K + M);

function samplerOf(p: RankOneParams, units = p.capProbabilityUnits): RankOneSampler {
  return new RankOneSampler(p.cap, K, M, p.gammaUnits, 16, p.tilt, units);
}

/** A generator that remembers the first word read after `mark()`: the report's mixture coin. */
class MarkedWords implements WordSource {
  readonly #inner: ChaCha20Rng;
  #marked = false;
  first = 0n;
  constructor(seed: bigint) {
    this.#inner = ChaCha20Rng.seedFromU64(seed);
  }
  mark(): void {
    this.#marked = true;
  }
  nextU32(): number {
    return this.#inner.nextU32();
  }
  nextU64(): bigint {
    const w = this.#inner.nextU64();
    if (this.#marked) {
      this.first = w;
      this.#marked = false;
    }
    return w;
  }
}

interface Report {
  /** The mixture coin's word. */
  coin: bigint;
  /** `t = ⟨y, ṽ⟩·2^{K+m}`, exactly. */
  t: bigint;
  /** `‖y‖²` (a float, only compared with). */
  norm2: number;
  offCap: number;
  cap: number;
}

function reports(s: RankOneSampler, v: bigint[], n: number, seed: bigint, onSphere = true): Report[] {
  const words = new MarkedWords(seed);
  const bits = new RandomBits(words);
  const out: Report[] = [];
  for (let i = 0; i < n; i++) {
    words.mark();
    const { draw, rounds } = onSphere ? s.sample(bits, v) : s.sampleUnchecked(bits, v);
    let t = 0n;
    let norm2 = 0;
    draw.forEach((k, j) => {
      t += k * v[j]!;
      const y = Number(k) / 2 ** K;
      norm2 += y * y;
    });
    out.push({ coin: words.first, t, norm2, offCap: rounds.offCap, cap: rounds.cap });
  }
  return out;
}

const inCap = (cap: Cap, threshold: bigint, t: bigint) => (cap === "symmetric" ? (t < 0n ? -t : t) >= threshold : t >= threshold);

/** `(mean, standard error)` of a sample. */
function meanSe(xs: number[]): [number, number] {
  const n = xs.length;
  const mean = xs.reduce((a, x) => a + x, 0) / n;
  const v = xs.reduce((a, x) => a + (x - mean) * (x - mean), 0) / (n - 1);
  return [mean, Math.sqrt(v / n)];
}

const phi = (x: number) => Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);

/**
 * The mixture's weight is exactly `p̂`: every report lies in the cap of its input if and
 * only if its first word (the coin) is below `P` (the cap component always lands in the
 * cap, the off-cap one never), checked report by report, at ε = 1 and 12, both caps. A
 * deterministic check: one report on the wrong side of the cap fails it. And the
 * symmetric cap's sign bit: the cap reports on the positive half-cap are
 * Binomial(N, ½) (|z| < 5); a sampler that skipped the sign would put all of them there.
 */
test("rank-one: the cap component is kept exactly when the coin word is below P", () => {
  const v = liftedInput([0.5, -0.3, 0.6]);
  for (const [cap, eps, seed] of [
    ["symmetric", 1, 41n],
    ["one_sided", 1, 42n],
    ["symmetric", 12, 43n],
    ["one_sided", 12, 44n],
  ] as const) {
    const p = rankOneParams(3, eps, cap);
    const s = samplerOf(p);
    const rs = reports(s, v, 1500, seed);
    let kept = 0;
    let positive = 0;
    for (const r of rs) {
      const coin = r.coin < p.capProbabilityUnits;
      assert.equal(inCap(cap, s.threshold, r.t), coin, `${cap} ε ${eps}: a report on the wrong side of the cap`);
      if (coin) {
        kept += 1;
        if (r.t > 0n) positive += 1;
      }
    }
    // And P itself: Binomial(n, p̂).
    const n = rs.length;
    const zKept = (kept - n * p.capProbability) / Math.sqrt(n * p.capProbability * (1 - p.capProbability));
    assert.ok(Math.abs(zKept) < Z, `${cap} ε ${eps}: ${kept}/${n} cap reports, p̂ ${p.capProbability} (${zKept.toFixed(1)} sd)`);
    if (cap === "symmetric") {
      const zSign = (positive - kept / 2) / Math.sqrt(kept / 4);
      assert.ok(Math.abs(zSign) < Z, `${cap} ε ${eps}: ${positive}/${kept} cap reports positive (${zSign.toFixed(1)} sd)`);
    } else {
      assert.equal(positive, kept);
    }
  }
});

/** A sampler whose tilt coin always accepts on the half-cap (the proposal's law, not the target's). */
class NoCoin extends RankOneSampler {
  override tiltCoin(rng: WordSource, over: bigint, halfCap: boolean): boolean {
    rng.nextU64();
    return halfCap;
  }
}

/**
 * Each component has the right law along the input (t = ⟨y, ũ⟩, ũ of norm ≈ 1, the
 * lattice's effect ~10⁻¹¹): in the cap, `E[t²] = 1 + γφ(γ)/Φ̄(γ)` (both caps: `|t| ≥ γ`
 * or `t ≥ γ`, the same conditional law of `|t|`); off the cap, `E[t²] = 1 − 2γφ(γ)/(1 − 2Φ̄(γ))`
 * (symmetric) or `1 − γφ(γ)/Φ(γ)` (one-sided); across the input, `E[‖y‖² − t²] = p`
 * (the orthogonal coordinates untouched by the tilt). Each within 5 standard errors
 * (from the sample). 3000 reports at ε = 1 and 8, both caps.
 *
 * Power: without the exact coin (every half-cap proposal accepted) the cap component is
 * `N(λ, 1)` conditioned on `t ≥ γ`: at ε = 1, one-sided (λ = 1, γ ≈ 1.04), its `E[t²]`
 * is about 3.7 instead of 2.6, with a standard error near 0.08 over the ~1000 cap
 * reports: about 13 sd, required above 5.
 */
test("rank-one: the cap and off-cap components have the lattice Gaussian's conditional laws", () => {
  const v = liftedInput([0.5, -0.3, 0.6]);
  const check = (p: RankOneParams, s: RankOneSampler, seed: bigint) => {
    const rs = reports(s, v, 3000, seed);
    const g = p.gamma;
    const tail = stdNormalCdf(-g);
    const tt = (r: Report) => (Number(r.t) / SCALE) ** 2;
    const capT = rs.filter((r) => inCap(p.cap, s.threshold, r.t)).map(tt);
    const offT = rs.filter((r) => !inCap(p.cap, s.threshold, r.t)).map(tt);
    const orth = rs.map((r) => r.norm2 - tt(r));
    const wantCap = 1 + (g * phi(g)) / tail;
    const wantOff = p.cap === "symmetric" ? 1 - (2 * g * phi(g)) / (1 - 2 * tail) : 1 - (g * phi(g)) / (1 - tail);
    const z = (xs: number[], want: number) => {
      const [mean, se] = meanSe(xs);
      return (mean - want) / se;
    };
    return { cap: z(capT, wantCap), off: z(offT, wantOff), orth: z(orth, 3) };
  };
  for (const [cap, eps, seed] of [
    ["symmetric", 1, 51n],
    ["one_sided", 1, 52n],
    ["symmetric", 8, 53n],
    ["one_sided", 8, 54n],
  ] as const) {
    const p = rankOneParams(3, eps, cap);
    const z = check(p, samplerOf(p), seed);
    assert.ok(Math.abs(z.cap) < Z && Math.abs(z.off) < Z && Math.abs(z.orth) < Z, `${cap} ε ${eps}: ${JSON.stringify(z)} sd`);
  }
  const p = rankOneParams(3, 1, "one_sided");
  const broken = new NoCoin(p.cap, K, M, p.gammaUnits, 16, p.tilt, p.capProbabilityUnits);
  const z = check(p, broken, 55n);
  assert.ok(z.cap > Z, `the proposal's law not caught: ${z.cap.toFixed(1)} sd`);
});

/**
 * The rounds do not depend on the input: over 2000 reports per direction (three on the
 * sphere: an axis, a mixed vector, u = 0), the off-cap rounds' total within 5 standard
 * errors of `n/(1 − q)` and the cap rounds' within 5 of `n/A`, `A = e^{λγ − λ²/2}·q₊`
 * (`rankOneExpectedRounds`; a sum of n Geometric(s) has mean `n/s`, variance
 * `n(1 − s)/s²`), at ε = 1 and 12, both caps. These are the new sampler's counts (the
 * old one's `1/Z` would be 2 at ε = 1 and ~10⁵ at ε = 12).
 *
 * Power: an input off the sphere (norm 0.8) has `A' = e^{λγ − 0.32λ²}·Φ̄(γ/0.8)`
 * (0.154 instead of 0.227 at ε = 1 symmetric; 0.026 instead of 0.097 at ε = 12): its
 * expected cap-round total is 24, 15, 127 and 62 standard errors away in the four
 * cases at n = 2000 (norm 0.9 would leave the one-sided ε = 12 case at 2 sd: the
 * tilt's gain and the smaller cap nearly cancel there), so it must fail the same test.
 */
test("rank-one: rounds per component match 1/(1 − q) and 1/A for every input", () => {
  const n = 2000;
  const zOf = (total: number, success: number) => ((total - n / success) / Math.sqrt(n * (1 - success))) * success;
  for (const [cap, eps, seed] of [
    ["symmetric", 1, 100n],
    ["one_sided", 1, 200n],
    ["symmetric", 12, 300n],
    ["one_sided", 12, 400n],
  ] as const) {
    const p = rankOneParams(3, eps, cap);
    const s = samplerOf(p);
    const [off, on] = rankOneExpectedRounds(p);
    const dirs = [
      [1, 0, 0],
      [0.5, -0.3, 0.6],
      [0, 0, 0],
    ];
    dirs.forEach((u, i) => {
      const rs = reports(s, liftedInput(u), n, seed + BigInt(i));
      const zOff = zOf(
        rs.reduce((a, r) => a + r.offCap, 0),
        1 / off,
      );
      const zCap = zOf(
        rs.reduce((a, r) => a + r.cap, 0),
        1 / on,
      );
      assert.ok(Math.abs(zOff) < Z && Math.abs(zCap) < Z, `${cap} ε ${eps} u ${u}: rounds ${zOff.toFixed(1)} / ${zCap.toFixed(1)} sd`);
    });
    const short = [BigInt(Math.floor(0.8 * 2 ** M)), 0n, 0n, 0n];
    const rs = reports(s, short, n, seed + 50n, false);
    const z = zOf(
      rs.reduce((a, r) => a + r.cap, 0),
      1 / on,
    );
    assert.ok(Math.abs(z) > Z, `${cap} ε ${eps}: an off-sphere input's cap rounds not detected (${z.toFixed(1)} sd)`);
  }
});

/**
 * The tilt coin's fast bounds contain `exp(−x/2^{K+m})·2^64` (against the big-integer
 * bounds at 64 bits) and are at most `2^12` units apart, for exponents 0 to past 44
 * and random fractions; and the coin's frequency is `exp(−λ·over/2^{K+m})` at a few
 * exponents (20 000 trials each, binomial |z| < 5; a coin off by 2 % at exp(−0.3) ≈ 0.74
 * is 4.7 sd away).
 */
test("rank-one: the tilt coin's fast bounds are certified and tight; its frequency is exp(−x)", () => {
  const p = rankOneParams(3, 8, "symmetric");
  assert.equal(p.tilt, 3);
  const s = samplerOf(p);
  const shift = BigInt(K + M);
  const den = 1n << shift;
  const rng = ChaCha20Rng.seedFromU64(77n);
  for (let i = 0; i < 1500; i++) {
    const n = BigInt(i % 50);
    const frac = ((rng.nextU64() << (shift - 64n)) | (rng.nextU64() & 0xffffn)) & (den - 1n);
    const x = i === 0 ? 0n : i === 1 ? 1n : i === 2 ? den - 1n : (n << shift) | frac;
    const [lo, hi] = s.expNegFast(x);
    const [eLo, eHi] = expNegBounds(x, den, 64);
    assert.ok(lo <= eHi && hi >= eLo, `x ${x}: fast [${lo}, ${hi}] vs exact [${eLo}, ${eHi}]`);
    assert.ok(hi - lo <= 1n << 12n, `x ${x}: width ${hi - lo}`);
  }
  assert.deepEqual(s.expNegFast(0n), [1n << 64n, 1n << 64n]);
  for (const x of [0, 0.3, 1 + 1e-9, 2.75]) {
    const over = BigInt(Math.floor((x / p.tilt) * SCALE));
    const want = Math.exp((-p.tilt * Number(over)) / SCALE);
    const trials = 20_000;
    let hits = 0;
    for (let i = 0; i < trials; i++) if (s.tiltCoin(rng, over, true)) hits += 1;
    const sd = Math.sqrt(trials * want * (1 - want));
    if (want === 1) assert.equal(hits, trials);
    else assert.ok(Math.abs(hits - trials * want) < Z * sd, `coin exp(-${x}): ${hits}/${trials}, want ${want}`);
  }
});

test("rank-one: the sampler refuses bad inputs and parameters", () => {
  const p = rankOneParams(2, 1, "symmetric");
  const s = samplerOf(p);
  const bits = new RandomBits(ChaCha20Rng.seedFromU64(5n));
  const one = 1n << BigInt(M);
  assert.throws(() => s.sample(bits, [one / 2n, 0n, 0n]), /not on the sphere/);
  assert.throws(() => s.sample(bits, [one, 1n, 0n]), /not on the sphere/);
  assert.throws(() => s.sample(bits, [one + 1n, 0n, 0n]), /not on the sphere/);
  // The band's lower edge 2^{2m} − 2^{m+1}: ⌈√·⌉ is accepted, ⌊√·⌋ (below it) is not.
  const band = one * one - 2n * one;
  let edge = 0n;
  for (let b = 1n << 40n; b > 0n; b >>= 1n) if ((edge + b) * (edge + b) <= band) edge += b;
  assert.ok(edge * edge < band && (edge + 1n) * (edge + 1n) > band);
  assert.equal(s.sample(bits, [edge + 1n, 0n, 0n]).draw.length, 3);
  assert.throws(() => s.sample(bits, [edge, 0n, 0n]), /not on the sphere/);
  assert.equal(s.sample(bits, liftedInput([0.3, -0.4])).draw.length, 3);
  const make = (k: number, m: number, g: bigint, tilt: number, units: bigint) => () => new RankOneSampler("symmetric", k, m, g, 16, tilt, units);
  assert.throws(make(0, 40, 1n, 1, 1n), /lattice bits/);
  assert.throws(make(51, 40, 1n, 1, 1n), /lattice bits/);
  assert.throws(make(40, 41, 1n, 1, 1n), /input bits/);
  assert.throws(make(40, 40, 0n, 1, 1n), /cap threshold/);
  assert.throws(make(4, 4, 1n, 1, 1n), /cap threshold/);
  assert.throws(make(40, 40, 1n, 0, 1n), /tilt/);
  assert.throws(make(40, 40, 1n, 256, 1n), /tilt/);
  assert.throws(make(40, 40, 1n, 1, 0n), /cap probability/);
});

/**
 * The parameters' privacy arithmetic, as `nominal_epsilon_keeps_the_total_within_epsilon`
 * in Rust, over ε = 0.01, 0.25, 0.5, …, 16 and p = 1, 20, 1000, 4096, both caps: the
 * bound at `p̂` is at most ε and above ε_n; the weight set for ε itself would exceed ε
 * (the slack's charge is needed); `ln(p̂/(1 − p̂)) − ln(q/(1 − q))` is just below ε_n
 * (rounded down, by less than 10⁻⁹); λ = round(γ) ≥ 1; ε above 16 is refused.
 */
test("rank-one parameters: the privacy-loss bound at p̂ is within ε up to ε = 16", () => {
  const grid = [0.01, 9.37];
  for (let e = 0.25; e <= MAX_RANK_ONE_EPSILON; e += 0.25) grid.push(e);
  for (const cap of ["symmetric", "one_sided"] as const) {
    for (const dim of [1, 20, 1000, 4096]) {
      for (const eps of grid) {
        const p = rankOneParams(dim, eps, cap);
        const q = p.moments.capMass;
        const what = `${cap} p ${dim} ε ${eps}`;
        assert.ok(p.nominalEpsilon < eps && p.privacyLossBound <= eps && p.privacyLossBound > p.nominalEpsilon, what);
        assert.ok(eps - p.nominalEpsilon < (eps <= 8 ? 1e-5 : 3e-3), what);
        const atEps = Number(capProbabilityUnits(eps, q)) / 2 ** 64;
        assert.ok(privacyLossBound(atEps, q, p.eta) > eps, what);
        const logTheta = Math.log(p.capProbability / (1 - p.capProbability)) - Math.log(q / (1 - q));
        assert.ok(logTheta < p.nominalEpsilon && logTheta > p.nominalEpsilon - 1e-9, `${what}: p̂ ${p.capProbability}`);
        assert.equal(p.capProbability, Number(p.capProbabilityUnits) / 2 ** 64);
        assert.equal(p.tilt, Math.max(1, Math.round(p.gamma)));
      }
    }
  }
  assert.equal(MAX_RANK_ONE_EPSILON, 16);
  assert.doesNotThrow(() => rankOneParams(10, 16, "symmetric"));
  assert.throws(() => rankOneParams(10, 16.5, "symmetric"), RangeError);
  // The Rust unit test's numbers at p = 20, ε = 1 (symmetric): off-cap 1/(1 − q) ≈ 1.265, cap 1/A ≈ 4.49.
  const [off, on] = rankOneExpectedRounds(rankOneParams(20, 1, "symmetric"));
  assert.ok(Math.abs(off - 1.265) < 0.01 && Math.abs(on - 4.49) < 0.02, `${off} ${on}`);
});
