/**
 * A collection as the device derives it from its spec (`ldpcov_proto::Collection`):
 * every parameter re-derived locally, and the check that refuses a server announcing
 * different parameters (less noise in particular).
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type CollectionParams,
  type CollectionSpec,
  CollectionSpecSchema,
  Encoding,
  LocalMechanism,
  Moments,
  PrivacyModel,
} from "./gen/ldpcov/v1/ldpcov_pb.js";
import {
  analyticSigma,
  type Cap,
  pureDpRho,
  type RankOneParams,
  rankOneParams,
  WIRE_STEP_BITS,
  zcdpRho,
  zcdpRhoForEpsilon,
} from "./calibration.js";
import { scalbn } from "./libm.js";
import { shuffledEpsilon } from "./accounting/amplification.js";

export const MAX_DIM = 4096;
export const MAX_EPSILON = 100;
export const MEAN_WEIGHT = 0.5;
const MIN_SIGMA_GRID = 16;
const MAX_GRID_BITS = 24;
const MIN_GRID_BITS = 8;
const GRID_HEADROOM_SIGMAS = 50;
const VALIDATION_SIGMAS = 7.53;
const WIRE_CLAMP_SIGMAS = 6;
const SVEC_ROUNDING_MARGIN = 1 / 1024;
const I32_MAX = 2147483647;
/** The relative tolerance of `Collection::from_params`. */
const PARAMS_TOLERANCE = 1e-12;

/** Largest minimum batch size of a shuffled collection (`shuffle::MAX_MIN_BATCH_SIZE`). */
export const MAX_MIN_BATCH_SIZE = 100_000_000;
const MAX_BATCH_WINDOW_SECONDS = 31 * 86_400;
const MIN_KEY_ROTATION_SECONDS = 60;
const MAX_KEY_ROTATION_SECONDS = 366 * 86_400;
const MAX_KEY_GRACE_ROTATIONS = 1000;

/**
 * A shuffled collection's settings as its spec states them (`ShuffleSettings`), checked
 * as the Rust client checks a stored or received spec: every field in range as it is.
 */
export interface ShuffleSettings {
  /** Fewest reports in a batch the aggregator accepts. */
  readonly minBatchSize: number;
  /** Shortest batch window of the relay, seconds. */
  readonly batchWindowSeconds: number;
  /** δ of the central guarantee. */
  readonly centralDelta: number;
  /** The HPKE key rotation period, seconds. */
  readonly keyRotationSeconds: number;
  /** Rotations a superseded key still opens reports for. */
  readonly keyGraceRotations: number;
}

/**
 * A shuffled collection's central guarantee as this device computes it
 * (`ShuffledPrivacy`): from the spec's ε0, batch floor and central δ, never from a
 * figure a server announces.
 */
export interface ShuffledPrivacy {
  readonly minBatch: number;
  readonly localEpsilon: number;
  readonly centralEpsilon: number;
  readonly centralDelta: number;
}

/** A spec the device cannot use, or a server whose parameters disagree with it. */
export class SpecError extends Error {
  override name = "SpecError";
}

/** The Gaussian report's calibrated parameters (`GaussianReport`). */
export interface GaussianParams {
  kind: "gaussian";
  /** Off-diagonal factor: 1 (triu) or √2 (svec). */
  factor: number;
  svec: boolean;
  gridBits: number;
  sensitivity: number;
  sigma: number;
  maxAbsGridValue: bigint;
  wireStep: bigint;
  wireMax: bigint;
}

export type Mechanism =
  | GaussianParams
  | { kind: "rank_one"; params: RankOneParams }
  | { kind: "raw_vector" };

function shuffleSettings(spec: NonNullable<CollectionSpec["shuffle"]>): ShuffleSettings {
  const range = (field: string, value: number | bigint, r: string) => new SpecError(`shuffle.${field} ${value} is outside ${r}`);
  if (!(spec.minBatchSize >= 2n && spec.minBatchSize <= BigInt(MAX_MIN_BATCH_SIZE))) throw range("min_batch_size", spec.minBatchSize, "[2, 1e8]");
  if (!(spec.batchWindowSeconds >= 1n && spec.batchWindowSeconds <= BigInt(MAX_BATCH_WINDOW_SECONDS))) {
    throw range("batch_window_seconds", spec.batchWindowSeconds, "[1, 2678400]");
  }
  if (!(spec.centralDelta > 0 && spec.centralDelta < 1)) throw range("central_delta", spec.centralDelta, "(0, 1)");
  if (!(spec.keyRotationSeconds >= BigInt(MIN_KEY_ROTATION_SECONDS) && spec.keyRotationSeconds <= BigInt(MAX_KEY_ROTATION_SECONDS))) {
    throw range("key_rotation_seconds", spec.keyRotationSeconds, "[60, 31622400]");
  }
  if (!(spec.keyGraceRotations >= 1 && spec.keyGraceRotations <= MAX_KEY_GRACE_ROTATIONS)) {
    throw range("key_grace_rotations", spec.keyGraceRotations, "[1, 1000]");
  }
  return Object.freeze({
    minBatchSize: Number(spec.minBatchSize),
    batchWindowSeconds: Number(spec.batchWindowSeconds),
    centralDelta: spec.centralDelta,
    keyRotationSeconds: Number(spec.keyRotationSeconds),
    keyGraceRotations: spec.keyGraceRotations,
  });
}

export function triangleLen(p: number): number {
  return (p * (p + 1)) / 2;
}

function calibrateGaussian(
  dim: number,
  hasMean: boolean,
  svec: boolean,
  epsilon: number,
  delta: number,
  encoding: Encoding,
): GaussianParams {
  const base = hasMean ? (2 + MEAN_WEIGHT * MEAN_WEIGHT) / Math.SQRT2 : Math.SQRT2;
  const entries = (hasMean ? dim : 0) + triangleLen(dim);
  const margin = svec ? 1 + SVEC_ROUNDING_MARGIN : 1;
  for (let gridBits = MAX_GRID_BITS; gridBits >= MIN_GRID_BITS; gridBits--) {
    const scale = 2 ** gridBits;
    const sensitivity = base + (Math.sqrt(entries) / scale) * margin;
    const sigma = analyticSigma(sensitivity, epsilon, delta);
    const headroom = Math.ceil((1 + GRID_HEADROOM_SIGMAS * sigma) * scale);
    if (sigma * scale < MIN_SIGMA_GRID) throw new SpecError(`epsilon ${epsilon} leaves too little noise`);
    if (headroom <= I32_MAX) {
      let wireStep: bigint;
      let wireMax: bigint;
      let bound: bigint;
      if (encoding === Encoding.I16_LE || encoding === Encoding.I8) {
        wireMax = encoding === Encoding.I8 ? 127n : 32767n;
        const range = Math.ceil((1 + WIRE_CLAMP_SIGMAS * sigma) * scale);
        wireStep = BigInt(Math.ceil(range / Number(wireMax)));
        bound = wireStep * wireMax;
      } else {
        bound = BigInt(Math.ceil((1 + VALIDATION_SIGMAS * sigma) * scale));
        wireStep = 1n;
        wireMax = bound;
      }
      return {
        kind: "gaussian",
        factor: svec ? Math.SQRT2 : 1,
        svec,
        gridBits,
        sensitivity,
        sigma,
        maxAbsGridValue: bound,
        wireStep,
        wireMax,
      };
    }
  }
  throw new SpecError(`(ε = ${epsilon}, δ = ${delta}) cannot be calibrated`);
}

/** A collection: its spec, with every parameter derived from it (`Collection::from_spec`). */
export class Collection {
  private constructor(
    readonly id: string,
    readonly dim: number,
    readonly epsilon: number,
    readonly delta: number,
    readonly clipRadius: number,
    readonly centre: readonly number[],
    readonly hasMean: boolean,
    readonly encoding: Encoding,
    readonly mechanism: Mechanism,
    /**
     * A shuffled collection's settings (`CollectionSpec.shuffle` set, rank-one only):
     * its reports are sealed to the collection's key and sent through a relay, never
     * directly. `undefined` for a collection that is not shuffled.
     */
    readonly shuffle: ShuffleSettings | undefined = undefined,
  ) {}

  /** Whether the collection is shuffled ({@link shuffle} set). */
  get shuffled(): boolean {
    return this.shuffle !== undefined;
  }

  #shuffledPrivacy: ShuffledPrivacy | null | undefined;

  /**
   * A shuffled collection's central guarantee at its minimum batch size
   * (`Collection::shuffled_privacy`): the smaller of the variation-ratio and FMT21 bounds
   * at the spec's ε0, batch floor and central δ, computed on first call (milliseconds; a
   * few hundred at 10⁸ reports and small ε0) and kept. `undefined` for a collection that
   * is not shuffled, or when no bound covers it.
   */
  shuffledPrivacy(): ShuffledPrivacy | undefined {
    if (this.#shuffledPrivacy === undefined) {
      const s = this.shuffle;
      let privacy: ShuffledPrivacy | null = null;
      if (s !== undefined && this.mechanism.kind === "rank_one") {
        try {
          privacy = Object.freeze({
            minBatch: s.minBatchSize,
            localEpsilon: this.epsilon,
            centralEpsilon: shuffledEpsilon(this.epsilon, s.minBatchSize, s.centralDelta),
            centralDelta: s.centralDelta,
          });
        } catch {
          privacy = null;
        }
      }
      this.#shuffledPrivacy = privacy;
    }
    return this.#shuffledPrivacy ?? undefined;
  }

  /** Derives a collection from its spec (the stored path: unspecified fields keep their old meaning). */
  static fromSpec(spec: MessageInitShape<typeof CollectionSpecSchema> | CollectionSpec): Collection {
    const s = create(CollectionSpecSchema, spec as MessageInitShape<typeof CollectionSpecSchema>);
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(s.collectionId)) throw new SpecError(`bad collection id ${JSON.stringify(s.collectionId)}`);
    const dim = s.dim;
    if (dim === 0 || dim > MAX_DIM) throw new SpecError(`dimension ${dim}`);
    const { epsilon, delta, clipRadius } = s;
    if (!(Number.isFinite(epsilon) && epsilon > 0 && epsilon <= MAX_EPSILON)) throw new SpecError(`epsilon ${epsilon}`);
    const central = s.privacyModel === PrivacyModel.CENTRAL;
    if (![PrivacyModel.UNSPECIFIED, PrivacyModel.LOCAL, PrivacyModel.CENTRAL].includes(s.privacyModel)) {
      throw new SpecError(`privacy model ${s.privacyModel}`);
    }
    let local = s.localMechanism;
    if (local === LocalMechanism.UNSPECIFIED && !central) local = LocalMechanism.GAUSSIAN_TRIU;
    else if (local !== LocalMechanism.UNSPECIFIED && central) throw new SpecError("a central collection has no local mechanism");
    if (![LocalMechanism.UNSPECIFIED, LocalMechanism.GAUSSIAN, LocalMechanism.GAUSSIAN_TRIU, LocalMechanism.RANK_ONE].includes(local)) {
      throw new SpecError(`local mechanism ${local}`);
    }
    const rankOne = local === LocalMechanism.RANK_ONE;
    if (rankOne) {
      if (delta !== 0) throw new SpecError(`the rank-one mechanism is pure ε-LDP: delta must be 0, got ${delta}`);
    } else if (!(delta > 0 && delta < 1)) throw new SpecError(`delta ${delta}`);
    if (!(Number.isFinite(clipRadius) && clipRadius > 0)) throw new SpecError(`clip radius ${clipRadius}`);
    if (s.minReports === 0n) throw new SpecError("min_reports must be at least 1");
    let encoding = s.encoding;
    if (encoding === Encoding.UNSPECIFIED) encoding = central ? Encoding.RAW_I32_LE : rankOne ? Encoding.I16_LE : Encoding.I32_LE;
    if (encoding > Encoding.RAW_I32_LE) throw new SpecError(`encoding ${encoding}`);
    if (rankOne && encoding !== Encoding.I16_LE) throw new SpecError("the rank-one mechanism sends i16");
    if (central !== (encoding === Encoding.RAW_I32_LE)) throw new SpecError(`encoding ${encoding} does not suit the privacy model`);
    if (s.moments > Moments.MEAN_AND_COVARIANCE) throw new SpecError(`moments ${s.moments}`);
    const hasMean = s.moments === Moments.MEAN_AND_COVARIANCE;
    if (s.centre.length !== 0 && (s.centre.length !== dim || !s.centre.every(Number.isFinite))) {
      throw new SpecError("the centre must be empty or dim finite values");
    }
    let shuffle: ShuffleSettings | undefined;
    if (s.shuffle !== undefined) {
      if (central || !rankOne) throw new SpecError("only a local rank-one collection can be shuffled");
      shuffle = shuffleSettings(s.shuffle);
    }
    let mechanism: Mechanism;
    if (central) mechanism = { kind: "raw_vector" };
    else if (rankOne) {
      const cap: Cap = hasMean ? "one_sided" : "symmetric";
      mechanism = { kind: "rank_one", params: rankOneParams(dim, epsilon, cap) };
    } else {
      mechanism = calibrateGaussian(dim, hasMean, local === LocalMechanism.GAUSSIAN, epsilon, delta, encoding);
    }
    return new Collection(s.collectionId, dim, epsilon, delta, clipRadius, [...s.centre], hasMean, encoding, mechanism, shuffle);
  }

  /**
   * Re-derives the collection from the parameters a server sent and refuses any
   * disagreement beyond a relative 10⁻¹² (`Collection::from_params`): a server cannot
   * talk the device into adding less noise.
   */
  static fromParams(params: CollectionParams): Collection {
    if (params.spec === undefined) throw new SpecError("the parameters carry no spec");
    const local = Collection.fromSpec(params.spec);
    const same = (a: number, b: number) => Math.abs(a - b) <= PARAMS_TOLERANCE * Math.max(Math.abs(a), Math.abs(b));
    let rankOneAgrees = params.rankOne === undefined;
    if (local.mechanism.kind === "rank_one") {
      const p = local.mechanism.params;
      const r = params.rankOne;
      const step = scalbn(1, -WIRE_STEP_BITS);
      rankOneAgrees =
        r !== undefined &&
        r.gammaUnits === p.gammaUnits &&
        r.gamma === p.gamma &&
        r.nominalEpsilon === p.nominalEpsilon &&
        r.eta === p.eta &&
        r.kappa === p.moments.kappa &&
        r.meanScale === p.moments.meanScale &&
        r.ditherVariance === (step * step) / 4 &&
        r.expectedRounds === 1 / p.moments.acceptance;
    }
    const agrees =
      params.entries === local.entries &&
      params.gridBits === local.gridBits &&
      same(params.sigma, local.sigma) &&
      same(params.sensitivity, local.sensitivity) &&
      params.maxAbsGridValue === local.maxAbsGridValue &&
      params.wireStep === local.wireStep &&
      params.wireMax === local.wireMax &&
      params.meanWeight === local.meanWeight &&
      params.meanEntries === local.meanEntries &&
      same(params.baseSensitivity, local.baseSensitivity) &&
      rankOneAgrees;
    if (!agrees) {
      throw new SpecError(
        `the server's parameters disagree with the local derivation (server σ = ${params.sigma}, local σ = ${local.sigma}): refusing the collection`,
      );
    }
    return local;
  }

  /**
   * The zCDP ρ one report spends (`Collection::rho`): `Δ²/(2σ²)` for the Gaussian
   * mechanism, `ε²/2` for the pure ε-LDP rank-one mechanism, and for a central
   * collection the ρ whose (ε, δ) conversion meets its spec.
   */
  get rho(): number {
    switch (this.mechanism.kind) {
      case "gaussian":
        return zcdpRho(this.mechanism.sensitivity, this.mechanism.sigma);
      case "rank_one":
        return pureDpRho(this.epsilon);
      case "raw_vector":
        return zcdpRhoForEpsilon(this.epsilon, this.delta);
    }
  }

  get isCentral(): boolean {
    return this.mechanism.kind === "raw_vector";
  }

  /** The mean block's weight: w = 1/2, or the rank-one mechanism's c (0 without a mean). */
  get meanWeight(): number {
    if (!this.hasMean) return 0;
    return this.mechanism.kind === "rank_one" ? this.mechanism.params.moments.meanScale : MEAN_WEIGHT;
  }

  get meanEntries(): number {
    return this.hasMean ? this.dim : 0;
  }

  /** Δ₀ (0 for the rank-one mechanism, whose privacy is not a sensitivity's). */
  get baseSensitivity(): number {
    if (this.mechanism.kind === "rank_one") return 0;
    return this.hasMean ? (2 + MEAN_WEIGHT * MEAN_WEIGHT) / Math.SQRT2 : Math.SQRT2;
  }

  get entries(): number {
    return this.meanEntries + triangleLen(this.dim);
  }

  get gridBits(): number {
    switch (this.mechanism.kind) {
      case "gaussian":
        return this.mechanism.gridBits;
      case "rank_one":
        return 2 * WIRE_STEP_BITS;
      case "raw_vector":
        return 30;
    }
  }

  get sigma(): number {
    return this.mechanism.kind === "gaussian" ? this.mechanism.sigma : 0;
  }

  /** σ in grid units, `σ·2^k`. */
  get sigmaGrid(): number {
    return this.mechanism.kind === "gaussian" ? this.mechanism.sigma * 2 ** this.mechanism.gridBits : 0;
  }

  get sensitivity(): number {
    switch (this.mechanism.kind) {
      case "gaussian":
        return this.mechanism.sensitivity;
      case "rank_one":
        return 0;
      case "raw_vector":
        return this.baseSensitivity;
    }
  }

  get maxAbsGridValue(): bigint {
    switch (this.mechanism.kind) {
      case "gaussian":
        return this.mechanism.maxAbsGridValue;
      case "rank_one":
        return 32767n * 32767n;
      case "raw_vector":
        return 1n << 30n;
    }
  }

  get wireStep(): bigint {
    switch (this.mechanism.kind) {
      case "gaussian":
        return this.mechanism.wireStep;
      case "rank_one":
        return 1n << BigInt(WIRE_STEP_BITS);
      case "raw_vector":
        return 1n;
    }
  }

  get wireMax(): bigint {
    switch (this.mechanism.kind) {
      case "gaussian":
        return this.mechanism.wireMax;
      case "rank_one":
        return 32767n;
      case "raw_vector":
        return 1n << 15n;
    }
  }
}
