//! A tower middleware around a breaker (feature `tower`): [`BreakerLayer`] and
//! [`BreakerService`], with a named [`ResponseFuture`]. No async runtime and no timer.
//!
//! # Where the deadline goes
//!
//! **Inside** the breaker: `ServiceBuilder::new().layer(BreakerLayer::new(b)).timeout(d)`
//! puts the timeout between the breaker and the dependency, so a hung dependency's calls end
//! as timeout errors, which are failures: the breaker trips. A timeout *outside* the breaker
//! (`.timeout(d).layer(BreakerLayer::new(b))`) cancels the call, which the breaker records
//! as abandoned (an exclusion by default: see [`AbandonedAs`](crate::AbandonedAs)).
//!
//! # Conventions
//!
//! Following tower's conventions (for [`KeyedBreakerLayer`], see its service for `poll_ready`):
//!
//! - **Admission in `call`.** A rejection is a failed response future
//!   ([`Error::Rejected`](crate::Error::Rejected)), never an error from `poll_ready`, which
//!   would tear down stacks such as `Buffer`.
//! - **The breaker before the inner service.** While the breaker is open, `poll_ready` is
//!   ready at once without polling the inner service, so an open breaker fails fast even when
//!   the inner service is not ready (a saturated pool, a hung connection).
//! - **`Error<S::Error>`**: a [`std::error::Error`] when the inner error is `Debug + Display`,
//!   so `Error<BoxError>` converts into `BoxError` and outer layers (`timeout`, `Buffer`,
//!   axum's `HandleErrorLayer`) compose.
//!
//! [`KeyedBreakerLayer`] keeps a breaker per request key (authority, path, gRPC method) in a
//! [`Registry`](crate::Registry), the key extracted from each request by a closure.
//!
//! # Examples
//!
//! ```
//! use lazybreaker::tower::BreakerLayer;
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

mod fallback;
mod future;
mod keyed;
mod layer;
mod service;

pub use fallback::{FailFast, Fallback, OnRejected};
pub use future::ResponseFuture;
pub use keyed::{KeyedBreakerLayer, KeyedBreakerService};
pub use layer::BreakerLayer;
pub use service::BreakerService;
