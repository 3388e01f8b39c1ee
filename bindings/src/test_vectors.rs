//! **For the cross-language test vectors only** (`testing/vectors/reports-v1.json`):
//! reports built from a fixed seed, so that the Python and Kotlin test suites can check
//! that the library their bindings load produces the Rust client's bytes (and the JVM
//! benchmark can time report building without an aggregator).

use ldpcov_client::proto::v1::CollectionParams;
use ldpcov_client::{
    Collection, DiscreteGaussianSampler, Perturber, ReportId, trusted_curator_report,
};
use prost::Message;

use crate::{CollectionSpecInput, LdpcovError};

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

/// The protobuf-encoded `CollectionParams` an aggregator announces for a collection
/// created with `spec` (`Collection::create`, as the daemon's `CreateCollection`: the
/// mean and covariance, the mechanism's default encoding), derived locally; nothing is
/// sent. The input of [`reports_with_seed_for_test_vectors`] where no aggregator runs
/// (the JVM benchmark, `bindings/kotlin/bench.sh`). The parameters are public; apps get
/// them from their aggregator through `Device.collection`.
#[uniffi::export]
pub fn collection_params_for_test_vectors(
    spec: CollectionSpecInput,
) -> Result<Vec<u8>, LdpcovError> {
    let collection =
        Collection::create(&spec.to_proto()?).map_err(|e| LdpcovError::InvalidInput {
            reason: e.to_string(),
        })?;
    Ok(collection.params().encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mechanism;
    use ldpcov_client::proto::v1::{Encoding, Moments};

    fn spec(dim: u32, mechanism: Option<Mechanism>) -> CollectionSpecInput {
        CollectionSpecInput {
            collection_id: "params".into(),
            dim,
            epsilon: 1.0,
            delta: if mechanism == Some(Mechanism::RankOne) {
                0.0
            } else {
                1e-6
            },
            clip_radius: 1.0,
            min_reports: 1,
            encoding: None,
            mechanism,
            shuffle_min_batch_size: None,
            shuffle_batch_window_seconds: None,
            two_aggregator: false,
            radius_phase_share: None,
        }
    }

    #[test]
    fn derived_params_are_the_created_collections_and_build_its_reports() {
        for (mechanism, encoding) in [
            (None, Encoding::I32Le),
            (Some(Mechanism::Gaussian), Encoding::I32Le),
            (Some(Mechanism::GaussianTriu), Encoding::I32Le),
            (Some(Mechanism::RankOne), Encoding::I16Le),
        ] {
            let input = spec(5, mechanism);
            let params = collection_params_for_test_vectors(input.clone()).unwrap();
            let created = Collection::create(&input.to_proto().unwrap()).unwrap();
            assert_eq!(params, created.params().encode_to_vec());
            let collection =
                Collection::from_params(&CollectionParams::decode(params.as_slice()).unwrap())
                    .unwrap();
            // What `create` makes of the spec: the mean and covariance, the mechanism
            // asked for (the svec Gaussian by default), its default encoding.
            let resolved = collection.spec();
            assert_eq!(resolved.moments, Moments::MeanAndCovariance as i32);
            let want = mechanism.unwrap_or(Mechanism::Gaussian).to_proto();
            assert_eq!(resolved.local_mechanism, want as i32, "{mechanism:?}");
            assert_eq!(collection.encoding(), encoding, "{mechanism:?}");
            let reports = reports_with_seed_for_test_vectors(
                params,
                1,
                vec![vec![0.1; 5]],
                vec![vec![7; 16]],
            )
            .unwrap();
            assert_eq!(
                reports[0].payload.len(),
                collection.payload_bytes(),
                "{mechanism:?}"
            );
        }
    }

    #[test]
    fn an_invalid_spec_is_refused() {
        let mut bad = spec(5, Some(Mechanism::RankOne));
        bad.delta = 1e-6;
        assert!(matches!(
            collection_params_for_test_vectors(bad),
            Err(LdpcovError::InvalidInput { .. })
        ));
        assert!(collection_params_for_test_vectors(spec(0, None)).is_err());
    }
}
