//! The helper's share of a two-aggregator report: sealed by the device to the helper's
//! key for the collection, carried by the leader, opened by the helper alone.
//!
//! HPKE mode Base, `info` [`HELPER_HPKE_INFO`], associated data [`helper_aad`]: the
//! collection, the key id and the report's id, so that the leader cannot move a helper
//! share to another collection or pair it with another report's leader share (it would
//! fail to decrypt rather than to verify).

use hpke::rand_core::CryptoRng;

use crate::keys::decrypt;
use crate::seal::{CollectionIdTooLong, check_config, labelled_aad, os_seeded_rng, seal_layer};
use crate::{CollectionKeys, OpenError, PublicKeyConfig, SealError, SealedReport};

/// The HPKE `info` of a helper share.
pub const HELPER_HPKE_INFO: &[u8] = b"ldpcov helper share v1";

/// The label that starts a helper share's associated data.
pub const HELPER_AAD_LABEL: &[u8] = b"ldpcov-helper v1";

/// The associated data of a helper share sealed to `key_id` of `collection_id` for the
/// report `report_id`:
///
/// ```text
/// "ldpcov-helper v1" ‖ u32-BE len(collection_id) ‖ collection_id ‖ u32-BE key_id ‖ report_id
/// ```
///
/// (the report id last: it is the only part of variable length after the prefix).
///
/// ```
/// let aad = ldpcov_seal::helper_aad("c1", 7, &[9; 2])?;
/// assert_eq!(aad, b"ldpcov-helper v1\x00\x00\x00\x02c1\x00\x00\x00\x07\x09\x09");
/// # Ok::<(), ldpcov_seal::CollectionIdTooLong>(())
/// ```
pub fn helper_aad(
    collection_id: &str,
    key_id: u32,
    report_id: &[u8],
) -> Result<Vec<u8>, CollectionIdTooLong> {
    let mut aad = labelled_aad(HELPER_AAD_LABEL, collection_id, key_id)?;
    aad.extend_from_slice(report_id);
    Ok(aad)
}

/// Seals a helper share (`prio`'s encoding of the helper's input share) of report
/// `report_id` in `collection_id` to the helper's key `config`, the ephemeral key drawn
/// from `rng`. The same checks as [`seal`](crate::seal): our suite, an active key.
pub fn seal_helper_share(
    config: &PublicKeyConfig,
    collection_id: &str,
    report_id: &[u8],
    share: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<SealedReport, SealError> {
    check_config(config)?;
    let aad = helper_aad(collection_id, config.key_id, report_id)?;
    seal_layer(config, HELPER_HPKE_INFO, &aad, share, rng)
}

/// [`seal_helper_share`] with a ChaCha20 RNG seeded from the operating system's CSPRNG.
pub fn seal_helper_share_with_os_rng(
    config: &PublicKeyConfig,
    collection_id: &str,
    report_id: &[u8],
    share: &[u8],
) -> Result<SealedReport, SealError> {
    seal_helper_share(
        config,
        collection_id,
        report_id,
        share,
        &mut os_seeded_rng()?,
    )
}

impl CollectionKeys {
    /// Opens a helper share of report `report_id` at unix time `now`: the same key-state
    /// and length checks as [`open`](Self::open), then HPKE under [`HELPER_HPKE_INFO`]
    /// and [`helper_aad`].
    pub fn open_helper_share(
        &self,
        sealed: &SealedReport,
        report_id: &[u8],
        now: u64,
    ) -> Result<Vec<u8>, OpenError> {
        let body_len = self.check(sealed, now)?;
        let mut share = sealed.ciphertext[..body_len].to_vec();
        let aad = helper_aad(self.collection_id(), sealed.key_id, report_id)
            .map_err(|_| OpenError::Decrypt)?;
        decrypt(
            &self.private_key(sealed.key_id),
            HELPER_HPKE_INFO,
            &aad,
            &sealed.enc,
            &mut share,
            &sealed.ciphertext[body_len..],
        )?;
        Ok(share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KeySchedule, MasterSecret, seal_with_os_rng};

    const NOW: u64 = 1_750_000_000;

    fn keys(id: &str) -> CollectionKeys {
        let master = MasterSecret::from_bytes([5; 32]);
        CollectionKeys::new(&master, id, KeySchedule::new(3600, 2).unwrap()).unwrap()
    }

    /// The helper opens what the device sealed for it, and only for the same collection,
    /// report id and layer: a share moved to another report or collection, or a report
    /// sealed for the shuffle, does not open.
    #[test]
    fn a_share_opens_only_for_its_collection_report_and_layer() {
        let helper = keys("c");
        let [_, active] = helper.published(NOW).unwrap();
        let sealed = seal_helper_share_with_os_rng(&active, "c", &[1; 16], b"share").unwrap();
        assert_eq!(
            helper.open_helper_share(&sealed, &[1; 16], NOW).unwrap(),
            b"share"
        );
        assert!(matches!(
            helper.open_helper_share(&sealed, &[2; 16], NOW),
            Err(OpenError::Decrypt)
        ));
        assert!(matches!(
            keys("d").open_helper_share(&sealed, &[1; 16], NOW),
            Err(OpenError::Decrypt)
        ));
        // Another layer's bytes under the same key pair.
        assert!(matches!(helper.open(&sealed, NOW), Err(OpenError::Decrypt)));
        let report = seal_with_os_rng(&active, "c", b"share").unwrap();
        assert!(matches!(
            helper.open_helper_share(&report, &[1; 16], NOW),
            Err(OpenError::Decrypt)
        ));
    }
}
