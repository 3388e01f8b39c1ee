//! **For the cross-language test vectors only** (`testing/vectors/reports-v1.json`):
//! reports built from a fixed seed, so that the Python and Kotlin test suites can check
//! that the library their bindings load produces the Rust client's bytes.

use ldpcov_client::proto::v1::CollectionParams;
use ldpcov_client::{
    Collection, DiscreteGaussianSampler, Perturber, ReportId, trusted_curator_report,
};
use prost::Message;

use crate::LdpcovError;

/// One report of [`reports_with_seed_for_test_vectors`].
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TestVectorReport {
    /// The encoded entries (the vectors' `payload`).
    pub payload: Vec<u8>,
    /// The whole `Report` message, protobuf-encoded (the vectors' `report_message`).
    pub report_message: Vec<u8>,
}

/// **Not private: a fixed seed makes the noise predictable; for cross-language test
/// vectors only.** Never use it for a real report (use `Device.submit`, whose noise is
/// seeded by the operating system).
///
/// Builds the reports of one test-vector case exactly as `testing/vectors` does: the
/// collection re-derived from `params` (the protobuf-encoded `CollectionParams` a
/// server announces, the vectors' `params_hex`) and checked against it, one
/// `DiscreteGaussianSampler::from_seed_for_simulation(seed)` for all the reports, drawn
/// in order, `inputs[i]` under `report_ids[i]` (16 bytes each). A central collection's
/// reports are the trusted-curator raw vectors (no noise). Nothing is sent.
#[uniffi::export]
pub fn reports_with_seed_for_test_vectors(
    params: Vec<u8>,
    seed: u64,
    inputs: Vec<Vec<f64>>,
    report_ids: Vec<Vec<u8>>,
) -> Result<Vec<TestVectorReport>, LdpcovError> {
    let invalid = |reason: String| LdpcovError::InvalidInput { reason };
    if inputs.len() != report_ids.len() {
        return Err(invalid(format!(
            "{} inputs but {} report ids",
            inputs.len(),
            report_ids.len()
        )));
    }
    let params = CollectionParams::decode(params.as_slice())
        .map_err(|e| invalid(format!("undecodable CollectionParams: {e}")))?;
    let collection = Collection::from_params(&params).map_err(|e| LdpcovError::ServerMismatch {
        reason: e.to_string(),
    })?;
    let perturber = Perturber::new(collection.clone());
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(seed);
    inputs
        .iter()
        .zip(report_ids)
        .map(|(x, id)| {
            let id: [u8; 16] = id.try_into().map_err(|id: Vec<u8>| {
                invalid(format!("a report id of {} bytes, not 16", id.len()))
            })?;
            let report = if collection.is_central() {
                trusted_curator_report(&collection, x, ReportId(id))
            } else {
                perturber.report(x, &mut noise, ReportId(id))
            }?;
            Ok(TestVectorReport {
                report_message: report.encode_to_vec(),
                payload: report.payload,
            })
        })
        .collect()
}
