//! Estimates written as JSON, CSV and NPY and read back.

use super::*;
use ldpcov_proto::v1::Moments;
use nalgebra::DMatrix;

fn estimate() -> Estimate {
    Estimate {
        collection_id: "c".into(),
        dim: 2,
        upper_triangle: vec![1.0, 0.5, 2.0],
        reports: 10,
        ..Default::default()
    }
}

#[test]
fn csv_is_the_full_symmetric_matrix() {
    let mut out = Vec::new();
    write_estimate(&estimate(), None, Format::Csv, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "x1,x2\n1e0,5e-1\n5e-1,2e0\n"
    );
}

#[test]
fn json_has_matrix_and_metadata() {
    let mut out = Vec::new();
    write_estimate(&estimate(), None, Format::Json, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["reports"], 10);
    assert_eq!(v["matrix"][1][0], 0.5);
}

#[test]
fn npy_header_and_data() {
    let mut out = Vec::new();
    write_estimate(&estimate(), None, Format::Npy, &mut out).unwrap();
    assert_eq!(&out[..6], b"\x93NUMPY");
    let header = String::from_utf8_lossy(&out[10..out.len() - 32]);
    assert!(
        header.contains("'<f8'") && header.contains("'shape': (2, 2"),
        "{header}"
    );
    let data: Vec<f64> = out[out.len() - 32..]
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data, vec![1.0, 0.5, 0.5, 2.0]);
}

#[test]
fn precision_target_writes_theta_and_the_graph() {
    let mut e = estimate();
    e.target = EstimateTarget::PrecisionGlasso as i32;
    e.precision_upper_triangle = vec![2.0, -0.5, 1.0];
    e.precision_lambda = 0.1;
    e.graph = vec![ldpcov_proto::v1::Edge { i: 0, j: 1 }];
    let mut csv = Vec::new();
    write_estimate(&e, None, Format::Csv, &mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "x1,x2\n2e0,-5e-1\n-5e-1,1e0\n"
    );
    let mut json = Vec::new();
    write_estimate(&e, None, Format::Json, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["target"], "precision-glasso");
    assert_eq!(v["matrix"][0][1], -0.5);
    assert_eq!(v["precision"]["covariance"][0][1], 0.5);
    assert_eq!(v["precision"]["graph"][0][1], 1);
    // Missing Θ for a precision target is an error, not a silent covariance.
    e.precision_upper_triangle.clear();
    assert!(write_estimate(&e, None, Format::Npy, &mut Vec::new()).is_err());
}

#[test]
fn the_plotted_matrix_is_the_released_one() {
    let e = estimate();
    assert_eq!(Part::released(&e), Part::Covariance);
    let m = part_matrix(&e, Part::Covariance).unwrap();
    assert_eq!(m, DMatrix::from_row_slice(2, 2, &[1.0, 0.5, 0.5, 2.0]));
    assert!(part_matrix(&e, Part::Precision).is_err());
    let mut e = estimate();
    e.target = EstimateTarget::PrecisionRidge as i32;
    e.precision_upper_triangle = vec![2.0, -0.5, 1.0];
    assert_eq!(Part::released(&e), Part::Precision);
    let m = part_matrix(&e, Part::released(&e)).unwrap();
    assert_eq!(m[(1, 0)], -0.5);
    assert!(write_estimate(&e, None, Format::Png, &mut Vec::new()).is_err());
}

/// A 3-variable estimate carrying every part: names (one with a comma, one with a
/// quote), the correlation with an undefined entry (NaN), error bars, components
/// (the second one's raw eigenvalue below the noise edge), a verdict.
fn full_estimate() -> Estimate {
    use ldpcov_proto::v1::{ErrorBars, PrincipalComponent, PrincipalComponents, SignalVerdict};
    let nan = f64::NAN;
    Estimate {
        collection_id: "c".into(),
        dim: 3,
        upper_triangle: vec![4.0, 1.0, 0.0, 1.0, 0.0, 1e-9],
        correlation: vec![1.0, 0.5, nan, 1.0, nan, 1.0],
        reports: 10,
        variable_names: vec!["height, cm".into(), "say \"hi\"".into(), "z".into()],
        mean: vec![0.0, 1.0, 2.0],
        moments: Moments::MeanAndCovariance as i32,
        verdict: Some(SignalVerdict {
            sufficient: false,
            summary: "insufficient: the noise is 37× the signal".into(),
            ..Default::default()
        }),
        error_bars: Some(ErrorBars {
            raw_upper_triangle: vec![5.0, 0.0, 0.0, 1.0, 0.0, 0.5],
            standard_errors: vec![0.1, 0.2, 0.3, 0.1, 0.2, 0.1],
            raw_correlation: vec![1.0, 0.0, nan, 1.0, nan, 1.0],
            correlation_standard_errors: vec![0.0, 0.1, nan, 0.0, nan, 0.0],
            ..Default::default()
        }),
        principal_components: Some(PrincipalComponents {
            noise_edge: 2.0,
            total_variance: 5.0,
            components: vec![
                PrincipalComponent {
                    eigenvalue: 4.3,
                    explained_variance_ratio: 0.86,
                    loadings: vec![0.96, 0.29, 0.0],
                    above_noise_edge: true,
                    raw_eigenvalue: 5.0,
                },
                PrincipalComponent {
                    eigenvalue: 0.7,
                    explained_variance_ratio: 0.14,
                    loadings: vec![-0.29, 0.96, 0.0],
                    above_noise_edge: false,
                    raw_eigenvalue: 1.0,
                },
            ],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn every_csv_has_a_header_of_quoted_names() {
    let e = full_estimate();
    let header = "\"height, cm\",\"say \"\"hi\"\"\",z\n";
    let mut out = Vec::new();
    write_estimate(&e, None, Format::Csv, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with(header), "{text}");
    assert_eq!(text.lines().count(), 4, "{text}");
    for part in [
        Part::Correlation,
        Part::StandardErrors,
        Part::Raw,
        Part::Mean,
    ] {
        let mut out = Vec::new();
        write_part(&e, None, part, Format::Csv, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(header), "{part:?}: {text}");
    }
    let mut out = Vec::new();
    write_part(&e, None, Part::Components, Format::Csv, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with(
            "component,eigenvalue,explained_variance_ratio,raw_eigenvalue,\
             above_noise_edge,\"height, cm\",\"say \"\"hi\"\"\",z\n"
        ),
        "{text}"
    );
}

#[test]
fn unnamed_variables_are_x1_to_xp_everywhere() {
    let mut e = full_estimate();
    e.variable_names.clear();
    assert_eq!(variable_names(&e), ["x1", "x2", "x3"]);
    let mut json = Vec::new();
    write_estimate(&e, None, Format::Json, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["variable_names"], serde_json::json!(["x1", "x2", "x3"]));
    let mut csv = Vec::new();
    write_part(&e, None, Part::Mean, Format::Csv, &mut csv).unwrap();
    assert_eq!(String::from_utf8(csv).unwrap(), "x1,x2,x3\n0e0,1e0,2e0\n");
}

#[test]
fn undefined_correlations_are_null_in_json_and_empty_in_csv() {
    let e = full_estimate();
    let mut json = Vec::new();
    write_estimate(&e, None, Format::Json, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["correlation"][0], serde_json::json!([1.0, 0.5, null]));
    assert_eq!(v["correlation"][2][1], serde_json::Value::Null);
    let bars = &v["error_bars"];
    assert_eq!(bars["raw_correlation"][0][2], serde_json::Value::Null);
    assert_eq!(
        bars["correlation_standard_errors"][2][0],
        serde_json::Value::Null
    );
    let mut csv = Vec::new();
    write_part(&e, None, Part::Correlation, Format::Csv, &mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows, ["1e0,5e-1,", "5e-1,1e0,", ",,1e0"], "{text}");
}

#[test]
fn the_noise_edge_flag_shows_the_raw_eigenvalue_it_tests() {
    let e = full_estimate();
    // The server's raw eigenvalues 5 and 1, the edge 2.
    let raw = raw_eigenvalues(&e).unwrap();
    assert_eq!(raw.len(), 2);
    assert!(
        (raw[0] - 5.0).abs() < 1e-12 && (raw[1] - 1.0).abs() < 1e-12,
        "{raw:?}"
    );
    let mut json = Vec::new();
    write_estimate(&e, Some(&raw), Format::Json, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let pcs = &v["principal_components"]["components"];
    assert_eq!(pcs[0]["above_noise_edge"], true);
    assert!((pcs[0]["raw_eigenvalue"].as_f64().unwrap() - 5.0).abs() < 1e-12);
    assert_eq!(pcs[1]["above_noise_edge"], false);
    assert!((pcs[1]["raw_eigenvalue"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    let mut csv = Vec::new();
    write_part(&e, Some(&raw), Part::Components, Format::Csv, &mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let second: Vec<&str> = text.lines().nth(2).unwrap().split(',').collect();
    assert_eq!(
        &second[..5],
        ["PC2", "7e-1", "1.4e-1", "1e0", "false"],
        "{text}"
    );
    // Without components there is nothing to show.
    let mut e = e;
    e.principal_components = None;
    assert!(raw_eigenvalues(&e).is_none());
}

/// The JSON's keys are exactly the ones docs/USAGE.md lists (between its
/// `json-keys` markers), for an estimate carrying every optional part.
#[test]
fn json_keys_are_the_documented_ones() {
    let usage = include_str!("../../../docs/USAGE.md");
    let (_, rest) = usage.split_once("<!-- json-keys -->").unwrap();
    let (table, _) = rest.split_once("<!-- /json-keys -->").unwrap();
    let mut documented: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(key, _)| key))
        .collect();
    documented.sort_unstable();
    let mut e = full_estimate();
    e.target = EstimateTarget::PrecisionGlasso as i32;
    e.precision_upper_triangle = vec![1.0; 6];
    e.release = Some(Default::default());
    e.shuffle = Some(Default::default());
    e.shuffle_delivered = Some(Default::default());
    let mut json = Vec::new();
    write_estimate(&e, None, Format::Json, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, documented);
}

#[test]
fn inconsistent_estimate_is_an_error() {
    let mut e = estimate();
    e.upper_triangle.pop();
    assert!(write_estimate(&e, None, Format::Csv, &mut Vec::new()).is_err());
}
