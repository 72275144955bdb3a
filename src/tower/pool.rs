//! [`PoolService`]: a service over a [`Pool`] that picks an endpoint per request and sends
//! the request to that endpoint's own inner service.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tower_service::Service;

use crate::classify::{Classify, OkIsSuccess};
use crate::error::{Error, Rejected};
use crate::future::poll_admitted;
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, TripPolicy};
use crate::pool::{Pick, Pool};

/// A service over a [`Pool`]: each request picks an endpoint ([`Pool::pick`]) and goes to
/// that endpoint's inner service, made on first use by `make(&key)` and kept per key (an
/// endpoint the pool no longer has is dropped at the next request that finds it gone).
///
/// - **Always ready.** `poll_ready` is ready at once: the endpoints' own readiness is
///   awaited in each response future (the inner service is cloned into it and driven to
///   ready there, as `tower::util::Oneshot` does), so no caller is parked on an endpoint,
///   and no `Pending` waits on a waker that an open breaker would never fire.
/// - **No endpoint.** When the pool has nothing to send to, the call fails at once with
///   [`Error::Rejected`] around [`Rejected::NoEndpoint`].
/// - **Counted per endpoint.** The response is classified (`C`, every `Ok` a success by
///   default; [`http::StatusRules`](crate::http::StatusRules) for HTTP) and reported to the
///   endpoint's breaker through the pick.
///
/// Discovery is the pool's: [`Pool::set`] from a `tower::discover` stream or a resolver.
pub struct PoolService<
    K,
    S,
    M,
    P: TripPolicy = ConsecutiveFailures,
    O: Observer = (),
    C = OkIsSuccess,
> {
    pool: Arc<Pool<K, P, O>>,
    make: M,
    services: HashMap<K, S>,
    classify: C,
}

impl<K, S, M, P: TripPolicy, O: Observer> PoolService<K, S, M, P, O> {
    /// Requests through `pool`, each sent to `make(&key)`'s service for the endpoint picked.
    pub fn new(pool: Arc<Pool<K, P, O>>, make: M) -> Self {
        Self {
            pool,
            make,
            services: HashMap::new(),
            classify: OkIsSuccess,
        }
    }
}

impl<K, S, M, P: TripPolicy, O: Observer, C> PoolService<K, S, M, P, O, C> {
    /// With `classify` deciding how each response counts for its endpoint.
    pub fn classify<D>(self, classify: D) -> PoolService<K, S, M, P, O, D> {
        PoolService {
            pool: self.pool,
            make: self.make,
            services: self.services,
            classify,
        }
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool<K, P, O>> {
        &self.pool
    }
}

impl<K, S, M, Req, P, O, C> Service<Req> for PoolService<K, S, M, P, O, C>
where
    K: Clone + Eq + Hash + fmt::Display,
    S: Service<Req> + Clone,
    M: Fn(&K) -> S,
    P: TripPolicy,
    O: Observer,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = PoolFuture<K, S, Req, P, O, C>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let pick = match self.pool.pick() {
            Ok(pick) => pick,
            Err(rejected) => {
                return PoolFuture {
                    state: State::Rejected {
                        rejected: Some(rejected),
                    },
                }
            }
        };
        if self.services.len() > 2 * self.pool.len().max(8) {
            // Endpoints removed from the pool: drop their services.
            let keys = self.pool.keys();
            self.services.retain(|key, _| keys.contains(key));
        }
        let make = &self.make;
        let service = self
            .services
            .entry(pick.key().clone())
            .or_insert_with(|| make(pick.key()))
            .clone();
        PoolFuture {
            state: State::Ready {
                service,
                call: Some((request, pick, self.classify.clone())),
            },
        }
    }
}

impl<K, S: Clone, M: Clone, P: TripPolicy, O: Observer, C: Clone> Clone
    for PoolService<K, S, M, P, O, C>
where
    K: Clone,
{
    fn clone(&self) -> Self {
        Self {
            pool: Arc::clone(&self.pool),
            make: self.make.clone(),
            services: self.services.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<K: fmt::Debug, S, M, P: TripPolicy, O: Observer, C> fmt::Debug
    for PoolService<K, S, M, P, O, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolService")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The response future of a [`PoolService`]: the picked endpoint's service driven to
    /// ready, called, and its response reported through the pick. A panic while the inner
    /// future is polled counts as a failure and keeps unwinding; dropped before it
    /// completes, the pick is dropped (an exclusion).
    #[must_use = "futures do nothing unless polled"]
    pub struct PoolFuture<K, S: Service<Req>, Req, P: TripPolicy, O: Observer, C> {
        #[pin]
        state: State<K, S, Req, P, O, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<K, S: Service<Req>, Req, P: TripPolicy, O: Observer, C> {
        Rejected { rejected: Option<Rejected> },
        Ready {
            service: S,
            // Taken when the call is made.
            call: Option<(Req, Pick<K, P, O>, C)>,
        },
        Running {
            #[pin]
            call: S::Future,
            pick: Pick<K, P, O>,
            classify: C,
        },
    }
}

impl<K, S, Req, P, O, C> Future for PoolFuture<K, S, Req, P, O, C>
where
    S: Service<Req>,
    P: TripPolicy,
    O: Observer,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, Error<S::Error>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        const DONE: &str = "`PoolFuture` polled after completion";
        loop {
            match self.as_mut().project().state.project() {
                StateProj::Rejected { rejected } => {
                    let rejected = rejected.take().expect(DONE);
                    return Poll::Ready(Err(Error::Rejected(rejected)));
                }
                StateProj::Ready { service, call } => {
                    // The endpoint's own readiness (a panic here drops the pick while
                    // unwinding: a failure).
                    let ready = ready!(service.poll_ready(cx));
                    let (request, pick, classify) = call.take().expect(DONE);
                    if let Err(e) = ready {
                        // The endpoint's service failed before the call: the endpoint's
                        // failure.
                        pick.failure();
                        self.as_mut()
                            .project()
                            .state
                            .set(State::Rejected { rejected: None });
                        return Poll::Ready(Err(Error::Inner(e)));
                    }
                    let call = service.call(request);
                    self.as_mut().project().state.set(State::Running {
                        call,
                        pick,
                        classify,
                    });
                }
                StateProj::Running {
                    call,
                    pick,
                    classify,
                } => {
                    let result = ready!(poll_admitted(call, cx, pick, &*classify));
                    return Poll::Ready(result.map_err(Error::Inner));
                }
            }
        }
    }
}

impl<K, S: Service<Req>, Req, P: TripPolicy, O: Observer, C> fmt::Debug
    for PoolFuture<K, S, Req, P, O, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Rejected { .. } => "rejected",
            State::Ready { .. } => "ready",
            State::Running { .. } => "running",
        };
        f.debug_struct("PoolFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
