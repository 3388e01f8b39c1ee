//! Smoke test of the ingest benchmark (`benches/ingest.rs`, the same code): its quick
//! configuration runs end to end against real daemons and every report it sends is
//! counted exactly once (checked inside the benchmark). Speed is not asserted here:
//! the figures are in docs/BENCHMARKS.md.

#[path = "../../benches/ingest.rs"]
mod ingest;

#[test]
fn the_quick_ingest_benchmark_runs_and_counts_every_report() {
    let args = ingest::Args::quick();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let results = runtime
        .block_on(ingest::run(&args))
        .unwrap_or_else(|e| panic!("ingest benchmark failed: {e:#}"));
    // p = 8 × (i32, i8) × (memory, redb).
    assert_eq!(results.len(), 4, "{results:?}");
    for r in &results {
        assert!(r.reports > 0 && r.payload_bytes > 0, "{r:?}");
        assert!(r.seconds > 0.0 && r.loopback_bytes_per_s > 0.0, "{r:?}");
    }
}
