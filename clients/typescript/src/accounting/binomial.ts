/**
 * Binomial probabilities to a few ulps for any `n` (Loader's saddle-point form), and the
 * upper tail of `Bin(c, ½)`: the arithmetic the shuffle amplification bound sums over
 * (`ldpcov_accounting::binomial`, ported line by line).
 *
 * Counts are JavaScript numbers: every integer used here is below 2·10⁹, exact in a double.
 */

/** Relative error assumed of one binomial probability from {@link binomialPmf}. */
export const PMF_RELATIVE_ERROR = 1e-14;

/** The recurrence's error bound, relative to the tail, past which the tail is summed afresh. */
export const REANCHOR_RELATIVE = 1e-9;

/** An error bound on one clone count's divergence this small is added without re-summing the tail. */
export const NEGLIGIBLE_ERROR = 1e-40;

/** ln(2π). */
const LN_2PI = 1.8378770664093455;

/**
 * `stirlerr(k)` for k = 0…15: `ln(k!) − ln(√(2πk)·(k/e)^k)` (Loader's table, as in R's
 * nmath `stirlerr.c`; the Rust code computes these from `lgamma`, the same values to a
 * few ulps). Index 0 is unused (k ≥ 1 here).
 */
const STIRLERR_SMALL: readonly number[] = [
  0, 0.0810614667953272582196702, 0.0413406959554092940938221, 0.02767792568499833914878929,
  0.02079067210376509311152277, 0.01664469118982119216319487, 0.01387612882307074799874573,
  0.01189670994589177009505572, 0.010411265261972096497478567, 0.009255462182712732917728637,
  0.008330563433362871256469318, 0.007573675487951840794972024, 0.006942840107209529865664152,
  0.006408994188004207068439631, 0.005951370112758847735624416, 0.005554733551962801371038690,
];

/** `ln(k!) − ln(√(2πk)·(k/e)^k)`, the error of Stirling's formula (`k ≥ 1`). */
export function stirlerr(k: number): number {
  if (k <= 15) return STIRLERR_SMALL[k]!;
  // The Stirling series 1/(12k) − 1/(360k³) + 1/(1260k⁵) − 1/(1680k⁷) + 1/(1188k⁹),
  // its terms dropped where they are below 10⁻¹⁷ of the sum (Loader's cut-offs: the
  // same value to an ulp, cheaper in the hot loop).
  const r = 1 / k;
  const r2 = r * r;
  if (k > 500) return r * (1 / 12 - r2 / 360);
  if (k > 80) return r * (1 / 12 - r2 * (1 / 360 - r2 / 1260));
  return r * (1 / 12 - r2 * (1 / 360 - r2 * (1 / 1260 - r2 * (1 / 1680 - r2 / 1188))));
}

/** `x·ln(x/m) + m − x`, the deviance term, without cancellation when `x ≈ m`. */
export function bd0(x: number, m: number): number {
  if (x === 0) return m;
  if (Math.abs(x - m) < 0.1 * (x + m)) {
    // With v = (x − m)/(x + m): (x − m)·v + Σ_{j≥1} 2x·v^{2j+1}/(2j + 1).
    const v = (x - m) / (x + m);
    const v2 = v * v;
    let s = (x - m) * v;
    let ej = 2 * x * v;
    for (let j = 1; j < 1000; j++) {
      ej *= v2;
      const next = s + ej / (2 * j + 1);
      if (next === s) break;
      s = next;
    }
    return s;
  }
  return x * Math.log(x / m) + m - x;
}

/**
 * `Pr[Bin(n, p) = k]` with `q = 1 − p` given separately, by Loader's saddle-point form
 * ("Fast and accurate computation of binomial probabilities", 2000).
 */
export function binomialPmf(k: number, n: number, p: number, q: number): number {
  if (k > n) return 0;
  if (k === 0) return Math.exp(n * Math.log1p(-p));
  if (k === n) return Math.exp(n * Math.log1p(-q));
  const lc = stirlerr(n) - stirlerr(k) - stirlerr(n - k) - bd0(k, n * p) - bd0(n - k, n * q);
  const lf = LN_2PI + Math.log(k) + Math.log1p(-k / n);
  return Math.exp(lc - 0.5 * lf);
}

/** `Pr[Bin(c, ½) = k]`. */
export function halfBinomialPmf(k: number, c: number): number {
  return binomialPmf(k, c, 0.5, 0.5);
}

/**
 * `Pr[Bin(c, ½) ≥ m]` for `m > c/2` and a bound on its absolute error: summed until a
 * term is below 10⁻¹⁹ of the sum, the rest bounded by a geometric series and added.
 * Returns `[value, errorBound]`.
 */
export function halfBinomialUpperTail(m: number, c: number): [number, number] {
  if (m > c) return [0, 0];
  let term = halfBinomialPmf(m, c);
  let sum = term;
  let k = m;
  let ratio = 0;
  while (k < c) {
    ratio = (c - k) / (k + 1);
    if (term <= 1e-19 * sum) break;
    term *= ratio;
    sum += term;
    k += 1;
  }
  const rest = k < c ? (term * ratio) / (1 - ratio) : 0;
  const terms = k - m + 1;
  const err = sum * (PMF_RELATIVE_ERROR + 4 * Number.EPSILON * terms) + rest;
  return [sum + rest, err];
}

/**
 * Chernoff bound on `Pr[Bin(n, p) ≤ k]` (`k` below the mean) or `Pr[Bin(n, p) ≥ k]`
 * (above it): `exp(−n·KL(k/n ‖ p))`.
 */
export function binomialTailBound(k: number, trials: number, p: number, q: number): number {
  return Math.min(Math.exp(-(bd0(k, trials * p) + bd0(trials - k, trials * q))), 1);
}
