//! Tokens: the devices' (minted by [`DeviceTokenIssuer`] and checked by the relay with
//! the same secret) and the relay's own secrets (its admin token, the token it presents
//! to the aggregator: [`Secret`]).
//!
//! A device token is `v2.<device id>.<expires>.<hex(HMAC-SHA256(secret,
//! "ldpcov-relay device v2" ‖ expires ‖ "." ‖ device id))>`: `expires` is the unix
//! second (decimal) from which the token is refused; the device id is 1 to
//! [`MAX_DEVICE_ID_LEN`] characters of `[A-Za-z0-9._-]`. The MAC is 64 lower-case hex
//! digits, its only accepted spelling (an upper- or mixed-case one is refused), and is
//! compared in constant time. Tokens of the first version (`v1.<device id>.<MAC>`,
//! which never expire) are refused unless the relay is told to accept them
//! ([`DeviceTokenIssuer::accepting_unexpiring`], `serve
//! --accept-unexpiring-device-tokens`, for a migration).
//!
//! One device is revoked without rotating every token by a revocation list
//! ([`Revocations`], `serve --revoked-devices-file`): a file of device ids, one a
//! line, read again when it changes; every token of a listed device is refused,
//! whatever its expiry.
//!
//! A valid secret (the device-token secret, an admin or relay token) whose file its
//! group or other users may access is taken all the same, with a WARN to `chmod 600`
//! it ([`ldpcov_seal::warn_if_loose`]); a file refused as malformed is not warned
//! about (its error is the one line).
//!
//! Nothing here logs or prints a secret, a token or a device id: [`Secret`],
//! [`DeviceTokenIssuer`] and [`DeviceId`] show `<redacted>` in `Debug`.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The domain separation prefix of a version 1 device token's MAC.
pub const DEVICE_TOKEN_LABEL: &[u8] = b"ldpcov-relay device v1";
/// The domain separation prefix of a version 2 device token's MAC (with an expiry).
pub const DEVICE_TOKEN_LABEL_V2: &[u8] = b"ldpcov-relay device v2";
/// How long a token from [`DeviceTokenIssuer::issue`] is valid: 30 days
/// (`issue-device-token --lifetime-secs` chooses another).
pub const DEFAULT_DEVICE_TOKEN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// How often a [`Revocations`] file is looked at for changes, at most.
pub const REVOCATIONS_RECHECK: Duration = Duration::from_secs(1);
/// Longest device id, in bytes.
pub const MAX_DEVICE_ID_LEN: usize = 128;
/// Bytes of the device-token secret.
pub const DEVICE_SECRET_LEN: usize = 32;
/// Longest admin or relay token, in bytes.
pub const MAX_TOKEN_LEN: usize = 512;

type HmacSha256 = Hmac<Sha256>;

/// Why a token, a device id or a secret was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A device id is empty, too long or has other characters than `[A-Za-z0-9._-]`.
    #[error("a device id must be 1 to {MAX_DEVICE_ID_LEN} characters of [A-Za-z0-9._-]")]
    BadDeviceId,
    /// The device-token secret is not 64 hex digits.
    #[error("the device-token secret in {path} must be {DEVICE_SECRET_LEN} bytes as 64 hex digits")]
    BadSecret {
        /// Its file.
        path: PathBuf,
    },
    /// An admin or relay token is empty, too long or not visible ASCII.
    #[error("the {what} token must be 1 to {MAX_TOKEN_LEN} visible ASCII characters (no spaces)")]
    BadToken {
        /// Which token ("admin", "relay").
        what: &'static str,
    },
    /// A revocation list names something that is not a device id.
    #[error("line {line} of the revocation list {path} is not a device id")]
    BadRevocation {
        /// The file.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
    },
    /// A file could not be read (the OS error is the source).
    #[error("cannot read the {what} file {path}")]
    File {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn read_file(path: &Path, what: &'static str) -> Result<String, TokenError> {
    std::fs::read_to_string(path).map_err(|source| TokenError::File {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// A device's identity, taken from a verified token. It lives only in memory for the
/// call and in the current window's dedupe record (as a keyed hash): never logged,
/// forwarded or stored otherwise. `Debug` shows `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceId(String);

impl DeviceId {
    /// Checks a device id: 1 to [`MAX_DEVICE_ID_LEN`] characters of `[A-Za-z0-9._-]`.
    pub fn new(id: &str) -> Result<Self, TokenError> {
        let ok = !id.is_empty()
            && id.len() <= MAX_DEVICE_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(DeviceId(id.to_string()))
        } else {
            Err(TokenError::BadDeviceId)
        }
    }

    /// The id's bytes (for the dedupe record's keyed hash).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceId(<redacted>)")
    }
}

/// Mints and verifies device tokens with the relay's issuing secret.
///
/// ```
/// use ldpcov_relay::DeviceTokenIssuer;
/// let issuer = DeviceTokenIssuer::from_bytes([7; 32]);
/// let token = issuer.issue("phone-42")?;
/// assert!(token.starts_with("v2.phone-42."));
/// assert!(issuer.verify(&token).is_some());
/// assert!(DeviceTokenIssuer::from_bytes([8; 32]).verify(&token).is_none());
/// // A token that expired at unix second 1000.
/// let old = issuer.issue_until("phone-42", 1000)?;
/// assert!(issuer.verify_at(&old, 999).is_some());
/// assert!(issuer.verify_at(&old, 1000).is_none());
/// # Ok::<(), ldpcov_relay::TokenError>(())
/// ```
#[derive(Clone)]
pub struct DeviceTokenIssuer {
    secret: [u8; DEVICE_SECRET_LEN],
    accept_v1: bool,
    revocations: Option<Revocations>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl fmt::Debug for DeviceTokenIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceTokenIssuer(<redacted>)")
    }
}

impl DeviceTokenIssuer {
    /// From the raw secret.
    pub fn from_bytes(secret: [u8; DEVICE_SECRET_LEN]) -> Self {
        DeviceTokenIssuer {
            secret,
            accept_v1: false,
            revocations: None,
        }
    }

    /// Also accepts version 1 tokens, which never expire (a migration: issue version 2
    /// tokens, then stop accepting these).
    pub fn accepting_unexpiring(mut self, accept: bool) -> Self {
        self.accept_v1 = accept;
        self
    }

    /// Refuses every token of the devices `revocations` lists.
    pub fn with_revocations(mut self, revocations: Revocations) -> Self {
        self.revocations = Some(revocations);
        self
    }

    /// The key the relay's store derives its dedupe tags from: HMAC-SHA256(secret,
    /// "ldpcov-relay device tag key v1"). Derived from the secret, never stored: the
    /// store file alone does not let anyone test a device id against its tags.
    pub fn device_tag_key(&self) -> [u8; 32] {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(b"ldpcov-relay device tag key v1");
        mac.finalize().into_bytes().into()
    }

    /// From a file holding the secret as 64 hex digits (surrounding whitespace
    /// ignored); a valid secret whose file other users may access is taken with a WARN
    /// ([`ldpcov_seal::warn_if_loose`]).
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let text = read_file(path, "device-token secret")?;
        let bad = || TokenError::BadSecret {
            path: path.to_path_buf(),
        };
        let bytes = hex::decode(text.trim()).map_err(|_| bad())?;
        let secret: [u8; DEVICE_SECRET_LEN] = bytes.try_into().map_err(|_| bad())?;
        ldpcov_seal::warn_if_loose(path, "device-token secret");
        Ok(DeviceTokenIssuer::from_bytes(secret))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes keys of any length: this cannot fail.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(label);
        for part in parts {
            mac.update(part);
        }
        mac
    }

    /// The token of `device_id`, valid for [`DEFAULT_DEVICE_TOKEN_LIFETIME`] from now.
    pub fn issue(&self, device_id: &str) -> Result<String, TokenError> {
        self.issue_for(device_id, DEFAULT_DEVICE_TOKEN_LIFETIME)
    }

    /// The token of `device_id`, valid for `lifetime` from now.
    pub fn issue_for(&self, device_id: &str, lifetime: Duration) -> Result<String, TokenError> {
        self.issue_until(device_id, unix_now().saturating_add(lifetime.as_secs()))
    }

    /// The token of `device_id`, refused from unix second `expires` on.
    pub fn issue_until(&self, device_id: &str, expires: u64) -> Result<String, TokenError> {
        let id = DeviceId::new(device_id)?;
        let expires = expires.to_string();
        let tag = self
            .mac(
                DEVICE_TOKEN_LABEL_V2,
                &[expires.as_bytes(), b".", id.as_bytes()],
            )
            .finalize()
            .into_bytes();
        Ok(format!("v2.{}.{expires}.{}", id.0, hex::encode(tag)))
    }

    /// [`verify_at`](Self::verify_at) now (the system clock).
    pub fn verify(&self, token: &str) -> Option<DeviceId> {
        self.verify_at(token, unix_now())
    }

    /// The device a token names, if it is well formed, its MAC is right (compared in
    /// constant time), it has not expired at `now` (unix seconds) and its device is
    /// not revoked.
    pub fn verify_at(&self, token: &str, now: u64) -> Option<DeviceId> {
        let id = if let Some(rest) = token.strip_prefix("v2.") {
            let (rest, tag_hex) = rest.rsplit_once('.')?;
            let (id, expires) = rest.rsplit_once('.')?;
            let id = DeviceId::new(id).ok()?;
            // Decimal digits only (no sign, no leading '+'), at most u64.
            if expires.is_empty() || !expires.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let when: u64 = expires.parse().ok()?;
            let tag = decode_tag(tag_hex)?;
            self.mac(
                DEVICE_TOKEN_LABEL_V2,
                &[expires.as_bytes(), b".", id.as_bytes()],
            )
            .verify_slice(&tag)
            .ok()?;
            if now >= when {
                return None;
            }
            id
        } else {
            let rest = token.strip_prefix("v1.")?;
            if !self.accept_v1 {
                return None;
            }
            let (id, tag_hex) = rest.rsplit_once('.')?;
            let id = DeviceId::new(id).ok()?;
            let tag = decode_tag(tag_hex)?;
            self.mac(DEVICE_TOKEN_LABEL, &[id.as_bytes()])
                .verify_slice(&tag)
                .ok()?;
            id
        };
        if self.revocations.as_ref().is_some_and(|r| r.revoked(&id)) {
            return None;
        }
        Some(id)
    }
}

/// A token's MAC tag in its one canonical spelling, the one `issue*` writes: 64
/// lower-case hex digits. Any other spelling of the same bytes (upper or mixed case)
/// is refused, so one device's token has one string form.
fn decode_tag(tag_hex: &str) -> Option<Vec<u8>> {
    let canonical = tag_hex.len() == 64
        && tag_hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !canonical {
        return None;
    }
    hex::decode(tag_hex).ok()
}

/// A revocation list: a file of device ids, one a line (blank lines and lines
/// starting with `#` ignored), whose every token the relay refuses. The file is
/// looked at again at most every [`REVOCATIONS_RECHECK`] and read again when its
/// modification time or size changed; if it cannot be read or has a bad line then,
/// the last list read stays in force (an ERROR is logged).
#[derive(Clone)]
pub struct Revocations {
    path: PathBuf,
    state: Arc<Mutex<RevocationState>>,
}

struct RevocationState {
    checked: Instant,
    stamp: Option<(SystemTime, u64)>,
    devices: HashSet<String>,
}

impl fmt::Debug for Revocations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Revocations")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn read_revocations(path: &Path) -> Result<HashSet<String>, TokenError> {
    let text = read_file(path, "revocation list")?;
    let mut devices = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let id = DeviceId::new(line).map_err(|_| TokenError::BadRevocation {
            path: path.to_path_buf(),
            line: i + 1,
        })?;
        devices.insert(id.0);
    }
    Ok(devices)
}

impl Revocations {
    /// Reads the list at `path` (it must exist and be valid now).
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let stamp = stamp(path);
        let devices = read_revocations(path)?;
        Ok(Revocations {
            path: path.to_path_buf(),
            state: Arc::new(Mutex::new(RevocationState {
                checked: Instant::now(),
                stamp,
                devices,
            })),
        })
    }

    /// How many devices are revoked now.
    pub fn len(&self) -> usize {
        self.refreshed(|s| s.devices.len())
    }

    /// Whether no device is revoked now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `device` is revoked.
    pub fn revoked(&self, device: &DeviceId) -> bool {
        self.refreshed(|s| s.devices.contains(&device.0))
    }

    fn refreshed<T>(&self, read: impl FnOnce(&RevocationState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= REVOCATIONS_RECHECK {
            state.checked = Instant::now();
            let now = stamp(&self.path);
            if now != state.stamp {
                match read_revocations(&self.path) {
                    Ok(devices) => {
                        tracing::info!(
                            path = %self.path.display(),
                            revoked = devices.len(),
                            "revocation list read again"
                        );
                        state.devices = devices;
                        state.stamp = now;
                    }
                    Err(e) => {
                        tracing::error!(
                            error = %e,
                            "cannot read the revocation list again; the last one read stays in force"
                        );
                    }
                }
            }
        }
        read(&state)
    }
}

/// A bearer token of the relay's own (its admin token, or the token it presents to
/// the aggregator). `Debug` shows `<redacted>`.
#[derive(Clone)]
pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// Checks and wraps a token: 1 to [`MAX_TOKEN_LEN`] visible ASCII characters.
    pub fn new(token: &str, what: &'static str) -> Result<Self, TokenError> {
        let ok = !token.is_empty()
            && token.len() <= MAX_TOKEN_LEN
            && token.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Secret(token.to_string()))
        } else {
            Err(TokenError::BadToken { what })
        }
    }

    /// Reads a token file (surrounding whitespace ignored); a valid token whose file
    /// other users may access is taken with a WARN ([`ldpcov_seal::warn_if_loose`]).
    pub fn from_file(path: &Path, what: &'static str) -> Result<Self, TokenError> {
        let text = read_file(path, what)?;
        let secret = Secret::new(text.trim(), what)?;
        ldpcov_seal::warn_if_loose(path, what);
        Ok(secret)
    }

    /// The token itself (to send it).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with a presented token.
    pub fn matches(&self, presented: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_every_alteration_fails() {
        let issuer = DeviceTokenIssuer::from_bytes([1; 32]).accepting_unexpiring(true);
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"ldpcov-relay device v1a.b-c_9");
        let token = format!("v1.a.b-c_9.{}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(issuer.verify(&token).unwrap().as_bytes(), b"a.b-c_9");
        // Another device id with the same MAC, a flipped MAC digit, another version,
        // a truncated MAC: all refused.
        let tag = token.rsplit_once('.').unwrap().1;
        assert!(issuer.verify(&format!("v1.a.b-c_8.{tag}")).is_none());
        let mut flipped = token.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        assert!(
            issuer
                .verify(std::str::from_utf8(&flipped).unwrap())
                .is_none()
        );
        assert!(issuer.verify(&token.replacen("v1.", "v2.", 1)).is_none());
        assert!(issuer.verify(&token[..token.len() - 2]).is_none());
        assert!(issuer.verify("").is_none());
        // Version 1 tokens never expire: refused unless accepted for a migration.
        assert!(
            DeviceTokenIssuer::from_bytes([1; 32])
                .verify(&token)
                .is_none()
        );
    }

    #[test]
    fn version_2_tokens_expire_and_their_expiry_is_under_the_mac() {
        let issuer = DeviceTokenIssuer::from_bytes([1; 32]);
        let token = issuer.issue_until("phone", 5000).unwrap();
        // The MAC is HMAC-SHA256 over the label, the expiry, "." and the id (an
        // independent recomputation).
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"ldpcov-relay device v25000.phone");
        let tag = hex::encode(mac.finalize().into_bytes());
        assert_eq!(token, format!("v2.phone.5000.{tag}"));
        assert!(issuer.verify_at(&token, 4999).is_some());
        assert!(issuer.verify_at(&token, 5000).is_none(), "expired");
        // A later expiry with the same MAC, a signed or empty one: refused.
        for forged in [
            format!("v2.phone.9999.{tag}"),
            format!("v2.phone.+5000.{tag}"),
            format!("v2.phone..{tag}"),
            format!("v2.phone.{tag}"),
        ] {
            assert!(issuer.verify_at(&forged, 0).is_none(), "{forged}");
        }
        let fresh = issuer.issue("phone").unwrap();
        assert!(issuer.verify(&fresh).is_some());
        assert!(
            issuer
                .verify_at(
                    &fresh,
                    unix_now() + DEFAULT_DEVICE_TOKEN_LIFETIME.as_secs() + 1
                )
                .is_none()
        );
    }

    #[test]
    fn only_the_lower_case_spelling_of_a_tag_verifies() {
        let issuer = DeviceTokenIssuer::from_bytes([1; 32]).accepting_unexpiring(true);
        let v2 = issuer.issue_until("phone", 5000).unwrap();
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"ldpcov-relay device v1phone");
        let v1 = format!("v1.phone.{}", hex::encode(mac.finalize().into_bytes()));
        for token in [v2, v1] {
            assert!(issuer.verify_at(&token, 0).is_some(), "{token}");
            let (head, tag) = token.rsplit_once('.').unwrap();
            assert!(tag.bytes().any(|b| b.is_ascii_lowercase()), "{tag}");
            // Upper case, and one letter upper-cased: the same MAC bytes, refused.
            let upper = format!("{head}.{}", tag.to_ascii_uppercase());
            assert!(issuer.verify_at(&upper, 0).is_none(), "{upper}");
            let at = tag.find(|c: char| c.is_ascii_lowercase()).unwrap();
            let mut mixed = tag.to_string();
            mixed.replace_range(at..=at, &tag[at..=at].to_ascii_uppercase());
            let mixed = format!("{head}.{mixed}");
            assert!(issuer.verify_at(&mixed, 0).is_none(), "{mixed}");
        }
    }

    #[test]
    fn a_revoked_device_is_refused_and_the_list_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revoked");
        std::fs::write(&path, "# lost phones\nphone-1\n\n").unwrap();
        let issuer = DeviceTokenIssuer::from_bytes([1; 32])
            .with_revocations(Revocations::from_file(&path).unwrap());
        let one = issuer.issue("phone-1").unwrap();
        let two = issuer.issue("phone-2").unwrap();
        assert!(issuer.verify(&one).is_none());
        assert!(issuer.verify(&two).is_some());
        std::fs::write(&path, "phone-2\n").unwrap();
        std::thread::sleep(REVOCATIONS_RECHECK + Duration::from_millis(100));
        assert!(issuer.verify(&one).is_some());
        assert!(issuer.verify(&two).is_none());
        // A bad line later: the last list stays.
        std::fs::write(&path, "not a device id!\n").unwrap();
        std::thread::sleep(REVOCATIONS_RECHECK + Duration::from_millis(100));
        assert!(issuer.verify(&two).is_none());
        std::fs::write(&path, "a b\n").unwrap();
        assert!(Revocations::from_file(&path).is_err());
    }

    #[test]
    fn device_ids_are_checked() {
        for bad in ["", "a b", "é", "a/b", &"x".repeat(129)] {
            assert!(DeviceId::new(bad).is_err(), "{bad:?}");
        }
        assert!(DeviceId::new(&"x".repeat(128)).is_ok());
        assert_eq!(
            format!("{:?}", DeviceId::new("secret-id").unwrap()),
            "DeviceId(<redacted>)"
        );
    }

    #[test]
    fn secret_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).unwrap();
        assert!(DeviceTokenIssuer::from_file(&path).is_ok());
        std::fs::write(&path, "ab".repeat(31)).unwrap();
        assert!(DeviceTokenIssuer::from_file(&path).is_err());
        std::fs::write(&path, "zz".repeat(32)).unwrap();
        assert!(DeviceTokenIssuer::from_file(&path).is_err());
    }
}
