//! Floor references: what a breaker's call cannot be cheaper than if it reads the clock or
//! takes a lock twice, measured in the same run as the breakers.

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use lazybreaker::{Clock, CoarseMonotonicClock, PreciseClock};
use parking_lot::Mutex;

use crate::support::{contended, group, group_2t, operation};

/// Two lock-and-unlock pairs of a `parking_lot::Mutex`, each touching the data.
#[inline(always)]
fn lock_unlock_twice(m: &Mutex<u64>) {
    *m.lock() += 1;
    *m.lock() += 1;
}

/// `floor_1t`: `Instant::now()` alone, the precise clock lazybreaker's builder picks for
/// policies that measure latency, the coarse one it picks for the others, two `parking_lot` lock+unlock pairs, and the bare
/// operation.
pub(crate) fn floor_1t(c: &mut Criterion) {
    let mut g = group(c, "floor_1t");
    g.bench_function("instant_now", |b| b.iter(Instant::now));
    let precise = PreciseClock::new();
    g.bench_function("precise_clock_now", |b| b.iter(|| precise.now()));
    let coarse = CoarseMonotonicClock::new();
    g.bench_function("coarse_clock_now", |b| b.iter(|| coarse.now()));
    let m = Mutex::new(0u64);
    g.bench_function("parking_lot_lock_unlock_x2", |b| {
        b.iter(|| lock_unlock_twice(black_box(&m)))
    });
    g.bench_function("operation", |b| b.iter(|| operation(true)));
    g.finish();
}

/// `floor_2t`: the same clock reads and lock pairs from two threads at once (one shared
/// mutex); wall time / total calls.
pub(crate) fn floor_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "floor_2t");
    g.bench_function("instant_now", |b| {
        b.iter_custom(|iters| contended(iters, Instant::now))
    });
    let coarse = CoarseMonotonicClock::new();
    g.bench_function("coarse_clock_now", |b| {
        b.iter_custom(|iters| contended(iters, || coarse.now()))
    });
    let m = Mutex::new(0u64);
    g.bench_function("parking_lot_lock_unlock_x2", |b| {
        b.iter_custom(|iters| contended(iters, || lock_unlock_twice(black_box(&m))))
    });
    g.finish();
}
