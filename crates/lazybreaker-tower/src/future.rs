//! [`ResponseFuture`]: the named future of a call through the breaker's services.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;

use tower_service::Service;

use lazybreaker::classify::Classify;
use lazybreaker::door::contain::{self, FirstPanic};
use lazybreaker::door::gate::{self, Gate};
use lazybreaker::door::{BreakerSeam, Handing};
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::{Breaker, OwnedPermit};
use lazybreaker::{Rejected, RejectedBy};

use super::{FailFast, OnRejected};

pin_project! {
    /// The response future of a [`BreakerService`](super::BreakerService) and a
    /// [`KeyedBreakerService`](super::KeyedBreakerService): the inner service's response, or
    /// the layer's answer to a rejection (`J`: an error, or a [fallback](super::Fallback)
    /// response). A panic while the inner future is polled counts as a failure and keeps
    /// unwinding; dropped before it completes, the call is abandoned.
    ///
    /// A keyed service's call that won its breaker's health-check lease runs the check here
    /// first, holding its request (`D`, a [`DeferredCall`]): a passed check sends it as the
    /// first half-open probe, a failed one answers as a rejection; dropped during the check,
    /// the lease is released with no verdict.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, P: TripPolicy, O: Observer, C, J = FailFast, R = Rejected, D = NoCall<F>> {
        #[pin]
        kind: Kind<F, P, O, C, J, R, D>,
    }
}

/// The request a [`KeyedBreakerService`](super::KeyedBreakerService) holds while its
/// breaker's health check runs, with the ready inner service it will be sent to (the service
/// keeps a clone, as tower's services that defer a call do).
pub struct DeferredCall<S, Req> {
    inner: S,
    request: Req,
}

impl<S, Req> DeferredCall<S, Req> {
    pub(super) fn new(inner: S, request: Req) -> Self {
        Self { inner, request }
    }
}

impl<S, Req> fmt::Debug for DeferredCall<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeferredCall").finish_non_exhaustive()
    }
}

/// Where a keyed call keeps its check: emptied once the check settled.
type Slot<P, O, C, J, D> = Option<Box<Checking<P, O, C, J, D>>>;

/// A keyed call that runs its breaker's health check first: the check under its lease, and
/// what the call needs afterwards.
struct Checking<P: TripPolicy, O: Observer, C, J, D> {
    gate: Gate<Arc<Breaker<P, O>>>,
    deferred: D,
    classify: C,
    answer: J,
}

/// A call that is never deferred: the single-breaker service runs its health check in
/// `poll_ready`, before it has the request.
pub struct NoCall<F>(Infallible, PhantomData<fn() -> F>);

impl<F> Deferred for NoCall<F> {
    type Future = F;
    fn call(self) -> F {
        match self.0 {}
    }
}

impl<F> fmt::Debug for NoCall<F> {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {}
    }
}

/// A call to make once a health check passed: [`DeferredCall`], or [`NoCall`]. Sealed: the
/// layers name it in their futures' types; it is not for implementing.
pub trait Deferred: sealed::Sealed {
    /// The inner service's future.
    type Future;
    /// Sends the request.
    fn call(self) -> Self::Future;
}

mod sealed {
    /// Keeps [`Deferred`](super::Deferred) and [`Rejection`](super::Rejection) to this crate.
    pub trait Sealed {}
    impl<S, Req> Sealed for super::DeferredCall<S, Req> {}
    impl<F> Sealed for super::NoCall<F> {}
    impl Sealed for lazybreaker::Rejected {}
    impl Sealed for lazybreaker::RejectedBy {}
}

impl<S: Service<Req>, Req> Deferred for DeferredCall<S, Req> {
    type Future = S::Future;
    fn call(mut self) -> S::Future {
        self.inner.call(self.request)
    }
}

/// A rejection as a layer answers it: plain ([`Rejected`]), or naming the breaker
/// ([`RejectedBy`]). Sealed: it is not for implementing.
pub trait Rejection: Sized + sealed::Sealed {
    /// `rejected`, by `breaker`.
    fn of<P: TripPolicy, O: Observer>(breaker: &Breaker<P, O>, rejected: Rejected) -> Self;
}

impl Rejection for Rejected {
    fn of<P: TripPolicy, O: Observer>(_: &Breaker<P, O>, rejected: Rejected) -> Self {
        rejected
    }
}

impl Rejection for RejectedBy {
    fn of<P: TripPolicy, O: Observer>(breaker: &Breaker<P, O>, rejected: Rejected) -> Self {
        breaker.rejected_by(rejected)
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, P: TripPolicy, O: Observer, C, J, R, D> {
        Rejected { rejected: Option<R>, answer: J },
        // Boxed: the future stays as small as without checks for the calls that run none.
        Checking { checking: Slot<P, O, C, J, D> },
        Running {
            #[pin]
            inner: F,
            permit: OwnedPermit<P, O>,
            classify: C,
        },
    }
}

impl<F, P: TripPolicy, O: Observer, C, J, R, D> ResponseFuture<F, P, O, C, J, R, D> {
    pub(super) fn rejected(rejected: R, answer: J) -> Self {
        Self {
            kind: Kind::Rejected {
                rejected: Some(rejected),
                answer,
            },
        }
    }

    pub(super) fn running(inner: F, permit: OwnedPermit<P, O>, classify: C) -> Self {
        Self {
            kind: Kind::Running {
                inner,
                permit,
                classify,
            },
        }
    }

    pub(super) fn checking(
        gate: Gate<Arc<Breaker<P, O>>>,
        deferred: D,
        classify: C,
        answer: J,
    ) -> Self {
        Self {
            kind: Kind::Checking {
                checking: Some(Box::new(Checking {
                    gate,
                    deferred,
                    classify,
                    answer,
                })),
            },
        }
    }
}

impl<F, P, O, C, J, R, D, T, E> Future for ResponseFuture<F, P, O, C, J, R, D>
where
    F: Future<Output = Result<T, E>>,
    P: TripPolicy + 'static,
    O: Observer + 'static,
    C: Classify<T, E>,
    J: OnRejected<T, E, R>,
    R: Rejection,
    D: Deferred<Future = F>,
{
    type Output = Result<T, J::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Kind::Checking { .. } = self.kind {
            return self.poll_checking(cx);
        }
        self.poll_call(cx)
    }
}

impl<F, P, O, C, J, R, D, T, E> ResponseFuture<F, P, O, C, J, R, D>
where
    F: Future<Output = Result<T, E>>,
    P: TripPolicy + 'static,
    O: Observer + 'static,
    C: Classify<T, E>,
    J: OnRejected<T, E, R>,
    R: Rejection,
    D: Deferred<Future = F>,
{
    /// A call that runs (or was answered): its response, or the layer's answer.
    #[inline(always)]
    fn poll_call(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, J::Error>> {
        match self.project().kind.project() {
            KindProj::Rejected { rejected, answer } => Poll::Ready(
                answer.answer(
                    rejected
                        .take()
                        .expect("`ResponseFuture` polled after completion"),
                ),
            ),
            KindProj::Running {
                inner,
                permit,
                classify,
            } => {
                let result = ready!(gate::poll_call(inner, cx, &mut Handing(permit), &*classify));
                Poll::Ready(result.map_err(J::inner))
            }
            KindProj::Checking { .. } => unreachable!("settled before"),
        }
    }

    /// A keyed call running its check: polls it, and once it settled, the call it let
    /// through or the rejection it answers. Out of line: the calls that check are rare.
    #[inline(never)]
    fn poll_checking(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, J::Error>> {
        let KindProj::Checking { checking } = self.as_mut().project().kind.project() else {
            unreachable!("called while checking")
        };
        let state = checking
            .as_mut()
            .expect("`ResponseFuture` polled after completion");
        let mut panics = FirstPanic::default();
        let checked = ready!(state.gate.poll_settle(cx, &mut panics));
        let Checking {
            gate,
            deferred,
            classify,
            answer,
        } = *checking.take().expect("settled once");
        // A panic of the check continues once its failure is settled.
        contain::resume(panics);
        // Settled: the call is sent, or answered as a rejection.
        let kind = match checked.into_result() {
            Ok(permit) => Kind::Running {
                inner: deferred.call(),
                permit,
                classify,
            },
            Err(rejected) => Kind::Rejected {
                rejected: Some(R::of(gate.holder(), rejected)),
                answer,
            },
        };
        self.as_mut().project().kind.set(kind);
        self.poll_call(cx)
    }
}

impl<F, P: TripPolicy, O: Observer, C, J, R, D> fmt::Debug for ResponseFuture<F, P, O, C, J, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Rejected { .. } => "rejected",
            Kind::Checking { .. } => "checking",
            Kind::Running { .. } => "running",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
