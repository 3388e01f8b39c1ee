// The TypeScript client against the real daemon over gRPC-Web (Node's fetch, HTTP/1.1):
// collections created with the admin token, reports sent with a submit token through
// AggregatorClient for every mechanism, and the daemon's count moves by exactly what
// was sent; bad input raises and sends nothing; the ledger refuses once the budget is
// spent and nothing more is counted; resending a report counts it once.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { Encoding, LocalMechanism, Moments, PrivacyModel } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import {
  AggregatorClient,
  BudgetExceededError,
  BudgetLedger,
  DEFAULT_BUDGET_LIMITS,
  InputError,
  LEDGER_FILE,
  StatusError,
} from "../src/index.js";
import { FileLedgerStorage } from "../src/node.js";
import { ADMIN_TOKEN, type Daemon, startDaemon, SUBMIT_TOKEN } from "./daemon.js";

let daemon: Daemon;
let admin: AggregatorClient;

before(async () => {
  daemon = await startDaemon();
  admin = new AggregatorClient(daemon.url, { token: ADMIN_TOKEN });
});

after(async () => {
  await daemon?.stop();
});

const device = (options: ConstructorParameters<typeof AggregatorClient>[1] = {}) =>
  new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, ...options });

async function count(id: string): Promise<bigint> {
  return (await admin.status(id)).reports;
}

/** A vector of `dim` coordinates, different for every `k`. */
const vector = (dim: number, k: number) => Array.from({ length: dim }, (_, i) => Math.sin(1 + i + 7 * k) * 0.8);

const MECHANISMS = [
  { id: "e2e-svec-i32", dim: 4, localMechanism: LocalMechanism.GAUSSIAN, encoding: Encoding.I32_LE },
  { id: "e2e-triu-i16-meancov", dim: 5, localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I16_LE, moments: Moments.MEAN_AND_COVARIANCE, centre: [0.1, 0, -0.1, 0.2, 0] },
  { id: "e2e-triu-i8", dim: 3, localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I8 },
  { id: "e2e-rank-one", dim: 6, localMechanism: LocalMechanism.RANK_ONE, encoding: Encoding.I16_LE, delta: 0 },
  { id: "e2e-rank-one-meancov", dim: 3, localMechanism: LocalMechanism.RANK_ONE, encoding: Encoding.I16_LE, delta: 0, moments: Moments.MEAN_AND_COVARIANCE },
];

for (const m of MECHANISMS) {
  test(`${m.id}: N reports through the client move the daemon's count by exactly N; bad input sends nothing`, async () => {
    await admin.createCollection({ collectionId: m.id, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n, ...m });
    const client = device();
    const collection = await client.collection(m.id);
    assert.equal(await count(m.id), 0n);
    const N = 7;
    for (let k = 0; k < N; k++) {
      const outcome = await client.submit(collection, vector(m.dim, k));
      assert.equal(outcome.duplicate, false);
      assert.equal(outcome.attempts, 1);
    }
    assert.equal(await count(m.id), BigInt(N));
    for (const bad of [vector(m.dim + 1, 0), vector(m.dim - 1, 0), [Number.NaN, ...vector(m.dim - 1, 0)], [...vector(m.dim - 1, 0), Infinity]]) {
      await assert.rejects(client.submit(collection, bad), InputError);
    }
    assert.equal(await count(m.id), BigInt(N), "bad input sent nothing");
  });
}

test("a resent report (same id, same bytes) counts once", async () => {
  await admin.createCollection({ collectionId: "e2e-resend", dim: 3, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n });
  const client = device();
  const collection = await client.collection("e2e-resend");
  const report = await client.prepareReport(collection, [0.3, -0.2, 0.1]);
  assert.equal((await client.submitReport(report)).duplicate, false);
  assert.equal((await client.submitReport(report)).duplicate, true);
  assert.equal(await count("e2e-resend"), 1n);
});

test("the ledger refuses once the budget is spent, and the daemon counts only what was sent (Gaussian and rank-one)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ldpcov-e2e-ledger-"));
  try {
    await admin.createCollection({ collectionId: "e2e-ledger", dim: 4, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n });
    await admin.createCollection({
      collectionId: "e2e-ledger-rank-one",
      dim: 4,
      epsilon: 0.5,
      delta: 0,
      clipRadius: 1,
      minReports: 1n,
      localMechanism: LocalMechanism.RANK_ONE,
    });
    const limits = { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 3, periodEpsilon: null };
    const ledger = await BudgetLedger.open(new FileLedgerStorage(dir), limits);
    const client = device({ ledger });
    const gaussian = await client.collection("e2e-ledger");
    let sent = 0;
    for (;;) {
      try {
        await client.submit(gaussian, vector(4, sent));
        sent++;
      } catch (e) {
        assert.ok(e instanceof BudgetExceededError, String(e));
        break;
      }
      assert.ok(sent < 100);
    }
    // ε = 3 at δ = 1e-6 holds five ε = 1 reports (ρ 0.1476 / 0.0280).
    assert.equal(sent, 5);
    assert.equal(await count("e2e-ledger"), 5n);
    await assert.rejects(client.submit(gaussian, vector(4, 99)), BudgetExceededError);
    assert.equal(await count("e2e-ledger"), 5n, "refused reports are not sent");
    // The rank-one report (ρ = ε²/2 = 0.125) no longer fits what is left (≈ 0.0076).
    const rankOne = await client.collection("e2e-ledger-rank-one");
    await assert.rejects(client.submit(rankOne, vector(4, 0)), BudgetExceededError);
    assert.equal(await count("e2e-ledger-rank-one"), 0n);
    // The ledger survives reopening: a fresh client on the same file is refused too.
    const file = JSON.parse(await readFile(join(dir, LEDGER_FILE), "utf8"));
    assert.equal(file.spends.length, 5);
    const again = device({ ledger: await BudgetLedger.open(new FileLedgerStorage(dir), limits) });
    await assert.rejects(again.submit(gaussian, vector(4, 1)), BudgetExceededError);
    assert.equal(await count("e2e-ledger"), 5n);

    // With the default budget (ε = 4 per 30 days), two ε = 0.5 rank-one reports fit, the third not.
    const fresh = device({ ledger: await BudgetLedger.open(new FileLedgerStorage(join(dir, "fresh"))) });
    await fresh.submit(rankOne, vector(4, 1));
    await fresh.submit(rankOne, vector(4, 2));
    await assert.rejects(fresh.submit(rankOne, vector(4, 3)), BudgetExceededError);
    assert.equal(await count("e2e-ledger-rank-one"), 2n);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a central collection takes the trusted-curator raw vector", async () => {
  await admin.createCollection({
    collectionId: "e2e-central",
    dim: 3,
    epsilon: 1,
    delta: 1e-6,
    clipRadius: 1,
    minReports: 1n,
    privacyModel: PrivacyModel.CENTRAL,
  });
  const client = device();
  const collection = await client.collection("e2e-central");
  await client.submitToTrustedCurator(collection, [0.5, -0.25, 0.125]);
  await client.submitToTrustedCurator(collection, [2, 0, 0]);
  assert.equal(await count("e2e-central"), 2n);
});

test("tokens: none or a wrong one is UNAUTHENTICATED (not retried), a submit token cannot create", async () => {
  await admin.createCollection({ collectionId: "e2e-auth", dim: 2, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n });
  const collection = await device().collection("e2e-auth");
  for (const client of [new AggregatorClient(daemon.url), new AggregatorClient(daemon.url, { token: "wrong" })]) {
    await assert.rejects(client.submit(collection, [0.1, 0.2]), (e: unknown) => e instanceof StatusError && e.codeName === "UNAUTHENTICATED" && e.attempts === 1);
  }
  await assert.rejects(
    device().createCollection({ collectionId: "e2e-auth-2", dim: 2, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n }),
    (e: unknown) => e instanceof StatusError && e.codeName === "PERMISSION_DENIED",
  );
  assert.equal(await count("e2e-auth"), 0n);
});

test("an unreachable daemon is retried (transport failure), then reported", async () => {
  const params = await admin.collection("e2e-auth");
  const client = new AggregatorClient("http://127.0.0.1:9", { token: SUBMIT_TOKEN, retry: { maxAttempts: 3, initialBackoffMs: 1, maxBackoffMs: 2 } });
  await assert.rejects(client.submit(params, [0.1, 0.2]), (e: unknown) => e instanceof StatusError && e.attempts === 3);
});

test("the packed package (npm pack) installs into a scratch project and sends reports from there", async () => {
  const run = promisify(execFile);
  const packageDir = fileURLToPath(new URL("../..", import.meta.url));
  const scratch = await mkdtemp(join(tmpdir(), "ldpcov-pack-"));
  try {
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", scratch], { cwd: packageDir });
    const tarball = join(scratch, stdout.trim().split("\n").at(-1)!);
    await writeFile(join(scratch, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: scratch });
    await admin.createCollection({ collectionId: "e2e-packed", dim: 3, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n });
    await writeFile(
      join(scratch, "main.mjs"),
      `import { AggregatorClient, BudgetLedger, FileLedgerStorage } from "@ldpcov/client/node";
import { Collection } from "@ldpcov/client";
const ledger = await BudgetLedger.open(new FileLedgerStorage("ledger"));
const client = new AggregatorClient(process.env.DAEMON_URL, { token: process.env.SUBMIT_TOKEN, ledger });
const collection = await client.collection("e2e-packed");
if (!(collection instanceof Collection)) throw new Error("two copies of the package");
for (const x of [[0.1, 0.2, 0.3], [-0.3, 0.2, 0.1]]) await client.submit(collection, x);
console.log(ledger.spends.length);
`,
    );
    const out = await run("node", ["main.mjs"], { cwd: scratch, env: { ...process.env, DAEMON_URL: daemon.url, SUBMIT_TOKEN } });
    assert.equal(out.stdout.trim(), "2");
    assert.equal(await count("e2e-packed"), 2n);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
});
