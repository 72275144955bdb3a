//! [`LimitFuture`]: a call under the limit, reporting to it when it ends.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use super::verdict::{verdict, Verdict};
use crate::fallback::{FailFast, OnRejected};
use lazybreaker::classify::Classify;
use lazybreaker::door::contain;
use lazybreaker::limit::{Algorithm, OwnedLimitPermit};
use lazybreaker::{Clock, Rejected};

pin_project! {
    /// The response future of a [`LimitService`](super::LimitService): the inner service's
    /// response, reported to the limit when it comes (a sample, a drop, or nothing, as the
    /// layer's classifier judges it), or the layer's answer to a call turned away at the
    /// limit. Dropped before it completes, its place is given back unsampled; a panic while
    /// the inner future is polled gives it back unsampled too, and keeps unwinding.
    #[must_use = "futures do nothing unless polled"]
    pub struct LimitFuture<F, A: Algorithm, K, C, J = FailFast> {
        #[pin]
        kind: Kind<F, A, K, C, J>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, A: Algorithm, K, C, J> {
        Rejected { rejected: Option<Rejected>, answer: J },
        Running {
            #[pin]
            inner: F,
            // Taken when the call ends.
            permit: Option<OwnedLimitPermit<A>>,
            clock: Arc<K>,
            classify: C,
            started: Duration,
            deadline: Option<Duration>,
        },
    }
}

impl<F, A: Algorithm, K, C, J> LimitFuture<F, A, K, C, J> {
    pub(super) fn rejected(rejected: Rejected, answer: J) -> Self {
        Self {
            kind: Kind::Rejected {
                rejected: Some(rejected),
                answer,
            },
        }
    }

    pub(super) fn running(
        inner: F,
        permit: OwnedLimitPermit<A>,
        clock: Arc<K>,
        classify: C,
        started: Duration,
        deadline: Option<Duration>,
    ) -> Self {
        Self {
            kind: Kind::Running {
                inner,
                permit: Some(permit),
                clock,
                classify,
                started,
                deadline,
            },
        }
    }
}

impl<F, A, K, C, J, T, E> Future for LimitFuture<F, A, K, C, J>
where
    F: Future<Output = Result<T, E>>,
    E: 'static,
    A: Algorithm,
    K: Clock,
    C: Classify<T, E>,
    J: OnRejected<T, E, Rejected>,
{
    type Output = Result<T, J::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        const DONE: &str = "`LimitFuture` polled after completion";
        match self.project().kind.project() {
            KindProj::Rejected { rejected, answer } => {
                Poll::Ready(answer.answer(rejected.take().expect(DONE)))
            }
            KindProj::Running {
                inner,
                permit,
                clock,
                classify,
                started,
                deadline,
            } => {
                let result = match contain::catch(AssertUnwindSafe(|| inner.poll(cx))) {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(result)) => result,
                    Err(payload) => {
                        // The call panicked: its place back, unsampled, and the panic goes on.
                        if let Some(permit) = permit.take() {
                            permit.ignore();
                        }
                        contain::resume_payload(payload)
                    }
                };
                let permit = permit.take().expect(DONE);
                if !permit.limiter().learns() {
                    // Nothing to learn (`Fixed`): the place back, no clock read.
                    permit.ignore();
                    return Poll::Ready(result.map_err(J::inner));
                }
                let now = clock.now();
                // A panic of the classifier drops the permit: given back unsampled.
                match verdict(&*classify, &result, now.saturating_sub(*started), *deadline) {
                    Verdict::Success => permit.success(now),
                    Verdict::Dropped => permit.dropped(now),
                    Verdict::Ignore => permit.ignore(),
                };
                Poll::Ready(result.map_err(J::inner))
            }
        }
    }
}

impl<F, A: Algorithm, K, C, J> fmt::Debug for LimitFuture<F, A, K, C, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Rejected { .. } => "rejected",
            Kind::Running { .. } => "running",
        };
        f.debug_struct("LimitFuture")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
