//! Adaptive concurrency limits (no feature: the core's [`lazybreaker::limit`], with no timer
//! and no runtime): [`LimitLayer`] and [`LimitService`], each call a place under a
//! [`Limiter`](lazybreaker::limit::Limiter) or turned away at once with
//! [`Rejected::Limited`](lazybreaker::Rejected::Limited), reporting to it in its
//! [`LimitFuture`]; what a result says to the limit is judged by a classifier
//! (`OverloadRules` for HTTP, feature `http`). Where it goes in a stack is in the
//! [crate documentation](crate#concurrency-limits).

mod future;
mod layer;
mod service;
mod verdict;

pub use future::LimitFuture;
pub use layer::LimitLayer;
pub use service::LimitService;
#[cfg(feature = "http")]
pub use verdict::OverloadRules;
