//! [`BreakerService`]: a service that calls through a breaker, failing fast while it is open.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::{FailFast, OnRejected, ResponseFuture};
use crate::breaker::Breaker;
use crate::classify::Classify;
use crate::error::Rejected;
use crate::observe::Observer;
use crate::policy::TripPolicy;

/// A service that calls `S` through a breaker; from [`BreakerLayer`](super::BreakerLayer).
///
/// Its error type is `Error<S::Error>` ([`FailFast`], the default), or `S::Error` with a
/// [fallback](super::BreakerLayer::fallback).
pub struct BreakerService<S, P, O, C, J = FailFast> {
    inner: S,
    breaker: Arc<Breaker<P, O>>,
    classify: C,
    on_rejected: J,
    /// Set by `poll_ready` when the breaker was open: `call` answers with it, and the inner
    /// service was not polled.
    rejection: Option<Rejected>,
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
            rejection: None,
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
        // An open breaker fails fast, even when the inner service is not ready: the call that
        // follows is rejected and never reaches it.
        if let Some(rejected) = self.breaker.peek_open() {
            self.rejection = Some(rejected);
            return Poll::Ready(Ok(()));
        }
        self.rejection = None;
        self.inner.poll_ready(cx).map_err(J::inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        if let Some(rejected) = self.rejection.take() {
            self.breaker.count_rejection(rejected);
            return ResponseFuture::rejected(rejected, self.on_rejected.clone());
        }
        match self.breaker.allow_owned() {
            Ok(permit) => {
                ResponseFuture::running(self.inner.call(request), permit, self.classify.clone())
            }
            Err(rejected) => ResponseFuture::rejected(rejected, self.on_rejected.clone()),
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
