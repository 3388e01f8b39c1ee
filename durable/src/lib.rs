//! `ldpcov-durable`: the durable single writer over [redb] that the aggregator's and
//! the relay's stores share, and nothing of either (no collections, reports or
//! relays).
//!
//! * [`inspect`] — the store-file guard: what a file is ([`FileState`]) before redb
//!   touches it, so that a store refuses a file of 0 bytes, a truncated one or another
//!   program's with its own clear error.
//! * [`begin_durable`] — the one way a write transaction begins: with
//!   [`Durability::Immediate`], so that its commit returns only once the file is
//!   fsynced.
//! * [`Writer`] and [`Apply`] — the writer thread with group commit: the one thread
//!   that writes the database takes commands from a channel, adds those that arrive
//!   together to one durable transaction ([`GroupLimits`]), commits it once, and only
//!   then answers each of them, once (a failed group answers each with its error and
//!   writes nothing).
//! * [`catch_panic`] — the panic guard (redb panics on some damaged files): a panic
//!   becomes [`Panicked`], and one on the writer thread is answered to the open
//!   group's callers and reported to the apply ([`Apply::panicked`]), never left
//!   hanging.
//!
//! # Example
//!
//! A counter store: each command adds to a counter and is answered with its new value
//! once the group holding it is on disk.
//!
//! ```
//! use std::sync::mpsc;
//! use ldpcov_durable::{AfterPanic, Apply, Group, GroupLimits, GroupStats, Linger, Panicked, Writer};
//! use redb::{Database, ReadableTable, TableDefinition};
//!
//! const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
//!
//! struct Counters(Database);
//! /// Add `.1` to counter `.0`, answer on `.2`.
//! struct Add(&'static str, u64, mpsc::Sender<Result<u64, String>>);
//!
//! impl Apply for Counters {
//!     type Command = Add;
//!     type State = ();
//!     type Answer = (u64, mpsc::Sender<Result<u64, String>>);
//!     type Error = redb::Error;
//!
//!     fn database(&mut self) -> Result<&Database, redb::Error> {
//!         Ok(&self.0)
//!     }
//!     fn cannot_begin(&mut self, Add(_, _, reply): Add, error: redb::Error) {
//!         let _ = reply.send(Err(error.to_string()));
//!     }
//!     fn add(&mut self, group: &mut Group<'_, Self>, Add(name, n, reply): Add) {
//!         group.add_weight(1);
//!         let value = group.write(|txn, _| {
//!             let mut table = txn.open_table(COUNTERS)?;
//!             let value = table.get(name)?.map_or(0, |v| v.value()) + n;
//!             table.insert(name, value)?;
//!             Ok(value)
//!         });
//!         group.wait((value.unwrap_or(0), reply));
//!     }
//!     fn committed(&mut self, _: (), _: &GroupStats) {}
//!     fn not_committed(&mut self, error: redb::Error, _: &GroupStats) -> redb::Error {
//!         error
//!     }
//!     fn answer(&mut self, (value, reply): Self::Answer, result: Result<(), &redb::Error>) {
//!         let _ = reply.send(result.map(|()| value).map_err(|e| e.to_string()));
//!     }
//!     fn panicked(&mut self, panic: Panicked) -> AfterPanic<redb::Error> {
//!         let message = panic.message_or("a panic");
//!         AfterPanic::Stop(redb::Error::Io(std::io::Error::other(message)))
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let db = Database::create(dir.path().join("counters.redb"))?;
//! let limits = GroupLimits { max_weight: 64, linger: Linger::Waiting };
//! let writer = Writer::start("counters", limits, Counters(db))?;
//! let (reply, answer) = mpsc::channel();
//! writer.send(Add("a", 2, reply.clone())).map_err(|_| "stopped")?;
//! writer.send(Add("a", 3, reply)).map_err(|_| "stopped")?;
//! assert_eq!(answer.recv()?, Ok(2));
//! assert_eq!(answer.recv()?, Ok(5));
//! # Ok(())
//! # }
//! ```

mod file;
mod panic;
#[cfg(test)]
mod tests;
mod writer;

pub use file::{FileState, REDB_MAGIC, inspect};
pub use panic::{Panicked, catch_panic};
pub use writer::{AfterPanic, Apply, Group, GroupLimits, GroupStats, Linger, Route, Writer};

use redb::{Database, Durability, WriteTransaction};

/// Begins a write transaction whose commit returns only once the database file is
/// fsynced ([`Durability::Immediate`], also redb's default: set explicitly so that an
/// answer after the commit keeps meaning "on disk").
pub fn begin_durable(db: &Database) -> Result<WriteTransaction, redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    Ok(txn)
}
