/**
 * The limits and shared constants of a collection (a leaf: imports nothing), and the
 * error a spec the device cannot use raises. `collection.ts` and every mechanism read
 * them; `collection.ts` re-exports them.
 */

export const MAX_DIM = 4096;
export const MAX_EPSILON = 100;
/** The mean block's weight of the Gaussian and raw-vector reports, w = 1/2. */
export const MEAN_WEIGHT = 0.5;

/** A spec the device cannot use, or a server whose parameters disagree with it. */
export class SpecError extends Error {
  override name = "SpecError";
}

/** Bad input: wrong length, or a NaN or infinite coordinate. Raised before any noise is drawn. */
export class InputError extends Error {
  override name = "InputError";
}

export function triangleLen(p: number): number {
  return (p * (p + 1)) / 2;
}

/** Δ₀ of a report with (`hasMean`) or without the mean block: `(2 + w²)/√2` or `√2`. */
export function baseSensitivityOf(hasMean: boolean): number {
  return hasMean ? (2 + MEAN_WEIGHT * MEAN_WEIGHT) / Math.SQRT2 : Math.SQRT2;
}
