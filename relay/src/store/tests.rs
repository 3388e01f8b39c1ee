use super::*;
use crate::token::DeviceTokenIssuer;

const RULE: CloseRule = CloseRule {
    min_batch_size: 3,
    window_seconds: 100,
};

fn device(name: &str) -> DeviceId {
    DeviceId::new(name).unwrap()
}

fn sealed(tag: u64) -> SealedReport {
    let mut ciphertext = tag.to_le_bytes().to_vec();
    ciphertext.extend_from_slice(&[0xab; 24]);
    SealedReport {
        key_id: 7,
        enc: vec![tag as u8; 32],
        ciphertext,
    }
}

fn submission(collection: &str, dev: &str, sub: u8, tag: u64, now: u64) -> Submission {
    Submission {
        collection_id: collection.into(),
        device: device(dev),
        submission_id: [sub; 16],
        sealed: sealed(tag),
        now,
        rule: RULE,
        new_device_cap: 0,
    }
}

fn open() -> (tempfile::TempDir, RelayStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = RelayStore::open(dir.path()).unwrap();
    (dir, store)
}

#[tokio::test]
async fn one_report_per_device_per_collection_and_resends_are_idempotent() {
    let (_dir, store) = open();
    assert_eq!(
        store.submit(submission("c", "d1", 1, 1, 10)).await.unwrap(),
        SubmitOutcome::Stored
    );
    // The same submission again: a duplicate, nothing changes.
    assert_eq!(
        store.submit(submission("c", "d1", 1, 1, 11)).await.unwrap(),
        SubmitOutcome::Duplicate
    );
    // Another report of the same device: refused.
    assert_eq!(
        store.submit(submission("c", "d1", 2, 2, 12)).await.unwrap(),
        SubmitOutcome::DeviceAlreadyReported
    );
    // The same device in another collection, another device here: fine.
    assert_eq!(
        store
            .submit(submission("other", "d1", 2, 2, 12))
            .await
            .unwrap(),
        SubmitOutcome::Stored
    );
    assert_eq!(
        store.submit(submission("c", "d2", 3, 3, 13)).await.unwrap(),
        SubmitOutcome::Stored
    );
    let status = store.status("c").unwrap();
    assert_eq!((status.window_reports, status.window_opened), (2, 10));
    // Close the window: the device may not report again in the next one, and its
    // resend stays a duplicate.
    store.submit(submission("c", "d3", 4, 4, 14)).await.unwrap();
    assert_eq!(store.form_due_batches(110).await.unwrap().len(), 1);
    assert_eq!(
        store
            .submit(submission("c", "d1", 2, 2, 120))
            .await
            .unwrap(),
        SubmitOutcome::DeviceAlreadyReported
    );
    assert_eq!(
        store
            .submit(submission("c", "d1", 1, 1, 120))
            .await
            .unwrap(),
        SubmitOutcome::Duplicate
    );
    // The same sealed bytes under another device and submission id: a duplicate.
    assert_eq!(
        store
            .submit(submission("c", "d4", 5, 3, 121))
            .await
            .unwrap(),
        SubmitOutcome::Duplicate
    );
    assert_eq!(
        store
            .submit(submission("c", "d5", 6, 6, 122))
            .await
            .unwrap(),
        SubmitOutcome::Stored
    );
    let status = store.status("c").unwrap();
    assert_eq!((status.window_reports, status.window_opened), (1, 122));
    assert_eq!(
        (status.pending_batches, status.pending_batch_reports),
        (1, 3)
    );
}

#[tokio::test]
async fn a_window_closes_only_when_old_enough_and_full_enough() {
    let (_dir, store) = open();
    for (i, dev) in ["a", "b"].iter().enumerate() {
        store
            .submit(submission("c", dev, i as u8, i as u64, 1000 + i as u64))
            .await
            .unwrap();
    }
    // Old enough, but 2 < 3 reports: it stays open past its time.
    assert!(store.form_due_batches(5000).await.unwrap().is_empty());
    store
        .submit(submission("c", "z", 9, 9, 5001))
        .await
        .unwrap();
    // Full enough, one second short of 100 s after the first report: still open.
    assert!(store.form_due_batches(1099).await.unwrap().is_empty());
    let formed = store.form_due_batches(1100).await.unwrap();
    assert_eq!(formed.len(), 1);
    assert_eq!((formed[0].collection_id.as_str(), formed[0].size), ("c", 3));
    assert_eq!(store.status("c").unwrap().window_reports, 0);
    assert!(store.form_due_batches(9999).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_batch_holds_exactly_the_sealed_reports_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let sent: Vec<SealedReport> = (0..5).map(sealed).collect();
    let formed = {
        let store = RelayStore::open(dir.path()).unwrap();
        for (i, s) in sent.iter().enumerate() {
            let mut sub = submission("c", &format!("dev-{i}"), i as u8, 0, 50);
            sub.sealed = s.clone();
            store.submit(sub).await.unwrap();
        }
        store.form_due_batches(150).await.unwrap()
    };
    // Reopened: the batch is there, with exactly the bytes received (as a multiset).
    let store = RelayStore::open(dir.path()).unwrap();
    assert_eq!(store.pending_batches().unwrap(), formed);
    let mut got = store.batch_reports(formed[0].seq).unwrap();
    let key = |r: &SealedReport| r.encode_to_vec();
    got.sort_by_key(key);
    let mut want = sent.clone();
    want.sort_by_key(key);
    assert_eq!(got, want);
    // Nothing else about a report is stored with the batch: every value of the batch
    // tables is a sealed report or the batch header (id, size, collection id).
    let txn = store.db.begin_read().unwrap();
    for row in txn.open_table(BATCH_REPORTS).unwrap().iter().unwrap() {
        let (_, v) = row.unwrap();
        assert!(want.iter().any(|s| s.encode_to_vec() == v.value()));
    }
    for row in txn.open_table(BATCHES).unwrap().iter().unwrap() {
        let (_, v) = row.unwrap();
        assert_eq!(v.value().len(), 16 + 8 + 1);
    }
    // The window's reports are gone with it; the device and sealed-bytes records
    // stay for the collection's life.
    assert_eq!(txn.open_table(WINDOW_REPORTS).unwrap().len().unwrap(), 0);
    assert_eq!(txn.open_table(WINDOWS).unwrap().len().unwrap(), 0);
    assert_eq!(txn.open_table(DEVICES).unwrap().len().unwrap(), 5);
    assert_eq!(txn.open_table(CIPHERTEXTS).unwrap().len().unwrap(), 5);
    drop(txn);
    // Acknowledged: deleted and counted, once.
    assert!(store.forwarded(formed[0].seq).await.unwrap());
    assert!(!store.forwarded(formed[0].seq).await.unwrap());
    let status = store.status("c").unwrap();
    assert_eq!(
        (
            status.pending_batches,
            status.forwarded_batches,
            status.forwarded_reports
        ),
        (0, 1, 5)
    );
}

#[tokio::test]
async fn the_dedupe_record_holds_no_device_id() {
    let (_dir, store) = open();
    let id = "device-with-a-recognisable-name";
    store.submit(submission("c", id, 1, 1, 1)).await.unwrap();
    let txn = store.db.begin_read().unwrap();
    for row in txn.open_table(DEVICES).unwrap().iter().unwrap() {
        let (k, _) = row.unwrap();
        let (_, tag) = k.value();
        assert!(!tag.windows(6).any(|w| w == &id.as_bytes()[..6]));
    }
    drop(txn);
    let bytes = std::fs::read(_dir.path().join(DB_FILE)).unwrap();
    assert!(!bytes.windows(id.len()).any(|w| w == id.as_bytes()));
}

/// The χ² statistic of a table of counts against a uniform expectation.
fn chi_square(table: &[Vec<u64>], expected: f64) -> f64 {
    table
        .iter()
        .flatten()
        .map(|&o| (o as f64 - expected).powi(2) / expected)
        .sum()
}

/// A batch is a uniformly random permutation of its window's arrivals.
///
/// N = 8 reports per window, identifiable by their arrival rank; B = 2000 batches (50
/// collections per round, 40 rounds). Under a uniform permutation every cell of the
/// arrival-rank × batch-position table has expectation E = B/N = 250 and the statistic
/// Σ (O − E)²/E is asymptotically χ² with (N − 1)² = 49 degrees of freedom (both
/// margins are fixed at B). Its upper 10⁻⁶ quantile is 111.14 (series for the
/// regularised incomplete gamma, bisection), so the test fails spuriously once in a
/// million runs. The shuffle draws from the OS, so no seed can be fixed; the bound is.
/// An unshuffled store (the identity) would score 8·1750²/250 + 56·250 = 112 000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_uniformly_permuted() {
    const N: usize = 8;
    const COLLECTIONS: usize = 50;
    const ROUNDS: usize = 40;
    const BOUND: f64 = 111.14;
    let (_dir, store) = open();
    let store = Arc::new(store);
    let issuer = DeviceTokenIssuer::from_bytes([3; 32]);
    let mut table = vec![vec![0u64; N]; N];
    let mut batches = 0;
    for round in 0..ROUNDS {
        let now = 1000 * round as u64;
        // Arrival order is the order of the commits: submit rank r of every collection,
        // wait for all, then rank r + 1.
        for rank in 0..N {
            let tasks: Vec<_> = (0..COLLECTIONS)
                .map(|c| {
                    let store = Arc::clone(&store);
                    let device = issuer
                        .verify(&issuer.issue(&format!("d{rank}")).unwrap())
                        .unwrap();
                    tokio::spawn(async move {
                        store
                            .submit(Submission {
                                // A collection per round: a device reports once.
                                collection_id: format!("c{c}.{round}"),
                                device,
                                submission_id: [rank as u8; 16],
                                sealed: sealed(rank as u64),
                                now: now + rank as u64,
                                rule: CloseRule {
                                    min_batch_size: N as u64,
                                    window_seconds: 1,
                                },
                                new_device_cap: 0,
                            })
                            .await
                    })
                })
                .collect();
            for t in tasks {
                assert_eq!(t.await.unwrap().unwrap(), SubmitOutcome::Stored);
            }
        }
        let formed = store.form_due_batches(now + 100).await.unwrap();
        assert_eq!(formed.len(), COLLECTIONS);
        for b in formed {
            let reports = store.batch_reports(b.seq).unwrap();
            assert_eq!(reports.len(), N);
            for (position, r) in reports.iter().enumerate() {
                let rank = u64::from_le_bytes(r.ciphertext[..8].try_into().unwrap()) as usize;
                table[rank][position] += 1;
            }
            store.forwarded(b.seq).await.unwrap();
            batches += 1;
        }
    }
    assert_eq!(batches, COLLECTIONS * ROUNDS);
    let expected = batches as f64 / N as f64;
    let statistic = chi_square(&table, expected);
    assert!(
        statistic < BOUND,
        "χ² = {statistic:.1} ≥ {BOUND} (49 df, α = 1e-6): positions depend on arrival; {table:?}"
    );
    // The test has power: the identity permutation is far beyond the bound.
    let identity: Vec<Vec<u64>> = (0..N)
        .map(|r| {
            (0..N)
                .map(|p| if r == p { batches as u64 } else { 0 })
                .collect()
        })
        .collect();
    assert!(chi_square(&identity, expected) > 1000.0 * BOUND);
}

#[tokio::test]
async fn batch_ids_are_random_and_distinct() {
    let (_dir, store) = open();
    let mut ids = std::collections::HashSet::new();
    for round in 0..20u64 {
        for d in 0..3 {
            store
                .submit(submission(
                    &format!("c{round}"),
                    &format!("d{d}"),
                    d as u8,
                    d,
                    round * 1000,
                ))
                .await
                .unwrap();
        }
        for b in store.form_due_batches(round * 1000 + 500).await.unwrap() {
            assert!(ids.insert(b.batch_id));
        }
    }
    assert_eq!(ids.len(), 20);
    // Sequence numbers order the batches; their ids carry no order.
    let seqs: Vec<u64> = store
        .pending_batches()
        .unwrap()
        .iter()
        .map(|b| b.seq)
        .collect();
    assert_eq!(seqs, (0..20).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_window_holds_one_key_id() {
    let (_dir, store) = open();
    for d in 0..4u64 {
        let mut sub = submission("c", &format!("d{d}"), d as u8, d, 10);
        sub.sealed.key_id = 7 + (d % 2) as u32;
        assert_eq!(store.submit(sub).await.unwrap(), SubmitOutcome::Stored);
    }
    assert_eq!(store.status("c").unwrap().window_reports, 4);
    // Two windows of 2 < 3 reports: neither is due.
    assert!(store.form_due_batches(1000).await.unwrap().is_empty());
    let mut sub = submission("c", "d4", 4, 4, 20);
    sub.sealed.key_id = 8;
    store.submit(sub).await.unwrap();
    let formed = store.form_due_batches(1000).await.unwrap();
    assert_eq!(formed.len(), 1);
    let reports = store.batch_reports(formed[0].seq).unwrap();
    assert_eq!(reports.len(), 3);
    assert!(reports.iter().all(|r| r.key_id == 8));
    // A floor above the window's rule holds a window back.
    for d in 5..8u64 {
        store
            .submit(submission("other", &format!("d{d}"), d as u8, d, 10))
            .await
            .unwrap();
    }
    let floor = CloseRule {
        min_batch_size: 4,
        window_seconds: 0,
    };
    assert!(
        store
            .form_batches(1000, floor, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .form_batches(1000, RULE, Some(vec!["c".into()]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.form_due_batches(1000).await.unwrap().len(), 1);
}

#[tokio::test]
async fn settings_are_pinned_once_and_survive_a_restart() {
    use ldpcov_proto::v1::{CollectionParams, CollectionSpec, ShuffleSpec};
    let params = |min: u64| CollectionParams {
        spec: Some(CollectionSpec {
            collection_id: "c".into(),
            dim: 3,
            epsilon: 2.0,
            shuffle: Some(ShuffleSpec {
                min_batch_size: min,
                batch_window_seconds: 60,
                central_delta: 1e-7,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let first = PinnedSettings::from_params(&params(1000)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RelayStore::open(dir.path()).unwrap();
        assert_eq!(store.pinned("c").unwrap(), None);
        assert_eq!(store.pin("c", first.clone()).await.unwrap(), first);
        // A later pin keeps the first.
        let later = PinnedSettings::from_params(&params(2)).unwrap();
        assert_eq!(store.pin("c", later).await.unwrap(), first);
    }
    let store = RelayStore::open(dir.path()).unwrap();
    assert_eq!(store.pinned("c").unwrap(), Some(first));
}

#[tokio::test]
async fn a_store_of_another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(RelayStore::open(dir.path()).unwrap());
    {
        let db = Database::builder()
            .create(dir.path().join(DB_FILE))
            .unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert("format_version", 1)
            .unwrap();
        txn.commit().unwrap();
    }
    let err = RelayStore::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("format version 1"), "{err}");
}

/// Issue 43, item 5: the device tags were HMAC(salt, device id) with the salt in the
/// same file, so whoever read the store could test a guessed device id of an open
/// window. The tag must not be what the salt alone gives.
#[tokio::test]
async fn the_salt_in_the_file_does_not_recover_a_device_tag() {
    let (_dir, store) = open();
    store
        .submit(submission("c", "phone-1", 1, 1, 10))
        .await
        .unwrap();
    let txn = store.db.begin_read().unwrap();
    let salt = txn
        .open_table(SALTS)
        .unwrap()
        .get("c")
        .unwrap()
        .unwrap()
        .value();
    // What someone with the file and a guessed device id computes.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&salt).unwrap();
    mac.update(b"phone-1");
    let guess: [u8; 32] = mac.finalize().into_bytes().into();
    let mut tags = 0;
    for row in txn.open_table(DEVICES).unwrap().iter().unwrap() {
        let (key, _) = row.unwrap();
        assert_ne!(
            key.value().1,
            guess,
            "the salt in the file gives the device's tag"
        );
        tags += 1;
    }
    assert_eq!(tags, 1);
}

/// The daemon's key: the tags are not what the zero key gives either, and a store
/// written with one key is refused under another (else every device could report
/// again).
#[tokio::test]
async fn a_store_of_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = DeviceTokenIssuer::from_bytes([3; 32]).device_tag_key();
    let store = RelayStore::open_with(dir.path(), &StoreOptions::with_key(key)).unwrap();
    store
        .submit(submission("c", "phone-1", 1, 1, 10))
        .await
        .unwrap();
    drop(store);
    let other = DeviceTokenIssuer::from_bytes([4; 32]).device_tag_key();
    let error = RelayStore::open_with(dir.path(), &StoreOptions::with_key(other))
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(error, StoreError::OtherKey { .. }), "{error}");
    let store = RelayStore::open_with(dir.path(), &StoreOptions::with_key(key)).unwrap();
    assert_eq!(
        store
            .submit(submission("c", "phone-1", 2, 2, 11))
            .await
            .unwrap(),
        SubmitOutcome::DeviceAlreadyReported
    );
}

#[tokio::test]
async fn retiring_drops_windows_and_batches_counts_them_and_refuses_later_reports() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RelayStore::open(dir.path()).unwrap();
        // Collection "gone": one batch of 3 formed (at t = 200) and 2 reports in a new
        // window; collection "kept": 1 report.
        for (i, dev) in ["a", "b", "c"].into_iter().enumerate() {
            let s = submission("gone", dev, 1, i as u64, 10);
            assert_eq!(store.submit(s).await.unwrap(), SubmitOutcome::Stored);
        }
        assert_eq!(store.form_due_batches(200).await.unwrap().len(), 1);
        for (i, dev) in ["d", "e"].into_iter().enumerate() {
            let s = submission("gone", dev, 1, 10 + i as u64, 210);
            assert_eq!(store.submit(s).await.unwrap(), SubmitOutcome::Stored);
        }
        let s = submission("kept", "a", 1, 20, 210);
        assert_eq!(store.submit(s).await.unwrap(), SubmitOutcome::Stored);

        let r = store
            .retire("gone", RetireReason::Closed, 300)
            .await
            .unwrap();
        assert_eq!(
            r,
            Retired {
                reason: RetireReason::Closed,
                at: 300,
                window_reports: 2,
                batch_reports: 3
            }
        );
        // Retiring again (now as deleted) keeps the first record.
        let again = store
            .retire("gone", RetireReason::Deleted, 400)
            .await
            .unwrap();
        assert_eq!(again, r);
    }
    // Durable: reopened, the record, the refusal and the other collection are there.
    let store = RelayStore::open(dir.path()).unwrap();
    assert!(store.pending_batches().unwrap().is_empty());
    let status = store.status("gone").unwrap();
    assert_eq!(
        (status.window_reports, status.pending_batches),
        (0, 0),
        "nothing of the retired collection is held"
    );
    assert_eq!(status.retired, "closed");
    assert_eq!(
        (
            status.retired_at,
            status.retired_window_reports,
            status.retired_batch_reports
        ),
        (300, 2, 3)
    );
    assert_eq!(
        store
            .submit(submission("gone", "f", 1, 30, 500))
            .await
            .unwrap(),
        SubmitOutcome::Retired
    );
    assert_eq!(store.status("kept").unwrap().window_reports, 1);
    assert_eq!(store.status("kept").unwrap().retired, "");
    let all = store.retired_all().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all["gone"], r_expected());
}

fn r_expected() -> Retired {
    Retired {
        reason: RetireReason::Closed,
        at: 300,
        window_reports: 2,
        batch_reports: 3,
    }
}

#[tokio::test]
async fn the_oldest_due_window_is_dated_from_when_it_became_due() {
    let (_dir, store) = open();
    let floor = CloseRule {
        min_batch_size: 0,
        window_seconds: 0,
    };
    for (i, dev) in ["a", "b"].into_iter().enumerate() {
        let s = submission("c", dev, 1, i as u64, 10);
        store.submit(s).await.unwrap();
    }
    // Opened at 10 with a 100 s window and 2 < 3 reports: never due yet.
    assert_eq!(store.oldest_due_window(500, floor).unwrap(), None);
    store.submit(submission("c", "z", 1, 9, 20)).await.unwrap();
    assert_eq!(store.oldest_due_window(50, floor).unwrap(), None);
    assert_eq!(store.oldest_due_window(500, floor).unwrap(), Some(110));
}
