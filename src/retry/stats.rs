//! [`RetryStats`]: what a [`Retry`](super::Retry) decided, counted apart from the calls.

use crate::metric_values::retry_stats_decisions;
use crate::sync::{AtomicU64, Ordering};

use super::attempts::{Next, Stop};

/// What a [`Retry`](super::Retry) (and its clones) decided since it was made: its
/// retries, and the retries it did not make, by reason. Each count never goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RetryStats {
    /// Retries made (paid for in the budget).
    pub retries: u64,
    /// Retries the budget refused ([`Stop::Budget`]).
    pub budget_denied: u64,
    /// Calls that failed on their last attempt ([`Stop::Exhausted`]).
    pub exhausted: u64,
    /// Retries not made because they could not finish before the deadline
    /// ([`Stop::Deadline`]).
    pub past_deadline: u64,
    /// Retries the server refused (a negative gRPC pushback, [`Stop::Pushback`]).
    pub pushed_back: u64,
    /// Retries the throttle refused ([`Stop::Throttled`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub throttled: u64,
}

impl RetryStats {
    /// Its counts by the label metrics give them: `retried`, `budget_denied`, `exhausted`,
    /// `past_deadline`, `pushed_back`, `throttled` (the Prometheus collector's
    /// `circuit_breaker_retry_decisions_total{decision}`, OpenTelemetry's
    /// `circuit_breaker.retry.decisions`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::Retry;
    ///
    /// let retry = Retry::new(3).unwrap();
    /// let decisions = retry.stats().decisions();
    /// assert_eq!(decisions[0], ("retried", 0));
    /// assert_eq!(decisions.len(), 6);
    /// ```
    pub fn decisions(&self) -> [(&'static str, u64); 6] {
        retry_stats_decisions(
            self.retries,
            self.budget_denied,
            self.exhausted,
            self.past_deadline,
            self.pushed_back,
            self.throttled,
        )
    }
}

/// The counters behind [`RetryStats`], shared by a retry's clones. Written only when an
/// attempt failed: nothing on a successful call's path.
#[derive(Debug, Default)]
pub(super) struct Counters {
    retries: AtomicU64,
    budget_denied: AtomicU64,
    exhausted: AtomicU64,
    past_deadline: AtomicU64,
    pushed_back: AtomicU64,
    throttled: AtomicU64,
}

impl Counters {
    pub(super) fn count(&self, next: Next) {
        let counter = match next {
            Next::Retry { .. } => &self.retries,
            Next::Stop(Stop::Budget) => &self.budget_denied,
            Next::Stop(Stop::Exhausted) => &self.exhausted,
            Next::Stop(Stop::Deadline) => &self.past_deadline,
            Next::Stop(Stop::Pushback) => &self.pushed_back,
            Next::Stop(Stop::Throttled) => &self.throttled,
            Next::Stop(Stop::NotRetryable | Stop::Rejected) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn stats(&self) -> RetryStats {
        RetryStats {
            retries: self.retries.load(Ordering::Relaxed),
            budget_denied: self.budget_denied.load(Ordering::Relaxed),
            exhausted: self.exhausted.load(Ordering::Relaxed),
            past_deadline: self.past_deadline.load(Ordering::Relaxed),
            pushed_back: self.pushed_back.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }
}
