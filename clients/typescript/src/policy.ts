/**
 * The device's own floor on privacy (`ldpcov_client::PrivacyPolicy`): collections asking
 * for weaker privacy than this are refused, whatever the server says, before any noise is
 * drawn. A device may also insist that a collection be shuffled, in batches of at least
 * its own floor and at a central ε it computes itself ({@link ShufflePolicy}).
 */

import type { Collection } from "./collection.js";

/** The collection asks for weaker privacy than this client accepts. */
export class PolicyViolationError extends Error {
  override name = "PolicyViolationError";
  constructor(
    readonly epsilon: number,
    readonly delta: number,
    readonly maxEpsilon: number,
    readonly maxDelta: number,
  ) {
    super(
      `collection asks for epsilon ${epsilon} and delta ${delta}, this client accepts at most epsilon ${maxEpsilon} and delta ${maxDelta}`,
    );
  }
}

/** The collection is not shuffled as this client's {@link ShufflePolicy} requires (`ClientError::ShufflePolicyViolation`). */
export class ShufflePolicyViolationError extends Error {
  override name = "ShufflePolicyViolationError";
  constructor(
    readonly collectionId: string,
    readonly reason: string,
  ) {
    super(`collection ${JSON.stringify(collectionId)} does not meet this device's shuffle policy: ${reason}`);
  }
}

/**
 * What a device requires of a shuffled collection before it reports: the collection is
 * shuffled (its reports go sealed through a relay, never to the aggregator directly),
 * its batches hold at least `minBatch` reports, and the central ε the device computes
 * itself from the collection's ε0, batch floor and central δ (never the number a server
 * announces) is at most `maxCentralEpsilon`, at a central δ below 1/`minBatch`.
 */
export interface ShufflePolicy {
  /** Smallest batch floor accepted. */
  minBatch: number;
  /** Largest central ε accepted. */
  maxCentralEpsilon: number;
}

/**
 * The weakest privacy a client agrees to give: the largest ε and δ of one report, and
 * optionally a shuffled collection's central guarantee. The default refuses collections
 * with ε > 10 or δ > 10⁻³ and does not require shuffling. σ is always re-derived locally
 * from (ε, δ), so a server can only obtain less noise by asking for a larger ε or δ,
 * which is what this bounds. A NaN bound refuses every collection.
 */
export interface PrivacyPolicy {
  maxEpsilon: number;
  maxDelta: number;
  /** Set: only shuffled collections meeting it are accepted. */
  shuffle?: ShufflePolicy;
}

export const DEFAULT_PRIVACY_POLICY: Readonly<PrivacyPolicy> = Object.freeze({ maxEpsilon: 10, maxDelta: 1e-3 });

/**
 * Throws {@link PolicyViolationError} unless `collection` is within `policy`'s ε and δ,
 * and {@link ShufflePolicyViolationError} unless it meets `policy.shuffle` (when set).
 */
export function checkPolicy(policy: PrivacyPolicy, collection: Collection): void {
  const ok = collection.epsilon <= policy.maxEpsilon && collection.delta <= policy.maxDelta;
  if (!ok) throw new PolicyViolationError(collection.epsilon, collection.delta, policy.maxEpsilon, policy.maxDelta);
  if (policy.shuffle !== undefined) checkShufflePolicy(policy.shuffle, collection);
}

/** Throws {@link ShufflePolicyViolationError} unless `collection` is shuffled as `required` asks (see {@link ShufflePolicy}). */
export function checkShufflePolicy(required: ShufflePolicy, collection: Collection): void {
  const refuse = (reason: string): never => {
    throw new ShufflePolicyViolationError(collection.id, reason);
  };
  const settings = collection.shuffle;
  if (settings === undefined) return refuse("it is not shuffled: its reports would go to the aggregator directly");
  const batch = settings.minBatchSize;
  // `!(a >= b)` rather than `a < b`: a NaN floor refuses (as a NaN bound does above).
  if (!(batch >= required.minBatch)) {
    return refuse(`its batches may hold ${batch} reports, this device requires at least ${required.minBatch}`);
  }
  const delta = settings.centralDelta;
  if (delta * batch >= 1) {
    return refuse(`its central delta ${delta} is at least 1/${batch}: one report in the clear per batch would be allowed`);
  }
  // Computed here from the collection's own ε0, floor and δ: a server's announced figure
  // is never read.
  const privacy = collection.shuffledPrivacy();
  if (privacy === undefined) return refuse("no amplification bound covers its mechanism");
  if (!(privacy.centralEpsilon <= required.maxCentralEpsilon)) {
    return refuse(
      `its central epsilon is ${privacy.centralEpsilon} (epsilon0 ${privacy.localEpsilon} in batches of ${batch} at delta ${delta}), this device accepts at most ${required.maxCentralEpsilon}`,
    );
  }
}
