//! `execute_async` and `execute_async_classified`: admission on first poll, the call built
//! only when admitted, results classified and recorded, panics while polling counted as
//! failures, cancellation as an abandoned call. Driven by a hand-written executor: the core
//! has no async runtime, and neither do these tests.

use crate::support;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use support::policy::trips_on_first_failure;

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

fn waker() -> Waker {
    Waker::from(Arc::new(Noop))
}

/// Polls `f` once.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(&waker()))
}

/// Polls `f` to completion; every future here completes within a few polls.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = Box::pin(f);
    let waker = waker();
    for _ in 0..1_000 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
    }
    panic!("the future did not complete in 1 000 polls")
}

/// A call that is pending `n` times, then resolves to `result`.
struct Later<T> {
    pending: usize,
    result: Option<T>,
}

impl<T: Unpin> Future for Later<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<T> {
        if self.pending == 0 {
            Poll::Ready(self.result.take().expect("polled after completion"))
        } else {
            self.pending -= 1;
            Poll::Pending
        }
    }
}

fn later<T>(pending: usize, result: T) -> Later<T> {
    Later {
        pending,
        result: Some(result),
    }
}

/// A breaker that trips on its first failure and stays open 10 s.
fn tripping(clock: &ManualClock) -> Breaker<ConsecutiveFailures> {
    Breaker::builder()
        .timeout(Duration::from_secs(10))
        .policy(trips_on_first_failure())
        .clock(clock.clone())
        .build()
}

#[test]
fn results_are_counted_like_execute() {
    let breaker = Breaker::builder().build();
    let ok: Result<u32, Error<&str>> = block_on(breaker.execute_async(|| later(2, Ok(7))));
    assert_eq!(ok.unwrap(), 7);
    let err = block_on(breaker.execute_async(|| later(1, Err::<u32, _>("boom"))));
    assert_eq!(err.unwrap_err().into_inner(), Some("boom"));
    let c = breaker.counts();
    assert_eq!((c.requests, c.total_successes, c.total_failures), (2, 1, 1));
}

#[test]
fn admission_happens_on_first_poll_and_an_open_breaker_builds_no_call() {
    let clock = ManualClock::new();
    let breaker = tripping(&clock);
    let built = AtomicUsize::new(0);
    let mut fut = breaker.execute_async(|| {
        built.fetch_add(1, Ordering::SeqCst);
        later(0, Err::<(), _>("refused"))
    });
    assert_eq!(
        breaker.counts().requests,
        0,
        "not admitted before the first poll"
    );
    assert_eq!(built.load(Ordering::SeqCst), 0);
    let mut fut = Box::pin(&mut fut);
    let r = fut.as_mut().poll(&mut Context::from_waker(&waker()));
    assert!(matches!(r, Poll::Ready(Err(Error::Inner("refused")))));
    assert_eq!(breaker.state(), State::Open);
    // Open: rejected on the first poll, and the closure never runs.
    let r = block_on(breaker.execute_async(|| {
        built.fetch_add(1, Ordering::SeqCst);
        later(0, Ok::<(), &str>(()))
    }));
    assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
    assert_eq!(
        built.load(Ordering::SeqCst),
        1,
        "the rejected call was never built"
    );
}

#[test]
fn a_classifier_decides_how_the_result_counts() {
    let breaker = Breaker::builder().build();
    let r = block_on(breaker.execute_async_classified(
        || later(1, Err::<(), _>(404)),
        |r: &Result<(), u16>| match r {
            Err(404) => Outcome::Excluded,
            Err(_) => Outcome::Failure,
            Ok(_) => Outcome::Success,
        },
    ));
    assert_eq!(r.unwrap_err().into_inner(), Some(404));
    let c = breaker.counts();
    assert_eq!((c.total_exclusions, c.total_failures), (1, 0));
}

#[test]
fn a_panic_while_polling_is_a_failure_and_keeps_unwinding() {
    let clock = ManualClock::new();
    let breaker = tripping(&clock);
    struct Boom;
    impl Future for Boom {
        type Output = Result<(), ()>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            panic!("the call blew up")
        }
    }
    // Polled to the panic, then dropped after it was caught (as an executor that catches
    // task panics does): still a failure, not an abandoned call.
    let mut fut = Box::pin(breaker.execute_async(|| Boom));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut Context::from_waker(&waker()));
    }));
    assert_eq!(
        *caught.unwrap_err().downcast_ref::<&str>().unwrap(),
        "the call blew up"
    );
    drop(fut);
    let t = breaker.totals();
    assert_eq!((t.admitted, t.failures, t.exclusions), (1, 1, 0), "{t:?}");
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_cancelled_half_open_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let breaker = tripping(&clock);
    breaker.allow().unwrap().failure();
    clock.advance(Duration::from_secs(11));
    let mut probe = breaker.execute_async(|| later(5, Ok::<(), ()>(())));
    assert!(poll_once(&mut Box::pin(&mut probe)).is_pending());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(matches!(breaker.allow(), Err(Rejected::TooManyRequests)));
    drop(probe); // cancelled: a timeout around it fired, say
    breaker.allow().expect("the slot was given back").success();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn the_future_is_send_and_works_from_an_arc_and_a_static() {
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    static BREAKER: std::sync::OnceLock<Breaker> = std::sync::OnceLock::new();
    let breaker = BREAKER.get_or_init(|| Breaker::builder().build());
    let r = block_on(assert_send(
        breaker.execute_async(|| later(1, Ok::<_, ()>(1))),
    ));
    assert_eq!(r.unwrap(), 1);

    let shared = Arc::new(Breaker::builder().build());
    let task = {
        let shared = Arc::clone(&shared);
        async move { shared.execute_async(|| later(1, Ok::<_, ()>(2))).await }
    };
    let handle = std::thread::spawn(move || block_on(assert_send(task)));
    assert_eq!(handle.join().unwrap().unwrap(), 2);
    assert_eq!(shared.counts().total_successes, 1);
}

// ---------------------------------------------------------------------------------------
// Abandoned calls: counted on their own, and as the builder says.

#[test]
fn an_abandoned_call_is_counted_apart_and_as_an_exclusion_by_default() {
    let clock = ManualClock::new();
    let breaker = tripping(&clock);
    let mut call = breaker.execute_async(|| later(3, Err::<(), _>("would fail")));
    assert!(poll_once(&mut Box::pin(&mut call)).is_pending());
    drop(call); // cancelled before it completed
    drop(breaker.allow().unwrap()); // a permit dropped without a verdict
    assert_eq!(breaker.state(), State::Closed, "no failure was counted");
    assert_eq!(breaker.counts().total_exclusions, 2);
    let t = breaker.totals();
    assert_eq!(
        (t.admitted, t.abandoned, t.exclusions, t.failures),
        (2, 2, 0, 0)
    );
}

#[test]
fn abandoned_calls_can_count_as_failures_per_state() {
    use lazybreaker::AbandonedAs::{Exclusion, Failure};
    let clock = ManualClock::new();
    // Closed: abandoned calls are exclusions; half-open: failures (a probe that never
    // completed is no evidence of health).
    let breaker = Breaker::builder()
        .timeout(Duration::from_secs(10))
        .policy(trips_on_first_failure())
        .abandoned_as(Exclusion, Failure)
        .clock(clock.clone())
        .build();
    drop(breaker.allow().unwrap());
    assert_eq!(breaker.state(), State::Closed);
    breaker.allow().unwrap().failure();
    clock.advance(Duration::from_secs(11));
    let mut probe = breaker.execute_async(|| later(5, Ok::<(), ()>(())));
    assert!(poll_once(&mut Box::pin(&mut probe)).is_pending());
    drop(probe); // a timeout around the call fired
    assert_eq!(
        breaker.state(),
        State::Open,
        "the cancelled probe reopened it"
    );
    let t = breaker.totals();
    assert_eq!((t.abandoned, t.failures, t.opened), (2, 1, 2), "{t:?}");
    // And it is not stuck: the next probe after the open period closes it.
    clock.advance(Duration::from_secs(11));
    breaker.allow().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);

    // Failure in closed too: an abandoned call trips a breaker that trips on one failure.
    let strict = Breaker::builder()
        .policy(trips_on_first_failure())
        .abandoned_as(Failure, Failure)
        .clock(clock.clone())
        .build();
    drop(strict.allow().unwrap());
    assert_eq!(strict.state(), State::Open);
}

#[test]
fn a_stale_abandoned_call_is_abandoned_not_dropped() {
    let clock = ManualClock::new();
    let breaker = tripping(&clock);
    let old = breaker.allow().unwrap();
    breaker.allow().unwrap().failure(); // trips: `old` belongs to an ended generation
    drop(old);
    let t = breaker.totals();
    assert_eq!((t.admitted, t.abandoned, t.dropped), (2, 1, 0), "{t:?}");
}

/// A finished call's future polled again panics (a bug in the executor), and counts nothing
/// more: its one result is in, once.
#[test]
fn a_finished_call_polled_again_panics_and_counts_nothing_more() {
    let breaker = Breaker::builder().build();
    let mut call = Box::pin(breaker.execute_async(|| async { Ok::<_, ()>(7) }));
    let waker = waker();
    let first = call.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(matches!(first, Poll::Ready(Ok(7))));
    let again = catch_unwind(AssertUnwindSafe(|| {
        let _ = call.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    assert!(again.is_err(), "polled after completion: a panic");
    drop(call);
    let counts = breaker.counts();
    assert_eq!((counts.requests, counts.total_successes), (1, 1));
    let totals = breaker.totals();
    assert_eq!((totals.abandoned, totals.dropped), (0, 0));
}

/// What a finished call holds (a timer, a connection) is released when it completes, not
/// when its future is dropped: a future polled by reference may be kept a long time.
#[test]
fn a_finished_call_is_dropped_when_it_completes() {
    struct Holds(Arc<AtomicUsize>);
    impl Future for Holds {
        type Output = Result<(), ()>;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(Ok(()))
        }
    }
    impl Drop for Holds {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let breaker = Breaker::builder().build();
    let held = Arc::clone(&dropped);
    let mut call = Box::pin(breaker.execute_async(move || Holds(held)));
    let waker = waker();
    let done = call.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(matches!(done, Poll::Ready(Ok(()))));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped as it completed");
    drop(call);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "and only once");
    assert_eq!(breaker.counts().total_successes, 1);
}
