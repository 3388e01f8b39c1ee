/**
 * The central ε of a shuffled batch as the Rust client computes it
 * (`ldpcov_accounting::amplification::shuffled_epsilon`): the smaller of two valid upper
 * bounds, the variation-ratio bound ({@link variationRatioEpsilon}, the tighter almost
 * everywhere) and that of Feldman, McMillan & Talwar, "Hiding Among the Clones" (FOCS
 * 2021; {@link fmt21Epsilon}, kept as a cross-check). FMT21 is the same clone pair with
 * clone probability e^−ε0 (see `accounting/src/amplification.rs`), summed here with the
 * same never-optimistic numerics.
 */

import { halfBinomialUpperTail, NEGLIGIBLE_ERROR, PMF_RELATIVE_ERROR, REANCHOR_RELATIVE } from "./binomial.js";
import {
  AmplificationError,
  CloneLaw,
  MAX_AMPLIFIED_LOCAL_EPSILON,
  MAX_BATCH_SIZE,
  NEGLECTED_FRACTION_OF_TARGET,
  NEGLECTED_MASS,
  UPPER_STOP_RELATIVE,
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
  const [estimate, bound] = new Fmt21Pair(eps0, eps).delta(law, limit);
  return Math.min(estimate + bound, 1);
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

/** FMT21's pair at one ε: `δ_c = a1·Pr[A ≥ m − 1] − a2·Pr[A ≥ m]`. */
class Fmt21Pair {
  readonly theta: number;
  readonly a1: number;
  readonly a2: number;

  /** Requires `0 ≤ eps < eps0 ≤ 100`. */
  constructor(eps0: number, eps: number) {
    const p = Math.exp(-eps0);
    const q = -Math.expm1(-eps0);
    const onePlusP = 1 + p;
    const eMinusP = Math.expm1(eps) - Math.expm1(-eps0);
    this.theta = eMinusP / (q * (1 + Math.exp(eps)));
    this.a1 = -Math.expm1(eps - eps0) / onePlusP;
    this.a2 = eMinusP / onePlusP;
  }

  threshold(c: number): number {
    const m = Math.floor(this.theta * (c + 1)) + 1;
    return m >= 1 ? Math.min(m, c + 1) : 1;
  }

  /**
   * With a finite `limit`, the walk stops as soon as what it has summed, plus its error
   * bound, is above `limit`: every term is non-negative (and floating-point addition is
   * monotone), so the whole sum is above it too, and that is all a bisection asks.
   */
  delta(law: CloneLaw, limit = Infinity): [number, number] {
    const n = law.trials;
    if (n === 0) return [this.a1, 0];
    const { lo, hi, mean } = law;
    let total = lo > 0 ? this.a1 * law.tailBound(lo - 1) : 0;
    let sum = 0;
    let sumBound = 0;
    let c = lo;
    let m = this.threshold(c);
    let [tail, err] = halfBinomialUpperTail(m, c);
    let pmfM1 = law.halfPmf(m - 1, c);
    for (;;) {
      const value = this.a1 * (tail + pmfM1) - this.a2 * tail;
      const bound =
        (this.a1 + this.a2) * err + PMF_RELATIVE_ERROR * this.a1 * pmfM1 + 4 * Number.EPSILON * (this.a1 * (tail + pmfM1) + this.a2 * tail);
      const deltaC = Math.min(Math.max(value + bound, 0), 1);
      const w = law.weight(c);
      const kept = Math.max(value, 0);
      sum += w * kept;
      sumBound += w * (deltaC - kept);
      if (total + sum + sumBound > limit) return [total + sum, sumBound];
      const stopEarly = c > mean && deltaC <= UPPER_STOP_RELATIVE * sum;
      if (c === hi || stopEarly) {
        if (c < n) total += deltaC * law.tailBound(c + 1);
        break;
      }
      tail += 0.5 * pmfM1;
      err += Number.EPSILON * tail + PMF_RELATIVE_ERROR * 0.5 * pmfM1;
      c += 1;
      const next = this.threshold(c);
      if (next > m) {
        pmfM1 = law.halfPmf(m, c);
        err += Number.EPSILON * tail + PMF_RELATIVE_ERROR * pmfM1;
        tail -= pmfM1;
        m = next;
      } else {
        pmfM1 = law.halfPmf(m - 1, c);
      }
      if (err > REANCHOR_RELATIVE * tail && (this.a1 + this.a2) * err > NEGLIGIBLE_ERROR) [tail, err] = halfBinomialUpperTail(m, c);
    }
    return [total + sum, sumBound];
  }
}
