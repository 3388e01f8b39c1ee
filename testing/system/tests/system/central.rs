//! End-to-end tests of central collections through the daemon and the CLI: releases
//! that spend a durable budget, AdaptiveCov.

use ldpcov_client::AggregatorClient;
use serde_json::Value;

use support::admin::*;
use support::daemon::*;
use support::outputs::*;

use crate::support;

/// A central collection end to end through the real daemon (redb, restarted) and the
/// CLI: raw vectors in, releases that spend a durable budget out.
///
/// * The GaussCov release's noise scale: every packed entry of the released average
///   minus the exact average of what was sent, over the reported noise sd, is
///   N(0, 1) if the calibration is right, so `Σ z²` over the d = 820 entries is
///   χ²₈₂₀. Laurent & Massart (2000, Lemma 1) give `P(χ² ≥ d + 2√(dx) + 2x) ≤ e^{−x}`
///   and `P(χ² ≤ d − 2√(dx)) ≤ e^{−x}`; at `x = ln 10⁹` the band is [559, 1122], so
///   an honest daemon fails this with probability below 2·10⁻⁹ (its noise is seeded
///   by the OS, as it must be). The sensitivity 1 the papers print (variance × 1/2)
///   lands near 410 and twice the variance near 1640: both outside.
///   Each entry is standardised by its own sd: the collection is new, so its release is
///   in the svec weighting, `√2` times the reported sd on the diagonal.
/// * The reported (off-diagonal) noise sd is pinned exactly: `R²/(n√(2ρ))` (sensitivity
///   √2·2^30 grid units, σ = Δ/√(2ρ), halved variance off the diagonal).
#[test]
fn central_collection_releases_spend_a_durable_budget() {
    const CP: usize = 40;
    const CN: usize = 300;
    const R: f64 = 2.0;
    let data = tempfile::tempdir().expect("temp dir");
    let dir = data.path().to_str().expect("utf-8 temp path").to_string();
    let mut daemon = Daemon::serve(&["--data-dir", &dir]);
    let params = run(&[
        "create",
        "--server",
        &daemon.url,
        "--id",
        "curated",
        "--dim",
        "40",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "100",
        "--moments",
        "second-moment",
        "--privacy-model",
        "central",
    ])
    .json();
    assert_eq!(params["privacy_model"], "PRIVACY_MODEL_CENTRAL");
    assert_eq!(params["central_weighting"], "CENTRAL_WEIGHTING_SVEC");
    assert_eq!(params["encoding"], "ENCODING_RAW_I32_LE");
    assert_eq!(params["sigma"], 0.0);
    assert_eq!(params["grid_bits"], 30);
    // ρ from (ε, δ): (√(ln(1/δ) + ε) − √ln(1/δ))².
    let l = (1e6f64).ln();
    let budget = ((l + 2.0).sqrt() - l.sqrt()).powi(2);
    let rho_budget = params["rho"].as_f64().expect("rho");
    assert!((rho_budget - budget).abs() < 1e-12 * budget, "{rho_budget}");
    // Served without TLS and tokens: the daemon warns that raw vectors are exposed.
    assert!(
        daemon
            .log()
            .contains("central collection served without TLS and a submit token"),
        "{}",
        daemon.log()
    );
    run(&[
        "create",
        "--server",
        &daemon.url,
        "--id",
        "local",
        "--dim",
        "40",
        "--epsilon",
        "2",
        "--delta",
        "1e-6",
        "--clip-radius",
        "2",
        "--min-reports",
        "100",
    ])
    .json();

    // Users' vectors; the exact packed sums of what was sent, from the payloads.
    let xs: Vec<Vec<f64>> = (0..CN)
        .map(|k| {
            (0..CP)
                .map(|j| 0.6 * ((k as f64) * 0.37 + (j as f64) * 1.3).sin() + 0.1)
                .collect()
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let exact_sums: Vec<i64> = runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let central = client.collection("curated").await.expect("fetch");
        let local = client.collection("local").await.expect("fetch local");
        // A device never perturbs for (nor sends raw vectors to) the wrong model.
        assert!(matches!(
            client.prepare_report(&central, &xs[0]),
            Err(ldpcov_client::ClientError::CentralCollection { .. })
        ));
        assert!(matches!(
            client.submit_to_trusted_curator(&local, &xs[0]).await,
            Err(ldpcov_client::ClientError::LocalCollection { .. })
        ));
        let mut sums = vec![0i64; CP * (CP + 1) / 2];
        let mut reports = Vec::new();
        for x in &xs {
            let id = ldpcov_client::random_report_id().expect("id");
            let report = ldpcov_client::trusted_curator_report(&central, x, id).expect("report");
            let u: Vec<i64> = report
                .payload
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            let mut k = 0;
            for i in 0..CP {
                for j in i..CP {
                    sums[k] += u[i] * u[j];
                    k += 1;
                }
            }
            reports.push(report);
        }
        // Bad reports first: each refused with INVALID_ARGUMENT, nothing counted.
        let good = reports[0].clone();
        let mut outside = good.clone();
        outside.payload = ldpcov_privacy::wire::encode_raw(&{
            let mut v = vec![0i32; CP];
            v[0] = 1 << 15;
            v[1] = 1;
            v
        });
        let mut short = good.clone();
        short.payload.truncate(4 * (CP - 1));
        let mut perturbed = good.clone();
        perturbed.encoding = ldpcov_client::proto::v1::Encoding::I32Le as i32;
        let mut raw_to_local = good.clone();
        raw_to_local.collection_id = "local".into();
        for (what, bad, needle) in [
            ("outside the ball", outside, "unit ball"),
            ("wrong length", short, "payload has 156 bytes"),
            (
                "perturbed to central",
                perturbed,
                "cannot go to a Central collection",
            ),
            (
                "raw to local",
                raw_to_local,
                "cannot go to a Local collection",
            ),
        ] {
            match client.submit_report(bad).await {
                Err(ldpcov_client::ClientError::Status(s)) => {
                    assert_eq!(s.code(), tonic::Code::InvalidArgument, "{what}: {s:?}");
                    assert!(s.message().contains(needle), "{what}: {}", s.message());
                }
                other => panic!("{what}: expected INVALID_ARGUMENT, got {other:?}"),
            }
        }
        let response = client.submit_stream(reports).await.expect("submit");
        assert_eq!(response.accepted, CN as u64);
        sums
    });
    let status_of = |url: &str| status(url, "curated").json();
    let st = status_of(&daemon.url);
    assert_eq!(st["reports"], CN as u64);
    assert_eq!(st["rho_budget"].as_f64(), Some(rho_budget));
    assert_eq!(st["rho_spent"].as_f64(), Some(0.0));
    assert_eq!(status(&daemon.url, "local").json()["reports"], 0);

    // No release named: refused, nothing spent.
    estimate(&daemon.url, "curated", &[]).fails_with("InvalidArgument");
    // Rules that would look at exact per-fold statistics: refused.
    estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "gauss-cov",
            "--release-rho",
            "0.05",
            "--threshold",
            "cv",
        ],
    )
    .fails_with("per-report statistics");
    // A release on a local collection: refused.
    estimate(
        &daemon.url,
        "local",
        &["--release", "gauss-cov", "--release-rho", "0.05"],
    )
    .fails_with("release is for central collections");
    assert_eq!(status_of(&daemon.url)["rho_spent"].as_f64(), Some(0.0));

    let gauss = [
        "--release",
        "gauss-cov",
        "--release-rho",
        "0.05",
        "--threshold",
        "none",
        "--no-psd",
    ];
    let first = estimate(&daemon.url, "curated", &gauss);
    let doc = first.json();
    let matrix = json_matrix_exact(&first.stdout);
    assert_eq!(matrix.len(), CP * CP);
    let release = &doc["release"];
    assert_eq!(release["mechanism"], "gauss-cov");
    assert_eq!(release["rho_spent_by_this_call"].as_f64(), Some(0.05));
    assert_eq!(release["rho_spent"].as_f64(), Some(0.05));
    // A new central collection releases in the svec weighting: entry_noise_sd is the
    // off-diagonal sd, R²/(n√(2ρ)); the diagonal's is √2 times it (docs/PRIVACY.md §3).
    let sd = doc["entry_noise_sd"].as_f64().expect("noise sd");
    let want_sd = R * R / (CN as f64 * 0.05f64.sqrt()) * std::f64::consts::FRAC_1_SQRT_2;
    assert!((sd - want_sd).abs() < 1e-12 * want_sd, "{sd} vs {want_sd}");
    let unit = (1u64 << 30) as f64;
    let diagonal = (0..CP).flat_map(|i| (i..CP).map(move |j| i == j));
    let z2: f64 = upper_triangle(&matrix, CP)
        .iter()
        .zip(&exact_sums)
        .zip(diagonal)
        .map(|((m, &s), on_diagonal)| {
            let exact = R * R * s as f64 / (unit * CN as f64);
            let entry_sd = if on_diagonal {
                sd * std::f64::consts::SQRT_2
            } else {
                sd
            };
            ((m - exact) / entry_sd).powi(2)
        })
        .sum();
    assert!(
        (559.0..=1122.0).contains(&z2),
        "Σz² = {z2} outside the χ²₈₂₀ band"
    );

    // The same release again: from the ledger, bit for bit, at no cost.
    let again = estimate(&daemon.url, "curated", &gauss);
    assert_eq!(
        json_matrix_exact(&again.stdout),
        json_matrix_exact(&first.stdout)
    );
    assert_eq!(
        again.json()["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    // Post-processing of the same release (the default rule, PSD projection): free.
    let post = estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.05"],
    )
    .json();
    assert_eq!(
        post["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    assert!(
        post["threshold_rule"]
            .as_str()
            .unwrap_or("")
            .contains("bulk"),
        "{post}"
    );
    // Synthetic rows from the release: post-processing (free), reproducible by seed.
    let synth = |name: &str| {
        let path = data.path().join(name);
        let run = estimate(
            &daemon.url,
            "curated",
            &[
                "--release",
                "gauss-cov",
                "--release-rho",
                "0.05",
                "--synthetic-rows",
                "500",
                "--synthetic-out",
                path.to_str().expect("utf-8"),
                "--synthetic-seed",
                "7",
            ],
        );
        assert_eq!(
            run.json()["release"]["rho_spent_by_this_call"].as_f64(),
            Some(0.0)
        );
        std::fs::read_to_string(path).expect("synthetic rows written")
    };
    let (a, b) = (synth("a.csv"), synth("b.csv"));
    assert_eq!(a, b, "same seed, same rows");
    let lines: Vec<&str> = a.lines().collect();
    assert_eq!(lines.len(), 501);
    assert_eq!(lines[0].split(',').count(), CP);
    assert_eq!(lines[0].split(',').next(), Some("x1"));
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.split(',').all(|v| v.parse::<f64>().is_ok()))
    );
    // SeparateCov takes only the `none` rule.
    estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "separate-cov",
            "--release-rho",
            "0.01",
            "--threshold",
            "universal",
        ],
    )
    .fails_with("only the `none` rule");

    // Beyond the budget: RESOURCE_EXHAUSTED, nothing spent.
    estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.02"],
    )
    .fails_with("ResourceExhausted");
    assert_eq!(status_of(&daemon.url)["rho_spent"].as_f64(), Some(0.05));
    // Pure DP: ε = 0.1 spends ρ = ε²/2 = 0.005; its noise sd is the discrete
    // Laplace's at scale t = ⌈(p + 1)·2^30/ε⌉.
    let lap = estimate(
        &daemon.url,
        "curated",
        &[
            "--release",
            "laplace-cov",
            "--release-epsilon",
            "0.1",
            "--threshold",
            "none",
        ],
    )
    .json();
    let close = |v: &Value, want: f64| {
        let got = v.as_f64().unwrap_or(f64::NAN);
        assert!((got - want).abs() < 1e-15, "{got} vs {want}");
    };
    close(&lap["release"]["rho_spent_by_this_call"], 0.005);
    let t = ((CP as f64 + 1.0) * unit / 0.1).ceil();
    let q = (-1.0 / t).exp();
    let lap_sd = R * R * (2.0 * q).sqrt() / (1.0 - q) / (unit * CN as f64);
    let got = lap["entry_noise_sd"].as_f64().expect("sd");
    assert!((got - lap_sd).abs() < 1e-9 * lap_sd, "{got} vs {lap_sd}");
    // SeparateCov through the daemon: its noise is on the eigenvalues, sd
    // Δ_λ/√(2·ρ/2) grid units over 2^30·n, times R² (Δ_λ ≈ √2·2^30: the rounding and
    // eigensolver terms are below 10⁻⁶ of it here).
    let sep = estimate(
        &daemon.url,
        "curated",
        &["--release", "separate-cov", "--release-rho", "0.01"],
    )
    .json();
    assert_eq!(sep["release"]["mechanism"], "separate-cov");
    close(&sep["release"]["rho_spent_by_this_call"], 0.01);
    let sep_sd = sep["entry_noise_sd"].as_f64().expect("sd");
    let want = R * R * std::f64::consts::SQRT_2 / (2.0 * 0.005f64).sqrt() / CN as f64;
    assert!((sep_sd / want - 1.0).abs() < 1e-5, "{sep_sd} vs {want}");
    let spent = 0.05 + 0.005 + 0.01;
    close(&status_of(&daemon.url)["rho_spent"], spent);

    // Restart on the same file: the budget and the recorded release survive.
    let (exit, _) = daemon.terminate();
    assert!(exit.success());
    drop(daemon);
    let daemon = Daemon::serve(&["--data-dir", &dir]);
    close(&status_of(&daemon.url)["rho_spent"], spent);
    let after = estimate(&daemon.url, "curated", &gauss);
    assert_eq!(
        json_matrix_exact(&after.stdout),
        json_matrix_exact(&first.stdout)
    );
    assert_eq!(
        after.json()["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    // A new release (another ρ) beyond what is left: refused after the restart too.
    estimate(
        &daemon.url,
        "curated",
        &["--release", "gauss-cov", "--release-rho", "0.03"],
    )
    .fails_with("ResourceExhausted");
    close(&status_of(&daemon.url)["rho_spent"], spent);
}

/// AdaptiveCov through the daemon and the CLI: a central collection with norm bins
/// releases at a radius 2^-j·R it reports, with its private trace, spending its ρ once;
/// a collection without bins, and bins on a local collection, are refused.
#[test]
fn adaptive_cov_releases_through_the_cli() {
    let daemon = Daemon::start();
    let args = |id: &str, model: &str, bins: &str| -> Vec<String> {
        [
            "create",
            "--server",
            &daemon.url,
            "--id",
            id,
            "--dim",
            "4",
            "--epsilon",
            "2",
            "--delta",
            "1e-6",
            "--clip-radius",
            "2",
            "--min-reports",
            "10",
            "--moments",
            "second-moment",
            "--privacy-model",
            model,
            "--norm-bins",
            bins,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let create_run = |a: Vec<String>| run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    create_run(args("binned-local", "local", "4")).fails_with("norm_bins is for central");
    let params = create_run(args("binned", "central", "6")).json();
    assert_eq!(params["norm_bins"], 6);
    // d = 10 entries, then 6 bins of 2d + 1.
    assert_eq!(params["entries"], 10 + 6 * 21);
    // A central collection may ask for the original triangle (to match one created
    // before the svec weighting).
    let mut triu = args("plain", "central", "0");
    triu.extend(["--central-weighting".to_string(), "triu".to_string()]);
    let plain = create_run(triu).json();
    assert_eq!(plain["central_weighting"], "CENTRAL_WEIGHTING_TRIU");

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        for id in ["binned", "plain"] {
            let c = client.collection(id).await.expect("fetch");
            for k in 0..400 {
                let a = k as f64 * 0.31;
                // Norm 0.6 of R = 2 (unit-ball norm 0.3): bin 1.
                let x = [0.6 * a.cos(), 0.6 * a.sin(), 0.0, 0.0];
                client
                    .submit_to_trusted_curator(&c, &x)
                    .await
                    .expect("submit");
            }
        }
    });
    let adaptive = ["--release", "adaptive-cov", "--release-rho", "0.04"];
    estimate(&daemon.url, "plain", &adaptive).fails_with("norm_bins");
    let doc = estimate(&daemon.url, "binned", &adaptive).json();
    let release = &doc["release"];
    assert_eq!(release["mechanism"], "adaptive-cov");
    assert_eq!(release["rho_spent_by_this_call"].as_f64(), Some(0.04));
    let radius = release["radius"].as_f64().expect("radius");
    let j = (2.0 / radius).log2();
    assert!(
        (j - j.round()).abs() < 1e-12 && (0.0..6.0).contains(&j),
        "radius {radius}"
    );
    assert!(release["trace"].as_f64().expect("trace").is_finite());
    // Asked again: the same release, free.
    let again = estimate(&daemon.url, "binned", &adaptive).json();
    assert_eq!(
        again["release"]["rho_spent_by_this_call"].as_f64(),
        Some(0.0)
    );
    assert_eq!(again["matrix"], doc["matrix"]);
    assert_eq!(
        status(&daemon.url, "binned").json()["rho_spent"].as_f64(),
        Some(0.04)
    );
    // Private cross-validation: the folds released at ρ together (parallel
    // composition), the default rule (CV) then runs on them; spent once.
    let folds = ["--release", "gauss-cov-folds", "--release-rho", "0.02"];
    let cv = estimate(&daemon.url, "binned", &folds).json();
    assert_eq!(cv["release"]["mechanism"], "gauss-cov-folds");
    assert_eq!(cv["release"]["rho_spent_by_this_call"].as_f64(), Some(0.02));
    assert!(
        cv["threshold_rule"]
            .as_str()
            .unwrap_or("")
            .starts_with("cv"),
        "{}",
        cv["threshold_rule"]
    );
    // √K = √5 times GaussCov's off-diagonal noise at the same ρ (the svec weighting of
    // a new collection): R²·√5/(n√(2ρ)).
    let sd = cv["entry_noise_sd"].as_f64().expect("sd");
    let want = 4.0 * 5f64.sqrt() / (400.0 * 0.04f64.sqrt());
    assert!((sd / want - 1.0).abs() < 1e-12, "{sd} vs {want}");
    // The adaptive threshold would need sums of squares: refused, nothing spent.
    let mut adaptive_rule = folds.to_vec();
    adaptive_rule.extend(["--threshold", "adaptive"]);
    estimate(&daemon.url, "binned", &adaptive_rule).fails_with("sums of squares");
    let spent = status(&daemon.url, "binned").json()["rho_spent"]
        .as_f64()
        .expect("spent");
    assert!((spent - 0.06).abs() < 1e-15, "{spent}");
    // The pure-DP variants spend ρ = ε²/2: 0.005 and 0.00125.
    let lap = estimate(
        &daemon.url,
        "binned",
        &[
            "--release",
            "adaptive-cov-laplace",
            "--release-epsilon",
            "0.1",
        ],
    )
    .json();
    assert_eq!(lap["release"]["mechanism"], "adaptive-cov-laplace");
    let sep = estimate(
        &daemon.url,
        "binned",
        &[
            "--release",
            "separate-cov-laplace",
            "--release-epsilon",
            "0.05",
        ],
    )
    .json();
    assert_eq!(sep["release"]["mechanism"], "separate-cov-laplace");
    let spent = status(&daemon.url, "binned").json()["rho_spent"]
        .as_f64()
        .expect("spent");
    assert!((spent - 0.06625).abs() < 1e-15, "{spent}");
    // Nothing left for another: refused, nothing spent.
    estimate(
        &daemon.url,
        "binned",
        &["--release", "laplace-cov", "--release-epsilon", "0.1"],
    )
    .fails_with("ResourceExhausted");

    // Zhou, Ligett & Wasserman's compressed release: opt-in at creation, labelled, spends nothing.
    let mut local = args("compressed-local", "local", "0");
    local.push("--allow-compressed-release".into());
    create_run(local).fails_with("allow_compressed_release is for central");
    let mut compressed = args("compressed", "central", "0");
    compressed.push("--allow-compressed-release".into());
    assert_eq!(
        create_run(compressed).json()["allow_compressed_release"],
        true
    );
    let ask = ["--release", "compressed-not-dp", "--compressed-rows", "30"];
    estimate(&daemon.url, "plain", &ask).fails_with("allow_compressed_release");
    // No report yet: below the minimum, nothing recorded.
    estimate(&daemon.url, "compressed", &ask).fails_with("FailedPrecondition");
    runtime.block_on(async {
        let mut client = AggregatorClient::connect(daemon.url.as_str())
            .await
            .expect("connect");
        let c = client.collection("compressed").await.expect("fetch");
        for k in 0..50 {
            let x = [0.1 * k as f64 / 50.0, 0.3, -0.2, 0.0];
            client
                .submit_to_trusted_curator(&c, &x)
                .await
                .expect("submit");
        }
    });
    let doc = estimate(&daemon.url, "compressed", &ask).json();
    assert_eq!(
        doc["release"]["mechanism"],
        "compressed (NOT differentially private)"
    );
    assert_eq!(doc["release"]["rho_spent_by_this_call"].as_f64(), Some(0.0));
    assert_eq!(
        status(&daemon.url, "compressed").json()["rho_spent"].as_f64(),
        Some(0.0)
    );
}
