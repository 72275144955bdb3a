//! [`BreakerService`]: a service that calls through a breaker, failing fast while it is open.
//!
//! `poll_ready` prepares the next call: it reads an open breaker's rejection (the call will
//! answer with it), or, once the open period of a breaker with a
//! [health check](lazybreaker::Builder::health_check) is over, wins the check lease and runs the
//! check in the caller's task, pending until it settles: a passed check admits the call as
//! the first half-open probe, a failed one rejects it. The inner service is asked for
//! readiness only for a call that will reach it.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::{FailFast, OnRejected, ResponseFuture};
use lazybreaker::classify::Classify;
use lazybreaker::door::contain::{self, FirstPanic};
use lazybreaker::door::gate::{self, Admit, At, Gate, Ready};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::Rejected;
use lazybreaker::{Breaker, OwnedPermit};

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
    /// Admitted already (after a passed health check): `call` sends the request with it
    /// (boxed, as the check: the service stays as small as without checks).
    Admitted(Box<OwnedPermit<P, O>>),
    /// This service holds the check lease and its check is running (boxed: the service
    /// stays small for the calls that never check).
    Checking(Box<Gate<Arc<Breaker<P, O>>>>),
}

impl<S, P: TripPolicy, O: Observer, C> BreakerService<S, P, O, C> {
    /// `inner`, called through `breaker`, with `classify` deciding how its results count; a
    /// rejected request fails with [`Error::Rejected`](lazybreaker::Error::Rejected).
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
            match gate::ready(&self.breaker) {
                Ready::Rejected(rejected) => {
                    self.ready = Prepared::Peeked(rejected);
                    return Poll::Ready(Ok(()));
                }
                Ready::Passes => {
                    self.ready = Prepared::Nothing;
                    return self.inner.poll_ready(cx).map_err(J::inner);
                }
                Ready::CheckDue => return self.poll_check_due(cx),
            }
        }
        self.poll_prepared(cx)
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        if let Prepared::Nothing = self.ready {
            // The common case: the future built around the permit in place. A check due
            // that `poll_ready` did not see cannot run here (the inner service's readiness
            // was not asked for it): the lease is given back, and the call held back.
            let (inner, classify, answer) = (&mut self.inner, &self.classify, &self.on_rejected);
            return gate::admit_into(
                &self.breaker,
                At::Now,
                request,
                |request, permit, _| {
                    ResponseFuture::running(inner.call(request), permit, classify.clone())
                },
                |_, _, rejected| ResponseFuture::rejected(rejected, answer.clone()),
                |_, gate| ResponseFuture::rejected(gate.decline(), answer.clone()),
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
        if let Prepared::Checking(gate) = &mut self.ready {
            let mut panics = FirstPanic::default();
            // A probe admitted while a panic will continue is given back by the gate.
            let probe = std::task::ready!(gate.poll_probe(cx, &mut panics));
            self.ready = match probe {
                Ok(permit) => Prepared::Admitted(Box::new(permit)),
                // A panic of the check (or of an observer) leaves nothing prepared.
                Err(_) if panics.is_some() => Prepared::Nothing,
                Err(rejected) => Prepared::Answered(rejected),
            };
            contain::resume(panics);
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
            Prepared::Nothing => unreachable!("`call` admits what nothing prepared"),
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
    /// A health check is due: admits the next call through the check, which this service
    /// runs if it wins the lease (started by the first poll).
    fn prepare_checked(&mut self) {
        self.ready = match gate::admit(Arc::clone(&self.breaker), At::Now) {
            Admit::Rejected(_, rejected) => Prepared::Answered(rejected),
            Admit::Call(permit, _) => Prepared::Admitted(Box::new(permit)),
            Admit::Check(gate) => Prepared::Checking(Box::new(gate)),
        };
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
