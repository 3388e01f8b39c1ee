/**
 * The central ε of a shuffled batch as the Rust client computes it
 * (`ldpcov_accounting::amplification::shuffled_epsilon`): the smaller of two valid upper
 * bounds, the variation-ratio bound ({@link variationRatioEpsilon}, the tighter almost
 * everywhere) and that of Feldman, McMillan & Talwar, "Hiding Among the Clones" (FOCS
 * 2021; {@link fmt21Epsilon}, kept as a cross-check). FMT21 is the same clone pair with
 * clone probability e^−ε0 (see `accounting/src/amplification.rs`), summed here with the
 * same never-optimistic numerics.
 */

import {
  AmplificationError,
  CloneLaw,
  deltaWithLaw,
  MAX_AMPLIFIED_LOCAL_EPSILON,
  MAX_BATCH_SIZE,
  NEGLECTED_FRACTION_OF_TARGET,
  NEGLECTED_MASS,
  variationRatioEpsilon,
} from "./variationRatio.js";

/** Width of the final bracket of {@link fmt21Epsilon}'s bisection (absolute). */
export const EPSILON_TOLERANCE = 1e-6;

function fmt21Law(eps0: number, n: number, neglectedMass: number): CloneLaw {
  return new CloneLaw(Math.exp(-eps0), -Math.expm1(-eps0), n, neglectedMass);
}

/** δ(ε) by FMT21's numerical bound (`fmt21_delta`): an upper bound, 0 for `eps ≥ eps0`, 1 outside the domain. */
export function fmt21Delta(eps0: number, n: number, eps: number): number {
  if (!(Number.isFinite(eps0) && eps0 > 0) || !Number.isInteger(n) || n <= 0 || Number.isNaN(eps) || eps < 0) return 1;
  if (eps >= eps0) return 0;
  if (eps0 > MAX_AMPLIFIED_LOCAL_EPSILON) return 1;
  return fmt21DeltaWithLaw(eps0, eps, fmt21Law(eps0, Math.min(n, MAX_BATCH_SIZE), NEGLECTED_MASS));
}

function fmt21DeltaWithLaw(eps0: number, eps: number, law: CloneLaw, limit = Infinity): number {
  return deltaWithLaw(eps0, eps, law, limit);
}

function checkArguments(eps0: number, n: number, delta: number): void {
  if (!(Number.isFinite(eps0) && eps0 > 0)) throw new AmplificationError(`local epsilon ${eps0} must be a positive finite number`);
  if (!Number.isInteger(n) || n < 2) throw new AmplificationError(`batch size ${n} must be at least 2 (a shuffled batch of one report hides nothing)`);
  if (!(delta > 0 && delta < 1)) throw new AmplificationError(`delta ${delta} must lie strictly between 0 and 1`);
}

/**
 * FMT21's central ε at `delta` (`fmt21_epsilon`): bisection on `[0, eps0]` to a bracket
 * of 10⁻⁶, returned at its upper end (never optimistic), never above `eps0`.
 */
export function fmt21Epsilon(eps0: number, n: number, delta: number): number {
  return fmt21EpsilonAbove(eps0, n, delta, Infinity);
}

/**
 * {@link fmt21Epsilon}, or as soon as its bisection's lower end reaches `cutoff`, some
 * value at least `cutoff` (the answer, the bracket's upper end, is above its lower end):
 * `min(cutoff, ·)` of it is exactly `min(cutoff, fmt21Epsilon(…))`, for less work.
 */
function fmt21EpsilonAbove(eps0: number, n: number, delta: number, cutoff: number): number {
  checkArguments(eps0, n, delta);
  if (eps0 > MAX_AMPLIFIED_LOCAL_EPSILON) return eps0;
  const neglected = Math.max(NEGLECTED_FRACTION_OF_TARGET * delta, NEGLECTED_MASS);
  const law = fmt21Law(eps0, Math.min(n, MAX_BATCH_SIZE), neglected);
  const deltaAt = (eps: number) => (eps >= eps0 ? 0 : fmt21DeltaWithLaw(eps0, eps, law, delta));
  if (deltaAt(0) <= delta) return 0;
  let lo = 0;
  let hi = eps0;
  while (hi - lo > EPSILON_TOLERANCE) {
    const mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (deltaAt(mid) <= delta) hi = mid;
    else lo = mid;
    if (lo >= cutoff) return hi;
  }
  return Math.min(hi, eps0);
}

/**
 * The central ε of `n` shuffled reports of a pure `eps0`-LDP randomizer at `delta`: the
 * smaller of the variation-ratio and FMT21 bounds, both upper bounds computed never
 * optimistically (`shuffled_epsilon`). Throws {@link AmplificationError} on bad input.
 */
export function shuffledEpsilon(eps0: number, n: number, delta: number): number {
  checkArguments(eps0, n, delta);
  const variationRatio = variationRatioEpsilon(eps0, n, delta);
  return Math.min(fmt21EpsilonAbove(eps0, n, delta, variationRatio), variationRatio);
}
