//! [`BreakerService`]: a service that calls through a breaker, failing fast while it is open.
//!
//! `poll_ready` prepares the next call: it reads an open breaker's rejection (the call will
//! answer with it), or, once the open period of a breaker with a
//! [health check](crate::Builder::health_check) is over, wins the check lease and runs the
//! check in the caller's task, pending until it settles: a passed check admits the call as
//! the first half-open probe, a failed one rejects it. The inner service is asked for
//! readiness only for a call that will reach it.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use sync_wrapper::SyncWrapper;
use tower_service::Service;

use super::{FailFast, OnRejected, ResponseFuture};
use crate::breaker::{Admitted, Breaker, CheckFuture, CheckLease, OwnedPermit};
use crate::classify::Classify;
use crate::contain;
use crate::error::Rejected;
use crate::machine::Ahead;
use crate::observe::Observer;
use crate::policy::TripPolicy;

/// A service that calls `S` through a breaker; from [`BreakerLayer`](super::BreakerLayer).
///
/// Its error type is `Error<S::Error>` ([`FailFast`], the default), or `S::Error` with a
/// [fallback](super::BreakerLayer::fallback).
pub struct BreakerService<S, P: TripPolicy, O: Observer, C, J = FailFast> {
    inner: S,
    breaker: Arc<Breaker<P, O>>,
    classify: C,
    on_rejected: J,
    /// What `poll_ready` prepared for the next `call`.
    ready: Prepared<P, O>,
    /// Whether the breaker has a health check (read once: `call` would otherwise read the
    /// breaker for it).
    checked: bool,
}

/// The next call, as `poll_ready` left it.
enum Prepared<P: TripPolicy, O: Observer> {
    /// Nothing: `call` asks the breaker.
    Nothing,
    /// The breaker was open: `call` answers with this rejection, counting it, and the inner
    /// service was not polled.
    Peeked(Rejected),
    /// Rejected and counted already (a failed health check, or one under way).
    Answered(Rejected),
    /// Admitted already (after a passed health check): `call` sends the request with it
    /// (boxed, as the check: the service stays as small as without checks).
    Admitted(Box<OwnedPermit<P, O>>),
    /// This service holds the check lease and its check is running (boxed: the service
    /// stays small for the calls that never check).
    Checking(Box<Checking<P, O>>),
}

/// A check that a service's `poll_ready` runs.
struct Checking<P: TripPolicy, O: Observer> {
    check: SyncWrapper<CheckFuture>,
    lease: CheckLease<Arc<Breaker<P, O>>>,
}

impl<S, P: TripPolicy, O: Observer, C> BreakerService<S, P, O, C> {
    /// `inner`, called through `breaker`, with `classify` deciding how its results count; a
    /// rejected request fails with [`Error::Rejected`](crate::Error::Rejected).
    pub fn new(inner: S, breaker: Arc<Breaker<P, O>>, classify: C) -> Self {
        Self::with_answer(inner, breaker, classify, FailFast)
    }
}

impl<S, P: TripPolicy, O: Observer, C, J> BreakerService<S, P, O, C, J> {
    /// `inner`, called through `breaker`, with `classify` deciding how its results count and
    /// `on_rejected` answering the requests the breaker rejects ([`FailFast`] or a
    /// [`Fallback`](super::Fallback)).
    pub fn with_answer(inner: S, breaker: Arc<Breaker<P, O>>, classify: C, on_rejected: J) -> Self {
        Self {
            inner,
            checked: breaker.is_checked(),
            breaker,
            classify,
            on_rejected,
            ready: Prepared::Nothing,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<P, O>> {
        &self.breaker
    }
}

impl<S, Req, P, O, C, J> Service<Req> for BreakerService<S, P, O, C, J>
where
    S: Service<Req>,
    P: TripPolicy + 'static,
    O: Observer + 'static,
    C: Classify<S::Response, S::Error> + Clone,
    J: OnRejected<S::Response, S::Error, Rejected> + Clone,
{
    type Response = S::Response;
    type Error = J::Error;
    type Future = ResponseFuture<S::Future, P, O, C, J>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The common case first, moving nothing: nothing prepared (or an earlier rejection
        // read, not answered: the breaker is read again).
        if let Prepared::Nothing | Prepared::Peeked(_) = self.ready {
            // An open breaker fails fast, even when the inner service is not ready: the
            // call that follows is rejected and never reaches it.
            match self.breaker.peek_ahead() {
                Ahead::Rejected(rejected) => {
                    self.ready = Prepared::Peeked(rejected);
                    return Poll::Ready(Ok(()));
                }
                Ahead::Passes => {
                    self.ready = Prepared::Nothing;
                    return self.inner.poll_ready(cx).map_err(J::inner);
                }
                Ahead::CheckDue => return self.poll_check_due(cx),
            }
        }
        self.poll_prepared(cx)
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        if let (Prepared::Nothing, false) = (&self.ready, self.checked) {
            // The common case: the future built around the permit in place.
            let (inner, classify, answer) = (&mut self.inner, &self.classify, &self.on_rejected);
            return self.breaker.allow_owned_into(
                |permit| ResponseFuture::running(inner.call(request), permit, classify.clone()),
                |rejected| ResponseFuture::rejected(rejected, answer.clone()),
            );
        }
        let permit = match self.ready {
            Prepared::Peeked(rejected) => {
                self.ready = Prepared::Nothing;
                self.breaker.count_rejection(rejected);
                Err(rejected)
            }
            _ => self.take_prepared(),
        };
        match permit {
            Ok(permit) => {
                ResponseFuture::running(self.inner.call(request), permit, self.classify.clone())
            }
            Err(rejected) => ResponseFuture::rejected(rejected, self.on_rejected.clone()),
        }
    }
}

impl<S, P: TripPolicy, O: Observer, C, J> BreakerService<S, P, O, C, J> {
    /// `poll_ready` once something is prepared: a check to poll (the inner service ready
    /// already), an admission or a rejection to keep until `call`.
    #[inline(never)]
    fn poll_prepared<Req>(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), J::Error>>
    where
        S: Service<Req>,
        J: OnRejected<S::Response, S::Error, Rejected>,
    {
        if let Prepared::Checking(checking) = &mut self.ready {
            let checking = checking.as_mut();
            let passed = match contain::catch(|| checking.check.get_mut().as_mut().poll(cx)) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(passed)) => Ok(passed),
                Err(payload) => Err(payload),
            };
            let Prepared::Checking(checking) =
                std::mem::replace(&mut self.ready, Prepared::Nothing)
            else {
                unreachable!("matched above")
            };
            let lease = checking.lease;
            self.ready = match passed {
                Ok(true) => match lease.passed() {
                    Ok(permit) => Prepared::Admitted(Box::new(permit)),
                    Err(rejected) => Prepared::Answered(rejected),
                },
                Ok(false) => Prepared::Answered(lease.failed()),
                Err(payload) => lease.failed_then_resume(payload),
            };
        }
        // Admitted after a passed check: the inner service was ready before the check
        // started (and stays so until `call`, as tower's contract has it).
        Poll::Ready(Ok(()))
    }

    /// A health check is due: the inner service's readiness first (so that no lease or
    /// probe permit is held while it is not ready: its waker wakes this task), then the
    /// check, if this service wins the lease.
    #[cold]
    #[inline(never)]
    fn poll_check_due<Req>(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), J::Error>>
    where
        S: Service<Req>,
        J: OnRejected<S::Response, S::Error, Rejected>,
    {
        self.ready = Prepared::Nothing;
        if let Err(e) = std::task::ready!(self.inner.poll_ready(cx)) {
            return Poll::Ready(Err(J::inner(e)));
        }
        self.prepare_checked();
        self.poll_prepared(cx)
    }

    /// `call` for what `poll_ready` prepared, or for a checked breaker's call that nothing
    /// prepared.
    #[inline(never)]
    fn take_prepared(&mut self) -> Result<OwnedPermit<P, O>, Rejected> {
        match std::mem::replace(&mut self.ready, Prepared::Nothing) {
            Prepared::Nothing if self.checked => self.admit_checked(),
            Prepared::Nothing => self.breaker.allow_owned(),
            Prepared::Peeked(rejected) => {
                self.breaker.count_rejection(rejected);
                Err(rejected)
            }
            Prepared::Answered(rejected) => Err(rejected),
            Prepared::Admitted(permit) => Ok(*permit),
            checking @ Prepared::Checking(_) => {
                // Called while its check runs (`poll_ready` did not return ready): the check
                // goes on; this request is held back like any other during a check.
                self.ready = checking;
                self.breaker.count_rejection(Rejected::Checking);
                Err(Rejected::Checking)
            }
        }
    }
}

impl<S, P: TripPolicy, O: Observer, C, J> BreakerService<S, P, O, C, J> {
    /// A health check is due: admits the next call through the check, starting it if this
    /// service wins the lease. A panic starting it fails the check and continues.
    fn prepare_checked(&mut self) {
        self.ready = Prepared::Nothing; // nothing stale left should the check's start panic
        self.ready = match self.breaker.allow_checking_owned() {
            Err(rejected) => Prepared::Answered(rejected),
            Ok(Admitted::Call(permit)) => Prepared::Admitted(Box::new(permit)),
            Ok(Admitted::Check(lease)) => match contain::catch(|| lease.start()) {
                Ok(check) => Prepared::Checking(Box::new(Checking {
                    check: SyncWrapper::new(check),
                    lease,
                })),
                Err(payload) => lease.failed_then_resume(payload),
            },
        };
    }

    /// A call that `poll_ready` did not prepare, on a breaker with a health check: admitted
    /// as usual, but never a revival without the check (which it cannot run without its
    /// readiness): a lease it would win is given back, and the call held back.
    fn admit_checked(&self) -> Result<OwnedPermit<P, O>, Rejected> {
        match self.breaker.allow_checking_owned()? {
            Admitted::Call(permit) => Ok(permit),
            Admitted::Check(lease) => {
                drop(lease);
                self.breaker.count_rejection(Rejected::Checking);
                Err(Rejected::Checking)
            }
        }
    }
}

impl<S: Clone, P: TripPolicy, O: Observer, C: Clone, J: Clone> Clone
    for BreakerService<S, P, O, C, J>
{
    fn clone(&self) -> Self {
        Self::with_answer(
            self.inner.clone(),
            Arc::clone(&self.breaker),
            self.classify.clone(),
            self.on_rejected.clone(),
        )
    }
}

impl<S: fmt::Debug, P: TripPolicy, O: Observer, C, J> fmt::Debug for BreakerService<S, P, O, C, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}
