//! The keyed layer: a breaker per request key (authority, path, gRPC method), from a
//! [`Registry`].

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{DeferredCall, FailFast, Fallback, OnRejected, ResponseFuture};
use lazybreaker::classify::Classify;
use lazybreaker::classify::OkIsSuccess;
use lazybreaker::door::gate::{self, At};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::{Registry, RegistryHasher};
use lazybreaker::{Rejected, RejectedBy};

/// Wraps services in a [`KeyedBreakerService`]: each request goes through the breaker that
/// `registry` keeps for the key `key` extracts from it.
///
/// # Examples
///
/// ```
/// use lazybreaker_tower::KeyedBreakerLayer;
/// use lazybreaker::{Breaker, Registry};
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
///
/// let registry = Arc::new(Registry::new(|_: &String| {
///     Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1)
/// }));
/// // The request is (method, fail?); the key is the method.
/// let inner = tower::service_fn(|(_, fail): (&'static str, bool)| async move {
///     if fail { Err("refused") } else { Ok("pong") }
/// });
/// let mut service = KeyedBreakerLayer::new(Arc::clone(&registry), |r: &(&str, bool)| r.0.to_owned())
///     .layer(inner);
/// block_on(async {
///     assert!(service.ready().await.unwrap().call(("Sub", true)).await.is_err());
///     // "Sub" is open now; "Get" has a breaker of its own.
///     let err = service.ready().await.unwrap().call(("Sub", false)).await.unwrap_err();
///     assert!(err.is_rejected());
///     // The rejection names the key's breaker.
///     assert!(err.to_string().starts_with("circuit breaker `Sub` is open"));
///     assert_eq!(service.ready().await.unwrap().call(("Get", false)).await.unwrap(), "pong");
/// });
/// assert_eq!(registry.len(), 2);
/// ```
pub struct KeyedBreakerLayer<
    K,
    F,
    P = ConsecutiveFailures,
    O = (),
    H = RegistryHasher,
    C = OkIsSuccess,
    J = FailFast,
> {
    registry: Arc<Registry<K, P, O, H>>,
    key: F,
    classify: C,
    on_rejected: J,
}

impl<K, F, P: TripPolicy, O: Observer, H> KeyedBreakerLayer<K, F, P, O, H> {
    /// A layer whose services call through `registry`'s breaker for `key(&request)`,
    /// counting `Ok` as a success and `Err` as a failure.
    pub fn new(registry: Arc<Registry<K, P, O, H>>, key: F) -> Self {
        Self {
            registry,
            key,
            classify: OkIsSuccess,
            on_rejected: FailFast,
        }
    }
}

impl<K, F, P: TripPolicy, O: Observer, H, C, J> KeyedBreakerLayer<K, F, P, O, H, C, J> {
    /// The same layer, with `classify` deciding how each response counts.
    pub fn classify<D>(self, classify: D) -> KeyedBreakerLayer<K, F, P, O, H, D, J> {
        KeyedBreakerLayer {
            registry: self.registry,
            key: self.key,
            classify,
            on_rejected: self.on_rejected,
        }
    }

    /// The same layer, answering a rejected request with `fallback(&rejected)` instead of
    /// an error, as [`BreakerLayer::fallback`](super::BreakerLayer::fallback) does: the
    /// service's error type is then the inner service's own.
    pub fn fallback<G, T>(self, fallback: G) -> KeyedBreakerLayer<K, F, P, O, H, C, Fallback<G>>
    where
        G: Fn(&Rejected) -> T + Clone,
    {
        KeyedBreakerLayer {
            registry: self.registry,
            key: self.key,
            classify: self.classify,
            on_rejected: Fallback(fallback),
        }
    }

    /// The same layer, answering a rejected request with `answer`: any [`OnRejected`],
    /// such as [`grpc::AsStatus`](https://docs.rs/lazybreaker-grpc/latest/lazybreaker_grpc/struct.AsStatus.html) (`lazybreaker-grpc`), whose answer
    /// names the key's breaker, as [`BreakerLayer::on_rejected`](super::BreakerLayer::on_rejected).
    pub fn on_rejected<A>(self, answer: A) -> KeyedBreakerLayer<K, F, P, O, H, C, A> {
        KeyedBreakerLayer {
            registry: self.registry,
            key: self.key,
            classify: self.classify,
            on_rejected: answer,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, P, O, H>> {
        &self.registry
    }
}

impl<S, K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone, J: Clone> Layer<S>
    for KeyedBreakerLayer<K, F, P, O, H, C, J>
{
    type Service = KeyedBreakerService<S, K, F, P, O, H, C, J>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedBreakerService {
            inner,
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
        }
    }
}

impl<K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone, J: Clone> Clone
    for KeyedBreakerLayer<K, F, P, O, H, C, J>
{
    fn clone(&self) -> Self {
        Self {
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
        }
    }
}

impl<K, F, P: TripPolicy, O: Observer, H, C, J> fmt::Debug
    for KeyedBreakerLayer<K, F, P, O, H, C, J>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreakerLayer")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// A service that calls `S` through the breaker of each request's key; from
/// [`KeyedBreakerLayer`].
///
/// Admission happens in `call`, once the request (and so its key) is known: `poll_ready` is
/// the inner service's, so unlike [`BreakerService`](super::BreakerService) an open
/// breaker cannot answer readiness for the inner service. A rejection is a failed response
/// future, as in the single-breaker layer, whose error names the key's breaker
/// ([`RejectedBy`]: the error type is `Error<S::Error, RejectedBy>`); or, with a
/// [fallback](KeyedBreakerLayer::fallback), the fallback's response.
///
/// A call that wins its breaker's [health check](lazybreaker::Builder::health_check) lease runs
/// the check in its response future before its request is sent: the request waits there
/// with the ready inner service, a clone of which stays in this service (so `S: Clone`).
pub struct KeyedBreakerService<S, K, F, P, O, H, C, J = FailFast> {
    inner: S,
    registry: Arc<Registry<K, P, O, H>>,
    key: F,
    classify: C,
    on_rejected: J,
}

impl<S, K, F, P: TripPolicy, O: Observer, H, C, J> KeyedBreakerService<S, K, F, P, O, H, C, J> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, P, O, H>> {
        &self.registry
    }
}

impl<S, Req, K, F, P, O, H, C, J> Service<Req> for KeyedBreakerService<S, K, F, P, O, H, C, J>
where
    S: Service<Req> + Clone,
    K: Hash + Eq + Clone + fmt::Display,
    F: Fn(&Req) -> K,
    P: TripPolicy + 'static,
    O: Observer + 'static,
    H: BuildHasher + Clone,
    C: Classify<S::Response, S::Error> + Clone,
    J: OnRejected<S::Response, S::Error, RejectedBy> + Clone,
{
    type Response = S::Response;
    type Error = J::Error;
    type Future = ResponseFuture<S::Future, P, O, C, J, RejectedBy, DeferredCall<S, Req>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(J::inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.key)(&request);
        let breaker = self.registry.breaker(&key);
        // The future built around the permit in place. A call that wins its breaker's check
        // lease waits in the response future with its request and the ready inner service
        // (a clone stays here) until the check settles.
        gate::admit_into(
            breaker,
            At::Now,
            (self, request),
            |(this, request), permit, _| {
                ResponseFuture::running(this.inner.call(request), permit, this.classify.clone())
            },
            |(this, _), breaker, rejected| {
                ResponseFuture::rejected(breaker.rejected_by(rejected), this.on_rejected.clone())
            },
            |(this, request), gate| {
                let clone = this.inner.clone();
                let ready = std::mem::replace(&mut this.inner, clone);
                ResponseFuture::checking(
                    gate,
                    DeferredCall::new(ready, request),
                    this.classify.clone(),
                    this.on_rejected.clone(),
                )
            },
        )
    }
}

impl<S: Clone, K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone, J: Clone> Clone
    for KeyedBreakerService<S, K, F, P, O, H, C, J>
{
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
            on_rejected: self.on_rejected.clone(),
        }
    }
}

impl<S: fmt::Debug, K, F, P: TripPolicy, O: Observer, H, C, J> fmt::Debug
    for KeyedBreakerService<S, K, F, P, O, H, C, J>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreakerService")
            .field("inner", &self.inner)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}
