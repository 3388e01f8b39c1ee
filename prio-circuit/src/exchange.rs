//! One report's journey in bytes: the device's upload, then the leader's and the helper's
//! verification in one round trip (DAP's upload and aggregation flow for a one-round VDAF).
//!
//! 1. The device: [`shard`] gives an [`Upload`], the public share and one input share per
//!    aggregator (the helper's is sealed to the helper before it leaves the device).
//! 2. The leader: [`leader_start`] checks its share and gives its verifier share, sent to the
//!    helper with the public share and the helper's sealed input share.
//! 3. The helper: [`helper_verify`] checks its share against the leader's verifier share,
//!    keeps its output share and answers with the verifier message, or rejects.
//! 4. The leader: [`leader_finish`] checks the message and keeps its output share.
//!
//! Both aggregators accept a report or both reject it: the helper's acceptance and the
//! leader's are the same two checks (the proof's verifiers and the joint randomness seed) on
//! the same verifier message. Every byte string is decoded strictly: a short, long or
//! malformed one is an [`Error::Codec`], never a panic.
//!
//! The context string ([`context`]) binds every proof to its collection, so that a report
//! replayed into another collection fails verification.

use crate::{Error, Field, InputShare, NONCE_SIZE, Prio3Covariance, PublicShare, VERIFY_KEY_SIZE};
use prio::codec::{Encode, ParameterizedDecode};
use prio::vdaf::prio3::{Prio3, Prio3VerifierMessage, Prio3VerifierShare, Prio3VerifyState};
use prio::vdaf::xof::XofTurboShake128;
use prio::vdaf::{AggregateShare, Aggregator, Client, OutputShare, VerifyTransition};

/// Index of the leader among the aggregators.
pub const LEADER: usize = 0;

/// Index of the helper among the aggregators.
pub const HELPER: usize = 1;

/// The Prio3 context string of a collection's reports: `"ldpcov two-aggregator v1/"` and the
/// collection's id.
pub fn context(collection_id: &str) -> Vec<u8> {
    let mut ctx = b"ldpcov two-aggregator v1/".to_vec();
    ctx.extend_from_slice(collection_id.as_bytes());
    ctx
}

/// What a device uploads for one report, each part in `prio`'s wire encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The public share (the joint randomness parts), sent in the clear to both.
    pub public_share: Vec<u8>,
    /// The leader's input share (the measurement and proof shares in full).
    pub leader_share: Vec<u8>,
    /// The helper's input share (seeds only); sealed to the helper before it leaves the device.
    pub helper_share: Vec<u8>,
}

/// Shards the grid vector `x` into an [`Upload`] under the report's `nonce` (its 16-byte id),
/// with the operating system's randomness.
///
/// # Errors
///
/// [`Error::Vdaf`] when `x` is not a valid report (off the grid, above the norm bound, wrong
/// length); [`Error::Codec`] if a share fails to encode.
pub fn shard(
    vdaf: &Prio3Covariance,
    ctx: &[u8],
    x: &[i64],
    nonce: &[u8; NONCE_SIZE],
) -> Result<Upload, Error> {
    let (public_share, input_shares) = vdaf.shard(ctx, &x.to_vec(), nonce)?;
    let [leader, helper] = input_shares.as_slice() else {
        return Err(Error::InvalidParameter(
            "the Prio3 instance does not have two aggregators".into(),
        ));
    };
    Ok(Upload {
        public_share: public_share.get_encoded()?,
        leader_share: leader.get_encoded()?,
        helper_share: helper.get_encoded()?,
    })
}

/// Whether an upload's public share and leader share decode for `vdaf` (what a leader checks
/// before it stores an upload: the proof itself is checked with the helper later).
///
/// # Errors
///
/// [`Error::Codec`] for malformed bytes (short, long, or not field elements).
pub fn check_upload(
    vdaf: &Prio3Covariance,
    public_share: &[u8],
    leader_share: &[u8],
) -> Result<(), Error> {
    PublicShare::get_decoded_with_param(vdaf, public_share)?;
    InputShare::get_decoded_with_param(&(vdaf, LEADER), leader_share)?;
    Ok(())
}

/// The leader's state for one report between [`leader_start`] and [`leader_finish`].
#[derive(Clone, Debug)]
pub struct LeaderVerifying {
    state: Prio3VerifyState<Field, 32>,
}

/// Decodes the public share and `agg_id`'s input share and runs its `verify_init`.
fn verify_init(
    vdaf: &Prio3Covariance,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    agg_id: usize,
    nonce: &[u8; NONCE_SIZE],
    public_share: &[u8],
    input_share: &[u8],
) -> Result<(Prio3VerifyState<Field, 32>, Prio3VerifierShare<Field, 32>), Error> {
    let public_share = PublicShare::get_decoded_with_param(vdaf, public_share)?;
    let input_share = InputShare::get_decoded_with_param(&(vdaf, agg_id), input_share)?;
    vdaf.verify_init(
        verify_key,
        ctx,
        agg_id,
        &(),
        nonce,
        &public_share,
        &input_share,
    )
    .map_err(Error::Rejected)
}

/// The leader's first step: its share checked, and its verifier share (bytes) for the helper.
///
/// # Errors
///
/// [`Error::Codec`] for malformed shares; [`Error::Rejected`] if `prio` refuses them.
pub fn leader_start(
    vdaf: &Prio3Covariance,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    nonce: &[u8; NONCE_SIZE],
    public_share: &[u8],
    leader_share: &[u8],
) -> Result<(LeaderVerifying, Vec<u8>), Error> {
    let (state, share) = verify_init(
        vdaf,
        verify_key,
        ctx,
        LEADER,
        nonce,
        public_share,
        leader_share,
    )?;
    Ok((LeaderVerifying { state }, share.get_encoded()?))
}

/// The helper's step: its own share checked, combined with the leader's verifier share; on
/// acceptance, the helper's output share and the verifier message (bytes) for the leader.
///
/// # Errors
///
/// [`Error::Rejected`] when the report is invalid or the shares do not match (the helper
/// then answers "rejected" and keeps nothing); [`Error::Codec`] for malformed bytes.
pub fn helper_verify(
    vdaf: &Prio3Covariance,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    nonce: &[u8; NONCE_SIZE],
    public_share: &[u8],
    helper_share: &[u8],
    leader_verifier_share: &[u8],
) -> Result<(OutputShare<Field>, Vec<u8>), Error> {
    let (state, own) = verify_init(
        vdaf,
        verify_key,
        ctx,
        HELPER,
        nonce,
        public_share,
        helper_share,
    )?;
    let leader = Prio3VerifierShare::get_decoded_with_param(&state, leader_verifier_share)?;
    let message = vdaf
        .verifier_shares_to_message(ctx, &(), [leader, own])
        .map_err(Error::Rejected)?;
    let encoded = message.get_encoded()?;
    let out_share = finish(vdaf, ctx, state, message)?;
    Ok((out_share, encoded))
}

/// The leader's last step: the helper's verifier message checked; the leader's output share.
///
/// # Errors
///
/// [`Error::Rejected`] when the message does not match the leader's state; [`Error::Codec`]
/// for malformed bytes.
pub fn leader_finish(
    vdaf: &Prio3Covariance,
    ctx: &[u8],
    leader: LeaderVerifying,
    message: &[u8],
) -> Result<OutputShare<Field>, Error> {
    let message = Prio3VerifierMessage::get_decoded_with_param(&leader.state, message)?;
    finish(vdaf, ctx, leader.state, message)
}

/// `verify_next` of one aggregator's state with the verifier message: its output share.
pub(crate) fn finish<T>(
    vdaf: &Prio3<T, XofTurboShake128, 32>,
    ctx: &[u8],
    state: Prio3VerifyState<Field, 32>,
    message: Prio3VerifierMessage<32>,
) -> Result<OutputShare<Field>, Error>
where
    T: prio::flp::Type<Field = Field>,
{
    match vdaf
        .verify_next(ctx, state, message)
        .map_err(Error::Rejected)?
    {
        VerifyTransition::Finish(out_share) => Ok(out_share),
        VerifyTransition::Continue(..) => Err(Error::Rejected(
            prio::vdaf::VdafError::Uncategorized("Prio3 asked for a second round".into()),
        )),
    }
}

/// Both roles' round for one upload in one process — [`leader_start`], [`helper_verify`],
/// [`leader_finish`] — for tests, benchmarks and simulations: the leader's and the helper's
/// output shares.
///
/// # Errors
///
/// The first error of the three steps.
pub fn verify_both(
    vdaf: &Prio3Covariance,
    verify_key: &[u8; VERIFY_KEY_SIZE],
    ctx: &[u8],
    nonce: &[u8; NONCE_SIZE],
    public_share: &[u8],
    leader_share: &[u8],
    helper_share: &[u8],
) -> Result<(OutputShare<Field>, OutputShare<Field>), Error> {
    let (state, leader_verifier) =
        leader_start(vdaf, verify_key, ctx, nonce, public_share, leader_share)?;
    let (helper_out, message) = helper_verify(
        vdaf,
        verify_key,
        ctx,
        nonce,
        public_share,
        helper_share,
        &leader_verifier,
    )?;
    let leader_out = leader_finish(vdaf, ctx, state, &message)?;
    Ok((leader_out, helper_out))
}

/// An aggregate share in `prio`'s wire encoding (what an aggregator stores and releases).
///
/// # Errors
///
/// [`Error::Codec`] if it fails to encode.
pub fn encode_aggregate(share: &AggregateShare<Field>) -> Result<Vec<u8>, Error> {
    Ok(share.get_encoded()?)
}

/// Decodes an aggregate share of `vdaf`'s output length.
///
/// # Errors
///
/// [`Error::Codec`] for bytes of the wrong length.
pub fn decode_aggregate(
    vdaf: &Prio3Covariance,
    bytes: &[u8],
) -> Result<AggregateShare<Field>, Error> {
    Ok(AggregateShare::get_decoded_with_param(&(vdaf, &()), bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CovarianceReport, new_prio3};
    use prio::vdaf::{Aggregatable, Collector};

    const KEY: [u8; VERIFY_KEY_SIZE] = [9; VERIFY_KEY_SIZE];

    /// p = 3 coordinates of 8 bits (in [-128, 128)), ‖x‖² ≤ 127², x in the output.
    fn vdaf() -> Prio3Covariance {
        new_prio3(CovarianceReport::new(3, 8, 127 * 127, true).unwrap()).unwrap()
    }

    /// `round(127·u)`: inside the bound for ‖u‖ ≤ 1 up to rounding; the tests' vectors
    /// are chosen inside it.
    fn quantise(u: &[f64]) -> Vec<i64> {
        u.iter().map(|v| (127.0 * v).round() as i64).collect()
    }

    /// One report, sharded under its own context, through both roles under
    /// `ctx_aggregators`.
    fn round(
        vdaf: &Prio3Covariance,
        ctx_aggregators: &[u8],
        upload: &Upload,
        nonce: &[u8; NONCE_SIZE],
    ) -> Result<(OutputShare<Field>, OutputShare<Field>), Error> {
        verify_both(
            vdaf,
            &KEY,
            ctx_aggregators,
            nonce,
            &upload.public_share,
            &upload.leader_share,
            &upload.helper_share,
        )
    }

    #[test]
    fn valid_reports_are_accepted_by_both_and_sum_exactly() {
        let vdaf = vdaf();
        let ctx = context("c");
        let mut leader = vdaf.aggregate_init(&());
        let mut helper = vdaf.aggregate_init(&());
        let vectors = [[0.6, -0.7, 0.0], [0.1, 0.2, -0.3]];
        let mut want_y = vec![0i128; 6];
        for (k, u) in vectors.iter().enumerate() {
            let x = quantise(u);
            let mut t = 0;
            for i in 0..3 {
                for j in i..3 {
                    want_y[t] += i128::from(x[i] * x[j]);
                    t += 1;
                }
            }
            let nonce = [k as u8; NONCE_SIZE];
            let upload = shard(&vdaf, &ctx, &x, &nonce).unwrap();
            let (l, h) = round(&vdaf, &ctx, &upload, &nonce).unwrap();
            leader.accumulate(&l).unwrap();
            helper.accumulate(&h).unwrap();
        }
        // Through their wire encoding, as the aggregators store and release them.
        let leader = decode_aggregate(&vdaf, &encode_aggregate(&leader).unwrap()).unwrap();
        let helper = decode_aggregate(&vdaf, &encode_aggregate(&helper).unwrap()).unwrap();
        let sum = vdaf.unshard(&(), [leader, helper], vectors.len()).unwrap();
        assert_eq!(sum.y, want_y);
    }

    /// A report checked under another collection's context, under another nonce, or with
    /// a tampered public share is rejected by the helper (so by both: the leader finishes only
    /// with the helper's message).
    #[test]
    fn replays_and_tampering_are_rejected() {
        let vdaf = vdaf();
        let x = quantise(&[0.5, 0.5, 0.5]);
        let nonce = [1u8; NONCE_SIZE];
        let upload = shard(&vdaf, &context("a"), &x, &nonce).unwrap();
        assert!(round(&vdaf, &context("a"), &upload, &nonce).is_ok());
        assert!(matches!(
            round(&vdaf, &context("b"), &upload, &nonce),
            Err(Error::Rejected(_))
        ));
        assert!(matches!(
            round(&vdaf, &context("a"), &upload, &[2u8; NONCE_SIZE]),
            Err(Error::Rejected(_))
        ));
        let mut tampered = upload.clone();
        tampered.public_share[0] ^= 1;
        assert!(matches!(
            round(&vdaf, &context("a"), &tampered, &nonce),
            Err(Error::Rejected(_))
        ));
        let mut tampered = upload.clone();
        let last = tampered.helper_share.len() - 1;
        tampered.helper_share[last] ^= 1;
        assert!(matches!(
            round(&vdaf, &context("a"), &tampered, &nonce),
            Err(Error::Rejected(_))
        ));
    }

    /// The leader refuses a helper message that is not for its report: a message from another
    /// report's round.
    #[test]
    fn a_message_for_another_report_is_rejected_by_the_leader() {
        let vdaf = vdaf();
        let ctx = context("c");
        let x = quantise(&[0.5, 0.5, 0.5]);
        let (n1, n2) = ([1u8; NONCE_SIZE], [2u8; NONCE_SIZE]);
        let (u1, u2) = (
            shard(&vdaf, &ctx, &x, &n1).unwrap(),
            shard(&vdaf, &ctx, &x, &n2).unwrap(),
        );
        let (state1, _) =
            leader_start(&vdaf, &KEY, &ctx, &n1, &u1.public_share, &u1.leader_share).unwrap();
        let (_, share2) =
            leader_start(&vdaf, &KEY, &ctx, &n2, &u2.public_share, &u2.leader_share).unwrap();
        let (_, message2) = helper_verify(
            &vdaf,
            &KEY,
            &ctx,
            &n2,
            &u2.public_share,
            &u2.helper_share,
            &share2,
        )
        .unwrap();
        assert!(matches!(
            leader_finish(&vdaf, &ctx, state1, &message2),
            Err(Error::Rejected(_))
        ));
    }

    /// Short, long and empty byte strings are codec errors, never panics.
    #[test]
    fn malformed_bytes_are_codec_errors() {
        let vdaf = vdaf();
        let ctx = context("c");
        let nonce = [1u8; NONCE_SIZE];
        let x = quantise(&[0.5, 0.5, 0.5]);
        let upload = shard(&vdaf, &ctx, &x, &nonce).unwrap();
        let mut long = upload.leader_share.clone();
        long.push(0);
        for bad in [&upload.leader_share[..10], &long[..], &[][..]] {
            assert!(matches!(
                leader_start(&vdaf, &KEY, &ctx, &nonce, &upload.public_share, bad),
                Err(Error::Codec(_))
            ));
        }
        let (_, share) = leader_start(
            &vdaf,
            &KEY,
            &ctx,
            &nonce,
            &upload.public_share,
            &upload.leader_share,
        )
        .unwrap();
        assert!(matches!(
            helper_verify(
                &vdaf,
                &KEY,
                &ctx,
                &nonce,
                &upload.public_share,
                &upload.helper_share,
                &share[1..],
            ),
            Err(Error::Codec(_))
        ));
        assert!(matches!(
            decode_aggregate(&vdaf, &[0u8; 5]),
            Err(Error::Codec(_))
        ));
    }
}
