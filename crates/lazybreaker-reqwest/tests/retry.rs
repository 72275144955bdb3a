//! The retry middleware against real HTTP servers on 127.0.0.1: a flaky axum upstream per
//! test that fails its first requests as told, then answers 200; `RetryMiddleware` in front
//! of `BreakerMiddleware`, the recommended order.
//!
//! No wall-time waits: the backoff is zero, and a `Retry-After` is either past the deadline
//! (no retry) or in the past. The breakers' time is a `ManualClock`; the only real time is
//! the bound on each test.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::retry::{Retry, RetryBudget, RetryStats};
use lazybreaker::{Breaker, ManualClock, Registry, Rejected, State};
use lazybreaker_reqwest::{rejection, BreakerMiddleware, RetryMiddleware};
use lazybreaker_test_support::{refused, run};
use reqwest::Method;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

/// Consecutive failures that trip a breaker.
const TRIP_AFTER: u64 = 3;
/// The breakers' open period (on the manual clock).
const OPEN_FOR: Duration = Duration::from_secs(30);
/// The client's timeout: no upstream here hangs.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// An upstream whose first `failures` requests get `status` (with `Retry-After` if given),
/// and the rest 200; every method and path alike. Clones share the count.
#[derive(Clone)]
struct Flaky {
    hits: Arc<AtomicUsize>,
    failures: usize,
    status: StatusCode,
    retry_after: Option<&'static str>,
}

impl Flaky {
    fn new(failures: usize, status: StatusCode) -> Self {
        Self {
            hits: Arc::default(),
            failures,
            status,
            retry_after: None,
        }
    }

    fn retry_after(mut self, value: &'static str) -> Self {
        self.retry_after = Some(value);
        self
    }

    /// The requests that reached it so far.
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Serves it on a free loopback port until the runtime is dropped.
    async fn serve(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/", axum::routing::any(answer))
            .route("/{*path}", axum::routing::any(answer))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }
}

async fn answer(Extract(flaky): Extract<Flaky>) -> Response {
    if flaky.hits.fetch_add(1, Ordering::SeqCst) >= flaky.failures {
        return StatusCode::OK.into_response();
    }
    let mut headers = HeaderMap::new();
    if let Some(value) = flaky.retry_after {
        headers.insert("retry-after", HeaderValue::from_static(value));
    }
    (flaky.status, headers).into_response()
}

/// Breakers that trip after `trip_after` consecutive failures and stay open [`OPEN_FOR`],
/// on `clock`.
fn registry(clock: &ManualClock, trip_after: u64) -> Arc<Registry<String>> {
    Arc::new(
        Registry::new(move |_: &String| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(trip_after).unwrap())
                .timeout(OPEN_FOR)
        })
        .clock(clock.clone()),
    )
}

/// At most three attempts, no backoff, a budget that never runs out here.
fn retry() -> Retry {
    Retry::new(3)
        .unwrap()
        .backoff(Duration::ZERO, Duration::ZERO)
        .seed(1)
}

/// The recommended chain: `retry` outermost, then a breaker per host from `registry`.
fn client(retry: RetryMiddleware, registry: &Arc<Registry<String>>) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap();
    ClientBuilder::new(client)
        .with(retry)
        .with(BreakerMiddleware::new(Arc::clone(registry)))
        .build()
}

fn key(addr: SocketAddr) -> String {
    format!("127.0.0.1:{}", addr.port())
}

fn stats(retries: u64, budget_denied: u64, exhausted: u64, past_deadline: u64) -> RetryStats {
    let mut stats = RetryStats::default();
    stats.retries = retries;
    stats.budget_denied = budget_denied;
    stats.exhausted = exhausted;
    stats.past_deadline = past_deadline;
    stats
}

#[test]
fn a_flaky_server_succeeds_on_the_second_attempt() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(flaky.hits(), 2, "two attempts");
        assert_eq!(policy.stats(), stats(1, 0, 0, 0));
        let breaker = registry.breaker(&key(addr));
        let totals = breaker.totals();
        assert_eq!((totals.failures, totals.successes), (1, 1));
        assert_eq!(totals.retries, 1, "counted on the host's breaker");
        assert_eq!(breaker.state(), State::Closed);
    });
}

#[test]
fn a_server_error_is_retried_until_the_attempts_run_out() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER + 1);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(usize::MAX, StatusCode::INTERNAL_SERVER_ERROR);
        let addr = flaky.serve().await;

        let response = client.put(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "the last"
        );
        assert_eq!(flaky.hits(), 3);
        assert_eq!(policy.stats(), stats(2, 0, 1, 0));
        let totals = registry.breaker(&key(addr)).totals();
        assert_eq!((totals.retries, totals.retries_exhausted), (2, 1));
    });
}

#[test]
fn a_post_is_not_retried_unless_its_method_is_allowed() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;
        let url = format!("http://{addr}/");

        let response = client.post(&url).body("once").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(flaky.hits(), 1, "sent once");
        assert_eq!(policy.stats(), RetryStats::default(), "nothing to count");

        // The knob: POST allowed.
        let flaky = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;
        let allowed = RetryMiddleware::new(policy.clone()).methods([Method::POST]);
        let client = self::client(allowed, &registry);
        let response = client
            .post(format!("http://{addr}/"))
            .body("idempotent")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(flaky.hits(), 2);
        assert_eq!(policy.stats().retries, 1);
    });
}

#[test]
fn an_open_breaker_is_not_retried() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(0, StatusCode::OK);
        let addr = flaky.serve().await;
        registry.breaker(&key(addr)).force_open();

        let err = client
            .get(format!("http://{addr}/"))
            .send()
            .await
            .unwrap_err();
        let rejected = rejection(&err).expect("the breaker's rejection, as it is");
        assert_eq!(rejected.breaker(), key(addr));
        assert!(
            matches!(rejected.rejected(), Rejected::ForcedOpen),
            "{rejected:?}"
        );
        assert_eq!(flaky.hits(), 0, "nothing sent");
        assert_eq!(policy.stats(), RetryStats::default());
        assert_eq!(policy.retry_budget().balance(), 100, "nothing spent");
    });
}

#[test]
fn the_failure_that_trips_the_breaker_is_not_retried() {
    run(async {
        let registry = registry(&ManualClock::new(), 1);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(usize::MAX, StatusCode::BAD_GATEWAY);
        let addr = flaky.serve().await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::BAD_GATEWAY,
            "the attempt's own"
        );
        assert_eq!(flaky.hits(), 1);
        assert_eq!(registry.breaker(&key(addr)).state(), State::Open);
        assert_eq!(policy.stats(), RetryStats::default(), "a rejection ahead");
    });
}

#[test]
fn a_refused_connection_is_retried_without_a_breaker() {
    run(async {
        let policy = retry();
        let client = ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
            .with(RetryMiddleware::new(policy.clone()))
            .build();

        let err = client
            .get(format!("http://{}/", refused()))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{err:?}");
        assert_eq!(policy.stats(), stats(2, 0, 1, 0));
    });
}

#[test]
fn an_empty_budget_denies_the_retry() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let budget = RetryBudget::new(0.0).unwrap().min_retries_per_second(0);
        let policy = retry().budget(budget);
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(flaky.hits(), 1);
        assert_eq!(policy.stats(), stats(0, 1, 0, 0));
        let totals = registry.breaker(&key(addr)).totals();
        assert_eq!((totals.retries, totals.retries_budget_denied), (0, 1));
    });
}

#[test]
fn a_retry_after_beyond_the_deadline_is_not_waited_for() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let middleware = RetryMiddleware::new(policy.clone()).deadline(Duration::from_secs(5));
        let client = client(middleware, &registry);

        // Delta-seconds, past the middleware's deadline.
        let seconds = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE).retry_after("120");
        let addr = seconds.serve().await;
        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "120");
        assert_eq!(seconds.hits(), 1);
        assert_eq!(policy.stats(), stats(0, 0, 0, 1));

        // An HTTP date, past the request's own timeout (the middleware's is longer).
        let date = Flaky::new(1, StatusCode::TOO_MANY_REQUESTS)
            .retry_after("Thu, 01 Jan 2099 00:00:00 GMT");
        let addr = date.serve().await;
        let response = client
            .get(format!("http://{addr}/"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(date.hits(), 1);
        assert_eq!(policy.stats(), stats(0, 0, 0, 2));
    });
}

#[test]
fn a_retry_after_in_the_past_retries_at_once() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let middleware = RetryMiddleware::new(policy.clone()).deadline(Duration::from_secs(5));
        let client = client(middleware, &registry);
        let flaky = Flaky::new(1, StatusCode::TOO_MANY_REQUESTS)
            .retry_after("Wed, 21 Oct 2015 07:28:00 GMT");
        let addr = flaky.serve().await;

        let response = client
            .get(format!("http://{addr}/"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(flaky.hits(), 2);
        assert_eq!(policy.stats(), stats(1, 0, 0, 0));
    });
}

#[test]
fn a_not_found_is_returned_as_it_is() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let policy = retry();
        let client = client(RetryMiddleware::new(policy.clone()), &registry);
        let flaky = Flaky::new(1, StatusCode::NOT_FOUND);
        let addr = flaky.serve().await;

        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(flaky.hits(), 1);
        assert_eq!(policy.stats(), RetryStats::default());
    });
}

/// Notes each attempt's own timeout, then sends it on.
#[derive(Clone, Default)]
struct Timeouts(Arc<std::sync::Mutex<Vec<Option<Duration>>>>);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for Timeouts {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.lock().unwrap().push(req.timeout().copied());
        next.run(req, extensions).await
    }
}

#[test]
fn a_retry_gets_what_is_left_of_the_requests_timeout() {
    run(async {
        let registry = registry(&ManualClock::new(), TRIP_AFTER);
        let timeouts = Timeouts::default();
        let client = ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
            .with(RetryMiddleware::new(retry()))
            .with(timeouts.clone())
            .with(BreakerMiddleware::new(Arc::clone(&registry)))
            .build();
        let flaky = Flaky::new(2, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;

        let timeout = Duration::from_secs(5);
        let url = format!("http://{addr}/");
        let response = client.get(&url).timeout(timeout).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let seen = timeouts.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0], Some(timeout), "the first attempt's, as asked");
        let (second, third) = (seen[1].unwrap(), seen[2].unwrap());
        assert!(second < timeout && third <= second, "{seen:?}");
        assert!(third > timeout / 2, "{seen:?}");

        // Without a timeout of its own, the client's applies to each attempt, untouched.
        let flaky = Flaky::new(1, StatusCode::SERVICE_UNAVAILABLE);
        let addr = flaky.serve().await;
        timeouts.0.lock().unwrap().clear();
        let response = client.get(format!("http://{addr}/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(*timeouts.0.lock().unwrap(), [None, None]);
    });
}
