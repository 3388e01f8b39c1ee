//! Collections with a private radius phase, through the real gRPC service: devices
//! report their norm's interval, noisily, to the phase's collection; closing it sets
//! the main collection's radius from the phase's noisy sums alone; both reports are
//! charged to the device's ledger.

use ldpcov_aggregator::{EmbeddedServer, Limits};
use ldpcov_client::{
    AggregatorClient, BudgetLedger, BudgetLimits, ClientError, DiscreteGaussianSampler,
    ReportBuilder,
};
use ldpcov_fixtures as fixtures;
use ldpcov_privacy::mechanism::ReportEntries;
use ldpcov_privacy::radius::RadiusPhase;
use ldpcov_privacy::{Collection, wire};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, GetEstimateRequest, NoThreshold, RadiusPhaseSpec, get_estimate_request,
};
use tonic::Code;

/// p = 4, ε = 8, candidate radii 0.5, 1, 2, 4, 8, a fifth of ρ on the phase.
fn spec(id: &str, min_reports: u64) -> CollectionSpec {
    CollectionSpec {
        clip_radius: 0.0,
        radius_phase: Some(RadiusPhaseSpec {
            share: 0.2,
            smallest_radius: 0.5,
            largest_radius: 8.0,
            radii: 5,
        }),
        ..fixtures::spec(id, 4)
            .epsilon(8.0)
            .min_reports(min_reports)
            .build()
    }
}

async fn client(url: &str, seed: u64) -> AggregatorClient {
    crate::support::embedded::seeded_client(url, seed).await
}

fn refused_with(err: &ClientError, code: Code, words: &str) {
    match err {
        ClientError::Status(s) => {
            assert_eq!(s.code(), code, "{s:?}");
            assert!(s.message().contains(words), "{}", s.message());
        }
        other => panic!("{other}"),
    }
}

/// The whole life of a collection with a radius phase: refused main reports while
/// the radius is pending, 2 000 devices' phase reports (every norm 1.5, in [1, 2)),
/// the close that chooses R = 2 — the radius the rule gives on the phase's noisy
/// average, which the test reads back and feeds to the rule itself — then main
/// reports at R = 2 and an estimate in data units; one device's ledger holds both
/// spends, adding up to the collection's (ε, δ) alone; deleting the phase is refused,
/// deleting the collection removes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_radius_phase_sets_the_radius_from_noisy_norms_and_charges_both_reports() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let url = server.url();
    let mut admin = client(&url, 1).await;
    let params = admin.create_collection(spec("rp", 1)).await.unwrap();
    let served = params.radius_phase.clone().unwrap();
    assert!(!served.radius_chosen);
    assert_eq!(served.phase_collection_id, "rp.radius");
    assert_eq!(params.spec.as_ref().unwrap().clip_radius, 0.0);
    let phase_status = admin.status("rp.radius").await.unwrap();
    assert_eq!(phase_status.params.unwrap().spec.unwrap().dim, 6);

    // One device with a ledger; the others without.
    let dir = std::env::temp_dir().join(format!("ldpcov-radius-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let limits = BudgetLimits {
        lifetime_epsilon: 20.0,
        period_epsilon: None,
        ..BudgetLimits::default()
    };
    let mut device = client(&url, 2)
        .await
        .with_ledger(BudgetLedger::open(&dir, limits).unwrap());
    let pending = device.collection("rp").await.unwrap();
    assert!(pending.radius_pending());
    let x = [1.5 * 0.6, 0.0, 1.5 * 0.8, 0.0];
    // No main report while the radius is pending: refused before any spend…
    let err = device.prepare_report(&pending, &x).unwrap_err();
    assert!(matches!(err, ClientError::RadiusPending { .. }), "{err}");
    assert!(device.ledger().unwrap().spends().is_empty());
    // … and by the server, whatever a device sends.
    let chosen_locally = pending.with_chosen_radius(2.0).unwrap();
    let report = ReportBuilder::new()
        .unwrap()
        .report(&chosen_locally, &x)
        .unwrap();
    let err = device.submit_report(report).await.unwrap_err();
    refused_with(&err, Code::FailedPrecondition, "still being chosen");
    // The phase report: charged to the phase's collection.
    device.submit(&pending, &x).await.unwrap();
    let spends = device.ledger().unwrap().spends().to_vec();
    assert_eq!(spends.len(), 1);
    assert_eq!(spends[0].collection_id, "rp.radius");
    assert_eq!(spends[0].rho, served.phase_rho);

    let mut others = client(&url, 3).await;
    for k in 1..2_000u32 {
        let angle = f64::from(k) * 0.01;
        let y = [1.5 * angle.cos(), 0.0, 1.5 * angle.sin(), 0.0];
        others.submit(&pending, &y).await.unwrap();
    }
    assert_eq!(admin.status("rp.radius").await.unwrap().reports, 2_000);
    assert_eq!(admin.status("rp").await.unwrap().reports, 0);
    // Deleting the phase is refused: it sets the radius.
    let err = admin.delete_collection("rp.radius").await.unwrap_err();
    refused_with(&err, Code::FailedPrecondition, "radius phase of rp");

    // The phase's noisy average (R = 1: the estimate of a second-moment collection
    // with no threshold and no projection is the average itself).
    let average = admin
        .estimate(GetEstimateRequest {
            collection_id: "rp.radius".into(),
            threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
            skip_psd_projection: true,
            ..Default::default()
        })
        .await
        .unwrap();
    admin.close_collection("rp.radius").await.unwrap();
    let chosen = device.collection("rp").await.unwrap();
    assert!(!chosen.radius_pending());
    // The interval [1, 2) holds every norm: with 2 000 reports its frequency's noise
    // sd is σ/√2000 ≈ 0.03 (σ ≈ 1.3 at this ρ), and the smallest radius above every
    // norm, 2, clips no one at half the noise of 4.
    assert_eq!(chosen.clip_radius(), 2.0);
    let frequencies = diagonal_of(&average.upper_triangle, 6);
    assert!((frequencies[2] - 1.0).abs() < 0.2, "{frequencies:?}");
    let rule = RadiusPhase::choose_collection_radius(&pending, &frequencies, 2_000).unwrap();
    assert_eq!(rule.radius, chosen.clip_radius());
    let main_params = admin.status("rp").await.unwrap().params.unwrap();
    assert!(main_params.radius_phase.unwrap().radius_chosen);
    assert_eq!(main_params.spec.unwrap().clip_radius, 2.0);

    // The main reports, at R = 2.
    device.submit(&chosen, &x).await.unwrap();
    for k in 0..300u32 {
        let angle = f64::from(k) * 0.02;
        others
            .submit(&chosen, &[1.5 * angle.cos(), 0.0, 1.5 * angle.sin(), 0.0])
            .await
            .unwrap();
    }
    assert_eq!(admin.status("rp").await.unwrap().reports, 301);
    let estimate = admin
        .estimate(GetEstimateRequest {
            collection_id: "rp".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(estimate.dim, 4);
    // The ledger: both reports, their ρ adding up to the collection's (ε, δ) alone.
    let spends = device.ledger().unwrap().spends().to_vec();
    assert_eq!(spends.len(), 2);
    assert_eq!(spends[1].collection_id, "rp");
    assert_eq!(spends[1].epsilon, served.main_epsilon);
    let alone = Collection::create(&CollectionSpec {
        clip_radius: 1.0,
        radius_phase: None,
        ..spec("rp", 1)
    })
    .unwrap()
    .rho();
    let spent = spends[0].rho + spends[1].rho;
    assert!(
        spent <= alone * (1.0 + 1e-12) && spent >= alone * (1.0 - 1e-9),
        "{spent} vs {alone}"
    );
    let reopened = BudgetLedger::open(&dir, limits).unwrap();
    assert_eq!(reopened.spends().len(), 2);

    assert_eq!(admin.delete_collection("rp").await.unwrap(), 301);
    let err = admin.status("rp.radius").await.unwrap_err();
    refused_with(&err, Code::NotFound, "rp.radius");
    std::fs::remove_dir_all(&dir).unwrap();
    server.shutdown().await.unwrap();
}

/// The diagonal of a packed upper triangle (row-major, i ≤ j) of a p × p matrix.
fn diagonal_of(packed: &[f64], p: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(p);
    let mut index = 0;
    for i in 0..p {
        out.push(packed[index]);
        index += p - i;
    }
    out
}

/// What leaves a device in the phase: the one-hot vector plus Gaussian noise of the
/// phase's calibrated σ on every entry, never the one-hot vector (or the norm) alone.
/// Over 60 reports × 21 entries (1 260 draws), the sample sd of entry − one-hot is
/// within 10 % of σ (its relative sd is 1/√(2·1260) ≈ 2 %: 5 sds), and its mean within
/// 4 standard errors of 0.
#[test]
fn a_phase_report_is_the_one_hot_interval_plus_the_calibrated_noise() {
    let main = Collection::create(&spec("noise", 1)).unwrap();
    let settings = main.radius_phase().unwrap();
    let phase = Collection::from_spec(settings.phase_spec()).unwrap();
    let mut builder = ReportBuilder::new()
        .unwrap()
        .with_noise_sampler(DiscreteGaussianSampler::from_seed_for_simulation(9));
    let x = [0.3, -0.4, 0.0, 0.0]; // norm 0.5: the interval [0.5, 1)
    let one_hot = settings.one_hot(0.5);
    assert_eq!(one_hot[1], 1.0);
    let scale = phase.grid_scale();
    let mut errors = Vec::new();
    for _ in 0..60 {
        let report = builder.radius_phase_report(&main, &x).unwrap();
        assert_eq!(report.collection_id, "noise.radius");
        let entries = match wire::decode_payload(&phase, report.encoding, &report.payload).unwrap()
        {
            ReportEntries::Dense(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(entries.len(), 21);
        let mut index = 0;
        for (i, &hot) in one_hot.iter().enumerate() {
            for j in i..6 {
                // On the wire (svec): uᵢ² on the diagonal, √2·uᵢuⱼ = 0 off it, each
                // with noise of sd σ.
                let exact = if i == j { hot } else { 0.0 };
                errors.push(f64::from(entries[index]) / scale - exact);
                index += 1;
            }
        }
    }
    let n = errors.len() as f64;
    let mean = errors.iter().sum::<f64>() / n;
    let sd = (errors.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let sigma = phase.sigma();
    assert!((sd / sigma - 1.0).abs() < 0.1, "sd {sd} vs σ {sigma}");
    assert!(mean.abs() < 4.0 * sigma / n.sqrt(), "mean {mean}");
    // A main report is refused, and a collection without a pending phase has no
    // phase report.
    assert!(builder.report(&main, &x).is_err());
    let chosen = main.with_chosen_radius(1.0).unwrap();
    assert!(matches!(
        builder.radius_phase_report(&chosen, &x),
        Err(ClientError::NoRadiusPhase { .. })
    ));
}

/// A phase holding fewer than min_reports reports cannot be closed (no radius could
/// be chosen, and a closed phase never reopens): refused, and nothing changes.
#[tokio::test]
async fn a_phase_with_too_few_reports_is_not_closed() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut admin = client(&server.url(), 4).await;
    admin.create_collection(spec("few", 5)).await.unwrap();
    let pending = admin.collection("few").await.unwrap();
    admin.submit(&pending, &[1.0, 0.0, 0.0, 0.0]).await.unwrap();
    let err = admin.close_collection("few.radius").await.unwrap_err();
    refused_with(
        &err,
        Code::FailedPrecondition,
        "fewer than its min_reports 5",
    );
    let status = admin.status("few.radius").await.unwrap();
    assert!(!status.closed);
    assert_eq!(status.reports, 1);
    assert!(admin.collection("few").await.unwrap().radius_pending());
    // A direct request for what cannot have a phase is refused at creation.
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let err = raw
        .create_collection(ldpcov_proto::v1::CreateCollectionRequest {
            spec: Some(CollectionSpec {
                clip_radius: 1.0,
                ..spec("given", 1)
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("clip_radius must be 0"),
        "{}",
        err.message()
    );
    server.shutdown().await.unwrap();
}

/// A central collection's phase is central: each device sends its exact one-hot
/// interval to the curator (knowingly, `submit_to_trusted_curator`), closing the phase
/// releases it once with GaussCov noise at the phase's whole budget — recorded, so
/// asking for that release again costs nothing and shows the same noise — and the
/// radius comes from that release; the main collection's budget is what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_central_collections_radius_phase_is_released_once_by_the_curator() {
    use ldpcov_proto::v1::{CentralMechanism, CentralRelease, PrivacyModel};
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut admin = client(&server.url(), 5).await;
    let spec = CollectionSpec {
        privacy_model: PrivacyModel::Central as i32,
        encoding: 0,
        ..spec("cp", 1)
    };
    let params = admin.create_collection(spec.clone()).await.unwrap();
    let phase_rho = params.radius_phase.as_ref().unwrap().phase_rho;
    let pending = admin.collection("cp").await.unwrap();
    // The perturbing path refuses a central collection: its reports are raw.
    let err = admin
        .submit(&pending, &[1.5, 0.0, 0.0, 0.0])
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::CentralCollection { .. }),
        "{err}"
    );
    for k in 0..500u32 {
        let angle = f64::from(k) * 0.01;
        admin
            .submit_to_trusted_curator(&pending, &[1.5 * angle.cos(), 1.5 * angle.sin(), 0.0, 0.0])
            .await
            .unwrap();
    }
    admin.close_collection("cp.radius").await.unwrap();
    let phase = admin.status("cp.radius").await.unwrap();
    assert_eq!(phase.rho_budget, phase_rho);
    assert_eq!(phase.rho_spent, phase_rho);
    // Every norm is 1.5, in [1, 2): at ε = 8 the release's noise on a frequency is
    // about 0.01, and R = 2 clips no one at a quarter of 4's noise.
    let chosen = admin.collection("cp").await.unwrap();
    assert_eq!(chosen.clip_radius(), 2.0);
    // The recorded release, asked for again: no new spend.
    admin
        .estimate(GetEstimateRequest {
            collection_id: "cp.radius".into(),
            threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
            release: Some(CentralRelease {
                mechanism: CentralMechanism::GaussCov as i32,
                rho: phase_rho,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        admin.status("cp.radius").await.unwrap().rho_spent,
        phase_rho
    );
    let main = admin.status("cp").await.unwrap();
    let alone = ldpcov_accounting::calibration::zcdp_rho_for_epsilon(8.0, 1e-6);
    let spent = main.rho_budget + phase_rho;
    assert!(
        spent <= alone * (1.0 + 1e-12) && spent >= alone * (1.0 - 1e-9),
        "{spent} vs {alone}"
    );
    admin
        .submit_to_trusted_curator(&chosen, &[1.5, 0.0, 0.0, 0.0])
        .await
        .unwrap();
    assert_eq!(admin.status("cp").await.unwrap().reports, 1);
    server.shutdown().await.unwrap();
}
