//! Why the durable store could not be opened ([`DurableError`]), and redb's errors as
//! the store's causes.

use std::path::PathBuf;

use thiserror::Error;

use crate::store::Cause;
use crate::store::codec::Corruption;

/// Why the durable store could not be opened.
#[derive(Debug, Error)]
pub enum DurableError {
    /// The data directory or the database file could not be created, read or made
    /// private.
    #[error("store file system error on {path}: {source}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database reported an error (in the message, not a source: the daemon prints
    /// an error's sources after it, and the cause would appear twice).
    #[error("database: {0}")]
    Db(redb::Error),
    /// The database holds something this version cannot read (in the message, as
    /// above).
    #[error("corrupt or incompatible store: {0}")]
    Corrupt(Corruption),
    /// The commit thread could not be started.
    #[error("cannot start the commit thread: {0}")]
    Thread(std::io::Error),
    /// The database file is empty or not a redb database of ours.
    #[error("{path} {why}: it is not an ldpcov database; move it away{hint}")]
    NotLdpcov {
        /// The database file.
        path: PathBuf,
        /// What is wrong with it ("is empty (0 bytes)", ...).
        why: &'static str,
        /// What else the operator can do (`" or pass --init-empty"` for an empty file).
        hint: &'static str,
    },
    /// redb's integrity check found damage it could not repair.
    #[error(
        "{path} failed redb's integrity check and cannot be repaired ({verdict}); {readable}; restore it from a backup"
    )]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// redb's verdict (in the message, not a source: the daemon prints an error's
        /// sources after it, and the verdict would appear twice).
        verdict: redb::DatabaseError,
        /// What could still be read from the file, in words ("2 collections with 60
        /// reports were still readable", or that nothing was).
        readable: String,
    },
    /// The storage engine panicked while opening the file (redb panics on some damaged
    /// files).
    #[error(
        "the storage engine panicked while opening {path} ({message}): the file is probably corrupt; restore it from a backup"
    )]
    Panicked {
        /// The database file.
        path: PathBuf,
        /// The panic's message.
        message: String,
    },
}

impl From<redb::Error> for DurableError {
    fn from(e: redb::Error) -> Self {
        DurableError::Db(e)
    }
}

impl From<Corruption> for DurableError {
    fn from(e: Corruption) -> Self {
        DurableError::Corrupt(e)
    }
}

/// redb's errors as store causes, each with the prefix that says what failed.
macro_rules! redb_causes {
    ($($error:ty => $what:literal),* $(,)?) => {$(
        impl From<$error> for Cause {
            fn from(e: $error) -> Self {
                Cause::backend($what, e)
            }
        }
    )*};
}

redb_causes! {
    redb::Error => "database",
    redb::TransactionError => "transaction",
    redb::SetDurabilityError => "durability",
    redb::TableError => "table",
    redb::StorageError => "storage",
    redb::CommitError => "commit",
}

/// The cause of a database that was closed after a failed commit and could not be
/// reopened.
pub(super) fn reopen_failed(e: DurableError) -> Cause {
    Cause::backend("cannot reopen the database", e)
}
