//! Two-aggregator collections: the leader's and the helper's halves of one Prio3 round.
//!
//! A device shards its grid vector into two Prio3 input shares with a validity proof
//! (`ldpcov-prio`) and uploads both to the **leader**, the helper's sealed to the
//! helper. The leader stores the upload durably ([`Store::queue_upload`]) and answers;
//! a background task, [`LeaderVerifier`], then takes queued uploads a batch at a time,
//! computes its verifier shares and sends the batch to the **helper**
//! (`VerifyShares`), which opens its shares, verifies each report against the leader's
//! verifier share, counts the valid ones in its accumulators and records its verdict
//! on every report id ([`Store::submit_with_verdicts`]) before it answers. The leader
//! finishes each accepted report with the helper's verifier message and counts it,
//! removing the batch from its queue in the same transaction
//! ([`Store::submit_from_queue`]).
//!
//! **Invariants.**
//! * Each aggregator counts a report id at most once, and both count the same reports:
//!   the helper answers a report id it has seen with its first verdict (it verifies a
//!   report id once, whatever a later request carries, so a leader learns nothing new
//!   by asking again), and the leader removes an upload from its queue only in the
//!   transaction that counts what the helper accepted. A crash of either at any point
//!   leaves the upload queued and the leader sends it again; the helper answers from
//!   its record.
//! * Neither side sees a vector: each holds one additive share in Prio3's field,
//!   summed as limbs ([`share_limbs`]; [`aggregate_share`] gives the field share back).
//! * A release is each aggregator's share plus its own noise of the whole release's σ
//!   (`release.rs`), each side charging its own ledger and refusing fewer than the
//!   collection's minimum reports: the release stays differentially private against
//!   either aggregator, even one that removes its own noise.
//! * The helper takes `VerifyShares` and `ReleaseShare` from the leader's token only, derived from the
//!   two operators' shared [`PeerSecret`], from which both also derive each
//!   collection's Prio3 verify key: a device never knows it, and neither aggregator
//!   can choose it alone.

mod limbs;
mod peer;
mod release;
mod round;
pub(crate) mod verifier;

pub use limbs::{aggregate_share, share_limbs};
pub use peer::PeerSecret;
pub use release::{NoisyShare, ReleaseError, combine, noisy_share};
pub(crate) use round::{RoundContext, helper_verdicts};
pub use verifier::{LeaderVerifier, VERIFY_POLL, VerifyError};

use std::sync::Arc;

use tonic::transport::ClientTlsConfig;

#[cfg(doc)]
use crate::store::Store;

/// Reports the leader sends the helper in one `VerifyShares` call, at most.
pub const VERIFY_BATCH: usize = 256;

/// Which half of two-aggregator collections a daemon serves (`serve
/// --two-aggregator-role`); a daemon in no role refuses to create them.
#[derive(Clone, Debug)]
pub enum TwoAggregatorRole {
    /// Takes devices' uploads and verifies them with the helper.
    Leader(LeaderConfig),
    /// Verifies the leader's batches.
    Helper {
        /// The secret shared with the leader.
        peer: Arc<PeerSecret>,
    },
}

impl TwoAggregatorRole {
    /// The secret shared with the other aggregator.
    pub fn peer(&self) -> &Arc<PeerSecret> {
        match self {
            TwoAggregatorRole::Leader(leader) => &leader.peer,
            TwoAggregatorRole::Helper { peer } => peer,
        }
    }

    /// `"leader"` or `"helper"` (logs and messages).
    pub fn name(&self) -> &'static str {
        match self {
            TwoAggregatorRole::Leader(_) => "leader",
            TwoAggregatorRole::Helper { .. } => "helper",
        }
    }
}

/// Where a leader finds its helper.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// The helper's gRPC URL (`http://…` or `https://…`).
    pub helper_url: String,
    /// TLS towards an `https` helper (default: the web PKI roots).
    pub helper_tls: Option<ClientTlsConfig>,
    /// The secret shared with the helper.
    pub peer: Arc<PeerSecret>,
}
