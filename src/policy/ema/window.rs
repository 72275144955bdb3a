//! brpc's two `EmaErrorRecorder`s, in atomics: the part of an [`EmaRecorder`](super::EmaRecorder)
//! a result changes, shared with the breaker's lock-free lane so that a closed-state success
//! is recorded without the breaker's lock, as brpc records every call.
//!
//! Each of a window's four numbers is its own atomic word, updated by a compare-and-swap loop
//! of brpc's arithmetic (brpc's `compare_exchange_weak` loops on `_ema_latency` and
//! `_ema_error_cost`, and its `fetch_add`s on the initial-stage counters): one thread's
//! sequence of results gives exactly the numbers of the plain arithmetic, and results
//! recorded at once from several threads are each applied whole to each number, none lost.
//! As in brpc, a window's numbers are not updated together: a failure may weigh its cost
//! against a latency average a concurrent success has just moved.

use std::time::Duration;

use crate::atomic::{AtomicU64, Ordering};
use crate::policy::SuccessRecorder;

/// The knobs a window reads on every call (brpc reads them from gflags each time).
#[derive(Debug, Clone, Copy)]
pub(super) struct CallKnobs {
    pub(super) min_error_cost_us: i64,
    pub(super) max_failed_latency_multiple: i64,
    pub(super) epsilon: f64,
}

/// One of brpc's two `EmaErrorRecorder`s.
#[derive(Debug)]
pub(super) struct Window {
    size: u32,
    error_percent: u32,
    smooth: f64,
    /// EMA of successful latencies in µs (an `i64`'s bits); 0 means "not seeded".
    ema_latency: AtomicU64,
    /// Decaying sum of failure costs in µs (an `i64`'s bits).
    ema_error_cost: AtomicU64,
    init_samples: AtomicU64,
    init_errors: AtomicU64,
}

/// Replaces the `i64` in `word` by `f` of it, in a compare-and-swap loop; returns the new
/// value. A value `f` leaves as it is is not written.
#[inline]
fn update(word: &AtomicU64, f: impl Fn(i64) -> i64) -> i64 {
    let mut current = word.load(Ordering::Relaxed);
    loop {
        let next = f(current as i64);
        if next as u64 == current {
            return next;
        }
        match word.compare_exchange_weak(current, next as u64, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return next,
            Err(found) => current = found,
        }
    }
}

impl Window {
    pub(super) fn new(size: u32, error_percent: u32, smooth: f64) -> Self {
        Self {
            size,
            error_percent,
            smooth,
            ema_latency: AtomicU64::new(0),
            ema_error_cost: AtomicU64::new(0),
            init_samples: AtomicU64::new(0),
            init_errors: AtomicU64::new(0),
        }
    }

    /// A window with the same knobs and numbers (the numbers as they read now).
    pub(super) fn copy(&self) -> Self {
        let state = self.state();
        let copy = Self::new(self.size, self.error_percent, self.smooth);
        copy.ema_latency
            .store(state.ema_latency_us as u64, Ordering::Relaxed);
        copy.ema_error_cost
            .store(state.ema_error_cost_us as u64, Ordering::Relaxed);
        copy.init_samples
            .store(u64::from(state.initial_samples), Ordering::Relaxed);
        copy.init_errors
            .store(u64::from(state.initial_errors), Ordering::Relaxed);
        copy
    }

    fn latency(&self) -> i64 {
        self.ema_latency.load(Ordering::Relaxed) as i64
    }

    /// One result; returns the window's verdict (`true` = healthy).
    pub(super) fn on_call_end(&self, failed: bool, latency_us: i64, knobs: &CallKnobs) -> bool {
        // A: the EMA state, updated in both stages.
        let ema_verdict = if failed {
            let ema_latency = self.latency();
            let mut cost = latency_us;
            if ema_latency != 0 {
                cost = cost.min(ema_latency.saturating_mul(knobs.max_failed_latency_multiple));
            }
            if cost != 0 {
                let total = update(&self.ema_error_cost, |c| c.saturating_add(cost));
                total <= self.error_budget(ema_latency, knobs.epsilon)
            } else {
                self.decay_error_cost(knobs.min_error_cost_us);
                true
            }
        } else {
            self.record_success(latency_us, knobs);
            true
        };

        // B: the initial stage counts errors and discards the EMA verdict.
        if self.count_initial_sample() {
            if failed {
                let previous_errors = self.init_errors.fetch_add(1, Ordering::Relaxed);
                // brpc: `int` arithmetic, truncating division (widened here: never overflows).
                let limit = u64::from(self.size) * u64::from(self.error_percent) / 100;
                return previous_errors < limit;
            }
            return true;
        }
        // C: after it, the EMA verdict.
        ema_verdict
    }

    /// A success: its latency moves the average, the error cost decays (part A of
    /// [`on_call_end`](Self::on_call_end)); the initial stage is left to the caller.
    #[inline]
    fn record_success(&self, latency_us: i64, knobs: &CallKnobs) {
        let smooth = self.smooth;
        update(&self.ema_latency, |ema| {
            if ema == 0 {
                latency_us
            } else {
                // Two rounded products, a rounded sum, then truncation toward zero; never
                // fused (brpc's x86 build does not contract it).
                (ema as f64 * smooth + latency_us as f64 * (1.0 - smooth)) as i64
            }
        });
        self.decay_error_cost(knobs.min_error_cost_us);
    }

    /// A success recorded without the breaker's lock: the whole of
    /// [`on_call_end`](Self::on_call_end) for a success, whose verdict is always healthy.
    #[inline]
    pub(super) fn on_success(&self, latency_us: i64, knobs: &CallKnobs) {
        self.record_success(latency_us, knobs);
        self.count_initial_sample();
    }

    /// Counts one more sample of the initial stage if it is not over; whether it was not.
    #[inline]
    fn count_initial_sample(&self) -> bool {
        let size = u64::from(self.size);
        let mut seen = self.init_samples.load(Ordering::Relaxed);
        while seen < size {
            match self.init_samples.compare_exchange_weak(
                seen,
                seen + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(found) => seen = found,
            }
        }
        false
    }

    /// brpc: `ema_latency * window_size * (percent / 100.0) * (1.0 + EPSILON)`, the first
    /// product in integers, the rest in f64 left to right, truncated.
    fn error_budget(&self, ema_latency: i64, epsilon: f64) -> i64 {
        let scaled = ema_latency.saturating_mul(i64::from(self.size));
        (scaled as f64 * (f64::from(self.error_percent) / 100.0) * (1.0 + epsilon)) as i64
    }

    /// The ordinary decay of a success (or a free failure).
    #[inline]
    fn decay_error_cost(&self, min_error_cost_us: i64) {
        let smooth = self.smooth;
        update(&self.ema_error_cost, |cost| {
            if cost == 0 || cost < min_error_cost_us {
                0
            } else {
                (cost as f64 * smooth) as i64
            }
        });
    }

    pub(super) fn state(&self) -> EmaWindowState {
        EmaWindowState {
            ema_latency_us: self.latency(),
            ema_error_cost_us: self.ema_error_cost.load(Ordering::Relaxed) as i64,
            initial_samples: self.init_samples.load(Ordering::Relaxed) as u32,
            initial_errors: self.init_errors.load(Ordering::Relaxed) as u32,
        }
    }

    pub(super) fn reset(&self) {
        if self.init_samples.load(Ordering::Relaxed) < u64::from(self.size) {
            self.init_samples.store(0, Ordering::Relaxed);
            self.init_errors.store(0, Ordering::Relaxed);
            self.ema_latency.store(0, Ordering::Relaxed);
        }
        self.ema_error_cost.store(0, Ordering::Relaxed);
    }
}

/// A recorder's two windows and the knobs they read.
#[derive(Debug)]
pub(super) struct Windows {
    pub(super) knobs: CallKnobs,
    pub(super) long: Window,
    pub(super) short: Window,
}

impl Windows {
    /// One result: the long window judges, then (only if it says healthy) the short one.
    pub(super) fn on_call_end(&self, failed: bool, latency_us: i64) -> bool {
        self.long.on_call_end(failed, latency_us, &self.knobs)
            && self.short.on_call_end(failed, latency_us, &self.knobs)
    }

    /// Both windows as they read now, in windows of their own.
    pub(super) fn copy(&self) -> Self {
        Self {
            knobs: self.knobs,
            long: self.long.copy(),
            short: self.short.copy(),
        }
    }

    pub(super) fn reset(&self) {
        self.long.reset();
        self.short.reset();
    }
}

/// A closed-state success, recorded by the breaker without its lock: both windows take it
/// (a success is healthy in both, so the short one is never skipped).
impl SuccessRecorder for Windows {
    #[inline]
    fn record_success(&self, latency: Option<Duration>) {
        let latency_us = whole_micros(latency.unwrap_or_default());
        self.long.on_success(latency_us, &self.knobs);
        self.short.on_success(latency_us, &self.knobs);
    }
}

/// Whole microseconds, as brpc's `int64_t` latencies; saturates.
pub(super) fn whole_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The state of one of an [`EmaRecorder`](super::EmaRecorder)'s two windows, in brpc's own units.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{EmaConfig, EmaRecorder, Outcome};
/// use std::time::Duration;
///
/// let mut rec = EmaRecorder::new(EmaConfig::default())?;
/// rec.on_call_end(Outcome::Success, Duration::from_micros(900), Duration::ZERO);
/// let long = rec.long_window();
/// assert_eq!(long.ema_latency_us, 900); // the first success seeds the average
/// assert_eq!((long.initial_samples, long.initial_errors), (1, 0));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EmaWindowState {
    /// The moving average of successful calls' latency, in whole microseconds (0: no success
    /// seen since the window started over).
    pub ema_latency_us: i64,
    /// The decaying sum of failed calls' costs, in whole microseconds.
    pub ema_error_cost_us: i64,
    /// Samples seen during the initial stage (at most the window size; the stage is over when
    /// it reaches it).
    pub initial_samples: u32,
    /// Errors counted during the initial stage.
    pub initial_errors: u32,
}
