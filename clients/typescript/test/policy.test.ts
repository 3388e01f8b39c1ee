// The device's shuffle policy and the amplification bound it computes itself: the
// TypeScript variation-ratio and FMT21 bounds agree with the Rust ones (the tables of
// accounting/src/variation_ratio.rs's tests), a device that insists on shuffling refuses
// what falls short before any noise is drawn (as client/src/policy.rs), and n = 10⁸ is
// fast enough to compute on a device.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type MessageInitShape } from "@bufbuild/protobuf";
import { type CollectionSpecSchema, LocalMechanism, type ShuffleSpecSchema } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import {
  AggregatorClient,
  AmplificationError,
  checkPolicy,
  Collection,
  DEFAULT_PRIVACY_POLICY,
  fmt21Epsilon,
  type NoiseSampler,
  PolicyViolationError,
  type PrivacyPolicy,
  shuffledEpsilon,
  ShufflePolicyViolationError,
  SpecError,
  variationRatioDelta,
  variationRatioEpsilon,
} from "../src/index.js";

/**
 * (ε0, n, δ, ε) of `REFERENCE` in accounting/src/variation_ratio.rs (an independent
 * implementation; the Rust bound agrees with it to 10⁻⁴, and at the paper's points to
 * its printed digits): a spread of ε0, n up to 10⁸ and δ.
 */
const VARIATION_RATIO: readonly [number, number, number, number][] = [
  [8, 1_000_000, 1e-8, 0.3811182568],
  [6, 100_000, 1e-8, 0.4474217563],
  [8, 1_000_000, 1e-6, 0.3036944063],
  [8, 1_000_000, 1e-7, 0.3440920417],
  [8, 100_000, 1e-6, 1.176647646],
  [1, 1_000, 1e-6, 0.1486706164],
  [1, 1_000, 1e-4, 0.09741054574],
  [1, 1_000_000, 1e-8, 0.005011620848],
  [1, 100_000_000, 1e-8, 0.000431321429],
  [2, 100_000, 1e-6, 0.03318724898],
  [4, 1_000, 1e-8, 2.849714505],
  [4, 10_000_000, 1e-6, 0.009834421129],
  [6, 1_000, 1e-6, 5.999988114],
  [6, 100_000_000, 1e-9, 0.01312429594],
  [9.37, 1_000_000, 1e-6, 0.653497138],
  [9.37, 100_000, 1e-6, 9.36495326],
  [10, 10_000_000, 1e-8, 0.3241791425],
  [12, 10_000_000, 1e-8, 1.00675261],
  [12, 100_000_000, 1e-6, 0.218934257],
  [14, 100_000_000, 1e-9, 0.9146863532],
  [16, 100_000_000, 1e-6, 15.91971061],
];

/** (ε0, n, δ, FMT21 ε) of `FMT21` in the same test module (printed by the Rust code). */
const FMT21: readonly [number, number, number, number][] = [
  [0.5, 1_000, 1e-6, 0.070524216],
  [1, 1_000_000, 1e-6, 0.004335403],
  [2, 100_000, 1e-8, 0.058763504],
  [4, 10_000, 1e-6, 0.600909233],
  [6, 100_000, 1e-6, 0.524180889],
  [8, 1_000_000, 1e-6, 0.444469452],
  [8, 1_000_000, 1e-8, 0.556639671],
  [10, 1_000_000, 1e-6, 1.597061157],
  [10, 100_000_000, 1e-8, 0.138555169],
  [12, 100_000_000, 1e-6, 0.318779469],
  [16, 100_000_000, 1e-6, 15.999722481],
];

const relative = (got: number, want: number) => Math.abs(got / want - 1);

test("the variation-ratio bound agrees with the Rust one within 1e-5", () => {
  for (const [eps0, n, delta, want] of VARIATION_RATIO) {
    const got = variationRatioEpsilon(eps0, n, delta);
    assert.ok(relative(got, want) <= 1e-5, `ε0 ${eps0} n ${n} δ ${delta}: ${got}, Rust ${want}`);
    // Never optimistic: the returned ε's δ is within the target, and never above ε0.
    assert.ok(got <= eps0);
    if (got < eps0) assert.ok(variationRatioDelta(eps0, n, got) <= delta);
  }
});

test("the paper's values (Wang et al. 2024, δ = 1e-8) lie between its lower and upper bounds", () => {
  for (const [eps0, n, upper, lower] of [
    [8, 1_000_000, 0.383, 0.381],
    [6, 100_000, 0.449, 0.447],
  ] as const) {
    const eps = variationRatioEpsilon(eps0, n, 1e-8);
    assert.ok(eps >= lower - 0.0005 && eps <= upper, `${eps0} ${n}: ${eps}`);
  }
});

test("FMT21 agrees with the Rust one, and the combined bound is the smaller", () => {
  for (const [eps0, n, delta, want] of FMT21) {
    const got = fmt21Epsilon(eps0, n, delta);
    assert.ok(relative(got, want) <= 1e-5, `ε0 ${eps0} n ${n} δ ${delta}: ${got}, Rust ${want}`);
    const combined = shuffledEpsilon(eps0, n, delta);
    assert.equal(combined, Math.min(got, variationRatioEpsilon(eps0, n, delta)));
    if (want < 0.99 * eps0) assert.ok(combined < 0.9 * want, `${eps0} ${n} ${delta}: ${combined} vs FMT21 ${want}`);
  }
});

test("one report is the local guarantee; bad input", () => {
  for (const [eps0, eps] of [
    [1, 0],
    [1, 0.5],
    [4, 2],
  ]) {
    const want = (Math.exp(eps0!) - Math.exp(eps!)) / (1 + Math.exp(eps0!));
    assert.ok(Math.abs(variationRatioDelta(eps0!, 1, eps!) - want) <= 1e-15);
  }
  assert.equal(variationRatioDelta(1, 5, 1), 0);
  assert.equal(variationRatioEpsilon(8, 1_000, 1e-8), 8);
  assert.equal(variationRatioEpsilon(0.01, 100_000_000, 1e-6), 0);
  assert.equal(variationRatioEpsilon(150, 1_000_000, 1e-6), 150);
  for (const [eps0, n, delta] of [
    [0, 100, 1e-6],
    [Number.NaN, 100, 1e-6],
    [Infinity, 100, 1e-6],
    [1, 1, 1e-6],
    [1, 2.5, 1e-6],
    [1, 100, 0],
    [1, 100, 1],
    [1, 100, Number.NaN],
  ]) {
    assert.throws(() => variationRatioEpsilon(eps0!, n!, delta!), AmplificationError);
  }
  assert.equal(variationRatioDelta(1, 0, 0.5), 1);
  assert.equal(variationRatioDelta(1, 100, -0.5), 1);
});

test("the returned epsilon is minimal to the tolerance, and corners stay in range", () => {
  for (const [eps0, n, delta] of [
    [0.5, 1_000, 1e-6],
    [1, 10_000, 1e-6],
    [4, 100_000, 1e-8],
    [8, 1_000_000, 1e-6],
    [12, 100_000_000, 1e-8],
  ] as const) {
    const eps = variationRatioEpsilon(eps0, n, delta);
    assert.ok(eps < eps0 && variationRatioDelta(eps0, n, eps) <= delta, `${eps0} ${n} ${delta}`);
    assert.ok(variationRatioDelta(eps0, n, eps / (1 + 2e-6)) > delta, `${eps0} ${n} ${delta}: not minimal`);
  }
  // ε0 from 10⁻³⁰⁰ to 10³⁰⁰, δ from 10⁻³⁰⁰ to nearly 1, batches beyond 10⁹ (computed as 10⁹).
  for (const eps0 of [1e-300, 1e-6, 0.3, 99.9, 100.5, 700, 1e300]) {
    for (const n of [2, 3, 17, 1e20]) {
      for (const delta of [1e-300, 1e-30, 1e-6, 0.5, 0.999999]) {
        if (n === 1e20 && eps0 < 10 && delta !== 1e-6) continue; // 10⁹ reports at small ε0: once is enough
        const eps = variationRatioEpsilon(eps0, n, delta);
        assert.ok(eps >= 0 && eps <= eps0 && variationRatioDelta(eps0, n, eps) <= delta, `${eps0} ${n} ${delta}: ${eps}`);
        const combined = shuffledEpsilon(eps0, n, delta);
        assert.ok(combined >= 0 && combined <= eps, `${eps0} ${n} ${delta}: ${combined}`);
      }
    }
  }
});

test("n = 10^8 is computed in well under a second", () => {
  for (const eps0 of [1, 8]) {
    const start = performance.now();
    const cpu = process.cpuUsage();
    const eps = shuffledEpsilon(eps0, 100_000_000, 1e-9);
    const used = process.cpuUsage(cpu);
    const ms = (used.user + used.system) / 1000;
    console.log(`# shuffledEpsilon(${eps0}, 1e8, 1e-9) = ${eps}: ${ms.toFixed(0)} ms CPU, ${(performance.now() - start).toFixed(0)} ms wall`);
    // CPU time (the wall time depends on what else the machine runs).
    assert.ok(ms < 1000, `${ms} ms`);
  }
});

type Spec = MessageInitShape<typeof CollectionSpecSchema>;
type Shuffle = MessageInitShape<typeof ShuffleSpecSchema>;

/** ε0 = 8 rank-one, shuffled with `shuffle` (full settings, as a server sends them). */
function rankOne(shuffle?: Shuffle): Collection {
  const spec: Spec = {
    collectionId: "shuffled",
    dim: 5,
    epsilon: 8,
    delta: 0,
    clipRadius: 1,
    minReports: 1n,
    localMechanism: LocalMechanism.RANK_ONE,
  };
  if (shuffle !== undefined) spec.shuffle = shuffle;
  return Collection.fromSpec(spec);
}

/** Batches of `n` at central δ `delta` (default: the server's default, at most 1/(10n) and 1e-6). */
function batchesOf(n: number, delta = Math.min(10 ** -Math.ceil(Math.log10(10 * n)), 1e-6)): Shuffle {
  return { minBatchSize: BigInt(n), batchWindowSeconds: 3600n, centralDelta: delta, keyRotationSeconds: 86_400n, keyGraceRotations: 7 };
}

function reason(policy: PrivacyPolicy, c: Collection): string {
  try {
    checkPolicy(policy, c);
  } catch (e) {
    assert.ok(e instanceof ShufflePolicyViolationError, String(e));
    assert.equal(e.collectionId, c.id);
    assert.ok(e.message.includes(e.reason));
    return e.reason;
  }
  assert.fail("expected a shuffle refusal");
}

const insisting: PrivacyPolicy = { maxEpsilon: 10, maxDelta: 1e-3, shuffle: { minBatch: 100_000, maxCentralEpsilon: 0.5 } };

test("a device that insists on shuffling refuses what falls short", () => {
  // ε0 = 8 in batches of 10⁶ at δ = 1e-7: central ε ≈ 0.344, within 0.5.
  const good = rankOne(batchesOf(1_000_000));
  assert.equal(good.shuffle?.centralDelta, 1e-7);
  checkPolicy(insisting, good);
  const privacy = good.shuffledPrivacy();
  assert.ok(privacy !== undefined && Math.abs(privacy.centralEpsilon / 0.3440920417 - 1) <= 1e-5, String(privacy?.centralEpsilon));
  // The aggregator turned the collection direct.
  assert.match(reason(insisting, rankOne()), /not shuffled/);
  // Batches below the device's floor.
  assert.match(reason(insisting, rankOne(batchesOf(1000))), /at least 100000/);
  // Floor met, but the central ε it computes (ε0 = 8 in batches of 10⁵: about 1.2) is above what it accepts.
  const loose: PrivacyPolicy = { ...insisting, shuffle: { minBatch: 10_000, maxCentralEpsilon: 0.5 } };
  assert.match(reason(loose, rankOne(batchesOf(100_000))), /central epsilon is 1\.1\d+ .*at most 0\.5/);
  // Accepted when within: the same collection with a looser ceiling.
  checkPolicy({ ...insisting, shuffle: { minBatch: 10_000, maxCentralEpsilon: 1.5 } }, rankOne(batchesOf(100_000)));
  // Without the requirement, the same collections pass.
  checkPolicy(DEFAULT_PRIVACY_POLICY, rankOne());
  checkPolicy(DEFAULT_PRIVACY_POLICY, rankOne(batchesOf(1000)));
  // The ε and δ check comes first, as before.
  assert.throws(() => checkPolicy({ ...insisting, maxEpsilon: 4 }, good), PolicyViolationError);
  // A NaN requirement refuses.
  assert.match(reason({ ...insisting, shuffle: { minBatch: 2, maxCentralEpsilon: Number.NaN } }, good), /central epsilon/);
});

test("a central delta of 1/n or more is refused", () => {
  const policy: PrivacyPolicy = { ...DEFAULT_PRIVACY_POLICY, shuffle: { minBatch: 2, maxCentralEpsilon: 10 } };
  assert.match(reason(policy, rankOne(batchesOf(1_000_000, 1e-6))), /at least 1\/1000000/);
  assert.match(reason(policy, rankOne(batchesOf(1000, 2e-3))), /at least 1\/1000/);
  checkPolicy(policy, rankOne(batchesOf(1000, 9e-4)));
});

test("a shuffled spec's settings are checked as the Rust client checks them", () => {
  assert.throws(() => rankOne({ ...batchesOf(1000), minBatchSize: 1n }), SpecError);
  assert.throws(() => rankOne({ ...batchesOf(1000), minBatchSize: 100_000_001n }), SpecError);
  assert.throws(() => rankOne({ ...batchesOf(1000), centralDelta: 0 }), SpecError);
  assert.throws(() => rankOne({ ...batchesOf(1000), batchWindowSeconds: 0n }), SpecError);
  assert.throws(() => rankOne({ ...batchesOf(1000), keyRotationSeconds: 59n }), SpecError);
  assert.throws(() => rankOne({ ...batchesOf(1000), keyGraceRotations: 1001 }), SpecError);
  const c = rankOne(batchesOf(1000));
  assert.deepEqual(c.shuffle, { minBatchSize: 1000, batchWindowSeconds: 3600, centralDelta: 1e-6, keyRotationSeconds: 86400, keyGraceRotations: 7 });
  assert.ok(c.shuffled && !rankOne().shuffled);
});

test("the refusal comes before any noise is drawn or budget spent", async () => {
  const untouchable: NoiseSampler = {
    sampleGrid: () => assert.fail("noise drawn"),
    uniformBelow: () => assert.fail("noise drawn"),
    nextWord: () => assert.fail("noise drawn"),
  };
  const client = new AggregatorClient("http://unused", { noise: untouchable, policy: insisting });
  await assert.rejects(client.prepareReport(rankOne(), [0.1, 0.2, 0.3, 0.4, 0.5]), ShufflePolicyViolationError);
  await assert.rejects(client.prepareReport(rankOne(batchesOf(1000)), [0.1, 0.2, 0.3, 0.4, 0.5]), ShufflePolicyViolationError);
});
