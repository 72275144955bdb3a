//! A `reqwest` middleware with a breaker per host:
//! [`BreakerMiddleware`], a [`reqwest_middleware::Middleware`] that keeps one breaker per
//! `host:port` in a [`Registry`](lazybreaker::Registry) (or per any key of the request),
//! [`rejection`] to tell its rejections from other errors, health checks
//! ([`tcp_check`], [`path_check`] for a breaker; [`check_tcp`], [`check_path`] for a
//! [`Pool`](lazybreaker::pool::Pool)'s endpoints) that revive a host's breaker,
//! [`RetryMiddleware`], retries that share the breakers' verdicts (see [Retries](#retries)),
//! and [`ResponseRules`], the classifier they count with, for calls of your own.
//!
//! Each request asks its host's breaker first: while the breaker rejects, the request fails
//! at once and no connection is attempted. A host's breaker with a
//! [health check](lazybreaker::Builder::health_check) ([`path_check`] for its health path,
//! [`tcp_check`] for a connect) runs it in the first request after its open period, before
//! the rest of the chain: that request is sent only if the check passes. An admitted request goes down the rest of the
//! chain; its response, or its error, comes back exactly as without the middleware, and the
//! breaker counts it:
//!
//! | result | counts as | why |
//! |---|---|---|
//! | a response | as [`StatusRules`](lazybreaker::http::StatusRules) says: 5xx, 429, 408 fail, other 4xx are excluded, the rest succeed | the dependency answered |
//! | a 503 or 429 with `Retry-After`, with [`StatusRules::honor_retry_after`](lazybreaker::http::StatusRules::honor_retry_after) | a failure that opens the breaker for as long as the header says | the dependency asked for time |
//! | a timeout (`reqwest::Error::is_timeout`), even while connecting | failure | the dependency did not answer in time: it may be overloaded |
//! | a connect error (`is_connect`: refused, unreachable, a name that does not resolve) | [`Fatal`](lazybreaker::policy::Outcome::Fatal): the breaker opens at once | nothing answers there |
//! | a builder error (`is_builder`: a URL `reqwest` cannot send to) | excluded | the request never left, and it was the caller's |
//! | any other `reqwest` error (a reset connection, a malformed response) | failure | the call died on the way |
//! | an inner middleware's error (`reqwest_middleware::Error::Middleware`) | as the first `reqwest::Error` among its causes; excluded if it is another breaker's [`RejectedBy`](lazybreaker::RejectedBy); else failure | the call got no response, and nothing says it was the caller's fault |
//!
//! That table is [`ResponseRules`], a [`Classify`](lazybreaker::classify::Classify) of a
//! plain client's `Result<reqwest::Response, reqwest::Error>` as well as a middleware
//! client's: hand it to [`Pool::call`](lazybreaker::pool::Pool::call) (or
//! [`Breaker::execute_async_with`](lazybreaker::Breaker::execute_async_with))
//! to count calls you make yourself as the middleware would; there a 503 or a 429 with
//! `Retry-After` is also the pool's [overload](lazybreaker::pool::Pick::overloaded).
//!
//! # Where the deadline goes
//!
//! **Inside** the middleware: the client's timeout (`reqwest::Client::builder().timeout(d)`)
//! or the request's (`client.get(url).timeout(d)`) ends a hung call with a timeout error,
//! which the breaker counts as a failure, so a host that hangs trips its breaker. A timeout
//! *around* `send()` (`tokio::time::timeout(d, request.send())`) drops the call instead,
//! which the breaker records as abandoned (an exclusion by default: see
//! [`AbandonedAs`](lazybreaker::AbandonedAs)), and a hung host would never trip it.
//!
//! Middlewares run in the order they were added: those added after this one run inside it
//! (each request they make counts once, with its final result), those added before run
//! around it (a retrying middleware added before it sends each attempt through the breaker,
//! and gets a rejection as an error of its own: see [Retries](#retries)).
//!
//! # Telling a rejection from other errors
//!
//! A rejection is a [`reqwest_middleware::Error::Middleware`] around the breaker's
//! [`RejectedBy`](lazybreaker::RejectedBy): its message says the breaker is open and names it
//! ("circuit breaker \`127.0.0.1:8080\` is open (retry after 30000ms)"). Recover it with
//! [`rejection`]: `rejection(&err)` is the `RejectedBy`, `rejection(&err).map(|r| r.rejected())`
//! the plain [`Rejected`](lazybreaker::Rejected), with its `retry_after`. With the `anyhow` error
//! in hand, `downcast_ref::<RejectedBy>()` finds it too.
//!
//! # Examples
//!
//! A failing upstream on 127.0.0.1 trips its breaker, which then answers for it:
//!
//! ```
//! use lazybreaker_reqwest::{rejection, BreakerMiddleware};
//! use lazybreaker::{Breaker, Registry, Rejected, State};
//! use reqwest_middleware::ClientBuilder;
//! use std::sync::Arc;
//! use std::time::Duration;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//!
//! // An upstream that fails every request.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let host = listener.local_addr().unwrap().to_string(); // "127.0.0.1:PORT"
//! let app = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { axum::http::StatusCode::BAD_GATEWAY }));
//! tokio::spawn(async move { axum::serve(listener, app).await });
//!
//! let registry = Arc::new(Registry::new(|_host: &String| {
//!     Breaker::builder()
//!         .ready_to_trip(|c| c.consecutive_failures >= 2)
//!         .timeout(Duration::from_secs(30))
//! }));
//! let client = ClientBuilder::new(
//!     reqwest::Client::builder()
//!         .timeout(Duration::from_secs(5)) // inside the breaker: a hang is a failure
//!         .no_proxy()
//!         .build()
//!         .unwrap(),
//! )
//! .with(BreakerMiddleware::new(Arc::clone(&registry)))
//! .build();
//!
//! let url = format!("http://{host}/");
//! for _ in 0..2 {
//!     // The upstream's response, as without the middleware.
//!     let response = client.get(&url).send().await.unwrap();
//!     assert_eq!(response.status(), 502);
//! }
//! assert_eq!(registry.breaker(&host).state(), State::Open);
//!
//! // Open: the request is not sent.
//! let err = client.get(&url).send().await.unwrap_err();
//! let rejected = rejection(&err).expect("rejected by the breaker");
//! assert_eq!(rejected.breaker(), host);
//! assert!(matches!(rejected.rejected(), Rejected::Open { .. }));
//! assert!(err.to_string().starts_with(&format!("circuit breaker `{host}` is open")));
//! # });
//! ```
//!
//! # Retries
//!
//! [`RetryMiddleware`] retries on a [`Retry`](lazybreaker::retry::Retry) policy (its
//! attempts, its [`RetryBudget`](lazybreaker::retry::RetryBudget), its backoff). Add it
//! **first**, before the breaker middleware: each attempt then goes through the host's
//! breaker, which hands its verdict back. A rejection is never retried, nor an attempt that
//! left its breaker open; what the breaker counted as a failure is, and so is a 503 or a 429
//! after its `Retry-After`, unless that is past the deadline; only safe and idempotent
//! methods, by default. Each retry, and each retry refused for the budget or the attempts,
//! is counted in the policy's [`stats`](lazybreaker::retry::Retry::stats) and in the host's
//! breaker's [`Totals`](lazybreaker::Totals). Added after the breaker middleware, the
//! retries would run inside it: the breaker would count a call once, with its last
//! attempt's result, and a rejection could not stop them.
//!
//! An upstream that answers 503 once, then 200:
//!
//! ```
//! use lazybreaker::retry::{Retry, RetryBudget};
//! use lazybreaker::{Breaker, Registry};
//! use lazybreaker_reqwest::{BreakerMiddleware, RetryMiddleware};
//! use reqwest_middleware::ClientBuilder;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let host = listener.local_addr().unwrap().to_string();
//! let hits = Arc::new(AtomicUsize::new(0));
//! let counted = Arc::clone(&hits);
//! let app = axum::Router::new().route(
//!     "/",
//!     axum::routing::get(move || async move {
//!         match counted.fetch_add(1, Ordering::SeqCst) {
//!             0 => axum::http::StatusCode::SERVICE_UNAVAILABLE,
//!             _ => axum::http::StatusCode::OK,
//!         }
//!     }),
//! );
//! tokio::spawn(async move { axum::serve(listener, app).await });
//!
//! let registry = Arc::new(Registry::new(|_host: &String| {
//!     Breaker::builder().timeout(Duration::from_secs(30))
//! }));
//! // Three attempts at most, retries within 20 % of the calls (and 10 a second).
//! let retry = Retry::new(3)
//!     .unwrap()
//!     .budget(RetryBudget::new(0.2).unwrap())
//!     .backoff(Duration::from_millis(10), Duration::from_millis(100));
//! let client = ClientBuilder::new(
//!     reqwest::Client::builder()
//!         .timeout(Duration::from_secs(2)) // each attempt's
//!         .no_proxy()
//!         .build()
//!         .unwrap(),
//! )
//! .with(RetryMiddleware::new(retry.clone()).deadline(Duration::from_secs(5))) // first: outermost
//! .with(BreakerMiddleware::new(Arc::clone(&registry))) // then the breaker per host
//! .build();
//!
//! let response = client.get(format!("http://{host}/")).send().await.unwrap();
//! assert_eq!(response.status(), 200);
//! assert_eq!(hits.load(Ordering::SeqCst), 2, "one retry");
//! assert_eq!(retry.stats().retries, 1);
//! assert_eq!(registry.breaker(&host).totals().retries, 1);
//! # });
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod call;
mod check;
mod classify;
mod key;
mod middleware;
mod rejection;
mod retry;
mod verdict;

pub use check::{check_path, check_tcp, path_check, tcp_check, CheckFuture};
pub use classify::ResponseRules;
pub use key::host_port;
pub use middleware::BreakerMiddleware;
pub use rejection::rejection;
pub use retry::RetryMiddleware;
