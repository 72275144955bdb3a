//! A shared breaker's per-call cost against the local breaker it wraps:
//! `cargo bench -p lazybreaker-fleet --bench fleet --features redis`. It starts its own `redis-server` (see
//! `tests/redis_server`), which `bash .ci/test` installs.
//!
//! | implementation | configuration |
//! |---|---|
//! | local | `Breaker::builder().name("bench").build()` (gobreaker's defaults), `execute_async(\|\| async { operation(true) })` |
//! | local_windowed | the same with `.interval(10 s)`: a closed-state window, so one clock read per call, as the shared breaker's staleness check makes (closed only) |
//! | lazybreaker | the same breaker in `SharedBreaker::builder(client).build(..)` (sync interval 250 ms, store timeout 50 ms), `execute(\|\| async { operation(true) })` |
//! | lazybreaker_memory | the same on `fleet::MemoryStore::new()` (closed only): the protocol's cost without a server |
//!
//! Both run inside one current-thread tokio runtime's `block_on`, a loop of `iters` calls
//! (`iter_custom`), so neither pays a runtime entry per call. On the real clock, the shared
//! breaker refreshes its view once per sync interval, a round trip to the server on
//! loopback, and that is part of what it measures. Open: both tripped for an hour (the
//! shared one published it) and checked to reject.

#[path = "../tests/redis_server/mod.rs"]
mod redis_server;
#[allow(dead_code)]
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use lazybreaker::{Breaker, Error, Rejected};
use lazybreaker_fleet::redis::SharedBreaker;
use lazybreaker_fleet::{self as fleet, MemoryStore};

use lazybreaker_bench_support::{group, LONG_OPEN};

lazybreaker_bench_support::local_operation!();

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `iters` calls of `call`, timed, inside `rt`.
fn timed<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    iters: u64,
    call: impl Fn() -> F,
) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call().await);
        }
        start.elapsed()
    })
}

fn closed_1t(c: &mut Criterion) {
    let server = redis_server::Server::start();
    let rt = runtime();
    let mut g = group(c, "fleet_closed_1t");
    let local = Breaker::builder().name("bench").build();
    g.bench_function("local", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                local.execute_async(|| async { operation(true) })
            })
        })
    });
    // The reference that reads the clock per call, as the shared breaker's staleness check
    // does: a local breaker with a closed-state window (gobreaker's `Interval`).
    let windowed = Breaker::builder()
        .name("bench")
        .interval(Duration::from_secs(10))
        .build();
    g.bench_function("local_windowed", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                windowed.execute_async(|| async { operation(true) })
            })
        })
    });
    let shared = SharedBreaker::builder(server.client())
        .build(Breaker::builder().name("bench-closed"))
        .unwrap();
    g.bench_function("lazybreaker", |b| {
        b.iter_custom(|iters| timed(&rt, iters, || shared.execute(|| async { operation(true) })))
    });
    let memory = fleet::SharedBreaker::builder(MemoryStore::new())
        .build(Breaker::builder().name("bench-closed"))
        .unwrap();
    g.bench_function("lazybreaker_memory", |b| {
        b.iter_custom(|iters| timed(&rt, iters, || memory.execute(|| async { operation(true) })))
    });
    g.finish();
    assert!(memory.stats().round_trips > 0);
    let stats = shared.stats();
    assert!(
        stats.round_trips > 0 && stats.store_errors == 0,
        "{stats:?}"
    );
}

fn open_1t(c: &mut Criterion) {
    let server = redis_server::Server::start();
    let rt = runtime();
    let mut g = group(c, "fleet_open_1t");
    let local = Breaker::builder().name("bench").timeout(LONG_OPEN).build();
    local.trip_for(LONG_OPEN);
    g.bench_function("local", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                local.execute_async(|| async { operation(true) })
            })
        })
    });
    let shared = SharedBreaker::builder(server.client())
        .build(Breaker::builder().name("bench-open").timeout(LONG_OPEN))
        .unwrap();
    rt.block_on(async {
        for _ in 0..6 {
            let _ = shared.execute(|| async { operation(false) }).await;
        }
        let r = shared.execute(|| async { operation(true) }).await;
        assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
    });
    assert_eq!(shared.stats().published, 1);
    g.bench_function("lazybreaker", |b| {
        b.iter_custom(|iters| timed(&rt, iters, || shared.execute(|| async { operation(true) })))
    });
    g.finish();
    let r = rt.block_on(shared.execute(|| async { operation(true) }));
    assert!(
        matches!(r, Err(Error::Rejected(Rejected::Open { .. }))),
        "still open"
    );
}

criterion_group! {
    name = benches;
    config = lazybreaker_bench_support::criterion();
    targets = closed_1t, open_1t
}
criterion_main!(benches);
