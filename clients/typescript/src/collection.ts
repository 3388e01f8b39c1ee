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
import { type Cap, rankOneParams } from "./calibration.js";
import { MAX_DIM, MAX_EPSILON, SpecError, triangleLen } from "./limits.js";
import { GaussianMechanism, type Mechanism, RankOneMechanism, RawVectorMechanism } from "./mechanism/index.js";
import { shuffledEpsilon } from "./accounting/amplification.js";

export { MAX_DIM, MAX_EPSILON, MEAN_WEIGHT, SpecError, triangleLen } from "./limits.js";
export type { GaussianParams, Mechanism } from "./mechanism/index.js";

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
      if (s !== undefined && this.mechanism.pureLocal) {
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
    if (s.privacyModel === PrivacyModel.TWO_AGGREGATOR) {
      throw new SpecError(
        "a two-aggregator collection: this client builds no Prio3 shares; report with the Rust client or the Python and Kotlin bindings",
      );
    }
    if (s.radiusPhase !== undefined) {
      throw new SpecError(
        "a collection with a radius phase: this client does not build its norm report; report with the Rust client or the Python and Kotlin bindings",
      );
    }
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
    if (central) mechanism = new RawVectorMechanism(hasMean);
    else if (rankOne) {
      const cap: Cap = hasMean ? "one_sided" : "symmetric";
      mechanism = new RankOneMechanism(dim, hasMean, rankOneParams(dim, epsilon, cap));
    } else {
      mechanism = GaussianMechanism.calibrate(dim, hasMean, local === LocalMechanism.GAUSSIAN, epsilon, delta, encoding);
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
    const rankOneAgrees = local.mechanism.agreesWithRankOne(params.rankOne);
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
    return this.mechanism.rho(this.epsilon, this.delta);
  }

  get isCentral(): boolean {
    return this.mechanism.kind === "raw_vector";
  }

  /** The mean block's weight: w = 1/2, or the rank-one mechanism's c (0 without a mean). */
  get meanWeight(): number {
    return this.mechanism.meanWeight;
  }

  get meanEntries(): number {
    return this.hasMean ? this.dim : 0;
  }

  /** Δ₀ (0 for the rank-one mechanism, whose privacy is not a sensitivity's). */
  get baseSensitivity(): number {
    return this.mechanism.baseSensitivity;
  }

  get entries(): number {
    return this.meanEntries + triangleLen(this.dim);
  }

  get gridBits(): number {
    return this.mechanism.gridBits;
  }

  get sigma(): number {
    return this.mechanism.sigma;
  }

  /** σ in grid units, `σ·2^k`. */
  get sigmaGrid(): number {
    return this.mechanism.sigmaGrid;
  }

  get sensitivity(): number {
    return this.mechanism.sensitivity;
  }

  get maxAbsGridValue(): bigint {
    return this.mechanism.maxAbsGridValue;
  }

  get wireStep(): bigint {
    return this.mechanism.wireStep;
  }

  get wireMax(): bigint {
    return this.mechanism.wireMax;
  }
}
