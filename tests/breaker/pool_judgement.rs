//! The pool's own judgements where user code and timing can trip them up: the hang judged
//! on the oldest call in flight (a failed answer in time is an answer, an abandoned pick is
//! not, a probe has a deadline of its own), a user clock or observer that panics, a health
//! check that panics beside another endpoint's probe, a pool emptied during a check, and the
//! cap counted among the endpoints that are not down.

use std::future::poll_fn;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{Balance, OutlierDetection, Pool};
use lazybreaker::{Breaker, Clock, ManualClock, State};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Polls `f` to completion, at most 100 times.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    for _ in 0..100 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
    panic!("not ready after 100 polls");
}

/// A one-endpoint pool (key 0) with a deadline of 300 ms, the default policy (6 failures
/// in a row) and the pool's default open backoff (100 ms first).
fn hung_pool(clock: &ManualClock) -> Pool<u32> {
    let pool = Pool::new(|_: &u32| Breaker::builder())
        .clock(clock.clone())
        .deadline(ms(300));
    pool.set([0]);
    pool
}

/// `Pool::deadline`: "its oldest call in flight is older than the deadline". Here the only
/// call in flight is 50 ms old, and the endpoint answered (with an error) 40 ms ago.
#[test]
fn a_young_call_after_a_failed_answer_is_not_hung() {
    let clock = ManualClock::new();
    let pool = hung_pool(&clock);
    let first = pool.pick().unwrap(); // t = 0, the endpoint idle
    clock.advance(ms(250));
    let young = pool.pick().unwrap(); // t = 250
    clock.advance(ms(10));
    first.failure(); // t = 260: the endpoint answered, with an error (a 500)
    clock.advance(ms(40)); // t = 300: `young` is 50 ms old
    let _ = pool.pick();
    assert_eq!(
        pool.stats().ejected_hung,
        0,
        "judged hung with its only call in flight 50 ms old (deadline 300 ms)"
    );
    drop(young);
}

/// `judge_hung`: "a call that goes out then (a probe) gets its deadline". Every call here
/// ends within the 300 ms deadline; the probe is judged hung 150 ms after it went out.
#[test]
fn a_probe_gets_its_own_deadline_after_a_hang() {
    let clock = ManualClock::new();
    let pool = hung_pool(&clock);
    let old = pool.pick().unwrap(); // t = 0
    clock.advance(ms(290));
    let younger = pool.pick().unwrap(); // t = 290
    clock.advance(ms(10)); // t = 300: `old` hangs
    assert!(pool.pick().is_err());
    assert_eq!(pool.stats().ejected_hung, 1);
    old.failure(); // its own 300 ms deadline
    clock.advance(ms(250)); // t = 550: the 100 ms open period is long over
    let probe = pool.pick().expect("the half-open probe");
    assert_eq!(pool.breaker(&0).unwrap().state(), State::HalfOpen);
    clock.advance(ms(40));
    younger.failure(); // t = 590: its own 300 ms deadline
    clock.advance(ms(110)); // t = 700: the probe is 150 ms old
    let _ = pool.pick();
    assert_eq!(
        pool.stats().ejected_hung,
        1,
        "the probe, 150 ms out of a 300 ms deadline, was judged hung"
    );
    assert_eq!(pool.breaker(&0).unwrap().state(), State::HalfOpen);
    probe.success();
}

/// A pick dropped without a report (a caller's timeout, a cancellation) says nothing of the
/// endpoint (`Outcome::Excluded`: "says nothing about the dependency's health"), yet it
/// counts as the endpoint answering and hides a hang.
#[test]
fn an_abandoned_pick_is_not_an_answer() {
    let clock = ManualClock::new();
    let pool = hung_pool(&clock);
    let hung = pool.pick().unwrap(); // t = 0, never answers
    let abandoned = pool.pick().unwrap(); // t = 0
    clock.advance(ms(100));
    drop(abandoned); // the caller gave up: nothing came back
    clock.advance(ms(200)); // t = 300: nothing came back for a deadline
    let _ = pool.pick();
    assert_eq!(
        pool.stats().ejected_hung,
        1,
        "a hang hidden by an abandoned pick"
    );
    drop(hung);
}

/// A clock that panics at its `n`-th read from now (0: never).
#[derive(Debug, Clone)]
struct Tripwire {
    inner: ManualClock,
    reads_left: Arc<AtomicU64>,
}

impl Clock for Tripwire {
    fn now(&self) -> Duration {
        if self.reads_left.load(Ordering::SeqCst) > 0
            && self.reads_left.fetch_sub(1, Ordering::SeqCst) == 1
        {
            panic!("probe: the user clock panics");
        }
        self.inner.now()
    }
}

/// A user clock's panic during a pick (the crate contains them elsewhere) must not leave a
/// call in flight that no pick will ever end.
#[test]
fn a_clock_panic_in_a_pick_leaves_nothing_in_flight() {
    for n in 1..=8 {
        let reads_left = Arc::new(AtomicU64::new(0));
        let clock = Tripwire {
            inner: ManualClock::new(),
            reads_left: Arc::clone(&reads_left),
        };
        let pool = Pool::new(|_: &u32| Breaker::builder())
            .clock(clock.clone())
            .deadline(ms(300));
        pool.set([0]);
        reads_left.store(n, Ordering::SeqCst);
        let picked = catch_unwind(AssertUnwindSafe(|| pool.pick()));
        reads_left.store(0, Ordering::SeqCst);
        if let Ok(Ok(pick)) = picked {
            pick.success();
        }
        assert_eq!(
            pool.in_flight(&0),
            Some(0),
            "the clock panicked at its read {n} of the pick: a call left in flight"
        );
    }
}

#[derive(Default)]
struct PanicsOnEjection;

impl Observer for PanicsOnEjection {
    fn on_transition(&self, t: &Transition<'_>) {
        if matches!(t.origin, Origin::Ejected(_)) {
            panic!("probe: an observer panics on an ejection");
        }
    }
}

/// An observer's panic on an ejection continues out of the pick that evaluated: the
/// ejection happened (the breaker is open), but the pool's record of it must not be lost.
#[test]
fn an_observer_panic_does_not_lose_the_ejection() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1_000).unwrap())
            .observer(PanicsOnEjection)
    })
    .clock(clock.clone())
    .balance(Balance::RoundRobin)
    .outlier_detection(OutlierDetection::new().failure_percentage(85, 5, 50));
    pool.set(0..5);
    for _ in 0..500 {
        let pick = pool.pick().unwrap();
        if *pick.key() == 2 {
            pick.failure();
        } else {
            pick.success();
        }
    }
    clock.advance(secs(10));
    let evaluated = catch_unwind(AssertUnwindSafe(|| pool.pick().map(|p| p.success())));
    assert!(evaluated.is_err(), "the observer's panic continues");
    assert_eq!(pool.breaker(&2).unwrap().state(), State::Open, "ejected");
    assert_eq!(
        pool.stats().ejected_failure_percentage,
        1,
        "an ejection that happened is not counted"
    );
    assert_eq!(
        pool.snapshot().endpoints[2].ejections,
        1,
        "its multiplier did not grow"
    );
}

/// Two parked checks: the first driven panics, the second passes. The panic continues out
/// of the pick, but the passed endpoint's probe, which never ran, must not count as a failure.
#[test]
fn a_check_panic_does_not_fail_another_endpoints_probe() {
    let clock = ManualClock::new();
    // 0: pending, 1: passes, 2: panics.
    let modes: Arc<[AtomicU8; 3]> = Arc::new(Default::default());
    let m = Arc::clone(&modes);
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(secs(1))
    })
    .clock(clock.clone())
    .balance(Balance::RoundRobin)
    .max_isolated(1.0)
    .health_check(move |k: &u32| {
        let (m, k) = (Arc::clone(&m), *k as usize);
        poll_fn(move |_| match m[k].load(Ordering::SeqCst) {
            0 => Poll::Pending,
            1 => Poll::Ready(true),
            _ => panic!("probe: check {k} panics"),
        })
    });
    pool.set([0, 1, 2]);
    pool.breaker(&0).unwrap().allow().unwrap().failure();
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(secs(2));
    // Each of two async picks wins one due check, finds it pending, parks it, and sends its
    // call to 2.
    for _ in 0..2 {
        let pick = block_on(pool.pick_async()).unwrap();
        assert_eq!(*pick.key(), 2);
        pick.success();
    }
    modes[0].store(2, Ordering::SeqCst);
    modes[1].store(1, Ordering::SeqCst);
    let driven = catch_unwind(AssertUnwindSafe(|| {
        block_on(pool.pick_async()).map(|p| p.success())
    }));
    assert!(driven.is_err(), "the check's panic continues");
    assert_eq!(pool.in_flight(&1), Some(0));
    assert_ne!(
        pool.breaker(&1).unwrap().state(),
        State::Open,
        "endpoint 1 passed its check; its probe never ran, yet it counted as failed"
    );
}

/// Discovery emptying the pool while an async pick runs a check (another thread's
/// `Pool::set`; here the check itself, to make the race deterministic).
#[test]
fn an_emptied_pool_during_a_check_does_not_panic() {
    let clock = ManualClock::new();
    let cell: Arc<OnceLock<Weak<Pool<u32>>>> = Arc::new(OnceLock::new());
    let c = Arc::clone(&cell);
    let pool = Arc::new(
        Pool::new(|_: &u32| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(secs(1))
        })
        .clock(clock.clone())
        .health_check(move |_: &u32| {
            if let Some(pool) = c.get().and_then(Weak::upgrade) {
                pool.set(Vec::<u32>::new());
            }
            let mut polled = false;
            poll_fn(move |_| {
                if polled {
                    Poll::Ready(true)
                } else {
                    polled = true;
                    Poll::Pending
                }
            })
        }),
    );
    cell.set(Arc::downgrade(&pool)).unwrap();
    pool.set([1]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(secs(2));
    let picked = catch_unwind(AssertUnwindSafe(|| {
        block_on(pool.pick_async()).map(|p| p.success())
    }));
    assert!(picked.is_ok(), "the pick panicked");
}

/// The cap is a share of the endpoints that are not down: two of four hung (down, out
/// whatever the cap) and the other two tripped; the cap of ½ of the two live ones keeps one
/// of them in rotation (counted over all four, it would have let both be isolated and the
/// pool answer NoEndpoint).
#[test]
fn passive_isolation_is_capped_among_the_endpoints_that_are_not_down() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(secs(10))
    })
    .clock(clock.clone())
    .balance(Balance::RoundRobin)
    .deadline(ms(300));
    pool.set([0, 1, 2, 3]);
    let hung = [pool.pick().unwrap(), pool.pick().unwrap()];
    assert_eq!([*hung[0].key(), *hung[1].key()], [0, 1]);
    for key in [2, 3] {
        let tripped = pool.pick().unwrap();
        assert_eq!(*tripped.key(), key);
        tripped.failure();
    }
    clock.advance(ms(300));
    let picked = pool
        .pick()
        .expect("one of the two live endpoints kept in rotation");
    assert!(
        picked.over_cap() && [2, 3].contains(picked.key()),
        "{picked:?}"
    );
    assert_eq!(pool.stats().ejected_hung, 2);
    picked.success();
    drop(hung);
}
