//! What every benchmark of the workspace shares: the one operation every implementation
//! wraps (`local_operation!`), the criterion settings, groups that report time per call, and the two-thread
//! timer. Not published: the benches of each crate depend on it by path.

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};

/// How long an open breaker stays open in the benches: long enough that no measurement can
/// see it expire. The rejection path does not depend on the value.
pub const LONG_OPEN: Duration = Duration::from_secs(3600);

/// Defines `operation(ok: bool) -> Result<u64, ()>`, the operation every breaker wraps, the
/// same for all: not inlined, so no breaker gets to fold it away, and opaque to the
/// optimiser. Defined in the calling bench binary rather than here, so that
/// the compiler knows of it what it knows of any function of the crate (it cannot unwind,
/// touches no memory of the caller's) and lays out the code around the call as it would
/// in the user's crate. Called through another crate, the call spills the future being
/// built around it to memory and reloads it with wider loads (a store-forwarding stall of
/// about 10 ns in the tower layer's closed call), a cost of the bench, not of the layer.
#[macro_export]
macro_rules! local_operation {
    () => {
        /// The operation every breaker wraps (`lazybreaker_bench_support::local_operation`).
        #[inline(never)]
        #[allow(dead_code, clippy::result_unit_err)]
        pub(crate) fn operation(ok: bool) -> Result<u64, ()> {
            if ::std::hint::black_box(ok) {
                Ok(::std::hint::black_box(1))
            } else {
                Err(())
            }
        }
    };
}

/// The settings of the whole run, overridable from the command line (`--warm-up-time`,
/// `--measurement-time`, `--sample-size`).
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

/// A group that reports time per call (`Throughput::Elements(1)`).
pub fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group
}

/// A group for contended scenarios ([`contended`]): every sample runs long enough for the
/// threads to overlap, so fewer samples of equal size (flat sampling) fit the budget.
pub fn group_2t<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = group(c, name);
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    group
}

/// How many threads the contended scenarios run.
pub const THREADS: u64 = 2;

/// The fewest calls each thread makes in one contended sample: at 10 to 25 ns a call, 40 to
/// 100 ms per thread, long enough that the scheduler really runs the threads at the same
/// time (a run of microseconds lets one thread finish before the other starts, and measures
/// no contention at all).
pub const MIN_CALLS_PER_THREAD: u64 = 4_000_000;

/// Runs `call` from [`THREADS`] threads that start together, at least
/// [`MIN_CALLS_PER_THREAD`] times each (more if criterion asks for more than `THREADS` times
/// that), and returns the time from the earliest start to the latest end, as measured inside
/// the workers, scaled to `iters` calls: criterion divides it by `iters`, so the figure is
/// wall time per call of the whole contended run. The coordinating thread takes no reading,
/// so being descheduled while it spawns or joins skews nothing.
pub fn contended<R>(iters: u64, call: impl Fn() -> R + Sync) -> Duration {
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
