//! Optional TLS (rustls, ring provider) for the daemon and the admin CLI.
//!
//! The server takes a PEM certificate chain and a PEM private key
//! (`--tls-cert`, `--tls-key`); clients connect to an `https://` URL and trust either
//! the public web PKI roots (bundled, no system store needed) or one custom CA
//! (`--ca-cert`).

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, ServerTlsConfig};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read (the OS error is the source, printed once by the
    /// error chain).
    #[error("cannot read {what} {path}")]
    Read {
        /// Which file ("certificate", "private key", "CA certificate").
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not PEM.
    #[error("{what} {path} is not PEM (no -----BEGIN line)")]
    NotPem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// A certificate of the file is not valid now: expired, or not yet valid.
    #[error(
        "certificate {path}: certificate {index} of the chain ({subject}) {state}: valid from {not_before} to {not_after}; renew it"
    )]
    NotValidNow {
        /// The file.
        path: PathBuf,
        /// Its position in the file (0 = the server's own).
        index: usize,
        /// Its subject.
        subject: String,
        /// "expired" or "is not yet valid".
        state: &'static str,
        /// Start of its validity.
        not_before: String,
        /// End of its validity.
        not_after: String,
    },
    /// A certificate block does not parse as X.509.
    #[error("certificate {path}: certificate {index} of the chain does not parse: {reason}")]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// Its position in the file.
        index: usize,
        /// The parser's message.
        reason: String,
    },
    /// The certificate file is PEM but holds no certificate (a key given in its place,
    /// say).
    #[error("certificate {path} holds no certificate (no -----BEGIN CERTIFICATE----- block)")]
    NoCertificate {
        /// Its path.
        path: PathBuf,
    },
}

fn read_pem(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(TlsError::NotPem {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// The server's certificate chain and key (PEM), as read from disk.
#[derive(Clone)]
pub struct ServerTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert_pem_bytes", &self.cert_pem.len())
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl ServerTls {
    /// From PEM bytes already in memory (tests).
    pub fn from_pem(cert_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        ServerTls {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
        }
    }

    /// Reads the certificate chain and private key files. Every certificate of the
    /// chain must be valid now ([`TlsError::NotValidNow`] names its dates otherwise; one
    /// that expires within [`EXPIRY_WARNING`] is logged as a warning); whether the key
    /// parses and matches is checked when the server starts. A PEM key file other
    /// users may access is logged as a warning ([`ldpcov_seal::warn_if_loose`]).
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = read_pem(cert, "certificate")?;
        if !cert_pem
            .windows(27)
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        check_validity(cert, &cert_pem, x509_parser::time::ASN1Time::now())?;
        let key_pem = read_pem(key, "private key")?;
        ldpcov_seal::warn_if_loose(key, "TLS private key");
        Ok(ServerTls { cert_pem, key_pem })
    }

    /// tonic's server configuration ([`ldpcov_serve::tls_from_pem`]).
    pub fn config(&self) -> ServerTlsConfig {
        ldpcov_serve::tls_from_pem(&self.cert_pem, &self.key_pem)
    }
}

/// A certificate expiring within this time is logged as a warning at start.
pub const EXPIRY_WARNING: std::time::Duration = std::time::Duration::from_secs(14 * 24 * 3600);

/// Checks that every `CERTIFICATE` block of `pem` (read from `path`) is valid at `now`.
fn check_validity(
    path: &Path,
    pem: &[u8],
    now: x509_parser::time::ASN1Time,
) -> Result<(), TlsError> {
    use x509_parser::pem::Pem;
    let bad = |index, reason: String| TlsError::BadCertificate {
        path: path.to_path_buf(),
        index,
        reason,
    };
    let blocks = Pem::iter_from_buffer(pem)
        .filter(|block| {
            block
                .as_ref()
                .map_or(true, |block| block.label == "CERTIFICATE")
        })
        .enumerate();
    for (index, block) in blocks {
        let block = block.map_err(|e| bad(index, e.to_string()))?;
        let cert = block.parse_x509().map_err(|e| bad(index, e.to_string()))?;
        let validity = cert.validity();
        let state = if now < validity.not_before {
            Some("is not yet valid")
        } else if now > validity.not_after {
            Some("expired")
        } else {
            None
        };
        if let Some(state) = state {
            return Err(TlsError::NotValidNow {
                path: path.to_path_buf(),
                index,
                subject: cert.subject().to_string(),
                state,
                not_before: validity.not_before.to_string(),
                not_after: validity.not_after.to_string(),
            });
        }
        let left = validity.not_after.timestamp() - now.timestamp();
        if left < EXPIRY_WARNING.as_secs() as i64 {
            tracing::warn!(
                path = %path.display(), index, subject = %cert.subject(),
                not_after = %validity.not_after, "the TLS certificate expires soon: renew it"
            );
        }
    }
    Ok(())
}

/// The client side: trust this CA (PEM) or, with `None`, the bundled web PKI roots.
pub fn client_config(ca_pem: Option<&[u8]>) -> ClientTlsConfig {
    match ca_pem {
        Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
        None => ClientTlsConfig::new().with_webpki_roots(),
    }
}

/// Reads a CA certificate file (PEM) for [`client_config`].
pub fn read_ca(path: &Path) -> Result<Vec<u8>, TlsError> {
    read_pem(path, "CA certificate")
}
