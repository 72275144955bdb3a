//! What a transition says of its cause: who made it (`origin`), the decision it made
//! (`open_for`, how long it opens for) and the override in force after it (`forced`), for
//! every way a breaker changes state. Expected values come from the documented semantics:
//! a trip opens for the configured timeout (or the policy's backoff), `trip_for(d)` for `d`,
//! `adopt_open(d)` for exactly `d`, a forced open for no fixed time.

use crate::support;

use std::time::Duration;

use lazybreaker::observe::{Origin, Transition};
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::{Breaker, Forced, ManualClock, State};
use support::log::FromTransition;
use support::policy::trips_on_first_failure;

type Seen = (State, State, Origin, Option<Duration>, Option<Forced>);
type Log = support::log::Log<Seen>;

impl FromTransition for Seen {
    fn from_transition(t: &Transition<'_>) -> Self {
        (t.from, t.to, t.origin, t.open_for, t.forced)
    }
}

const TIMEOUT: Duration = Duration::from_secs(30);

fn breaker<P: TripPolicy>(policy: P) -> (Breaker<P, Log>, ManualClock, Log) {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Breaker::builder()
        .policy(policy)
        .timeout(TIMEOUT)
        .clock(clock.clone())
        .observer(log.clone())
        .build();
    (breaker, clock, log)
}

fn fail<P: TripPolicy>(b: &Breaker<P, Log>) {
    let _ = b.execute(|| Err::<(), _>("down"));
}

#[test]
fn a_trip_and_its_recovery_are_the_breakers_own() {
    let (b, clock, log) = breaker(trips_on_first_failure());
    fail(&b);
    clock.advance(TIMEOUT + Duration::from_nanos(1));
    b.execute(|| Ok::<_, ()>(())).unwrap();
    use State::*;
    assert_eq!(
        log.take(),
        [
            (Closed, Open, Origin::Breaker, Some(TIMEOUT), None),
            (Open, HalfOpen, Origin::Breaker, None, None),
            (HalfOpen, Closed, Origin::Breaker, None, None),
        ]
    );
}

#[test]
fn a_failed_probe_reopens_for_the_backoffs_next_period() {
    let initial = Duration::from_secs(1);
    let policy = trips_on_first_failure()
        .with_backoff(initial, Duration::from_secs(60))
        .unwrap();
    let (b, clock, log) = breaker(policy);
    fail(&b);
    clock.advance(initial + Duration::from_nanos(1));
    fail(&b); // the probe fails: open again, for twice as long
    let opens: Vec<_> = log
        .take()
        .into_iter()
        .filter(|t| t.1 == State::Open)
        .map(|t| t.3)
        .collect();
    assert_eq!(opens, [Some(initial), Some(2 * initial)]);
}

#[test]
fn manual_controls_are_manual_and_say_what_they_decided() {
    let (b, _clock, log) = breaker(ConsecutiveFailures::default());
    let d = Duration::from_secs(7);
    b.trip_for(d);
    b.release();
    b.force_open();
    b.force_closed();
    b.release();
    use State::*;
    assert_eq!(
        log.take(),
        [
            (Closed, Open, Origin::Manual, Some(d), None),
            (Open, Closed, Origin::Manual, None, None),
            (Closed, Open, Origin::Manual, None, Some(Forced::Open)),
            (Open, Closed, Origin::Manual, None, Some(Forced::Closed)),
        ],
        "releasing a breaker forced closed changes no state, so delivers nothing"
    );
}

#[test]
fn a_permits_failure_open_for_is_manual() {
    let (b, _clock, log) = breaker(ConsecutiveFailures::default());
    let d = Duration::from_secs(120);
    b.allow().unwrap().failure_open_for(d);
    assert_eq!(
        log.take(),
        [(State::Closed, State::Open, Origin::Manual, Some(d), None)]
    );
}

#[test]
fn adopted_decisions_are_adopted_with_the_fleets_deadline() {
    let (b, clock, log) = breaker(ConsecutiveFailures::default());
    let d = Duration::from_secs(20);
    b.adopt_open(d);
    clock.advance(d + Duration::from_nanos(1));
    assert_eq!(b.state(), State::HalfOpen);
    b.adopt_closed();
    b.adopt_open(Duration::ZERO); // the fleet is half-open already: so is this breaker
    assert_eq!(b.state(), State::HalfOpen);
    use State::*;
    assert_eq!(
        log.take(),
        [
            (Closed, Open, Origin::Adopted, Some(d), None),
            (Open, HalfOpen, Origin::Breaker, None, None),
            (HalfOpen, Closed, Origin::Adopted, None, None),
            (Closed, Open, Origin::Adopted, Some(Duration::ZERO), None),
            (Open, HalfOpen, Origin::Adopted, None, None),
        ]
    );
}

#[test]
fn origin_names_itself() {
    let names: Vec<String> = [Origin::Breaker, Origin::Manual, Origin::Adopted]
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(names, ["breaker", "manual", "adopted"]);
}
