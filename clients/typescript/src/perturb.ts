/**
 * The device core (`ldpcov_client::Perturber`): subtract the centre, clip, then the
 * collection's mechanism — the exact statistic on the grid plus exact discrete Gaussian
 * noise, clamp, stochastic rounding to the wire step and encoding; or one rank-one
 * lattice draw with the triangular dither; or a central collection's raw vector.
 */

import { create, toBinary } from "@bufbuild/protobuf";
import { GAMMA_BITS, INPUT_BITS, LATTICE_BITS, WIRE_STEP_BITS } from "./calibration.js";
import { Collection, type GaussianParams, MEAN_WEIGHT } from "./collection.js";
import { Encoding, type Report, ReportSchema } from "./gen/ldpcov/v1/ldpcov_pb.js";
import { isqrt } from "./bigmath.js";
import { f64ToBits, roundHalfAway } from "./libm.js";
import { type NoiseSampler, RandomBits, RankOneSampler, TriangularDither } from "./noise.js";
import type { WordSource } from "./rng.js";

/** `u = (1 − 2⁻³²)·y / max(R, ‖y‖)`: the clip's relative safety margin. */
export const CLIP_MARGIN = 1 / 4294967296;
export const REPORT_ID_LEN = 16;

/** Bad input: wrong length, or a NaN or infinite coordinate. Raised before any noise is drawn. */
export class InputError extends Error {
  override name = "InputError";
}

/** The unit-ball vector a report is built from (`Perturber::clip`). */
export function clip(collection: Collection, x: readonly number[]): number[] {
  if (x.length !== collection.dim) throw new InputError(`vector has ${x.length} coordinates, the collection expects ${collection.dim}`);
  let index = x.findIndex((v) => !Number.isFinite(v));
  if (index >= 0) throw new InputError(`coordinate ${index} is not a finite number`);
  let y: readonly number[] = x;
  if (collection.centre.length > 0) {
    y = x.map((v, i) => v - collection.centre[i]!);
    index = y.findIndex((v) => !Number.isFinite(v));
    if (index >= 0) throw new InputError(`coordinate ${index} is not a finite number after subtracting the centre`);
  }
  const maxAbs = y.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  if (maxAbs === 0) return new Array<number>(y.length).fill(0);
  let sum = 0;
  for (const v of y) {
    const t = v / maxAbs;
    sum += t * t;
  }
  const s = Math.sqrt(sum);
  const keep = 1 - CLIP_MARGIN;
  const radius = collection.clipRadius;
  if (maxAbs * s <= radius) return y.map((v) => (v / radius) * keep);
  return y.map((v) => (v / maxAbs / s) * keep);
}

/** An f64 as `m·2^e` with integers (exact). */
function dyadic(x: number): [bigint, number] {
  const bits = f64ToBits(x);
  const negative = bits >> 63n === 1n;
  const biased = Number((bits >> 52n) & 0x7ffn);
  const frac = bits & ((1n << 52n) - 1n);
  const [m, e] = biased === 0 ? [frac, -1074] : [frac | (1n << 52n), biased - 1075];
  return [negative ? -m : m, e];
}

/** The sign of `a·b − fl(a·b)`, exactly (what Rust's `mul_add(a, b, −p)` gives). */
function productErrorSign(a: number, b: number, p: number): number {
  const [ma, ea] = dyadic(a);
  const [mb, eb] = dyadic(b);
  const [mp, ep] = dyadic(p);
  const e = Math.min(ea + eb, ep);
  const exact = (ma * mb) << BigInt(ea + eb - e);
  const rounded = mp << BigInt(ep - e);
  return exact > rounded ? 1 : exact < rounded ? -1 : 0;
}

/** `round(a·b·scale)`, ties away from zero decided on the exact product (`round_grid`). */
export function roundGrid(a: number, b: number, scale: number): number {
  const p = a * b;
  const y = p * scale;
  const r = roundHalfAway(y);
  if (Math.abs(y - r) === 0.5) {
    const sign = productErrorSign(a, b, p);
    if (sign > 0) return y + 0.5;
    if (sign < 0) return y - 0.5;
  }
  return r;
}

/** The Gaussian report's exact noiseless statistic on the grid (`GaussianReport::statistic`). */
export function gaussianStatistic(collection: Collection, g: GaussianParams, u: readonly number[]): bigint[] {
  const scale = 2 ** g.gridBits;
  const out: bigint[] = [];
  for (let i = 0; i < collection.meanEntries; i++) out.push(BigInt(roundGrid(MEAN_WEIGHT, u[i]!, scale)));
  for (let i = 0; i < collection.dim; i++) {
    for (let j = i; j < collection.dim; j++) {
      const a = i === j || g.factor === 1 ? u[i]! : g.factor * u[i]!;
      out.push(BigInt(roundGrid(a, u[j]!, scale)));
    }
  }
  return out;
}

const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);
const I32_MAX = 2147483647n;

function clampBig(v: bigint, lo: bigint, hi: bigint): bigint {
  return v < lo ? lo : v > hi ? hi : v;
}

/** The noisy, clamped entries in grid units (`gaussian::perturb`). */
function perturbGaussian(collection: Collection, g: GaussianParams, u: readonly number[], noise: NoiseSampler): bigint[] {
  const sigmaGrid = collection.sigmaGrid;
  const bound = clampBig(g.maxAbsGridValue, 0n, I32_MAX);
  return gaussianStatistic(collection, g, u).map((signal) =>
    clampBig(clampBig(signal + noise.sampleGrid(sigmaGrid), I64_MIN, I64_MAX), -bound, bound),
  );
}

/** Unbiased stochastic rounding to the wire step (`gaussian::to_wire`). */
function toWire(g: GaussianParams, entries: bigint[], noise: NoiseSampler): bigint[] {
  const step = g.wireStep > 1n ? g.wireStep : 1n;
  if (step === 1n) return entries;
  return entries.map((v) => {
    let q = v / step;
    let r = v % step;
    if (r < 0n) {
      r += step;
      q -= 1n;
    }
    const up = noise.uniformBelow(step) < r ? 1n : 0n;
    return clampBig(q + up, -g.wireMax, g.wireMax);
  });
}

/** The lifted input on the grid `2^−40` (`grid_input` then `lift_to_sphere`). */
export function liftedInput(u: readonly number[]): bigint[] {
  const one = 1n << BigInt(INPUT_BITS);
  const grid = u.map((value, index) => {
    if (!(Number.isFinite(value) && value >= -1 && value <= 1)) throw new InputError(`input[${index}] = ${value} is not in [-1, 1]`);
    return BigInt(Math.trunc(value * 2 ** INPUT_BITS));
  });
  const norm2 = grid.reduce((s, v) => s + v * v, 0n);
  if (norm2 > one * one) throw new InputError("the input's norm exceeds 1");
  return [...grid, isqrt(one * one - norm2)];
}

/** The noise sampler's words as the generator a fresh reservoir reads (`Words`). */
class Words implements WordSource {
  constructor(private readonly noise: NoiseSampler) {}
  nextU32(): number {
    return Number(this.noise.nextWord() & 0xffffffffn);
  }
  nextU64(): bigint {
    return this.noise.nextWord();
  }
}

const rankOneSamplers = new Map<string, RankOneSampler>();

/** The wire values of one rank-one report (`rank_one::perturb`). */
function perturbRankOne(collection: Collection, u: readonly number[], noise: NoiseSampler): bigint[] {
  if (collection.mechanism.kind !== "rank_one") throw new Error("not a rank-one collection");
  const p = collection.mechanism.params;
  const lifted = liftedInput(u);
  const key = `${p.cap}/${p.gammaUnits}/${p.nominalEpsilon}`;
  let sampler = rankOneSamplers.get(key);
  if (sampler === undefined) {
    sampler = new RankOneSampler(p.cap, LATTICE_BITS, INPUT_BITS, p.gammaUnits, GAMMA_BITS, p.nominalEpsilon);
    if (rankOneSamplers.size >= 64) rankOneSamplers.clear();
    rankOneSamplers.set(key, sampler);
  }
  const dither = new TriangularDither(LATTICE_BITS - WIRE_STEP_BITS);
  const bits = new RandomBits(new Words(noise));
  const { draw } = sampler.sample(bits, lifted);
  return draw.slice(0, collection.dim).map((k) => BigInt(dither.quantiseI16(k, bits)));
}

/** A central report's coordinates on the grid `2^−15`, inside the unit ball exactly (`to_grid_unit_ball`). */
export function rawVector(u: readonly number[]): bigint[] {
  const gridBits = 15;
  const norm = Math.sqrt(u.reduce((s, v) => s + v * v, 0));
  const scale = 2 ** gridBits / Math.max(norm, 1);
  const out = u.map((v) => BigInt(roundHalfAway(v * scale)));
  const unit = 1n << BigInt(2 * gridBits);
  let norm2 = out.reduce((s, v) => s + v * v, 0n);
  while (norm2 > unit) {
    let i = 0;
    for (let k = 0; k < out.length; k++) {
      const a = out[k]! < 0n ? -out[k]! : out[k]!;
      const b = out[i]! < 0n ? -out[i]! : out[i]!;
      if (a >= b) i = k; // Rust's max_by_key: the last of equal maxima
    }
    const old = out[i]!;
    out[i] = old - (old > 0n ? 1n : old < 0n ? -1n : 0n);
    norm2 += out[i]! * out[i]! - old * old;
  }
  return out;
}

/** Writes `values` in `encoding`, each clamped to `±max` (`encode_clamped`). */
export function encodeClamped(encoding: Encoding, max: bigint, values: readonly bigint[]): Uint8Array {
  const m = clampBig(max, 0n, I32_MAX);
  const width = encoding === Encoding.I16_LE ? 2 : encoding === Encoding.I8 ? 1 : 4;
  const out = new Uint8Array(values.length * width);
  const view = new DataView(out.buffer);
  values.forEach((value, i) => {
    const v = Number(clampBig(value, -m, m));
    if (width === 4) view.setInt32(4 * i, v, true);
    else if (width === 2) view.setInt16(2 * i, v, true);
    else view.setInt8(i, v);
  });
  return out;
}

/** The report payload of the clipped `u` (noise, wire step, encoding). */
export function payloadOfClipped(collection: Collection, u: readonly number[], noise: NoiseSampler): Uint8Array {
  const m = collection.mechanism;
  switch (m.kind) {
    case "gaussian":
      return encodeClamped(collection.encoding, m.wireMax, toWire(m, perturbGaussian(collection, m, u, noise), noise));
    case "rank_one":
      return encodeClamped(Encoding.I16_LE, 32767n, perturbRankOne(collection, u, noise));
    case "raw_vector":
      throw new InputError(`collection ${collection.id} is central: use trustedCuratorReport`);
  }
}

/** Turns a user's vector into the perturbed report of one collection (`Perturber`). */
export class Perturber {
  constructor(readonly collection: Collection) {}

  clip(x: readonly number[]): number[] {
    return clip(this.collection, x);
  }

  /** A complete report for `x`, tagged with `reportId` (reuse both when resending). */
  report(x: readonly number[], noise: NoiseSampler, reportId: Uint8Array): Report {
    if (reportId.length !== REPORT_ID_LEN) throw new InputError(`report id has ${reportId.length} bytes, expected 16`);
    return reportOfClipped(this.collection, this.clip(x), noise, reportId);
  }
}

/** The complete report of the clipped `u` (`report_of_clipped`), tagged with `reportId`. */
export function reportOfClipped(collection: Collection, u: readonly number[], noise: NoiseSampler, reportId: Uint8Array): Report {
  if (reportId.length !== REPORT_ID_LEN) throw new InputError(`report id has ${reportId.length} bytes, expected 16`);
  return create(ReportSchema, {
    collectionId: collection.id,
    reportId: Uint8Array.from(reportId),
    encoding: collection.encoding,
    payload: payloadOfClipped(collection, u, noise),
  });
}

/** A **trusted-curator** report for a central collection: the clipped `x` on the grid `2^−15`, without noise. */
export function trustedCuratorReport(collection: Collection, x: readonly number[], reportId: Uint8Array): Report {
  if (!collection.isCentral) throw new InputError(`collection ${collection.id} is local: perturb its reports`);
  const u = clip(collection, x);
  return create(ReportSchema, {
    collectionId: collection.id,
    reportId: Uint8Array.from(reportId),
    encoding: Encoding.RAW_I32_LE,
    payload: encodeClamped(Encoding.RAW_I32_LE, I32_MAX, rawVector(u)),
  });
}

/** A report as protobuf bytes. */
export function encodeReport(report: Report): Uint8Array {
  return toBinary(ReportSchema, report);
}

/** A fresh random report id (16 bytes of `crypto.getRandomValues`). */
export function randomReportId(): Uint8Array {
  const id = new Uint8Array(REPORT_ID_LEN);
  globalThis.crypto.getRandomValues(id);
  return id;
}
