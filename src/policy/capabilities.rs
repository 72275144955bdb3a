//! [`Capabilities`]: what a policy needs from the breaker, answered once when it is built.

use std::time::Duration;

/// What a [`TripPolicy`](super::TripPolicy) needs from the breaker, asked once, when the
/// breaker is built ([`TripPolicy::capabilities`](super::TripPolicy::capabilities)); the
/// breaker then sets up only what the policy uses (a policy that needs no successes lets
/// closed-state successes count without the lock; one that needs no latency lets the breaker
/// read a cheaper clock and keep no start times).
///
/// `#[non_exhaustive]`: build it with [`Capabilities::default`] and the setters, which are
/// named after the fields, so that a capability added later breaks nobody.
///
/// | field | default | meaning |
/// |---|---|---|
/// | [`needs_latency`](Self::needs_latency) | `false` | results carry [`CallResult::latency`](super::CallResult::latency) |
/// | [`needs_successes`](Self::needs_successes) | `true` | [`on_result`](super::TripPolicy::on_result) sees every closed-state success |
/// | [`slow_call_threshold`](Self::slow_call_threshold) | `None` | results slower than this count as slow ([`Counts::slow_calls`](crate::Counts::slow_calls)) |
/// | [`probes_on_latency_alone`](Self::probes_on_latency_alone) | `false` | half-open probes are judged on latency alone |
/// | [`latency_resolution`](Self::latency_resolution) | zero | the coarsest clock tick the latencies may have: the default clock is the coarse one when its tick is at most this |
/// | [`reads_requests`](Self::reads_requests) | `true` | [`on_result`](super::TripPolicy::on_result)'s decision reads [`Counts::requests`](crate::Counts::requests), which counts calls still in flight |
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{CallResult, Capabilities, Outcome, TripPolicy};
/// use std::time::Duration;
///
/// /// Trips when a single call takes longer than a second.
/// #[derive(Debug)]
/// struct OneSlowCall;
///
/// impl TripPolicy for OneSlowCall {
///     fn on_result(&mut self, result: &CallResult<'_>) -> bool {
///         result.outcome != Outcome::Excluded && result.counts.slow_calls > 0
///     }
///
///     fn capabilities(&self) -> Capabilities {
///         Capabilities::default()
///             .needs_latency(true)
///             .slow_call_threshold(Duration::from_secs(1))
///     }
/// }
///
/// let caps = OneSlowCall.capabilities();
/// assert!(caps.needs_latency && caps.needs_successes);
/// assert_eq!(caps.slow_call_threshold, Some(Duration::from_secs(1)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Capabilities {
    /// Whether the policy needs each result's latency. When `false` the breaker does not
    /// remember when each request started, and its default clock is the coarse one.
    pub needs_latency: bool,
    /// Whether [`on_result`](super::TripPolicy::on_result) must see every success in the
    /// closed state. A policy that only looks at the counts after a failure (every counting
    /// policy here) says `false`: the breaker may then count closed-state successes without
    /// taking its lock, and without showing them to the policy.
    pub needs_successes: bool,
    /// The latency above which a result counts as slow, in
    /// [`Counts::slow_calls`](crate::Counts::slow_calls); `None`: no call is slow. Only
    /// with [`needs_latency`](Self::needs_latency) (a threshold without latencies is
    /// ignored). In half-open a slow probe counts as failed, and calls still in flight past
    /// the threshold count as slow when the next call arrives.
    pub slow_call_threshold: Option<Duration>,
    /// Whether half-open probes are judged on latency alone (Sentinel's slow-call strategy):
    /// a probe that failed but was not slow then counts as a success. Only meaningful with a
    /// [`slow_call_threshold`](Self::slow_call_threshold).
    pub probes_on_latency_alone: bool,
    /// How coarse a clock the policy's latencies may come from: when the platform's coarse
    /// monotonic clock ticks at most this often, a breaker built without a clock of its own
    /// measures latencies on it ([`CoarseMonotonicClock`](crate::CoarseMonotonicClock), 2.6 ns
    /// a read) rather than on the processor's counter ([`PreciseClock`](crate::PreciseClock),
    /// 13 ns a read on the bench machine). Zero (the default): the precise clock. Each latency
    /// is then right to within one tick (1 to 4 ms on Linux); elsewhere than Linux the
    /// precise clock is used whatever this says. [`SlowCalls`](super::SlowCalls) tolerates a
    /// hundredth of its threshold.
    pub latency_resolution: Duration,
    /// Whether [`on_result`](super::TripPolicy::on_result)'s decision in the closed state
    /// may depend on [`Counts::requests`](crate::Counts::requests), which counts every
    /// admitted call, those still in flight included (a failure ratio does; a run or a count
    /// of failures does not). A policy that says `false` lets
    /// [`Breaker::execute`](crate::Breaker::execute) count a call's request together with
    /// its success when it returns, in one atomic step on the lock-free lane, rather than
    /// one at its admission and one at its result: the counts after every call are the
    /// same, only a reading taken while a call is in flight (from another thread, or from
    /// inside the call) does not show its request yet. The two-step API
    /// ([`Breaker::allow`](crate::Breaker::allow)) always counts at admission.
    /// [`Builder::verdict_at_latest`](crate::Builder::verdict_at_latest) makes `execute`
    /// count so whatever this says.
    pub reads_requests: bool,
}

impl Default for Capabilities {
    /// What a policy that says nothing gets: no latencies, every success, no slow calls.
    fn default() -> Self {
        Self {
            needs_latency: false,
            needs_successes: true,
            slow_call_threshold: None,
            probes_on_latency_alone: false,
            latency_resolution: Duration::ZERO,
            reads_requests: true,
        }
    }
}

impl Capabilities {
    /// These capabilities with [`needs_latency`](Self::needs_latency) set to `yes`.
    #[must_use]
    pub const fn needs_latency(mut self, yes: bool) -> Self {
        self.needs_latency = yes;
        self
    }

    /// These capabilities with [`needs_successes`](Self::needs_successes) set to `yes`.
    #[must_use]
    pub const fn needs_successes(mut self, yes: bool) -> Self {
        self.needs_successes = yes;
        self
    }

    /// These capabilities with [`slow_call_threshold`](Self::slow_call_threshold) set to
    /// `threshold` (a `Duration`, or an `Option` of one).
    #[must_use]
    pub fn slow_call_threshold(mut self, threshold: impl Into<Option<Duration>>) -> Self {
        self.slow_call_threshold = threshold.into();
        self
    }

    /// These capabilities with [`probes_on_latency_alone`](Self::probes_on_latency_alone)
    /// set to `yes`.
    #[must_use]
    pub const fn probes_on_latency_alone(mut self, yes: bool) -> Self {
        self.probes_on_latency_alone = yes;
        self
    }

    /// These capabilities with [`latency_resolution`](Self::latency_resolution) set to
    /// `tick`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::{Capabilities, SlowCalls, TripPolicy};
    /// use std::time::Duration;
    ///
    /// // Latencies right to within 10 ms decide a one-second threshold as well.
    /// let caps = Capabilities::default()
    ///     .needs_latency(true)
    ///     .latency_resolution(Duration::from_millis(10));
    /// assert_eq!(caps.latency_resolution, Duration::from_millis(10));
    /// let slow = SlowCalls::new(Duration::from_secs(1), 0.5, 10)?;
    /// assert_eq!(slow.capabilities().latency_resolution, Duration::from_millis(10));
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn latency_resolution(mut self, tick: Duration) -> Self {
        self.latency_resolution = tick;
        self
    }

    /// These capabilities with [`reads_requests`](Self::reads_requests) set to `yes`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::{Capabilities, ConsecutiveFailures, TripPolicy};
    ///
    /// // A run of failures never looks at how many calls were admitted.
    /// assert!(!ConsecutiveFailures::default().capabilities().reads_requests);
    /// assert!(Capabilities::default().reads_requests, "unless a policy says otherwise");
    /// let caps = Capabilities::default().needs_successes(false).reads_requests(false);
    /// assert!(!caps.reads_requests);
    /// ```
    #[must_use]
    pub const fn reads_requests(mut self, yes: bool) -> Self {
        self.reads_requests = yes;
        self
    }

    /// What a policy that trips when either of two trips needs
    /// ([`AnyOf`](super::AnyOf)): whatever either needs (latencies, successes), the lower
    /// slow-call threshold (a call slow for either is slow), probes judged on latency alone
    /// only if both judge them so (a failed probe still fails for the other), and the finer
    /// latency resolution of the two that measure latency; the requests read if either reads
    /// them.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::Capabilities;
    /// use std::time::Duration;
    ///
    /// let counting = Capabilities::default().needs_successes(false);
    /// let slow = Capabilities::default()
    ///     .needs_latency(true)
    ///     .slow_call_threshold(Duration::from_millis(200))
    ///     .probes_on_latency_alone(true);
    /// let both = counting.either(slow);
    /// assert!(both.needs_latency && both.needs_successes && !both.probes_on_latency_alone);
    /// assert_eq!(both.slow_call_threshold, Some(Duration::from_millis(200)));
    /// ```
    #[must_use]
    pub fn either(self, other: Self) -> Self {
        let slow_call_threshold = match (self.slow_call_threshold, other.slow_call_threshold) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            needs_latency: self.needs_latency || other.needs_latency,
            needs_successes: self.needs_successes || other.needs_successes,
            slow_call_threshold,
            probes_on_latency_alone: self.probes_on_latency_alone && other.probes_on_latency_alone,
            // The finer of the two that measure latency: each gets its latencies as fine.
            latency_resolution: match (self.needs_latency, other.needs_latency) {
                (true, true) => self.latency_resolution.min(other.latency_resolution),
                (true, false) => self.latency_resolution,
                (false, true) => other.latency_resolution,
                (false, false) => Duration::ZERO,
            },
            reads_requests: self.reads_requests || other.reads_requests,
        }
    }

    /// The slow-call threshold the breaker applies: none without latencies.
    pub(crate) fn effective_slow_threshold(&self) -> Option<Duration> {
        self.slow_call_threshold.filter(|_| self.needs_latency)
    }
}
