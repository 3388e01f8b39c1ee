// The device budget ledger: the Rust ledger's semantics (zCDP composition, lifetime and
// period budgets, refusal before anything is spent, corrupt files refused), its file
// format, and the Node file storage's atomic writes.

import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  BudgetExceededError,
  BudgetLedger,
  Collection,
  DEFAULT_BUDGET_LIMITS,
  InvalidBudgetError,
  LEDGER_FILE,
  LedgerCorruptError,
  LedgerStorageError,
  MemoryLedgerStorage,
  zcdpRhoForEpsilon,
} from "../src/index.js";
import { FileLedgerStorage } from "../src/node.js";

const collection = (id: string, epsilon: number, dim = 5) =>
  Collection.fromSpec({ collectionId: id, dim, epsilon, delta: 1e-6, clipRadius: 1, minReports: 1n });

async function tempdir(): Promise<string> {
  return mkdtemp(join(tmpdir(), "ldpcov-ledger-"));
}

test("a fresh ledger has spent +0, not -0", async () => {
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), DEFAULT_BUDGET_LIMITS);
  assert.equal(ledger.spends.length, 0);
  // assert.equal (strict) compares with Object.is: -0 would fail.
  assert.equal(ledger.lifetimeRho, 0);
  assert.equal(ledger.lifetimeEpsilon, 0);
  assert.equal(String(ledger.lifetimeEpsilon), "0");
});

test("the lifetime budget composes by zCDP and refuses the report that exceeds it, across reopening", async () => {
  const dir = await tempdir();
  try {
    const limits = { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 3, periodEpsilon: null };
    const ledger = await BudgetLedger.open(new FileLedgerStorage(dir), limits);
    const c = collection("a", 1);
    // ρ budget for ε = 3 at δ = 1e-6 is 0.1476; one ε = 1 report is ρ ≈ 0.0280: five fit.
    const fit = Math.floor(zcdpRhoForEpsilon(3, 1e-6) / c.rho);
    assert.equal(fit, 5);
    for (let i = 0; i < fit; i++) await ledger.chargeAt(c, 1000);
    await assert.rejects(ledger.chargeAt(c, 1000), (e: unknown) => e instanceof BudgetExceededError && e.window === "lifetime");
    assert.equal(ledger.spends.length, fit);
    assert.ok(ledger.lifetimeEpsilon <= 3);
    const again = await BudgetLedger.open(new FileLedgerStorage(dir), limits);
    assert.equal(again.spends.length, fit);
    await assert.rejects(again.chargeAt(c, 2000), BudgetExceededError);
    // The Rust client's file: same name, version and field names; no temporary file left.
    const file = JSON.parse(await readFile(join(dir, LEDGER_FILE), "utf8"));
    assert.equal(file.version, 1);
    assert.deepEqual(Object.keys(file.spends[0]).sort(), ["collection_id", "delta", "epsilon", "rho", "unix_secs"]);
    assert.equal(file.spends[0].rho, c.rho);
    assert.deepEqual(await readdir(dir), [LEDGER_FILE]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the period budget frees up after the period", async () => {
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), {
    lifetimeEpsilon: 100,
    periodEpsilon: 1.5,
    periodSeconds: 100,
    delta: 1e-6,
  });
  const c = collection("b", 1);
  const perPeriod = Math.floor(zcdpRhoForEpsilon(1.5, 1e-6) / c.rho);
  assert.ok(perPeriod >= 1);
  for (let k = 0; k < perPeriod; k++) await ledger.chargeAt(c, 1000 + k);
  await assert.rejects(ledger.chargeAt(c, 1050), (e: unknown) => e instanceof BudgetExceededError && e.window === "period");
  await ledger.chargeAt(c, 1000 + 100 + perPeriod);
});

test("concurrent charges are applied one at a time: exactly the budget's worth succeed", async () => {
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 3, periodEpsilon: null });
  const c = collection("c", 1);
  const results = await Promise.allSettled(Array.from({ length: 12 }, () => ledger.chargeAt(c, 1)));
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 5);
  assert.equal(ledger.spends.length, 5);
});

test("the rank-one mechanism spends ε²/2", async () => {
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage());
  const c = Collection.fromSpec({ collectionId: "r1", dim: 3, epsilon: 0.5, delta: 0, clipRadius: 1, minReports: 1n, localMechanism: 3 });
  assert.equal(c.mechanism.kind, "rank_one");
  await ledger.chargeAt(c, 1);
  assert.equal(ledger.spends[0]!.rho, 0.125);
  // Two fit in the default 30-day budget (ε = 4 at δ = 1e-6, ρ ≈ 0.254), the third not.
  await ledger.chargeAt(c, 2);
  await assert.rejects(ledger.chargeAt(c, 3), (e: unknown) => e instanceof BudgetExceededError && e.window === "period");
});

test("corrupt ledgers and invalid budgets are refused", async () => {
  const dir = await tempdir();
  try {
    await writeFile(join(dir, LEDGER_FILE), "{not json");
    await assert.rejects(BudgetLedger.open(new FileLedgerStorage(dir)), LedgerCorruptError);
    await writeFile(
      join(dir, LEDGER_FILE),
      '{"version":1,"spends":[{"collection_id":"x","rho":-1,"epsilon":1,"delta":1e-6,"unix_secs":1}]}',
    );
    await assert.rejects(BudgetLedger.open(new FileLedgerStorage(dir)), LedgerCorruptError);
    await writeFile(join(dir, LEDGER_FILE), '{"version":2,"spends":[]}');
    await assert.rejects(BudgetLedger.open(new FileLedgerStorage(dir)), LedgerCorruptError);
    for (const bad of [
      { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 0 },
      { ...DEFAULT_BUDGET_LIMITS, periodEpsilon: Number.NaN },
      { ...DEFAULT_BUDGET_LIMITS, delta: 1 },
    ]) {
      await assert.rejects(BudgetLedger.open(new MemoryLedgerStorage(), bad), InvalidBudgetError);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a failed write spends nothing", async () => {
  const dir = await tempdir();
  try {
    const ledger = await BudgetLedger.open(new FileLedgerStorage(join(dir, "ledger")));
    // The ledger's directory turns into a file: every write fails.
    await writeFile(join(dir, "ledger"), "a file");
    await assert.rejects(ledger.chargeAt(collection("d", 1), 1), LedgerStorageError);
    assert.equal(ledger.spends.length, 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
