//! The commit thread's test hooks, behind one type, [`TestHooks`]: the commit thread
//! calls them unconditionally, and only the type's definition depends on the build.
//!
//! * In the crate's unit tests they inject commit failures (and a panic of the
//!   storage engine) and keep a log of what the
//!   commit thread did, in order, including every fsync of the database file (recorded
//!   by the storage backend itself, [`SyncProbe`]).
//! * Everywhere else [`TestHooks`] is an empty type whose methods do nothing: no
//!   failure is injected, nothing is recorded, the database file is opened as redb
//!   opens it.

use super::super::Cause;

/// Something the commit thread (or the database under it) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// A command joined the open batch.
    Added,
    /// The database file was synced to disk (`sync_data`: fsync/fdatasync).
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "recorded by the tests' backend only")
    )]
    Synced,
    /// `WriteTransaction::commit` returned `Ok`.
    Committed,
    /// A caller of a committed batch was sent its answer.
    Answered,
}

pub(super) use imp::TestHooks;

/// The unit tests' hooks: failures to inject and the event log.
#[cfg(test)]
mod imp {
    use std::fs::OpenOptions;
    use std::io;
    use std::ops::Bound;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::Duration;

    use redb::backends::FileBackend;
    use redb::{BackendError, DatabaseError, StorageBackend};
    use tokio::sync::watch;

    use super::{Cause, Event};

    /// An injected commit failure (its message is the cause's).
    #[derive(Debug, thiserror::Error)]
    #[error("injected commit failure")]
    struct InjectedFailure;

    /// The hooks of one store.
    #[derive(Debug)]
    pub(in super::super) struct TestHooks {
        /// Commits still to fail on purpose.
        fail_commits: AtomicU32,
        /// Whether the next commit panics, as redb does on some damaged files.
        panic_commit: AtomicBool,
        /// Whether the commit thread folds the appended reports when it stops (`false`:
        /// it stops as a crash would leave the file).
        fold_at_stop: AtomicBool,
        events: watch::Sender<Vec<Event>>,
    }

    impl Default for TestHooks {
        fn default() -> Self {
            TestHooks {
                fail_commits: AtomicU32::new(0),
                panic_commit: AtomicBool::new(false),
                fold_at_stop: AtomicBool::new(true),
                events: watch::channel(Vec::new()).0,
            }
        }
    }

    impl TestHooks {
        /// The hooks of a store opening now: nothing armed (the tests arm them).
        pub(in super::super) fn from_env() -> Self {
            Self::default()
        }

        /// Makes the next `n` batch commits fail (the transaction is aborted just before
        /// its commit).
        pub(in super::super) fn fail_next_commits(&self, n: u32) {
            self.fail_commits.store(n, Ordering::SeqCst);
        }

        /// The failure this commit is to fail with, if it is to fail (counts it down).
        pub(in super::super) fn injected_failure(&self) -> Option<Cause> {
            self.fail_commits
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
                .then(|| Cause::Other(Box::new(InjectedFailure)))
        }

        /// Makes the commit thread stop without folding the appended reports, as a
        /// crash leaves them.
        pub(in super::super) fn keep_appended_at_stop(&self) {
            self.fold_at_stop.store(false, Ordering::SeqCst);
        }

        /// Whether the commit thread folds the appended reports when it stops.
        pub(in super::super) fn fold_at_stop(&self) -> bool {
            self.fold_at_stop.load(Ordering::SeqCst)
        }

        /// Makes the next commit panic on the commit thread, just before redb's
        /// `commit` (as redb itself panics on some damaged files).
        pub(in super::super) fn panic_next_commit(&self) {
            self.panic_commit.store(true, Ordering::SeqCst);
        }

        /// Called just before redb's `commit`: panics if a panic was asked for.
        pub(in super::super) fn before_commit(&self) {
            if self.panic_commit.swap(false, Ordering::SeqCst) {
                panic!("injected storage engine panic");
            }
        }

        /// Appends `event` to the log.
        pub(in super::super) fn record(&self, event: Event) {
            self.events.send_modify(|events| events.push(event));
        }

        /// Everything recorded so far, in order.
        pub(in super::super) fn events(&self) -> Vec<Event> {
            self.events.borrow().clone()
        }

        /// Waits until `ready` holds for the events recorded so far (at most a minute, so a
        /// broken test fails instead of hanging).
        pub(in super::super) async fn wait_for(
            &self,
            what: &str,
            mut ready: impl FnMut(&[Event]) -> bool,
        ) {
            let mut rx = self.events.subscribe();
            tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|e| ready(e)))
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}: {:?}", self.events()))
                .expect("the sender lives in the hooks");
        }

        /// Opens (or creates) the database file through a backend that records every fsync.
        pub(in super::super) fn create_db(
            self: &Arc<Self>,
            builder: &redb::Builder,
            path: &Path,
        ) -> Result<redb::Database, DatabaseError> {
            builder.create_with_backend(SyncProbe::open(path, self.clone())?)
        }
    }

    /// redb's file backend, recording every `sync_data` in the hooks.
    #[derive(Debug)]
    struct SyncProbe {
        file: FileBackend,
        hooks: Arc<TestHooks>,
    }

    impl SyncProbe {
        /// Opens `path` the way `redb::Builder::create` does.
        fn open(path: &Path, hooks: Arc<TestHooks>) -> Result<Self, DatabaseError> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?;
            Ok(SyncProbe {
                file: FileBackend::new(file)?,
                hooks,
            })
        }
    }

    impl StorageBackend for SyncProbe {
        fn len(&self) -> Result<u64, io::Error> {
            self.file.len()
        }

        fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
            self.file.read(offset, out)
        }

        fn set_len(&self, len: u64) -> Result<(), io::Error> {
            self.file.set_len(len)
        }

        fn sync_data(&self) -> Result<(), io::Error> {
            self.file.sync_data()?;
            self.hooks.record(Event::Synced);
            Ok(())
        }

        fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
            self.file.write(offset, data)
        }

        fn close(&self) -> Result<(), io::Error> {
            self.file.close()
        }

        fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
            self.file.try_lock_range(start, end)
        }

        fn try_lock_shared_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<bool, BackendError> {
            self.file.try_lock_shared_range(start, end)
        }

        fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
            self.file.lock_range(start, end)
        }

        fn lock_shared_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<(), BackendError> {
            self.file.lock_shared_range(start, end)
        }

        fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
            self.file.unlock_range(start, end)
        }

        fn query_lock_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<bool, BackendError> {
            self.file.query_lock_range(start, end)
        }
    }
}

/// Outside the unit tests: no hooks, except, with the `fault-injection` feature (test
/// builds of the daemon only), a panic of the commit thread armed by an environment
/// variable.
#[cfg(not(test))]
mod imp {
    use std::path::Path;
    use std::sync::Arc;

    use super::{Cause, Event};

    /// No hooks: every method does nothing (but see [`TestHooks::before_commit`]).
    #[derive(Debug, Default)]
    pub(in super::super) struct TestHooks {
        /// With `fault-injection`: the batch commits still to go before the one that
        /// panics (0: never).
        #[cfg(feature = "fault-injection")]
        panic_countdown: std::sync::atomic::AtomicU64,
    }

    #[cfg(feature = "fault-injection")]
    impl TestHooks {
        /// The environment variable that arms the panic: `N` ≥ 1 makes the store's
        /// N-th batch commit after it opened panic on the commit thread, just before
        /// redb's commit (as redb itself panics on some damaged files). Read once, when
        /// a store opens. Unset, 0 or not a number: nothing happens.
        pub(in super::super) const PANIC_AT_COMMIT_VAR: &str = "LDPCOV_FAULT_PANIC_AT_COMMIT";

        /// The hooks of a store opening now: armed if the variable says so.
        pub(in super::super) fn from_env() -> Self {
            let n = std::env::var(Self::PANIC_AT_COMMIT_VAR)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            if n > 0 {
                tracing::warn!(
                    commit = n,
                    "fault injection armed: the commit thread will panic ({})",
                    Self::PANIC_AT_COMMIT_VAR
                );
            }
            TestHooks {
                panic_countdown: std::sync::atomic::AtomicU64::new(n),
            }
        }

        /// Called just before redb's `commit` of a batch: panics at the armed commit.
        pub(in super::super) fn before_commit(&self) {
            use std::sync::atomic::Ordering;
            let left = self
                .panic_countdown
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if left == Ok(1) {
                panic!(
                    "injected storage engine panic ({})",
                    Self::PANIC_AT_COMMIT_VAR
                );
            }
        }
    }

    #[cfg(not(feature = "fault-injection"))]
    impl TestHooks {
        /// No hooks.
        pub(in super::super) fn from_env() -> Self {
            TestHooks {}
        }

        /// Does nothing.
        pub(in super::super) fn before_commit(&self) {}
    }

    impl TestHooks {
        /// Always: the appended reports are folded when the commit thread stops.
        pub(in super::super) fn fold_at_stop(&self) -> bool {
            true
        }

        /// Never a failure.
        pub(in super::super) fn injected_failure(&self) -> Option<Cause> {
            None
        }

        /// Records nothing.
        pub(in super::super) fn record(&self, _event: Event) {}

        /// Opens (or creates) the database file as redb does.
        pub(in super::super) fn create_db(
            self: &Arc<Self>,
            builder: &redb::Builder,
            path: &Path,
        ) -> Result<redb::Database, redb::DatabaseError> {
            builder.create(path)
        }
    }
}
