//! [`ResponseFuture`]: the named future of a call through the breaker's services.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use crate::breaker::OwnedPermit;
use crate::classify::Classify;
use crate::error::{Error, Rejected};
use crate::future::poll_admitted;
use crate::observe::Observer;
use crate::policy::TripPolicy;

pin_project! {
    /// The response future of a [`BreakerService`](super::BreakerService): the inner
    /// service's response, or why the breaker did not make the call. A panic while the inner
    /// future is polled counts as a failure and keeps unwinding; dropped before it completes,
    /// the call is abandoned.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, P: TripPolicy, O: Observer, C> {
        #[pin]
        kind: Kind<F, P, O, C>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, P: TripPolicy, O: Observer, C> {
        Rejected { rejected: Option<Rejected> },
        Running {
            #[pin]
            inner: F,
            permit: OwnedPermit<P, O>,
            classify: C,
        },
    }
}

impl<F, P: TripPolicy, O: Observer, C> ResponseFuture<F, P, O, C> {
    pub(super) fn rejected(rejected: Rejected) -> Self {
        Self {
            kind: Kind::Rejected {
                rejected: Some(rejected),
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

impl<F, P, O, C, T, E> Future for ResponseFuture<F, P, O, C>
where
    F: Future<Output = Result<T, E>>,
    P: TripPolicy,
    O: Observer,
    C: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Rejected { rejected } => Poll::Ready(Err(Error::Rejected(
                rejected
                    .take()
                    .expect("`ResponseFuture` polled after completion"),
            ))),
            KindProj::Running {
                inner,
                permit,
                classify,
            } => {
                let result = ready!(poll_admitted(inner, cx, permit, &*classify));
                Poll::Ready(result.map_err(Error::Inner))
            }
        }
    }
}

impl<F, P: TripPolicy, O: Observer, C> fmt::Debug for ResponseFuture<F, P, O, C> {
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
