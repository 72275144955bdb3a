//! Getting a breaker into a state: [`trip`] it, or make it [`half_open`].

use std::time::Duration;

use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::{Breaker, ManualClock, State};

/// Fails calls on `breaker` until it opens (its policy's threshold, at most 1 000); panics if
/// it does not.
pub(crate) fn trip<P: TripPolicy, O: Observer>(breaker: &Breaker<P, O>) {
    for _ in 0..1_000 {
        if breaker.state() == State::Open {
            return;
        }
        let _ = breaker.execute(|| Err::<(), _>("down"));
    }
    assert_eq!(
        breaker.state(),
        State::Open,
        "1 000 failures did not trip it"
    );
}

/// Trips `breaker` (see [`trip`]), then moves `clock` on by `past`, which must take it past
/// its open period: the breaker is half-open, no probe taken yet.
pub(crate) fn half_open<P: TripPolicy, O: Observer>(
    breaker: &Breaker<P, O>,
    clock: &ManualClock,
    past: Duration,
) {
    trip(breaker);
    clock.advance(past);
    assert_eq!(breaker.state(), State::HalfOpen);
}
