/**
 * Big-integer fixed point with directed rounding, as `ldpcov-noise`'s `bigint.rs` and
 * `fixed_point.rs`: certified bounds on `exp(−a/b)` and the exact lazy Bernoulli trial.
 * Every function mirrors its Rust namesake operation for operation (the bounds decide
 * when a comparison ends, and so how many random words are read).
 */

import type { WordSource } from "./rng.js";

export const MASK64 = (1n << 64n) - 1n;

/** Bits of `a ≥ 0` (`BigUint::bits`: 0 for 0). */
export function bitLength(a: bigint): number {
  return a === 0n ? 0 : a.toString(2).length;
}

export function pow2(p: number | bigint): bigint {
  return 1n << BigInt(p);
}

/** `⌈a / 2^s⌉` for `a ≥ 0`. */
export function shrCeil(a: bigint, s: number | bigint): bigint {
  const sh = BigInt(s);
  const q = a >> sh;
  return (a & ((1n << sh) - 1n)) === 0n ? q : q + 1n;
}

/** `⌈a / b⌉`. */
export function divCeil(a: bigint, b: bigint): bigint {
  const q = a / b;
  return q * b === a ? q : q + 1n;
}

/** `⌊√a⌋` (exact). */
export function isqrt(a: bigint): bigint {
  if (a < 2n) return a;
  let x = 1n << BigInt(Math.ceil(bitLength(a) / 2));
  for (;;) {
    const y = (x + a / x) >> 1n;
    if (y >= x) return x;
    x = y;
  }
}

function expNegUnit(rLo: bigint, rHi: bigint, wp: bigint): [bigint, bigint] {
  const one = 1n << wp;
  if (rHi === 0n) return [one, one];
  let tLo = one;
  let tHi = one;
  let evenLo = one;
  let evenHi = one;
  let oddLo = 0n;
  let oddHi = 0n;
  let k = 1n;
  let remainder: bigint;
  for (;;) {
    tLo = ((tLo * rLo) >> wp) / k;
    tHi = (shrCeil(tHi * rHi, wp) + (k - 1n)) / k;
    if (tHi <= 1n) {
      remainder = tHi;
      break;
    }
    if (k % 2n === 1n) {
      oddLo += tLo;
      oddHi += tHi;
    } else {
      evenLo += tLo;
      evenHi += tHi;
    }
    k += 1n;
  }
  const neg = oddHi + remainder;
  const lo = evenLo > neg ? evenLo - neg : 0n;
  return [lo, evenHi + remainder - oddLo];
}

/** Bounds on e^{−1}·2^p at the largest precision computed so far (Rust: per thread). */
let expNegOneCache: [bigint, bigint, bigint] = [0n, 0n, 0n];

function expNegOne(wp: bigint): [bigint, bigint] {
  if (expNegOneCache[0] < wp) {
    let p = wp > 2n * expNegOneCache[0] ? wp : 2n * expNegOneCache[0];
    if (p < 512n) p = 512n;
    const one = 1n << p;
    const [lo, hi] = expNegUnit(one, one, p);
    expNegOneCache = [p, lo, hi];
  }
  const shift = expNegOneCache[0] - wp;
  return [expNegOneCache[1] >> shift, shrCeil(expNegOneCache[2], shift)];
}

function powBounds(bLo: bigint, bHi: bigint, j: bigint, wp: bigint): [bigint, bigint] {
  let rLo = 1n << wp;
  let rHi = rLo;
  while (j > 0n) {
    if ((j & 1n) === 1n) {
      rLo = (rLo * bLo) >> wp;
      rHi = shrCeil(rHi * bHi, wp);
    }
    j >>= 1n;
    if (j > 0n) {
      bLo = (bLo * bLo) >> wp;
      bHi = shrCeil(bHi * bHi, wp);
    }
  }
  return [rLo, rHi];
}

/** Certified `lo ≤ exp(−a/b)·2^p ≤ hi` (`exp_neg_bounds`). */
export function expNegBounds(a: bigint, b: bigint, p: number | bigint): [bigint, bigint] {
  const pb = BigInt(p);
  if (b <= 0n) throw new RangeError("zero denominator");
  if (a === 0n) {
    const one = 1n << pb;
    return [one, one];
  }
  const j = a / b;
  if (j >= pb) return [0n, 1n];
  const r = a % b;
  const wp = pb + 64n + 2n * j + 2n * BigInt(bitLength(j));
  const rShifted = r << wp;
  let [lo, hi] = expNegUnit(rShifted / b, divCeil(rShifted, b), wp);
  if (j > 0n) {
    const [eLo, eHi] = expNegOne(wp);
    const [pLo, pHi] = powBounds(eLo, eHi, j, wp);
    lo = (lo * pLo) >> wp;
    hi = shrCeil(hi * pHi, wp);
  }
  return [lo >> (wp - pb), shrCeil(hi, wp - pb)];
}

/** `α = (S·exp(−γ) − C)/D`, `S = sNum/sDen`, `γ = gNum/gDen` (`ExpAffine`). */
export interface ExpAffine {
  sNum: bigint;
  sDen: bigint;
  c: bigint;
  d: bigint;
  gNum: bigint;
  gDen: bigint;
}

export function expAffineBounds(a: ExpAffine, prec: bigint): [bigint, bigint] {
  const top = BigInt(bitLength(a.sNum) + 2);
  const bottom = BigInt(bitLength(a.sDen) + bitLength(a.d));
  const scale = top > bottom ? top - bottom : 0n;
  const p2 = prec + scale + 16n;
  const [eLo, eHi] = expNegBounds(a.gNum, a.gDen, p2);
  const den = (a.sDen * a.d) << p2;
  const sub = (a.c * a.sDen) << (p2 + prec);
  const nLo = (a.sNum * eLo) << prec;
  const nHi = (a.sNum * eHi) << prec;
  const lo = nLo > sub ? (nLo - sub) / den : 0n;
  const hi = nHi > sub ? divCeil(nHi - sub, den) : 0n;
  const one = 1n << prec;
  return [lo < one ? lo : one, hi < one ? hi : one];
}

/** Decides `U < α` for a uniform `U` whose first 64 digits are `first` (`lazy_bernoulli`). */
export function lazyBernoulli(rng: WordSource, first: bigint, bounds: (prec: bigint) => [bigint, bigint]): boolean {
  let u = first;
  let prec = 64n;
  for (;;) {
    const [lo, hi] = bounds(prec);
    if (u < lo) return true;
    if (u >= hi) return false;
    u = (u << 64n) + rng.nextU64();
    prec += 64n;
  }
}

// ---- fixed_point.rs ----

function invFactorials(ceil: boolean): bigint[] {
  const out: bigint[] = [];
  let fact = 1n;
  for (let k = 0n; k < 16n; k++) {
    if (k > 0n) fact *= k;
    const q = (1n << 63n) / fact;
    const rem = (1n << 63n) % fact;
    out.push(ceil && rem !== 0n ? q + 1n : q);
  }
  return out;
}
const INV_FACT_LO = invFactorials(false);
const INV_FACT_HI = invFactorials(true);
const TAYLOR_TERMS = 13;

function mulHiFloor(a: bigint, b: bigint): bigint {
  return (a * b) >> 64n;
}

function mulHiCeil(a: bigint, b: bigint): bigint {
  const p = a * b;
  return (p >> 64n) + ((p & MASK64) !== 0n ? 1n : 0n);
}

/** Certified `lo ≤ exp(−γ)·2^63 ≤ hi` for `γ ∈ [gLo, gHi]·2^−64` (`exp_neg_q63`). */
export function expNegQ63(gLo: bigint, gHi: bigint): [bigint, bigint] {
  let pLo = gLo;
  let pHi = gHi;
  let lo = 1n << 63n;
  let hi = 1n << 63n;
  for (let k = 1; k <= TAYLOR_TERMS; k++) {
    if (k > 1) {
      pLo = mulHiFloor(pLo, gLo);
      pHi = mulHiCeil(pHi, gHi);
    }
    const tLo = mulHiFloor(pLo, INV_FACT_LO[k]!);
    const tHi = mulHiCeil(pHi, INV_FACT_HI[k]!);
    if (k % 2 === 1) {
      lo -= tHi;
      hi -= tLo;
    } else {
      lo += tLo;
      hi += tHi;
    }
  }
  const pNext = mulHiCeil(pHi, gHi);
  const rem = mulHiCeil(pNext, INV_FACT_HI[TAYLOR_TERMS + 1]!);
  lo -= rem;
  hi += rem;
  const clamp = (v: bigint) => (v < 0n ? 0n : v > 1n << 63n ? 1n << 63n : v);
  return [clamp(lo), clamp(hi)];
}

/** `(⌊v/2^s⌋, ⌈v/2^s⌉)` of a 192-bit `v` if the ceiling is below `2^62` (`shr192_small`). */
export function shr192Small(v: bigint, s: bigint): [bigint, bigint] | undefined {
  if (s >= 192n) return [0n, v !== 0n ? 1n : 0n];
  const floor = v >> s;
  if (floor > MASK64) return undefined;
  const ceil = floor + ((v & ((1n << s) - 1n)) !== 0n ? 1n : 0n);
  return ceil < 1n << 62n ? [floor, ceil] : undefined;
}

export function shrFloorU128(v: bigint, s: bigint): bigint {
  return s >= 128n ? 0n : v >> s;
}

export function shrCeilU128(v: bigint, s: bigint): bigint {
  if (s >= 128n) return v !== 0n ? 1n : 0n;
  const q = v >> s;
  return q + ((q << s) !== v ? 1n : 0n);
}
