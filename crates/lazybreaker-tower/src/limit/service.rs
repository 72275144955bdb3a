//! [`LimitService`]: a service whose calls each take a place under an adaptive concurrency
//! limit, or are turned away at once.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::future::LimitFuture;
use crate::fallback::{FailFast, OnRejected};
use lazybreaker::classify::Classify;
use lazybreaker::limit::{Algorithm, Limiter};
use lazybreaker::{Clock, Rejected};

/// A service that calls `S` under a [`Limiter`]; from [`LimitLayer`](super::LimitLayer),
/// which says how calls are judged.
///
/// Its error type is `Error<S::Error>` ([`FailFast`], the default), the inner service's own
/// with [`IntoInner`](crate::IntoInner) or a [fallback](super::LimitLayer::fallback).
pub struct LimitService<S, A: Algorithm, K, C, J = FailFast> {
    inner: S,
    limiter: Arc<Limiter<A>>,
    clock: Arc<K>,
    classify: C,
    on_rejected: J,
    deadline: Option<Duration>,
}

impl<S, A: Algorithm, K, C, J> LimitService<S, A, K, C, J> {
    pub(crate) fn new(
        inner: S,
        limiter: Arc<Limiter<A>>,
        clock: Arc<K>,
        classify: C,
        on_rejected: J,
        deadline: Option<Duration>,
    ) -> Self {
        Self {
            inner,
            limiter,
            clock,
            classify,
            on_rejected,
            deadline,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A>> {
        &self.limiter
    }
}

impl<S, Req, A, K, C, J> Service<Req> for LimitService<S, A, K, C, J>
where
    S: Service<Req>,
    S::Error: 'static,
    A: Algorithm,
    K: Clock,
    C: Classify<S::Response, S::Error> + Clone,
    J: OnRejected<S::Response, S::Error, Rejected> + Clone,
{
    type Response = S::Response;
    type Error = J::Error;
    type Future = LimitFuture<S::Future, A, K, C, J>;

    /// The inner service's readiness: never a wait for a place under the limit (a call at
    /// the limit is turned away in `call`).
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(J::inner)
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        // A limit that learns nothing (`Fixed`) needs no time: no clock read.
        let started = if self.limiter.learns() {
            self.clock.now()
        } else {
            Duration::ZERO
        };
        match self.limiter.try_acquire_owned(started) {
            Ok(permit) => LimitFuture::running(
                self.inner.call(request),
                permit,
                Arc::clone(&self.clock),
                self.classify.clone(),
                started,
                self.deadline,
            ),
            Err(rejected) => LimitFuture::rejected(rejected, self.on_rejected.clone()),
        }
    }
}

impl<S: Clone, A: Algorithm, K, C: Clone, J: Clone> Clone for LimitService<S, A, K, C, J> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            clock: Arc::clone(&self.clock),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
            deadline: self.deadline,
        }
    }
}

impl<S: fmt::Debug, A: Algorithm, K, C, J> fmt::Debug for LimitService<S, A, K, C, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitService")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}
