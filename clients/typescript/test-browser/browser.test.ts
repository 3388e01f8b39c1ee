// The client in a real browser: headless Chromium loads a page served on localhost that
// imports the built package (bundled), and the page sends reports over gRPC-Web to the
// real daemon (started with --grpc-web --grpc-web-origin <the page's origin>) for every
// mechanism, with its budget ledger in IndexedDB. The test checks the daemon's count,
// that the ledger refuses once the budget is spent (nothing more counted), and that no
// request body the page sent holds a raw input value (neither its f64 bytes nor its
// decimal digits).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { after, before, test } from "node:test";
import type { Page } from "playwright-core";
import { Encoding, LocalMechanism, Moments } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import { AggregatorClient } from "../src/index.js";
import { ADMIN_TOKEN, type Daemon, startDaemon, SUBMIT_TOKEN } from "../test/daemon.js";
import { launch, servePage } from "./browser.js";

let daemon: Daemon;
let admin: AggregatorClient;
let page: Page;
let pageServer: Server;
let closeBrowser: () => Promise<void>;
/** Every request the page made: method, url and body. */
const requests: { method: string; url: string; body: Buffer | null }[] = [];

before(async () => {
  const served = await servePage();
  pageServer = served.server;
  daemon = await startDaemon(["--grpc-web-origin", served.origin]);
  admin = new AggregatorClient(daemon.url, { token: ADMIN_TOKEN });
  const browser = await launch();
  closeBrowser = browser.close;
  page = await browser.context.newPage();
  page.on("request", (request) => requests.push({ method: request.method(), url: request.url(), body: request.postDataBuffer() }));
  await page.goto(`${served.origin}/`);
  await page.waitForFunction(() => document.getElementById("state")?.textContent === "ready");
});

after(async () => {
  await closeBrowser?.();
  await daemon?.stop();
  pageServer?.close();
});

/** Distinctive inputs: their digits and bytes cannot occur by chance. */
const X = [0.1234567890123457, -0.3141592653589793, 0.2718281828459045, -0.1618033988749895, 0.0577215664901533, -0.4142135623730951];

const MECHANISMS = [
  { id: "web-svec-i32", localMechanism: LocalMechanism.GAUSSIAN, encoding: Encoding.I32_LE, delta: 1e-6 },
  { id: "web-triu-i16-meancov", localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I16_LE, delta: 1e-6, moments: Moments.MEAN_AND_COVARIANCE },
  { id: "web-triu-i8", localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I8, delta: 1e-6 },
  { id: "web-rank-one", localMechanism: LocalMechanism.RANK_ONE, encoding: Encoding.I16_LE, delta: 0 },
];

/** In the page: N reports to `id` with a fresh client whose ledger is in IndexedDB under `db`. */
async function sendFromPage(id: string, n: number, db: string, lifetimeEpsilon = 10) {
  return page.evaluate(
    async ({ url, token, id, n, db, x, lifetimeEpsilon }) => {
      const m = (window as any).ldpcov;
      const limits = { ...m.DEFAULT_BUDGET_LIMITS, lifetimeEpsilon, periodEpsilon: null };
      const ledger = await m.BudgetLedger.open(new m.IndexedDbLedgerStorage(db), limits);
      const client = new m.AggregatorClient(url, { token, ledger });
      const collection = await client.collection(id);
      let sent = 0;
      let refused = "";
      for (let k = 0; k < n; k++) {
        try {
          await client.submit(collection, x);
          sent++;
        } catch (e) {
          refused = `${(e as Error).name}: ${(e as Error).message}`;
          break;
        }
      }
      let badInput = "";
      try {
        await client.submit(collection, [Number.NaN, ...x.slice(1)]);
      } catch (e) {
        badInput = (e as Error).name;
      }
      const reopened = await m.BudgetLedger.open(new m.IndexedDbLedgerStorage(db), limits);
      return { sent, refused, badInput, spends: reopened.spends.length, noise: collection.mechanism.kind };
    },
    { url: daemon.url, token: SUBMIT_TOKEN, id, n, db, x: X.slice(0, 6), lifetimeEpsilon },
  );
}

for (const m of MECHANISMS) {
  test(`the page sends ${m.id} reports over gRPC-Web and the daemon counts each once`, async () => {
    await admin.createCollection({ collectionId: m.id, dim: 6, epsilon: 0.5, clipRadius: 1, minReports: 1n, ...m });
    const result = await sendFromPage(m.id, 3, `ledger-${m.id}`);
    assert.equal(result.refused, "", result.refused);
    assert.equal(result.sent, 3);
    assert.equal(result.badInput, "InputError");
    assert.equal(result.spends, 3, "the IndexedDB ledger kept every spend");
    assert.equal((await admin.status(m.id)).reports, 3n);
  });
}

test("the IndexedDB ledger refuses once the budget is spent; nothing more is counted", async () => {
  await admin.createCollection({ collectionId: "web-ledger", dim: 6, epsilon: 1, delta: 1e-6, clipRadius: 1, minReports: 1n });
  // ε = 3 at δ = 1e-6 holds five ε = 1 reports.
  const first = await sendFromPage("web-ledger", 20, "ledger-budget", 3);
  assert.equal(first.sent, 5);
  assert.match(first.refused, /^BudgetExceededError/);
  const again = await sendFromPage("web-ledger", 1, "ledger-budget", 3);
  assert.equal(again.sent, 0, "the ledger survived in IndexedDB");
  assert.equal(again.spends, 5);
  assert.equal((await admin.status("web-ledger")).reports, 5n);
});

test("HPKE works in Chromium: the page reproduces and opens the Rust client's sealed reports (sealed-v1.json)", async () => {
  const sealed = JSON.parse(readFileSync(new URL("../../../../testing/vectors/sealed-v1.json", import.meta.url), "utf8")) as {
    cases: { pk_r: string; sk_r: string; collection_id: string; key_id: number; ikm_e: string; plaintext: string; enc: string; ciphertext: string }[];
  };
  for (const c of sealed.cases) {
    const got = await page.evaluate(async (c) => {
      const m = (window as any).ldpcov;
      const unhex = (h: string) => new Uint8Array((h.match(/../g) ?? []).map((b) => parseInt(b, 16)));
      const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      const key = { keyId: c.key_id, publicKey: unhex(c.pk_r), activeUntil: 0n };
      const ours = await m.sealWithIkmForTestVectorsNotPrivate(key, c.collection_id, unhex(c.plaintext), unhex(c.ikm_e));
      const suite = m.cipherSuite();
      const recipient = await suite.createRecipientContext({
        recipientKey: await suite.kem.deserializePrivateKey(unhex(c.sk_r)),
        enc: unhex(c.enc),
        info: m.HPKE_INFO,
      });
      const opened = new Uint8Array(await recipient.open(unhex(c.ciphertext), m.sealAad(c.collection_id, c.key_id)));
      // A fresh random ephemeral key seals too (crypto.getRandomValues in the page).
      const fresh = await m.sealBytes(key, c.collection_id, unhex(c.plaintext));
      return { enc: hex(ours.enc), ciphertext: hex(ours.ciphertext), opened: hex(opened), freshEnc: hex(fresh.enc) };
    }, c);
    assert.deepEqual({ enc: got.enc, ciphertext: got.ciphertext, opened: got.opened }, { enc: c.enc, ciphertext: c.ciphertext, opened: c.plaintext });
    assert.notEqual(got.freshEnc, c.enc);
  }
});

test("the relay's layer works in Chromium: the page reproduces and opens the Rust relay-layer vectors (relay-layer-v1.json)", async () => {
  const layered = JSON.parse(readFileSync(new URL("../../../../testing/vectors/relay-layer-v1.json", import.meta.url), "utf8")) as {
    cases: { pk_r: string; sk_r: string; collection_id: string; key_id: number; aad: string; ikm_e: string; plaintext: string; enc: string; ciphertext: string }[];
  };
  assert.ok(layered.cases.length >= 1);
  for (const c of layered.cases) {
    const got = await page.evaluate(async (c) => {
      const m = (window as any).ldpcov;
      const unhex = (h: string) => new Uint8Array((h.match(/../g) ?? []).map((b) => parseInt(b, 16)));
      const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      const key = { keyId: c.key_id, publicKey: unhex(c.pk_r), activeUntil: 0n };
      const ours = await m.sealForRelayWithIkmForTestVectorsNotPrivate(key, c.collection_id, unhex(c.plaintext), unhex(c.ikm_e));
      const suite = m.cipherSuite();
      const recipient = await suite.createRecipientContext({
        recipientKey: await suite.kem.deserializePrivateKey(unhex(c.sk_r)),
        enc: unhex(c.enc),
        info: m.RELAY_HPKE_INFO,
      });
      const opened = new Uint8Array(await recipient.open(unhex(c.ciphertext), m.relayAad(c.collection_id, c.key_id)));
      return { enc: hex(ours.enc), ciphertext: hex(ours.ciphertext), opened: hex(opened), aad: hex(m.relayAad(c.collection_id, c.key_id)) };
    }, c);
    assert.deepEqual(got, { enc: c.enc, ciphertext: c.ciphertext, opened: c.plaintext, aad: c.aad });
  }
});

test("no request body the page sent holds a raw input value", () => {
  const submits = requests.filter((r) => r.method === "POST" && r.url.endsWith("/ldpcov.v1.Aggregator/SubmitReport"));
  // 4 mechanisms × 3 reports + 5 ledger-limited ones.
  assert.equal(submits.length, 17, "every report the page sent was seen");
  const needles: Buffer[] = [];
  for (const v of X) {
    const le = Buffer.alloc(8);
    le.writeDoubleLE(v);
    const be = Buffer.alloc(8);
    be.writeDoubleBE(v);
    const f32 = Buffer.alloc(4);
    f32.writeFloatLE(v);
    needles.push(le, be, f32, Buffer.from(String(v)), Buffer.from(String(v).slice(0, 9)), Buffer.from(v.toFixed(6)));
  }
  let inspected = 0;
  for (const request of requests) {
    if (request.body === null) continue;
    inspected++;
    for (const needle of needles) {
      assert.equal(request.body.indexOf(needle), -1, `${request.url} carries ${needle.toString("hex")}`);
    }
  }
  assert.ok(inspected >= submits.length);
});
