//! End-to-end tests of the estimator options through the real gRPC server on
//! 127.0.0.1:0: the cross-validated default, the entry-adaptive rule with soft
//! thresholding, the ridge and graphical-lasso precision targets, and the status codes
//! of bad estimator parameters.

use ldpcov::aggregator::server::EmbeddedServer;
use ldpcov::aggregator::service::Limits;
use ldpcov::client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov::metrics::estimate_matrix;
use ldpcov::models::{Model, Sampler};
use ldpcov::proto::layout::unpack_symmetric;
use ldpcov::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov::proto::v1::{
    AdaptiveThreshold, CollectionSpec, CrossValidatedThreshold, Encoding, Estimate, EstimateTarget,
    GetEstimateRequest, PrecisionParams, ThresholdKind, get_estimate_request,
};
use nalgebra::DMatrix;
use rand::SeedableRng;
use tonic::Code;

const P: usize = 6;

fn min_eigenvalue(m: &DMatrix<f64>) -> f64 {
    m.clone()
        .symmetric_eigenvalues()
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min)
}

fn precision_matrix(e: &Estimate) -> DMatrix<f64> {
    let p = e.dim as usize;
    DMatrix::from_row_slice(p, p, &unpack_symmetric(p, &e.precision_upper_triangle))
}

/// A server with one collection "est" of 6 000 Model 2 reports (p = 6, R = 3, ε = 4).
async fn populated() -> (EmbeddedServer, String) {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let url = server.url();
    let mut cl = AggregatorClient::connect(url.clone())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            3,
        )));
    cl.create_collection(CollectionSpec {
        collection_id: "est".into(),
        dim: P as u32,
        epsilon: 4.0,
        delta: 1e-6,
        clip_radius: 3.0,
        min_reports: 100,
        encoding: Encoding::I32Le as i32,
    })
    .await
    .unwrap();
    let collection = cl.collection("est").await.unwrap();
    let sampler = Sampler::gaussian(&Model::Tridiagonal2.covariance(P)).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let reports: Vec<_> = (0..6_000)
        .map(|_| {
            cl.prepare_report(&collection, &sampler.sample(&mut rng))
                .unwrap()
        })
        .collect();
    for chunk in reports.chunks(1000) {
        cl.submit_stream(chunk.to_vec()).await.unwrap();
    }
    (server, url)
}

fn request() -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: "est".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_rule_adaptive_and_precision_targets() {
    let (server, url) = populated().await;
    let mut raw = RawClient::connect(url).await.unwrap();

    // Default: no rule given → cross-validation; covariance target; PSD.
    let cv = raw.get_estimate(request()).await.unwrap().into_inner();
    assert!(
        cv.threshold_rule.starts_with("cv("),
        "{}",
        cv.threshold_rule
    );
    assert!(cv.threshold_rule.contains("→"), "{}", cv.threshold_rule);
    assert_eq!(cv.target, EstimateTarget::Covariance as i32);
    assert!(cv.precision_upper_triangle.is_empty());
    let m = estimate_matrix(&cv);
    assert_eq!(m, m.transpose());
    assert!(min_eigenvalue(&m) >= -1e-9 * m.norm());

    // Cross-validation told the variables have no order and given one diagonal
    // shrinkage weight: no banding or Toeplitz candidate, β = 0.
    let mut req = request();
    req.threshold = Some(get_estimate_request::Threshold::CrossValidated(
        CrossValidatedThreshold {
            unordered_variables: true,
            diagonal_shrinkage: vec![0.0],
            ..Default::default()
        },
    ));
    let unordered = raw.get_estimate(req).await.unwrap().into_inner();
    let rule = &unordered.threshold_rule;
    assert!(
        !rule.contains("toeplitz") && !rule.contains("banded"),
        "{rule}"
    );
    assert!(rule.contains("diagonal shrinkage 0 "), "{rule}");
    // A given bandwidth grid and threshold grids: the choice is one of them.
    let mut req = request();
    req.threshold = Some(get_estimate_request::Threshold::CrossValidated(
        CrossValidatedThreshold {
            noise_scales: vec![1e9],
            adaptive_scales: vec![1e9],
            bandwidths: vec![1],
            ..Default::default()
        },
    ));
    let banded = raw.get_estimate(req).await.unwrap().into_inner();
    let rule = &banded.threshold_rule;
    let given = [
        "banded(bandwidth=1)",
        "toeplitz(bandwidth=1)",
        "→ none",
        "noise(c=1000000000.000",
        "adaptive(eta=1000000000.000",
    ];
    assert!(given.iter().any(|g| rule.contains(g)), "{rule}");

    // Entry-adaptive, soft: per-entry λ (reported as the mean off-diagonal λ_ij > 0).
    let mut req = request();
    req.threshold = Some(get_estimate_request::Threshold::Adaptive(
        AdaptiveThreshold {
            eta: 2.0,
            threshold_diagonal: false,
        },
    ));
    req.threshold_kind = ThresholdKind::Soft as i32;
    let ad = raw.get_estimate(req).await.unwrap().into_inner();
    assert!(
        ad.threshold_rule.starts_with("adaptive(eta=2"),
        "{}",
        ad.threshold_rule
    );
    assert_eq!(ad.threshold_kind, "soft");
    assert!(ad.threshold > 0.0);

    // Ridge with cross-validated λ: Θ = M diag(2/(φ + √(φ² + 8λ))) Mᵀ commutes with
    // Σ̂ and solves 2λΘ² + Σ̂Θ − I = 0.
    let mut req = request();
    req.target = EstimateTarget::PrecisionRidge as i32;
    let ridge = raw.get_estimate(req).await.unwrap().into_inner();
    assert_eq!(ridge.target, EstimateTarget::PrecisionRidge as i32);
    assert!(ridge.precision_lambda_cross_validated);
    let lambda = ridge.precision_lambda;
    assert!(lambda > 0.0);
    let theta = precision_matrix(&ridge);
    let sigma = estimate_matrix(&ridge);
    let residual = &theta * &theta * (2.0 * lambda) + &sigma * &theta - DMatrix::identity(P, P);
    assert!(residual.abs().max() < 1e-8, "ridge stationarity {residual}");
    assert!(min_eigenvalue(&theta) > 0.0);

    // Glasso with cross-validated λ on a floored (positive definite) estimate.
    let mut req = request();
    req.target = EstimateTarget::PrecisionGlasso as i32;
    req.psd_floor = 0.05;
    let gl = raw.get_estimate(req).await.unwrap().into_inner();
    assert!(gl.precision_lambda_cross_validated);
    assert!(
        gl.precision_converged,
        "{} iterations",
        gl.precision_iterations
    );
    let theta = precision_matrix(&gl);
    assert!(min_eigenvalue(&theta) > 0.0);
    assert!(gl.graph.iter().all(|e| e.i < e.j && (e.j as usize) < P));
    let sigma = estimate_matrix(&gl);
    assert!(min_eigenvalue(&sigma) >= 0.05 - 1e-9);

    // Glasso at λ above every |Σ̂_ij| (i ≠ j): the empty graph.
    let max_off = (0..P)
        .flat_map(|i| (0..P).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| sigma[(i, j)].abs())
        .fold(0.0, f64::max);
    let mut req = request();
    req.target = EstimateTarget::PrecisionGlasso as i32;
    req.psd_floor = 0.05;
    req.precision = Some(PrecisionParams {
        lambda: Some(1.01 * max_off),
        ..Default::default()
    });
    let empty = raw.get_estimate(req).await.unwrap().into_inner();
    assert!(!empty.precision_lambda_cross_validated);
    assert!(empty.graph.is_empty(), "{:?}", empty.graph);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_estimator_parameters_are_invalid_argument() {
    let (server, url) = populated().await;
    let mut raw = RawClient::connect(url).await.unwrap();
    let mut cases = Vec::new();
    let mut r = request();
    r.target = EstimateTarget::PrecisionRidge as i32;
    r.precision = Some(PrecisionParams {
        lambda: Some(-1.0),
        ..Default::default()
    });
    cases.push(("negative ridge lambda", r));
    let mut r = request();
    r.target = EstimateTarget::PrecisionGlasso as i32;
    r.precision = Some(PrecisionParams {
        rho: -3.0,
        ..Default::default()
    });
    cases.push(("negative rho", r));
    let mut r = request();
    r.psd_floor = f64::NAN;
    cases.push(("NaN floor", r));
    let mut r = request();
    r.target = EstimateTarget::PrecisionGlasso as i32;
    r.skip_psd_projection = true;
    cases.push(("precision without projection", r));
    let mut r = request();
    r.target = 99;
    cases.push(("unknown target", r));
    let mut r = request();
    r.threshold_kind = 7;
    cases.push(("unknown kind", r));
    let mut r = request();
    r.threshold = Some(get_estimate_request::Threshold::Adaptive(
        AdaptiveThreshold {
            eta: -1.0,
            threshold_diagonal: false,
        },
    ));
    cases.push(("negative eta", r));
    let mut r = request();
    r.threshold = Some(get_estimate_request::Threshold::CrossValidated(
        CrossValidatedThreshold {
            diagonal_shrinkage: vec![0.5, 1.5],
            ..Default::default()
        },
    ));
    cases.push(("diagonal shrinkage above 1", r));
    for (name, req) in cases {
        let status = raw.get_estimate(req).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
    }
    server.shutdown().await.unwrap();
}
