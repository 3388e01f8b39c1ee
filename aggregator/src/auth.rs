//! Bearer-token access control.
//!
//! Every call may carry `authorization: Bearer <token>` metadata. The daemon knows an
//! optional **admin token** and any number of **submit tokens**, each global or
//! restricted to one collection. What each RPC needs:
//!
//! | RPC | needs |
//! | --- | --- |
//! | `CreateCollection`, `CloseCollection`, `GetEstimate` | the admin token |
//! | `SubmitReport`, `SubmitReports` | a submit token for the report's collection, or the admin token |
//! | `GetCollection` (public parameters) | as a submit |
//! | `GetStatus` (reveals the count) | as a submit |
//! | `SubmitShuffledBatch` | a relay token, always (nothing else; refused outright when none is configured) |
//! | `UploadTwoAggregatorReport` | as a submit |
//! | `VerifyShares`, `ReleaseShare` | the leader's token, always (a helper's only; refused outright elsewhere) |
//!
//! A **relay token** ([`AuthConfig::with_relay_tokens`]) identifies a shuffled
//! collection's relay (docs/PRIVACY.md §9): it may send batches and read any
//! collection's parameters, nothing else. Batches are never open, whatever else is.
//! A **leader token** ([`AuthConfig::with_leader_token`], on a two-aggregator helper,
//! derived from the operators' shared secret) likewise may send `VerifyShares` and read
//! parameters, nothing else.
//!
//! A right nobody configured a token for is open: with no token at all everything is
//! open (the daemon warns at startup); with only an admin token, submits and the two
//! read calls are open. Submit tokens without an admin token are refused by
//! [`AuthConfig::new`], so turning on access control never leaves the admin calls open.
//!
//! A missing or unknown token is `UNAUTHENTICATED`; a known token without the right
//! (a submit token on an admin call, or on another collection) is `PERMISSION_DENIED`.
//! Tokens are compared in constant time and never logged: [`Token`]'s `Debug` prints
//! `<redacted>`.

use std::fmt;
use std::path::Path;

use subtle::ConstantTimeEq;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// Longest token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 512;

/// Why a token or token configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A token is empty, too long, or has characters outside visible ASCII.
    #[error("{} {what} token must be 1 to {MAX_TOKEN_LEN} visible ASCII characters (no spaces)", if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" })]
    BadToken {
        /// Which token ("admin", "submit").
        what: &'static str,
    },
    /// A per-collection submit token names an invalid collection id.
    #[error("submit token for collection {0:?}: invalid collection id")]
    BadCollection(String),
    /// Submit tokens were given without an admin token.
    #[error("submit tokens need an admin token too (otherwise the admin calls would stay open)")]
    SubmitWithoutAdmin,
    /// The admin token is also a submit token: whoever holds that "submit" token
    /// would have admin rights.
    #[error("the admin token is also given as a submit token; give submitters a different token")]
    AdminAmongSubmit,
    /// A relay token equal to the admin token or to a submit token: the relay would
    /// hold rights it must not have, or a device could pose as the relay.
    #[error("a relay token equals the admin token or a submit token; give the relay its own token")]
    RelayTokenShared,
    /// The leader's token (derived from the peer secret) equals another token.
    #[error("the two-aggregator leader's token equals another token of this daemon")]
    LeaderTokenShared,
    /// A token file could not be read (the OS error is the source, printed once by
    /// the error chain).
    #[error("cannot read token file {path}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A secret bearer token. Its `Debug` and `Display` never show the secret.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    /// Checks and wraps a token: 1 to [`MAX_TOKEN_LEN`] visible ASCII characters.
    pub fn new(secret: &str, what: &'static str) -> Result<Self, AuthError> {
        let ok = !secret.is_empty()
            && secret.len() <= MAX_TOKEN_LEN
            && secret.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Token(secret.as_bytes().to_vec()))
        } else {
            Err(AuthError::BadToken { what })
        }
    }

    /// Reads a token from a file (surrounding whitespace, e.g. a final newline, is
    /// ignored); a valid token whose file other users may access is taken with a WARN
    /// ([`ldpcov_seal::warn_if_loose`]).
    pub fn from_file(path: &Path, what: &'static str) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::File {
            path: path.display().to_string(),
            source,
        })?;
        let token = Token::new(text.trim(), what)?;
        ldpcov_seal::warn_if_loose(path, &format!("{what} token"));
        Ok(token)
    }

    /// Constant-time comparison with a presented token (the time depends on the
    /// lengths only).
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_slice().ct_eq(presented))
    }

    /// The secret itself (tests).
    #[cfg(test)]
    pub(crate) fn secret(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A submit token, for every collection or for one.
#[derive(Debug, Clone)]
pub struct SubmitToken {
    /// `None`: any collection.
    pub collection: Option<String>,
    /// The secret.
    pub token: Token,
}

impl SubmitToken {
    /// Parses `TOKEN` (any collection) or `COLLECTION=TOKEN` (one collection). A
    /// token given in the global form must therefore not contain `=`.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        match text.split_once('=') {
            Some((collection, secret)) => {
                ldpcov_privacy::collection::validate_collection_id(collection)
                    .map_err(|_| AuthError::BadCollection(collection.to_string()))?;
                Ok(SubmitToken {
                    collection: Some(collection.to_string()),
                    token: Token::new(secret, "submit")?,
                })
            }
            None => Ok(SubmitToken {
                collection: None,
                token: Token::new(text, "submit")?,
            }),
        }
    }
}

/// What a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right<'a> {
    /// Admin calls: create, close, estimate.
    Admin,
    /// Submitting to (or reading the parameters or status of) this collection.
    Submit(&'a str),
    /// Opening a submit stream: any submit token (each report's collection is
    /// checked as it arrives).
    AnySubmit,
    /// Reading this collection's parameters or status: as a submit, or a relay token.
    Read(&'a str),
    /// Sending a shuffled batch: a relay token only.
    Relay,
    /// Asking a helper to verify a batch of two-aggregator reports: the leader's token
    /// only.
    Leader,
}

/// Who presented what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller<'a> {
    /// No `authorization` metadata.
    Anonymous,
    /// A token that matches nothing.
    Unknown,
    /// The admin token.
    Admin,
    /// A submit token (with its collection, if restricted).
    Submit(Option<&'a str>),
    /// A relay token.
    Relay,
    /// The two-aggregator leader's token.
    Leader,
}

/// The daemon's tokens. `AuthConfig::default()` is open (no tokens).
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    admin: Option<Token>,
    submit: Vec<SubmitToken>,
    relay: Vec<Token>,
    leader: Option<Token>,
}

impl AuthConfig {
    /// A configuration with these tokens. Submit tokens need an admin token, and
    /// none may equal it.
    pub fn new(admin: Option<Token>, submit: Vec<SubmitToken>) -> Result<Self, AuthError> {
        if admin.is_none() && !submit.is_empty() {
            return Err(AuthError::SubmitWithoutAdmin);
        }
        if let Some(admin) = &admin
            && submit.iter().any(|s| admin.matches(&s.token.0))
        {
            return Err(AuthError::AdminAmongSubmit);
        }
        Ok(AuthConfig {
            admin,
            submit,
            relay: Vec::new(),
            leader: None,
        })
    }

    /// Adds the tokens of the relays that may send shuffled batches. None may equal
    /// the admin token or a submit token.
    pub fn with_relay_tokens(mut self, relay: Vec<Token>) -> Result<Self, AuthError> {
        let shared = relay.iter().any(|r| {
            self.admin.as_ref().is_some_and(|a| a.matches(&r.0))
                || self.submit.iter().any(|s| s.token.matches(&r.0))
        });
        if shared {
            return Err(AuthError::RelayTokenShared);
        }
        self.relay = relay;
        Ok(self)
    }

    /// Adds the token of the two-aggregator leader this daemon is the helper of. It may
    /// not equal the admin token, a submit token or a relay token.
    pub fn with_leader_token(mut self, leader: Token) -> Result<Self, AuthError> {
        let shared = self.admin.as_ref().is_some_and(|a| a.matches(&leader.0))
            || self.submit.iter().any(|s| s.token.matches(&leader.0))
            || self.relay.iter().any(|r| r.matches(&leader.0));
        if shared {
            return Err(AuthError::LeaderTokenShared);
        }
        self.leader = Some(leader);
        Ok(self)
    }

    /// Number of relay tokens (for the startup log).
    pub fn relay_tokens(&self) -> usize {
        self.relay.len()
    }

    /// No token at all: every call is allowed.
    pub fn is_open(&self) -> bool {
        self.admin.is_none() && self.submit.is_empty()
    }

    /// Whether submits (and status and parameter reads) need a token.
    pub fn submit_guarded(&self) -> bool {
        !self.submit.is_empty()
    }

    /// Number of submit tokens (for the startup log).
    pub fn submit_tokens(&self) -> usize {
        self.submit.len()
    }

    /// Identifies the caller. Every configured token is compared, so the time does
    /// not reveal which one matched.
    fn caller(&self, authorization: Option<&[u8]>) -> Caller<'_> {
        let Some(value) = authorization else {
            return Caller::Anonymous;
        };
        let Some(presented) = bearer(value) else {
            return Caller::Unknown;
        };
        let mut found = Caller::Unknown;
        if let Some(admin) = &self.admin
            && admin.matches(presented)
        {
            found = Caller::Admin;
        }
        for s in &self.submit {
            if s.token.matches(presented) && found == Caller::Unknown {
                found = Caller::Submit(s.collection.as_deref());
            }
        }
        for r in &self.relay {
            if r.matches(presented) && found == Caller::Unknown {
                found = Caller::Relay;
            }
        }
        if let Some(leader) = &self.leader
            && leader.matches(presented)
            && found == Caller::Unknown
        {
            found = Caller::Leader;
        }
        found
    }

    /// Allows or refuses a call needing `right`: `UNAUTHENTICATED` for a missing or
    /// unknown token, `PERMISSION_DENIED` for a known token without the right.
    pub fn check(&self, metadata: &MetadataMap, right: Right<'_>) -> Result<(), Status> {
        self.check_authorization(metadata.get("authorization").map(|v| v.as_bytes()), right)
    }

    /// [`check`](AuthConfig::check) on the raw HTTP headers of a call, before its body
    /// is read: the server runs it for every `ldpcov.v1.Aggregator` call before the
    /// call takes a slot of the global concurrency limit, with the right
    /// [`right_before_body`] names (a submit's collection is checked again by the
    /// service once the body is read).
    pub fn check_headers(
        &self,
        headers: &tonic::codegen::http::HeaderMap,
        right: Right<'_>,
    ) -> Result<(), Status> {
        self.check_authorization(headers.get("authorization").map(|v| v.as_bytes()), right)
    }

    /// Whether any token is needed for `right` at all.
    fn guards(&self, right: Right<'_>) -> bool {
        match right {
            Right::Admin => self.admin.is_some(),
            Right::Submit(_) | Right::Read(_) | Right::AnySubmit => self.submit_guarded(),
            Right::Relay | Right::Leader => true,
        }
    }

    /// Whether a call to `path` needs a token (the server skips the pre-check of open
    /// calls).
    pub fn guards_path(&self, path: &str) -> bool {
        right_before_body(path).is_some_and(|right| self.guards(right))
    }

    fn check_authorization(
        &self,
        authorization: Option<&[u8]>,
        right: Right<'_>,
    ) -> Result<(), Status> {
        let guarded = self.guards(right);
        if !guarded {
            return Ok(());
        }
        if right == Right::Relay && self.relay.is_empty() {
            return Err(Status::failed_precondition(
                "this aggregator takes shuffled batches from no relay: start it with --relay-token-file",
            ));
        }
        if right == Right::Leader && self.leader.is_none() {
            return Err(Status::failed_precondition(
                "this aggregator is no two-aggregator helper: start it with --two-aggregator-role helper and --peer-secret-file",
            ));
        }
        match (self.caller(authorization), right) {
            (Caller::Anonymous, _) => Err(Status::unauthenticated(
                "this call needs an `authorization: Bearer <token>` header",
            )),
            (Caller::Unknown, _) => Err(Status::unauthenticated("invalid bearer token")),
            (Caller::Relay, Right::Relay | Right::Read(_) | Right::AnySubmit) => Ok(()),
            (Caller::Relay, Right::Admin) => {
                Err(Status::permission_denied("this call needs the admin token"))
            }
            (Caller::Relay, Right::Submit(_)) => Err(Status::permission_denied(
                "a relay token reads parameters and sends batches; it submits no reports",
            )),
            (Caller::Leader, Right::Leader | Right::Read(_) | Right::AnySubmit) => Ok(()),
            (Caller::Leader, _) => Err(Status::permission_denied(
                "the leader's token asks for verifications and reads parameters, nothing else",
            )),
            (_, Right::Relay) => Err(Status::permission_denied(
                "shuffled batches are taken from the relay's token only",
            )),
            (_, Right::Leader) => Err(Status::permission_denied(
                "verifications are taken from the two-aggregator leader's token only",
            )),
            (Caller::Admin, _) => Ok(()),
            (Caller::Submit(_), Right::Admin) => {
                Err(Status::permission_denied("this call needs the admin token"))
            }
            (Caller::Submit(_), Right::AnySubmit)
            | (Caller::Submit(None), Right::Submit(_) | Right::Read(_)) => Ok(()),
            (Caller::Submit(Some(scope)), Right::Submit(id) | Right::Read(id)) if scope == id => {
                Ok(())
            }
            (Caller::Submit(Some(_)), Right::Submit(id) | Right::Read(id)) => Err(
                Status::permission_denied(format!("this token may not access collection {id:?}")),
            ),
        }
    }
}

/// What a call to the gRPC method `path` (`/ldpcov.v1.Aggregator/GetEstimate`) needs,
/// as far as its headers can tell: [`Right::Admin`] for the admin calls (ListCollections too),
/// [`Right::AnySubmit`] for submits, `GetCollection` and `GetStatus` (their collection
/// is in the body); `None` for anything else (health, reflection, unknown methods).
pub fn right_before_body(path: &str) -> Option<Right<'static>> {
    let method = path.strip_prefix("/ldpcov.v1.Aggregator/")?;
    match method {
        "CreateCollection" | "CloseCollection" | "DeleteCollection" | "GetEstimate"
        | "ListCollections" => Some(Right::Admin),
        "SubmitReport"
        | "SubmitReports"
        | "GetCollection"
        | "GetStatus"
        | "UploadTwoAggregatorReport" => Some(Right::AnySubmit),
        "SubmitShuffledBatch" => Some(Right::Relay),
        "VerifyShares" | "ReleaseShare" => Some(Right::Leader),
        _ => None,
    }
}

/// The token of `Bearer <token>` (scheme case-insensitive), if that is the form.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer ";
    if value.len() <= SCHEME.len() || !value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    Some(value[SCHEME.len()..].trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn md(token: Option<&str>) -> MetadataMap {
        let mut m = MetadataMap::new();
        if let Some(t) = token {
            m.insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        m
    }

    fn config() -> AuthConfig {
        AuthConfig::new(
            Some(Token::new("admin-secret", "admin").unwrap()),
            vec![
                SubmitToken::parse("global-secret").unwrap(),
                SubmitToken::parse("c1=c1-secret").unwrap(),
            ],
        )
        .unwrap()
    }

    fn code(r: Result<(), Status>) -> Option<Code> {
        r.err().map(|s| s.code())
    }

    #[test]
    fn rights_and_codes() {
        let c = config();
        let cases: &[(Option<&str>, Right<'_>, Option<Code>)] = &[
            (None, Right::Admin, Some(Code::Unauthenticated)),
            (None, Right::Submit("c1"), Some(Code::Unauthenticated)),
            (
                Some("wrong"),
                Right::Submit("c1"),
                Some(Code::Unauthenticated),
            ),
            (Some("admin-secret"), Right::Admin, None),
            (Some("admin-secret"), Right::Submit("c2"), None),
            (
                Some("global-secret"),
                Right::Admin,
                Some(Code::PermissionDenied),
            ),
            (Some("global-secret"), Right::Submit("c2"), None),
            (Some("c1-secret"), Right::Submit("c1"), None),
            (Some("c1-secret"), Right::AnySubmit, None),
            (
                Some("c1-secret"),
                Right::Submit("c2"),
                Some(Code::PermissionDenied),
            ),
            (
                Some("c1-secret"),
                Right::Admin,
                Some(Code::PermissionDenied),
            ),
        ];
        for (token, right, want) in cases {
            assert_eq!(
                code(c.check(&md(*token), *right)),
                *want,
                "{token:?} {right:?}"
            );
        }
        // Not the Bearer scheme.
        let mut m = MetadataMap::new();
        m.insert("authorization", "Basic admin-secret".parse().unwrap());
        assert_eq!(code(c.check(&m, Right::Admin)), Some(Code::Unauthenticated));
        let mut m = MetadataMap::new();
        m.insert("authorization", "bearer admin-secret".parse().unwrap());
        assert_eq!(code(c.check(&m, Right::Admin)), None);
    }

    #[test]
    fn headers_alone_decide_before_the_body() {
        use tonic::codegen::http::HeaderMap;
        let c = config();
        let headers = |token: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(t) = token {
                h.insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            h
        };
        let admin = right_before_body("/ldpcov.v1.Aggregator/GetEstimate").unwrap();
        let submit = right_before_body("/ldpcov.v1.Aggregator/GetStatus").unwrap();
        assert_eq!(admin, Right::Admin);
        assert_eq!(submit, Right::AnySubmit);
        assert_eq!(right_before_body("/grpc.health.v1.Health/Check"), None);
        assert_eq!(right_before_body("/ldpcov.v1.Aggregator/Nope"), None);
        assert!(c.guards_path("/ldpcov.v1.Aggregator/SubmitReport"));
        assert!(!c.guards_path("/grpc.health.v1.Health/Check"));
        let cases = [
            (None, admin, Some(Code::Unauthenticated)),
            (None, submit, Some(Code::Unauthenticated)),
            (Some("wrong"), submit, Some(Code::Unauthenticated)),
            (Some("c1-secret"), submit, None),
            (Some("c1-secret"), admin, Some(Code::PermissionDenied)),
            (Some("admin-secret"), admin, None),
        ];
        for (token, right, want) in cases {
            assert_eq!(
                code(c.check_headers(&headers(token), right)),
                want,
                "{token:?} {right:?}"
            );
        }
        let admin_only =
            AuthConfig::new(Some(Token::new("a", "admin").unwrap()), Vec::new()).unwrap();
        assert!(!admin_only.guards_path("/ldpcov.v1.Aggregator/SubmitReport"));
        assert!(admin_only.guards_path("/ldpcov.v1.Aggregator/CloseCollection"));
    }

    #[test]
    fn open_rights_need_nothing() {
        let open = AuthConfig::default();
        assert!(open.is_open());
        assert_eq!(code(open.check(&md(None), Right::Admin)), None);
        let admin_only =
            AuthConfig::new(Some(Token::new("a", "admin").unwrap()), Vec::new()).unwrap();
        assert_eq!(code(admin_only.check(&md(None), Right::Submit("x"))), None);
        assert_eq!(
            code(admin_only.check(&md(None), Right::Admin)),
            Some(Code::Unauthenticated)
        );
        assert!(matches!(
            AuthConfig::new(None, vec![SubmitToken::parse("s").unwrap()]),
            Err(AuthError::SubmitWithoutAdmin)
        ));
    }

    #[test]
    fn the_admin_token_as_a_submit_token_is_refused() {
        let admin = || Some(Token::new("admin-secret", "admin").unwrap());
        for submit in ["admin-secret", "c1=admin-secret"] {
            assert!(matches!(
                AuthConfig::new(admin(), vec![SubmitToken::parse(submit).unwrap()]),
                Err(AuthError::AdminAmongSubmit)
            ));
        }
        AuthConfig::new(admin(), vec![SubmitToken::parse("other").unwrap()]).unwrap();
        assert_eq!(
            Token::new("", "admin").unwrap_err().to_string(),
            "an admin token must be 1 to 512 visible ASCII characters (no spaces)"
        );
        assert_eq!(
            Token::new("", "submit").unwrap_err().to_string(),
            "a submit token must be 1 to 512 visible ASCII characters (no spaces)"
        );
    }

    #[test]
    fn bad_tokens_are_refused() {
        for bad in [
            "",
            "has space",
            "tab\there",
            "é",
            &"x".repeat(MAX_TOKEN_LEN + 1),
        ] {
            assert!(Token::new(bad, "admin").is_err(), "{bad:?}");
        }
        assert!(SubmitToken::parse("a b=tok").is_err());
        assert!(SubmitToken::parse("c=").is_err());
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let text = format!(
            "{:?} {}",
            config(),
            Token::new("admin-secret", "admin").unwrap()
        );
        for secret in ["admin-secret", "global-secret", "c1-secret"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(text.contains("redacted"));
    }
}
