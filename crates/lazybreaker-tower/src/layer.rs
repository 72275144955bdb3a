//! [`BreakerLayer`]: wraps a service in a [`BreakerService`](super::BreakerService).

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::{BreakerService, FailFast, Fallback};
use lazybreaker::classify::OkIsSuccess;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::Breaker;
use lazybreaker::Rejected;

/// Wraps services in a [`BreakerService`] that calls through `breaker`.
///
/// `C` decides how each response counts ([`classify`](BreakerLayer::classify)); `J` what a
/// rejected request gets: an [`Error::Rejected`](lazybreaker::Error::Rejected) by default, or a
/// response of its own ([`fallback`](BreakerLayer::fallback)).
pub struct BreakerLayer<P = ConsecutiveFailures, O = (), C = OkIsSuccess, J = FailFast> {
    breaker: Arc<Breaker<P, O>>,
    classify: C,
    on_rejected: J,
}

impl<P: TripPolicy, O: Observer> BreakerLayer<P, O> {
    /// A layer whose services call through `breaker`, counting `Ok` as a success and `Err`
    /// as a failure.
    pub fn new(breaker: Arc<Breaker<P, O>>) -> Self {
        Self {
            breaker,
            classify: OkIsSuccess,
            on_rejected: FailFast,
        }
    }
}

impl<P: TripPolicy, O: Observer, C, J> BreakerLayer<P, O, C, J> {
    /// The same layer, with `classify` deciding how each response counts (any
    /// [`Classify`](lazybreaker::Classify): [`http::StatusRules`](lazybreaker::http::StatusRules) for
    /// HTTP, a closure over `&Result<Response, Error>`).
    pub fn classify<D>(self, classify: D) -> BreakerLayer<P, O, D, J> {
        BreakerLayer {
            breaker: self.breaker,
            classify,
            on_rejected: self.on_rejected,
        }
    }

    /// The same layer, answering a rejected request with `fallback(&rejected)` instead of
    /// an error: the service's error type is then the inner service's own, so the layer fits
    /// where errors are not allowed (an axum `Router`, no `HandleErrorLayer`). See
    /// [`Fallback`] for how such answers are counted.
    ///
    /// # Examples
    ///
    /// An axum route behind a breaker that answers 503 with `Retry-After` while open:
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use lazybreaker::http::{rejected_response, StatusRules};
    /// use lazybreaker_tower::BreakerLayer;
    /// use lazybreaker::Breaker;
    /// use std::sync::Arc;
    ///
    /// let breaker = Arc::new(Breaker::builder().name("upstream").build());
    /// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(
    ///     BreakerLayer::new(breaker)
    ///         .classify(StatusRules::new())
    ///         .fallback(rejected_response),
    /// );
    /// # let _ = app;
    /// ```
    pub fn fallback<F, T>(self, fallback: F) -> BreakerLayer<P, O, C, Fallback<F>>
    where
        F: Fn(&Rejected) -> T + Clone,
    {
        BreakerLayer {
            breaker: self.breaker,
            classify: self.classify,
            on_rejected: Fallback(fallback),
        }
    }

    /// The same layer, answering a rejected request with `answer`: any
    /// [`OnRejected`](super::OnRejected), such as [`grpc::AsStatus`](https://docs.rs/lazybreaker-grpc/latest/lazybreaker_grpc/struct.AsStatus.html)
    /// (`lazybreaker-grpc`), which answers
    /// as a gRPC server does. [`fallback`](BreakerLayer::fallback) is this with a function
    /// of the rejection, [`FailFast`] (an error) the default.
    pub fn on_rejected<A>(self, answer: A) -> BreakerLayer<P, O, C, A> {
        BreakerLayer {
            breaker: self.breaker,
            classify: self.classify,
            on_rejected: answer,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<P, O>> {
        &self.breaker
    }
}

impl<S, P: TripPolicy, O: Observer, C: Clone, J: Clone> Layer<S> for BreakerLayer<P, O, C, J> {
    type Service = BreakerService<S, P, O, C, J>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService::with_answer(
            inner,
            Arc::clone(&self.breaker),
            self.classify.clone(),
            self.on_rejected.clone(),
        )
    }
}

impl<P: TripPolicy, O: Observer, C: Clone, J: Clone> Clone for BreakerLayer<P, O, C, J> {
    fn clone(&self) -> Self {
        Self {
            breaker: Arc::clone(&self.breaker),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
        }
    }
}

impl<P: TripPolicy, O: Observer, C, J> fmt::Debug for BreakerLayer<P, O, C, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}
