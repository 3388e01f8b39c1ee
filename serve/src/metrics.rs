//! The Prometheus exporter of both daemons (`serve --metrics-listen`): the `metrics`
//! facade's recorder for the process, with its own HTTP listener. The code that counts
//! calls only the facade's macros; without an installed recorder every such call is a
//! cheap no-op.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder};

/// Which metrics a set of histogram buckets applies to (by full name, prefix or suffix).
pub use metrics_exporter_prometheus::Matcher;

/// Why the exporter could not start. Its message names the address; the exporter's
/// error is its `source` (an error chain prints it once, after a `: `).
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr}")]
pub struct MetricsError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The exporter's error.
    #[source]
    pub source: BuildError,
}

/// Installs the Prometheus exporter as the process's metrics recorder and serves
/// `GET /metrics` (any path) in the Prometheus text format on `addr`. The histograms
/// the `buckets` matchers select have those bucket bounds; any other histogram is
/// exported as a summary. The listener is bound before this returns, so a bad or busy
/// address is an error here. Call it inside the tokio runtime that should run the
/// listener, once per process, and describe the metrics (`metrics::describe_*!`)
/// afterwards: before a recorder is installed descriptions go nowhere.
pub fn install_prometheus_exporter(
    addr: SocketAddr,
    buckets: &[(Matcher, &[f64])],
) -> Result<(), MetricsError> {
    let err = |source| MetricsError { addr, source };
    let mut builder = PrometheusBuilder::new().with_http_listener(addr);
    for (matcher, bounds) in buckets {
        builder = builder
            .set_buckets_for_metric(matcher.clone(), bounds)
            .map_err(err)?;
    }
    builder.install().map_err(err)
}
