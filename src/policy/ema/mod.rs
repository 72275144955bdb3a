//! brpc's EMA dual-window policy: the standalone [`EmaRecorder`] and the [`Ema`] trip policy
//! that puts it in a [`Breaker`](crate::Breaker).

mod recorder;
mod window;

pub use recorder::{EmaConfig, EmaRecorder};
pub use window::EmaWindowState;

use std::sync::Arc;
use std::time::Duration;

use super::{CallResult, Capabilities, SuccessRecorder, TripPolicy};
use crate::error::ConfigError;
use crate::state::State;

/// brpc's circuit breaker as a trip policy: failures weighed by their latency against an
/// exponential moving average, in a long and a short window, with brpc's doubling isolation.
///
/// It wraps an [`EmaRecorder`] (the algorithm, documented there) and maps brpc's lifecycle
/// onto the breaker's states:
///
/// | brpc | the breaker with `Ema` |
/// |---|---|
/// | every call's `OnCallEnd(code, latency)` | every result in closed, with the latency the breaker measured on its clock between `allow()` and the verdict (`execute` measures it for you) |
/// | `OnCallEnd` says unhealthy | the breaker trips on that very result |
/// | isolate for `isolation_duration_ms()` | stay open for [`EmaRecorder::isolation_duration`], not the builder's `timeout`: `min_isolation`, doubled (up to `max_isolation`) for each break less than `max_isolation` after the previous revival |
/// | revive: `Reset()` | the open period elapses: the breaker goes half-open and the recorder is reset |
/// | `ELIMIT` (ignored) | [`Outcome::Excluded`](super::Outcome::Excluded): ignored by the recorder |
/// | `half_open_window_size = N > 0`: after a revival any failure re-isolates, `N` successes end the probation | half-open admits `N` probes and closes after `N` consecutive successes; any failure reopens, for a doubled isolation |
/// | `half_open_window_size = 0`: a revived server takes all its traffic at once | half-open follows the breaker's `max_requests` (gobreaker's rule); a failure reopens it, for a doubled isolation |
///
/// Unlike brpc, where probation admits every call, the breaker's half-open admits only the
/// `N` probes at a time: a conservative reading that keeps a barely revived dependency from
/// taking full traffic.
///
/// The half-open probes are fed to the recorder too, as brpc feeds its probation calls, so
/// the recorder's averages stay continuous across a revival. brpc's recorder starts as if
/// revived at time zero; this policy starts as never revived, so its first isolation is
/// `min_isolation` however soon after the breaker's creation it comes (as in brpc, whose
/// monotonic clock is far from zero).
///
/// The policy needs each call's latency, so the breaker reads its clock at admission as well
/// as at the verdict for it (its default clock is then the cheap [`PreciseClock`](crate::PreciseClock)).
/// A closed-state success never breaks the recorder, so the breaker records it without its
/// lock, in the recorder's atomics (see [`SuccessRecorder`]), as brpc does: a healthy call
/// costs two clock reads and a few compare-and-swaps, and only failures, probes and state
/// changes take the lock.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{Ema, EmaConfig};
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .policy(Ema::new(EmaConfig {
///         short_window_size: 10,
///         short_window_error_percent: 20,
///         long_window_size: 20,
///         long_window_error_percent: 10,
///         ..EmaConfig::default()
///     })?)
///     .clock(clock.clone())
///     .build();
///
/// // During its first samples a window counts errors: the third one breaks it.
/// for _ in 0..3 {
///     let permit = breaker.allow().unwrap();
///     clock.advance(Duration::from_millis(2)); // the call's latency
///     permit.failure();
/// }
/// assert_eq!(breaker.state(), State::Open);
/// clock.advance(Duration::from_millis(100)); // brpc's min_isolation
/// assert_eq!(breaker.state(), State::Open);
/// clock.advance(Duration::from_nanos(1));
/// assert_eq!(breaker.state(), State::HalfOpen);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ema {
    recorder: EmaRecorder,
}

impl Ema {
    /// The policy, with a fresh recorder.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`EmaConfig::validate`], naming the invalid field.
    pub fn new(config: EmaConfig) -> Result<Self, ConfigError> {
        let mut recorder = EmaRecorder::new(config)?;
        recorder.forget_initial_reset();
        Ok(Self { recorder })
    }

    /// The recorder, for inspection (isolation duration, number of breaks).
    pub fn recorder(&self) -> &EmaRecorder {
        &self.recorder
    }

    /// The configuration.
    pub fn config(&self) -> &EmaConfig {
        self.recorder.config()
    }
}

impl TripPolicy for Ema {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        let latency = result.latency.unwrap_or_default();
        !self
            .recorder
            .on_call_end(result.outcome, latency, result.now)
    }

    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        let latency = result.latency.unwrap_or_default();
        // A failure on probation breaks the recorder (and doubles its isolation); the
        // breaker reopens on any probe failure whatever the recorder says.
        self.recorder
            .on_call_end(result.outcome, latency, result.now);
    }

    fn open_duration(&mut self, _timeout: Duration, now: Duration) -> Duration {
        // Already broken when the recorder tripped the breaker; not yet when a half-open
        // probe failed without breaking it (no probation): that failure isolates too.
        self.recorder.mark_as_broken(now);
        self.recorder.isolation_duration()
    }

    /// Starts the windows afresh when the breaker goes half-open (its probation), and when it
    /// closes from open or half-open, whatever closed it (a probe, a release, a forced close,
    /// a fleet's recovery): brpc's revive. The outage's error cost is then never held
    /// against the first calls after it.
    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        match to {
            State::HalfOpen => self.recorder.reset(now),
            State::Closed if from != State::Closed => self.recorder.revive_closed(now),
            _ => {}
        }
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        match self.config().half_open_window_size {
            0 => max_requests,
            n => u64::from(n),
        }
    }

    /// brpc's error cost weighs each result by its latency.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().needs_latency(true)
    }

    /// The recorder's windows: a closed-state success never breaks the recorder, so the
    /// breaker records it there without its lock, as brpc records every call in atomics.
    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        Some(self.recorder.windows().clone())
    }

    /// The two windows (`ema_short_*`, `ema_long_*`: the latency average and the error cost,
    /// in microseconds), the isolation the next trip would last (`ema_isolation_seconds`)
    /// and the times isolated (`ema_isolated_times`).
    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        let (short, long) = (self.recorder.short_window(), self.recorder.long_window());
        report("ema_short_latency_us", short.ema_latency_us as f64);
        report("ema_short_error_cost_us", short.ema_error_cost_us as f64);
        report("ema_long_latency_us", long.ema_latency_us as f64);
        report("ema_long_error_cost_us", long.ema_error_cost_us as f64);
        report(
            "ema_isolation_seconds",
            self.recorder.isolation_duration().as_secs_f64(),
        );
        report("ema_isolated_times", self.recorder.isolated_times() as f64);
    }
}
