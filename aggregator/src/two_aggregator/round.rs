//! The CPU half of a verification round on a batch, both roles: decoding, Prio3's
//! verification (`ldpcov_prio::exchange`) on every core, and the limbs each side counts.
//! Nothing here touches a store or the network.

use std::collections::HashMap;

use ldpcov_prio::exchange::{LeaderVerifying, helper_verify, leader_finish, leader_start};
use ldpcov_prio::{NONCE_SIZE, Prio3Covariance, VERIFY_KEY_SIZE};
use ldpcov_privacy::ReportId;
use ldpcov_proto::v1::share_verdict::Verdict as WireVerdict;
use ldpcov_proto::v1::{ReportToVerify, ShareVerdict, TwoAggregatorReport};
use ldpcov_seal::{CollectionKeys, SealedReport};
use prost::Message;
use rayon::prelude::*;

use super::share_limbs;
use crate::store::{QueuedUpload, ValidReport};

/// The helper's verdict on one report id, as it records it (the first byte says which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Counted; the verifier message the leader finishes with.
    Accepted(Vec<u8>),
    /// Refused, and why.
    Rejected(String),
}

impl Verdict {
    /// `1 ‖ message` or `0 ‖ reason` (UTF-8).
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Verdict::Accepted(message) => [&[1u8][..], message].concat(),
            Verdict::Rejected(reason) => [&[0u8][..], reason.as_bytes()].concat(),
        }
    }

    /// Reads a recorded verdict; anything but an accepted one reads as refused.
    pub(crate) fn decode(bytes: &[u8]) -> Verdict {
        match bytes.split_first() {
            Some((1, message)) => Verdict::Accepted(message.to_vec()),
            Some((_, reason)) => Verdict::Rejected(String::from_utf8_lossy(reason).into_owned()),
            None => Verdict::Rejected(String::new()),
        }
    }

    fn wire(&self, report_id: &ReportId) -> ShareVerdict {
        ShareVerdict {
            report_id: report_id.0.to_vec(),
            verdict: Some(match self {
                Verdict::Accepted(message) => WireVerdict::VerifierMessage(message.clone()),
                Verdict::Rejected(reason) => WireVerdict::Rejected(reason.clone()),
            }),
        }
    }
}

/// What one report's verification needs besides its shares.
pub(crate) struct RoundContext<'a> {
    /// The collection's Prio3 instance.
    pub vdaf: &'a Prio3Covariance,
    /// The collection's verify key.
    pub verify_key: &'a [u8; VERIFY_KEY_SIZE],
    /// The collection's context string (`ldpcov_prio::context`).
    pub ctx: &'a [u8],
}

/// The leader's state for the reports of a batch it sent the helper, in order.
pub(crate) struct LeaderStarted {
    /// The report ids of the batch, in queue order, with the leader's state for those
    /// sent to the helper (`None`: refused by the leader itself, not sent).
    pub reports: Vec<(ReportId, Option<LeaderVerifying>)>,
    /// The helper's request (the sent reports, in the same order).
    pub to_helper: Vec<ReportToVerify>,
}

/// The leader's first step on queued uploads: each decoded and started. An upload that
/// does not decode or that the leader's own check refuses is not sent (the helper never
/// counts it either).
pub(crate) fn leader_start_batch(
    round: &RoundContext<'_>,
    uploads: &[QueuedUpload],
) -> LeaderStarted {
    let started: Vec<_> = uploads
        .par_iter()
        .map(|upload| {
            let report = TwoAggregatorReport::decode(upload.body.as_slice()).ok()?;
            let helper_share = report.helper_share?;
            let (state, verifier_share) = leader_start(
                round.vdaf,
                round.verify_key,
                round.ctx,
                &upload.report_id.0,
                &report.public_share,
                &report.leader_share,
            )
            .ok()?;
            Some((
                state,
                ReportToVerify {
                    report_id: upload.report_id.0.to_vec(),
                    public_share: report.public_share,
                    helper_share: Some(helper_share),
                    leader_verifier_share: verifier_share,
                },
            ))
        })
        .collect();
    let mut out = LeaderStarted {
        reports: Vec::with_capacity(uploads.len()),
        to_helper: Vec::new(),
    };
    for (upload, started) in uploads.iter().zip(started) {
        match started {
            Some((state, request)) => {
                out.reports.push((upload.report_id, Some(state)));
                out.to_helper.push(request);
            }
            None => out.reports.push((upload.report_id, None)),
        }
    }
    out
}

/// Why the helper's answer cannot be used (nothing of the batch is counted; it stays
/// queued).
#[derive(Debug, thiserror::Error)]
#[error("the helper's answer does not match the request: {0}")]
pub(crate) struct AnswerMismatch(pub String);

/// The leader's last step: the helper's verdicts (one per sent report, in order) applied.
/// Returns the reports to count (their limbs) and how many the helper or the leader
/// refused.
pub(crate) fn leader_finish_batch(
    round: &RoundContext<'_>,
    started: LeaderStarted,
    verdicts: Vec<ShareVerdict>,
) -> Result<(Vec<ValidReport>, u64), AnswerMismatch> {
    let sent = started.reports.iter().filter(|(_, s)| s.is_some()).count();
    if verdicts.len() != sent {
        return Err(AnswerMismatch(format!(
            "{} verdicts for {sent} reports",
            verdicts.len()
        )));
    }
    let mut verdicts = verdicts.into_iter();
    let mut pairs = Vec::with_capacity(sent);
    let mut refused = 0u64;
    for (report_id, state) in started.reports {
        let Some(state) = state else {
            refused += 1;
            continue;
        };
        let verdict = verdicts.next().expect("as many verdicts as sent reports");
        if verdict.report_id != report_id.0 {
            return Err(AnswerMismatch("a verdict for another report id".into()));
        }
        match verdict.verdict {
            Some(WireVerdict::VerifierMessage(message)) => pairs.push((report_id, state, message)),
            Some(WireVerdict::Rejected(_)) => refused += 1,
            None => return Err(AnswerMismatch("a verdict without a decision".into())),
        }
    }
    let finished: Vec<_> = pairs
        .into_par_iter()
        .map(|(report_id, state, message)| {
            leader_finish(round.vdaf, round.ctx, state, &message)
                .map(|share| ValidReport {
                    report_id,
                    entries: share_limbs(&share).into(),
                })
                .map_err(|e| (report_id, e))
        })
        .collect();
    let mut valid = Vec::with_capacity(finished.len());
    for f in finished {
        match f {
            Ok(report) => valid.push(report),
            Err((report_id, e)) => {
                // The helper counted it, the leader cannot: only a faulty or malicious
                // helper answers so. Counted by neither here; the operators must know.
                tracing::error!(
                    report = %hex_id(&report_id), error = %e,
                    "the helper accepted a report whose verifier message the leader refuses: the two aggregate shares no longer match"
                );
                refused += 1;
            }
        }
    }
    Ok((valid, refused))
}

/// What the helper decided on a batch.
pub(crate) struct HelperDecided {
    /// One verdict per requested report, in order (the answer).
    pub answer: Vec<ShareVerdict>,
    /// The reports newly accepted, to count.
    pub counted: Vec<ValidReport>,
    /// The verdicts to record (report ids seen for the first time).
    pub record: Vec<(ReportId, Vec<u8>)>,
}

/// The helper's step: each report verified unless its id has a verdict already
/// (`recorded`, aligned with `reports`) or came earlier in the batch, in which case that
/// verdict is answered and nothing is recomputed.
pub(crate) fn helper_verdicts(
    round: &RoundContext<'_>,
    keys: &CollectionKeys,
    now: u64,
    reports: Vec<(ReportId, ReportToVerify)>,
    recorded: Vec<Option<Vec<u8>>>,
) -> HelperDecided {
    // Which reports are new: the first occurrence of an id without a record.
    let mut first: HashMap<ReportId, usize> = HashMap::new();
    let mut fresh = Vec::new();
    for (i, ((report_id, _), recorded)) in reports.iter().zip(&recorded).enumerate() {
        if recorded.is_none() && !first.contains_key(report_id) {
            first.insert(*report_id, i);
            fresh.push(i);
        }
    }
    let decided: Vec<(Verdict, Option<ValidReport>)> = fresh
        .par_iter()
        .map(|&i| {
            let (report_id, report) = &reports[i];
            match verify_one(round, keys, now, report_id, report) {
                Ok((message, limbs)) => (
                    Verdict::Accepted(message),
                    Some(ValidReport {
                        report_id: *report_id,
                        entries: limbs.into(),
                    }),
                ),
                Err(reason) => (Verdict::Rejected(reason), None),
            }
        })
        .collect();
    let mut by_index: HashMap<usize, Verdict> = HashMap::new();
    let mut out = HelperDecided {
        answer: Vec::with_capacity(reports.len()),
        counted: Vec::new(),
        record: Vec::with_capacity(fresh.len()),
    };
    for (&i, (verdict, counted)) in fresh.iter().zip(decided) {
        out.record.push((reports[i].0, verdict.encode()));
        out.counted.extend(counted);
        by_index.insert(i, verdict);
    }
    for ((report_id, _), recorded) in reports.iter().zip(recorded) {
        let verdict = match recorded {
            Some(bytes) => Verdict::decode(&bytes),
            None => by_index[&first[report_id]].clone(),
        };
        out.answer.push(verdict.wire(report_id));
    }
    out
}

/// One report at the helper: its share opened and verified; the verifier message and the
/// output share's limbs, or why not.
fn verify_one(
    round: &RoundContext<'_>,
    keys: &CollectionKeys,
    now: u64,
    report_id: &ReportId,
    report: &ReportToVerify,
) -> Result<(Vec<u8>, Vec<i32>), String> {
    let sealed = report.helper_share.as_ref().ok_or("no helper share")?;
    let sealed = SealedReport {
        key_id: sealed.key_id,
        enc: sealed.enc.clone(),
        ciphertext: sealed.ciphertext.clone(),
    };
    let share = keys
        .open_helper_share(&sealed, &report_id.0, now)
        .map_err(|e| format!("the helper's share does not open: {e}"))?;
    let nonce: &[u8; NONCE_SIZE] = &report_id.0;
    let (out_share, message) = helper_verify(
        round.vdaf,
        round.verify_key,
        round.ctx,
        nonce,
        &report.public_share,
        &share,
        &report.leader_verifier_share,
    )
    .map_err(|e| format!("invalid: {e}"))?;
    Ok((message, share_limbs(&out_share)))
}

/// A report id in hexadecimal (logs).
pub(crate) fn hex_id(report_id: &ReportId) -> String {
    report_id.0.iter().map(|b| format!("{b:02x}")).collect()
}
