//! The sealed-report vectors (`testing/vectors/sealed-v1.json`, format
//! `ldpcov-sealed-report-vectors` version 1): reports of shuffled collections sealed by
//! the Rust client's sealing path ([`ldpcov_seal::seal_with_seed_for_test_vectors_not_private`],
//! the same [`ldpcov_seal::seal`] the device uses with an OS-seeded RNG), so that another
//! RFC 9180 implementation (the TypeScript client's `@hpke/core`) reproduces `enc` and
//! the ciphertext byte for byte and opens them.
//!
//! A case holds the recipient key pair (`ikm_r`, the RFC 9180 `DeriveKeyPair` input,
//! and what it derives: `sk_r`, clamped, and `pk_r`), the published key (`key_id`, the
//! suite ids), the collection id, the HPKE `info`, the associated data
//! [`ldpcov_seal::aad`], the seed of the sealing RNG and `ikm_e`, the first 32 bytes it
//! produces (the ephemeral key is `DeriveKeyPair(ikm_e)`: checked here against `enc`),
//! the plaintext (an encoded `Report` of the report vectors) and `enc` and `ciphertext`.
//! Byte strings are lower-case hex.

use chacha20::ChaCha20Rng;
use hpke::{Kem as _, Serializable};
use ldpcov_seal::rand_core::{Rng, SeedableRng};
use ldpcov_seal::{KeyState, PublicKeyConfig};
use serde_json::{Value, json};

/// The version of the sealed vectors' format and case list (a change is a new file).
pub const SEALED_VERSION: u32 = 1;

/// Where the sealed vectors live, relative to the workspace root.
pub const SEALED_FILE: &str = "testing/vectors/sealed-v1.json";

type Kem = hpke::kem::X25519HkdfSha256;

/// One sealing case: a recipient, a collection and key id, a seed, a plaintext.
struct SealCase {
    name: &'static str,
    ikm_r: [u8; 32],
    collection_id: &'static str,
    key_id: u32,
    seed: [u8; 32],
    plaintext: Vec<u8>,
}

/// `n` bytes `start, start + step, …` (mod 256): fixed, readable inputs.
fn ramp<const N: usize>(start: u8, step: u8) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = start.wrapping_add(step.wrapping_mul(i as u8));
    }
    out
}

fn cases(report_message: Vec<u8>) -> Vec<SealCase> {
    vec![
        SealCase {
            name: "rank-one-report",
            ikm_r: ramp(0x10, 7),
            collection_id: "rank-one-second-moment-p3",
            key_id: 486_111,
            seed: ramp(0x42, 3),
            plaintext: report_message,
        },
        SealCase {
            name: "empty-plaintext-key-id-0",
            ikm_r: ramp(0xa0, 11),
            collection_id: "c",
            key_id: 0,
            seed: [0; 32],
            plaintext: Vec::new(),
        },
    ]
}

fn case_json(c: &SealCase) -> anyhow::Result<Value> {
    let (sk_r, pk_r) = Kem::derive_keypair(&c.ikm_r);
    let public_key: [u8; 32] = pk_r.to_bytes().into();
    let config = PublicKeyConfig {
        key_id: c.key_id,
        kem_id: ldpcov_seal::KEM_ID,
        kdf_id: ldpcov_seal::KDF_ID,
        aead_id: ldpcov_seal::AEAD_ID,
        public_key,
        state: KeyState::Active,
        not_before: 0,
        active_until: u64::MAX,
        not_after: u64::MAX,
    };
    let sealed = ldpcov_seal::seal_with_seed_for_test_vectors_not_private(
        &config,
        c.collection_id,
        &c.plaintext,
        c.seed,
    )?;
    // The ephemeral key is DeriveKeyPair of the RNG's first 32 bytes.
    let mut ikm_e = [0u8; 32];
    ChaCha20Rng::from_seed(c.seed).fill_bytes(&mut ikm_e);
    let (_, pk_e) = Kem::derive_keypair(&ikm_e);
    anyhow::ensure!(
        pk_e.to_bytes().as_slice() == sealed.enc.as_slice(),
        "case {}: enc is not DeriveKeyPair(first 32 bytes of ChaCha20Rng(seed))",
        c.name
    );
    Ok(json!({
        "name": c.name,
        "kem_id": ldpcov_seal::KEM_ID,
        "kdf_id": ldpcov_seal::KDF_ID,
        "aead_id": ldpcov_seal::AEAD_ID,
        "ikm_r": hex::encode(c.ikm_r),
        "sk_r": hex::encode(sk_r.to_bytes()),
        "pk_r": hex::encode(public_key),
        "collection_id": c.collection_id,
        "key_id": c.key_id,
        "info": hex::encode(ldpcov_seal::HPKE_INFO),
        "aad": hex::encode(ldpcov_seal::aad(c.collection_id, c.key_id)?),
        "seed": hex::encode(c.seed),
        "ikm_e": hex::encode(ikm_e),
        "plaintext": hex::encode(&c.plaintext),
        "enc": hex::encode(&sealed.enc),
        "ciphertext": hex::encode(&sealed.ciphertext),
    }))
}

/// The sealed vectors as a JSON value; the first case seals the first report of the
/// report vectors' `rank-one-second-moment-p3` case (a shuffled collection's mechanism).
pub fn sealed_vectors() -> anyhow::Result<Value> {
    let reports = crate::vectors()?;
    let report_message = reports["cases"]
        .as_array()
        .and_then(|cases| {
            cases
                .iter()
                .find(|c| c["name"] == "rank-one-second-moment-p3")
        })
        .and_then(|c| c["reports"][0]["report_message"].as_str())
        .map(hex::decode)
        .ok_or_else(|| anyhow::anyhow!("no rank-one-second-moment-p3 report"))??;
    let cases = cases(report_message)
        .iter()
        .map(case_json)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(json!({
        "format": "ldpcov-sealed-report-vectors",
        "version": SEALED_VERSION,
        "about": "Reports sealed by the Rust client's sealing path (ldpcov_seal::seal_with_seed_for_test_vectors_not_private): RFC 9180 mode Base, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305. The ephemeral key is DeriveKeyPair(ikm_e), ikm_e the first 32 bytes of ChaCha20Rng::from_seed(seed); every client must reproduce enc and ciphertext from ikm_e and pk_r, and open them with sk_r. See testing/vectors/src/sealed.rs.",
        "cases": cases,
    }))
}

/// The sealed vectors' exact text: pretty-printed JSON and a final newline.
pub fn render_sealed() -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&sealed_vectors()?)?;
    text.push('\n');
    Ok(text)
}
