//! brpc's EMA dual-window circuit breaker, as a standalone sans-IO recorder.
//!
//! This is a re-implementation of `brpc::CircuitBreaker` (apache/brpc,
//! `src/brpc/circuit_breaker.cpp`), checked bit for bit against vectors recorded from brpc's
//! own code (`tests/data/brpc/`). It never reads a clock: every method that needs the time
//! takes it as `now`.

use std::sync::Arc;
use std::time::Duration;

use super::window::{whole_micros, CallKnobs, EmaWindowState, Window, Windows};
use crate::error::{ConfigError, Number};
use crate::policy::Outcome;

/// The ten knobs of brpc's circuit breaker, with brpc's defaults.
///
/// Each field is one of brpc's `circuit_breaker_*` gflags. brpc counts latencies in whole
/// microseconds and isolation in whole milliseconds: [`EmaRecorder`] truncates the
/// `Duration`s here (and the latencies and times it is given) to those units, exactly as brpc
/// sees them.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::EmaConfig;
/// use std::time::Duration;
///
/// let config = EmaConfig {
///     short_window_size: 100,
///     long_window_size: 400,
///     max_isolation: Duration::from_secs(10),
///     ..EmaConfig::default()
/// };
/// config.validate()?;
///
/// let bad = EmaConfig { epsilon: 1.0, ..config };
/// assert_eq!(bad.validate().unwrap_err().field(), "epsilon");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
// With `serde`, `Deserialize` is implemented beside the configuration's (`src/config/de.rs`),
// which names every invalid field by its path.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EmaConfig {
    /// Sample count of the short window (`circuit_breaker_short_window_size`, default 1500).
    /// Must be at least 1.
    pub short_window_size: u32,
    /// Error percent the short window tolerates, 0 to 99
    /// (`circuit_breaker_short_window_error_percent`, default 10).
    pub short_window_error_percent: u32,
    /// Sample count of the long window (`circuit_breaker_long_window_size`, default 3000).
    /// Must be at least 1.
    pub long_window_size: u32,
    /// Error percent the long window tolerates, 0 to 99
    /// (`circuit_breaker_long_window_error_percent`, default 5).
    pub long_window_error_percent: u32,
    /// An accumulated error cost below this is forgiven at the next decay
    /// (`circuit_breaker_min_error_cost_us`, default 500 µs). Whole microseconds count: zero
    /// (nothing forgiven) or at least 1 µs.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub min_error_cost: Duration,
    /// A failure costs at most this many times the average success latency
    /// (`circuit_breaker_max_failed_latency_mutiple`, default 2).
    ///
    /// An integer, as in brpc (an `int32` flag): the cap is the exact integer product
    /// `ema_latency × multiple`. 0 makes every failure free once a success was seen.
    pub max_failed_latency_multiple: u32,
    /// The first isolation duration, and the one used again after a long healthy spell
    /// (`circuit_breaker_min_isolation_duration_ms`, default 100 ms). Whole milliseconds
    /// count: at least 1 ms.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub min_isolation: Duration,
    /// The cap on the doubling isolation duration, and how long a revived recorder must stay
    /// healthy to start again from `min_isolation`
    /// (`circuit_breaker_max_isolation_duration_ms`, default 30 s). Whole milliseconds count:
    /// at least `min_isolation`.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub max_isolation: Duration,
    /// Weight left to a sample after a window's worth of newer samples, strictly between 0 and
    /// 1 (`circuit_breaker_epsilon_value`, default 0.02). It also widens the error budget by
    /// `1 + epsilon`.
    pub epsilon: f64,
    /// Successes needed after a [`reset`](EmaRecorder::reset) before a failure is judged by the
    /// windows again; until then any failure breaks the recorder
    /// (`circuit_breaker_half_open_window_size`, default 0: no probation).
    pub half_open_window_size: u32,
}

impl Default for EmaConfig {
    /// brpc's defaults: windows 1500 at 10% and 3000 at 5%, 500 µs, ×2, 100 ms to 30 s,
    /// epsilon 0.02, no half-open probation.
    fn default() -> Self {
        Self {
            short_window_size: 1500,
            short_window_error_percent: 10,
            long_window_size: 3000,
            long_window_error_percent: 5,
            min_error_cost: Duration::from_micros(500),
            max_failed_latency_multiple: 2,
            min_isolation: Duration::from_millis(100),
            max_isolation: Duration::from_secs(30),
            epsilon: 0.02,
            half_open_window_size: 0,
        }
    }
}

impl EmaConfig {
    /// Checks every field, in declaration order, and reports the first invalid one.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the field: `short_window_size` or `long_window_size` when 0,
    /// `short_window_error_percent` or `long_window_error_percent` above 99, `min_error_cost`
    /// when it is above zero but below 1 µs (it would count as zero), `min_isolation` or
    /// `max_isolation` when below 1 ms (brpc isolates for whole milliseconds: the breaker
    /// would open for no time at all), `min_isolation` when it exceeds `max_isolation`,
    /// `epsilon` when it is NaN or outside `(0, 1)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::EmaConfig;
    ///
    /// let err = EmaConfig { long_window_error_percent: 100, ..EmaConfig::default() }
    ///     .validate()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "long_window_error_percent");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_window("short_window_size", self.short_window_size)?;
        check_percent(
            "short_window_error_percent",
            self.short_window_error_percent,
        )?;
        check_window("long_window_size", self.long_window_size)?;
        check_percent("long_window_error_percent", self.long_window_error_percent)?;
        // Whole microseconds count: a cost below one would silently be zero (no forgiveness),
        // which brpc expresses as 0.
        if !self.min_error_cost.is_zero() && self.min_error_cost < Duration::from_micros(1) {
            return Err(ConfigError::new(
                "min_error_cost",
                format_args!("{:?}", self.min_error_cost),
                "must be zero or at least 1us (whole microseconds count)",
            ));
        }
        // Whole milliseconds count: an isolation below one would open for no time at all.
        check_isolation("min_isolation", self.min_isolation)?;
        check_isolation("max_isolation", self.max_isolation)?;
        if self.min_isolation > self.max_isolation {
            return Err(ConfigError::new(
                "min_isolation",
                format_args!("{:?}", self.min_isolation),
                "must not exceed `max_isolation`",
            ));
        }
        if !(self.epsilon > 0.0 && self.epsilon < 1.0) {
            return Err(ConfigError::new(
                "epsilon",
                Number(self.epsilon),
                "must be strictly between 0 and 1",
            ));
        }
        Ok(())
    }

    /// The short window's smoothing factor, `epsilon.powf(1.0 / short_window_size)`: brpc's
    /// `pow(eps, 1.0/window_size)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::EmaConfig;
    ///
    /// let config = EmaConfig { short_window_size: 2, epsilon: 0.25, ..EmaConfig::default() };
    /// assert_eq!(config.short_smooth(), 0.5);
    /// ```
    pub fn short_smooth(&self) -> f64 {
        smooth(self.epsilon, self.short_window_size)
    }

    /// The long window's smoothing factor, `epsilon.powf(1.0 / long_window_size)`.
    pub fn long_smooth(&self) -> f64 {
        smooth(self.epsilon, self.long_window_size)
    }
}

fn check_window(field: &'static str, size: u32) -> Result<(), ConfigError> {
    if size == 0 {
        return Err(ConfigError::new(field, size, "must be at least 1"));
    }
    Ok(())
}

fn check_isolation(field: &'static str, isolation: Duration) -> Result<(), ConfigError> {
    if isolation < Duration::from_millis(1) {
        return Err(ConfigError::new(
            field,
            format_args!("{isolation:?}"),
            "must be at least 1ms (whole milliseconds count)",
        ));
    }
    Ok(())
}

fn check_percent(field: &'static str, percent: u32) -> Result<(), ConfigError> {
    if percent > 99 {
        return Err(ConfigError::new(field, percent, "must be within [0, 99]"));
    }
    Ok(())
}

/// brpc: `std::pow(EPSILON, 1.0/window_size)`, the reciprocal rounded to f64 first.
fn smooth(epsilon: f64, window_size: u32) -> f64 {
    epsilon.powf(1.0 / f64::from(window_size))
}

/// Whole milliseconds, as brpc's `cpuwide_time_ms()` and isolation flags; saturates.
fn whole_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// brpc's circuit breaker (`brpc::CircuitBreaker`) as a sans-IO recorder: two EMA windows
/// judge every result, and the recorder breaks when either says the dependency is unhealthy.
///
/// It holds no timer and reads no clock: the caller passes the time (`now`, on any fixed
/// origin, like [`Clock::now`](crate::Clock::now)) to every method that needs it, and decides
/// itself what "broken" means for its traffic (brpc isolates the server for
/// [`isolation_duration`](Self::isolation_duration), then calls [`reset`](Self::reset)).
///
/// # The algorithm
///
/// - **Two windows**, long and short, each an exponential moving average over about
///   `window_size` samples (a sample's weight falls to `epsilon` after that many newer ones).
///   Each tracks `ema_latency`, the average latency of successes, and `ema_error_cost`, a
///   decaying sum of failure latencies, each capped at `ema_latency ×
///   max_failed_latency_multiple`. A window is unhealthy when its error cost exceeds
///   `ema_latency × window_size × percent% × (1 + epsilon)`.
/// - **Initial stage:** during its first `window_size` samples a window counts instead:
///   error number `window_size × percent / 100 + 1` is unhealthy, whatever its latency.
/// - The long window is asked first; the short one only if the long one says healthy.
/// - **Breaking** doubles the isolation duration (up to `max_isolation`) when the previous
///   [`reset`](Self::reset) was less than `max_isolation` ago, and goes back to
///   `min_isolation` otherwise. The recorder starts as if reset at time zero.
/// - A broken recorder answers `false` to every call until [`reset`](Self::reset).
/// - **Half-open:** with `half_open_window_size > 0`, after each reset any failure breaks the
///   recorder again (without feeding the windows) until that many successes were seen.
/// - [`Outcome::Excluded`] is brpc's `ELIMIT`: ignored entirely, even while broken.
///
/// Arithmetic is brpc's, bit for bit: `i64` microseconds, `f64` products truncated toward
/// zero, `powf` smoothing factors. Where brpc would overflow, this saturates instead; no input
/// panics.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{EmaConfig, EmaRecorder, Outcome};
/// use std::time::Duration;
///
/// let mut rec = EmaRecorder::new(EmaConfig {
///     short_window_size: 10,
///     short_window_error_percent: 20, // initial stage: 2 errors pass
///     long_window_size: 20,
///     long_window_error_percent: 10, // initial stage: 2 errors pass
///     ..EmaConfig::default()
/// })?;
/// let mut now = Duration::from_secs(3600);
/// let latency = Duration::from_millis(3);
///
/// assert!(rec.on_call_end(Outcome::Success, latency, now));
/// assert!(rec.on_call_end(Outcome::Failure, latency, now));
/// assert!(rec.on_call_end(Outcome::Excluded, latency, now)); // brpc's ELIMIT: ignored
/// assert!(rec.on_call_end(Outcome::Failure, latency, now));
/// assert!(!rec.on_call_end(Outcome::Failure, latency, now)); // the third error breaks it
/// assert!(rec.is_broken());
/// assert_eq!(rec.isolated_times(), 1);
/// assert_eq!(rec.isolation_duration(), Duration::from_millis(100));
///
/// // Isolate, then revive, as brpc's health check does.
/// now += rec.isolation_duration();
/// rec.reset(now);
/// assert!(rec.on_call_end(Outcome::Success, latency, now));
///
/// // Broken again soon after the revival: isolated twice as long.
/// rec.mark_as_broken(now + Duration::from_secs(1));
/// assert_eq!(rec.isolation_duration(), Duration::from_millis(200));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct EmaRecorder {
    config: EmaConfig,
    min_isolation_ms: u64,
    max_isolation_ms: u64,
    /// The two windows, in atomics: shared with the breaker's lock-free lane, which records
    /// closed-state successes there (see [`Ema`](super::Ema)).
    windows: Arc<Windows>,
    broken: bool,
    /// brpc's `_half_open` flag: set by `reset`, left set by a break.
    half_open: bool,
    half_open_successes: u32,
    isolation_ms: u64,
    isolated_times: u64,
    /// When the recorder was last reset; `None`: never, which counts as long ago.
    last_reset_ms: Option<u64>,
}

impl EmaRecorder {
    /// A fresh recorder, as brpc constructs one: healthy, both windows in their initial
    /// stage, isolation duration `min_isolation`, last reset at time zero.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`EmaConfig::validate`].
    pub fn new(config: EmaConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let min_isolation_ms = whole_millis(config.min_isolation);
        Ok(Self {
            min_isolation_ms,
            max_isolation_ms: whole_millis(config.max_isolation),
            windows: Arc::new(Windows {
                knobs: CallKnobs {
                    min_error_cost_us: whole_micros(config.min_error_cost),
                    max_failed_latency_multiple: i64::from(config.max_failed_latency_multiple),
                    epsilon: config.epsilon,
                },
                long: Window::new(
                    config.long_window_size,
                    config.long_window_error_percent,
                    smooth(config.epsilon, config.long_window_size),
                ),
                short: Window::new(
                    config.short_window_size,
                    config.short_window_error_percent,
                    smooth(config.epsilon, config.short_window_size),
                ),
            }),
            broken: false,
            half_open: false,
            half_open_successes: 0,
            isolation_ms: min_isolation_ms,
            isolated_times: 0,
            // brpc's recorder starts as if reset at time zero.
            last_reset_ms: Some(0),
            config,
        })
    }

    /// Forgets the reset at time zero that brpc's recorder starts with, so that its first
    /// break isolates for `min_isolation` however soon it comes. brpc's own clock is
    /// `CLOCK_MONOTONIC`, which is far from zero in production, so this is what brpc does
    /// there; a breaker whose clock starts near zero needs it to behave the same.
    pub(crate) fn forget_initial_reset(&mut self) {
        self.last_reset_ms = None;
    }

    /// The windows, shared with whoever records successes without the breaker's lock.
    pub(super) fn windows(&self) -> &Arc<Windows> {
        &self.windows
    }

    /// The configuration this recorder was built with.
    pub fn config(&self) -> &EmaConfig {
        &self.config
    }

    /// Records one result (brpc's `OnCallEnd`) and returns whether the dependency still looks
    /// healthy.
    ///
    /// `latency` counts in whole microseconds. `now` is read only if this result breaks the
    /// recorder (see [`mark_as_broken`](Self::mark_as_broken)).
    ///
    /// - [`Outcome::Excluded`] (brpc's `ELIMIT`) returns `true` and changes nothing, even
    ///   while broken.
    /// - While broken, returns `false` and changes nothing.
    /// - On half-open probation, a failure breaks the recorder without reaching the windows.
    /// - Otherwise the long window judges, then (only if it says healthy) the short one; an
    ///   unhealthy verdict breaks the recorder and returns `false`. A success never breaks it.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::{EmaConfig, EmaRecorder, Outcome};
    /// use std::time::Duration;
    ///
    /// let mut rec = EmaRecorder::new(EmaConfig::default())?;
    /// let now = Duration::from_secs(60);
    /// assert!(rec.on_call_end(Outcome::Success, Duration::from_micros(800), now));
    /// rec.mark_as_broken(now);
    /// assert!(!rec.on_call_end(Outcome::Success, Duration::from_micros(800), now));
    /// assert!(rec.on_call_end(Outcome::Excluded, Duration::ZERO, now));
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn on_call_end(&mut self, outcome: Outcome, latency: Duration, now: Duration) -> bool {
        let failed = match outcome {
            Outcome::Excluded => return true,
            Outcome::Success => false,
            Outcome::Failure | Outcome::Fatal => true,
        };
        if self.broken {
            return false;
        }
        if self.config.half_open_window_size > 0 && self.half_open {
            if failed {
                self.mark_as_broken(now);
                return false;
            }
            self.half_open_successes += 1;
            if self.half_open_successes >= self.config.half_open_window_size {
                self.half_open = false;
                self.half_open_successes = 0;
            }
        }
        if self.windows.on_call_end(failed, whole_micros(latency)) {
            return true;
        }
        self.mark_as_broken(now);
        false
    }

    /// Breaks the recorder (brpc's `MarkAsBroken`), e.g. when the connection itself failed.
    /// A no-op when already broken.
    ///
    /// Counts one more isolation and sets the isolation duration: doubled (capped at
    /// `max_isolation`) when the last [`reset`](Self::reset) was less than `max_isolation`
    /// before `now`, `min_isolation` otherwise. `now` counts in whole milliseconds; a
    /// recorder never reset counts as reset at time zero, as in brpc.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::{EmaConfig, EmaRecorder};
    /// use std::time::Duration;
    ///
    /// let mut rec = EmaRecorder::new(EmaConfig::default())?;
    /// rec.mark_as_broken(Duration::from_secs(3600)); // long after the "reset" at zero
    /// assert_eq!(rec.isolation_duration(), Duration::from_millis(100));
    /// rec.reset(Duration::from_secs(3601));
    /// rec.mark_as_broken(Duration::from_secs(3602)); // 1 s after the revival
    /// assert_eq!(rec.isolation_duration(), Duration::from_millis(200));
    /// assert_eq!(rec.isolated_times(), 2);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn mark_as_broken(&mut self, now: Duration) {
        if self.broken {
            return;
        }
        self.broken = true;
        self.isolated_times = self.isolated_times.saturating_add(1);
        // brpc compares a signed difference; a clock that went back gives a negative gap,
        // which is below any max, as 0 is here (and with a max of 0 both end at 0 ms).
        let since_reset = match self.last_reset_ms {
            Some(reset) => whole_millis(now).saturating_sub(reset),
            None => u64::MAX,
        };
        self.isolation_ms = if since_reset < self.max_isolation_ms {
            self.isolation_ms
                .saturating_mul(2)
                .min(self.max_isolation_ms)
        } else {
            self.min_isolation_ms
        };
    }

    /// Revives the recorder (brpc's `Reset`, called when a server is revived).
    ///
    /// Clears "broken", forgives every window's error cost, restarts the initial stage of a
    /// window that had not finished it (a window past it keeps its latency average), and
    /// remembers `now` as the last reset. With `half_open_window_size > 0` it starts a new
    /// probation with no successes. The isolation duration and count are kept.
    pub fn reset(&mut self, now: Duration) {
        self.windows.reset();
        self.last_reset_ms = Some(whole_millis(now));
        self.broken = false;
        if self.config.half_open_window_size > 0 {
            self.half_open = true;
            self.half_open_successes = 0;
        }
    }

    /// Revives the recorder for a breaker that closed from open or half-open, whatever
    /// closed it: as [`reset`](Self::reset), but no probation follows (the breaker is closed
    /// already, and a probation under way ends). The isolation duration and count are kept.
    pub(crate) fn revive_closed(&mut self, now: Duration) {
        self.windows.reset();
        self.last_reset_ms = Some(whole_millis(now));
        self.broken = false;
        self.half_open = false;
    }

    /// How long to isolate after the last break (brpc's `isolation_duration_ms()`), in whole
    /// milliseconds; `min_isolation` before any break.
    pub fn isolation_duration(&self) -> Duration {
        Duration::from_millis(self.isolation_ms)
    }

    /// How many times the recorder broke (brpc's `isolated_times()`).
    pub fn isolated_times(&self) -> u64 {
        self.isolated_times
    }

    /// Whether the recorder is broken: every call answers `false` until [`reset`](Self::reset).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether the recorder is on half-open probation: not broken, reset since the last
    /// break, and fewer than `half_open_window_size` successes seen since. Always `false`
    /// when `half_open_window_size` is 0.
    ///
    /// (brpc keeps its probation flag set across a break; that is not observable, since a
    /// broken recorder ignores calls and the next reset starts a new probation anyway.)
    pub fn is_half_open(&self) -> bool {
        self.half_open && !self.broken && self.config.half_open_window_size > 0
    }

    /// The long window's state, for inspection and metrics.
    pub fn long_window(&self) -> EmaWindowState {
        self.windows.long.state()
    }

    /// The short window's state, for inspection and metrics.
    pub fn short_window(&self) -> EmaWindowState {
        self.windows.short.state()
    }

    /// When the recorder was last [`reset`](Self::reset), in whole milliseconds as brpc
    /// keeps it; `None` if it counts as never reset (see [`Ema`](super::Ema)). A recorder
    /// from [`new`](Self::new) starts as if reset at time zero, as brpc's does.
    pub fn last_reset(&self) -> Option<Duration> {
        self.last_reset_ms.map(Duration::from_millis)
    }

    /// Successes seen in the current half-open probation (brpc's
    /// `half_open_success_count`); 0 when not on probation.
    pub fn probation_successes(&self) -> u32 {
        if self.is_half_open() {
            self.half_open_successes
        } else {
            0
        }
    }
}

/// A clone is a recorder of its own, with the same numbers as this one now (its windows are
/// not shared with this one's).
impl Clone for EmaRecorder {
    fn clone(&self) -> Self {
        Self {
            config: self.config,
            min_isolation_ms: self.min_isolation_ms,
            max_isolation_ms: self.max_isolation_ms,
            windows: Arc::new(self.windows.copy()),
            broken: self.broken,
            half_open: self.half_open,
            half_open_successes: self.half_open_successes,
            isolation_ms: self.isolation_ms,
            isolated_times: self.isolated_times,
            last_reset_ms: self.last_reset_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window's state as a tuple: `(ema_latency, ema_error_cost, samples, errors)`.
    fn window(r: &EmaRecorder, long: bool) -> (i64, i64, u32, u32) {
        let w = if long {
            r.long_window()
        } else {
            r.short_window()
        };
        (
            w.ema_latency_us,
            w.ema_error_cost_us,
            w.initial_samples,
            w.initial_errors,
        )
    }

    const MS: Duration = Duration::from_millis(1);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn defaults_are_brpcs() {
        let c = EmaConfig::default();
        assert_eq!(
            (
                c.short_window_size,
                c.short_window_error_percent,
                c.long_window_size,
                c.long_window_error_percent
            ),
            (1500, 10, 3000, 5)
        );
        assert_eq!(c.min_error_cost, us(500));
        assert_eq!(c.max_failed_latency_multiple, 2);
        assert_eq!(c.min_isolation, 100 * MS);
        assert_eq!(c.max_isolation, 30_000 * MS);
        assert_eq!(c.epsilon, 0.02);
        assert_eq!(c.half_open_window_size, 0);
        assert!(c.validate().is_ok());
        let rec = EmaRecorder::new(c).unwrap();
        assert_eq!(rec.isolation_duration(), 100 * MS);
        assert_eq!(rec.isolated_times(), 0);
        assert!(!rec.is_broken() && !rec.is_half_open());
    }

    #[test]
    fn each_invalid_field_is_named() {
        let d = EmaConfig::default();
        let cases: Vec<(EmaConfig, &str)> = vec![
            (
                EmaConfig {
                    short_window_size: 0,
                    ..d
                },
                "short_window_size",
            ),
            (
                EmaConfig {
                    short_window_error_percent: 100,
                    ..d
                },
                "short_window_error_percent",
            ),
            (
                EmaConfig {
                    long_window_size: 0,
                    ..d
                },
                "long_window_size",
            ),
            (
                EmaConfig {
                    long_window_error_percent: 100,
                    ..d
                },
                "long_window_error_percent",
            ),
            (
                EmaConfig {
                    min_isolation: 30_001 * MS,
                    ..d
                },
                "min_isolation",
            ),
            (
                EmaConfig {
                    min_error_cost: Duration::from_nanos(999),
                    ..d
                },
                "min_error_cost",
            ),
            (
                EmaConfig {
                    min_isolation: Duration::ZERO,
                    ..d
                },
                "min_isolation",
            ),
            (
                EmaConfig {
                    min_isolation: us(999),
                    ..d
                },
                "min_isolation",
            ),
            (
                EmaConfig {
                    max_isolation: us(999),
                    ..d
                },
                "max_isolation",
            ),
            (
                EmaConfig {
                    min_isolation: us(500),
                    max_isolation: us(500),
                    ..d
                },
                "min_isolation",
            ),
            (EmaConfig { epsilon: 0.0, ..d }, "epsilon"),
            (EmaConfig { epsilon: 1.0, ..d }, "epsilon"),
            (EmaConfig { epsilon: -0.5, ..d }, "epsilon"),
            (
                EmaConfig {
                    epsilon: f64::NAN,
                    ..d
                },
                "epsilon",
            ),
            (
                EmaConfig {
                    epsilon: f64::INFINITY,
                    ..d
                },
                "epsilon",
            ),
        ];
        for (config, field) in cases {
            let err = config.validate().unwrap_err();
            assert_eq!(err.field(), field, "{config:?}");
            assert_eq!(
                EmaRecorder::new(config).unwrap_err().field(),
                field,
                "new validates"
            );
        }
        // The edges that are valid.
        for ok in [
            EmaConfig {
                short_window_error_percent: 99,
                long_window_error_percent: 0,
                ..d
            },
            EmaConfig {
                min_isolation: 30_000 * MS,
                ..d
            },
            EmaConfig {
                min_error_cost: Duration::ZERO, // brpc's 0: nothing forgiven
                ..d
            },
            EmaConfig {
                min_error_cost: us(1),
                min_isolation: MS,
                max_isolation: MS,
                ..d
            },
            EmaConfig {
                short_window_size: 1,
                long_window_size: u32::MAX,
                max_failed_latency_multiple: 0,
                epsilon: 1e-300,
                ..d
            },
        ] {
            assert!(ok.validate().is_ok(), "{ok:?}");
        }
    }

    /// windows of 2, epsilon 0.25: smooth = 0.25^(1/2) = 0.5, so every step is exact by hand.
    fn halving() -> EmaRecorder {
        EmaRecorder::new(EmaConfig {
            short_window_size: 2,
            short_window_error_percent: 50, // init limit 2*50/100 = 1; budget ema*2*0.5*1.25
            long_window_size: 2,
            long_window_error_percent: 99, // init limit 1; budget ema*2*0.99*1.25 ≈ 4.95 ema
            epsilon: 0.25,
            ..EmaConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn hand_computed_ema_stage() {
        let mut r = halving();
        assert_eq!(
            (r.config().long_smooth(), r.config().short_smooth()),
            (0.5, 0.5)
        );
        let t = Duration::from_secs(3600);

        assert!(r.on_call_end(Outcome::Success, us(1000), t)); // seeds 1000
        assert!(r.on_call_end(Outcome::Success, us(3000), t)); // 500 + 1500
        assert_eq!(window(&r, false), (2000, 0, 2, 0));

        // Past the initial stage. 600 µs < cap 4000: cost 600, budget 2500: healthy.
        assert!(r.on_call_end(Outcome::Failure, us(600), t));
        assert_eq!(window(&r, false), (2000, 600, 2, 0));
        // A success: 600 >= 500 halves to 300 (ema stays 2000).
        assert!(r.on_call_end(Outcome::Success, us(2000), t));
        assert_eq!(window(&r, true), (2000, 300, 2, 0));
        // 300 < 500: forgiven.
        assert!(r.on_call_end(Outcome::Success, us(2001), t)); // 1000 + 1000.5 -> 2000
        assert_eq!(window(&r, true), (2000, 0, 2, 0));
        // A zero-latency failure is free: decays instead.
        assert!(r.on_call_end(Outcome::Failure, Duration::ZERO, t));

        // 10 ms failure capped at 2 × 2000 = 4000. Long: 4000 <= 4950. Short: 4000 > 2500.
        assert!(!r.on_call_end(Outcome::Failure, us(10_000), t));
        assert_eq!(window(&r, true), (2000, 4000, 2, 0));
        assert_eq!(window(&r, false), (2000, 4000, 2, 0));
        assert!(r.is_broken());
        assert_eq!(r.isolated_times(), 1);
        // Last reset "at zero", 3600 s ago >= 30 s: the minimum.
        assert_eq!(r.isolation_duration(), 100 * MS);
        // Broken: everything but an exclusion is unhealthy and ignored.
        assert!(!r.on_call_end(Outcome::Success, us(1), t));
        assert!(r.on_call_end(Outcome::Excluded, us(1), t));
        assert_eq!(window(&r, false), (2000, 4000, 2, 0));

        // Reset keeps the EMA of finished windows and forgives their cost.
        r.reset(t + 100 * MS);
        assert!(!r.is_broken());
        assert_eq!(window(&r, false), (2000, 0, 2, 0));
        // A second failure of 5 s again: both windows at 4000 vs 4950 / 2500.
        assert!(!r.on_call_end(Outcome::Failure, Duration::from_secs(5), t + 200 * MS));
        assert_eq!(
            r.isolation_duration(),
            200 * MS,
            "0.1 s after the reset: doubled"
        );
        assert_eq!(r.isolated_times(), 2);
    }

    #[test]
    fn initial_stage_counts_errors_and_long_short_circuits() {
        let mut r = EmaRecorder::new(EmaConfig {
            short_window_size: 10,
            short_window_error_percent: 50, // limit 5
            long_window_size: 20,
            long_window_error_percent: 10, // limit 2
            ..EmaConfig::default()
        })
        .unwrap();
        let t = Duration::from_secs(5); // 5 s after the implicit reset at zero
        assert!(r.on_call_end(Outcome::Failure, us(100), t));
        assert!(r.on_call_end(Outcome::Failure, us(100), t));
        assert!(!r.on_call_end(Outcome::Failure, us(100), t));
        // The long window tripped; the short one never saw the third failure.
        assert_eq!(window(&r, true), (0, 300, 3, 3));
        assert_eq!(window(&r, false), (0, 200, 2, 2));
        // brpc's quirk: last reset "at zero", 5 s ago < 30 s, so the first break doubles.
        assert_eq!(r.isolation_duration(), 200 * MS);

        // Neither window finished its initial stage: reset restarts both.
        r.reset(Duration::from_secs(6));
        assert_eq!(window(&r, true), (0, 0, 0, 0));
        assert_eq!(window(&r, false), (0, 0, 0, 0));
        assert_eq!(r.probation_successes(), 0);
        assert_eq!(r.last_reset(), Some(Duration::from_secs(6)));
    }

    #[test]
    fn isolation_backoff_doubles_caps_and_restarts() {
        let mut r = EmaRecorder::new(EmaConfig {
            min_isolation: 100 * MS,
            max_isolation: 1000 * MS,
            ..EmaConfig::default()
        })
        .unwrap();
        let mut now = Duration::from_secs(100);
        let mut seen = Vec::new();
        for _ in 0..6 {
            r.mark_as_broken(now);
            r.mark_as_broken(now); // a no-op
            seen.push(r.isolation_duration().as_millis());
            now += 10 * MS;
            r.reset(now);
            now += 999 * MS; // 999 < 1000 after the reset: doubles
        }
        assert_eq!(seen, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(r.isolated_times(), 6);
        now += MS; // exactly 1000 ms since the last reset: back to the minimum
        r.mark_as_broken(now);
        assert_eq!(r.isolation_duration(), 100 * MS);
        // Sub-millisecond parts of `now` are dropped, as brpc's millisecond clock does.
        r.reset(now + Duration::from_micros(999));
        r.mark_as_broken(now + 1000 * MS);
        assert_eq!(r.isolation_duration(), 100 * MS);
    }

    #[test]
    fn half_open_probation() {
        let mut r = EmaRecorder::new(EmaConfig {
            half_open_window_size: 2,
            ..EmaConfig::default()
        })
        .unwrap();
        let t = Duration::from_secs(100);
        assert!(!r.is_half_open(), "probation starts only at a reset");
        assert!(r.on_call_end(Outcome::Failure, us(10), t));
        r.mark_as_broken(t);
        r.reset(t);
        assert!(r.is_half_open());
        assert!(r.on_call_end(Outcome::Success, us(10), t));
        assert!(r.on_call_end(Outcome::Excluded, us(10), t));
        assert_eq!(r.probation_successes(), 1);
        assert_eq!(r.last_reset(), Some(t));
        // A failure on probation breaks, without feeding the windows.
        let before = (window(&r, true), window(&r, false));
        assert!(!r.on_call_end(Outcome::Failure, us(10), t));
        assert_eq!((window(&r, true), window(&r, false)), before);
        assert!(r.is_broken() && !r.is_half_open());
        assert_eq!(r.probation_successes(), 0, "broken: not on probation");
        r.reset(t);
        assert!(r.is_half_open());
        assert_eq!(r.probation_successes(), 0, "a new probation");
        assert!(r.on_call_end(Outcome::Success, us(10), t));
        assert!(r.on_call_end(Outcome::Success, us(10), t));
        assert!(!r.is_half_open());
        assert!(
            r.on_call_end(Outcome::Failure, us(10), t),
            "judged by the windows again"
        );
    }

    #[test]
    fn extreme_inputs_saturate_without_panicking() {
        let mut r = EmaRecorder::new(EmaConfig {
            short_window_size: 1,
            short_window_error_percent: 99,
            long_window_size: u32::MAX,
            long_window_error_percent: 99,
            min_error_cost: Duration::MAX,
            max_failed_latency_multiple: u32::MAX,
            min_isolation: Duration::MAX,
            max_isolation: Duration::MAX,
            epsilon: f64::MIN_POSITIVE,
            half_open_window_size: u32::MAX,
        })
        .unwrap();
        for &lat in &[
            Duration::MAX,
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::MAX,
        ] {
            for o in [Outcome::Success, Outcome::Failure, Outcome::Excluded] {
                r.on_call_end(o, lat, Duration::MAX);
                r.on_call_end(o, lat, Duration::ZERO);
            }
            r.mark_as_broken(Duration::MAX);
            r.reset(Duration::MAX);
            r.mark_as_broken(Duration::ZERO);
            r.reset(Duration::ZERO);
        }
        assert_eq!(r.isolation_duration(), Duration::from_millis(u64::MAX));
    }
}
