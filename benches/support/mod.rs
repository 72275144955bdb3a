//! What the root's groups share: the workspace's bench support (the one operation, the
//! criterion settings, the two-thread timer), and the adapters of the peers (`peers`) and
//! of the windowed ratio breakers (`window_peers`).

pub(crate) mod peers;
pub(crate) mod sre_peer;
pub(crate) mod window_peers;

use peers::Subject;

use criterion::measurement::WallTime;
use criterion::BenchmarkGroup;

#[allow(unused_imports)] // each bench binary uses its own part
pub(crate) use lazybreaker_bench_support::{
    contended, criterion, group, group_2t, LONG_OPEN, MIN_CALLS_PER_THREAD, THREADS,
};

lazybreaker_bench_support::local_operation!();

/// `subject`'s call, one thread, as the bench named after the implementation.
pub(crate) fn one_thread<S: Subject>(group: &mut BenchmarkGroup<'_, WallTime>, subject: &S) {
    group.bench_function(S::NAME, |b| b.iter(|| subject.call()));
}

/// `subject`'s call from [`THREADS`] threads at once on the one breaker, as the bench named
/// after the implementation: see [`contended`].
pub(crate) fn two_threads<S: Subject>(group: &mut BenchmarkGroup<'_, WallTime>, subject: &S) {
    group.bench_function(S::NAME, |b| {
        b.iter_custom(|iters| contended(iters, || subject.call()))
    });
}

/// Checks that an open breaker still rejects after its measurement: an open breaker that
/// had recovered midway would have measured successes instead.
pub(crate) fn still_open<S: Subject>(subject: &S) {
    assert!(
        subject.rejects(),
        "{}: the breaker left the open state during the measurement",
        S::NAME
    );
}
