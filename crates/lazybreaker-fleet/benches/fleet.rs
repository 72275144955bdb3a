//! A shared breaker's per-call cost against the local breaker it wraps, on Redis and on
//! PostgreSQL, and a trip's round trip to each store:
//! `cargo bench -p lazybreaker-fleet --bench fleet --features redis,postgres`. It starts its
//! own `redis-server` and PostgreSQL server (see `tests/redis_server` and
//! `tests/postgres_server`), which `bash .ci/test` installs.
//!
//! | implementation | configuration |
//! |---|---|
//! | local | `Breaker::builder().name("bench").build()` (gobreaker's defaults), `execute_async(\|\| async { operation(true) })` |
//! | local_windowed | the same with `.interval(10 s)`: a closed-state window, so one clock read per call, as the shared breaker's staleness check makes (closed only) |
//! | lazybreaker | the same breaker in `SharedBreaker::builder(client).build(..)` (sync interval 250 ms, store timeout 50 ms), `execute(\|\| async { operation(true) })` |
//! | lazybreaker_memory | the same on `fleet::MemoryStore::new()` (closed only): the protocol's cost without a server |
//! | lazybreaker_postgres | the same on `PostgresStore` (a pool of 4, store timeout 50 ms, `prepare`d) |
//!
//! `fleet_trip_round_trip`: one `FleetStore::publish` of a trip at a new generation each time
//! (the record written), on each store: what a trip costs the process that publishes it.
//!
//! Both run inside one current-thread tokio runtime's `block_on`, a loop of `iters` calls
//! (`iter_custom`), so neither pays a runtime entry per call. On the real clock, the shared
//! breaker refreshes its view once per sync interval, a round trip to the server on
//! loopback, and that is part of what it measures. Open: both tripped for an hour (the
//! shared one published it) and checked to reject.

#[path = "../tests/postgres_server/mod.rs"]
mod postgres_server;
#[path = "../tests/redis_server/mod.rs"]
mod redis_server;
#[allow(dead_code)]
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use lazybreaker::{Breaker, Error, Rejected};
use lazybreaker_fleet::postgres::PostgresStore;
use lazybreaker_fleet::redis::{RedisStore, SharedBreaker};
use lazybreaker_fleet::{self as fleet, Decision, FleetStore, MemoryStore, Vote};

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

/// A PostgreSQL store on `server`, connected and its schema applied (within `rt`).
fn postgres(rt: &tokio::runtime::Runtime, server: &postgres_server::PgServer) -> PostgresStore {
    let store = PostgresStore::new(server.config());
    rt.block_on(store.prepare(Duration::from_secs(10)))
        .expect("the server answers");
    store
}

fn closed_1t(c: &mut Criterion) {
    let server = redis_server::Server::start();
    let pg = postgres_server::PgServer::start();
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
    let on_postgres = fleet::SharedBreaker::builder(postgres(&rt, &pg))
        .build(Breaker::builder().name("bench-closed"))
        .unwrap();
    g.bench_function("lazybreaker_postgres", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                on_postgres.execute(|| async { operation(true) })
            })
        })
    });
    g.finish();
    let stats = on_postgres.stats();
    assert!(
        stats.round_trips > 0 && stats.store_errors == 0,
        "{stats:?}"
    );
    assert!(memory.stats().round_trips > 0);
    let stats = shared.stats();
    assert!(
        stats.round_trips > 0 && stats.store_errors == 0,
        "{stats:?}"
    );
}

fn open_1t(c: &mut Criterion) {
    let server = redis_server::Server::start();
    let pg = postgres_server::PgServer::start();
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
    let on_postgres = fleet::SharedBreaker::builder(postgres(&rt, &pg))
        .build(Breaker::builder().name("bench-open").timeout(LONG_OPEN))
        .unwrap();
    rt.block_on(async {
        for _ in 0..6 {
            let _ = on_postgres.execute(|| async { operation(false) }).await;
        }
    });
    assert_eq!(on_postgres.stats().published, 1);
    g.bench_function("lazybreaker_postgres", |b| {
        b.iter_custom(|iters| {
            timed(&rt, iters, || {
                on_postgres.execute(|| async { operation(true) })
            })
        })
    });
    g.finish();
    for shared in [
        rt.block_on(shared.execute(|| async { operation(true) })),
        rt.block_on(on_postgres.execute(|| async { operation(true) })),
    ] {
        assert!(
            matches!(shared, Err(Error::Rejected(Rejected::Open { .. }))),
            "still open"
        );
    }
}

/// `iters` trips published at new generations from `next` on, timed.
fn trips<S: FleetStore>(
    rt: &tokio::runtime::Runtime,
    store: &S,
    next: &std::cell::Cell<u64>,
    iters: u64,
) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            let generation = next.get();
            next.set(generation + 1);
            let open = Decision::Open(Duration::from_secs(60));
            let record = store
                .publish("bench-trip", generation, open, Vote::NONE, Duration::ZERO)
                .await
                .expect("the store answers");
            assert!(record.written);
        }
        start.elapsed()
    })
}

fn trip_round_trip(c: &mut Criterion) {
    let server = redis_server::Server::start();
    let pg = postgres_server::PgServer::start();
    let rt = runtime();
    let mut g = group(c, "fleet_trip_round_trip");
    let redis = RedisStore::from(server.client()).with_timeout(Duration::from_secs(1));
    let next = std::cell::Cell::new(1);
    g.bench_function("redis", |b| {
        b.iter_custom(|iters| trips(&rt, &redis, &next, iters))
    });
    let postgres = postgres(&rt, &pg).with_timeout(Duration::from_secs(1));
    rt.block_on(postgres.prepare(Duration::from_secs(10)))
        .expect("the server answers");
    let next = std::cell::Cell::new(1);
    g.bench_function("postgres", |b| {
        b.iter_custom(|iters| trips(&rt, &postgres, &next, iters))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = lazybreaker_bench_support::criterion();
    targets = closed_1t, open_1t, trip_round_trip
}
criterion_main!(benches);
