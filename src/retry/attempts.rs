//! One call's attempts: what failed, and what comes next ([`Retry::next`](super::Retry::next)).

use std::time::Duration;

use crate::nanos::Nanos;

/// One call's attempts, made by [`Retry::start`](super::Retry::start) (which deposits the
/// call in the budget) and given to [`Retry::next`](super::Retry::next) after each failed
/// attempt. Plain data: keep it in the call's future.
#[derive(Clone, Debug)]
pub struct Attempts {
    /// Attempts made or under way (1 for the first).
    pub(super) made: u32,
    /// This call's stream of draws, from its first wait ([`Attempts::NO_STREAM`] before:
    /// three words in all, so that a call that needs no retry carries little).
    pub(super) stream: u64,
    /// The call's deadline on the budget's clock ([`Attempts::NO_DEADLINE`]: none).
    pub(super) deadline: Nanos,
    pub(super) retryable: bool,
    pub(super) elsewhere: bool,
}

impl Attempts {
    /// No stream drawn yet.
    pub(super) const NO_STREAM: u64 = 0;
    /// No deadline.
    pub(super) const NO_DEADLINE: Nanos = Nanos::MAX;

    /// A call's first attempt, with its deadline if it has one.
    #[inline]
    pub(super) fn first(deadline: Option<Nanos>) -> Self {
        Attempts {
            made: 1,
            stream: Self::NO_STREAM,
            deadline: deadline.unwrap_or(Self::NO_DEADLINE),
            retryable: true,
            elsewhere: false,
        }
    }

    /// Whether the call may be retried at all: `false` for a call that must not run twice
    /// (HTTP: a method that is not idempotent). Retryable by default.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Retries go to another replica at once: no backoff, and a `Retry-After` or a pushback
    /// delay is the replica's that said it (a pushback that says *do not retry* still stops
    /// the call). What [`Pool::retry`](crate::pool::Pool::retry) does.
    pub fn elsewhere(mut self, elsewhere: bool) -> Self {
        self.elsewhere = elsewhere;
        self
    }

    /// The attempts made so far, the one under way included (1 during the first).
    pub fn made(&self) -> u32 {
        self.made
    }

    /// The call's deadline, as a time on the budget's clock, if it has one.
    pub fn deadline(&self) -> Option<Duration> {
        (self.deadline != Self::NO_DEADLINE).then(|| Duration::from_nanos(self.deadline))
    }
}

/// Why an attempt did not succeed, as the classifier or the server said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The classifier called it a failure (a 5xx, a timeout, a reset connection).
    Failure,
    /// The dependency said it is overloaded (a 503 or 429), with the `Retry-After` it gave:
    /// the retry waits at least that long, and is not made if that is past the deadline.
    Overload {
        /// The server's `Retry-After`, if it gave one.
        retry_after: Option<Duration>,
    },
    /// gRPC's server pushback (`grpc-retry-pushback-ms`): `Some(delay)` retries after
    /// exactly `delay`, `None` (a negative or malformed value) says *do not retry*.
    Pushback(Option<Duration>),
    /// A breaker rejected the attempt without making it (open, or every endpoint out): it
    /// would reject a retry as well, so none is made.
    Rejected,
}

/// What comes after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Retry, after waiting `after` (on the caller's own runtime: the library has no timer).
    /// The retry is already paid for in the budget.
    Retry {
        /// How long to wait first (zero: at once).
        after: Duration,
    },
    /// Do not retry: return the attempt's own result to the caller.
    Stop(Stop),
}

/// Why a call is not retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// The caller marked the call not retryable ([`Attempts::retryable`]).
    NotRetryable,
    /// A breaker rejected the attempt, and would reject a retry ([`Cause::Rejected`]).
    Rejected,
    /// Every attempt was made ([`Retry::new`](super::Retry::new)'s `max_attempts`).
    Exhausted,
    /// The server said not to retry (a negative or malformed gRPC pushback).
    Pushback,
    /// The retry could not finish before the call's deadline: its wait (the backoff, or the
    /// server's `Retry-After`) and the least time an attempt takes
    /// ([`min_attempt_time`](super::Retry::min_attempt_time)) reach past it.
    Deadline,
    /// The retry budget has no room ([`RetryBudget::try_withdraw`](super::RetryBudget::try_withdraw)).
    Budget,
    /// The retry's throttle holds half its tokens or fewer: failures have outweighed
    /// successes lately ([`Retry::throttle`](super::Retry::throttle), gRPC's retry
    /// throttling).
    Throttled,
}
