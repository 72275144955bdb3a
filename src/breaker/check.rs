//! Health-checked revival, the breaker's side: the user's check
//! ([`Builder::health_check`](super::Builder::health_check)), an admission that may hand a
//! call the check lease ([`Breaker::allow_checking`]), and the lease the call settles
//! ([`CheckLease`]). The machine decides who runs the check and what its verdict does
//! (`machine::check`); the check itself runs in the caller's future, never under the lock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::contain::{self, FirstPanic};
use crate::error::Rejected;
use crate::lane::Entry;
use crate::machine::{Admission, CheckTicket};
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::permit::Grant;
use super::{Breaker, Permit};

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

/// What [`Breaker::allow_checking`] admits: a call, or a call that first runs the check.
pub(crate) enum Admitted<'a, P: TripPolicy, O: Observer> {
    /// The call goes ahead, reporting through this permit.
    Call(Permit<'a, P, O>),
    /// The call holds the check lease: it runs the check, then settles the lease, before it
    /// builds its request.
    Check(CheckLease<'a, P, O>),
}

/// The health-check lease a call holds. Settled by [`passed`](CheckLease::passed) or
/// [`failed`](CheckLease::failed); dropped unsettled (the call was cancelled during its
/// check), it releases the lease with no verdict, so the next call runs the check again.
pub(crate) struct CheckLease<'a, P: TripPolicy, O: Observer> {
    breaker: &'a Breaker<P, O>,
    ticket: Option<CheckTicket>,
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Admits a call that can run the health check: as [`allow`](Breaker::allow) does, except
    /// that once the open period is over, the first call to arrive gets the check lease
    /// instead of a permit, and calls that arrive while the check runs are rejected with
    /// [`Rejected::Checking`]. Without a health check, it is `allow`.
    #[inline]
    pub(crate) fn allow_checking(&self) -> Result<Admitted<'_, P, O>, Rejected> {
        match self.lane.admit(|| self.clock.now()) {
            Entry::Admitted { generation } => {
                Ok(Admitted::Call(Permit::new(self, Grant::unaged(generation))))
            }
            other if self.health_check.is_none() => self
                .allow_slow(other)
                .map(|grant| Admitted::Call(Permit::new(self, grant))),
            other => self.allow_checking_slow(other),
        }
    }

    /// [`allow_checking`](Self::allow_checking) off the lock-free lane.
    #[inline(never)]
    fn allow_checking_slow(&self, entry: Entry) -> Result<Admitted<'_, P, O>, Rejected> {
        let now = self.entry_now(entry)?;
        let mut panics = FirstPanic::default();
        let admitted = self.transact(Some(now), &mut panics, |m, now| {
            let (admitted, change) = m.admit_checking(now);
            let admitted = admitted.map(|a| match a {
                Admission::Call(ticket) => Ok(Grant::new(ticket, now)),
                Admission::Check(ticket) => Err(ticket),
            });
            (admitted, change)
        });
        let admitted = admitted.map(|a| match a {
            Ok(grant) => Admitted::Call(Permit::new(self, grant)),
            Err(ticket) => Admitted::Check(CheckLease {
                breaker: self,
                ticket: Some(ticket),
            }),
        });
        if panics.will_resume() {
            // An observer or the policy panicked on the way: nothing will run, so the
            // admission is given back (a permit dropped while panicking is a failure, so
            // it is excluded first; a lease is released) before the panic continues.
            if let Ok(admitted) = admitted {
                match admitted {
                    Admitted::Call(permit) => permit.exclude(),
                    Admitted::Check(lease) => drop(lease),
                }
            }
            contain::resume(panics);
            // Reached only while this thread is unwinding already (the panic is then
            // dropped): nothing was admitted.
            return Err(Rejected::Checking);
        }
        admitted
    }
}

impl<'a, P: TripPolicy, O: Observer> CheckLease<'a, P, O> {
    /// Starts the user's check: its future, to poll in the caller's. A panic here (in the
    /// user's closure) unwinds to the caller, which settles the lease as failed.
    pub(crate) fn start(&self) -> CheckFuture {
        let check = self
            .breaker
            .health_check
            .as_ref()
            .expect("a lease is only handed out when a check is configured");
        (check.0)()
    }

    /// The check passed: the breaker goes half-open and this call is its first probe (a
    /// permit); or, if the lease was stale, the call is treated as it arrives now.
    pub(crate) fn passed(mut self) -> Result<Permit<'a, P, O>, Rejected> {
        let ticket = self.ticket.take().expect("settled once");
        let breaker = self.breaker;
        let mut panics = FirstPanic::default();
        let now = breaker.clock.try_now(&mut panics);
        let admitted = breaker.transact(now, &mut panics, |m, now| {
            let (admitted, change) = m.check_passed(ticket, now);
            (admitted.map(|t| Grant::new(t, now)), change)
        });
        let admitted = admitted.map(|grant| Permit::new(breaker, grant));
        if panics.will_resume() {
            if let Ok(permit) = admitted {
                permit.exclude();
            }
            contain::resume(panics);
            return Err(Rejected::Checking);
        }
        admitted
    }

    /// The check failed (returned `false`): the breaker opens again for the next open
    /// period; the call is rejected with what the breaker answers now.
    pub(crate) fn failed(self) -> Rejected {
        let mut panics = FirstPanic::default();
        let rejected = self.settle_failed(&mut panics);
        contain::resume(panics);
        rejected
    }

    /// The check panicked with `payload`: settled as failed, then the check's panic
    /// continues (it comes first: a panic of an observer on the way is dropped).
    pub(crate) fn failed_then_resume(self, payload: contain::Payload) -> ! {
        let mut panics = FirstPanic::default();
        panics.keep(payload);
        self.settle_failed(&mut panics);
        contain::resume_now(panics)
    }

    /// Settles the lease as failed, keeping any panic of user code in `panics`.
    fn settle_failed(mut self, panics: &mut FirstPanic) -> Rejected {
        let ticket = self.ticket.take().expect("settled once");
        let breaker = self.breaker;
        let now = breaker.clock.try_now(panics);
        breaker.transact(now, panics, |m, now| {
            let (rejected, changes) = m.check_failed(ticket, now);
            (rejected, changes.into_iter().flatten())
        })
    }
}

impl<P: TripPolicy, O: Observer> Drop for CheckLease<'_, P, O> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.breaker.locked(|m| m.check_dropped(ticket));
        }
    }
}

impl<P: TripPolicy, O: Observer> fmt::Debug for CheckLease<'_, P, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckLease")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}
