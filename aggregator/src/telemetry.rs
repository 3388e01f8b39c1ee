//! Prometheus metrics of the daemon, through the [`metrics`] facade.
//!
//! Why the facade with `metrics-exporter-prometheus` rather than the `prometheus`
//! crate: the code that counts (the service, the stores) calls only the facade's
//! macros and knows nothing of the exporter, so the exporter is chosen in one place
//! (`ldpcov_serve::install_prometheus_exporter`, shared with the relay, called by
//! `serve --metrics-listen` with [`histogram_buckets`], then [`describe_metrics`]); the exporter
//! brings its own HTTP listener and histogram buckets; and without an installed
//! recorder every call here is a cheap no-op, so library users and tests that do not
//! ask for metrics pay nothing.
//!
//! Cost on the hot path: one call per gRPC call or per batch handed to the store (a
//! stream's reports are counted when its batch of up to
//! [`STREAM_BATCH`](crate::service::STREAM_BATCH) is stored), never per entry.
//!
//! **Invariant:** metrics carry counts, sizes and durations only: never a payload
//! value, an estimate or a report id. Labels are the collection id, the RPC, the
//! status code name and the commit result.
//!
//! # The metrics
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `ldpcov_reports_accepted_total` | counter | collection | reports newly counted |
//! | `ldpcov_reports_duplicate_total` | counter | collection | reports whose id was already counted |
//! | `ldpcov_reports_rejected_total` | counter | collection, code | reports refused, by gRPC status code (`invalid_argument`, `not_found`, …) |
//! | `ldpcov_report_bytes_received_total` | counter | collection | payload bytes of every report received, counted or not |
//! | `ldpcov_submit_duration_seconds` | histogram | rpc | duration of `SubmitReport` / `SubmitReports` calls |
//! | `ldpcov_commit_batch_reports` | histogram | store | reports per group commit (`redb` / `postgres`) |
//! | `ldpcov_commit_duration_seconds` | histogram | store, result | duration of a group commit (`ok` / `failed`) |
//! | `ldpcov_reports_unfolded` | gauge | store, collection | reports appended (committed as report logs, or PostgreSQL delta rows) and not yet folded into the accumulators |
//! | `ldpcov_fold_duration_seconds` | histogram | store | duration of one fold of appended reports into the accumulators |
//! | `ldpcov_collections` | gauge | | collections in the store |
//! | `ldpcov_estimate_duration_seconds` | histogram | target | duration of `GetEstimate` (`covariance` / `precision`) |
//!
//! A rejected report is one the service refused (validation, unknown or closed
//! collection, token) or whose batch the store failed; in a stream, the one report
//! that ended the stream.

use std::time::Duration;

use ldpcov_serve::Matcher;
use tonic::Code;

/// Histogram buckets of the durations, in seconds (100 µs to 60 s).
const DURATION_BUCKETS: [f64; 14] = [
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 60.0,
];

/// Histogram buckets of the reports per group commit.
const BATCH_BUCKETS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// The histogram buckets of the aggregator's metrics, for
/// [`ldpcov_serve::install_prometheus_exporter`]: the durations (`*_seconds`) and the
/// reports per group commit.
pub fn histogram_buckets() -> [(Matcher, &'static [f64]); 2] {
    [
        (Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS),
        (
            Matcher::Full("ldpcov_commit_batch_reports".into()),
            &BATCH_BUCKETS,
        ),
    ]
}

/// Gives the exported metrics their help lines; call it once the exporter is installed
/// (before, the descriptions go nowhere).
pub fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "ldpcov_reports_accepted_total",
        Unit::Count,
        "Reports newly counted, per collection."
    );
    describe_counter!(
        "ldpcov_reports_duplicate_total",
        Unit::Count,
        "Reports whose id was already counted (ignored), per collection."
    );
    describe_counter!(
        "ldpcov_reports_rejected_total",
        Unit::Count,
        "Reports refused, per collection and gRPC status code."
    );
    describe_counter!(
        "ldpcov_report_bytes_received_total",
        Unit::Bytes,
        "Payload bytes of every report received, counted or not, per collection."
    );
    describe_histogram!(
        "ldpcov_submit_duration_seconds",
        Unit::Seconds,
        "Duration of SubmitReport and SubmitReports calls."
    );
    describe_histogram!(
        "ldpcov_commit_batch_reports",
        Unit::Count,
        "Reports per group commit of the store."
    );
    describe_histogram!(
        "ldpcov_commit_duration_seconds",
        Unit::Seconds,
        "Duration of a group commit of the store."
    );
    describe_gauge!(
        "ldpcov_reports_unfolded",
        Unit::Count,
        "Reports appended and not yet folded into the accumulators, per store and collection."
    );
    describe_histogram!(
        "ldpcov_fold_duration_seconds",
        Unit::Seconds,
        "Duration of one fold of appended reports into the accumulators."
    );
    describe_gauge!(
        "ldpcov_collections",
        Unit::Count,
        "Collections in the store."
    );
    describe_histogram!(
        "ldpcov_estimate_duration_seconds",
        Unit::Seconds,
        "Duration of GetEstimate calls."
    );
}

/// Reports newly counted and duplicates of one stored batch (or unary call).
pub(crate) fn counted(collection: &str, accepted: u64, duplicates: u64) {
    if accepted > 0 {
        metrics::counter!("ldpcov_reports_accepted_total", "collection" => collection.to_string())
            .increment(accepted);
    }
    if duplicates > 0 {
        metrics::counter!("ldpcov_reports_duplicate_total", "collection" => collection.to_string())
            .increment(duplicates);
    }
}

/// `reports` reports of `collection` refused with `code`.
pub(crate) fn rejected(collection: &str, code: Code, reports: u64) {
    if reports > 0 {
        metrics::counter!(
            "ldpcov_reports_rejected_total",
            "collection" => collection.to_string(),
            "code" => code_name(code),
        )
        .increment(reports);
    }
}

/// Payload bytes received for `collection`.
pub(crate) fn bytes_received(collection: &str, bytes: u64) {
    if bytes > 0 {
        metrics::counter!("ldpcov_report_bytes_received_total", "collection" => collection.to_string())
            .increment(bytes);
    }
}

/// The duration of one submit call (`rpc`: `SubmitReport` or `SubmitReports`).
pub(crate) fn submit_duration(rpc: &'static str, elapsed: Duration) {
    metrics::histogram!("ldpcov_submit_duration_seconds", "rpc" => rpc)
        .record(elapsed.as_secs_f64());
}

/// One group commit of `store` (`redb` or `postgres`): its reports, duration and outcome.
pub(crate) fn commit(store: &'static str, reports: usize, elapsed: Duration, ok: bool) {
    metrics::histogram!("ldpcov_commit_batch_reports", "store" => store).record(reports as f64);
    metrics::histogram!(
        "ldpcov_commit_duration_seconds",
        "store" => store,
        "result" => if ok { "ok" } else { "failed" },
    )
    .record(elapsed.as_secs_f64());
}

/// Reports of `collection` appended and not yet folded in `store` (`redb` or `postgres`).
pub(crate) fn unfolded_reports(store: &'static str, collection: &str, reports: u64) {
    metrics::gauge!(
        "ldpcov_reports_unfolded",
        "store" => store,
        "collection" => collection.to_string(),
    )
    .set(reports as f64);
}

/// One fold of appended reports into the accumulators of `store`: its duration.
pub(crate) fn fold(store: &'static str, elapsed: Duration) {
    metrics::histogram!("ldpcov_fold_duration_seconds", "store" => store)
        .record(elapsed.as_secs_f64());
}

/// The number of collections in the store now.
pub(crate) fn collections(count: u64) {
    metrics::gauge!("ldpcov_collections").set(count as f64);
}

/// The duration of one `GetEstimate` (`target`: `covariance` or `precision`).
pub(crate) fn estimate_duration(target: &'static str, elapsed: Duration) {
    metrics::histogram!("ldpcov_estimate_duration_seconds", "target" => target)
        .record(elapsed.as_secs_f64());
}

/// The code's name in snake case, as in the gRPC spec's status code table
/// (`invalid_argument`, `not_found`, …).
pub(crate) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_distinct_snake_case() {
        let codes = [
            Code::Ok,
            Code::Cancelled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
            Code::Unauthenticated,
        ];
        let names: std::collections::HashSet<_> = codes.iter().map(|&c| code_name(c)).collect();
        assert_eq!(names.len(), codes.len());
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
    }
}
