//! `Breaker::snapshot` and the rejection counters: exact, and without side
//! effects.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig, FailureRatio};
use lazybreaker::{Breaker, Forced, ManualClock, Rejected, State};
use support::policy::trips_on_first_failure;

const OPEN_FOR: Duration = Duration::from_secs(10);

fn breaker(clock: &ManualClock, max_requests: u32) -> (Breaker, Arc<AtomicUsize>) {
    let changes = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&changes);
    let breaker = Breaker::builder()
        .name("dep")
        .policy(ConsecutiveFailures::new(2).unwrap())
        .timeout(OPEN_FOR)
        .max_requests(max_requests)
        .clock(clock.clone())
        .on_state_change(move |_, _, _| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build();
    (breaker, changes)
}

fn fail<P: lazybreaker::policy::TripPolicy>(b: &Breaker<P>) {
    let _ = b.execute(|| Err::<(), _>("down"));
}

#[test]
fn every_kind_of_rejection_is_counted() {
    let clock = ManualClock::new();
    let (b, _) = breaker(&clock, 1);
    fail(&b);
    fail(&b);
    for _ in 0..7 {
        assert!(matches!(b.allow(), Err(Rejected::Open { .. })));
    }
    clock.advance(OPEN_FOR + Duration::from_nanos(1));
    let probe = b.allow().unwrap();
    for _ in 0..3 {
        assert_eq!(b.allow().unwrap_err(), Rejected::TooManyRequests);
    }
    probe.success();
    b.force_open();
    for _ in 0..5 {
        assert_eq!(b.allow().unwrap_err(), Rejected::ForcedOpen);
    }
    let t = b.totals();
    assert_eq!(
        (t.rejected_open, t.rejected_half_open, t.rejected_forced),
        (7, 3, 5)
    );
    assert_eq!(t.admitted, 3, "no rejection is an admission");
}

/// Open rejections are counted lock-free from many threads; every one of them lands.
#[test]
fn open_rejections_from_many_threads_are_all_counted() {
    const THREADS: usize = 4;
    const CALLS: usize = 50_000;
    let b = Arc::new(
        Breaker::builder()
            .policy(trips_on_first_failure())
            .timeout(Duration::from_secs(3_600))
            .build(),
    );
    let _ = b.execute(|| Err::<(), _>(()));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for i in 0..CALLS {
                    assert!(b.allow().is_err());
                    if i % 1_000 == 0 {
                        let _ = b.totals(); // reads fold the counters in, mid-flight
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(b.totals().rejected_open, (THREADS * CALLS) as u64);
    assert_eq!(b.snapshot().totals.rejected_open, (THREADS * CALLS) as u64);
}

#[test]
fn a_snapshot_computes_half_open_without_moving_the_breaker() {
    let clock = ManualClock::new();
    let (b, changes) = breaker(&clock, 1);
    fail(&b);
    fail(&b);
    assert_eq!(changes.load(Ordering::SeqCst), 1);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(
        s.retry_after,
        Some(OPEN_FOR),
        "the whole open period is left"
    );
    // Opening started a new generation (gobreaker's): the counts that tripped it went to the
    // transition, and the open generation counts nothing.
    assert_eq!(s.counts.requests, 0);
    clock.advance(Duration::from_secs(4));
    assert_eq!(b.snapshot().retry_after, Some(Duration::from_secs(6)));
    clock.advance(Duration::from_secs(6));
    assert_eq!(
        b.snapshot().retry_after,
        Some(Duration::from_nanos(1)),
        "at the deadline: still open, 1 ns left rather than zero"
    );
    clock.advance(Duration::from_nanos(1));
    assert_eq!(b.snapshot().state, State::HalfOpen);
    clock.advance(Duration::from_secs(1));
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen, "what the next call would find");
    assert_eq!(s.retry_after, None);
    assert_eq!(s.counts.requests, 0);
    assert_eq!(changes.load(Ordering::SeqCst), 1, "no callback ran");
    assert_eq!(b.totals().opened, 1);
    // The breaker itself moves only when a call (or `state()`) evaluates it.
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(changes.load(Ordering::SeqCst), 2);
}

#[test]
fn a_snapshot_reads_brpcs_figures_and_the_forced_mode() {
    let clock = ManualClock::new();
    let (b, _) = breaker(&clock, 1);
    fail(&b);
    fail(&b); // opens: 2 failures since it was built
    clock.advance(OPEN_FOR + Duration::from_nanos(1));
    fail(&b); // the probe fails: reopens
    let s = b.snapshot();
    assert_eq!((s.times_opened, s.recent_failures), (2, 3));
    clock.advance(OPEN_FOR + Duration::from_nanos(1));
    b.execute(|| Ok::<_, ()>(())).unwrap(); // recovers
    fail(&b);
    let s = b.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        (s.times_opened, s.recent_failures),
        (2, 1),
        "counted from the recovery"
    );
    assert_eq!(s.forced, None);
    b.force_open();
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.forced, s.retry_after),
        (State::Open, Some(Forced::Open), None)
    );
    assert_eq!(s.name, "dep");
}

#[test]
fn a_snapshot_of_an_expired_window_shows_the_next_ones_counts() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .interval(Duration::from_secs(10))
        .clock(clock.clone())
        .build();
    fail(&b);
    assert_eq!(b.snapshot().counts.total_failures, 1);
    clock.advance(Duration::from_secs(11));
    assert_eq!(b.snapshot().counts.total_failures, 0);
    assert_eq!(
        b.counts().total_failures,
        1,
        "the breaker itself has not moved"
    );
}

#[test]
fn a_snapshot_of_a_rolling_window_rolls_it_on_paper() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(FailureRatio::new(0.9, 1_000).unwrap())
        .interval(Duration::from_secs(4))
        .bucket_period(Duration::from_secs(1))
        .clock(clock.clone())
        .build();
    fail(&b); // bucket 0
    clock.advance(Duration::from_secs(2));
    fail(&b); // bucket 2
    fail(&b);
    assert_eq!(b.snapshot().counts.total_failures, 3);
    clock.advance(Duration::from_secs(2)); // age 4: bucket 0 has left the window
    assert_eq!(b.snapshot().counts.total_failures, 2);
    clock.advance(Duration::from_secs(2)); // age 6: bucket 2 too
    assert_eq!(b.snapshot().counts.total_failures, 0);
    assert_eq!(
        b.counts().total_failures,
        3,
        "the breaker itself has not rolled"
    );
}

#[test]
fn an_ema_breaker_reports_its_windows() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(Ema::new(EmaConfig::default()).unwrap())
        .clock(clock.clone())
        .build();
    let permit = b.allow().unwrap();
    clock.advance(Duration::from_micros(900));
    permit.success();
    let s = b.snapshot();
    assert_eq!(s.policy.get("ema_long_latency_us"), Some(&900.0));
    assert_eq!(s.policy.get("ema_short_latency_us"), Some(&900.0));
    assert_eq!(s.policy.get("ema_long_error_cost_us"), Some(&0.0));
    assert!(Breaker::builder().build().snapshot().policy.is_empty());
}
