//! What every group shares: the one operation, the criterion settings, and the two-thread
//! timer; the adapters of the peers (`peers`) and of the windowed ratio breakers
//! (`window_peers`).

pub(crate) mod peers;
pub(crate) mod window_peers;

use peers::Subject;

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};

/// How long an open breaker stays open in the benches: long enough that no measurement can
/// see it expire. The rejection path does not depend on the value.
pub(crate) const LONG_OPEN: Duration = Duration::from_secs(3600);

/// The operation every breaker wraps, the same for all: not inlined, so no breaker gets to
/// fold it away, and opaque to the optimiser.
#[inline(never)]
pub(crate) fn operation(ok: bool) -> Result<u64, ()> {
    if black_box(ok) {
        Ok(black_box(1))
    } else {
        Err(())
    }
}

/// The settings of the whole run, overridable from the command line (`--warm-up-time`,
/// `--measurement-time`, `--sample-size`).
pub(crate) fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

/// A group that reports time per call (`Throughput::Elements(1)`).
pub(crate) fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group
}

/// A group for contended scenarios ([`contended`]): every sample runs long enough for the
/// threads to overlap, so fewer samples of equal size (flat sampling) fit the budget.
pub(crate) fn group_2t<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = group(c, name);
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group
}

/// How many threads the contended scenarios run.
pub(crate) const THREADS: u64 = 2;

/// The fewest calls each thread makes in one contended sample: at 10 to 25 ns a call, 40 to
/// 100 ms per thread, long enough that the scheduler really runs the threads at the same
/// time (a run of microseconds lets one thread finish before the other starts, and measures
/// no contention at all).
pub(crate) const MIN_CALLS_PER_THREAD: u64 = 4_000_000;

/// Runs `call` from [`THREADS`] threads that start together, at least
/// [`MIN_CALLS_PER_THREAD`] times each (more if criterion asks for more than `THREADS` times
/// that), and returns the time from the earliest start to the latest end, as measured inside
/// the workers, scaled to `iters` calls: criterion divides it by `iters`, so the figure is
/// wall time per call of the whole contended run. The coordinating thread takes no reading,
/// so being descheduled while it spawns or joins skews nothing.
pub(crate) fn contended<R>(iters: u64, call: impl Fn() -> R + Sync) -> Duration {
    let total = iters.max(MIN_CALLS_PER_THREAD * THREADS);
    let barrier = Barrier::new(THREADS as usize);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|i| {
                let calls = total / THREADS + u64::from(i < total % THREADS);
                let (barrier, call) = (&barrier, &call);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..calls {
                        black_box(call());
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("bench worker panicked"))
            .collect()
    });
    let first_start = spans.iter().map(|s| s.0).min().expect("no worker");
    let last_end = spans.iter().map(|s| s.1).max().expect("no worker");
    let wall = last_end - first_start;
    // Per call of the whole run, times the calls criterion asked for.
    Duration::from_secs_f64(wall.as_secs_f64() * iters as f64 / total as f64)
}

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
