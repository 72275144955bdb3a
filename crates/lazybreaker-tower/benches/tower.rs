//! The tower layer's added cost per call and `execute_async` against their peers:
//! `cargo bench -p lazybreaker-tower --bench tower`, see `benches/README.md`.
//!
//! Every group compares its implementations in the same run, time per call, around the same
//! `#[inline(never)]` operation as `benches/breaker.rs` (`support::operation`).
//!
//! | implementation | configuration | forced open by |
//! |---|---|---|
//! | bare | the inner service alone: always ready, its future `std::future::Ready` of `operation(ok)` (`tower_groups::stacks::Inner`) | – |
//! | lazybreaker (tower) | `BreakerLayer::new(Arc::new(Breaker::builder().build()))` over the inner service: gobreaker's defaults (interval 0, trip after more than 5 consecutive failures, 60 s open, 1 half-open probe), the default classifier (`Ok` succeeds) | 6 failed calls |
//! | lazybreaker_fallback (tower, open groups) | as lazybreaker (tower), with `.fallback(\|_r: &Rejected\| 0)`: a rejected request gets `Ok(0)` instead of an error (`tower_groups::stacks::lazy_fallback`) | 6 failed calls |
//! | lazybreaker_keyed (tower, open groups) | `KeyedBreakerLayer::new(Arc::new(registry), \|_: &bool\| "api.example.com")` over the inner service, the registry's breakers built as lazybreaker (tower)'s and the key's made beforehand: a registry lookup per call, and a rejection that names its breaker (`RejectedBy`, a copy of the name) | 6 failed calls |
//! | tower_resilience | tower-resilience-circuitbreaker 0.14, `CircuitBreakerLayer::builder().consecutive_failures(6).wait_duration_in_open(60 s).permitted_calls_in_half_open(1).build()` over the inner service: `FailureModel::ConsecutiveFailures { k: 6 }` (6 in a row trip it, as gobreaker's "more than 5"), so no failure-rate window; count-based window type (the default, only counted), no slow-call threshold, no backpressure (an open circuit rejects rather than waits), no event listeners, default name `<unnamed>`, default classifier (`Err` fails) | 6 failed calls |
//! | lazybreaker (async) | `Breaker::builder().build()`, `execute_async(\|\| async { operation(true) })` | 6 failed calls |
//! | failsafe (async) | failsafe 1.3 with `futures-support`, `Config::new().failure_policy(ConsecutiveFailures::default())` as in `support::peers` (5 consecutive failures, equal-jittered backoff 10 s..300 s), `failsafe::futures::CircuitBreaker::call(&breaker, async { operation(true) })` | 5 failed calls |
//!
//! An open breaker gets the same configuration with an open period of `support::LONG_OPEN`
//! (one hour), and is checked to reject before and after its measurement.
//!
//! Futures are driven without a runtime by `tower_groups::exec::block_on`, which polls and
//! parks the thread on `Pending` (its waker unparks it), except in `tower_open_2t`: there
//! every bench runs on a current-thread tokio runtime (timer enabled) per thread, because an
//! open tower-resilience circuit whose mutex the other thread holds sleeps 1 ms on tokio's
//! timer, which panics outside a runtime.

// The support module is shared with `benches/breaker.rs`; this binary uses part of it.
#[allow(dead_code)]
mod support {
    pub(crate) use lazybreaker_bench_support::*;
    lazybreaker_bench_support::local_operation!();
}
mod tower_groups;

use criterion::{criterion_group, criterion_main};

criterion_group! {
    name = benches;
    config = support::criterion();
    targets =
        tower_groups::layer::closed_1t,
        tower_groups::layer::closed_2t,
        tower_groups::layer::open_1t,
        tower_groups::layer::open_2t,
        tower_groups::calls::closed_1t,
        tower_groups::calls::open_1t,
        tower_groups::calls::owned_1t,
        tower_groups::calls::owned_2t,
        tower_groups::budget::one_thread,
        tower_groups::budget::two_threads,
}
criterion_main!(benches);
