//! Manual control: each control in each state, what `state()` and `forced()`
//! answer after it, the change delivered (marked manual) or none, and what the next call gets.
//! Expected values come from the documented semantics of each control, not from the code.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::{Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, Forced, ManualClock, Rejected, State};
use support::log::FromTransition;

const OPEN_FOR: Duration = Duration::from_secs(10);
/// Past an open period of `OPEN_FOR` (it ends strictly after).
const PAST_OPEN: Duration = Duration::from_millis(10_001);
const SHORT: Duration = Duration::from_secs(3);
const LONG: Duration = Duration::from_secs(300);

/// Every transition delivered: (from, to, manual).
type Log = support::log::Log<(State, State, bool)>;

impl FromTransition for (State, State, bool) {
    fn from_transition(t: &Transition<'_>) -> Self {
        (t.from, t.to, t.origin == Origin::Manual)
    }
}

/// Trips on the second consecutive failure; open for `OPEN_FOR`; one probe closes it.
fn breaker() -> (Breaker<ConsecutiveFailures, Log>, ManualClock, Log) {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Breaker::builder()
        .name("dep")
        .policy(ConsecutiveFailures::new(2).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .observer(log.clone())
        .build();
    (breaker, clock, log)
}

fn fail(b: &Breaker<ConsecutiveFailures, Log>) {
    let _ = b.execute(|| Err::<(), _>("down"));
}

fn ok(b: &Breaker<ConsecutiveFailures, Log>) -> Result<(), Error<&'static str>> {
    b.execute(|| Ok(()))
}

/// A breaker in `state`, with the log of how it got there cleared.
fn in_state(state: State) -> (Breaker<ConsecutiveFailures, Log>, ManualClock, Log) {
    let (b, clock, log) = breaker();
    match state {
        State::Closed => {}
        State::Open => support::setup::trip(&b),
        _ => support::setup::half_open(&b, &clock, PAST_OPEN),
    }
    assert_eq!(b.state(), state);
    log.take();
    (b, clock, log)
}

const STATES: [State; 3] = [State::Closed, State::Open, State::HalfOpen];

#[test]
fn force_open_in_each_state() {
    for from in STATES {
        let (b, clock, log) = in_state(from);
        let opened = b.totals().opened;
        b.force_open();
        assert_eq!(b.state(), State::Open, "from {from:?}");
        assert_eq!(b.forced(), Some(Forced::Open));
        let expected: Vec<_> = match from {
            State::Open => vec![],
            other => vec![(other, State::Open, true)],
        };
        assert_eq!(log.take(), expected, "from {from:?}");
        assert_eq!(b.totals().opened, opened + u64::from(from != State::Open));
        assert!(matches!(ok(&b), Err(Error::Rejected(Rejected::ForcedOpen))));
        assert_eq!(b.allow().unwrap_err().retry_after(), None);
        // It never goes half-open by itself, however long it waits.
        clock.advance(LONG * 1_000);
        assert_eq!(b.state(), State::Open);
        assert!(matches!(ok(&b), Err(Error::Rejected(Rejected::ForcedOpen))));
        assert_eq!(log.take(), vec![]);
    }
}

#[test]
fn force_closed_in_each_state() {
    for from in STATES {
        let (b, clock, log) = in_state(from);
        b.force_closed();
        assert_eq!(b.state(), State::Closed, "from {from:?}");
        assert_eq!(b.forced(), Some(Forced::Closed));
        let expected: Vec<_> = match from {
            State::Closed => vec![],
            other => vec![(other, State::Closed, true)],
        };
        assert_eq!(log.take(), expected, "from {from:?}");
        // Every call admitted and counted; the policy never trips it.
        for _ in 0..10 {
            fail(&b);
        }
        assert!(ok(&b).is_ok());
        fail(&b);
        assert_eq!(b.state(), State::Closed);
        let c = b.counts();
        assert_eq!(
            (c.requests, c.total_failures, c.total_successes),
            (12, 11, 1)
        );
        assert_eq!(c.consecutive_failures, 1);
        clock.advance(LONG);
        assert_eq!(b.state(), State::Closed);
        assert_eq!(log.take(), vec![]);
    }
}

#[test]
fn release_in_each_state_and_forced_mode() {
    for from in STATES {
        for forced in [None, Some(Forced::Open), Some(Forced::Closed)] {
            let (b, _clock, log) = in_state(from);
            match forced {
                Some(Forced::Open) => b.force_open(),
                Some(Forced::Closed) => b.force_closed(),
                _ => {}
            }
            let before = b.state();
            log.take();
            b.release();
            let case = format!("from {from:?} forced {forced:?}");
            assert_eq!(b.state(), State::Closed, "{case}");
            assert_eq!(b.forced(), None, "{case}");
            let expected: Vec<_> = match before {
                State::Closed => vec![],
                other => vec![(other, State::Closed, true)],
            };
            assert_eq!(log.take(), expected, "{case}");
            // A new generation: the counts start from zero, and the policy trips it again.
            assert_eq!(b.counts().requests, 0, "{case}");
            fail(&b);
            fail(&b);
            assert_eq!(b.state(), State::Open, "{case}: back to normal");
            assert_eq!(log.take(), vec![(State::Closed, State::Open, false)]);
        }
    }
}

#[test]
fn trip_for_in_each_state() {
    for from in STATES {
        let (b, clock, log) = in_state(from);
        b.trip_for(SHORT);
        assert_eq!(b.state(), State::Open, "from {from:?}");
        assert_eq!(b.forced(), None);
        match from {
            State::Open => {
                // Already open for `OPEN_FOR` (10 s): the later end is kept.
                assert_eq!(log.take(), vec![]);
                let r = b.allow().unwrap_err();
                assert_eq!(r.retry_after(), Some(OPEN_FOR));
                clock.advance(PAST_OPEN);
            }
            other => {
                assert_eq!(log.take(), vec![(other, State::Open, true)]);
                let r = b.allow().unwrap_err();
                assert_eq!(r, Rejected::Open { retry_after: SHORT });
                clock.advance(SHORT);
                assert_eq!(b.state(), State::Open, "open for at least `SHORT`");
                clock.advance(Duration::from_nanos(1));
            }
        }
        // Then the usual half-open, and a probe closes it.
        assert_eq!(b.state(), State::HalfOpen);
        assert!(ok(&b).is_ok());
        assert_eq!(b.state(), State::Closed);
        let rest = log.take();
        assert_eq!(
            rest,
            vec![
                (State::Open, State::HalfOpen, false),
                (State::HalfOpen, State::Closed, false)
            ]
        );
    }
}

#[test]
fn trip_for_extends_a_shorter_open_period() {
    let (b, clock, log) = in_state(State::Open);
    b.trip_for(LONG);
    assert_eq!(log.take(), vec![], "no change: it was open already");
    clock.advance(PAST_OPEN);
    assert_eq!(b.state(), State::Open, "open until the longer end");
    clock.advance(LONG - PAST_OPEN + Duration::from_nanos(1));
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn a_forced_mode_wins_over_trip_for() {
    let (b, _clock, log) = in_state(State::Closed);
    b.force_closed();
    b.trip_for(LONG);
    assert_eq!(
        (b.state(), b.forced()),
        (State::Closed, Some(Forced::Closed))
    );
    b.force_open();
    log.take();
    b.trip_for(SHORT);
    assert_eq!(b.allow().unwrap_err(), Rejected::ForcedOpen);
    assert_eq!(log.take(), vec![]);
}

#[test]
fn force_open_then_force_closed_replaces_the_mode() {
    let (b, _clock, log) = in_state(State::Closed);
    b.force_open();
    b.force_closed();
    assert_eq!(
        (b.state(), b.forced()),
        (State::Closed, Some(Forced::Closed))
    );
    b.force_open();
    assert_eq!((b.state(), b.forced()), (State::Open, Some(Forced::Open)));
    assert_eq!(
        log.take(),
        vec![
            (State::Closed, State::Open, true),
            (State::Open, State::Closed, true),
            (State::Closed, State::Open, true),
        ]
    );
}

#[test]
fn failure_open_for_counts_the_failure_and_opens_for_the_given_time() {
    // Closed, below the policy's threshold: the failure alone would not trip it.
    let (b, clock, log) = in_state(State::Closed);
    b.allow().unwrap().failure_open_for(LONG);
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.take(), vec![(State::Closed, State::Open, true)]);
    let t = b.totals();
    assert_eq!((t.failures, t.opened), (1, 1));
    clock.advance(LONG);
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(b.state(), State::HalfOpen);

    // Half-open: the failing probe reopens it, for at least the asked time.
    log.take();
    b.allow().unwrap().failure_open_for(LONG);
    assert_eq!(log.take(), vec![(State::HalfOpen, State::Open, false)]);
    clock.advance(PAST_OPEN);
    assert_eq!(b.state(), State::Open, "the longer of the two open periods");
}

#[test]
fn failure_open_for_on_an_owned_permit() {
    let (b, _clock, log) = in_state(State::Closed);
    let b = Arc::new(b);
    b.allow_owned().unwrap().failure_open_for(SHORT);
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.take(), vec![(State::Closed, State::Open, true)]);
    assert_eq!(b.totals().failures, 1);
}

#[test]
fn a_stale_failure_open_for_still_opens() {
    let (b, _clock, log) = in_state(State::Closed);
    let permit = b.allow().unwrap();
    b.force_open();
    b.release(); // a new generation: the permit is stale
    log.take();
    permit.failure_open_for(SHORT);
    assert_eq!(b.state(), State::Open);
    assert_eq!(log.take(), vec![(State::Closed, State::Open, true)]);
    let t = b.totals();
    assert_eq!(
        (t.failures, t.dropped),
        (0, 1),
        "the stale result is dropped"
    );
}

#[test]
fn results_admitted_before_force_open_are_dropped() {
    let (b, _clock, _log) = in_state(State::Closed);
    let permit = b.allow().unwrap();
    b.force_open();
    permit.success();
    let t = b.totals();
    assert_eq!((t.successes, t.dropped), (0, 1));
    assert_eq!(b.allow().unwrap_err(), Rejected::ForcedOpen);
}

/// The default breaker counts closed-state successes lock-free: forced closed, every call
/// still goes through the lock and is counted exactly.
#[test]
fn forced_closed_counts_every_call_with_the_lock_free_lane() {
    let b = Breaker::builder().build();
    b.force_closed();
    for _ in 0..1_000 {
        b.execute(|| Ok::<_, ()>(())).unwrap();
    }
    for _ in 0..100 {
        let _ = b.execute(|| Err::<(), _>(()));
    }
    assert_eq!(b.state(), State::Closed);
    let c = b.counts();
    assert_eq!(
        (c.requests, c.total_successes, c.total_failures),
        (1_100, 1_000, 100)
    );
    b.release();
    b.execute(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(b.counts().requests, 1);
}

/// Controls from many threads at once leave the breaker in one of the states a control
/// leaves it in, with every delivered change marked and paired.
#[test]
fn controls_race_with_calls() {
    let (b, _clock, log) = in_state(State::Closed);
    let b = Arc::new(b);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                for n in 0..500 {
                    match (i + n) % 5 {
                        0 => b.force_open(),
                        1 => b.force_closed(),
                        2 => b.release(),
                        3 => b.trip_for(SHORT),
                        _ => {
                            let _ = b.execute(|| if n % 2 == 0 { Ok(()) } else { Err(()) });
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let changes = log.take();
    // Delivered in order: each change starts where the previous one ended.
    for pair in changes.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "{changes:?}");
    }
    b.release();
    assert_eq!((b.state(), b.forced()), (State::Closed, None));
    let t = b.totals();
    assert_eq!(
        t.admitted,
        t.successes + t.failures + t.exclusions + t.dropped + t.abandoned
    );
}
