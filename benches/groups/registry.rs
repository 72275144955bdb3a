//! `Registry` lookups (issue #12): a lookup of an existing key plus a closed `execute`,
//! against a plain `execute` on a breaker already in hand, on one and two threads. The
//! issue's target: within about 2x of the plain call.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::Criterion;
use lazybreaker::{Breaker, Registry};

use crate::support::{contended, group, group_2t, operation};

const KEYS: [&str; 2] = ["api.example.com", "auth.example.com"];

fn registry() -> Registry<String> {
    let registry = Registry::new(|_: &String| Breaker::builder());
    for key in KEYS {
        registry.breaker(key);
    }
    registry
}

/// This thread's own key (threads take turns), for the distinct-keys run.
fn my_key() -> &'static str {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|mine| {
        if mine.get() == usize::MAX {
            mine.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        KEYS[mine.get() % KEYS.len()]
    })
}

/// `registry_1t`: `execute` on a breaker in hand; `registry.breaker(key)` + `execute`;
/// `registry.get(key)` + `execute`.
pub(crate) fn lookup_1t(c: &mut Criterion) {
    let mut g = group(c, "registry_1t");
    let registry = registry();
    let breaker = registry.breaker(KEYS[0]);
    g.bench_function("execute", |b| {
        b.iter(|| breaker.execute(|| operation(true)))
    });
    g.bench_function("breaker_execute", |b| {
        b.iter(|| registry.breaker(KEYS[0]).execute(|| operation(true)))
    });
    g.bench_function("get_execute", |b| {
        b.iter(|| registry.get(KEYS[0]).map(|b| b.execute(|| operation(true))))
    });
    g.finish();
}

/// `registry_2t`: two threads; `execute` on one breaker in hand; lookup + `execute` of the
/// same key on both threads; lookup + `execute` of a key per thread.
pub(crate) fn lookup_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "registry_2t");
    let registry = registry();
    let breaker = registry.breaker(KEYS[0]);
    g.bench_function("execute", |b| {
        b.iter_custom(|iters| contended(iters, || breaker.execute(|| operation(true))))
    });
    g.bench_function("breaker_execute_same_key", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                registry.breaker(KEYS[0]).execute(|| operation(true))
            })
        })
    });
    g.bench_function("breaker_execute_own_key", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                registry.breaker(my_key()).execute(|| operation(true))
            })
        })
    });
    g.finish();
}
