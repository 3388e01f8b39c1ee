//! What both kinds of published HPKE keys share (a shuffled collection's, a helper's):
//! the clock their schedule reads, and a key as the wire shows it.

use std::time::{SystemTime, UNIX_EPOCH};

use ldpcov_proto::v1::{HpkeKeyState, HpkePublicKey};
use ldpcov_seal::{KeyState, PublicKeyConfig};

/// Seconds since the Unix epoch (0 before it: the key schedule then refuses).
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A published key as the wire shows it.
pub(super) fn public_key_message(config: &PublicKeyConfig) -> HpkePublicKey {
    HpkePublicKey {
        key_id: config.key_id,
        kem_id: u32::from(config.kem_id),
        kdf_id: u32::from(config.kdf_id),
        aead_id: u32::from(config.aead_id),
        public_key: config.public_key.to_vec(),
        state: match config.state {
            KeyState::Pending => HpkeKeyState::Pending,
            KeyState::Active => HpkeKeyState::Active,
            KeyState::Retired => HpkeKeyState::Retired,
            KeyState::Expired => HpkeKeyState::Expired,
            KeyState::Unknown => HpkeKeyState::Unspecified,
        } as i32,
        not_before: config.not_before,
        not_after: config.not_after,
        active_until: config.active_until,
    }
}
