//! The aggregator side: key pairs derived from the master secret, the public
//! configurations it publishes, and opening sealed reports.

use hpke::aead::AeadTag;
use hpke::inout::InOutBuf;
use hpke::{Deserializable, Kem as _, OpModeR, Serializable};

use crate::schedule::{KeySchedule, KeyState, ScheduleError};
use crate::seal::{CollectionIdTooLong, SealedReport, aad, length_prefixed};
use crate::{
    AEAD_ID, Aead, ENC_LEN, HPKE_INFO, KDF_ID, KEM_ID, Kdf, Kem, MasterSecret, PUBLIC_KEY_LEN,
    TAG_LEN,
};

/// What a device needs to seal to one key: the key id, the suite, the raw 32-byte
/// X25519 public key, its state when the configuration was made and its validity window
/// (unix seconds, ends exclusive; see [`KeyWindow`](crate::KeyWindow)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PublicKeyConfig {
    /// The key id (see [`KeySchedule`]).
    pub key_id: u32,
    /// The HPKE KEM id: [`KEM_ID`] (DHKEM(X25519, HKDF-SHA256)).
    pub kem_id: u16,
    /// The HPKE KDF id: [`KDF_ID`] (HKDF-SHA256).
    pub kdf_id: u16,
    /// The HPKE AEAD id: [`AEAD_ID`] (ChaCha20-Poly1305).
    pub aead_id: u16,
    /// The recipient's public key, RFC 9180 `SerializePublicKey` (raw X25519).
    pub public_key: [u8; PUBLIC_KEY_LEN],
    /// The key's state at the time the configuration was made. A device seals only to
    /// an [`Active`](KeyState::Active) configuration; one that cached a pending key can
    /// update it with [`PublicKeyConfig::at`].
    pub state: KeyState,
    /// When the key becomes active.
    pub not_before: u64,
    /// When it stops being active: devices seal to it before this.
    pub active_until: u64,
    /// When reports sealed to it stop being opened.
    pub not_after: u64,
}

impl PublicKeyConfig {
    /// This configuration with its [`state`](Self::state) re-evaluated at `now` from
    /// its window (pending before `not_before`, then active, retired, expired). With a
    /// device's clock, a device ahead of the aggregator's clock by `s` seconds seals to
    /// the next key during the last `s` seconds of a period, and the aggregator refuses
    /// those reports ([`OpenError::Pending`]).
    pub fn at(mut self, now: u64) -> Self {
        self.state = self.window().state_at(now);
        self
    }

    fn window(&self) -> crate::KeyWindow {
        crate::KeyWindow {
            key_id: self.key_id,
            not_before: self.not_before,
            active_until: self.active_until,
            not_after: self.not_after,
        }
    }
}

/// Why a sealed report was not opened. The variants say only what the report's
/// public fields already show, or that decryption failed; never why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The key id is newer than the pending key (no device could have sealed to it).
    #[error("unknown key id {key_id}")]
    UnknownKey {
        /// The report's key id.
        key_id: u32,
    },
    /// The key is still pending: devices seal only to the active key, so such a report
    /// comes from a device whose clock runs ahead, or is forged.
    #[error("key id {key_id} is not active yet")]
    Pending {
        /// The report's key id.
        key_id: u32,
    },
    /// The key is past its grace period.
    #[error("key id {key_id} has expired")]
    Expired {
        /// The report's key id.
        key_id: u32,
    },
    /// `enc` is not 32 bytes, or the ciphertext is shorter than the 16-byte tag.
    #[error("malformed sealed report (enc {enc_len} bytes, ciphertext {ciphertext_len} bytes)")]
    Malformed {
        /// The length of `enc`.
        enc_len: usize,
        /// The length of the ciphertext.
        ciphertext_len: usize,
    },
    /// Decapsulation or the AEAD failed: the wrong key, a tampered `enc` or ciphertext,
    /// or associated data of another collection or key id.
    #[error("the sealed report does not decrypt")]
    Decrypt,
}

/// The keys of one collection: derives each key id's HPKE key pair from the master
/// secret on demand, publishes the public configurations, and opens sealed reports.
///
/// The key pair of `(collection_id, key_id)` is RFC 9180 `DeriveKeyPair(ikm)` of the
/// KEM with
///
/// ```text
/// ikm = HKDF-SHA256(salt = "ldpcov-seal v1", ikm = master secret,
///                   info = u32-BE len(collection_id) ‖ collection_id ‖ u32-BE key_id), 32 bytes
/// ```
///
/// Deterministic, so replicas sharing the master secret agree and nothing secret is
/// stored per key; private keys live only for the duration of a call (or of an
/// [`Opener`]).
pub struct CollectionKeys {
    master: MasterSecret,
    collection_id: String,
    /// u32-BE length ‖ collection id bytes: the head of the HKDF info.
    prefixed_id: Vec<u8>,
    schedule: KeySchedule,
}

impl std::fmt::Debug for CollectionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionKeys")
            .field("collection_id", &self.collection_id)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl CollectionKeys {
    /// The keys of `collection_id` (its UTF-8 bytes) under `schedule`. Holds its own
    /// copy of the master secret. Fails only for an id longer than `u32::MAX` bytes.
    pub fn new(
        master: &MasterSecret,
        collection_id: &str,
        schedule: KeySchedule,
    ) -> Result<Self, CollectionIdTooLong> {
        let prefixed_id = length_prefixed(collection_id)?;
        Ok(Self {
            master: master.duplicate(),
            collection_id: collection_id.to_owned(),
            prefixed_id,
            schedule,
        })
    }

    /// The collection id.
    pub fn collection_id(&self) -> &str {
        &self.collection_id
    }

    /// The key schedule.
    pub fn schedule(&self) -> KeySchedule {
        self.schedule
    }

    fn keypair(
        &self,
        key_id: u32,
    ) -> (
        <Kem as hpke::Kem>::PrivateKey,
        <Kem as hpke::Kem>::PublicKey,
    ) {
        let mut info = self.prefixed_id.clone();
        info.extend_from_slice(&key_id.to_be_bytes());
        Kem::derive_keypair(self.master.derive(&info).as_slice())
    }

    /// The public configuration of `key_id`, with its state at unix time `now`. Any key
    /// id can be asked for (a public key reveals nothing); devices seal only to active
    /// ones.
    pub fn public_config(&self, key_id: u32, now: u64) -> PublicKeyConfig {
        let (_, public) = self.keypair(key_id);
        let mut public_key = [0u8; PUBLIC_KEY_LEN];
        public.write_exact(&mut public_key);
        let window = self.schedule.window(key_id);
        PublicKeyConfig {
            key_id,
            kem_id: KEM_ID,
            kdf_id: KDF_ID,
            aead_id: AEAD_ID,
            public_key,
            state: self.schedule.state(key_id, now),
            not_before: window.not_before,
            active_until: window.active_until,
            not_after: window.not_after,
        }
    }

    /// The configurations published at unix time `now`: `[pending, active]`.
    pub fn published(&self, now: u64) -> Result<[PublicKeyConfig; 2], ScheduleError> {
        let [pending, active] = self.schedule.published(now)?;
        Ok([
            self.public_config(pending.key_id, now),
            self.public_config(active.key_id, now),
        ])
    }

    /// Opens a report at unix time `now`: its key must be active or retired, and it must
    /// decrypt with this collection's key pair, [`HPKE_INFO`] and the associated data
    /// [`aad`]`(collection_id, key_id)`. Copies the ciphertext once (into the returned
    /// plaintext); [`open_owned`](Self::open_owned) decrypts in place.
    pub fn open(&self, sealed: &SealedReport, now: u64) -> Result<Vec<u8>, OpenError> {
        let body_len = self.check(sealed, now)?;
        let mut plaintext = sealed.ciphertext[..body_len].to_vec();
        let aad = aad(&self.collection_id, sealed.key_id).map_err(|_| OpenError::Decrypt)?;
        decrypt(
            &self.private_key(sealed.key_id),
            HPKE_INFO,
            &aad,
            &sealed.enc,
            &mut plaintext,
            &sealed.ciphertext[body_len..],
        )?;
        Ok(plaintext)
    }

    /// [`open`](Self::open), decrypting in the report's own buffer: no copy.
    pub fn open_owned(&self, sealed: SealedReport, now: u64) -> Result<Vec<u8>, OpenError> {
        self.opener().open_owned(sealed, now)
    }

    /// An [`Opener`] for many reports: each key id's private key is derived once and
    /// kept until the opener is dropped, instead of once per report.
    pub fn opener(&self) -> Opener<'_> {
        Opener {
            keys: self,
            private: Vec::new(),
        }
    }

    /// The state and length checks; the length of the ciphertext without its tag.
    pub(crate) fn check(&self, sealed: &SealedReport, now: u64) -> Result<usize, OpenError> {
        let key_id = sealed.key_id;
        match self.schedule.state(key_id, now) {
            KeyState::Active | KeyState::Retired => {}
            KeyState::Pending => return Err(OpenError::Pending { key_id }),
            KeyState::Expired => return Err(OpenError::Expired { key_id }),
            KeyState::Unknown => return Err(OpenError::UnknownKey { key_id }),
        }
        let malformed = OpenError::Malformed {
            enc_len: sealed.enc.len(),
            ciphertext_len: sealed.ciphertext.len(),
        };
        if sealed.enc.len() != ENC_LEN {
            return Err(malformed);
        }
        sealed
            .ciphertext
            .len()
            .checked_sub(TAG_LEN)
            .ok_or(malformed)
    }

    /// The private key of `key_id`.
    pub(crate) fn private_key(&self, key_id: u32) -> <Kem as hpke::Kem>::PrivateKey {
        self.keypair(key_id).0
    }
}

/// Opens many sealed reports of one collection ([`CollectionKeys::opener`]): what
/// [`CollectionKeys::open_owned`] does, with each key id's private key derived once
/// (an HKDF and a scalar multiplication fewer per report). The keys it holds are
/// erased when it is dropped; it is meant to live for one batch or one chunk of one.
pub struct Opener<'a> {
    keys: &'a CollectionKeys,
    /// The private keys derived so far, by key id (the states a report may be opened
    /// under hold at most `grace_rotations + 1` key ids at a time).
    private: Vec<(u32, <Kem as hpke::Kem>::PrivateKey)>,
}

impl std::fmt::Debug for Opener<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("collection_id", &self.keys.collection_id)
            .field(
                "key_ids",
                &self.private.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Opener<'_> {
    /// [`CollectionKeys::open_owned`]: the same checks, the same result.
    pub fn open_owned(&mut self, sealed: SealedReport, now: u64) -> Result<Vec<u8>, OpenError> {
        let body_len = self.keys.check(&sealed, now)?;
        let SealedReport {
            key_id,
            enc,
            mut ciphertext,
        } = sealed;
        let (body, tag) = ciphertext.split_at_mut(body_len);
        let private = match self.private.iter().position(|(id, _)| *id == key_id) {
            Some(i) => &self.private[i].1,
            None => {
                // Only keys that passed `check` (active or retired now) are derived.
                self.private.push((key_id, self.keys.private_key(key_id)));
                &self.private[self.private.len() - 1].1
            }
        };
        let aad = aad(&self.keys.collection_id, key_id).map_err(|_| OpenError::Decrypt)?;
        decrypt(private, HPKE_INFO, &aad, &enc, body, tag)?;
        ciphertext.truncate(body_len);
        Ok(ciphertext)
    }
}

/// Decrypts `body` in place with `private` under `info` and `aad` (the report's and
/// the relay's layer share it).
pub(crate) fn decrypt(
    private: &<Kem as hpke::Kem>::PrivateKey,
    info: &[u8],
    aad: &[u8],
    enc: &[u8],
    body: &mut [u8],
    tag: &[u8],
) -> Result<(), OpenError> {
    let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(enc).map_err(|_| OpenError::Decrypt)?;
    let tag = AeadTag::<Aead>::from_bytes(tag).map_err(|_| OpenError::Decrypt)?;
    let mut ctx = hpke::setup_receiver::<Aead, Kdf, Kem>(&OpModeR::Base, private, &enc, info)
        .map_err(|_| OpenError::Decrypt)?;
    ctx.open_inout_detached(InOutBuf::from(body), aad, &tag)
        .map_err(|_| OpenError::Decrypt)
}
