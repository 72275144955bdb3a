//! `Outcome::Fatal`: a failure that opens the breaker at once, whatever the
//! policy; in half-open it reopens; forced closed, it does not trip.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::policy::{CallResult, ConsecutiveFailures, Outcome, TripPolicy};
use lazybreaker::{Breaker, ManualClock, State};

const OPEN_FOR: Duration = Duration::from_secs(10);

fn patient(clock: &ManualClock) -> Breaker {
    Breaker::builder()
        .policy(ConsecutiveFailures::new(100).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .build()
}

#[test]
fn a_fatal_result_trips_a_closed_breaker_at_once() {
    let clock = ManualClock::new();
    let b = patient(&clock);
    b.allow().unwrap().record(Outcome::Fatal);
    assert_eq!(b.state(), State::Open);
    let t = b.totals();
    assert_eq!((t.failures, t.opened), (1, 1), "counted as a failure");
}

#[test]
fn a_fatal_probe_reopens_a_half_open_breaker() {
    let clock = ManualClock::new();
    let b = patient(&clock);
    b.allow().unwrap().record(Outcome::Fatal);
    clock.advance(OPEN_FOR + Duration::from_nanos(1));
    assert_eq!(b.state(), State::HalfOpen);
    b.allow().unwrap().record(Outcome::Fatal);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.totals().opened, 2);
}

#[test]
fn a_forced_closed_breaker_does_not_trip_on_a_fatal_result() {
    let clock = ManualClock::new();
    let b = patient(&clock);
    b.force_closed();
    b.allow().unwrap().record(Outcome::Fatal);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.counts().total_failures, 1);
}

#[test]
fn a_stale_fatal_result_is_dropped_like_any_stale_result() {
    let clock = ManualClock::new();
    let b = patient(&clock);
    let permit = b.allow().unwrap();
    b.release(); // a new generation
    permit.record(Outcome::Fatal);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.totals().dropped, 1);
}

/// Policies see a fatal result as a failure, marked.
#[test]
fn the_policy_sees_a_failure_marked_fatal() {
    #[derive(Debug)]
    struct Seen(Arc<Mutex<Vec<(Outcome, bool)>>>);
    impl TripPolicy for Seen {
        fn on_result(&mut self, r: &CallResult<'_>) -> bool {
            self.0.lock().unwrap().push((r.outcome, r.fatal));
            false
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b = Breaker::builder().policy(Seen(Arc::clone(&seen))).build();
    b.allow().unwrap().failure();
    b.release();
    b.allow().unwrap().record(Outcome::Fatal);
    assert_eq!(
        *seen.lock().unwrap(),
        [(Outcome::Failure, false), (Outcome::Failure, true)]
    );
    assert_eq!(
        b.state(),
        State::Open,
        "tripped although the policy said no"
    );
}

#[test]
fn io_errors_classify_a_refused_connection_as_fatal() {
    use lazybreaker::classify::io_errors;
    use std::io::{Error, ErrorKind};
    let clock = ManualClock::new();
    let b = patient(&clock);
    for kind in [
        ErrorKind::TimedOut,
        ErrorKind::ConnectionReset,
        ErrorKind::Interrupted,
    ] {
        let _ = b.execute_classified(|| Err::<(), _>(Error::from(kind)), io_errors());
    }
    assert_eq!(b.state(), State::Closed);
    let c = b.counts();
    assert_eq!((c.total_failures, c.total_exclusions), (2, 1));
    let _ = b.execute_classified(
        || Err::<(), _>(Error::from(ErrorKind::ConnectionRefused)),
        io_errors(),
    );
    assert_eq!(b.state(), State::Open);
}

/// A real refused connection on loopback: a port that was just freed.
#[test]
fn a_refused_loopback_connection_trips_at_once() {
    use lazybreaker::classify::io_errors;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }; // closed here: nothing listens on `port` any more
    let clock = ManualClock::new();
    let b = patient(&clock);
    let r = b.execute_classified(
        || std::net::TcpStream::connect(("127.0.0.1", port)),
        io_errors(),
    );
    assert!(r.is_err(), "nothing listens there");
    assert_eq!(b.state(), State::Open);
}
