//! Health-checked revival (`Builder::health_check`), with a `ManualClock` and hand-polled
//! futures: the check runs in the first call after the open period, before its request is
//! built; a failed check keeps the request from being sent and reopens; a passed one makes
//! that request the first probe; calls during a check are rejected and the check runs once;
//! a dropped check is run again by the next call; a check past `check_timeout` is taken
//! over; a panicking check fails and keeps unwinding; sync calls probe as without a check.

use crate::checks;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use checks::{due, poll_once, Check, Verdict, OPEN_FOR, PAST_OPEN};

use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};

/// A request that counts how many times it was built.
fn request(
    built: &AtomicUsize,
) -> impl FnOnce() -> std::future::Ready<Result<&'static str, ()>> + '_ {
    move || {
        built.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok("real"))
    }
}

#[test]
fn nothing_runs_in_the_closed_state() {
    let check = Check::default();
    let clock = ManualClock::new();
    let c = check.clone();
    let breaker = Breaker::builder()
        .clock(clock)
        .health_check(move || c.run())
        .build();
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert_eq!(poll_once(&mut call), Poll::Ready(Ok("real")));
    assert_eq!(check.runs(), 0);
    assert_eq!(breaker.totals().health_checks, 0);
}

#[test]
fn a_failed_check_keeps_the_request_from_being_sent_and_reopens() {
    let check = Check::default();
    let (breaker, clock) = due(&check);
    assert_eq!(
        breaker.state(),
        State::Open,
        "waiting for a check, not half-open"
    );
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut call).is_pending(), "the check runs first");
    assert_eq!((check.runs(), built.load(Ordering::SeqCst)), (1, 0));
    check.settle(Verdict::Fail);
    match poll_once(&mut call) {
        Poll::Ready(Err(Error::Rejected(Rejected::Open { retry_after }))) => {
            assert_eq!(retry_after, OPEN_FOR, "a new open period, the policy's");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(built.load(Ordering::SeqCst), 0, "no request was built");
    let t = breaker.totals();
    assert_eq!((t.health_checks, t.health_checks_failed), (1, 1));
    assert_eq!(
        breaker.observer().take(),
        [(State::Open, State::Open, Origin::HealthCheck)],
        "the open period re-armed: one event, no state change"
    );
    let s = breaker.snapshot();
    assert_eq!(s.times_opened, 1, "a failed check is not another opening");
    assert_eq!(s.transitions.get(State::Open, State::HalfOpen), 0);
    // The next open period: rejected without a check until it is over.
    clock.advance(Duration::from_secs(29));
    let mut early = Box::pin(breaker.execute_async(request(&built)));
    assert!(matches!(
        poll_once(&mut early),
        Poll::Ready(Err(Error::Rejected(Rejected::Open { .. })))
    ));
    assert_eq!(check.runs(), 1);
}

#[test]
fn a_passed_check_makes_that_request_the_first_probe() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut call).is_pending());
    check.settle(Verdict::Pass);
    assert_eq!(poll_once(&mut call), Poll::Ready(Ok("real")));
    assert_eq!(built.load(Ordering::SeqCst), 1);
    assert_eq!(breaker.state(), State::Closed, "the probe succeeded");
    let t = breaker.totals();
    assert_eq!((t.health_checks, t.health_checks_failed), (1, 0));
    assert_eq!(
        breaker.observer().take(),
        [
            (State::Open, State::HalfOpen, Origin::HealthCheck),
            (State::HalfOpen, State::Closed, Origin::Breaker)
        ]
    );
}

#[test]
fn calls_during_a_check_are_rejected_and_the_check_runs_once() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut first = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut first).is_pending());
    for _ in 0..5 {
        let mut other = Box::pin(breaker.execute_async(request(&built)));
        assert!(
            matches!(
                poll_once(&mut other),
                Poll::Ready(Err(Error::Rejected(Rejected::Checking)))
            ),
            "rejected at once, never parked"
        );
        // A sync call too.
        assert_eq!(breaker.allow().unwrap_err(), Rejected::Checking);
    }
    assert_eq!(check.runs(), 1, "the check runs once");
    assert_eq!(built.load(Ordering::SeqCst), 0);
    assert_eq!(breaker.totals().rejected_open, 10);
    check.settle(Verdict::Pass);
    assert_eq!(poll_once(&mut first), Poll::Ready(Ok("real")));
}

#[test]
fn a_dropped_check_is_run_again_by_the_next_call() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut first = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut first).is_pending());
    drop(first); // cancelled during its check
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.totals().health_checks, 0, "no verdict, not counted");
    let mut second = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut second).is_pending(), "runs the check itself");
    assert_eq!(check.runs(), 2);
    check.settle(Verdict::Pass);
    assert_eq!(poll_once(&mut second), Poll::Ready(Ok("real")));
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_check_past_check_timeout_is_taken_over() {
    let check = Check::default();
    let (breaker, clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut slow = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut slow).is_pending());
    clock.advance(Duration::from_millis(500));
    let mut early = Box::pin(breaker.execute_async(request(&built)));
    assert!(
        matches!(
            poll_once(&mut early),
            Poll::Ready(Err(Error::Rejected(Rejected::Checking)))
        ),
        "at 500 ms the check is still live"
    );
    clock.advance(Duration::from_millis(1));
    let mut takeover = Box::pin(breaker.execute_async(request(&built)));
    assert!(
        poll_once(&mut takeover).is_pending(),
        "past 500 ms: taken over"
    );
    assert_eq!(check.runs(), 2);
    check.settle(Verdict::Pass);
    // The slow check settles first, but its lease was taken over: it changes nothing.
    assert!(matches!(
        poll_once(&mut slow),
        Poll::Ready(Err(Error::Rejected(Rejected::Checking)))
    ));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(poll_once(&mut takeover), Poll::Ready(Ok("real")));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(
        built.load(Ordering::SeqCst),
        1,
        "only the current lease's request"
    );
    assert_eq!(breaker.totals().health_checks, 1);
}

/// Runs the takeover scenario on `breaker` (tripped, past its open period, checked by
/// `check`) with a 2 s check timeout: within it, calls are held back; past it, the next call
/// runs the check itself.
fn takes_over_after_two_seconds<P: lazybreaker::policy::TripPolicy>(
    breaker: &Breaker<P>,
    clock: &ManualClock,
    check: &Check,
) {
    let built = AtomicUsize::new(0);
    let mut slow = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut slow).is_pending());
    clock.advance(Duration::from_secs(1));
    assert_eq!(breaker.allow().unwrap_err(), Rejected::Checking);
    clock.advance(Duration::from_millis(1_000));
    assert_eq!(
        breaker.allow().unwrap_err(),
        Rejected::Checking,
        "2 s: still live"
    );
    clock.advance(Duration::from_millis(1));
    let mut takeover = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut takeover).is_pending());
    assert_eq!(check.runs(), 2);
}

#[test]
fn a_custom_check_timeout_applies() {
    let check = Check::default();
    let clock = ManualClock::new();
    let c = check.clone();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .health_check(move || c.run())
        .check_timeout(Duration::from_secs(2))
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(PAST_OPEN);
    takes_over_after_two_seconds(&breaker, &clock, &check);
}

#[cfg(feature = "serde")]
#[test]
fn a_check_timeout_from_a_file_applies() {
    let settings: lazybreaker::config::Settings = toml::from_str(
        r#"
        timeout = "30s"
        check_timeout = "2s"
        policy = { kind = "consecutive_failures", threshold = 1 }
        "#,
    )
    .unwrap();
    assert_eq!(settings.knobs.check_timeout, Duration::from_secs(2));
    let check = Check::default();
    let clock = ManualClock::new();
    let c = check.clone();
    let breaker = settings
        .to_builder()
        .unwrap()
        .clock(clock.clone())
        .health_check(move || c.run())
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(PAST_OPEN);
    takes_over_after_two_seconds(&breaker, &clock, &check);
}

#[test]
fn a_panicking_check_fails_and_keeps_unwinding() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut call).is_pending());
    check.settle(Verdict::Panic);
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(&mut call)));
    assert!(unwound.is_err(), "the check's panic is not swallowed");
    assert_eq!(built.load(Ordering::SeqCst), 0);
    assert_eq!(breaker.state(), State::Open);
    let t = breaker.totals();
    assert_eq!((t.health_checks, t.health_checks_failed), (1, 1));
}

#[test]
fn a_panic_building_the_check_fails_it_and_keeps_unwinding() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .health_check(|| -> std::future::Ready<bool> { panic!("no check today") })
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(PAST_OPEN);
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(&mut call)));
    assert!(unwound.is_err());
    assert_eq!(built.load(Ordering::SeqCst), 0);
    assert_eq!(breaker.totals().health_checks_failed, 1);
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_sync_call_that_finds_a_check_due_probes_as_without_one() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let permit = breaker.allow().expect("a sync call probes");
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(check.runs(), 0, "a sync call cannot wait for a future");
    permit.success();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(
        breaker.observer().take(),
        [
            (State::Open, State::HalfOpen, Origin::Breaker),
            (State::HalfOpen, State::Closed, Origin::Breaker)
        ]
    );
}

#[test]
fn a_forced_change_during_a_check_makes_it_stale() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut call).is_pending());
    breaker.force_open();
    check.settle(Verdict::Pass);
    assert!(matches!(
        poll_once(&mut call),
        Poll::Ready(Err(Error::Rejected(Rejected::ForcedOpen)))
    ));
    assert_eq!(built.load(Ordering::SeqCst), 0);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.totals().health_checks,
        0,
        "a stale verdict is not counted"
    );
}

/// A check that panics while an observer panics too: the check's panic is the one that
/// continues, and the breaker still settled the check.
#[test]
fn the_checks_own_panic_continues_first() {
    struct Panics;
    impl Observer for Panics {
        fn on_transition(&self, _: &Transition<'_>) {
            panic!("the observer's bug");
        }
    }
    let check = Check::default();
    let clock = ManualClock::new();
    let c = check.clone();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .observer(Panics)
        .health_check(move || c.run())
        .build();
    let _ = catch_unwind(AssertUnwindSafe(|| breaker.allow().unwrap().failure()));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(PAST_OPEN);
    let built = AtomicUsize::new(0);
    let mut call = Box::pin(breaker.execute_async(request(&built)));
    assert!(poll_once(&mut call).is_pending());
    check.settle(Verdict::Panic);
    let payload = catch_unwind(AssertUnwindSafe(|| poll_once(&mut call))).unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the health check's own bug"),
        "the check's panic, not the observer's"
    );
    assert_eq!(breaker.totals().health_checks_failed, 1);
    assert_eq!(built.load(Ordering::SeqCst), 0);
}

/// One story while a check is due or running: the snapshot says `Open` with
/// `CheckStatus::Due` or `Running` and no `retry_after` (never "retry after 0s"); a failed
/// check re-arms the open period (the policy's backoff grows) without another opening: the
/// observers get one open-to-open event each, `on_state_change` nothing, and `opened` and
/// the transitions stay as the trip left them.
#[test]
fn one_story_a_check_due_or_running_is_said_and_a_failed_one_is_not_another_opening() {
    use lazybreaker::policy::Backoff;
    use lazybreaker::CheckStatus;
    use std::sync::Arc;

    let check = Check::default();
    let clock = ManualClock::new();
    let callbacks = Arc::new(AtomicUsize::new(0));
    let c = check.clone();
    let counted = Arc::clone(&callbacks);
    let breaker = Breaker::builder()
        .policy(
            Backoff::new(
                ConsecutiveFailures::new(1).unwrap(),
                Duration::from_secs(10),
                Duration::from_secs(60),
            )
            .unwrap(),
        )
        .clock(clock.clone())
        .observer(checks::Log::default())
        .on_state_change(move |_, _, _| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .health_check(move || c.run())
        .build();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.observer().take().len(), 1, "the trip");
    let mut period = Duration::from_secs(10);
    for failed in 1..=3u64 {
        let s = breaker.snapshot();
        assert_eq!((s.check, s.retry_after), (None, Some(period)), "open");
        clock.advance(period + Duration::from_nanos(1));
        let s = breaker.snapshot();
        assert_eq!(
            (s.state, s.check, s.retry_after),
            (State::Open, Some(CheckStatus::Due), None),
            "due, not 'retry after 0s'"
        );
        check.reset();
        let built = AtomicUsize::new(0);
        let mut call = Box::pin(breaker.execute_async(request(&built)));
        assert!(poll_once(&mut call).is_pending());
        let s = breaker.snapshot();
        assert_eq!(
            (s.state, s.check, s.retry_after),
            (State::Open, Some(CheckStatus::Running), None)
        );
        check.settle(Verdict::Fail);
        assert!(matches!(
            poll_once(&mut call),
            Poll::Ready(Err(Error::Rejected(Rejected::Open { .. })))
        ));
        // The backoff doubles: the policy was asked for the next period.
        period = (period * 2).min(Duration::from_secs(60));
        let s = breaker.snapshot();
        assert_eq!((s.check, s.retry_after), (None, Some(period)));
        assert_eq!(s.times_opened, 1, "one opening, {failed} failed checks");
        assert_eq!(s.totals.health_checks_failed, failed);
        assert_eq!(s.transitions.get(State::Open, State::HalfOpen), 0);
        assert_eq!(
            breaker.observer().take(),
            [(State::Open, State::Open, Origin::HealthCheck)]
        );
    }
    assert_eq!(
        callbacks.load(Ordering::SeqCst),
        1,
        "on_state_change heard of the trip only"
    );
}

/// A check that fails rejects the call that ran it, counted as that breaker's rejection; a
/// pool's check runs beside the calls (the pick sends its call elsewhere, or answers with
/// the pool's own rejection), so its failure is counted as a failed check only: a breaker's
/// rejections are the calls it turned away.
#[test]
fn a_failed_check_counts_a_rejection_only_where_a_caller_was_rejected() {
    let check = Check::default();
    let (breaker, _clock) = due(&check);
    check.settle(Verdict::Fail);
    let mut call = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert!(matches!(
        poll_once(&mut call),
        Poll::Ready(Err(Error::Rejected(Rejected::Open { .. })))
    ));
    let t = breaker.totals();
    assert_eq!((t.health_checks_failed, t.rejected_open), (1, 1), "{t:?}");

    let clock = ManualClock::new();
    let pool = lazybreaker::pool::Pool::new(|_: &u8| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(OPEN_FOR)
    })
    .clock(clock.clone())
    .health_check(|key: &u8| std::future::ready(*key != 1));
    pool.set([1, 2]);
    pool.breaker(&1).unwrap().allow().unwrap().failure();
    clock.advance(PAST_OPEN);
    let failed = || pool.breaker(&1).unwrap().totals().health_checks_failed;
    // The picks draw their endpoints at random: until three checks failed (bounded).
    for _ in 0..1_000 {
        if failed() >= 3 {
            break;
        }
        let mut pick = Box::pin(pool.pick_async());
        match poll_once(&mut pick) {
            Poll::Ready(Ok(pick)) => {
                assert_eq!(*pick.key(), 2);
                pick.success();
            }
            other => panic!("{:?}", other.map(|r| r.map(|p| *p.key()))),
        }
        clock.advance(PAST_OPEN);
    }
    let t = pool.breaker(&1).unwrap().totals();
    assert!(t.health_checks_failed >= 3, "{t:?}");
    assert_eq!(t.rejected_open, 0, "no caller was turned away by it: {t:?}");
}
