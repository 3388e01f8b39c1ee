// A shuffled collection end to end, through the real daemons: the aggregator
// (`serve --memory --grpc-web` with a relay token file) publishes the collection's HPKE
// keys; each device (its own device token, issued by the relay's command line, and its
// own ledger: the relay takes one report per device) asks the real relay
// (`ldpcov-relay serve --grpc-web`) ALONE for the collection — its pinned copy, the keys
// it pinned and its own key — seals its report to the active key (@hpke/core), then
// that to the relay's key (the relay's layer), and sends it over gRPC-Web, as a browser
// must, to the relay, which opens its layer, stores the inner report and, once the
// collection's window is over and holds the minimum batch, forwards the window as one
// shuffled batch to the aggregator's SubmitShuffledBatch with its relay token. The
// aggregator (Rust, the `hpke` crate) opens every report TypeScript sealed: its count
// stays 0 below the minimum, past the window, and then moves by exactly the reports
// sent. The devices' aggregator URL is a canary (a TCP server counting connections)
// while the relay's upstream is the real aggregator: no call from a device reaches the
// aggregator, not one connection. A device without a relay is refused before anything
// is charged, a direct report is refused by the aggregator, an unknown device token by
// the relay, a collection that is not shuffled by the relay, and the ledger is charged
// ε0²/2 per report.

import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";
import { LocalMechanism } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import {
  AggregatorClient,
  BudgetLedger,
  type Collection,
  DEFAULT_BUDGET_LIMITS,
  MemoryLedgerStorage,
  NO_RETRIES,
  SealingError,
  StatusError,
} from "../src/index.js";
import { ADMIN_TOKEN, type Daemon, type Relay, startDaemon, startRelay, SUBMIT_TOKEN } from "./daemon.js";

const RELAY_TOKEN = "ts-relay-secret";
const MIN_BATCH = 6;
/** The collection's batch window, seconds: short, so that the relay forms the batch soon. */
const WINDOW_SECONDS = 1;
/** How long to wait for the relay to forward a due batch (it checks every 20 ms). */
const FORWARD_TIMEOUT_MS = 30_000;

let dir: string;
let daemon: Daemon;
let relay: Relay;
let admin: AggregatorClient;
let canary: Canary;

/**
 * Where the devices are told the aggregator is: a TCP server on 127.0.0.1 that counts
 * every connection (and the bytes sent on it) and answers nothing. A device that talks
 * to the relay alone never connects to it.
 */
interface Canary {
  url: string;
  connections: number;
  bytes: number;
  close(): Promise<void>;
}

async function startCanary(): Promise<Canary> {
  const sockets = new Set<Socket>();
  const canary = { url: "", connections: 0, bytes: 0, close: async () => {} };
  const server: Server = createServer((socket) => {
    canary.connections++;
    sockets.add(socket);
    socket.on("data", (chunk: Buffer) => {
      canary.bytes += chunk.length;
      // Not an aggregator: whoever connects is told so and cut off.
      socket.end("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    });
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the canary has no TCP address");
  canary.url = `http://127.0.0.1:${address.port}`;
  canary.close = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
  return canary;
}

/** Fails if anything connected to the canary: a device's call reached "the aggregator". */
function assertCanaryUntouched(when: string): void {
  assert.deepEqual(
    { connections: canary.connections, bytes: canary.bytes },
    { connections: 0, bytes: 0 },
    `${when}: a device connected to the aggregator URL it was given; a device with a relay must talk to the relay alone`,
  );
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ldpcov-e2e-shuffle-"));
  const tokens = join(dir, "relay-tokens");
  await writeFile(tokens, `${RELAY_TOKEN}\n`, { mode: 0o600 });
  daemon = await startDaemon(["--relay-token-file", tokens]);
  relay = await startRelay({ aggregatorUrl: daemon.url, relayToken: RELAY_TOKEN });
  admin = new AggregatorClient(daemon.url, { token: ADMIN_TOKEN });
  canary = await startCanary();
});

after(async () => {
  await relay?.stop();
  await daemon?.stop();
  await canary?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const count = async (id: string) => (await admin.status(id)).reports;
const vector = (dim: number, k: number) => Array.from({ length: dim }, (_, i) => Math.cos(1 + i + 5 * k) * 0.7);

/** A budget that holds every report here (each spends ρ = ε0²/2 = 2). */
const ledger = () => BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 1000, periodEpsilon: null });

/**
 * A device of its own: a device token the relay issued for `deviceId`, its own ledger,
 * the real relay, and for the aggregator the canary's URL (the real aggregator is only
 * the relay's upstream).
 */
async function device(deviceId: string): Promise<{ client: AggregatorClient; ledger: BudgetLedger }> {
  const token = await relay.issueDeviceToken(deviceId);
  const own = await ledger();
  return { client: new AggregatorClient(canary.url, { token: SUBMIT_TOKEN, ledger: own, relay: { url: relay.url, token } }), ledger: own };
}

/** Polls the aggregator's count of `id` until it is `expected`; fails with the relay's view and log after {@link FORWARD_TIMEOUT_MS}. */
async function waitForCount(id: string, expected: bigint): Promise<void> {
  const deadline = Date.now() + FORWARD_TIMEOUT_MS;
  let now = await count(id);
  while (now !== expected) {
    if (Date.now() > deadline) {
      const held = await relay.status(id).catch((e: unknown) => String(e));
      assert.fail(
        `the relay did not forward the batch: the aggregator counts ${now} reports of ${id} after ${FORWARD_TIMEOUT_MS / 1000} s, ` +
          `expected ${expected}; the relay's status: ${JSON.stringify(held, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v))}\n` +
          `the relay's log:\n${relay.log()}`,
      );
    }
    await sleep(100);
    now = await count(id);
  }
}

/** Polls the relay's status of `id` until it has forwarded `batches` batches (or {@link FORWARD_TIMEOUT_MS} passes) and returns it. */
async function waitForForwarded(id: string, batches: bigint) {
  const deadline = Date.now() + FORWARD_TIMEOUT_MS;
  let status = await relay.status(id);
  while (status.forwardedBatches < batches && Date.now() <= deadline) {
    await sleep(50);
    status = await relay.status(id);
  }
  return status;
}

test("e2e-shuffled: sealed reports through the real relay over gRPC-Web, opened by the daemon; the count moves by exactly what was sent", async () => {
  const id = "e2e-shuffled";
  const params = await admin.createCollection({
    collectionId: id,
    dim: 4,
    epsilon: 2,
    delta: 0,
    clipRadius: 1,
    minReports: 1n,
    localMechanism: LocalMechanism.RANK_ONE,
    shuffle: { minBatchSize: BigInt(MIN_BATCH), batchWindowSeconds: BigInt(WINDOW_SECONDS) },
  });
  assert.equal(params.shuffle?.keys.length, 2);

  // Direct reports: the client refuses without a relay before charging anything; the
  // daemon refuses a direct report built for the collection.
  const directLedger = await ledger();
  const direct = new AggregatorClient(daemon.url, { token: SUBMIT_TOKEN, ledger: directLedger });
  const directCollection = await direct.collection(id);
  assert.ok(directCollection.shuffled);
  await assert.rejects(direct.submit(directCollection, vector(4, 0)), (e: unknown) => e instanceof SealingError && /relay/.test(e.message));
  assert.equal(directLedger.spends.length, 0, "refused before the ledger");
  const report = await direct.prepareReport(directCollection, vector(4, 0));
  await assert.rejects(direct.submitReport(report), (e: unknown) => e instanceof StatusError && e.codeName === "FAILED_PRECONDITION");
  assert.equal(await count(id), 0n);

  // One device per report (the relay takes one report per device and collection),
  // each fetching the collection from the relay alone: the relay's pinned copy, with the
  // relay's effective floor (the larger of the announced minimum and its own).
  const devices: { client: AggregatorClient; ledger: BudgetLedger; collection: Collection }[] = [];
  for (let k = 0; k < MIN_BATCH; k++) {
    const d = await device(`ts-device-${k}`);
    const collection = await d.client.collection(id);
    assert.ok(collection.shuffled);
    assert.equal(collection.epsilon, 2);
    devices.push({ ...d, collection });
  }
  assertCanaryUntouched("after the devices fetched the collection");

  // One report fewer than the minimum: the relay holds them, past the window; the
  // aggregator has seen nothing.
  for (let k = 0; k < MIN_BATCH - 1; k++) {
    const d = devices[k]!;
    const outcome = await d.client.submit(d.collection, vector(4, k + 1));
    assert.equal(outcome.duplicate, false);
    assert.equal(outcome.attempts, 1);
  }
  await sleep(WINDOW_SECONDS * 1000 + 1500);
  assert.equal((await relay.status(id)).windowReports, BigInt(MIN_BATCH - 1), "the relay holds the reports in the open window");
  assert.equal(await count(id), 0n, "below the minimum batch the relay forwards nothing, however old the window");

  // The last device's report completes the batch; resent, it is stored once.
  const last = devices[MIN_BATCH - 1]!;
  const prepared = await last.client.prepareRelayReport(last.collection, vector(4, 99));
  assert.equal((await last.client.submitRelayReport(prepared)).duplicate, false);
  assert.equal((await last.client.submitRelayReport(prepared)).duplicate, true);

  // The relay forwards one shuffled batch on its next check: the daemon opens every
  // report TypeScript sealed.
  await waitForCount(id, BigInt(MIN_BATCH));
  // The aggregator commits the batch before the relay hears its answer and records the
  // forward: the relay's counters follow a moment after the aggregator's count.
  const status = await waitForForwarded(id, 1n);
  assert.deepEqual(
    { forwardedBatches: status.forwardedBatches, forwardedReports: status.forwardedReports, windowReports: status.windowReports },
    { forwardedBatches: 1n, forwardedReports: BigInt(MIN_BATCH), windowReports: 0n },
  );
  // ε0 = 2 per report, charged once per report whatever was resent: ρ = ε0²/2.
  for (const d of devices) {
    assert.equal(d.ledger.spends.length, 1);
    assert.equal(d.ledger.spends[0]!.rho, 2);
  }
  // The batch is counted, and not one call from a device reached the aggregator.
  assertCanaryUntouched("after the devices reported and the batch was counted");

  // A device token is required by the relay (UNAUTHENTICATED, not retried).
  const stranger = new AggregatorClient(canary.url, { token: SUBMIT_TOKEN, relay: { url: relay.url, token: "wrong" } });
  await assert.rejects(
    (async () => stranger.submit(await stranger.collection(id), vector(4, 5)))(),
    (e: unknown) => e instanceof StatusError && e.codeName === "UNAUTHENTICATED" && e.method === "Relay/GetCollection",
  );
  assert.equal((await relay.status(id)).windowReports, 0n);
  assert.equal(await count(id), BigInt(MIN_BATCH));
  assertCanaryUntouched("after a device with a bad token was refused");
});

test("e2e-shuffled: the relay serves every device its pinned copy, even after the aggregator replaces the collection; a collection that is not shuffled is refused by the relay", async () => {
  const id = "e2e-shuffled-pinned";
  const create = (epsilon: number) =>
    admin.createCollection({
      collectionId: id,
      dim: 4,
      epsilon,
      delta: 0,
      clipRadius: 1,
      minReports: 1n,
      localMechanism: LocalMechanism.RANK_ONE,
      shuffle: { minBatchSize: BigInt(MIN_BATCH), batchWindowSeconds: BigInt(WINDOW_SECONDS) },
    });
  await create(2);
  // The relay pins the settings it first serves, the same for every device.
  const honest = await device("ts-pinned-1");
  assert.equal((await honest.client.collection(id)).epsilon, 2);
  // The aggregator's operator replaces the collection with ε0 = 1 under the same id:
  // a device never sees the aggregator's new copy. The relay still serves its pinned
  // copy (ε0 = 2) while its cached answer lasts, then refuses the changed collection
  // (FAILED_PRECONDITION); either way the device is told what every device is told.
  await admin.deleteCollection(id);
  await create(1);
  const later = await device("ts-pinned-2");
  try {
    const collection = await later.client.collection(id);
    assert.equal(collection.epsilon, 2, "the relay's pinned copy, never the aggregator's replacement");
  } catch (e) {
    assert.ok(e instanceof StatusError && e.method === "Relay/GetCollection" && e.codeName === "FAILED_PRECONDITION", String(e));
  }
  assert.equal(later.ledger.spends.length, 0);

  // The relay serves shuffled collections only: a device asking it for another one is
  // refused by the relay, and does not fall back to the aggregator.
  const plain = "e2e-not-shuffled";
  await admin.createCollection({ collectionId: plain, dim: 4, epsilon: 2, delta: 0, clipRadius: 1, minReports: 1n, localMechanism: LocalMechanism.RANK_ONE });
  const d = await device("ts-plain");
  await assert.rejects(
    d.client.collection(plain),
    (e: unknown) => e instanceof StatusError && e.method === "Relay/GetCollection" && e.codeName === "FAILED_PRECONDITION",
  );
  assert.equal(d.ledger.spends.length, 0);
  assert.equal(await count(plain), 0n);
  assertCanaryUntouched("after the devices of the replaced and the unshuffled collections");
});

test("e2e-shuffled: the canary does count a client that calls the aggregator URL (the assertion above can fail)", async () => {
  // Runs last: a client WITHOUT a relay asks its aggregator — here the canary — for the
  // collection; the canary counts the connection.
  const before = canary.connections;
  const direct = new AggregatorClient(canary.url, { token: SUBMIT_TOKEN, retry: NO_RETRIES });
  await assert.rejects(direct.collection("e2e-shuffled"), StatusError);
  assert.ok(canary.connections > before, "the canary saw the direct client's connection");
  assert.ok(canary.bytes > 0);
});
