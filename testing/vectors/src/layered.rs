//! The relay-layer vectors (`testing/vectors/relay-layer-v1.json`, format
//! `ldpcov-relay-layer-vectors` version 1): a device's sealed report (the first case
//! of the sealed vectors) sealed once more to a relay's key, as every client does
//! before sending it to the relay (`RelayReport.outer`), so that another RFC 9180
//! implementation reproduces the outer `enc` and ciphertext — and the whole encoded
//! `RelayReport` — byte for byte, and opens them.
//!
//! A case holds the relay's secret and what it derives (`ikm_r` = HKDF-SHA256(salt
//! "ldpcov-seal v1", the secret, info "ldpcov-relay layer key v1"), `sk_r`, `pk_r`,
//! and `key_id`, the big-endian u32 of SHA-256(`pk_r`)'s first four bytes:
//! [`ldpcov_seal::RelayKey`]), the collection id, the HPKE `info`
//! ([`ldpcov_seal::RELAY_HPKE_INFO`]), the associated data [`ldpcov_seal::relay_aad`],
//! the seed and `ikm_e` as in the sealed vectors, the plaintext (the inner report, an
//! encoded `SealedReport`), `enc`, `ciphertext`, the submission id and the encoded
//! `RelayReport` the device sends.

use chacha20::ChaCha20Rng;
use hpke::{Kem as _, Serializable};
use ldpcov_client::proto::v1::{RelayReport, SealedReport};
use ldpcov_seal::rand_core::{Rng, SeedableRng};
use ldpcov_seal::{MasterSecret, RelayKey};
use prost::Message;
use serde_json::{Value, json};

/// The version of the relay-layer vectors' format and case list.
pub const LAYERED_VERSION: u32 = 1;

/// Where the relay-layer vectors live, relative to the workspace root.
pub const LAYERED_FILE: &str = "testing/vectors/relay-layer-v1.json";

type Kem = hpke::kem::X25519HkdfSha256;

fn ramp(start: u8, step: u8) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = start.wrapping_add(step.wrapping_mul(i as u8));
    }
    out
}

/// The relay-layer vectors as a JSON value, over the first case of the sealed vectors.
pub fn layered_vectors() -> anyhow::Result<Value> {
    let sealed = crate::sealed_vectors()?;
    let first = &sealed["cases"][0];
    let text = |name: &str| {
        first[name]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("sealed vector field {name} missing"))
    };
    let collection_id = text("collection_id")?.to_string();
    let inner = SealedReport {
        key_id: first["key_id"]
            .as_u64()
            .and_then(|k| u32::try_from(k).ok())
            .ok_or_else(|| anyhow::anyhow!("sealed vector key_id missing"))?,
        enc: hex::decode(text("enc")?)?,
        ciphertext: hex::decode(text("ciphertext")?)?,
    };
    let plaintext = inner.encode_to_vec();

    let secret = ramp(0x5a, 13);
    let relay = RelayKey::from_secret(&MasterSecret::from_bytes(secret));
    let config = relay.public_config();
    // The derivation written out: the relay's key pair is DeriveKeyPair(ikm_r).
    let hkdf = hkdf::Hkdf::<sha2::Sha256>::new(Some(ldpcov_seal::DERIVATION_SALT), &secret);
    let mut ikm_r = [0u8; 32];
    hkdf.expand(ldpcov_seal::RELAY_DERIVATION_INFO, &mut ikm_r)
        .map_err(|_| anyhow::anyhow!("HKDF expand"))?;
    let (sk_r, pk_r) = Kem::derive_keypair(&ikm_r);
    anyhow::ensure!(
        pk_r.to_bytes().as_slice() == config.public_key.as_slice(),
        "RelayKey::from_secret is not DeriveKeyPair(HKDF(secret))"
    );

    let seed = ramp(0x33, 5);
    let outer = ldpcov_seal::seal_for_relay_with_seed_for_test_vectors_not_private(
        &config,
        &collection_id,
        &plaintext,
        seed,
    )?;
    let mut ikm_e = [0u8; 32];
    ChaCha20Rng::from_seed(seed).fill_bytes(&mut ikm_e);
    // The relay opens it back to the inner report.
    let opened = relay
        .open_owned(&collection_id, outer.clone())
        .map_err(|e| anyhow::anyhow!("the relay does not open its vector: {e}"))?;
    anyhow::ensure!(opened == plaintext, "the relay's layer does not round-trip");
    let submission_id = ramp(0xc0, 1)[..16].to_vec();
    let report = RelayReport {
        collection_id: collection_id.clone(),
        submission_id: submission_id.clone(),
        outer: Some(SealedReport {
            key_id: outer.key_id,
            enc: outer.enc.clone(),
            ciphertext: outer.ciphertext.clone(),
        }),
    };
    let case = json!({
        "name": "rank-one-report-for-the-relay",
        "kem_id": ldpcov_seal::KEM_ID,
        "kdf_id": ldpcov_seal::KDF_ID,
        "aead_id": ldpcov_seal::AEAD_ID,
        "relay_secret": hex::encode(secret),
        "ikm_r": hex::encode(ikm_r),
        "sk_r": hex::encode(sk_r.to_bytes()),
        "pk_r": hex::encode(config.public_key),
        "key_id": config.key_id,
        "collection_id": collection_id,
        "info": hex::encode(ldpcov_seal::RELAY_HPKE_INFO),
        "aad": hex::encode(ldpcov_seal::relay_aad(&collection_id, config.key_id)?),
        "seed": hex::encode(seed),
        "ikm_e": hex::encode(ikm_e),
        "plaintext": hex::encode(&plaintext),
        "enc": hex::encode(&outer.enc),
        "ciphertext": hex::encode(&outer.ciphertext),
        "submission_id": hex::encode(&submission_id),
        "relay_report": hex::encode(report.encode_to_vec()),
    });
    Ok(json!({
        "format": "ldpcov-relay-layer-vectors",
        "version": LAYERED_VERSION,
        "about": "A device's sealed report (the first case of sealed-v1.json, encoded as an ldpcov.v1.SealedReport) sealed once more to the relay's key (ldpcov_seal::seal_for_relay_with_seed_for_test_vectors_not_private): RFC 9180 mode Base, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, info 'ldpcov relay layer v1', aad 'ldpcov-relay v1' || u32be(len(collection_id)) || collection_id || u32be(relay key id). The ephemeral key is DeriveKeyPair(ikm_e), ikm_e the first 32 bytes of ChaCha20Rng::from_seed(seed). relay_report is the encoded ldpcov.v1.RelayReport {collection_id, submission_id, outer}. See testing/vectors/src/layered.rs.",
        "cases": [case],
    }))
}

/// The relay-layer vectors' exact text: pretty-printed JSON and a final newline.
pub fn render_layered() -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&layered_vectors()?)?;
    text.push('\n');
    Ok(text)
}
