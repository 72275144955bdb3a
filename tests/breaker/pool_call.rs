//! `Pool::call` (pick, call, classify, record) and the health check that runs beside the
//! calls: an async pick never waits for a check while another endpoint can take its call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::pool::{Balance, Pool};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};

/// Polls `f` once.
fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls `f` to completion, at most 100 times.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    for _ in 0..100 {
        if let Poll::Ready(v) = poll_once(f.as_mut()) {
            return v;
        }
    }
    panic!("not ready after 100 polls");
}

fn pool(clock: &ManualClock) -> Pool<u32> {
    Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(1))
    })
    .clock(clock.clone())
}

#[test]
fn a_call_records_its_result_through_its_pick() {
    let clock = ManualClock::new();
    let pool = pool(&clock);
    pool.set([1, 2]);
    let called = AtomicU32::new(0);
    let got = block_on(pool.call(
        |key| {
            called.fetch_add(1, Ordering::Relaxed);
            async move { Err::<(), _>(format!("{key} refused")) }
        },
        OkIsSuccess,
    ));
    let Err(Error::Inner(message)) = got else {
        panic!("the call's own error: {got:?}")
    };
    let failed: u32 = message[..1].parse().unwrap();
    assert_eq!(pool.breaker(&failed).unwrap().state(), State::Open);
    assert_eq!(pool.in_flight(&failed), Some(0), "no pick left in flight");
    // The other takes the next calls, counted as successes.
    for _ in 0..5 {
        let got = block_on(pool.call(|key| async move { Ok::<_, ()>(key) }, OkIsSuccess));
        assert_ne!(got.unwrap(), failed);
    }
    let other = 3 - failed;
    assert_eq!(pool.breaker(&other).unwrap().totals().successes, 5);
    assert_eq!(called.load(Ordering::Relaxed), 1);
}

#[test]
fn a_call_the_pool_cannot_take_is_never_built() {
    let clock = ManualClock::new();
    let pool = pool(&clock).max_isolated(1.0);
    pool.set([1]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    let built = AtomicBool::new(false);
    let got = block_on(pool.call(
        |_| {
            built.store(true, Ordering::Relaxed);
            async { Ok::<_, ()>(()) }
        },
        OkIsSuccess,
    ));
    let Err(Error::Rejected(rejected)) = got else {
        panic!("rejected: {got:?}")
    };
    assert_eq!(
        rejected,
        Rejected::NoEndpoint {
            retry_after: Some(Duration::from_secs(1))
        }
    );
    assert!(!built.load(Ordering::Relaxed));
}

#[test]
fn the_classifier_decides_how_a_result_counts() {
    let clock = ManualClock::new();
    let pool = pool(&clock);
    pool.set([1]);
    // A 404 says nothing of the endpoint's health: excluded.
    let classify = |r: &Result<u16, ()>| match r {
        Ok(404) => Outcome::Excluded,
        Ok(s) if *s >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(()) => Outcome::Failure,
    };
    let got = block_on(pool.call(|_| async { Ok::<u16, ()>(404) }, classify));
    assert_eq!(got.unwrap(), 404);
    let totals = pool.breaker(&1).unwrap().totals();
    assert_eq!((totals.exclusions, totals.failures), (1, 0));
    let got = block_on(pool.call(|_| async { Ok::<u16, ()>(503) }, classify));
    assert_eq!(got.unwrap(), 503, "the response goes back to the caller");
    assert_eq!(pool.breaker(&1).unwrap().state(), State::Open);
}

/// A check that answers once `answer` is set, counting its polls.
fn gated_check(
    answer: Arc<AtomicU32>,
    polls: Arc<AtomicU32>,
) -> impl Fn(&u32) -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync + 'static {
    move |_: &u32| {
        let (answer, polls) = (Arc::clone(&answer), Arc::clone(&polls));
        Box::pin(std::future::poll_fn(move |_| {
            polls.fetch_add(1, Ordering::Relaxed);
            match answer.load(Ordering::Relaxed) {
                0 => Poll::Pending,
                1 => Poll::Ready(true),
                _ => Poll::Ready(false),
            }
        }))
    }
}

#[test]
fn a_check_under_way_never_makes_a_caller_wait_while_another_endpoint_can_take_its_call() {
    let clock = ManualClock::new();
    let (answer, polls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let pool = pool(&clock)
        .balance(Balance::RoundRobin) // the first pick lands on 1 and starts its check
        .health_check(gated_check(Arc::clone(&answer), Arc::clone(&polls)));
    pool.set([1, 2]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(Duration::from_secs(2)); // 1's check is due
                                           // Every pick is ready at its first poll, on 2; the first started 1's check.
    for _ in 0..10 {
        let mut pick = std::pin::pin!(pool.pick_async());
        let Poll::Ready(Ok(pick)) = poll_once(pick.as_mut()) else {
            panic!("a pick waited for a check")
        };
        assert_eq!(*pick.key(), 2);
        pick.success();
    }
    assert_eq!(
        polls.load(Ordering::Relaxed),
        10,
        "the first pick starts the check, each pick that follows polls it once"
    );
    // It passes: the next async pick to drive it takes 1 as its probe.
    answer.store(1, Ordering::Relaxed);
    let pick = block_on(pool.pick_async()).unwrap();
    assert_eq!(*pick.key(), 1, "the revived endpoint's first probe");
    pick.success();
    assert_eq!(pool.breaker(&1).unwrap().state(), State::Closed);
    assert_eq!(pool.breaker(&1).unwrap().totals().health_checks, 1);
}

#[test]
fn with_no_other_endpoint_the_caller_waits_for_the_check() {
    let clock = ManualClock::new();
    let (answer, polls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let pool = pool(&clock)
        .max_isolated(1.0)
        .health_check(gated_check(Arc::clone(&answer), polls));
    pool.set([1]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(Duration::from_secs(2));
    let mut pick = std::pin::pin!(pool.pick_async());
    assert!(
        poll_once(pick.as_mut()).is_pending(),
        "nothing else can take it"
    );
    answer.store(1, Ordering::Relaxed);
    let Poll::Ready(Ok(pick)) = poll_once(pick.as_mut()) else {
        panic!("the check passed")
    };
    assert_eq!(*pick.key(), 1);
    pick.success();
}

#[test]
fn a_parked_check_that_fails_keeps_its_endpoint_out() {
    let clock = ManualClock::new();
    let (answer, polls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let pool = pool(&clock)
        .balance(Balance::RoundRobin) // the first pick lands on 1 and starts its check
        .health_check(gated_check(Arc::clone(&answer), polls));
    pool.set([1, 2]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(Duration::from_secs(2));
    block_on(pool.pick_async()).unwrap().success(); // on 2, 1's check parked
    answer.store(2, Ordering::Relaxed); // it fails
    for _ in 0..5 {
        let pick = block_on(pool.pick_async()).unwrap();
        assert_eq!(*pick.key(), 2);
        pick.success();
    }
    let breaker = pool.breaker(&1).unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.totals().health_checks_failed, 1);
    assert!(pool.snapshot().endpoints[0].down, "down by its own check");
}

fn open_for(breaker: &Breaker) -> Duration {
    breaker.allow().unwrap_err().retry_after().expect("open")
}

#[test]
fn a_pools_open_period_backs_off_on_failed_probes_and_keeps_its_cadence_on_failed_checks() {
    let clock = ManualClock::new();
    let ms = Duration::from_millis;
    // No timeout in the factory: the pool's default, 100 ms doubling to 30 s.
    let pool = Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
        .clock(clock.clone());
    pool.set([1]);
    let breaker = pool.breaker(&1).unwrap();
    breaker.allow().unwrap().failure();
    assert_eq!(open_for(&breaker), ms(100));
    let mut expected = vec![];
    let mut seen = vec![];
    for want in [200, 400, 800, 1_600] {
        clock.advance(open_for(&breaker) + ms(1));
        breaker.allow().unwrap().failure(); // the probe fails
        seen.push(open_for(&breaker));
        expected.push(ms(want));
    }
    assert_eq!(seen, expected);
    // Capped at 30 s.
    for _ in 0..10 {
        clock.advance(open_for(&breaker) + ms(1));
        breaker.allow().unwrap().failure();
    }
    assert_eq!(open_for(&breaker), Duration::from_secs(30));
    // Recovered, and a relapse at once: still 30 s (brpc: within 30 s of the recovery).
    clock.advance(Duration::from_secs(31));
    breaker.allow().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
    breaker.allow().unwrap().failure();
    assert_eq!(open_for(&breaker), Duration::from_secs(30));
    // Recovered, healthy for 30 s: the next trip starts over.
    clock.advance(Duration::from_secs(31));
    breaker.allow().unwrap().success();
    clock.advance(Duration::from_secs(30));
    breaker.allow().unwrap().failure();
    assert_eq!(open_for(&breaker), ms(100));

    // With a health check that fails, each check re-arms 100 ms: a steady cadence.
    let pool = Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
        .clock(clock.clone())
        .max_isolated(1.0)
        .health_check(|_: &u32| std::future::ready(false));
    pool.set([1]);
    let breaker = pool.breaker(&1).unwrap();
    breaker.allow().unwrap().failure();
    for _ in 0..5 {
        clock.advance(ms(101));
        assert!(block_on(pool.pick_async()).is_err(), "its check fails");
        assert_eq!(open_for(&breaker), ms(100));
    }
    assert_eq!(breaker.totals().health_checks_failed, 5);
    // A factory's own timeout is kept: no backoff.
    let pool = Pool::new(|_: &u32| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(60))
    })
    .clock(clock.clone());
    pool.set([1]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    assert_eq!(
        open_for(&pool.breaker(&1).unwrap()),
        Duration::from_secs(60)
    );
}

#[test]
fn with_every_endpoint_out_a_pick_answers_at_once_and_leaves_the_checks_running() {
    let clock = ManualClock::new();
    let (answer, polls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let pool = pool(&clock)
        .max_isolated(1.0)
        .health_check(gated_check(Arc::clone(&answer), Arc::clone(&polls)));
    pool.set([1, 2]);
    for key in [1, 2] {
        pool.breaker(&key).unwrap().allow().unwrap().failure();
    }
    clock.advance(Duration::from_secs(2)); // both checks due
                                           // The first pick starts both checks (two per pick), waits for neither, and answers.
    let mut pick = std::pin::pin!(pool.pick_async());
    let Poll::Ready(Err(Rejected::NoEndpoint {
        retry_after: Some(wait),
    })) = poll_once(pick.as_mut())
    else {
        panic!("a pick waited for a check with every endpoint out")
    };
    assert!(wait > Duration::ZERO);
    assert_eq!(polls.load(Ordering::Relaxed), 2, "each check polled once");
    // The picks that follow drive them, answering at once too.
    for _ in 0..3 {
        let mut pick = std::pin::pin!(pool.pick_async());
        assert!(matches!(
            poll_once(pick.as_mut()),
            Poll::Ready(Err(Rejected::NoEndpoint { .. }))
        ));
    }
    assert_eq!(polls.load(Ordering::Relaxed), 2 + 3 * 2);
    // The checks pass: the next picks take the revived endpoints as their probes.
    answer.store(1, Ordering::Relaxed);
    let first = block_on(pool.pick_async()).unwrap();
    let second = block_on(pool.pick_async()).unwrap();
    assert_ne!(first.key(), second.key());
    first.success();
    second.success();
    for key in [1, 2] {
        assert_eq!(pool.breaker(&key).unwrap().state(), State::Closed);
    }
}
