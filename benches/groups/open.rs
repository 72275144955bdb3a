//! Open breaker, call rejected: against the peers on one and two threads.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};

use crate::support::peers::{BreakerCrate, Failsafe, Lazy, LazyInstantClock, Recloser, Subject};
use crate::support::{group, group_2t, one_thread, still_open, two_threads};

/// `open_rejected_1t`: one thread calls an open breaker, which rejects the call.
pub(crate) fn rejected_1t(c: &mut Criterion) {
    let mut g = group(c, "open_rejected_1t");
    open(&mut g, one_thread::<Lazy>);
    open(&mut g, one_thread::<LazyInstantClock>);
    open(&mut g, one_thread::<Failsafe>);
    open(&mut g, one_thread::<Recloser>);
    open(&mut g, one_thread::<BreakerCrate>);
    g.finish();
}

/// `open_rejected_2t`: two threads call one open breaker; wall time / total calls.
pub(crate) fn rejected_2t(c: &mut Criterion) {
    let mut g = group_2t(c, "open_rejected_2t");
    open(&mut g, two_threads::<Lazy>);
    open(&mut g, two_threads::<LazyInstantClock>);
    open(&mut g, two_threads::<Failsafe>);
    open(&mut g, two_threads::<Recloser>);
    open(&mut g, two_threads::<BreakerCrate>);
    g.finish();
}

/// Trips a fresh `S`, measures it with `bench`, and checks it was open throughout.
fn open<S: Subject>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    bench: fn(&mut BenchmarkGroup<'_, WallTime>, &S),
) {
    let subject = S::open();
    bench(g, &subject);
    still_open(&subject);
}
