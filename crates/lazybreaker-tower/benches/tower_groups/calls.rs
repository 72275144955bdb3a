//! lazybreaker's async call against failsafe's futures API, with the sync `execute` as the
//! reference; and the owned permit against the borrowed one.

use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
use lazybreaker::Breaker;

use super::exec::{block_on, thread_waker};
use crate::support::{contended, group, group_2t, operation, LONG_OPEN};

type FailsafeBreaker = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
    (),
>;

/// failsafe as `support::peers::Failsafe` configures it: its default consecutive-failures
/// policy (5 to trip, equal-jittered backoff 10 s..300 s), or that policy's type with the
/// backoff pinned near [`LONG_OPEN`].
fn failsafe_breaker(long_open: bool) -> FailsafeBreaker {
    let policy = if long_open {
        let backoff = failsafe::backoff::equal_jittered(LONG_OPEN, LONG_OPEN);
        failsafe::failure_policy::consecutive_failures(5, backoff)
    } else {
        failsafe::failure_policy::ConsecutiveFailures::default()
    };
    failsafe::Config::new().failure_policy(policy).build()
}

/// Failed calls that trip a fresh failsafe breaker.
const FAILSAFE_FAILURES_TO_TRIP: usize = 5;

/// Failed calls that trip a fresh lazybreaker with gobreaker's defaults.
const LAZY_FAILURES_TO_TRIP: usize = 6;

/// `async_closed_1t`: a closed breaker, the async operation (`async { operation(true) }`,
/// ready at once) polled to completion by a `block_on` that parks on `Pending`.
/// `lazybreaker`: `Breaker::execute_async`; `failsafe`: `failsafe::futures::CircuitBreaker::call`;
/// `lazybreaker_execute`: the sync `Breaker::execute` of `operation(true)`, the reference.
pub(crate) fn closed_1t(c: &mut Criterion) {
    let mut g = group(c, "async_closed_1t");
    let waker = thread_waker();
    let lazy = Breaker::builder().build();
    g.bench_function("lazybreaker", |b| {
        b.iter(|| block_on(&waker, lazy.execute_async(|| async { operation(true) })))
    });
    let failsafe = failsafe_breaker(false);
    g.bench_function("failsafe", |b| {
        b.iter(|| {
            block_on(
                &waker,
                failsafe::futures::CircuitBreaker::call(&failsafe, async { operation(true) }),
            )
        })
    });
    g.bench_function("lazybreaker_execute", |b| {
        b.iter(|| lazy.execute(|| operation(true)))
    });
    g.finish();
}

/// `async_open_1t`: the same calls on an open breaker, which rejects them (the operation's
/// future is never polled; failsafe's is built, since its `call` takes the future itself).
/// Each breaker is checked to reject before and after its measurement.
pub(crate) fn open_1t(c: &mut Criterion) {
    let mut g = group(c, "async_open_1t");
    let waker = thread_waker();

    let lazy = Breaker::builder().timeout(LONG_OPEN).build();
    for _ in 0..LAZY_FAILURES_TO_TRIP {
        let _ = lazy.execute(|| operation(false));
    }
    let lazy_rejects = || {
        block_on(&waker, lazy.execute_async(|| async { operation(true) }))
            .err()
            .is_some_and(|e| e.is_rejected())
    };
    assert!(lazy_rejects(), "lazybreaker: not open after failures");
    g.bench_function("lazybreaker", |b| {
        b.iter(|| block_on(&waker, lazy.execute_async(|| async { operation(true) })))
    });
    g.bench_function("lazybreaker_execute", |b| {
        b.iter(|| lazy.execute(|| operation(true)))
    });
    assert!(lazy_rejects(), "lazybreaker: left the open state");

    let failsafe = failsafe_breaker(true);
    let failsafe_call = |ok: bool| {
        block_on(
            &waker,
            failsafe::futures::CircuitBreaker::call(&failsafe, async move { operation(ok) }),
        )
    };
    for _ in 0..FAILSAFE_FAILURES_TO_TRIP {
        let _ = failsafe_call(false);
    }
    let failsafe_rejects = || matches!(failsafe_call(true), Err(failsafe::Error::Rejected));
    assert!(failsafe_rejects(), "failsafe: not open after failures");
    g.bench_function("failsafe", |b| {
        b.iter(|| {
            block_on(
                &waker,
                failsafe::futures::CircuitBreaker::call(&failsafe, async { operation(true) }),
            )
        })
    });
    assert!(failsafe_rejects(), "failsafe: left the open state");
    g.finish();
}

/// `owned_1t`: lazybreaker only, one closed breaker in an `Arc`, the same successful call
/// three ways: `allow()` + `Permit::success` on `&Breaker`, `allow_owned()` +
/// `OwnedPermit::success` on the `Arc<Breaker>`, and `execute`, the reference; and
/// `arc_clone_drop`, one clone and drop of that `Arc`, the least an owned permit adds.
pub(crate) fn owned_1t(c: &mut Criterion) {
    let mut g = group(c, "owned_1t");
    let shared = Arc::new(Breaker::builder().build());
    let borrowed: &Breaker = &shared;
    g.bench_function("allow", |b| {
        b.iter(|| {
            let permit = borrowed.allow()?;
            let result = operation(true);
            permit.success();
            Ok::<_, lazybreaker::Rejected>(result)
        })
    });
    g.bench_function("allow_owned", |b| {
        b.iter(|| {
            let permit = shared.allow_owned()?;
            let result = operation(true);
            permit.success();
            Ok::<_, lazybreaker::Rejected>(result)
        })
    });
    g.bench_function("execute", |b| {
        b.iter(|| borrowed.execute(|| operation(true)))
    });
    // What an owned permit adds at least: the `Arc` it clones and drops.
    g.bench_function("arc_clone_drop", |b| {
        b.iter(|| drop(black_box(Arc::clone(black_box(&shared)))))
    });
    g.finish();
}

/// `owned_2t`: the calls of `owned_1t` from two threads on the one breaker; wall time / total
/// calls (`support::contended`). `allow_owned` and `arc_clone_drop` write the `Arc`'s
/// reference count, one cache line both threads share, where `allow` writes only the calling
/// thread's stripe of the breaker.
pub(crate) fn owned_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "owned_2t");
    let shared = Arc::new(Breaker::builder().build());
    let borrowed: &Breaker = &shared;
    g.bench_function("allow", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                let permit = borrowed.allow()?;
                let result = operation(true);
                permit.success();
                Ok::<_, lazybreaker::Rejected>(result)
            })
        })
    });
    g.bench_function("allow_owned", |b| {
        b.iter_custom(|iters| {
            contended(iters, || {
                let permit = shared.allow_owned()?;
                let result = operation(true);
                permit.success();
                Ok::<_, lazybreaker::Rejected>(result)
            })
        })
    });
    g.bench_function("execute", |b| {
        b.iter_custom(|iters| contended(iters, || borrowed.execute(|| operation(true))))
    });
    g.bench_function("arc_clone_drop", |b| {
        b.iter_custom(|iters| contended(iters, || drop(black_box(Arc::clone(black_box(&shared))))))
    });
    g.finish();
}
