/**
 * Amplification by shuffling: the central (ε, δ) of a shuffled batch of pure ε0-LDP
 * reports, by the *variation-ratio* bound of Wang et al., "Privacy Amplification via
 * Shuffling: Unified, Simplified, and Tightened" (PVLDB 17(8), 2024), for a generic
 * ε0-LDP randomizer — a port of `ldpcov_accounting::variation_ratio` (read its module
 * docs for the derivation), with the same never-optimistic numerics:
 *
 * ```text
 * C ~ Bin(n − 1, 2/(e^ε0 + 1)),   A ~ Bin(C, 1/2),   α' = e^ε0/(1 + e^ε0),
 * P_c = A + 1 with probability α', A otherwise;   Q_c = A with probability α', A + 1 otherwise,
 * δ(ε) = Σ_c Pr[C = c] · D_{e^ε}(P_c ‖ Q_c).
 * ```
 *
 * Binomial probabilities by Loader's saddle-point form; only a window of clone counts is
 * summed, and the mass left out (Chernoff-bounded) is added at the worst divergence
 * below the window and at the last summed one above it; a floating-point error bound
 * tracked along the tail recurrence is added; ε is bisected on `ln ε` and returned at the
 * bracket's upper end (rounded up, never above ε0).
 */

import {
  binomialPmf,
  binomialTailBound,
  halfBinomialPmf,
  halfBinomialUpperTail,
  NEGLIGIBLE_ERROR,
  PMF_RELATIVE_ERROR,
  REANCHOR_RELATIVE,
} from "./binomial.js";

/** Batches above this are computed as this many reports (conservative: δ does not grow with n). */
export const MAX_BATCH_SIZE = 1_000_000_000;
/** Local ε0 above which no amplification is claimed. */
export const MAX_AMPLIFIED_LOCAL_EPSILON = 100;
/** Probability mass of the clone count left out of the window on each side (bounded and added to δ). */
export const NEGLECTED_MASS = 1e-30;
/** {@link variationRatioEpsilon} leaves out this fraction of the target δ instead (at least {@link NEGLECTED_MASS}). */
export const NEGLECTED_FRACTION_OF_TARGET = 1e-9;
/** Above the mean, the walk stops once a clone count's divergence is below this fraction of δ so far. */
export const UPPER_STOP_RELATIVE = 1e-12;
/** Relative width of the final bracket of the bisection on ε. */
export const RELATIVE_TOLERANCE = 1e-6;
/** The bisection runs on `[ln(ε0·10⁻¹²), ln ε0]`. */
const SMALLEST_RELATIVE_EPSILON = 1e-12;

/** Bad input to an amplification bound (`AmplificationError`). */
export class AmplificationError extends RangeError {
  override name = "AmplificationError";
}

function isCount(n: number): boolean {
  return Number.isInteger(n) && n >= 0;
}

/**
 * Upper bound on δ(ε) of the shuffled output of `n` reports of a pure `eps0`-LDP
 * randomizer (`variation_ratio_delta`): 0 for `eps ≥ eps0`, non-increasing in `n` and in
 * `eps`. `n = 1` is allowed (the randomizer's own curve); `n` above 10⁹ is computed as
 * 10⁹. Outside the domain (and for `eps0 > 100`) the trivial bound 1.
 */
export function variationRatioDelta(eps0: number, n: number, eps: number): number {
  if (!(Number.isFinite(eps0) && eps0 > 0) || !isCount(n) || n === 0 || Number.isNaN(eps) || eps < 0) return 1;
  if (eps >= eps0) return 0;
  if (eps0 > MAX_AMPLIFIED_LOCAL_EPSILON) return 1;
  const law = variationRatioLaw(eps0, Math.min(n, MAX_BATCH_SIZE), NEGLECTED_MASS);
  return deltaWithLaw(eps0, eps, law);
}

/**
 * δ(ε) of the clone pair for the clone count's law `law` (the variation-ratio bound's or
 * FMT21's: the bounds differ only in the clone probability), or (with a finite `limit`)
 * some value above `limit` as soon as δ(ε) is known to be.
 */
export function deltaWithLaw(eps0: number, eps: number, law: CloneLaw, limit = Infinity): number {
  const [estimate, errorBound] = new VariationRatioPair(eps0, eps).delta(law, limit);
  return Math.min(estimate + errorBound, 1);
}

/**
 * Smallest ε (to a relative 10⁻⁶, always rounded up, never optimistic) with
 * `variationRatioDelta(eps0, n, ε) ≤ delta` (`variation_ratio_epsilon`). Never above
 * `eps0`; `eps0` itself above 100. Throws {@link AmplificationError} for `eps0` not
 * positive and finite, `n < 2` (or not an integer), `delta` outside (0, 1).
 */
export function variationRatioEpsilon(eps0: number, n: number, delta: number): number {
  if (!(Number.isFinite(eps0) && eps0 > 0)) throw new AmplificationError(`local epsilon ${eps0} must be a positive finite number`);
  if (!isCount(n) || n < 2) throw new AmplificationError(`batch size ${n} must be at least 2 (a shuffled batch of one report hides nothing)`);
  if (!(delta > 0 && delta < 1)) throw new AmplificationError(`delta ${delta} must lie strictly between 0 and 1`);
  if (eps0 > MAX_AMPLIFIED_LOCAL_EPSILON) return eps0;
  const neglected = Math.max(NEGLECTED_FRACTION_OF_TARGET * delta, NEGLECTED_MASS);
  const law = variationRatioLaw(eps0, Math.min(n, MAX_BATCH_SIZE), neglected);
  const deltaAt = (eps: number) => (eps >= eps0 ? 0 : deltaWithLaw(eps0, eps, law, delta));
  const floor = eps0 * SMALLEST_RELATIVE_EPSILON;
  if (deltaAt(floor) <= delta) return deltaAt(0) <= delta ? 0 : floor;
  // Invariant: δ(e^lo) > delta ≥ δ(hiEps), hiEps = e^hi (δ(ε0) = 0).
  const logTolerance = Math.log1p(RELATIVE_TOLERANCE);
  let lo = Math.log(floor);
  let hi = Math.log(eps0);
  let hiEps = eps0;
  while (hi - lo > logTolerance) {
    const mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    const eps = Math.exp(mid);
    if (deltaAt(eps) <= delta) {
      hi = mid;
      hiEps = eps;
    } else lo = mid;
  }
  return Math.min(hiEps, eps0);
}

/**
 * The variation-ratio clone law, `C ~ Bin(n − 1, 2/(e^ε0 + 1))`: `p` and `q = 1 − p =
 * tanh(ε0/2)` written with e^−ε0 only (no overflow, no cancellation at small ε0).
 */
function variationRatioLaw(eps0: number, n: number, neglectedMass: number): CloneLaw {
  const eMinus = Math.exp(-eps0);
  const onePlus = 1 + eMinus;
  return new CloneLaw((2 * eMinus) / onePlus, -Math.expm1(-eps0) / onePlus, n, neglectedMass);
}

/**
 * The law of the clone count `C ~ Bin(n − 1, p)` over the summed window, its
 * probabilities kept (they do not depend on ε, so a bisection computes them once).
 */
export class CloneLaw {
  readonly trials: number;
  readonly p: number;
  readonly q: number;
  readonly mean: number;
  readonly lo: number;
  readonly hi: number;
  readonly #weights: number[] = [];
  /**
   * The last two `Pr[Bin(c, ½) = k]` computed at each clone count of the window (`k` and
   * value): successive steps of the bisection ask for mostly the same ones. A cache of a
   * pure function, so the numbers are the same as without it.
   */
  readonly #pmfK: Float64Array;
  readonly #pmfV: Float64Array;

  /**
   * `C ~ Bin(n − 1, p)` (`q = 1 − p` given separately), its window leaving out at most
   * `neglectedMass` on each side. Requires `n ≥ 1`.
   */
  constructor(p: number, q: number, n: number, neglectedMass: number) {
    this.trials = n - 1;
    this.p = p;
    this.q = q;
    this.mean = this.trials * this.p;
    const sd = Math.sqrt(this.mean * this.q);
    const step = Math.max(Math.ceil(sd), 1);
    // The window: from ±6 sd, widened until the mass outside it is negligible.
    let lo = Math.max(Math.floor(this.mean - 6 * sd), 0);
    while (lo > 0 && this.tailBound(lo - 1) > neglectedMass) lo = Math.max(lo - step, 0);
    let hi = Math.min(Math.ceil(this.mean + 6 * sd), this.trials);
    while (hi < this.trials && this.tailBound(hi + 1) > neglectedMass) hi = Math.min(hi + step, this.trials);
    this.lo = lo;
    this.hi = hi;
    this.#pmfK = new Float64Array(2 * (hi - lo + 1)).fill(-1);
    this.#pmfV = new Float64Array(2 * (hi - lo + 1));
  }

  /** `Pr[Bin(c, ½) = k]` for `c` in the window ({@link halfBinomialPmf}, cached). */
  halfPmf(k: number, c: number): number {
    const slot = 2 * (c - this.lo) + (k & 1);
    if (this.#pmfK[slot] === k) return this.#pmfV[slot]!;
    const v = halfBinomialPmf(k, c);
    this.#pmfK[slot] = k;
    this.#pmfV[slot] = v;
    return v;
  }

  /** `Pr[C = c]` for `c` in the window, computed once. */
  weight(c: number): number {
    const i = c - this.lo;
    const w = this.#weights[i];
    if (w !== undefined) return w;
    const v = binomialPmf(c, this.trials, this.p, this.q);
    if (i === this.#weights.length) this.#weights.push(v);
    return v;
  }

  /** Chernoff bound on `Pr[C ≤ k]` (below the mean) or `Pr[C ≥ k]` (above it). */
  tailBound(k: number): number {
    return binomialTailBound(k, this.trials, this.p, this.q);
  }
}

/** The pair `(P_c, Q_c)` at one ε. */
class VariationRatioPair {
  /** `P_c(k)/Q_c(k) > e^ε` iff `k > θ(c + 1)`. */
  readonly theta: number;
  /** `δ_c = a1·Pr[A = m − 1] − e1·Pr[A ≥ m]`; `a1 = (e^ε0 − e^ε)/(1 + e^ε0)` is also the largest divergence. */
  readonly a1: number;
  readonly e1: number;

  /** Requires `0 ≤ eps < eps0 ≤ 100`. */
  constructor(eps0: number, eps: number) {
    const onePlus = 1 + Math.exp(-eps0);
    const oneMinus = -Math.expm1(-eps0);
    const eMinusP = Math.expm1(eps) - Math.expm1(-eps0);
    this.theta = eMinusP / (oneMinus * (1 + Math.exp(eps)));
    this.a1 = -Math.expm1(eps - eps0) / onePlus;
    this.e1 = Math.expm1(eps);
  }

  /** The first `k` with `P_c(k) > e^ε·Q_c(k)`, in `[1, c + 1]`. */
  threshold(c: number): number {
    const m = Math.floor(this.theta * (c + 1)) + 1;
    // (NaN or below 1: 1, as Rust's saturating cast and clamp give.)
    return m >= 1 ? Math.min(m, c + 1) : 1;
  }

  /** δ(ε) as `[estimate, bound]`: the sum (left-out mass included) and its floating-point error bound. */
  /**
   * With a finite `limit`, the walk stops as soon as what it has summed, plus its error
   * bound, is above `limit`: every term is non-negative (and floating-point addition is
   * monotone), so the whole sum is above it too, and that is all a bisection asks.
   */
  delta(law: CloneLaw, limit = Infinity): [number, number] {
    const n = law.trials;
    if (n === 0) return [this.a1, 0];
    const { lo, hi, mean } = law;
    // Below the window every divergence is at most δ_0 = a1.
    let total = lo > 0 ? this.a1 * law.tailBound(lo - 1) : 0;
    let sum = 0;
    let sumBound = 0;
    let c = lo;
    let m = this.threshold(c);
    let [tail, err] = halfBinomialUpperTail(m, c);
    let pmfM1 = law.halfPmf(m - 1, c);
    for (;;) {
      const value = this.a1 * pmfM1 - this.e1 * tail;
      const bound = this.e1 * err + PMF_RELATIVE_ERROR * this.a1 * pmfM1 + 4 * Number.EPSILON * (this.a1 * pmfM1 + this.e1 * tail);
      const deltaC = Math.min(Math.max(value + bound, 0), 1);
      const w = law.weight(c);
      const kept = Math.max(value, 0);
      sum += w * kept;
      sumBound += w * (deltaC - kept);
      if (total + sum + sumBound > limit) return [total + sum, sumBound];
      const stopEarly = c > mean && deltaC <= UPPER_STOP_RELATIVE * sum;
      if (c === hi || stopEarly) {
        // Above c every divergence is at most deltaC.
        if (c < n) total += deltaC * law.tailBound(c + 1);
        break;
      }
      // Pr[Bin(c+1, ½) ≥ m] = Pr[Bin(c, ½) ≥ m] + ½·Pr[Bin(c, ½) = m − 1].
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
      if (err > REANCHOR_RELATIVE * tail && this.e1 * err > NEGLIGIBLE_ERROR) [tail, err] = halfBinomialUpperTail(m, c);
    }
    return [total + sum, sumBound];
  }
}
