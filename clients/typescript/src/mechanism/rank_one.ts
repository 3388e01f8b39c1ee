/**
 * The rank-one report (`RankOneReport`, and the device half `client/src/mechanism/rank_one.rs`):
 * pure ε-LDP, one lattice draw for the lifted input, quantised to i16 wire values with
 * the triangular dither.
 */

import {
  GAMMA_BITS,
  INPUT_BITS,
  LATTICE_BITS,
  pureDpRho,
  type RankOneParams,
  rankOneExpectedIterations,
  WIRE_STEP_BITS,
} from "../calibration.js";
import { isqrt } from "../bigmath.js";
import { Encoding, type RankOneParams as RankOneWireParams } from "../gen/ldpcov/v1/ldpcov_pb.js";
import { InputError } from "../limits.js";
import { scalbn } from "../libm.js";
import { type NoiseSampler, RandomBits, RankOneSampler, TriangularDither } from "../noise.js";
import type { WordSource } from "../rng.js";
import { encodeClamped } from "./encoding.js";
import type { ReportMechanism } from "./types.js";

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

/** Samplers built so far, by `(cap, γ units, λ, P)` (building one takes milliseconds: the discrete Gaussian's table). */
const rankOneSamplers = new Map<string, RankOneSampler>();

/** The rank-one report of a collection: its parameters and its device half. */
export class RankOneMechanism implements ReportMechanism {
  readonly kind = "rank_one" as const;
  readonly pureLocal = true;

  constructor(
    readonly dim: number,
    readonly hasMean: boolean,
    readonly params: RankOneParams,
  ) {}

  get gridBits(): number {
    return 2 * WIRE_STEP_BITS;
  }
  get sigma(): number {
    return 0;
  }
  get sigmaGrid(): number {
    return 0;
  }
  get sensitivity(): number {
    return 0;
  }
  get baseSensitivity(): number {
    return 0;
  }
  get meanWeight(): number {
    return this.hasMean ? this.params.moments.meanScale : 0;
  }
  get maxAbsGridValue(): bigint {
    return 32767n * 32767n;
  }
  get wireStep(): bigint {
    return 1n << BigInt(WIRE_STEP_BITS);
  }
  get wireMax(): bigint {
    return 32767n;
  }

  rho(epsilon: number): number {
    return pureDpRho(epsilon);
  }

  agreesWithRankOne(r: RankOneWireParams | undefined): boolean {
    const p = this.params;
    const step = scalbn(1, -WIRE_STEP_BITS);
    return (
      r !== undefined &&
      r.gammaUnits === p.gammaUnits &&
      r.gamma === p.gamma &&
      r.nominalEpsilon === p.nominalEpsilon &&
      r.eta === p.eta &&
      r.kappa === p.moments.kappa &&
      r.meanScale === p.moments.meanScale &&
      r.ditherVariance === (step * step) / 4 &&
      r.expectedRounds === rankOneExpectedIterations(p)
    );
  }

  /** The wire values of one rank-one report (`rank_one::perturb`). */
  perturb(u: readonly number[], noise: NoiseSampler): bigint[] {
    const p = this.params;
    const lifted = liftedInput(u);
    const key = `${p.cap}/${p.gammaUnits}/${p.tilt}/${p.capProbabilityUnits}`;
    let sampler = rankOneSamplers.get(key);
    if (sampler === undefined) {
      sampler = new RankOneSampler(p.cap, LATTICE_BITS, INPUT_BITS, p.gammaUnits, GAMMA_BITS, p.tilt, p.capProbabilityUnits);
      if (rankOneSamplers.size >= 64) rankOneSamplers.clear();
      rankOneSamplers.set(key, sampler);
    }
    const dither = new TriangularDither(LATTICE_BITS - WIRE_STEP_BITS);
    const bits = new RandomBits(new Words(noise));
    const { draw } = sampler.sample(bits, lifted);
    return draw.slice(0, this.dim).map((k) => BigInt(dither.quantiseI16(k, bits)));
  }

  devicePayload(u: readonly number[], noise: NoiseSampler): Uint8Array {
    return encodeClamped(Encoding.I16_LE, 32767n, this.perturb(u, noise));
  }
}
