//! [`BreakerService`]: a service that calls through a breaker, failing fast while it is open.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::ResponseFuture;
use crate::breaker::Breaker;
use crate::classify::Classify;
use crate::error::{Error, Rejected};
use crate::observe::Observer;
use crate::policy::TripPolicy;

/// A service that calls `S` through a breaker; from [`BreakerLayer`](super::BreakerLayer).
pub struct BreakerService<S, P, O, C> {
    inner: S,
    breaker: Arc<Breaker<P, O>>,
    classify: C,
    /// Set by `poll_ready` when the breaker was open: `call` answers with it, and the inner
    /// service was not polled.
    rejection: Option<Rejected>,
}

impl<S, P: TripPolicy, O: Observer, C> BreakerService<S, P, O, C> {
    /// `inner`, called through `breaker`, with `classify` deciding how its results count.
    pub fn new(inner: S, breaker: Arc<Breaker<P, O>>, classify: C) -> Self {
        Self {
            inner,
            breaker,
            classify,
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

impl<S, Req, P, O, C> Service<Req> for BreakerService<S, P, O, C>
where
    S: Service<Req>,
    P: TripPolicy,
    O: Observer,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, P, O, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // An open breaker fails fast, even when the inner service is not ready: the call that
        // follows is rejected and never reaches it.
        if let Some(rejected) = self.breaker.peek_open() {
            self.rejection = Some(rejected);
            return Poll::Ready(Ok(()));
        }
        self.rejection = None;
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        if let Some(rejected) = self.rejection.take() {
            self.breaker.count_rejection(rejected);
            return ResponseFuture::rejected(rejected);
        }
        match self.breaker.allow_owned() {
            Ok(permit) => {
                ResponseFuture::running(self.inner.call(request), permit, self.classify.clone())
            }
            Err(rejected) => ResponseFuture::rejected(rejected),
        }
    }
}

impl<S: Clone, P: TripPolicy, O: Observer, C: Clone> Clone for BreakerService<S, P, O, C> {
    fn clone(&self) -> Self {
        Self::new(
            self.inner.clone(),
            Arc::clone(&self.breaker),
            self.classify.clone(),
        )
    }
}

impl<S: fmt::Debug, P: TripPolicy, O: Observer, C> fmt::Debug for BreakerService<S, P, O, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}
