//! Windowed failure-ratio breakers, closed: lazybreaker's rolling, fixed and count windows against
//! the peers' windowed configurations (all tabled in `support::window_peers`), each tripping
//! at half of the calls failing once enough are in its window.
//!
//! | group | bench | what one call is |
//! |---|---|---|
//! | `ratio_windows_success_1t` | `lazybreaker_rolling`, `lazybreaker_fixed`, `lazybreaker_count`, `failsafe`, `recloser`, `breaker` | one thread, `operation(true)` through the closed breaker |
//! | `ratio_windows_success_2t` | the same | the same from two threads on one breaker: wall time / total calls (`support::contended`) |
//! | `ratio_windows_1pct_1t` | the same | one thread, `operation(ok)` with every 100th call failing (a counter, so deterministic); the breaker must stay closed |
//!
//! In `ratio_windows_1pct_1t` each breaker first makes [`WARM_UP_CALLS`] calls of the same
//! pattern and is checked to be closed, before and after its measurement (outside the timed
//! loop): 1 % is far below every threshold, so a breaker that tripped would be a bug in the
//! configuration, and its figure one of rejections.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};

use crate::support::window_peers::{
    BreakerWindow, FailsafeWindow, LazyCount, LazyFixed, LazyFixedLatest, LazyRolling,
    LazyRollingLatest, RecloserRing, Windowed,
};
use crate::support::{contended, group, group_2t};

/// One call in this many fails in `ratio_windows_1pct_1t`.
const FAIL_EVERY: u64 = 100;

/// The calls each breaker makes, in the failure pattern, before it is checked and measured.
const WARM_UP_CALLS: u64 = 5_000;

/// `ratio_windows_success_1t`: one thread, every call succeeds.
pub(crate) fn success_1t(c: &mut Criterion) {
    let mut g = group(c, "ratio_windows_success_1t");
    success_one_thread::<LazyRolling>(&mut g);
    success_one_thread::<LazyFixed>(&mut g);
    success_one_thread::<LazyRollingLatest>(&mut g);
    success_one_thread::<LazyFixedLatest>(&mut g);
    success_one_thread::<LazyCount>(&mut g);
    success_one_thread::<FailsafeWindow>(&mut g);
    success_one_thread::<RecloserRing>(&mut g);
    success_one_thread::<BreakerWindow>(&mut g);
    g.finish();
}

/// `ratio_windows_success_2t`: two threads on one breaker, every call succeeds; wall time /
/// total calls.
pub(crate) fn success_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "ratio_windows_success_2t");
    success_two_threads::<LazyRolling>(&mut g);
    success_two_threads::<LazyFixed>(&mut g);
    success_two_threads::<LazyCount>(&mut g);
    success_two_threads::<FailsafeWindow>(&mut g);
    success_two_threads::<RecloserRing>(&mut g);
    success_two_threads::<BreakerWindow>(&mut g);
    g.finish();
}

/// `ratio_windows_1pct_1t`: one thread, every 100th call fails; the breaker never trips.
pub(crate) fn one_pct_1t(c: &mut Criterion) {
    let mut g = group(c, "ratio_windows_1pct_1t");
    one_pct_one_thread::<LazyRolling>(&mut g);
    one_pct_one_thread::<LazyFixed>(&mut g);
    one_pct_one_thread::<LazyRollingLatest>(&mut g);
    one_pct_one_thread::<LazyCount>(&mut g);
    one_pct_one_thread::<FailsafeWindow>(&mut g);
    one_pct_one_thread::<RecloserRing>(&mut g);
    one_pct_one_thread::<BreakerWindow>(&mut g);
    g.finish();
}

/// A fresh `W`'s successful call, one thread, as the bench named after the implementation.
fn success_one_thread<W: Windowed>(g: &mut BenchmarkGroup<'_, WallTime>) {
    let subject = W::new();
    g.bench_function(W::NAME, |b| b.iter(|| subject.call(true)));
}

/// A fresh `W`'s successful call from two threads at once on the one breaker, as the bench
/// named after the implementation: see [`contended`].
fn success_two_threads<W: Windowed>(g: &mut BenchmarkGroup<'_, WallTime>) {
    let subject = W::new();
    g.bench_function(W::NAME, |b| {
        b.iter_custom(|iters| contended(iters, || subject.call(true)))
    });
}

/// A fresh `W`, warmed up with [`WARM_UP_CALLS`] calls of which every [`FAIL_EVERY`]th
/// fails and checked closed, then measured on the same pattern (the counter carries on),
/// and checked closed again.
fn one_pct_one_thread<W: Windowed>(g: &mut BenchmarkGroup<'_, WallTime>) {
    let subject = W::new();
    let mut n: u64 = 0;
    let mut next = || {
        n = n.wrapping_add(1);
        !n.is_multiple_of(FAIL_EVERY)
    };
    for _ in 0..WARM_UP_CALLS {
        let _ = subject.call(next());
    }
    assert!(
        subject.is_closed(),
        "{}: tripped by 1 % failures during the warm-up",
        W::NAME
    );
    g.bench_function(W::NAME, |b| b.iter(|| subject.call(next())));
    assert!(
        subject.is_closed(),
        "{}: tripped by 1 % failures during the measurement",
        W::NAME
    );
}
