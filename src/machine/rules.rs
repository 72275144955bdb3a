//! [`Rules`]: what a machine runs by, from the breaker's knobs and the policy's
//! capabilities, after gobreaker's zero-means-default rules.

use std::ops::Deref;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::abandoned::AbandonedAs;
use crate::jitter::{seed_of, Jitter};
use crate::knobs::Knobs;
use crate::nanos::{saturating_nanos, Nanos};
use crate::policy::{Capabilities, ConsecutiveFailures, TripPolicy};

use super::{MAX_BUCKETS, MAX_COUNT_WINDOW};

/// The longest open period by default: one hour (or the timeout, if longer).
const DEFAULT_MAX_OPEN: Nanos = 3_600_000_000_000;

/// How long a health check may run by default: brpc's `health_check_timeout_ms`, 500 ms.
const DEFAULT_CHECK_TIMEOUT: Nanos = 500_000_000;

/// The rules of a breaker built with every default (gobreaker's), kept in a static: a default
/// breaker reads them there and allocates nothing for them.
static DEFAULTS: LazyLock<Rules> = LazyLock::new(|| {
    let knobs = Knobs::default();
    Rules::from(&knobs)
        .with_capabilities(&ConsecutiveFailures::default().capabilities())
        .health_check(false, knobs.check_timeout)
});

/// The rules a machine reads: a default breaker's in a static ([`RulesRef::of`] finds them
/// there), any other's shared by the breakers built alike. One word either way.
#[derive(Debug, Clone)]
pub(crate) struct RulesRef(Option<Arc<Rules>>);

impl RulesRef {
    /// `rules`: the static defaults if they are those, else the rules `share` gives (shared
    /// with the breakers built alike, or their own).
    pub(crate) fn of(rules: Rules, share: impl FnOnce(Rules) -> Arc<Rules>) -> Self {
        if rules == *DEFAULTS {
            RulesRef(None)
        } else {
            RulesRef(Some(share(rules)))
        }
    }

    /// Whether these are a default breaker's rules, in their static.
    #[cfg(test)]
    pub(crate) fn is_static(&self) -> bool {
        self.0.is_none()
    }
}

impl From<Rules> for RulesRef {
    fn from(rules: Rules) -> Self {
        RulesRef::of(rules, Arc::new)
    }
}

impl From<Arc<Rules>> for RulesRef {
    fn from(rules: Arc<Rules>) -> Self {
        RulesRef(Some(rules))
    }
}

impl Deref for RulesRef {
    type Target = Rules;

    #[inline]
    fn deref(&self) -> &Rules {
        match &self.0 {
            Some(rules) => rules,
            None => &DEFAULTS,
        }
    }
}

/// The rules a machine runs by: the breaker's knobs after gobreaker's zero-means-default
/// rules were applied, and what the policy's capabilities ask of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Probes admitted in half-open, and consecutive successes that close it; at least 1.
    pub(super) max_requests: u64,
    /// The closed-state fixed window; 0 when counts are never cleared or the window rolls.
    pub(super) interval: Nanos,
    /// The rolling window's bucket period; 0 for a fixed window.
    pub(super) bucket_period: Nanos,
    /// Number of buckets of a rolling window (0 for a fixed window).
    pub(super) buckets: u64,
    /// A count window's length: the last this many results (0: no count window; the time
    /// window knobs are then zero).
    pub(super) count_window: u64,
    /// The configured open duration (before the policy's say).
    pub(super) timeout: Nanos,
    /// The longest any open period lasts (a forced open excepted).
    pub(super) max_open: Nanos,
    /// How an abandoned call counts in closed and in half-open.
    pub(super) abandoned: (AbandonedAs, AbandonedAs),
    /// Nothing trips it, not even a fatal result: an exempt key's breaker (it still counts).
    pub(super) never_trips: bool,
    /// Dry run: what it would reject is admitted as a shadow call, counted apart.
    pub(super) dry_run: bool,
    /// The policy's slow-call threshold (none without latencies).
    pub(super) slow_threshold: Option<Duration>,
    /// Whether half-open probes are judged on latency alone.
    pub(super) probes_on_latency: bool,
    /// With a health check (the open period ends when one passes): how long it may run
    /// before the next call takes its lease over; 0 without a health check.
    pub(super) check_timeout: Nanos,
    /// How long the probe slots of half-open may all be held (no probe admitted) before the
    /// next call that finds them taken starts the trial again; 0 means `timeout`.
    probe_timeout: Nanos,
    /// The longest open period of the backoff (each failed recovery doubles the period from
    /// `timeout`); 0 without a backoff.
    pub(super) backoff: Nanos,
    /// The spread of the open periods the machine computes itself (none: every one exact).
    pub(super) jitter: Jitter,
}

impl Rules {
    /// gobreaker's defaults: `max_requests` 0 means 1, `timeout` zero means 60 s, `interval`
    /// zero means counts are never cleared in closed (and `bucket_period` is then ignored).
    /// With a bucket period, the interval is rounded up to a whole number of buckets, at most
    /// [`MAX_BUCKETS`] of them; a window of one bucket is a fixed window of that length.
    pub(crate) fn new(
        max_requests: u32,
        interval: Duration,
        bucket_period: Duration,
        timeout: Duration,
    ) -> Self {
        let max_requests = u64::from(max_requests.max(1));
        let timeout = match saturating_nanos(timeout) {
            0 => saturating_nanos(Duration::from_secs(60)),
            t => t,
        };
        let interval = saturating_nanos(interval);
        let mut bucket_period = saturating_nanos(bucket_period);
        let (interval, bucket_period, buckets) = if interval == 0 || bucket_period == 0 {
            (interval, 0, 0)
        } else {
            if interval.div_ceil(bucket_period) > MAX_BUCKETS {
                bucket_period = interval.div_ceil(MAX_BUCKETS);
            }
            let buckets = interval.div_ceil(bucket_period);
            let window = buckets.saturating_mul(bucket_period);
            if buckets == 1 {
                (window, 0, 0)
            } else {
                (0, bucket_period, buckets)
            }
        };
        Self {
            max_requests,
            interval,
            bucket_period,
            buckets,
            count_window: 0,
            timeout,
            max_open: timeout.max(DEFAULT_MAX_OPEN),
            abandoned: (AbandonedAs::default(), AbandonedAs::default()),
            never_trips: false,
            dry_run: false,
            slow_threshold: None,
            probes_on_latency: false,
            check_timeout: 0,
            probe_timeout: 0,
            backoff: 0,
            jitter: Jitter::NONE,
        }
    }

    /// These rules, with a health check (or not) and its `check_timeout` (zero: 500 ms,
    /// brpc's `health_check_timeout_ms`).
    pub(crate) fn health_check(mut self, checked: bool, check_timeout: Duration) -> Self {
        self.check_timeout = match (checked, saturating_nanos(check_timeout)) {
            (false, _) => 0,
            (true, 0) => DEFAULT_CHECK_TIMEOUT,
            (true, t) => t,
        };
        self
    }

    /// Whether a health check revives the breaker: never in dry run, which goes half-open
    /// by its open period alone (as a replay does), and sends nothing of its own to the
    /// dependency.
    pub(super) fn checked(&self) -> bool {
        self.check_timeout > 0 && !self.dry_run
    }

    /// These rules, with half-open probe slots taken over once all have been held longer
    /// than `probe_timeout` (zero: the open `timeout`; `Duration::MAX`: never).
    pub(crate) fn probe_timeout(mut self, probe_timeout: Duration) -> Self {
        self.probe_timeout = saturating_nanos(probe_timeout);
        self
    }

    /// These rules, with each failed recovery doubling the open period from `timeout` up to
    /// `max` (zero: no backoff; at most the longest open period).
    pub(crate) fn backoff(mut self, max: Duration) -> Self {
        self.backoff = saturating_nanos(max);
        self
    }

    /// These rules, with each open period the machine computes itself drawn from
    /// `[period × (1 − fraction), period]` ([`Jitter`]; a fraction of zero: none).
    pub(crate) fn jitter(mut self, fraction: f64, seed: u64) -> Self {
        let jitter = Jitter::new(fraction, seed);
        // Without a spread, no seed: the rules of breakers built alike are equal whatever
        // their names, and shared.
        self.jitter = if jitter.is_exact() {
            Jitter::NONE
        } else {
            jitter
        };
        self
    }

    /// The open period after `failed` failed recoveries in a row: `timeout`, doubled for
    /// each up to the backoff's maximum (never below `timeout`); `timeout` without a backoff.
    pub(super) fn backed_off(&self, failed: u32) -> Nanos {
        if self.backoff == 0 || failed == 0 {
            return self.timeout;
        }
        let doubled = self
            .timeout
            .checked_shl(failed.min(63))
            .unwrap_or(Nanos::MAX);
        let doubled = if doubled >> failed.min(63) == self.timeout {
            doubled
        } else {
            Nanos::MAX
        };
        doubled.min(self.backoff.max(self.timeout))
    }

    /// Whether a takeover relieves the probes out of their slots, their verdicts still
    /// counting (no `probe_timeout` given), rather than writing them off (one given).
    pub(super) fn relieves_probes(&self) -> bool {
        self.probe_timeout == 0
    }

    /// How long the probe slots may all be held before the next call takes them over.
    pub(super) fn probe_slot_timeout(&self) -> Nanos {
        match self.probe_timeout {
            0 => self.timeout,
            t => t,
        }
    }

    /// These rules, with no open period longer than `max_open` (zero: the default, one hour
    /// or the timeout if longer; a shorter one than the timeout cuts the timeout too).
    pub(crate) fn max_open(mut self, max_open: Duration) -> Self {
        if !max_open.is_zero() {
            self.max_open = saturating_nanos(max_open);
            self.timeout = self.timeout.min(self.max_open);
        }
        self
    }

    /// These rules, counting over the last `n` results in the closed state (at most
    /// [`MAX_COUNT_WINDOW`]); a count window replaces any time window. Zero: none.
    pub(crate) fn count_window(mut self, n: u32) -> Self {
        if n > 0 {
            self.count_window = u64::from(n).min(MAX_COUNT_WINDOW);
            (self.interval, self.bucket_period, self.buckets) = (0, 0, 0);
        }
        self
    }

    /// These rules, with what the policy's capabilities ask of the machine: a slow-call
    /// threshold (only with latencies) and probes judged on latency alone.
    pub(crate) fn with_capabilities(mut self, caps: &Capabilities) -> Self {
        self.slow_threshold = caps.effective_slow_threshold();
        self.probes_on_latency = caps.probes_on_latency_alone;
        self
    }

    /// These knobs, for a breaker that nothing trips (`never_trips`): neither its policy nor
    /// a fatal result; the manual controls still apply.
    pub(crate) fn never_tripping(mut self, never_trips: bool) -> Self {
        self.never_trips = never_trips;
        self
    }

    /// These knobs, in dry run (or not): see [`Knobs::dry_run`].
    pub(crate) fn dry_running(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// These knobs, with abandoned calls counting as `closed` in the closed state and
    /// `half_open` in the half-open state.
    pub(crate) fn abandoned_as(mut self, closed: AbandonedAs, half_open: AbandonedAs) -> Self {
        self.abandoned = (closed, half_open);
        self
    }

    /// The longest any open period lasts (a forced open excepted), with the default rule
    /// applied: for a layer in front that must not hold a period longer than the machine.
    pub(crate) fn max_open_duration(&self) -> Duration {
        Duration::from_nanos(self.max_open)
    }

    /// Whether the closed-state window rolls bucket by bucket.
    pub(crate) fn rolls(&self) -> bool {
        self.buckets > 0
    }

    /// Whether the closed-state window is the last N results rather than a time window.
    pub(crate) fn by_count(&self) -> bool {
        self.count_window > 0
    }
}

impl From<&Knobs> for Rules {
    /// The rules of a breaker with `knobs` (before the policy's capabilities are added).
    fn from(knobs: &Knobs) -> Self {
        Self::new(
            knobs.max_requests,
            knobs.interval,
            knobs.bucket_period,
            knobs.timeout,
        )
        .max_open(knobs.max_open_duration)
        .abandoned_as(knobs.abandoned_as.closed, knobs.abandoned_as.half_open)
        .never_tripping(knobs.never_trips)
        .dry_running(knobs.dry_run)
        .count_window(knobs.count_window)
        .probe_timeout(knobs.probe_timeout)
        .backoff(knobs.backoff)
        .jitter(
            knobs.jitter.unwrap_or(0.0),
            knobs.jitter_seed.unwrap_or_else(|| seed_of(&knobs.name)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn zero_knobs_take_gobreakers_defaults() {
        let t = Rules::new(0, Duration::ZERO, ms(5), Duration::ZERO);
        assert_eq!(t.max_requests, 1);
        assert_eq!(t.timeout, 60_000 * MS);
        assert_eq!((t.interval, t.bucket_period, t.buckets), (0, 0, 0));
    }

    #[test]
    fn interval_rounds_up_to_whole_buckets() {
        let t = Rules::new(1, ms(1000), ms(300), ms(1));
        assert_eq!((t.bucket_period, t.buckets), (300 * MS, 4));
        // A bucket as long as the interval or longer is a fixed window of one bucket.
        let t = Rules::new(1, ms(1000), ms(1500), ms(1));
        assert_eq!((t.interval, t.buckets), (1500 * MS, 0));
    }

    #[test]
    fn bucket_count_is_bounded() {
        let t = Rules::new(1, Duration::from_secs(3600), Duration::from_nanos(1), ms(1));
        assert_eq!(t.buckets, MAX_BUCKETS);
        // 3600 s / 1024 rounded up to whole nanoseconds.
        assert_eq!(t.bucket_period, 3_515_625_000);
    }

    #[test]
    fn a_default_breakers_rules_are_read_from_their_static_and_others_are_shared() {
        let knobs = Knobs::default();
        let defaults = Rules::from(&knobs)
            .with_capabilities(&ConsecutiveFailures::default().capabilities())
            .health_check(false, knobs.check_timeout);
        let read = RulesRef::from(defaults);
        assert!(read.is_static());
        assert_eq!(*read, defaults);
        let longer = Rules::from(&Knobs {
            timeout: Duration::from_secs(61),
            ..Knobs::default()
        })
        .with_capabilities(&ConsecutiveFailures::default().capabilities());
        let mut shared = 0;
        let own = RulesRef::of(longer, |rules| {
            shared += 1;
            Arc::new(rules)
        });
        assert!(!own.is_static());
        assert_eq!((*own, shared), (longer, 1));
        assert_eq!(own.timeout, 61_000_000_000);
    }
}
