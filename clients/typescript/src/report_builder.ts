/**
 * The device's report, built without a network (`ldpcov_client::ReportBuilder`): the one
 * sequence every way of sending a report takes — {@link AggregatorClient}'s
 * `prepareReport`, `submit` and the relay path.
 *
 * 1. **policy** — the collection checked against the device's {@link PrivacyPolicy} (a
 *    central collection refused: its reports are not perturbed here);
 * 2. **clip** — the public centre subtracted, then clipped (bad input throws
 *    `InputError` here, before any randomness is used or budget spent);
 * 3. **report id** — 16 fresh random bytes;
 * 4. **ledger** — the spend charged to the device's {@link BudgetLedger} first;
 * 5. **mechanism** and **wire** — the collection's mechanism with the builder's noise
 *    sampler, re-quantised and encoded;
 * 6. for a shuffled collection, **sealed** to the collection's active key, then to the
 *    relay's own key under a fresh submission id.
 *
 * Transports only send what it built.
 *
 * @module
 */

import type { Collection } from "./collection.js";
import type { RelayReport, Report } from "./gen/ldpcov/v1/ldpcov_pb.js";
import type { BudgetLedger } from "./ledger.js";
import { DiscreteGaussianSampler, type NoiseSampler } from "./noise.js";
import { clip, randomReportId, reportOfClipped } from "./perturb.js";
import { checkPolicy, DEFAULT_PRIVACY_POLICY, type PrivacyPolicy } from "./policy.js";
import { type ActiveKey, SealingError, sealReport } from "./seal.js";

/** A local-model operation on a central collection (its reports are raw vectors the operator sees). */
export class CentralCollectionError extends Error {
  override name = "CentralCollectionError";
  constructor(readonly collectionId: string) {
    super(
      `collection ${JSON.stringify(collectionId)} is central: the operator sees each raw vector, so a device perturbs nothing for it; use submitToTrustedCurator only if you trust the operator`,
    );
  }
}

/** A shuffled collection's report, sealed for its relay and ready to send (and to resend as it is). */
export interface PreparedRelayReport {
  /** The id of the report inside the seal (the aggregator counts it once). */
  reportId: Uint8Array;
  /**
   * What goes to the relay: the collection id, a random submission id and `outer`, the
   * report sealed to the aggregator's key (a `SealedReport`, encoded) sealed once more
   * to the relay's key.
   */
  request: RelayReport;
}

/** What a {@link ReportBuilder} holds. */
export interface ReportBuilderOptions {
  /** The privacy floor every collection is checked against (default {@link DEFAULT_PRIVACY_POLICY}). */
  policy?: PrivacyPolicy;
  /**
   * The noise sampler (default: the exact discrete Gaussian seeded from
   * `crypto.getRandomValues`); anything else makes the reports non-private.
   */
  noise?: NoiseSampler;
  /** Charges every report to this ledger before it is built. */
  ledger?: BudgetLedger;
}

/** Refuses a collection that is not shuffled (its reports go to the aggregator). */
export function requireShuffled(collection: Collection): void {
  if (!collection.shuffled) {
    throw new SealingError(`collection ${JSON.stringify(collection.id)} is not shuffled: send its reports to the aggregator`);
  }
}

/** Builds a device's reports (see the module docs). Never logs vectors, reports or payloads. */
export class ReportBuilder {
  readonly policy: Readonly<PrivacyPolicy>;
  readonly noise: NoiseSampler;
  readonly ledger: BudgetLedger | undefined;

  constructor(options: ReportBuilderOptions = {}) {
    const policy = options.policy ?? DEFAULT_PRIVACY_POLICY;
    this.policy = Object.freeze({
      ...policy,
      ...(policy.shuffle === undefined ? {} : { shuffle: Object.freeze({ ...policy.shuffle }) }),
    });
    this.noise = options.noise ?? DiscreteGaussianSampler.fromOsRng();
    this.ledger = options.ledger;
  }

  /**
   * A complete report of `collection` for `x` under a fresh random id (steps 1–5). Keep
   * it and resend it if sending fails: building a second one for the same `x` spends
   * the budget again.
   */
  async report(collection: Collection, x: readonly number[]): Promise<Report> {
    // Before the ledger: nothing is charged for a report that is not built.
    if (collection.isCentral) throw new CentralCollectionError(collection.id);
    checkPolicy(this.policy, collection);
    // Input errors surface before any randomness is used or any budget spent.
    const u = clip(collection, x);
    const reportId = randomReportId();
    if (this.ledger !== undefined) await this.ledger.charge(collection);
    return reportOfClipped(collection, u, this.noise, reportId);
  }

  /**
   * A shuffled collection's report for `x`, sealed to its active key `key` and then to
   * the relay's key `relayKey` under a fresh submission id (steps 1–6).
   */
  async relayReport(collection: Collection, key: ActiveKey, relayKey: ActiveKey, x: readonly number[]): Promise<PreparedRelayReport> {
    requireShuffled(collection);
    const report = await this.report(collection, x);
    const request = await sealReport(collection.id, key, relayKey, report);
    return { reportId: Uint8Array.from(report.reportId), request };
  }
}
