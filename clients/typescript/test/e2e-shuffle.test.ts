// A shuffled collection end to end: the real daemon (`serve --memory --grpc-web` with a
// relay token file) publishes the collection's HPKE keys; the TypeScript client seals
// each report to the active key (@hpke/core) and sends it over gRPC-Web to a relay —
// here the minimal test relay of test-relay.ts, since the relay daemon is not part of
// this package — which forwards the sealed reports as one shuffled batch to the
// daemon's SubmitShuffledBatch with its relay token. The daemon (Rust, the `hpke`
// crate) opens every report TypeScript sealed: its count moves by exactly the reports
// sent, and only when the batch arrives. A device without a relay is refused before
// anything is charged, a direct report is refused by the daemon, and the ledger is
// charged ε0²/2 per report.

import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { LocalMechanism } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import { AggregatorClient, BudgetLedger, DEFAULT_BUDGET_LIMITS, MemoryLedgerStorage, RelayMismatchError, SealingError, StatusError } from "../src/index.js";
import { ADMIN_TOKEN, type Daemon, startDaemon, SUBMIT_TOKEN } from "./daemon.js";
import { startTestRelay, type TestRelay } from "./test-relay.js";

const RELAY_TOKEN = "ts-relay-secret";
const DEVICE_TOKEN = "ts-device-secret";
const MIN_BATCH = 6;

let dir: string;
let daemon: Daemon;
let relay: TestRelay;
let admin: AggregatorClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ldpcov-e2e-shuffle-"));
  const tokens = join(dir, "relay-tokens");
  await writeFile(tokens, `${RELAY_TOKEN}\n`, { mode: 0o600 });
  daemon = await startDaemon(["--relay-token-file", tokens]);
  relay = await startTestRelay({ aggregatorUrl: daemon.url, relayToken: RELAY_TOKEN, deviceToken: DEVICE_TOKEN });
  admin = new AggregatorClient(daemon.url, { token: ADMIN_TOKEN });
});

after(async () => {
  await relay?.stop();
  await daemon?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const count = async (id: string) => (await admin.status(id)).reports;
const vector = (dim: number, k: number) => Array.from({ length: dim }, (_, i) => Math.cos(1 + i + 5 * k) * 0.7);

test("e2e-shuffled: sealed reports through the relay, opened by the daemon; the count moves by exactly what was sent", async () => {
  const id = "e2e-shuffled";
  const params = await admin.createCollection({
    collectionId: id,
    dim: 4,
    epsilon: 2,
    delta: 0,
    clipRadius: 1,
    minReports: 1n,
    localMechanism: LocalMechanism.RANK_ONE,
    shuffle: { minBatchSize: BigInt(MIN_BATCH) },
  });
  assert.equal(params.shuffle?.keys.length, 2);

  // A budget that holds every report here (each spends ρ = ε0²/2 = 2).
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 1000, periodEpsilon: null });
  const client = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, ledger, relay: { url: relay.url, token: DEVICE_TOKEN } });
  const collection = await client.collection(id);
  assert.ok(collection.shuffled);

  // Direct reports: the client refuses without a relay before charging anything; the
  // daemon refuses a direct report built for the collection.
  const direct = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, ledger });
  await assert.rejects(direct.submit(collection, vector(4, 0)), (e: unknown) => e instanceof SealingError && /relay/.test(e.message));
  assert.equal(ledger.spends.length, 0, "refused before the ledger");
  const report = await direct.prepareReport(collection, vector(4, 0));
  await assert.rejects(direct.submitReport(report), (e: unknown) => e instanceof StatusError && e.codeName === "FAILED_PRECONDITION");
  assert.equal(await count(id), 0n);
  const spentBefore = ledger.spends.length; // the direct report prepared above (1)

  // N sealed reports to the relay; nothing is counted until the batch goes.
  const N = MIN_BATCH + 2;
  for (let k = 0; k < N; k++) {
    const outcome = await client.submit(collection, vector(4, k + 1));
    assert.equal(outcome.duplicate, false);
    assert.equal(outcome.attempts, 1);
  }
  // A resent submission is stored once.
  const prepared = await client.prepareRelayReport(collection, vector(4, 99));
  assert.equal((await client.submitRelayReport(prepared)).duplicate, false);
  assert.equal((await client.submitRelayReport(prepared)).duplicate, true);
  const sent = N + 1;
  assert.equal(relay.held(id), sent);
  assert.equal(await count(id), 0n, "the relay holds them; the aggregator has seen nothing yet");
  // ε0 = 2 per report, charged once per report whatever was resent: ρ = ε0²/2.
  assert.equal(ledger.spends.length - spentBefore, sent);
  for (const s of ledger.spends) assert.equal(s.rho, 2);

  // The relay forwards one shuffled batch: the daemon opens every report TypeScript sealed.
  const response = await relay.flush(id);
  assert.deepEqual(
    { accepted: response.accepted, duplicates: response.duplicates, refused: response.refused.length },
    { accepted: BigInt(sent), duplicates: 0n, refused: 0 },
  );
  assert.equal(await count(id), BigInt(sent));

  // A device token is required by the relay (UNAUTHENTICATED, not retried).
  const stranger = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, relay: { url: relay.url, token: "wrong" } });
  await assert.rejects(
    (async () => stranger.submit(await stranger.collection(id), vector(4, 5)))(),
    (e: unknown) => e instanceof StatusError && e.codeName === "UNAUTHENTICATED",
  );
  assert.equal(relay.held(id), 0);
  assert.equal(await count(id), BigInt(sent));
});

test("e2e-shuffled: a device refuses a collection whose relay serves another spec than the aggregator's", async () => {
  const id = "e2e-shuffled-pinned";
  await admin.createCollection({
    collectionId: id,
    dim: 4,
    epsilon: 2,
    delta: 0,
    clipRadius: 1,
    minReports: 1n,
    localMechanism: LocalMechanism.RANK_ONE,
    shuffle: { minBatchSize: BigInt(MIN_BATCH) },
  });
  // The relay's pinned copy says ε0 = 1 while the aggregator now says 2: one of them
  // changed the settings, and the device reports to neither.
  const hostile = await startTestRelay({
    aggregatorUrl: daemon.url,
    relayToken: RELAY_TOKEN,
    deviceToken: DEVICE_TOKEN,
    pinned: (params) => ({ ...params, spec: params.spec === undefined ? undefined : { ...params.spec, epsilon: 1 } }),
  });
  try {
    const client = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, relay: { url: hostile.url, token: DEVICE_TOKEN } });
    await assert.rejects(client.collection(id), (e: unknown) => e instanceof RelayMismatchError && e.collectionId === id);
    // The same relay serving the aggregator's spec is accepted.
    const honest = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, relay: { url: relay.url, token: DEVICE_TOKEN } });
    assert.ok((await honest.collection(id)).shuffled);
  } finally {
    await hostile.stop();
  }
});
