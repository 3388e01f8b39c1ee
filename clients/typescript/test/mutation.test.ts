// The vectors have power: a deliberately wrong σ or a broken sampler step produces
// other bytes (and a server announcing less noise is refused).

import assert from "node:assert/strict";
import { test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { CollectionParamsSchema } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import { Collection, DiscreteGaussianSampler, type NoiseSampler, SpecError } from "../src/index.js";
import { collectionOf, payloads, unhex, vectors } from "./helpers.js";

const byName = (name: string) => {
  const c = vectors.cases.find((k) => k.name === name);
  assert.ok(c, name);
  return c;
};

/** The seeded sampler with one step changed. */
class Mutant implements NoiseSampler {
  readonly inner: DiscreteGaussianSampler;
  #words = 0;
  #last = 0n;
  constructor(
    seed: string,
    readonly sigmaFactor = 1,
    readonly drawShift = 0n,
    readonly repeatEvery = 0,
  ) {
    this.inner = DiscreteGaussianSampler.fromSeedForSimulation(BigInt(seed));
  }
  sampleGrid(sigmaGrid: number): bigint {
    return this.inner.sampleGrid(sigmaGrid * this.sigmaFactor) + this.drawShift;
  }
  uniformBelow(bound: bigint): bigint {
    return this.inner.uniformBelow(bound);
  }
  nextWord(): bigint {
    this.#words += 1;
    if (this.repeatEvery > 0 && this.#words % this.repeatEvery === 0) return this.#last;
    this.#last = this.inner.nextWord();
    return this.#last;
  }
}

const gaussianCases = vectors.cases.filter((c) => c.derived["mechanism"] === "gaussian");
const rankOneCases = vectors.cases.filter((c) => c.derived["mechanism"] === "rank_one");

test("the unmutated sampler reproduces the vectors (control)", () => {
  for (const c of [...gaussianCases, ...rankOneCases]) {
    assert.deepEqual(payloads(c, collectionOf(c), new Mutant(c.seed)), c.reports.map((r) => r.payload), c.name);
  }
});

/**
 * Cases whose payload differs under `mutant`. An i32 entry shows any change of its draw;
 * an i16/i8 entry is the draw stochastically rounded to a step of 10³–10⁶ grid units, so
 * a small change of the draw can vanish there (it moves the rounding's threshold, not
 * the uniform drawn against it): a report of 2–4 coarse entries may come out the same.
 */
function changed(mutant: (seed: string) => NoiseSampler) {
  const i32 = gaussianCases.filter((c) => c.derived["wire_step"] === "1");
  const coarse = gaussianCases.filter((c) => c.derived["wire_step"] !== "1");
  const differs = (c: (typeof gaussianCases)[number]) =>
    JSON.stringify(payloads(c, collectionOf(c), mutant(c.seed))) !== JSON.stringify(c.reports.map((r) => r.payload));
  return { i32: i32.filter(differs).length, i32Total: i32.length, coarse: coarse.filter(differs).length, coarseTotal: coarse.length };
}

test("noise at 0.99σ fails every i32 vector and at least half of the coarse ones", () => {
  const got = changed((seed) => new Mutant(seed, 0.99));
  assert.equal(got.i32, got.i32Total);
  assert.ok(2 * got.coarse >= got.coarseTotal, JSON.stringify(got));
});

test("a server announcing 0.99σ is refused", () => {
  for (const c of gaussianCases) {
    const params = fromBinary(CollectionParamsSchema, unhex(c.params_hex));
    assert.ok(Collection.fromParams(params));
    params.sigma *= 0.99;
    assert.throws(() => Collection.fromParams(params), SpecError, c.name);
  }
});

test("a biased draw (every draw + 1) fails every i32 vector", () => {
  // A shift of one grid unit under a wire step of 10³–10⁶ units changes a coarse
  // entry with probability about 1/step: only the i32 vectors can see it.
  const got = changed((seed) => new Mutant(seed, 1, 1n));
  assert.equal(got.i32, got.i32Total);
});

test("a broken random stream (a word repeated) fails the rank-one vectors", () => {
  for (const c of rankOneCases) {
    assert.notDeepEqual(payloads(c, collectionOf(c), new Mutant(c.seed, 1, 0n, 5)), c.reports.map((r) => r.payload), c.name);
  }
});
