//! The contract of a two-aggregator collection's state: the leader's upload queue and the
//! helper's verdicts (run by [`run_all`](super::run_all) on every backend).

use std::sync::Arc;

use super::{expected, report};
use crate::store::{BatchOutcome, QueuedUpload, Store, StoreError};
use ldpcov_privacy::{Collection, ReportId};
use ldpcov_proto::v1::{CollectionSpec, PrivacyModel};

/// A two-aggregator collection of dimension 2 (its accumulators hold share limbs).
pub(super) fn two_aggregator(id: &str) -> Collection {
    Collection::create(&CollectionSpec {
        collection_id: id.into(),
        dim: 2,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 1.0,
        min_reports: 2,
        privacy_model: PrivacyModel::TwoAggregator as i32,
        ..Default::default()
    })
    .unwrap()
}

fn upload(id: u32, body: &[u8]) -> QueuedUpload {
    QueuedUpload {
        report_id: report(id, 0, 0).report_id,
        body: body.to_vec(),
    }
}

fn id(k: u32) -> ReportId {
    report(k, 0, 0).report_id
}

/// The leader's queue: an upload is queued once per report id (the first stays), listed
/// oldest first up to the limit, refused on a closed collection; `submit_from_queue`
/// counts like `submit` (a counted id once), also on a closed collection, and removes the
/// done ids (counted or not) with the count; per collection; gone with a deleted one.
pub(super) async fn the_leader_queue_holds_each_upload_until_it_is_done<S: Store>(s: Arc<S>) {
    s.create_collection(two_aggregator("a")).await.unwrap();
    s.create_collection(two_aggregator("b")).await.unwrap();
    let n = two_aggregator("a").entries();
    assert_eq!(n, 8 * 5, "8 limbs per element of (x, triu(x·xᵀ))");
    for k in [3, 1, 2] {
        assert_eq!(
            s.queue_upload("a", upload(k, &[k as u8; 3])).await,
            Ok(true)
        );
    }
    // A retry of a queued id changes nothing: the first body stays.
    assert_eq!(s.queue_upload("a", upload(1, b"other")).await, Ok(false));
    assert_eq!(s.queue_upload("b", upload(1, b"b")).await, Ok(true));
    assert_eq!(s.queued_count("a").await, Ok(3));
    let listed = s.queued_uploads("a", 2).await.unwrap();
    assert_eq!(listed, vec![upload(3, &[3; 3]), upload(1, &[1; 3])]);
    assert_eq!(s.queued_uploads("a", 10).await.unwrap().len(), 3);

    // Done: 3 counted, 1 refused; 2 stays queued.
    let counted = vec![report(3, 7, n)];
    assert_eq!(
        s.submit_from_queue("a", counted.clone(), vec![id(3), id(1)])
            .await,
        Ok(BatchOutcome {
            accepted: 1,
            duplicates: 0
        })
    );
    assert_eq!(
        s.queued_uploads("a", 10).await.unwrap(),
        vec![upload(2, &[2; 3])]
    );
    assert_eq!(s.count("a").await, Ok(1));
    assert_eq!(s.snapshot("a").await.unwrap().acc, expected(n, &counted));
    // Counted once: a counted id done again (a resent verification) is a duplicate.
    assert_eq!(
        s.submit_from_queue("a", counted.clone(), vec![id(3)]).await,
        Ok(BatchOutcome {
            accepted: 0,
            duplicates: 1
        })
    );
    // A wrong-length report changes nothing, the queue included.
    assert!(
        s.submit_from_queue("a", vec![report(2, 1, n - 1)], vec![id(2)])
            .await
            .is_err()
    );
    assert_eq!(s.queued_count("a").await, Ok(1));

    // Closed: no new upload, but the queue still drains into the sums.
    s.close_collection("a").await.unwrap();
    assert_eq!(
        s.queue_upload("a", upload(9, b"late")).await,
        Err(StoreError::Closed("a".into()))
    );
    assert_eq!(
        s.submit_from_queue("a", vec![report(2, 1, n)], vec![id(2)])
            .await
            .map(|o| o.accepted),
        Ok(1)
    );
    assert_eq!(s.queued_count("a").await, Ok(0));
    assert_eq!(s.queued_count("b").await, Ok(1));

    // Deleted: the queue goes with it, and the id starts from scratch.
    s.delete_collection("b").await.unwrap();
    assert_eq!(
        s.queue_upload("b", upload(1, b"b")).await,
        Err(StoreError::NotFound("b".into()))
    );
    s.create_collection(two_aggregator("b")).await.unwrap();
    assert_eq!(s.queued_count("b").await, Ok(0));
    assert_eq!(s.queued_uploads("b", 10).await, Ok(vec![]));
}

/// The helper's verdicts: recorded with the reports they count, atomically; the first
/// verdict of a report id stays; a counted id counts once; a wrong-length batch records
/// no verdict; also on a closed collection; gone with a deleted collection.
pub(super) async fn the_helper_keeps_its_first_verdict_per_report<S: Store>(s: Arc<S>) {
    s.create_collection(two_aggregator("h")).await.unwrap();
    let n = two_aggregator("h").entries();
    assert_eq!(s.verdicts("h", &[id(1), id(2)]).await, Ok(vec![None, None]));
    let counted = vec![report(1, 4, n)];
    assert_eq!(
        s.submit_with_verdicts(
            "h",
            counted.clone(),
            vec![(id(1), b"yes".to_vec()), (id(2), b"no".to_vec())]
        )
        .await
        .map(|o| o.accepted),
        Ok(1)
    );
    assert_eq!(
        s.verdicts("h", &[id(2), id(3), id(1)]).await,
        Ok(vec![Some(b"no".to_vec()), None, Some(b"yes".to_vec())])
    );
    // A second verdict for a recorded id is ignored; its report is a duplicate.
    assert_eq!(
        s.submit_with_verdicts("h", counted.clone(), vec![(id(1), b"other".to_vec())])
            .await,
        Ok(BatchOutcome {
            accepted: 0,
            duplicates: 1
        })
    );
    assert_eq!(
        s.verdicts("h", &[id(1)]).await,
        Ok(vec![Some(b"yes".to_vec())])
    );
    // A refused batch records nothing.
    assert!(
        s.submit_with_verdicts(
            "h",
            vec![report(4, 1, n + 1)],
            vec![(id(4), b"yes".to_vec())]
        )
        .await
        .is_err()
    );
    assert_eq!(s.verdicts("h", &[id(4)]).await, Ok(vec![None]));
    assert_eq!(s.snapshot("h").await.unwrap().acc, expected(n, &counted));
    // Closed: the leader's queue still drains, so the helper still verifies.
    s.close_collection("h").await.unwrap();
    assert_eq!(
        s.submit_with_verdicts("h", vec![report(5, 1, n)], vec![(id(5), b"yes".to_vec())])
            .await
            .map(|o| o.accepted),
        Ok(1)
    );
    s.delete_collection("h").await.unwrap();
    assert_eq!(
        s.verdicts("h", &[id(1)]).await,
        Err(StoreError::NotFound("h".into()))
    );
    s.create_collection(two_aggregator("h")).await.unwrap();
    assert_eq!(s.verdicts("h", &[id(1)]).await, Ok(vec![None]));
}
