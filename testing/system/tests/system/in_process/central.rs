//! Central releases through the real gRPC server: a new central collection's GaussCov
//! release adds half the noise variance to the off-diagonal sums of one created with
//! the raw triangle, at the same ρ and σ (docs/PRIVACY.md §3, "The svec weighting of
//! central releases"), and the estimate reports that noise level; bad weightings are
//! refused.

use crate::support;
use ldpcov_fixtures as fixtures;
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CentralMechanism, CentralRelease, CentralWeighting, CollectionSpec, Encoding,
    GetEstimateRequest, Moments, NoThreshold, PrivacyModel, get_estimate_request,
};

/// Two central second-moment collections on the same 40 users, all at x = 0 (so the
/// exact sums are 0 and every released entry is pure noise): one created with the raw
/// triangle (`CENTRAL_WEIGHTING_TRIU`, as stored collections keep), one with the
/// default, which CreateCollection resolves to `CENTRAL_WEIGHTING_SVEC`. Each is asked
/// for the raw GaussCov release at ρ = 0.01 (R = 1: the averaged entry's noise sd is
/// `σ_avg = 1/(n√ρ)`, and `σ_avg/√2` off the diagonal for svec). The server draws the
/// noise from the operating system (it cannot be seeded; the data and the users are
/// fixed), so the bounds are set at 10⁻⁹ per side: `Σ v²/σ_off²` over the 1 770
/// off-diagonal entries at p = 60 is χ²_1770 (independent discrete Gaussians, whose
/// variance is σ² to within e^{−2π²σ²}), so each ratio to its own prediction lies in
/// [0.78, 1.24]; the bands of "half" and "the triangle's" variance do not overlap
/// (0.62 < 0.78), so the test tells them apart. Both spend the same ρ and report the
/// same σ, and the svec estimate's `entry_noise_sd` is the triangle's over √2. Asked
/// again, each is answered from the ledger, with the same numbers and noise level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn central_svec_releases_halve_the_off_diagonal_noise_variance() {
    let (_server, url, mut admin) = support::embedded::seeded_server(5).await;
    const P: usize = 60;
    let n: u64 = 40;
    let rho = 0.01;
    let base = CollectionSpec {
        privacy_model: PrivacyModel::Central as i32,
        encoding: Encoding::RawI32Le as i32,
        ..fixtures::spec("triu", P as u32)
            .epsilon(1.0)
            .moments(Moments::SecondMoment)
            .build()
    };
    let triu = admin
        .create_collection(CollectionSpec {
            central_weighting: CentralWeighting::Triu as i32,
            ..base.clone()
        })
        .await
        .unwrap();
    let svec = admin
        .create_collection(CollectionSpec {
            collection_id: "svec".into(),
            ..base
        })
        .await
        .unwrap();
    assert_eq!(
        triu.spec.as_ref().unwrap().central_weighting,
        CentralWeighting::Triu as i32
    );
    assert_eq!(
        svec.spec.as_ref().unwrap().central_weighting,
        CentralWeighting::Svec as i32
    );
    assert!(rho <= svec.rho, "the release fits the budget");
    let mut raw = RawClient::connect(url).await.unwrap();
    let (lo, hi) = support::checks::chi2_ratio_bounds(P * (P - 1) / 2);
    assert!(hi * 0.5 < lo, "the bands of σ²/2 and σ² overlap");
    let sd_avg = 1.0 / (n as f64 * f64::sqrt(rho));
    let request = |id: &str| GetEstimateRequest {
        collection_id: id.into(),
        threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
        skip_psd_projection: true,
        release: Some(CentralRelease {
            mechanism: CentralMechanism::GaussCov as i32,
            rho,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut estimates = Vec::new();
    for (id, off_sd) in [("triu", sd_avg), ("svec", sd_avg / 2f64.sqrt())] {
        let c = admin.collection(id).await.unwrap();
        for _ in 0..n {
            admin
                .submit_to_trusted_curator(&c, &[0.0; P])
                .await
                .unwrap();
        }
        let est = raw.get_estimate(request(id)).await.unwrap().into_inner();
        assert_eq!(est.reports, n);
        assert_eq!(est.release_rho_spent, rho);
        assert!(
            (est.entry_noise_sd / off_sd - 1.0).abs() < 1e-12,
            "{id}: entry_noise_sd {} against {off_sd}",
            est.entry_noise_sd
        );
        let (sum_sq, count) = triangle_pairs(P)
            .zip(&est.upper_triangle)
            .filter(|((i, j), _)| i != j)
            .fold((0.0, 0usize), |(s, k), (_, v)| (s + v * v, k + 1));
        let ratio = sum_sq / count as f64 / (off_sd * off_sd);
        println!("{id}: off-diagonal variance / predicted = {ratio:.3}");
        assert!(
            (lo..=hi).contains(&ratio),
            "{id}: {ratio} outside [{lo}, {hi}]"
        );
        // Against the triangle's σ_avg², the svec entries are at half.
        let against_triangle = sum_sq / count as f64 / (sd_avg * sd_avg);
        if id == "svec" {
            assert!(against_triangle <= 0.5 * hi, "{against_triangle}");
        } else {
            assert!(against_triangle >= lo, "{against_triangle}");
        }
        // The ledger answers the same release again, at no cost, with the same noise.
        let again = raw.get_estimate(request(id)).await.unwrap().into_inner();
        assert_eq!(again.upper_triangle, est.upper_triangle);
        assert_eq!(again.release_rho_spent, 0.0);
        assert_eq!(again.entry_noise_sd, est.entry_noise_sd);
        estimates.push(est);
    }
    // The same per-report σ: only the off-diagonal noise differs.
    assert_eq!(estimates[0].sigma, estimates[1].sigma);
}

/// An unknown `central_weighting`, or one named for a local collection, is
/// INVALID_ARGUMENT with nothing created; naming it for a central collection is kept.
#[tokio::test]
async fn bad_central_weightings_are_refused() {
    let (_server, url, mut admin) = support::embedded::seeded_server(6).await;
    let central = CollectionSpec {
        privacy_model: PrivacyModel::Central as i32,
        encoding: Encoding::RawI32Le as i32,
        ..fixtures::spec("c", 3).build()
    };
    let mut raw = RawClient::connect(url).await.unwrap();
    support::checks::assert_specs_refused(
        &mut raw,
        vec![
            (
                "unknown weighting",
                CollectionSpec {
                    collection_id: "u".into(),
                    central_weighting: 7,
                    ..central.clone()
                },
            ),
            (
                "a weighting for a local collection",
                CollectionSpec {
                    central_weighting: CentralWeighting::Svec as i32,
                    ..fixtures::spec("l", 3).build()
                },
            ),
        ],
    )
    .await;
    let err = raw
        .create_collection(ldpcov_proto::v1::CreateCollectionRequest {
            spec: Some(CollectionSpec {
                central_weighting: 7,
                ..central.clone()
            }),
        })
        .await
        .unwrap_err();
    assert!(
        err.message().contains("unknown central weighting 7"),
        "{}",
        err.message()
    );
    let created = admin
        .create_collection(CollectionSpec {
            central_weighting: CentralWeighting::Triu as i32,
            ..central
        })
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().central_weighting,
        CentralWeighting::Triu as i32
    );
}
