//! Retries through tower: `RetryLayer` outside a breaker or a pool. A flaky service
//! succeeds on a retry; a breaker's rejection, a POST, a request that cannot be copied, a
//! spent budget and a `Retry-After` past the deadline are not retried; through a pool, every
//! call succeeds within two attempts. The waits run on tokio's paused clock (no wall time),
//! the budget and the breakers on a `ManualClock`.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{Balance, Pool};
use lazybreaker::retry::{Retry, RetryBudget};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_tower::{BreakerLayer, Idempotent, PoolService, RetryLayer};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);

/// A budget of 100 % on `clock`, with the default reserve (100 retries within 10 s).
fn budget(clock: &ManualClock) -> RetryBudget {
    RetryBudget::new(1.0).unwrap().clock(clock.clone())
}

/// At most `max_attempts` attempts a call, on `budget`, seeded.
fn retry(max_attempts: u32, budget: RetryBudget) -> Retry {
    Retry::new(max_attempts).unwrap().budget(budget).seed(7)
}

/// A service that fails while `failures` is above zero (one less each call), else answers
/// its request, and counts the calls that reached it.
#[allow(clippy::type_complexity)]
fn flaky() -> (
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    impl Service<
            u32,
            Response = u32,
            Error = io::Error,
            Future = impl std::future::Future<Output = io::Result<u32>> + Send,
        > + Clone,
) {
    let (calls, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (seen, left) = (Arc::clone(&calls), Arc::clone(&failures));
    let service = tower::service_fn(move |n: u32| {
        seen.fetch_add(1, Ordering::SeqCst);
        let fail = left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
            .is_ok();
        async move {
            if fail {
                Err(io::Error::other("reset"))
            } else {
                Ok(n)
            }
        }
    });
    (calls, failures, service)
}

#[tokio::test(start_paused = true)]
async fn a_flaky_service_succeeds_on_a_retry() {
    let clock = ManualClock::new();
    let retry = retry(3, budget(&clock));
    let (calls, failures, inner) = flaky();
    let mut service = RetryLayer::new(retry.clone()).layer(inner);

    // Two failures, then the answer: three attempts, two backoffs (below 10 and 20 ms).
    failures.store(2, Ordering::SeqCst);
    let started = Instant::now();
    assert_eq!(service.ready().await.unwrap().call(7).await.unwrap(), 7);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(started.elapsed() < MS * 30, "{:?}", started.elapsed());
    assert_eq!(retry.stats().retries, 2);

    // The next call on the same service starts afresh: one attempt.
    assert_eq!(service.ready().await.unwrap().call(8).await.unwrap(), 8);
    assert_eq!(calls.load(Ordering::SeqCst), 4);

    // A call that keeps failing makes its three attempts, and returns the last error.
    failures.store(5, Ordering::SeqCst);
    let err = service.ready().await.unwrap().call(9).await.unwrap_err();
    assert_eq!(err.to_string(), "reset");
    assert_eq!(calls.load(Ordering::SeqCst), 7);
    let stats = retry.stats();
    assert_eq!((stats.retries, stats.exhausted), (4, 1));
    assert_eq!(
        retry.retry_budget().deposits(),
        3,
        "each call deposited once, not its retries"
    );
}

#[tokio::test(start_paused = true)]
async fn a_breakers_rejection_is_not_retried() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .clock(clock.clone())
            .build(),
    );
    let retry = retry(3, budget(&clock));
    let (calls, failures, inner) = flaky();
    failures.store(usize::MAX, Ordering::SeqCst);
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()).count_on(Arc::clone(&breaker)))
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .service(inner);

    // The first attempt fails and opens the breaker; the retry is rejected, and the
    // rejection is what the call gets: no third attempt.
    let err = service.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(
        matches!(err, Error::Rejected(Rejected::Open { .. })),
        "{err:?}"
    );
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(retry.stats().retries, 1);
    assert_eq!(breaker.totals().retries, 1, "counted on the breaker");

    // Open: rejected at once, never retried.
    let err = service.ready().await.unwrap().call(2).await.unwrap_err();
    assert!(err.is_rejected());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(retry.stats().retries, 1);
    assert_eq!(breaker.totals().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_through_a_breaker_gets_its_own_verdict() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(3).unwrap())
            .clock(clock.clone())
            .build(),
    );
    let retry = retry(3, budget(&clock));
    let (calls, failures, inner) = flaky();
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()).count_on(Arc::clone(&breaker)))
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .timeout(Duration::from_secs(1)) // per attempt
        .service(inner);
    failures.store(2, Ordering::SeqCst);
    assert_eq!(service.ready().await.unwrap().call(5).await.unwrap(), 5);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let totals = breaker.totals();
    assert_eq!(
        (totals.failures, totals.successes, totals.retries),
        (2, 1, 2),
        "each attempt counted by the breaker, each retry on it"
    );
    assert_eq!(breaker.state(), State::Closed);
}

/// An HTTP upstream that answers every request with `status` (and `Retry-After`, if given),
/// counting the requests by method.
#[allow(clippy::type_complexity)]
fn upstream(
    answers: Vec<(u16, Option<&'static str>)>,
) -> (
    Arc<Mutex<Vec<Method>>>,
    impl Service<
            Request<String>,
            Response = Response<String>,
            Error = Infallible,
            Future = impl std::future::Future<Output = Result<Response<String>, Infallible>> + Send,
        > + Clone,
) {
    let seen: Arc<Mutex<Vec<Method>>> = Arc::default();
    let log = Arc::clone(&seen);
    let service = tower::service_fn(move |request: Request<String>| {
        let mut log = log.lock().unwrap();
        // The answers in turn, the last one for good.
        let (status, retry_after) = answers[log.len().min(answers.len() - 1)];
        log.push(request.method().clone());
        let mut response = Response::builder().status(status);
        if let Some(secs) = retry_after {
            response = response.header(http::header::RETRY_AFTER, secs);
        }
        std::future::ready(Ok(response.body(String::new()).unwrap()))
    });
    (seen, service)
}

fn request(method: Method) -> Request<String> {
    Request::builder()
        .method(method)
        .uri("/users/7")
        .body("{}".to_owned())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn only_idempotent_methods_are_retried() {
    let clock = ManualClock::new();
    let retry = retry(2, budget(&clock));
    let (seen, inner) = upstream(vec![(503, None)]);
    let mut service = RetryLayer::http(retry.clone()).layer(inner);
    for method in [Method::POST, Method::GET, Method::PATCH, Method::PUT] {
        let response = service.ready().await.unwrap();
        let response = response.call(request(method)).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            Method::POST,
            Method::GET,
            Method::GET,
            Method::PATCH,
            Method::PUT,
            Method::PUT
        ],
        "POST and PATCH sent once"
    );
    assert_eq!(retry.stats().retries, 2);
    assert_eq!(
        retry.retry_budget().deposits(),
        2,
        "a call never retried is not deposited"
    );

    // A request the policy cannot copy (here: none can) is sent once, whatever its method.
    let (seen, inner) = upstream(vec![(503, None)]);
    let once = Idempotent::new().copy_with(|_: &Request<String>| None);
    let service = RetryLayer::http(retry.clone()).replay(once).layer(inner);
    service.oneshot(request(Method::GET)).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_4xx_is_not_retried_and_a_retry_after_is_waited_for() {
    let clock = ManualClock::new();
    let retry = retry(3, budget(&clock));
    let (seen, inner) = upstream(vec![(404, None)]);
    let response = RetryLayer::http(retry.clone())
        .layer(inner)
        .oneshot(request(Method::GET))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(seen.lock().unwrap().len(), 1, "the request was wrong");

    // 503 with `Retry-After: 1`, then 200: the retry waits the second the server asked.
    let (seen, inner) = upstream(vec![(503, Some("1")), (200, None)]);
    let started = Instant::now();
    let response = RetryLayer::http(retry.clone())
        .deadline(Duration::from_secs(10))
        .layer(inner)
        .oneshot(request(Method::GET))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(seen.lock().unwrap().len(), 2);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(1) + MS * 10,
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_deadline_stops_the_call() {
    let clock = ManualClock::new();
    let retry = retry(3, budget(&clock));
    let (seen, inner) = upstream(vec![(429, Some("5")), (200, None)]);
    let started = Instant::now();
    let response = RetryLayer::http(retry.clone())
        .deadline(Duration::from_secs(1))
        .layer(inner)
        .oneshot(request(Method::GET))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(started.elapsed(), Duration::ZERO, "nothing waited");
    let stats = retry.stats();
    assert_eq!((stats.retries, stats.past_deadline), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_stops_the_retries() {
    let clock = ManualClock::new();
    // No reserve and no percent: no retry ever.
    let none = RetryBudget::new(0.0)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone());
    let retry = retry(3, none);
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(100).unwrap())
            .clock(clock.clone())
            .build(),
    );
    let (calls, failures, inner) = flaky();
    failures.store(usize::MAX, Ordering::SeqCst);
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()).count_on(Arc::clone(&breaker)))
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .service(inner);
    for n in 0..5 {
        let err = service.ready().await.unwrap().call(n).await.unwrap_err();
        assert!(!err.is_rejected());
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5, "one attempt a call");
    let stats = retry.stats();
    assert_eq!((stats.retries, stats.budget_denied), (0, 5));
    assert_eq!(breaker.totals().retries_budget_denied, 5);

    // Half the calls: one retry for every two calls, the first one refused.
    let half = RetryBudget::new(0.5)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone());
    let retry = self::retry(2, half);
    let (calls, failures, inner) = flaky();
    failures.store(usize::MAX, Ordering::SeqCst);
    let mut service = RetryLayer::new(retry.clone()).layer(inner);
    for n in 0..4 {
        assert!(service.ready().await.unwrap().call(n).await.is_err());
    }
    assert_eq!(calls.load(Ordering::SeqCst), 6, "four calls, two retries");
    let stats = retry.stats();
    assert_eq!(
        (stats.retries, stats.budget_denied, stats.exhausted),
        (2, 2, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn through_a_pool_every_call_succeeds_within_two_attempts() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(30))
    })
    .clock(clock.clone())
    .max_isolated(0.5)
    .balance(Balance::RoundRobin);
    pool.set([0, 1]);
    let pool = Arc::new(pool);
    // Endpoint 1 always fails.
    let hits: Arc<Mutex<[usize; 2]>> = Arc::default();
    let seen = Arc::clone(&hits);
    let endpoints = PoolService::new(Arc::clone(&pool), move |key: &u32| {
        let (key, seen) = (*key, Arc::clone(&seen));
        tower::service_fn(move |()| {
            seen.lock().unwrap()[key as usize] += 1;
            std::future::ready(if key == 1 {
                Err(io::Error::other("down"))
            } else {
                Ok(key)
            })
        })
    });
    let retry = retry(2, budget(&clock));
    let mut service = RetryLayer::new(retry.clone())
        .elsewhere(true)
        .layer(endpoints);
    let started = Instant::now();
    for _ in 0..20 {
        // The failing endpoint's open period is over: it is tried again.
        clock.advance(Duration::from_secs(31));
        let before: usize = hits.lock().unwrap().iter().sum();
        assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 0);
        let attempts = hits.lock().unwrap().iter().sum::<usize>() - before;
        assert!((1..=2).contains(&attempts), "{attempts} attempts");
    }
    let [good, bad] = *hits.lock().unwrap();
    assert_eq!(good, 20, "every call answered there");
    // Round robin: after a failure and its retry, the failing endpoint is next again.
    assert!(
        bad >= 10,
        "the failing endpoint was picked first {bad} times"
    );
    assert_eq!(
        retry.stats().retries,
        bad as u64,
        "each failure retried once"
    );
    assert_eq!(pool.breaker(&1).unwrap().totals().failures, bad as u64);
    assert_eq!(started.elapsed(), Duration::ZERO, "elsewhere: at once");
}
