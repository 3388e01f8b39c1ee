//! The store-file guard: what a file is before redb touches it, so that a file that
//! cannot be a store (0 bytes, truncated, another program's) is refused with a clear
//! error instead of being initialised over or failing deep inside redb.

use std::io::Read;
use std::path::Path;

/// The first bytes of every redb file.
pub const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// What is at a store file's path, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// Nothing: a new store.
    Missing,
    /// A file of 0 bytes (usually: the operator's data is gone).
    Empty,
    /// A file that starts with redb's magic number.
    Redb,
    /// A file that does not (another program's file, or one truncated inside the
    /// magic number).
    NotRedb,
}

/// Reads the first bytes of the file at `path` and says what it is; only an I/O
/// error other than "not found" is an error.
pub fn inspect(path: &Path) -> std::io::Result<FileState> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(e) => return Err(e),
    };
    let mut head = Vec::with_capacity(REDB_MAGIC.len());
    file.take(REDB_MAGIC.len() as u64).read_to_end(&mut head)?;
    Ok(if head.is_empty() {
        FileState::Empty
    } else if head == REDB_MAGIC {
        FileState::Redb
    } else {
        FileState::NotRedb
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_of(bytes: Option<&[u8]>) -> FileState {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.redb");
        if let Some(bytes) = bytes {
            std::fs::write(&path, bytes).expect("write");
        }
        inspect(&path).expect("inspect")
    }

    #[test]
    fn a_missing_file_is_a_new_store() {
        assert_eq!(state_of(None), FileState::Missing);
    }

    #[test]
    fn a_zero_byte_file_is_empty() {
        assert_eq!(state_of(Some(b"")), FileState::Empty);
    }

    #[test]
    fn a_foreign_or_truncated_file_is_not_redb() {
        assert_eq!(state_of(Some(b"SQLite format 3\0")), FileState::NotRedb);
        assert_eq!(state_of(Some(&REDB_MAGIC[..4])), FileState::NotRedb);
    }

    #[test]
    fn a_redb_file_is_recognised() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.redb");
        drop(redb::Database::create(&path).expect("create"));
        assert_eq!(inspect(&path).expect("inspect"), FileState::Redb);
    }
}
