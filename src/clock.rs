//! Time sources. The breaker never sleeps and never runs a timer: it reads a [`Clock`] when a
//! call arrives and computes every expiry from that reading.

use std::fmt;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use crate::contain::{self, FirstPanic};
use crate::nanos::{saturating_nanos, Nanos};
use crate::sync::{Arc, AtomicU64, Ordering};

/// A monotonic time source.
///
/// [`now`](Clock::now) returns the time elapsed since the clock's own origin (any fixed point
/// in the past). It must never go backwards; if it does, the breaker treats elapsed times as
/// zero rather than panicking.
///
/// The breaker reads its clock at most once per call, before it takes its lock.
///
/// # Examples
///
/// A clock that always reads the same instant, e.g. for a benchmark:
///
/// ```
/// use lazybreaker::{Breaker, Clock};
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// struct Frozen;
///
/// impl Clock for Frozen {
///     fn now(&self) -> Duration {
///         Duration::from_secs(1)
///     }
/// }
///
/// let breaker = Breaker::builder().clock(Frozen).build();
/// assert!(breaker.execute(|| Ok::<_, ()>(())).is_ok());
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time elapsed since this clock's origin.
    fn now(&self) -> Duration;
}

/// A precise clock: [`std::time::Instant`], measured from the moment the clock was created.
///
/// Nanosecond resolution, at the cost of a full `clock_gettime` per read (about 24 ns on the
/// machine the benchmarks ran on). [`PreciseClock`] measures the same time for less; this
/// one is for a clock that must be exactly the platform's `Instant`.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A precise clock read from the processor's counter (the TSC on x86-64, the system counter
/// on AArch64) through [`quanta`], scaled to nanoseconds, measured from the moment the clock
/// was created; where the processor has no reliable counter, the platform's monotonic clock.
///
/// The same resolution as [`MonotonicClock`] for about half the cost of a read (10.0 ns
/// against 24.4 ns for `Instant::now()` on the machine the benchmarks ran on): the default
/// clock for policies that measure latency, which read it twice per call. It starts no
/// thread. The first one made in a process calibrates the counter against the platform's
/// clock once, busy for about a millisecond (at most 200 ms); clones and later clocks reuse
/// that calibration.
///
/// It never goes backwards on one core; across cores it relies on the counter being
/// synchronised, as `quanta` checks it is (an invariant TSC). A reading that would go back
/// reads as no time elapsed.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Clock, PreciseClock};
///
/// let clock = PreciseClock::new();
/// let (a, b) = (clock.now(), clock.now());
/// assert!(b >= a);
/// ```
#[derive(Debug, Clone)]
pub struct PreciseClock {
    clock: quanta::Clock,
    origin: u64,
}

impl PreciseClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        Self { clock, origin }
    }

    #[inline]
    fn nanos(&self) -> Nanos {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }
}

impl Default for PreciseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for PreciseClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }
}

/// A cheap clock with a coarse resolution: the platform's coarse monotonic clock
/// (`CLOCK_MONOTONIC_COARSE` on Linux), measured from the moment the clock was created.
///
/// A read costs a few nanoseconds (2.6 ns against 18.6 ns for [`MonotonicClock`] on the
/// machine the benchmarks ran on), but the time advances in ticks of the kernel's timer
/// (1 to 4 ms on Linux; coarser elsewhere). Every duration the breaker measures on it (an open
/// period, a closed-state window) is therefore right to within one tick, either way: a 30 s
/// timeout ends between 29.996 s and 30.004 s after the trip with 4 ms ticks. The default
/// clock for policies that do not measure latency.
#[derive(Debug, Clone, Copy)]
pub struct CoarseMonotonicClock {
    /// The platform's coarse reading when the clock was made.
    origin: Nanos,
}

impl CoarseMonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: coarse::now(),
        }
    }

    #[inline]
    fn nanos(&self) -> Nanos {
        coarse::now().saturating_sub(self.origin)
    }
}

/// The platform's coarse monotonic clock, in nanoseconds from an unspecified origin.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod coarse {
    use crate::nanos::Nanos;

    /// `CLOCK_MONOTONIC_COARSE`, read through the vDSO (no system call, no libc).
    #[inline(always)]
    pub(super) fn now() -> Nanos {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        // A monotonic clock's fields are never negative: seconds since boot, and nanoseconds
        // below one second.
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }

    /// How often the coarse clock ticks (the kernel's timer: 1 to 10 ms).
    pub(super) fn tick() -> Option<std::time::Duration> {
        let t = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
        let tick = std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32);
        (!tick.is_zero()).then_some(tick)
    }
}

/// The platform's coarse monotonic clock, in nanoseconds from an unspecified origin.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod coarse {
    use crate::nanos::Nanos;

    #[inline(always)]
    pub(super) fn now() -> Nanos {
        // From the process's first reading: on some platforms coarsetime reads the time of
        // day (since 1970), a range a default breaker's or budget's packed times need not
        // cover (a retry budget's slices); Linux's reading is from boot.
        static ORIGIN: std::sync::OnceLock<coarsetime::Instant> = std::sync::OnceLock::new();
        let origin = *ORIGIN.get_or_init(coarsetime::Instant::now_without_cache_update);
        // `now_without_cache_update`: `now` would also write a process-wide cache, a store to
        // a shared cache line on every call.
        coarsetime::Instant::now_without_cache_update()
            .duration_since(origin)
            .as_nanos()
    }

    /// Unknown here: a policy that measures latency keeps the precise clock.
    pub(super) fn tick() -> Option<std::time::Duration> {
        None
    }
}

impl Default for CoarseMonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for CoarseMonotonicClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }
}

/// A clock that moves only when told to: the way to test time-based behaviour without sleeping.
///
/// It starts at zero. Clones share one time, so a test keeps a clone and advances it while the
/// breaker (or several threads) read it.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .timeout(Duration::from_secs(30))
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .clock(clock.clone())
///     .build();
///
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Open);
///
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(breaker.state(), State::Open); // expiry is strict, as in gobreaker
/// clock.advance(Duration::from_nanos(1));
/// assert_eq!(breaker.state(), State::HalfOpen);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock that reads zero.
    pub fn new() -> Self {
        Self {
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves the time forward by `by` (saturating at `u64::MAX` nanoseconds, about 584 years).
    pub fn advance(&self, by: Duration) {
        let by = saturating_nanos(by);
        let mut current = self.nanos.load(Ordering::Acquire);
        loop {
            let next = current.saturating_add(by);
            match self.nanos.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The current reading.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &ManualClock::now(self))
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Duration {
        ManualClock::now(self)
    }
}

impl<C: Clock + ?Sized> Clock for StdArc<C> {
    #[inline]
    fn now(&self) -> Duration {
        (**self).now()
    }
}

/// The breaker's clock: the default coarse clock without indirection, or any other clock
/// behind one shared pointer. One word: the coarse clock reads the platform's coarse
/// reading as it is (its origin is the platform's: boot on Linux), so it carries no origin of
/// its own, and every other clock is shared by the breakers it was cloned into.
#[derive(Clone)]
pub(crate) enum ClockSource {
    /// The platform's coarse monotonic clock from the platform's origin: the default.
    Coarse,
    /// Any other clock, built in or the user's.
    Other(StdArc<OtherClock>),
}

/// A clock given to a builder, or the precise default of a policy that measures latency.
#[derive(Debug)]
pub(crate) enum OtherClock {
    Monotonic(MonotonicClock),
    Precise(PreciseClock),
    Coarse(CoarseMonotonicClock),
    /// A [`ManualClock`] given to the builder: read directly, and known not to panic.
    Manual(ManualClock),
    Custom(Box<dyn Clock>),
}

impl fmt::Debug for ClockSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // What it reads, named as a user knows it.
            ClockSource::Coarse => f.write_str("Coarse(CoarseMonotonicClock)"),
            ClockSource::Other(clock) => fmt::Debug::fmt(&**clock, f),
        }
    }
}

impl ClockSource {
    /// The source for a clock given to a builder: a built-in clock (the manual one
    /// included) is recognised and read without a virtual call, and known never to panic;
    /// any other is a user clock.
    pub(crate) fn of<C: Clock + 'static>(clock: C) -> Self {
        let any = &clock as &dyn std::any::Any;
        let other = if let Some(clock) = any.downcast_ref::<ManualClock>() {
            OtherClock::Manual(clock.clone())
        } else if let Some(clock) = any.downcast_ref::<CoarseMonotonicClock>() {
            OtherClock::Coarse(*clock)
        } else if let Some(clock) = any.downcast_ref::<MonotonicClock>() {
            OtherClock::Monotonic(*clock)
        } else if let Some(clock) = any.downcast_ref::<PreciseClock>() {
            OtherClock::Precise(clock.clone())
        } else {
            OtherClock::Custom(Box::new(clock))
        };
        ClockSource::Other(StdArc::new(other))
    }

    /// The clock a breaker gets when it is given none: the coarse one, unless the policy
    /// measures latencies finer than the coarse clock ticks (see
    /// [`Capabilities::latency_resolution`](crate::policy::Capabilities::latency_resolution)).
    pub(crate) fn default_for(needs_latency: bool, latency_resolution: Duration) -> Self {
        let coarse_enough = coarse::tick().is_some_and(|tick| tick <= latency_resolution);
        if needs_latency && !coarse_enough {
            ClockSource::Other(StdArc::new(OtherClock::Precise(PreciseClock::new())))
        } else {
            ClockSource::Coarse
        }
    }

    /// The current time in nanoseconds since the clock's origin. A user clock that panics
    /// panics here: call this only where nothing needs finishing (before an admission).
    /// (Always inlined: out of line, it cost an open rejection a quarter more.)
    #[inline(always)]
    pub(crate) fn now(&self) -> Nanos {
        match self {
            ClockSource::Coarse => coarse::now(),
            ClockSource::Other(clock) => match &**clock {
                OtherClock::Coarse(clock) => clock.nanos(),
                OtherClock::Monotonic(clock) => saturating_nanos(clock.now()),
                OtherClock::Precise(clock) => clock.nanos(),
                OtherClock::Manual(clock) => saturating_nanos(clock.now()),
                OtherClock::Custom(clock) => saturating_nanos(clock.now()),
            },
        }
    }

    /// The current time if reading it cannot panic (a built-in clock); `None` for a user
    /// clock, which only [`try_now`](Self::try_now) may read where a step must finish.
    #[inline(always)]
    pub(crate) fn now_infallible(&self) -> Option<Nanos> {
        match self {
            ClockSource::Other(clock) if matches!(**clock, OtherClock::Custom(_)) => None,
            _ => Some(self.now()),
        }
    }

    /// The current time, or `None` if a user clock panicked (the panic is kept in `panics`):
    /// for a step that must finish whatever the clock does (a permit's report).
    #[inline]
    pub(crate) fn try_now(&self, panics: &mut FirstPanic) -> Option<Nanos> {
        match self {
            ClockSource::Other(clock) => match &**clock {
                OtherClock::Custom(clock) => match contain::catch(|| clock.now()) {
                    Ok(now) => Some(saturating_nanos(now)),
                    Err(payload) => {
                        panics.keep(payload);
                        None
                    }
                },
                _ => Some(self.now()),
            },
            ClockSource::Coarse => Some(coarse::now()),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_starts_at_its_origin_and_never_goes_back() {
        let precise = MonotonicClock::new();
        let coarse = CoarseMonotonicClock::new();
        let mut last = coarse.now();
        // One tick of the kernel's timer at most (4 ms at HZ = 250, 10 ms at HZ = 100).
        assert!(
            last <= Duration::from_millis(10),
            "{last:?} right after its origin"
        );
        for _ in 0..10_000 {
            let now = coarse.now();
            assert!(now >= last, "{now:?} after {last:?}");
            last = now;
        }
        // Within a tick of a precise clock made before it.
        let elapsed = precise.now();
        assert!(
            last <= elapsed + Duration::from_millis(10),
            "{last:?} against {elapsed:?}"
        );
    }

    #[test]
    fn a_breakers_clock_is_one_word_and_reads_what_it_was_given() {
        assert_eq!(std::mem::size_of::<ClockSource>(), 8);
        let manual = ManualClock::new();
        manual.advance(Duration::from_nanos(7));
        let source = ClockSource::of(manual.clone());
        assert_eq!(source.now(), 7);
        assert_eq!(source.now_infallible(), Some(7));
        // The default coarse clock reads the platform's coarse clock as it is: within a
        // tick (10 ms at most) of a coarse clock made before it, plus its origin.
        let given = CoarseMonotonicClock::new();
        let origin = coarse::now();
        let read = ClockSource::Coarse.now();
        assert!(read >= origin, "{read} before {origin}");
        let elapsed = saturating_nanos(given.now());
        assert!(
            read - origin <= elapsed + 10_000_000,
            "{read} {origin} {elapsed}"
        );
        #[derive(Debug)]
        struct Frozen;
        impl Clock for Frozen {
            fn now(&self) -> Duration {
                Duration::from_secs(3)
            }
        }
        let custom = ClockSource::of(Frozen);
        assert_eq!(custom.now_infallible(), None);
        assert_eq!(
            custom.try_now(&mut FirstPanic::default()),
            Some(3_000_000_000)
        );
    }

    #[test]
    fn latencies_get_the_coarse_clock_only_where_its_tick_is_fine_enough() {
        let is_coarse = |c: ClockSource| matches!(c, ClockSource::Coarse);
        assert!(is_coarse(ClockSource::default_for(false, Duration::ZERO)));
        assert!(!is_coarse(ClockSource::default_for(true, Duration::ZERO)));
        assert!(!is_coarse(ClockSource::default_for(
            true,
            Duration::from_nanos(1)
        )));
        // The kernel's timer ticks every 1 to 10 ms: a tenth of a second is fine enough.
        let tick = coarse::tick();
        assert_eq!(
            is_coarse(ClockSource::default_for(true, Duration::from_millis(100))),
            tick.is_some(),
            "tick {tick:?}"
        );
        if let Some(tick) = tick {
            assert!(tick <= Duration::from_millis(10), "{tick:?}");
            assert!(!is_coarse(ClockSource::default_for(
                true,
                tick - Duration::from_nanos(1)
            )));
            assert!(is_coarse(ClockSource::default_for(true, tick)));
        }
    }
}
