//! Optional TLS (rustls, ring provider) for the daemon and the admin CLI.
//!
//! The server takes a PEM certificate chain and a PEM private key
//! (`--tls-cert`, `--tls-key`); clients connect to an `https://` URL and trust either
//! the public web PKI roots (bundled, no system store needed) or one custom CA
//! (`--ca-cert`).

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

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

    /// Reads the certificate chain and private key files. Whether they parse and
    /// match is checked when the server starts.
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
        Ok(ServerTls {
            cert_pem,
            key_pem: read_pem(key, "private key")?,
        })
    }

    /// tonic's server configuration.
    pub fn config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
    }
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
