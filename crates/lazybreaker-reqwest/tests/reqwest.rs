//! The reqwest middleware against real HTTP servers on 127.0.0.1: an axum upstream per
//! test (two for the per-host test), reqwest's client with `BreakerMiddleware` in front.
//!
//! The breakers' time is a `ManualClock`; the only real time is the client's deadline on a
//! request to a hung server (`DEADLINE`, short) and the bound on each test (`BOUND`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;

use http::Extensions;
use lazybreaker::http::StatusRules;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, ManualClock, Registry, Rejected, RejectedBy, State};
use lazybreaker_reqwest::{rejection, BreakerMiddleware};
use lazybreaker_test_support::{body, refused, Upstream, BUSY, FAIL, HANG, NOT_FOUND, OK};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

/// How long a request to the hung server waits before the client's timeout ends it.
const DEADLINE: Duration = Duration::from_millis(100);
/// The most any test may take; it fails rather than wait longer.
const BOUND: Duration = Duration::from_secs(10);
/// The client's timeout where the server does not hang on purpose.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The breakers' open period (on the manual clock).
const OPEN_FOR: Duration = Duration::from_secs(30);
/// Consecutive failures that trip a breaker.
const TRIP_AFTER: u64 = 3;

/// Serves `upstream` on a free loopback port until the runtime is dropped.
async fn serve(upstream: &Upstream) -> SocketAddr {
    upstream.serve().await
}

/// Breakers that trip after [`TRIP_AFTER`] consecutive failures and stay open
/// [`OPEN_FOR`], on `clock`.
fn registry(clock: &ManualClock) -> Arc<Registry<String>> {
    Arc::new(
        Registry::new(|_: &String| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(TRIP_AFTER).unwrap())
                .timeout(OPEN_FOR)
        })
        .clock(clock.clone()),
    )
}

/// reqwest's client with `timeout`, no proxy, and `middleware` in front.
fn client_with(middleware: impl Middleware, timeout: Duration) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .unwrap();
    ClientBuilder::new(client).with(middleware).build()
}

fn client(registry: &Arc<Registry<String>>) -> ClientWithMiddleware {
    client_with(BreakerMiddleware::new(Arc::clone(registry)), CLIENT_TIMEOUT)
}

/// Runs a test on its own runtime (the servers with it), bounded by [`BOUND`]; dropping the
/// runtime stops the servers and cancels their hung handlers.
fn run<F: std::future::Future<Output = ()>>(test: F) {
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

/// The breaker's rejection in `result`, which must be one.
fn rejected(result: reqwest_middleware::Result<reqwest::Response>) -> RejectedBy {
    let err = result.expect_err("rejected");
    assert!(err.is_middleware(), "{err:?}");
    rejection(&err).expect("a rejection").clone()
}

/// The open period as a rejection right after opening reports it: exactly `open_for`.
fn assert_retry_after(rejected: &RejectedBy, open_for: Duration) {
    assert_eq!(rejected.retry_after(), Some(open_for));
}

#[test]
fn each_host_has_its_own_breaker() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        let (failing, healthy) = (Upstream::default(), Upstream::default());
        failing.set(FAIL);
        let (a, b) = (serve(&failing).await, serve(&healthy).await);

        for _ in 0..TRIP_AFTER {
            let response = client.get(format!("http://{a}/")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let response = client.get(format!("http://{b}/")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
        }
        let rejected = rejected(client.get(format!("http://{a}/")).send().await);
        assert_eq!(rejected.breaker(), format!("127.0.0.1:{}", a.port()));
        let response = client.get(format!("http://{b}/x")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        assert_eq!(registry.len(), 2);
        let key_a = format!("127.0.0.1:{}", a.port());
        let key_b = format!("127.0.0.1:{}", b.port());
        assert_eq!(registry.get(&key_a).unwrap().state(), State::Open);
        let healthy_breaker = registry.get(&key_b).unwrap();
        assert_eq!(healthy_breaker.state(), State::Closed);
        assert_eq!(healthy_breaker.counts().total_successes, TRIP_AFTER + 1);
        assert_eq!((failing.hits(), healthy.hits()), (3, 4));
    });
}

#[test]
fn a_refused_connection_trips_the_breaker_at_once() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        // A port nothing listens on: bound, then closed.
        let refused = refused();
        let port = refused.port();
        let url = format!("http://{refused}/");

        let err = client.get(&url).send().await.unwrap_err();
        match &err {
            reqwest_middleware::Error::Reqwest(e) => assert!(e.is_connect(), "{e:?}"),
            other => panic!("reqwest's own error, unchanged: {other:?}"),
        }
        let breaker = registry.get(&format!("127.0.0.1:{port}")).unwrap();
        assert_eq!(breaker.state(), State::Open, "one call, fatal");
        assert_eq!(breaker.totals().failures, 1);

        let rejected = rejected(client.get(&url).send().await);
        assert_eq!(rejected.breaker(), format!("127.0.0.1:{port}"));
    });
}

#[test]
fn server_errors_are_failures_and_not_found_is_excluded() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        let upstream = Upstream::default();
        let addr = serve(&upstream).await;
        let url = format!("http://{addr}/");
        let breaker = registry.breaker(&format!("127.0.0.1:{}", addr.port()));

        upstream.set(NOT_FOUND);
        for _ in 0..TRIP_AFTER + 2 {
            let response = client.get(&url).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::NOT_FOUND);
        }
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(breaker.counts().total_exclusions, TRIP_AFTER + 2);
        assert_eq!(breaker.counts().total_failures, 0);

        upstream.set(FAIL);
        for _ in 0..TRIP_AFTER {
            let response = client.get(&url).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().failures, TRIP_AFTER);
    });
}

#[test]
fn a_hang_ended_by_the_clients_timeout_is_a_failure() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client_with(BreakerMiddleware::new(Arc::clone(&registry)), DEADLINE);
        let upstream = Upstream::default();
        upstream.set(HANG);
        let addr = serve(&upstream).await;
        let url = format!("http://{addr}/");

        for _ in 0..TRIP_AFTER - 1 {
            let err = client.get(&url).send().await.unwrap_err();
            assert!(err.is_timeout(), "{err:?}");
        }
        // The request's own timeout is inside the middleware too.
        let err = client
            .get(&url)
            .timeout(DEADLINE / 2)
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err:?}");

        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().failures, TRIP_AFTER);
        assert_eq!(breaker.totals().abandoned, 0);
        assert_eq!(upstream.hits(), TRIP_AFTER as usize);
    });
}

#[test]
fn an_open_breaker_sends_nothing_and_names_itself() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        let upstream = Upstream::default();
        upstream.set(FAIL);
        let addr = serve(&upstream).await;
        let url = format!("http://{addr}/");
        let name = format!("127.0.0.1:{}", addr.port());

        for _ in 0..TRIP_AFTER {
            client.get(&url).send().await.unwrap();
        }
        assert_eq!(upstream.hits(), TRIP_AFTER as usize);

        for _ in 0..5 {
            let err = client.get(&url).send().await.unwrap_err();
            let rejected = rejection(&err).expect("a rejection");
            assert_eq!(rejected.breaker(), name);
            assert!(matches!(rejected.rejected(), Rejected::Open { .. }));
            assert_retry_after(rejected, OPEN_FOR);
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("circuit breaker `{name}` is open (retry after ")),
                "{message}"
            );
            // The `anyhow` way finds the same rejection.
            let reqwest_middleware::Error::Middleware(inner) = &err else {
                panic!("a middleware error: {err:?}");
            };
            assert_eq!(inner.downcast_ref::<RejectedBy>(), Some(rejected));
        }
        assert_eq!(
            upstream.hits(),
            TRIP_AFTER as usize,
            "no request while open"
        );
        let breaker = registry.get(&name).unwrap();
        assert_eq!(breaker.totals().rejected_open, 5);

        // Past the open period, one probe goes through, and its success closes the breaker.
        clock.advance(OPEN_FOR + Duration::from_millis(1));
        upstream.set(OK);
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(upstream.hits(), TRIP_AFTER as usize + 1);
        assert_eq!(breaker.state(), State::Closed);
    });
}

#[test]
fn retry_after_opens_the_breaker_for_as_long_as_it_says() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let middleware = BreakerMiddleware::new(Arc::clone(&registry))
            .rules(StatusRules::new().honor_retry_after());
        let client = client_with(middleware, CLIENT_TIMEOUT);
        let upstream = Upstream::default();
        upstream.set(BUSY);
        let addr = serve(&upstream).await;
        let url = format!("http://{addr}/");

        // The 503 itself reaches the caller, header and all.
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "120");
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        assert_eq!(breaker.state(), State::Open, "one 503 with Retry-After");

        let rejected = rejected(client.get(&url).send().await);
        assert_retry_after(&rejected, Duration::from_secs(120));
        clock.advance(Duration::from_secs(100)); // past the breaker's own 30 s: still open
        let rejected = rejected_after(&client, &url).await;
        assert_retry_after(&rejected, Duration::from_secs(20));
        assert_eq!(upstream.hits(), 1);

        clock.advance(Duration::from_secs(21));
        upstream.set(OK);
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "the probe went through");
        assert_eq!(upstream.hits(), 2);
        assert_eq!(breaker.state(), State::Closed);
    });
}

async fn rejected_after(client: &ClientWithMiddleware, url: &str) -> RejectedBy {
    rejected(client.get(url).send().await)
}

#[test]
fn the_default_rules_ignore_retry_after() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        let upstream = Upstream::default();
        upstream.set(BUSY);
        let addr = serve(&upstream).await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        assert_eq!(breaker.state(), State::Closed, "a plain failure, 1 of 3");
        assert_eq!(breaker.counts().consecutive_failures, 1);
    });
}

#[test]
fn a_custom_key_makes_a_breaker_per_path() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let middleware = BreakerMiddleware::new(Arc::clone(&registry))
            .key(|request: &reqwest::Request| request.url().path().to_owned());
        let client = client_with(middleware, CLIENT_TIMEOUT);
        let upstream = Upstream::default();
        upstream.set(FAIL);
        let addr = serve(&upstream).await;

        for _ in 0..TRIP_AFTER {
            client.get(format!("http://{addr}/a")).send().await.unwrap();
        }
        let rejected = rejected(client.get(format!("http://{addr}/a")).send().await);
        assert_eq!(rejected.breaker(), "/a");
        // Another path, another breaker: sent.
        let response = client.get(format!("http://{addr}/b")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);

        let mut keys: Vec<String> = registry.breakers().into_iter().map(|(k, _)| k).collect();
        keys.sort();
        assert_eq!(keys, ["/a", "/b"]);
        assert_eq!(registry.get("/a").unwrap().state(), State::Open);
        assert_eq!(registry.get("/b").unwrap().state(), State::Closed);
        assert_eq!(upstream.hits(), TRIP_AFTER as usize + 1);
    });
}

#[test]
fn a_successful_response_comes_back_intact() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry);
        let upstream = Upstream::default();
        let addr = serve(&upstream).await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["x-upstream"], "intact");
        let bytes = response.bytes().await.unwrap();
        assert_eq!(bytes.as_ref(), body().as_slice());
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        assert_eq!(breaker.totals().successes, 1);
    });
}

#[test]
fn a_call_cancelled_around_send_is_abandoned() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = client(&registry); // its own timeout is far off
        let upstream = Upstream::default();
        upstream.set(HANG);
        let addr = serve(&upstream).await;

        let cancelled =
            tokio::time::timeout(DEADLINE, client.get(format!("http://{addr}/")).send()).await;
        assert!(cancelled.is_err(), "the hung call was cancelled");
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        let totals = breaker.totals();
        assert_eq!((totals.abandoned, totals.failures), (1, 0));
        assert_eq!(breaker.state(), State::Closed);
    });
}

/// An inner middleware that fails a request with its own error (header `x-fail`) or panics
/// (header `x-panic`), and passes the others on.
struct Misbehaving;

#[async_trait::async_trait]
impl Middleware for Misbehaving {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        if req.headers().contains_key("x-panic") {
            panic!("an inner middleware blew up");
        }
        if req.headers().contains_key("x-fail") {
            return Err(reqwest_middleware::Error::middleware(
                std::io::Error::other("signing failed"),
            ));
        }
        next.run(req, extensions).await
    }
}

fn misbehaving_client(registry: &Arc<Registry<String>>) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap();
    ClientBuilder::new(client)
        .with(BreakerMiddleware::new(Arc::clone(registry)))
        .with(Misbehaving)
        .build()
}

#[test]
fn an_inner_middlewares_error_is_a_failure_returned_unchanged() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = misbehaving_client(&registry);
        let upstream = Upstream::default();
        let addr = serve(&upstream).await;

        let err = client
            .get(format!("http://{addr}/"))
            .header("x-fail", "1")
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "signing failed");
        assert!(rejection(&err).is_none());
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        assert_eq!(breaker.totals().failures, 1);
        assert_eq!(upstream.hits(), 0);
    });
}

#[test]
fn a_panic_in_an_inner_middleware_is_a_failure_and_keeps_unwinding() {
    run(async {
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = misbehaving_client(&registry);
        let upstream = Upstream::default();
        let addr = serve(&upstream).await;

        // On a task of its own, as a panicking request usually is: tokio catches the panic.
        let task = tokio::spawn(async move {
            let _ = client
                .get(format!("http://{addr}/"))
                .header("x-panic", "1")
                .send()
                .await;
        });
        let joined = task.await.unwrap_err();
        assert!(joined.is_panic(), "the panic reached the task");
        let breaker = registry.get(&format!("127.0.0.1:{}", addr.port())).unwrap();
        let totals = breaker.totals();
        assert_eq!((totals.failures, totals.abandoned), (1, 0));
    });
}

/// A throttle on the per-host breakers: a host that fails every call is sent fewer and
/// fewer of them, the rest turned away as `Rejected::Throttled` naming the host, while the
/// healthy host is never throttled.
#[test]
fn a_per_host_throttle_sheds_the_failing_host_only() {
    run(async {
        let clock = ManualClock::new();
        let registry = Arc::new(
            Registry::new(|_: &String| {
                Breaker::builder().never_trips(true).throttle(
                    lazybreaker::throttle::Throttle::new(2.0)
                        .unwrap()
                        .min_requests(4)
                        .seed(1),
                )
            })
            .clock(clock.clone()),
        );
        let client = client(&registry);
        let (failing, healthy) = (Upstream::default(), Upstream::default());
        failing.set(FAIL);
        let (a, b) = (serve(&failing).await, serve(&healthy).await);
        let mut throttled = 0;
        for _ in 0..40 {
            match client.get(format!("http://{a}/")).send().await {
                Ok(response) => assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR),
                Err(err) => {
                    let rejected = rejection(&err).expect("a rejection");
                    assert_eq!(rejected.breaker(), format!("127.0.0.1:{}", a.port()));
                    let p = rejected
                        .rejected()
                        .throttle_probability()
                        .expect("throttled");
                    assert!(p > 0.0 && p <= 0.9, "{p}");
                    throttled += 1;
                }
            }
            let response = client.get(format!("http://{b}/")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
        }
        assert!(throttled > 10, "{throttled}");
        assert_eq!(failing.hits(), 40 - throttled);
        assert_eq!(healthy.hits(), 40);
        let key_b = format!("127.0.0.1:{}", b.port());
        assert_eq!(registry.get(&key_b).unwrap().totals().rejected_throttled, 0);
    });
}
