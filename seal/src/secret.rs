//! The aggregator's master secret: 32 random bytes every key pair is derived from.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use zeroize::{Zeroize, Zeroizing};

/// The aggregator daemon's master secret: 32 bytes from the operating system's CSPRNG.
///
/// Every HPKE key pair of every collection and key id is derived from it
/// ([`CollectionKeys`](crate::CollectionKeys)), so it is the only secret an aggregator
/// (or each of several stateless replicas) keeps. `Debug` does not print it and the
/// bytes are overwritten with zeros when it is dropped. It cannot be cloned; a
/// [`CollectionKeys`](crate::CollectionKeys) holds its own copy (zeroized on drop too).
pub struct MasterSecret([u8; MasterSecret::LEN]);

/// Why a master secret could not be made, read or written. No variant carries secret
/// bytes or file contents.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed: {0}")]
    Random(getrandom::Error),
    /// Reading, creating or renaming the key file failed.
    #[error("master secret file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The key file exists but does not hold exactly 64 hexadecimal digits (surrounding
    /// whitespace allowed). It is left as it is: a malformed secret is never replaced.
    #[error("master secret file {path} is malformed: {reason} (expected 64 hexadecimal digits)")]
    Malformed {
        /// The key file.
        path: PathBuf,
        /// What is wrong, without the file's contents.
        reason: String,
    },
}

impl MasterSecret {
    /// The length of a master secret in bytes.
    pub const LEN: usize = 32;

    /// A fresh secret from the operating system's CSPRNG.
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = [0u8; Self::LEN];
        getrandom::fill(&mut bytes).map_err(SecretError::Random)?;
        Ok(Self(bytes))
    }

    /// A secret from its bytes (for tests and for secrets kept by other means).
    pub fn from_bytes(bytes: [u8; Self::LEN]) -> Self {
        Self(bytes)
    }

    /// The secret's bytes.
    pub fn as_bytes(&self) -> &[u8; Self::LEN] {
        &self.0
    }

    /// 32 bytes derived from the secret for the purpose `info`:
    /// `HKDF-SHA256(salt = "ldpcov-seal v1", ikm = secret, info)`, zeroized on drop. Every
    /// key this crate derives from a secret is one of these; distinct `info`s give
    /// independent values.
    pub fn derive(&self, info: &[u8]) -> Zeroizing<[u8; 32]> {
        let hkdf = hkdf::Hkdf::<sha2::Sha256>::new(Some(crate::DERIVATION_SALT), self.as_bytes());
        let mut out = Zeroizing::new([0u8; 32]);
        // 32 bytes is far below HKDF-SHA256's limit of 255·32.
        let _ = hkdf.expand(info, out.as_mut_slice());
        out
    }

    /// A copy for another owner inside the crate (zeroized on its own drop).
    pub(crate) fn duplicate(&self) -> Self {
        Self(self.0)
    }

    /// Reads the secret from `path` (64 hexadecimal digits, surrounding whitespace
    /// allowed). If the file does not exist, generates a secret and writes it there
    /// first: created with mode 0600 (on Unix) under a temporary name in the same
    /// directory, synced, then moved into place (a hard link, which never replaces an
    /// existing file, falling back to a rename), so a reader never sees a partial
    /// file. If another process creates the file meanwhile, its secret wins and is the
    /// one returned. A file that exists but is malformed is refused
    /// ([`SecretError::Malformed`]), never overwritten. An existing secret whose file
    /// is open to its group or to others is loaded all the same, with a WARN
    /// ([`crate::warn_if_loose`]).
    pub fn load_or_create(path: impl AsRef<Path>) -> Result<Self, SecretError> {
        let path = path.as_ref();
        match fs::read(path) {
            Ok(contents) => {
                let secret = Self::parse(path, Zeroizing::new(contents))?;
                crate::warn_if_loose(path, "HPKE secret");
                return Ok(secret);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(io_error(path, source)),
        }
        let secret = Self::generate()?;
        secret.write_new(path)?;
        // Read back what is now in place: if another process won the race, its secret.
        let contents = fs::read(path).map_err(|source| io_error(path, source))?;
        Self::parse(path, Zeroizing::new(contents))
    }

    fn parse(path: &Path, contents: Zeroizing<Vec<u8>>) -> Result<Self, SecretError> {
        let malformed = |reason: String| SecretError::Malformed {
            path: path.to_path_buf(),
            reason,
        };
        let text = contents.trim_ascii();
        if text.len() != 2 * Self::LEN {
            return Err(malformed(format!(
                "{} bytes after trimming whitespace",
                text.len()
            )));
        }
        let mut bytes = [0u8; Self::LEN];
        if hex::decode_to_slice(text, &mut bytes).is_err() {
            bytes.zeroize();
            return Err(malformed("not hexadecimal".to_owned()));
        }
        Ok(Self(bytes))
    }

    /// Writes the secret to a temporary file beside `path` and links it into place
    /// without replacing an existing file.
    fn write_new(&self, path: &Path) -> Result<(), SecretError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "master-secret".to_owned());
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(SecretError::Random)?;
        let tmp = dir.join(format!(".{file_name}.{}.tmp", hex::encode(nonce)));

        let result = (|| {
            let mut file = create_private(&tmp)?;
            let mut text = Zeroizing::new(hex::encode(self.0));
            text.push('\n');
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            drop(file);
            // A hard link fails if `path` exists: a concurrent creator's secret is kept.
            // On a file system without hard links, a rename (the last creator wins).
            match fs::hard_link(&tmp, path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(_) => fs::rename(&tmp, path)?,
            }
            sync_dir(dir)
        })();
        let _ = fs::remove_file(&tmp);
        result.map_err(|source| io_error(path, source))
    }
}

#[cfg(unix)]
fn create_private(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

fn io_error(path: &Path, source: io::Error) -> SecretError {
    SecretError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Drop for MasterSecret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for MasterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterSecret(<redacted>)")
    }
}
