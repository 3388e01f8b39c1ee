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
