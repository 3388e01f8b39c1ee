//! The secret the two aggregators' operators share, and what each derives from it.

use ldpcov_prio::VERIFY_KEY_SIZE;
use ldpcov_seal::MasterSecret;

use crate::auth::Token;

/// The `info` the leader's bearer token is derived under.
const LEADER_TOKEN_INFO: &[u8] = b"ldpcov two-aggregator leader token v1";

/// The prefix of the `info` a collection's Prio3 verify key is derived under (the
/// collection id follows).
const VERIFY_KEY_INFO: &[u8] = b"ldpcov two-aggregator verify key v1/";

/// The secret a leader and its helper share (`serve --peer-secret-file`, the same 64
/// hexadecimal digits in both operators' files). From it each derives, with HKDF-SHA256
/// ([`MasterSecret::derive`]): the leader's bearer token, which the helper takes
/// `VerifyShares` from, and each collection's Prio3 verify key. A device never sees it.
pub struct PeerSecret(MasterSecret);

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(<redacted>)")
    }
}

impl PeerSecret {
    /// Wraps the shared secret.
    pub fn new(secret: MasterSecret) -> Self {
        PeerSecret(secret)
    }

    /// A secret drawn from the operating system (both daemons in one process: tests,
    /// the load generator).
    ///
    /// # Errors
    ///
    /// The operating system's random generator fails.
    pub fn generate() -> Result<Self, ldpcov_seal::SecretError> {
        MasterSecret::generate().map(PeerSecret)
    }

    /// The leader's bearer token as the leader sends it: 64 hexadecimal digits.
    pub fn leader_token_text(&self) -> String {
        self.0
            .derive(LEADER_TOKEN_INFO)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The leader's bearer token, as the helper checks it.
    pub fn leader_token(&self) -> Token {
        Token::new(&self.leader_token_text(), "leader")
            .expect("64 hexadecimal digits are a valid token")
    }

    /// Collection `collection_id`'s Prio3 verify key.
    pub fn verify_key(&self, collection_id: &str) -> [u8; VERIFY_KEY_SIZE] {
        let mut info = VERIFY_KEY_INFO.to_vec();
        info.extend_from_slice(collection_id.as_bytes());
        *self.0.derive(&info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides derive the same values from the same secret; other secrets, other
    /// collections and the two purposes give different ones.
    #[test]
    fn derivations_are_shared_and_separate() {
        let a = PeerSecret::new(MasterSecret::from_bytes([1; 32]));
        let b = PeerSecret::new(MasterSecret::from_bytes([1; 32]));
        let other = PeerSecret::new(MasterSecret::from_bytes([2; 32]));
        assert_eq!(a.verify_key("c"), b.verify_key("c"));
        assert_ne!(a.verify_key("c"), a.verify_key("d"));
        assert_ne!(a.verify_key("c"), other.verify_key("c"));
        assert!(a.leader_token().matches(b.leader_token().secret()));
        assert!(!a.leader_token().matches(other.leader_token().secret()));
        assert_eq!(format!("{a:?}"), "PeerSecret(<redacted>)");
    }
}
