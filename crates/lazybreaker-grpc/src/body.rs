//! [`Watched`]: a gRPC response body that settles its call's verdict by its trailers.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::rules::StatusRules;
use lazybreaker::classify::Unsettled;
use lazybreaker::door::contain;
use lazybreaker::policy::Outcome;

pin_project! {
    /// The body of a response whose status comes in its trailers: passes every frame on, and
    /// settles the call when the outcome shows (the trailers' `grpc-status`, an error, or an
    /// end with no status). Dropped before then, its verdict is dropped: the call is
    /// abandoned.
    pub(crate) struct Watched<B> {
        #[pin]
        inner: B,
        rules: StatusRules,
        verdict: Option<Unsettled>,
    }
}

impl<B> Watched<B> {
    pub(crate) fn new(inner: B, rules: StatusRules, verdict: Unsettled) -> Self {
        Self {
            inner,
            rules,
            verdict: Some(verdict),
        }
    }
}

impl<B> Body for Watched<B>
where
    B: Body<Error = tonic::Status>,
{
    type Data = B::Data;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, tonic::Status>>> {
        let this = self.project();
        let mut inner = this.inner;
        let polled = match contain::catch(|| inner.as_mut().poll_frame(cx)) {
            Ok(polled) => polled,
            Err(payload) => {
                // As a call that panicked: a failure, then the panic goes on.
                if let Some(verdict) = this.verdict.take() {
                    verdict.settle(Outcome::Failure);
                }
                contain::resume_payload(payload)
            }
        };
        let Poll::Ready(frame) = &polled else {
            return polled;
        };
        if this.verdict.is_none() {
            return polled;
        }
        let settled = match frame {
            Some(Ok(frame)) => match frame.trailers_ref() {
                Some(trailers) => {
                    let outcome = this.rules.by_trailers(Some(trailers));
                    Some((outcome, this.rules.pushback(outcome, trailers)))
                }
                None => None,
            },
            Some(Err(status)) => Some((this.rules.transport(status), None)),
            None => Some((this.rules.by_trailers(None), None)),
        };
        if let Some((outcome, open_for)) = settled {
            let verdict = this.verdict.take().expect("checked above");
            match open_for {
                Some(open_for) => verdict.settle_open_for(outcome, open_for),
                None => verdict.settle(outcome),
            }
        }
        polled
    }

    /// Not while the verdict is unsettled: the frame that settles it (or the end that says
    /// there is no status) must still be polled.
    fn is_end_stream(&self) -> bool {
        self.verdict.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
