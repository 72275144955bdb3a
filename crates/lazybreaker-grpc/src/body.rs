//! The gRPC response body a breaker watches: [`Watched`] settles its call's verdict by its
//! trailers, and [`GrpcBody`] is what a classifier over `http::Response` can watch.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::rules::{code_in, overloaded_by, StatusRules};
use lazybreaker::classify::{Classify, Unsettled};
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

/// A response body that can carry an unsettled call's verdict to its end: tonic's own
/// (what a `Channel` returns and a tonic server's routes answer with). Sealed.
pub trait GrpcBody: Default + sealed::Sealed {
    /// `self`, watched: settles `verdict` by its trailers when it ends.
    #[doc(hidden)]
    fn watch(self, rules: StatusRules, verdict: Unsettled) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for tonic::body::Body {}
}

impl GrpcBody for tonic::body::Body {
    fn watch(self, rules: StatusRules, verdict: Unsettled) -> Self {
        use http_body::Body as _;
        if self.is_end_stream() {
            // Over already, with no trailers to come: a stream that ends with no status.
            verdict.settle(rules.by_trailers(None));
            return self;
        }
        tonic::body::Body::new(Watched::new(self, rules, verdict))
    }
}

impl<B: GrpcBody, E: 'static> Classify<http::Response<B>, E> for StatusRules {
    #[inline]
    fn classify(&self, result: &Result<http::Response<B>, E>) -> Outcome {
        match result {
            // A 200 without a status: provisional (the status is in the trailers, which only
            // the layers that hand the verdict to the body see).
            Ok(response) => self
                .by_headers(response.status(), response.headers())
                .unwrap_or(Outcome::Success),
            Err(error) => self.transport_any(error),
        }
    }

    fn open_for(&self, result: &Result<http::Response<B>, E>) -> Option<Duration> {
        let response = result.as_ref().ok()?;
        let outcome = self.by_headers(response.status(), response.headers())?;
        self.pushback(outcome, response.headers())
    }

    /// `RESOURCE_EXHAUSTED`, or a failure with the server's pushback: alive and shedding load.
    fn overloaded(&self, result: &Result<http::Response<B>, E>) -> bool {
        match result {
            Ok(response) => overloaded_by(code_in(response.headers()), response.headers()),
            Err(_) => false,
        }
    }

    #[inline]
    fn unsettled(&self, result: &Result<http::Response<B>, E>) -> bool {
        matches!(result, Ok(r) if r.status() == StatusCode::OK && code_in(r.headers()).is_none())
    }

    fn defer(&self, result: &mut Result<http::Response<B>, E>, verdict: Unsettled) {
        match result {
            Ok(response) => {
                let body = std::mem::take(response.body_mut());
                *response.body_mut() = body.watch(*self, verdict);
            }
            Err(_) => verdict.settle(self.classify(result)),
        }
    }
}
