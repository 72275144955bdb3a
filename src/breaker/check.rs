//! Health-checked revival, the breaker's side: the user's check
//! ([`Builder::health_check`](super::Builder::health_check)) and the lease a call holds to
//! run it ([`CheckLease`]). The machine decides who runs the check and what its verdict does
//! (`machine::check`); the admission that hands out the lease and the one place a check is
//! run and settled are the front door's (`gate`); the check itself runs in the caller's
//! future, never under the lock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::contain::FirstPanic;
use crate::error::Rejected;
use crate::machine::CheckTicket;

use super::holder::Holder;
use super::permit::Grant;

/// A health check in flight: the user's future, boxed once per check.
pub(crate) type CheckFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The user's health check, as the breaker keeps it.
pub(crate) struct HealthCheck(Box<dyn Fn() -> CheckFuture + Send + Sync>);

impl HealthCheck {
    /// `check`, boxed: each run boxes its future.
    pub(crate) fn new<F, Fut>(check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        Self(Box::new(move || Box::pin(check())))
    }
}

impl fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HealthCheck")
    }
}

/// The health-check lease a call holds ([`Gate`](super::gate::Gate) settles it). Dropped
/// unsettled (the call was cancelled during its check), it releases the lease with no
/// verdict, so the next call runs the check again.
pub(crate) struct CheckLease<B: Holder> {
    breaker: B,
    ticket: Option<CheckTicket>,
}

impl<B: Holder> CheckLease<B> {
    /// The lease `ticket`, held through `breaker`.
    pub(super) fn new(breaker: B, ticket: CheckTicket) -> Self {
        Self {
            breaker,
            ticket: Some(ticket),
        }
    }

    /// How the lease holds its breaker.
    pub(super) fn holder(&self) -> &B {
        &self.breaker
    }

    /// Whether the lease was settled (passed or failed).
    pub(super) fn settled(&self) -> bool {
        self.ticket.is_none()
    }

    /// Starts the user's check: its future, to poll in the caller's. A panic here (in the
    /// user's closure) unwinds to the caller, which settles the lease as failed.
    pub(super) fn start(&self) -> CheckFuture {
        let check = self
            .breaker
            .breaker()
            .observers
            .health_check()
            .expect("a lease is only handed out when a check is configured");
        (check.0)()
    }

    /// The check passed: the breaker goes half-open and this call is its first probe (a
    /// permit); or, if the lease was stale, the call is treated as it arrives now. A panic
    /// of user code on the way is kept in `panics` (the gate then gives the probe back:
    /// `Checked::excluded_on_panic`).
    pub(super) fn passed_keeping(
        &mut self,
        panics: &mut FirstPanic,
    ) -> Result<B::Permit, Rejected> {
        let ticket = self.ticket.take().expect("settled once");
        let holder = self.breaker.clone();
        let breaker = holder.breaker();
        let now = breaker.clock.try_now(panics);
        let admitted = breaker.transact(now, panics, |m, now, changes| {
            let (admitted, change) = m.check_passed(ticket, now);
            changes.push(change);
            admitted.map(|t| Grant::new(t, now))
        });
        admitted.map(|grant| holder.clone().permit(grant))
    }

    /// The check failed (returned `false`, or panicked): the breaker opens again for the
    /// next open period; the call is rejected with what the breaker answers now (counted
    /// as a rejection if `rejects_caller`). A panic of user code on the way is kept in
    /// `panics`.
    pub(super) fn failed_keeping(
        &mut self,
        panics: &mut FirstPanic,
        rejects_caller: bool,
    ) -> Rejected {
        let ticket = self.ticket.take().expect("settled once");
        let breaker = self.breaker.breaker();
        let now = breaker.clock.try_now(panics);
        breaker.transact(now, panics, |m, now, changes| {
            let (rejected, made) = m.check_failed(ticket, now, rejects_caller);
            changes.push(made);
            rejected
        })
    }
}

impl<B: Holder> Drop for CheckLease<B> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.breaker().locked(|m| m.check_dropped(ticket));
        }
    }
}

impl<B: Holder> fmt::Debug for CheckLease<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckLease")
            .field("breaker", &self.breaker.breaker().name())
            .finish_non_exhaustive()
    }
}
