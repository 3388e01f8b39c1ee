/**
 * The raw vector of a central collection (`RawVectorReport`, and
 * `client/src/mechanism/raw_vector.rs`): no device half — a device perturbs nothing for
 * a central collection; a trusted curator's report is the clipped vector on the grid
 * `2^−15`, inside the unit ball exactly.
 */

import { zcdpRhoForEpsilon } from "../calibration.js";
import { Encoding } from "../gen/ldpcov/v1/ldpcov_pb.js";
import { baseSensitivityOf, MEAN_WEIGHT } from "../limits.js";
import { roundHalfAway } from "../libm.js";
import { encodeClamped, I32_MAX } from "./encoding.js";
import type { ReportMechanism } from "./types.js";

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

/** The raw-vector report of a central collection. */
export class RawVectorMechanism implements ReportMechanism {
  readonly kind = "raw_vector" as const;
  readonly pureLocal = false;

  constructor(readonly hasMean: boolean) {}

  get gridBits(): number {
    return 30;
  }
  get sigma(): number {
    return 0;
  }
  get sigmaGrid(): number {
    return 0;
  }
  get sensitivity(): number {
    return this.baseSensitivity;
  }
  get baseSensitivity(): number {
    return baseSensitivityOf(this.hasMean);
  }
  get meanWeight(): number {
    return this.hasMean ? MEAN_WEIGHT : 0;
  }
  get maxAbsGridValue(): bigint {
    return 1n << 30n;
  }
  get wireStep(): bigint {
    return 1n;
  }
  get wireMax(): bigint {
    return 1n << 15n;
  }

  /** The ρ whose (ε, δ) conversion meets the collection's spec. */
  rho(epsilon: number, delta: number): number {
    return zcdpRhoForEpsilon(epsilon, delta);
  }

  agreesWithRankOne(params: unknown): boolean {
    return params === undefined;
  }

  /** A device perturbs nothing for a central collection. */
  devicePayload(): undefined {
    return undefined;
  }

  /** A trusted curator's payload: the clipped `u` on the grid `2^−15`, without noise. */
  trustedCuratorPayload(u: readonly number[]): Uint8Array {
    return encodeClamped(Encoding.RAW_I32_LE, I32_MAX, rawVector(u));
  }
}
