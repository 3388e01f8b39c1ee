/**
 * `ChaCha20Rng` exactly as Rust's `rand_chacha` 0.9 produces it: the original ChaCha20
 * (64-bit block counter, 64-bit stream id 0) keyed by the 32-byte seed, read as 32-bit
 * words four blocks at a time; `seedFromU64` expands a u64 into the key with `rand_core`
 * 0.9's PCG32 construction. The cipher itself is `@noble/ciphers` (audited).
 */

import { chacha20orig } from "@noble/ciphers/chacha.js";

const MASK64 = (1n << 64n) - 1n;
/** Blocks per refill, as `rand_chacha` (`BUF_BLOCKS`): 64 words. */
const BUF_BLOCKS = 4;
const BUF_WORDS = BUF_BLOCKS * 16;
/** noble's counter is 32-bit: 2^32 blocks (256 GiB) per generator, far above any use here. */
const MAX_BLOCKS = 2 ** 32;

/** A source of uniform 32- and 64-bit words (the Rust `RngCore` the samplers read). */
export interface WordSource {
  /** The next 32-bit word, as a number in `[0, 2^32)`. */
  nextU32(): number;
  /** The next 64-bit word, as a bigint in `[0, 2^64)`. */
  nextU64(): bigint;
}

/** rand_core 0.9's `seed_from_u64`: 32 bytes from PCG32 steps of `state`. */
export function seedFromU64(seed: bigint): Uint8Array {
  const MUL = 6364136223846793005n;
  const INC = 11634580027462260723n;
  let state = BigInt.asUintN(64, seed);
  const out = new Uint8Array(32);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) {
    state = (state * MUL + INC) & MASK64;
    const xorshifted = Number(((state >> 18n) ^ state) >> 27n) >>> 0;
    const rot = Number(state >> 59n);
    const x = ((xorshifted >>> rot) | (xorshifted << ((32 - rot) & 31))) >>> 0;
    view.setUint32(4 * i, x, true);
  }
  return out;
}

/** rand_chacha 0.9's `ChaCha20Rng`: the same words, in the same order. */
export class ChaCha20Rng implements WordSource {
  readonly #key: Uint8Array;
  #block = 0;
  readonly #results = new Uint32Array(BUF_WORDS);
  #index = BUF_WORDS;

  /** The generator keyed by a 32-byte seed (`SeedableRng::from_seed`). */
  constructor(seed: Uint8Array) {
    if (seed.length !== 32) throw new RangeError(`a ChaCha20 seed has 32 bytes, got ${seed.length}`);
    this.#key = Uint8Array.from(seed);
  }

  /** `ChaCha20Rng::seed_from_u64`: deterministic, **not private** (simulations and tests). */
  static seedFromU64(seed: bigint): ChaCha20Rng {
    return new ChaCha20Rng(seedFromU64(seed));
  }

  /** A generator keyed by 32 bytes of `crypto.getRandomValues` (the one for real reports). */
  static fromOsRng(): ChaCha20Rng {
    const seed = new Uint8Array(32);
    globalThis.crypto.getRandomValues(seed);
    return new ChaCha20Rng(seed);
  }

  #generate(): void {
    if (this.#block + BUF_BLOCKS > MAX_BLOCKS) throw new RangeError("ChaCha20 stream exhausted");
    const bytes = chacha20orig(this.#key, new Uint8Array(8), new Uint8Array(4 * BUF_WORDS), undefined, this.#block);
    this.#block += BUF_BLOCKS;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < BUF_WORDS; i++) this.#results[i] = view.getUint32(4 * i, true);
  }

  nextU32(): number {
    if (this.#index >= BUF_WORDS) {
      this.#generate();
      this.#index = 0;
    }
    return this.#results[this.#index++]!;
  }

  nextU64(): bigint {
    const index = this.#index;
    if (index < BUF_WORDS - 1) {
      this.#index += 2;
      return (BigInt(this.#results[index + 1]!) << 32n) | BigInt(this.#results[index]!);
    }
    if (index >= BUF_WORDS) {
      this.#generate();
      this.#index = 2;
      return (BigInt(this.#results[1]!) << 32n) | BigInt(this.#results[0]!);
    }
    const x = BigInt(this.#results[BUF_WORDS - 1]!);
    this.#generate();
    this.#index = 1;
    return (BigInt(this.#results[0]!) << 32n) | x;
  }

  /** `fill_bytes`: little-endian words, a partly used last word discarded. */
  fillBytes(dest: Uint8Array): void {
    let read = 0;
    while (read < dest.length) {
      if (this.#index >= BUF_WORDS) {
        this.#generate();
        this.#index = 0;
      }
      const word = this.#results[this.#index++]!;
      for (let b = 0; b < 4 && read < dest.length; b++) dest[read++] = (word >>> (8 * b)) & 0xff;
    }
  }
}

/**
 * rand 0.9's `random_range(0..bound)` for u64 (`UniformInt::sample_single_inclusive`,
 * the default, biased-by-at-most-2^-64 "Lemire with one extra word" method).
 */
export function randomRangeU64(rng: WordSource, bound: bigint): bigint {
  if (bound < 1n) throw new RangeError("empty range");
  const range = bound; // high − low + 1 with low = 0, high = bound − 1
  const v = rng.nextU64() * range;
  let result = v >> 64n;
  const lo = v & MASK64;
  if (lo > ((1n << 64n) - range) % (1n << 64n)) {
    const newHi = (rng.nextU64() * range) >> 64n;
    if (lo + newHi > MASK64) result += 1n;
  }
  return result;
}
