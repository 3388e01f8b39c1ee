/**
 * Sealing a report for a shuffled collection (`client/src/shuffle.rs`, `ldpcov-seal`):
 * the report a device would have sent directly, built completely first, encoded as a
 * `Report` message and sealed with HPKE (RFC 9180 mode Base, DHKEM(X25519, HKDF-SHA256),
 * HKDF-SHA256, ChaCha20-Poly1305; `info` {@link HPKE_INFO}, associated data
 * {@link sealAad}) to the collection's active key, so that the relay it goes through
 * cannot read it; then that sealed report, encoded as a `SealedReport` message, sealed
 * once more to the relay's own key (`info` {@link RELAY_HPKE_INFO}, associated data
 * {@link relayAad}; `ldpcov_seal::seal_for_relay`), so that the bytes the device sends
 * to the relay share nothing with the bytes the relay forwards to the aggregator
 * (`RelayReport.outer`). HPKE is `@hpke/core` with `@hpke/dhkem-x25519` and
 * `@hpke/chacha20poly1305`; the ephemeral keys come from `crypto.getRandomValues`.
 */

import { create, toBinary } from "@bufbuild/protobuf";
import { CipherSuite, HkdfSha256 } from "@hpke/core";
import { Chacha20Poly1305 } from "@hpke/chacha20poly1305";
import { DhkemX25519HkdfSha256 } from "@hpke/dhkem-x25519";
import {
  HpkeKeyState,
  type HpkePublicKey,
  type RelayReport,
  RelayReportSchema,
  type Report,
  ReportSchema,
  type SealedReport,
  SealedReportSchema,
} from "./gen/ldpcov/v1/ldpcov_pb.js";

/** RFC 9180 KEM id of DHKEM(X25519, HKDF-SHA256). */
export const KEM_ID = 0x0020;
/** RFC 9180 KDF id of HKDF-SHA256. */
export const KDF_ID = 0x0001;
/** RFC 9180 AEAD id of ChaCha20-Poly1305. */
export const AEAD_ID = 0x0003;
/** Bytes of a raw X25519 public key. */
export const PUBLIC_KEY_LEN = 32;
/** Bytes of a relay submission id. */
export const SUBMISSION_ID_LEN = 16;
/** The HPKE `info` of every report: `"ldpcov report v1"`. */
export const HPKE_INFO: Uint8Array = new TextEncoder().encode("ldpcov report v1");
/** The label that starts the associated data. */
export const AAD_LABEL: Uint8Array = new TextEncoder().encode("ldpcov-shuffle v1");
/** The HPKE `info` of the relay's layer: `"ldpcov relay layer v1"` (`ldpcov_seal::RELAY_HPKE_INFO`). */
export const RELAY_HPKE_INFO: Uint8Array = new TextEncoder().encode("ldpcov relay layer v1");
/** The label that starts the relay layer's associated data (`ldpcov_seal::RELAY_AAD_LABEL`). */
export const RELAY_AAD_LABEL: Uint8Array = new TextEncoder().encode("ldpcov-relay v1");

/** A shuffled collection's report could not be sealed or sent (no relay, no usable key, …). */
export class SealingError extends Error {
  override name = "SealingError";
}

/** The key a device seals to: a shuffled collection's active key, checked. */
export interface ActiveKey {
  keyId: number;
  /** The raw 32-byte X25519 public key. */
  publicKey: Uint8Array;
  /** Unix seconds: sealing to the key ends then (the next key's `notBefore`). */
  activeUntil: bigint;
}

/**
 * The active key among a shuffled collection's published keys (`shuffle::active_key`):
 * refuses another suite than 0x0020/0x0001/0x0003, a key that is not 32 bytes, and a
 * list with no key in state `HPKE_KEY_STATE_ACTIVE`.
 */
export function activeKey(keys: readonly HpkePublicKey[]): ActiveKey {
  const key = keys.find((k) => k.state === HpkeKeyState.ACTIVE);
  if (key === undefined) throw new SealingError("the collection publishes no active key");
  return keyConfig(key, "the active key");
}

/**
 * The relay's own key from its answer (`ShuffleParams.relayKey`, `shuffle::relay_key`),
 * checked as {@link activeKey} checks the collection's: a relay that publishes none, or
 * one that is not active, of another suite or not 32 bytes, cannot be sent a report
 * (its layer is not optional).
 */
export function relayKey(key: HpkePublicKey | undefined): ActiveKey {
  if (key === undefined) {
    throw new SealingError("the relay publishes no key of its own: it is not an ldpcov relay of this version");
  }
  if (key.state !== HpkeKeyState.ACTIVE) throw new SealingError("the relay's key is not active");
  return keyConfig(key, "the relay's key");
}

/** A published key as a sealing key: our suite, 32 bytes. */
function keyConfig(key: HpkePublicKey, what: string): ActiveKey {
  if (key.kemId !== KEM_ID || key.kdfId !== KDF_ID || key.aeadId !== AEAD_ID) {
    throw new SealingError(`unsupported HPKE suite: kem ${key.kemId}, kdf ${key.kdfId}, aead ${key.aeadId}`);
  }
  if (key.publicKey.length !== PUBLIC_KEY_LEN) {
    throw new SealingError(`${what} has ${key.publicKey.length} bytes; an X25519 key has ${PUBLIC_KEY_LEN}`);
  }
  return { keyId: key.keyId, publicKey: Uint8Array.from(key.publicKey), activeUntil: key.activeUntil };
}

/**
 * The AEAD associated data of a report sealed to `keyId` of `collectionId`
 * (`ldpcov_seal::aad`): `"ldpcov-shuffle v1" ‖ u32-BE len(id) ‖ id (UTF-8) ‖ u32-BE key_id`.
 */
export function sealAad(collectionId: string, keyId: number): Uint8Array {
  return labelledAad(AAD_LABEL, collectionId, keyId);
}

/**
 * The AEAD associated data of the relay's layer of a report of `collectionId` sealed to
 * the relay's key `keyId` (`ldpcov_seal::relay_aad`):
 * `"ldpcov-relay v1" ‖ u32-BE len(id) ‖ id (UTF-8) ‖ u32-BE key_id`.
 */
export function relayAad(collectionId: string, keyId: number): Uint8Array {
  return labelledAad(RELAY_AAD_LABEL, collectionId, keyId);
}

/** `label ‖ u32-BE len(id) ‖ id (UTF-8) ‖ u32-BE keyId`. */
function labelledAad(label: Uint8Array, collectionId: string, keyId: number): Uint8Array {
  if (!Number.isInteger(keyId) || keyId < 0 || keyId > 0xffffffff) throw new SealingError(`key id ${keyId}`);
  const id = new TextEncoder().encode(collectionId);
  const out = new Uint8Array(label.length + 4 + id.length + 4);
  const view = new DataView(out.buffer);
  out.set(label, 0);
  view.setUint32(label.length, id.length);
  out.set(id, label.length + 4);
  view.setUint32(label.length + 4 + id.length, keyId);
  return out;
}

/** The suite every report is sealed with. */
export function cipherSuite(): CipherSuite {
  return new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() });
}

/** A sealed plaintext: the encapsulated key and the ciphertext (with its 16-byte tag). */
export interface Sealed {
  enc: Uint8Array;
  ciphertext: Uint8Array;
}

/** Seals `plaintext` for `collectionId` to `key` (ephemeral key from `crypto.getRandomValues`). */
export async function sealBytes(key: ActiveKey, collectionId: string, plaintext: Uint8Array): Promise<Sealed> {
  return sealLayer(key, HPKE_INFO, sealAad(collectionId, key.keyId), plaintext, undefined);
}

/**
 * **Not private: for test vectors only.** {@link sealBytes} with the ephemeral key
 * `DeriveKeyPair(ikmE)` (`@hpke/core`'s testing-only `ekm`): anyone who knows `ikmE` can
 * decrypt the result. The Rust twin is `ldpcov_seal::seal_with_seed_for_test_vectors_not_private`.
 */
export async function sealWithIkmForTestVectorsNotPrivate(
  key: ActiveKey,
  collectionId: string,
  plaintext: Uint8Array,
  ikmE: Uint8Array,
): Promise<Sealed> {
  return sealLayer(key, HPKE_INFO, sealAad(collectionId, key.keyId), plaintext, ikmE);
}

/**
 * Seals `plaintext` (the wire form: an encoded `SealedReport`) for the relay whose key
 * is `relayKey`, in `collectionId` (`ldpcov_seal::seal_for_relay`; ephemeral key from
 * `crypto.getRandomValues`).
 */
export async function sealBytesForRelay(relayKey: ActiveKey, collectionId: string, plaintext: Uint8Array): Promise<Sealed> {
  return sealLayer(relayKey, RELAY_HPKE_INFO, relayAad(collectionId, relayKey.keyId), plaintext, undefined);
}

/**
 * **Not private: for test vectors only.** {@link sealBytesForRelay} with the ephemeral
 * key `DeriveKeyPair(ikmE)`: anyone who knows `ikmE` can open the relay's layer. The
 * Rust twin is `ldpcov_seal::seal_for_relay_with_seed_for_test_vectors_not_private`.
 */
export async function sealForRelayWithIkmForTestVectorsNotPrivate(
  relayKey: ActiveKey,
  collectionId: string,
  plaintext: Uint8Array,
  ikmE: Uint8Array,
): Promise<Sealed> {
  return sealLayer(relayKey, RELAY_HPKE_INFO, relayAad(collectionId, relayKey.keyId), plaintext, ikmE);
}

/**
 * The relay's layer over a report already sealed to the aggregator
 * (`shuffle::seal_for_relay`): `inner` encoded as a `SealedReport` message and sealed to
 * `relayKey` under `collectionId`. What the device sends as `RelayReport.outer`; the
 * relay opens it and forwards `inner` alone, so the two hops' bytes differ.
 */
export async function sealForRelay(collectionId: string, relayKey: ActiveKey, inner: SealedReport): Promise<SealedReport> {
  return relayLayer(collectionId, relayKey, inner, undefined);
}

async function relayLayer(collectionId: string, relayKey: ActiveKey, inner: SealedReport, ikmE: Uint8Array | undefined): Promise<SealedReport> {
  const outer = await sealLayer(relayKey, RELAY_HPKE_INFO, relayAad(collectionId, relayKey.keyId), toBinary(SealedReportSchema, inner), ikmE);
  return create(SealedReportSchema, { keyId: relayKey.keyId, enc: outer.enc, ciphertext: outer.ciphertext });
}

/** One HPKE mode Base seal of `plaintext` to `key` with `info` and `aad` (`ikmE`: the test vectors' fixed ephemeral key). */
async function sealLayer(key: ActiveKey, info: Uint8Array, aad: Uint8Array, plaintext: Uint8Array, ikmE: Uint8Array | undefined): Promise<Sealed> {
  const suite = cipherSuite();
  let recipientPublicKey: CryptoKey;
  try {
    recipientPublicKey = await suite.kem.deserializePublicKey(key.publicKey);
  } catch (e) {
    throw new SealingError("invalid public key", { cause: e });
  }
  const sender = await suite.createSenderContext({
    recipientPublicKey,
    info,
    ...(ikmE === undefined ? {} : { ekm: ikmE }),
  });
  const ciphertext = new Uint8Array(await sender.seal(plaintext, aad));
  return { enc: new Uint8Array(sender.enc), ciphertext };
}

/**
 * Seals a prepared `report` of collection `collectionId` to the aggregator's `key`, then
 * that to the relay's `relayKey` ({@link sealForRelay}), under a fresh random submission
 * id (`shuffle::seal_report`): what the device sends to the relay, and resends as it is
 * on a retry.
 */
export async function sealReport(collectionId: string, key: ActiveKey, relayKey: ActiveKey, report: Report): Promise<RelayReport> {
  const submissionId = new Uint8Array(SUBMISSION_ID_LEN);
  globalThis.crypto.getRandomValues(submissionId);
  return sealReportWith(collectionId, key, relayKey, report, submissionId, undefined);
}

/**
 * **Not private: for test vectors only.** {@link sealReport} with a given submission id
 * and both layers' ephemeral keys `DeriveKeyPair(ikmInner)` and `DeriveKeyPair(ikmOuter)`:
 * anyone who knows them can open both layers.
 */
export async function sealReportWithIkmForTestVectorsNotPrivate(
  collectionId: string,
  key: ActiveKey,
  relayKey: ActiveKey,
  report: Report,
  fixed: { submissionId: Uint8Array; ikmInner: Uint8Array; ikmOuter: Uint8Array },
): Promise<RelayReport> {
  return sealReportWith(collectionId, key, relayKey, report, fixed.submissionId, fixed);
}

async function sealReportWith(
  collectionId: string,
  key: ActiveKey,
  relayKey: ActiveKey,
  report: Report,
  submissionId: Uint8Array,
  ikm: { ikmInner: Uint8Array; ikmOuter: Uint8Array } | undefined,
): Promise<RelayReport> {
  if (report.collectionId !== collectionId) {
    throw new SealingError(`the report is for collection ${JSON.stringify(report.collectionId)}, not ${JSON.stringify(collectionId)}`);
  }
  if (submissionId.length !== SUBMISSION_ID_LEN) {
    throw new SealingError(`submission id has ${submissionId.length} bytes, expected ${SUBMISSION_ID_LEN}`);
  }
  const sealed = await sealLayer(key, HPKE_INFO, sealAad(collectionId, key.keyId), toBinary(ReportSchema, report), ikm?.ikmInner);
  const inner = create(SealedReportSchema, { keyId: key.keyId, enc: sealed.enc, ciphertext: sealed.ciphertext });
  return create(RelayReportSchema, {
    collectionId,
    submissionId: Uint8Array.from(submissionId),
    outer: await relayLayer(collectionId, relayKey, inner, ikm?.ikmOuter),
  });
}
