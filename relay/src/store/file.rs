//! The store's file: created private, refused when empty or foreign (unless told to
//! start anew: `ldpcov-durable`'s file guard says which), its format and key check
//! verified, its tables created.

use super::*;

/// Makes sure `path` is a relay store file or absent: creates it (0600) when absent,
/// and refuses an empty or foreign file unless `init_empty` (then an empty file is
/// emptied again by redb, a foreign one renamed aside). Whether a store existed.
pub(super) fn prepare_file(path: &Path, init_empty: bool) -> Result<bool, StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let state = inspect(path).map_err(io)?;
    let what = match state {
        FileState::Missing => {
            create_private(path).map_err(io)?;
            return Ok(false);
        }
        FileState::Redb => return Ok(true),
        FileState::Empty => "empty (0 bytes)",
        FileState::NotRedb => "another kind of file",
    };
    if !init_empty {
        return Err(StoreError::NotAStore {
            path: path.to_path_buf(),
            what,
        });
    }
    if state == FileState::NotRedb {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let aside = path.with_extension(format!("redb.refused-{secs}"));
        std::fs::rename(path, &aside).map_err(io)?;
        tracing::warn!(
            file = %path.display(),
            moved_to = %aside.display(),
            "--init-empty: the store file was not a relay store; moved it aside and starting a new store"
        );
        create_private(path).map_err(io)?;
    } else {
        tracing::warn!(file = %path.display(), "--init-empty: the store file was empty; starting a new store");
    }
    Ok(false)
}

/// Checks (or, for a new store, writes) the format version and the key check, and
/// creates every table.
pub(super) fn init_tables(
    db: &Database,
    path: &Path,
    existed: bool,
    key: &[u8; 32],
) -> Result<(), StoreError> {
    let txn = begin_durable(db)?;
    {
        let mut meta = txn.open_table(META)?;
        let version = meta.get("format_version")?.map(|v| v.value());
        match version {
            None if existed => {
                return Err(StoreError::NotAStore {
                    path: path.to_path_buf(),
                    what: "a database of another program",
                });
            }
            None => {
                meta.insert("format_version", FORMAT_VERSION)?;
            }
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(StoreError::Corrupt(format!(
                    "format version {other}, this relay reads {FORMAT_VERSION} (not migrated: let the relay that wrote it forward its batches, then start on an empty data directory)"
                )));
            }
        }
        let mut check = txn.open_table(KEY_CHECK)?;
        let stored = check.get("check")?.map(|v| v.value());
        match stored {
            None => {
                check.insert("check", key_check(key))?;
            }
            Some(stored) if stored == key_check(key) => {}
            Some(_) => {
                return Err(StoreError::OtherKey {
                    path: path.to_path_buf(),
                });
            }
        }
        txn.open_table(WINDOWS)?;
        txn.open_table(WINDOW_REPORTS)?;
        txn.open_table(SALTS)?;
        txn.open_table(DEVICES)?;
        txn.open_table(CIPHERTEXTS)?;
        txn.open_table(PINS)?;
        txn.open_table(BATCHES)?;
        txn.open_table(BATCH_REPORTS)?;
        txn.open_table(COUNTERS)?;
        txn.open_table(BATCH_FORMED)?;
        txn.open_table(PINNED_KEYS)?;
        txn.open_table(KEY_CONFLICTS)?;
        txn.open_table(DEVICES_SEEN)?;
        txn.open_table(BATCH_HISTORY)?;
        txn.open_table(RETIRED)?;
    }
    txn.commit()?;
    Ok(())
}

/// Creates the store file at `path`, empty and 0600 (redb then initialises it); fails
/// if it exists.
fn create_private(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map(drop)
}
