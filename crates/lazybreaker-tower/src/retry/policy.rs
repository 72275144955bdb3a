//! [`RetryPolicy`]: a [`Retry`] as tower's retry [`Policy`], judging each attempt with a
//! [`Classify`], and [`RetryWait`], the wait before a retry.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower::retry::Policy;

use super::rejected::MaybeRejected;
use super::replay::{CloneRequest, Replay};
use lazybreaker::classify::{Classify, OkIsSuccess};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{Outcome, TripPolicy};
use lazybreaker::retry::{Attempts, Cause, Next, Retry};
use lazybreaker::{Breaker, Rejected};

/// A [`Retry`] as tower's retry [`Policy`]: each attempt's result judged by a [`Classify`],
/// each retry paid for in the retry's budget, waited for on tokio's timer. Give it to
/// [`RetryLayer`](super::RetryLayer) (or to `tower::retry::RetryLayer` itself).
///
/// - **What is retried**: what the classifier calls a failure ([`Outcome::Failure`] or
///   [`Outcome::Fatal`]); an overload ([`Classify::overloaded`]: a 503 or 429 with
///   `Retry-After` under [`StatusRules`](lazybreaker::http::StatusRules)) waits at least
///   what the server asked ([`Classify::open_for`]). Never a breaker's rejection
///   ([`MaybeRejected`]): the breaker would reject the retry too. A concurrency limit's
///   rejection ([`Rejected::Limited`], from a [`LimitLayer`](crate::LimitLayer) inside) is
///   an overload: retried after a backoff (at once with [`elsewhere`](RetryPolicy::elsewhere)),
///   paid for in the budget like any other retry. Successes and excluded
///   results (a 404) are returned as they are.
/// - **Which requests**: those [`Replay`] copies ([`CloneRequest`], every request, by
///   default; HTTP's [`Idempotent`](super::Idempotent) methods with
///   [`http`](RetryPolicy::http)). A request it does not copy is sent once and not counted
///   in the budget.
/// - **Per call**: tower clones the policy for each call. The call starts (and is deposited
///   in the budget) when tower first asks for a copy of its request, with the
///   [`deadline`](RetryPolicy::deadline) from then; each failed attempt asks
///   [`Retry::next`], whose decision is counted in [`Retry::stats`] and, with
///   [`count_on`](RetryPolicy::count_on), in that breaker's
///   [`Totals`](lazybreaker::Totals).
///
/// # Examples
///
/// ```
/// use lazybreaker::retry::{Cause, Retry};
/// use lazybreaker_tower::RetryPolicy;
/// use std::io;
///
/// let policy = RetryPolicy::new(Retry::new(3)?);
/// let judge = |r: Result<(), io::Error>| policy.cause(&r);
/// assert_eq!(judge(Ok(())), None, "a success is not retried");
/// assert_eq!(judge(Err(io::Error::other("reset"))), Some(Cause::Failure));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
pub struct RetryPolicy<C = OkIsSuccess, Q = CloneRequest> {
    retry: Retry,
    classify: C,
    replay: Q,
    /// Each call's deadline, from its start.
    within: Option<Duration>,
    elsewhere: bool,
    count_on: Option<Arc<dyn BreakerSeam + Send + Sync>>,
    /// This call's attempts (a clone of the policy per call).
    attempts: Option<Attempts>,
    /// A retry was granted: the next copy of the request is for it, not for a new call.
    retrying: bool,
}

impl RetryPolicy {
    /// Retries as `retry` decides, every `Ok` a success and every `Err` a failure, every
    /// request copied with `Clone`.
    pub fn new(retry: Retry) -> Self {
        Self {
            retry,
            classify: OkIsSuccess,
            replay: CloneRequest,
            within: None,
            elsewhere: false,
            count_on: None,
            attempts: None,
            retrying: false,
        }
    }
}

#[cfg(feature = "http")]
impl RetryPolicy<lazybreaker::http::StatusRules, super::replay::Idempotent> {
    /// Retries for HTTP: responses judged by
    /// [`StatusRules`](lazybreaker::http::StatusRules) (5xx, 408, 429 and transport errors
    /// retried, other 4xx not), a 503 or 429 with `Retry-After` waited for at least that
    /// long (and not retried if that is past the [`deadline`](RetryPolicy::deadline)), and
    /// only requests with idempotent methods retried ([`Idempotent`](super::Idempotent)).
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(retry: Retry) -> Self {
        RetryPolicy::new(retry)
            .classify(lazybreaker::http::StatusRules::new().honor_retry_after())
            .replay(super::replay::Idempotent::new())
    }
}

impl<C, Q> RetryPolicy<C, Q> {
    /// The same policy, with `classify` judging each attempt's result (any [`Classify`]:
    /// [`StatusRules`](lazybreaker::http::StatusRules) for HTTP, a closure over
    /// `&Result<Response, Error>`).
    pub fn classify<D>(self, classify: D) -> RetryPolicy<D, Q> {
        RetryPolicy {
            retry: self.retry,
            classify,
            replay: self.replay,
            within: self.within,
            elsewhere: self.elsewhere,
            count_on: self.count_on,
            attempts: self.attempts,
            retrying: self.retrying,
        }
    }

    /// The same policy, with `replay` copying requests for their retries and saying which
    /// are sent only once (a [`Replay`]: [`Idempotent`](super::Idempotent), a
    /// `Fn(&Req) -> Option<Req>`).
    pub fn replay<R>(self, replay: R) -> RetryPolicy<C, R> {
        RetryPolicy {
            retry: self.retry,
            classify: self.classify,
            replay,
            within: self.within,
            elsewhere: self.elsewhere,
            count_on: self.count_on,
            attempts: self.attempts,
            retrying: self.retrying,
        }
    }

    /// Each call has `within` to finish, from its first attempt: no retry is made whose
    /// wait (and the retry's [`min_attempt_time`](Retry::min_attempt_time)) reaches past
    /// it, such as one after a `Retry-After` longer than what is left. Measured on the
    /// retry budget's clock. Give it the timeout outside the retry layer, if there is one.
    pub fn deadline(mut self, within: Duration) -> Self {
        self.within = Some(within);
        self
    }

    /// Retries go to another endpoint at once (a [`PoolService`](crate::PoolService)
    /// inside, which picks anew for each attempt): no backoff, and a `Retry-After` is the
    /// endpoint's that said it ([`Attempts::elsewhere`]). Off by default.
    pub fn elsewhere(mut self, elsewhere: bool) -> Self {
        self.elsewhere = elsewhere;
        self
    }

    /// Counts each decision made after an attempt failed in `breaker`'s
    /// [`Totals`](lazybreaker::Totals) (`retries`, `retries_budget_denied`,
    /// `retries_exhausted`), besides [`Retry::stats`]: give it the breaker of the
    /// [`BreakerLayer`](crate::BreakerLayer) inside. (Behind a pool, the endpoint an attempt
    /// went to is not known here: the decisions are counted in [`Retry::stats`] only.)
    pub fn count_on<P, O>(mut self, breaker: Arc<Breaker<P, O>>) -> Self
    where
        P: TripPolicy + Send + Sync + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.count_on = Some(breaker);
        self
    }

    /// The retry: its budget, its [`stats`](Retry::stats).
    pub fn retry(&self) -> &Retry {
        &self.retry
    }

    /// Why an attempt with `result` should be retried, or `None` if it should not be (a
    /// success, an excluded result): a breaker's rejection is [`Cause::Rejected`] (never
    /// retried), a concurrency limit's ([`Rejected::Limited`]) [`Cause::Overload`] with no
    /// `Retry-After`, an overload [`Cause::Overload`] with the classifier's
    /// [`open_for`](Classify::open_for) as its `Retry-After`, any other failure
    /// [`Cause::Failure`].
    pub fn cause<Res, E>(&self, result: &Result<Res, E>) -> Option<Cause>
    where
        C: Classify<Res, E>,
        E: MaybeRejected,
    {
        if let Err(error) = result {
            match error.rejection() {
                // A concurrency limit's: overload, not a broken dependency; a place frees as
                // soon as a call ends, and a retry may go elsewhere.
                Some(Rejected::Limited) => return Some(Cause::Overload { retry_after: None }),
                Some(_) => return Some(Cause::Rejected),
                None => {}
            }
        }
        match self.classify.classify(result) {
            Outcome::Failure | Outcome::Fatal if self.classify.overloaded(result) => {
                Some(Cause::Overload {
                    retry_after: self.classify.open_for(result),
                })
            }
            Outcome::Failure | Outcome::Fatal => Some(Cause::Failure),
            _ => None,
        }
    }
}

impl<Req, Res, E, C, Q> Policy<Req, Res, E> for RetryPolicy<C, Q>
where
    C: Classify<Res, E>,
    E: MaybeRejected,
    Q: Replay<Req>,
{
    type Future = RetryWait;

    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, E>) -> Option<RetryWait> {
        let cause = self.cause(result)?;
        let attempts = self.attempts.as_mut()?;
        let next = self.retry.next(attempts, cause);
        if let Some(breaker) = &self.count_on {
            breaker.count_retry(next);
        }
        match next {
            Next::Retry { after } => {
                self.retrying = true;
                Some(RetryWait::after(after))
            }
            Next::Stop(_) => None,
        }
    }

    fn clone_request(&mut self, request: &Req) -> Option<Req> {
        let copy = self.replay.replay(request);
        // Asked of the service's own policy before each call (then cloned for the call),
        // and of the call's clone before each retry.
        if !std::mem::take(&mut self.retrying) {
            self.attempts = copy
                .as_ref()
                .map(|_| self.retry.start(self.within).elsewhere(self.elsewhere));
        }
        copy
    }
}

impl<C: Clone, Q: Clone> Clone for RetryPolicy<C, Q> {
    fn clone(&self) -> Self {
        Self {
            retry: self.retry.clone(),
            classify: self.classify.clone(),
            replay: self.replay.clone(),
            within: self.within,
            elsewhere: self.elsewhere,
            count_on: self.count_on.clone(),
            attempts: self.attempts.clone(),
            retrying: self.retrying,
        }
    }
}

impl<C, Q> fmt::Debug for RetryPolicy<C, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("retry", &self.retry)
            .field("deadline", &self.within)
            .field("elsewhere", &self.elsewhere)
            .field("counts_on_a_breaker", &self.count_on.is_some())
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The wait before a retry ([`RetryPolicy`]'s `Policy::Future`): tokio's timer, or
    /// nothing for a retry that goes at once (no timer is touched then).
    #[must_use = "futures do nothing unless polled"]
    pub struct RetryWait {
        #[pin]
        kind: Kind,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind {
        Now,
        Sleep {
            #[pin]
            sleep: tokio::time::Sleep,
        },
    }
}

impl RetryWait {
    /// A wait of `after` (none at all for zero). Needs a tokio runtime with its timer
    /// enabled for a wait that is not zero.
    fn after(after: Duration) -> Self {
        let kind = if after.is_zero() {
            Kind::Now
        } else {
            Kind::Sleep {
                sleep: tokio::time::sleep(after),
            }
        };
        Self { kind }
    }
}

impl Future for RetryWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.project().kind.project() {
            KindProj::Now => Poll::Ready(()),
            KindProj::Sleep { sleep } => sleep.poll(cx),
        }
    }
}

impl fmt::Debug for RetryWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wait = match &self.kind {
            Kind::Now => None,
            Kind::Sleep { sleep } => Some(sleep.deadline()),
        };
        f.debug_struct("RetryWait").field("until", &wait).finish()
    }
}
