/**
 * The exact samplers of `ldpcov-noise`, mirrored draw for draw: the discrete Gaussian
 * (`sampler.rs`: alias table, caps, tail, exact Bernoulli(exp(−γ))), the bit reservoir
 * (`random_bits.rs`), CKS20's Bernoulli(exp(−x)) (`cks20.rs`, `exp_bernoulli.rs`), the
 * rank-one mixture sampler (`rank_one.rs`) and the triangular dither (`dither.rs`).
 *
 * Every decision that shapes a distribution is taken on integers (BigInt); no
 * floating-point number is used after σ² is read exactly from the f64 σ.
 */

import {
  MASK64,
  bitLength,
  divCeil,
  expAffineBounds,
  expNegBounds,
  expNegQ63,
  isqrt,
  lazyBernoulli,
  pow2,
  shr192Small,
  shrCeil,
  shrCeilU128,
  shrFloorU128,
  type ExpAffine,
} from "./bigmath.js";
import { f64ToBits } from "./libm.js";
import { ChaCha20Rng, randomRangeU64, type WordSource } from "./rng.js";

/** An invalid σ for the exact sampler. */
export class SigmaError extends Error {
  override name = "SigmaError";
}

/** σ² as an exact reduced rational `num/den`, `2^−16 ≤ σ² ≤ 2^100`. */
export class Sigma2 {
  private constructor(
    readonly num: bigint,
    readonly den: bigint,
  ) {}

  static fromRatio(num: bigint, den: bigint): Sigma2 {
    if (den <= 0n || num <= 0n) throw new SigmaError("σ² must be a positive ratio");
    let [a, b] = [num, den];
    while (b !== 0n) [a, b] = [b, a % b];
    const [n, d] = [num / a, den / a];
    if ((n << 16n) < d || n > d << 100n) throw new SigmaError(`σ² = ${n}/${d} is outside [2^-16, 2^100]`);
    return new Sigma2(n, d);
  }

  /** σ² for the f64 σ, exactly (`m·2^e` squared: no rounding). */
  static fromSigma(sigma: number): Sigma2 {
    if (!(Number.isFinite(sigma) && sigma > 0)) throw new SigmaError(`σ must be finite and positive, got ${sigma}`);
    const bits = f64ToBits(sigma);
    const biased = Number((bits >> 52n) & 0x7ffn);
    const frac = bits & ((1n << 52n) - 1n);
    let [m, e] = biased === 0 ? [frac, -1074] : [frac | (1n << 52n), biased - 1075];
    while ((m & 1n) === 0n) {
      m >>= 1n;
      e += 1;
    }
    const m2 = m * m;
    try {
      return e >= 0 ? Sigma2.fromRatio(m2 << BigInt(2 * e), 1n) : Sigma2.fromRatio(m2, 1n << BigInt(-2 * e));
    } catch {
      throw new SigmaError(`σ = ${sigma} is outside [2^-8, 2^50]`);
    }
  }

  /** `⌊σ⌋`. */
  floorSigma(): bigint {
    return isqrt(this.num / this.den);
  }
}

const RESERVOIR_WORDS = 32;
const RESERVOIR_END = 64 * (RESERVOIR_WORDS + 1);

/** `RandomBits`: the generator's words handed out a few bits at a time, in order. */
export class RandomBits<R extends WordSource = WordSource> {
  readonly #words: bigint[] = new Array<bigint>(RESERVOIR_WORDS + 2).fill(0n);
  #pos = RESERVOIR_END;

  constructor(readonly rng: R) {}

  /** `k ≤ 63` fresh bits. */
  take(k: number): bigint {
    if (this.#pos + k > RESERVOIR_END) this.#refill();
    const i = Math.floor(this.#pos / 64);
    const off = BigInt(this.#pos % 64);
    const window = ((this.#words[i]! >> off) | (((this.#words[i + 1]! << 1n) & MASK64) << (63n - off))) & MASK64;
    this.#pos += k;
    return window & ((1n << BigInt(k)) - 1n);
  }

  #refill(): void {
    const carried = Math.max(0, this.#pos - 64 * RESERVOIR_WORDS);
    this.#words[0] = this.#words[RESERVOIR_WORDS]!;
    for (let w = 1; w <= RESERVOIR_WORDS; w++) this.#words[w] = this.rng.nextU64();
    this.#pos = carried;
  }
}

// ---- cks20.rs ----

/** A uniform integer in `[0, bound)` (`random_below`). */
export function randomBelow(rng: WordSource, bound: bigint): bigint {
  const bits = bitLength(bound);
  if (bits === 0) throw new RangeError("empty range");
  if (bits <= 64) {
    const mask = bits === 64 ? MASK64 : (1n << BigInt(bits)) - 1n;
    for (;;) {
      const v = rng.nextU64() & mask;
      if (v < bound) return v;
    }
  }
  const words = Math.ceil(bits / 32);
  const topBits = bits - 32 * (words - 1);
  for (;;) {
    let v = 0n;
    for (let i = 0; i < words; i++) {
      let digit = BigInt(rng.nextU32());
      if (i === words - 1 && topBits < 32) digit &= (1n << BigInt(topBits)) - 1n;
      v |= digit << BigInt(32 * i);
    }
    if (v < bound) return v;
  }
}

function bernoulliExpNegUnit(rng: WordSource, num: bigint, den: bigint): boolean {
  let k = 1n;
  while (randomBelow(rng, den * k) < num) k += 1n;
  return k % 2n === 1n;
}

/** Bernoulli(exp(−num/den)) (CKS20 Algorithm 1, `bernoulli_exp_neg_big`). */
export function bernoulliExpNeg(rng: WordSource, num: bigint, den: bigint): boolean {
  if (num <= den) return bernoulliExpNegUnit(rng, num, den);
  for (let j = num / den; j > 0n; j -= 1n) {
    if (!bernoulliExpNegUnit(rng, 1n, 1n)) return false;
  }
  return bernoulliExpNegUnit(rng, num % den, den);
}

/** Bernoulli(exp(−x)) for the exact value of an f64 `x ≥ 0` (`BernoulliExpNeg`, unreduced). */
export class BernoulliExpNegF64 {
  readonly num: bigint;
  readonly den: bigint;

  constructor(x: number) {
    if (!(Number.isFinite(x) && x >= 0)) throw new RangeError(`the exponent must be finite and non-negative, got ${x}`);
    const bits = f64ToBits(x);
    const biased = Number((bits >> 52n) & 0x7ffn);
    const frac = bits & ((1n << 52n) - 1n);
    const [m, e] = biased === 0 ? [frac, -1074] : [frac | (1n << 52n), biased - 1075];
    [this.num, this.den] = e >= 0 ? [m << BigInt(e), 1n] : [m, 1n << BigInt(-e)];
  }

  sample(rng: WordSource): boolean {
    return bernoulliExpNeg(rng, this.num, this.den);
  }
}

// ---- sampler.rs ----

const PREC = 192n;
const BODY_SIGMAS = 6n;
const MAX_BINS = 1000n;
const OUTPUT_LIMIT = 1n << 62n;
const ALIAS_BITS = 12;

interface Bin {
  wCore: bigint;
  wCap: bigint;
  hmLo: bigint;
  hmHi: bigint;
  rs: bigint;
}

/** Walker's alias table with integer thresholds (`build_alias`). */
function buildAlias(weights: bigint[], capacity: bigint): [bigint, number][] {
  const n = weights.length;
  const w = weights.slice();
  const out: [bigint, number][] = weights.map((_, k) => [capacity, k]);
  const small: number[] = [];
  const large: number[] = [];
  for (let k = 0; k < n; k++) (w[k]! < capacity ? small : large).push(k);
  while (small.length > 0 && large.length > 0) {
    const s = small.pop()!;
    const l = large[large.length - 1]!;
    out[s] = [w[s]!, l];
    w[l] = w[l]! - (capacity - w[s]!);
    if (w[l]! < capacity) {
      large.pop();
      small.push(l);
    }
  }
  return out;
}

/** The exact discrete Gaussian `N_Z(0, σ²)` (`DiscreteGaussian`), precomputed for one σ². */
export class DiscreteGaussian {
  readonly n: bigint;
  readonly d: bigint;
  readonly logCols: bigint;
  readonly colMask: bigint;
  readonly qMask: bigint;
  readonly headBits: number;
  readonly wBits: number;
  readonly singleWord: boolean;
  readonly prob: bigint[];
  readonly alias: number[];
  readonly twoBins: number;
  readonly bins: Bin[];
  readonly x0: bigint;
  readonly bBits: number;
  readonly wTail: bigint;
  readonly kn: bigint;
  readonly ke: bigint;
  readonly imLo: bigint;
  readonly imHi: bigint;
  readonly ie: bigint;

  constructor(readonly sigma2: Sigma2) {
    const { num: n, den: d } = sigma2;
    this.n = n;
    this.d = d;
    const twoN = n << 1n;
    const reach = BODY_SIGMAS * (sigma2.floorSigma() + 1n);
    let wBits = 0;
    while (MAX_BINS << BigInt(wBits) < reach) wBits += 1;
    const w = 1n << BigInt(wBits);
    const nbins = (reach + w - 1n) / w;
    const x0 = nbins * w;
    const logCols = BigInt(bitLength(2n * nbins + 2n - 1n)); // next_power_of_two().trailing_zeros()
    const cols = 1n << logCols;
    const qBits = ALIAS_BITS;
    const singleWord = Number(logCols) + qBits + 1 + wBits <= 63;
    const headBits = Number(logCols) + qBits + 1 + (singleWord ? wBits : 0);
    const capacity = 1n << BigInt(qBits);

    const expC = (c: bigint) => expNegBounds(c * d, twoN, PREC);
    let [rLo, rHi] = expC(w * w);
    const [qLo, qHi] = expC(2n * w * w);
    let [svLo] = expC((w - 1n) * (w - 1n));
    const [vLo] = expC(2n * w * (w - 1n));
    const mulLo = (a: bigint, b: bigint) => (a * b) >> PREC;
    const mulHi = (a: bigint, b: bigint) => shrCeil(a * b, PREC);

    let faLo = pow2(PREC);
    let faHi = pow2(PREC);
    const fa: [bigint, bigint][] = [];
    const fbLo: bigint[] = [];
    for (let i = 0n; i < nbins; i++) {
      fbLo.push(mulLo(faLo, svLo));
      fa.push([faLo, faHi]);
      faLo = mulLo(faLo, rLo);
      faHi = mulHi(faHi, rHi);
      rLo = mulLo(rLo, qLo);
      rHi = mulHi(rHi, qHi);
      svLo = mulLo(svLo, vLo);
    }
    const fx0Hi = faHi;

    const bNeed = divCeil(n, d * x0);
    const bBits = bitLength(bNeed <= 1n ? 0n : bNeed - 1n); // next_power_of_two().trailing_zeros()
    const b = 1n << BigInt(bBits);

    let envelope = 0n;
    for (const [, hi] of fa) envelope += hi * w;
    envelope += fx0Hi * (2n * b);
    const target = cols * capacity - (nbins + 2n);
    const keSigned = 48 + bitLength(envelope) - Number(PREC) - bitLength(target);
    if (keSigned <= 0) throw new Error(`κ exponent ${keSigned}`);
    const ke = BigInt(keSigned);
    const kn = (target << (PREC + ke)) / envelope;
    const sc = PREC + ke;

    const kw = kn * w;
    const weights: bigint[] = new Array<bigint>(Number(cols)).fill(0n);
    const bins: Bin[] = [];
    fa.forEach(([lo, hi], i) => {
      const xLo = kw * lo;
      const xHi = kw * hi;
      const top = shrCeil(xHi, sc);
      const core = (kw * fbLo[i]!) >> sc;
      weights[2 * i] = core;
      weights[2 * i + 1] = top - core;
      const sh = BigInt(Math.max(0, bitLength(xHi) - 63));
      bins.push({
        wCore: core,
        wCap: top - core,
        hmLo: xLo >> sh,
        hmHi: shrCeil(xHi, sh),
        rs: sc - sh - 1n,
      });
    });
    const twoBins = 2 * Number(nbins);
    const wTail = shrCeil(kn * (2n * b) * fx0Hi, sc);
    weights[twoBins] = wTail;
    const used = weights.reduce((s, v) => s + v, 0n);
    const total = cols * capacity;
    if (used > total) throw new Error(`weights ${used} exceed ${total}`);
    weights[twoBins + 1] = total - used;
    const table = buildAlias(weights, capacity);

    const ie = BigInt(62 + bitLength(twoN) - bitLength(d));
    this.logCols = logCols;
    this.colMask = cols - 1n;
    this.qMask = capacity - 1n;
    this.headBits = headBits;
    this.wBits = wBits;
    this.singleWord = singleWord;
    this.prob = table.map(([p]) => p);
    this.alias = table.map(([, a]) => a);
    this.twoBins = twoBins;
    this.bins = bins;
    this.x0 = x0;
    this.bBits = bBits;
    this.wTail = wTail;
    this.kn = kn;
    this.ke = ke;
    this.imLo = (d << ie) / twoN;
    this.imHi = divCeil(d << ie, twoN);
    this.ie = ie;
  }

  /** The sampler for the f64 σ (σ² its exact square). */
  static fromSigma(sigma: number): DiscreteGaussian {
    return new DiscreteGaussian(Sigma2.fromSigma(sigma));
  }

  /** One exact draw, its bits from `bits` (`sample_bits`). */
  sample(bits: RandomBits): bigint {
    const qBits = BigInt(ALIAS_BITS);
    for (;;) {
      const r = bits.take(this.headBits);
      const col = Number(r & this.colMask);
      const thr = (r >> this.logCols) & this.qMask;
      const piece = thr < this.prob[col]! ? col : this.alias[col]!;
      const rest = r >> (this.logCols + qBits);
      const negative = (rest & 1n) === 1n;
      let x: bigint;
      if (piece < this.twoBins) {
        const bin = piece >> 1;
        const off = this.singleWord ? rest >> 1n : bits.take(this.wBits);
        x = (BigInt(bin) << BigInt(this.wBits)) | off;
        if ((piece & 1) === 1 && !this.#capAccept(bits.rng, bin, off, x)) continue;
      } else if (piece === this.twoBins) {
        const t = this.#tailDraw(bits.rng);
        if (t === undefined) continue;
        x = t;
      } else {
        continue;
      }
      if (x === 0n && negative) continue;
      return negative ? -x : x;
    }
  }

  #gamma(x: bigint): [bigint, bigint] {
    return [x * x * this.d, this.n << 1n];
  }

  #capAccept(rng: WordSource, bin: number, off: bigint, x: bigint): boolean {
    const u = rng.nextU64();
    const fast = this.capFast(bin, off, u);
    if (fast !== undefined) return fast;
    const b = this.bins[bin]!;
    const [gNum, gDen] = this.#gamma(x);
    const alpha: ExpAffine = {
      sNum: this.kn << BigInt(this.wBits),
      sDen: pow2(this.ke),
      c: b.wCore,
      d: b.wCap,
      gNum,
      gDen,
    };
    return lazyBernoulli(rng, u, (p) => expAffineBounds(alpha, p));
  }

  /** The fast cap test on the first 64 digits `u` of `U` (`cap_fast`). */
  capFast(bin: number, off: bigint, u: bigint): boolean | undefined {
    const b = this.bins[bin]!;
    const a = BigInt(bin) << BigInt(this.wBits);
    const num = off * (2n * a + off);
    let gLo = 0n;
    let gHi = 0n;
    if (num !== 0n) {
      const s = this.ie - 64n;
      if (s < 0n) return undefined;
      const lo = shr192Small(num * this.imLo, s);
      if (lo === undefined) return undefined;
      const hi = shr192Small(num * this.imHi, s);
      if (hi === undefined) return undefined;
      gLo = lo[0];
      gHi = hi[1];
    }
    const [eLo, eHi] = expNegQ63(gLo, gHi);
    const rhsLo = shrFloorU128(b.hmLo * eLo, b.rs);
    const rhsHi = shrCeilU128(b.hmHi * eHi, b.rs);
    const z = u * b.wCap + (b.wCore << 64n);
    if (z + b.wCap <= rhsLo) return true;
    if (z >= rhsHi) return false;
    return undefined;
  }

  #tailDraw(rng: WordSource): bigint | undefined {
    let j = 0n;
    for (;;) {
      const r = rng.nextU64();
      if (r !== 0n) {
        j += BigInt(bitLength(r & -r) - 1);
        break;
      }
      j += 64n;
    }
    const off = this.bBits === 0 ? 0n : rng.nextU64() >> BigInt(64 - this.bBits);
    const x = this.x0 + (j << BigInt(this.bBits)) + off;
    if (x >= OUTPUT_LIMIT) return undefined;
    const [gNum, gDen] = this.#gamma(x);
    const alpha: ExpAffine = {
      sNum: this.kn << (BigInt(this.bBits) + j + 1n),
      sDen: pow2(this.ke) * this.wTail,
      c: 0n,
      d: 1n,
      gNum,
      gDen,
    };
    const first = rng.nextU64();
    return lazyBernoulli(rng, first, (p) => expAffineBounds(alpha, p)) ? x : undefined;
  }
}

/** The noise source a report is perturbed with (`NoiseSampler`). */
export interface NoiseSampler {
  /** One draw of `N_Z(0, σ²)`, σ = `sigmaGrid` grid units. */
  sampleGrid(sigmaGrid: number): bigint;
  /** A uniform integer in `[0, bound)` (the coarse encodings' stochastic rounding). */
  uniformBelow(bound: bigint): bigint;
  /** One uniform 64-bit word (the rank-one mechanism's random bits). */
  nextWord(): bigint;
}

/**
 * `DiscreteGaussianSampler`: ChaCha20 through a bit reservoir, and the
 * `DiscreteGaussian` of the last σ it saw.
 */
export class DiscreteGaussianSampler implements NoiseSampler {
  readonly #bits: RandomBits<ChaCha20Rng>;
  #cached: [number, DiscreteGaussian] | undefined;

  private constructor(rng: ChaCha20Rng) {
    this.#bits = new RandomBits(rng);
  }

  /** Seeded from `crypto.getRandomValues`: the one to use for real reports. */
  static fromOsRng(): DiscreteGaussianSampler {
    return new DiscreteGaussianSampler(ChaCha20Rng.fromOsRng());
  }

  /** A **deterministic**, **not private** sampler for simulations and tests. */
  static fromSeedForSimulation(seed: bigint): DiscreteGaussianSampler {
    return new DiscreteGaussianSampler(ChaCha20Rng.seedFromU64(seed));
  }

  sampleGrid(sigmaGrid: number): bigint {
    if (!(Number.isFinite(sigmaGrid) && sigmaGrid >= 0)) throw new SigmaError(`noise sd ${sigmaGrid} must be finite and non-negative`);
    if (sigmaGrid === 0) return 0n;
    if (this.#cached === undefined || this.#cached[0] !== sigmaGrid) {
      this.#cached = [sigmaGrid, DiscreteGaussian.fromSigma(sigmaGrid)];
    }
    return this.#cached[1].sample(this.#bits);
  }

  uniformBelow(bound: bigint): bigint {
    return randomRangeU64(this.#bits.rng, bound < 1n ? 1n : bound);
  }

  nextWord(): bigint {
    return this.#bits.rng.nextU64();
  }
}

// ---- rank_one.rs and dither.rs ----

export type CapShape = "symmetric" | "one_sided";

/** The largest lattice exponent `K`. */
const MAX_LATTICE_BITS = 50;
/** The largest input exponent `m`. */
const MAX_INPUT_BITS = 60;
/** `|kᵢ| < 2^63` for every candidate (a draw below `2^62` plus a centre below `2^61`). */
const DRAW_BITS = 63;
/** The box `|kᵢ| < 2^61` both components are conditioned on. */
const BOX_LIMIT = 1n << 61n;
/** The largest tilt λ. */
const MAX_TILT = 255;
/** The fast path's table of `e^{−n}`, `n < 45` (`e^{−44}·2^63 < 1`). */
const EXP_TABLE_LEN = 45;
const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);
const U128_LIMIT = 1n << 128n;
const Q63 = 1n << 63n;

/** The rounds one report took (`RankOneRounds`): both components are always drawn. */
export interface RankOneRounds {
  /** Rounds of the off-cap component (Geometric with success `1 − Q(v)`). */
  offCap: number;
  /** Rounds of the cap component (Geometric with success `A(v) = e^{λγ − λ²ρ²/2}·Q₊(v)`). */
  cap: number;
}

/**
 * The exact rank-one sampler on the lattice `2^−K` (`RankOneSampler`, the mixture
 * sampler of `docs/PRIVACY.md` §8.3): a public-weight coin `[w < P]` on one fresh word,
 * then the off-cap component (the lattice Gaussian conditioned on the box and off the
 * cap, by plain rejection), then the cap component (the half-cap `t ≥ T` by a proposal
 * centred at the integer `λ·v·2^{K−m}`, accepted with an exact Bernoulli
 * `exp(−λ(t − T)/2^{K+m})`; symmetric cap: a random sign from the reservoir), and the
 * coin keeps one of the two. Every random word is read in the same order and the same
 * way as the Rust sampler; no floating-point number is computed.
 */
export class RankOneSampler {
  readonly lattice: DiscreteGaussian;
  readonly threshold: bigint;
  readonly tilt: bigint;
  readonly capProbability: bigint;
  /** Certified `(lo, hi)` bounds on `e^{−n}·2^63`, `n < 45`. */
  readonly expTable: [bigint, bigint][];
  readonly #shift: bigint;
  readonly #centre: bigint;

  constructor(
    readonly cap: CapShape,
    readonly latticeBits: number,
    readonly inputBits: number,
    gammaUnits: bigint,
    gammaBits: number,
    tilt: number,
    capProbability: bigint,
  ) {
    if (!(Number.isInteger(latticeBits) && latticeBits >= 1 && latticeBits <= MAX_LATTICE_BITS)) {
      throw new RangeError(`lattice bits ${latticeBits} must be between 1 and ${MAX_LATTICE_BITS}`);
    }
    if (!(Number.isInteger(inputBits) && inputBits >= 1 && inputBits <= Math.min(MAX_INPUT_BITS, latticeBits))) {
      throw new RangeError(`input bits ${inputBits} must be between 1 and ${MAX_INPUT_BITS} and at most the lattice bits`);
    }
    const shift = latticeBits + inputBits - gammaBits;
    const gammaError = () => new RangeError(`γ = ${gammaUnits}·2^-${gammaBits} does not give an integer cap threshold below 2^126 on this lattice`);
    if (shift < 0 || gammaUnits <= 0n || gammaUnits >= 1n << 64n) throw gammaError();
    this.threshold = gammaUnits << BigInt(shift);
    if (!(this.threshold < 1n << 126n)) throw gammaError();
    if (!(Number.isInteger(tilt) && tilt >= 1 && tilt <= MAX_TILT)) throw new RangeError(`the tilt ${tilt} must be between 1 and ${MAX_TILT}`);
    if (!(capProbability > 0n && capProbability <= MASK64)) throw new RangeError("the cap probability must be positive (and below 2^64)");
    this.tilt = BigInt(tilt);
    this.capProbability = capProbability;
    this.#shift = BigInt(latticeBits + inputBits);
    this.#centre = this.tilt << BigInt(latticeBits - inputBits);
    // The table first, then the lattice, as Rust builds them (both read the e^{−1} cache).
    this.expTable = Array.from({ length: EXP_TABLE_LEN }, (_, n) => expNegBounds(BigInt(n), 1n, 63) as [bigint, bigint]);
    this.lattice = new DiscreteGaussian(Sigma2.fromRatio(1n << BigInt(2 * latticeBits), 1n));
  }

  /**
   * One report for the lifted input (`p + 1` integers on the grid `2^−m`, norm in the
   * band of the lift): the lattice coordinates `kᵢ` (`yᵢ = kᵢ·2^−K`) and both
   * components' rounds.
   */
  sample(bits: RandomBits, direction: bigint[]): { draw: bigint[]; rounds: RankOneRounds } {
    // Σ |kᵢvᵢ| < len·2^{63+m} must stay below 2^126.
    if (DRAW_BITS + this.inputBits + bitLength(BigInt(direction.length)) > 126) {
      throw new RangeError(`${direction.length} coordinates are too many for an exact i128 inner product at these grids`);
    }
    const one = 1n << BigInt(this.inputBits);
    let norm2 = 0n;
    for (const v of direction) {
      const mag = v < 0n ? -v : v;
      if (mag > one) throw new RangeError("the lifted input is not on the sphere");
      norm2 += mag * mag;
    }
    if (norm2 > one * one || norm2 < one * one - (one << 1n)) throw new RangeError("the lifted input is not on the sphere");
    return this.sampleUnchecked(bits, direction);
  }

  /** The report for any direction (tests use it off the sphere): the coin, off-cap, cap, the choice. */
  sampleUnchecked(bits: RandomBits, direction: bigint[]): { draw: bigint[]; rounds: RankOneRounds } {
    const keepCap = bits.rng.nextU64() < this.capProbability;
    const offCapDraw = new Array<bigint>(direction.length).fill(0n);
    const offCap = this.#offCapComponent(bits, direction, offCapDraw);
    const capDraw = new Array<bigint>(direction.length).fill(0n);
    const cap = this.#capComponent(bits, direction, capDraw);
    return { draw: keepCap ? capDraw : offCapDraw, rounds: { offCap, cap } };
  }

  /** `p + 1` fresh lattice draws plus `centre·vᵢ` into `out`: `t = Σ kᵢvᵢ` (i128, wrapping) and whether every `|kᵢ| < 2^61`. */
  #candidate(bits: RandomBits, direction: bigint[], centre: bigint, out: bigint[]): [bigint, boolean] {
    let t = 0n;
    let inBox = true;
    for (let i = 0; i < direction.length; i++) {
      const v = direction[i]!;
      const g = this.lattice.sample(bits);
      // Rust: centre.checked_mul(v).and_then(|c| g.checked_add(c)).unwrap_or(i64::MAX).
      const c = centre * v;
      let x = c < I64_MIN || c > I64_MAX ? I64_MAX : g + c;
      if (x < I64_MIN || x > I64_MAX) x = I64_MAX;
      inBox &&= (x < 0n ? -x : x) < BOX_LIMIT;
      t += x * v;
      out[i] = x;
    }
    // Wrapping i128 addition is addition modulo 2^128: reduce once.
    return [BigInt.asIntN(128, t), inBox];
  }

  #inCap(t: bigint): boolean {
    return this.cap === "symmetric" ? (t < 0n ? -t : t) >= this.threshold : t >= this.threshold;
  }

  /** The lattice Gaussian conditioned on the box and off the cap, by plain rejection. */
  #offCapComponent(bits: RandomBits, direction: bigint[], out: bigint[]): number {
    for (let rounds = 1; ; rounds++) {
      const [t, inBox] = this.#candidate(bits, direction, 0n, out);
      if (inBox && !this.#inCap(t)) return rounds;
    }
  }

  /** The lattice Gaussian conditioned on the box and the cap: the tilted proposal on the half-cap, then (symmetric) a random sign. */
  #capComponent(bits: RandomBits, direction: bigint[], out: bigint[]): number {
    let rounds = 0;
    for (;;) {
      rounds += 1;
      const [t, inBox] = this.#candidate(bits, direction, this.#centre, out);
      const halfCap = t >= this.threshold;
      // t − T ≥ 0 on the half-cap, 0 elsewhere: every round draws the same word.
      const over = halfCap ? t - this.threshold : 0n;
      const coin = this.tiltCoin(bits.rng, over, halfCap);
      if (inBox && halfCap && coin) break;
    }
    if (this.cap === "symmetric" && bits.take(1) === 1n) {
      for (let i = 0; i < out.length; i++) out[i] = -out[i]!;
    }
    return rounds;
  }

  /**
   * Bernoulli(exp(−λ·over/2^{K+m})) exactly (`tilt_coin`): `U < exp(−x)` for
   * `U = (u + V)·2^−64`, `u` one fresh word; decided by {@link expNegFast} but for the
   * rare undecided case, which big-integer bounds refine (`lazyBernoulli`).
   */
  tiltCoin(rng: WordSource, over: bigint, halfCap: boolean): boolean {
    const u = rng.nextU64();
    const scaled = over * this.tilt;
    if (scaled < U128_LIMIT) {
      const [lo, hi] = this.expNegFast(scaled);
      if (u < lo) return true;
      if (u >= hi) return false;
    }
    if (!halfCap) return false;
    const num = over * this.tilt;
    const den = pow2(this.#shift);
    return lazyBernoulli(rng, u, (p) => expNegBounds(num, den, p));
  }

  /**
   * Certified `lo ≤ exp(−x/2^{K+m})·2^64 ≤ hi` (`exp_neg_fast`): `x/2^{K+m} = n + f`,
   * `e^{−f} = (e^{−f/8})^8` from the Q63 Taylor bounds and three directed squarings,
   * `e^{−n}` from the table (`n` clamped to 44).
   */
  expNegFast(x: bigint): [bigint, bigint] {
    const s = this.#shift;
    const n = x >> s;
    const low = x & ((1n << s) - 1n);
    let fLo: bigint;
    let fHi: bigint;
    if (s >= 64n) {
      const rest = s - 64n;
      fLo = low >> rest;
      fHi = fLo + ((low & ((1n << rest) - 1n)) !== 0n ? 1n : 0n);
    } else {
      fLo = low << (64n - s);
      fHi = fLo;
    }
    const [eLo, eHi] = expNegQ63(fLo >> 3n, divCeil(fHi, 8n));
    let lo = eLo;
    let hi = eHi;
    for (let i = 0; i < 3; i++) {
      lo = (lo * lo) >> 63n;
      hi = divCeil(hi * hi, Q63);
    }
    const index = n >= BigInt(EXP_TABLE_LEN - 1) ? EXP_TABLE_LEN - 1 : Number(n);
    const [tLo, tHi] = this.expTable[index]!;
    lo = (lo * tLo) >> 63n;
    hi = divCeil(hi * tHi, Q63);
    return [lo << 1n, hi << 1n];
  }
}

/** Triangular-dither quantisation to a `2^b` times coarser grid (`TriangularDither`). */
export class TriangularDither {
  constructor(readonly fracBits: number) {
    if (!(fracBits >= 1 && fracBits <= 31)) throw new RangeError(`dither bits ${fracBits}`);
  }

  quantiseWith(value: bigint, uniform: bigint): bigint {
    const b = BigInt(this.fracBits);
    const shifted = value + (1n << (b - 1n));
    const whole = shifted >> b;
    const j = shifted - (whole << b);
    const up = j * j;
    const downFrom = (1n << (2n * b + 1n)) - ((1n << b) - j) * ((1n << b) - j);
    return whole + (uniform < up ? 1n : 0n) - (uniform >= downFrom ? 1n : 0n);
  }

  /** Quantised with `2b + 1` fresh bits, clamped to `±32 767`. */
  quantiseI16(value: bigint, bits: RandomBits): number {
    const q = this.quantiseWith(value, bits.take(2 * this.fracBits + 1));
    return Number(q > 32767n ? 32767n : q < -32767n ? -32767n : q);
  }
}
