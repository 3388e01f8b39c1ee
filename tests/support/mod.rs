//! Helpers shared by the integration tests in `tests/` (each test crate includes this
//! module with `mod support;`).

use ldpcov::proto::collection::validate_collection_id;
use ldpcov::proto::v1::aggregator_client::AggregatorClient as RawClient;
use ldpcov::proto::v1::{CollectionSpec, CreateCollectionRequest, GetStatusRequest};
use tonic::Code;
use tonic::transport::Channel;

/// Asserts that creating each named spec is INVALID_ARGUMENT and, when its id is a
/// valid one, that no collection of that id exists afterwards.
pub(crate) async fn assert_specs_refused(
    raw: &mut RawClient<Channel>,
    cases: Vec<(&str, CollectionSpec)>,
) {
    for (name, spec) in cases {
        let id = spec.collection_id.clone();
        let err = raw
            .create_collection(CreateCollectionRequest { spec: Some(spec) })
            .await
            .expect_err(name);
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{name}: {}",
            err.message()
        );
        if validate_collection_id(&id).is_ok() {
            let e = raw
                .get_status(GetStatusRequest { collection_id: id })
                .await
                .expect_err(name);
            assert_eq!(e.code(), Code::NotFound, "{name} created something");
        }
    }
}
