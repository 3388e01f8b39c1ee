/**
 * The device-side privacy budget ledger (`ldpcov_client::BudgetLedger`): every report's
 * zCDP ρ is recorded before the report is built, and a report that would exceed the
 * lifetime budget or the budget of the trailing period is refused.
 *
 * Composition: each report of a collection spends `ρ = Δ²/(2σ²)` (the exact discrete
 * Gaussian too), `ε²/2` for the pure ε-LDP rank-one mechanism; ρ adds up under
 * composition, and ρ-zCDP implies `(ρ + 2√(ρ ln(1/δ)), δ)`-DP. A budget "ε at δ" is
 * therefore the ρ budget `(√(ln(1/δ) + ε) − √(ln(1/δ)))²`.
 *
 * The record is a JSON document, the same as the Rust client's `ldpcov-ledger.json`
 * (`{"version": 1, "spends": [{"collection_id", "rho", "epsilon", "delta", "unix_secs"}]}`),
 * kept by a {@link LedgerStorage}: a file in Node (`FileLedgerStorage` from
 * `@ldpcov/client/node`, written atomically) or IndexedDB in browsers
 * ({@link IndexedDbLedgerStorage}). A missing record is an empty ledger; a record that
 * cannot be parsed is an error (the device refuses to report rather than forget its
 * history). One ledger object should own a storage at a time.
 */

import type { Collection } from "./collection.js";
import { zcdpEpsilon, zcdpRhoForEpsilon } from "./calibration.js";

/** The name of the ledger file (Node) or IndexedDB key (browsers). */
export const LEDGER_FILE = "ldpcov-ledger.json";

/** Why the ledger refused or failed. */
export class LedgerError extends Error {
  override name = "LedgerError";
}

/** The report would exceed a budget; nothing was spent. */
export class BudgetExceededError extends LedgerError {
  override name = "BudgetExceededError";
  constructor(
    /** `"lifetime"` or `"period"`. */
    readonly window: "lifetime" | "period",
    /** ρ of the refused report. */
    readonly rho: number,
    /** ρ the window would reach. */
    readonly wouldBe: number,
    /** The same as ε at the ledger's δ. */
    readonly wouldBeEpsilon: number,
    /** The window's budget, as ε at the ledger's δ. */
    readonly budgetEpsilon: number,
    readonly delta: number,
  ) {
    super(
      `privacy budget exceeded: this report (rho ${rho}) would bring the ${window} spend to rho ${wouldBe} (epsilon ${wouldBeEpsilon} at delta ${delta}), above the budget of epsilon ${budgetEpsilon}`,
    );
  }
}

/** A budget is not a positive number, or δ is outside (0, 1). */
export class InvalidBudgetError extends LedgerError {
  override name = "InvalidBudgetError";
}

/** The stored ledger exists but is not a ledger. */
export class LedgerCorruptError extends LedgerError {
  override name = "LedgerCorruptError";
}

/** Reading or writing the stored ledger failed (the storage's error is the `cause`). */
export class LedgerStorageError extends LedgerError {
  override name = "LedgerStorageError";
}

/** The budgets a device allows, as ε at a common δ. */
export interface BudgetLimits {
  /** Budget over the device's whole life. */
  lifetimeEpsilon: number;
  /** Budget over any trailing period of `periodSeconds`, or `null` for none. */
  periodEpsilon: number | null;
  /** Length of the period, in seconds. */
  periodSeconds: number;
  /** δ at which the budgets are stated. */
  delta: number;
}

/**
 * Lifetime ε = 10 and ε = 4 per 30 days, both at δ = 10⁻⁶: room for about one ε = 1
 * report a month (each is ρ ≈ 0.028).
 */
export const DEFAULT_BUDGET_LIMITS: Readonly<BudgetLimits> = Object.freeze({
  lifetimeEpsilon: 10,
  periodEpsilon: 4,
  periodSeconds: 30 * 24 * 3600,
  delta: 1e-6,
});

/** One recorded spend (the field names of the Rust client's file). */
export interface Spend {
  collection_id: string;
  /** zCDP ρ of the report. */
  rho: number;
  /** The report's own (ε, δ), for the record. */
  epsilon: number;
  delta: number;
  /** When, in seconds since the Unix epoch. */
  unix_secs: number;
}

/** Where a ledger's JSON document is kept. `write` must be durable and atomic when it resolves. */
export interface LedgerStorage {
  /** The stored document, or `undefined` if there is none yet. */
  read(): Promise<string | undefined>;
  /** Replaces the stored document (all of it or nothing). */
  write(document: string): Promise<void>;
  /** For error messages. */
  readonly description: string;
}

/** A ledger kept in memory only (tests; a device that forgets it on restart is not protected). */
export class MemoryLedgerStorage implements LedgerStorage {
  readonly description = "memory";
  constructor(public document: string | undefined = undefined) {}
  async read(): Promise<string | undefined> {
    return this.document;
  }
  async write(document: string): Promise<void> {
    this.document = document;
  }
}

/**
 * A ledger in the browser's IndexedDB: database `ldpcov`, object store `ledger`, key
 * {@link LEDGER_FILE}. A write resolves when its transaction (durability `strict`)
 * has committed.
 */
export class IndexedDbLedgerStorage implements LedgerStorage {
  readonly description: string;
  #db: Promise<IDBDatabase> | undefined;

  constructor(
    readonly databaseName = "ldpcov",
    readonly key = LEDGER_FILE,
    readonly factory: IDBFactory | undefined = globalThis.indexedDB,
  ) {
    this.description = `IndexedDB ${databaseName}/ledger/${key}`;
  }

  #open(): Promise<IDBDatabase> {
    if (this.#db === undefined) {
      const factory = this.factory;
      if (factory === undefined) return Promise.reject(new Error("IndexedDB is not available here"));
      this.#db = new Promise((resolve, reject) => {
        const request = factory.open(this.databaseName, 1);
        request.onupgradeneeded = () => {
          if (!request.result.objectStoreNames.contains("ledger")) request.result.createObjectStore("ledger");
        };
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error ?? new Error("cannot open IndexedDB"));
        request.onblocked = () => reject(new Error("IndexedDB upgrade blocked by another tab"));
      });
      this.#db.catch(() => (this.#db = undefined));
    }
    return this.#db;
  }

  async read(): Promise<string | undefined> {
    const db = await this.#open();
    return new Promise((resolve, reject) => {
      const request = db.transaction("ledger", "readonly").objectStore("ledger").get(this.key);
      request.onsuccess = () => {
        const value: unknown = request.result;
        if (value === undefined || typeof value === "string") resolve(value);
        else reject(new LedgerCorruptError(`${this.description} holds a ${typeof value}, not a ledger document`));
      };
      request.onerror = () => reject(request.error ?? new Error("IndexedDB read failed"));
    });
  }

  async write(document: string): Promise<void> {
    const db = await this.#open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction("ledger", "readwrite", { durability: "strict" });
      tx.objectStore("ledger").put(document, this.key);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error ?? new Error("IndexedDB write failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDB write aborted"));
    });
  }
}

function validateLimits(limits: BudgetLimits): void {
  const budgets: [string, number | null][] = [
    ["lifetime epsilon", limits.lifetimeEpsilon],
    ["period epsilon", limits.periodEpsilon],
  ];
  for (const [name, v] of budgets) {
    if (v !== null && !(typeof v === "number" && Number.isFinite(v) && v > 0)) {
      throw new InvalidBudgetError(`invalid budget: ${name} ${v} must be a positive number`);
    }
  }
  if (!(Number.isSafeInteger(limits.periodSeconds) && limits.periodSeconds >= 0)) {
    throw new InvalidBudgetError(`invalid budget: period ${limits.periodSeconds} s must be a whole number of seconds`);
  }
  if (!(limits.delta > 0 && limits.delta < 1)) throw new InvalidBudgetError(`invalid budget: delta ${limits.delta} must lie in (0, 1)`);
}

function parseDocument(text: string, where: string): Spend[] {
  const corrupt = (reason: string) => new LedgerCorruptError(`ledger ${where} is corrupt: ${reason}`);
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch (e) {
    throw corrupt((e as Error).message);
  }
  if (typeof file !== "object" || file === null || Array.isArray(file)) throw corrupt("not a JSON object");
  const { version, spends } = file as { version?: unknown; spends?: unknown };
  if (version !== 1) throw corrupt(`unknown version ${String(version)}`);
  if (!Array.isArray(spends)) throw corrupt("no spends list");
  return spends.map((s: unknown, i) => {
    const spend = s as Partial<Spend> | null;
    if (
      typeof spend !== "object" ||
      spend === null ||
      typeof spend.collection_id !== "string" ||
      typeof spend.epsilon !== "number" ||
      typeof spend.delta !== "number" ||
      !(typeof spend.unix_secs === "number" && Number.isSafeInteger(spend.unix_secs) && spend.unix_secs >= 0)
    ) {
      throw corrupt(`spend ${i} is malformed`);
    }
    if (!(typeof spend.rho === "number" && Number.isFinite(spend.rho) && spend.rho >= 0)) throw corrupt(`spend with rho ${String(spend.rho)}`);
    return {
      collection_id: spend.collection_id,
      rho: spend.rho,
      epsilon: spend.epsilon,
      delta: spend.delta,
      unix_secs: spend.unix_secs,
    };
  });
}

/** A persistent record of the privacy a device has spent (see the module's comment). */
export class BudgetLedger {
  #spends: Spend[];
  /** Charges run one at a time, in call order. */
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly storage: LedgerStorage,
    readonly limits: Readonly<BudgetLimits>,
    spends: Spend[],
  ) {
    this.#spends = spends;
  }

  /** Opens (or starts) the ledger kept in `storage` with the given budgets. */
  static async open(storage: LedgerStorage, limits: BudgetLimits = DEFAULT_BUDGET_LIMITS): Promise<BudgetLedger> {
    validateLimits(limits);
    let text: string | undefined;
    try {
      text = await storage.read();
    } catch (e) {
      if (e instanceof LedgerError) throw e;
      throw new LedgerStorageError(`ledger ${storage.description}: ${(e as Error).message}`, { cause: e });
    }
    const spends = text === undefined ? [] : parseDocument(text, storage.description);
    return new BudgetLedger(storage, Object.freeze({ ...limits }), spends);
  }

  /** The recorded spends, oldest first (copies). */
  get spends(): Spend[] {
    return this.#spends.map((s) => ({ ...s }));
  }

  /** Total ρ spent over the device's life. */
  get lifetimeRho(): number {
    return this.#spends.reduce((sum, s) => sum + s.rho, 0);
  }

  /** Total lifetime spend as ε at the ledger's δ. */
  get lifetimeEpsilon(): number {
    return zcdpEpsilon(this.lifetimeRho, this.limits.delta);
  }

  /** Records one report to `collection` now, or refuses it. See {@link chargeAt}. */
  charge(collection: Collection): Promise<void> {
    return this.chargeAt(collection, Math.floor(Date.now() / 1000));
  }

  /**
   * Records one report to `collection` at `unixSecs`, or refuses it with
   * {@link BudgetExceededError} if it would exceed the lifetime budget or the budget of
   * the period ending at `unixSecs`. The spend is stored before this resolves; on any
   * error nothing is spent.
   */
  chargeAt(collection: Collection, unixSecs: number): Promise<void> {
    const run = this.#queue.then(() => this.#charge(collection, unixSecs));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #charge(collection: Collection, unixSecs: number): Promise<void> {
    const rho = collection.rho;
    const { delta, lifetimeEpsilon, periodEpsilon, periodSeconds } = this.limits;
    const lifetime = this.lifetimeRho + rho;
    if (lifetime > zcdpRhoForEpsilon(lifetimeEpsilon, delta)) throw this.#exceeded("lifetime", rho, lifetime, lifetimeEpsilon);
    if (periodEpsilon !== null) {
      const since = Math.max(unixSecs - periodSeconds, 0);
      const recent = this.#spends.filter((s) => s.unix_secs > since).reduce((sum, s) => sum + s.rho, 0) + rho;
      if (recent > zcdpRhoForEpsilon(periodEpsilon, delta)) throw this.#exceeded("period", rho, recent, periodEpsilon);
    }
    const spends = [
      ...this.#spends,
      { collection_id: collection.id, rho, epsilon: collection.epsilon, delta: collection.delta, unix_secs: unixSecs },
    ];
    const document = JSON.stringify({ version: 1, spends }, null, 2);
    try {
      await this.storage.write(document);
    } catch (e) {
      throw new LedgerStorageError(`ledger ${this.storage.description}: ${(e as Error).message}`, { cause: e });
    }
    this.#spends = spends;
  }

  #exceeded(window: "lifetime" | "period", rho: number, wouldBe: number, budgetEpsilon: number): BudgetExceededError {
    return new BudgetExceededError(window, rho, wouldBe, zcdpEpsilon(wouldBe, this.limits.delta), budgetEpsilon, this.limits.delta);
  }
}
