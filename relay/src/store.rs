//! The relay's durable store: redb in the data directory, written by one commit thread
//! with group commit, read by anyone through snapshots.
//!
//! # Tables
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | name | `format_version`, `next_batch_seq` |
//! | `key_windows` | (collection id, key id) | an open window: opened at, its close rule (min batch, seconds), reports, next position |
//! | `key_window_reports` | (collection id, key id, arrival position) | an encoded `SealedReport` |
//! | `collection_salts` | collection id | the collection's random 32-byte salt |
//! | `collection_devices` | (collection id, HMAC-SHA256(device tag key, salt ‖ device id)) | the device's submission id |
//! | `device_tag_key_check` | `check` | HMAC-SHA256(device tag key, a fixed label): which key wrote the tags |
//! | `batch_formed` | batch sequence number | when the batch was formed (unix seconds) |
//! | `collection_ciphertexts` | (collection id, SHA-256 of the sealed bytes) | — |
//! | `pinned_settings` | collection id | the collection's [`PinnedSettings`] |
//! | `batches` | batch sequence number | batch id, size, collection id |
//! | `batch_reports` | (batch sequence number, position in the batch) | an encoded `SealedReport` |
//! | `counters` | (collection id, name) | `forwarded_batches`, `forwarded_reports` |
//! | `pinned_keys` | (collection id, key id) | the 32 public-key bytes first seen for that key id |
//! | `key_conflicts` | collection id | (times the aggregator answered other bytes for a pinned key id, the last time) |
//! | `devices_first_seen` | HMAC-SHA256(device tag key, "first seen" ‖ device id) | when the device's first report was stored (unix seconds) |
//! | `batch_history` | (collection id, batch sequence number) | (formed at, reports, reports from new devices) |
//!
//! A collection's device records hold a keyed hash of the device id, never the id,
//! and stay for the collection's life (the relay's): a device sends **one report per
//! collection**, in any window, and a resend of its submission id stays a duplicate
//! after its window became a batch. The hash of every stored report's sealed bytes
//! (`enc`, `ciphertext`) stays as long: the same bytes under another submission id or
//! device are a duplicate, so they never sit in two batches.
//!
//! # What the store file alone reveals
//!
//! The device tags are keyed with the **device tag key** ([`StoreOptions`]), which the
//! daemon derives from its device-token secret
//! ([`DeviceTokenIssuer::device_tag_key`](crate::DeviceTokenIssuer::device_tag_key))
//! and which is never written to the store (only a check value, an HMAC of a fixed
//! label under it, so that a relay started with another key refuses the store instead
//! of letting every device report again). Whoever holds the store file **without**
//! the device-token secret learns: which collections the relay serves, how many
//! devices reported to each, the submission ids, the sealed reports (which it cannot
//! open), the batches and when they were formed; it can **not** tell whether a given
//! device id reported (testing a guess needs the key), nor link a report to a device.
//! Whoever also holds the device-token secret can test device ids, as the relay
//! itself can, and can mint device tokens anyway. A batch holds its sealed
//! reports in shuffled order and nothing else about them: no device, submission id or
//! arrival time (its sequence number orders batches, not reports).
//!
//! # Writes
//!
//! Every write is a [`Command`] to the commit thread (`ldpcov-durable`'s writer, applying
//! them with `RelayWriter`), which takes every command waiting, applies them in order
//! in one redb write transaction, commits it with
//! [`Durability::Immediate`](redb::Durability::Immediate) (the commit returns once the
//! file is fsynced) and only then answers each caller: an acknowledged submission is on
//! disk. A failed commit fails every command of the group and changes nothing; the
//! store's write health ([`RelayStore::write_health`]) turns false until a commit
//! succeeds again. A panic of the database engine (a damaged file) fails the group as
//! [`StoreError::Damaged`] and the thread goes on.
//!
//! # Windows and batches
//!
//! A window holds the reports of **one key id** of one collection: windows are keyed
//! by (collection, key id), so every batch is sealed to one key and the aggregator
//! cannot split it by key id (during a key rotation a collection has two windows, each
//! closing on its own). A window opens at its first report and takes the close rule of
//! that moment (the service's: the larger of the collection's and the relay's floor).
//! [`RelayStore::form_batches`] closes every window the batch rule says is due
//! ([`CloseRule::is_due`], `batch_rule.rs`: old enough **and** full enough, under the
//! floor it is given too; a window past its time stays open until it has enough), in
//! one transaction per call: its reports shuffled by an OS-seeded CSPRNG
//! ([`StdRng::from_os_rng`], a Fisher–Yates shuffle), a random 16-byte batch id, the
//! batch stored, the window's reports deleted (the device and ciphertext records
//! stay). The next report of that key opens a new window. A batch stays until
//! [`RelayStore::forwarded`] deletes it.
//!
//! A crash at any point leaves the last committed state: every acknowledged report is
//! in exactly one of a window or a batch, and a batch's id and order never change.
//!
//! # New devices (Sybils)
//!
//! A device is **new in a window** when the relay stored its first report (to any
//! collection) no earlier than the window opened (`devices_first_seen`, a keyed hash of
//! the device id, without the per-collection salt, so the relay recognises a device
//! across collections but the file alone does not name it). A window counts its reports
//! from new devices; with a cap ([`Submission::new_device_cap`]) the cap + 1-th new
//! device of a window is refused ([`SubmitOutcome::NewDeviceCapReached`]), nothing
//! stored. Each batch's count is kept (`batch_history`) and shown in
//! [`RelayStore::status`]: a batch filled by fresh device ids is what a token issuer
//! minting Sybils would produce.
//!
//! # Pinned keys
//!
//! [`RelayStore::pin_keys`] keeps, for the collection's life, the public-key bytes
//! first seen for each (collection, key id); the [`Gate`](crate::Gate) serves devices
//! those bytes only and holds a collection whose aggregator later answers other bytes
//! for a pinned id, counting each time in `key_conflicts`.

use std::collections::HashMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use hmac::{Hmac, KeyInit, Mac};
use ldpcov_durable::{
    AfterPanic, Apply, FileState, Group, GroupLimits, GroupStats, Linger, Panicked, Writer,
    begin_durable, catch_panic, inspect,
};
use ldpcov_proto::v1::{RelayBatchRecord, RelayStatus, SealedReport};
use prost::Message;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch};

use crate::batch_rule::CloseRule;
use crate::pin::PinnedSettings;
use crate::token::DeviceId;

/// Name of the database file inside the data directory.
pub const DB_FILE: &str = "ldpcov-relay.redb";
/// Version of the table layout; a store with another version is refused. Versions 1
/// (windows per collection, device records per window) and 2 (device tags keyed with
/// the salt alone) are not migrated: drain it with the relay that wrote it.
pub const FORMAT_VERSION: u64 = 3;
/// Most commands applied in one group commit.
const MAX_GROUP: usize = 1024;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const WINDOWS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("key_windows");
const WINDOW_REPORTS: TableDefinition<(&str, u32, u64), &[u8]> =
    TableDefinition::new("key_window_reports");
const SALTS: TableDefinition<&str, [u8; 32]> = TableDefinition::new("collection_salts");
const DEVICES: TableDefinition<(&str, [u8; 32]), [u8; 16]> =
    TableDefinition::new("collection_devices");
const CIPHERTEXTS: TableDefinition<(&str, [u8; 32]), ()> =
    TableDefinition::new("collection_ciphertexts");
const PINS: TableDefinition<&str, &[u8]> = TableDefinition::new("pinned_settings");
const BATCHES: TableDefinition<u64, &[u8]> = TableDefinition::new("batches");
const BATCH_REPORTS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("batch_reports");
const COUNTERS: TableDefinition<(&str, &str), u64> = TableDefinition::new("counters");
const KEY_CHECK: TableDefinition<&str, [u8; 32]> = TableDefinition::new("device_tag_key_check");
const BATCH_FORMED: TableDefinition<u64, u64> = TableDefinition::new("batch_formed");
const PINNED_KEYS: TableDefinition<(&str, u32), [u8; 32]> = TableDefinition::new("pinned_keys");
const KEY_CONFLICTS: TableDefinition<&str, (u64, u64)> = TableDefinition::new("key_conflicts");
const DEVICES_SEEN: TableDefinition<[u8; 32], u64> = TableDefinition::new("devices_first_seen");
/// Collections retired (closed or deleted at the aggregator): (reason code, when,
/// window reports dropped, batch reports dropped).
const RETIRED: TableDefinition<&str, (u64, u64, u64, u64)> = TableDefinition::new("retired");
const BATCH_HISTORY: TableDefinition<(&str, u64), (u64, u64, u64)> =
    TableDefinition::new("batch_history");

/// Most batches of a collection [`RelayStore::status`] lists (`recent_batches`).
pub const RECENT_BATCHES: usize = 20;

/// How the store is opened.
#[derive(Clone)]
pub struct StoreOptions {
    /// The key of the device tags (see the module docs): the daemon's is derived from
    /// its device-token secret. A store written with another key is refused.
    pub device_tag_key: [u8; 32],
    /// Start a new store when the file is empty (0 bytes) or not a relay store; a
    /// non-empty file is kept, renamed `<file>.refused-<unix seconds>`
    /// (`serve --init-empty`). Without it such a file is refused.
    pub init_empty: bool,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("init_empty", &self.init_empty)
            .finish_non_exhaustive()
    }
}

impl StoreOptions {
    /// These options with `key`, refusing a file that is not a relay store.
    pub fn with_key(device_tag_key: [u8; 32]) -> Self {
        StoreOptions {
            device_tag_key,
            init_empty: false,
        }
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database failed (in the message: the daemon prints sources after it).
    #[error("database: {0}")]
    Db(String),
    /// The database holds something this version cannot read.
    #[error("corrupt or incompatible relay store: {0}")]
    Corrupt(String),
    /// The commit thread has stopped (the store is shutting down, or it panicked).
    #[error("the store's commit thread has stopped")]
    Stopped,
    /// The file in the data directory is not a relay store (empty, or another
    /// program's file): refused, left as it is.
    #[error(
        "{path} is {what}: not an ldpcov relay store; move it away or pass --init-empty (an empty file would otherwise silently become a new, empty store and the reports waiting to be forwarded would be lost)"
    )]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What it is ("empty (0 bytes)", "another kind of file").
        what: &'static str,
    },
    /// The store was written with another device tag key (another device-token
    /// secret).
    #[error(
        "{path} was written with another device-token secret (its device tags would not match: every device could report again); start the relay with the secret that wrote it, or drain it and start on an empty data directory"
    )]
    OtherKey {
        /// The file.
        path: PathBuf,
    },
    /// The database engine failed inside (a damaged file): reported, not a crash.
    #[error(
        "the relay store {path} is damaged (the database engine failed reading it: {message}); restore it from a backup or move it away"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The engine's panic message.
        message: String,
    },
}

/// A panic of the database engine on the store at `path`, as [`StoreError::Damaged`].
fn damaged(path: &Path, panic: &Panicked) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        message: panic.message_or("an internal error"),
    }
}

/// Runs `f`, turning a panic of the database engine into [`StoreError::Damaged`].
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    catch_panic(f).unwrap_or_else(|panic| Err(damaged(path, &panic)))
}

macro_rules! db_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Db(e.to_string())
            }
        }
    )*};
}
db_errors!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::SetDurabilityError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl From<crate::pin::CorruptPin> for StoreError {
    fn from(e: crate::pin::CorruptPin) -> Self {
        StoreError::Corrupt(e.0)
    }
}

/// A device's sealed report, checked by the service, to store in its collection's
/// window.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The collection.
    pub collection_id: String,
    /// The device (held in memory only; the store keeps a keyed hash in the window).
    pub device: DeviceId,
    /// The device's submission id.
    pub submission_id: [u8; 16],
    /// The sealed report, stored as received.
    pub sealed: SealedReport,
    /// Now, unix seconds.
    pub now: u64,
    /// The collection's close rule, used when this report opens a window.
    pub rule: CloseRule,
    /// Most reports from new devices (see the module docs) a window takes; 0: no cap.
    pub new_device_cap: u64,
}

/// What became of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Stored (durably) in its window.
    Stored,
    /// This device already stored this submission id in the collection (in any
    /// window, even one already forwarded as a batch), or these sealed bytes are
    /// already stored for the collection: nothing changed.
    Duplicate,
    /// This device already stored another report in the collection: refused.
    DeviceAlreadyReported,
    /// This device already stored other bytes under this submission id in the
    /// collection: refused, the new bytes not stored.
    SubmissionIdReused,
    /// The device is new and its window already holds `new_device_cap` reports from
    /// new devices: refused, nothing stored.
    NewDeviceCapReached,
    /// The collection was retired ([`RelayStore::retire`]): refused, nothing stored.
    Retired,
}

/// Why a collection was retired: what the aggregator answered for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetireReason {
    /// The aggregator closed it (it takes no more reports).
    Closed,
    /// The aggregator no longer knows it (deleted).
    Deleted,
}

impl RetireReason {
    /// `closed` or `deleted` (the status's and the metrics' label).
    pub fn as_str(self) -> &'static str {
        match self {
            RetireReason::Closed => "closed",
            RetireReason::Deleted => "deleted",
        }
    }

    fn code(self) -> u64 {
        match self {
            RetireReason::Closed => 1,
            RetireReason::Deleted => 2,
        }
    }

    fn from_code(code: u64) -> Result<Self, StoreError> {
        match code {
            1 => Ok(RetireReason::Closed),
            2 => Ok(RetireReason::Deleted),
            other => Err(StoreError::Corrupt(format!("retire reason {other}"))),
        }
    }
}

/// A retired collection: why, when, and the reports the relay dropped then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    /// Why.
    pub reason: RetireReason,
    /// When (unix seconds).
    pub at: u64,
    /// Reports of its open windows, dropped.
    pub window_reports: u64,
    /// Reports of its batches not yet acknowledged, dropped.
    pub batch_reports: u64,
}

/// A batch formed by [`RelayStore::form_due_batches`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormedBatch {
    /// Its sequence number (the store's key).
    pub seq: u64,
    /// Its collection.
    pub collection_id: String,
    /// Its 16 random bytes of id.
    pub batch_id: [u8; 16],
    /// Its reports.
    pub size: u64,
}

/// A stored batch not yet acknowledged by the aggregator (same fields as
/// [`FormedBatch`]).
pub type PendingBatch = FormedBatch;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A key id and its 32 public-key bytes.
type KeyBytes = (u32, [u8; 32]);

/// A write, applied by the commit thread.
pub(super) enum Command {
    Submit(Box<Submission>, Reply<SubmitOutcome>),
    FormDue(FormRequest, Reply<Vec<FormedBatch>>),
    Forwarded(u64, Reply<bool>),
    Pin(Box<(String, PinnedSettings)>, Reply<PinnedSettings>),
    PinKeys(Box<(String, Vec<KeyBytes>)>, Reply<Vec<KeyBytes>>),
    KeyConflict(String, u64, Reply<()>),
    Retire(Box<(String, RetireReason, u64)>, Reply<Retired>),
}

/// Which windows [`apply_form_due`] may close.
pub(super) struct FormRequest {
    now: u64,
    floor: CloseRule,
    only: Option<Vec<String>>,
}

impl Command {
    fn fail(self, e: &StoreError) {
        let e = StoreError::Db(e.to_string());
        match self {
            Command::Submit(_, r) => drop(r.send(Err(e))),
            Command::FormDue(_, r) => drop(r.send(Err(e))),
            Command::Forwarded(_, r) => drop(r.send(Err(e))),
            Command::Pin(_, r) => drop(r.send(Err(e))),
            Command::PinKeys(_, r) => drop(r.send(Err(e))),
            Command::KeyConflict(_, _, r) => drop(r.send(Err(e))),
            Command::Retire(_, r) => drop(r.send(Err(e))),
        }
    }
}

/// The relay's durable store (see the module docs). Dropping it stops the commit
/// thread after the commands already sent.
pub struct RelayStore {
    db: Arc<Database>,
    path: PathBuf,
    writer: Writer<Command>,
    health: watch::Receiver<bool>,
}

impl std::fmt::Debug for RelayStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayStore").finish_non_exhaustive()
    }
}

impl RelayStore {
    /// Opens (or creates) the store in `dir` with a device tag key of zeros: for tests
    /// and examples only (anyone with the file could test device ids); the daemon
    /// uses [`open_with`](Self::open_with) and its own key.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, &StoreOptions::with_key([0; 32]))
    }

    /// Opens (or creates) the store in `dir` and starts its commit thread. The
    /// directory is made 0700 and the file 0600. A file that is empty or not a relay
    /// store is refused ([`StoreError::NotAStore`]) unless `options.init_empty`; a
    /// store written with another key is refused ([`StoreError::OtherKey`]); a damaged
    /// file is reported ([`StoreError::Damaged`]), not a crash.
    pub fn open_with(dir: &Path, options: &StoreOptions) -> Result<Self, StoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        let path = dir.join(DB_FILE);
        let existed = prepare_file(&path, options.init_empty)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(&path))?;
        let db = guarded(&path, || {
            let db = Database::builder().create(&path)?;
            init_tables(&db, &path, existed, &options.device_tag_key)?;
            Ok(db)
        })?;
        let db = Arc::new(db);
        let (health_tx, health) = watch::channel(true);
        let limits = GroupLimits {
            max_weight: MAX_GROUP,
            linger: Linger::Waiting,
        };
        let apply = RelayWriter {
            db: Arc::clone(&db),
            path: path.clone(),
            key: options.device_tag_key,
            health: health_tx,
        };
        let writer =
            Writer::start("relay-commit", limits, apply).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        Ok(RelayStore {
            db,
            path,
            writer,
            health,
        })
    }

    /// Whether the last write transaction committed (drives gRPC health).
    pub fn write_health(&self) -> watch::Receiver<bool> {
        self.health.clone()
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.writer
            .send(make(reply))
            .map_err(|_| StoreError::Stopped)?;
        rx.await.map_err(|_| StoreError::Stopped)?
    }

    /// Stores a submission in its collection's window (opening one if none is open);
    /// returns once the commit holding it is on disk.
    pub async fn submit(&self, submission: Submission) -> Result<SubmitOutcome, StoreError> {
        self.call(|r| Command::Submit(Box::new(submission), r))
            .await
    }

    /// Turns every due window into a batch (see the module docs); returns the batches
    /// formed, once on disk. [`form_batches`](Self::form_batches) without a floor.
    pub async fn form_due_batches(&self, now: u64) -> Result<Vec<FormedBatch>, StoreError> {
        let floor = CloseRule {
            min_batch_size: 0,
            window_seconds: 0,
        };
        self.form_batches(now, floor, None).await
    }

    /// Turns every window that is due and also meets `floor` into a batch, of the
    /// collections in `only` (all when `None`); returns the batches formed, once on
    /// disk.
    pub async fn form_batches(
        &self,
        now: u64,
        floor: CloseRule,
        only: Option<Vec<String>>,
    ) -> Result<Vec<FormedBatch>, StoreError> {
        self.call(|r| Command::FormDue(FormRequest { now, floor, only }, r))
            .await
    }

    /// The collections with an open window (due or not).
    pub fn window_collections(&self) -> Result<Vec<String>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut out: Vec<String> = Vec::new();
            for row in txn.open_table(WINDOWS)?.iter()? {
                let (key, _) = row?;
                let (id, _) = key.value();
                if out.last().is_none_or(|l| l != id) {
                    out.push(id.to_string());
                }
            }
            Ok(out)
        })
    }

    /// The collections with a window that is due and meets `floor` at `now`.
    pub fn due_collections(&self, now: u64, floor: CloseRule) -> Result<Vec<String>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut out: Vec<String> = Vec::new();
            for row in txn.open_table(WINDOWS)?.iter()? {
                let (key, bytes) = row?;
                let (id, _) = key.value();
                if Window::decode(bytes.value())?.due(now, floor)
                    && out.last().is_none_or(|l| l != id)
                {
                    out.push(id.to_string());
                }
            }
            Ok(out)
        })
    }

    /// The settings pinned for a collection, if any.
    pub fn pinned(&self, collection_id: &str) -> Result<Option<PinnedSettings>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(PINS)?;
            let pinned = table.get(collection_id)?;
            Ok(pinned
                .map(|p| PinnedSettings::decode(collection_id, p.value()))
                .transpose()?)
        })
    }

    /// Pins `settings` for a collection unless some are pinned already; returns the
    /// pinned ones (these, or the earlier), once on disk.
    pub async fn pin(
        &self,
        collection_id: &str,
        settings: PinnedSettings,
    ) -> Result<PinnedSettings, StoreError> {
        let id = collection_id.to_string();
        self.call(|r| Command::Pin(Box::new((id, settings)), r))
            .await
    }

    /// Pins the public-key bytes of `keys` (key id, bytes) for a collection where no
    /// bytes are pinned for that id yet; returns, for each, the bytes pinned (these, or
    /// the earlier), once on disk.
    pub async fn pin_keys(
        &self,
        collection_id: &str,
        keys: Vec<(u32, [u8; 32])>,
    ) -> Result<Vec<(u32, [u8; 32])>, StoreError> {
        let id = collection_id.to_string();
        self.call(|r| Command::PinKeys(Box::new((id, keys)), r))
            .await
    }

    /// The key bytes pinned for a collection's key id, if any.
    pub fn pinned_key(
        &self,
        collection_id: &str,
        key_id: u32,
    ) -> Result<Option<[u8; 32]>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            Ok(txn
                .open_table(PINNED_KEYS)?
                .get((collection_id, key_id))?
                .map(|v| v.value()))
        })
    }

    /// Counts, durably, one more time the aggregator answered other key bytes for a
    /// pinned key id of the collection, at `now`.
    pub async fn record_key_conflict(
        &self,
        collection_id: &str,
        now: u64,
    ) -> Result<(), StoreError> {
        let id = collection_id.to_string();
        self.call(|r| Command::KeyConflict(id, now, r)).await
    }

    /// A formed batch's reports from devices new in its window, if it is recorded.
    pub fn batch_new_devices(
        &self,
        collection_id: &str,
        seq: u64,
    ) -> Result<Option<u64>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            Ok(txn
                .open_table(BATCH_HISTORY)?
                .get((collection_id, seq))?
                .map(|v| v.value().2))
        })
    }

    /// Retires collection `id` (closed or deleted at the aggregator), durably and at
    /// once: drops its open windows and its batches not yet acknowledged (their
    /// reports can never be counted), and refuses its later submissions
    /// ([`SubmitOutcome::Retired`]). Returns the record, the first one if it was
    /// already retired.
    pub async fn retire(
        &self,
        id: &str,
        reason: RetireReason,
        now: u64,
    ) -> Result<Retired, StoreError> {
        self.call(|r| Command::Retire(Box::new((id.to_string(), reason, now)), r))
            .await
    }

    /// Every retired collection.
    pub fn retired_all(&self) -> Result<HashMap<String, Retired>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut out = HashMap::new();
            for row in txn.open_table(RETIRED)?.iter()? {
                let (id, v) = row?;
                out.insert(id.value().to_string(), decode_retired(v.value())?);
            }
            Ok(out)
        })
    }

    /// When the longest-due window became due (its open time plus its window,
    /// unix seconds), of the windows due at `now` under `floor`; `None` without one.
    pub fn oldest_due_window(&self, now: u64, floor: CloseRule) -> Result<Option<u64>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let mut oldest: Option<u64> = None;
            for row in txn.open_table(WINDOWS)?.iter()? {
                let w = Window::decode(row?.1.value())?;
                if w.due(now, floor) {
                    let since = w.rule.due_from(floor, w.opened);
                    oldest = Some(oldest.map_or(since, |o| o.min(since)));
                }
            }
            Ok(oldest)
        })
    }

    /// The aggregator acknowledged batch `seq`: deletes it and counts it as
    /// forwarded, durably. False when it was already gone.
    pub async fn forwarded(&self, seq: u64) -> Result<bool, StoreError> {
        self.call(|r| Command::Forwarded(seq, r)).await
    }

    /// The stored batches, oldest first.
    pub fn pending_batches(&self) -> Result<Vec<PendingBatch>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(BATCHES)?;
            let mut out = Vec::new();
            for row in table.iter()? {
                let (seq, bytes) = row?;
                out.push(decode_batch(seq.value(), bytes.value())?);
            }
            Ok(out)
        })
    }

    /// A stored batch's reports in their (shuffled) order; empty if it is gone.
    pub fn batch_reports(&self, seq: u64) -> Result<Vec<SealedReport>, StoreError> {
        guarded(&self.path, || {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(BATCH_REPORTS)?;
            let mut out = Vec::new();
            for row in table.range((seq, 0)..=(seq, u64::MAX))? {
                let (_, bytes) = row?;
                let report = SealedReport::decode(bytes.value())
                    .map_err(|e| StoreError::Corrupt(format!("a report of batch {seq}: {e}")))?;
                out.push(report);
            }
            Ok(out)
        })
    }
}

mod apply;
mod file;
mod records;
mod status;

use apply::*;
use file::*;
use records::*;

#[cfg(test)]
mod tests;
