//! Sealing and opening: the round trip, and every way a report must fail to open.

use chacha20::ChaCha20Rng;
use hpke::inout::InOutBuf;
use hpke::rand_core::{Rng, SeedableRng};
use hpke::{Deserializable, Kem, OpModeS, Serializable};
use ldpcov_seal::{
    CollectionKeys, HPKE_INFO, KeySchedule, KeyState, MasterSecret, OpenError, PublicKeyConfig,
    SealError, SealedReport, aad, seal, seal_with_os_rng,
    seal_with_seed_for_test_vectors_not_private,
};

const HOUR: u64 = 3600;
/// A time inside key id 480_000 (hourly keys).
const NOW: u64 = 480_000 * HOUR + 1234;
const ID: &str = "heights-2025";

fn master(byte: u8) -> MasterSecret {
    MasterSecret::from_bytes([byte; 32])
}

fn keys_for(master: &MasterSecret, id: &str) -> CollectionKeys {
    CollectionKeys::new(master, id, KeySchedule::new(HOUR, 2).expect("schedule")).expect("keys")
}

fn active(keys: &CollectionKeys) -> PublicKeyConfig {
    let [_, active] = keys.published(NOW).expect("published");
    assert_eq!(active.state, KeyState::Active);
    active
}

fn sealed(keys: &CollectionKeys, plaintext: &[u8]) -> SealedReport {
    seal_with_os_rng(&active(keys), keys.collection_id(), plaintext).expect("seal")
}

#[test]
fn round_trip() {
    let keys = keys_for(&master(1), ID);
    let report = sealed(&keys, b"a report");
    assert_eq!(report.key_id, (NOW / HOUR) as u32);
    assert_eq!(report.enc.len(), ldpcov_seal::ENC_LEN);
    assert_eq!(
        report.ciphertext.len(),
        b"a report".len() + ldpcov_seal::TAG_LEN
    );
    assert_eq!(keys.open(&report, NOW).expect("open"), b"a report");
    assert_eq!(keys.open_owned(report, NOW).expect("open"), b"a report");

    let empty = sealed(&keys, b"");
    assert_eq!(keys.open(&empty, NOW).expect("open"), b"");

    // A replica sharing the master secret opens it too.
    let replica = keys_for(&master(1), ID);
    let report = sealed(&keys, b"to a replica");
    assert_eq!(replica.open(&report, NOW).expect("open"), b"to a replica");
}

#[test]
fn round_trip_of_a_large_report() {
    let keys = keys_for(&master(1), ID);
    let mut plaintext = vec![0u8; 2_000_000 + 3];
    ChaCha20Rng::seed_from_u64(5).fill_bytes(&mut plaintext);
    let report = sealed(&keys, &plaintext);
    assert_eq!(
        report.ciphertext.capacity(),
        plaintext.len() + ldpcov_seal::TAG_LEN
    );
    assert_ne!(&report.ciphertext[..64], &plaintext[..64]);
    assert_eq!(keys.open(&report, NOW).expect("open"), plaintext);
    assert_eq!(keys.open_owned(report, NOW).expect("open"), plaintext);
}

#[test]
fn the_wrong_master_secret_collection_or_key_id_does_not_decrypt() {
    let keys = keys_for(&master(1), ID);
    let report = sealed(&keys, b"a report");

    assert_eq!(
        keys_for(&master(2), ID).open(&report, NOW),
        Err(OpenError::Decrypt)
    );
    assert_eq!(
        keys_for(&master(1), "weights-2025").open(&report, NOW),
        Err(OpenError::Decrypt)
    );
    // Relabelled to the previous (retired, so still opened) key id.
    let relabelled = SealedReport {
        key_id: report.key_id - 1,
        ..report.clone()
    };
    assert_eq!(keys.open(&relabelled, NOW), Err(OpenError::Decrypt));
    // The original still opens.
    assert_eq!(keys.open(&report, NOW).expect("open"), b"a report");
}

#[test]
fn a_flipped_bit_anywhere_does_not_decrypt() {
    let keys = keys_for(&master(1), ID);
    let report = sealed(&keys, b"a report of some length");
    for byte in [0, 5, report.ciphertext.len() - 1] {
        let mut tampered = report.clone();
        tampered.ciphertext[byte] ^= 0x01;
        assert_eq!(
            keys.open(&tampered, NOW),
            Err(OpenError::Decrypt),
            "ciphertext byte {byte}"
        );
        assert_eq!(keys.open_owned(tampered, NOW), Err(OpenError::Decrypt));
    }
    for byte in [0, 17, 30] {
        let mut tampered = report.clone();
        tampered.enc[byte] ^= 0x01;
        assert_eq!(
            keys.open(&tampered, NOW),
            Err(OpenError::Decrypt),
            "enc byte {byte}"
        );
    }
    let mut truncated = report.clone();
    truncated.ciphertext.pop();
    assert_eq!(keys.open(&truncated, NOW), Err(OpenError::Decrypt));
}

/// Seals with raw HPKE to `config`'s key under the given associated data: what a relay
/// (or a device of another collection) could produce.
fn raw_seal(config: &PublicKeyConfig, aad: &[u8], plaintext: &[u8]) -> SealedReport {
    type K = hpke::kem::X25519HkdfSha256;
    let pk = <K as Kem>::PublicKey::from_bytes(&config.public_key).expect("pk");
    let (enc, mut ctx) =
        hpke::setup_sender_with_rng::<hpke::aead::ChaCha20Poly1305, hpke::kdf::HkdfSha256, K>(
            &OpModeS::Base,
            &pk,
            HPKE_INFO,
            &mut ChaCha20Rng::seed_from_u64(9),
        )
        .expect("setup");
    let mut ciphertext = plaintext.to_vec();
    let tag = ctx
        .seal_inout_detached(InOutBuf::from(ciphertext.as_mut_slice()), aad)
        .expect("seal");
    ciphertext.extend_from_slice(&tag.to_bytes());
    SealedReport {
        key_id: config.key_id,
        enc: enc.to_bytes().to_vec(),
        ciphertext,
    }
}

#[test]
fn the_associated_data_binds_the_collection_and_key_id() {
    let keys = keys_for(&master(1), ID);
    let config = active(&keys);
    // The construction is plain HPKE with `aad`: the right associated data opens.
    let right = raw_seal(&config, &aad(ID, config.key_id).expect("aad"), b"x");
    assert_eq!(keys.open(&right, NOW).expect("open"), b"x");
    // To this collection's own key, but with another collection's associated data (a
    // report moved between collections that were to share keys) or another key id's.
    let moved = raw_seal(
        &config,
        &aad("weights-2025", config.key_id).expect("aad"),
        b"x",
    );
    assert_eq!(keys.open(&moved, NOW), Err(OpenError::Decrypt));
    let relabelled = raw_seal(&config, &aad(ID, config.key_id - 1).expect("aad"), b"x");
    assert_eq!(keys.open(&relabelled, NOW), Err(OpenError::Decrypt));
    // The length prefix: ("ab", "c…") and ("a", "bc…") do not share associated data.
    assert_ne!(aad("ab", 1).expect("aad"), aad("a", 1).expect("aad"));
    assert_eq!(
        aad("c1", 0x0102_0304).expect("aad"),
        b"ldpcov-shuffle v1\x00\x00\x00\x02c1\x01\x02\x03\x04"
    );
}

#[test]
fn malformed_reports_are_refused_before_decryption() {
    let keys = keys_for(&master(1), ID);
    let report = sealed(&keys, b"a report");
    let mut short_enc = report.clone();
    short_enc.enc.pop();
    assert_eq!(
        keys.open(&short_enc, NOW),
        Err(OpenError::Malformed {
            enc_len: 31,
            ciphertext_len: 24
        })
    );
    let no_tag = SealedReport {
        ciphertext: vec![0; 15],
        ..report.clone()
    };
    assert!(matches!(
        keys.open_owned(no_tag, NOW),
        Err(OpenError::Malformed { .. })
    ));
    // A small-order enc (all zeros) fails decapsulation.
    let zero_enc = SealedReport {
        enc: vec![0; 32],
        ..report
    };
    assert_eq!(keys.open(&zero_enc, NOW), Err(OpenError::Decrypt));
}

#[test]
fn open_follows_the_key_schedule() {
    let keys = keys_for(&master(1), ID);
    let report = sealed(&keys, b"late");
    let k = u64::from(report.key_id);
    // Active, then retired for two more periods, then expired.
    assert!(keys.open(&report, k * HOUR).is_ok());
    assert!(keys.open(&report, (k + 1) * HOUR).is_ok());
    assert!(keys.open(&report, (k + 3) * HOUR - 1).is_ok());
    assert_eq!(
        keys.open(&report, (k + 3) * HOUR),
        Err(OpenError::Expired {
            key_id: report.key_id
        })
    );
    // Before its period: pending one period ahead, unknown before that.
    assert_eq!(
        keys.open(&report, k * HOUR - 1),
        Err(OpenError::Pending {
            key_id: report.key_id
        })
    );
    assert_eq!(
        keys.open(&report, (k - 1) * HOUR - 1),
        Err(OpenError::UnknownKey {
            key_id: report.key_id
        })
    );
}

#[test]
fn devices_seal_only_to_an_active_key_of_our_suite() {
    let keys = keys_for(&master(1), ID);
    let [pending, active] = keys.published(NOW).expect("published");
    assert_eq!(pending.state, KeyState::Pending);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    assert!(matches!(
        seal(&pending, ID, b"x", &mut rng),
        Err(SealError::NotActive {
            state: KeyState::Pending,
            ..
        })
    ));
    for (kem, kdf, aead) in [(0x0010, 1, 3), (0x0020, 2, 3), (0x0020, 1, 1)] {
        let other = PublicKeyConfig {
            kem_id: kem,
            kdf_id: kdf,
            aead_id: aead,
            ..active.clone()
        };
        assert!(matches!(
            seal(&other, ID, b"x", &mut rng),
            Err(SealError::UnsupportedSuite { .. })
        ));
    }
    let retired = keys.public_config(active.key_id - 1, NOW);
    assert_eq!(retired.state, KeyState::Retired);
    assert!(matches!(
        seal(&retired, ID, b"x", &mut rng),
        Err(SealError::NotActive { .. })
    ));
    let expired = keys.public_config(active.key_id - 3, NOW);
    assert_eq!(expired.state, KeyState::Expired);
    assert!(matches!(
        seal(&expired, ID, b"x", &mut rng),
        Err(SealError::NotActive { .. })
    ));

    // A cached pending configuration becomes sealable once its period starts.
    let later = pending.clone().at(pending.not_before);
    assert_eq!(later.state, KeyState::Active);
    assert_eq!(
        pending.clone().at(pending.not_before - 1).state,
        KeyState::Pending
    );
    assert_eq!(
        pending.clone().at(pending.active_until).state,
        KeyState::Retired
    );
    assert_eq!(
        pending.clone().at(pending.not_after).state,
        KeyState::Expired
    );
    let report = seal(&later, ID, b"next", &mut rng).expect("seal");
    assert_eq!(keys.open(&report, later.not_before).expect("open"), b"next");
}

#[test]
fn key_derivation_is_deterministic_and_separates_ids() {
    let a = keys_for(&master(1), ID);
    let b = keys_for(&master(1), ID);
    let k = active(&a).key_id;
    let pk = |keys: &CollectionKeys, id: u32| keys.public_config(id, NOW).public_key;
    assert_eq!(pk(&a, k), pk(&b, k));
    assert_eq!(a.public_config(k, NOW), b.public_config(k, NOW));
    assert_ne!(pk(&a, k), pk(&a, k + 1));
    assert_ne!(pk(&a, k), pk(&keys_for(&master(1), "weights-2025"), k));
    assert_ne!(pk(&a, k), pk(&keys_for(&master(2), ID), k));
    // The length prefix separates ("ab", key) from ("a", …).
    assert_ne!(
        pk(&keys_for(&master(1), "ab"), 1),
        pk(&keys_for(&master(1), "a"), 1)
    );

    let config = a.public_config(k, NOW);
    assert_eq!(
        (config.kem_id, config.kdf_id, config.aead_id),
        (0x0020, 0x0001, 0x0003)
    );
    assert_eq!(
        (config.not_before, config.active_until, config.not_after),
        (
            u64::from(k) * HOUR,
            u64::from(k + 1) * HOUR,
            u64::from(k + 3) * HOUR
        )
    );
}

#[test]
fn the_seed_path_is_deterministic_and_the_normal_path_is_not() {
    let keys = keys_for(&master(1), ID);
    let config = active(&keys);
    let seed = [7u8; 32];
    let one = seal_with_seed_for_test_vectors_not_private(&config, ID, b"v", seed).expect("seal");
    let two = seal_with_seed_for_test_vectors_not_private(&config, ID, b"v", seed).expect("seal");
    assert_eq!(one, two);
    let other =
        seal_with_seed_for_test_vectors_not_private(&config, ID, b"v", [8; 32]).expect("seal");
    assert_ne!(one.enc, other.enc);
    assert_eq!(keys.open(&one, NOW).expect("open"), b"v");

    // As documented: enc is DeriveKeyPair(first 32 bytes of ChaCha20Rng(seed)).
    let mut ikm_e = [0u8; 32];
    ChaCha20Rng::from_seed(seed).fill_bytes(&mut ikm_e);
    let (_, pk_e) = hpke::kem::X25519HkdfSha256::derive_keypair(&ikm_e);
    assert_eq!(one.enc, pk_e.to_bytes().as_slice());

    let a = seal_with_os_rng(&config, ID, b"v").expect("seal");
    let b = seal_with_os_rng(&config, ID, b"v").expect("seal");
    assert_ne!(a.enc, b.enc);
    assert_ne!(a.ciphertext, b.ciphertext);
}

/// An `Opener` keeps each key id's private key across reports: it must open exactly
/// what `open` opens and refuse exactly what `open` refuses, whichever key ids come in
/// whatever order, a refused report in between changing nothing.
#[test]
fn an_opener_opens_and_refuses_what_open_does() {
    let keys = keys_for(&master(1), ID);
    let other = keys_for(&master(2), ID);
    let k = u64::from(active(&keys).key_id);
    // Reports sealed to the active keys of three consecutive periods, all open at the
    // third (two retired, one active), a forged one of another master secret, a
    // malformed one, and one sealed to the then pending key.
    let at = |t: u64| {
        let [pending, active] = keys.published(t).expect("published");
        (pending, active)
    };
    let seal_to =
        |config: &PublicKeyConfig, text: &[u8]| seal_with_os_rng(config, ID, text).expect("seal");
    let now = (k + 2) * HOUR + 5;
    let (pending_now, _) = at(now);
    let mut reports = Vec::new();
    for period in [k, k + 1, k + 2, k, k + 2, k + 1] {
        let (_, active) = at(period * HOUR + 1);
        reports.push(seal_to(&active, format!("period {period}").as_bytes()));
    }
    reports.insert(2, sealed(&other, b"forged"));
    let mut malformed = sealed(&keys, b"short");
    malformed.ciphertext.truncate(3);
    reports.insert(4, malformed);
    reports.push(seal_to(
        &pending_now.clone().at(pending_now.not_before),
        b"early",
    ));
    let mut opener = keys.opener();
    let mut opened = 0;
    for report in &reports {
        let expected = keys.open(report, now);
        assert_eq!(opener.open_owned(report.clone(), now), expected);
        opened += usize::from(expected.is_ok());
    }
    assert_eq!(opened, 6, "the six honest reports open");
    // Past the grace period of key k, the same opener refuses its reports.
    let later = (k + 3) * HOUR;
    assert_eq!(
        opener.open_owned(reports[0].clone(), later),
        Err(OpenError::Expired { key_id: k as u32 })
    );
}
