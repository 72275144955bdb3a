//! The metrics on their own: `GET` answers the breakers' metrics, in the OpenMetrics text
//! format, at whatever path the application routes it.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, MethodRouter};
use http::StatusCode;
use lazybreaker::prometheus::BreakerCollector;
use prometheus_client::registry::Registry;

/// The content type of the metrics: the OpenMetrics text format `prometheus-client` writes
/// (Prometheus asks for it first, and reads it).
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Only the metrics of `collector` (the series of [`lazybreaker::prometheus`]), as a `GET`
/// route to put at the path of your choosing with [`Router::route`](axum::Router::route):
/// the same answer as a [`Dashboard`](crate::Dashboard)'s `GET /metrics`, without the page,
/// the JSON or the controls. `HEAD` is answered too; another method, `405`.
///
/// It fits a router of any state (`S`), and is a route, not a [`Router`](axum::Router): it
/// cannot be given to [`Router::route_service`](axum::Router::route_service) by mistake
/// (a `Router` there panics as the application starts).
///
/// # Examples
///
/// ```no_run
/// use lazybreaker::prometheus::BreakerCollector;
/// use lazybreaker::{Breaker, Registry};
/// use std::sync::Arc;
///
/// #[tokio::main]
/// async fn main() -> std::io::Result<()> {
///     let hosts = Arc::new(Registry::new(|_: &String| Breaker::builder()));
///     let payments = Arc::new(Breaker::builder().name("payments").build());
///     let collector = BreakerCollector::new().registry(hosts).breaker(payments);
///     let app = axum::Router::new()
///         .route("/internal/metrics", lazybreaker_dashboard::metrics(collector));
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:9100").await?;
///     axum::serve(listener, app).await
/// }
/// ```
pub fn metrics<S>(collector: BreakerCollector) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    route(Arc::new(registry))
}

/// `GET` answering `registry`'s metrics.
pub(crate) fn route<S>(registry: Arc<Registry>) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    get(text).with_state(registry)
}

async fn text(State(registry): State<Arc<Registry>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => crate::answer(StatusCode::OK, CONTENT_TYPE, text),
        Err(_) => crate::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics could not be encoded",
        ),
    }
}
