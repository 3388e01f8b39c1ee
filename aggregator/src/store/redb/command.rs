//! What callers ask the commit thread ([`Command`]), and what a submission writes along
//! with the reports it counts ([`Along`]).

use crate::store::Along;
use std::sync::Arc;

use ldpcov_privacy::{Collection, ReportId};
use tokio::sync::oneshot;

use crate::store::{
    BatchOutcome, DeliveredBatches, QueuedUpload, RecordedRelease, Snapshot, StoreError,
    ValidReport,
};

/// Where the commit thread answers a command.
pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What a ledger read returns: the ρ spent, and the release under the key asked about
/// (its ρ and body), if any.
pub(super) type LedgerRead = (f64, Option<(f64, Vec<u8>)>);

/// A request to the commit thread (see `Committer::route` for where each goes).
pub(super) enum Command {
    /// Counts reports, and writes what comes along with them, in the open batch.
    Submit {
        id: String,
        /// What the batch's transaction writes along with the reports counted.
        along: Along,
        reports: Vec<ValidReport>,
        reply: Reply<BatchOutcome>,
    },
    Create {
        collection: Box<Collection>,
        reply: Reply<Arc<Collection>>,
    },
    ReadCommitted {
        id: String,
        reply: Reply<Snapshot>,
    },
    Close {
        id: String,
        reply: Reply<()>,
    },
    /// Committed in a transaction of its own (see `DurableStore`, "Deleting").
    Delete {
        id: String,
        reply: Reply<u64>,
    },
    /// Committed in a transaction of its own: reads the spent ρ and the key, inserts.
    Release {
        id: String,
        key: Vec<u8>,
        rho: f64,
        budget: f64,
        body: Vec<u8>,
        reply: Reply<RecordedRelease>,
    },
    /// The spent ρ and the release under `key` (if given), from committed state.
    ReadRelease {
        id: String,
        key: Option<Vec<u8>>,
        reply: Reply<LedgerRead>,
    },
    /// Committed in a transaction of its own: a completed shuffled batch of `valid`
    /// valid reports recorded (`Some`), or the record read (`None`).
    Delivered {
        id: String,
        valid: Option<u64>,
        reply: Reply<DeliveredBatches>,
    },
    /// The reports counted under a shuffled batch, from committed state (answered at
    /// once, like `ReadCommitted`, even while a batch is open).
    ReadBatch {
        id: String,
        batch: [u8; 16],
        reply: Reply<u64>,
    },
    /// A two-aggregator leader's upload queued in the open batch (`Store::queue_upload`):
    /// answered `true` once committed, `false` if its report id was queued already.
    Queue {
        id: String,
        upload: QueuedUpload,
        reply: Reply<bool>,
    },
    /// The oldest `limit` queued uploads of a collection, oldest first, from committed
    /// state (answered at once, like `ReadBatch`).
    ReadQueue {
        id: String,
        limit: usize,
        reply: Reply<Vec<QueuedUpload>>,
    },
    /// How many uploads of a collection are queued, from committed state.
    QueuedCount {
        id: String,
        reply: Reply<u64>,
    },
    /// The verdicts recorded for report ids, in their order, from committed state
    /// (answered at once, like `ReadBatch`).
    ReadVerdicts {
        id: String,
        report_ids: Vec<ReportId>,
        reply: Reply<Vec<Option<Vec<u8>>>>,
    },
}

impl Command {
    /// Answers the command with `e`.
    pub(super) fn fail(self, e: StoreError) {
        match self {
            Command::Submit { reply, .. } => drop(reply.send(Err(e))),
            Command::Create { reply, .. } => drop(reply.send(Err(e))),
            Command::ReadCommitted { reply, .. } => drop(reply.send(Err(e))),
            Command::Close { reply, .. } => drop(reply.send(Err(e))),
            Command::Delete { reply, .. } => drop(reply.send(Err(e))),
            Command::Release { reply, .. } => drop(reply.send(Err(e))),
            Command::ReadRelease { reply, .. } => drop(reply.send(Err(e))),
            Command::Delivered { reply, .. } => drop(reply.send(Err(e))),
            Command::ReadBatch { reply, .. } => drop(reply.send(Err(e))),
            Command::Queue { reply, .. } => drop(reply.send(Err(e))),
            Command::ReadQueue { reply, .. } => drop(reply.send(Err(e))),
            Command::QueuedCount { reply, .. } => drop(reply.send(Err(e))),
            Command::ReadVerdicts { reply, .. } => drop(reply.send(Err(e))),
        }
    }
}
