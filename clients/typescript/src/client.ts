/**
 * The aggregator client over gRPC-Web (`ldpcov_client::AggregatorClient`), for browsers
 * and Node ≥ 18 (both through `fetch`): fetch a collection and re-derive its parameters,
 * build a complete report on the device, then send it with retries that resend the
 * same bytes under the same report id. With a relay configured, the client is a device
 * of shuffled collections and talks to the relay alone.
 */

import { clone, create, equals, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Collection } from "./collection.js";
import {
  Aggregator,
  type CollectionParams,
  type CollectionSpec,
  CollectionSpecSchema,
  type CollectionStatus,
  type Estimate,
  type GetEstimateRequest,
  GetEstimateRequestSchema,
  Relay,
  type RelayReport,
  RelayReportSchema,
  type Report,
  ReportSchema,
} from "./gen/ldpcov/v1/ldpcov_pb.js";
import type { BudgetLedger } from "./ledger.js";
import type { NoiseSampler } from "./noise.js";
import { InputError, randomReportId, REPORT_ID_LEN, trustedCuratorReport } from "./perturb.js";
import { checkPolicy, type PrivacyPolicy } from "./policy.js";
import { CentralCollectionError, type PreparedRelayReport, ReportBuilder, requireShuffled } from "./report_builder.js";
import { type ActiveKey, activeKey, relayKey, SealingError, SUBMISSION_ID_LEN } from "./seal.js";

export { CentralCollectionError, type PreparedRelayReport } from "./report_builder.js";

/**
 * How failed calls are retried: exponential backoff with jitter. The n-th retry waits
 * a uniformly random time in `[b/2, b]` with `b = min(initialBackoffMs·2ⁿ⁻¹, maxBackoffMs)`.
 * Only transient failures are retried (see {@link isRetryable}).
 */
export interface RetryPolicy {
  /** Calls made at most, the first included (0 is treated as 1). */
  maxAttempts: number;
  /** Backoff before the first retry, in milliseconds. */
  initialBackoffMs: number;
  /** Cap on the backoff, in milliseconds. */
  maxBackoffMs: number;
}

/** 5 attempts, backoff 50 ms doubling up to 2 s. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({ maxAttempts: 5, initialBackoffMs: 50, maxBackoffMs: 2000 });
/** One attempt, no retries. */
export const NO_RETRIES: Readonly<RetryPolicy> = Object.freeze({ ...DEFAULT_RETRY_POLICY, maxAttempts: 1 });

/**
 * Whether a failed call may succeed if sent again: `UNAVAILABLE`, `DEADLINE_EXCEEDED`,
 * `RESOURCE_EXHAUSTED`, `ABORTED`, and `UNKNOWN` when it was raised locally by the
 * transport (a failed `fetch`, not a status the server sent). Never `INVALID_ARGUMENT`,
 * `NOT_FOUND`, `FAILED_PRECONDITION` and the like: resending cannot fix those.
 */
export function isRetryable(error: unknown): boolean {
  const e = ConnectError.from(error);
  switch (e.code) {
    case Code.Unavailable:
    case Code.DeadlineExceeded:
    case Code.ResourceExhausted:
    case Code.Aborted:
      return true;
    case Code.Unknown:
      return !e.isWireError && e.cause !== undefined;
    default:
      return false;
  }
}

/** The gRPC status names, by code (as the Rust client and the daemon's docs spell them). */
const CODE_NAMES: Record<number, string> = {
  1: "CANCELLED",
  2: "UNKNOWN",
  3: "INVALID_ARGUMENT",
  4: "DEADLINE_EXCEEDED",
  5: "NOT_FOUND",
  6: "ALREADY_EXISTS",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  9: "FAILED_PRECONDITION",
  10: "ABORTED",
  11: "OUT_OF_RANGE",
  12: "UNIMPLEMENTED",
  13: "INTERNAL",
  14: "UNAVAILABLE",
  15: "DATA_LOSS",
  16: "UNAUTHENTICATED",
};

/**
 * The aggregator — or the relay, for a method named `Relay/…` — (or the transport under
 * it) answered a call with an error status, after any retries.
 */
export class StatusError extends Error {
  override name = "StatusError";
  /** The gRPC status code (`Code` of `@connectrpc/connect`). */
  readonly code: Code;
  constructor(
    readonly method: string,
    readonly connectError: ConnectError,
    /** Calls made, retries included. */
    readonly attempts: number,
  ) {
    super(`${method.startsWith("Relay/") ? "relay" : "aggregator"} call ${method} failed with ${CODE_NAMES[connectError.code] ?? connectError.code}: ${connectError.rawMessage}`, {
      cause: connectError,
    });
    this.code = connectError.code;
  }
  /** `"UNAVAILABLE"`, `"INVALID_ARGUMENT"`, … */
  get codeName(): string {
    return CODE_NAMES[this.code] ?? String(this.code);
  }
}

/** A bearer token that cannot be sent as a header (it must be visible ASCII). */
export class InvalidTokenError extends Error {
  override name = "InvalidTokenError";
  constructor() {
    super("the bearer token must be 1 or more visible ASCII characters");
  }
}

/** The server answered with the parameters of another collection. */
export class CollectionMismatchError extends Error {
  override name = "CollectionMismatchError";
  constructor(
    readonly requested: string,
    readonly got: string,
  ) {
    super(`asked for collection ${JSON.stringify(requested)}, the server answered with ${JSON.stringify(got)}`);
  }
}

/**
 * The relay's copy of a collection cannot be reported to (`ClientError::RelayMismatch`):
 * a device with a relay asks the relay alone for a collection, and the relay serves
 * shuffled collections only, each with its own key (`shuffle.relayKey`) for the layer
 * every report carries. Thrown when the relay's answer is not a shuffled collection, or
 * has no usable relay key (none, not active, another suite, not 32 bytes); `reason` says
 * which. Nothing is charged or sent.
 */
export class RelayMismatchError extends Error {
  override name = "RelayMismatchError";
  constructor(
    readonly collectionId: string,
    /** What is wrong with the relay's copy. */
    readonly reason: string,
  ) {
    super(`collection ${JSON.stringify(collectionId)}: the relay's copy cannot be reported to: ${reason}`);
  }
}

/** What happened to a submitted report. */
export interface SubmitOutcome {
  /** The id the report was sent under. */
  reportId: Uint8Array;
  /**
   * The aggregator had already counted this id (an earlier attempt got through but its
   * answer was lost). The report is counted exactly once either way.
   */
  duplicate: boolean;
  /** Calls made, retries included. */
  attempts: number;
}


/**
 * The relay that shuffled collections' reports go through (`ldpcov-relay`, served with
 * gRPC-Web). A client with a relay is a device of shuffled collections: it asks the relay
 * alone for their parameters and sends its reports there, and never calls the aggregator
 * for them.
 */
export interface RelayOptions {
  /** The relay's base URL, e.g. `https://relay.example.com`. */
  url: string;
  /** The device's relay token (`ldpcov-relay issue-device-token`), sent as `authorization: Bearer <token>`. */
  token?: string;
  /** Replaces the relay's gRPC-Web transport altogether (tests, or another Connect transport). */
  transport?: Transport;
}

/** How to reach the aggregator and how to behave. */
export interface AggregatorClientOptions {
  /** Sent as `authorization: Bearer <token>` with every call (a submit token for devices, the admin token for admin calls). */
  token?: string;
  retry?: RetryPolicy;
  /**
   * The privacy floor checked on every collection, before any noise is drawn (default:
   * ε ≤ 10, δ ≤ 10⁻³, shuffling not required; `shuffle` set: only shuffled collections
   * meeting it, `ShufflePolicyViolationError` otherwise).
   */
  policy?: PrivacyPolicy;
  /** Gives up on an attempt after this many milliseconds (a retryable `DEADLINE_EXCEEDED`). Default: none. */
  timeoutMs?: number;
  /**
   * The noise sampler, for simulations only (e.g. `DiscreteGaussianSampler.fromSeedForSimulation`):
   * anything but the default, seeded from `crypto.getRandomValues`, makes the reports non-private.
   */
  noise?: NoiseSampler;
  /** Charges every report to this ledger before it is built. */
  ledger?: BudgetLedger;
  /** The `fetch` the gRPC-Web transport uses (default: `globalThis.fetch`). */
  fetch?: typeof globalThis.fetch;
  /** Replaces the gRPC-Web transport altogether (tests, or another Connect transport). */
  transport?: Transport;
  /**
   * The relay of shuffled collections. With it, {@link AggregatorClient.collection} asks
   * the relay alone (`Relay.GetCollection`: its pinned copy, the same for every device,
   * with the key bytes it pinned and its own key) and refuses anything but a shuffled
   * collection; reports are sealed to the collection's key, then to the relay's, and sent
   * there (`Relay.SubmitSealedReport`): no call for a collection reaches the aggregator,
   * which never learns which device asks or when. Without it,
   * {@link AggregatorClient.submit} refuses a shuffled collection (`SealingError`).
   */
  relay?: RelayOptions;
}

/** The interceptor that sends `authorization: Bearer <token>`, the token checked first. */
function bearer(token: string): Interceptor {
  const trimmed = token.trim();
  if (trimmed.length === 0 || !/^[\x21-\x7e]+$/.test(trimmed)) throw new InvalidTokenError();
  const value = `Bearer ${trimmed}`;
  return (next) => async (request) => {
    request.header.set("authorization", value);
    return next(request);
  };
}

/**
 * An ldpcov aggregator client over gRPC-Web.
 *
 * {@link submit} builds the whole report — clip, noise, encoding, a fresh random report
 * id, the ledger's charge — before touching the network, then sends it with retries that
 * resend the *same* bytes under the *same* id: the aggregator counts an id at most once,
 * so a retry after a lost answer is harmless, and no second noisy copy of `x` ever
 * leaves the device. It never logs vectors, reports or payloads.
 */
export class AggregatorClient {
  readonly #client: Client<typeof Aggregator>;
  readonly #relay: Client<typeof Relay> | undefined;
  /** The active key of each shuffled collection fetched, as its server declared it. */
  readonly #activeKeys = new Map<string, ActiveKey>();
  /** The relay's own key, from its last answer (the layer every report to it gets). */
  #relayKey: ActiveKey | undefined;
  readonly #retry: RetryPolicy;
  readonly #timeoutMs: number | undefined;
  /** Builds every report this client sends (policy, clip, id, ledger, noise, seal). */
  readonly #device: ReportBuilder;
  readonly ledger: BudgetLedger | undefined;

  /**
   * A client of the aggregator at `baseUrl` (e.g. `https://aggregator.example.com`,
   * served with `serve --grpc-web`). Nothing is sent until the first call.
   */
  constructor(baseUrl: string, options: AggregatorClientOptions = {}) {
    if (options.transport !== undefined && options.token !== undefined) {
      throw new TypeError("with a custom transport, set the token on the transport");
    }
    const interceptors: Interceptor[] = [];
    if (options.token !== undefined) interceptors.push(bearer(options.token));
    const transport =
      options.transport ??
      createGrpcWebTransport({
        baseUrl,
        interceptors,
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      });
    this.#client = createClient(Aggregator, transport);
    const relay = options.relay;
    if (relay !== undefined) {
      if (relay.transport !== undefined && relay.token !== undefined) {
        throw new TypeError("with a custom relay transport, set the token on the transport");
      }
      const relayTransport =
        relay.transport ??
        createGrpcWebTransport({
          baseUrl: relay.url,
          interceptors: relay.token === undefined ? [] : [bearer(relay.token)],
          ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
        });
      this.#relay = createClient(Relay, relayTransport);
    }
    this.#retry = { ...(options.retry ?? DEFAULT_RETRY_POLICY) };
    this.#timeoutMs = options.timeoutMs;
    this.#device = new ReportBuilder({
      ...(options.policy === undefined ? {} : { policy: options.policy }),
      ...(options.noise === undefined ? {} : { noise: options.noise }),
      ...(options.ledger === undefined ? {} : { ledger: options.ledger }),
    });
    this.ledger = options.ledger;
  }

  /**
   * Fetches a collection's parameters, re-derives them locally from the spec and checks
   * them against the privacy policy. Throws `SpecError` if the server's derived
   * parameters (σ, grid, bounds) disagree with the local derivation — a server cannot
   * lower the noise — `PolicyViolationError` if ε or δ exceed the policy, and
   * `ShufflePolicyViolationError` if the policy requires shuffling the collection does
   * not meet.
   *
   * With a relay (the `relay` option) the parameters come from the relay alone
   * (`Relay.GetCollection`): its pinned copy, the same for every device, with the key
   * bytes it pinned and its own key, checked exactly as the aggregator's answer would be.
   * No call reaches the aggregator, which so never learns which device asks or when. A
   * relay serves shuffled collections only: `RelayMismatchError` if its answer is not
   * one, or has no usable relay key; use a client without a relay for the others.
   */
  async collection(id: string): Promise<Collection> {
    const relay = this.#relay;
    const [params] =
      relay === undefined
        ? await this.#call("GetCollection", (o) => this.#client.getCollection({ collectionId: id }, o))
        : await this.#call("Relay/GetCollection", (o) => relay.getCollection({ collectionId: id }, o));
    // The one derivation of this collection on the device: its σ, grid and bound are
    // checked against the server's, so a server cannot lower the noise.
    const collection = Collection.fromParams(params);
    if (collection.id !== id) throw new CollectionMismatchError(id, collection.id);
    checkPolicy(this.#device.policy, collection);
    if (relay !== undefined) {
      // The relay's copy must be a shuffled collection's, with the relay's key.
      if (!collection.shuffled || params.shuffle === undefined) {
        throw new RelayMismatchError(id, "the relay answered a collection that is not shuffled");
      }
      try {
        this.#relayKey = relayKey(params.shuffle.relayKey);
      } catch (e) {
        this.#relayKey = undefined;
        throw new RelayMismatchError(id, e instanceof Error ? e.message : String(e));
      }
    }
    // A shuffled collection's active key, kept for sealing (refetched when its period
    // ends); a collection without a usable one fails when a report is sealed.
    if (collection.shuffled) {
      try {
        this.#activeKeys.set(id, activeKey(params.shuffle?.keys ?? []));
      } catch {
        this.#activeKeys.delete(id);
      }
    }
    return collection;
  }

  /**
   * Builds a shuffled collection's report for `x` and seals it for the relay: the report
   * exactly as {@link prepareReport} builds it (ledger charged, noise drawn), encoded and
   * sealed to the collection's active key, that sealed once more to the relay's key
   * (`request.outer`), under a fresh random submission id. Fetches the collection again
   * (from the relay) first when its active key or the relay's key is unknown or the
   * active key's period has ended (before anything is charged). Resend the result with
   * {@link submitRelayReport}.
   */
  async prepareRelayReport(collection: Collection, x: readonly number[]): Promise<PreparedRelayReport> {
    requireShuffled(collection);
    if (this.#relay === undefined) {
      throw new SealingError(`collection ${JSON.stringify(collection.id)} is shuffled: its reports go through a relay (the relay option)`);
    }
    const now = BigInt(Math.floor(Date.now() / 1000));
    const known = this.#activeKeys.get(collection.id);
    if (known === undefined || now >= known.activeUntil || this.#relayKey === undefined) {
      const refetched = await this.collection(collection.id);
      if (refetched.id !== collection.id || !refetched.shuffled) throw new CollectionMismatchError(collection.id, refetched.id);
    }
    const key = this.#activeKeys.get(collection.id);
    if (key === undefined) throw new SealingError("the collection publishes no usable active key");
    const layer = this.#relayKey;
    if (layer === undefined) {
      throw new SealingError("no relay key: the collection was not fetched from a relay (the relay option)");
    }
    return this.#device.relayReport(collection, key, layer, x);
  }

  /**
   * Sends a sealed report to the relay, retrying transient failures with the same bytes
   * and submission id (the relay stores a submission once). `duplicate` says the relay
   * had already stored this submission.
   */
  async submitRelayReport(prepared: PreparedRelayReport): Promise<SubmitOutcome> {
    const relay = this.#relay;
    if (relay === undefined) throw new SealingError("no relay configured (the relay option)");
    if (prepared.request.submissionId.length !== SUBMISSION_ID_LEN) {
      throw new InputError(`submission id has ${prepared.request.submissionId.length} bytes, expected ${SUBMISSION_ID_LEN}`);
    }
    const sent = clone(RelayReportSchema, prepared.request);
    const [response, attempts] = await this.#call("Relay/SubmitSealedReport", (o) => relay.submitSealedReport(sent, o));
    return { reportId: Uint8Array.from(prepared.reportId), duplicate: response.duplicate, attempts };
  }

  /**
   * Builds a complete report for `x` without sending it: checks the collection against
   * the privacy policy, clips (bad input throws `InputError` here), picks a fresh random
   * report id, charges the ledger, draws the noise and encodes. Keep the report and
   * resend it with {@link submitReport} if sending fails: building a second report for
   * the same `x` spends the privacy budget again.
   */
  async prepareReport(collection: Collection, x: readonly number[]): Promise<Report> {
    return this.#device.report(collection, x);
  }

  /**
   * Perturbs `x` and submits it: the report is complete before any network call, then
   * sent with retries. A shuffled collection's report is sealed and sent to the relay.
   */
  async submit(collection: Collection, x: readonly number[]): Promise<SubmitOutcome> {
    if (collection.shuffled) {
      // Sealed, through the relay; refused before any budget is spent or noise drawn
      // when no relay is configured.
      if (this.#relay === undefined) {
        throw new SealingError(`collection ${JSON.stringify(collection.id)} is shuffled: its reports go through a relay (the relay option)`);
      }
      return this.submitRelayReport(await this.prepareRelayReport(collection, x));
    }
    const report = await this.prepareReport(collection, x);
    return this.submitReport(report);
  }

  /**
   * **Trusted curator only**: sends `x`, clipped and on the grid but WITHOUT noise, to a
   * central collection, whose operator sees it; retried like {@link submitReport}.
   * Refuses a local collection (`InputError`): there, {@link submit} perturbs on the device.
   */
  async submitToTrustedCurator(collection: Collection, x: readonly number[]): Promise<SubmitOutcome> {
    const report = trustedCuratorReport(collection, x, randomReportId());
    return this.submitReport(report);
  }

  /** Sends a prebuilt report, retrying transient failures with the same bytes and id. */
  async submitReport(report: Report): Promise<SubmitOutcome> {
    if (report.reportId.length !== REPORT_ID_LEN) {
      throw new InputError(`report id has ${report.reportId.length} bytes, expected ${REPORT_ID_LEN}`);
    }
    // A private copy: every attempt serialises the same message to the same bytes.
    const sent = clone(ReportSchema, report);
    const [response, attempts] = await this.#call("SubmitReport", (o) => this.#client.submitReport(sent, o));
    return { reportId: Uint8Array.from(sent.reportId), duplicate: response.duplicate, attempts };
  }

  /**
   * Admin: creates a collection and returns its parameters. Retried like any call; if a
   * retry meets `ALREADY_EXISTS` (the first attempt got through, its answer was lost),
   * the existing collection is returned when it derives to the same collection.
   */
  async createCollection(spec: MessageInitShape<typeof CollectionSpecSchema> | CollectionSpec): Promise<CollectionParams> {
    const ours = create(CollectionSpecSchema, spec as MessageInitShape<typeof CollectionSpecSchema>);
    try {
      const [params] = await this.#call("CreateCollection", (o) => this.#client.createCollection({ spec: ours }, o));
      return params;
    } catch (e) {
      if (!(e instanceof StatusError && e.code === Code.AlreadyExists && e.attempts > 1)) throw e;
      let existing: CollectionParams;
      try {
        [existing] = await this.#call("GetCollection", (o) => this.#client.getCollection({ collectionId: ours.collectionId }, o));
      } catch {
        throw e;
      }
      if (existing.spec !== undefined && sameCollection(existing.spec, ours)) return existing;
      throw e;
    }
  }

  /** Count and parameters of a collection. */
  async status(id: string): Promise<CollectionStatus> {
    const [status] = await this.#call("GetStatus", (o) => this.#client.getStatus({ collectionId: id }, o));
    return status;
  }

  /** Admin: closes a collection (it takes no more reports) and returns its status. */
  async closeCollection(id: string): Promise<CollectionStatus> {
    const [status] = await this.#call("CloseCollection", (o) => this.#client.closeCollection({ collectionId: id }, o));
    return status;
  }

  /** Admin: deletes a collection for good and returns the number of reports it had counted. Refunds no budget. */
  async deleteCollection(id: string): Promise<bigint> {
    const [response] = await this.#call("DeleteCollection", (o) => this.#client.deleteCollection({ collectionId: id }, o));
    return response.reports;
  }

  /** Admin: the released estimate. */
  async estimate(request: MessageInitShape<typeof GetEstimateRequestSchema> | GetEstimateRequest): Promise<Estimate> {
    const r = create(GetEstimateRequestSchema, request as MessageInitShape<typeof GetEstimateRequestSchema>);
    const [estimate] = await this.#call("GetEstimate", (o) => this.#client.getEstimate(r, o));
    return estimate;
  }

  /** Runs `attempt` until it succeeds, fails for good, or the retry policy is spent. */
  async #call<T>(method: string, attempt: (options: { timeoutMs?: number }) => Promise<T>): Promise<[T, number]> {
    const maxAttempts = Math.max(1, Math.floor(this.#retry.maxAttempts) || 1);
    let backoff = Math.min(this.#retry.initialBackoffMs, this.#retry.maxBackoffMs);
    const options = this.#timeoutMs === undefined ? {} : { timeoutMs: this.#timeoutMs };
    for (let attempts = 1; ; attempts++) {
      try {
        return [await attempt(options), attempts];
      } catch (error) {
        if (attempts < maxAttempts && isRetryable(error)) {
          await sleep(jitter(backoff));
          backoff = Math.min(backoff * 2, this.#retry.maxBackoffMs);
          continue;
        }
        throw new StatusError(method, ConnectError.from(error), attempts);
      }
    }
  }
}

/** Whether two specs describe the same collection (same id and every derived parameter). */
function sameCollection(a: CollectionSpec, b: CollectionSpec): boolean {
  if (equals(CollectionSpecSchema, a, b)) return true;
  try {
    const x = Collection.fromSpec(a);
    const y = Collection.fromSpec(b);
    return (
      a.minReports === b.minReports &&
      x.id === y.id &&
      x.dim === y.dim &&
      x.epsilon === y.epsilon &&
      x.delta === y.delta &&
      x.clipRadius === y.clipRadius &&
      x.hasMean === y.hasMean &&
      x.encoding === y.encoding &&
      x.mechanism.kind === y.mechanism.kind &&
      x.sigma === y.sigma &&
      x.centre.length === y.centre.length &&
      x.centre.every((v, i) => v === y.centre[i])
    );
  } catch {
    return false;
  }
}

/** A uniformly random wait in `[b/2, b]` milliseconds (from `crypto.getRandomValues`), so that devices do not retry in step. */
function jitter(backoffMs: number): number {
  const word = new Uint32Array(1);
  globalThis.crypto.getRandomValues(word);
  return backoffMs / 2 + (backoffMs / 2) * (word[0]! / 0xffffffff);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
