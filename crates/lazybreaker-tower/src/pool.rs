//! [`PoolService`]: a service over a [`Pool`] that picks an endpoint per request and sends
//! the request to that endpoint's own inner service.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use pin_project_lite::pin_project;
use tower_service::Service;

use lazybreaker::classify::{Classify, OkIsSuccess};
use lazybreaker::door::contain::{self, FirstPanic};
use lazybreaker::door::gate::{self, Gate};
use lazybreaker::door::{endpoint_key, pick_admitted, pick_beside, Report};
use lazybreaker::door::{Beside, Endpoint, HandingPick};
use lazybreaker::observe::Observer;
use lazybreaker::policy::Outcome;
use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
use lazybreaker::pool::{Pick, Pool};
use lazybreaker::Breaker;
use lazybreaker::{Error, Rejected};

/// A service over a [`Pool`]: each request picks an endpoint and goes to that endpoint's
/// inner service, made on first use by `make(&key)` and kept per key (the services of
/// endpoints the pool no longer has are dropped once the map has grown to twice the pool;
/// one whose readiness failed is made anew by the next request to its endpoint).
///
/// - **Always ready.** `poll_ready` is ready at once: the endpoints' own readiness is
///   awaited in each response future (the inner service is cloned into it and driven to
///   ready there, as `tower::util::Oneshot` does), so no caller is parked on an endpoint,
///   and no `Pending` waits on a waker that an open breaker would never fire.
/// - **Health checks, beside the requests.** With [`Pool::health_check`], a request that
///   lands on an endpoint whose open period is over starts its check, as
///   [`Pool::pick_async`] does: a check that answers at once decides (passed, the request
///   is that endpoint's probe); one under way is left running, driven by the requests
///   that follow, while the request goes to another endpoint (or, with every endpoint out,
///   fails at once with [`Rejected::NoEndpoint`]). Only in a pool of one endpoint does the
///   request wait for the check, in its response future (failed, it is rejected with the
///   breaker's answer). A check's panic fails it and continues.
/// - **No endpoint.** When the pool has nothing to send to, the call fails at once with
///   [`Error::Rejected`] around [`Rejected::NoEndpoint`].
/// - **Counted per endpoint.** The response is classified (`C`, every `Ok` a success by
///   default; [`http::StatusRules`](lazybreaker::http::StatusRules) for HTTP) and reported to the
///   endpoint's breaker through the pick.
///
/// # Examples
///
/// ```
/// use lazybreaker::pool::Pool;
/// use lazybreaker_tower::PoolService;
/// use lazybreaker::{Breaker, Error, Rejected};
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Wake, Waker};
/// #     struct Noop;
/// #     impl Wake for Noop { fn wake(self: Arc<Self>) {} }
/// #     let waker = Waker::from(Arc::new(Noop));
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; } }
/// # }
/// let pool = Arc::new(Pool::new(|_: &u16| Breaker::builder()));
/// pool.set([8080, 8081]);
/// // Each endpoint's own service (here, one that answers with its port).
/// let per_port = |port: &u16| {
///     let port = *port;
///     tower::service_fn(move |_request: ()| async move { Ok::<_, std::io::Error>(port) })
/// };
/// let service = PoolService::new(Arc::clone(&pool), per_port);
/// let answered = block_on(service.oneshot(())).unwrap();
/// assert!(answered == 8080 || answered == 8081);
///
/// pool.set([]); // nothing to send to: the call fails at once
/// let service = PoolService::new(Arc::clone(&pool), per_port);
/// let err = block_on(service.oneshot(())).unwrap_err();
/// assert!(matches!(err, Error::Rejected(Rejected::NoEndpoint { retry_after: None })));
/// ```
///
/// Discovery is the pool's: feed a resolver's answers to [`Pool::set`], or a
/// `tower::discover` stream's changes to [`Pool::insert`] (`Change::Insert(key, _)`) and
/// [`Pool::remove`] (`Change::Remove(key)`); this service makes each endpoint's inner
/// service itself, from its key.
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
    services: HashMap<K, Kept<S>>,
    classify: C,
}

/// An endpoint's service, and whether its readiness failed (then it is made anew).
#[derive(Clone)]
struct Kept<S> {
    service: S,
    broken: Arc<AtomicBool>,
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
    K: Clone + Eq + Hash + fmt::Display + Send + Sync + 'static,
    S: Service<Req> + Clone,
    M: Fn(&K) -> S,
    P: TripPolicy + 'static,
    O: Observer + 'static,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = PoolFuture<K, S, Req, P, O, C>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // `call` has no context: a due check is polled once with a waker that wakes
        // nothing, and, pending, runs beside the calls, driven by the requests that follow
        // (a request waits for it only in a pool of one endpoint, in its response future).
        let mut cx = Context::from_waker(Waker::noop());
        let (endpoint, gate, pick) = match pick_beside(&self.pool, &mut cx) {
            Ok(Beside::Pick(pick)) => (None, None, Some(pick)),
            Ok(Beside::Wait(endpoint, gate)) => (Some(endpoint), Some(gate), None),
            Err(rejected) => {
                return PoolFuture {
                    state: State::Rejected {
                        rejected: Some(rejected),
                    },
                }
            }
        };
        let key = match (&pick, &endpoint) {
            (Some(pick), _) => pick.key().clone(),
            (None, Some(endpoint)) => endpoint_key(endpoint).clone(),
            (None, None) => unreachable!("a pick or a check"),
        };
        // A panic making the service (user code) drops the pick while unwinding: a failure
        // of the endpoint's; rather, it is excluded first, and the panic continues.
        let kept = match contain::catch(AssertUnwindSafe(|| self.service(&key))) {
            Ok(kept) => kept,
            Err(payload) => {
                if let Some(pick) = pick {
                    pick.exclude();
                }
                contain::resume_payload(payload)
            }
        };
        let ready = Ready {
            service: kept.service,
            broken: kept.broken,
            request,
            classify: self.classify.clone(),
        };
        let state = match (pick, endpoint, gate) {
            (Some(pick), _, _) => State::Ready {
                call: Some((ready, pick)),
            },
            (None, Some(endpoint), Some(gate)) => State::Checking {
                check: Some(Box::new(Checking {
                    gate,
                    endpoint,
                    ready,
                })),
            },
            _ => unreachable!("a pick or a check"),
        };
        PoolFuture { state }
    }
}

impl<K, S, M, P: TripPolicy, O: Observer, C> PoolService<K, S, M, P, O, C>
where
    K: Clone + Eq + Hash + fmt::Display,
    S: Clone,
    M: Fn(&K) -> S,
{
    /// The service of endpoint `key`: kept, or made now (its first request, or its last
    /// one's readiness failed). The services of endpoints gone from the pool are dropped
    /// once the map has grown to twice the pool.
    fn service(&mut self, key: &K) -> Kept<S> {
        if self.services.len() >= 2 * self.pool.len().max(4) {
            let keys: HashSet<K> = self.pool.keys().into_iter().collect();
            self.services.retain(|key, _| keys.contains(key));
        }
        if let Some(kept) = self.services.get(key) {
            if !kept.broken.load(Ordering::Relaxed) {
                return kept.clone();
            }
        }
        let kept = Kept {
            service: (self.make)(key),
            broken: Arc::new(AtomicBool::new(false)),
        };
        self.services.insert(key.clone(), kept.clone());
        kept
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

/// A request on its way to its endpoint's service.
struct Ready<S, Req, C> {
    service: S,
    broken: Arc<AtomicBool>,
    request: Req,
    classify: C,
}

/// A request waiting for its endpoint's health check.
struct Checking<K, S, Req, P: TripPolicy, O: Observer, C> {
    gate: Gate<Arc<Breaker<P, O>>>,
    endpoint: Arc<Endpoint<K, P, O>>,
    ready: Ready<S, Req, C>,
}

/// Where a waiting request is kept: emptied once its check settled.
type CheckSlot<K, S, Req, P, O, C> = Option<Box<Checking<K, S, Req, P, O, C>>>;

pin_project! {
    #[project = StateProj]
    enum State<K, S: Service<Req>, Req, P: TripPolicy, O: Observer, C> {
        Rejected { rejected: Option<Rejected> },
        Checking { check: CheckSlot<K, S, Req, P, O, C> },
        Ready {
            // Taken when the call is made.
            call: Option<(Ready<S, Req, C>, Pick<K, P, O>)>,
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
    K: Send + Sync + 'static,
    S: Service<Req>,
    P: TripPolicy + 'static,
    O: Observer + 'static,
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
                StateProj::Checking { check } => {
                    let state = check.as_mut().expect(DONE);
                    let mut panics = FirstPanic::default();
                    let checked = ready!(state.gate.poll_settle(cx, &mut panics));
                    let Checking {
                        endpoint, ready, ..
                    } = *check.take().expect(DONE);
                    // A panic of the check continues once its failure is settled.
                    contain::resume(panics);
                    let next = match checked.into_result() {
                        Ok(permit) => State::Ready {
                            call: Some((ready, pick_admitted(endpoint, permit))),
                        },
                        Err(rejected) => State::Rejected {
                            rejected: Some(rejected),
                        },
                    };
                    self.as_mut().project().state.set(next);
                }
                StateProj::Ready { call } => {
                    let (ready, _) = call.as_mut().expect(DONE);
                    // The endpoint's own readiness; a panic there is the endpoint's failure,
                    // and continues.
                    let polled =
                        match contain::catch(AssertUnwindSafe(|| ready.service.poll_ready(cx))) {
                            Ok(Poll::Pending) => return Poll::Pending,
                            Ok(Poll::Ready(polled)) => polled,
                            Err(payload) => {
                                let (_, mut pick) = call.take().expect(DONE);
                                pick.report_then_resume(Outcome::Failure, payload)
                            }
                        };
                    let (ready, pick) = call.take().expect(DONE);
                    let Ready {
                        mut service,
                        broken,
                        request,
                        classify,
                    } = ready;
                    if let Err(e) = polled {
                        // Not ready for good: the endpoint's failure, and its service is
                        // made anew for the next request.
                        broken.store(true, Ordering::Relaxed);
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
                    let result = ready!(gate::poll_call(
                        call,
                        cx,
                        &mut HandingPick(pick),
                        &*classify
                    ));
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
            State::Checking { .. } => "checking",
            State::Ready { .. } => "ready",
            State::Running { .. } => "running",
        };
        f.debug_struct("PoolFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
