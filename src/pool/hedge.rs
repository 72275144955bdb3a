//! Hedged calls in a pool ([`Pool::hedge`]): an attempt that has not answered after the
//! hedge's delay gets another on a different endpoint, the first good answer wins, the
//! others are cancelled (counted neither way). No timer: the delay is checked when the call
//! is polled, and a call waiting for its delay is woken by the first pick of the pool after
//! it (the way the pool judges hangs).

use std::collections::BinaryHeap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;

use crate::breaker::gate;
use crate::breaker::BreakerSeam;
use crate::classify::Classify;
use crate::clock::ClockSource;
use crate::contain::{self, FirstPanic};
use crate::error::{ConfigError, Error};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::outcome::Outcome;
use crate::policy::TripPolicy;
use crate::retry::{Attempts, Cause, Hedge, Next, RetryBudget, Stop};

use super::census::walk;
use super::choose::random;
use super::endpoint::Endpoint;
use super::pick::Pick;
use super::picking::{admit, Choice};
use super::stats::Stats;
use super::{Endpoints, Pool};
use crate::breaker::gate::Ready;

/// How often a pool recomputes a percentile hedge's delay from its endpoints' estimates.
const REFRESH: Nanos = 100_000_000;

/// A pool's hedging: the policy, its delay as last computed, and the calls waiting for it.
#[derive(Debug)]
pub(super) struct Hedging {
    pub(super) hedge: Hedge,
    /// For a percentile: the delay last computed, in nanoseconds (0: none known), and when.
    delay: AtomicU64,
    refreshed: AtomicU64,
    pub(super) wake: Wakes,
}

impl Hedging {
    pub(super) fn new(hedge: Hedge) -> Self {
        Self {
            hedge,
            delay: AtomicU64::new(0),
            refreshed: AtomicU64::new(0),
            wake: Wakes::default(),
        }
    }

    /// The delay of a call that starts at `now`: the fixed one, or the median of the
    /// endpoints' estimates of the percentile, recomputed at most every [`REFRESH`] (and
    /// while none is known); `None` before any is.
    fn delay<K, P: TripPolicy, O: Observer>(
        &self,
        now: Nanos,
        endpoints: impl FnOnce() -> Arc<Endpoints<K, P, O>>,
    ) -> Option<Nanos> {
        if let Some(delay) = self.hedge.delay() {
            return Some(crate::nanos::saturating_nanos(delay));
        }
        let known = self.delay.load(Ordering::Relaxed);
        let refreshed = self.refreshed.load(Ordering::Relaxed);
        if known != 0 && now.saturating_sub(refreshed) < REFRESH {
            return Some(known);
        }
        // One caller recomputes; the others use what is known.
        if known != 0
            && self
                .refreshed
                .compare_exchange(refreshed, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return Some(known);
        }
        let mut estimates: Vec<Nanos> = endpoints()
            .iter()
            .filter_map(|e| e.latency.nanos_now())
            .collect();
        if estimates.is_empty() {
            return (known != 0).then_some(known);
        }
        // The lower median: with two endpoints, the faster one's.
        let middle = (estimates.len() - 1) / 2;
        let (_, median, _) = estimates.select_nth_unstable(middle);
        let median = *median;
        self.delay.store(median, Ordering::Relaxed);
        if known == 0 {
            self.refreshed.store(now, Ordering::Relaxed);
        }
        Some(median)
    }
}

/// The calls waiting for their hedge's delay, woken by the first pick after it (no timer):
/// the earliest due time in one word that a pick reads (nothing else while none is due), and
/// the wakers in a heap by due time, so that a pick that wakes pops only the calls due. A
/// call that answered before its delay is not taken out: its waker is woken once, in vain,
/// when its time comes (a runtime ignores the wake of a task that finished).
#[derive(Debug)]
pub(super) struct Wakes {
    next_due: AtomicU64,
    waiting: Mutex<BinaryHeap<Waiting>>,
}

/// A waker due at a time (ordered by it, the earliest first in the heap), and its call's
/// flag that says it waits in the heap (cleared when a pick pops it).
#[derive(Debug)]
struct Waiting(Nanos, Waker, Arc<AtomicBool>);

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Reversed: the heap's top is the earliest.
        other.0.cmp(&self.0)
    }
}

impl Default for Wakes {
    fn default() -> Self {
        Self {
            next_due: AtomicU64::new(Nanos::MAX),
            waiting: Mutex::new(BinaryHeap::new()),
        }
    }
}

impl Wakes {
    /// The time now if a call waits for a delay that may be over (one load while none
    /// does; the clock read only then).
    #[inline]
    pub(super) fn any_due_by(&self, now: impl FnOnce() -> Nanos) -> Option<Nanos> {
        let due = self.next_due.load(Ordering::Acquire);
        if due == Nanos::MAX {
            return None;
        }
        let now = now();
        (now >= due).then_some(now)
    }

    /// Wakes the calls whose delay is over at `now`.
    #[cold]
    #[inline(never)]
    pub(super) fn wake_due(&self, now: Nanos) {
        let mut due = Vec::new();
        {
            let mut waiting = self.waiting.lock();
            while waiting.peek().is_some_and(|w| w.0 <= now) {
                if let Some(Waiting(_, waker, armed)) = waiting.pop() {
                    armed.store(false, Ordering::Release);
                    due.push(waker);
                }
            }
            let next = waiting.peek().map_or(Nanos::MAX, |w| w.0);
            self.next_due.store(next, Ordering::Release);
        }
        // Outside the lock: a waker is the runtime's code. One that panics does not keep the
        // others from their wake (their entries are gone): each is woken, then the first
        // panic goes on.
        let mut panics = FirstPanic::default();
        for waker in due {
            panics.catch((), || waker.wake());
        }
        contain::resume(panics);
    }

    /// Wakes `waker` at the first pick after `at`; `armed` is set until a pick pops it.
    fn register(&self, at: Nanos, waker: &Waker, armed: &Arc<AtomicBool>) {
        let mut waiting = self.waiting.lock();
        armed.store(true, Ordering::Release);
        waiting.push(Waiting(at, waker.clone(), Arc::clone(armed)));
        self.next_due.fetch_min(at, Ordering::AcqRel);
    }

    /// How many calls wait (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().len()
    }
}

/// One attempt of a hedged call under way.
struct Attempt<Fut, K, P: TripPolicy, O: Observer> {
    running: Pin<Box<Fut>>,
    pick: Pick<K, P, O>,
    sent_at: Nanos,
    /// 0 for the call's first attempt.
    nth: u32,
}

/// A hedged call under way: its attempts, and what it knows of the next.
struct Hedged<'b, Fut, T, E, K, P: TripPolicy, O: Observer> {
    running: Vec<Attempt<Fut, K, P, O>>,
    /// The endpoints tried (in flight, or failed), for each attempt to go elsewhere.
    tried: Vec<K>,
    /// Attempts sent.
    sent: u32,
    last_sent: Nanos,
    /// An attempt failed: the next goes at once.
    hurry: bool,
    /// No more attempts.
    done: bool,
    /// The due time and waker left in the pool's heap, and whether they wait there still
    /// (a pick that pops them clears it): a poll registers again when any of it changed.
    registered: Option<(Nanos, Waker, Arc<AtomicBool>)>,
    last_failure: Option<Result<T, E>>,
    /// With a retry, its count of the call's attempts.
    attempts: Option<Attempts>,
    budget: &'b RetryBudget,
    /// The delay (`None`: no percentile known yet).
    delay: Option<Nanos>,
    /// The call's deadline on the pool's clock.
    ends: Option<Nanos>,
}

impl<Fut, T, E, K: Clone, P: TripPolicy, O: Observer> Hedged<'_, Fut, T, E, K, P, O> {
    /// Sends an attempt on `pick` at `now`. A panic of `call` (user code) drops the pick
    /// while unwinding: its endpoint's failure.
    fn send<F: FnMut(K) -> Fut>(&mut self, pick: Pick<K, P, O>, now: Nanos, call: &mut F) {
        let running = Box::pin(call(pick.key().clone()));
        self.tried.push(pick.key().clone());
        self.running.push(Attempt {
            running,
            pick,
            sent_at: now,
            nth: self.sent,
        });
        self.sent += 1;
        self.last_sent = now;
    }

    /// Cancels every attempt in flight: each future dropped, then its pick reported
    /// excluded (neither success nor failure). How many.
    fn cancel(&mut self) -> u64 {
        self.cancel_at(None)
    }

    /// [`cancel`](Self::cancel), at `now` for a percentile `p` (`Some((now, p))`): an
    /// attempt that ran longer than its endpoint's estimate is one latency above it (its own
    /// is longer still), recorded as such, so that the estimate is not biased toward the
    /// attempts that win (a cancelled slow attempt would otherwise never be seen).
    ///
    /// The pick is dropped unreported, not reported excluded: it counts as excluded all the
    /// same, but is no answer from its endpoint (a cancelled attempt on a replica that
    /// never answers must not keep it from being judged hung). A future whose drop panics
    /// (user code) does not turn the other picks into failures: each is settled, then the
    /// first panic goes on.
    fn cancel_at(&mut self, at: Option<(Nanos, f64)>) -> u64 {
        let cancelled = self.running.len() as u64;
        let mut panics = FirstPanic::default();
        for Attempt {
            running,
            pick,
            sent_at,
            ..
        } in self.running.drain(..)
        {
            panics.catch((), || drop(running));
            if let Some((now, p)) = at {
                let ran = now.saturating_sub(sent_at);
                let latency = &pick.endpoint().latency;
                if latency.nanos_now().is_some_and(|estimate| ran > estimate) {
                    latency.record_nanos(ran, p);
                }
            }
            drop(pick);
        }
        contain::resume(panics);
        cancelled
    }

    /// Leaves `waker` in the pool's heap for `due`, unless it waits there already.
    fn wait_for(&mut self, due: Nanos, waker: &Waker, wakes: &Wakes) {
        if let Some((at, left, armed)) = &self.registered {
            if *at == due && left.will_wake(waker) && armed.load(Ordering::Acquire) {
                return;
            }
        }
        let armed = match self.registered.take() {
            Some((_, _, armed)) => armed,
            None => Arc::new(AtomicBool::new(false)),
        };
        wakes.register(due, waker, &armed);
        self.registered = Some((due, waker.clone(), armed));
    }
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + std::fmt::Display,
{
    /// Hedges [`Pool::call`]: an attempt that has not answered after `hedge`'s delay gets
    /// another on an endpoint the call has not tried; the first good answer wins, and the
    /// other attempts are cancelled (dropped, counted neither as a success nor as a failure:
    /// a cancelled attempt trips no breaker and skews no outlier detection). See [`Hedge`]
    /// for the rules (the delay, the attempts, the budget, the deadline).
    ///
    /// - **The delay.** [`Hedge::after`] a fixed one, or [`Hedge::at_percentile`] `p`:
    ///   each endpoint keeps an estimate of the `p`-th quantile of its calls' latencies (a
    ///   [`LatencyEstimate`](crate::retry::LatencyEstimate), one word written by the calls
    ///   that succeed on it: no shared write per call), and a call hedges after the median
    ///   of the endpoints' estimates, recomputed at most every 100 ms (so one slow replica
    ///   does not raise the delay of the others' calls).
    /// - **The budget.** Hedges are paid for in the pool's [retry](Pool::retry)'s budget
    ///   when it has one and the hedge was given none (gRPC's A6: one throttle for both),
    ///   else in the hedge's; each call is deposited in it once.
    /// - **No timer.** The delay is checked each time the call is polled; a call waiting
    ///   for it is woken by the first pick of the pool after it (any caller's: under steady
    ///   traffic within a few calls' spacing), as hangs are judged. A pool with little
    ///   traffic hedges late, never early.
    /// - **Failures.** An attempt that fails while attempts are left starts the next at
    ///   once (A6's non-fatal status; with a [retry](Pool::retry), the retry decides when
    ///   no attempt is left in flight). The call's result is the first success, exclusion
    ///   or deferred verdict; with none, the last failure.
    ///
    /// A setting for building the pool, before its first endpoint: a pool given no
    /// [`clock`](Pool::clock) then reads the precise one (the processor's counter), as a
    /// breaker that times its calls does, since the coarse one ticks every 1 to 4 ms. A
    /// hedge whose settings are out of range hedges nothing ([`try_hedge`](Pool::try_hedge) refuses it). Counted in
    /// [`PoolStats`](super::PoolStats) (`hedges`, `hedges_won`, `hedges_cancelled`,
    /// `hedges_budget_denied`) and in the hedge's own [`stats`](Hedge::stats).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::OkIsSuccess;
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::retry::Hedge;
    /// use lazybreaker::{Breaker, ManualClock};
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let pool = Pool::new(|_: &&str| Breaker::builder())
    ///     .clock(clock.clone())
    ///     .hedge(Hedge::after(Duration::from_millis(20)));
    /// pool.set(["slow", "fast"]);
    ///
    /// // "slow" never answers; "fast" answers at once.
    /// let mut call = pin!(pool.call(
    ///     |addr| async move {
    ///         if addr == "slow" { std::future::pending::<()>().await }
    ///         Ok::<_, String>(addr)
    ///     },
    ///     OkIsSuccess,
    /// ));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let mut answer = None;
    /// for _ in 0..3 {
    ///     if let Poll::Ready(got) = call.as_mut().poll(&mut cx) {
    ///         answer = Some(got);
    ///         break;
    ///     }
    ///     clock.advance(Duration::from_millis(20)); // the delay passes: a hedge goes out
    /// }
    /// assert_eq!(answer.unwrap().unwrap(), "fast");
    /// ```
    #[must_use]
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.hedging = hedge
            .validate()
            .is_ok()
            .then(|| Arc::new(Hedging::new(hedge)));
        // Delays of milliseconds want a clock finer than the coarse one (1 to 4 ms a tick):
        // the precise one, unless the pool was given a clock.
        if self.clock.is_none() && self.hedging.is_some() {
            if let Some(shared) = Arc::get_mut(&mut self.shared) {
                shared.clock = ClockSource::default_for(true, Duration::from_micros(10));
            }
        }
        self.latency_aware = self
            .hedging
            .as_ref()
            .is_some_and(|h| h.hedge.percentile().is_some());
        self
    }

    /// [`hedge`](Pool::hedge), unless a setting is out of its range.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`Hedge::validate`], naming the setting
    /// (`hedge.percentile`, `hedge.max_attempts`).
    pub fn try_hedge(self, hedge: Hedge) -> Result<Self, ConfigError> {
        hedge.validate()?;
        Ok(self.hedge(hedge))
    }

    /// The hedge, if [`hedge`](Pool::hedge) set one.
    pub fn hedge_policy(&self) -> Option<&Hedge> {
        self.hedging.as_deref().map(|h| &h.hedge)
    }

    /// [`Pool::call`] with a hedge.
    pub(super) async fn call_hedged<F, Fut, T, E, C>(
        &self,
        hedging: &Hedging,
        mut call: F,
        classify: C,
    ) -> Result<T, Error<E>>
    where
        F: FnMut(K) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        let hedge = &hedging.hedge;
        let within = (self.deadline > 0).then(|| Duration::from_nanos(self.deadline));
        // The call is deposited once, in the retry's budget (its start) or the hedge's.
        let attempts = self.retry.as_ref().map(|r| r.start(within).elsewhere(true));
        let budget: &RetryBudget = match &self.retry {
            Some(retry) if !hedge.budget_given() => retry.retry_budget(),
            _ => {
                let budget = hedge.hedge_budget();
                budget.deposit();
                budget
            }
        };
        let started = self.shared.now();
        let first = self.pick_async().await.map_err(Error::Rejected)?;
        let mut hedged = Hedged {
            running: Vec::with_capacity(2),
            tried: Vec::with_capacity(2),
            sent: 0,
            last_sent: started,
            hurry: false,
            done: false,
            registered: None,
            last_failure: None,
            attempts,
            budget,
            delay: hedging.delay(started, || self.endpoints.load_full()),
            ends: (self.deadline > 0).then(|| started.saturating_add(self.deadline)),
        };
        // A panic building the first call (user code) fails its endpoint, as without a hedge.
        hedged.send(first, started, &mut call);
        poll_fn(|cx| {
            let step = contain::catch(|| self.step(&mut hedged, hedging, &mut call, &classify, cx));
            match step {
                Ok(poll) => poll,
                Err(payload) => {
                    // User code panicked (an attempt, a call built, a clock, a waker): the
                    // attempt that panicked is its endpoint's failure; the others are
                    // cancelled, counted neither way, before the panic goes on.
                    hedged.cancel();
                    std::panic::resume_unwind(payload)
                }
            }
        })
        .await
    }

    /// One poll of a hedged call: each attempt in flight polled (the first that does not
    /// fail wins), then another attempt sent if one is due and may go.
    fn step<F, Fut, T, E, C>(
        &self,
        h: &mut Hedged<'_, Fut, T, E, K, P, O>,
        hedging: &Hedging,
        call: &mut F,
        classify: &C,
        cx: &mut Context<'_>,
    ) -> Poll<Result<T, Error<E>>>
    where
        F: FnMut(K) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        let hedge = &hedging.hedge;
        loop {
            let mut i = 0;
            while i < h.running.len() {
                let attempt = &mut h.running[i];
                let Poll::Ready((result, outcome)) =
                    gate::poll_judged(attempt.running.as_mut(), cx, &mut attempt.pick, classify)
                else {
                    i += 1;
                    continue;
                };
                let attempt = h.running.swap_remove(i);
                if !matches!(outcome, Some(Outcome::Failure | Outcome::Fatal)) {
                    let at = hedge.percentile().map(|p| (self.shared.now(), p));
                    if let (Some((now, p)), Some(Outcome::Success)) = (at, outcome) {
                        let took = now.saturating_sub(attempt.sent_at);
                        attempt.pick.endpoint().latency.record_nanos(took, p);
                    }
                    let won = attempt.nth > 0;
                    let cancelled = h.cancel_at(at);
                    self.shared.stats.count_hedge_end(won, cancelled);
                    hedge.count_end(won, cancelled);
                    return Poll::Ready(result.map_err(Error::Inner));
                }
                if let Some(throttle) = self.retry.as_ref().and_then(|r| r.retry_throttle()) {
                    self.feed_throttle(throttle);
                }
                let failed_on = Arc::clone(attempt.pick.breaker());
                drop(attempt);
                h.last_failure = Some(result);
                match (&self.retry, h.attempts.as_mut()) {
                    // With a retry, it decides once nothing is left in flight; a retry
                    // refused (or with nowhere to go) ends the call.
                    (Some(retry), Some(attempts)) if h.running.is_empty() => {
                        h.done = true;
                        // Another endpoint first, so that a retry with nowhere to go is not
                        // paid for; the clock before the pick (a user clock may panic).
                        let Some(other) = self.other_for_hedge(&h.tried) else {
                            continue;
                        };
                        let next = retry.next(attempts, Cause::Failure);
                        failed_on.count_retry(next);
                        self.shared.stats.count_retry(next);
                        if let Next::Retry { .. } = next {
                            let now = self.shared.now();
                            if let Some(pick) = self.admit_hedge(&other, &h.tried) {
                                h.send(pick, now, call);
                                continue;
                            }
                        }
                    }
                    _ => h.hurry = true,
                }
            }
            if !h.done && (h.hurry || h.delay.is_some()) {
                let now = self.shared.now();
                let due = h.delay.map(|d| h.last_sent.saturating_add(d));
                if h.hurry || due.is_some_and(|due| now >= due) {
                    h.hurry = false;
                    match self.next_attempt(h, hedge, now) {
                        Some(pick) => {
                            h.send(pick, now, call);
                            continue;
                        }
                        None => h.done = true,
                    }
                } else if let Some(due) = due.filter(|due| *due != Nanos::MAX) {
                    h.wait_for(due, cx.waker(), &hedging.wake);
                }
            }
            if h.running.is_empty() {
                let Some(failed) = h.last_failure.take() else {
                    unreachable!("a hedged call ends with an answer or a failure")
                };
                return Poll::Ready(failed.map_err(Error::Inner));
            }
            return Poll::Pending;
        }
    }

    /// The pick of the next attempt of `h`, if one may go now (another endpoint admits a
    /// call, and the hedge allows it: attempts, deadline, throttle, budget, in that order
    /// after the endpoint, so that a hedge with nowhere to go is not paid for).
    fn next_attempt<Fut, T, E>(
        &self,
        h: &Hedged<'_, Fut, T, E, K, P, O>,
        hedge: &Hedge,
        now: Nanos,
    ) -> Option<Pick<K, P, O>> {
        let other = self.other_for_hedge(&h.tried)?;
        let left = h.ends.map(|end| end.saturating_sub(now));
        let next = hedge.decide(h.sent, left, h.budget, None);
        hedge.count(next);
        self.shared.stats.count_hedge(next);
        match next {
            Next::Retry { .. } => self.admit_hedge(&other, &h.tried),
            Next::Stop(_) => None,
        }
    }

    /// An endpoint the call has not tried that admits a call now (its breaker, and its
    /// limit: a hedge with no place to go is not paid for).
    fn other_for_hedge(&self, tried: &[K]) -> Option<Arc<Endpoint<K, P, O>>> {
        let endpoints = self.endpoints.load();
        let found = walk(&endpoints, random())
            .filter(|e| !tried.contains(&e.key))
            .find(|e| gate::ready(&e.breaker) == Ready::Passes && !e.at_limit())
            .cloned();
        found
    }

    /// A pick of `endpoint` for another attempt, or of another untried one if it turned
    /// full meanwhile.
    fn admit_hedge(&self, endpoint: &Arc<Endpoint<K, P, O>>, tried: &[K]) -> Option<Pick<K, P, O>> {
        if let Some(Choice::Pick(pick)) = admit(endpoint, false, None) {
            return Some(pick);
        }
        let other = self.other_for_hedge(tried)?;
        match admit(&other, false, None) {
            Some(Choice::Pick(pick)) => Some(pick),
            _ => None,
        }
    }
}

impl Stats {
    /// Counts what a hedge decided.
    pub(crate) fn count_hedge(&self, next: Next) {
        let counter = match next {
            Next::Retry { .. } => &self.hedges,
            Next::Stop(Stop::Budget | Stop::Throttled) => &self.hedges_budget_denied,
            Next::Stop(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a hedged call's end: answered by a hedge (`won`), `cancelled` attempts.
    pub(crate) fn count_hedge_end(&self, won: bool, cancelled: u64) {
        if won {
            self.hedges_won.fetch_add(1, Ordering::Relaxed);
        }
        if cancelled > 0 {
            self.hedges_cancelled
                .fetch_add(cancelled, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::task::Wake;

    struct Count(AtomicU32);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    struct Panics;

    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a waker panics");
        }
    }

    #[test]
    fn a_waker_that_panics_keeps_no_other_from_its_wake() {
        let wakes = Wakes::default();
        let count = Arc::new(Count(AtomicU32::new(0)));
        let (armed, other) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        wakes.register(10, &Waker::from(Arc::new(Panics)), &armed);
        wakes.register(10, &Waker::from(Arc::clone(&count)), &other);
        assert!(armed.load(Ordering::Relaxed) && other.load(Ordering::Relaxed));
        let woke = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wakes.wake_due(10)));
        assert!(woke.is_err(), "the panic goes on");
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "the other waker was woken"
        );
        assert!(
            !armed.load(Ordering::Relaxed) && !other.load(Ordering::Relaxed),
            "both popped"
        );
        assert_eq!(wakes.len(), 0);
    }

    #[test]
    fn a_pick_wakes_only_the_calls_due_the_earliest_first() {
        let wakes = Wakes::default();
        assert_eq!(
            wakes.any_due_by(|| unreachable!("no clock read while none waits")),
            None
        );
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::new(Count(AtomicU32::new(0)))).collect();
        for (at, count) in [30, 10, 20].into_iter().zip(&counts) {
            let armed = Arc::new(AtomicBool::new(false));
            wakes.register(at, &Waker::from(Arc::clone(count)), &armed);
        }
        assert_eq!(wakes.any_due_by(|| 9), None);
        assert_eq!(wakes.any_due_by(|| 20), Some(20));
        wakes.wake_due(20);
        let woken: Vec<u32> = counts.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
        assert_eq!(woken, [0, 1, 1]);
        assert_eq!(wakes.len(), 1);
        assert_eq!(wakes.any_due_by(|| 29), None, "the next due is 30");
        wakes.wake_due(30);
        assert_eq!(counts[0].0.load(Ordering::Relaxed), 1);
        assert_eq!(wakes.any_due_by(|| unreachable!("none waits")), None);
    }
}
