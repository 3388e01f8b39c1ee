//! Tokens: the devices' (`v1.<device id>.<hex HMAC-SHA256>`, minted by
//! [`DeviceTokenIssuer`] and checked by the relay with the same secret) and the relay's
//! own secrets (its admin token, the token it presents to the aggregator: [`Secret`]).
//!
//! A device token is `v1.<device id>.<hex(HMAC-SHA256(secret, "ldpcov-relay device v1"
//! ‖ device id))>`; the device id is 1 to [`MAX_DEVICE_ID_LEN`] characters of
//! `[A-Za-z0-9._-]`. The MAC is compared in constant time. Nothing here logs or
//! prints a secret, a token or a device id: [`Secret`], [`DeviceTokenIssuer`] and
//! [`DeviceId`] show `<redacted>` in `Debug`.

use std::fmt;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The domain separation prefix of a device token's MAC.
pub const DEVICE_TOKEN_LABEL: &[u8] = b"ldpcov-relay device v1";
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
/// assert!(token.starts_with("v1.phone-42."));
/// assert!(issuer.verify(&token).is_some());
/// assert!(DeviceTokenIssuer::from_bytes([8; 32]).verify(&token).is_none());
/// # Ok::<(), ldpcov_relay::TokenError>(())
/// ```
#[derive(Clone)]
pub struct DeviceTokenIssuer {
    secret: [u8; DEVICE_SECRET_LEN],
}

impl fmt::Debug for DeviceTokenIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceTokenIssuer(<redacted>)")
    }
}

impl DeviceTokenIssuer {
    /// From the raw secret.
    pub fn from_bytes(secret: [u8; DEVICE_SECRET_LEN]) -> Self {
        DeviceTokenIssuer { secret }
    }

    /// From a file holding the secret as 64 hex digits (surrounding whitespace
    /// ignored).
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let text = read_file(path, "device-token secret")?;
        let bad = || TokenError::BadSecret {
            path: path.to_path_buf(),
        };
        let bytes = hex::decode(text.trim()).map_err(|_| bad())?;
        let secret: [u8; DEVICE_SECRET_LEN] = bytes.try_into().map_err(|_| bad())?;
        Ok(DeviceTokenIssuer { secret })
    }

    fn mac(&self, device_id: &[u8]) -> HmacSha256 {
        // HMAC takes keys of any length: this cannot fail.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(DEVICE_TOKEN_LABEL);
        mac.update(device_id);
        mac
    }

    /// The token of `device_id`.
    pub fn issue(&self, device_id: &str) -> Result<String, TokenError> {
        let id = DeviceId::new(device_id)?;
        let tag = self.mac(id.as_bytes()).finalize().into_bytes();
        Ok(format!("v1.{}.{}", id.0, hex::encode(tag)))
    }

    /// The device a token names, if it is well formed and its MAC is right
    /// (compared in constant time).
    pub fn verify(&self, token: &str) -> Option<DeviceId> {
        let rest = token.strip_prefix("v1.")?;
        let (id, tag_hex) = rest.rsplit_once('.')?;
        let id = DeviceId::new(id).ok()?;
        if tag_hex.len() != 64 {
            return None;
        }
        let tag = hex::decode(tag_hex).ok()?;
        self.mac(id.as_bytes()).verify_slice(&tag).ok()?;
        Some(id)
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

    /// Reads a token file (surrounding whitespace ignored).
    pub fn from_file(path: &Path, what: &'static str) -> Result<Self, TokenError> {
        let text = read_file(path, what)?;
        Secret::new(text.trim(), what)
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
        let issuer = DeviceTokenIssuer::from_bytes([1; 32]);
        let token = issuer.issue("a.b-c_9").unwrap();
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
        // The MAC is HMAC-SHA256 over the label and the id (an independent recomputation).
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"ldpcov-relay device v1a.b-c_9");
        assert_eq!(tag, hex::encode(mac.finalize().into_bytes()));
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
