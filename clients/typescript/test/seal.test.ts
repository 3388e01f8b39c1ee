// Sealing for shuffled collections without a daemon: the suite through @hpke/core is
// RFC 9180's (the A.2.1 known-answer values, the same as seal/tests/seal/rfc9180.rs); the
// associated data is ldpcov_seal::aad's; the Rust client's sealed reports
// (testing/vectors/sealed-v1.json) are reproduced byte for byte from their ikmE and
// opened; the active key is checked; and the client seals a complete report (ledger
// charged once), sends it to the relay only, and resends the same bytes under the same
// submission id.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import {
  Aggregator,
  type CollectionParams,
  CollectionParamsSchema,
  HpkeKeyState,
  HpkePublicKeySchema,
  Relay,
  RelayReportSchema,
  ReportSchema,
  ShuffleParamsSchema,
  ShuffleSpecSchema,
} from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import {
  activeKey,
  AggregatorClient,
  BudgetLedger,
  cipherSuite,
  Collection,
  DEFAULT_BUDGET_LIMITS,
  HPKE_INFO,
  MemoryLedgerStorage,
  RelayMismatchError,
  sealAad,
  SealingError,
  sealWithIkmForTestVectorsNotPrivate,
  SpecError,
} from "../src/index.js";
import { hex, unhex, vectors } from "./helpers.js";

// RFC 9180 A.2.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20Poly1305, mode Base,
// sequence number 0 (the values of seal/tests/seal/rfc9180.rs).
const RFC = {
  info: "4f6465206f6e2061204772656369616e2055726e",
  ikmE: "909a9b35d3dc4713a5e72a4da274b55d3d3821a37e5d099e74a647db583a904b",
  pkEm: "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
  ikmR: "1ac01f181fdf9f352797655161c58b75c656a6cc2716dcb66372da835542e1df",
  pkRm: "4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a",
  skRm: "8057991eef8f1f1af18f4a9491d16a1ce333f695d4db8e38da75975c4478e0fb",
  enc: "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
  pt: "4265617574792069732074727574682c20747275746820626561757479",
  aad: "436f756e742d30",
  ct: "1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28",
};

interface SealedCase {
  name: string;
  kem_id: number;
  kdf_id: number;
  aead_id: number;
  ikm_r: string;
  sk_r: string;
  pk_r: string;
  collection_id: string;
  key_id: number;
  info: string;
  aad: string;
  seed: string;
  ikm_e: string;
  plaintext: string;
  enc: string;
  ciphertext: string;
}
const SEALED_PATH = new URL("../../../../testing/vectors/sealed-v1.json", import.meta.url);
const sealed = JSON.parse(readFileSync(SEALED_PATH, "utf8")) as { format: string; version: number; cases: SealedCase[] };

const raw = async (key: CryptoKey) => hex(new Uint8Array(await cipherSuite().kem.serializePublicKey(key)));

async function open(skR: string, enc: Uint8Array, info: Uint8Array, ct: Uint8Array, aad: Uint8Array): Promise<Uint8Array> {
  const suite = cipherSuite();
  const recipientKey = await suite.kem.deserializePrivateKey(unhex(skR));
  const recipient = await suite.createRecipientContext({ recipientKey, enc, info });
  return new Uint8Array(await recipient.open(ct, aad));
}

test("RFC 9180 A.2.1 through @hpke/core: DeriveKeyPair, enc, the first Seal and Open", async () => {
  const suite = cipherSuite();
  assert.deepEqual([suite.kem.id, suite.kdf.id, suite.aead.id], [0x0020, 0x0001, 0x0003]);
  const recipient = await suite.kem.deriveKeyPair(unhex(RFC.ikmR));
  assert.equal(await raw(recipient.publicKey), RFC.pkRm);
  const ephemeral = await suite.kem.deriveKeyPair(unhex(RFC.ikmE));
  assert.equal(await raw(ephemeral.publicKey), RFC.pkEm);
  const sender = await suite.createSenderContext({ recipientPublicKey: recipient.publicKey, info: unhex(RFC.info), ekm: unhex(RFC.ikmE) });
  assert.equal(hex(new Uint8Array(sender.enc)), RFC.enc);
  assert.equal(hex(new Uint8Array(await sender.seal(unhex(RFC.pt), unhex(RFC.aad)))), RFC.ct);
  assert.equal(hex(await open(RFC.skRm, unhex(RFC.enc), unhex(RFC.info), unhex(RFC.ct), unhex(RFC.aad))), RFC.pt);
});

test("the associated data is ldpcov_seal::aad's", () => {
  const expected = new Uint8Array([...new TextEncoder().encode("ldpcov-shuffle v1"), 0, 0, 0, 2, ...new TextEncoder().encode("c1"), 0, 0, 0, 7]);
  assert.deepEqual(sealAad("c1", 7), expected);
  assert.equal(hex(HPKE_INFO), hex(new TextEncoder().encode("ldpcov report v1")));
  assert.throws(() => sealAad("c", -1), SealingError);
  assert.throws(() => sealAad("c", 2 ** 32), SealingError);
});

test("the sealed vector file is version 1", () => {
  assert.equal(sealed.format, "ldpcov-sealed-report-vectors");
  assert.equal(sealed.version, 1);
  assert.ok(sealed.cases.length >= 2);
});

for (const c of sealed.cases) {
  test(`sealed by Rust, reproduced and opened by TypeScript: ${c.name}`, async () => {
    assert.deepEqual([c.kem_id, c.kdf_id, c.aead_id], [0x0020, 0x0001, 0x0003]);
    const suite = cipherSuite();
    assert.equal(await raw((await suite.kem.deriveKeyPair(unhex(c.ikm_r))).publicKey), c.pk_r);
    assert.equal(hex(sealAad(c.collection_id, c.key_id)), c.aad);
    assert.equal(c.info, hex(HPKE_INFO));
    // TypeScript seals exactly what Rust sealed, given Rust's ephemeral ikmE: so the
    // aggregator (Rust) opens what TypeScript seals.
    const key = { keyId: c.key_id, publicKey: unhex(c.pk_r), activeUntil: 2n ** 64n - 1n };
    const ours = await sealWithIkmForTestVectorsNotPrivate(key, c.collection_id, unhex(c.plaintext), unhex(c.ikm_e));
    assert.equal(hex(ours.enc), c.enc);
    assert.equal(hex(ours.ciphertext), c.ciphertext);
    // TypeScript opens what Rust sealed; another collection id or key id does not.
    assert.equal(hex(await open(c.sk_r, unhex(c.enc), HPKE_INFO, unhex(c.ciphertext), unhex(c.aad))), c.plaintext);
    await assert.rejects(open(c.sk_r, unhex(c.enc), HPKE_INFO, unhex(c.ciphertext), sealAad(`${c.collection_id}x`, c.key_id)));
    await assert.rejects(open(c.sk_r, unhex(c.enc), HPKE_INFO, unhex(c.ciphertext), sealAad(c.collection_id, c.key_id + 1)));
  });
}

test("the first sealed vector carries a report of the report vectors", () => {
  const c = sealed.cases[0]!;
  const reportCase = vectors.cases.find((k) => k.name === c.collection_id);
  assert.ok(reportCase);
  assert.equal(c.plaintext, reportCase.reports[0]!.report_message);
  assert.equal(fromBinary(ReportSchema, unhex(c.plaintext)).collectionId, c.collection_id);
});

const KEY = sealed.cases[0]!;
const key = (init: Partial<{ keyId: number; kemId: number; kdfId: number; aeadId: number; publicKey: Uint8Array; state: HpkeKeyState; activeUntil: bigint }>) =>
  create(HpkePublicKeySchema, {
    keyId: 7,
    kemId: 0x20,
    kdfId: 1,
    aeadId: 3,
    publicKey: unhex(KEY.pk_r),
    state: HpkeKeyState.ACTIVE,
    activeUntil: 2n ** 62n,
    ...init,
  });

test("activeKey takes the active key of our suite and refuses anything else", () => {
  const chosen = activeKey([key({ keyId: 8, state: HpkeKeyState.PENDING, publicKey: new Uint8Array(32) }), key({})]);
  assert.equal(chosen.keyId, 7);
  assert.equal(hex(chosen.publicKey), KEY.pk_r);
  assert.throws(() => activeKey([]), /no active key/);
  assert.throws(() => activeKey([key({ state: HpkeKeyState.PENDING })]), /no active key/);
  assert.throws(() => activeKey([key({ kemId: 0x10 })]), /unsupported HPKE suite/);
  assert.throws(() => activeKey([key({ kdfId: 2 })]), /unsupported HPKE suite/);
  assert.throws(() => activeKey([key({ aeadId: 1 })]), /unsupported HPKE suite/);
  assert.throws(() => activeKey([key({ publicKey: new Uint8Array(31) })]), /31 bytes/);
  assert.throws(() => activeKey([key({ publicKey: new Uint8Array(33) })]), /33 bytes/);
});

/** The rank-one vector case's parameters, shuffled, publishing `keys`. */
function shuffledParams(keys = [key({ keyId: 8, state: HpkeKeyState.PENDING }), key({})]): CollectionParams {
  const c = vectors.cases.find((k) => k.name === "rank-one-second-moment-p3")!;
  const params = clone(CollectionParamsSchema, fromBinary(CollectionParamsSchema, unhex(c.params_hex)));
  params.spec!.shuffle = create(ShuffleSpecSchema, { minBatchSize: 10n, batchWindowSeconds: 3600n, centralDelta: 1e-6, keyRotationSeconds: 86400n, keyGraceRotations: 7 });
  params.shuffle = create(ShuffleParamsSchema, { localEpsilon: params.spec!.epsilon, centralEpsilon: 1, centralDelta: 1e-6, minBatchSize: 10n, keys });
  return params;
}

/**
 * A fake aggregator serving `params` (and counting direct reports) and a fake relay
 * serving `pinned` as its pinned copy, failing reports with `failures` first and
 * recording every request.
 */
function fakes(params: CollectionParams, failures: Code[] = [], pinned: CollectionParams = params) {
  const direct: Uint8Array[] = [];
  const relayed: Uint8Array[] = [];
  const aggregator = createRouterTransport(({ service }) => {
    service(Aggregator, {
      getCollection: () => params,
      submitReport(report) {
        direct.push(toBinary(ReportSchema, report));
        return { duplicate: false };
      },
    });
  });
  const relay = createRouterTransport(({ service }) => {
    service(Relay, {
      getCollection: () => pinned,
      submitSealedReport(request) {
        relayed.push(toBinary(RelayReportSchema, request));
        const failure = failures.shift();
        if (failure !== undefined) throw new ConnectError("injected", failure);
        return { duplicate: relayed.length > 1 };
      },
    });
  });
  return { aggregator, relay, direct, relayed };
}

test("a shuffled collection's report is sealed to the active key, sent to the relay only, and retried with the same bytes", async () => {
  const params = shuffledParams();
  const f = fakes(params, [Code.Unavailable, Code.Aborted]);
  // ε0 = 2: each report spends ρ = 2, above the default budget; a budget that holds a few.
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 1000, periodEpsilon: null });
  const client = new AggregatorClient("http://unused", {
    transport: f.aggregator,
    relay: { url: "http://unused", transport: f.relay },
    retry: { maxAttempts: 5, initialBackoffMs: 1, maxBackoffMs: 2 },
    ledger,
  });
  const collection = await client.collection(params.spec!.collectionId);
  assert.ok(collection.shuffled);
  const outcome = await client.submit(collection, [0.5, -0.25, 0.1]);
  assert.equal(outcome.attempts, 3);
  assert.equal(f.direct.length, 0, "nothing went to the aggregator directly");
  assert.equal(f.relayed.length, 3);
  for (const bytes of f.relayed) assert.deepEqual(bytes, f.relayed[0], "every attempt resends the same bytes");
  const request = fromBinary(RelayReportSchema, f.relayed[0]!);
  assert.equal(request.collectionId, collection.id);
  assert.equal(request.submissionId.length, 16);
  assert.equal(request.sealed!.keyId, 7, "sealed to the active key, not the pending one");
  // The relay cannot read it; the key's owner opens a complete Report of this collection.
  const plaintext = await open(KEY.sk_r, request.sealed!.enc, HPKE_INFO, request.sealed!.ciphertext, sealAad(collection.id, 7));
  const report = fromBinary(ReportSchema, plaintext);
  assert.equal(report.collectionId, collection.id);
  assert.deepEqual(report.reportId, outcome.reportId);
  assert.equal(report.payload.length, 2 * collection.dim, "p i16 numbers");
  // The ledger was charged once, ε0²/2 (pure ε-LDP), whatever the retries.
  assert.equal(ledger.spends.length, 1);
  assert.equal(ledger.spends[0]!.rho, (collection.epsilon * collection.epsilon) / 2);
  // A second report has a fresh submission id and a fresh ephemeral key.
  await client.submit(collection, [0.5, -0.25, 0.1]);
  const second = fromBinary(RelayReportSchema, f.relayed.at(-1)!);
  assert.notDeepEqual(second.submissionId, request.submissionId);
  assert.notDeepEqual(second.sealed!.enc, request.sealed!.enc);
});

test("a shuffled collection's report is sealed to the relay's pinned key, not to the aggregator's; another spec is refused", async () => {
  // The aggregator hands this device key 7; the relay's pinned copy (what every device
  // gets) has key 9.
  const params = shuffledParams();
  const pinned = shuffledParams([key({ keyId: 9 })]);
  const f = fakes(params, [], pinned);
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 1000, periodEpsilon: null });
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, relay: { url: "http://unused", transport: f.relay }, ledger });
  const collection = await client.collection(params.spec!.collectionId);
  await client.submit(collection, [0.5, -0.25, 0.1]);
  assert.equal(fromBinary(RelayReportSchema, f.relayed[0]!).sealed!.keyId, 9);
  // A pinned spec that differs from the aggregator's (ε0 halved): refused, nothing charged or sent.
  const changed = shuffledParams();
  changed.spec!.epsilon = params.spec!.epsilon / 2;
  const g = fakes(params, [], changed);
  const before = ledger.spends.length;
  const refusing = new AggregatorClient("http://unused", { transport: g.aggregator, relay: { url: "http://unused", transport: g.relay }, ledger });
  await assert.rejects(refusing.collection(params.spec!.collectionId), (e: unknown) => e instanceof RelayMismatchError);
  assert.equal(g.relayed.length + g.direct.length, 0);
  assert.equal(ledger.spends.length, before);
});

test("without a relay, or without a usable key, a shuffled collection's report is refused before anything is charged or sent", async () => {
  const params = shuffledParams();
  const f = fakes(params);
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage());
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, ledger });
  const collection = await client.collection(params.spec!.collectionId);
  await assert.rejects(client.submit(collection, [0.5, 0, 0]), (e: unknown) => e instanceof SealingError && /relay/.test(e.message));
  for (const keys of [[], [key({ state: HpkeKeyState.PENDING })], [key({ aeadId: 2 })], [key({ publicKey: new Uint8Array(31) })]]) {
    const g = fakes(shuffledParams(keys));
    const withRelay = new AggregatorClient("http://unused", { transport: g.aggregator, relay: { url: "http://unused", transport: g.relay }, ledger });
    const c = await withRelay.collection(params.spec!.collectionId);
    await assert.rejects(withRelay.submit(c, [0.5, 0, 0]), SealingError);
    assert.equal(g.relayed.length + g.direct.length, 0);
  }
  assert.equal(f.relayed.length + f.direct.length, 0);
  assert.equal(ledger.spends.length, 0, "nothing charged");
});

test("only a local rank-one collection can be shuffled", () => {
  const gaussian = vectors.cases.find((k) => k.name === "gaussian-svec-i32-second-moment-p3")!;
  const g = fromBinary(CollectionParamsSchema, unhex(gaussian.params_hex));
  assert.equal(Collection.fromParams(g).shuffled, false);
  g.spec!.shuffle = shuffledParams().spec!.shuffle;
  assert.throws(() => Collection.fromParams(g), SpecError);
});
