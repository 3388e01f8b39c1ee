//! The shared test vectors of ldpcov's clients: for a set of collection specs, inputs
//! and seeds, the exact report bytes the Rust client ([`Perturber::report`] with
//! [`DiscreteGaussianSampler::from_seed_for_simulation`]) produces, and every parameter
//! a client derives from the spec. Every other client (TypeScript, Python, Kotlin) must
//! reproduce them byte for byte.
//!
//! The file is written by `cargo run -p ldpcov-test-vectors -- --write
//! testing/vectors/reports-v1.json` and checked by this crate's tests, which regenerate
//! it in memory and compare: the file cannot drift from the Rust client.
//!
//! # Format (version 1)
//!
//! Every f64 is written as `{"bits": "<16 hex digits of its IEEE-754 bits>", "value":
//! <shortest decimal>}`: `bits` is authoritative, `value` is for reading (it also parses
//! exactly). Every u64 seed and i64 lattice value is a decimal string (JavaScript
//! numbers lose integers above 2^53). Byte strings are lower-case hex. A case holds:
//! * `spec`: the `CollectionSpec` (enum fields by their numeric value) and `params_hex`,
//!   the `CollectionParams` message a server announces for it, protobuf-encoded;
//! * `derived`: the parameters a client re-derives from the spec (entries, k, Δ, σ, σ
//!   in grid units, the validation bound, the wire step and range, ρ; for the rank-one
//!   mechanism γ, its units, the nominal ε and η);
//! * `seed`: one sampler, `DiscreteGaussianSampler::from_seed_for_simulation(seed)`,
//!   used for every report of the case in order (the sampler's state carries over);
//! * `reports`: per input `x`, the clipped `u`, the noiseless statistic (Gaussian:
//!   the grid values before noise; rank-one: the lifted input on the grid `2^−40`;
//!   central: the coordinates on the grid `2^−15`), the report id, the payload and the
//!   whole `Report` message, protobuf-encoded.
//!
//! The sealed-report vectors of shuffled collections are a file of their own,
//! `testing/vectors/sealed-v1.json` (see [`sealed_vectors`]), written by the same binary
//! (`--write-sealed <path>`); the relay's layer over the first of them is
//! `testing/vectors/relay-layer-v1.json` ([`layered_vectors`], `--write-layered <path>`).
//! Two-aggregator collections' device-side values are `testing/vectors/two-aggregator-v1.json`
//! ([`two_aggregator_vectors`], `--write-two-aggregator <path>`).

mod layered;
mod sealed;
mod two_aggregator;

pub use layered::{LAYERED_FILE, LAYERED_VERSION, layered_vectors, render_layered};
pub use sealed::{SEALED_FILE, SEALED_VERSION, render_sealed, sealed_vectors};
pub use two_aggregator::{
    HELPER_KEY_ID, TWO_AGGREGATOR_FILE, TWO_AGGREGATOR_VERSION, TwoAggregatorCase, expected_output,
    render_two_aggregator, two_aggregator_cases, two_aggregator_vectors,
};

use ldpcov_client::proto::v1::{CollectionSpec, Encoding, LocalMechanism, Moments, PrivacyModel};
use ldpcov_client::{
    ClientError, Collection, DiscreteGaussianSampler, Perturber, ReportId, trusted_curator_report,
};
use ldpcov_privacy::ReportMechanism;
use ldpcov_privacy::mechanism::rank_one::{Cap, GAMMA_BITS, INPUT_BITS, LATTICE_BITS};
use prost::Message;
use serde_json::{Value, json};
use thiserror::Error;

/// The version of the file format and of the case list; a change to either is a new
/// version (a new file), so that old clients keep a file they can read.
pub const VERSION: u32 = 1;

/// Where the file lives, relative to the workspace root.
pub const FILE: &str = "testing/vectors/reports-v1.json";

/// Why the vectors could not be built.
#[derive(Debug, Error)]
pub enum VectorError {
    /// A case's spec is invalid (a bug in the case list).
    #[error("case {case}: {source}")]
    Spec {
        /// The case.
        case: String,
        /// Why.
        source: ldpcov_privacy::SpecError,
    },
    /// The client refused an input (a bug in the case list).
    #[error("case {case}: {source}")]
    Client {
        /// The case.
        case: String,
        /// Why.
        source: ClientError,
    },
}

/// One case of the file.
struct Case {
    name: &'static str,
    mechanism: LocalMechanism,
    privacy_model: PrivacyModel,
    encoding: Encoding,
    moments: Moments,
    dim: u32,
    epsilon: f64,
    delta: f64,
    clip_radius: f64,
    centre: Vec<f64>,
    seed: u64,
    inputs: Vec<Vec<f64>>,
}

/// A deterministic input of length `dim` (no random number generator, so that the
/// inputs do not depend on any library's algorithm): `scale·sin(1.7·i + phase)`.
fn wave(dim: u32, scale: f64, phase: f64) -> Vec<f64> {
    (0..dim)
        .map(|i| scale * (1.7 * f64::from(i) + phase).sin())
        .collect()
}

fn gaussian(
    name: &'static str,
    mechanism: LocalMechanism,
    encoding: Encoding,
    moments: Moments,
    dim: u32,
) -> Case {
    Case {
        name,
        mechanism,
        privacy_model: PrivacyModel::Local,
        encoding,
        moments,
        dim,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 2.0,
        centre: Vec::new(),
        seed: 0,
        inputs: Vec::new(),
    }
}

/// The case list: every local mechanism and encoding the Rust client offers, the
/// central raw vector, clipping, small and moderately large p.
fn cases() -> Vec<Case> {
    use Encoding::{I8, I16Le, I32Le, RawI32Le};
    use LocalMechanism::{Gaussian, GaussianTriu, RankOne};
    use Moments::{MeanAndCovariance, SecondMoment};
    let mut out = Vec::new();
    let mut push = |mut c: Case, seed: u64, inputs: Vec<Vec<f64>>| {
        c.seed = seed;
        c.inputs = inputs;
        out.push(c);
    };
    // Gaussian, svec weighting.
    let c = gaussian(
        "gaussian-svec-i32-second-moment-p1",
        Gaussian,
        I32Le,
        SecondMoment,
        1,
    );
    push(c, 1, vec![vec![0.75], vec![-1.25], vec![5.0]]);
    let c = gaussian(
        "gaussian-svec-i32-second-moment-p3",
        Gaussian,
        I32Le,
        SecondMoment,
        3,
    );
    push(c, 2, vec![wave(3, 0.9, 0.1), wave(3, 3.0, 0.7)]);
    let mut c = gaussian(
        "gaussian-svec-i16-mean-cov-centre-p3",
        Gaussian,
        I16Le,
        MeanAndCovariance,
        3,
    );
    c.centre = vec![0.5, -0.25, 10.0];
    push(c, 3, vec![vec![1.0, 0.0, 10.5], vec![0.5, -0.25, 10.0]]);
    let c = gaussian(
        "gaussian-svec-i8-second-moment-p7",
        Gaussian,
        I8,
        SecondMoment,
        7,
    );
    push(c, 4, vec![wave(7, 0.5, 0.3), wave(7, 4.0, 1.1)]);
    let mut c = gaussian(
        "gaussian-svec-i32-mean-cov-centre-p7-clipped",
        Gaussian,
        I32Le,
        MeanAndCovariance,
        7,
    );
    c.centre = vec![0.5, -0.25, 0.0, 1.0, 2.0, -1.0, 0.125];
    c.clip_radius = 1.5;
    push(c, 5, vec![wave(7, 6.0, 0.2), wave(7, 0.3, 2.0)]);
    let mut c = gaussian(
        "gaussian-svec-i32-second-moment-p40",
        Gaussian,
        I32Le,
        SecondMoment,
        40,
    );
    (c.epsilon, c.delta) = (2.0, 1e-9);
    push(c, 6, vec![wave(40, 0.2, 0.5), wave(40, 1.0, 1.5)]);
    let mut c = gaussian(
        "gaussian-svec-i16-mean-cov-p40",
        Gaussian,
        I16Le,
        MeanAndCovariance,
        40,
    );
    (c.epsilon, c.delta) = (0.5, 1e-5);
    push(c, 7, vec![wave(40, 0.4, 0.9)]);
    // Gaussian, the original triu weighting.
    let c = gaussian(
        "gaussian-triu-i32-second-moment-p7",
        GaussianTriu,
        I32Le,
        SecondMoment,
        7,
    );
    push(c, 8, vec![wave(7, 0.6, 0.4), wave(7, 9.0, 0.0)]);
    let mut c = gaussian(
        "gaussian-triu-i16-mean-cov-centre-p3",
        GaussianTriu,
        I16Le,
        MeanAndCovariance,
        3,
    );
    c.centre = vec![-3.0, 0.0, 2.5];
    push(c, 9, vec![vec![-2.0, 0.5, 2.0], vec![-30.0, 1.0, 0.0]]);
    let mut c = gaussian(
        "gaussian-triu-i8-mean-cov-p1",
        GaussianTriu,
        I8,
        MeanAndCovariance,
        1,
    );
    (c.epsilon, c.delta, c.clip_radius) = (4.0, 1e-7, 1.0);
    push(c, 10, vec![vec![0.3], vec![-7.0]]);
    let mut c = gaussian(
        "gaussian-triu-i8-second-moment-p3-small-epsilon",
        GaussianTriu,
        I8,
        SecondMoment,
        3,
    );
    (c.epsilon, c.delta, c.clip_radius) = (0.1, 1e-8, 3.0);
    push(c, 11, vec![wave(3, 2.0, 0.6)]);
    // Rank-one (pure ε-LDP: δ = 0, i16 only).
    let rank_one = |name, moments, dim, epsilon| Case {
        name,
        mechanism: RankOne,
        privacy_model: PrivacyModel::Local,
        encoding: I16Le,
        moments,
        dim,
        epsilon,
        delta: 0.0,
        clip_radius: 2.0,
        centre: Vec::new(),
        seed: 0,
        inputs: Vec::new(),
    };
    push(
        rank_one("rank-one-second-moment-p1", SecondMoment, 1, 1.0),
        12,
        vec![vec![0.75], vec![-3.0]],
    );
    push(
        rank_one("rank-one-second-moment-p3", SecondMoment, 3, 2.0),
        13,
        vec![wave(3, 1.0, 0.2), vec![0.0; 3]],
    );
    let mut c = rank_one(
        "rank-one-mean-cov-centre-p7-clipped",
        MeanAndCovariance,
        7,
        1.0,
    );
    c.centre = vec![1.0, 0.0, -1.0, 0.5, 0.0, 0.0, 2.0];
    push(c, 14, vec![wave(7, 5.0, 0.3), wave(7, 0.4, 1.3)]);
    push(
        rank_one("rank-one-second-moment-p40", SecondMoment, 40, 4.0),
        15,
        vec![wave(40, 0.25, 0.7)],
    );
    // Central: the raw vector, no randomness.
    let central = |name, moments, dim| Case {
        name,
        mechanism: LocalMechanism::Unspecified,
        privacy_model: PrivacyModel::Central,
        encoding: RawI32Le,
        moments,
        dim,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 2.0,
        centre: Vec::new(),
        seed: 0,
        inputs: Vec::new(),
    };
    push(
        central("central-raw-second-moment-p3", SecondMoment, 3),
        0,
        vec![wave(3, 1.0, 0.4), wave(3, 5.0, 0.1)],
    );
    let mut c = central("central-raw-mean-cov-centre-p7", MeanAndCovariance, 7);
    c.centre = vec![0.5; 7];
    push(c, 0, vec![wave(7, 0.7, 0.8)]);
    out
}

/// An f64 as its bits (authoritative) and its shortest decimal (for reading).
pub(crate) fn f(v: f64) -> Value {
    json!({ "bits": format!("{:016x}", v.to_bits()), "value": v })
}

pub(crate) fn fs(v: &[f64]) -> Value {
    Value::Array(v.iter().map(|&x| f(x)).collect())
}

fn spec_of(c: &Case) -> CollectionSpec {
    CollectionSpec {
        collection_id: c.name.to_string(),
        dim: c.dim,
        epsilon: c.epsilon,
        delta: c.delta,
        clip_radius: c.clip_radius,
        min_reports: 1,
        encoding: c.encoding as i32,
        moments: c.moments as i32,
        centre: c.centre.clone(),
        privacy_model: c.privacy_model as i32,
        local_mechanism: c.mechanism as i32,
        ..Default::default()
    }
}

/// A case's spec: the fields every case writes, and `extra` (the one enum field that tells
/// its model's cases apart).
pub(crate) fn spec_json(spec: &CollectionSpec, extra: &str, extra_value: i32) -> Value {
    let mut out = json!({
        "collection_id": spec.collection_id,
        "dim": spec.dim,
        "epsilon": f(spec.epsilon),
        "delta": f(spec.delta),
        "clip_radius": f(spec.clip_radius),
        "min_reports": spec.min_reports.to_string(),
        "encoding": spec.encoding,
        "moments": spec.moments,
        "centre": fs(&spec.centre),
        "privacy_model": spec.privacy_model,
    });
    out[extra] = json!(extra_value);
    out
}

pub(crate) fn derived(collection: &Collection) -> Value {
    let p = collection.params();
    let mut out = json!({
        "entries": p.entries,
        "grid_bits": p.grid_bits,
        "sensitivity": f(p.sensitivity),
        "base_sensitivity": f(p.base_sensitivity),
        "sigma": f(p.sigma),
        "rho": f(p.rho),
        "max_abs_grid_value": p.max_abs_grid_value.to_string(),
        "wire_step": p.wire_step.to_string(),
        "wire_max": p.wire_max.to_string(),
        "mean_weight": f(p.mean_weight),
        "mean_entries": p.mean_entries,
    });
    match collection.mechanism() {
        ReportMechanism::Gaussian(g) => {
            out["mechanism"] = json!("gaussian");
            out["sigma_grid"] = f(g.sigma_grid());
        }
        ReportMechanism::RankOne(r) => {
            let params = r.params();
            out["mechanism"] = json!("rank_one");
            out["rank_one"] = json!({
                "cap": match params.cap { Cap::Symmetric => "symmetric", Cap::OneSided => "one_sided" },
                "gamma_units": params.gamma_units.to_string(),
                "gamma_bits": GAMMA_BITS,
                "gamma": f(params.gamma),
                "nominal_epsilon": f(params.nominal_epsilon),
                "cap_probability_units": params.cap_probability_units.to_string(),
                "tilt": params.tilt,
                "eta": f(params.eta),
                "cap_mass": f(params.moments.cap_mass),
                "kappa": f(params.moments.kappa),
                "mean_scale": f(params.moments.mean_scale),
                "lattice_bits": LATTICE_BITS,
                "input_bits": INPUT_BITS,
                "threshold": params.threshold().to_string(),
            });
        }
        ReportMechanism::RawVector(_) => {
            out["mechanism"] = json!("raw_vector");
        }
    }
    out
}

fn case_json(c: &Case) -> Result<Value, VectorError> {
    let spec = spec_of(c);
    let collection = Collection::from_spec(&spec).map_err(|source| VectorError::Spec {
        case: c.name.to_string(),
        source,
    })?;
    let client_err = |source| VectorError::Client {
        case: c.name.to_string(),
        source,
    };
    let perturber = Perturber::new(collection.clone());
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(c.seed);
    let mut reports = Vec::new();
    for (n, x) in c.inputs.iter().enumerate() {
        let u = perturber.clip(x).map_err(client_err)?;
        let statistic: Vec<String> = match collection.mechanism() {
            ReportMechanism::Gaussian(g) => g.statistic(&u).map(|v| v.to_string()).collect(),
            ReportMechanism::RankOne(r) => r
                .lifted_input(&u)
                .map_err(|e| client_err(ClientError::RankOne(e.to_string())))?
                .iter()
                .map(|v| v.to_string())
                .collect(),
            ReportMechanism::RawVector(raw) => raw
                .statistic(&u)
                .map_err(|e| client_err(ClientError::Wire(e)))?
                .iter()
                .map(|v| v.to_string())
                .collect(),
        };
        // A report id that names the case and the report (any 16 bytes do).
        let mut id = [0u8; 16];
        id[0] = c.seed as u8;
        id[1] = n as u8;
        id[2..].copy_from_slice(&[0xa5; 14]);
        let report_id = ReportId(id);
        let report = if collection.is_central() {
            trusted_curator_report(&collection, x, report_id)
        } else {
            perturber.report(x, &mut noise, report_id)
        }
        .map_err(client_err)?;
        reports.push(json!({
            "x": fs(x),
            "clipped_u": fs(&u),
            "statistic": statistic,
            "report_id": hex::encode(id),
            "encoding": report.encoding,
            "payload": hex::encode(&report.payload),
            "report_message": hex::encode(report.encode_to_vec()),
        }));
    }
    Ok(json!({
        "name": c.name,
        "spec": spec_json(&spec, "local_mechanism", spec.local_mechanism),
        "params_hex": hex::encode(collection.params().encode_to_vec()),
        "derived": derived(&collection),
        "seed": c.seed.to_string(),
        "reports": reports,
    }))
}

/// The whole file as a JSON value.
pub fn vectors() -> Result<Value, VectorError> {
    let cases = cases()
        .iter()
        .map(case_json)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "format": "ldpcov-report-vectors",
        "version": VERSION,
        "about": "Reports of the Rust client (Perturber::report) for fixed specs, inputs and seeds; every client must reproduce every payload byte for byte. See testing/vectors/src/lib.rs for the format.",
        "sampler": "DiscreteGaussianSampler::from_seed_for_simulation(seed): ChaCha20Rng::seed_from_u64(seed) behind the exact discrete Gaussian's bit reservoir; one sampler per case, its reports drawn in order",
        "cases": cases,
    }))
}

/// The file's exact text: pretty-printed JSON and a final newline.
pub fn render() -> Result<String, VectorError> {
    let value = vectors()?;
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    Ok(text)
}
