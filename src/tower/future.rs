//! [`ResponseFuture`]: the named future of a call through the breaker's services.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use crate::breaker::OwnedPermit;
use crate::classify::Classify;
use crate::error::Rejected;
use crate::future::poll_admitted;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::{FailFast, OnRejected};

pin_project! {
    /// The response future of a [`BreakerService`](super::BreakerService) and a
    /// [`KeyedBreakerService`](super::KeyedBreakerService): the inner service's response, or
    /// the layer's answer to a rejection (`J`: an error, or a [fallback](super::Fallback)
    /// response). A panic while the inner future is polled counts as a failure and keeps
    /// unwinding; dropped before it completes, the call is abandoned.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, P: TripPolicy, O: Observer, C, J = FailFast, R = Rejected> {
        #[pin]
        kind: Kind<F, P, O, C, J, R>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, P: TripPolicy, O: Observer, C, J, R> {
        Rejected { rejected: Option<R>, answer: J },
        Running {
            #[pin]
            inner: F,
            permit: OwnedPermit<P, O>,
            classify: C,
        },
    }
}

impl<F, P: TripPolicy, O: Observer, C, J, R> ResponseFuture<F, P, O, C, J, R> {
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
}

impl<F, P, O, C, J, R, T, E> Future for ResponseFuture<F, P, O, C, J, R>
where
    F: Future<Output = Result<T, E>>,
    P: TripPolicy,
    O: Observer,
    C: Classify<T, E>,
    J: OnRejected<T, E, R>,
{
    type Output = Result<T, J::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
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
                let result = ready!(poll_admitted(inner, cx, permit, &*classify));
                Poll::Ready(result.map_err(J::inner))
            }
        }
    }
}

impl<F, P: TripPolicy, O: Observer, C, J, R> fmt::Debug for ResponseFuture<F, P, O, C, J, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Rejected { .. } => "rejected",
            Kind::Running { .. } => "running",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
