//! Half-open breaker, its one probe slot taken: `allow()` is rejected with
//! `TooManyRequests`. lazybreaker only.

use std::thread;
use std::time::Duration;

use criterion::Criterion;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, ManualClock, Permit, Rejected};

use crate::support::{group, operation};

/// `half_open_rejected_1t`: on the default clock (tripped with a 1 ms timeout, then
/// polled until it admits its probe), and on a `ManualClock` (advanced past the timeout), as the crate's
/// tests drive it.
pub(crate) fn rejected_1t(c: &mut Criterion) {
    let mut g = group(c, "half_open_rejected_1t");

    // The probe is held for the whole measurement: with the default probe timeout (the
    // open timeout, 1 ms here) the calls after it would take the slot over instead.
    let breaker = Breaker::builder()
        .timeout(Duration::from_millis(1))
        .probe_timeout(Duration::MAX)
        .build();
    trip(&breaker);
    let probe = wait_for_probe(&breaker);
    g.bench_function("default_clock", |b| b.iter(|| breaker.allow()));
    assert!(matches!(breaker.allow(), Err(Rejected::TooManyRequests)));
    probe.success();

    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(Duration::from_secs(1))
        .clock(clock.clone())
        .build();
    trip(&breaker);
    clock.advance(Duration::from_secs(2));
    let probe = breaker.allow().expect("half-open admits one probe");
    g.bench_function("manual_clock", |b| b.iter(|| breaker.allow()));
    assert!(matches!(breaker.allow(), Err(Rejected::TooManyRequests)));
    probe.success();

    g.finish();
}

/// Trips a breaker with the default policy (more than 5 consecutive failures).
fn trip(breaker: &Breaker) {
    for _ in 0..6 {
        let _ = breaker.execute(|| operation(false));
    }
    assert!(matches!(breaker.allow(), Err(Rejected::Open { .. })));
}

/// Waits on the real clock until a breaker that tripped with a short timeout admits its
/// half-open probe (the default clock may be coarse: it advances in ticks of a few ms).
fn wait_for_probe(breaker: &Breaker) -> Permit<'_, ConsecutiveFailures> {
    for _ in 0..1000 {
        match breaker.allow() {
            Ok(probe) => return probe,
            Err(Rejected::Open { .. }) => thread::sleep(Duration::from_millis(1)),
            Err(other) => panic!("unexpected {other}"),
        }
    }
    panic!("still open after a second past a 1 ms timeout");
}
