//! The pool's pick and its tower service against tower's power-of-two-choices balancer:
//! `cargo bench -p lazybreaker-tower --bench pool`, see `benches/README.md`.
//!
//! Every group compares its implementations in the same run, time per call, around the same
//! `#[inline(never)]` operation as `benches/breaker.rs` (`support::operation`), on
//! [`pool_groups::services::ENDPOINTS`] (16) endpoints (`pool_scale_1t`: 3, 100 and 1 000),
//! every breaker closed.
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `pool_pick_1t` | lazybreaker | `Pool::new(\|_: &SocketAddr\| Breaker::builder())` (gobreaker's defaults per endpoint), power of two choices (the default): `pool.pick()`, `operation(true)`, `pick.success()` |
//! | `pool_pick_1t` | lazybreaker_round_robin | the same pool with `.balance(Balance::RoundRobin)` |
//! | `pool_pick_1t` | lazybreaker_judging | the default pool with `.outlier_detection(OutlierDetection::new().success_rate(1.9, 5, 100).failure_percentage(85, 5, 50))` and `.deadline(300 ms)`: a clock read per pick and per report |
//! | `pool_pick_1t` | lazybreaker_hedging | the default pool with `.hedge(Hedge::at_percentile(0.95))` and `.slow_start(SlowStart::new(30 s))`: a pick with no hedge due and no endpoint ramping up |
//! | `pool_pick_1t` | lazybreaker_limited | the default pool with `.limit(Aimd::new())` (Netflix's defaults, 20 to 200 per endpoint): a place taken and given back per call, the latency sampled (the precise clock read at the pick and at the report) |
//! | `pool_pick_1t` | lazybreaker_bulkhead | the default pool with `.limit(Fixed::new(64))`: a place taken and given back per call, no clock read |
//! | `pool_pick_1t` | bare | one endpoint's breaker alone (`Arc<Breaker>`, gobreaker's defaults), admitted as the pool admits it: `allow_owned()`, `operation(true)`, `success()` |
//! | `pool_service_1t` | lazybreaker | `PoolService::new(Arc::new(pool), \|_: &SocketAddr\| Inner)` over the pool of `pool_pick_1t` |
//! | `pool_service_1t` | lazybreaker_round_robin | the same over the round-robin pool |
//! | `pool_service_1t` | lazybreaker_judging | the same over the judging pool of `pool_pick_1t` |
//! | `pool_service_1t` | tower_p2c | tower 0.5's `balance::p2c::Balance::new(ServiceList::new(..))` over the 16 `Inner`s, each in `load::PendingRequests` (`CompleteOnResponse`) |
//! | `pool_service_1t` | bare | one `Inner` alone |
//! | `pool_scale_1t` | lazybreaker/N | `pool_pick_1t`'s `lazybreaker` on the default pool of N = 3, 100, 1 000 endpoints |
//! | `pool_scale_1t` | lazybreaker_service/N | `pool_service_1t`'s `lazybreaker` over that pool |
//! | `pool_scale_1t` | tower_p2c/N | `pool_service_1t`'s `tower_p2c` over N `PendingRequests<Inner>` |
//!
//! A tower call is `ready().await`, `call(true)`, the response awaited, driven without a
//! runtime by `tower_groups::exec::block_on` (the same loop as `benches/tower.rs`). `Inner`
//! (`pool_groups::services::Inner`) is always ready, and its future is `std::future::Ready`
//! of `operation(ok)`, its error a unit struct that implements `std::error::Error` (which
//! tower's balancer requires of its services' errors).

// The support module is shared with `benches/breaker.rs`; this binary uses part of it.
mod pool_groups;
#[allow(dead_code)]
mod support {
    pub(crate) use lazybreaker_bench_support::*;
    lazybreaker_bench_support::local_operation!();
}

use criterion::{criterion_group, criterion_main};

criterion_group! {
    name = benches;
    config = support::criterion();
    targets =
        pool_groups::pick::pick_1t,
        pool_groups::service::service_1t,
        pool_groups::scale::scale_1t,
}
criterion_main!(benches);
