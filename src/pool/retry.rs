//! Retries in a pool ([`Pool::retry`]): a failed call goes again to another endpoint, at
//! once, each attempt a pick with its own verdict, within the call's deadline and the
//! retry's budget.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::breaker::gate::{self, Ready};
use crate::observe::Observer;
use crate::policy::TripPolicy;
use crate::retry::{Next, Retry, Stop, TokenBucket};

use super::census::walk;
use super::choose::random;
use super::endpoint::Endpoint;
use super::pick::Pick;
use super::picking::{admit, Choice};
use super::stats::Stats;
use super::Pool;

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + std::fmt::Display,
{
    /// Retries a call that failed on another endpoint, at once, as [`retry`](Retry) decides
    /// ([`Pool::call`] only): what HAProxy's `retries` with `option redispatch` does, on the
    /// pool's own view of its endpoints.
    ///
    /// - **Only what can help.** A result the classifier judged a failure (an overload
    ///   included) is retried; a success, an exclusion, a deferred verdict or the pool's
    ///   [`NoEndpoint`](crate::Rejected::NoEndpoint) are returned as they are. Set it only
    ///   for calls that may be made twice (idempotent ones).
    /// - **Elsewhere.** The retry goes to an endpoint this call has not tried that admits a
    ///   call now, or, all of them tried, to one other than the endpoint that just failed;
    ///   with none, the last failure is the call's result. No backoff: another replica need
    ///   not wait for this one ([`Attempts::elsewhere`](crate::retry::Attempts::elsewhere)).
    /// - **Within the deadline.** With a [`deadline`](Pool::deadline), it is the whole
    ///   call's: no retry is made that the retry's
    ///   [`min_attempt_time`](Retry::min_attempt_time) would take past it.
    /// - **Not while failures are everywhere.** The retry's
    ///   [throttle](Retry::throttle) (gRPC's retry throttling; the pool gives a retry that
    ///   has none a bucket of 20 tokens, a tenth of a token back a success) records each
    ///   attempt that fails, and the calls that ended well, counted lazily from the
    ///   endpoints' own counts (nothing written on a successful call's path): once failures
    ///   outweigh successes by half the bucket, no retry goes out until the successes make
    ///   up for them. A sick replica among healthy ones costs a few tokens (its breaker
    ///   trips after six failures); every replica shedding load (a retry storm's start)
    ///   drains the bucket within a hundred calls.
    /// - **Within the budget.** Each retry is paid for in the retry's
    ///   [`RetryBudget`](crate::retry::RetryBudget) (20 % of the calls and 10 a second by
    ///   default), asked last, once another endpoint is known to admit calls: when every
    ///   endpoint fails, the retries stay within the budget, and the pool still fails fast.
    ///
    /// Counted in [`PoolStats`](super::PoolStats) (`retries`, `retries_budget_denied`,
    /// `retries_exhausted`), in the [`Totals`](crate::Totals) of the breaker whose attempt
    /// failed, and in the retry's own [`stats`](Retry::stats).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::OkIsSuccess;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::retry::Retry;
    /// use lazybreaker::Breaker;
    ///
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Waker};
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) { return v; } }
    /// # }
    /// let pool = Pool::new(|_: &&str| Breaker::builder()).retry(Retry::new(3)?);
    /// pool.set(["sick", "well"]);
    ///
    /// // Whichever endpoint the pool picks first, every call is answered by "well".
    /// for _ in 0..10 {
    ///     let got = block_on(pool.call(
    ///         |addr| async move { if addr == "sick" { Err("503") } else { Ok(addr) } },
    ///         OkIsSuccess,
    ///     ));
    ///     assert_eq!(got.unwrap(), "well");
    /// }
    /// assert!(pool.stats().retries >= 1);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub fn retry(mut self, retry: Retry) -> Self {
        let retry = match retry.retry_throttle() {
            Some(_) => retry,
            None => retry.throttle(default_throttle()),
        };
        self.retry = Some(retry);
        self
    }

    /// The retry, if [`retry`](Pool::retry) set one.
    pub fn retry_policy(&self) -> Option<&Retry> {
        self.retry.as_ref()
    }

    /// An attempt of [`Pool::call`] failed: counted in `throttle`, with the calls that
    /// ended well since it was last fed (the picks ended, less the failures seen), unless
    /// another caller is feeding it.
    pub(super) fn feed_throttle(&self, throttle: &TokenBucket) {
        throttle.record_failure();
        let failures = self.shared.retry_failures.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(mut fed) = self.shared.throttle_fed.try_lock() else {
            return;
        };
        let ended = self.endpoints.load().iter().map(|e| e.ended()).sum::<u64>();
        let (ended_before, failures_before) = *fed;
        let successes = ended
            .saturating_sub(ended_before)
            .saturating_sub(failures - failures_before);
        *fed = (ended, failures);
        drop(fed);
        throttle.record(successes, 0);
    }

    /// The endpoint a retry of a call that tried `tried` (the last one just failed) goes
    /// to: one not tried that admits a call now, or, all tried, one other than the last.
    pub(super) fn other_for_retry(&self, tried: &[K]) -> Option<Arc<Endpoint<K, P, O>>> {
        let endpoints = self.endpoints.load();
        let r = random();
        // Its breaker and its limit: a retry with no place to go is not paid for.
        let admits =
            |e: &&Arc<Endpoint<K, P, O>>| gate::ready(&e.breaker) == Ready::Passes && !e.at_limit();
        let fresh = walk(&endpoints, r)
            .filter(|e| !tried.contains(&e.key))
            .find(admits);
        fresh
            .or_else(|| {
                let last = tried.last();
                walk(&endpoints, r)
                    .filter(|e| Some(&e.key) != last)
                    .find(admits)
            })
            .cloned()
    }

    /// A pick of `endpoint` for a retry (no health check: the endpoint admits calls), or of
    /// any other that admits one if it turned full meanwhile.
    pub(super) fn pick_for_retry(
        &self,
        endpoint: &Arc<Endpoint<K, P, O>>,
        tried: &[K],
    ) -> Option<Pick<K, P, O>> {
        match admit(endpoint, false, None) {
            Some(Choice::Pick(pick)) => Some(pick),
            _ => {
                let other = self.other_for_retry(tried)?;
                match admit(&other, false, None) {
                    Some(Choice::Pick(pick)) => Some(pick),
                    _ => None,
                }
            }
        }
    }
}

/// The throttle a pool gives a retry that has none: 20 tokens (twice gRPC's usual 10, so
/// that a sick replica's six failures before its breaker trips leave room), a tenth back a
/// success.
fn default_throttle() -> TokenBucket {
    match TokenBucket::new(20.0, 0.1) {
        Ok(bucket) => bucket,
        Err(_) => unreachable!("20 tokens, a tenth back: valid"),
    }
}

impl Stats {
    /// Counts what a retry decided after a failed attempt.
    pub(crate) fn count_retry(&self, next: Next) {
        let counter = match next {
            Next::Retry { .. } => &self.retries,
            Next::Stop(Stop::Budget) => &self.retries_budget_denied,
            Next::Stop(Stop::Exhausted) => &self.retries_exhausted,
            Next::Stop(Stop::Throttled) => &self.retries_throttled,
            Next::Stop(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
