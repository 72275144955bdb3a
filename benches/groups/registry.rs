//! `Registry` lookups: a lookup of an existing key plus a closed `execute`,
//! against a plain `execute` on a breaker already in hand, on one and two threads: through
//! `Registry::execute` (the breaker lent for the call), and through `breaker(key)` or
//! `get(key)` (an `Arc` cloned per call). The target for the lent call: within 1.5x of the
//! plain call on one thread, 2x with one key on two threads.
//!
//! And an open key's rejection: `allow()` on the open breaker in hand, a lookup plus
//! `allow()` (a plain [`Rejected`](lazybreaker::Rejected)), and `Registry::allow` (a
//! [`RejectedBy`](lazybreaker::RejectedBy), which copies the breaker's name).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::Criterion;
use lazybreaker::{Breaker, Registry};

use crate::support::{contended, group, group_2t, operation, LONG_OPEN};

const KEYS: [&str; 2] = ["api.example.com", "auth.example.com"];

/// The open registry's one key, as long as `KEYS[0]`: the name a `RejectedBy` copies.
const OPEN_KEY: &str = "pay.example.com";

/// gobreaker's default `ReadyToTrip` trips after more than 5 consecutive failures.
const FAILURES_TO_TRIP: usize = 6;

fn registry() -> Registry<String> {
    let registry = Registry::new(|_: &String| Breaker::builder());
    for key in KEYS {
        registry.breaker(key);
    }
    registry
}

/// A registry with one key, [`OPEN_KEY`], whose breaker (an open period of [`LONG_OPEN`])
/// is open.
fn open_registry() -> Registry<String> {
    let registry = Registry::new(|_: &String| Breaker::builder().timeout(LONG_OPEN));
    let breaker = registry.breaker(OPEN_KEY);
    for _ in 0..FAILURES_TO_TRIP {
        let _ = breaker.execute(|| operation(false));
    }
    still_open(&registry);
    registry
}

/// Checks that [`OPEN_KEY`]'s breaker rejects (after a measurement: one that had recovered
/// midway would have measured admissions).
fn still_open(registry: &Registry<String>) {
    let rejected = registry.breaker(OPEN_KEY).allow().is_err();
    assert!(rejected, "{OPEN_KEY}: the breaker is not open");
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

/// `registry_1t`: `execute` on a breaker in hand; `registry.execute(key, ..)`;
/// `registry.breaker(key)` + `execute`;
/// `registry.get(key)` + `execute`. An open key: `allow()` on its breaker in hand;
/// `registry.breaker(key)` + `allow()`; `registry.allow(key)`.
pub(crate) fn lookup_1t(c: &mut Criterion) {
    let mut g = group(c, "registry_1t");
    let registry = registry();
    let breaker = registry.breaker(KEYS[0]);
    g.bench_function("execute", |b| {
        b.iter(|| breaker.execute(|| operation(true)))
    });
    g.bench_function("registry_execute", |b| {
        b.iter(|| registry.execute(KEYS[0], || operation(true)))
    });
    g.bench_function("breaker_execute", |b| {
        b.iter(|| registry.breaker(KEYS[0]).execute(|| operation(true)))
    });
    g.bench_function("get_execute", |b| {
        b.iter(|| registry.get(KEYS[0]).map(|b| b.execute(|| operation(true))))
    });
    let registry = open_registry();
    let breaker = registry.breaker(OPEN_KEY);
    g.bench_function("allow_open", |b| b.iter(|| breaker.allow().err()));
    g.bench_function("breaker_allow_open", |b| {
        b.iter(|| registry.breaker(OPEN_KEY).allow().err())
    });
    g.bench_function("registry_allow_open", |b| {
        b.iter(|| registry.allow(OPEN_KEY))
    });
    still_open(&registry);
    g.finish();
}

/// `registry_2t`: two threads; `execute` on one breaker in hand; `registry.execute` of the
/// same key on both threads, and of a key per thread; the same through `breaker(key)`. One open key on both
/// threads: `allow()` on its breaker in hand; `registry.breaker(key)` + `allow()`;
/// `registry.allow(key)`.
pub(crate) fn lookup_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "registry_2t");
    let registry = registry();
    let breaker = registry.breaker(KEYS[0]);
    g.bench_function("execute", |b| {
        b.iter_custom(|iters| contended(iters, || breaker.execute(|| operation(true))))
    });
    g.bench_function("registry_execute_same_key", |b| {
        b.iter_custom(|iters| contended(iters, || registry.execute(KEYS[0], || operation(true))))
    });
    g.bench_function("registry_execute_own_key", |b| {
        b.iter_custom(|iters| contended(iters, || registry.execute(my_key(), || operation(true))))
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
    let registry = open_registry();
    let breaker = registry.breaker(OPEN_KEY);
    g.bench_function("allow_open", |b| {
        b.iter_custom(|iters| contended(iters, || breaker.allow().err()))
    });
    g.bench_function("breaker_allow_open", |b| {
        b.iter_custom(|iters| contended(iters, || registry.breaker(OPEN_KEY).allow().err()))
    });
    g.bench_function("registry_allow_open", |b| {
        b.iter_custom(|iters| contended(iters, || registry.allow(OPEN_KEY)))
    });
    still_open(&registry);
    g.finish();
}
