//! Adaptive throttling (`Builder::throttle`) against go-zero's design written in Rust
//! (`support::sre_peer`): a mutex and a sum over every bucket on each admission.
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `throttle_healthy_1t` | `lazybreaker_rolling` (no throttle), `lazybreaker_throttled`, `gozero_sre` | one thread, `operation(true)`: every call succeeds, so `p` is zero |
//! | `throttle_healthy_2t` | the same | the same from two threads on one breaker (`support::contended`) |
//! | `throttle_shedding_1t` | `lazybreaker_throttled`, `gozero_sre` | one thread in an overload held steady: every admitted call fails, so `p` nears one (no cap, as go-zero) and almost every call is turned away, one draw each |
//! | `throttle_shedding_2t` | the same | the same from two threads on one breaker |
//!
//! Every lazybreaker variant is a failure ratio over a 10 s window rolling in 1 s buckets
//! (as `ratio_windows_*`); the throttled one adds `Throttle::new(1.5)` with a minimum of 5
//! requests, go-zero's defaults. In `throttle_shedding_1t` both never trip and are first
//! driven into the overload (outside the timed loop).

use criterion::Criterion;
use lazybreaker::policy::FailureRatio;
use lazybreaker::throttle::Throttle;
use lazybreaker::Breaker;
use std::hint::black_box;
use std::time::Duration;

use crate::support::sre_peer::GoZeroSre;
use crate::support::{contended, group, group_2t, operation};

fn rolling(throttle: Option<Throttle>) -> Breaker<FailureRatio> {
    let builder = Breaker::builder()
        .policy(FailureRatio::new(0.5, 20).expect("valid"))
        .interval(Duration::from_secs(10))
        .bucket_period(Duration::from_secs(1));
    match throttle {
        Some(t) => builder.throttle(t).build(),
        None => builder.build(),
    }
}

fn gozero_throttle() -> Throttle {
    Throttle::new(1.5).expect("valid").min_requests(5)
}

/// go-zero's call: accept, run, mark.
fn gozero_call(sre: &GoZeroSre, ok: bool) -> Option<Result<u64, ()>> {
    if !sre.accept() {
        return None;
    }
    let result = operation(ok);
    sre.mark(result.is_ok());
    Some(result)
}

/// `throttle_healthy_1t`.
pub(crate) fn healthy_1t(c: &mut Criterion) {
    let mut g = group(c, "throttle_healthy_1t");
    let plain = rolling(None);
    g.bench_function("lazybreaker_rolling", |b| {
        b.iter(|| plain.execute(|| operation(true)))
    });
    let throttled = rolling(Some(gozero_throttle()));
    g.bench_function("lazybreaker_throttled", |b| {
        b.iter(|| throttled.execute(|| operation(true)))
    });
    assert_eq!(throttled.totals().rejected_throttled, 0);
    let sre = GoZeroSre::new();
    g.bench_function("gozero_sre", |b| b.iter(|| gozero_call(&sre, true)));
    g.finish();
}

/// `throttle_healthy_2t`.
pub(crate) fn healthy_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "throttle_healthy_2t");
    let plain = rolling(None);
    g.bench_function("lazybreaker_rolling", |b| {
        b.iter_custom(|iters| contended(iters, || plain.execute(|| operation(true))))
    });
    let throttled = rolling(Some(gozero_throttle()));
    g.bench_function("lazybreaker_throttled", |b| {
        b.iter_custom(|iters| contended(iters, || throttled.execute(|| operation(true))))
    });
    let sre = GoZeroSre::new();
    g.bench_function("gozero_sre", |b| {
        b.iter_custom(|iters| contended(iters, || gozero_call(&sre, true)))
    });
    g.finish();
}

/// A breaker and go-zero's design, both driven into a steady overload (`p` near one).
fn overloaded() -> (Breaker, GoZeroSre) {
    let throttled = Breaker::builder()
        .never_trips(true)
        .interval(Duration::from_secs(10))
        .bucket_period(Duration::from_secs(1))
        .throttle(gozero_throttle().max_probability(1.0))
        .build();
    for _ in 0..1_000 {
        let _ = throttled.execute(|| operation(false));
    }
    assert!(throttled.totals().rejected_throttled > 0, "shedding");
    let sre = GoZeroSre::new();
    for _ in 0..1_000 {
        gozero_call(&sre, false);
    }
    (throttled, sre)
}

/// `throttle_shedding_1t`: an overload held steady, `p` near one for both (no cap).
pub(crate) fn shedding_1t(c: &mut Criterion) {
    let mut g = group(c, "throttle_shedding_1t");
    let (throttled, sre) = overloaded();
    g.bench_function("lazybreaker_throttled", |b| {
        b.iter(|| black_box(throttled.execute(|| operation(false))))
    });
    g.bench_function("gozero_sre", |b| b.iter(|| gozero_call(&sre, false)));
    g.finish();
}

/// `throttle_shedding_2t`: the same from two threads on one breaker.
pub(crate) fn shedding_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "throttle_shedding_2t");
    let (throttled, sre) = overloaded();
    g.bench_function("lazybreaker_throttled", |b| {
        b.iter_custom(|iters| {
            contended(iters, || black_box(throttled.execute(|| operation(false))))
        })
    });
    g.bench_function("gozero_sre", |b| {
        b.iter_custom(|iters| contended(iters, || gozero_call(&sre, false)))
    });
    g.finish();
}
