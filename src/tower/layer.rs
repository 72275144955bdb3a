//! [`BreakerLayer`]: wraps a service in a [`BreakerService`](super::BreakerService).

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::BreakerService;
use crate::breaker::Breaker;
use crate::classify::OkIsSuccess;
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, TripPolicy};

/// Wraps services in a [`BreakerService`] that calls through `breaker`.
pub struct BreakerLayer<P = ConsecutiveFailures, O = (), C = OkIsSuccess> {
    breaker: Arc<Breaker<P, O>>,
    classify: C,
}

impl<P: TripPolicy, O: Observer> BreakerLayer<P, O> {
    /// A layer whose services call through `breaker`, counting `Ok` as a success and `Err`
    /// as a failure.
    pub fn new(breaker: Arc<Breaker<P, O>>) -> Self {
        Self {
            breaker,
            classify: OkIsSuccess,
        }
    }
}

impl<P: TripPolicy, O: Observer, C> BreakerLayer<P, O, C> {
    /// The same layer, with `classify` deciding how each response counts (any
    /// [`Classify`](crate::Classify), e.g. a closure over `&Result<Response, Error>`).
    pub fn classify<D>(self, classify: D) -> BreakerLayer<P, O, D> {
        BreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<P, O>> {
        &self.breaker
    }
}

impl<S, P: TripPolicy, O: Observer, C: Clone> Layer<S> for BreakerLayer<P, O, C> {
    type Service = BreakerService<S, P, O, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService::new(inner, Arc::clone(&self.breaker), self.classify.clone())
    }
}

impl<P: TripPolicy, O: Observer, C: Clone> Clone for BreakerLayer<P, O, C> {
    fn clone(&self) -> Self {
        Self {
            breaker: Arc::clone(&self.breaker),
            classify: self.classify.clone(),
        }
    }
}

impl<P: TripPolicy, O: Observer, C> fmt::Debug for BreakerLayer<P, O, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}
