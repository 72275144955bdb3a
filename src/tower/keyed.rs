//! The keyed layer: a breaker per request key (authority, path, gRPC method), from a
//! [`Registry`].

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::ResponseFuture;
use crate::classify::Classify;
use crate::classify::OkIsSuccess;
use crate::error::Error;
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, TripPolicy};
use crate::registry::{Registry, RegistryHasher};

/// Wraps services in a [`KeyedBreakerService`]: each request goes through the breaker that
/// `registry` keeps for the key `key` extracts from it.
///
/// # Examples
///
/// ```
/// use lazybreaker::tower::KeyedBreakerLayer;
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
> {
    registry: Arc<Registry<K, P, O, H>>,
    key: F,
    classify: C,
}

impl<K, F, P: TripPolicy, O: Observer, H> KeyedBreakerLayer<K, F, P, O, H> {
    /// A layer whose services call through `registry`'s breaker for `key(&request)`,
    /// counting `Ok` as a success and `Err` as a failure.
    pub fn new(registry: Arc<Registry<K, P, O, H>>, key: F) -> Self {
        Self {
            registry,
            key,
            classify: OkIsSuccess,
        }
    }
}

impl<K, F, P: TripPolicy, O: Observer, H, C> KeyedBreakerLayer<K, F, P, O, H, C> {
    /// The same layer, with `classify` deciding how each response counts.
    pub fn classify<D>(self, classify: D) -> KeyedBreakerLayer<K, F, P, O, H, D> {
        KeyedBreakerLayer {
            registry: self.registry,
            key: self.key,
            classify,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, P, O, H>> {
        &self.registry
    }
}

impl<S, K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone> Layer<S>
    for KeyedBreakerLayer<K, F, P, O, H, C>
{
    type Service = KeyedBreakerService<S, K, F, P, O, H, C>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedBreakerService {
            inner,
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone> Clone
    for KeyedBreakerLayer<K, F, P, O, H, C>
{
    fn clone(&self) -> Self {
        Self {
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<K, F, P: TripPolicy, O: Observer, H, C> fmt::Debug for KeyedBreakerLayer<K, F, P, O, H, C> {
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
/// future, as in the single-breaker layer.
pub struct KeyedBreakerService<S, K, F, P, O, H, C> {
    inner: S,
    registry: Arc<Registry<K, P, O, H>>,
    key: F,
    classify: C,
}

impl<S, K, F, P: TripPolicy, O: Observer, H, C> KeyedBreakerService<S, K, F, P, O, H, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, P, O, H>> {
        &self.registry
    }
}

impl<S, Req, K, F, P, O, H, C> Service<Req> for KeyedBreakerService<S, K, F, P, O, H, C>
where
    S: Service<Req>,
    K: Hash + Eq + Clone + fmt::Display,
    F: Fn(&Req) -> K,
    P: TripPolicy,
    O: Observer,
    H: BuildHasher + Clone,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, P, O, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.key)(&request);
        match self.registry.breaker(&key).allow_owning() {
            Ok(permit) => {
                ResponseFuture::running(self.inner.call(request), permit, self.classify.clone())
            }
            Err(rejected) => ResponseFuture::rejected(rejected),
        }
    }
}

impl<S: Clone, K, F: Clone, P: TripPolicy, O: Observer, H, C: Clone> Clone
    for KeyedBreakerService<S, K, F, P, O, H, C>
{
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            registry: Arc::clone(&self.registry),
            key: self.key.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, K, F, P: TripPolicy, O: Observer, H, C> fmt::Debug
    for KeyedBreakerService<S, K, F, P, O, H, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreakerService")
            .field("inner", &self.inner)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}
