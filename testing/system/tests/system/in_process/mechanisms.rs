//! The local mechanisms through the real gRPC server: the `svec`-weighted Gaussian
//! report halves the off-diagonal noise variance of the raw-weighted one; the rank-one
//! report's released moments are unbiased for the users' mean and second moment; the
//! rank-one spec and reports are refused precisely when they are wrong, with nothing
//! counted.

use crate::support;
use ldpcov_client::{AggregatorClient, DiscreteGaussianSampler};
use ldpcov_fixtures as fixtures;
use ldpcov_privacy::Collection;
use ldpcov_privacy::layout::{triangle_pairs, unpack_symmetric};
use ldpcov_privacy::mechanism::ReportMechanism;
use ldpcov_proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov_proto::v1::{
    CollectionSpec, Encoding, GetCollectionRequest, GetEstimateRequest, GetStatusRequest,
    LocalMechanism, Moments, NoThreshold, PrivacyModel, Report, get_estimate_request,
};
use nalgebra::{DMatrix, DVector};
use tonic::Code;

/// The raw average, unbiased by the mechanism: no threshold, no PSD projection.
fn raw_average(id: &str) -> GetEstimateRequest {
    GetEstimateRequest {
        collection_id: id.into(),
        threshold: Some(get_estimate_request::Threshold::None(NoThreshold {})),
        skip_psd_projection: true,
        ..Default::default()
    }
}

/// Two second-moment collections on the same 50 users, all at x = 0 (so every released
/// entry is pure noise): the raw-weighted Gaussian report (asked for explicitly) and
/// the default, `svec`-weighted one. Each released off-diagonal entry is the average of
/// 50 independent discrete Gaussians of sd σ_g (divided by √2 for svec), so
/// `Σ v²/(σ_off²/n)` over the 1 770 off-diagonal entries at p = 60 is χ²_1770; both
/// ratios must lie in the 10⁻⁹ quantile band [0.78, 1.24] of their own prediction, and
/// the bands of "half" and "today's" variance do not overlap (0.62 < 0.78), so the test
/// tells them apart. σ itself is the same (the svec rounding term moves it by < 10⁻⁸).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_svec_weighting_halves_the_off_diagonal_noise_variance() {
    let (server, url, mut admin) = support::embedded::seeded_server(3).await;
    const P: usize = 60;
    let base = fixtures::spec("triu", P as u32)
        .epsilon(1.0)
        .moments(Moments::SecondMoment)
        .encoding(Encoding::I32Le)
        .build();
    let triu = admin
        .create_collection(CollectionSpec {
            local_mechanism: LocalMechanism::GaussianTriu as i32,
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
    // The default resolved to the svec weighting, and the parameters say so.
    let svec_spec = svec.spec.clone().unwrap();
    assert_eq!(svec_spec.local_mechanism, LocalMechanism::Gaussian as i32);
    // The svec rounding margin moves σ by less than 10⁻⁸ (docs/PRIVACY.md §3).
    assert!((svec.sigma / triu.sigma - 1.0).abs() < 1e-8);
    assert_eq!(triu.off_diagonal_noise_sd, triu.sigma);
    assert_eq!(svec.off_diagonal_noise_sd, svec.sigma / 2f64.sqrt());
    assert_eq!(svec.diagonal_noise_sd, svec.sigma);
    let n = 50;
    let mut device = AggregatorClient::connect(server.url())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            9,
        )));
    let mut raw = RawClient::connect(url).await.unwrap();
    let (lo, hi) = support::checks::chi2_ratio_bounds(P * (P - 1) / 2);
    assert!(hi * 0.5 < lo, "the bands of σ²/2 and σ² overlap");
    for (id, params) in [("triu", &triu), ("svec", &svec)] {
        let c = device.collection(id).await.unwrap();
        let reports: Vec<Report> = (0..n)
            .map(|_| device.prepare_report(&c, &[0.0; P]).unwrap())
            .collect();
        admin.submit_stream(reports).await.unwrap();
        let est = raw
            .get_estimate(raw_average(id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(est.reports, n as u64);
        let (sum_sq, count) = triangle_pairs(P)
            .zip(&est.upper_triangle)
            .filter(|((i, j), _)| i != j)
            .fold((0.0, 0usize), |(s, k), (_, v)| (s + v * v, k + 1));
        let predicted = params.off_diagonal_noise_sd.powi(2) / n as f64;
        let ratio = sum_sq / count as f64 / predicted;
        println!("{id}: off-diagonal variance / predicted = {ratio:.3}");
        assert!(
            (lo..=hi).contains(&ratio),
            "{id}: {ratio} outside [{lo}, {hi}]"
        );
        // Against the raw weighting's σ²/n, the svec entries are at half.
        let against_today = sum_sq / count as f64 / (triu.sigma.powi(2) / n as f64);
        if id == "svec" {
            assert!(against_today <= 0.5 * hi, "{against_today}");
        } else {
            assert!(against_today >= lo, "{against_today}");
        }
    }
}

/// Four users' vectors (norms 0.75, 0.56, 0.9, 0), cycled: the exact mean and second
/// moment the estimates must recover.
const USERS: [[f64; 4]; 4] = [
    [0.6, 0.3, 0.0, -0.3],
    [-0.2, 0.4, 0.3, 0.1],
    [0.0, -0.5, 0.5, 0.5],
    [0.0, 0.0, 0.0, 0.0],
];

/// Rank-one collections (ε = 4, δ = 0, p = 4) of the second moment and of the mean and
/// covariance; 60 000 users cycling through [`USERS`] (exact ū and M below).
///
/// Bounds: one report's unbiased estimate of entry (i, j) has variance
/// `[(1 + κaᵢ²)(1 + κaⱼ²) + (κ² + e₄)aᵢ²aⱼ²]/κ²` (diagonal: `[2(1 + κaᵢ²)² + e₄aᵢ⁴]/κ²`;
/// mean: `(1 + (κ − c²)aᵢ²)/c²`, `CapMoments`), bounded by its largest value over
/// `aᵢ², aⱼ² ∈ [0, 1]`. The average of n has sd `√(v/n)`; each of the 14 released
/// numbers must be within 6 sd (two-sided 2·10⁻⁹ each, by the CLT at n = 60 000 with
/// bounded fourth moments) plus the grid rounding (½·2⁻²² per summed entry, divided by
/// κ or c). The raw, not unbiased, diagonal average `1 + κMᵢᵢ` would be off by more
/// than 0.5: the unbiasing is what the test sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rank_one_moments_are_unbiased_through_the_server() {
    let (server, url, mut admin) = support::embedded::seeded_server(5).await;
    const P: usize = 4;
    let spec = |id: &str, moments: Moments| CollectionSpec {
        local_mechanism: LocalMechanism::RankOne as i32,
        delta: 0.0,
        encoding: Encoding::Unspecified as i32,
        ..fixtures::spec(id, P as u32)
            .epsilon(4.0)
            .moments(moments)
            .min_reports(1)
            .build()
    };
    let second = admin
        .create_collection(spec("r1-second", Moments::SecondMoment))
        .await
        .unwrap();
    let joint = admin
        .create_collection(spec("r1-joint", Moments::MeanAndCovariance))
        .await
        .unwrap();
    for params in [&second, &joint] {
        let s = params.spec.as_ref().unwrap();
        assert_eq!(s.encoding, Encoding::I16Le as i32);
        assert_eq!(s.delta, 0.0);
        let r = params.rank_one.as_ref().expect("rank-one parameters");
        assert!(r.nominal_epsilon < 4.0 && r.nominal_epsilon > 4.0 - 1e-6);
        assert_eq!(params.sigma, 0.0);
    }
    let n = 60_000usize;
    let mut mean = DVector::<f64>::zeros(P);
    let mut moment = DMatrix::<f64>::zeros(P, P);
    for k in 0..n {
        let u = DVector::from_row_slice(&USERS[k % 4]);
        mean += &u;
        moment += &u * u.transpose();
    }
    mean /= n as f64;
    moment /= n as f64;
    let mut device = AggregatorClient::connect(server.url())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            11,
        )));
    let mut raw = RawClient::connect(url).await.unwrap();
    for id in ["r1-second", "r1-joint"] {
        let c: Collection = device.collection(id).await.unwrap();
        let ReportMechanism::RankOne(report) = c.mechanism() else {
            panic!("{id} is a rank-one collection");
        };
        let m = report.params().moments;
        let (kappa, cm) = (m.kappa, m.mean_scale);
        // The largest variance of one report's unbiased entry over aᵢ², aⱼ² ∈ [0, 1]
        // (a grid of 101 points; the functions are polynomials of degree ≤ 2 in each,
        // so 1 % covers the grid's gaps).
        let grid_points: Vec<f64> = (0..=100).map(|k| k as f64 / 100.0).collect();
        let worst = |f: &dyn Fn(f64, f64) -> f64| {
            let mut w = 0.0f64;
            for &a in &grid_points {
                for &b in &grid_points {
                    w = w.max(f(a, b));
                }
            }
            1.01 * w
        };
        let off_var = worst(&|a, b| m.second_moment_entry_variance(a, b, false));
        let diag_var = worst(&|a, _| m.second_moment_entry_variance(a, a, true));
        let mean_var = worst(&|a, _| m.mean_entry_variance(a));
        let reports: Vec<Report> = (0..n)
            // R = 1 and ‖x‖ ≤ 1: u = x up to the clip margin of 2⁻³².
            .map(|k| device.prepare_report(&c, &USERS[k % 4]).unwrap())
            .collect();
        assert!(reports.iter().all(|r| r.payload.len() == 2 * P));
        for chunk in reports.chunks(10_000) {
            admin.submit_stream(chunk.to_vec()).await.unwrap();
        }
        let est = raw
            .get_estimate(raw_average(id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(est.reports, n as u64);
        let nf = n as f64;
        let off_sd = (off_var / nf).sqrt();
        let diag_sd = (diag_var / nf).sqrt();
        let grid = 0.5 / 2f64.powi(22) / kappa;
        let second_moment = if id == "r1-joint" {
            est.second_moment.clone()
        } else {
            est.upper_triangle.clone()
        };
        let released = DMatrix::from_row_slice(P, P, &unpack_symmetric(P, &second_moment));
        for (i, j) in triangle_pairs(P) {
            let sd = if i == j { diag_sd } else { off_sd };
            let err = (released[(i, j)] - moment[(i, j)]).abs();
            assert!(
                err <= 6.0 * sd + grid,
                "{id}: M[{i}{j}] = {} vs {} (sd {sd})",
                released[(i, j)],
                moment[(i, j)]
            );
            if i == j {
                // The raw diagonal average would be 1 + κ·Mᵢᵢ.
                let raw_diagonal = 1.0 + kappa * moment[(i, i)];
                assert!((raw_diagonal - moment[(i, i)]).abs() > 0.5 + 6.0 * sd);
            }
        }
        if id == "r1-joint" {
            assert_eq!(est.mean.len(), P);
            let mean_sd = (mean_var / nf).sqrt();
            for i in 0..P {
                let err = (est.mean[i] - mean[i]).abs();
                assert!(
                    err <= 6.0 * mean_sd + 2.0 / cm / 2f64.powi(22),
                    "mean[{i}] = {} vs {} (sd {mean_sd})",
                    est.mean[i],
                    mean[i]
                );
            }
            // The covariance is M̂ − μ̂μ̂ᵀ + Cov(μ̂): close to the users' M − ūūᵀ.
            let cov = DMatrix::from_row_slice(P, P, &unpack_symmetric(P, &est.upper_triangle));
            let want = &moment - &mean * mean.transpose();
            let worst = (&cov - &want).abs().max();
            assert!(
                worst < 6.0 * diag_sd + 4.0 * mean_sd,
                "covariance off by {worst}"
            );
        } else {
            assert!(est.mean.is_empty());
        }
    }
}

/// Rank-one specs that cannot be honoured, and rank-one reports that are not what the
/// collection takes, are INVALID_ARGUMENT with nothing created or counted; GetCollection
/// shows the mechanism and its parameters.
#[tokio::test]
async fn bad_rank_one_specs_and_reports_are_refused() {
    let (server, url, mut admin) = support::embedded::seeded_server(7).await;
    let good = CollectionSpec {
        local_mechanism: LocalMechanism::RankOne as i32,
        delta: 0.0,
        ..fixtures::spec("r1", 3).epsilon(2.0).build()
    };
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    let refused = |id: &str, f: &dyn Fn(&mut CollectionSpec)| {
        let mut s = good.clone();
        s.collection_id = id.into();
        f(&mut s);
        s
    };
    support::checks::assert_specs_refused(
        &mut raw,
        vec![
            ("a delta", refused("d", &|s| s.delta = 1e-6)),
            (
                "an i32 encoding",
                refused("e", &|s| s.encoding = Encoding::I32Le as i32),
            ),
            ("epsilon above 16", refused("big", &|s| s.epsilon = 17.0)),
            (
                "unknown mechanism",
                refused("u", &|s| s.local_mechanism = 9),
            ),
            (
                "central with a local mechanism",
                refused("central", &|s| {
                    s.privacy_model = PrivacyModel::Central as i32;
                    s.delta = 1e-6;
                    s.encoding = Encoding::RawI32Le as i32;
                }),
            ),
        ],
    )
    .await;
    let err = raw
        .create_collection(ldpcov_proto::v1::CreateCollectionRequest {
            spec: Some(refused("d2", &|s| s.delta = 1e-6)),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("pure epsilon"), "{}", err.message());

    admin.create_collection(good.clone()).await.unwrap();
    let shown = raw
        .get_collection(GetCollectionRequest {
            collection_id: "r1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        shown.spec.as_ref().unwrap().local_mechanism,
        LocalMechanism::RankOne as i32
    );
    let r = shown.rank_one.as_ref().unwrap();
    assert!(r.kappa > 0.0 && r.gamma > 0.0 && r.expected_rounds >= 1.0);

    let mut device = AggregatorClient::connect(server.url())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            1,
        )));
    let c = device.collection("r1").await.unwrap();
    let good_report = device.prepare_report(&c, &[0.5, 0.0, -0.5]).unwrap();
    admin.submit_report(good_report.clone()).await.unwrap();
    let count = |raw: &mut RawClient<_>| {
        let mut raw = raw.clone();
        async move {
            raw.get_status(GetStatusRequest {
                collection_id: "r1".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .reports
        }
    };
    assert_eq!(count(&mut raw).await, 1);
    let id = |k: u8| vec![k; 16];
    let bad = [
        ("one i16 short", good_report.payload[..4].to_vec(), 0, id(1)),
        (
            "one byte long",
            [good_report.payload.clone(), vec![0]].concat(),
            0,
            id(2),
        ),
        (
            "−32 768",
            [i16::MIN.to_le_bytes(), [0, 0], [0, 0]].concat(),
            0,
            id(3),
        ),
        (
            "an i32 encoding",
            vec![0; 12],
            Encoding::I32Le as i32,
            id(4),
        ),
    ];
    for (what, payload, encoding, report_id) in bad {
        let err = raw
            .submit_report(Report {
                collection_id: "r1".into(),
                report_id,
                encoding,
                payload,
            })
            .await
            .expect_err(what);
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{what}: {}",
            err.message()
        );
    }
    assert_eq!(count(&mut raw).await, 1, "a bad report was counted");
}

/// The closed form the entry-adaptive rule reads for a rank-one collection's
/// off-diagonal variances (the aggregator keeps no off-diagonal sums of squares for
/// rank-one reports): on reports from the real sampler, through `prepare_report`, the
/// sample variance of each wire product `yᵢyⱼ` (dither included) matches
/// `NoiseModel::off_diagonal_variance_given_fourth_moment` at the population's exact
/// moments, for both caps and three ε; the Isserlis stand-in for the data's fourth
/// moment (`off_diagonal_population_variance`, what the estimator uses) is within 5 %
/// of the exact form on these spread-out users; and the form with the cap's excess
/// fourth moment dropped (e₄ = 0) is caught at ε = 4.
///
/// Bound: the sample variance of n i.i.d. draws has sd `√((μ₄ − σ⁴)/n)` to leading
/// order (μ₄ the central fourth moment, estimated from the same draws); 6 sd per entry
/// over 30 entries puts the false-failure rate near 10⁻⁷ (normal approximation; the
/// products have finite moments of every order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rank_one_off_diagonal_variance_matches_its_closed_form() {
    let (server, _url, mut admin) = support::embedded::seeded_server(7).await;
    const P: usize = 5;
    const USERS_N: usize = 16;
    // Deterministic users spread over the coordinates, norms 0.3 … 0.95.
    let users: Vec<Vec<f64>> = (0..USERS_N)
        .map(|k| {
            let raw: Vec<f64> = (0..P)
                .map(|i| (1.3 * k as f64 + 0.7 * i as f64 + 0.11 * (k * i) as f64).sin())
                .collect();
            let norm = raw.iter().map(|v| v * v).sum::<f64>().sqrt();
            let target = 0.3 + 0.65 * k as f64 / (USERS_N - 1) as f64;
            raw.iter().map(|v| v * target / norm).collect()
        })
        .collect();
    let moment = |f: &dyn Fn(&[f64]) -> f64| -> f64 {
        users.iter().map(|u| f(u)).sum::<f64>() / USERS_N as f64
    };
    let mut device = AggregatorClient::connect(server.url())
        .await
        .unwrap()
        .with_noise_sampler(Box::new(DiscreteGaussianSampler::from_seed_for_simulation(
            13,
        )));
    let (step, _) =
        ldpcov_privacy::mechanism::rank_one::RankOneParams::wire_step_and_dither_variance();
    let n = 40_000usize;
    for (k, (epsilon, moments)) in [
        (0.5, Moments::SecondMoment),
        (1.0, Moments::MeanAndCovariance),
        (4.0, Moments::SecondMoment),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("r1-var-{k}");
        admin
            .create_collection(CollectionSpec {
                local_mechanism: LocalMechanism::RankOne as i32,
                delta: 0.0,
                encoding: Encoding::Unspecified as i32,
                ..fixtures::spec(&id, P as u32)
                    .epsilon(epsilon)
                    .moments(moments)
                    .min_reports(1)
                    .build()
            })
            .await
            .unwrap();
        let c: Collection = device.collection(&id).await.unwrap();
        let ReportMechanism::RankOne(report) = c.mechanism() else {
            panic!("{id} is a rank-one collection");
        };
        let noise = report.noise();
        let ldpcov_privacy::mechanism::NoiseModel::RankOne {
            kappa,
            mean_scale,
            dither_variance,
            ..
        } = noise
        else {
            panic!("{id}: rank-one noise model");
        };
        let without_e4 = ldpcov_privacy::mechanism::NoiseModel::RankOne {
            kappa,
            mean_scale,
            excess_fourth_moment: 0.0,
            dither_variance,
        };
        // y from the wire: p little-endian i16 per report, in steps of Δ_w.
        let ys: Vec<[f64; P]> = (0..n)
            .map(|r| {
                // R = 1 and ‖x‖ ≤ 1: u = x up to the clip margin of 2⁻³².
                let report = device.prepare_report(&c, &users[r % USERS_N]).unwrap();
                let mut y = [0.0; P];
                for (v, b) in y.iter_mut().zip(report.payload.chunks_exact(2)) {
                    *v = f64::from(i16::from_le_bytes([b[0], b[1]])) * step;
                }
                y
            })
            .collect();
        let mut e4_caught = false;
        for (i, j) in triangle_pairs(P).filter(|(i, j)| i != j) {
            let x: Vec<f64> = ys.iter().map(|y| y[i] * y[j]).collect();
            let mean = x.iter().sum::<f64>() / n as f64;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let mu4 = x.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n as f64;
            let tolerance = 6.0 * ((mu4 - var * var).max(0.0) / n as f64).sqrt();
            let (m_ii, m_jj) = (moment(&|u| u[i] * u[i]), moment(&|u| u[j] * u[j]));
            let m_ij = moment(&|u| u[i] * u[j]);
            let xi = moment(&|u| u[i] * u[i] * u[j] * u[j]);
            let exact = noise
                .off_diagonal_variance_given_fourth_moment(m_ii, m_jj, m_ij, xi)
                .unwrap();
            assert!(
                (var - exact).abs() <= tolerance,
                "{id} ({i}, {j}): sample variance {var} vs closed form {exact} (± {tolerance})"
            );
            let approx = noise
                .off_diagonal_population_variance(m_ii, m_jj, m_ij)
                .unwrap();
            assert!(
                (approx - exact).abs() <= 0.05 * exact,
                "{id} ({i}, {j}): Isserlis {approx} vs exact {exact}"
            );
            let broken = without_e4
                .off_diagonal_variance_given_fourth_moment(m_ii, m_jj, m_ij, xi)
                .unwrap();
            e4_caught |= (var - broken).abs() > tolerance;
            eprintln!(
                "{id} ({i}, {j}): sample {var:.4} ± {tolerance:.4}, exact {exact:.4}, Isserlis {approx:.4}, e₄ = 0 {broken:.4}"
            );
        }
        // e₄ moves the variance by e₄ξ: −0.67ξ at ε = 0.5 (lost in the noise floor 1),
        // −30ξ at ε = 4 (ξ ≈ 0.01 here: a quarter of the variance).
        if epsilon >= 4.0 {
            assert!(e4_caught, "{id}: dropping e₄ went unnoticed");
        }
    }
}
