//! The store's records: a window's fixed-width record and what it knows of the batch
//! rule, the keyed tags that stand for devices and sealed bytes, and a batch's record.

use super::*;

/// An open window of a (collection, key id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub(super) opened: u64,
    pub(super) rule: CloseRule,
    pub(super) reports: u64,
    pub(super) next_position: u64,
    /// Its reports from devices first seen in it.
    pub(super) new_devices: u64,
}

/// A window record: five words, and a sixth (`new_devices`) since the relay counts
/// new devices (a five-word record, written before, reads with 0).
pub(super) const WINDOW_LEN: usize = 8 * 6;
pub(super) const WINDOW_LEN_V3: usize = 8 * 5;

impl Window {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(WINDOW_LEN);
        for v in [
            self.opened,
            self.rule.min_batch_size,
            self.rule.window_seconds,
            self.reports,
            self.next_position,
            self.new_devices,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        if bytes.len() != WINDOW_LEN && bytes.len() != WINDOW_LEN_V3 {
            return Err(StoreError::Corrupt(format!(
                "a window record of {} bytes",
                bytes.len()
            )));
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Window {
            opened: word(0),
            rule: CloseRule {
                min_batch_size: word(1),
                window_seconds: word(2),
            },
            reports: word(3),
            next_position: word(4),
            new_devices: if bytes.len() == WINDOW_LEN {
                word(5)
            } else {
                0
            },
        })
    }

    /// Whether the window may become a batch now ([`CloseRule::is_due`]).
    pub(super) fn due(&self, now: u64, floor: CloseRule) -> bool {
        self.rule.is_due(floor, self.opened, self.reports, now)
    }
}

/// The dedupe key of a device in a collection: HMAC-SHA256(the device tag key, the
/// collection's salt ‖ device id).
pub(super) fn device_tag(key: &[u8; 32], salt: &[u8; 32], device: &DeviceId) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(salt);
    mac.update(device.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The first-seen key of a device: HMAC-SHA256(the device tag key, "first seen" ‖
/// device id), the same in every collection.
pub(super) fn first_seen_tag(key: &[u8; 32], device: &DeviceId) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(b"ldpcov-relay first seen v1");
    mac.update(device.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The check value of a device tag key stored in the store.
pub(super) fn key_check(key: &[u8; 32]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(b"ldpcov-relay device tag key check v1");
    mac.finalize().into_bytes().into()
}

/// The dedupe key of a report's sealed bytes: SHA-256 over a label, `enc`'s length,
/// `enc` and `ciphertext`.
pub(super) fn sealed_digest(sealed: &SealedReport) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"ldpcov-relay sealed report v1");
    h.update((sealed.enc.len() as u64).to_le_bytes());
    h.update(&sealed.enc);
    h.update(&sealed.ciphertext);
    h.finalize().into()
}

pub(super) fn encode_batch(batch_id: &[u8; 16], size: u64, collection_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + collection_id.len());
    out.extend_from_slice(batch_id);
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(collection_id.as_bytes());
    out
}

pub(super) fn decode_batch(seq: u64, bytes: &[u8]) -> Result<PendingBatch, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("batch record {seq}"));
    if bytes.len() < 24 {
        return Err(corrupt());
    }
    let mut batch_id = [0u8; 16];
    batch_id.copy_from_slice(&bytes[..16]);
    let mut size = [0u8; 8];
    size.copy_from_slice(&bytes[16..24]);
    let collection_id = std::str::from_utf8(&bytes[24..])
        .map_err(|_| corrupt())?
        .to_string();
    Ok(FormedBatch {
        seq,
        collection_id,
        batch_id,
        size: u64::from_le_bytes(size),
    })
}
