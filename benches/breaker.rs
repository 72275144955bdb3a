//! Per-call cost of the breaker on its hot paths (`cargo bench`).
//!
//! Every benchmark wraps the same `#[inline(never)]` operation so the figures compare the
//! breaker's overhead, not the work around it.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, State};

#[inline(never)]
fn operation(ok: bool) -> Result<u64, ()> {
    if black_box(ok) {
        Ok(black_box(1))
    } else {
        Err(())
    }
}

fn closed(c: &mut Criterion) {
    let mut group = c.benchmark_group("closed");
    group.throughput(Throughput::Elements(1));
    let breaker = Breaker::builder().build();
    group.bench_function("execute_success", |b| {
        b.iter(|| breaker.execute(|| operation(true)))
    });
    group.bench_function("allow_then_success", |b| {
        b.iter(|| {
            let permit = breaker.allow().unwrap();
            let r = operation(true);
            permit.success();
            r
        })
    });
    let windowed = Breaker::builder().interval(Duration::from_secs(10)).build();
    group.bench_function("execute_success_interval_10s", |b| {
        b.iter(|| windowed.execute(|| operation(true)))
    });
    group.finish();
}

fn open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    group.throughput(Throughput::Elements(1));
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(Duration::from_secs(3600))
        .build();
    let _ = breaker.execute(|| operation(false));
    assert_eq!(breaker.state(), State::Open);
    group.bench_function("execute_rejected", |b| {
        b.iter(|| breaker.execute(|| operation(true)))
    });
    group.finish();
}

criterion_group!(benches, closed, open);
criterion_main!(benches);
