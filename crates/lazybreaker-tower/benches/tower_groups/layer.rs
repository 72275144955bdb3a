//! The tower groups: one call is `ready().await`, `call(request)`, and the response awaited to
//! completion, on the inner service alone (`bare`) and through each breaker layer over it.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use tower::Service;

use super::exec::{contended_calls, one_thread_calls, Driver};
use super::stacks::{self, Inner, Rejecting};
use crate::support::{group, group_2t};

/// `iters` calls of `service` in one loop on this thread, as the bench `name`.
fn one_thread<S: Service<bool>>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut service: S,
    driver: Driver,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| one_thread_calls(iters, &mut service, true, driver))
    });
}

/// Calls from two threads, each on its own clone of `service`, as the bench `name`: see
/// [`contended_calls`].
fn two_threads<S: Service<bool> + Clone + Send>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    service: &S,
    driver: Driver,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| contended_calls(iters, service, true, driver))
    });
}

/// `tower_closed_1t`: one thread, a closed breaker, the call succeeds.
pub(crate) fn closed_1t(c: &mut Criterion) {
    let mut g = group(c, "tower_closed_1t");
    one_thread(&mut g, "bare", Inner, Driver::Park);
    one_thread(&mut g, "lazybreaker", stacks::lazy(false), Driver::Park);
    one_thread(
        &mut g,
        "tower_resilience",
        stacks::resilience(false),
        Driver::Park,
    );
    g.finish();
}

/// `tower_closed_2t`: two threads, each with its own clone of the stack over one shared
/// breaker; wall time / total calls. No runtime: a closed tower-resilience circuit never
/// sleeps on tokio's timer, and a contended `tokio::sync::Mutex` wakes its waiter through the
/// waker, which unparks the thread.
pub(crate) fn closed_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "tower_closed_2t");
    two_threads(&mut g, "bare", &Inner, Driver::Park);
    two_threads(&mut g, "lazybreaker", &stacks::lazy(false), Driver::Park);
    two_threads(
        &mut g,
        "tower_resilience",
        &stacks::resilience(false),
        Driver::Park,
    );
    g.finish();
}

/// `tower_open_1t`: one thread, an open breaker rejects the call (the inner service is not
/// called); `bare` is the inner service's successful call, for scale. `lazybreaker_fallback`
/// answers the rejection with a response (`BreakerLayer::fallback`) instead of an error;
/// `lazybreaker_keyed` is the keyed layer (a registry lookup per call, a rejection that names
/// its breaker).
pub(crate) fn open_1t(c: &mut Criterion) {
    let mut g = group(c, "tower_open_1t");
    one_thread(&mut g, "bare", Inner, Driver::Park);
    let lazy = stacks::lazy(true).tripped("lazybreaker");
    one_thread(&mut g, "lazybreaker", lazy.clone(), Driver::Park);
    lazy.still_open("lazybreaker");
    let fallback = stacks::lazy_fallback(true).tripped("lazybreaker_fallback");
    one_thread(
        &mut g,
        "lazybreaker_fallback",
        fallback.clone(),
        Driver::Park,
    );
    fallback.still_open("lazybreaker_fallback");
    let keyed = stacks::keyed(true).tripped("lazybreaker_keyed");
    one_thread(&mut g, "lazybreaker_keyed", keyed.clone(), Driver::Park);
    keyed.still_open("lazybreaker_keyed");
    let resilience = stacks::resilience(true).tripped("tower_resilience");
    one_thread(&mut g, "tower_resilience", resilience.clone(), Driver::Park);
    resilience.still_open("tower_resilience");
    g.finish();
}

/// `tower_open_2t`: two threads on one open breaker, each with its own clone of the stack;
/// wall time / total calls. Every bench here runs on a current-thread tokio runtime per
/// thread: an open tower-resilience circuit `try_lock`s its mutex in `poll_ready`, and when
/// the other thread holds it, sleeps 1 ms on tokio's timer, which panics outside a runtime.
/// `lazybreaker_fallback` and `lazybreaker_keyed` as in `tower_open_1t` (the keyed layer's
/// threads share the registry and its one open key).
pub(crate) fn open_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "tower_open_2t");
    two_threads(&mut g, "bare", &Inner, Driver::Tokio);
    let lazy = stacks::lazy(true).tripped("lazybreaker");
    two_threads(&mut g, "lazybreaker", &lazy, Driver::Tokio);
    lazy.still_open("lazybreaker");
    let fallback = stacks::lazy_fallback(true).tripped("lazybreaker_fallback");
    two_threads(&mut g, "lazybreaker_fallback", &fallback, Driver::Tokio);
    fallback.still_open("lazybreaker_fallback");
    let keyed = stacks::keyed(true).tripped("lazybreaker_keyed");
    two_threads(&mut g, "lazybreaker_keyed", &keyed, Driver::Tokio);
    keyed.still_open("lazybreaker_keyed");
    let resilience = stacks::resilience(true).tripped("tower_resilience");
    two_threads(&mut g, "tower_resilience", &resilience, Driver::Tokio);
    resilience.still_open("tower_resilience");
    g.finish();
}
