//! A tower middleware around a breaker: [`BreakerLayer`] and
//! [`BreakerService`], with a named [`ResponseFuture`]; an adaptive concurrency limit,
//! [`LimitLayer`]. No async runtime and no timer (but for the retries and hedges, features
//! `retry` and `hedge`, which wait on tokio's).
//!
//! # The recipe: how responses count, and where the deadline goes
//!
//! ```
//! use lazybreaker::http::StatusRules;
//! use lazybreaker_tower::BreakerLayer;
//! use lazybreaker::Breaker;
//! use std::{sync::Arc, time::Duration};
//! use tower::ServiceBuilder;
//!
//! # let client = tower::service_fn(|_: ()| async { Ok::<_, std::io::Error>(http::Response::new(())) });
//! let breaker = Arc::new(Breaker::builder().name("upstream").build());
//! let service = ServiceBuilder::new()
//!     .layer(BreakerLayer::new(breaker).classify(StatusRules::new()))
//!     .timeout(Duration::from_secs(1)) // inside the breaker: a hang is a failure
//!     .service(client);
//! # let _ = service;
//! ```
//!
//! - **Classify responses.** The default classifier counts every `Ok` as a success, and to
//!   an HTTP client a 500 is an `Ok(response)`. Give HTTP services
//!   [`http::StatusRules`](lazybreaker::http::StatusRules) (feature `http`): 5xx are failures,
//!   a refused connection is fatal (it opens the breaker at once), other 4xx excluded, and
//!   with [`honor_retry_after`](lazybreaker::http::StatusRules::honor_retry_after) a 503 or 429
//!   with `Retry-After` opens the breaker for as long as the upstream asked.
//! - **The deadline inside.** `.layer(BreakerLayer::new(b).classify(rules)).timeout(d)`
//!   puts the timeout between the breaker and the dependency, so a hung dependency's calls
//!   end as timeout errors, which are failures: the breaker trips. A timeout *outside* the
//!   breaker (`.timeout(d).layer(BreakerLayer::new(b))`) cancels the call, which the breaker
//!   records as abandoned (an exclusion by default: see [`AbandonedAs`](lazybreaker::AbandonedAs)).
//! - **An answer instead of an error.** [`BreakerLayer::fallback`] answers rejected requests
//!   with a response of its own ([`http::rejected_response`](lazybreaker::http::rejected_response):
//!   503 with `Retry-After`), so the service's error type stays the inner one and the layer
//!   goes straight into an axum `Router`.
//!
//! # Retries
//!
//! With the feature `retry` (`http` for HTTP), `RetryLayer` retries calls as a
//! [`lazybreaker::retry::Retry`] decides: only what the classifier calls a failure or an
//! overload, never a breaker's rejection, never past the call's deadline, each retry paid
//! for in a retry budget, after a backoff waited on tokio's timer. The recommended stack,
//! from the outside in:
//!
//! ```
//! # #[cfg(feature = "http")]
//! # fn main() -> Result<(), lazybreaker::ConfigError> {
//! use http::{Request, Response, StatusCode};
//! use lazybreaker::http::StatusRules;
//! use lazybreaker::retry::{Retry, RetryBudget};
//! use lazybreaker::Breaker;
//! use lazybreaker_tower::{BreakerLayer, RetryLayer};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::{sync::Arc, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! // An upstream that answers 503 once, then 200.
//! let calls = Arc::new(AtomicUsize::new(0));
//! let seen = Arc::clone(&calls);
//! let client = tower::service_fn(move |_: Request<String>| {
//!     let status = if seen.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
//!     let response = Response::builder().status(status).body(String::new());
//!     async move { Ok::<_, std::io::Error>(response.unwrap()) }
//! });
//!
//! let breaker = Arc::new(Breaker::builder().name("upstream").build());
//! // One budget for every retry towards this upstream: 20 % of the calls, 10 a second.
//! let retry = Retry::new(3)?.budget(RetryBudget::default());
//! let service = ServiceBuilder::new()
//!     // Outside: each attempt gets the breaker's verdict; its rejection is not retried.
//!     .layer(
//!         RetryLayer::http(retry.clone())
//!             .deadline(Duration::from_secs(2))
//!             .count_on(Arc::clone(&breaker)),
//!     )
//!     .layer(BreakerLayer::new(Arc::clone(&breaker)).classify(StatusRules::new()))
//!     .timeout(Duration::from_millis(500)) // per attempt: a hang is a failure, retried
//!     .service(client);
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread()
//! #     .enable_time().start_paused(true).build().unwrap();
//! # runtime.block_on(async {
//! let response = service.oneshot(Request::get("/").body(String::new()).unwrap()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//! # });
//! assert_eq!(calls.load(Ordering::SeqCst), 2);
//! assert_eq!((retry.stats().retries, breaker.totals().retries), (1, 1));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "http"))]
//! # fn main() {}
//! ```
//!
//! - **The retry outside the breaker.** Each attempt is admitted and counted by the
//!   breaker on its own, so the breaker sees every failure; once it opens, the next attempt
//!   is rejected and the call ends with that rejection (`Cause::Rejected`: no retries
//!   against an open breaker). A retry inside the breaker would hide failures from it (three
//!   failed attempts counted as one call) and keep calling a dependency the breaker would
//!   have cut off. `count_on(breaker)` counts each decision in the breaker's
//!   [`Totals`](lazybreaker::Totals) as well as in [`Retry::stats`](lazybreaker::retry::Retry::stats).
//! - **The retry outside the pool.** Over a [`PoolService`], each attempt is a new pick:
//!   an endpoint that failed is counted and, isolated, skipped. Set `.elsewhere(true)`:
//!   the retry goes to another endpoint at once, without backoff. Which endpoint failed is
//!   not known to the retry layer: its decisions are counted in `Retry::stats` only.
//! - **The timeout per attempt inside the breaker.** A hung attempt ends as a failure
//!   (counted, and retried); the call's own deadline is `.deadline(d)`, which stops a retry
//!   that could not finish in time (a `Retry-After` longer than what is left, say); add a
//!   `.timeout(d)` outside the retry to cut the call there as well.
//! - **What is retried.** `RetryLayer::http` judges responses by
//!   [`StatusRules`](lazybreaker::http::StatusRules) (5xx, 408, 429 and transport errors) and
//!   retries only idempotent methods (`Idempotent`: GET, HEAD, OPTIONS, TRACE, PUT, DELETE),
//!   whose requests it can copy; `RetryLayer::new` retries every `Err` of any `Clone`
//!   request. A breaker's fallback answer (a 503 of its own) looks like the upstream's to
//!   the retry: keep the default, failing fast, under a retry.
//!
//! # Hedging
//!
//! With the feature `hedge`, `HedgeLayer` hedges calls as a
//! [`lazybreaker::retry::Hedge`] decides: an attempt that has not answered after the
//! hedge's delay (a fixed one, or a percentile of the layer's recent latencies) gets
//! another, through a clone of the inner service polled ready; the first answer that is not
//! a failure wins, the other attempts are dropped (cancelled, counted neither way); a
//! failure sends the next attempt at once, a breaker's rejection none. Each hedge is paid
//! for in the hedge's budget (share a retry's to bound both), never past the call's
//! deadline, at most `max_attempts` attempts a call. It goes where a `RetryLayer` goes:
//! outside the breaker, a timeout per attempt inside.
//!
//! ```
//! # #[cfg(feature = "hedge")]
//! # fn main() -> Result<(), lazybreaker::ConfigError> {
//! use lazybreaker::retry::{Hedge, RetryBudget};
//! use lazybreaker::Breaker;
//! use lazybreaker_tower::{BreakerLayer, HedgeLayer};
//! use std::{sync::Arc, time::Duration};
//! use tower::ServiceBuilder;
//!
//! # let client = tower::service_fn(|_: ()| async { Ok::<_, std::io::Error>(()) });
//! let breaker = Arc::new(Breaker::builder().name("upstream").build());
//! // A hedge after the 95th percentile of the recent latencies, at most 10 % more calls.
//! let hedge = Hedge::at_percentile(0.95).budget(RetryBudget::new(0.1)?);
//! let service = ServiceBuilder::new()
//!     .layer(HedgeLayer::try_new(hedge)?.deadline(Duration::from_secs(2)))
//!     .layer(BreakerLayer::new(breaker))
//!     .timeout(Duration::from_millis(500)) // per attempt
//!     .service(client);
//! # let _ = service;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "hedge"))]
//! # fn main() {}
//! ```
//!
//! # Concurrency limits
//!
//! [`LimitLayer`] keeps the calls in flight under an adaptive limit
//! ([`lazybreaker::limit`]: [`Aimd`](lazybreaker::limit::Aimd),
//! [`Gradient2`](lazybreaker::limit::Gradient2), [`Vegas`](lazybreaker::limit::Vegas), or a
//! [`Fixed`](lazybreaker::limit::Fixed) bulkhead), learned from the calls themselves: a
//! success is a sample of its latency, an overload answer (a 503 or 429 with
//! `LimitLayer::http`, feature `http`) or a timeout cuts the limit. A call at the limit is turned away at
//! once with [`Rejected::Limited`](lazybreaker::Rejected::Limited): a limit sheds, it never
//! queues (`poll_ready` is the inner service's). No feature, no timer. From the outside in:
//!
//! ```
//! # #[cfg(feature = "http")]
//! # fn main() -> Result<(), lazybreaker::ConfigError> {
//! use http::{Request, Response, StatusCode};
//! use lazybreaker::http::StatusRules;
//! use lazybreaker::limit::Aimd;
//! use lazybreaker::retry::{Retry, RetryBudget};
//! use lazybreaker::Breaker;
//! use lazybreaker_tower::{BreakerLayer, IntoInner, LimitLayer, OverloadRules, RetryLayer};
//! use std::{sync::Arc, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # let client = tower::service_fn(|_: Request<String>| async {
//! #     Ok::<_, std::io::Error>(Response::new(String::new()))
//! # });
//! let breaker = Arc::new(Breaker::builder().name("upstream").build());
//! let retry = Retry::new(3)?.budget(RetryBudget::default());
//! // 20 calls in flight at first, within 20 to 200; a 503 or 429 cuts it; one error type
//! // for the whole stack.
//! let limit = LimitLayer::try_new(Aimd::new())?
//!     .classify(OverloadRules::new())
//!     .on_rejected(IntoInner);
//! let service = ServiceBuilder::new()
//!     // Outside the limit: each attempt takes a place of its own; a `Limited` attempt is
//!     // an overload, retried after a backoff and paid for in the budget.
//!     .layer(RetryLayer::http(retry).deadline(Duration::from_secs(2)))
//!     .layer(limit.clone())
//!     // Inside the limit: a call the limit turns away never reaches the breaker.
//!     .layer(BreakerLayer::new(Arc::clone(&breaker)).classify(StatusRules::new()))
//!     .timeout(Duration::from_millis(500)) // per attempt: a timeout cuts the limit
//!     .service(client);
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread()
//! #     .enable_time().start_paused(true).build().unwrap();
//! # runtime.block_on(async {
//! let response = service.oneshot(Request::get("/").body(String::new()).unwrap()).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//! # });
//! assert_eq!((limit.limiter().in_flight(), limit.limiter().limit()), (0, 20));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "http"))]
//! # fn main() {}
//! ```
//!
//! - **Retries and hedges outside the limit.** Each attempt takes its own place and gives
//!   it back when it ends, so the limit counts what is really in flight towards the
//!   dependency. A retry after a `Limited` rejection is an overload
//!   ([`Cause::Overload`](lazybreaker::retry::Cause::Overload)): it waits a backoff (or,
//!   with `.elsewhere(true)` over a pool, goes to another endpoint at once) and is paid
//!   for in the retry budget, so shedding cannot turn into a retry storm. A hedge makes no
//!   other attempt after a `Limited` one (it would add the load the limit just refused). A
//!   retry inside the limit would hold one place across all its attempts and backoffs.
//! - **The limit outside the breaker.** A call the limit turns away never reaches the
//!   breaker: it is not counted in the breaker's [`Totals`](lazybreaker::Totals), cannot
//!   trip it, and costs nothing but a compare-and-swap. Overload is not failure: the limit
//!   answers overload, the breaker a broken dependency. (Inside the breaker, a `Limited`
//!   rejection would be the breaker's inner error, a failure under the default classifier:
//!   a burst above the limit would trip the breaker.) The breaker's own rejections pass
//!   through the limit unsampled (excluded, or a failure that is not a timeout).
//! - **One error type.** `on_rejected(IntoInner)` answers a rejection with the inner
//!   service's own error: over a [`BreakerLayer`], its `Error<E>`, which then carries the
//!   rejections of both (`Error::Rejected(Rejected::Limited)` or the breaker's), so the
//!   retry outside tells them apart. With the default ([`FailFast`]) the stack's error
//!   would be `Error<Error<E>>`, whose inner rejections the retry does not look into.
//! - **The timeout inside.** A call cut by its timeout is a drop (tower's or tokio's
//!   `Elapsed`, with the feature `retry`; an `io::ErrorKind::TimedOut`; or a failure that
//!   took the layer's [`deadline`](LimitLayer::deadline)): the limit shrinks as the
//!   dependency slows down.
//! - **Over a pool, a limit per endpoint.** One [`LimitLayer`] outside a [`PoolService`]
//!   limits the whole pool as if it were one dependency: a slow endpoint's calls fill the
//!   places of the fast ones, and a drop by one endpoint cuts the limit for all. Prefer a
//!   limit per endpoint, under the pool's pick (the pool's own [`Pool::limit`](lazybreaker::pool::Pool::limit), or a
//!   `LimitLayer` in each endpoint's service, made by the `PoolService`'s `make`, with a
//!   limiter kept per key). Keep a single limit outside the pool only to bound the caller's
//!   own concurrency.
//!
//! # Conventions
//!
//! Following tower's conventions (for [`KeyedBreakerLayer`], see its service for `poll_ready`):
//!
//! - **Admission in `call`.** A rejection is a failed response future
//!   ([`Error::Rejected`](lazybreaker::Error::Rejected)), never an error from `poll_ready`, which
//!   would tear down stacks such as `Buffer`.
//! - **The breaker before the inner service.** While the breaker is open, `poll_ready` is
//!   ready at once without polling the inner service, so an open breaker fails fast even when
//!   the inner service is not ready (a saturated pool, a hung connection).
//! - **A health check in `poll_ready`.** For a breaker with a
//!   [health check](lazybreaker::Builder::health_check), the service whose `poll_ready` finds the
//!   open period over wins the check lease and runs the check there, in the caller's task:
//!   pending until it settles, then ready, with the call that follows admitted as the first
//!   half-open probe (passed) or rejected (failed). Other services on the breaker are ready
//!   at once meanwhile, their calls rejected with [`Rejected::Checking`](lazybreaker::Rejected::Checking).
//!   A `call` without a `poll_ready` before it never revives the breaker unchecked. The
//!   keyed layer learns the breaker from the request, so it runs the check in the response
//!   future instead, holding the request and the ready inner service ([`DeferredCall`]);
//!   its `Service` implementation needs the inner service to be `Clone` (a clone stays in
//!   the service, as with tower's services that defer a call).
//! - **`Error<S::Error>`**: a [`std::error::Error`] when the inner error is `Debug + Display`,
//!   so `Error<BoxError>` converts into `BoxError` and outer layers (`timeout`, `Buffer`,
//!   axum's `HandleErrorLayer`) compose.
//!
//! [`KeyedBreakerLayer`] keeps a breaker per request key (authority, path, gRPC method) in a
//! [`Registry`](lazybreaker::Registry), the key extracted from each request by a closure; its
//! rejections name the key's breaker ([`RejectedBy`](lazybreaker::RejectedBy)).
//!
//! # Examples
//!
//! ```
//! use lazybreaker_tower::BreakerLayer;
//! use lazybreaker::Breaker;
//! use std::sync::Arc;
//! use tower::{Layer, Service, ServiceExt};
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//!
//! let breaker = Arc::new(Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1).build());
//! let service = tower::service_fn(|fail: bool| async move {
//!     if fail { Err("refused") } else { Ok("pong") }
//! });
//! let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(service);
//! block_on(async {
//!     assert_eq!(service.ready().await.unwrap().call(false).await.unwrap(), "pong");
//!     assert!(service.ready().await.unwrap().call(true).await.is_err());
//!     // Open now: rejected without calling the inner service.
//!     let err = service.ready().await.unwrap().call(false).await.unwrap_err();
//!     assert!(err.is_rejected());
//! });
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod fallback;
mod future;
mod keyed;
mod layer;
mod limit;
mod pool;
mod service;

pub use fallback::{FailFast, Fallback, IntoInner, OnRejected};
pub use future::{Deferred, DeferredCall, NoCall, Rejection, ResponseFuture};
pub use keyed::{KeyedBreakerLayer, KeyedBreakerService};
pub use layer::BreakerLayer;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use limit::OverloadRules;
pub use limit::{LimitFuture, LimitLayer, LimitService};
pub use pool::{PoolFuture, PoolService};
pub use service::BreakerService;

#[cfg(feature = "hedge")]
mod hedge;
#[cfg(feature = "retry")]
mod retry;

#[cfg(feature = "hedge")]
#[cfg_attr(docsrs, doc(cfg(feature = "hedge")))]
pub use hedge::{HedgeFuture, HedgeLayer, HedgeService};

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use retry::Idempotent;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub use retry::{CloneRequest, MaybeRejected, Replay, RetryLayer, RetryPolicy, RetryWait};
