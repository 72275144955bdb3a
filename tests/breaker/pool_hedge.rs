//! `Pool::hedge`: a call that has not answered after the hedge's delay gets another attempt
//! on another endpoint; the first good answer wins, the others are cancelled and counted
//! neither way; hedges are paid from the budget, bounded by `max_attempts` and the deadline.
//! Latencies are a `ManualClock`'s: an attempt answers once the clock reaches its time.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::Pool;
use lazybreaker::retry::{Hedge, Retry, RetryBudget};
use lazybreaker::{Breaker, ManualClock, State};

const MS: Duration = Duration::from_millis(1);

/// Completes once `clock` reads `until` or later.
struct Until {
    clock: ManualClock,
    until: Duration,
}

impl Future for Until {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A waker that counts its wakes.
struct Count(AtomicU32);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A pool of `keys` on `clock`, each breaker tripping on one failure.
fn pool(clock: &ManualClock, keys: &[&'static str]) -> Pool<&'static str> {
    let pool = Pool::new(|_: &&str| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(5))
    })
    .clock(clock.clone());
    pool.set(keys.iter().copied());
    pool
}

/// Drives `call` on `clock`: polls it, and advances the clock a millisecond between polls,
/// at most `limit` times; the result and the time it took.
fn drive<F: Future>(clock: &ManualClock, call: F, limit: u32) -> (F::Output, Duration) {
    let start = clock.now();
    let mut call = pin!(call);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..limit {
        if let Poll::Ready(got) = call.as_mut().poll(&mut cx) {
            return (got, clock.now() - start);
        }
        clock.advance(MS);
    }
    panic!("no answer within {limit} ms");
}

/// A call whose attempt on each key takes the latency `latency` gives it, the keys it was
/// sent to recorded in order.
fn timed<'a>(
    clock: &'a ManualClock,
    latency: impl Fn(&str) -> Duration + 'a,
    sent: &'a Mutex<Vec<&'static str>>,
) -> impl FnMut(&'static str) -> Pin<Box<dyn Future<Output = Result<&'static str, String>> + 'a>> + 'a
{
    move |key| {
        sent.lock().unwrap().push(key);
        let until = clock.now() + latency(key);
        let wait = Until {
            clock: clock.clone(),
            until,
        };
        Box::pin(async move {
            wait.await;
            Ok(key)
        })
    }
}

#[test]
fn a_slow_first_attempt_is_hedged_after_the_delay_and_the_fast_answer_wins() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["slow", "fast"]).hedge(Hedge::after(20 * MS));
    let latency = |key: &str| if key == "slow" { 1_000 * MS } else { 5 * MS };
    let (mut slow_first, mut fast_first) = (0, 0);
    for _ in 0..40 {
        let sent = Mutex::new(Vec::new());
        let (got, took) = drive(
            &clock,
            pool.call(timed(&clock, latency, &sent), OkIsSuccess),
            2_000,
        );
        assert_eq!(got.unwrap(), "fast");
        let sent = sent.into_inner().unwrap();
        if sent[0] == "slow" {
            slow_first += 1;
            assert_eq!(sent, ["slow", "fast"]);
            // The hedge goes out at 20 ms and answers 5 ms later.
            assert_eq!(took, 25 * MS);
        } else {
            fast_first += 1;
            assert_eq!(sent, ["fast"], "an answer within the delay is not hedged");
            assert_eq!(took, 5 * MS);
        }
    }
    assert!(
        slow_first > 0 && fast_first > 0,
        "{slow_first} {fast_first}"
    );
    let stats = pool.stats();
    assert_eq!(stats.hedges, slow_first);
    assert_eq!(stats.hedges_won, slow_first);
    assert_eq!(stats.hedges_cancelled, slow_first);
    // The cancelled attempts count neither way: the slow endpoint's breaker (one failure
    // trips it) is closed, with no failure and no success.
    let slow = pool.breaker(&"slow").unwrap();
    assert_eq!(slow.state(), State::Closed);
    let totals = slow.totals();
    assert_eq!((totals.successes, totals.failures), (0, 0));
    assert_eq!(totals.exclusions, slow_first);
    assert_eq!(pool.in_flight(&"slow"), Some(0));
    assert_eq!(pool.hedge_policy().unwrap().stats().hedges, slow_first);
}

#[test]
fn one_attempt_at_most_never_hedges() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["slow", "fast"]).hedge(Hedge::after(20 * MS).max_attempts(1));
    let latency = |key: &str| if key == "slow" { 100 * MS } else { 5 * MS };
    for _ in 0..20 {
        let sent = Mutex::new(Vec::new());
        let (got, _) = drive(
            &clock,
            pool.call(timed(&clock, latency, &sent), OkIsSuccess),
            200,
        );
        assert_eq!(sent.into_inner().unwrap().len(), 1);
        assert!(got.is_ok());
    }
    assert_eq!(pool.stats().hedges, 0);
}

#[test]
fn at_most_max_attempts_go_out_each_on_another_endpoint() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b", "c", "d"]).hedge(Hedge::after(10 * MS).max_attempts(3));
    // Every endpoint answers after 100 ms: a call sends three attempts, at 0, 10 and 20 ms.
    let sent = Mutex::new(Vec::new());
    let (got, took) = drive(
        &clock,
        pool.call(timed(&clock, |_| 100 * MS, &sent), OkIsSuccess),
        500,
    );
    let sent = sent.into_inner().unwrap();
    assert_eq!(sent.len(), 3, "{sent:?}");
    let mut distinct = sent.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "each on another endpoint: {sent:?}");
    // The first attempt answers first (sent first, same latency).
    assert_eq!(got.unwrap(), sent[0]);
    assert_eq!(took, 100 * MS);
    let stats = pool.stats();
    assert_eq!(
        (stats.hedges, stats.hedges_won, stats.hedges_cancelled),
        (2, 0, 2)
    );
}

#[test]
fn hedges_are_paid_from_the_budget() {
    let clock = ManualClock::new();
    let empty = RetryBudget::new(0.0).unwrap().min_retries_per_second(0);
    let pool = pool(&clock, &["a", "b"]).hedge(Hedge::after(10 * MS).budget(empty));
    for _ in 0..5 {
        let sent = Mutex::new(Vec::new());
        let (got, took) = drive(
            &clock,
            pool.call(timed(&clock, |_| 50 * MS, &sent), OkIsSuccess),
            200,
        );
        assert!(got.is_ok());
        assert_eq!(took, 50 * MS);
        assert_eq!(sent.into_inner().unwrap().len(), 1, "no room: no hedge");
    }
    let stats = pool.stats();
    assert_eq!(stats.hedges, 0);
    assert_eq!(stats.hedges_budget_denied, 5);
}

#[test]
fn a_retry_lends_its_budget_and_the_hedges_draw_on_it() {
    let clock = ManualClock::new();
    let budget = RetryBudget::new(0.0)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone());
    let pool = pool(&clock, &["a", "b"])
        .retry(Retry::new(3).unwrap().budget(budget))
        .hedge(Hedge::after(10 * MS));
    let sent = Mutex::new(Vec::new());
    let (got, _) = drive(
        &clock,
        pool.call(timed(&clock, |_| 50 * MS, &sent), OkIsSuccess),
        200,
    );
    assert!(got.is_ok());
    assert_eq!(sent.into_inner().unwrap().len(), 1);
    assert_eq!(pool.stats().hedges_budget_denied, 1);
}

#[test]
fn no_hedge_goes_out_past_the_deadline() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b"])
        .deadline(15 * MS)
        .hedge(Hedge::after(20 * MS));
    let sent = Mutex::new(Vec::new());
    let (got, _) = drive(
        &clock,
        pool.call(timed(&clock, |_| 40 * MS, &sent), OkIsSuccess),
        200,
    );
    assert!(got.is_ok());
    assert_eq!(sent.into_inner().unwrap().len(), 1);
    assert_eq!(pool.stats().hedges, 0);
    assert_eq!(pool.hedge_policy().unwrap().stats().past_deadline, 1);
}

#[test]
fn a_failure_sends_the_next_attempt_at_once() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["bad", "good"]).hedge(Hedge::after(Duration::from_secs(1)));
    let sent = Mutex::new(Vec::new());
    let call = |key: &'static str| {
        sent.lock().unwrap().push(key);
        async move {
            if key == "bad" {
                Err(String::from("500"))
            } else {
                Ok(key)
            }
        }
    };
    for _ in 0..10 {
        let (got, took) = drive(&clock, pool.call(call, OkIsSuccess), 10);
        assert_eq!(got.unwrap(), "good");
        assert_eq!(
            took,
            Duration::ZERO,
            "no wait for the delay after a failure"
        );
    }
    // "bad" failed once (its breaker trips on one failure), hedged at once.
    assert_eq!(
        sent.into_inner()
            .unwrap()
            .iter()
            .filter(|k| **k == "bad")
            .count(),
        1
    );
    assert_eq!(pool.stats().hedges, 1);
    assert_eq!(pool.breaker(&"bad").unwrap().state(), State::Open);
}

#[test]
fn every_attempt_failing_returns_the_last_failure() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b", "c"]).hedge(Hedge::after(10 * MS).max_attempts(2));
    let calls = AtomicU32::new(0);
    let call = |key: &'static str| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move { Err::<(), _>(format!("{key} failed")) }
    };
    let (got, _) = drive(&clock, pool.call(call, OkIsSuccess), 10);
    assert!(matches!(got, Err(lazybreaker::Error::Inner(_))));
    assert_eq!(
        calls.load(Ordering::Relaxed),
        2,
        "max_attempts bounds the failures too"
    );
}

#[test]
fn a_percentile_hedge_waits_for_what_the_endpoints_usually_take() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b", "c"]).hedge(Hedge::at_percentile(0.9));
    // Before any latency is known, nothing is hedged.
    let sent = Mutex::new(Vec::new());
    let (_, took) = drive(
        &clock,
        pool.call(timed(&clock, |_| 10 * MS, &sent), OkIsSuccess),
        100,
    );
    assert_eq!((took, sent.into_inner().unwrap().len()), (10 * MS, 1));
    // Every endpoint answers in 10 ms, for a while.
    for _ in 0..60 {
        let sent = Mutex::new(Vec::new());
        let _ = drive(
            &clock,
            pool.call(timed(&clock, |_| 10 * MS, &sent), OkIsSuccess),
            100,
        );
        assert_eq!(
            sent.into_inner().unwrap().len(),
            1,
            "10 ms is usual: no hedge"
        );
    }
    clock.advance(Duration::from_secs(1)); // the delay is recomputed
                                           // Then "a" stops answering: a call sent to it is hedged after about 10 ms.
    let hung = |key: &str| if key == "a" { 10_000 * MS } else { 10 * MS };
    let mut hedged = 0;
    for _ in 0..20 {
        let sent = Mutex::new(Vec::new());
        let (got, took) = drive(
            &clock,
            pool.call(timed(&clock, hung, &sent), OkIsSuccess),
            1_000,
        );
        assert_ne!(got.unwrap(), "a");
        if sent.into_inner().unwrap()[0] == "a" {
            hedged += 1;
            assert!(
                took >= 20 * MS && took <= 25 * MS,
                "hedged at ~10 ms: {took:?}"
            );
        }
    }
    assert!(hedged > 0);
    assert_eq!(pool.stats().hedges, hedged);
}

#[test]
fn a_call_waiting_for_its_delay_is_woken_by_the_next_pick() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b"]).hedge(Hedge::after(20 * MS));
    let woken = Arc::new(Count(AtomicU32::new(0)));
    let waker = Waker::from(Arc::clone(&woken));
    let sent = Mutex::new(Vec::new());
    let mut call = pin!(pool.call(timed(&clock, |_| 100 * MS, &sent), OkIsSuccess));
    let mut cx = Context::from_waker(&waker);
    assert!(call.as_mut().poll(&mut cx).is_pending());
    clock.advance(10 * MS);
    pool.pick().unwrap().success();
    assert_eq!(woken.0.load(Ordering::Relaxed), 0, "not due yet");
    clock.advance(10 * MS);
    pool.pick().unwrap().success();
    assert_eq!(
        woken.0.load(Ordering::Relaxed),
        1,
        "due: the pick woke the call"
    );
    assert!(call.as_mut().poll(&mut cx).is_pending());
    assert_eq!(
        sent.lock().unwrap().len(),
        2,
        "woken, the call sent its hedge"
    );
}

#[test]
fn bad_settings_are_refused_naming_the_field() {
    for p in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
        let err = Hedge::at_percentile(p).validate().unwrap_err();
        assert_eq!(err.field(), "hedge.percentile", "{p}");
    }
    let err = Hedge::after(MS).max_attempts(0).validate().unwrap_err();
    assert_eq!(err.field(), "hedge.max_attempts");
    let clock = ManualClock::new();
    let refused = pool(&clock, &["a"]).try_hedge(Hedge::at_percentile(2.0));
    assert_eq!(refused.unwrap_err().field(), "hedge.percentile");
    // Lenient: a hedge out of range hedges nothing.
    let pool = pool(&clock, &["a", "b"]).hedge(Hedge::after(MS).max_attempts(0));
    assert!(pool.hedge_policy().is_none());
}

/// Drives `call` on `clock` as [`drive`] does, catching a panic.
fn drive_catching<F: Future>(
    clock: &ManualClock,
    call: F,
    limit: u32,
) -> Result<F::Output, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drive(clock, call, limit).0)).map_err(
        |payload| {
            payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .unwrap_or_default()
        },
    )
}

#[test]
fn an_attempt_that_panics_fails_its_endpoint_and_cancels_the_others() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .hedge(Hedge::after(10 * MS));
    pool.set(["a", "b"]);
    // The first attempt never answers; the hedge panics when it is polled at 15 ms.
    let first = Mutex::new(None);
    let call = |key: &'static str| {
        let mut first = first.lock().unwrap();
        let is_first = first.is_none();
        first.get_or_insert(key);
        let clock = clock.clone();
        let at = clock.now() + 5 * MS;
        async move {
            Until {
                clock: clock.clone(),
                until: at,
            }
            .await;
            if is_first {
                std::future::pending::<()>().await;
            }
            if clock.now() > Duration::ZERO {
                panic!("the hedge panics");
            }
            Ok::<(), String>(())
        }
    };
    let got = drive_catching(&clock, pool.call(call, OkIsSuccess), 100);
    assert_eq!(got.unwrap_err(), "the hedge panics", "the panic goes on");
    let first = first.into_inner().unwrap().unwrap();
    let second = if first == "a" { "b" } else { "a" };
    let totals = |key| pool.breaker(&key).unwrap().totals();
    assert_eq!((totals(second).failures, totals(second).exclusions), (1, 0));
    assert_eq!(
        (totals(first).failures, totals(first).exclusions),
        (0, 1),
        "cancelled"
    );
    assert_eq!(
        (pool.in_flight(&"a"), pool.in_flight(&"b")),
        (Some(0), Some(0))
    );
}

#[test]
fn a_hedge_whose_call_panics_while_built_fails_its_endpoint_and_cancels_the_first() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .hedge(Hedge::after(10 * MS));
    pool.set(["a", "b"]);
    let built = AtomicU32::new(0);
    let call = |_key: &'static str| {
        if built.fetch_add(1, Ordering::Relaxed) == 1 {
            panic!("building the hedge panics");
        }
        std::future::pending::<Result<(), String>>()
    };
    let got = drive_catching(&clock, pool.call(call, OkIsSuccess), 100);
    assert_eq!(got.unwrap_err(), "building the hedge panics");
    let (a, b) = (
        pool.breaker(&"a").unwrap().totals(),
        pool.breaker(&"b").unwrap().totals(),
    );
    // One endpoint failed (the hedge's pick), the other's attempt was cancelled.
    assert_eq!(a.failures + b.failures, 1);
    assert_eq!(a.exclusions + b.exclusions, 1);
    assert_eq!(
        (pool.in_flight(&"a"), pool.in_flight(&"b")),
        (Some(0), Some(0))
    );
}

#[test]
fn a_percentile_hedge_steers_the_first_attempts_away_from_a_slow_endpoint() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b", "c"]).hedge(Hedge::at_percentile(0.95));
    for _ in 0..60 {
        let sent = Mutex::new(Vec::new());
        let _ = drive(
            &clock,
            pool.call(timed(&clock, |_| 10 * MS, &sent), OkIsSuccess),
            100,
        );
    }
    clock.advance(Duration::from_secs(1));
    // "a" turns slow: 200 ms a call. Each of its attempts is hedged, and cancelled once the
    // hedge answers: the cancelled attempt ran longer than its estimate, which rises.
    let slow = |key: &str| if key == "a" { 200 * MS } else { 10 * MS };
    let mut first_on_a = 0;
    let calls = 300;
    for _ in 0..calls {
        let sent = Mutex::new(Vec::new());
        let (got, took) = drive(
            &clock,
            pool.call(timed(&clock, slow, &sent), OkIsSuccess),
            1_000,
        );
        assert_ne!(got.unwrap(), "a");
        assert!(took <= 40 * MS, "{took:?}");
        if sent.into_inner().unwrap()[0] == "a" {
            first_on_a += 1;
        }
    }
    let estimate = |key| {
        let snapshot = pool.snapshot();
        snapshot
            .endpoints
            .iter()
            .find(|e| e.key == key)
            .unwrap()
            .latency
            .unwrap()
    };
    // Its attempts are cut off when the hedge answers (about 20 ms in), each one above its
    // estimate: it rises by a step (an eighth, times 0.95) with each, from about 10 ms.
    if first_on_a >= 2 {
        assert!(estimate("a") > 12 * MS, "{:?}", estimate("a"));
    }
    assert!(estimate("b") <= 12 * MS, "{:?}", estimate("b"));
    // Plain power of two choices would send a third of the first attempts to "a" (each then
    // hedged); weighed by latency, a few (one pick in 32 explores).
    assert!(first_on_a * 10 < calls, "{first_on_a} of {calls}");
    assert_eq!(pool.stats().hedges, first_on_a);
}

#[test]
fn a_cancelled_attempt_is_no_answer_for_the_hang_watch() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .balance(lazybreaker::pool::Balance::RoundRobin)
        .deadline(100 * MS)
        .hedge(Hedge::after(10 * MS));
    pool.set(["x", "y"]);
    // A call on "x" that never comes back, outside any hedge.
    let held = pool.pick().unwrap();
    assert_eq!(*held.key(), "x");
    // Hedged calls take turns: those sent to "x" first are hedged to "y" and cancelled.
    let latency = |key: &str| if key == "x" { 10_000 * MS } else { 5 * MS };
    let mut cancelled_on_x = 0;
    for _ in 0..4 {
        let sent = Mutex::new(Vec::new());
        let (got, _) = drive(
            &clock,
            pool.call(timed(&clock, latency, &sent), OkIsSuccess),
            100,
        );
        assert_eq!(got.unwrap(), "y");
        if sent.into_inner().unwrap()[0] == "x" {
            cancelled_on_x += 1;
        }
    }
    assert!(cancelled_on_x > 0);
    assert!(clock.now() < 100 * MS, "{:?}", clock.now());
    // A deadline after the held call went out, "x" has answered nothing: a cancelled
    // attempt is no answer, so the next pick judges it hung.
    clock.advance(100 * MS - clock.now() + MS);
    let pick = pool.pick().unwrap();
    assert_eq!(*pick.key(), "y");
    assert_eq!(pool.stats().ejected_hung, 1);
    drop((held, pick));
}

#[test]
fn a_call_polled_with_another_waker_is_woken_through_it() {
    let clock = ManualClock::new();
    let pool = pool(&clock, &["a", "b"]).hedge(Hedge::after(20 * MS));
    let (first, second) = (
        Arc::new(Count(AtomicU32::new(0))),
        Arc::new(Count(AtomicU32::new(0))),
    );
    let sent = Mutex::new(Vec::new());
    let mut call = pin!(pool.call(timed(&clock, |_| 100 * MS, &sent), OkIsSuccess));
    let waker = Waker::from(Arc::clone(&first));
    assert!(call
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    // Moved to another task (or executor) before its delay: polled with a new waker.
    let waker = Waker::from(Arc::clone(&second));
    assert!(call
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    clock.advance(20 * MS);
    pool.pick().unwrap().success();
    assert_eq!(
        second.0.load(Ordering::Relaxed),
        1,
        "the waker of the last poll"
    );
}
