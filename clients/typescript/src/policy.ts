/**
 * The device's own floor on privacy (`ldpcov_client::PrivacyPolicy`): collections asking
 * for weaker privacy than this are refused, whatever the server says.
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

/**
 * The weakest privacy a client agrees to give: the largest ε and δ of one report. The
 * default refuses collections with ε > 10 or δ > 10⁻³. σ is always re-derived locally
 * from (ε, δ), so a server can only obtain less noise by asking for a larger ε or δ,
 * which is what this bounds. A NaN bound refuses every collection.
 */
export interface PrivacyPolicy {
  maxEpsilon: number;
  maxDelta: number;
}

export const DEFAULT_PRIVACY_POLICY: Readonly<PrivacyPolicy> = Object.freeze({ maxEpsilon: 10, maxDelta: 1e-3 });

/** Throws {@link PolicyViolationError} unless `collection` is within `policy`. */
export function checkPolicy(policy: PrivacyPolicy, collection: Collection): void {
  const ok = collection.epsilon <= policy.maxEpsilon && collection.delta <= policy.maxDelta;
  if (!ok) throw new PolicyViolationError(collection.epsilon, collection.delta, policy.maxEpsilon, policy.maxDelta);
}
