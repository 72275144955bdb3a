//! `registry_scale_1t`: a lookup of a pseudo-random existing key among N plus a closed call,
//! for N = 10, 10 000 and 1 000 000: lazybreaker's `Registry<u64>` (`registry.execute(&key,
//! ..)`) against each peer's breaker in a `DashMap<u64, _>` (`map.get(&key)` + the call:
//! what a user of a peer writes; DashMap's default hasher, SipHash), and lazybreaker's
//! `Breaker` in the same `DashMap` (`lazybreaker_dashmap`: the registry's lookup against
//! DashMap's, the breaker the same).
//!
//! Every implementation is built (N keys, each breaker configured as in `support::peers`)
//! on the first call of its bench, outside the measurement, and kept until the group is done
//! with N; the keys are drawn by the same xorshift from the same seed in every bench, so
//! every implementation looks up the same sequence. After its build, each prints its memory
//! per key to stderr: the growth of the process's resident set (`/proc/self/statm`) over
//! the build, divided by N (nothing is freed between the builds of one N, so no build
//! reuses memory another gave back; at N = 10 the figure is page-granular noise).

use std::cell::OnceCell;
use std::hint::black_box;
use std::mem::size_of;
use std::time::Instant;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use dashmap::DashMap;
use lazybreaker::{Breaker, Registry};

use crate::support::peers::{BreakerCrate, Failsafe, Lazy, Recloser, Subject};
use crate::support::{group, operation};

/// The registry sizes.
pub(crate) const SIZES: [u64; 3] = [10, 10_000, 1_000_000];

/// The xorshift's seed, the same for every bench and sample.
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The next key in `0..n` from the xorshift state `x` (Marsaglia's 13/7/17, reduced by a
/// multiply and a shift rather than a division).
#[inline(always)]
fn next_key(x: &mut u64, n: u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    ((u128::from(*x) * u128::from(n)) >> 64) as u64
}

/// The process's resident set in bytes, if this platform tells (`/proc/self/statm`'s second
/// field, in 4 KiB pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// `build()`, timed, with its memory per key (the resident set's growth over `n`) printed,
/// beside `breaker`, the size of one breaker (`size_of`, without what it allocates). The growth is a lower
/// bound: the build may reuse memory criterion freed before it (its analyses), which counts
/// at 10 000 keys (a few MiB), not at 1 000 000.
fn built<T>(name: &str, n: u64, breaker: usize, build: impl FnOnce() -> T) -> T {
    let before = resident_bytes();
    let start = Instant::now();
    let built = black_box(build());
    let took = start.elapsed();
    match (before, resident_bytes()) {
        (Some(before), Some(after)) => eprintln!(
            "registry_scale_1t: {name}, {n} keys: {:.0} bytes per key (resident set {:+.1} MiB; a breaker {breaker} bytes), built in {took:.2?}",
            after.saturating_sub(before) as f64 / n as f64,
            (after as f64 - before as f64) / (1024.0 * 1024.0),
        ),
        _ => eprintln!("registry_scale_1t: {name}, {n} keys: built in {took:.2?} (no /proc/self/statm)"),
    }
    built
}

/// A registry of `n` breakers (gobreaker's defaults), keyed `0..n`.
fn registry(n: u64) -> Registry<u64> {
    let registry = Registry::new(|_: &u64| Breaker::builder());
    for key in 0..n {
        registry.breaker(&key);
    }
    assert_eq!(registry.len() as u64, n);
    registry
}

/// `n` breakers of `S` (its closed configuration), keyed `0..n`.
fn peer_map<S: Subject>(n: u64) -> DashMap<u64, S> {
    let map = DashMap::new();
    for key in 0..n {
        map.insert(key, S::closed());
    }
    map
}

/// The bench `S::NAME/n` (`name` instead when given): a key drawn, its breaker looked up
/// in the `DashMap`, `call` made; the map built on the bench's first call, into `cell`.
fn peer_bench<S: Subject>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    n: u64,
    cell: &OnceCell<DashMap<u64, S>>,
) {
    g.bench_function(BenchmarkId::new(name, n), |b| {
        let map = cell.get_or_init(|| built(name, n, size_of::<S>(), || peer_map::<S>(n)));
        let mut x = SEED;
        b.iter(|| map.get(&next_key(&mut x, n)).map(|s| s.call()))
    });
}

/// `registry_scale_1t`: one thread, N keys (see the module doc): `lazybreaker/N`
/// (`Registry::execute`), `lazybreaker_dashmap/N`, `failsafe/N`, `recloser/N`, `breaker/N`.
pub(crate) fn registry_scale_1t(c: &mut Criterion) {
    let mut g = group(c, "registry_scale_1t");
    for n in SIZES {
        let lazy = OnceCell::new();
        g.bench_function(BenchmarkId::new(Lazy::NAME, n), |b| {
            let registry =
                lazy.get_or_init(|| built(Lazy::NAME, n, size_of::<Breaker>(), || registry(n)));
            let mut x = SEED;
            b.iter(|| registry.execute(&next_key(&mut x, n), || operation(true)))
        });
        let lazy_dashmap = OnceCell::new();
        peer_bench::<Lazy>(&mut g, "lazybreaker_dashmap", n, &lazy_dashmap);
        let failsafe = OnceCell::new();
        peer_bench::<Failsafe>(&mut g, Failsafe::NAME, n, &failsafe);
        let recloser = OnceCell::new();
        peer_bench::<Recloser>(&mut g, Recloser::NAME, n, &recloser);
        let breaker = OnceCell::new();
        peer_bench::<BreakerCrate>(&mut g, BreakerCrate::NAME, n, &breaker);
        if let Some(registry) = lazy.get() {
            assert_eq!(registry.len() as u64, n, "a lookup added a key");
        }
    }
    g.finish();
}
