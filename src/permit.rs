//! [`Permit`]: the two-step API. An admitted call holds a permit and reports its result
//! through it; a permit dropped without a result still reports one.

use std::fmt;
use std::thread;

use crate::breaker::Breaker;
use crate::clock::Nanos;
use crate::policy::{Outcome, TripPolicy};
use crate::state::Ticket;

/// Leave to make one call, from [`Breaker::allow`]. Report how the call ended with
/// [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`exclude`](Permit::exclude); each consumes the permit.
///
/// A permit dropped without a verdict (a cancelled future, an early return with `?`) counts
/// as an exclusion, so a half-open breaker gets its probe slot back instead of staying stuck;
/// dropped while its thread is panicking, it counts as a failure.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
///
/// let breaker = Breaker::builder().build();
/// match breaker.allow() {
///     Ok(permit) => {
///         let ok = true; // make the call here
///         if ok { permit.success() } else { permit.failure() }
///     }
///     Err(rejected) => eprintln!("not sent: {rejected}"),
/// }
/// assert_eq!(breaker.counts().total_successes, 1);
/// ```
#[must_use = "a permit reports its call's result; dropped unused, it counts as an exclusion"]
pub struct Permit<'a, P: TripPolicy> {
    breaker: &'a Breaker<P>,
    ticket: Ticket,
    /// When the call was admitted, if the policy needs latencies.
    started: Option<Nanos>,
    /// Whether a verdict is still owed: cleared by the consuming methods, read by `Drop`.
    pending: bool,
}

impl<'a, P: TripPolicy> Permit<'a, P> {
    pub(crate) fn new(breaker: &'a Breaker<P>, ticket: Ticket, started: Option<Nanos>) -> Self {
        Self {
            breaker,
            ticket,
            started,
            pending: true,
        }
    }

    /// The call succeeded.
    pub fn success(mut self) {
        self.report(Outcome::Success);
    }

    /// The call failed.
    pub fn failure(mut self) {
        self.report(Outcome::Failure);
    }

    /// The call's result says nothing about the dependency's health: count it as neither a
    /// success nor a failure. In half-open this gives the probe slot back.
    pub fn exclude(mut self) {
        self.report(Outcome::Excluded);
    }

    /// Reports `outcome`, whichever it is.
    pub fn record(mut self, outcome: Outcome) {
        self.report(outcome);
    }

    /// The breaker this permit belongs to.
    pub fn breaker(&self) -> &'a Breaker<P> {
        self.breaker
    }

    fn report(&mut self, outcome: Outcome) {
        self.pending = false;
        self.breaker.complete(self.ticket, outcome, self.started);
    }
}

impl<P: TripPolicy> Drop for Permit<'_, P> {
    fn drop(&mut self) {
        if self.pending {
            let outcome = if thread::panicking() {
                Outcome::Failure
            } else {
                Outcome::Excluded
            };
            self.report(outcome);
        }
    }
}

impl<P: TripPolicy> fmt::Debug for Permit<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.breaker.name())
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}
