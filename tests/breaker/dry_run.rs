//! Dry run (shadow mode): a breaker that runs its state machine as usual but admits every
//! call, counting the ones it would have rejected. Driven beside an enforcing twin on the
//! same calls at the same times, it must change state exactly as the twin does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::{History, Observer, Transition};
use lazybreaker::policy::{ConsecutiveFailures, FailureRatio, Outcome};
use lazybreaker::{Breaker, Forced, ManualClock, State};
use parking_lot::Mutex;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type Changes = Arc<Mutex<Vec<(Duration, State, State, bool)>>>;

/// Keeps every change with its time and its dry-run mark.
struct Log(Changes);

impl Observer for Log {
    fn on_transition(&self, t: &Transition<'_>) {
        self.0.lock().push((t.at, t.from, t.to, t.dry_run));
    }
}

/// A ratio breaker with a rolling window on `clock`, in dry run or not.
fn breaker(clock: &ManualClock, dry_run: bool, changes: &Changes) -> Breaker<FailureRatio, Log> {
    Breaker::builder()
        .policy(FailureRatio::new(0.5, 4).unwrap())
        .interval(ms(1000))
        .bucket_period(ms(100))
        .timeout(ms(300))
        .max_requests(2)
        .dry_run(dry_run)
        .clock(clock.clone())
        .observer(Log(Arc::clone(changes)))
        .build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Calls on a 10 ms grid, each `(gap, latency, fails)`: the enforcing twin admits some,
    /// the dry-run one all of them, and both change state at the same times.
    #[test]
    fn a_dry_run_breaker_changes_state_exactly_as_its_enforcing_twin(
        calls in prop::collection::vec((0u64..5, 0u64..20, 0u32..100), 1..300),
    ) {
        let clock = ManualClock::new();
        let (enforced, shadowed) = (Changes::default(), Changes::default());
        let real = breaker(&clock, false, &enforced);
        let dry = breaker(&clock, true, &shadowed);
        type InFlight<'a> = Vec<(u64, Option<lazybreaker::Permit<'a, FailureRatio, Log>>, lazybreaker::Permit<'a, FailureRatio, Log>, bool)>;
        let mut in_flight: InFlight<'_> = Vec::new();
        let (mut now, mut rejected) = (0u64, 0u64);
        let advance = |to: u64, now: &mut u64| {
            clock.advance(ms(to - *now));
            *now = to;
        };
        for (i, (gap, latency, roll)) in calls.iter().enumerate() {
            let start = now + gap * 10;
            // Report what has answered by then, in end order, then start order.
            in_flight.sort_by_key(|c| c.0);
            while in_flight.first().is_some_and(|c| c.0 <= start) {
                let (end, real_permit, dry_permit, fails) = in_flight.remove(0);
                advance(end, &mut now);
                let outcome = if fails { Outcome::Failure } else { Outcome::Success };
                if let Some(p) = real_permit {
                    p.record(outcome);
                }
                dry_permit.record(outcome);
            }
            advance(start, &mut now);
            let fails = (i / 30) % 2 == 1 && *roll < 80 || *roll < 10;
            let real_permit = real.allow().ok();
            rejected += u64::from(real_permit.is_none());
            let dry_permit = dry.allow().expect("a breaker in dry run admits every call");
            in_flight.push((start + latency * 10, real_permit, dry_permit, fails));
        }
        in_flight.sort_by_key(|c| c.0);
        for (end, real_permit, dry_permit, fails) in in_flight.drain(..) {
            advance(end, &mut now);
            let outcome = if fails { Outcome::Failure } else { Outcome::Success };
            if let Some(p) = real_permit {
                p.record(outcome);
            }
            dry_permit.record(outcome);
        }
        let strip = |c: &Changes| c.lock().iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>();
        prop_assert_eq!(strip(&enforced), strip(&shadowed));
        prop_assert!(shadowed.lock().iter().all(|c| c.3), "every change marked dry run");
        prop_assert!(enforced.lock().iter().all(|c| !c.3));
        let (r, d) = (real.totals(), dry.totals());
        prop_assert_eq!(d.would_reject, rejected);
        prop_assert_eq!(r.rejected_open + r.rejected_half_open, rejected);
        prop_assert_eq!(r.would_reject, 0);
        prop_assert_eq!((d.rejected_open, d.rejected_half_open), (0, 0));
        prop_assert_eq!((d.admitted, d.successes, d.failures, d.dropped), (r.admitted, r.successes, r.failures, r.dropped));
        prop_assert_eq!(dry.counts(), real.counts());
        prop_assert_eq!(dry.state(), real.state());
    }
}

#[test]
fn every_call_runs_and_the_ones_it_would_have_rejected_are_counted_apart() {
    let clock = ManualClock::new();
    let ran = AtomicUsize::new(0);
    let history = Arc::new(History::new(16));
    let b = Breaker::builder()
        .name("shadow")
        .policy(ConsecutiveFailures::new(3).unwrap())
        .timeout(ms(1000))
        .dry_run(true)
        .clock(clock.clone())
        .observer(Arc::clone(&history))
        .build();
    let call = |fails: bool| {
        b.execute(|| {
            ran.fetch_add(1, Ordering::SeqCst);
            if fails {
                Err("down")
            } else {
                Ok(())
            }
        })
    };
    for _ in 0..10 {
        assert!(matches!(call(true), Err(lazybreaker::Error::Inner("down"))));
    }
    assert_eq!(ran.load(Ordering::SeqCst), 10, "every call ran");
    assert_eq!(b.state(), State::Open);
    let t = b.totals();
    assert_eq!(
        (t.admitted, t.failures, t.would_reject, t.rejected_open),
        (3, 3, 7, 0)
    );

    // Half-open after the open period: one probe admitted as such, the rest shadows.
    clock.advance(ms(1001));
    let probe = b.allow().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    let shadow = b.allow().unwrap(); // the only probe slot is taken
    shadow.failure(); // a shadow's failure changes nothing
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.totals().would_reject, 8);
    probe.success();
    assert_eq!(b.state(), State::Closed);

    // Forced open, it still admits (and counts what it would have turned away).
    b.force_open();
    assert!(call(false).is_ok());
    assert_eq!(b.totals().would_reject, 9);
    assert_eq!(b.totals().rejected_forced, 0);
    b.release();

    let snapshot = b.snapshot();
    assert!(snapshot.dry_run);
    assert_eq!(snapshot.totals.would_reject, 9);
    let recorded = history.recent();
    assert!(recorded.iter().all(|r| r.dry_run));
    let states: Vec<_> = recorded.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(
        states[..3],
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed)
        ]
    );
    assert!(!Breaker::builder().build().snapshot().dry_run);
}

#[test]
fn a_dry_run_breaker_runs_no_health_check() {
    let clock = ManualClock::new();
    let checks = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&checks);
    let b = Breaker::builder()
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .timeout(ms(100))
        .health_check(move || {
            c.fetch_add(1, Ordering::SeqCst);
            async { true }
        })
        .dry_run(true)
        .clock(clock.clone())
        .build();
    let _ = b.execute(|| Err::<(), _>("down"));
    assert_eq!(b.state(), State::Open);
    clock.advance(ms(101));
    // As without a check: the period's end lets a probe through.
    assert_eq!(b.state(), State::HalfOpen);
    b.execute(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(checks.load(Ordering::SeqCst), 0);
    assert_eq!(b.forced(), None::<Forced>);
}

#[cfg(feature = "serde")]
#[test]
fn dry_run_is_set_from_a_file_and_written_back() {
    use lazybreaker::config::Settings;
    let settings: Settings = toml::from_str("dry_run = true\ntimeout = \"1s\"").unwrap();
    assert!(settings.knobs.dry_run);
    let b = Breaker::from_settings(&settings).unwrap();
    for _ in 0..10 {
        let _ = b.execute(|| Err::<(), _>("down"));
    }
    assert_eq!(b.totals().would_reject, 4); // six to trip (the default), four shadows
    assert!(toml::to_string(&settings)
        .unwrap()
        .contains("dry_run = true"));
    assert!(!toml::to_string(&Settings::default())
        .unwrap()
        .contains("dry_run"));
    let typo = toml::from_str::<Settings>("dry_run = \"yes\"").unwrap_err();
    assert!(typo.to_string().contains("dry_run"), "{typo}");
}
