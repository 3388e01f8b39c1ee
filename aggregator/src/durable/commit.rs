//! The commit thread: group commit of submissions, creations and closes.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, mpsc};
use std::time::Instant;

use ldpcov_proto::Collection;
use ldpcov_proto::v1::CollectionSpec;
use prost::Message;
use redb::{Database, ReadableDatabase};

use super::codec::{decode_accumulator, encode_accumulator};
use super::tables::{ACCUMULATORS, CLOSED, COLLECTIONS, META, SEEN, open_db};
use super::{Command, DurableConfig, Entry, Reply, Shared, check_lengths};
use crate::accumulator::{Accumulator, FOLDS};
use crate::store::{BatchOutcome, Snapshot, StoreError, ValidReport};

/// A collection touched by the open batch: its new accumulators.
struct Pending {
    collection: Arc<Collection>,
    acc: Accumulator,
    created: bool,
}

enum Waiting {
    Submit(Reply<BatchOutcome>, BatchOutcome),
    Create(Reply<Arc<Collection>>, Arc<Collection>),
    Close(Reply<()>),
    /// A submission refused because of a close in this batch: answered with `Closed`
    /// once the close is committed (`Unavailable` if the batch fails).
    Refused(Reply<BatchOutcome>, String),
}

struct Batch {
    txn: redb::WriteTransaction,
    pending: HashMap<String, Pending>,
    waiting: Vec<Waiting>,
    /// Collections closed by this batch (in the transaction, not yet in the mirror).
    closing: HashSet<String>,
    reports: usize,
    /// The first storage error: the batch is failed as a whole.
    error: Option<String>,
}

/// The owner of the database: runs on its own thread until every sender is dropped.
pub(super) struct Committer {
    pub(super) db: Option<Database>,
    pub(super) path: PathBuf,
    pub(super) shared: Arc<Shared>,
    pub(super) config: DurableConfig,
    pub(super) rx: mpsc::Receiver<Command>,
    pub(super) commits: u64,
}

impl Committer {
    pub(super) fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            if let Command::ReadCommitted { id, reply } = first {
                let _ = reply.send(self.read_committed(&id));
                continue;
            }
            let txn = match self.db() {
                Ok(db) => db.begin_write().map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            let txn = match txn {
                Ok(txn) => txn,
                Err(e) => {
                    tracing::error!(error = %e, "cannot begin a write transaction");
                    fail_command(first, &e);
                    continue;
                }
            };
            let mut batch = Batch {
                txn,
                pending: HashMap::new(),
                waiting: Vec::new(),
                closing: HashSet::new(),
                reports: 0,
                error: None,
            };
            self.add(&mut batch, first);
            let deadline = Instant::now() + self.config.batch_delay;
            while batch.reports < self.config.batch_size.max(1) {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                match self.rx.recv_timeout(deadline - now) {
                    Ok(command) => self.add(&mut batch, command),
                    Err(_) => break,
                }
            }
            self.finish(batch);
        }
        tracing::debug!(commits = self.commits, "commit thread done");
    }

    /// The database, reopened (and the mirror reloaded) if a failed commit closed it.
    fn db(&mut self) -> Result<&Database, String> {
        if self.db.is_none() {
            let (db, mirror) =
                open_db(&self.path, self.config.cache_size).map_err(|e| e.to_string())?;
            let mut map = self
                .shared
                .mirror
                .write()
                .map_err(|_| "mirror lock poisoned".to_string())?;
            *map = mirror;
            tracing::warn!(path = %self.path.display(), "database reopened, state reloaded from disk");
            self.db = Some(db);
        }
        self.db
            .as_ref()
            .ok_or_else(|| "database not open".to_string())
    }

    fn read_committed(&mut self, id: &str) -> Result<Snapshot, StoreError> {
        let db = self.db().map_err(StoreError::Unavailable)?;
        let internal = |e: redb::Error| StoreError::Internal(e.to_string());
        let txn = db.begin_read().map_err(|e| internal(e.into()))?;
        let collections = txn
            .open_table(COLLECTIONS)
            .map_err(|e| internal(e.into()))?;
        let spec = collections
            .get(id)
            .map_err(|e| internal(e.into()))?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let spec = CollectionSpec::decode(spec.value())
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let collection =
            Collection::from_spec(&spec).map_err(|e| StoreError::Internal(e.to_string()))?;
        let accumulators = txn
            .open_table(ACCUMULATORS)
            .map_err(|e| internal(e.into()))?;
        let acc = match accumulators.get(id).map_err(|e| internal(e.into()))? {
            Some(blob) => decode_accumulator(blob.value()).map_err(StoreError::Internal)?,
            None => Accumulator::new(collection.entries, FOLDS),
        };
        Ok(Snapshot {
            collection: Arc::new(collection),
            acc,
        })
    }

    fn add(&mut self, batch: &mut Batch, command: Command) {
        match command {
            Command::ReadCommitted { id, reply } => {
                let _ = reply.send(self.read_committed(&id));
            }
            Command::Create { collection, reply } => self.add_create(batch, collection, reply),
            Command::Submit { id, reports, reply } => self.add_submit(batch, id, reports, reply),
            Command::Close { id, reply } => self.add_close(batch, id, reply),
        }
    }

    fn add_close(&self, batch: &mut Batch, id: String, reply: Reply<()>) {
        if batch.closing.contains(&id) {
            // Closed earlier in this very batch: answer after the commit.
            batch.waiting.push(Waiting::Close(reply));
            return;
        }
        if !batch.pending.get(&id).is_some_and(|p| p.created) {
            match self.shared.entry(&id) {
                Ok(e) if e.closed.load(Ordering::SeqCst) => {
                    let _ = reply.send(Ok(()));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            }
        }
        if batch.error.is_none() {
            let inserted = batch
                .txn
                .open_table(CLOSED)
                .map_err(redb::Error::from)
                .and_then(|mut t| {
                    t.insert(id.as_str(), ())
                        .map(|_| ())
                        .map_err(redb::Error::from)
                })
                .map_err(|e| e.to_string());
            if let Err(e) = inserted {
                batch.error = Some(e);
            }
        }
        batch.closing.insert(id);
        batch.waiting.push(Waiting::Close(reply));
    }

    fn add_create(&self, batch: &mut Batch, collection: Collection, reply: Reply<Arc<Collection>>) {
        let existing = match batch.pending.get(&collection.id) {
            Some(p) => Some((p.collection.clone(), p.created)),
            None => match self.shared.entry(&collection.id) {
                Ok(e) => Some((e.collection.clone(), false)),
                Err(StoreError::NotFound(_)) => None,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            },
        };
        match existing {
            Some((c, _)) if *c != collection => {
                let _ = reply.send(Err(StoreError::AlreadyExists(collection.id)));
            }
            // Created in this very batch: answer after the commit.
            Some((c, true)) => batch.waiting.push(Waiting::Create(reply, c)),
            Some((c, false)) => {
                let _ = reply.send(Ok(c));
            }
            None => {
                if batch.error.is_none() {
                    let spec = collection.spec().encode_to_vec();
                    let inserted = batch
                        .txn
                        .open_table(COLLECTIONS)
                        .map_err(redb::Error::from)
                        .and_then(|mut t| {
                            t.insert(collection.id.as_str(), spec.as_slice())
                                .map(|_| ())
                                .map_err(redb::Error::from)
                        })
                        .map_err(|e| e.to_string());
                    if let Err(e) = inserted {
                        batch.error = Some(e);
                    }
                }
                let collection = Arc::new(collection);
                batch.pending.insert(
                    collection.id.clone(),
                    Pending {
                        collection: collection.clone(),
                        acc: Accumulator::new(collection.entries, FOLDS),
                        created: true,
                    },
                );
                batch.waiting.push(Waiting::Create(reply, collection));
            }
        }
    }

    fn add_submit(
        &self,
        batch: &mut Batch,
        id: String,
        reports: Vec<ValidReport>,
        reply: Reply<BatchOutcome>,
    ) {
        if batch.closing.contains(&id) {
            batch.waiting.push(Waiting::Refused(reply, id));
            return;
        }
        if !batch.pending.contains_key(&id) {
            let entry = match self.shared.entry(&id) {
                Ok(e) => e,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            };
            if entry.closed.load(Ordering::SeqCst) {
                let _ = reply.send(Err(StoreError::Closed(id)));
                return;
            }
            let acc = match entry.acc.read() {
                Ok(acc) => acc.clone(),
                Err(_) => {
                    let _ = reply.send(Err(StoreError::Internal(
                        "accumulator lock poisoned".into(),
                    )));
                    return;
                }
            };
            batch.pending.insert(
                id.clone(),
                Pending {
                    collection: entry.collection.clone(),
                    acc,
                    created: false,
                },
            );
        }
        let Some(pending) = batch.pending.get_mut(&id) else {
            let _ = reply.send(Err(StoreError::Internal("batch bookkeeping".into())));
            return;
        };
        if let Err(e) = check_lengths(&pending.collection, &reports) {
            let _ = reply.send(Err(e));
            return;
        }
        let mut outcome = BatchOutcome::default();
        batch.reports += reports.len();
        if batch.error.is_none() {
            let counted = (|| -> Result<(), redb::Error> {
                let mut seen = batch.txn.open_table(SEEN)?;
                for report in &reports {
                    if seen
                        .insert((id.as_str(), report.report_id.0), ())?
                        .is_some()
                    {
                        outcome.duplicates += 1;
                    } else {
                        pending
                            .acc
                            .add(report.report_id.fold(FOLDS), &report.entries);
                        outcome.accepted += 1;
                    }
                }
                Ok(())
            })();
            if let Err(e) = counted {
                batch.error = Some(e.to_string());
            }
        }
        batch.waiting.push(Waiting::Submit(reply, outcome));
    }

    fn finish(&mut self, batch: Batch) {
        let Batch {
            txn,
            pending,
            waiting,
            closing,
            reports,
            error,
        } = batch;
        if waiting.is_empty() {
            // Nothing to commit (e.g. only refused commands).
            if let Err(e) = txn.abort() {
                tracing::warn!(error = %e, "aborting an empty transaction failed");
            }
            return;
        }
        let started = Instant::now();
        let prepared = match error {
            Some(e) => Err(e),
            None => write_accumulators(&txn, &pending, self.commits + 1).map_err(|e| e.to_string()),
        };
        let injected = self
            .shared
            .fail_commits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        // The flag says whether the database must be reopened: after any real storage
        // error (redb may refuse further writes), not after an injected failure.
        // A transaction that is not committed is aborted when dropped.
        let result = match prepared {
            Err(e) => Err((e, true)),
            Ok(()) if injected => Err(("injected commit failure".to_string(), false)),
            Ok(()) => txn.commit().map_err(|e| (e.to_string(), true)),
        };
        match result {
            Ok(()) => {
                self.commits += 1;
                if let Err(e) = self.apply(pending, closing) {
                    tracing::error!(error = %e, "cannot update the mirror; reloading from disk");
                    self.db = None;
                }
                tracing::debug!(
                    reports,
                    commands = waiting.len(),
                    commit = self.commits,
                    commit_ms = started.elapsed().as_secs_f64() * 1e3,
                    "batch committed"
                );
                for w in waiting {
                    match w {
                        Waiting::Submit(reply, outcome) => {
                            let _ = reply.send(Ok(outcome));
                        }
                        Waiting::Create(reply, c) => {
                            let _ = reply.send(Ok(c));
                        }
                        Waiting::Close(reply) => {
                            let _ = reply.send(Ok(()));
                        }
                        Waiting::Refused(reply, id) => {
                            let _ = reply.send(Err(StoreError::Closed(id)));
                        }
                    }
                }
            }
            Err((e, reopen)) => {
                tracing::error!(error = %e, reports, "batch not committed; its callers are told to retry");
                if reopen {
                    // After a failed commit redb cannot tell whether the batch became
                    // durable and refuses further writes: reopen, reload the mirror.
                    self.db = None;
                }
                let status = format!("batch not committed ({e}); retry with the same report ids");
                for w in waiting {
                    match w {
                        Waiting::Submit(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Create(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Close(reply) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Refused(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                    }
                }
            }
        }
    }

    /// Writes the committed accumulators and closed flags into the mirror.
    fn apply(
        &self,
        pending: HashMap<String, Pending>,
        closing: HashSet<String>,
    ) -> Result<(), String> {
        let mut map = self
            .shared
            .mirror
            .write()
            .map_err(|_| "mirror lock poisoned".to_string())?;
        for (id, p) in pending {
            match map.get(&id) {
                Some(entry) if !p.created => {
                    *entry
                        .acc
                        .write()
                        .map_err(|_| "accumulator lock poisoned".to_string())? = p.acc;
                }
                _ => {
                    map.insert(
                        id,
                        Arc::new(Entry {
                            collection: p.collection,
                            acc: RwLock::new(p.acc),
                            closed: AtomicBool::new(false),
                        }),
                    );
                }
            }
        }
        for id in closing {
            match map.get(&id) {
                Some(entry) => entry.closed.store(true, Ordering::SeqCst),
                None => return Err(format!("closed collection {id:?} is not in the mirror")),
            }
        }
        Ok(())
    }
}

fn write_accumulators(
    txn: &redb::WriteTransaction,
    pending: &HashMap<String, Pending>,
    commit: u64,
) -> Result<(), redb::Error> {
    let mut table = txn.open_table(ACCUMULATORS)?;
    for (id, p) in pending {
        table.insert(id.as_str(), encode_accumulator(&p.acc).as_slice())?;
    }
    txn.open_table(META)?.insert("commits", commit)?;
    Ok(())
}

fn fail_command(command: Command, error: &str) {
    let e = StoreError::Unavailable(format!("store unavailable: {error}"));
    match command {
        Command::Submit { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Create { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::ReadCommitted { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Close { reply, .. } => {
            let _ = reply.send(Err(e));
        }
    }
}
