//! The group-commit task of one replica and the transaction of one group of batches
//! (design in the docs of `PostgresStore`).

use crate::store::Along;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use ldpcov_privacy::Collection;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{PostgresStore, db_error, pool_error};
use crate::store::codec::{encode_accumulator, encode_report_log, log_is_smaller};
use crate::store::{BatchOutcome, Cause, Store, StoreError, ValidReport, check_lengths};
use ldpcov_estimate::{Accumulator, FOLDS};

/// One `submit` call waiting to be committed.
pub(super) struct Submission {
    /// The collection (its number of entries sizes the delta).
    pub(super) collection: Arc<Collection>,
    /// The batch, already checked against the collection's length.
    pub(super) reports: Vec<ValidReport>,
    /// What the group's transaction writes along with the reports counted.
    pub(super) along: Along,
    /// Answered after the group's transaction committed (or failed).
    pub(super) reply: oneshot::Sender<Result<BatchOutcome, StoreError>>,
}

impl PostgresStore {
    /// Counts `reports` for collection `id` through the group-commit task (see
    /// [`Store::submit`]), and writes what comes `along` with them (a shuffled batch's
    /// tally, a leader's dequeued uploads, a helper's verdicts) in the same transaction.
    pub(super) async fn count_reports(
        &self,
        id: &str,
        along: Along,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let collection = self.collection(id).await?;
        check_lengths(&collection, &reports)?;
        let refuse_closed = !along.counts_when_closed();
        // A close is final: refuse early. Otherwise the batch's transaction checks it.
        if refuse_closed && self.known_closed(id)? {
            return Err(StoreError::Closed(id.to_string()));
        }
        if reports.is_empty() && along.is_empty() {
            return if refuse_closed && self.is_closed(id).await? {
                Err(StoreError::Closed(id.to_string()))
            } else {
                Ok(BatchOutcome::default())
            };
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .as_ref()
            .and_then(|tx| {
                tx.send(Submission {
                    collection,
                    reports,
                    along,
                    reply,
                })
                .ok()
            })
            .ok_or_else(|| StoreError::unavailable(Cause::ShuttingDown))?;
        let outcome = rx
            .await
            .map_err(|_| StoreError::unavailable(Cause::CommitThreadStopped))?;
        match &outcome {
            Err(StoreError::Closed(_)) => self.remember_closed(id)?,
            // Gone, or created anew by another replica: read it again next time.
            Err(StoreError::NotFound(_)) => self.forget(id)?,
            _ => {}
        }
        outcome
    }
}

/// Collects submissions into groups and commits each group in one transaction.
pub(super) struct Committer {
    pub(super) pool: Pool,
    pub(super) rx: mpsc::UnboundedReceiver<Submission>,
    pub(super) batch_size: usize,
    pub(super) batch_delay: Duration,
    /// Whether the last group committed, or failed for a reason of the store itself
    /// (`Store::write_health`): a refused batch (closed or missing collection) does not
    /// count as a failure.
    pub(super) write_healthy: tokio::sync::watch::Sender<bool>,
    /// Woken once this replica has appended [`fold_bytes`](Self::fold_bytes) of report
    /// logs since it last woke it: the folder's size trigger.
    pub(super) fold_now: Arc<tokio::sync::Notify>,
    /// See [`PostgresConfig::fold_bytes`](super::PostgresConfig::fold_bytes).
    pub(super) fold_bytes: u64,
}

impl Committer {
    /// Runs until the store is dropped and every group sent before was answered.
    pub(super) async fn run(mut self) {
        let mut appended: u64 = 0;
        while let Some(first) = self.rx.recv().await {
            let mut reports = first.reports.len();
            let mut group = vec![first];
            let deadline = Instant::now() + self.batch_delay;
            while reports < self.batch_size {
                match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                    Ok(Some(s)) => {
                        reports += s.reports.len();
                        group.push(s);
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            let started = Instant::now();
            let committed = commit_group(&self.pool, &group).await;
            crate::telemetry::commit("postgres", reports, started.elapsed(), committed.is_ok());
            self.write_healthy.send_if_modified(|h| {
                let changed = *h != committed.is_ok();
                *h = committed.is_ok();
                changed
            });
            match committed {
                Ok((answers, bytes)) => {
                    appended += bytes;
                    if appended >= self.fold_bytes {
                        appended = 0;
                        self.fold_now.notify_one();
                    }
                    tracing::debug!(
                        reports,
                        batches = group.len(),
                        commit_ms = started.elapsed().as_secs_f64() * 1e3,
                        "group committed"
                    );
                    for (s, answer) in group.into_iter().zip(answers) {
                        let _ = s.reply.send(answer);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, reports, "group not committed; its callers are told");
                    for s in group {
                        let _ = s.reply.send(Err(e.clone()));
                    }
                }
            }
        }
        tracing::debug!("group-commit task done");
    }
}

/// What a committed group answers: each submission's answer, and the bytes of report
/// logs it appended.
type GroupAnswers = (Vec<Result<BatchOutcome, StoreError>>, u64);

/// Commits `group` in one transaction. `Ok` holds each submission's answer (a
/// collection that is missing or closed refuses its batches, which count nothing) and
/// the bytes appended; an `Err` fails the whole group, of which nothing was counted.
async fn commit_group(pool: &Pool, group: &[Submission]) -> Result<GroupAnswers, StoreError> {
    let mut by_collection: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (k, s) in group.iter().enumerate() {
        by_collection.entry(s.collection.id()).or_default().push(k);
    }
    let mut client = pool.get().await.map_err(pool_error)?;
    let txn = client.transaction().await.map_err(db_error)?;
    let mut answers: Vec<Result<BatchOutcome, StoreError>> =
        vec![Ok(BatchOutcome::default()); group.len()];
    let mut appended = 0;
    for (id, members) in by_collection {
        let (answered, bytes) = add_batches(&txn, id, group, &members).await?;
        appended += bytes;
        for (k, answer) in answered {
            answers[k] = answer;
        }
    }
    txn.commit().await.map_err(|e| {
        StoreError::unavailable(Cause::CommitOutcomeUnknown(Box::new(Cause::backend(
            "PostgreSQL",
            e,
        ))))
    })?;
    Ok((answers, appended))
}

/// What one collection's batches come to: each member's answer (by its index in the
/// group), and the bytes of report log appended.
type Added = (Vec<(usize, Result<BatchOutcome, StoreError>)>, u64);

/// Adds the batches `members` of `group`, all for collection `id`, in `txn`: the
/// collection's closed check, the seen ids, what comes along with them (the tallies of
/// the shuffled batches they are chunks of, the uploads they dequeue, the verdicts they
/// record), and one row of the counted reports, a report log or a dense delta,
/// whichever is smaller. Returns each member's answer (a missing collection refuses
/// them all, a closed one those that do not count when closed) and the bytes
/// appended. The error fails the group.
async fn add_batches(
    txn: &Transaction<'_>,
    id: &str,
    group: &[Submission],
    members: &[usize],
) -> Result<Added, StoreError> {
    let refuse_all =
        |e: StoreError| -> Added { (members.iter().map(|&k| (k, Err(e.clone()))).collect(), 0) };
    // FOR SHARE: a concurrent close (an UPDATE of this row) waits for this transaction,
    // and this lock waits for a close in flight, then reads its result.
    let row = txn
        .query_opt(
            "SELECT closed, spec FROM collections WHERE id = $1 FOR SHARE",
            &[&id],
        )
        .await
        .map_err(db_error)?;
    let Some(row) = row else {
        return Ok(refuse_all(StoreError::NotFound(id.to_string())));
    };
    // The reports were validated against this replica's cached spec: if the row now
    // holds another one (the collection was removed and created anew), that
    // collection is gone.
    let cached = group[members[0]].collection.spec().encode_to_vec();
    if row.get::<_, &[u8]>(1) != cached.as_slice() {
        return Ok(refuse_all(StoreError::NotFound(id.to_string())));
    }
    // Closed: only the two-aggregator submissions count.
    let closed: bool = row.get(0);
    let (members, refused): (Vec<usize>, Vec<usize>) = members
        .iter()
        .copied()
        .partition(|&k| !closed || group[k].along.counts_when_closed());
    let mut answers: Vec<(usize, Result<BatchOutcome, StoreError>)> = refused
        .into_iter()
        .map(|k| (k, Err(StoreError::Closed(id.to_string()))))
        .collect();
    if members.is_empty() {
        return Ok((answers, 0));
    }
    let members = members.as_slice();
    // The group's own repeats: only an id's first occurrence may count.
    let mut candidates: Vec<[u8; 16]> = Vec::new();
    let mut firsts: HashSet<[u8; 16]> = HashSet::new();
    for &k in members {
        for r in &group[k].reports {
            if firsts.insert(r.report_id.0) {
                candidates.push(r.report_id.0);
            }
        }
    }
    // Sorted, so that replicas inserting overlapping ids take their locks in one order.
    candidates.sort_unstable();
    let ids: Vec<&[u8]> = candidates.iter().map(|c| c.as_slice()).collect();
    let mut fresh: HashSet<[u8; 16]> = HashSet::with_capacity(ids.len());
    for row in txn
        .query(
            "INSERT INTO seen (collection, report_id)
             SELECT $1, r FROM unnest($2::bytea[]) AS r ORDER BY r
             ON CONFLICT DO NOTHING RETURNING report_id",
            &[&id, &ids],
        )
        .await
        .map_err(db_error)?
    {
        let bytes: &[u8] = row.get(0);
        let id_bytes: [u8; 16] = bytes.try_into().map_err(|_| {
            StoreError::internal(Cause::Inconsistent(format!(
                "seen returned a report id of {} bytes",
                bytes.len()
            )))
        })?;
        fresh.insert(id_bytes);
    }
    let entries = group[members[0]].collection.entries();
    let mut outcomes = Vec::with_capacity(members.len());
    let mut counted = Vec::new();
    for &k in members {
        let mut outcome = BatchOutcome::default();
        for r in &group[k].reports {
            // `remove`: a later repeat of a counted id is a duplicate.
            if fresh.remove(&r.report_id.0) {
                counted.push((r.report_id.fold(FOLDS), &r.entries));
                outcome.accepted += 1;
            } else {
                outcome.duplicates += 1;
            }
        }
        outcomes.push(outcome);
    }
    add_to_batch_tallies(txn, id, group, members, &outcomes).await?;
    dequeue(txn, id, group, members).await?;
    record_verdicts(txn, id, group, members).await?;
    answers.extend(members.iter().copied().zip(outcomes.into_iter().map(Ok)));
    if counted.is_empty() {
        return Ok((answers, 0));
    }
    let count = i64::try_from(counted.len()).map_err(|_| {
        StoreError::internal(Cause::Inconsistent("batch count exceeds i64".to_string()))
    })?;
    if log_is_smaller(entries, &counted) {
        let log = encode_report_log(entries, &counted);
        txn.execute(
            "INSERT INTO appended (collection, count, reports) VALUES ($1, $2, $3)",
            &[&id, &count, &log],
        )
        .await
        .map_err(db_error)?;
        return Ok((answers, log.len() as u64));
    }
    let mut delta = Accumulator::new(entries, FOLDS);
    delta.add_reports(&counted);
    txn.execute(
        "INSERT INTO deltas (collection, count, acc) VALUES ($1, $2, $3)",
        &[&id, &count, &encode_accumulator(&delta)],
    )
    .await
    .map_err(db_error)?;
    Ok((answers, 0))
}

/// Adds what each of `members` (submissions of collection `id`) counted to the tally of
/// the shuffled batch it is a chunk of, one upsert for the group, in `txn`: the tallies
/// commit or roll back with the seen ids. Rows in batch id order, so that replicas
/// upserting the same batches take their row locks in one order.
async fn add_to_batch_tallies(
    txn: &Transaction<'_>,
    id: &str,
    group: &[Submission],
    members: &[usize],
    outcomes: &[BatchOutcome],
) -> Result<(), StoreError> {
    let mut tallies: BTreeMap<[u8; 16], u64> = BTreeMap::new();
    for (&k, outcome) in members.iter().zip(outcomes) {
        if let Along::Tally(batch) = group[k].along
            && outcome.accepted > 0
        {
            let tally = tallies.entry(batch).or_insert(0);
            *tally = tally.saturating_add(outcome.accepted);
        }
    }
    if tallies.is_empty() {
        return Ok(());
    }
    let batches: Vec<&[u8]> = tallies.keys().map(|b| b.as_slice()).collect();
    let accepted = tallies
        .values()
        .map(|&n| i64::try_from(n))
        .collect::<Result<Vec<i64>, _>>()
        .map_err(|_| {
            StoreError::internal(Cause::Inconsistent("batch tally exceeds i64".to_string()))
        })?;
    txn.execute(
        "INSERT INTO shuffled_batch_counts (collection, batch_id, accepted)
         SELECT $1, b, n FROM unnest($2::bytea[], $3::bigint[]) AS t(b, n) ORDER BY b
         ON CONFLICT (collection, batch_id)
         DO UPDATE SET accepted = shuffled_batch_counts.accepted + EXCLUDED.accepted",
        &[&id, &batches, &accepted],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Removes the queued uploads of the report ids that `members` (submissions of
/// collection `id`) are done with, in `txn`: the uploads leave the queue in the
/// transaction that counts their reports. An id not queued is ignored.
async fn dequeue(
    txn: &Transaction<'_>,
    id: &str,
    group: &[Submission],
    members: &[usize],
) -> Result<(), StoreError> {
    let mut done: Vec<&[u8]> = members
        .iter()
        .filter_map(|&k| match &group[k].along {
            Along::Dequeue(done) => Some(done),
            _ => None,
        })
        .flatten()
        .map(|r| r.0.as_slice())
        .collect();
    if done.is_empty() {
        return Ok(());
    }
    done.sort_unstable();
    done.dedup();
    txn.execute(
        "DELETE FROM queued_uploads WHERE collection = $1 AND report_id = ANY($2::bytea[])",
        &[&id, &done],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Records the verdicts `members` (submissions of collection `id`) carry, in `txn`,
/// with the reports they count: a report id's first verdict stays, the group's (in
/// arrival order) or one recorded before (`ON CONFLICT DO NOTHING`). Rows in report
/// id order, so that replicas inserting the same ids take their locks in one order.
async fn record_verdicts(
    txn: &Transaction<'_>,
    id: &str,
    group: &[Submission],
    members: &[usize],
) -> Result<(), StoreError> {
    let mut firsts: HashMap<&[u8], &[u8]> = HashMap::new();
    for &k in members {
        if let Along::Verdicts(verdicts) = &group[k].along {
            for (report_id, verdict) in verdicts {
                firsts.entry(report_id.0.as_slice()).or_insert(verdict);
            }
        }
    }
    if firsts.is_empty() {
        return Ok(());
    }
    let sorted: BTreeMap<&[u8], &[u8]> = firsts.into_iter().collect();
    let report_ids: Vec<&[u8]> = sorted.keys().copied().collect();
    let verdicts: Vec<&[u8]> = sorted.values().copied().collect();
    txn.execute(
        "INSERT INTO verdicts (collection, report_id, verdict)
         SELECT $1, r, v FROM unnest($2::bytea[], $3::bytea[]) AS t(r, v) ORDER BY r
         ON CONFLICT (collection, report_id) DO NOTHING",
        &[&id, &report_ids, &verdicts],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}
