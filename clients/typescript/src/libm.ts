/**
 * Bit-exact ports of the few functions of Rust's `libm` crate (0.2.16, itself a port of
 * FreeBSD's msun / musl) that the Rust client's parameter derivation calls: `exp`,
 * `erfc` and `scalbn`. JavaScript's `Math.exp` is not specified to the bit, so the
 * derivation of σ and of the rank-one parameters must not use it.
 */

const buf = new DataView(new ArrayBuffer(8));

/** The IEEE-754 bits of `x`. */
export function f64ToBits(x: number): bigint {
  buf.setFloat64(0, x);
  return buf.getBigUint64(0);
}

/** The f64 with bits `b`. */
export function f64FromBits(b: bigint): number {
  buf.setBigUint64(0, BigInt.asUintN(64, b));
  return buf.getFloat64(0);
}

function highWord(x: number): number {
  buf.setFloat64(0, x);
  return buf.getUint32(0);
}

function withLowWordZero(x: number): number {
  buf.setFloat64(0, x);
  buf.setUint32(4, 0);
  return buf.getFloat64(0);
}

/** `x·2^n` (libm `scalbn`, correctly rounded). */
export function scalbn(x: number, n: number): number {
  const x1p1023 = 2 ** 1023;
  const x1p53 = 2 ** 53;
  const x1p_1022 = 2 ** -1022;
  let y = x;
  if (n > 1023) {
    y *= x1p1023;
    n -= 1023;
    if (n > 1023) {
      y *= x1p1023;
      n -= 1023;
      if (n > 1023) n = 1023;
    }
  } else if (n < -1022) {
    // Scale by 2^-1022·2^53 in steps so that a subnormal result is rounded once.
    y *= x1p_1022 * x1p53;
    n += 1022 - 53;
    if (n < -1022) {
      y *= x1p_1022 * x1p53;
      n += 1022 - 53;
      if (n < -1022) n = -1022;
    }
  }
  return y * f64FromBits(BigInt(0x3ff + n) << 52n);
}

const LN2HI = 6.9314718036912381649e-1;
const LN2LO = 1.90821492927058770002e-10;
const INVLN2 = 1.442695040888963387;
const P1 = 1.66666666666666019037e-1;
const P2 = -2.77777777770155933842e-3;
const P3 = 6.61375632143793436117e-5;
const P4 = -1.6533902205465251539e-6;
const P5 = 4.13813679705723846039e-8;

/** `e^x`, exactly as libm's `exp` (FreeBSD `e_exp.c`). */
export function exp(x: number): number {
  let hx = highWord(x);
  const sign = hx >>> 31;
  hx &= 0x7fffffff;
  if (hx >= 0x4086232b) {
    if (Number.isNaN(x)) return x;
    if (x > 709.782712893383973096) return x * 2 ** 1023;
    if (x < -708.39641853226410622 && x < -745.13321910194110842) return 0;
  }
  let hi: number;
  let lo: number;
  let k: number;
  if (hx > 0x3fd62e42) {
    if (hx >= 0x3ff0a2b2) {
      // Rust's `as i32`: truncation toward zero.
      k = Math.trunc(INVLN2 * x + (sign ? -0.5 : 0.5));
    } else {
      k = 1 - sign - sign;
    }
    hi = x - k * LN2HI;
    lo = k * LN2LO;
    x = hi - lo;
  } else if (hx > 0x3e300000) {
    k = 0;
    hi = x;
    lo = 0;
  } else {
    return 1 + x;
  }
  const xx = x * x;
  const c = x - xx * (P1 + xx * (P2 + xx * (P3 + xx * (P4 + xx * P5))));
  const y = 1 + ((x * c) / (2 - c) - lo + hi);
  return k === 0 ? y : scalbn(y, k);
}

const ERX = 8.45062911510467529297e-1;
const PP0 = 1.28379167095512558561e-1;
const PP1 = -3.2504210724700149937e-1;
const PP2 = -2.84817495755985104766e-2;
const PP3 = -5.77027029648944159157e-3;
const PP4 = -2.37630166566501626084e-5;
const QQ1 = 3.97917223959155352819e-1;
const QQ2 = 6.50222499887672944485e-2;
const QQ3 = 5.08130628187576562776e-3;
const QQ4 = 1.32494738004321644526e-4;
const QQ5 = -3.9602282787753681232e-6;
const PA0 = -2.36211856075265944077e-3;
const PA1 = 4.14856118683748331666e-1;
const PA2 = -3.72207876035701323847e-1;
const PA3 = 3.18346619901161753674e-1;
const PA4 = -1.10894694282396677476e-1;
const PA5 = 3.54783043256182359371e-2;
const PA6 = -2.166375594868790843e-3;
const QA1 = 1.06420880400844228286e-1;
const QA2 = 5.40397917702171048937e-1;
const QA3 = 7.18286544141962662868e-2;
const QA4 = 1.26171219808761642112e-1;
const QA5 = 1.36370839120290507362e-2;
const QA6 = 1.1984499846799107417e-2;
const RA0 = -9.86494403484714822705e-3;
const RA1 = -6.93858572707181764372e-1;
const RA2 = -1.05586262253232909814e1;
const RA3 = -6.23753324503260060396e1;
const RA4 = -1.62396669462573470355e2;
const RA5 = -1.84605092906711035994e2;
const RA6 = -8.12874355063065934246e1;
const RA7 = -9.81432934416914548592;
const SA1 = 1.96512716674392571292e1;
const SA2 = 1.376577541435190426e2;
const SA3 = 4.34565877475229228821e2;
const SA4 = 6.45387271733267880336e2;
const SA5 = 4.29008140027567833386e2;
const SA6 = 1.08635005541779435134e2;
const SA7 = 6.57024977031928170135;
const SA8 = -6.04244152148580987438e-2;
const RB0 = -9.86494292470009928597e-3;
const RB1 = -7.99283237680523006574e-1;
const RB2 = -1.77579549177547519889e1;
const RB3 = -1.60636384855821916062e2;
const RB4 = -6.37566443368389627722e2;
const RB5 = -1.02509513161107724954e3;
const RB6 = -4.83519191608651397019e2;
const SB1 = 3.03380607434824582924e1;
const SB2 = 3.25792512996573918826e2;
const SB3 = 1.53672958608443695994e3;
const SB4 = 3.19985821950859553908e3;
const SB5 = 2.55305040643316442583e3;
const SB6 = 4.74528541206955367215e2;
const SB7 = -2.24409524465858183362e1;

function erfc1(x: number): number {
  const s = Math.abs(x) - 1;
  const p = PA0 + s * (PA1 + s * (PA2 + s * (PA3 + s * (PA4 + s * (PA5 + s * PA6)))));
  const q = 1 + s * (QA1 + s * (QA2 + s * (QA3 + s * (QA4 + s * (QA5 + s * QA6)))));
  return 1 - ERX - p / q;
}

function erfc2(ix: number, x: number): number {
  if (ix < 0x3ff40000) return erfc1(x);
  x = Math.abs(x);
  const s = 1 / (x * x);
  let r: number;
  let bigS: number;
  if (ix < 0x4006db6d) {
    r = RA0 + s * (RA1 + s * (RA2 + s * (RA3 + s * (RA4 + s * (RA5 + s * (RA6 + s * RA7))))));
    bigS =
      1 + s * (SA1 + s * (SA2 + s * (SA3 + s * (SA4 + s * (SA5 + s * (SA6 + s * (SA7 + s * SA8)))))));
  } else {
    r = RB0 + s * (RB1 + s * (RB2 + s * (RB3 + s * (RB4 + s * (RB5 + s * RB6)))));
    bigS = 1 + s * (SB1 + s * (SB2 + s * (SB3 + s * (SB4 + s * (SB5 + s * (SB6 + s * SB7))))));
  }
  const z = withLowWordZero(x);
  return (exp(-z * z - 0.5625) * exp((z - x) * (z + x) + r / bigS)) / x;
}

/** The complementary error function, exactly as libm's `erfc`. */
export function erfc(x: number): number {
  let ix = highWord(x);
  const sign = ix >>> 31;
  ix &= 0x7fffffff;
  if (ix >= 0x7ff00000) return 2 * sign + 1 / x;
  if (ix < 0x3feb0000) {
    if (ix < 0x3c700000) return 1 - x;
    const z = x * x;
    const r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
    const s = 1 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
    const y = r / s;
    if (sign !== 0 || ix < 0x3fd00000) return 1 - (x + x * y);
    return 0.5 - (x - 0.5 + x * y);
  }
  if (ix < 0x403c0000) return sign !== 0 ? 2 - erfc2(ix, x) : erfc2(ix, x);
  const tiny = 2 ** -1022;
  return sign !== 0 ? 2 - tiny : tiny * tiny;
}

/** Rust's `f64::round`: to the nearest integer, ties away from zero. */
export function roundHalfAway(x: number): number {
  const r = Math.trunc(x);
  const frac = x - r; // exact
  return Math.abs(frac) >= 0.5 ? r + Math.sign(x) : r;
}
