//! `tower::PoolService` over a `pool::Pool`: each request goes to the endpoint a pick
//! chose, counts on that endpoint's breaker, never reaches an isolated one, and with nothing
//! to send to the service is still ready and the call fails at once with `NoEndpoint`.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_test_support::checks::{self, poll_once, Noop, OPEN_FOR};
use tower::Service;

/// Polls `service` for readiness once, with a waker that does nothing.
fn poll_ready<S: Service<R>, R>(service: &mut S) -> Poll<Result<(), S::Error>> {
    let waker = Waker::from(Arc::new(Noop));
    service.poll_ready(&mut Context::from_waker(&waker))
}

use lazybreaker::pool::Pool;
use lazybreaker_tower::PoolService;
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

/// An inner service whose readiness fails (or panics) while its switch says so, counting
/// the services made and the calls that reached them.
#[derive(Clone)]
struct Flaky {
    mode: Arc<std::sync::atomic::AtomicU8>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

const READY: u8 = 0;
const FAILS: u8 = 1;
const PANICS: u8 = 2;

impl Service<()> for Flaky {
    type Response = ();
    type Error = &'static str;
    type Future = std::future::Ready<Result<(), &'static str>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), &'static str>> {
        match self.mode.load(std::sync::atomic::Ordering::SeqCst) {
            READY => Poll::Ready(Ok(())),
            FAILS => Poll::Ready(Err("closed")),
            _ => panic!("the inner service's bug"),
        }
    }
    fn call(&mut self, (): ()) -> Self::Future {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

#[test]
fn a_failed_readiness_is_the_endpoints_failure_and_its_service_is_made_anew() {
    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
    let clock = ManualClock::new();
    let pool = Arc::new(
        Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(5).unwrap()))
            .clock(clock.clone()),
    );
    pool.insert(0);
    let mode = Arc::new(AtomicU8::new(FAILS));
    let (made, calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (m, c, k) = (Arc::clone(&made), Arc::clone(&calls), Arc::clone(&mode));
    let mut service = PoolService::new(Arc::clone(&pool), move |_: &u32| {
        m.fetch_add(1, Ordering::SeqCst);
        Flaky {
            mode: Arc::clone(&k),
            calls: Arc::clone(&c),
        }
    });
    assert!(matches!(
        poll_once(&mut service.call(())),
        Poll::Ready(Err(Error::Inner("closed")))
    ));
    assert_eq!(pool.breaker(&0).unwrap().totals().failures, 1);
    mode.store(READY, Ordering::SeqCst);
    assert!(matches!(
        poll_once(&mut service.call(())),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(
        made.load(Ordering::SeqCst),
        2,
        "the failed one was made anew"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // A panic in the inner readiness: the endpoint's failure, and it keeps unwinding.
    mode.store(PANICS, Ordering::SeqCst);
    let mut call = service.call(());
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut call)));
    assert!(unwound.is_err());
    drop(call);
    let t = pool.breaker(&0).unwrap().totals();
    assert_eq!((t.failures, t.successes), (2, 1));
    assert_eq!(pool.in_flight(&0), Some(0));
}

#[test]
fn a_request_landing_on_an_endpoint_due_for_its_check_runs_it_first() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let clock = ManualClock::new();
    let healthy = Arc::new(AtomicBool::new(false));
    let h = Arc::clone(&healthy);
    let pool = Arc::new(
        Pool::new(|_: &u32| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
        })
        .clock(clock.clone())
        .health_check(move |_: &u32| std::future::ready(h.load(Ordering::SeqCst)))
        .max_isolated(1.0),
    );
    pool.insert(0);
    let hits: Hits = Arc::default();
    let mut service = service_over(&pool, &hits);
    let _ = poll_once(&mut service.call(true)); // isolates it
    clock.advance(checks::PAST_OPEN);
    match poll_once(&mut service.call(false)) {
        // The check answers at once, in `call`: failed, the pool has nothing to send to.
        Poll::Ready(Err(Error::Rejected(Rejected::NoEndpoint {
            retry_after: Some(retry_after),
        }))) => {
            assert_eq!(retry_after, OPEN_FOR, "the failed check's new open period");
        }
        other => panic!("expected the failed check's rejection, got {other:?}"),
    }
    assert_eq!(hits.lock().unwrap()[&0], 1, "not sent");
    healthy.store(true, Ordering::SeqCst);
    clock.advance(checks::PAST_OPEN);
    assert!(matches!(
        poll_once(&mut service.call(false)),
        Poll::Ready(Ok(0))
    ));
    let breaker = pool.breaker(&0).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    let t = breaker.totals();
    assert_eq!((t.health_checks, t.health_checks_failed), (2, 1));
}

#[test]
fn an_endpoint_shedding_load_is_not_isolated() {
    use lazybreaker::http::StatusRules;
    let clock = ManualClock::new();
    let pool = Arc::new(
        Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
            .clock(clock.clone()),
    );
    pool.insert(0);
    let status = Arc::new(std::sync::atomic::AtomicU16::new(503));
    let s = Arc::clone(&status);
    let mut service = PoolService::new(Arc::clone(&pool), move |_: &u32| {
        let s = Arc::clone(&s);
        tower::service_fn(move |()| {
            let code = s.load(std::sync::atomic::Ordering::SeqCst);
            let mut response = http::Response::builder().status(code);
            if code == 503 {
                response = response.header("retry-after", "5");
            }
            std::future::ready(Ok::<_, std::convert::Infallible>(
                response.body(()).unwrap(),
            ))
        })
    })
    .classify(StatusRules::new());
    for _ in 0..3 {
        match poll_once(&mut service.call(())) {
            Poll::Ready(Ok(response)) => assert_eq!(response.status(), 503),
            other => panic!("expected the 503, got {other:?}"),
        }
    }
    let breaker = pool.breaker(&0).unwrap();
    assert_eq!(breaker.state(), State::Closed, "overload is not a fault");
    assert_eq!(breaker.totals().exclusions, 3);
    assert_eq!(pool.stats().overloaded, 3);
    // A 500 is a fault: isolated at once (one failure trips it).
    status.store(500, std::sync::atomic::Ordering::SeqCst);
    let _ = poll_once(&mut service.call(()));
    assert_eq!(breaker.state(), State::Open);
}

/// A check under way never holds a request up while another endpoint can take it: the
/// request goes there at once, and the requests that follow drive the check, the first
/// after it passed being the revived endpoint's probe.
#[test]
fn a_check_under_way_runs_beside_the_requests() {
    use lazybreaker::pool::Balance;
    use std::sync::atomic::{AtomicU32, Ordering};
    let clock = ManualClock::new();
    let (answer, polls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (a, p) = (Arc::clone(&answer), Arc::clone(&polls));
    let pool = Arc::new(
        Pool::new(|_: &u32| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
        })
        .clock(clock.clone())
        .balance(Balance::RoundRobin) // the first request lands on 0 and starts its check
        .health_check(move |_: &u32| {
            let (a, p) = (Arc::clone(&a), Arc::clone(&p));
            std::future::poll_fn(move |_| {
                p.fetch_add(1, Ordering::SeqCst);
                match a.load(Ordering::SeqCst) {
                    0 => Poll::Pending,
                    _ => Poll::Ready(true),
                }
            })
        }),
    );
    pool.set([0, 1]);
    pool.breaker(&0).unwrap().allow().unwrap().failure();
    clock.advance(checks::PAST_OPEN);
    let hits: Hits = Arc::default();
    let mut service = service_over(&pool, &hits);
    for _ in 0..5 {
        assert!(matches!(
            poll_once(&mut service.call(false)),
            Poll::Ready(Ok(1))
        ));
    }
    assert_eq!(
        polls.load(Ordering::SeqCst),
        5,
        "started once, then driven by each request"
    );
    answer.store(1, Ordering::SeqCst);
    assert!(matches!(
        poll_once(&mut service.call(false)),
        Poll::Ready(Ok(0))
    ));
    assert_eq!(pool.breaker(&0).unwrap().state(), State::Closed);
}
