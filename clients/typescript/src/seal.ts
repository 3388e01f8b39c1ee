/**
 * Sealing a report for a shuffled collection (`client/src/shuffle.rs`, `ldpcov-seal`):
 * the report a device would have sent directly, built completely first, encoded as a
 * `Report` message and sealed with HPKE (RFC 9180 mode Base, DHKEM(X25519, HKDF-SHA256),
 * HKDF-SHA256, ChaCha20-Poly1305; `info` {@link HPKE_INFO}, associated data
 * {@link sealAad}) to the collection's active key, so that the relay it goes through
 * cannot read it. HPKE is `@hpke/core` with `@hpke/dhkem-x25519` and
 * `@hpke/chacha20poly1305`; the ephemeral key comes from `crypto.getRandomValues`.
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
  if (key.kemId !== KEM_ID || key.kdfId !== KDF_ID || key.aeadId !== AEAD_ID) {
    throw new SealingError(`unsupported HPKE suite: kem ${key.kemId}, kdf ${key.kdfId}, aead ${key.aeadId}`);
  }
  if (key.publicKey.length !== PUBLIC_KEY_LEN) {
    throw new SealingError(`the active key has ${key.publicKey.length} bytes; an X25519 key has ${PUBLIC_KEY_LEN}`);
  }
  return { keyId: key.keyId, publicKey: Uint8Array.from(key.publicKey), activeUntil: key.activeUntil };
}

/**
 * The AEAD associated data of a report sealed to `keyId` of `collectionId`
 * (`ldpcov_seal::aad`): `"ldpcov-shuffle v1" ‖ u32-BE len(id) ‖ id (UTF-8) ‖ u32-BE key_id`.
 */
export function sealAad(collectionId: string, keyId: number): Uint8Array {
  if (!Number.isInteger(keyId) || keyId < 0 || keyId > 0xffffffff) throw new SealingError(`key id ${keyId}`);
  const id = new TextEncoder().encode(collectionId);
  const out = new Uint8Array(AAD_LABEL.length + 4 + id.length + 4);
  const view = new DataView(out.buffer);
  out.set(AAD_LABEL, 0);
  view.setUint32(AAD_LABEL.length, id.length);
  out.set(id, AAD_LABEL.length + 4);
  view.setUint32(AAD_LABEL.length + 4 + id.length, keyId);
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
  return sealInner(key, collectionId, plaintext, undefined);
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
  return sealInner(key, collectionId, plaintext, ikmE);
}

async function sealInner(key: ActiveKey, collectionId: string, plaintext: Uint8Array, ikmE: Uint8Array | undefined): Promise<Sealed> {
  const suite = cipherSuite();
  let recipientPublicKey: CryptoKey;
  try {
    recipientPublicKey = await suite.kem.deserializePublicKey(key.publicKey);
  } catch (e) {
    throw new SealingError("invalid public key", { cause: e });
  }
  const aad = sealAad(collectionId, key.keyId);
  const sender = await suite.createSenderContext({
    recipientPublicKey,
    info: HPKE_INFO,
    ...(ikmE === undefined ? {} : { ekm: ikmE }),
  });
  const ciphertext = new Uint8Array(await sender.seal(plaintext, aad));
  return { enc: new Uint8Array(sender.enc), ciphertext };
}

/**
 * Seals a prepared `report` of collection `collectionId` to `key` under a fresh random
 * submission id (`shuffle::seal_report`): what the device sends to the relay, and
 * resends as it is on a retry.
 */
export async function sealReport(collectionId: string, key: ActiveKey, report: Report): Promise<RelayReport> {
  if (report.collectionId !== collectionId) {
    throw new SealingError(`the report is for collection ${JSON.stringify(report.collectionId)}, not ${JSON.stringify(collectionId)}`);
  }
  const sealed = await sealBytes(key, collectionId, toBinary(ReportSchema, report));
  const submissionId = new Uint8Array(SUBMISSION_ID_LEN);
  globalThis.crypto.getRandomValues(submissionId);
  return create(RelayReportSchema, {
    collectionId,
    submissionId,
    sealed: { keyId: key.keyId, enc: sealed.enc, ciphertext: sealed.ciphertext },
  });
}
