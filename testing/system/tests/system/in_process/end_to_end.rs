//! End-to-end tests through the real gRPC server on 127.0.0.1:0: devices perturb with
//! the client library, the aggregator validates, sums and estimates.

use crate::support;
use ldpcov_aggregator::EmbeddedServer;
use ldpcov_aggregator::Limits;
use ldpcov_client::AggregatorClient;
use ldpcov_fixtures as fixtures;
use ldpcov_lab::metrics::{estimate_matrix, spectral_norm_symmetric};
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_privacy::collection::SVEC_ROUNDING_MARGIN;
use ldpcov_privacy::{Collection, layout::triangle_pairs};
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, CreateCollectionRequest, Encoding, GetEstimateRequest, GetStatusRequest,
    Moments, NoThreshold, Report, UniversalThreshold, get_estimate_request,
};
use nalgebra::DMatrix;
use rand::SeedableRng;
use tonic::Code;

/// A second-moment collection: these tests check that mechanism (its d entries, its
/// √2 sensitivity and the noise bounds derived from them); the mean-and-covariance
/// default has its own tests in `tests/system/joint_moments.rs`.
fn spec(id: &str, dim: u32, epsilon: f64, clip_radius: f64, min_reports: u64) -> CollectionSpec {
    fixtures::spec(id, dim)
        .epsilon(epsilon)
        .clip_radius(clip_radius)
        .min_reports(min_reports)
        .encoding(Encoding::I32Le)
        .moments(Moments::SecondMoment)
        .build()
}

fn request(
    id: &str,
    threshold: get_estimate_request::Threshold,
    skip_psd: bool,
) -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: id.into(),
        threshold: Some(threshold),
        skip_psd_projection: skip_psd,
        ..Default::default()
    }
}

fn none() -> get_estimate_request::Threshold {
    get_estimate_request::Threshold::None(NoThreshold {})
}

/// Simulation clients: the noise is the real sampler seeded for reproducibility.
async fn client(url: &str, seed: u64) -> AggregatorClient {
    support::embedded::seeded_client(url, seed).await
}

async fn raw(url: &str) -> RawClient<tonic::transport::Channel> {
    RawClient::connect(url.to_string()).await.expect("connect")
}

/// `u = x / max(R, ‖x‖)`, computed independently of the client library.
fn clipped(x: &[f64], r: f64) -> Vec<f64> {
    let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    x.iter().map(|v| v / norm.max(r)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_estimate_within_the_noise_bound() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let url = server.url();
    let (p, r, n_clients, per_client) = (6usize, 2.0, 16usize, 2_500usize);
    let mut admin = client(&url, 0).await;
    admin
        .create_collection(spec("conc", p as u32, 2.0, r, 1000))
        .await
        .unwrap();
    let collection = admin.collection("conc").await.unwrap();

    // Each client simulates its own users; the test keeps the exact non-private
    // second moment S = R²·mean(u uᵀ) of the same (clipped) data.
    let truth = Sampler::gaussian(&Model::BandedGeometric.covariance(p)).unwrap();
    let mut tasks = Vec::new();
    for c in 0..n_clients {
        let (url, truth, collection) = (url.clone(), truth.clone(), collection.clone());
        tasks.push(tokio::spawn(async move {
            let mut cl = client(&url, 100 + c as u64).await;
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            let mut second = DMatrix::<f64>::zeros(p, p);
            let mut stream = Vec::new();
            for k in 0..per_client {
                let x = truth.sample(&mut rng);
                let u = nalgebra::DVector::from_vec(clipped(&x, r));
                second += &u * u.transpose();
                // Half unary (with retries), half on one stream.
                if k % 2 == 0 {
                    cl.submit(&collection, &x).await.unwrap();
                } else {
                    stream.push(cl.prepare_report(&collection, &x).unwrap());
                }
            }
            let resp = cl.submit_stream(stream).await.unwrap();
            assert_eq!(resp.accepted as usize, per_client / 2);
            second
        }));
    }
    let mut s = DMatrix::<f64>::zeros(p, p);
    for t in tasks {
        s += t.await.unwrap();
    }
    let n = (n_clients * per_client) as u64;
    s *= r * r / n as f64;

    let status = admin.status("conc").await.unwrap();
    assert_eq!(status.reports, n);
    let est = admin
        .estimate(request("conc", none(), false))
        .await
        .unwrap();
    let m = estimate_matrix(&est);

    // Bound. Σ̂ = P(S + W + G) with W the averaged noise (symmetric, each of the d
    // packed entries i.i.d. N(0, s²), s = R²σ/√n) and G the grid rounding, each entry
    // at most R²·2^-(k+1) in magnitude. S is PSD and the projection P onto the PSD cone
    // is a Frobenius contraction, so ‖Σ̂ − S‖_F ≤ ‖W‖_F + ‖G‖_F. ‖W‖_F² ≤ 2s²·χ²_d
    // (off-diagonals count twice); χ²_d exceeds d + 10√(2d) with probability below
    // 1e-9 for d = 21. ‖G‖_F ≤ p·R²·2^-(k+1).
    let sd = collection.mean_entry_noise_sd(n);
    assert!((est.entry_noise_sd - sd).abs() < 1e-12 * sd);
    let d = collection.entries() as f64;
    let bound = sd * (2.0 * (d + 10.0 * (2.0 * d).sqrt())).sqrt()
        + p as f64 * r * r / (2.0 * collection.grid_scale());
    let err = (&m - &s).norm();
    assert!(
        err <= bound,
        "‖Σ̂ − S‖_F = {err} exceeds the noise bound {bound}"
    );
    // The bound is meaningful: well below the size of S itself.
    assert!(
        bound < 0.5 * s.norm(),
        "bound {bound} vs ‖S‖_F {}",
        s.norm()
    );
    assert!(spectral_norm_symmetric(&(&m - &s)) <= bound);

    // The other side: too little noise. Without the PSD projection the packed error
    // is exactly W + G, and Σ_packed W² / s² is χ²_d, below 1.393 with probability
    // 1e-9 for d = 21 (regularised incomplete gamma, mpmath). So the packed error's
    // norm is at least s·√1.393 − √d·R²·2^-(k+1). About a fifth of its expected
    // s·√21: this catches missing noise or noise several times too small; the exact
    // variance is pinned by `raw_average_is_unbiased_with_the_calibrated_noise_variance`.
    let raw_est = admin.estimate(request("conc", none(), true)).await.unwrap();
    assert!(!raw_est.psd_projected);
    let packed_err = triangle_pairs(p)
        .zip(&raw_est.upper_triangle)
        .map(|((i, j), v)| (v - s[(i, j)]).powi(2))
        .sum::<f64>()
        .sqrt();
    let lower = sd * 1.393f64.sqrt() - d.sqrt() * r * r / (2.0 * collection.grid_scale());
    assert!(
        lower > 0.1 * sd * d.sqrt(),
        "lower bound {lower} is vacuous"
    );
    assert!(
        packed_err >= lower,
        "packed ‖Σ̂ − S‖ = {packed_err} below the noise floor {lower}: too little noise"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_average_is_unbiased_with_the_calibrated_noise_variance() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let url = server.url();
    let (p, r, n) = (60usize, 1.5, 2_000usize);
    let mut cl = client(&url, 7).await;
    // Every wire encoding: i16 and i8 add stochastic rounding whose variance is below
    // 0.1% of the noise's (client::perturb tests), far inside the bounds below.
    for (id, encoding, bytes_per_entry) in [
        ("calib-i32", Encoding::I32Le, 4),
        ("calib-i16", Encoding::I16Le, 2),
        ("calib-i8", Encoding::I8, 1),
    ] {
        let mut sp = spec(id, p as u32, 1.0, r, 10);
        sp.encoding = encoding as i32;
        cl.create_collection(sp).await.unwrap();
        let collection = cl.collection(id).await.unwrap();
        // Every user holds the same x (inside the ball), so the truth is known
        // exactly: R²·round(u_i u_j 2^k)/2^k with u = x/R.
        let x: Vec<f64> = (0..p).map(|i| ((i as f64) * 0.37).sin() * 0.15).collect();
        let u = clipped(&x, r);
        assert!(u.iter().map(|v| v * v).sum::<f64>() < 1.0);
        let reports: Vec<Report> = (0..n)
            .map(|_| cl.prepare_report(&collection, &x).unwrap())
            .collect();
        assert_eq!(
            reports[0].payload.len(),
            bytes_per_entry * collection.entries()
        );
        for chunk in reports.chunks(500) {
            cl.submit_stream(chunk.to_vec()).await.unwrap();
        }
        let est = cl.estimate(request(id, none(), true)).await.unwrap();
        assert!(!est.psd_projected);
        // σ from an independent reference, not from the collection:
        // docs/calibration_reference.py (mpmath, 50 digits) gives σ = 5.974598181957314
        // at Δ = √2, ε = 1, δ = 1e-6, the ε and δ of these specs; δ(σ) depends on σ/Δ
        // only, so σ is linear in Δ, here Δ = √2 + √d·2⁻ᵏ.
        // A new collection's report is svec-weighted: its rounding term carries the
        // margin SVEC_ROUNDING_MARGIN, and its off-diagonal entries, divided by √2 on
        // the server, have sd s/√2.
        let (g, sqrt2) = (collection.grid_scale(), std::f64::consts::SQRT_2);
        let sensitivity =
            sqrt2 + (collection.entries() as f64).sqrt() / g * (1.0 + SVEC_ROUNDING_MARGIN);
        let sigma = 5.974_598_181_957_314 * sensitivity / sqrt2;
        let s = r * r * sigma / (n as f64).sqrt();
        let s_off = s / sqrt2;
        assert!(
            (collection.mean_entry_noise_sd(n as u64) / s_off - 1.0).abs() < 1e-9,
            "{id}: the collection's noise sd {} is not the reference {s_off}",
            collection.mean_entry_noise_sd(n as u64)
        );
        // Standardise each packed entry by its sd (s = R²σ/√n, s/√2). With the right noise,
        // the d = 1830 values z are i.i.d. N(0, 1):
        //   mean(z) has sd 1/√d = 0.023, so |mean(z)| < 5/√d;
        //   mean(z²) has sd √(2/d) = 0.033, so |mean(z²) − 1| < 5√(2/d) = 0.165.
        // Noise with σ off by √2 moves mean(z²) to 2 or 0.5: far outside.
        // (Each entry by its own sd: s on the diagonal, s/√2 off it, whose exact value
        // is the device's rounding of √2·u_i·u_j divided by √2.)
        let z: Vec<f64> = triangle_pairs(p)
            .zip(&est.upper_triangle)
            .map(|((i, j), v)| {
                if i == j {
                    (v - r * r * (u[i] * u[j] * g).round() / g) / s
                } else {
                    (v - r * r * (sqrt2 * u[i] * u[j] * g).round() / (g * sqrt2)) / s_off
                }
            })
            .collect();
        let d = z.len() as f64;
        let mean = z.iter().sum::<f64>() / d;
        let mean_sq = z.iter().map(|v| v * v).sum::<f64>() / d;
        assert!(
            mean.abs() < 5.0 / d.sqrt(),
            "{id}: mean of standardised errors {mean}"
        );
        assert!(
            (mean_sq - 1.0).abs() < 5.0 * (2.0 / d).sqrt(),
            "{id}: mean square {mean_sq}"
        );
        // Gaussian shape: P(|z| > 2) = 0.0455; binomial sd √(0.0455·0.9545/d) = 0.0049.
        let tail = z.iter().filter(|v| v.abs() > 2.0).count() as f64 / d;
        assert!(
            (tail - 0.0455).abs() < 5.0 * 0.0049,
            "{id}: tail fraction {tail}"
        );
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_bad_input_gets_its_code_and_changes_nothing() {
    let server = EmbeddedServer::start(Limits { max_dim: 100 })
        .await
        .unwrap();
    let url = server.url();
    let mut admin = client(&url, 1).await;
    admin
        .create_collection(spec("v", 3, 1.0, 1.0, 1))
        .await
        .unwrap();
    let collection = admin.collection("v").await.unwrap();
    let good = admin.prepare_report(&collection, &[0.1, 0.2, 0.3]).unwrap();
    admin.submit_report(good.clone()).await.unwrap();
    let before = admin.estimate(request("v", none(), true)).await.unwrap();

    let mut raw = raw(&url).await;
    let mut bad_cases: Vec<(&str, Report, Code)> = Vec::new();
    let with = |f: &dyn Fn(&mut Report)| {
        let mut r = good.clone();
        r.report_id = vec![0xAB; 16];
        f(&mut r);
        r
    };
    bad_cases.push((
        "unknown collection",
        with(&|r| r.collection_id = "nope".into()),
        Code::NotFound,
    ));
    bad_cases.push((
        "malformed collection id",
        with(&|r| r.collection_id = "a b".into()),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "short payload",
        with(&|r| r.payload.truncate(20)),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "long payload",
        with(&|r| r.payload.extend([0; 4])),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "empty payload",
        with(&|r| r.payload.clear()),
        Code::InvalidArgument,
    ));
    let out_of_range = (collection.max_abs_grid_value() as i32 + 1).to_le_bytes();
    bad_cases.push((
        "value out of range",
        with(&|r| r.payload[4..8].copy_from_slice(&out_of_range)),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "i32::MIN",
        with(&|r| r.payload[0..4].copy_from_slice(&i32::MIN.to_le_bytes())),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "unknown encoding",
        with(&|r| r.encoding = 42),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "empty report id",
        with(&|r| r.report_id.clear()),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "15-byte report id",
        with(&|r| r.report_id.truncate(15)),
        Code::InvalidArgument,
    ));
    bad_cases.push((
        "17-byte report id",
        with(&|r| r.report_id.push(1)),
        Code::InvalidArgument,
    ));
    for (name, report, code) in &bad_cases {
        let err = raw.submit_report(report.clone()).await.expect_err(name);
        assert_eq!(err.code(), *code, "{name}: {}", err.message());
        assert!(!err.message().is_empty(), "{name}");
        // On a stream too: the whole stream fails with the same code.
        let err = raw
            .submit_reports(tokio_stream::iter(vec![report.clone()]))
            .await
            .expect_err(name);
        assert_eq!(err.code(), *code, "{name} (stream): {}", err.message());
    }
    // Nothing changed: count and sums.
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: "v".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.reports, 1);
    let after = admin.estimate(request("v", none(), true)).await.unwrap();
    assert_eq!(before.upper_triangle, after.upper_triangle);

    // A bad report in the middle of a stream: the ones before it count, the rest not.
    let first = admin.prepare_report(&collection, &[0.0, 1.0, 0.0]).unwrap();
    let third = admin.prepare_report(&collection, &[1.0, 0.0, 0.0]).unwrap();
    let err = raw
        .submit_reports(tokio_stream::iter(vec![
            first,
            bad_cases[2].1.clone(),
            third,
        ]))
        .await
        .expect_err("stream with a bad report");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("report 1"), "{}", err.message());
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: "v".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.reports, 2);

    // Bad collection specs.
    let mut bad_specs = vec![
        ("p = 0", spec("s1", 0, 1.0, 1.0, 1)),
        ("ε = 0", spec("s2", 3, 0.0, 1.0, 1)),
        ("ε < 0", spec("s3", 3, -1.0, 1.0, 1)),
        ("R = 0", spec("s4", 3, 1.0, 0.0, 1)),
        ("min 0", spec("s5", 3, 1.0, 1.0, 0)),
        ("p above server limit", spec("s6", 101, 1.0, 1.0, 1)),
        ("bad id", spec("a/b", 3, 1.0, 1.0, 1)),
    ];
    let mut d1 = spec("s7", 3, 1.0, 1.0, 1);
    d1.delta = 1.0;
    bad_specs.push(("δ = 1", d1));
    let mut d0 = spec("s8", 3, 1.0, 1.0, 1);
    d0.delta = 0.0;
    bad_specs.push(("δ = 0", d0));
    support::checks::assert_specs_refused(&mut raw, bad_specs).await;
    let err = raw
        .create_collection(CreateCollectionRequest { spec: None })
        .await
        .expect_err("no spec");
    assert_eq!(err.code(), Code::InvalidArgument);
    // Same id, other parameters.
    let err = raw
        .create_collection(CreateCollectionRequest {
            spec: Some(spec("v", 4, 1.0, 1.0, 1)),
        })
        .await
        .expect_err("conflict");
    assert_eq!(err.code(), Code::AlreadyExists);
    // Same id, same parameters: idempotent.
    raw.create_collection(CreateCollectionRequest {
        spec: Some(spec("v", 3, 1.0, 1.0, 1)),
    })
    .await
    .expect("idempotent create");
    // Bad estimate parameters.
    let err = raw
        .get_estimate(request(
            "v",
            get_estimate_request::Threshold::Universal(UniversalThreshold {
                gamma: -1.0,
                c: 4.0,
                threshold_diagonal: false,
            }),
            false,
        ))
        .await
        .expect_err("negative gamma");
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = raw
        .get_estimate(request("nope", none(), false))
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_report_id_is_counted_once() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut cl = client(&server.url(), 3).await;
    cl.create_collection(spec("dup", 2, 1.0, 1.0, 1))
        .await
        .unwrap();
    let collection = cl.collection("dup").await.unwrap();
    let report = cl.prepare_report(&collection, &[0.5, 0.5]).unwrap();
    let first = cl.submit_report(report.clone()).await.unwrap();
    assert!(!first.duplicate);
    let once = cl.estimate(request("dup", none(), true)).await.unwrap();
    let again = cl.submit_report(report.clone()).await.unwrap();
    assert!(again.duplicate);
    let resp = cl
        .submit_stream(vec![report.clone(), report.clone()])
        .await
        .unwrap();
    assert_eq!((resp.accepted, resp.duplicates), (0, 2));
    // Same id with other content is still the same report: ignored.
    let mut other = cl.prepare_report(&collection, &[0.1, 0.9]).unwrap();
    other.report_id = report.report_id.clone();
    assert!(cl.submit_report(other).await.unwrap().duplicate);
    assert_eq!(cl.status("dup").await.unwrap().reports, 1);
    let twice = cl.estimate(request("dup", none(), true)).await.unwrap();
    assert_eq!(once.upper_triangle, twice.upper_triangle);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_estimate_below_the_minimum() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut cl = client(&server.url(), 4).await;
    cl.create_collection(spec("min", 2, 1.0, 1.0, 3))
        .await
        .unwrap();
    let collection = cl.collection("min").await.unwrap();
    for k in 0..3 {
        let status = cl.status("min").await.unwrap();
        assert_eq!((status.reports, status.releasable), (k, false));
        let err = cl
            .estimate(request("min", none(), false))
            .await
            .expect_err("below minimum");
        let status = err.status().expect("a gRPC status");
        assert_eq!(
            status.code(),
            Code::FailedPrecondition,
            "{}",
            status.message()
        );
        cl.submit(&collection, &[1.0, 0.0]).await.unwrap();
    }
    assert!(cl.status("min").await.unwrap().releasable);
    cl.estimate(request("min", none(), false))
        .await
        .expect("released at the minimum");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_are_symmetric_and_psd() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut cl = client(&server.url(), 5).await;
    // Heavy noise (small n, small ε) makes the raw average indefinite.
    let p = 15;
    cl.create_collection(spec("psd", p, 0.5, 1.0, 20))
        .await
        .unwrap();
    let collection = cl.collection("psd").await.unwrap();
    let sampler = Sampler::gaussian(&Model::Tridiagonal2.covariance(p as usize)).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let reports: Vec<Report> = (0..50)
        .map(|_| {
            cl.prepare_report(&collection, &sampler.sample(&mut rng))
                .unwrap()
        })
        .collect();
    cl.submit_stream(reports).await.unwrap();
    let raw_avg = estimate_matrix(&cl.estimate(request("psd", none(), true)).await.unwrap());
    assert!(
        raw_avg.clone().symmetric_eigenvalues().min() < 0.0,
        "test needs an indefinite average"
    );
    for threshold in [
        none(),
        get_estimate_request::Threshold::Universal(UniversalThreshold {
            gamma: 0.0,
            c: 4.0,
            threshold_diagonal: false,
        }),
        get_estimate_request::Threshold::Universal(UniversalThreshold {
            gamma: 1.0,
            c: 1.0,
            threshold_diagonal: true,
        }),
    ] {
        let est = cl.estimate(request("psd", threshold, false)).await.unwrap();
        assert!(est.psd_projected);
        assert_eq!(est.dim, p);
        support::checks::assert_packed_psd(&est.upper_triangle, p as usize, 0.0);
        assert!(est.clamped_eigenvalues > 0 || est.surviving_entries < collection.entries() as u64);
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p_1000_reports_go_through_the_real_server() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut cl = client(&server.url(), 6).await;
    let p = 1000;
    let params = cl
        .create_collection(spec("big", p, 1.0, 1.0, 4))
        .await
        .unwrap();
    // 500 500 entries: a 2 MB report and a 4 MB estimate.
    assert_eq!(params.entries, 500_500);
    let collection: Collection = cl.collection("big").await.unwrap();
    let x: Vec<f64> = (0..p).map(|i| if i < 3 { 0.5 } else { 0.0 }).collect();
    cl.submit(&collection, &x).await.unwrap();
    cl.submit(&collection, &x).await.unwrap();
    let stream = vec![
        cl.prepare_report(&collection, &x).unwrap(),
        cl.prepare_report(&collection, &x).unwrap(),
    ];
    assert_eq!(cl.submit_stream(stream).await.unwrap().accepted, 2);
    assert_eq!(cl.status("big").await.unwrap().reports, 4);
    let est = cl.estimate(request("big", none(), false)).await.unwrap();
    assert_eq!(est.upper_triangle.len(), 500_500);
    assert_eq!(est.dim, p);

    // p = 1500: a 4.5 MB report, above tonic's default 4 MiB message limit.
    cl.create_collection(spec("bigger", 1500, 1.0, 1.0, 1))
        .await
        .unwrap();
    let collection = cl.collection("bigger").await.unwrap();
    let report = cl.prepare_report(&collection, &vec![0.01; 1500]).unwrap();
    assert!(report.payload.len() > 4 << 20);
    cl.submit_report(report).await.unwrap();
    assert_eq!(cl.status("bigger").await.unwrap().reports, 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_device_ledger_stops_reports_beyond_the_budget() {
    use ldpcov_client::{BudgetLedger, BudgetLimits, ClientError, LedgerError};
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("ldpcov-e2e-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let limits = BudgetLimits {
        lifetime_epsilon: 2.0,
        period_epsilon: None,
        ..BudgetLimits::default()
    };
    let mut cl = client(&server.url(), 8)
        .await
        .with_ledger(BudgetLedger::open(&dir, limits).unwrap());
    cl.create_collection(spec("budget", 3, 1.0, 1.0, 1))
        .await
        .unwrap();
    let collection = cl.collection("budget").await.unwrap();
    // ρ budget of ε = 2 at δ = 1e-6 over ρ per report: how many reports fit.
    let fit = (ldpcov_accounting::calibration::zcdp_rho_for_epsilon(2.0, 1e-6) / collection.rho())
        .floor() as u64;
    assert!(fit >= 1);
    for _ in 0..fit {
        cl.submit(&collection, &[0.1, 0.2, 0.3]).await.unwrap();
    }
    let err = cl.submit(&collection, &[0.1, 0.2, 0.3]).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Budget(LedgerError::BudgetExceeded { .. })),
        "{err}"
    );
    // The refused report never reached the server; the ledger on disk has every spend.
    assert_eq!(cl.status("budget").await.unwrap().reports, fit);
    let reopened = BudgetLedger::open(&dir, limits).unwrap();
    assert_eq!(reopened.spends().len() as u64, fit);
    std::fs::remove_dir_all(&dir).unwrap();
    server.shutdown().await.unwrap();
}
