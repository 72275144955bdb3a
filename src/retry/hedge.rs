//! [`Hedge`]: when a call that has not answered gets a second attempt elsewhere, and how
//! many, paid for in the same budget as retries.

use std::sync::Arc;
use std::time::Duration;

use super::attempts::{Next, Stop};
use super::budget::RetryBudget;
use super::token_bucket::TokenBucket;
use crate::error::{ConfigError, Number};
use crate::metric_values::hedge_stats_decisions;
use crate::nanos::{saturating_nanos, Nanos};
use crate::sync::{AtomicU64, Ordering};

/// A hedging policy: when an attempt has not answered after a delay, another attempt goes
/// to another replica, and the first good answer wins; the others are cancelled, counted as
/// neither success nor failure (a cancelled attempt trips no breaker and skews no outlier
/// detection). Google's "The Tail at Scale" (a second request after the 95th percentile's
/// latency: BigTable's 99.9th percentile from 1 800 ms to 74 ms, for about 2 % more
/// requests); gRPC's `hedgingPolicy` (proposal A6); Polly's and failsafe-go's hedge.
///
/// - **When.** [`after`](Self::after) a fixed delay, or [`at_percentile`](Self::at_percentile)
///   `p` of the recent latencies: [`Pool::hedge`](crate::pool::Pool::hedge) keeps a
///   [`LatencyEstimate`](super::LatencyEstimate) per endpoint (no shared write per call) and
///   hedges after the median of the endpoints' estimates, so that one slow replica does not
///   raise the delay of all.
/// - **How many.** At most [`max_attempts`](Self::max_attempts) attempts a call, the first
///   included (2 by default: one hedge, Polly's default; gRPC's `maxAttempts`), each on an
///   endpoint the call has not tried.
/// - **Paid for.** Each hedge is withdrawn from a [`RetryBudget`]: the pool's
///   [retry](crate::pool::Pool::retry)'s when it has one and this hedge was given none (A6:
///   hedges and retries share the throttle), else this hedge's own
///   ([`budget`](Self::budget); [`RetryBudget::default`] otherwise: 20 % of the calls, 10 a
///   second). A [throttle](Self::throttle) (gRPC's retry throttling), if set, is asked too.
/// - **Never past the deadline**: no hedge starts once the call's deadline has passed.
/// - **A failure hurries the next one** (A6's non-fatal status): an attempt that fails while
///   attempts are left starts the next hedge at once, on the same budget.
///
/// Hedge only calls that may be made twice (idempotent ones), and not against a saturated
/// dependency: a hedge adds load, which the budget bounds but does not remove.
///
/// Clones share the counters ([`stats`](Self::stats)) and the budget.
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::{Hedge, Next, Stop};
/// use std::time::Duration;
///
/// let hedge = Hedge::after(Duration::from_millis(20)).max_attempts(3);
/// assert_eq!(hedge.delay(), Some(Duration::from_millis(20)));
/// hedge.validate()?;
///
/// // The core decision, sans IO: with one attempt out, a hedge may go (the default budget
/// // has its reserve of 10 a second).
/// assert!(matches!(hedge.next_hedge(1, None), Next::Retry { .. }));
/// assert_eq!(hedge.next_hedge(3, None), Next::Stop(Stop::Exhausted));
/// assert_eq!(hedge.next_hedge(1, Some(Duration::ZERO)), Next::Stop(Stop::Deadline));
///
/// let err = Hedge::at_percentile(1.5).validate().unwrap_err();
/// assert_eq!(err.field(), "hedge.percentile");
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Hedge {
    when: When,
    max_attempts: u32,
    /// The budget that pays for the hedges: the one given, or a default one.
    budget: RetryBudget,
    /// Whether [`budget`](Hedge::budget) gave it (a pool lends its retry's otherwise).
    budget_given: bool,
    throttle: Option<Arc<TokenBucket>>,
    counters: Arc<Counters>,
}

/// When a hedge is due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum When {
    /// After this many nanoseconds.
    After(Nanos),
    /// After this quantile of the recent latencies.
    Percentile(f64),
}

/// The most attempts a hedged call may make (gRPC's A6 clamps `maxAttempts` to 5; the pool
/// allows more, a budget bounds them all).
const MAX_ATTEMPTS: u32 = 100;

impl Hedge {
    /// A hedge after `delay` without an answer (Polly's default: 2 s). A zero delay sends
    /// every attempt at once (A6: a `hedgingDelay` of 0).
    pub fn after(delay: Duration) -> Self {
        Self::with(When::After(saturating_nanos(delay)))
    }

    /// A hedge after the `p`-th quantile of the recent latencies (0.95: the 95th
    /// percentile, The Tail at Scale's), `p` in (0, 1) ([`validate`](Self::validate) says
    /// when it is not). Before any latency is known, no hedge is made.
    pub fn at_percentile(p: f64) -> Self {
        Self::with(When::Percentile(p))
    }

    fn with(when: When) -> Self {
        Self {
            when,
            max_attempts: 2,
            budget: RetryBudget::default(),
            budget_given: false,
            throttle: None,
            counters: Arc::default(),
        }
    }

    /// At most `n` attempts a call, the first included (2 by default): `n − 1` hedges. 1
    /// makes no hedge; 0 is refused by [`validate`](Self::validate).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Pays for the hedges in `budget` (shared with its clones: give a retry the same one
    /// to bound hedges and retries together).
    #[must_use]
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = budget;
        self.budget_given = true;
        self
    }

    /// Asks `bucket` before each hedge (gRPC's retry throttling: no hedge while it holds
    /// half its tokens or fewer).
    #[must_use]
    pub fn throttle(self, bucket: TokenBucket) -> Self {
        self.throttle_shared(Arc::new(bucket))
    }

    /// [`throttle`](Self::throttle) on a bucket shared with others (A6: a channel's retries
    /// and hedges draw on the same tokens; give a [`Retry`](super::Retry) the same one with
    /// [`Retry::throttle_shared`](super::Retry::throttle_shared)).
    #[must_use]
    pub fn throttle_shared(mut self, bucket: Arc<TokenBucket>) -> Self {
        self.throttle = Some(bucket);
        self
    }

    /// Refuses a setting out of its range, naming it: `hedge.percentile` outside (0, 1),
    /// `hedge.max_attempts` outside [1, 100].
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first setting out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let When::Percentile(p) = self.when {
            if !(p > 0.0 && p < 1.0) {
                return Err(ConfigError::new(
                    "hedge.percentile",
                    Number(p),
                    "must be within (0, 1) (0.95: the 95th percentile)",
                ));
            }
        }
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(ConfigError::new(
                "hedge.max_attempts",
                self.max_attempts,
                "must be in [1, 100] (the first attempt included)",
            ));
        }
        Ok(())
    }

    /// The fixed delay, for a hedge [`after`](Self::after) one.
    pub fn delay(&self) -> Option<Duration> {
        match self.when {
            When::After(nanos) => Some(Duration::from_nanos(nanos)),
            When::Percentile(_) => None,
        }
    }

    /// The quantile, for a hedge [`at_percentile`](Self::at_percentile).
    pub fn percentile(&self) -> Option<f64> {
        match self.when {
            When::Percentile(p) => Some(p),
            When::After(_) => None,
        }
    }

    /// The most attempts a call makes, the first included.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The budget that pays for the hedges: the one given ([`budget`](Self::budget)), or
    /// this hedge's default one.
    pub fn hedge_budget(&self) -> &RetryBudget {
        &self.budget
    }

    /// Whether [`budget`](Self::budget) gave the budget (a pool lends its retry's to a hedge
    /// given none).
    pub fn budget_given(&self) -> bool {
        self.budget_given
    }

    /// The throttle, if set.
    pub fn hedge_throttle(&self) -> Option<&Arc<TokenBucket>> {
        self.throttle.as_ref()
    }

    /// Whether another attempt may go now, with `sent` attempts of the call sent so far and
    /// `left` of its deadline (`None`: no deadline), paid for in this hedge's own budget
    /// (the default one if it was given none): [`Next::Retry`] (with a zero wait) when it
    /// may, and the hedge is paid for; else why not. Counted in [`stats`](Self::stats).
    pub fn next_hedge(&self, sent: u32, left: Option<Duration>) -> Next {
        let next = self.decide(sent, left.map(saturating_nanos), &self.budget, None);
        self.count(next);
        next
    }

    /// [`next_hedge`](Self::next_hedge) on `budget` at `now` on its clock, `left` in
    /// nanoseconds: the pool's, not counted (the pool counts).
    pub(crate) fn decide(
        &self,
        sent: u32,
        left: Option<Nanos>,
        budget: &RetryBudget,
        now: Option<Nanos>,
    ) -> Next {
        if sent >= self.max_attempts {
            return Next::Stop(Stop::Exhausted);
        }
        if left == Some(0) {
            return Next::Stop(Stop::Deadline);
        }
        if let Some(throttle) = &self.throttle {
            if !throttle.allows_retry() {
                return Next::Stop(Stop::Throttled);
            }
        }
        let paid = match now {
            Some(now) => budget.try_withdraw_at(now),
            None => budget.try_withdraw(),
        };
        if paid {
            Next::Retry {
                after: Duration::ZERO,
            }
        } else {
            Next::Stop(Stop::Budget)
        }
    }

    /// Counts what a hedge decided.
    pub(crate) fn count(&self, next: Next) {
        let counter = match next {
            Next::Retry { .. } => &self.counters.hedges,
            Next::Stop(Stop::Budget) => &self.counters.budget_denied,
            Next::Stop(Stop::Throttled) => &self.counters.throttled,
            Next::Stop(Stop::Deadline) => &self.counters.past_deadline,
            Next::Stop(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a hedged call's end in [`stats`](Self::stats): answered first by a hedge
    /// (`won`), and its `cancelled` attempts. For integrations that drive their own
    /// attempts ([`Pool::hedge`](crate::pool::Pool::hedge) counts its calls).
    pub fn count_end(&self, won: bool, cancelled: u64) {
        if won {
            self.counters.won.fetch_add(1, Ordering::Relaxed);
        }
        if cancelled > 0 {
            self.counters
                .cancelled
                .fetch_add(cancelled, Ordering::Relaxed);
        }
    }

    /// What this hedge (and its clones) decided so far.
    pub fn stats(&self) -> HedgeStats {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let c = &self.counters;
        HedgeStats {
            hedges: n(&c.hedges),
            won: n(&c.won),
            cancelled: n(&c.cancelled),
            budget_denied: n(&c.budget_denied),
            throttled: n(&c.throttled),
            past_deadline: n(&c.past_deadline),
        }
    }
}

/// What a [`Hedge`] (and its clones) decided since it was made. Each count never goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HedgeStats {
    /// Hedges sent (paid for in the budget).
    pub hedges: u64,
    /// Calls answered first by a hedge rather than by their first attempt.
    pub won: u64,
    /// Attempts cancelled because another answered first (counted neither way).
    pub cancelled: u64,
    /// Hedges the budget refused.
    pub budget_denied: u64,
    /// Hedges the throttle refused.
    pub throttled: u64,
    /// Hedges not sent because the call's deadline had passed.
    pub past_deadline: u64,
}

impl HedgeStats {
    /// Its counts by the label metrics give them: `hedged` (an attempt sent), `won`,
    /// `cancelled`, `budget_denied`, `throttled`, `past_deadline` (the Prometheus
    /// collector's `circuit_breaker_hedge_decisions_total{decision}`, OpenTelemetry's
    /// `circuit_breaker.hedge.decisions`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::Hedge;
    /// use std::time::Duration;
    ///
    /// let hedge = Hedge::after(Duration::from_millis(20));
    /// let decisions = hedge.stats().decisions();
    /// assert_eq!(decisions[0], ("hedged", 0));
    /// assert_eq!(decisions.len(), 6);
    /// ```
    pub fn decisions(&self) -> [(&'static str, u64); 6] {
        hedge_stats_decisions(
            self.hedges,
            self.won,
            self.cancelled,
            self.budget_denied,
            self.throttled,
            self.past_deadline,
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    hedges: AtomicU64,
    won: AtomicU64,
    cancelled: AtomicU64,
    budget_denied: AtomicU64,
    throttled: AtomicU64,
    past_deadline: AtomicU64,
}
