//! [`Retry`]: how many attempts, on what budget, after what wait; the decisions, with the
//! waits left to the caller's runtime.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use super::attempts::{Attempts, Cause, Next, Stop};
use super::backoff::{self, Backoff};
use super::budget::RetryBudget;
use super::stats::{Counters, RetryStats};
use super::token_bucket::TokenBucket;
use crate::error::{ConfigError, Number};
use crate::nanos::{saturating_nanos, Nanos};
use crate::sync::{AtomicU64, Ordering};

/// A retry policy: at most `max_attempts` attempts a call, each retry paid for in a
/// [`RetryBudget`], after an exponential backoff with full jitter, and only where a retry
/// can help.
///
/// A call is retried only if all of these hold, checked in this order:
///
/// 1. the caller marked it retryable ([`Attempts::retryable`]: HTTP integrations retry
///    safe and idempotent methods only, by default);
/// 2. the attempt failed as the classifier judged it, or the server said it is overloaded
///    ([`Cause`]), and it was not a breaker's rejection, which a retry would meet again;
/// 3. attempts are left;
/// 4. the server did not say *do not retry* (a negative gRPC pushback);
/// 5. the wait (the backoff's draw, at least the server's `Retry-After`, exactly a gRPC
///    pushback) and [`min_attempt_time`](Self::min_attempt_time) end before the call's
///    deadline;
/// 6. the [throttle](Self::throttle), if set, holds more than half its tokens;
/// 7. the budget has room ([`RetryBudget::try_withdraw`]), asked last, so that only a
///    retry that goes out is paid for.
///
/// The `n`-th retry waits a draw in `[0, min(max, initial × 2^(n-1)))` (full jitter, as
/// gRPC's retry policy computes it), from a stream seeded per call: a [`seed`](Self::seed)
/// given, the same failures in the same order draw the same waits (a replay). The policy only
/// computes: the caller waits on its own runtime (the tower, reqwest and gRPC integrations
/// do), and [`Pool::retry`](crate::pool::Pool::retry) sends a retry to another endpoint at
/// once.
///
/// Clones share the budget, the counters ([`stats`](Self::stats)) and the stream of calls.
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::{Cause, Next, Retry, RetryBudget, Stop};
/// use lazybreaker::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let retry = Retry::new(3)?
///     .budget(RetryBudget::new(0.2)?.clock(clock.clone()))
///     .seed(7);
///
/// // A call with 300 ms to live; its first attempt failed.
/// let mut attempts = retry.start(Some(Duration::from_millis(300)));
/// let Next::Retry { after } = retry.next(&mut attempts, Cause::Failure) else {
///     panic!("a failure within the budget is retried");
/// };
/// assert!(after < Duration::from_millis(10), "the first wait is below 10 ms");
///
/// // The server answers 503 with `Retry-After: 1`: past the deadline, no retry.
/// let stop = retry.next(&mut attempts, Cause::Overload { retry_after: Some(Duration::from_secs(1)) });
/// assert_eq!(stop, Next::Stop(Stop::Deadline));
/// assert_eq!(retry.stats().retries, 1);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Retry {
    max_attempts: u32,
    budget: RetryBudget,
    backoff: Backoff,
    min_attempt_time: Duration,
    seed: u64,
    throttle: Option<Arc<TokenBucket>>,
    shared: Arc<Shared>,
}

/// What a retry's clones share.
#[derive(Debug, Default)]
struct Shared {
    /// Calls that waited: each one's stream is the seed's and its number's.
    calls: AtomicU64,
    counters: Counters,
}

/// The most attempts a call may make.
const MAX_ATTEMPTS: u32 = 100;

impl Retry {
    /// At most `max_attempts` attempts a call, the first included (1: never retry; gRPC's
    /// `maxAttempts`), on the default budget ([`RetryBudget::default`]: 20 %, 10 a second,
    /// 10 s), waiting 10 ms doubling up to 1 s with full jitter, seeded at random.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `max_attempts` unless it is in [1, 100].
    pub fn new(max_attempts: u32) -> Result<Self, ConfigError> {
        if !(1..=MAX_ATTEMPTS).contains(&max_attempts) {
            return Err(ConfigError::new(
                "max_attempts",
                max_attempts,
                "must be in [1, 100] (the first attempt included)",
            ));
        }
        Ok(Self {
            max_attempts,
            budget: RetryBudget::default(),
            backoff: Backoff::DEFAULT,
            min_attempt_time: Duration::ZERO,
            seed: RandomState::new().hash_one(0x5eed_u64),
            throttle: None,
            shared: Arc::default(),
        })
    }

    /// The budget that pays for the retries (shared with its clones: give the same budget
    /// to every retry towards one dependency). Its clock is the one the retry reads.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = budget;
        self
    }

    /// The backoff: the first retry waits a draw below `initial`, each next one below
    /// twice the last ceiling (see [`backoff_multiplier`](Self::backoff_multiplier)), never
    /// above `max` (10 ms and 1 s by default). A zero `initial` retries at once.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff.initial = initial;
        self.backoff.max = max.max(initial);
        self
    }

    /// How the backoff's ceiling grows from one retry to the next (2 by default; gRPC's
    /// `backoffMultiplier`; below 1, it shrinks, as gRPC allows).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for field `backoff_multiplier` unless it is a finite number above 0.
    pub fn backoff_multiplier(mut self, multiplier: f64) -> Result<Self, ConfigError> {
        if !multiplier.is_finite() || multiplier <= 0.0 {
            return Err(ConfigError::new(
                "backoff_multiplier",
                Number(multiplier),
                "must be a finite number above 0",
            ));
        }
        self.backoff.multiplier = multiplier;
        Ok(self)
    }

    /// The least time an attempt needs (0 by default): a retry is not made unless its wait
    /// and this much end before the call's deadline. Set it to the dependency's usual
    /// latency, so that a retry that would only be cut off by the deadline is not sent.
    pub fn min_attempt_time(mut self, time: Duration) -> Self {
        self.min_attempt_time = time;
        self
    }

    /// The seed of the waits' draws (random by default): with a seed, the same failures in
    /// the same order draw the same waits. Starts the numbering of calls afresh.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.shared = Arc::default();
        self
    }

    /// Throttles the retries as gRPC does (proposal A6): none goes out while `bucket` holds
    /// half its tokens or fewer ([`Stop::Throttled`]). The caller records the results in
    /// it ([`TokenBucket::record_failure`], [`record_success`](TokenBucket::record_success));
    /// [`Pool::retry`](crate::pool::Pool::retry) records its calls' in the throttle it is
    /// given, or in one of its own. Shared by the retry's clones.
    pub fn throttle(self, bucket: TokenBucket) -> Self {
        self.throttle_shared(Arc::new(bucket))
    }

    /// [`throttle`](Self::throttle) on a bucket shared with others (A6: a channel's
    /// retries and hedges draw on the same tokens, see
    /// [`Hedge::throttle_shared`](super::Hedge::throttle_shared)).
    pub fn throttle_shared(mut self, bucket: Arc<TokenBucket>) -> Self {
        self.throttle = Some(bucket);
        self
    }

    /// The throttle, if [`throttle`](Self::throttle) set one.
    pub fn retry_throttle(&self) -> Option<&Arc<TokenBucket>> {
        self.throttle.as_ref()
    }

    /// The most attempts a call makes, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The budget that pays for the retries.
    pub fn retry_budget(&self) -> &RetryBudget {
        &self.budget
    }

    /// The retries made and refused so far, by this retry and its clones.
    pub fn stats(&self) -> RetryStats {
        self.shared.counters.stats()
    }

    /// The budget's clock reading: the time [`next_at`](Self::next_at) and
    /// [`start_at`](Self::start_at) take.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.budget.now())
    }

    /// A call starts: it is deposited in the budget, and has `within` to finish (its
    /// deadline), if given. Reads the budget's clock.
    #[inline]
    pub fn start(&self, within: Option<Duration>) -> Attempts {
        if within.is_none() && self.budget.is_fed() {
            // Nothing to deposit, no deadline: no clock to read.
            return Attempts::first(None);
        }
        self.start_at(self.now(), within)
    }

    /// [`start`](Self::start) at `now` (a reading of the budget's clock).
    #[inline]
    pub fn start_at(&self, now: Duration, within: Option<Duration>) -> Attempts {
        let now = saturating_nanos(now);
        self.budget.deposit_at(now);
        Attempts::first(within.map(|within| now.saturating_add(saturating_nanos(within))))
    }

    /// What comes after an attempt that failed for `cause`: a retry (paid for, and counted
    /// in `attempts`) after a wait, or a stop and why. Reads the budget's clock.
    pub fn next(&self, attempts: &mut Attempts, cause: Cause) -> Next {
        self.next_at(attempts, cause, self.now())
    }

    /// [`next`](Self::next) at `now` (a reading of the budget's clock).
    pub fn next_at(&self, attempts: &mut Attempts, cause: Cause, now: Duration) -> Next {
        let next = self.decide(attempts, cause, saturating_nanos(now));
        self.shared.counters.count(next);
        if let Next::Retry { .. } = next {
            attempts.made += 1;
        }
        next
    }

    /// A stream of draws for a call that waits: the seed's and the number of the calls
    /// that waited before it (numbered at their first wait, not at their start: nothing
    /// shared is written for a call that succeeds).
    fn stream(&self) -> u64 {
        let waited = self.shared.calls.fetch_add(1, Ordering::Relaxed);
        let mut stream = self.seed ^ waited.wrapping_mul(0xd134_2543_de82_ef95);
        backoff::next(&mut stream);
        // Never the mark of no stream (0 draws as 1 does: one seed in 2^64).
        stream.max(1)
    }

    fn decide(&self, attempts: &mut Attempts, cause: Cause, now: Nanos) -> Next {
        if !attempts.retryable {
            return Next::Stop(Stop::NotRetryable);
        }
        if cause == Cause::Rejected {
            return Next::Stop(Stop::Rejected);
        }
        if attempts.made >= self.max_attempts {
            return Next::Stop(Stop::Exhausted);
        }
        if cause == Cause::Pushback(None) {
            return Next::Stop(Stop::Pushback);
        }
        let wait = if attempts.elsewhere {
            Duration::ZERO
        } else {
            if attempts.stream == Attempts::NO_STREAM {
                attempts.stream = self.stream();
            }
            let drawn = self
                .backoff
                .wait(attempts.made, backoff::next(&mut attempts.stream));
            match cause {
                Cause::Pushback(Some(exactly)) => exactly,
                Cause::Overload {
                    retry_after: Some(at_least),
                } => drawn.max(at_least),
                _ => drawn,
            }
        };
        if let Some(deadline) = attempts.deadline() {
            let deadline = saturating_nanos(deadline);
            let done = now
                .saturating_add(saturating_nanos(wait))
                .saturating_add(saturating_nanos(self.min_attempt_time));
            if done >= deadline {
                return Next::Stop(Stop::Deadline);
            }
        }
        if self.throttle.as_ref().is_some_and(|t| !t.allows_retry()) {
            return Next::Stop(Stop::Throttled);
        }
        if !self.budget.try_withdraw_at(now) {
            return Next::Stop(Stop::Budget);
        }
        Next::Retry { after: wait }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const MS: Duration = Duration::from_millis(1);

    fn retry(max_attempts: u32, clock: &ManualClock) -> Retry {
        Retry::new(max_attempts)
            .unwrap()
            .budget(RetryBudget::new(0.2).unwrap().clock(clock.clone()))
            .seed(1)
    }

    fn waits(retry: &Retry, cause: Cause) -> Vec<Duration> {
        let mut attempts = retry.start(None);
        let mut waits = Vec::new();
        while let Next::Retry { after } = retry.next(&mut attempts, cause) {
            waits.push(after);
        }
        waits
    }

    #[test]
    fn a_failure_is_retried_until_the_attempts_run_out() {
        let clock = ManualClock::new();
        let retry = retry(4, &clock);
        let waits = waits(&retry, Cause::Failure);
        assert_eq!(waits.len(), 3, "four attempts: three retries");
        for (n, wait) in waits.iter().enumerate() {
            assert!(*wait < MS * (10 << n), "retry {}: {wait:?}", n + 1);
        }
        let stats = retry.stats();
        assert_eq!((stats.retries, stats.exhausted), (3, 1));
    }

    #[test]
    fn a_seed_draws_the_same_waits_again() {
        let clock = ManualClock::new();
        let first = waits(&retry(5, &clock), Cause::Failure);
        let again = waits(&retry(5, &clock), Cause::Failure);
        assert_eq!(first, again);
        let other = waits(&retry(5, &clock).seed(2), Cause::Failure);
        assert_ne!(first, other);
    }

    #[test]
    fn rejections_and_calls_not_retryable_are_not_retried() {
        let clock = ManualClock::new();
        let retry = retry(3, &clock);
        let mut attempts = retry.start(None);
        assert_eq!(
            retry.next(&mut attempts, Cause::Rejected),
            Next::Stop(Stop::Rejected)
        );
        let mut once = retry.start(None).retryable(false);
        assert_eq!(
            retry.next(&mut once, Cause::Failure),
            Next::Stop(Stop::NotRetryable)
        );
        assert_eq!(retry.stats(), RetryStats::default(), "nothing to count");
        assert_eq!(retry.retry_budget().balance(), 100, "nothing spent");
    }

    #[test]
    fn the_server_sets_the_wait_or_stops_the_call() {
        let clock = ManualClock::new();
        let retry = retry(5, &clock);
        let mut attempts = retry.start(Some(MS * 300));
        assert_eq!(
            retry.next(&mut attempts, Cause::Pushback(Some(MS * 120))),
            Next::Retry { after: MS * 120 },
            "a pushback is the wait, exactly"
        );
        assert_eq!(
            retry.next(
                &mut attempts,
                Cause::Overload {
                    retry_after: Some(MS * 50)
                }
            ),
            Next::Retry { after: MS * 50 },
            "a Retry-After is the least wait (the draw is below 20 ms)"
        );
        clock.advance(MS * 250);
        assert_eq!(
            retry.next(
                &mut attempts,
                Cause::Overload {
                    retry_after: Some(MS * 50)
                }
            ),
            Next::Stop(Stop::Deadline),
            "250 + 50 reaches the deadline"
        );
        assert_eq!(
            retry.next(&mut attempts, Cause::Pushback(None)),
            Next::Stop(Stop::Pushback)
        );
        let stats = retry.stats();
        assert_eq!(
            (stats.retries, stats.past_deadline, stats.pushed_back),
            (2, 1, 1)
        );
    }

    #[test]
    fn the_least_attempt_time_counts_against_the_deadline() {
        let clock = ManualClock::new();
        let retry = retry(3, &clock).backoff(Duration::ZERO, Duration::ZERO);
        let mut attempts = retry.start(Some(MS * 100));
        clock.advance(MS * 70);
        let tight = retry.clone().min_attempt_time(MS * 30);
        assert_eq!(
            tight.next(&mut attempts.clone(), Cause::Failure),
            Next::Stop(Stop::Deadline)
        );
        assert_eq!(
            retry.next(&mut attempts, Cause::Failure),
            Next::Retry {
                after: Duration::ZERO
            }
        );
    }

    #[test]
    fn elsewhere_goes_at_once_and_the_budget_says_last() {
        let clock = ManualClock::new();
        let retry = Retry::new(3).unwrap().budget(
            RetryBudget::new(0.5)
                .unwrap()
                .min_retries_per_second(0)
                .clock(clock.clone()),
        );
        let mut first = retry.start(Some(MS * 300)).elsewhere(true);
        let mut second = retry.start(Some(MS * 300)).elsewhere(true);
        let overload = Cause::Overload {
            retry_after: Some(Duration::from_secs(5)),
        };
        assert_eq!(
            retry.next(&mut first, overload),
            Next::Retry {
                after: Duration::ZERO
            },
            "another replica: its Retry-After is not this one's"
        );
        assert_eq!(
            retry.next(&mut second, Cause::Failure),
            Next::Stop(Stop::Budget),
            "50 % of two calls is one retry"
        );
        assert_eq!(retry.stats().budget_denied, 1);
    }

    #[test]
    fn a_drained_throttle_stops_retries_before_the_budget_pays() {
        let clock = ManualClock::new();
        let retry = retry(3, &clock).throttle(TokenBucket::new(4.0, 0.5).unwrap());
        let throttle = Arc::clone(retry.retry_throttle().unwrap());
        let mut attempts = retry.start(None);
        throttle.record_failure();
        assert!(matches!(
            retry.next(&mut attempts, Cause::Failure),
            Next::Retry { .. }
        ));
        throttle.record_failure(); // 2 of 4 left: half
        let balance = retry.retry_budget().balance();
        assert_eq!(
            retry.next(&mut attempts, Cause::Failure),
            Next::Stop(Stop::Throttled)
        );
        assert_eq!(retry.retry_budget().balance(), balance, "nothing paid");
        throttle.record_success();
        assert!(matches!(
            retry.next(&mut attempts, Cause::Failure),
            Next::Retry { .. }
        ));
        assert_eq!(retry.stats().throttled, 1);
    }

    #[test]
    fn bad_settings_name_their_field() {
        for n in [0, 101] {
            assert_eq!(Retry::new(n).unwrap_err().field(), "max_attempts");
        }
        for m in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = Retry::new(2).unwrap().backoff_multiplier(m).unwrap_err();
            assert_eq!(err.field(), "backoff_multiplier");
        }
    }
}
