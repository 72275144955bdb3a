//! A tower middleware around a breaker: [`BreakerLayer`] and
//! [`BreakerService`], with a named [`ResponseFuture`]. No async runtime and no timer.
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
mod pool;
mod service;

pub use fallback::{FailFast, Fallback, OnRejected};
pub use future::{Deferred, DeferredCall, NoCall, Rejection, ResponseFuture};
pub use keyed::{KeyedBreakerLayer, KeyedBreakerService};
pub use layer::BreakerLayer;
pub use pool::{PoolFuture, PoolService};
pub use service::BreakerService;

#[cfg(feature = "retry")]
mod retry;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use retry::Idempotent;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub use retry::{CloneRequest, MaybeRejected, Replay, RetryLayer, RetryPolicy, RetryWait};
