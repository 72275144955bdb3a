//! Closed breaker, call succeeds: against the peers on one and two threads; lazybreaker's
//! closed-state windows; the two-step API against `execute`.

use std::time::Duration;

use criterion::Criterion;
use lazybreaker::Breaker;

use crate::support::peers::{BreakerCrate, Failsafe, Lazy, LazyInstantClock, Recloser, Subject};
use crate::support::{contended, group, group_2t, one_thread, operation, two_threads};

/// `closed_success_1t`: one thread calls a closed breaker, the call succeeds.
pub(crate) fn success_1t(c: &mut Criterion) {
    let mut g = group(c, "closed_success_1t");
    one_thread(&mut g, &Lazy::closed());
    one_thread(&mut g, &LazyInstantClock::closed());
    one_thread(&mut g, &Failsafe::closed());
    one_thread(&mut g, &Recloser::closed());
    one_thread(&mut g, &BreakerCrate::closed());
    g.finish();
}

/// `closed_success_2t`: two threads call one closed breaker; wall time / total calls.
pub(crate) fn success_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "closed_success_2t");
    two_threads(&mut g, &Lazy::closed());
    two_threads(&mut g, &LazyInstantClock::closed());
    two_threads(&mut g, &Failsafe::closed());
    two_threads(&mut g, &Recloser::closed());
    two_threads(&mut g, &BreakerCrate::closed());
    g.finish();
}

/// `closed_windows_1t`: lazybreaker only, `execute` succeeding in the closed state with the
/// default never-cleared counts, a fixed 10 s window, and a 10 s window rolling in 1 s
/// buckets; the two windows again with `verdict_at_latest` (one clock read a call).
pub(crate) fn windows_1t(c: &mut Criterion) {
    let mut g = group(c, "closed_windows_1t");
    let variants = [
        ("interval_0", Breaker::builder().build()),
        (
            "interval_10s",
            Breaker::builder().interval(Duration::from_secs(10)).build(),
        ),
        (
            "rolling_10s_1s",
            Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .build(),
        ),
        (
            "interval_10s_latest",
            Breaker::builder()
                .interval(Duration::from_secs(10))
                .verdict_at_latest(true)
                .build(),
        ),
        (
            "rolling_10s_1s_latest",
            Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .verdict_at_latest(true)
                .build(),
        ),
    ];
    for (name, breaker) in &variants {
        g.bench_function(*name, |b| b.iter(|| breaker.execute(|| operation(true))));
    }
    g.finish();
}

/// `closed_windows_2t`: the same windows with two threads on one breaker.
pub(crate) fn windows_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "closed_windows_2t");
    let variants = [
        (
            "interval_10s",
            Breaker::builder().interval(Duration::from_secs(10)).build(),
        ),
        (
            "rolling_10s_1s",
            Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .build(),
        ),
    ];
    for (name, breaker) in &variants {
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| contended(iters, || breaker.execute(|| operation(true))))
        });
    }
    g.finish();
}

/// `two_step_1t`: lazybreaker only, the same successful call through `execute` and through
/// `allow()` then `Permit::success`.
pub(crate) fn two_step_1t(c: &mut Criterion) {
    let mut g = group(c, "two_step_1t");
    let breaker = Breaker::builder().build();
    g.bench_function("execute", |b| {
        b.iter(|| breaker.execute(|| operation(true)))
    });
    g.bench_function("allow_success", |b| {
        b.iter(|| {
            let permit = breaker.allow()?;
            let result = operation(true);
            permit.success();
            Ok::<_, lazybreaker::Rejected>(result)
        })
    });
    g.finish();
}
