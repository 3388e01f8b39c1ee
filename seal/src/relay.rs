//! The relay's layer: a device seals its already sealed report once more, to the
//! relay's own key, so that the bytes it sends to the relay are not the bytes the
//! relay forwards to the aggregator. A TLS-terminating front before the relay (a load
//! balancer, a CDN) sees the outer bytes beside the device's address; the aggregator
//! sees only the inner ones, and the two share nothing a front could match.
//!
//! The layer is HPKE mode Base in the suite of the reports ([`KEM_ID`], [`KDF_ID`],
//! [`AEAD_ID`]) with `info` [`RELAY_HPKE_INFO`] and the associated data
//! [`relay_aad`]`(collection_id, relay key id)`. Its plaintext is whatever the device
//! puts inside (the wire form is the encoded `ldpcov.v1.SealedReport`). The relay's key
//! pair is derived from a 32-byte secret of the relay's ([`RelayKey::from_secret`]),
//! which the relay keeps in a file of its own, never the aggregator's.

use hpke::rand_core::{CryptoRng, SeedableRng};
use hpke::{Kem as _, Serializable};
use sha2::{Digest, Sha256};

use crate::keys::decrypt;
use crate::seal::{CollectionIdTooLong, check_config, labelled_aad, os_seeded_rng, seal_layer};
use crate::{
    AEAD_ID, ENC_LEN, KDF_ID, KEM_ID, Kem, KeyState, MasterSecret, OpenError, PUBLIC_KEY_LEN,
    PublicKeyConfig, SealError, SealedReport, TAG_LEN,
};

/// The HPKE `info` of the relay's layer.
pub const RELAY_HPKE_INFO: &[u8] = b"ldpcov relay layer v1";
/// The label that starts the relay layer's associated data ([`relay_aad`]).
pub const RELAY_AAD_LABEL: &[u8] = b"ldpcov-relay v1";
/// The HKDF `info` that derives the relay's key pair from its secret (salt
/// [`DERIVATION_SALT`](crate::DERIVATION_SALT), as the aggregator's keys).
pub const RELAY_DERIVATION_INFO: &[u8] = b"ldpcov-relay layer key v1";

/// The associated data of the relay's layer for `collection_id` and the relay's
/// `key_id`:
///
/// ```text
/// "ldpcov-relay v1" ‖ u32-BE len(collection_id) ‖ collection_id (UTF-8) ‖ u32-BE key_id
/// ```
///
/// ```
/// let aad = ldpcov_seal::relay_aad("c1", 7)?;
/// assert_eq!(aad, b"ldpcov-relay v1\x00\x00\x00\x02c1\x00\x00\x00\x07");
/// # Ok::<(), ldpcov_seal::CollectionIdTooLong>(())
/// ```
pub fn relay_aad(collection_id: &str, key_id: u32) -> Result<Vec<u8>, CollectionIdTooLong> {
    labelled_aad(RELAY_AAD_LABEL, collection_id, key_id)
}

/// Seals `plaintext` (a device's encoded sealed report) for the relay whose key is
/// `config`, in `collection_id`, with the ephemeral key drawn from `rng`. The same
/// checks as [`seal`](crate::seal): our suite, an active key.
pub fn seal_for_relay(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<SealedReport, SealError> {
    check_config(config)?;
    let aad = relay_aad(collection_id, config.key_id)?;
    seal_layer(config, RELAY_HPKE_INFO, &aad, plaintext, rng)
}

/// [`seal_for_relay`] with a ChaCha20 RNG seeded from the operating system's CSPRNG.
pub fn seal_for_relay_with_os_rng(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
) -> Result<SealedReport, SealError> {
    seal_for_relay(config, collection_id, plaintext, &mut os_seeded_rng()?)
}

/// **Not private: for test vectors only.** [`seal_for_relay`] with the ephemeral key
/// drawn from `ChaCha20Rng::from_seed(seed)`, as
/// [`seal_with_seed_for_test_vectors_not_private`](crate::seal_with_seed_for_test_vectors_not_private).
pub fn seal_for_relay_with_seed_for_test_vectors_not_private(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
    seed: [u8; 32],
) -> Result<SealedReport, SealError> {
    let mut rng = chacha20::ChaCha20Rng::from_seed(seed);
    seal_for_relay(config, collection_id, plaintext, &mut rng)
}

/// The relay's key pair (one per relay; it does not rotate): derived from the relay's
/// secret, it opens the relay's layer of every collection. Its key id is the
/// big-endian u32 of the first four bytes of SHA-256(public key), so a device holding
/// another relay key's configuration is told apart.
pub struct RelayKey {
    private: <Kem as hpke::Kem>::PrivateKey,
    public_key: [u8; PUBLIC_KEY_LEN],
    key_id: u32,
}

impl std::fmt::Debug for RelayKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl RelayKey {
    /// The key pair of `secret`: RFC 9180 `DeriveKeyPair(ikm)` with `ikm =
    /// HKDF-SHA256(salt = "ldpcov-seal v1", ikm = secret, info = "ldpcov-relay layer key v1")`.
    pub fn from_secret(secret: &MasterSecret) -> Self {
        let (private, public) =
            Kem::derive_keypair(secret.derive(RELAY_DERIVATION_INFO).as_slice());
        let mut public_key = [0u8; PUBLIC_KEY_LEN];
        public.write_exact(&mut public_key);
        let digest = Sha256::digest(public_key);
        let key_id = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
        RelayKey {
            private,
            public_key,
            key_id,
        }
    }

    /// A key pair from a fresh random secret (an in-process relay that keeps no file).
    pub fn generate() -> Result<Self, crate::SecretError> {
        Ok(Self::from_secret(&MasterSecret::generate()?))
    }

    /// The key id.
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// What a device seals the relay's layer to: active, never expiring.
    pub fn public_config(&self) -> PublicKeyConfig {
        PublicKeyConfig {
            key_id: self.key_id,
            kem_id: KEM_ID,
            kdf_id: KDF_ID,
            aead_id: AEAD_ID,
            public_key: self.public_key,
            state: KeyState::Active,
            not_before: 0,
            active_until: u64::MAX,
            not_after: u64::MAX,
        }
    }

    /// Opens the relay's layer of a report of `collection_id`, in place: the inner
    /// plaintext. [`OpenError::UnknownKey`] for another key id, [`OpenError::Malformed`]
    /// for bad lengths, [`OpenError::Decrypt`] for anything else.
    pub fn open_owned(
        &self,
        collection_id: &str,
        outer: SealedReport,
    ) -> Result<Vec<u8>, OpenError> {
        if outer.key_id != self.key_id {
            return Err(OpenError::UnknownKey {
                key_id: outer.key_id,
            });
        }
        let SealedReport {
            key_id,
            enc,
            mut ciphertext,
        } = outer;
        if enc.len() != ENC_LEN || ciphertext.len() < TAG_LEN {
            return Err(OpenError::Malformed {
                enc_len: enc.len(),
                ciphertext_len: ciphertext.len(),
            });
        }
        let body_len = ciphertext.len() - TAG_LEN;
        let aad = relay_aad(collection_id, key_id).map_err(|_| OpenError::Decrypt)?;
        let (body, tag) = ciphertext.split_at_mut(body_len);
        decrypt(&self.private, RELAY_HPKE_INFO, &aad, &enc, body, tag)?;
        ciphertext.truncate(body_len);
        Ok(ciphertext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_its_own_layer_and_nothing_else() {
        let key = RelayKey::from_secret(&MasterSecret::from_bytes([7; 32]));
        let config = key.public_config();
        let outer = seal_for_relay_with_os_rng(&config, "c", b"inner bytes").unwrap();
        assert_eq!(
            key.open_owned("c", outer.clone()).unwrap(),
            b"inner bytes".to_vec()
        );
        // Another collection's associated data, another relay, a report's key: refused.
        assert_eq!(key.open_owned("d", outer.clone()), Err(OpenError::Decrypt));
        let other = RelayKey::from_secret(&MasterSecret::from_bytes([8; 32]));
        assert_ne!(other.key_id(), key.key_id());
        let mut relabelled = outer.clone();
        relabelled.key_id = other.key_id();
        assert_eq!(other.open_owned("c", relabelled), Err(OpenError::Decrypt));
        // The report layer's info does not open the relay's layer.
        let inner_style = crate::seal_with_os_rng(&config, "c", b"inner bytes").unwrap();
        assert_eq!(key.open_owned("c", inner_style), Err(OpenError::Decrypt));
        // Derivation is deterministic: the same secret, the same key.
        let again = RelayKey::from_secret(&MasterSecret::from_bytes([7; 32]));
        assert_eq!(again.public_config(), config);
    }
}
