/**
 * The seam between a collection and its report mechanism (`client/src/mechanism/`, and
 * `ldpcov_privacy::ReportMechanism` for the derived parameters): a collection asks its
 * mechanism for every derived parameter and for the device half of a report, and never
 * switches on which mechanism it has. A new mechanism is one new module beside
 * `gaussian.ts` implementing {@link ReportMechanism}, and one arm in `create` (index.ts).
 */

import type { RankOneParams as RankOneWireParams } from "../gen/ldpcov/v1/ldpcov_pb.js";
import type { NoiseSampler } from "../noise.js";

export interface ReportMechanism {
  /** Which mechanism (the discriminant of {@link Mechanism}). */
  readonly kind: "gaussian" | "rank_one" | "raw_vector";
  /**
   * Whether a report is pure ε0-LDP, so that the shuffle amplification bound covers a
   * shuffled batch of them (`ShuffledPrivacy::of_reports`): the rank-one report only.
   */
  readonly pureLocal: boolean;
  /** Grid bits k of the report's statistic. */
  readonly gridBits: number;
  /** σ of the noise (0 for a mechanism without Gaussian noise). */
  readonly sigma: number;
  /** σ in grid units, `σ·2^k` (0 without Gaussian noise). */
  readonly sigmaGrid: number;
  /** The L2 sensitivity the noise is calibrated to (0 for the rank-one mechanism). */
  readonly sensitivity: number;
  /** Δ₀ (0 for the rank-one mechanism, whose privacy is not a sensitivity's). */
  readonly baseSensitivity: number;
  /** The mean block's weight (0 without a mean). */
  readonly meanWeight: number;
  readonly maxAbsGridValue: bigint;
  readonly wireStep: bigint;
  readonly wireMax: bigint;
  /** The zCDP ρ one report spends, for a collection at (ε, δ). */
  rho(epsilon: number, delta: number): number;
  /** Whether a server's rank-one parameters are this mechanism's (absent unless rank-one). */
  agreesWithRankOne(params: RankOneWireParams | undefined): boolean;
  /**
   * The device half: the payload of one report for the clipped `u` (noise, wire step,
   * encoding), or `undefined` for a mechanism whose reports a device does not perturb
   * (a central collection's).
   */
  devicePayload(u: readonly number[], noise: NoiseSampler): Uint8Array | undefined;
}
