//! Every HTTP recipe the documentation shows, followed literally, against a real server on
//! 127.0.0.1: each must count a refused connection, a 5xx and a hang (the deadline inside)
//! as failures, and trip the breaker. Also the upstream's `Retry-After` through the tower
//! layer, and fallback answers in an axum `Router` (served 503 + `Retry-After`, counted as
//! the rejections they are, never fed back as outcomes).
//!
//! The breaker's time is a `ManualClock`; the only real time is the deadline on a hung
//! request (`DEADLINE`, short) and the bound on each test (`BOUND`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, Request, Response, StatusCode, Uri};
use axum::routing::get;
use axum::Router;
use http_body_util::Empty;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::classify::deadline;
use lazybreaker::http::{rejected_response, StatusRules};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Registry, State};
use lazybreaker_test_support::{refused, Upstream, BUSY, BUSY_RETRY_AFTER_SECS, FAIL, HANG, OK};
use lazybreaker_tower::{BreakerLayer, KeyedBreakerLayer};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

/// How long a request to the hung server waits before its deadline ends it.
const DEADLINE: Duration = Duration::from_millis(50);
/// The most any test may take; it fails rather than wait longer.
const BOUND: Duration = Duration::from_secs(20);
/// The breaker's open period (on the manual clock).
const OPEN_FOR: Duration = Duration::from_secs(30);
/// Consecutive failures that trip the breaker.
const TRIP_AFTER: usize = 3;
/// The upstream's `Retry-After` when it asks for time.
const BACK_OFF_SECS: u64 = BUSY_RETRY_AFTER_SECS;

/// Serves `app` on a free loopback port until the runtime is dropped.
async fn serve(app: Router) -> Uri {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/").parse().unwrap()
}

async fn serve_upstream(upstream: Upstream) -> Uri {
    format!("http://{}/", upstream.serve().await)
        .parse()
        .unwrap()
}

/// A loopback address nothing listens on: connecting is refused.
fn refused_uri() -> Uri {
    format!("http://{}/", refused()).parse().unwrap()
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get_request(uri: &Uri) -> Request<Empty<Bytes>> {
    Request::get(uri.clone()).body(Empty::new()).unwrap()
}

fn breaker(clock: &ManualClock) -> Arc<Breaker> {
    Arc::new(
        Breaker::builder()
            .name("upstream")
            .policy(ConsecutiveFailures::new(TRIP_AFTER as u64).unwrap())
            .timeout(OPEN_FOR)
            .clock(clock.clone())
            .build(),
    )
}

/// Runs a test on its own runtime (the servers with it), bounded by [`BOUND`].
fn run<F: Future<Output = ()>>(test: F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(BOUND, test)
            .await
            .expect("the test finished within its bound");
    });
}

/// One documented recipe: makes one call to `uri` through `breaker`, and says whether the
/// breaker rejected it.
type Recipe = fn(Arc<Breaker>, Uri) -> Pin<Box<dyn Future<Output = bool>>>;

/// The tower recipe: the breaker with the HTTP classifier, the deadline inside it.
fn tower_recipe(breaker: Arc<Breaker>, uri: Uri) -> Pin<Box<dyn Future<Output = bool>>> {
    Box::pin(async move {
        let mut service = ServiceBuilder::new()
            .layer(BreakerLayer::new(breaker).classify(StatusRules::new()))
            .timeout(DEADLINE)
            .service(client());
        let result = service.ready().await.unwrap().call(get_request(&uri)).await;
        matches!(result, Err(Error::Rejected(_)))
    })
}

/// The async recipe: the deadline inside the call, classified by `classify::deadline` over
/// the HTTP rules.
fn execute_async_recipe(breaker: Arc<Breaker>, uri: Uri) -> Pin<Box<dyn Future<Output = bool>>> {
    Box::pin(async move {
        let client = client();
        let result = breaker
            .execute_async_with(
                || tokio::time::timeout(DEADLINE, client.request(get_request(&uri))),
                deadline(StatusRules::new()),
            )
            .await;
        matches!(result, Err(Error::Rejected(_)))
    })
}

/// The axum recipe: a gateway route that calls the upstream with a deadline and passes its
/// status on (504 when the deadline passed, 502 when the upstream could not be reached),
/// behind a breaker that classifies the route's responses and answers with a fallback.
fn router_recipe(breaker: Arc<Breaker>, uri: Uri) -> Pin<Box<dyn Future<Output = bool>>> {
    Box::pin(async move {
        let gateway = gateway(breaker, uri).await;
        let response = client().request(get_request(&gateway)).await.unwrap();
        response.status() == StatusCode::SERVICE_UNAVAILABLE
            && response.headers().contains_key(header::RETRY_AFTER)
    })
}

/// The gateway of [`router_recipe`]: serves `/` by calling `upstream`.
async fn gateway(breaker: Arc<Breaker>, upstream: Uri) -> Uri {
    let proxy = move || {
        let upstream = upstream.clone();
        async move {
            match tokio::time::timeout(DEADLINE, client().request(get_request(&upstream))).await {
                Ok(Ok(response)) => response.status(),
                Ok(Err(_)) => StatusCode::BAD_GATEWAY,
                Err(_) => StatusCode::GATEWAY_TIMEOUT,
            }
        }
    };
    let app = Router::new().route("/", get(proxy)).layer(
        BreakerLayer::new(breaker)
            .classify(StatusRules::new())
            .fallback(rejected_response),
    );
    serve(app).await
}

const RECIPES: [(&str, Recipe); 3] = [
    ("tower layer, timeout inside", tower_recipe),
    (
        "execute_async with classify::deadline",
        execute_async_recipe,
    ),
    ("axum Router with a fallback", router_recipe),
];

/// Drives `recipe` against a dependency that fails in one way: it must trip within
/// [`TRIP_AFTER`] calls, and then reject without reaching the upstream.
async fn trips_on(name: &str, recipe: Recipe, uri: Uri, upstream: Option<&Upstream>) {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    for _ in 0..TRIP_AFTER {
        assert!(
            !recipe(Arc::clone(&breaker), uri.clone()).await,
            "{name}: rejected before it tripped"
        );
        if breaker.state() == State::Open {
            break;
        }
    }
    assert_eq!(breaker.state(), State::Open, "{name}: tripped");
    let hits = upstream.map(Upstream::hits);
    assert!(
        recipe(Arc::clone(&breaker), uri.clone()).await,
        "{name}: open, it rejects"
    );
    assert_eq!(
        upstream.map(Upstream::hits),
        hits,
        "{name}: a rejection sends nothing"
    );
    assert_eq!(breaker.counts().total_successes, 0, "{name}: no success");
}

#[test]
fn every_recipe_trips_on_a_refused_connection() {
    run(async {
        for (name, recipe) in RECIPES {
            trips_on(name, recipe, refused_uri(), None).await;
        }
    });
}

#[test]
fn every_recipe_trips_on_server_errors() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve_upstream(upstream.clone()).await;
        upstream.set(FAIL);
        for (name, recipe) in RECIPES {
            trips_on(name, recipe, uri.clone(), Some(&upstream)).await;
        }
    });
}

#[test]
fn every_recipe_trips_on_a_hung_server() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve_upstream(upstream.clone()).await;
        upstream.set(HANG);
        for (name, recipe) in RECIPES {
            trips_on(name, recipe, uri.clone(), Some(&upstream)).await;
        }
    });
}

#[test]
fn every_recipe_counts_a_healthy_upstream_as_successes() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve_upstream(upstream.clone()).await;
        for (name, recipe) in RECIPES {
            let clock = ManualClock::new();
            let breaker = breaker(&clock);
            for _ in 0..TRIP_AFTER + 1 {
                assert!(!recipe(Arc::clone(&breaker), uri.clone()).await, "{name}");
            }
            assert_eq!(breaker.state(), State::Closed, "{name}");
            let counts = breaker.counts();
            assert_eq!(
                (counts.total_successes, counts.total_failures),
                (TRIP_AFTER as u64 + 1, 0),
                "{name}"
            );
        }
    });
}

/// A refused connection under the tower recipe (a boxed error around the socket's) is fatal:
/// one call opens the breaker.
#[test]
fn a_refused_connection_opens_the_tower_recipe_at_once() {
    run(async {
        let clock = ManualClock::new();
        let breaker = breaker(&clock);
        assert!(!tower_recipe(Arc::clone(&breaker), refused_uri()).await);
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().failures, 1);
    });
}

/// The upstream asks for two minutes: with `honor_retry_after`, one 503 opens the breaker
/// for exactly that long (not the policy's three failures, not its 30 s), the upstream sees
/// one request instead of four, and a probe goes through once the two minutes are over.
#[test]
fn the_upstreams_retry_after_opens_the_tower_layer_for_that_long() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve_upstream(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock);
        let mut service = ServiceBuilder::new()
            .layer(
                BreakerLayer::new(Arc::clone(&breaker))
                    .classify(StatusRules::new().honor_retry_after()),
            )
            .timeout(DEADLINE)
            .service(client());
        upstream.set(BUSY);
        let first = service.ready().await.unwrap().call(get_request(&uri)).await;
        assert_eq!(first.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            breaker.state(),
            State::Open,
            "one 503 + Retry-After opens it"
        );
        for _ in 0..3 {
            let again = service.ready().await.unwrap().call(get_request(&uri)).await;
            let retry_after = again.unwrap_err().rejection().unwrap().retry_after();
            assert_eq!(
                retry_after,
                Some(Duration::from_secs(BACK_OFF_SECS)),
                "open for the upstream's two minutes (the manual clock has not moved)"
            );
        }
        assert_eq!(upstream.hits(), 1, "the upstream saw one request, not four");

        clock.advance(Duration::from_secs(BACK_OFF_SECS - 1));
        assert_eq!(breaker.state(), State::Open, "still within the two minutes");
        clock.advance(Duration::from_secs(2));
        upstream.set(OK);
        let probe = service.ready().await.unwrap().call(get_request(&uri)).await;
        assert_eq!(probe.unwrap().status(), StatusCode::OK);
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(upstream.hits(), 2);
    });
}

/// Without `honor_retry_after` the header changes nothing: the policy decides.
#[test]
fn without_honor_retry_after_the_header_is_ignored() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve_upstream(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock);
        let mut service = ServiceBuilder::new()
            .layer(BreakerLayer::new(Arc::clone(&breaker)).classify(StatusRules::new()))
            .service(client());
        upstream.set(BUSY);
        let _ = service.ready().await.unwrap().call(get_request(&uri)).await;
        assert_eq!(breaker.state(), State::Closed, "one failure of three");
    });
}

/// A fallback in an axum `Router`: while open, the route answers 503 with `Retry-After` in
/// whole seconds; each answer is counted as a rejection, and none reaches the breaker as an
/// outcome (the counts and the state are unchanged by them).
#[test]
fn a_fallback_answers_while_open_and_is_counted_as_a_rejection() {
    run(async {
        let upstream = Upstream::default();
        let upstream_uri = serve_upstream(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock);
        let gateway = gateway(Arc::clone(&breaker), upstream_uri).await;

        upstream.set(FAIL);
        for _ in 0..TRIP_AFTER {
            let response = client().request(get_request(&gateway)).await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        assert_eq!(breaker.state(), State::Open);
        let before = (breaker.counts(), breaker.totals());
        for _ in 0..5 {
            let response = client().request(get_request(&gateway)).await.unwrap();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        }
        let (counts, totals) = (breaker.counts(), breaker.totals());
        assert_eq!(counts, before.0, "no fallback answer is an outcome");
        assert_eq!(totals.rejected_open, before.1.rejected_open + 5);
        assert_eq!(
            (totals.failures, totals.successes),
            (before.1.failures, before.1.successes)
        );
        assert_eq!(upstream.hits(), TRIP_AFTER, "nothing reached the upstream");
        assert_eq!(breaker.state(), State::Open);
    });
}

/// The keyed layer's fallback: each key has its own breaker, and the open one answers with
/// the fallback while the other keys pass; without a fallback, its error names the key.
#[test]
fn the_keyed_layers_fallback_answers_per_key() {
    run(async {
        let clock = ManualClock::new();
        let registry = Arc::new(
            Registry::new(|_: &String| {
                Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap())
            })
            .clock(clock.clone()),
        );
        let inner = tower::service_fn(|path: &'static str| async move {
            let status = if path == "/broken" { 500 } else { 200 };
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let mut service = KeyedBreakerLayer::new(Arc::clone(&registry), |p: &&str| p.to_string())
            .classify(StatusRules::new())
            .fallback(rejected_response::<()>)
            .layer(inner);
        async fn status<S>(service: &mut S, path: &'static str) -> StatusCode
        where
            S: Service<&'static str, Response = Response<()>>,
            S::Error: std::fmt::Debug,
        {
            let ready = service.ready().await.unwrap();
            ready.call(path).await.unwrap().status()
        }
        assert_eq!(
            status(&mut service, "/broken").await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            status(&mut service, "/broken").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status(&mut service, "/fine").await, StatusCode::OK);
        assert_eq!(registry.breaker("/broken").totals().rejected_open, 1);

        let mut failing = KeyedBreakerLayer::new(Arc::clone(&registry), |p: &&str| p.to_string())
            .classify(StatusRules::new())
            .layer(inner);
        let err = failing
            .ready()
            .await
            .unwrap()
            .call("/broken")
            .await
            .unwrap_err();
        assert_eq!(
            err.rejection().map(|r| r.retry_after().is_some()),
            Some(true)
        );
        assert!(
            err.to_string()
                .starts_with("circuit breaker `/broken` is open"),
            "{err}"
        );
    });
}
