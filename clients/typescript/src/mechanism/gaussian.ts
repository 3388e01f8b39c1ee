/**
 * The Gaussian report (`GaussianReport`, and the device half `client/src/mechanism/gaussian.rs`):
 * its calibration (σ, grid, bounds, wire step), the exact statistic on the grid, one
 * independent exact discrete Gaussian draw per entry, the clamp to the validation bound,
 * and the stochastic rounding to a coarse encoding's wire step.
 */

import { analyticSigma, zcdpRho } from "../calibration.js";
import { Encoding } from "../gen/ldpcov/v1/ldpcov_pb.js";
import { baseSensitivityOf, MEAN_WEIGHT, SpecError, triangleLen } from "../limits.js";
import { f64ToBits, roundHalfAway } from "../libm.js";
import type { NoiseSampler } from "../noise.js";
import { clampBig, encodeClamped, I32_MAX, I64_MAX, I64_MIN } from "./encoding.js";
import type { ReportMechanism } from "./types.js";

const MIN_SIGMA_GRID = 16;
const MAX_GRID_BITS = 24;
const MIN_GRID_BITS = 8;
const GRID_HEADROOM_SIGMAS = 50;
const VALIDATION_SIGMAS = 7.53;
const WIRE_CLAMP_SIGMAS = 6;
const SVEC_ROUNDING_MARGIN = 1 / 1024;
const I32_MAX_NUMBER = 2147483647;

/** The Gaussian report's calibrated parameters (`GaussianReport`). */
export interface GaussianParams {
  kind: "gaussian";
  /** Off-diagonal factor: 1 (triu) or √2 (svec). */
  factor: number;
  svec: boolean;
  gridBits: number;
  sensitivity: number;
  sigma: number;
  maxAbsGridValue: bigint;
  wireStep: bigint;
  wireMax: bigint;
}

/** The Gaussian report of a collection: its calibration and its device half. */
export class GaussianMechanism implements GaussianParams, ReportMechanism {
  readonly kind = "gaussian" as const;
  readonly pureLocal = false;

  private constructor(
    readonly dim: number,
    readonly hasMean: boolean,
    readonly encoding: Encoding,
    readonly factor: number,
    readonly svec: boolean,
    readonly gridBits: number,
    readonly sensitivity: number,
    readonly sigma: number,
    readonly maxAbsGridValue: bigint,
    readonly wireStep: bigint,
    readonly wireMax: bigint,
  ) {}

  /** Calibrates the report (`GaussianReport::calibrate`): the finest grid whose headroom fits i32. */
  static calibrate(dim: number, hasMean: boolean, svec: boolean, epsilon: number, delta: number, encoding: Encoding): GaussianMechanism {
    const base = baseSensitivityOf(hasMean);
    const entries = (hasMean ? dim : 0) + triangleLen(dim);
    const margin = svec ? 1 + SVEC_ROUNDING_MARGIN : 1;
    for (let gridBits = MAX_GRID_BITS; gridBits >= MIN_GRID_BITS; gridBits--) {
      const scale = 2 ** gridBits;
      const sensitivity = base + (Math.sqrt(entries) / scale) * margin;
      const sigma = analyticSigma(sensitivity, epsilon, delta);
      const headroom = Math.ceil((1 + GRID_HEADROOM_SIGMAS * sigma) * scale);
      if (sigma * scale < MIN_SIGMA_GRID) throw new SpecError(`epsilon ${epsilon} leaves too little noise`);
      if (headroom <= I32_MAX_NUMBER) {
        let wireStep: bigint;
        let wireMax: bigint;
        let bound: bigint;
        if (encoding === Encoding.I16_LE || encoding === Encoding.I8) {
          wireMax = encoding === Encoding.I8 ? 127n : 32767n;
          const range = Math.ceil((1 + WIRE_CLAMP_SIGMAS * sigma) * scale);
          wireStep = BigInt(Math.ceil(range / Number(wireMax)));
          bound = wireStep * wireMax;
        } else {
          bound = BigInt(Math.ceil((1 + VALIDATION_SIGMAS * sigma) * scale));
          wireStep = 1n;
          wireMax = bound;
        }
        return new GaussianMechanism(dim, hasMean, encoding, svec ? Math.SQRT2 : 1, svec, gridBits, sensitivity, sigma, bound, wireStep, wireMax);
      }
    }
    throw new SpecError(`(ε = ${epsilon}, δ = ${delta}) cannot be calibrated`);
  }

  get sigmaGrid(): number {
    return this.sigma * 2 ** this.gridBits;
  }

  get baseSensitivity(): number {
    return baseSensitivityOf(this.hasMean);
  }

  get meanWeight(): number {
    return this.hasMean ? MEAN_WEIGHT : 0;
  }

  get meanEntries(): number {
    return this.hasMean ? this.dim : 0;
  }

  rho(): number {
    return zcdpRho(this.sensitivity, this.sigma);
  }

  agreesWithRankOne(params: unknown): boolean {
    return params === undefined;
  }

  /** The exact noiseless statistic on the grid (`GaussianReport::statistic`). */
  statistic(u: readonly number[]): bigint[] {
    const scale = 2 ** this.gridBits;
    const out: bigint[] = [];
    for (let i = 0; i < this.meanEntries; i++) out.push(BigInt(roundGrid(MEAN_WEIGHT, u[i]!, scale)));
    for (let i = 0; i < this.dim; i++) {
      for (let j = i; j < this.dim; j++) {
        const a = i === j || this.factor === 1 ? u[i]! : this.factor * u[i]!;
        out.push(BigInt(roundGrid(a, u[j]!, scale)));
      }
    }
    return out;
  }

  /** The noisy, clamped entries in grid units (`gaussian::perturb`). */
  perturb(u: readonly number[], noise: NoiseSampler): bigint[] {
    const sigmaGrid = this.sigmaGrid;
    const bound = clampBig(this.maxAbsGridValue, 0n, I32_MAX);
    return this.statistic(u).map((signal) => clampBig(clampBig(signal + noise.sampleGrid(sigmaGrid), I64_MIN, I64_MAX), -bound, bound));
  }

  /** Unbiased stochastic rounding to the wire step (`gaussian::to_wire`). */
  toWire(entries: bigint[], noise: NoiseSampler): bigint[] {
    const step = this.wireStep > 1n ? this.wireStep : 1n;
    if (step === 1n) return entries;
    return entries.map((v) => {
      let q = v / step;
      let r = v % step;
      if (r < 0n) {
        r += step;
        q -= 1n;
      }
      const up = noise.uniformBelow(step) < r ? 1n : 0n;
      return clampBig(q + up, -this.wireMax, this.wireMax);
    });
  }

  devicePayload(u: readonly number[], noise: NoiseSampler): Uint8Array {
    return encodeClamped(this.encoding, this.wireMax, this.toWire(this.perturb(u, noise), noise));
  }
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
