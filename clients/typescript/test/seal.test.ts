// HPKE against RFC 9180 A.2.1 (the same as seal/tests/seal/rfc9180.rs); the
// associated data is ldpcov_seal::aad's; the Rust client's sealed reports
// (testing/vectors/sealed-v1.json) are reproduced byte for byte from their ikmE and
// opened; the relay's layer (testing/vectors/relay-layer-v1.json: the first sealed
// report sealed once more to a relay's key) is reproduced byte for byte, the whole
// encoded RelayReport too, and opened, and does not open under another collection, key
// id or info; the active key and the relay's key are checked; and the client with a
// relay asks the relay alone (no call reaches the aggregator), seals a complete report
// (ledger charged once) to the collection's key then to the relay's, sends it to the
// relay only, and resends the same bytes under the same submission id.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
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
  SealedReportSchema,
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
  RELAY_HPKE_INFO,
  relayAad,
  relayKey,
  RelayMismatchError,
  sealAad,
  sealBytesForRelay,
  sealForRelay,
  sealForRelayWithIkmForTestVectorsNotPrivate,
  SealingError,
  sealReportWithIkmForTestVectorsNotPrivate,
  sealWithIkmForTestVectorsNotPrivate,
  SpecError,
  StatusError,
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

interface LayeredCase {
  name: string;
  kem_id: number;
  kdf_id: number;
  aead_id: number;
  relay_secret: string;
  ikm_r: string;
  sk_r: string;
  pk_r: string;
  key_id: number;
  collection_id: string;
  info: string;
  aad: string;
  seed: string;
  ikm_e: string;
  plaintext: string;
  enc: string;
  ciphertext: string;
  submission_id: string;
  relay_report: string;
}
const LAYERED_PATH = new URL("../../../../testing/vectors/relay-layer-v1.json", import.meta.url);
const layered = JSON.parse(readFileSync(LAYERED_PATH, "utf8")) as { format: string; version: number; cases: LayeredCase[] };

test("the relay-layer vector file is version 1", () => {
  assert.equal(layered.format, "ldpcov-relay-layer-vectors");
  assert.equal(layered.version, 1);
  assert.ok(layered.cases.length >= 1);
});

test("the relay layer's associated data is ldpcov_seal::relay_aad's", () => {
  const expected = new Uint8Array([...new TextEncoder().encode("ldpcov-relay v1"), 0, 0, 0, 2, ...new TextEncoder().encode("c1"), 0, 0, 0, 7]);
  assert.deepEqual(relayAad("c1", 7), expected);
  assert.equal(hex(RELAY_HPKE_INFO), hex(new TextEncoder().encode("ldpcov relay layer v1")));
  assert.notEqual(hex(relayAad("c1", 7)), hex(sealAad("c1", 7)), "the two layers' associated data differ");
  assert.throws(() => relayAad("c", -1), SealingError);
  assert.throws(() => relayAad("c", 2 ** 32), SealingError);
});

for (const c of layered.cases) {
  test(`the relay's layer sealed by Rust, reproduced and opened by TypeScript: ${c.name}`, async () => {
    assert.deepEqual([c.kem_id, c.kdf_id, c.aead_id], [0x0020, 0x0001, 0x0003]);
    const suite = cipherSuite();
    // The relay's key pair is DeriveKeyPair(ikm_r); its id the first 4 bytes of SHA-256(pk_r).
    assert.equal(await raw((await suite.kem.deriveKeyPair(unhex(c.ikm_r))).publicKey), c.pk_r);
    assert.equal(createHash("sha256").update(unhex(c.pk_r)).digest().readUInt32BE(0), c.key_id);
    assert.equal(hex(relayAad(c.collection_id, c.key_id)), c.aad);
    assert.equal(c.info, hex(RELAY_HPKE_INFO));
    // The plaintext is the first sealed vector's report, encoded as a SealedReport.
    const first = sealed.cases[0]!;
    assert.equal(c.collection_id, first.collection_id);
    assert.equal(
      hex(toBinary(SealedReportSchema, create(SealedReportSchema, { keyId: first.key_id, enc: unhex(first.enc), ciphertext: unhex(first.ciphertext) }))),
      c.plaintext,
    );
    // TypeScript seals exactly what Rust sealed, given Rust's ephemeral ikmE.
    const relay = { keyId: c.key_id, publicKey: unhex(c.pk_r), activeUntil: 2n ** 64n - 1n };
    const ours = await sealForRelayWithIkmForTestVectorsNotPrivate(relay, c.collection_id, unhex(c.plaintext), unhex(c.ikm_e));
    assert.equal(hex(ours.enc), c.enc);
    assert.equal(hex(ours.ciphertext), c.ciphertext);
    // The whole device path: the first sealed vector's Report sealed to the aggregator's
    // key, then to the relay's, under the vector's submission id: the RelayReport's
    // bytes are Rust's.
    const aggregatorKey = { keyId: first.key_id, publicKey: unhex(first.pk_r), activeUntil: 2n ** 64n - 1n };
    const request = await sealReportWithIkmForTestVectorsNotPrivate(c.collection_id, aggregatorKey, relay, fromBinary(ReportSchema, unhex(first.plaintext)), {
      submissionId: unhex(c.submission_id),
      ikmInner: unhex(first.ikm_e),
      ikmOuter: unhex(c.ikm_e),
    });
    assert.equal(hex(toBinary(RelayReportSchema, request)), c.relay_report);
    const decoded = fromBinary(RelayReportSchema, unhex(c.relay_report));
    assert.equal(decoded.outer?.keyId, c.key_id);
    assert.equal(hex(decoded.submissionId), c.submission_id);
    // The relay (sk_r) opens it back to the inner report; the aggregator's key opens that.
    const opened = await open(c.sk_r, unhex(c.enc), RELAY_HPKE_INFO, unhex(c.ciphertext), unhex(c.aad));
    assert.equal(hex(opened), c.plaintext);
    const inner = fromBinary(SealedReportSchema, opened);
    assert.equal(hex(await open(first.sk_r, inner.enc, HPKE_INFO, inner.ciphertext, sealAad(first.collection_id, inner.keyId))), first.plaintext);
    // Another collection, another relay key id, the report layer's info or its associated
    // data, a flipped bit: the layer does not open.
    const ct = unhex(c.ciphertext);
    await assert.rejects(open(c.sk_r, unhex(c.enc), RELAY_HPKE_INFO, ct, relayAad(`${c.collection_id}x`, c.key_id)));
    await assert.rejects(open(c.sk_r, unhex(c.enc), RELAY_HPKE_INFO, ct, relayAad(c.collection_id, (c.key_id + 1) >>> 0)));
    await assert.rejects(open(c.sk_r, unhex(c.enc), RELAY_HPKE_INFO, ct, sealAad(c.collection_id, c.key_id)));
    await assert.rejects(open(c.sk_r, unhex(c.enc), HPKE_INFO, ct, unhex(c.aad)));
    const flipped = Uint8Array.from(ct);
    flipped[0]! ^= 1;
    await assert.rejects(open(c.sk_r, unhex(c.enc), RELAY_HPKE_INFO, flipped, unhex(c.aad)));
    // A fresh random ephemeral key opens too, and differs.
    const fresh = await sealBytesForRelay(relay, c.collection_id, unhex(c.plaintext));
    assert.notEqual(hex(fresh.enc), c.enc);
    assert.equal(hex(await open(c.sk_r, fresh.enc, RELAY_HPKE_INFO, fresh.ciphertext, unhex(c.aad))), c.plaintext);
    // sealForRelay encodes the SealedReport it is given and labels the layer with the relay's key id.
    const layer = await sealForRelay(c.collection_id, relay, inner);
    assert.equal(layer.keyId, c.key_id);
    assert.equal(hex(await open(c.sk_r, layer.enc, RELAY_HPKE_INFO, layer.ciphertext, unhex(c.aad))), c.plaintext);
  });
}

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

const RELAY = layered.cases[0]!;
/** The relay's own key as a relay publishes it (`shuffle.relayKey`): the relay vector's. */
const relayKeyMessage = (init: Parameters<typeof key>[0] = {}) =>
  key({ keyId: RELAY.key_id, publicKey: unhex(RELAY.pk_r), activeUntil: 2n ** 64n - 1n, ...init });

test("relayKey takes the relay's active key of our suite and refuses anything else", () => {
  const chosen = relayKey(relayKeyMessage());
  assert.equal(chosen.keyId, RELAY.key_id);
  assert.equal(hex(chosen.publicKey), RELAY.pk_r);
  assert.throws(() => relayKey(undefined), /publishes no key of its own/);
  assert.throws(() => relayKey(relayKeyMessage({ state: HpkeKeyState.PENDING })), /not active/);
  assert.throws(() => relayKey(relayKeyMessage({ state: HpkeKeyState.RETIRED })), /not active/);
  assert.throws(() => relayKey(relayKeyMessage({ kemId: 0x10 })), /unsupported HPKE suite/);
  assert.throws(() => relayKey(relayKeyMessage({ aeadId: 1 })), /unsupported HPKE suite/);
  assert.throws(() => relayKey(relayKeyMessage({ publicKey: new Uint8Array(31) })), /the relay's key has 31 bytes/);
});

/**
 * The rank-one vector case's parameters, shuffled, publishing `keys` and, as a relay's
 * answer does, the relay's own key `relay` (`null`: none, as the aggregator's answer).
 */
function shuffledParams(
  keys = [key({ keyId: 8, state: HpkeKeyState.PENDING }), key({})],
  relay: ReturnType<typeof key> | null = relayKeyMessage(),
): CollectionParams {
  const c = vectors.cases.find((k) => k.name === "rank-one-second-moment-p3")!;
  const params = clone(CollectionParamsSchema, fromBinary(CollectionParamsSchema, unhex(c.params_hex)));
  params.spec!.shuffle = create(ShuffleSpecSchema, { minBatchSize: 10n, batchWindowSeconds: 3600n, centralDelta: 1e-6, keyRotationSeconds: 86400n, keyGraceRotations: 7 });
  params.shuffle = create(ShuffleParamsSchema, {
    localEpsilon: params.spec!.epsilon,
    centralEpsilon: 1,
    centralDelta: 1e-6,
    minBatchSize: 10n,
    keys,
    ...(relay === null ? {} : { relayKey: relay }),
  });
  return params;
}

/**
 * A fake aggregator serving `params` and a fake relay serving `pinned` (by default
 * `params`) as its copy, failing reports with `failures` first; records every request,
 * and counts every call that reaches the aggregator.
 */
function fakes(params: CollectionParams, failures: Code[] = [], pinned: CollectionParams = params) {
  const direct: Uint8Array[] = [];
  const relayed: Uint8Array[] = [];
  const calls = { aggregator: 0, relayGetCollection: 0 };
  const fake = {
    pinned,
    aggregator: createRouterTransport(({ service }) => {
      service(Aggregator, {
        getCollection: () => {
          calls.aggregator++;
          return params;
        },
        submitReport(report) {
          calls.aggregator++;
          direct.push(toBinary(ReportSchema, report));
          return { duplicate: false };
        },
      });
    }),
    relay: createRouterTransport(({ service }) => {
      service(Relay, {
        getCollection: () => {
          calls.relayGetCollection++;
          return fake.pinned;
        },
        submitSealedReport(request) {
          relayed.push(toBinary(RelayReportSchema, request));
          const failure = failures.shift();
          if (failure !== undefined) throw new ConnectError("injected", failure);
          return { duplicate: relayed.length > 1 };
        },
      });
    }),
    direct,
    relayed,
    calls,
  };
  return fake;
}

/** Opens what a device sent the relay: the relay's layer (the relay vector's key), then the report (the sealed vector's key). */
async function openRelayed(bytes: Uint8Array, collectionId: string, keyId = 7) {
  const request = fromBinary(RelayReportSchema, bytes);
  const outer = request.outer!;
  assert.equal(outer.keyId, RELAY.key_id, "the layer is sealed to the relay's key");
  const inner = fromBinary(SealedReportSchema, await open(RELAY.sk_r, outer.enc, RELAY_HPKE_INFO, outer.ciphertext, relayAad(collectionId, RELAY.key_id)));
  assert.equal(inner.keyId, keyId);
  const report = fromBinary(ReportSchema, await open(KEY.sk_r, inner.enc, HPKE_INFO, inner.ciphertext, sealAad(collectionId, keyId)));
  return { request, inner, report };
}

/** Whether `needle` occurs in `haystack`. */
const contains = (haystack: Uint8Array, needle: Uint8Array) => Buffer.from(haystack).indexOf(Buffer.from(needle)) !== -1;

const roomyLedger = () => BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 1000, periodEpsilon: null });

test("a shuffled collection's report is sealed to the active key then the relay's, sent to the relay only, and retried with the same bytes", async () => {
  // The aggregator answers no relay key: the client never asks it.
  const params = shuffledParams(undefined, null);
  const f = fakes(params, [Code.Unavailable, Code.Aborted], shuffledParams());
  // ε0 = 2: each report spends ρ = 2, above the default budget; a budget that holds a few.
  const ledger = await roomyLedger();
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
  assert.equal(f.calls.aggregator, 0, "no call reached the aggregator");
  assert.equal(f.calls.relayGetCollection, 1);
  assert.equal(f.relayed.length, 3);
  for (const bytes of f.relayed) assert.deepEqual(bytes, f.relayed[0], "every attempt resends the same bytes");
  // The relay opens its layer; the key's owner opens a complete Report of this collection.
  const { request, inner, report } = await openRelayed(f.relayed[0]!, collection.id);
  assert.equal(request.collectionId, collection.id);
  assert.equal(request.submissionId.length, 16);
  assert.equal(report.collectionId, collection.id);
  assert.deepEqual(report.reportId, outcome.reportId);
  assert.equal(report.payload.length, 2 * collection.dim, "p i16 numbers");
  // What the device sends shares nothing with what the aggregator gets (the inner report).
  assert.ok(!contains(f.relayed[0]!, inner.enc), "the inner enc is not on the device → relay hop");
  assert.ok(!contains(f.relayed[0]!, inner.ciphertext.subarray(0, 16)), "nor the inner ciphertext");
  assert.notDeepEqual(request.outer!.enc, inner.enc);
  // The ledger was charged once, ε0²/2 (pure ε-LDP), whatever the retries.
  assert.equal(ledger.spends.length, 1);
  assert.equal(ledger.spends[0]!.rho, (collection.epsilon * collection.epsilon) / 2);
  // A second report has a fresh submission id and fresh ephemeral keys.
  await client.submit(collection, [0.5, -0.25, 0.1]);
  const second = await openRelayed(f.relayed.at(-1)!, collection.id);
  assert.notDeepEqual(second.request.submissionId, request.submissionId);
  assert.notDeepEqual(second.request.outer!.enc, request.outer!.enc);
  assert.notDeepEqual(second.inner.enc, inner.enc);
  assert.equal(f.calls.aggregator, 0, "still no call reached the aggregator");
});

test("with a relay, the collection comes from the relay alone: its copy, its keys, its relay key; the aggregator is never asked", async () => {
  // The aggregator would hand this device key 7 and another spec (ε0 halved); the
  // relay's copy (what every device gets) has key 9.
  const params = shuffledParams(undefined, null);
  params.spec!.epsilon /= 2;
  params.shuffle!.localEpsilon = params.spec!.epsilon;
  const pinned = shuffledParams([key({ keyId: 9 })]);
  const f = fakes(params, [], pinned);
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, relay: { url: "http://unused", transport: f.relay }, ledger: await roomyLedger() });
  const collection = await client.collection(pinned.spec!.collectionId);
  assert.equal(collection.epsilon, pinned.spec!.epsilon, "the relay's copy, not the aggregator's");
  await client.submit(collection, [0.5, -0.25, 0.1]);
  await openRelayed(f.relayed[0]!, collection.id, 9);
  assert.equal(f.calls.aggregator, 0, "no call reached the aggregator");
});

test("a relay's copy that is not a shuffled collection, or has no usable relay key, is refused (RelayMismatchError): nothing charged or sent", async () => {
  const id = shuffledParams().spec!.collectionId;
  const notShuffled = shuffledParams();
  notShuffled.spec!.shuffle = undefined;
  notShuffled.shuffle = undefined;
  const cases: [string, CollectionParams, RegExp][] = [
    ["not shuffled", notShuffled, /not shuffled/],
    ["no relay key", shuffledParams(undefined, null), /publishes no key of its own/],
    ["a pending relay key", shuffledParams(undefined, relayKeyMessage({ state: HpkeKeyState.PENDING })), /not active/],
    ["another suite", shuffledParams(undefined, relayKeyMessage({ aeadId: 1 })), /unsupported HPKE suite/],
    ["31 bytes", shuffledParams(undefined, relayKeyMessage({ publicKey: new Uint8Array(31) })), /31 bytes/],
  ];
  for (const [what, answer, reason] of cases) {
    const f = fakes(shuffledParams(), [], answer);
    const ledger = await roomyLedger();
    const client = new AggregatorClient("http://unused", { transport: f.aggregator, relay: { url: "http://unused", transport: f.relay }, ledger });
    await assert.rejects(
      client.collection(id),
      (e: unknown) =>
        e instanceof RelayMismatchError &&
        e.collectionId === id &&
        reason.test(e.reason) &&
        e.message === `collection ${JSON.stringify(id)}: the relay's copy cannot be reported to: ${e.reason}`,
      what,
    );
    // Nor through submit's refetch, with a collection obtained elsewhere.
    await assert.rejects(client.submit(Collection.fromParams(shuffledParams()), [0.5, 0, 0]), RelayMismatchError, what);
    assert.equal(f.relayed.length + f.direct.length + f.calls.aggregator, 0, what);
    assert.equal(ledger.spends.length, 0, `${what}: nothing charged`);
  }
});

test("the collection is fetched from the relay again when the relay's key is unknown", async () => {
  const params = shuffledParams();
  const f = fakes(params);
  const ledger = await roomyLedger();
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, relay: { url: "http://unused", transport: f.relay }, ledger });
  // A collection the client never fetched: fetched from the relay before anything is charged.
  await client.submit(Collection.fromParams(params), [0.5, 0, 0]);
  assert.equal(f.calls.relayGetCollection, 1);
  await openRelayed(f.relayed[0]!, params.spec!.collectionId);
  // Known keys: no refetch.
  const collection = await client.collection(params.spec!.collectionId);
  await client.submit(collection, [0.5, 0, 0]);
  assert.equal(f.calls.relayGetCollection, 2);
  // The relay's key lost (its next answer had none) while the active key is still known:
  // the next report refetches, and seals to the relay's key it then publishes.
  f.pinned = shuffledParams(undefined, null);
  await assert.rejects(client.collection(params.spec!.collectionId), RelayMismatchError);
  f.pinned = params;
  await client.submit(collection, [0.5, 0, 0]);
  assert.equal(f.calls.relayGetCollection, 4);
  await openRelayed(f.relayed.at(-1)!, params.spec!.collectionId);
  assert.equal(ledger.spends.length, 3);
  assert.equal(f.calls.aggregator, 0);
});

test("a relay's refusal of a collection surfaces as the relay's call, and the aggregator is not asked instead", async () => {
  const f = fakes(shuffledParams());
  const relay = createRouterTransport(({ service }) => {
    service(Relay, {
      getCollection: () => {
        throw new ConnectError("collection c is not shuffled", Code.FailedPrecondition);
      },
    });
  });
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, relay: { url: "http://unused", transport: relay } });
  await assert.rejects(
    client.collection("c"),
    (e: unknown) => e instanceof StatusError && e.method === "Relay/GetCollection" && e.codeName === "FAILED_PRECONDITION" && /^relay call/.test(e.message),
  );
  assert.equal(f.calls.aggregator, 0);
});

test("without a relay, or without a usable key, a shuffled collection's report is refused before anything is charged or sent", async () => {
  const params = shuffledParams();
  const f = fakes(params);
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage());
  const client = new AggregatorClient("http://unused", { transport: f.aggregator, ledger });
  const collection = await client.collection(params.spec!.collectionId);
  await assert.rejects(client.submit(collection, [0.5, 0, 0]), (e: unknown) => e instanceof SealingError && /relay/.test(e.message));
  await assert.rejects(client.prepareRelayReport(collection, [0.5, 0, 0]), (e: unknown) => e instanceof SealingError && /relay/.test(e.message));
  for (const keys of [[], [key({ state: HpkeKeyState.PENDING })], [key({ aeadId: 2 })], [key({ publicKey: new Uint8Array(31) })]]) {
    const g = fakes(shuffledParams(keys));
    const withRelay = new AggregatorClient("http://unused", { transport: g.aggregator, relay: { url: "http://unused", transport: g.relay }, ledger });
    const c = await withRelay.collection(params.spec!.collectionId);
    await assert.rejects(withRelay.submit(c, [0.5, 0, 0]), SealingError);
    assert.equal(g.relayed.length + g.direct.length + g.calls.aggregator, 0);
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
