//! A status page for operators (feature `dashboard`, on axum): every breaker's state, counts
//! and recent changes on one self-contained page, the same as JSON for scripts, the
//! Prometheus metrics, and manual controls behind a token, all from one [`Dashboard`]
//! turned into an [`axum::Router`].
//!
//! # Routes
//!
//! At the root with [`Dashboard::router`]; under a prefix with [`Dashboard::router_at`]
//! (`router_at("/status")`: the page at `/status` and `/status/`, the JSON at
//! `/status/breakers`, and so on). The metrics alone, at a path of your choosing:
//! [`metrics()`].
//!
//! | route | answers |
//! |---|---|
//! | `GET /` | one HTML page, rendered on the server and refreshed in place by a small inline script: a row per breaker (open and half-open first), its recent states as a bar, a row per pool with its own figures, the recent changes; `?filter=text` keeps the breakers whose names contain `text` (the pools' rows stay) |
//! | `GET /breakers` | the breakers as JSON (below) |
//! | `GET /pools` | the pools' own figures as JSON (below) |
//! | `GET /metrics` | the metrics of [`BreakerCollector`], in the OpenMetrics text format |
//! | `POST /breakers/{name}/force_open`, `…/force_closed`, `…/release` | only with [`Dashboard::controls`]: [`Breaker::force_open`](lazybreaker::Breaker::force_open), [`force_closed`](lazybreaker::Breaker::force_closed), [`release`](lazybreaker::Breaker::release); `200` with the breaker's JSON object after it, `401` without `Authorization: Bearer …`, `403` with another token, `404` for a name no breaker has, `409` for a name more than one has (nothing changed) |
//!
//! **The page is self-contained**: its styles and script are inline and it loads nothing
//! else (no fonts, scripts or images from anywhere; its `Content-Security-Policy` forbids
//! it), so it works inside a network with no internet. It reads without JavaScript; with
//! it, the board refreshes every two seconds ([`Dashboard::refresh`]), the filter works as
//! you type, and the controls have buttons (the token is typed into the page and kept for
//! the tab's session only).
//!
//! **Recent changes come from [`History`]**: a breaker whose observer keeps one (directly or
//! beside another observer, see [`Observer::history`]) has
//! its changes drawn and listed; histories given with [`Dashboard::history`] are listed too.
//! Every control through the dashboard is recorded in the breaker's history as
//! [`Origin::Manual`](lazybreaker::observe::Origin::Manual), one that changed only the forced
//! mode (say, forcing a closed breaker closed) as a change from a state to itself.
//!
//! **The page belongs behind the service's own authentication.** It lists every breaker's
//! name, which often names internal hosts and methods; mount it on an internal port or
//! behind the middleware that guards your other admin routes. The controls' token guards
//! only the controls: it is compared in constant time, is never put in the page, and since
//! browsers never send it on their own, another site cannot make a browser use the controls.
//!
//! Breaker and pool names are untrusted text: they are escaped in the HTML, in the JSON and
//! in the metrics' labels.
//!
//! # JSON
//!
//! `GET /breakers` answers an array with an object per breaker, in the page's order. Each
//! object has the fields of its [`Snapshot`](lazybreaker::Snapshot) as serde writes them (`name`,
//! `at`, `state` as `"closed"`, `"half-open"` or `"open"`, `forced` as `null`, `"open"` or
//! `"closed"`, `dry_run`, `counts`, `totals` (with `would_reject`), `retry_after` as a duration string or `null`,
//! `transitions`, `times_opened`, `recent_failures`, `policy`), then `at_ms` and
//! `retry_after_ms` (below), `pool` (the pool it is
//! an endpoint of, if any), `policy_panicked` (only when true) and `history`: its recent
//! changes, oldest first, each a [`Recorded`](lazybreaker::observe::Recorded) (`seq`, `breaker`,
//! `from`, `to`, `at`, `wall` in milliseconds since the Unix epoch, `origin` as
//! `"breaker"`, `"manual"`, `"adopted"` or `"health_check"`, or for an endpoint its pool
//! ejected as `{"ejected": reason}` with `"success_rate"`, `"failure_percentage"` or
//! `"hung"`, `counts`, `totals`, `open_for`, `forced`, `dry_run`, `times`, `first_at`,
//! `since`), then `at_ms`, `open_for_ms` and `first_at_ms`.
//!
//! `GET /pools` answers an array with an object per pool given with [`Dashboard::pool`], in
//! the order given: `name` (empty if the pool is unnamed), then the fields of its
//! [`PoolSummary`](lazybreaker::pool::PoolSummary), read at the request: `endpoints`,
//! `isolated` (breakers open as the next pick finds them), `ejected` (of those, ejected by the
//! pool, the ejection running), `down` (of those, out on their own evidence: a failed health
//! check, a hang), `in_flight`, `warming` (ramping up after coming back: [`Pool::slow_start`](lazybreaker::pool::Pool::slow_start)), `at_limit` (endpoints at their adaptive concurrency limit: [`Pool::limit`](lazybreaker::pool::Pool::limit)), and `stats`, its
//! [`PoolStats`](lazybreaker::pool::PoolStats): `picks`, `over_cap`, `over_cap_successes`,
//! `over_cap_failures`, `no_endpoint`, `overloaded`, `outliers_detected`,
//! `ejected_success_rate`, `ejected_failure_percentage`, `ejected_hung`, `retries`,
//! `retries_budget_denied`, `retries_exhausted`, `retries_throttled` ([`Pool::retry`](lazybreaker::pool::Pool::retry)),
//! `hedges`, `hedges_won`, `hedges_cancelled`, `hedges_budget_denied` ([`Pool::hedge`](lazybreaker::pool::Pool::hedge)),
//! `limited`, `limit_skips` ([`Pool::limit`](lazybreaker::pool::Pool::limit)). A pool whose figures
//! could not be read (its clock panicked) has `name` and `"unreadable": true` only.
//!
//! **Durations, one rule everywhere.** Every duration is written twice, under two names:
//! `x`, a duration string of full precision as the core's serde writes it and as
//! configuration files read it (`"30s"`, `"1m"`, `"2s 512ms 108ns"`; `null` where there is
//! none), and `x_ms` beside it, whole milliseconds as an integer (`null` where `x` is),
//! rounded as the page rounds them ([`lazybreaker::human`]): a wait (`retry_after`) up, so
//! that a script that waits that long is never early, any other duration to the nearest.
//! They are a breaker's `at` / `at_ms` and `retry_after` / `retry_after_ms`, and a recent
//! change's `at` / `at_ms`, `open_for` / `open_for_ms` and `first_at` / `first_at_ms`
//! (`/pools` has none). Instants of the wall clock are not durations: `wall` and `since`
//! are milliseconds since the Unix epoch. A breaker's `policy` holds its policy's own
//! figures as they are reported ([`TripPolicy::gauges`]), each a number named with its unit
//! as in the metrics (`ema_long_latency_us`, `ema_isolation_seconds`). The rule is the one of
//! every JSON the workspace emits: `docs/integrations.md`, "Durations in JSON".
//!
//! Fields may be added; none is removed or changes its meaning.
//!
//! # A breaker's user code
//!
//! The page is for monitoring, as a scrape is: a breaker whose clock panics is left out of
//! it (and counted as unreadable), one whose policy's figures panic is shown without them, a
//! pool whose clock panics is shown without its own figures, and the panic ends there
//! instead of taking the page down (see [`lazybreaker::prometheus`]). A control whose observers panic when told of the change has
//! still taken effect, and answers `500`.
//!
//! # Examples
//!
//! ```
//! use lazybreaker_dashboard::Dashboard;
//! use lazybreaker::observe::History;
//! use lazybreaker::{Breaker, Registry};
//! use std::sync::Arc;
//! # use http_body_util::BodyExt;
//! # use tower::ServiceExt;
//!
//! let history = Arc::new(History::new(256));
//! let h = Arc::clone(&history);
//! let hosts = Arc::new(Registry::new(move |_: &String| {
//!     Breaker::builder().observer(Arc::clone(&h))
//! }));
//! let payments = Arc::new(Breaker::builder().name("payments").observer(Arc::clone(&history)).build());
//! payments.force_open();
//!
//! let app = axum::Router::new().merge(
//!     Dashboard::new()
//!         .registry(Arc::clone(&hosts))
//!         .breaker(Arc::clone(&payments))
//!         .controls("a long random token")
//!         .router_at("/status"),
//! );
//! // axum::serve(listener, app) on an internal address, behind your admin authentication.
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! # let get = |uri: &'static str| {
//! #     let app = app.clone();
//! #     async move {
//! #         let request = http::Request::get(uri).body(axum::body::Body::empty()).unwrap();
//! #         let response = app.oneshot(request).await.unwrap();
//! #         let bytes = response.into_body().collect().await.unwrap().to_bytes();
//! #         String::from_utf8(bytes.to_vec()).unwrap()
//! #     }
//! # };
//! # let json: serde_json::Value = serde_json::from_str(&get("/status/breakers").await).unwrap();
//! # assert_eq!(json[0]["name"], "payments");
//! # assert_eq!(json[0]["forced"], "open");
//! # assert_eq!(json[0]["history"][0]["origin"], "manual");
//! # assert!(get("/status").await.contains("payments"));
//! # assert!(get("/status/").await.contains("payments"));
//! # });
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, StatusCode};

use lazybreaker::observe::{History, Observer};
use lazybreaker::policy::TripPolicy;
use lazybreaker::pool::Pool;
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::Breaker;
use lazybreaker::Registry;

mod guard;
mod json;
mod metrics;
mod page;
mod source;

pub use metrics::metrics;

use source::{Control, PoolSource, Source};

/// The page's content security policy: nothing from anywhere else, its own inline style and
/// script only, requests to its own origin only, never framed.
const PAGE_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A status page over breakers, registries and pools: see the [module documentation](self)
/// for its routes, its JSON and what it asks of its deployment.
///
/// Build it like a [`BreakerCollector`], then take its routes: [`router_at`](Dashboard::router_at)
/// to mount them under a prefix of an application's router (the page at both `/status` and
/// `/status/`), or [`router`](Dashboard::router) to serve them at the root. For the metrics
/// alone at a path of your choosing, see [`metrics()`].
pub struct Dashboard {
    sources: Vec<Source>,
    pools: Vec<PoolSource>,
    histories: Vec<Arc<History>>,
    collector: BreakerCollector,
    token: Option<String>,
    title: String,
    refresh: Duration,
}

impl Default for Dashboard {
    fn default() -> Self {
        Self {
            sources: Vec::new(),
            pools: Vec::new(),
            histories: Vec::new(),
            collector: BreakerCollector::new(),
            token: None,
            title: "Circuit breakers".to_owned(),
            refresh: Duration::from_secs(2),
        }
    }
}

impl Dashboard {
    /// A dashboard of no breakers yet, without controls.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also shows `breaker`.
    #[must_use]
    pub fn breaker<P, O>(mut self, breaker: Arc<Breaker<P, O>>) -> Self
    where
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.collector = self.collector.breaker(Arc::clone(&breaker));
        self.sources.push(source::breaker(breaker));
        self
    }

    /// Also shows every breaker `registry` holds, at each request.
    #[must_use]
    pub fn registry<K, P, O, S>(mut self, registry: Arc<Registry<K, P, O, S>>) -> Self
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
        S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
    {
        self.collector = self.collector.registry(Arc::clone(&registry));
        self.sources.push(source::registry(registry));
        self
    }

    /// Also shows the breaker of every endpoint `pool` has, at each request (each named
    /// after its key, with the pool's name beside it), and the pool's own figures
    /// ([`Pool::summary`]: its endpoints, how many are isolated, ejected and down, its picks
    /// in flight and its counts) as a line of the page's pools and an object of
    /// `GET /pools`; the metrics get the pool's series. Name it ([`Pool::named`]) to tell
    /// pools apart.
    #[must_use]
    pub fn pool<K, P, O>(mut self, pool: Arc<Pool<K, P, O>>) -> Self
    where
        K: Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.collector = self.collector.pool(Arc::clone(&pool));
        self.sources.push(source::pool(Arc::clone(&pool)));
        self.pools.push(source::pool_figures(pool));
        self
    }

    /// Also lists the changes `history` keeps, whichever breakers they are of (breakers
    /// whose observer keeps a history need not be given it: it is found through them).
    #[must_use]
    pub fn history(mut self, history: Arc<History>) -> Self {
        self.histories.push(history);
        self
    }

    /// Turns the controls on, guarded by `token`: see the [module documentation](self). An
    /// empty token lets no request through.
    #[must_use]
    pub fn controls(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The page's title (and heading); the default is "Circuit breakers".
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// How often the page's script refreshes the board; the default is two seconds, and
    /// zero turns the refresh off. A browser keeps a timer's delay in 32 bits: a period
    /// longer than that (about 24.8 days, `Duration::MAX` included) is held at it, never
    /// wrapped into a refresh that fires at once.
    #[must_use]
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every;
        self
    }

    /// The routes under `prefix`, as an [`axum::Router`] with no state left to provide, to
    /// [`merge`](axum::Router::merge) into an application's router: at `"/status"` the page
    /// answers at both `/status` and `/status/`, the JSON at `/status/breakers`, the metrics
    /// at `/status/metrics`, and so on (the [routes](self#routes) with the prefix before them).
    ///
    /// The prefix is read as a path whatever its slashes: `"status"`, `"/status"` and
    /// `"/status/"` are one prefix, and `""` or `"/"` is the root ([`router`](Dashboard::router)).
    /// It is [`nest_service`](axum::Router::nest_service) at the prefix: axum's
    /// [`nest`](axum::Router::nest) of [`router`](Dashboard::router) answers the page at
    /// `/status` only, `/status/` with `404`.
    ///
    /// # Panics
    ///
    /// As [`nest_service`](axum::Router::nest_service) does, if `prefix` holds a wildcard
    /// (`{*rest}`). Merging it into a router that already has a route under the prefix panics
    /// as any conflicting [`merge`](axum::Router::merge) does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use lazybreaker::Breaker;
    /// use lazybreaker_dashboard::Dashboard;
    /// use std::sync::Arc;
    ///
    /// #[tokio::main]
    /// async fn main() -> std::io::Result<()> {
    ///     let payments = Arc::new(Breaker::builder().name("payments").build());
    ///     let app = axum::Router::new()
    ///         .route("/", axum::routing::get(|| async { "the application" }))
    ///         .merge(Dashboard::new().breaker(payments).router_at("/status"));
    ///     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    ///     axum::serve(listener, app).await // the page at /status and /status/
    /// }
    /// ```
    #[track_caller]
    pub fn router_at(self, prefix: &str) -> Router {
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            return self.router();
        }
        Router::new().nest_service(&format!("/{prefix}"), self.router())
    }

    /// The routes at the root, as an [`axum::Router`] with no state left to provide: to serve
    /// on its own, or under a prefix with [`router_at`](Dashboard::router_at).
    pub fn router(self) -> Router {
        let mut metrics = prometheus_client::registry::Registry::default();
        metrics.register_collector(Box::new(self.collector));
        let controls = self.token.is_some();
        let shared = Arc::new(Shared {
            sources: self.sources,
            pools: self.pools,
            histories: self.histories,
            token: self.token.unwrap_or_default(),
            look: page::Look {
                title: self.title,
                refresh_ms: refresh_ms(self.refresh),
                controls,
            },
        });
        let mut router = Router::new()
            .route("/", get(index))
            .route("/breakers", get(breakers))
            .route("/pools", get(pools))
            .route("/metrics", metrics::route(Arc::new(metrics)));
        if controls {
            router = router
                .route(
                    "/breakers/{name}/force_open",
                    post(|s, h, n| control(s, h, n, Control::ForceOpen)),
                )
                .route(
                    "/breakers/{name}/force_closed",
                    post(|s, h, n| control(s, h, n, Control::ForceClosed)),
                )
                .route(
                    "/breakers/{name}/release",
                    post(|s, h, n| control(s, h, n, Control::Release)),
                );
        }
        router.with_state(shared)
    }
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("sources", &self.sources.len())
            .field("pools", &self.pools.len())
            .field("histories", &self.histories.len())
            .field("controls", &self.token.is_some())
            .field("title", &self.title)
            .field("refresh", &self.refresh)
            .finish()
    }
}

/// What the routes share.
struct Shared {
    sources: Vec<Source>,
    pools: Vec<PoolSource>,
    histories: Vec<Arc<History>>,
    /// The controls' token (empty without controls: their routes are then not there).
    token: String,
    look: page::Look,
}

impl Shared {
    fn board(&self) -> source::Board {
        source::read(&self.sources, &self.pools, &self.histories)
    }
}

/// `?filter=`.
#[derive(Debug, serde::Deserialize)]
struct Filter {
    #[serde(default)]
    filter: String,
}

/// A response with `body` as `content_type`, never cached.
fn answer(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

const JSON: &str = "application/json";

/// A JSON error: `{"error": "…"}`.
fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    answer(status, JSON, body)
}

async fn index(State(shared): State<Arc<Shared>>, Query(filter): Query<Filter>) -> Response {
    let html = page::render(&shared.board(), &shared.look, filter.filter.trim());
    let mut response = answer(StatusCode::OK, "text/html; charset=utf-8", html);
    let headers = response.headers_mut();
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(PAGE_POLICY),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

async fn breakers(State(shared): State<Arc<Shared>>) -> Response {
    answer(StatusCode::OK, JSON, json::board(&shared.board()))
}

async fn pools(State(shared): State<Arc<Shared>>) -> Response {
    answer(
        StatusCode::OK,
        JSON,
        json::pools(&source::read_pools(&shared.pools)),
    )
}

async fn control(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    what: Control,
) -> Response {
    if let Err(status) = guard::check(&headers, &shared.token) {
        let mut response = error(
            status,
            if status == StatusCode::UNAUTHORIZED {
                "the controls need `Authorization: Bearer <token>`"
            } else {
                "wrong token"
            },
        );
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        return response;
    }
    if source::named(&shared.sources, &name) > 1 {
        return error(
            StatusCode::CONFLICT,
            "more than one breaker has that name: a control would act on one of them only; \
             give each breaker a name of its own",
        );
    }
    let Some(done) = source::control(&shared.sources, &name, what) else {
        return error(StatusCode::NOT_FOUND, "no breaker has that name");
    };
    match (done.row, done.panicked) {
        (Some(row), false) => answer(StatusCode::OK, JSON, json::row(&row)),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!(
                "{} took effect, but the breaker's own code (an observer or its clock) panicked",
                what.as_str()
            ),
        ),
    }
}

/// The page's refresh period in milliseconds, at most what a browser's timer holds
/// (2³¹ − 1 ms: a longer delay wraps, and the timer fires at once, again and again).
fn refresh_ms(every: Duration) -> u64 {
    const LONGEST_TIMER_MS: u64 = i32::MAX as u64;
    u64::try_from(every.as_millis()).map_or(LONGEST_TIMER_MS, |ms| ms.min(LONGEST_TIMER_MS))
}
