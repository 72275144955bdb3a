//! lazybreaker's windowed failure-ratio configurations and the peers' windowed
//! configurations, behind one interface ([`Windowed`]): each trips at (about) half of the
//! calls failing, once enough calls are in its window, and each makes the same call of the
//! same [`operation`].
//!
//! | implementation | configuration | window |
//! |---|---|---|
//! | lazybreaker_rolling | `Breaker::builder().policy(FailureRatio::new(0.5, 20)).interval(10 s).bucket_period(1 s)`: ≥ 50 % failures once ≥ 20 requests are counted, the clock the builder picks | 10 s, rolling in 1 s buckets |
//! | lazybreaker_fixed | the same policy with `.interval(10 s)` and no bucket period | 10 s, fixed (cleared when it expires) |
//! | lazybreaker_rolling_latest, lazybreaker_fixed_latest | the same two with `.verdict_at_latest(true)`: a success judged at the latest time the breaker saw, one clock read a call | as above |
//! | lazybreaker_count | the same policy with `.count_window(100)` | the last 100 calls |
//! | failsafe 1.3 | `success_rate_over_time_window(0.5, 20, 10 s, equal_jittered(10 s, 300 s))`: trips when its EMA success rate is below 0.5 with ≥ 20 requests in the window, and not before 10 s since it was built; no instrument | 10 s: an EMA, and a request counter in 5 slices |
//! | recloser 1.4 | `Recloser::custom().error_rate(0.5).closed_len(100).build()`: failure rate ≥ 0.5 once the ring is full, open 30 s | a ring of the last 100 calls |
//! | breaker 2.0 | `CircuitBreakerConfig::builder().failure_rate_threshold(0.5).sliding_window_size(100).minimum_calls(20).consecutive_failures(u32::MAX)`: ≥ 50 % once ≥ 20 outcomes are in the window, the streak rule off, open 30 s, 3 half-open probes | the last 100 calls |
//!
//! The shared adapters of [`super::peers`] keep their own (consecutive-failure)
//! configurations; these are separate types so both sets can be measured in one run.

use std::task::Waker;
use std::time::Duration;

use lazybreaker::policy::FailureRatio;

use super::operation;
use super::peers::{noop_waker, poll_once};

/// The failure ratio that trips every configuration here.
const RATIO: f64 = 0.5;
/// The fewest requests in the window before the ratio counts (lazybreaker, failsafe,
/// breaker; recloser waits for its whole ring).
const MIN_REQUESTS: u32 = 20;
/// The time window (lazybreaker, failsafe).
const WINDOW: Duration = Duration::from_secs(10);
/// lazybreaker's rolling bucket.
const BUCKET: Duration = Duration::from_secs(1);
/// The count window (lazybreaker_count, recloser, breaker).
const WINDOW_CALLS: u32 = 100;

/// One windowed implementation, as the `ratio_windows_*` groups see it.
pub(crate) trait Windowed: Sync + Sized {
    /// The benchmark's name in every group.
    const NAME: &'static str;
    /// What a call returns, kept whole by the benches (`black_box`).
    type Out;

    /// The configuration of the table above, closed.
    fn new() -> Self;
    /// One call of `operation(ok)` through the breaker: the measured call.
    fn call(&self, ok: bool) -> Self::Out;
    /// Whether the breaker is closed now: for checks outside the measurement.
    fn is_closed(&self) -> bool;
}

/// `lazybreaker::Breaker` with the failure-ratio policy.
type RatioBreaker = lazybreaker::Breaker<FailureRatio>;

/// The failure-ratio policy every lazybreaker variant uses.
fn ratio_policy() -> FailureRatio {
    FailureRatio::new(RATIO, u64::from(MIN_REQUESTS)).expect("0.5 is a valid ratio")
}

/// A lazybreaker variant: the failure-ratio policy over the window `configure` sets.
fn lazy(
    configure: impl FnOnce(lazybreaker::Builder<FailureRatio>) -> lazybreaker::Builder<FailureRatio>,
) -> RatioBreaker {
    configure(lazybreaker::Breaker::builder().policy(ratio_policy())).build()
}

/// The lazybreaker variants: one type each (a bench name), the same calls.
macro_rules! lazy_windows {
    ($($(#[$doc:meta])* $name:ident = $bench:literal, |$b:ident| $configure:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $name(RatioBreaker);

        impl Windowed for $name {
            const NAME: &'static str = $bench;
            type Out = Result<u64, lazybreaker::Error<()>>;

            fn new() -> Self {
                $name(lazy(|$b| $configure))
            }

            fn call(&self, ok: bool) -> Self::Out {
                self.0.execute(|| operation(ok))
            }

            fn is_closed(&self) -> bool {
                self.0.state() == lazybreaker::State::Closed
            }
        }
    )*};
}

lazy_windows! {
    /// lazybreaker, failure ratio over a 10 s window rolling in 1 s buckets.
    LazyRolling = "lazybreaker_rolling", |b| b.interval(WINDOW).bucket_period(BUCKET);
    /// lazybreaker, failure ratio over a fixed 10 s window.
    LazyFixed = "lazybreaker_fixed", |b| b.interval(WINDOW);
    /// `lazybreaker_rolling`, its successes judged at the latest time the breaker saw (one
    /// clock read a call).
    LazyRollingLatest = "lazybreaker_rolling_latest", |b| b
        .interval(WINDOW)
        .bucket_period(BUCKET)
        .verdict_at_latest(true);
    /// `lazybreaker_fixed`, its successes judged at the latest time the breaker saw.
    LazyFixedLatest = "lazybreaker_fixed_latest", |b| b.interval(WINDOW).verdict_at_latest(true);
    /// lazybreaker, failure ratio over the last 100 calls.
    LazyCount = "lazybreaker_count", |b| b.count_window(WINDOW_CALLS);
}

/// failsafe's time-window success-rate policy, with the backoff of its default policies.
#[derive(Debug)]
pub(crate) struct FailsafeWindow(
    failsafe::StateMachine<
        failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::EqualJittered>,
        (),
    >,
);

impl Windowed for FailsafeWindow {
    const NAME: &'static str = "failsafe";
    type Out = Result<u64, failsafe::Error<()>>;

    fn new() -> Self {
        let backoff =
            failsafe::backoff::equal_jittered(Duration::from_secs(10), Duration::from_secs(300));
        let policy = failsafe::failure_policy::success_rate_over_time_window(
            1.0 - RATIO,
            MIN_REQUESTS,
            WINDOW,
            backoff,
        );
        FailsafeWindow(failsafe::Config::new().failure_policy(policy).build())
    }

    fn call(&self, ok: bool) -> Self::Out {
        failsafe::CircuitBreaker::call(&self.0, || operation(ok))
    }

    /// failsafe has no state accessor; its `Debug` prints the state's name (and takes the
    /// lock, nothing else).
    fn is_closed(&self) -> bool {
        format!("{:?}", self.0).contains("state: \"closed\"")
    }
}

/// recloser over a ring of 100 calls.
#[derive(Debug)]
pub(crate) struct RecloserRing(recloser::Recloser);

impl Windowed for RecloserRing {
    const NAME: &'static str = "recloser";
    type Out = Result<u64, recloser::Error<()>>;

    fn new() -> Self {
        RecloserRing(
            recloser::Recloser::custom()
                .error_rate(RATIO as f32)
                .closed_len(WINDOW_CALLS as usize)
                .build(),
        )
    }

    fn call(&self, ok: bool) -> Self::Out {
        self.0.call(|| operation(ok))
    }

    /// recloser has no state accessor: a successful call that is not rejected. A tripped
    /// recloser rejects for 30 s (its open wait) before it half-opens, longer than any
    /// bench here lives.
    fn is_closed(&self) -> bool {
        !matches!(self.call(true), Err(recloser::Error::Rejected))
    }
}

/// breaker over a window of 100 calls, rate rule only. Its `call` is an `async fn`, polled
/// once with a no-op waker (the operation is ready at once), as in [`super::peers`].
#[derive(Debug)]
pub(crate) struct BreakerWindow(breaker::CircuitBreaker, Waker);

impl Windowed for BreakerWindow {
    const NAME: &'static str = "breaker";
    type Out = Result<u64, breaker::CircuitBreakerError<()>>;

    fn new() -> Self {
        let config = breaker::CircuitBreakerConfig::builder()
            .failure_rate_threshold(RATIO as f32)
            .sliding_window_size(WINDOW_CALLS)
            .minimum_calls(MIN_REQUESTS)
            .consecutive_failures(u32::MAX)
            .build();
        BreakerWindow(breaker::CircuitBreaker::new(config), noop_waker())
    }

    fn call(&self, ok: bool) -> Self::Out {
        poll_once(&self.1, self.0.call(|| std::future::ready(operation(ok))))
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}
