//! `tower::PoolService` over a `pool::Pool`: each request goes to the endpoint a pick
//! chose, counts on that endpoint's breaker, never reaches an isolated one, and with nothing
//! to send to the service is still ready and the call fails at once with `NoEndpoint`.

mod checks;

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use checks::{poll_once, Noop, OPEN_FOR};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use tower::Service;

/// Polls `service` for readiness once, with a waker that does nothing.
fn poll_ready<S: Service<R>, R>(service: &mut S) -> Poll<Result<(), S::Error>> {
    let waker = Waker::from(Arc::new(Noop));
    service.poll_ready(&mut Context::from_waker(&waker))
}

use lazybreaker::pool::Pool;
use lazybreaker::tower::PoolService;
use std::collections::HashMap;
use std::sync::Mutex;

type Hits = Arc<Mutex<HashMap<u32, usize>>>;

fn service_over(
    pool: &Arc<Pool<u32>>,
    hits: &Hits,
) -> impl Service<bool, Response = u32, Error = Error<&'static str>, Future: Unpin> {
    let hits = Arc::clone(hits);
    PoolService::new(Arc::clone(pool), move |key: &u32| {
        let (key, hits) = (*key, Arc::clone(&hits));
        tower::service_fn(move |fail: bool| {
            *hits.lock().unwrap().entry(key).or_default() += 1;
            std::future::ready(if fail { Err("down") } else { Ok(key) })
        })
    })
}

fn pool(clock: &ManualClock, max_isolated: f64) -> Arc<Pool<u32>> {
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(OPEN_FOR)
    })
    .clock(clock.clone())
    .max_isolated(max_isolated);
    pool.set(0..3);
    Arc::new(pool)
}

#[test]
fn each_request_goes_to_a_picked_endpoint_and_counts_there() {
    let clock = ManualClock::new();
    let pool = pool(&clock, 0.5);
    let hits: Hits = Arc::default();
    let mut service = service_over(&pool, &hits);
    // A failure isolates the endpoint that answered it.
    assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
    let failed = match poll_once(&mut service.call(true)) {
        Poll::Ready(Err(Error::Inner("down"))) => {
            let hits = hits.lock().unwrap();
            *hits.keys().next().unwrap()
        }
        other => panic!("expected the endpoint's error, got {other:?}"),
    };
    assert_eq!(pool.breaker(&failed).unwrap().state(), State::Open);
    for _ in 0..100 {
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        match poll_once(&mut service.call(false)) {
            Poll::Ready(Ok(key)) => assert_ne!(key, failed, "isolated: skipped"),
            other => panic!("expected a response, got {other:?}"),
        }
    }
    assert_eq!(hits.lock().unwrap()[&failed], 1);
    let successes: u64 = (0..3)
        .map(|k| pool.breaker(&k).unwrap().totals().successes)
        .sum();
    assert_eq!(successes, 100);
}

#[test]
fn with_nothing_to_send_to_it_is_ready_and_fails_at_once() {
    let clock = ManualClock::new();
    let pool = pool(&clock, 1.0);
    for key in 0..3 {
        pool.breaker(&key).unwrap().allow().unwrap().failure();
    }
    let hits: Hits = Arc::default();
    let mut service = service_over(&pool, &hits);
    assert!(
        matches!(poll_ready(&mut service), Poll::Ready(Ok(()))),
        "never pending"
    );
    match poll_once(&mut service.call(false)) {
        Poll::Ready(Err(Error::Rejected(Rejected::NoEndpoint { retry_after }))) => {
            assert_eq!(retry_after, Some(OPEN_FOR));
        }
        other => panic!("expected NoEndpoint, got {other:?}"),
    }
    assert!(hits.lock().unwrap().is_empty());
}
