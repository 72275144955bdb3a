//! A half-open probe that never reports (`Builder::probe_timeout`): once every probe slot has
//! been held longer than the probe timeout (the open `timeout` by default), the next call
//! starts the trial again as its first probe; the replaced probes' late verdicts are dropped;
//! `Duration::MAX` keeps gobreaker's wait; the knob reads from files; an async probe that
//! never completes and a health-checked breaker's probe are taken over the same way.

use crate::checks;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use checks::{due, poll_once, Check, Verdict, PAST_OPEN};

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, ManualClock, Rejected, State};

const OPEN: Duration = Duration::from_secs(30);
const NS: Duration = Duration::from_nanos(1);

/// A breaker that trips on one failure, opens for [`OPEN`], admits `probes` probes, with
/// `probe_timeout` set when given; tripped and half-open, no probe out yet.
fn half_open(
    probes: u32,
    probe_timeout: Option<Duration>,
) -> (Breaker<ConsecutiveFailures>, ManualClock) {
    let clock = ManualClock::new();
    let mut builder = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN)
        .max_requests(probes)
        .clock(clock.clone());
    if let Some(d) = probe_timeout {
        builder = builder.probe_timeout(d);
    }
    let breaker = builder.build();
    breaker.allow().unwrap().failure();
    clock.advance(OPEN + NS);
    assert_eq!(breaker.state(), State::HalfOpen);
    (breaker, clock)
}

/// Polly's AdvancedCircuitBreaker grants another trial after each break duration: so does
/// the default here, strictly after the open timeout (the same strictness as the open period).
#[test]
fn by_default_a_hung_probe_is_taken_over_strictly_after_the_open_timeout() {
    let (breaker, clock) = half_open(1, None);
    let _hung = breaker.allow().unwrap();
    clock.advance(OPEN);
    assert_eq!(
        breaker.allow().unwrap_err(),
        Rejected::TooManyRequests,
        "held exactly the timeout: still its slot"
    );
    assert_eq!(breaker.totals().rejected_half_open, 1);
    clock.advance(NS);
    let probe = breaker
        .allow()
        .expect("held longer than the timeout: taken over");
    assert_eq!(breaker.state(), State::HalfOpen, "no state change");
    assert_eq!(breaker.totals().probes_taken_over, 1);
    assert_eq!(
        breaker.allow().unwrap_err(),
        Rejected::TooManyRequests,
        "the new probe holds the slot now"
    );
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn the_replaced_probes_late_verdicts_are_dropped_or_abandoned() {
    let (breaker, clock) = half_open(1, Some(Duration::from_secs(5)));
    let first = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(6));
    let second = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(6));
    let third = breaker.allow().unwrap();
    assert_eq!(breaker.totals().probes_taken_over, 2);
    // A late failure would have reopened the breaker: it no longer counts.
    first.failure();
    assert_eq!(breaker.state(), State::HalfOpen);
    drop(second); // kept by mistake, then dropped
    let t = breaker.totals();
    assert_eq!((t.dropped, t.abandoned, t.failures), (1, 1, 1), "{t:?}");
    third.success();
    assert_eq!(breaker.state(), State::Closed);
    let t = breaker.totals();
    // The tripping call, three probes: every admitted call accounted for once.
    assert_eq!(t.admitted, 4);
    assert_eq!(
        t.admitted,
        t.successes + t.failures + t.exclusions + t.abandoned + t.dropped
    );
}

/// With several slots, each taken at another time, the takeover waits until the latest
/// probe has held its slot longer than the timeout, and starts the whole trial again: the
/// successes of the replaced trial no longer count toward closing.
#[test]
fn every_slot_must_have_been_held_past_the_timeout_and_the_trial_restarts() {
    let (breaker, clock) = half_open(3, Some(Duration::from_secs(10)));
    breaker.allow().unwrap().success();
    clock.advance(Duration::from_secs(4));
    breaker.allow().unwrap().success();
    clock.advance(Duration::from_secs(4));
    let hung = breaker.allow().unwrap();
    assert_eq!(breaker.counts().consecutive_successes, 2);
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        breaker.allow().unwrap_err(),
        Rejected::TooManyRequests,
        "the latest probe has held its slot 10 s, not longer"
    );
    clock.advance(NS);
    let a = breaker.allow().expect("a new trial");
    let c = breaker.counts();
    assert_eq!((c.requests, c.consecutive_successes), (1, 0), "{c:?}");
    let b = breaker.allow().unwrap();
    let c2 = breaker.allow().unwrap();
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    hung.success(); // late: dropped
    a.success();
    b.success();
    assert_eq!(breaker.state(), State::HalfOpen, "two of three successes");
    c2.success();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.totals().dropped, 1);
}

/// gobreaker has no probe timeout: `Duration::MAX` waits for the probe for good.
#[test]
fn a_probe_timeout_of_duration_max_never_takes_a_probe_over() {
    let (breaker, clock) = half_open(1, Some(Duration::MAX));
    let _hung = breaker.allow().unwrap();
    for _ in 0..5 {
        clock.advance(Duration::from_secs(365 * 24 * 3600));
        assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    }
    assert_eq!(breaker.totals().probes_taken_over, 0);
}

#[cfg(feature = "serde")]
#[test]
fn a_probe_timeout_from_a_file_applies() {
    use lazybreaker::config::Settings;

    let settings: Settings = toml::from_str(
        r#"
        timeout = "30s"
        probe_timeout = "2s"
        "#,
    )
    .unwrap();
    assert_eq!(settings.knobs.probe_timeout, Duration::from_secs(2));
    let clock = ManualClock::new();
    let breaker = settings.to_builder().unwrap().clock(clock.clone()).build();
    breaker.trip_for(Duration::ZERO);
    clock.advance(OPEN + NS);
    let _hung = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    clock.advance(NS);
    assert!(breaker.allow().is_ok());
    // Written out only when set, and read back.
    let text = toml::to_string(&settings.knobs).unwrap();
    assert!(text.contains(r#"probe_timeout = "2s""#), "{text}");
    assert!(!toml::to_string(&lazybreaker::Knobs::default())
        .unwrap()
        .contains("probe_timeout"));
    let err = toml::from_str::<Settings>(r#"probe_timeout = "soon""#).unwrap_err();
    assert!(
        err.message().contains("`probe_timeout`"),
        "{}",
        err.message()
    );
}

/// A future that is never ready: a call with no deadline against a dependency that hangs.
struct Hangs;

impl Future for Hangs {
    type Output = Result<(), ()>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

#[test]
fn an_async_probe_that_never_completes_is_taken_over() {
    let (breaker, clock) = half_open(1, None);
    let mut hung = Box::pin(breaker.execute_async(|| Hangs));
    assert!(poll_once(&mut hung).is_pending(), "admitted as the probe");
    let mut turned_away = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert!(matches!(
        poll_once(&mut turned_away),
        Poll::Ready(Err(lazybreaker::Error::Rejected(Rejected::TooManyRequests)))
    ));
    clock.advance(OPEN + NS);
    let mut probe = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert_eq!(poll_once(&mut probe), Poll::Ready(Ok(())));
    assert_eq!(breaker.state(), State::Closed);
    drop(hung); // cancelled at last: abandoned, and stale
    let t = breaker.totals();
    assert_eq!(
        (t.probes_taken_over, t.abandoned, t.dropped),
        (1, 1, 0),
        "{t:?}"
    );
}

/// With a health check, the check that passed made the call its first probe; a probe that
/// then hangs is taken over only after another check passes: the call that takes the slot
/// over is checked as the first probe was (a sync call, which cannot run a check, takes it
/// over as gobreaker's probe would).
#[test]
fn a_checked_breakers_hung_probe_is_taken_over_after_another_check() {
    let check = Check::default();
    let (breaker, clock) = due(&check);
    check.settle(Verdict::Pass);
    let mut hung = Box::pin(breaker.execute_async(|| Hangs));
    assert!(
        poll_once(&mut hung).is_pending(),
        "checked, then the probe hangs"
    );
    assert_eq!((check.runs(), breaker.state()), (1, State::HalfOpen));
    clock.advance(PAST_OPEN);
    check.reset();
    let mut probe = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert!(
        poll_once(&mut probe).is_pending(),
        "the takeover runs a check"
    );
    assert_eq!(check.runs(), 2);
    assert_eq!(
        breaker.totals().probes_taken_over,
        0,
        "nothing taken over before the check passes"
    );
    let mut meanwhile = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert_eq!(
        poll_once(&mut meanwhile),
        Poll::Ready(Err(lazybreaker::Error::Rejected(Rejected::Checking))),
        "held back while the takeover's check runs"
    );
    check.settle(Verdict::Pass);
    assert_eq!(poll_once(&mut probe), Poll::Ready(Ok(())));
    assert_eq!((check.runs(), breaker.state()), (2, State::Closed));
    assert_eq!(breaker.totals().probes_taken_over, 1);
}

/// A takeover's check that fails opens the breaker again (a failed recovery, marked as the
/// check's), and the hung probe's late verdict is dropped with the trial.
#[test]
fn a_takeovers_failed_check_reopens_the_breaker() {
    use lazybreaker::observe::Origin;
    let check = Check::default();
    let (breaker, clock) = due(&check);
    // A sync call probes as gobreaker's would (it cannot run the check), then hangs.
    let hung = breaker.allow().unwrap();
    assert_eq!((check.runs(), breaker.state()), (0, State::HalfOpen));
    clock.advance(PAST_OPEN);
    check.settle(Verdict::Fail);
    let mut probe = Box::pin(breaker.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
    assert!(matches!(
        poll_once(&mut probe),
        Poll::Ready(Err(lazybreaker::Error::Rejected(Rejected::Open { .. })))
    ));
    assert_eq!(breaker.state(), State::Open);
    let changes = breaker.observer().take();
    assert_eq!(
        changes.last().map(|&(from, to, origin)| (from, to, origin)),
        Some((State::HalfOpen, State::Open, Origin::HealthCheck)),
        "{changes:?}"
    );
    let t = breaker.totals();
    assert_eq!((t.health_checks, t.health_checks_failed), (1, 1), "{t:?}");
    hung.success();
    assert_eq!(
        breaker.totals().dropped,
        1,
        "the trial ended: its probe is stale"
    );
}

/// In dry run a probe slot held past the timeout is taken over as it would be for real: the
/// call it would have admitted is admitted, not counted as one it would reject.
#[test]
fn a_dry_run_takes_a_hung_probe_over_as_the_real_breaker_would() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(OPEN)
        .dry_run(true)
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(OPEN + NS);
    let _hung = breaker.allow().unwrap();
    let _shadow = breaker.allow().unwrap();
    assert_eq!(breaker.totals().would_reject, 1);
    clock.advance(OPEN + NS);
    breaker.allow().unwrap().success();
    let t = breaker.totals();
    assert_eq!((t.would_reject, t.probes_taken_over), (1, 1), "{t:?}");
    assert_eq!(breaker.state(), State::Closed);
}
