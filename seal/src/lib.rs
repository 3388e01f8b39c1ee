//! `ldpcov-seal`: sealing device reports for the shuffle model. A device seals its
//! report with HPKE (RFC 9180) to the aggregator's public key, sends it to an
//! anonymising relay that cannot read it, and the relay forwards shuffled batches to the
//! aggregator, which opens them.
//!
//! # The suite
//!
//! RFC 9180 mode Base with DHKEM(X25519, HKDF-SHA256) ([`KEM_ID`] `0x0020`),
//! HKDF-SHA256 ([`KDF_ID`] `0x0001`) and ChaCha20-Poly1305 ([`AEAD_ID`] `0x0003`), by the
//! [`hpke`] crate; standard encodings (`enc` and public keys are raw 32-byte X25519
//! points), so any RFC 9180 implementation (such as `@hpke/core`) interoperates. The
//! HPKE `info` is [`HPKE_INFO`], the AEAD associated data [`aad`]`(collection_id,
//! key_id)`, which binds a ciphertext to its collection and key id. The RFC's test vector
//! A.2.1 is checked against the dependency in `tests/seal/rfc9180.rs`.
//!
//! # Keys
//!
//! * [`MasterSecret`]: 32 random bytes, the aggregator's only secret
//!   ([`MasterSecret::load_or_create`] keeps it in a 0600 hex file, and warns when
//!   an existing one is open to other users: [`warn_if_loose`], the check both
//!   daemons run on every secret file they read).
//! * [`KeySchedule`]: key ids rotate every `rotation_seconds`, as a pure function of the
//!   time: the next key is published ahead ([`KeyState::Pending`]), devices seal to the
//!   [`KeyState::Active`] one, and [`KeyState::Retired`] keys still open for
//!   `grace_rotations` periods (relays delay reports).
//! * [`CollectionKeys`]: the key pair of `(collection id, key id)` is derived from the
//!   master secret by HKDF (see its docs), so stateless replicas sharing the master
//!   secret agree and nothing secret is stored per key. It publishes
//!   [`PublicKeyConfig`]s and opens [`SealedReport`]s ([`OpenError`] says why not).
//!
//! # Sealing
//!
//! [`seal`] (any [`CryptoRng`](rand_core::CryptoRng) of [`rand_core`] 0.10, re-exported)
//! or [`seal_with_os_rng`] needs only a [`PublicKeyConfig`]. Reports are copied once
//! on each side (several MB is fine); [`CollectionKeys::open_owned`] decrypts in place,
//! and an [`Opener`] opens many reports deriving each key once.
//! [`seal_with_seed_for_test_vectors_not_private`] is deterministic, for test vectors
//! only.
//!
//! # The helper's share
//!
//! A two-aggregator collection's device seals the helper's Prio3 input share to the
//! helper's key for the collection ([`seal_helper_share`], info [`HELPER_HPKE_INFO`],
//! associated data [`helper_aad`], which also binds the report id); the leader carries it
//! unread and the helper opens it ([`CollectionKeys::open_helper_share`]).
//!
//! # The relay's layer
//!
//! The device then seals the sealed report once more, to the relay's own key
//! ([`seal_for_relay`], info [`RELAY_HPKE_INFO`], associated data [`relay_aad`]), and
//! the relay opens that layer with its [`RelayKey`] (derived from a secret of the
//! relay's, never the aggregator's): the bytes on the device → relay hop and on the
//! relay → aggregator hop share nothing, so a TLS-terminating front before the relay
//! cannot match what it saw with what the aggregator receives.
//!
//! ```
//! use ldpcov_seal::{CollectionKeys, KeySchedule, MasterSecret, OpenError, seal_with_os_rng};
//!
//! // Aggregator: one master secret, keys rotating hourly, opened for 2 more hours.
//! let master = MasterSecret::generate()?;
//! let keys = CollectionKeys::new(&master, "heights-2025", KeySchedule::new(3600, 2)?)?;
//! let now = 1_750_000_000;
//! let [pending, active] = keys.published(now)?; // what devices and relays fetch
//! assert_eq!(pending.key_id, active.key_id + 1);
//!
//! // Device: seal to the active key.
//! let sealed = seal_with_os_rng(&active, "heights-2025", b"report bytes")?;
//!
//! // Aggregator, after the relay: open (within the grace period).
//! assert_eq!(keys.open(&sealed, now + 3600)?, b"report bytes");
//! // Another collection's keys do not open it.
//! let other = CollectionKeys::new(&master, "weights-2025", keys.schedule())?;
//! assert_eq!(other.open(&sealed, now), Err(OpenError::Decrypt));
//! // Past the grace period it is refused.
//! assert!(matches!(keys.open(&sealed, now + 4 * 3600), Err(OpenError::Expired { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod helper;
mod keys;
mod permissions;
mod relay;
mod schedule;
mod seal;
mod secret;

pub use helper::{
    HELPER_AAD_LABEL, HELPER_HPKE_INFO, helper_aad, seal_helper_share,
    seal_helper_share_with_os_rng,
};
pub use hpke::rand_core;
pub use keys::{CollectionKeys, OpenError, Opener, PublicKeyConfig};
pub use permissions::{loose_permissions, warn_if_loose};
pub use relay::{
    RELAY_AAD_LABEL, RELAY_DERIVATION_INFO, RELAY_HPKE_INFO, RelayKey, relay_aad, seal_for_relay,
    seal_for_relay_with_os_rng, seal_for_relay_with_seed_for_test_vectors_not_private,
};
pub use schedule::{KeySchedule, KeyState, KeyWindow, MIN_ROTATION_SECONDS, ScheduleError};
pub use seal::{
    CollectionIdTooLong, SealError, SealedReport, aad, seal, seal_with_os_rng,
    seal_with_seed_for_test_vectors_not_private,
};
pub use secret::{MasterSecret, SecretError};

/// The HPKE KEM: DHKEM(X25519, HKDF-SHA256).
type Kem = hpke::kem::X25519HkdfSha256;
/// The HPKE KDF: HKDF-SHA256.
type Kdf = hpke::kdf::HkdfSha256;
/// The HPKE AEAD: ChaCha20-Poly1305.
type Aead = hpke::aead::ChaCha20Poly1305;

/// RFC 9180 KEM id of DHKEM(X25519, HKDF-SHA256).
pub const KEM_ID: u16 = 0x0020;
/// RFC 9180 KDF id of HKDF-SHA256.
pub const KDF_ID: u16 = 0x0001;
/// RFC 9180 AEAD id of ChaCha20-Poly1305.
pub const AEAD_ID: u16 = 0x0003;
/// The length of a public key (raw X25519), in bytes.
pub const PUBLIC_KEY_LEN: usize = 32;
/// The length of `enc` (the raw X25519 ephemeral public key), in bytes.
pub const ENC_LEN: usize = 32;
/// The length of the AEAD tag at the end of a ciphertext, in bytes.
pub const TAG_LEN: usize = 16;
/// The HPKE `info` of every report.
pub const HPKE_INFO: &[u8] = b"ldpcov report v1";
/// The label that starts the associated data ([`aad`]).
pub const AAD_LABEL: &[u8] = b"ldpcov-shuffle v1";
/// The HKDF salt of the key derivation ([`CollectionKeys`]).
pub const DERIVATION_SALT: &[u8] = b"ldpcov-seal v1";

// The suite constants are the dependency's.
const _: () = {
    assert!(<Kem as hpke::Kem>::KEM_ID == KEM_ID);
    assert!(<Kdf as hpke::kdf::Kdf>::KDF_ID == KDF_ID);
    assert!(<Aead as hpke::aead::Aead>::AEAD_ID == AEAD_ID);
};
