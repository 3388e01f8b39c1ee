//! Two-aggregator collections through two real aggregators in process, a leader and a
//! helper, each with its own store: the collection created on both (the helper first),
//! the helper's keys published by the helper alone, devices' uploads verified by both
//! over gRPC, invalid reports refused by both, a report id counted once by each however
//! often it is sent, and the two stores' shares combining exactly to the sums of the
//! valid reports' vectors.

use std::sync::Arc;
use std::time::Duration;

use ldpcov_aggregator::two_aggregator::{
    LeaderConfig, PeerSecret, TwoAggregatorRole, aggregate_share,
};
use ldpcov_aggregator::{EmbeddedServer, Limits, MemoryStore, ServeOptions, Store};
use ldpcov_client::{Collection, ReportBuilder, active_key, two_aggregator_measurement};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, CreateCollectionRequest, GetCollectionRequest, GetEstimateRequest,
    PrivacyModel, Report, TwoAggregatorReport, VerifySharesRequest,
};
use ldpcov_seal::MasterSecret;
use prio::vdaf::Collector;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tonic::Code;
use tonic::transport::Channel;

const DIM: u32 = 4;

/// A two-aggregator collection of p = 4 (ε = 1, δ = 10⁻⁶, R = 2, minimum 10).
pub(crate) fn spec(id: &str) -> CollectionSpec {
    CollectionSpec {
        collection_id: id.into(),
        dim: DIM,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 2.0,
        min_reports: 10,
        privacy_model: PrivacyModel::TwoAggregator as i32,
        ..Default::default()
    }
}

fn peer() -> Arc<PeerSecret> {
    Arc::new(PeerSecret::new(MasterSecret::from_bytes([42; 32])))
}

/// A helper and a leader, each on its own memory store.
struct Pair {
    helper: EmbeddedServer,
    leader: EmbeddedServer,
    helper_store: Arc<MemoryStore>,
    leader_store: Arc<MemoryStore>,
}

async fn pair() -> Pair {
    let helper_store = Arc::new(MemoryStore::new());
    let leader_store = Arc::new(MemoryStore::new());
    let helper = EmbeddedServer::start_with_options(
        helper_store.clone(),
        ServeOptions {
            two_aggregator: Some(TwoAggregatorRole::Helper { peer: peer() }),
            ..Limits::default().into()
        },
    )
    .await
    .unwrap();
    let leader = EmbeddedServer::start_with_options(
        leader_store.clone(),
        ServeOptions {
            two_aggregator: Some(TwoAggregatorRole::Leader(LeaderConfig {
                helper_url: helper.url(),
                helper_tls: None,
                peer: peer(),
            })),
            ..Limits::default().into()
        },
    )
    .await
    .unwrap();
    Pair {
        helper,
        leader,
        helper_store,
        leader_store,
    }
}

async fn create(raw: &mut RawClient<Channel>, spec: CollectionSpec) -> Result<(), tonic::Status> {
    raw.create_collection(CreateCollectionRequest { spec: Some(spec) })
        .await
        .map(|_| ())
}

/// Polls until both stores have counted `n` reports and the leader's queue is empty.
async fn wait_counted(p: &Pair, id: &str, n: u64) {
    for _ in 0..400 {
        let (l, h, q) = (
            p.leader_store.count(id).await.unwrap(),
            p.helper_store.count(id).await.unwrap(),
            p.leader_store.queued_count(id).await.unwrap(),
        );
        if l == n && h == n && q == 0 {
            return;
        }
        assert!(
            l <= n && h <= n,
            "counted more than sent: leader {l}, helper {h}, expected {n}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "not counted in time: leader {}, helper {}, queued {} (expected {n})",
        p.leader_store.count(id).await.unwrap(),
        p.helper_store.count(id).await.unwrap(),
        p.leader_store.queued_count(id).await.unwrap()
    );
}

#[tokio::test]
async fn leader_and_helper_count_the_valid_reports_once_and_their_shares_sum_exactly() {
    let p = pair().await;
    let mut leader = RawClient::connect(p.leader.url()).await.unwrap();
    let mut helper = RawClient::connect(p.helper.url()).await.unwrap();

    // The leader refuses a collection its helper does not hold, and creates nothing.
    let err = create(&mut leader, spec("two")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert!(
        err.message().contains("creates it there first"),
        "{}",
        err.message()
    );
    // Created on the helper, then on the leader; another spec at the leader is refused.
    create(&mut helper, spec("two")).await.unwrap();
    let err = create(
        &mut leader,
        CollectionSpec {
            epsilon: 2.0,
            ..spec("two")
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    create(&mut leader, spec("two")).await.unwrap();

    // The helper publishes its keys; the leader never serves any (a device takes the
    // helper's key from the helper).
    let get = |id: &str| GetCollectionRequest {
        collection_id: id.into(),
    };
    let helper_params = helper
        .get_collection(get("two"))
        .await
        .unwrap()
        .into_inner();
    let leader_params = leader
        .get_collection(get("two"))
        .await
        .unwrap()
        .into_inner();
    let keys = &helper_params.two_aggregator.as_ref().unwrap().helper_keys;
    assert_eq!(keys.len(), 2, "the active and the pending key");
    assert!(
        leader_params
            .two_aggregator
            .as_ref()
            .unwrap()
            .helper_keys
            .is_empty()
    );
    let key = active_key(keys).unwrap();
    let collection = Collection::from_params(&leader_params).unwrap();

    // 30 devices' reports, each sent twice (a retry): counted once by each.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut builder = ReportBuilder::new().unwrap();
    let mut want_y = vec![0i128; 10];
    let mut want_x = vec![0i128; DIM as usize];
    let mut uploads: Vec<TwoAggregatorReport> = Vec::new();
    for _ in 0..30 {
        let x: Vec<f64> = (0..DIM).map(|_| rng.random_range(-1.5..1.5)).collect();
        let grid = two_aggregator_measurement(&collection, &x).unwrap();
        let mut t = 0;
        for i in 0..DIM as usize {
            want_x[i] += i128::from(grid[i]);
            for j in i..DIM as usize {
                want_y[t] += i128::from(grid[i] * grid[j]);
                t += 1;
            }
        }
        uploads.push(
            builder
                .two_aggregator_report(&collection, &key, &x)
                .unwrap(),
        );
    }
    for u in &uploads {
        let first = leader
            .upload_two_aggregator_report(u.clone())
            .await
            .unwrap()
            .into_inner();
        let _retry = leader
            .upload_two_aggregator_report(u.clone())
            .await
            .unwrap();
        assert!(!first.duplicate);
    }

    // Invalid reports, refused by both: a tampered leader share (the proof fails), and a
    // helper share sealed for another report (it does not open for this one).
    let x = [0.3, -0.2, 0.1, 0.4];
    let mut tampered = builder
        .two_aggregator_report(&collection, &key, &x)
        .unwrap();
    let last = tampered.leader_share.len() - 1;
    tampered.leader_share[last - 20] ^= 1;
    let mut swapped = builder
        .two_aggregator_report(&collection, &key, &x)
        .unwrap();
    swapped.helper_share = uploads[0].helper_share.clone();
    for bad in [tampered, swapped] {
        leader.upload_two_aggregator_report(bad).await.unwrap();
    }
    wait_counted(&p, "two", 30).await;

    // A counted report sent again later: both still count it once.
    leader
        .upload_two_aggregator_report(uploads[3].clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    wait_counted(&p, "two", 30).await;

    // The two shares combine to exactly the sums of the 30 valid vectors.
    let vdaf = ldpcov_prio::collection_prio3(&collection.two_aggregator().unwrap()).unwrap();
    let l = aggregate_share(&p.leader_store.snapshot("two").await.unwrap().acc);
    let h = aggregate_share(&p.helper_store.snapshot("two").await.unwrap().acc);
    let sum = vdaf.unshard(&(), [l.clone(), h.clone()], 30).unwrap();
    assert_eq!(sum.y, want_y);
    assert_eq!(sum.x.as_ref(), Some(&want_x));
    // Either share alone is not the sum.
    assert_ne!(
        vdaf.unshard(&(), [l.clone(), l], 30).map(|s| s.y).ok(),
        Some(want_y)
    );

    p.leader.shutdown().await.unwrap();
    p.helper.shutdown().await.unwrap();
}

/// What neither daemon takes: a payload report of a two-aggregator collection, an
/// estimate without a release, an upload to the helper, a verification from anyone but the leader, a
/// malformed upload (nothing queued).
#[tokio::test]
async fn the_wrong_calls_are_refused_and_change_nothing() {
    let p = pair().await;
    let mut leader = RawClient::connect(p.leader.url()).await.unwrap();
    let mut helper = RawClient::connect(p.helper.url()).await.unwrap();
    create(&mut helper, spec("w")).await.unwrap();
    create(&mut leader, spec("w")).await.unwrap();
    let report = Report {
        collection_id: "w".into(),
        report_id: vec![1; 16],
        payload: vec![0; 16],
        ..Default::default()
    };
    for raw in [&mut leader, &mut helper] {
        let err = raw.submit_report(report.clone()).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    }
    // An estimate names its release, as a central collection's does.
    let err = leader
        .get_estimate(GetEstimateRequest {
            collection_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    let upload = TwoAggregatorReport {
        collection_id: "w".into(),
        report_id: vec![2; 16],
        public_share: vec![1, 2, 3],
        leader_share: vec![4, 5, 6],
        helper_share: Some(Default::default()),
    };
    let err = helper
        .upload_two_aggregator_report(upload.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    let err = leader
        .upload_two_aggregator_report(upload.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    let err = leader
        .upload_two_aggregator_report(TwoAggregatorReport {
            report_id: vec![2; 15],
            ..upload
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    assert_eq!(p.leader_store.queued_count("w").await, Ok(0));
    // VerifyShares: without the leader's token, and on the leader (no helper role).
    let verify = VerifySharesRequest {
        collection_id: "w".into(),
        reports: Vec::new(),
    };
    let err = helper.verify_shares(verify.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{}", err.message());
    let err = leader.verify_shares(verify).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    p.leader.shutdown().await.unwrap();
    p.helper.shutdown().await.unwrap();
}

/// A release through both daemons: the leader's estimate combines the two noisy shares,
/// each aggregator charges its own ledger; the helper alone refuses a release below the
/// minimum, over another count than its own, of another mechanism, or beyond its budget,
/// whatever the leader asks (the leader's token, sent directly).
#[tokio::test]
async fn a_release_charges_both_ledgers_and_the_helper_enforces_its_own_limits() {
    use ldpcov_proto::v1::{
        CentralMechanism, CentralRelease, GetStatusRequest, ReleaseShareRequest,
    };
    let p = pair().await;
    let mut leader = RawClient::connect(p.leader.url()).await.unwrap();
    let mut helper = RawClient::connect(p.helper.url()).await.unwrap();
    let spec = CollectionSpec {
        min_reports: 12,
        ..spec("rel")
    };
    create(&mut helper, spec.clone()).await.unwrap();
    create(&mut leader, spec).await.unwrap();
    let params = leader
        .get_collection(GetCollectionRequest {
            collection_id: "rel".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let collection = Collection::from_params(&params).unwrap();
    let helper_params = helper
        .get_collection(GetCollectionRequest {
            collection_id: "rel".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let key = active_key(&helper_params.two_aggregator.unwrap().helper_keys).unwrap();
    let mut builder = ReportBuilder::new().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let send = |n: usize, builder: &mut ReportBuilder, rng: &mut ChaCha8Rng| {
        (0..n)
            .map(|_| {
                let x: Vec<f64> = (0..DIM).map(|_| rng.random_range(-1.0..1.0)).collect();
                builder
                    .two_aggregator_report(&collection, &key, &x)
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    for u in send(10, &mut builder, &mut rng) {
        leader.upload_two_aggregator_report(u).await.unwrap();
    }
    wait_counted(&p, "rel", 10).await;

    let rho = collection.rho();
    let release = |rho: f64| CentralRelease {
        mechanism: CentralMechanism::GaussCov as i32,
        rho,
        ..Default::default()
    };
    let estimate = |rho: f64| GetEstimateRequest {
        collection_id: "rel".into(),
        release: Some(release(rho)),
        ..Default::default()
    };
    // Below the minimum: refused by the leader, and by the helper asked directly.
    let err = leader.get_estimate(estimate(rho / 2.0)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    let token: tonic::metadata::MetadataValue<_> = format!("Bearer {}", peer().leader_token_text())
        .parse()
        .unwrap();
    let ask = |reports: u64, release: CentralRelease| {
        let mut request = tonic::Request::new(ReleaseShareRequest {
            collection_id: "rel".into(),
            release: Some(release),
            reports,
        });
        request
            .metadata_mut()
            .insert("authorization", token.clone());
        request
    };
    let err = helper
        .release_share(ask(10, release(rho / 2.0)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());

    for u in send(4, &mut builder, &mut rng) {
        leader.upload_two_aggregator_report(u).await.unwrap();
    }
    wait_counted(&p, "rel", 14).await;
    // Another count than the helper's, another mechanism: refused by the helper.
    let err = helper
        .release_share(ask(13, release(rho / 2.0)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    let laplace = CentralRelease {
        mechanism: CentralMechanism::LaplaceCov as i32,
        epsilon: 0.5,
        ..Default::default()
    };
    let err = helper.release_share(ask(14, laplace)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());

    // The leader's release spends half of each side's budget and answers an estimate.
    let e = leader
        .get_estimate(estimate(rho / 2.0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(e.reports, 14);
    assert!(e.upper_triangle.iter().all(|v| v.is_finite()) && !e.upper_triangle.is_empty());
    // The same release again: from both ledgers, at no cost (the same numbers).
    let again = leader
        .get_estimate(estimate(rho / 2.0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.upper_triangle, e.upper_triangle);
    for raw in [&mut leader, &mut helper] {
        let status = raw
            .get_status(GetStatusRequest {
                collection_id: "rel".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            (status.rho_spent - rho / 2.0).abs() < 1e-12,
            "{}",
            status.rho_spent
        );
        assert_eq!(status.rho_budget, rho);
    }
    // The helper's share of that release, asked again directly: the same bytes.
    let first = helper
        .release_share(ask(14, release(rho / 2.0)))
        .await
        .unwrap()
        .into_inner();
    let second = helper
        .release_share(ask(14, release(rho / 2.0)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.noisy_share, second.noisy_share);
    // Beyond the helper's budget: refused by the helper, whatever the leader's ledger.
    let err = helper
        .release_share(ask(14, release(rho * 0.75)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{}", err.message());
    // The helper releases no estimate itself.
    let err = helper.get_estimate(estimate(rho / 2.0)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    p.leader.shutdown().await.unwrap();
    p.helper.shutdown().await.unwrap();
}

/// A report id the helper has verified is never verified again: the leader's token
/// sending it once more (with the same shares, or another public share) gets the first
/// verdict back, and the helper's count does not move.
#[tokio::test]
async fn the_helper_answers_a_replayed_report_with_its_first_verdict() {
    use ldpcov_proto::v1::{ReportToVerify, share_verdict::Verdict};
    let p = pair().await;
    let mut leader = RawClient::connect(p.leader.url()).await.unwrap();
    let mut helper = RawClient::connect(p.helper.url()).await.unwrap();
    create(&mut helper, spec("rep")).await.unwrap();
    create(&mut leader, spec("rep")).await.unwrap();
    let get = GetCollectionRequest {
        collection_id: "rep".into(),
    };
    let params = helper.get_collection(get).await.unwrap().into_inner();
    let collection = Collection::from_params(&params).unwrap();
    let key = active_key(&params.two_aggregator.unwrap().helper_keys).unwrap();
    let upload = ReportBuilder::new()
        .unwrap()
        .two_aggregator_report(&collection, &key, &[0.5, 0.1, -0.2, 0.3])
        .unwrap();
    leader
        .upload_two_aggregator_report(upload.clone())
        .await
        .unwrap();
    wait_counted(&p, "rep", 1).await;

    // The leader's half of the round, as its verifier computes it.
    let vdaf = ldpcov_prio::collection_prio3(&collection.two_aggregator().unwrap()).unwrap();
    let ctx = ldpcov_prio::context("rep");
    let nonce: [u8; 16] = upload.report_id.clone().try_into().unwrap();
    let (_, verifier_share) = ldpcov_prio::exchange::leader_start(
        &vdaf,
        &peer().verify_key("rep"),
        &ctx,
        &nonce,
        &upload.public_share,
        &upload.leader_share,
    )
    .unwrap();
    let token: tonic::metadata::MetadataValue<_> = format!("Bearer {}", peer().leader_token_text())
        .parse()
        .unwrap();
    let verify = |public_share: Vec<u8>| {
        let mut request = tonic::Request::new(VerifySharesRequest {
            collection_id: "rep".into(),
            reports: vec![ReportToVerify {
                report_id: upload.report_id.clone(),
                public_share,
                helper_share: upload.helper_share.clone(),
                leader_verifier_share: verifier_share.clone(),
            }],
        });
        request
            .metadata_mut()
            .insert("authorization", token.clone());
        request
    };
    let first = helper
        .verify_shares(verify(upload.public_share.clone()))
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        first.verdicts[0].verdict,
        Some(Verdict::VerifierMessage(_))
    ));
    let mut other = upload.public_share.clone();
    other[0] ^= 1;
    let second = helper
        .verify_shares(verify(other))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        second, first,
        "the recorded verdict, not a new verification"
    );
    assert_eq!(p.helper_store.count("rep").await, Ok(1));
    assert_eq!(p.leader_store.count("rep").await, Ok(1));
    p.leader.shutdown().await.unwrap();
    p.helper.shutdown().await.unwrap();
}
