//! [`Pool::call`]: pick, call, classify and record in one step, so that no result is
//! forgotten.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::time::Duration;

use crate::breaker::gate;
use crate::breaker::BreakerSeam;
use crate::classify::Classify;
use crate::error::Error;
use crate::observe::Observer;
use crate::outcome::Outcome;
use crate::policy::TripPolicy;
use crate::retry::{Cause, Next};

use super::Pool;

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + std::fmt::Display,
{
    /// Picks an endpoint ([`pick_async`](Pool::pick_async): a due health check runs
    /// beside the calls), makes the call `call` builds for its key, and records the result
    /// as `classify` judges it ([`OkIsSuccess`](crate::classify::OkIsSuccess), a closure
    /// from `&Result` to [`Outcome`], an HTTP
    /// [`StatusRules`](crate::http::StatusRules), `lazybreaker_reqwest::ResponseRules` for a
    /// `reqwest` client's `send()`, …): the one-line way to call through a pool, with
    /// nothing to forget.
    ///
    /// - Nothing is built for a call the pool cannot take: `call` runs only with a pick.
    /// - A classifier's [`overloaded`](Classify::overloaded) answer (a 503 with
    ///   `Retry-After`) counts as the pool's [overload](super::Pick::overloaded), and its
    ///   [`open_for`](Classify::open_for) opens the endpoint's breaker for that long.
    /// - A panic of the call counts as the endpoint's failure and continues; dropped before
    ///   the call completes (a timeout around this future), the call is abandoned (an
    ///   exclusion): put the deadline inside the call, and give it to the pool
    ///   ([`deadline`](Pool::deadline)) so that a hung endpoint is cut off.
    ///
    /// # Errors
    ///
    /// [`Error::Rejected`] with [`Rejected::NoEndpoint`](crate::Rejected::NoEndpoint) (and
    /// its `retry_after`) when no endpoint can take the call: serve the fallback (a 503 with
    /// `Retry-After`); [`Error::Inner`] with the call's own error.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::OkIsSuccess;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::{Breaker, Error, ManualClock, Rejected};
    ///
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Waker};
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) { return v; } }
    /// # }
    /// let pool = Pool::new(|_: &&str| Breaker::builder()).clock(ManualClock::new());
    /// pool.set(["10.0.0.1:80", "10.0.0.2:80"]);
    ///
    /// // A real call would send a request to `addr` (reqwest, a database client, …).
    /// let got = block_on(pool.call(|addr| async move { Ok::<_, String>(addr.len()) }, OkIsSuccess));
    /// assert_eq!(got.unwrap(), 11);
    ///
    /// pool.set(Vec::<&str>::new());
    /// let got = block_on(pool.call(|_| async { Ok::<_, String>(0) }, OkIsSuccess));
    /// assert!(matches!(got, Err(Error::Rejected(Rejected::NoEndpoint { .. }))));
    /// ```
    pub async fn call<F, Fut, T, E, C>(&self, mut call: F, classify: C) -> Result<T, Error<E>>
    where
        F: FnMut(K) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        if let Some(hedging) = &self.hedging {
            return self.call_hedged(hedging, call, classify).await;
        }
        // The call is deposited in the retry's budget before its pick: a budget clock of the
        // user's that panics then leaves no pick to settle.
        let retrying = self.retry.as_ref().map(|retry| {
            let within = (self.deadline > 0).then(|| Duration::from_nanos(self.deadline));
            (retry, retry.start(within).elsewhere(true))
        });
        let mut pick = self.pick_async().await.map_err(Error::Rejected)?;
        let Some((retry, mut attempts)) = retrying else {
            let key = pick.key().clone();
            // The closure is user code: a panic building the call drops the pick while
            // unwinding, which counts as the endpoint's failure, as a panicking call does.
            let mut running = pin!(call(key));
            return poll_fn(|cx| gate::poll_call(running.as_mut(), cx, &mut pick, &classify))
                .await
                .map_err(Error::Inner);
        };
        // The keys tried, for a retry to go elsewhere (no allocation unless one is made).
        let mut tried: Vec<K> = Vec::new();
        loop {
            // One clone of the key an attempt (the call's); another only if it fails.
            let mut running = pin!(call(pick.key().clone()));
            let (result, outcome) =
                poll_fn(|cx| gate::poll_judged(running.as_mut(), cx, &mut pick, &classify)).await;
            if !matches!(outcome, Some(Outcome::Failure | Outcome::Fatal)) {
                return result.map_err(Error::Inner);
            }
            tried.push(pick.key().clone());
            if let Some(throttle) = retry.retry_throttle() {
                self.feed_throttle(throttle);
            }
            // Another endpoint first, so that a retry with nowhere to go is not paid for.
            let Some(other) = self.other_for_retry(&tried) else {
                return result.map_err(Error::Inner);
            };
            let next = retry.next(&mut attempts, Cause::Failure);
            pick.breaker().count_retry(next);
            self.shared.stats.count_retry(next);
            let Next::Retry { .. } = next else {
                return result.map_err(Error::Inner);
            };
            match self.pick_for_retry(&other, &tried) {
                Some(retrying) => pick = retrying,
                None => return result.map_err(Error::Inner),
            }
        }
    }
}
