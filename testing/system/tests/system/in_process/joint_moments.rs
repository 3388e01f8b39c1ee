//! Mean and covariance from one report, through the real gRPC server: non-centred
//! data (the heavy-tailed paper's Model 1 shifted in every coordinate) reported by the client
//! library to a mean-and-covariance collection (the CreateCollection default), one
//! with a public centre, and a second-moment collection on the same users; bad specs
//! and wrong-length reports refused with nothing changed.

use crate::support;
use ldpcov_aggregator::{EmbeddedServer, Limits};
use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_fixtures as fixtures;
use ldpcov_lab::metrics::estimate_matrix;
use ldpcov_lab::models::{Model, Sampler};
use ldpcov_privacy::Collection;
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, Encoding, GetEstimateRequest, GetStatusRequest, Moments, NoThreshold, Report,
    get_estimate_request,
};
use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use tonic::Code;

const P: usize = 6;
const SHIFT: f64 = 3.0;

fn spec(id: &str, clip_radius: f64) -> CollectionSpec {
    fixtures::spec(id, P as u32)
        .epsilon(10.0)
        .clip_radius(clip_radius)
        .min_reports(1000)
        .encoding(Encoding::I32Le)
        .build()
}

fn no_threshold(id: &str) -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: id.into(),
        threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
        ..Default::default()
    }
}

/// The exact, non-private statistics of what devices report to `c`, in unit-ball
/// units: `ū` and `M_n` of `u = clip((x − centre)/R)`, computed here independently of
/// the client library (its clip margin of 2⁻³² is far below every bound).
struct Exact {
    mean: DVector<f64>,
    second: DMatrix<f64>,
    n: usize,
}

impl Exact {
    fn new() -> Self {
        Exact {
            mean: DVector::zeros(P),
            second: DMatrix::zeros(P, P),
            n: 0,
        }
    }

    fn add(&mut self, c: &Collection, x: &[f64]) {
        let y: Vec<f64> = (0..P)
            .map(|i| x[i] - c.centre().get(i).copied().unwrap_or(0.0))
            .collect();
        let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
        let u = DVector::from_iterator(P, y.iter().map(|v| v / norm.max(c.clip_radius())));
        self.mean += &u;
        self.second += &u * u.transpose();
        self.n += 1;
    }

    fn finish(mut self) -> Self {
        self.mean /= self.n as f64;
        self.second /= self.n as f64;
        self
    }

    /// The sample covariance of u, `M_n − ūūᵀ`.
    fn covariance(&self) -> DMatrix<f64> {
        &self.second - &self.mean * self.mean.transpose()
    }
}

/// Laurent & Massart (2000, Lemma 1): `P(χ²_k ≥ k + 2√(kx) + 2x) ≤ e^{−x}`; at x = 21
/// the probability is below 10⁻⁹.
fn chi2_quantile(k: usize) -> f64 {
    let (k, x) = (k as f64, 21.0);
    k + 2.0 * (k * x).sqrt() + 2.0 * x
}

/// The high-probability bound on `‖Σ̂ − S‖_F` in unit-ball units for a
/// mean-and-covariance collection, from the error decomposition of the estimator
/// `Σ̂ = M̂ − μ̂μ̂ᵀ + τ²I` (docs/ALGORITHMS.md, "Mean and covariance"):
/// `Σ̂ − S = E − (ūεᵀ + εūᵀ) − (εεᵀ − τ²I) + rounding`, with `E` the averaged noise
/// of the second-moment block (d packed entries i.i.d. N(0, s²), s = σ/√n; the
/// off-diagonal ones count twice, so `‖E‖_F² ≤ 2s²·χ²_d`), `ε ~ N(0, τ²I_p)`,
/// `τ = σ/(w√n)` (`‖ε‖² = τ²χ²_p`):
/// * `‖E‖_F ≤ s·√(2·q_d)`;
/// * `‖ūεᵀ + εūᵀ‖_F ≤ 2‖ū‖·‖ε‖ ≤ 2‖ū‖·τ·√q_p`;
/// * `‖εεᵀ − τ²I‖_F ≤ ‖ε‖² + τ²√p ≤ τ²(q_p + √p)`;
/// * grid rounding: each averaged entry is off by at most ½·2⁻ᵏ, so the second-moment
///   block by at most `p·½·2⁻ᵏ` in Frobenius norm, and μ̂ by `g` with
///   `‖g‖ ≤ √p·2⁻ᵏ` (½·2⁻ᵏ divided by w = ½), which moves `μ̂μ̂ᵀ` by at most
///   `2‖μ̂‖‖g‖ + ‖g‖² ≤ 5p·2⁻ᵏ` (‖μ̂‖ ≤ 2 here): `6p·2⁻ᵏ` in all.
///
/// `q_k` the χ² quantiles of [`chi2_quantile`]; the three events fail with
/// probability below 3·10⁻⁹. The PSD projection is a Frobenius contraction onto a
/// convex set holding S, so the released matrix obeys the same bound.
fn joint_bound(c: &Collection, n: usize, mean_norm: f64) -> f64 {
    let nf = n as f64;
    let s = c.sigma() / nf.sqrt();
    let tau = c.sigma() / (c.mean_weight() * nf.sqrt());
    let d = c.second_moment_entries();
    let grid = 6.0 * P as f64 / c.grid_scale();
    s * (2.0 * chi2_quantile(d)).sqrt()
        + 2.0 * mean_norm * tau * chi2_quantile(P).sqrt()
        + tau * tau * (chi2_quantile(P) + (P as f64).sqrt())
        + grid
}

/// Frobenius norm of `a − b` for a released packed estimate `a`.
fn frob(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).norm()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mean_and_covariance_of_non_centred_data_through_the_server() {
    let (server, url, mut cl) = support::embedded::seeded_server(41).await;
    // x ~ N(3·1, Model 1): ‖x‖² ≈ p(3² + 1) = 60. R = 9 clips few users, and the exact
    // statistics below are of the clipped data anyway. The centred collection uses the
    // public centre c = 3·1 and R = 3 (‖x − c‖² ≈ p = 6). ε = 10 keeps the 10⁻⁹ bounds
    // below half the μμᵀ bias at n = 20 000, so that the bias test has power.
    let centre = vec![SHIFT; P];
    let joint_params = cl.create_collection(spec("joint", 9.0)).await.unwrap();
    let second_params = cl
        .create_collection(CollectionSpec {
            moments: Moments::SecondMoment as i32,
            ..spec("second", 9.0)
        })
        .await
        .unwrap();
    cl.create_collection(CollectionSpec {
        centre: centre.clone(),
        ..spec("centred", 3.0)
    })
    .await
    .unwrap();
    // The default resolved to mean and covariance, and is shown as such.
    let js = joint_params.spec.clone().unwrap();
    assert_eq!(js.moments, Moments::MeanAndCovariance as i32);
    assert_eq!(joint_params.entries as usize, P + P * (P + 1) / 2);
    assert_eq!(joint_params.mean_entries as usize, P);
    assert_eq!(joint_params.mean_weight, 0.5);
    assert_eq!(
        second_params.spec.unwrap().moments,
        Moments::SecondMoment as i32
    );
    let ids = ["joint", "second", "centred"];
    let mut collections = Vec::new();
    for id in ids {
        collections.push(cl.collection(id).await.unwrap());
    }
    assert_eq!(collections[2].centre(), centre);

    let sampler = Sampler::gaussian(&Model::BandedGeometric.covariance(P)).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let n = 20_000;
    let mut exact: Vec<Exact> = ids.iter().map(|_| Exact::new()).collect();
    let mut reports: Vec<Vec<Report>> = vec![Vec::new(); 3];
    // One device library per collection: the exact sampler keeps the tables of one σ.
    let mut devices = Vec::new();
    for seed in 0..3 {
        devices.push(
            AggregatorClient::connect(server.url())
                .await
                .unwrap()
                .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
                    50 + seed,
                ))),
        );
    }
    for _ in 0..n {
        let x: Vec<f64> = sampler.sample(&mut rng).iter().map(|v| v + SHIFT).collect();
        for k in 0..3 {
            exact[k].add(&collections[k], &x);
            reports[k].push(devices[k].prepare_report(&collections[k], &x).unwrap());
        }
    }
    for batch in &reports {
        for chunk in batch.chunks(5000) {
            cl.submit_stream(chunk.to_vec()).await.unwrap();
        }
    }
    let exact: Vec<Exact> = exact.into_iter().map(Exact::finish).collect();
    let mut raw = RawClient::connect(url).await.unwrap();
    let mut get = async |req: GetEstimateRequest| raw.get_estimate(req).await.unwrap().into_inner();

    // 1. The joint collection: covariance, mean, second moment, correlation.
    let (c, e) = (&collections[0], &exact[0]);
    let r2 = c.clip_radius() * c.clip_radius();
    let s_data = e.covariance() * r2;
    let bound = r2 * joint_bound(c, n, e.mean.norm());
    let est = get(no_threshold("joint")).await;
    assert_eq!(est.moments, Moments::MeanAndCovariance as i32);
    assert_eq!(est.reports, n as u64);
    support::checks::assert_packed_psd(&est.upper_triangle, P, 0.0);
    let sigma_hat = estimate_matrix(&est);
    let err = frob(&sigma_hat, &s_data);
    let bias = r2 * e.mean.norm_squared(); // ‖R²ūūᵀ‖_F
    println!("joint: error {err:.4}, bound {bound:.4}, ‖μμᵀ‖_F {bias:.4}");
    assert!(err <= bound, "‖Σ̂ − S‖_F = {err} > {bound}");
    // The test has power: the bias a second-moment estimate carries is larger than
    // twice the bound.
    assert!(bias > 2.0 * bound, "{bias} vs {bound}");
    // The mean: c + R·μ̂, each coordinate within R·(6.1τ + 2⁻ᵏ) of c + R·ū
    // (ε_i ~ N(0, τ²): P(|ε_i| > 6.1τ) < 1.1·10⁻⁹; rounding ≤ ½·2⁻ᵏ/w).
    let tau = c.sigma() / (c.mean_weight() * (n as f64).sqrt());
    assert_eq!(est.mean.len(), P);
    assert!((est.mean_noise_sd / (c.clip_radius() * tau) - 1.0).abs() < 1e-12);
    for i in 0..P {
        let want = c.clip_radius() * e.mean[i];
        let b = c.clip_radius() * (6.1 * tau + 1.0 / c.grid_scale());
        assert!(
            (est.mean[i] - want).abs() <= b,
            "mean[{i}] {} vs {want} (±{b})",
            est.mean[i]
        );
    }
    // The raw second moment about 0: R²·M̂ within R²(s·√(2q_d) + p·½·2⁻ᵏ) of R²·M_n.
    let s = c.sigma() / (n as f64).sqrt();
    let m_hat = DMatrix::from_row_slice(
        P,
        P,
        &ldpcov_privacy::layout::unpack_symmetric(P, &est.second_moment),
    );
    let m_bound = r2 * (s * (2.0 * chi2_quantile(21)).sqrt() + 0.5 * P as f64 / c.grid_scale());
    assert!(frob(&m_hat, &(&e.second * r2)) <= m_bound);
    // The correlation is that of the released covariance where both variances stand
    // above the noise, NaN (undefined) in the rows of the variables listed otherwise.
    let undefined = &est.undefined_correlation_variables;
    for ((i, j), &v) in triangle_pairs(P).zip(&est.correlation) {
        if undefined.contains(&(i as u32)) || undefined.contains(&(j as u32)) {
            assert!(
                v.is_nan(),
                "correlation ({i},{j}) of an undefined variable: {v}"
            );
        } else {
            let want = sigma_hat[(i, j)] / (sigma_hat[(i, i)] * sigma_hat[(j, j)]).sqrt();
            assert!((v - want).abs() < 1e-12, "correlation ({i},{j})");
        }
    }
    // Undefined exactly where the released variance is at most 3 noise sds of a
    // diagonal entry of the raw average.
    let sd = ldpcov_estimate::EstimationInput::from_collection(c).diagonal_entry_noise_sd(n as u64);
    for i in 0..P {
        let below = !ldpcov_estimate::variance_above_noise(sigma_hat[(i, i)], sd);
        assert_eq!(
            undefined.contains(&(i as u32)),
            below,
            "variable {i}: sd {sd}"
        );
    }
    // The default rule (cross-validation over the folds' own Σ̂) also estimates the
    // covariance: it is much nearer S than the second moment is (its candidates
    // include "none", whose error is below `bound`; a rule acting on M̂ would sit
    // near the bias).
    let cv = get(GetEstimateRequest {
        collection_id: "joint".into(),
        ..Default::default()
    })
    .await;
    let cv_err = frob(&estimate_matrix(&cv), &s_data);
    println!(
        "joint, default rule ({}): error {cv_err:.4}",
        cv.threshold_rule
    );
    assert!(cv_err < bias / 2.0, "{cv_err} vs {bias}");

    // 2. The second-moment collection on the same users: it estimates S + ūūᵀ, not S.
    let (c2, e2) = (&collections[1], &exact[1]);
    let est2 = get(no_threshold("second")).await;
    assert_eq!(est2.moments, Moments::SecondMoment as i32);
    assert!(est2.mean.is_empty() && est2.second_moment.is_empty());
    let m2 = estimate_matrix(&est2);
    // E alone (no mean block), plus rounding; the projection contracts toward the PSD
    // R²·M_n.
    let s2 = c2.sigma() / (n as f64).sqrt();
    let b2 = r2 * (s2 * (2.0 * chi2_quantile(21)).sqrt() + 0.5 * P as f64 / c2.grid_scale());
    let to_second = frob(&m2, &(&e2.second * r2));
    let to_cov = frob(&m2, &(e2.covariance() * r2));
    println!("second moment: to R²M_n {to_second:.4} (bound {b2:.4}), to S {to_cov:.4}");
    assert!(to_second <= b2);
    assert!(to_cov >= bias - b2, "{to_cov}: the μμᵀ bias is missing");

    // 3. The centred collection: the mean comes back with the centre added, the
    // covariance of the same data (the centre changes no covariance).
    let (c3, e3) = (&collections[2], &exact[2]);
    let r3 = c3.clip_radius() * c3.clip_radius();
    let est3 = get(no_threshold("centred")).await;
    let b3 = r3 * joint_bound(c3, n, e3.mean.norm());
    let err3 = frob(&estimate_matrix(&est3), &(e3.covariance() * r3));
    println!("centred: error {err3:.4}, bound {b3:.4}");
    assert!(err3 <= b3);
    let tau3 = c3.sigma() / (c3.mean_weight() * (n as f64).sqrt());
    for i in 0..P {
        let want = SHIFT + c3.clip_radius() * e3.mean[i];
        let b = c3.clip_radius() * (6.1 * tau3 + 1.0 / c3.grid_scale());
        assert!((est3.mean[i] - want).abs() <= b, "centred mean[{i}]");
    }
    server.shutdown().await.unwrap();
}

/// Bad specs are INVALID_ARGUMENT with nothing created; a report of the second
/// moment's length to a joint collection is refused and counts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_joint_specs_and_short_reports_are_refused() {
    let server = EmbeddedServer::start(Limits::default()).await.unwrap();
    let mut raw = RawClient::connect(server.url()).await.unwrap();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases = vec![
        (
            "centre too short",
            CollectionSpec {
                centre: vec![0.0; P - 1],
                ..spec("b1", 1.0)
            },
        ),
        (
            "centre NaN",
            CollectionSpec {
                centre: vec![0.0, f64::NAN, 0.0, 0.0, 0.0, 0.0],
                ..spec("b2", 1.0)
            },
        ),
        (
            "centre inf",
            CollectionSpec {
                centre: vec![f64::INFINITY; P],
                ..spec("b3", 1.0)
            },
        ),
        (
            "duplicate names",
            CollectionSpec {
                variable_names: names(&["a", "b", "c", "d", "e", "a"]),
                ..spec("b4", 1.0)
            },
        ),
        (
            "empty name",
            CollectionSpec {
                variable_names: names(&["a", "b", "", "d", "e", "f"]),
                ..spec("b5", 1.0)
            },
        ),
        (
            "long name",
            CollectionSpec {
                variable_names: vec![
                    "x".repeat(65),
                    "b".into(),
                    "c".into(),
                    "d".into(),
                    "e".into(),
                    "f".into(),
                ],
                ..spec("b6", 1.0)
            },
        ),
        (
            "names too few",
            CollectionSpec {
                variable_names: names(&["a"]),
                ..spec("b7", 1.0)
            },
        ),
        (
            "unknown moments",
            CollectionSpec {
                moments: 3,
                ..spec("b8", 1.0)
            },
        ),
    ];
    support::checks::assert_specs_refused(&mut raw, cases).await;

    let mut cl = AggregatorClient::connect(server.url()).await.unwrap();
    cl.create_collection(spec("ok", 1.0)).await.unwrap();
    let c = cl.collection("ok").await.unwrap();
    let d = P * (P + 1) / 2;
    let err = raw
        .submit_report(Report {
            collection_id: "ok".into(),
            report_id: vec![9; 16],
            encoding: Encoding::I32Le as i32,
            payload: vec![0; 4 * d],
        })
        .await
        .expect_err("a second-moment-length report");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains(&format!("expected {}", 4 * c.entries())),
        "{}",
        err.message()
    );
    let status = raw
        .get_status(GetStatusRequest {
            collection_id: "ok".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.reports, 0);
    server.shutdown().await.unwrap();
}
