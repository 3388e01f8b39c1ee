//! The two-aggregator vectors (`testing/vectors/two-aggregator-v1.json`, format
//! `ldpcov-two-aggregator-vectors` version 1): what a device of a two-aggregator
//! collection computes before the randomness of Prio3's sharding — the clipped vector
//! on the central grid ([`two_aggregator_measurement`]), the circuit's encoded
//! measurement (`prio`'s Field128 encoding: 16 bytes little-endian per element), the
//! context string and the helper share's associated data — and what the aggregators'
//! combined output must be for that one report (`triu(x·xᵀ)`, then `x` for a
//! mean-and-covariance collection).
//!
//! The shares themselves cannot be pinned: `prio` draws the sharding randomness inside
//! `shard` and keeps its seeded variant private. Each case is checked instead by a real
//! round: the Rust client's report for the case's input, verified by both roles,
//! aggregates to the pinned output (`tests/rust_vectors.rs`).

use ldpcov_client::proto::v1::{CollectionSpec, Moments, PrivacyModel};
use ldpcov_client::{
    Collection, Perturber, two_aggregator_measurement, two_aggregator_report_type,
};
use prio::codec::Encode;
use prost::Message;
use serde_json::{Value, json};

use crate::{derived, fs, spec_json};

/// The version of the two-aggregator vectors' format and case list.
pub const TWO_AGGREGATOR_VERSION: u32 = 1;

/// Where the two-aggregator vectors live, relative to the workspace root.
pub const TWO_AGGREGATOR_FILE: &str = "testing/vectors/two-aggregator-v1.json";

/// The key id the cases' helper share associated data is written for.
pub const HELPER_KEY_ID: u32 = 7;

/// One case: a collection and its inputs.
pub struct TwoAggregatorCase {
    /// The case's name, also the collection id.
    pub name: &'static str,
    /// The collection's spec (a two-aggregator collection).
    pub spec: CollectionSpec,
    /// The devices' inputs, in data units.
    pub inputs: Vec<Vec<f64>>,
}

/// The cases: a mean-and-covariance collection with a centre, whose second input is
/// clipped, and a second-moment one.
pub fn two_aggregator_cases() -> Vec<TwoAggregatorCase> {
    let spec = |id: &str, dim: u32, moments: Moments, centre: Vec<f64>| CollectionSpec {
        collection_id: id.to_string(),
        dim,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 2.0,
        min_reports: 1,
        moments: moments as i32,
        centre,
        privacy_model: PrivacyModel::TwoAggregator as i32,
        ..Default::default()
    };
    vec![
        TwoAggregatorCase {
            name: "two-aggregator-mean-cov-p3",
            spec: spec(
                "two-aggregator-mean-cov-p3",
                3,
                Moments::MeanAndCovariance,
                vec![1.0, 0.0, -1.0],
            ),
            inputs: vec![vec![1.5, -0.5, 0.25], vec![4.0, 3.0, -2.0]],
        },
        TwoAggregatorCase {
            name: "two-aggregator-second-moment-p4",
            spec: spec(
                "two-aggregator-second-moment-p4",
                4,
                Moments::SecondMoment,
                Vec::new(),
            ),
            inputs: vec![vec![0.3, -1.1, 0.0, 0.7]],
        },
    ]
}

/// `triu(x·xᵀ)` row by row, then `x` if `with_x`: one report's aggregated output.
pub fn expected_output(x: &[i64], with_x: bool) -> Vec<i128> {
    let mut out: Vec<i128> = (0..x.len())
        .flat_map(|i| (i..x.len()).map(move |j| (i, j)))
        .map(|(i, j)| i128::from(x[i]) * i128::from(x[j]))
        .collect();
    if with_x {
        out.extend(x.iter().map(|&v| i128::from(v)));
    }
    out
}

fn strings<T: ToString>(v: &[T]) -> Value {
    Value::Array(v.iter().map(|x| json!(x.to_string())).collect())
}

fn case_json(c: &TwoAggregatorCase) -> anyhow::Result<Value> {
    let collection = Collection::create(&c.spec)?;
    let circuit = collection
        .two_aggregator()
        .ok_or_else(|| anyhow::anyhow!("case {} is not a two-aggregator collection", c.name))?;
    let report_type = two_aggregator_report_type(&collection)?;
    let perturber = Perturber::new(collection.clone());
    let mut reports = Vec::new();
    for (n, x) in c.inputs.iter().enumerate() {
        let u = perturber.clip(x)?;
        let grid = two_aggregator_measurement(&collection, x)?;
        let measurement = report_type.encode(&grid)?;
        let mut encoded = Vec::new();
        for element in &measurement {
            element.encode(&mut encoded)?;
        }
        let mut report_id = [0xb7u8; 16];
        report_id[0] = n as u8;
        reports.push(json!({
            "x": fs(x),
            "clipped_u": fs(&u),
            "measurement": strings(&grid),
            "encoded_measurement": hex::encode(&encoded),
            "report_id": hex::encode(report_id),
            "helper_aad": hex::encode(ldpcov_seal::helper_aad(collection.id(), HELPER_KEY_ID, &report_id)?),
            "output": strings(&expected_output(&grid, circuit.output_x)),
        }));
    }
    let spec = collection.spec();
    Ok(json!({
        "name": c.name,
        "spec": spec_json(&spec, "central_weighting", spec.central_weighting),
        "params_hex": hex::encode(collection.params().encode_to_vec()),
        "derived": derived(&collection),
        "circuit": {
            "coordinate_grid_bits": circuit.coordinate_grid_bits,
            "range_bits": circuit.range_bits,
            "norm_bound": circuit.norm_bound.to_string(),
            "output_x": circuit.output_x,
            "algorithm_id": format!("{:#010x}", ldpcov_prio::ALGORITHM_ID),
            "context": hex::encode(ldpcov_prio::context(collection.id())),
        },
        "reports": reports,
    }))
}

/// The two-aggregator vectors as a JSON value.
pub fn two_aggregator_vectors() -> anyhow::Result<Value> {
    let cases = two_aggregator_cases()
        .iter()
        .map(case_json)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(json!({
        "format": "ldpcov-two-aggregator-vectors",
        "version": TWO_AGGREGATOR_VERSION,
        "about": "What a two-aggregator collection's device computes before Prio3's sharding randomness: the clipped vector on the central grid (x = u·2^15 inside the unit ball), the circuit's encoded measurement (x + 2^16 in 17 bits each, least significant first; triu(x·xᵀ) row by row, negatives as q − |v|; the 31 bits of 2^30 − ‖x‖²; Field128, 16 bytes little-endian per element), the Prio3 context string, the helper share's associated data for key id 7, and the aggregated output of that one report. See testing/vectors/src/two_aggregator.rs.",
        "cases": cases,
    }))
}

/// The two-aggregator vectors' exact text: pretty-printed JSON and a final newline.
pub fn render_two_aggregator() -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&two_aggregator_vectors()?)?;
    text.push('\n');
    Ok(text)
}
