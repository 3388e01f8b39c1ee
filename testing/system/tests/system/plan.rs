//! `plan`: the predicted raw-average error and bytes per report of each mechanism, and
//! the users a target error needs, with no daemon; bad flags are one-line errors.

use support::admin::*;

use crate::support;

/// At p = 100, ε = 1, δ = 10⁻⁶, n = 3 000 (the measured point): the raw
/// weighting's error is `σ·p/√n` (every one of the p² entries at σ²/n), the svec
/// weighting's `σ·√(p(p+1)/2)/√n` (0.711 of it), the rank-one report's
/// `√(p(p+1) + 2κ(p+1) + 2κ² + e₄)/(κ√n)` at s = 1: 10.9, 7.75 and 3.21 as measured
/// outside the project. The report sizes are 4·d and 2p bytes.
#[test]
fn plan_predicts_each_mechanism_and_inverts() {
    let out = run(&["plan", "--dim", "100", "--epsilon", "1", "--users", "3000"]).json();
    let rows = out["mechanisms"].as_array().expect("rows");
    let get = |name: &str, field: &str| -> f64 {
        rows.iter()
            .find(|r| r["mechanism"] == name)
            .and_then(|r| r[field].as_f64())
            .unwrap_or_else(|| panic!("{name}.{field} in {out}"))
    };
    let triu = get(
        "LOCAL_MECHANISM_GAUSSIAN_TRIU",
        "raw_average_frobenius_error",
    );
    let svec = get("LOCAL_MECHANISM_GAUSSIAN", "raw_average_frobenius_error");
    let rank_one = get("LOCAL_MECHANISM_RANK_ONE", "raw_average_frobenius_error");
    assert!((triu - 10.9).abs() < 0.05, "{triu}");
    assert!(
        (svec / triu - (101.0f64 / 200.0).sqrt()).abs() < 1e-6,
        "{svec}"
    );
    assert!((rank_one - 3.21).abs() < 0.01, "{rank_one}");
    assert_eq!(
        get("LOCAL_MECHANISM_GAUSSIAN", "bytes_per_report"),
        4.0 * 5050.0
    );
    assert_eq!(get("LOCAL_MECHANISM_RANK_ONE", "bytes_per_report"), 200.0);
    // The inverse at the rank-one error: 3 000 users (up to the ceiling).
    let inv = run(&[
        "plan",
        "--dim",
        "100",
        "--epsilon",
        "1",
        "--mechanism",
        "rank-one",
        "--target-error",
        &rank_one.to_string(),
    ])
    .json();
    let users = inv["mechanisms"][0]["users_for_target_error"]
        .as_u64()
        .unwrap();
    assert!((3000..=3001).contains(&users), "{inv}");
    // Bad flags: one line each, exit 1.
    run(&["plan", "--dim", "10", "--epsilon", "1"]).fails_with("--users");
    run(&[
        "plan",
        "--dim",
        "10",
        "--epsilon",
        "1",
        "--users",
        "5",
        "--mean-square-norm",
        "2",
    ])
    .fails_with("--mean-square-norm 2 must lie in [0, 1]");
    run(&[
        "plan",
        "--dim",
        "10",
        "--epsilon",
        "20",
        "--users",
        "5",
        "--mechanism",
        "rank-one",
    ])
    .fails_with("at most 16 for the rank-one mechanism");
}

/// `--shuffle-batch`: the central ε of a rank-one collection whose reports arrive
/// shuffled in batches of at least n (ε0 = 8, n = 10⁶ and the default δ for that batch,
/// 1/(10n) = 10⁻⁷: 0.34409 by the variation-ratio bound, pinned against the independent
/// implementation in testing/reference/ by ldpcov-accounting's tests); the
/// Gaussian mechanisms, whose δ0 > 0 the bound does not cover, are refused in one line.
#[test]
fn plan_shuffle_batch_is_for_the_rank_one_mechanism() {
    let out = run(&[
        "plan",
        "--dim",
        "10",
        "--epsilon",
        "8",
        "--mechanism",
        "rank-one",
        "--users",
        "1000000",
        "--shuffle-batch",
        "1000000",
    ])
    .json();
    let shuffled = &out["mechanisms"][0]["shuffled"];
    assert_eq!(shuffled["min_batch"], 1_000_000);
    assert_eq!(shuffled["local_epsilon"], 8.0);
    assert_eq!(shuffled["central_delta"], 1e-7);
    let eps = shuffled["central_epsilon"]
        .as_f64()
        .expect("central_epsilon");
    assert!((0.344_09..=0.344_10).contains(&eps), "{out}");
    for mechanism in [None, Some("gaussian"), Some("gaussian-triu")] {
        let mut args = vec![
            "plan",
            "--dim",
            "10",
            "--epsilon",
            "1",
            "--users",
            "1000",
            "--shuffle-batch",
            "1000",
        ];
        if let Some(m) = mechanism {
            args.extend(["--mechanism", m]);
        }
        run(&args).fails_with("--shuffle-batch needs --mechanism rank-one: the shuffling bound is for pure epsilon0 reports");
    }
    run(&[
        "plan",
        "--dim",
        "10",
        "--epsilon",
        "8",
        "--mechanism",
        "rank-one",
        "--users",
        "1000",
        "--shuffle-batch",
        "1",
    ])
    .fails_with("--shuffle-batch: batch size 1 must be at least 2");
}

/// `--norms-file`: for --clip-radius and the sample's quantiles, the noise (∝ R², the
/// Gaussian report's), the clipping-bias bound `E[(‖x‖² − R²)₊]` and the radius whose sum
/// is smallest; a file that is not norms is a one-line error.
#[test]
fn plan_norms_file_chooses_the_radius() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let norms = dir.path().join("norms.txt");
    // 8 users at norm 1, one at 3, one at 30.
    std::fs::write(&norms, "1\n1\n1\n1\n1\n1\n1\n1\n3\n\n30\n").expect("write");
    let norms_arg = norms.to_str().expect("a UTF-8 path");
    let out = run(&[
        "plan",
        "--dim",
        "10",
        "--epsilon",
        "1",
        "--users",
        "100000",
        "--mechanism",
        "gaussian",
        "--norms-file",
        norms_arg,
    ])
    .json();
    let plan = &out["mechanisms"][0]["radius_plan"];
    let candidates = plan["candidates"].as_array().expect("candidates");
    let field = |c: &serde_json::Value, f: &str| c[f].as_f64().expect("a number");
    let radii: Vec<f64> = candidates.iter().map(|c| field(c, "radius")).collect();
    assert_eq!(radii, vec![1.0, 3.0, 30.0], "{out}");
    // (8·0 + 8 + 899)/10 at R = 1, 891/10 at 3, none at 30.
    let bias: Vec<f64> = candidates
        .iter()
        .map(|c| field(c, "clipping_bias_bound"))
        .collect();
    assert!((bias[0] - 90.7).abs() < 1e-9 && (bias[1] - 89.1).abs() < 1e-9 && bias[2] == 0.0);
    let noise: Vec<f64> = candidates.iter().map(|c| field(c, "noise")).collect();
    assert!((noise[1] / noise[0] - 9.0).abs() < 1e-9, "{out}");
    let best = candidates
        .iter()
        .min_by(|a, b| field(a, "total").total_cmp(&field(b, "total")))
        .expect("a candidate");
    assert_eq!(plan["best_radius"], best["radius"], "{out}");

    for (contents, reason) in [
        ("1\n-2\n", "line 2: \"-2\" is not a norm"),
        ("\n", "holds no norms"),
    ] {
        std::fs::write(&norms, contents).expect("write");
        run(&[
            "plan",
            "--dim",
            "10",
            "--epsilon",
            "1",
            "--users",
            "100",
            "--norms-file",
            norms_arg,
        ])
        .fails_with(reason);
    }
}
