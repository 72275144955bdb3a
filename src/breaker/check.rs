//! Health-checked revival, the breaker's side: the user's check
//! ([`Builder::health_check`](super::Builder::health_check)), an admission that may hand a
//! call the check lease ([`Breaker::allow_checking`]), and the lease the call settles
//! ([`CheckLease`]). The machine decides who runs the check and what its verdict does
//! (`machine::check`); the check itself runs in the caller's future, never under the lock.
//!
//! A lease borrows its breaker (an `execute_async` future) or holds an `Arc` of it (a tower
//! service, which keeps it between `poll_ready` calls): [`Holder`] is either.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::contain::{self, FirstPanic};
use crate::error::Rejected;
use crate::lane::Entry;
use crate::machine::{Admission, CheckTicket};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::TripPolicy;
use crate::state::State;

use super::permit::Grant;
use super::{Breaker, OwnedPermit, Permit};

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

/// How an admission holds its breaker: borrowed (a [`Permit`]) or shared (an
/// [`OwnedPermit`]).
pub(crate) trait Holder: Clone {
    type P: TripPolicy;
    type O: Observer;
    /// The permit an admission through this holder reports with.
    type Permit;
    /// The breaker.
    fn breaker(&self) -> &Breaker<Self::P, Self::O>;
    /// The permit of `grant`.
    fn permit(self, grant: Grant) -> Self::Permit;
    /// Gives `permit` back unused (an exclusion).
    fn exclude(permit: Self::Permit);
}

impl<'a, P: TripPolicy, O: Observer> Holder for &'a Breaker<P, O> {
    type P = P;
    type O = O;
    type Permit = Permit<'a, P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> Permit<'a, P, O> {
        Permit::new(self, grant)
    }
    fn exclude(permit: Permit<'a, P, O>) {
        permit.exclude();
    }
}

impl<P: TripPolicy, O: Observer> Holder for Arc<Breaker<P, O>> {
    type P = P;
    type O = O;
    type Permit = OwnedPermit<P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> OwnedPermit<P, O> {
        OwnedPermit::new(self, grant)
    }
    fn exclude(permit: OwnedPermit<P, O>) {
        permit.exclude();
    }
}

/// A borrowed `Arc`: the permit holds a clone of it, made only for an admission.
impl<P: TripPolicy, O: Observer> Holder for &Arc<Breaker<P, O>> {
    type P = P;
    type O = O;
    type Permit = OwnedPermit<P, O>;
    #[inline(always)]
    fn breaker(&self) -> &Breaker<P, O> {
        self
    }
    #[inline(always)]
    fn permit(self, grant: Grant) -> OwnedPermit<P, O> {
        OwnedPermit::new(Arc::clone(self), grant)
    }
    fn exclude(permit: OwnedPermit<P, O>) {
        permit.exclude();
    }
}

/// What [`Breaker::allow_checking`] admits: a call, or a call that first runs the check.
pub(crate) enum Admitted<B: Holder> {
    /// The call goes ahead, reporting through this permit.
    Call(B::Permit),
    /// The call holds the check lease: it runs the check, then settles the lease, before it
    /// builds its request.
    Check(CheckLease<B>),
}

/// The health-check lease a call holds. Settled by [`passed`](CheckLease::passed) or
/// [`failed`](CheckLease::failed); dropped unsettled (the call was cancelled during its
/// check), it releases the lease with no verdict, so the next call runs the check again.
pub(crate) struct CheckLease<B: Holder> {
    pub(super) breaker: B,
    ticket: Option<CheckTicket>,
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Admits a call that can run the health check: as [`allow`](Breaker::allow) does, except
    /// that once the open period is over, the first call to arrive gets the check lease
    /// instead of a permit, and calls that arrive while the check runs are rejected with
    /// [`Rejected::Checking`]. Without a health check, it is `allow`.
    #[inline]
    pub(crate) fn allow_checking(&self) -> Result<Admitted<&Self>, Rejected> {
        // Spelled out rather than through `admit_checking` (whose answer carries whether the
        // call is a probe): the closed path builds its permit in place, as `allow` does.
        let mut at = 0;
        match self.lane_admit(&mut at) {
            Entry::Admitted { ticket } => {
                Ok(Admitted::Call(Permit::new(self, Grant::new(ticket, at))))
            }
            other if self.health_check.is_none() => self
                .allow_slow(other)
                .map(|grant| Admitted::Call(Permit::new(self, grant))),
            other => admit_checking_slow(self, other).map(|(admitted, _)| admitted),
        }
    }
}

/// The admission of [`Breaker::allow_checking`] through `holder`, at `now` if given (else
/// at a clock reading), with whether a call admitted is a half-open probe.
#[inline(always)]
pub(super) fn admit_checking<B: Holder>(
    holder: B,
    now: Option<Nanos>,
) -> Result<(Admitted<B>, bool), Rejected> {
    let breaker = holder.breaker();
    let mut at = 0;
    let entry = match now {
        Some(now) => {
            at = now;
            breaker.lane.admit(|| now)
        }
        None => breaker.lane_admit(&mut at),
    };
    match entry {
        Entry::Admitted { ticket } => {
            Ok((Admitted::Call(holder.permit(Grant::new(ticket, at))), false))
        }
        other if breaker.health_check.is_none() => {
            let (grant, probe) = breaker.admit_slow(other, |m| m.state() == State::HalfOpen)?;
            Ok((Admitted::Call(holder.permit(grant)), probe))
        }
        other => admit_checking_slow(holder, other),
    }
}

/// [`admit_checking`] off the lock-free lane.
#[inline(never)]
fn admit_checking_slow<B: Holder>(
    holder: B,
    entry: Entry,
) -> Result<(Admitted<B>, bool), Rejected> {
    let breaker = holder.breaker();
    let now = breaker.entry_now(entry)?;
    let mut panics = FirstPanic::default();
    let admitted = breaker.transact(Some(now), &mut panics, |m, now, changes| {
        let (admitted, change) = m.admit_checking(now);
        changes.push(change);
        admitted.map(|a| match a {
            Admission::Call(ticket) => Ok((Grant::new(ticket, now), m.state() == State::HalfOpen)),
            Admission::Check(ticket) => Err(ticket),
        })
    });
    let will_resume = panics.will_resume();
    let admitted = admitted.map(|a| match a {
        Ok((grant, probe)) => (Admitted::Call(holder.clone().permit(grant)), probe),
        Err(ticket) => (
            Admitted::Check(CheckLease {
                breaker: holder.clone(),
                ticket: Some(ticket),
            }),
            false,
        ),
    });
    if will_resume {
        // An observer or the policy panicked on the way: nothing will run, so the
        // admission is given back (a permit dropped while panicking is a failure, so it is
        // excluded first; a lease is released) before the panic continues.
        if let Ok((admitted, _)) = admitted {
            match admitted {
                Admitted::Call(permit) => B::exclude(permit),
                Admitted::Check(lease) => drop(lease),
            }
        }
        contain::resume(panics);
        // Reached only while this thread is unwinding already (the panic is then dropped):
        // nothing was admitted.
        return Err(Rejected::Checking);
    }
    admitted
}

impl<B: Holder> CheckLease<B> {
    /// Starts the user's check: its future, to poll in the caller's. A panic here (in the
    /// user's closure) unwinds to the caller, which settles the lease as failed.
    pub(crate) fn start(&self) -> CheckFuture {
        let check = self
            .breaker
            .breaker()
            .health_check
            .as_ref()
            .expect("a lease is only handed out when a check is configured");
        (check.0)()
    }

    /// The check passed: the breaker goes half-open and this call is its first probe (a
    /// permit); or, if the lease was stale, the call is treated as it arrives now.
    pub(crate) fn passed(mut self) -> Result<B::Permit, Rejected> {
        let ticket = self.ticket.take().expect("settled once");
        let holder = self.breaker.clone();
        let breaker = holder.breaker();
        let mut panics = FirstPanic::default();
        let now = breaker.clock.try_now(&mut panics);
        let admitted = breaker.transact(now, &mut panics, |m, now, changes| {
            let (admitted, change) = m.check_passed(ticket, now);
            changes.push(change);
            admitted.map(|t| Grant::new(t, now))
        });
        let will_resume = panics.will_resume();
        let admitted = admitted.map(|grant| holder.clone().permit(grant));
        if will_resume {
            if let Ok(permit) = admitted {
                B::exclude(permit);
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
        let rejected = self.failed_keeping(&mut panics);
        contain::resume(panics);
        rejected
    }

    /// The check panicked with `payload`: settled as failed, then the check's panic
    /// continues (it comes first: a panic of an observer on the way is dropped).
    pub(crate) fn failed_then_resume(self, payload: contain::Payload) -> ! {
        let mut panics = FirstPanic::default();
        panics.keep(payload);
        self.failed_keeping(&mut panics);
        contain::resume_now(panics)
    }

    /// Settles the lease as failed, keeping any panic of user code in `panics` (for the
    /// caller to continue once its own bookkeeping is done).
    pub(crate) fn failed_keeping(mut self, panics: &mut FirstPanic) -> Rejected {
        let ticket = self.ticket.take().expect("settled once");
        let breaker = self.breaker.breaker();
        let now = breaker.clock.try_now(panics);
        breaker.transact(now, panics, |m, now, changes| {
            let (rejected, made) = m.check_failed(ticket, now);
            changes.extend(made);
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
