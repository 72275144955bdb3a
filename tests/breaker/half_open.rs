//! Half-open admission, and the permits that must never leave it stuck.

use crate::support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use support::policy::ready_on_first_failure;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A breaker that trips on its first failure, already tripped and past its timeout.
fn half_open(max_requests: u32) -> (Breaker<impl lazybreaker::policy::TripPolicy>, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .max_requests(max_requests)
        .timeout(TIMEOUT)
        .ready_to_trip(ready_on_first_failure)
        .clock(clock.clone())
        .build();
    support::setup::half_open(&breaker, &clock, TIMEOUT + Duration::from_millis(1));
    (breaker, clock)
}

#[test]
fn a_dropped_permit_gives_its_half_open_slot_back() {
    let (breaker, _clock) = half_open(1);
    let probe = breaker.allow().expect("one probe is admitted");
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);

    // The caller gives up on the probe without a verdict (a cancelled future, an early `?`).
    drop(probe);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.counts().total_exclusions, 1);

    // The slot is free again: the breaker is not stuck.
    let probe = breaker.allow().expect("the slot was given back");
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn an_early_return_with_question_mark_does_not_stick_half_open() {
    fn call(breaker: &Breaker<impl lazybreaker::policy::TripPolicy>) -> Result<(), Error<String>> {
        let _permit = breaker.allow()?;
        Err(Error::Inner(
            "parse error before the call was made".to_string(),
        ))?;
        unreachable!()
    }
    let (breaker, _clock) = half_open(1);
    assert!(matches!(call(&breaker), Err(Error::Inner(_))));
    assert_eq!(breaker.state(), State::HalfOpen);
    assert!(breaker.allow().is_ok(), "the dropped permit freed the slot");
}

#[test]
fn excluded_results_free_slots_and_do_not_close() {
    let (breaker, _clock) = half_open(2);
    let a = breaker.allow().unwrap();
    let b = breaker.allow().unwrap();
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    a.exclude();
    let c = breaker.allow().expect("an exclusion frees a slot");
    b.success();
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "one success of two needed"
    );
    // A success does not free a slot (gobreaker): still full with b done and c in flight.
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    c.success();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_permit_dropped_while_panicking_counts_as_a_failure() {
    let (breaker, _clock) = half_open(1);
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _probe = breaker.allow().unwrap();
        panic!("the call panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(
        breaker.state(),
        State::Open,
        "a panicking probe reopens the breaker"
    );
}

#[test]
fn execute_records_a_panic_as_a_failure_and_resumes_it() {
    let breaker = Breaker::builder()
        .ready_to_trip(|c| c.consecutive_failures >= 2)
        .build();
    let code = std::hint::black_box(42);
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        breaker.execute(|| -> Result<(), ()> { panic!("boom {code}") })
    }));
    let payload = unwound.expect_err("the panic is not swallowed");
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("boom 42"),
        "the original payload"
    );
    assert_eq!(breaker.counts().total_failures, 1);
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_failed_probe_reopens_for_a_full_timeout() {
    let (breaker, clock) = half_open(3);
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    match breaker.allow() {
        Err(Rejected::Open { retry_after }) => {
            // The whole timeout is left (half-open is entered strictly after it).
            assert_eq!(retry_after, TIMEOUT);
        }
        other => panic!("expected open, got {other:?}"),
    }
    clock.advance(TIMEOUT);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn a_late_result_from_before_the_trip_is_stale() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(TIMEOUT)
        .ready_to_trip(ready_on_first_failure)
        .clock(clock.clone())
        .build();
    let slow = breaker.allow().unwrap();
    support::setup::half_open(&breaker, &clock, TIMEOUT * 2);
    // The slow call from the closed generation finally succeeds: it must not close the
    // half-open breaker nor count as its probe.
    slow.success();
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.counts().total_successes, 0);
}

#[test]
fn an_owned_permit_moves_to_another_thread_and_reports_there() {
    let (breaker, _clock) = half_open(1);
    let breaker = std::sync::Arc::new(breaker);
    let probe = breaker.allow_owned().unwrap();
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    std::thread::spawn(move || probe.success()).join().unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_dropped_owned_permit_gives_its_slot_back_too() {
    let (breaker, _clock) = half_open(1);
    let breaker = std::sync::Arc::new(breaker);
    let probe = breaker.allow_owned().unwrap();
    std::thread::spawn(move || drop(probe)).join().unwrap();
    assert_eq!(breaker.counts().total_exclusions, 1);
    assert!(breaker.allow().is_ok());
}

#[test]
fn a_permit_from_an_earlier_closed_period_is_stale_in_a_later_one() {
    let (breaker, clock) = half_open(1);
    breaker.allow().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
    // Held across a whole trip-and-recover cycle: its closed generation is long gone.
    let old = breaker.allow().unwrap();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(TIMEOUT * 2);
    breaker.allow().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
    old.success();
    assert_eq!(breaker.counts(), lazybreaker::Counts::default());
    assert_eq!(breaker.totals().dropped, 1);
}
