//! Sealing a report for a shuffled collection (docs/PRIVACY.md §9): the report a
//! device would have sent directly, built completely first, encoded as a `Report`
//! message and sealed with HPKE to the collection's active key, so that the relay it
//! goes through cannot read it; then sealed once more to the relay's own key, so that
//! the bytes the device sends are not the bytes the aggregator receives. Transport-free; [`AggregatorClient`] sends the result
//! to the relay when a collection says so.
//!
//! [`AggregatorClient`]: crate::AggregatorClient

use ldpcov_privacy::Collection;
use ldpcov_proto::v1::{
    HpkeKeyState, HpkePublicKey, RelayReport, Report, SealedReport, ShuffleParams,
};
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
    key_config(key, "the active key")
}

/// The relay's own key from its answer (`ShuffleParams.relay_key`), checked as
/// [`active_key`] checks the collection's: a relay that publishes none cannot be sent
/// a report (its layer is not optional).
pub fn relay_key(shuffle: &ShuffleParams) -> Result<PublicKeyConfig, ClientError> {
    let key = shuffle.relay_key.as_ref().ok_or_else(|| {
        ClientError::Sealing(
            "the relay publishes no key of its own: it is not an ldpcov relay of this version"
                .into(),
        )
    })?;
    if key.state != HpkeKeyState::Active as i32 {
        return Err(ClientError::Sealing("the relay's key is not active".into()));
    }
    key_config(key, "the relay's key")
}

/// A published key as a sealing configuration: our suite, 32 bytes, active.
fn key_config(key: &HpkePublicKey, what: &str) -> Result<PublicKeyConfig, ClientError> {
    let suite = |id: u32, name: &str| {
        u16::try_from(id).map_err(|_| ClientError::Sealing(format!("{name} id {id} is unknown")))
    };
    let public_key: [u8; ldpcov_seal::PUBLIC_KEY_LEN] =
        key.public_key.as_slice().try_into().map_err(|_| {
            ClientError::Sealing(format!(
                "{what} has {} bytes; an X25519 key has {}",
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

/// The relay's layer over a report already sealed to the aggregator: `sealed`
/// encoded (`SealedReport`) and sealed to `relay_key` under the collection's id
/// (`ldpcov_seal::seal_for_relay`). What the device sends as `RelayReport.outer`; the
/// relay opens it and forwards `sealed` alone, so the two hops' bytes differ.
pub fn seal_for_relay(
    collection_id: &str,
    relay_key: &PublicKeyConfig,
    sealed: &SealedReport,
) -> Result<SealedReport, ClientError> {
    let outer =
        ldpcov_seal::seal_for_relay_with_os_rng(relay_key, collection_id, &sealed.encode_to_vec())
            .map_err(|e| ClientError::Sealing(e.to_string()))?;
    Ok(sealed_message(outer))
}

/// Seals a prepared `report` of the shuffled `collection` to the aggregator's `key`:
/// the sealed report a relay forwards. Refuses a collection that is not shuffled and a
/// report of another collection.
pub fn seal_to_aggregator(
    collection: &Collection,
    key: &PublicKeyConfig,
    report: &Report,
) -> Result<SealedReport, ClientError> {
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
    Ok(sealed_message(sealed))
}

/// What a device sends the relay for a `sealed` report of `collection`: the relay's
/// layer over it ([`seal_for_relay`]) under a fresh random submission id (resent, as
/// it is, on a retry).
pub fn relay_report(
    collection: &Collection,
    relay_key: &PublicKeyConfig,
    sealed: &SealedReport,
) -> Result<RelayReport, ClientError> {
    // A fresh 16 OS-random bytes, as a report id is (and independent of it).
    let submission_id = crate::perturb::random_report_id()?.0.to_vec();
    debug_assert_eq!(submission_id.len(), SUBMISSION_ID_LEN);
    Ok(RelayReport {
        collection_id: collection.id().to_string(),
        submission_id,
        outer: Some(seal_for_relay(collection.id(), relay_key, sealed)?),
    })
}

/// Seals a prepared `report` of the shuffled `collection` to the aggregator's `key`,
/// then that to the relay's `relay_key`: [`seal_to_aggregator`], then
/// [`relay_report`].
pub fn seal_report(
    collection: &Collection,
    key: &PublicKeyConfig,
    relay_key: &PublicKeyConfig,
    report: &Report,
) -> Result<RelayReport, ClientError> {
    relay_report(
        collection,
        relay_key,
        &seal_to_aggregator(collection, key, report)?,
    )
}

/// A sealed report as its wire message (`ldpcov.v1.SealedReport`).
pub(crate) fn sealed_message(sealed: ldpcov_seal::SealedReport) -> SealedReport {
    SealedReport {
        key_id: sealed.key_id,
        enc: sealed.enc,
        ciphertext: sealed.ciphertext,
    }
}
