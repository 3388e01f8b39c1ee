//! The device side: sealing a report to a published key.

use chacha20::ChaCha20Rng;
use hpke::inout::InOutBuf;
use hpke::rand_core::{CryptoRng, SeedableRng};
use hpke::{Deserializable, OpModeS, Serializable};
use zeroize::Zeroizing;

use crate::{
    AAD_LABEL, AEAD_ID, Aead, HPKE_INFO, KDF_ID, KEM_ID, Kdf, Kem, KeyState, PublicKeyConfig,
    TAG_LEN,
};

/// A report sealed to one key of one collection: what a device sends to the relay and
/// the relay forwards, unreadable, to the aggregator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SealedReport {
    /// The key id the report is sealed to.
    pub key_id: u32,
    /// The HPKE encapsulated key: the 32-byte X25519 ephemeral public key.
    pub enc: Vec<u8>,
    /// The AEAD ciphertext: the plaintext's length plus the 16-byte tag.
    pub ciphertext: Vec<u8>,
}

/// A collection id longer than `u32::MAX` bytes, which the length prefixes of
/// [`aad`] and of the key derivation cannot encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("collection id of {0} bytes is longer than u32::MAX")]
pub struct CollectionIdTooLong(pub usize);

/// Why a report was not sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The configuration names another HPKE suite than DHKEM(X25519, HKDF-SHA256),
    /// HKDF-SHA256, ChaCha20-Poly1305.
    #[error("unsupported HPKE suite: kem {kem_id:#06x}, kdf {kdf_id:#06x}, aead {aead_id:#06x}")]
    UnsupportedSuite {
        /// The configuration's KEM id.
        kem_id: u16,
        /// The configuration's KDF id.
        kdf_id: u16,
        /// The configuration's AEAD id.
        aead_id: u16,
    },
    /// The configuration's key is not the active one (devices never seal to a pending,
    /// retired or expired key).
    #[error("key id {key_id} is {state:?}, not active")]
    NotActive {
        /// The configuration's key id.
        key_id: u32,
        /// Its state.
        state: KeyState,
    },
    /// The public key is not usable (an X25519 point of small order).
    #[error("invalid public key")]
    InvalidPublicKey,
    /// The collection id cannot be encoded.
    #[error(transparent)]
    CollectionId(#[from] CollectionIdTooLong),
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed: {0}")]
    Random(getrandom::Error),
    /// The AEAD refused to encrypt (not expected with one message per context).
    #[error("encryption failed")]
    Encrypt,
}

/// u32-BE length of the collection id ‖ its bytes.
pub(crate) fn length_prefixed(collection_id: &str) -> Result<Vec<u8>, CollectionIdTooLong> {
    let len =
        u32::try_from(collection_id.len()).map_err(|_| CollectionIdTooLong(collection_id.len()))?;
    let mut out = Vec::with_capacity(4 + collection_id.len() + 4 + AAD_LABEL.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(collection_id.as_bytes());
    Ok(out)
}

/// The AEAD associated data of a report sealed to `key_id` of `collection_id`:
///
/// ```text
/// "ldpcov-shuffle v1" ‖ u32-BE len(collection_id) ‖ collection_id (UTF-8) ‖ u32-BE key_id
/// ```
///
/// It binds a ciphertext to its collection and key id: a relay (or anyone) that moves a
/// report to another collection or relabels its key id makes it fail to decrypt, even
/// where the same key pair were to open it. The length prefix keeps ids unambiguous.
///
/// ```
/// let aad = ldpcov_seal::aad("c1", 7)?;
/// assert_eq!(aad, b"ldpcov-shuffle v1\x00\x00\x00\x02c1\x00\x00\x00\x07");
/// # Ok::<(), ldpcov_seal::CollectionIdTooLong>(())
/// ```
pub fn aad(collection_id: &str, key_id: u32) -> Result<Vec<u8>, CollectionIdTooLong> {
    labelled_aad(AAD_LABEL, collection_id, key_id)
}

/// `label ‖ u32-BE len(collection_id) ‖ collection_id ‖ u32-BE key_id`: the associated
/// data of a report ([`aad`]) and of the relay's layer (`relay_aad`).
pub(crate) fn labelled_aad(
    label: &[u8],
    collection_id: &str,
    key_id: u32,
) -> Result<Vec<u8>, CollectionIdTooLong> {
    let prefixed = length_prefixed(collection_id)?;
    let mut out = Vec::with_capacity(label.len() + prefixed.len() + 4);
    out.extend_from_slice(label);
    out.extend_from_slice(&prefixed);
    out.extend_from_slice(&key_id.to_be_bytes());
    Ok(out)
}

/// Seals `plaintext` for `collection_id` to the key of `config`, with the ephemeral key
/// drawn from `rng` (a cryptographic RNG: the report's privacy rests on it).
///
/// Refuses a configuration of another suite, or one whose [`state`](PublicKeyConfig::state)
/// is not [`KeyState::Active`]. HPKE mode Base, `info` [`HPKE_INFO`], associated data
/// [`aad`]`(collection_id, config.key_id)`. Copies the plaintext once (into the returned
/// ciphertext, which is allocated at its final size and encrypted in place).
pub fn seal(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<SealedReport, SealError> {
    check_config(config)?;
    let aad = aad(collection_id, config.key_id)?;
    seal_layer(config, HPKE_INFO, &aad, plaintext, rng)
}

/// Refuses a configuration of another suite, or one that is not active.
pub(crate) fn check_config(config: &PublicKeyConfig) -> Result<(), SealError> {
    if (config.kem_id, config.kdf_id, config.aead_id) != (KEM_ID, KDF_ID, AEAD_ID) {
        return Err(SealError::UnsupportedSuite {
            kem_id: config.kem_id,
            kdf_id: config.kdf_id,
            aead_id: config.aead_id,
        });
    }
    if config.state != KeyState::Active {
        return Err(SealError::NotActive {
            key_id: config.key_id,
            state: config.state,
        });
    }
    Ok(())
}

/// The HPKE sealing shared by the report and the relay's layer: `plaintext` to the key
/// of `config` under `info` and `aad` (the configuration checked by the caller with
/// [`check_config`]).
pub(crate) fn seal_layer(
    config: &PublicKeyConfig,
    info: &[u8],
    aad: &[u8],
    plaintext: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<SealedReport, SealError> {
    let public = <Kem as hpke::Kem>::PublicKey::from_bytes(&config.public_key)
        .map_err(|_| SealError::InvalidPublicKey)?;
    let (enc, mut ctx) =
        hpke::setup_sender_with_rng::<Aead, Kdf, Kem>(&OpModeS::Base, &public, info, rng)
            .map_err(|_| SealError::InvalidPublicKey)?;

    let mut ciphertext = Vec::with_capacity(plaintext.len() + TAG_LEN);
    ciphertext.extend_from_slice(plaintext);
    let tag = ctx
        .seal_inout_detached(InOutBuf::from(ciphertext.as_mut_slice()), aad)
        .map_err(|_| SealError::Encrypt)?;
    ciphertext.extend_from_slice(&tag.to_bytes());
    Ok(SealedReport {
        key_id: config.key_id,
        enc: enc.to_bytes().to_vec(),
        ciphertext,
    })
}

/// [`seal`] with a ChaCha20 RNG seeded from the operating system's CSPRNG.
pub fn seal_with_os_rng(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
) -> Result<SealedReport, SealError> {
    seal(config, collection_id, plaintext, &mut os_seeded_rng()?)
}

/// A ChaCha20 RNG seeded from the operating system's CSPRNG: the ephemeral keys of
/// the report and of the relay's layer.
pub(crate) fn os_seeded_rng() -> Result<ChaCha20Rng, SealError> {
    let mut seed = Zeroizing::new([0u8; 32]);
    getrandom::fill(seed.as_mut_slice()).map_err(SealError::Random)?;
    Ok(ChaCha20Rng::from_seed(*seed))
}

/// **Not private: for test vectors only.** [`seal`] with the ephemeral key drawn from
/// `ChaCha20Rng::from_seed(seed)` (the RustCrypto `chacha20` crate): the same seed gives
/// the same `enc` and ciphertext, and anyone who knows the seed can decrypt the report.
/// The HPKE ephemeral key is RFC 9180 `DeriveKeyPair(ikmE)` with `ikmE` the first 32
/// bytes that RNG produces, so another implementation can reproduce a vector from
/// `ikmE`. Never use it for a real report.
pub fn seal_with_seed_for_test_vectors_not_private(
    config: &PublicKeyConfig,
    collection_id: &str,
    plaintext: &[u8],
    seed: [u8; 32],
) -> Result<SealedReport, SealError> {
    let mut rng = ChaCha20Rng::from_seed(seed);
    seal(config, collection_id, plaintext, &mut rng)
}
