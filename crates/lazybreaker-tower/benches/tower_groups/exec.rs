//! Driving futures without a runtime: a `block_on` that parks the thread on `Pending` (its
//! waker unparks it), the loop of tower calls every tower bench times, and the two-thread
//! timer for services cloned per thread.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use tower::{Service, ServiceExt};

use crate::support::{MIN_CALLS_PER_THREAD, THREADS};

/// Wakes the thread it was made on.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread: made once per thread, outside any measurement.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(thread::current())))
}

/// Polls `future` to completion on this thread, parking it while the future is pending
/// (`waker` must be [`thread_waker`] of this thread). A future that is ready at once costs
/// one poll; a spurious unpark only costs a poll more.
#[inline]
pub(crate) fn block_on<F: Future>(waker: &Waker, future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

/// One tower call as a stack makes it: wait until `service` is ready, call it with `ok`
/// (whether the inner operation succeeds), await the response.
#[inline]
pub(crate) async fn call<S: Service<bool>>(
    service: &mut S,
    ok: bool,
) -> Result<S::Response, S::Error> {
    service.ready().await?.call(ok).await
}

/// `calls` tower calls in a row, each result kept whole (`black_box`).
pub(crate) async fn calls<S: Service<bool>>(service: &mut S, ok: bool, calls: u64) {
    for _ in 0..calls {
        let _ = black_box(call(service, ok).await);
    }
}

/// What drives each thread's loop of calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Driver {
    /// [`block_on`] with [`thread_waker`]: no runtime.
    Park,
    /// A current-thread tokio runtime with its timer, one per thread, built before the clock
    /// starts: for a service that may sleep on tokio's timer (tower-resilience, when its
    /// `try_lock` in `poll_ready` fails on a non-closed circuit).
    Tokio,
}

impl Driver {
    /// The driver, made on (and for) the calling thread.
    fn prepare(self) -> Prepared {
        match self {
            Driver::Park => Prepared::Park(thread_waker()),
            Driver::Tokio => Prepared::Tokio(
                tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("a current-thread tokio runtime"),
            ),
        }
    }
}

/// A [`Driver`] made ready on its thread.
enum Prepared {
    Park(Waker),
    Tokio(tokio::runtime::Runtime),
}

impl Prepared {
    /// Runs `future` to completion on this thread.
    fn run<F: Future>(&self, future: F) -> F::Output {
        match self {
            Prepared::Park(waker) => block_on(waker, future),
            Prepared::Tokio(rt) => rt.block_on(future),
        }
    }
}

/// One thread, `iters` calls of `service` in one loop driven by `driver`: the time they take.
pub(crate) fn one_thread_calls<S: Service<bool>>(
    iters: u64,
    service: &mut S,
    ok: bool,
    driver: Driver,
) -> Duration {
    let prepared = driver.prepare();
    let start = Instant::now();
    prepared.run(calls(service, ok, iters));
    start.elapsed()
}

/// Like `support::contended`, for tower services: each of [`THREADS`] threads gets its own
/// clone of `service` (as a stack's clones run on a runtime's workers; what they share, such
/// as the breaker, they share through it) and its own [`Driver`], made before the clock starts;
/// then the threads start together and each makes its share of at least
/// [`MIN_CALLS_PER_THREAD`] calls. The result is the time from the earliest start to the
/// latest end, as measured inside the workers, scaled to `iters` calls: wall time per call of
/// the whole contended run.
pub(crate) fn contended_calls<S>(iters: u64, service: &S, ok: bool, driver: Driver) -> Duration
where
    S: Service<bool> + Clone + Send,
{
    let total = iters.max(MIN_CALLS_PER_THREAD * THREADS);
    let barrier = Barrier::new(THREADS as usize);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|i| {
                let n = total / THREADS + u64::from(i < total % THREADS);
                let mut service = service.clone();
                let barrier = &barrier;
                s.spawn(move || {
                    let prepared = driver.prepare();
                    barrier.wait();
                    let start = Instant::now();
                    prepared.run(calls(&mut service, ok, n));
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
    Duration::from_secs_f64(wall.as_secs_f64() * iters as f64 / total as f64)
}
