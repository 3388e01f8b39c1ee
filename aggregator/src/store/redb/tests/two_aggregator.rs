//! The durable store's two-aggregator state: on disk with the reports it goes with.

use super::*;
use crate::store::QueuedUpload;

fn upload(id: u32, body: &[u8]) -> QueuedUpload {
    QueuedUpload {
        report_id: report(id, 0, 0).report_id,
        body: body.to_vec(),
    }
}

fn rid(id: u32) -> ReportId {
    report(id, 0, 0).report_id
}

/// A leader's queue (in arrival order) and a helper's verdicts are on disk with the
/// counts they went with: a failed commit changes none of them, and a reopened store
/// has all of them, the queue's order, its dedupe and the closed flag included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_and_the_verdicts_survive_a_restart_with_their_counts() {
    let dir = tempfile::tempdir().unwrap();
    let c = collection("leader", 2);
    let n = c.entries();
    {
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.create_collection(collection("helper", 2)).await.unwrap();
        for k in [5, 2, 9, 7] {
            assert_eq!(
                s.queue_upload("leader", upload(k, &[k as u8; 4])).await,
                Ok(true)
            );
        }
        assert_eq!(
            s.submit_from_queue("leader", vec![report(9, 1, n)], vec![rid(9)])
                .await
                .map(|o| o.accepted),
            Ok(1)
        );
        assert_eq!(
            s.submit_with_verdicts(
                "helper",
                vec![report(1, 2, n)],
                vec![(rid(1), b"yes".to_vec()), (rid(2), b"no".to_vec())]
            )
            .await
            .map(|o| o.accepted),
            Ok(1)
        );
        // A failed commit drains nothing, records nothing, counts nothing.
        s.fail_next_commits(1);
        assert!(matches!(
            s.submit_from_queue("leader", vec![report(5, 1, n)], vec![rid(5)])
                .await,
            Err(StoreError::Unavailable(_))
        ));
        s.fail_next_commits(1);
        assert!(matches!(
            s.submit_with_verdicts(
                "helper",
                vec![report(3, 1, n)],
                vec![(rid(3), b"yes".to_vec())]
            )
            .await,
            Err(StoreError::Unavailable(_))
        ));
        s.fail_next_commits(1);
        assert!(matches!(
            s.queue_upload("leader", upload(8, b"lost")).await,
            Err(StoreError::Unavailable(_))
        ));
        s.close_collection("helper").await.unwrap();
    }
    let s = DurableStore::open(dir.path(), quick()).unwrap();
    assert_eq!(
        s.queued_uploads("leader", 10).await,
        Ok(vec![
            upload(5, &[5; 4]),
            upload(2, &[2; 4]),
            upload(7, &[7; 4])
        ])
    );
    assert_eq!(s.queued_count("leader").await, Ok(3));
    assert_eq!(s.count("leader").await, Ok(1));
    assert_eq!(
        s.verdicts("helper", &[rid(1), rid(2), rid(3)]).await,
        Ok(vec![Some(b"yes".to_vec()), Some(b"no".to_vec()), None])
    );
    assert_eq!(s.count("helper").await, Ok(1));
    assert!(s.is_closed("helper").await.unwrap());
    // Still deduped, still ordered: a queued id stays queued once, a new one goes last.
    assert_eq!(
        s.queue_upload("leader", upload(2, b"again")).await,
        Ok(false)
    );
    assert_eq!(s.queue_upload("leader", upload(1, b"new")).await, Ok(true));
    assert_eq!(
        s.queued_uploads("leader", 10)
            .await
            .map(|q| q.iter().map(|u| u.report_id).collect::<Vec<_>>()),
        Ok(vec![rid(5), rid(2), rid(7), rid(1)])
    );
    // The seen ids survived: a counted id done again is a duplicate.
    assert_eq!(
        s.submit_from_queue("leader", vec![report(9, 1, n)], vec![rid(9)])
            .await
            .map(|o| (o.accepted, o.duplicates)),
        Ok((0, 1))
    );
    // The helper still verifies on its closed collection, keeping its first verdict.
    assert_eq!(
        s.submit_with_verdicts(
            "helper",
            vec![report(2, 2, n)],
            vec![(rid(2), b"other".to_vec())]
        )
        .await
        .map(|o| o.accepted),
        Ok(1)
    );
    assert_eq!(
        s.verdicts("helper", &[rid(2)]).await,
        Ok(vec![Some(b"no".to_vec())])
    );
}
