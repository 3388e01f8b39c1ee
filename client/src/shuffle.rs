//! Sealing a report for a shuffled collection (docs/PRIVACY.md §9): the report a
//! device would have sent directly, built completely first, encoded as a `Report`
//! message and sealed with HPKE to the collection's active key, so that the relay it
//! goes through cannot read it. Transport-free; [`AggregatorClient`] sends the result
//! to the relay when a collection says so.
//!
//! [`AggregatorClient`]: crate::AggregatorClient

use ldpcov_privacy::Collection;
use ldpcov_proto::v1::{HpkeKeyState, HpkePublicKey, RelayReport, Report, SealedReport};
use ldpcov_seal::{KeyState, PublicKeyConfig};
use prost::Message;

use crate::ClientError;

/// Length of a relay submission id.
pub const SUBMISSION_ID_LEN: usize = 16;

/// The active key among a shuffled collection's published keys, checked: our suite,
/// a 32-byte public key, state active as the server declared it.
pub fn active_key(keys: &[HpkePublicKey]) -> Result<PublicKeyConfig, ClientError> {
    let key = keys
        .iter()
        .find(|k| k.state == HpkeKeyState::Active as i32)
        .ok_or_else(|| ClientError::Sealing("the collection publishes no active key".into()))?;
    let suite = |id: u32, what: &str| {
        u16::try_from(id).map_err(|_| ClientError::Sealing(format!("{what} id {id} is unknown")))
    };
    let public_key: [u8; ldpcov_seal::PUBLIC_KEY_LEN] =
        key.public_key.as_slice().try_into().map_err(|_| {
            ClientError::Sealing(format!(
                "the active key has {} bytes; an X25519 key has {}",
                key.public_key.len(),
                ldpcov_seal::PUBLIC_KEY_LEN
            ))
        })?;
    Ok(PublicKeyConfig {
        key_id: key.key_id,
        kem_id: suite(key.kem_id, "KEM")?,
        kdf_id: suite(key.kdf_id, "KDF")?,
        aead_id: suite(key.aead_id, "AEAD")?,
        public_key,
        state: KeyState::Active,
        not_before: key.not_before,
        active_until: key.active_until,
        not_after: key.not_after,
    })
}

/// Seals a prepared `report` of the shuffled `collection` to `key` under a fresh
/// random submission id: what the device sends to the relay (and resends, as it is,
/// on a retry). Refuses a collection that is not shuffled and a report of another
/// collection.
pub fn seal_report(
    collection: &Collection,
    key: &PublicKeyConfig,
    report: &Report,
) -> Result<RelayReport, ClientError> {
    if collection.shuffle().is_none() {
        return Err(ClientError::Sealing(format!(
            "collection {} is not shuffled: send its reports to the aggregator",
            collection.id()
        )));
    }
    if report.collection_id != collection.id() {
        return Err(ClientError::Sealing(format!(
            "the report is for collection {:?}, not {}",
            report.collection_id,
            collection.id()
        )));
    }
    let sealed = ldpcov_seal::seal_with_os_rng(key, collection.id(), &report.encode_to_vec())
        .map_err(|e| ClientError::Sealing(e.to_string()))?;
    // A fresh 16 OS-random bytes, as a report id is (and independent of it).
    let submission_id = crate::perturb::random_report_id()?.0.to_vec();
    debug_assert_eq!(submission_id.len(), SUBMISSION_ID_LEN);
    Ok(RelayReport {
        collection_id: collection.id().to_string(),
        submission_id,
        sealed: Some(SealedReport {
            key_id: sealed.key_id,
            enc: sealed.enc,
            ciphertext: sealed.ciphertext,
        }),
    })
}
