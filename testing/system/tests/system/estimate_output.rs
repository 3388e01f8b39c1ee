//! End-to-end tests of `estimate`: every output format (JSON, CSV, NPY) and the PNG
//! heatmaps, from a real daemon fed reports by `ldpcov_client::AggregatorClient`.

use std::path::Path;

use support::admin::*;
use support::daemon::*;
use support::outputs::*;

use crate::support;

#[test]
fn create_status_submit_and_estimate_in_every_format() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let id = "cli-e2e";

    // create: public parameters as JSON.
    let params = create(url, id, &[]).json();
    assert_eq!(params["collection_id"], id);
    assert_eq!(params["dim"], 4);
    assert_eq!(params["epsilon"], 1.0);
    assert_eq!(params["delta"], 1e-6);
    assert_eq!(params["clip_radius"], 2.0);
    assert_eq!(params["min_reports"], MIN_REPORTS);
    assert_eq!(params["encoding"], "ENCODING_I32_LE");
    // The default estimates mean and covariance: p + d = 4 + 10 entries per report.
    assert_eq!(params["moments"], "MOMENTS_MEAN_AND_COVARIANCE");
    assert_eq!(params["entries"], 14);
    assert_eq!(params["mean_entries"], 4);
    assert_eq!(params["mean_weight"], 0.5);
    let sigma = params["sigma"].as_f64().expect("sigma is a number");
    assert!(sigma.is_finite() && sigma > 0.0, "{params}");
    let grid_bits = params["grid_bits"].as_u64().expect("grid_bits is a number");
    assert!((1..=24).contains(&grid_bits), "{params}");
    assert!(params["sensitivity"].as_f64().expect("sensitivity") > 1.4);
    assert!(params["rho"].as_f64().expect("rho") > 0.0);
    assert!(params["max_abs_grid_value"].as_i64().expect("bound") > 0);
    assert_eq!(params["wire_step"], 1);
    // Variables are unordered unless declared; `--ordered-variables` declares them,
    // and `status` shows it.
    assert_eq!(params["ordered_variables"], false, "{params}");
    let ordered = create(url, "cli-ordered", &["--ordered-variables"]).json();
    assert_eq!(ordered["ordered_variables"], true, "{ordered}");
    let st = status(url, "cli-ordered").json();
    assert_eq!(st["params"]["ordered_variables"], true, "{st}");

    // Same id again, other parameters: refused, one line.
    let line = create_with(url, id, "--epsilon", "2").fails_with("AlreadyExists");
    assert!(line.starts_with("error:"), "{line}");
    // Same id, same parameters: an idempotent no-op returning the same parameters.
    assert_eq!(create(url, id, &[]).json(), params);

    // status before any report.
    let st = status(url, id).json();
    assert_eq!(st["reports"], 0, "{st}");
    assert_eq!(st["releasable"], false, "{st}");
    assert_eq!(st["params"]["sigma"], params["sigma"], "{st}");
    assert_eq!(st["params"]["min_reports"], MIN_REPORTS, "{st}");

    // estimate below the minimum.
    estimate(url, id, &[]).fails_with("FailedPrecondition");

    // Unknown collection.
    status(url, "no-such-collection").fails_with("NotFound");

    submit_reports(url, id, REPORTS);

    let st = status(url, id).json();
    assert_eq!(st["reports"], REPORTS, "{st}");
    assert_eq!(st["releasable"], true, "{st}");

    // JSON on stdout (default rule: cross-validation).
    let default_run = estimate(url, id, &["--format", "json"]);
    let (doc, json_m) = check_estimate_json(&default_run);
    assert_eq!(doc["collection_id"], id);
    assert_eq!(doc["sigma"], params["sigma"]);
    assert_eq!(doc["psd_projected"], true, "{doc}");
    assert!(
        doc["threshold"].as_f64().expect("threshold") >= 0.0,
        "{doc}"
    );
    let rule = doc["threshold_rule"].as_str().expect("rule");
    assert!(rule.starts_with("cv("), "{doc}");
    assert!(rule.contains("threshold=simplest within 1 SE"), "{doc}");
    // --smallest-mean-threshold reaches the server's cross-validation.
    let (smallest, _) = check_estimate_json(&estimate(url, id, &["--smallest-mean-threshold"]));
    let rule = smallest["threshold_rule"].as_str().expect("rule");
    assert!(
        rule.starts_with("cv(") && rule.contains("threshold=smallest mean"),
        "{smallest}"
    );
    // --unordered: cross-validation without banding and Toeplitz candidates.
    let (unordered, _) = check_estimate_json(&estimate(url, id, &["--unordered"]));
    let rule = unordered["threshold_rule"].as_str().expect("rule");
    assert!(rule.starts_with("cv(") && rule.contains('→'), "{unordered}");
    assert!(
        !rule.contains("toeplitz") && !rule.contains("banded"),
        "{unordered}"
    );
    assert!(doc["entry_noise_sd"].as_f64().expect("sd") > 0.0, "{doc}");
    assert!(!doc["threshold_rule"].as_str().expect("rule").is_empty());

    let dir = tempfile::tempdir().expect("tempdir");

    // CSV and NPY to a file (a header + 128 data bytes): the same matrix, exactly.
    let written = |format: &str| {
        let path = dir.path().join(format!("estimate.{format}"));
        let path_str = path.to_str().expect("utf-8 path");
        let r = estimate(url, id, &["--format", format, "--out", path_str]);
        assert!(r.status.success(), "{}", r.describe());
        assert!(r.stdout.is_empty(), "{}", r.describe());
        assert!(
            r.stderr.contains(&format!("wrote {format}")),
            "{}",
            r.describe()
        );
        path
    };
    let csv_path = written("csv");
    let csv_path_str = csv_path.to_str().expect("utf-8 path");
    let csv_m = read_csv(&csv_path);
    assert_eq!(csv_m, json_m, "csv and json matrices differ");
    let npy_m = read_npy(&written("npy"));
    assert_eq!(npy_m, json_m, "npy and json matrices differ");

    // NPY needs a file.
    let line = estimate(url, id, &["--format", "npy"]).fails_with("--out");
    assert!(line.contains("npy"), "{line}");

    // Explicit universal threshold with c = 4: λ = 4·σ_n·√(ln p) with γ = 0.
    let r = estimate(url, id, &["--threshold", "universal", "--c", "4"]);
    let (doc4, m4) = check_estimate_json(&r);
    let sd = doc4["entry_noise_sd"].as_f64().expect("entry_noise_sd");
    let lambda = doc4["threshold"].as_f64().expect("threshold");
    let want = 4.0 * sd * 4f64.ln().sqrt();
    assert!((lambda - want).abs() <= 1e-12 * want, "{doc4}");
    assert_eq!(m4.len(), json_m.len());

    // No threshold, no PSD projection: the raw average.
    let r = estimate(url, id, &["--threshold", "none", "--no-psd"]);
    let (raw, raw_m) = check_estimate_json(&r);
    assert_eq!(raw["threshold"], 0.0, "{raw}");
    assert_eq!(raw["psd_projected"], false, "{raw}");
    assert_eq!(raw["clamped_eigenvalues"], 0, "{raw}");
    assert_eq!(raw["surviving_entries"], 10, "{raw}");
    assert_symmetric(&raw_m, "raw matrix");

    // A bad threshold parameter is the server's InvalidArgument, one line.
    estimate(url, id, &["--threshold", "universal", "--c=-1"]).fails_with("InvalidArgument");

    // Bulk shrinkage with the grids given on the command line: the rule reports them
    // and its choice; a τ above 2 is refused by the server.
    let bulk = [
        "--threshold",
        "bulk-shrink",
        "--alphas",
        "0,0.5",
        "--taus",
        "1,2",
    ];
    let (doc, _) = check_estimate_json(&estimate(url, id, &bulk));
    let rule = doc["threshold_rule"].as_str().expect("rule");
    assert!(
        rule.starts_with("bulk-shrink(alphas=[0.0, 0.5], taus=[1.0, 2.0])")
            && rule.contains(", tau "),
        "{doc}"
    );
    estimate(url, id, &["--threshold", "bulk-shrink", "--taus", "2.5"])
        .fails_with("InvalidArgument");

    // Environment variables instead of flags.
    let r = run_with_env(
        &["status"],
        &[("LDPCOV_SERVER", url), ("LDPCOV_COLLECTION", id)],
    );
    let st = r.json();
    assert_eq!(st["reports"], REPORTS, "{st}");
    assert_eq!(st["params"]["collection_id"], id, "{st}");
    let r = run_with_env(
        &["estimate"],
        &[
            ("LDPCOV_SERVER", url),
            ("LDPCOV_COLLECTION", id),
            ("LDPCOV_FORMAT", "csv"),
            ("LDPCOV_OUT", csv_path_str),
            ("LDPCOV_THRESHOLD", "none"),
            ("LDPCOV_NO_PSD", "true"),
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert_eq!(read_csv(&csv_path), raw_m, "env-configured csv differs");

    assert!(
        !daemon.log().contains("panicked"),
        "daemon stderr:\n{}",
        daemon.log()
    );
}

#[test]
fn estimate_draws_a_png_heatmap_and_refuses_bad_names() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let id = "cli-png";
    create(url, id, &[]).json();
    submit_reports(url, id, REPORTS);
    let dir = tempfile::tempdir().expect("tempdir");
    let arg = |p: &Path| p.to_str().expect("utf-8 path").to_string();

    // The released matrix (the estimate is a deterministic function of the sums).
    let released = estimate(url, id, &[]);
    let (doc, m) = check_estimate_json(&released);
    // The verdict's warning: printed (last, after the output) exactly when the
    // estimate says the reports are insufficient.
    let insufficient = doc["verdict"]["sufficient"] == false;
    let last = released.stderr.lines().last().unwrap_or_default();
    assert_eq!(
        last.starts_with("warning: insufficient"),
        insufficient,
        "{}",
        released.describe()
    );
    let matrix = nalgebra::DMatrix::from_row_slice(P, P, &m);

    // Names from a data file's header (semicolons, a quoted cell: the data dialect).
    let data = dir.path().join("data.csv");
    std::fs::write(&data, "\nheight; weight;\"age\";x\n1;2;3;4\n").expect("write data");
    let names: Vec<String> = ["height", "weight", "age", "x"].map(String::from).to_vec();
    // Without --what the covariance is drawn beside its correlation: a wider picture.
    let both_path = dir.path().join("both.png");
    let r = estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &arg(&both_path),
            "--names-from",
            &arg(&data),
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    let png_path = dir.path().join("cov.png");
    let r = estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &arg(&png_path),
            "--names-from",
            &arg(&data),
            "--what",
            "covariance",
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert!(r.stdout.is_empty(), "{}", r.describe());
    assert!(r.stderr.contains("wrote png"), "{}", r.describe());

    // The expected geometry comes from the heatmap module itself, for the same matrix,
    // title and names.
    let released = ldpcov_proto::v1::Estimate {
        collection_id: id.into(),
        reports: REPORTS,
        threshold_rule: doc["threshold_rule"].as_str().expect("rule").into(),
        ..Default::default()
    };
    let title =
        ldpcov_aggregator_cli::plot_title(&released, ldpcov_aggregator_cli::Part::Covariance);
    assert!(
        title.contains(id) && title.contains(&format!("n = {REPORTS}")),
        "{title}"
    );
    // The CLI's picture carries the estimate's verdict as a banner.
    let summary = doc["verdict"]["summary"].as_str().expect("verdict summary");
    let banner = ldpcov_aggregator_cli::Banner {
        text: summary,
        warning: doc["verdict"]["sufficient"] != true,
    };
    let reference = dir.path().join("reference.png");
    let panel = ldpcov_aggregator_cli::HeatmapPanel {
        matrix: &matrix,
        title: &title,
        scale: ldpcov_aggregator_cli::Scale::Diverging,
    };
    let layout =
        ldpcov_aggregator_cli::write_heatmaps(&reference, &[panel], Some(&names), Some(banner))
            .expect("reference heatmap")[0];
    let img = decode_png(&png_path);
    assert_eq!((img.0, img.1), (layout.width, layout.height), "{layout:?}");
    let both = decode_png(&both_path);
    assert!(both.0 > img.0 + img.0 / 2, "{} against {}", both.0, img.0);
    assert_eq!(
        std::fs::read(&png_path).expect("png"),
        std::fs::read(&reference).expect("reference png"),
        "the CLI's picture differs from the heatmap of the JSON matrix"
    );
    // Every cell has the diverging colour of its entry on the scale ±max|a_ij|.
    let limit = m.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for i in 0..P {
        for j in 0..P {
            let (x, y) = layout.cell_center(i, j);
            let k = (y as usize * img.0 as usize + x as usize) * img.3;
            let want = ldpcov_aggregator_cli::diverging_color(matrix[(i, j)], limit);
            assert_eq!(
                (img.2[k], img.2[k + 1], img.2[k + 2]),
                (want.0, want.1, want.2),
                "cell ({i},{j}) = {}",
                matrix[(i, j)]
            );
        }
    }

    // --names: the same picture as the header's names gave.
    let named = dir.path().join("named.png");
    let r = estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &arg(&named),
            "--names",
            "height,weight,age,x",
            "--what",
            "covariance",
        ],
    );
    assert!(r.status.success(), "{}", r.describe());
    assert_eq!(
        std::fs::read(&named).expect("named png"),
        std::fs::read(&png_path).expect("png"),
        "--names and --names-from with the same names draw the same picture"
    );

    // Refusals: one line, exit 1, no file written.
    let refused = dir.path().join("refused.png");
    let out = arg(&refused);
    estimate(
        url,
        id,
        &["--format", "png", "--out", &out, "--names", "a,b,c"],
    )
    .fails_with("3 axis names for 4 variables");
    estimate(
        url,
        id,
        &["--format", "png", "--out", &out, "--names", "a,b,c,d,e"],
    )
    .fails_with("5 axis names for 4 variables");
    let headerless = dir.path().join("headerless.csv");
    std::fs::write(&headerless, "1,2,3,4\n").expect("write");
    estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &out,
            "--names-from",
            &arg(&headerless),
        ],
    )
    .fails_with("line 1 is data, not a header");
    let missing = dir.path().join("missing.csv");
    estimate(
        url,
        id,
        &[
            "--format",
            "png",
            "--out",
            &out,
            "--names-from",
            &arg(&missing),
        ],
    )
    .fails_with("cannot read");
    let line = estimate(url, id, &["--format", "png"]).fails_with("--out");
    assert!(line.contains("png"), "{line}");
    estimate(url, id, &["--format", "csv", "--names", "a,b,c,d"])
        .fails_with("apply only to --format png");
    assert!(!refused.exists(), "a refused command wrote {out}");
}

#[test]
fn estimate_png_draws_what_a_mean_and_covariance_collection_releases() {
    let daemon = Daemon::start();
    let url = daemon.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    // The default collection releases the mean, the second moment and the correlation.
    create(url, "joint-png", &[]).json();
    submit_reports(url, "joint-png", REPORTS);
    let (doc, _) = check_estimate_json(&estimate(url, "joint-png", &[]));
    let released = ldpcov_proto::v1::Estimate {
        collection_id: "joint-png".into(),
        reports: REPORTS,
        threshold_rule: doc["threshold_rule"].as_str().expect("rule").into(),
        ..Default::default()
    };
    for (what, plotted) in [
        ("correlation", ldpcov_aggregator_cli::Part::Correlation),
        ("second-moment", ldpcov_aggregator_cli::Part::SecondMoment),
        ("mean", ldpcov_aggregator_cli::Part::Mean),
    ] {
        let path = dir.path().join(format!("{what}.png"));
        let out = path.to_str().expect("utf-8 path");
        let r = estimate(
            url,
            "joint-png",
            &["--format", "png", "--out", out, "--what", what],
        );
        assert!(r.status.success(), "{what}: {}", r.describe());
        let (width, height, _, _) = decode_png(&path);
        assert!(width > 0 && height > 0);
        // A mean is one row of p cells: wider than tall; a matrix is p rows.
        if what == "mean" {
            assert!(width > height, "{what}: {width}×{height}");
        }
        let title = ldpcov_aggregator_cli::plot_title(&released, plotted);
        assert!(title.starts_with(&plotted.name().to_string()), "{title}");
    }
    // A second-moment collection has neither a mean nor a separate second moment
    // (its correlation, of the released matrix, it has): one line, no file.
    create(url, "m2-png", &["--moments", "second-moment"]).json();
    submit_reports(url, "m2-png", REPORTS);
    for what in ["second-moment", "mean"] {
        let path = dir.path().join(format!("m2-{what}.png"));
        estimate(
            url,
            "m2-png",
            &[
                "--format",
                "png",
                "--out",
                path.to_str().expect("utf-8"),
                "--what",
                what,
            ],
        )
        .fails_with("only mean-and-covariance collections release it");
        assert!(!path.exists(), "{what}: a file was written");
    }
    estimate(url, "joint-png", &["--what", "mean"])
        .fails_with("--what applies to csv, npy and png");
}
