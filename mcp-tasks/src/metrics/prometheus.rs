//! The Prometheus recorder and its scrape route (feature `prometheus`).

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
pub use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

/// The bucket bounds (seconds) of every histogram of this crate: 1 ms to 1 h.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0, 3600.0,
];

/// Installs the Prometheus recorder of `metrics-exporter-prometheus` as the global
/// recorder, with buckets for this crate's histograms, and describes every metric
/// ([`describe`](super::describe)). Call it once, before the engine is built; serve the
/// handle with [`prometheus_router`].
///
/// # Errors
/// A recorder is installed already.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let handle = mcp_tasks::metrics::install_prometheus()?;
/// let scrape: axum::Router = mcp_tasks::metrics::prometheus_router(handle);
/// # let _ = scrape;
/// # Ok(())
/// # }
/// ```
pub fn install_prometheus() -> Result<PrometheusHandle, BuildError> {
    let mut builder = PrometheusBuilder::new();
    for name in super::HISTOGRAMS {
        builder = builder.set_buckets_for_metric(Matcher::Full(name.to_owned()), &BUCKETS)?;
    }
    let handle = builder.install_recorder()?;
    super::describe();
    Ok(handle)
}

/// A router with one route, `GET /metrics`, answering the Prometheus text format of
/// `handle`. Mount it where only the scraper reaches it (it has no credential of its own):
/// on another listener, or merged into the admin router behind a layer of yours. Each
/// scrape also runs the recorder's upkeep, so histograms do not grow between scrapes.
pub fn prometheus_router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(handle)
}

async fn scrape(State(handle): State<PrometheusHandle>) -> impl IntoResponse {
    let text = handle.render();
    handle.run_upkeep();
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], text)
}
