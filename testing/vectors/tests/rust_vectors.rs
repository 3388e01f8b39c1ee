//! The committed vectors are exactly what the Rust client produces today: regenerated
//! in memory and compared with the file, so that the file cannot drift from the client.

use std::path::PathBuf;

#[test]
fn committed_vectors_match_the_rust_client() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reports-v1.json");
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let fresh = ldpcov_test_vectors::render().expect("the vectors build");
    assert!(
        committed == fresh,
        "{} is stale: regenerate it with `cargo run -p ldpcov-test-vectors -- --write {}`",
        path.display(),
        ldpcov_test_vectors::FILE
    );
}

#[test]
fn committed_sealed_vectors_match_the_rust_client() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sealed-v1.json");
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let fresh = ldpcov_test_vectors::render_sealed().expect("the sealed vectors build");
    assert!(
        committed == fresh,
        "{} is stale: regenerate it with `cargo run -p ldpcov-test-vectors -- --write-sealed {}`",
        path.display(),
        ldpcov_test_vectors::SEALED_FILE
    );
}

#[test]
fn committed_relay_layer_vectors_match_the_rust_client() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("relay-layer-v1.json");
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let fresh = ldpcov_test_vectors::render_layered().expect("the relay-layer vectors build");
    assert!(
        committed == fresh,
        "{} is stale: regenerate it with `cargo run -p ldpcov-test-vectors -- --write-layered {}`",
        path.display(),
        ldpcov_test_vectors::LAYERED_FILE
    );
}

#[test]
fn committed_two_aggregator_vectors_match_the_rust_client() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("two-aggregator-v1.json");
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let fresh =
        ldpcov_test_vectors::render_two_aggregator().expect("the two-aggregator vectors build");
    assert!(
        committed == fresh,
        "{} is stale: regenerate it with `cargo run -p ldpcov-test-vectors -- --write-two-aggregator {}`",
        path.display(),
        ldpcov_test_vectors::TWO_AGGREGATOR_FILE
    );
}

/// The shares are random, so the vectors pin what they must add up to: each case's input,
/// reported by the Rust client (`ReportBuilder::two_aggregator_report`) and verified by
/// both roles (the helper opening its sealed share), aggregates to the pinned output.
#[test]
fn a_real_round_aggregates_to_the_pinned_output() {
    use ldpcov_client::{Collection, ReportBuilder, two_aggregator_prio3};
    use ldpcov_prio::exchange::verify_both;
    use prio::vdaf::{Aggregatable, Aggregator, Collector};

    let vectors = ldpcov_test_vectors::two_aggregator_vectors().expect("the vectors build");
    let cases = ldpcov_test_vectors::two_aggregator_cases();
    let master = ldpcov_seal::MasterSecret::from_bytes([8; 32]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let verify_key = [6u8; 32];
    for (case, pinned) in cases
        .iter()
        .zip(vectors["cases"].as_array().expect("cases"))
    {
        let collection = Collection::create(&case.spec).expect("spec");
        let schedule = ldpcov_seal::KeySchedule::new(3600, 2).expect("schedule");
        let helper =
            ldpcov_seal::CollectionKeys::new(&master, collection.id(), schedule).expect("keys");
        let [_, helper_key] = helper.published(now).expect("keys");
        let vdaf = two_aggregator_prio3(&collection).expect("prio3");
        let ctx = ldpcov_prio::context(collection.id());
        let mut device = ReportBuilder::new().expect("OS randomness");
        for (x, pinned) in case
            .inputs
            .iter()
            .zip(pinned["reports"].as_array().expect("reports"))
        {
            let report = device
                .two_aggregator_report(&collection, &helper_key, x)
                .expect("a report");
            let nonce: [u8; 16] = report.report_id.as_slice().try_into().expect("16 bytes");
            let sealed = report.helper_share.clone().expect("a helper share");
            let sealed = ldpcov_seal::SealedReport {
                key_id: sealed.key_id,
                enc: sealed.enc,
                ciphertext: sealed.ciphertext,
            };
            let helper_share = helper
                .open_helper_share(&sealed, &nonce, now)
                .expect("the helper opens its share");
            let (leader_out, helper_out) = verify_both(
                &vdaf,
                &verify_key,
                &ctx,
                &nonce,
                &report.public_share,
                &report.leader_share,
                &helper_share,
            )
            .expect("both roles accept");
            let (mut l, mut h) = (vdaf.aggregate_init(&()), vdaf.aggregate_init(&()));
            l.accumulate(&leader_out).expect("accumulate");
            h.accumulate(&helper_out).expect("accumulate");
            let sum = vdaf.unshard(&(), [l, h], 1).expect("unshard");
            let mut output: Vec<String> = sum.y.iter().map(i128::to_string).collect();
            if let Some(x_sum) = sum.x {
                output.extend(x_sum.iter().map(i128::to_string));
            }
            let want: Vec<String> = pinned["output"]
                .as_array()
                .expect("output")
                .iter()
                .map(|v| v.as_str().expect("a decimal string").to_string())
                .collect();
            assert_eq!(output, want, "case {}", case.name);
        }
    }
}
