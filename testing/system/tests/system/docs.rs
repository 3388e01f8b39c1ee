//! The docs name paths that exist: every path written in backticks in README.md and
//! ARCHITECTURE.md whose first component is one of the repository's top-level entries
//! (`relay/src/store.rs`, `docs/OPERATIONS.md`, `testing/system/`) exists, from the
//! root or, in a crate's section, from the crate. A renamed or split file fails here
//! until the docs follow it.

use std::collections::BTreeSet;
use std::path::Path;

/// The backticked spans of `text` that read as repository paths.
fn paths_in(text: &str, top_level: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, span) in text.split('`').enumerate() {
        // Odd pieces are inside backticks.
        if k % 2 == 0 || span.contains(char::is_whitespace) || !span.contains('/') {
            continue;
        }
        if span.contains(['<', '>', '*', '{', '}', '…', '$', '|', '?']) {
            continue;
        }
        // `path:line` and `path#anchor` name the path.
        let path = span.split([':', '#']).next().unwrap_or(span);
        let first = path.split('/').next().unwrap_or("");
        if top_level.contains(first) {
            out.push(path.trim_end_matches(['.', ',', ')']).to_string());
        }
    }
    out
}

#[test]
fn every_path_the_readme_and_architecture_name_exists() {
    // This crate is `testing/system/`: the repository is two levels up.
    let root = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let top_level: BTreeSet<String> = std::fs::read_dir(root)
        .expect("the repository")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') && name != "target")
        .collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("the doc");
        // Inside a crate's section (`### `relay/` — …`) a path may be the crate's own
        // (`src/store.rs`, `tests/system/`).
        let mut section = String::new();
        for line in text.lines() {
            if let Some(heading) = line.strip_prefix("### ") {
                section = heading
                    .split('`')
                    .nth(1)
                    .filter(|d| d.ends_with('/'))
                    .unwrap_or("")
                    .to_string();
            }
            for path in paths_in(line, &top_level) {
                checked += 1;
                if !root.join(&path).exists() && !root.join(&section).join(&path).exists() {
                    missing.push(format!("{doc}: `{path}` (section `{section}`)"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: the parser lost them"
    );
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn paths_are_read_from_backticks_only() {
    let top: BTreeSet<String> = ["relay", "docs"].map(String::from).into();
    let text = "see `relay/src/store.rs:12`, `docs/A.md#x`, relay/not/this, `relay/<x>.rs`, `cargo test -p relay/x`, `other/y.rs`";
    assert_eq!(paths_in(text, &top), ["relay/src/store.rs", "docs/A.md"]);
}
