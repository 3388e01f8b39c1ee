//! Fuzzes what the aggregator does with the bytes of one `SubmitReport` call before
//! anything reaches the store: prost-decode a `Report`, check the collection id, the
//! report id, and decode and range-check the payload against a collection.
//!
//! The first input byte picks one of a few small collections (dimensions 1 to 5, every
//! wire encoding); the rest is the protobuf body. Nothing may panic; whatever is
//! accepted must have exactly the collection's number of entries, each within its
//! bound. Run with `cargo fuzz run decode_report` (docs/FUZZING.md).
#![no_main]

use std::sync::OnceLock;

use ldpcov_proto::v1::{CollectionSpec, Encoding, Report};
use ldpcov_privacy::{Collection, ReportId, collection::validate_collection_id, wire};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn collections() -> &'static [Collection] {
    static C: OnceLock<Vec<Collection>> = OnceLock::new();
    C.get_or_init(|| {
        let mut out = Vec::new();
        for dim in 1..=5u32 {
            for encoding in [Encoding::I32Le, Encoding::I16Le, Encoding::I8] {
                let spec = CollectionSpec {
                    collection_id: format!("f{dim}-{}", encoding as i32),
                    dim,
                    epsilon: 1.0,
                    delta: 1e-6,
                    clip_radius: 1.0,
                    min_reports: 1,
                    encoding: encoding as i32,
                    ..Default::default()
                };
                out.push(Collection::from_spec(&spec).expect("valid fuzz collection"));
            }
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let collections = collections();
    let collection = &collections[pick as usize % collections.len()];
    let Ok(report) = Report::decode(body) else {
        return;
    };
    let _ = validate_collection_id(&report.collection_id);
    let Ok(_id) = ReportId::try_from(report.report_id.as_slice()) else {
        return;
    };
    if let Ok(entries) = wire::decode_payload(collection, report.encoding, &report.payload) {
        assert_eq!(entries.len(), collection.entries());
        let bound = collection.wire_max() * collection.wire_step();
        assert!(entries.to_dense().iter().all(|&v| i64::from(v).abs() <= bound));
    }
});
