//! The public API's contracts: errors, conversions, clock reads, policy hooks.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lazybreaker::policy::{CallResult, Outcome, TripPolicy};
use lazybreaker::{Breaker, Clock, Error, ManualClock, Rejected, State};
use support::log::Log;
use support::policy::trips_on_first_failure;

#[test]
fn breaker_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Breaker>();
    assert_send_sync::<Breaker<Box<dyn TripPolicy>>>();
}

#[test]
fn rejections_read_like_gobreakers() {
    assert_eq!(
        Rejected::Open {
            retry_after: Duration::ZERO
        }
        .to_string(),
        "circuit breaker is open"
    );
    assert_eq!(Rejected::TooManyRequests.to_string(), "too many requests");
    let e: Error<std::io::Error> = Rejected::TooManyRequests.into();
    assert_eq!(e.to_string(), "too many requests");
    assert!(e.is_rejected());
}

/// A breaker tripped for 60 s says 60 s at the trip: not the 60 s and 1 ns that its strict
/// expiry (half-open strictly after the open period's last instant) keeps it open for.
#[test]
fn a_rejection_right_after_a_trip_says_the_configured_timeout_exactly() {
    const TIMEOUT: Duration = Duration::from_secs(60);
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(TIMEOUT)
        .policy(trips_on_first_failure())
        .clock(clock.clone())
        .build();
    clock.advance(Duration::from_secs(5)); // a trip away from the clock's origin
    let _ = breaker.execute(|| Err::<(), _>(()));
    let rejected = breaker.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected::Open {
            retry_after: TIMEOUT
        }
    );
    assert_eq!(rejected.retry_after_secs(), Some(60), "not 61");
    let err = breaker.execute(|| Ok::<_, ()>(())).unwrap_err();
    assert_eq!(
        err.rejection(),
        Some(Rejected::Open {
            retry_after: TIMEOUT
        })
    );
    assert_eq!(breaker.snapshot().retry_after, Some(TIMEOUT));

    clock.advance(Duration::from_millis(500));
    let rejected = breaker.allow().unwrap_err();
    assert_eq!(rejected.retry_after(), Some(Duration::from_millis(59_500)));
    assert_eq!(rejected.retry_after_secs(), Some(60));

    // The open period's last instant: still open, and 1 ns left rather than zero.
    clock.advance(Duration::from_millis(59_500));
    let rejected = breaker.allow().unwrap_err();
    assert_eq!(
        rejected,
        Rejected::Open {
            retry_after: Duration::from_nanos(1)
        }
    );
    assert_eq!(rejected.retry_after_secs(), Some(1));
    // The strict expiry is unchanged: half-open one nanosecond later.
    clock.advance(Duration::from_nanos(1));
    assert!(breaker.allow().is_ok());
    assert_eq!(breaker.state(), State::HalfOpen);

    // A manual trip says its own period exactly too.
    breaker.trip_for(Duration::from_secs(120));
    assert_eq!(
        breaker.allow().unwrap_err().retry_after(),
        Some(Duration::from_secs(120))
    );
}

/// What a person reads of a rejection (`Display`, `Debug`, the snapshot's `Debug`) shows the
/// configured open period, with no stray nanosecond.
#[test]
fn a_rejections_display_and_debug_show_no_stray_nanosecond() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(Duration::from_millis(500))
        .policy(trips_on_first_failure())
        .clock(clock.clone())
        .build();
    let _ = breaker.execute(|| Err::<(), _>(()));
    let rejected = breaker.allow().unwrap_err();
    assert_eq!(format!("{rejected:?}"), "Open { retry_after: 500ms }");
    assert_eq!(rejected.to_string(), "circuit breaker is open");
    let err: Error<std::io::Error> = breaker.execute(|| Ok(())).unwrap_err();
    assert_eq!(format!("{err:?}"), "Rejected(Open { retry_after: 500ms })");
    assert_eq!(err.to_string(), "circuit breaker is open");
    let snapshot = format!("{:?}", breaker.snapshot());
    assert!(snapshot.contains("retry_after: Some(500ms)"), "{snapshot}");
    clock.advance(Duration::from_millis(200));
    let rejected = breaker.allow().unwrap_err();
    assert_eq!(format!("{rejected:?}"), "Open { retry_after: 300ms }");
}

#[test]
fn the_inner_error_is_untouched() {
    let breaker = Breaker::builder().build();
    let err = breaker
        .execute(|| Err::<(), _>(std::io::Error::other("disk on fire")))
        .unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");
    assert!(!err.is_rejected());
    assert_eq!(err.into_inner().unwrap().to_string(), "disk on fire");
}

#[test]
fn question_mark_converts_a_rejection() {
    fn call(breaker: &Breaker) -> Result<u8, Error<std::num::ParseIntError>> {
        let permit = breaker.allow()?;
        let n = "12".parse::<u8>().map_err(Error::Inner)?;
        permit.success();
        Ok(n)
    }
    let breaker = Breaker::builder().policy(trips_on_first_failure()).build();
    assert_eq!(call(&breaker).unwrap(), 12);
    breaker.allow().unwrap().failure();
    assert!(matches!(
        call(&breaker),
        Err(Error::Rejected(Rejected::Open { .. }))
    ));
}

#[test]
fn default_trips_on_the_sixth_consecutive_failure() {
    let breaker = Breaker::default();
    for _ in 0..5 {
        let _ = breaker.execute(|| Err::<(), _>(()));
    }
    assert_eq!(breaker.state(), State::Closed);
    let _ = breaker.execute(|| Err::<(), _>(()));
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn zero_timeout_means_sixty_seconds() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(Duration::from_secs(60));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_millis(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// A clock that counts its readings.
#[derive(Debug, Default)]
struct CountingClock {
    reads: AtomicUsize,
}

impl Clock for &'static CountingClock {
    fn now(&self) -> Duration {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Duration::ZERO
    }
}

#[test]
fn each_call_reads_the_clock_at_most_once() {
    static CLOCK: CountingClock = CountingClock {
        reads: AtomicUsize::new(0),
    };
    let reads = || CLOCK.reads.swap(0, Ordering::SeqCst);

    // A closed-state window needs the time on every call.
    let windowed = Breaker::builder()
        .interval(Duration::from_secs(10))
        .clock(&CLOCK)
        .build();
    reads();
    let permit = windowed.allow().unwrap();
    assert_eq!(reads(), 1, "allow");
    permit.success();
    assert_eq!(reads(), 1, "success");
    let _ = windowed.state();
    assert_eq!(reads(), 1, "state");
    let _ = windowed.counts();
    assert_eq!(reads(), 0, "counts is a pure read");
    let _ = windowed.execute(|| Ok::<_, ()>(()));
    assert_eq!(reads(), 2, "execute = allow + verdict");

    // gobreaker's defaults (no window, a counting policy): a closed-state success needs no
    // time at all, nor does a failure that cannot trip; a failure that may trip reads it
    // once; an open rejection reads it to know whether the open period is over.
    let plain = Breaker::builder()
        .policy(lazybreaker::policy::ConsecutiveFailures::new(2).unwrap())
        .clock(&CLOCK)
        .build();
    reads();
    let _ = plain.execute(|| Ok::<_, ()>(()));
    assert_eq!(reads(), 0, "closed success");
    let _ = plain.execute(|| Err::<(), _>(()));
    assert_eq!(reads(), 0, "the first of two failures cannot trip");
    let _ = plain.execute(|| Err::<(), _>(()));
    assert_eq!(reads(), 1, "the second may: it takes the lock");
    assert_eq!(plain.state(), State::Open);
    reads();
    assert!(plain.allow().is_err());
    assert_eq!(reads(), 1, "open rejection");
}

/// A policy that records what it sees and chooses its own open duration.
#[derive(Debug, Default)]
struct Spy {
    seen: Log<(Outcome, Option<Duration>)>,
    changes: Log<(State, State, Duration)>,
}

impl TripPolicy for Spy {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.seen.push((result.outcome, result.latency));
        result.outcome == Outcome::Failure
    }

    fn open_duration(&mut self, timeout: Duration, _now: Duration) -> Duration {
        assert_eq!(timeout, Duration::from_secs(60), "the configured default");
        Duration::from_secs(3)
    }

    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        self.changes.push((from, to, now));
    }

    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default().needs_latency(true)
    }
}

#[test]
fn a_policy_sees_every_closed_outcome_with_its_latency_and_picks_the_open_duration() {
    let clock = ManualClock::new();
    let spy = Spy::default();
    let (seen, changes) = (spy.seen.clone(), spy.changes.clone());
    let breaker = Breaker::builder().policy(spy).clock(clock.clone()).build();

    let a = breaker.allow().unwrap();
    clock.advance(Duration::from_millis(7));
    a.success();
    let b = breaker.allow().unwrap();
    clock.advance(Duration::from_millis(2));
    b.exclude();
    let c = breaker.allow().unwrap();
    clock.advance(Duration::from_millis(40));
    c.failure();

    assert_eq!(
        seen.entries(),
        vec![
            (Outcome::Success, Some(Duration::from_millis(7))),
            (Outcome::Excluded, Some(Duration::from_millis(2))),
            (Outcome::Failure, Some(Duration::from_millis(40))),
        ]
    );
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(3));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        changes.entries(),
        vec![
            (State::Closed, State::Open, Duration::from_millis(49)),
            (
                State::Open,
                State::HalfOpen,
                Duration::from_millis(49) + Duration::from_secs(3) + Duration::from_nanos(1)
            ),
        ]
    );
    // Results in half-open never reach the policy.
    breaker.allow().unwrap().success();
    assert_eq!(seen.len(), 3);
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn latency_is_not_measured_for_policies_that_do_not_ask() {
    #[derive(Debug)]
    struct NoLatency(Log<Option<Duration>>);
    impl TripPolicy for NoLatency {
        fn on_result(&mut self, result: &CallResult<'_>) -> bool {
            self.0.push(result.latency);
            false
        }
    }
    let seen = Log::default();
    let breaker = Breaker::builder().policy(NoLatency(seen.clone())).build();
    breaker.execute(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(seen.entries(), vec![None]);
}

#[test]
fn a_closed_interval_clears_counts_strictly_after_it_expires() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(Duration::from_secs(10))
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    let _ = breaker.state();
    assert_eq!(breaker.counts().total_failures, 1);
    clock.advance(Duration::from_nanos(1));
    let _ = breaker.state();
    assert_eq!(breaker.counts().total_failures, 0);
}

#[test]
fn a_rolling_window_forgets_bucket_by_bucket() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(Duration::from_secs(3))
        .bucket_period(Duration::from_secs(1))
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure(); // bucket 0
    clock.advance(Duration::from_secs(1));
    breaker.allow().unwrap().failure(); // bucket 1
    clock.advance(Duration::from_secs(2)); // bucket 0 leaves the window, at the boundary
    let _ = breaker.state();
    assert_eq!(breaker.counts().total_failures, 1);
    assert_eq!(breaker.counts().requests, 1);
    clock.advance(Duration::from_secs(1));
    let _ = breaker.state();
    assert_eq!(breaker.counts().total_failures, 0);
}

#[test]
fn an_open_period_too_long_to_count_saturates_its_retry_hint() {
    let breaker = Breaker::builder()
        .timeout(Duration::MAX)
        .policy(trips_on_first_failure())
        .build();
    let _ = breaker.execute(|| Err::<(), _>(()));
    for _ in 0..3 {
        match breaker.allow() {
            Err(Rejected::Open { retry_after }) => {
                assert!(retry_after > Duration::from_secs(500 * 365 * 24 * 3600));
            }
            other => panic!("expected open, got {other:?}"),
        }
    }
}

/// Trips on the first failure; panics where it is told to.
#[derive(Debug, Default)]
struct Panicky {
    /// The open period (counted from 1) whose duration the policy panics choosing; 0: none.
    panic_choosing_open: u32,
    opens: u32,
    /// Whether to panic on hearing of the next state change.
    panic_hearing_of_change: bool,
}

impl TripPolicy for Panicky {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        result.outcome == Outcome::Failure
    }

    fn open_duration(&mut self, timeout: Duration, _now: Duration) -> Duration {
        self.opens += 1;
        if self.opens == self.panic_choosing_open {
            panic!("open_duration failed");
        }
        timeout
    }

    fn on_state_change(&mut self, _from: State, _to: State, _now: Duration) {
        if std::mem::take(&mut self.panic_hearing_of_change) {
            panic!("on_state_change failed");
        }
    }

    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default().needs_successes(false)
    }
}

const FIVE_S: Duration = Duration::from_secs(5);

fn panicky(policy: Panicky, clock: &ManualClock) -> Breaker<Panicky> {
    Breaker::builder()
        .timeout(FIVE_S)
        .policy(policy)
        .clock(clock.clone())
        .build()
}

fn fails_with_panic(breaker: &Breaker<Panicky>) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        breaker.allow().unwrap().failure();
    }))
    .is_err()
}

fn open_for(breaker: &Breaker<Panicky>) -> Option<Duration> {
    breaker.allow().err().and_then(|r| r.retry_after())
}

#[test]
fn a_policy_that_panics_choosing_the_open_duration_still_opens_for_the_timeout() {
    let clock = ManualClock::new();
    let breaker = panicky(
        Panicky {
            panic_choosing_open: 1,
            ..Panicky::default()
        },
        &clock,
    );
    assert!(
        fails_with_panic(&breaker),
        "the policy's panic reaches the caller"
    );
    // The trip was completed with the configured timeout: no half-made transition.
    assert_eq!(open_for(&breaker), Some(FIVE_S));
    clock.advance(FIVE_S * 2);
    breaker
        .execute(|| Ok::<_, ()>(()))
        .expect("the probe is admitted");
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_policy_that_panics_as_a_probe_fails_does_not_leave_half_open_stuck() {
    let clock = ManualClock::new();
    let breaker = panicky(
        Panicky {
            panic_choosing_open: 2, // the reopening after the failed probe
            ..Panicky::default()
        },
        &clock,
    );
    assert!(!fails_with_panic(&breaker));
    clock.advance(FIVE_S * 2);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(
        fails_with_panic(&breaker),
        "the probe fails, the policy panics"
    );
    // The probe's failure was applied: open again, for the timeout, not stuck half-open.
    assert_eq!(open_for(&breaker), Some(FIVE_S));
    clock.advance(FIVE_S * 2);
    breaker
        .execute(|| Ok::<_, ()>(()))
        .expect("a new probe is admitted");
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_policy_that_panics_hearing_of_a_trip_leaves_a_well_formed_open_state_and_delivers_it() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Breaker::builder()
        .timeout(FIVE_S)
        .policy(Panicky {
            panic_hearing_of_change: true,
            ..Panicky::default()
        })
        .on_state_change(log.callback())
        .clock(clock.clone())
        .build();
    assert!(fails_with_panic(&breaker));
    assert_eq!(open_for(&breaker), Some(FIVE_S));
    // The change happened; the panicking call did not deliver it, the next call did.
    assert_eq!(log.entries(), vec![(State::Closed, State::Open)]);
    clock.advance(FIVE_S * 2);
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "the open period ends as configured"
    );
}

#[test]
fn the_default_clock_is_coarse_unless_the_policy_times_calls() {
    let counting = format!("{:?}", Breaker::builder().build());
    assert!(counting.contains("CoarseMonotonicClock"), "{counting}");
    let timed = Breaker::builder()
        .policy(lazybreaker::policy::Ema::new(Default::default()).unwrap())
        .build();
    let timed = format!("{timed:?}");
    assert!(
        timed.contains("PreciseClock") && !timed.contains("Coarse"),
        "{timed}"
    );
    // A slow-call threshold of a second tolerates latencies right to within 10 ms: the
    // kernel's timer ticks finer than that (1 to 10 ms on Linux).
    let slow = |threshold| {
        let policy = lazybreaker::policy::SlowCalls::new(threshold, 0.5, 10).unwrap();
        format!("{:?}", Breaker::builder().policy(policy).build())
    };
    let second = slow(Duration::from_secs(1));
    assert_eq!(
        second.contains("CoarseMonotonicClock"),
        cfg!(any(target_os = "linux", target_os = "android")),
        "{second}"
    );
    let tight = slow(Duration::from_micros(500));
    assert!(tight.contains("PreciseClock"), "a 5 us tolerance: {tight}");
}

#[test]
fn the_coarse_clock_never_goes_back() {
    let clock = lazybreaker::CoarseMonotonicClock::new();
    let mut last = clock.now();
    for _ in 0..100_000 {
        let now = clock.now();
        assert!(now >= last, "{now:?} after {last:?}");
        last = now;
    }
}
