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
    /// Admitted already (after a passed health check): `call` sends the request with it.
    Admitted(OwnedPermit<P, O>),
    /// This service holds the check lease and its check is running.
    Checking {
        check: SyncWrapper<CheckFuture>,
        lease: CheckLease<Arc<Breaker<P, O>>>,
    },
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
    P: TripPolicy,
    O: Observer,
    C: Classify<S::Response, S::Error> + Clone,
    J: OnRejected<S::Response, S::Error, Rejected> + Clone,
{
    type Response = S::Response;
    type Error = J::Error;
    type Future = ResponseFuture<S::Future, P, O, C, J>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match std::mem::replace(&mut self.ready, Prepared::Nothing) {
                Prepared::Checking { check, lease } => match self.poll_check(cx, check, lease) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => continue,
                },
                Prepared::Admitted(permit) => {
                    self.ready = Prepared::Admitted(permit);
                    return self.inner.poll_ready(cx).map_err(J::inner);
                }
                // A rejection read before, not answered yet: read the breaker again.
                Prepared::Nothing | Prepared::Peeked(_) => {}
                Prepared::Answered(rejected) => {
                    self.ready = Prepared::Answered(rejected);
                    return Poll::Ready(Ok(()));
                }
            }
            // An open breaker fails fast, even when the inner service is not ready: the call
            // that follows is rejected and never reaches it.
            match self.breaker.peek_ahead() {
                Ahead::Rejected(rejected) => {
                    self.ready = Prepared::Peeked(rejected);
                    return Poll::Ready(Ok(()));
                }
                Ahead::Passes => return self.inner.poll_ready(cx).map_err(J::inner),
                Ahead::CheckDue => self.prepare_checked(),
            }
        }
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let permit = match std::mem::replace(&mut self.ready, Prepared::Nothing) {
            Prepared::Nothing if self.breaker.is_checked() => self.admit_checked(),
            Prepared::Nothing => self.breaker.allow_owned(),
            Prepared::Peeked(rejected) => {
                self.breaker.count_rejection(rejected);
                Err(rejected)
            }
            Prepared::Answered(rejected) => Err(rejected),
            Prepared::Admitted(permit) => Ok(permit),
            checking @ Prepared::Checking { .. } => {
                // Called while its check runs (`poll_ready` did not return ready): the check
                // goes on; this request is held back like any other during a check.
                self.ready = checking;
                self.breaker.count_rejection(Rejected::Checking);
                Err(Rejected::Checking)
            }
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
    /// A health check is due: admits the next call through the check, starting it if this
    /// service wins the lease. A panic starting it fails the check and continues.
    fn prepare_checked(&mut self) {
        self.ready = match self.breaker.allow_checking_owned() {
            Err(rejected) => Prepared::Answered(rejected),
            Ok(Admitted::Call(permit)) => Prepared::Admitted(permit),
            Ok(Admitted::Check(lease)) => match contain::catch(|| lease.start()) {
                Ok(check) => Prepared::Checking {
                    check: SyncWrapper::new(check),
                    lease,
                },
                Err(payload) => lease.failed_then_resume(payload),
            },
        };
    }

    /// Polls the running check; once it settles, the next call is admitted (passed) or
    /// rejected (failed). A panic in the check fails it and continues.
    fn poll_check(
        &mut self,
        cx: &mut Context<'_>,
        mut check: SyncWrapper<CheckFuture>,
        lease: CheckLease<Arc<Breaker<P, O>>>,
    ) -> Poll<()> {
        let passed = match contain::catch(|| check.get_mut().as_mut().poll(cx)) {
            Ok(Poll::Pending) => {
                self.ready = Prepared::Checking { check, lease };
                return Poll::Pending;
            }
            Ok(Poll::Ready(passed)) => passed,
            Err(payload) => lease.failed_then_resume(payload),
        };
        self.ready = if passed {
            match lease.passed() {
                Ok(permit) => Prepared::Admitted(permit),
                Err(rejected) => Prepared::Answered(rejected),
            }
        } else {
            Prepared::Answered(lease.failed())
        };
        Poll::Ready(())
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
