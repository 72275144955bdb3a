//! What the pool groups call: the endpoints' keys, the pools over them, and the inner
//! service every endpoint has.

use std::error::Error;
use std::fmt;
use std::future::{ready, Ready};
use std::net::{Ipv4Addr, SocketAddr};
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::limit::{Aimd, Fixed};
use lazybreaker::pool::{Balance, OutlierDetection, Pool, SlowStart};
use lazybreaker::retry::Hedge;
use lazybreaker::Breaker;
use tower::Service;

use crate::support::operation;

/// How many endpoints every pool and balancer has.
pub(crate) const ENDPOINTS: usize = 16;

/// The endpoints' keys: `10.0.0.1:80` to `10.0.0.16:80`.
pub(crate) fn keys() -> Vec<SocketAddr> {
    (1..=ENDPOINTS as u8)
        .map(|i| SocketAddr::from((Ipv4Addr::new(10, 0, 0, i), 80)))
        .collect()
}

/// A pool of the [`ENDPOINTS`], each behind a breaker with gobreaker's defaults
/// (`Breaker::builder()`), choosing by `balance`.
pub(crate) fn pool(balance: Balance) -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder()).balance(balance);
    pool.set(keys());
    assert_eq!(pool.len(), ENDPOINTS);
    pool
}

/// The pool of [`pool`] (power of two choices) judging its endpoints as a user who asks for
/// everything would: outlier detection by success rate and by failure percentage (Envoy's
/// figures), and a 300 ms deadline for hangs.
pub(crate) fn judging_pool() -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder())
        .outlier_detection(
            OutlierDetection::new()
                .success_rate(1.9, 5, 100)
                .failure_percentage(85, 5, 50),
        )
        .deadline(Duration::from_millis(300));
    pool.set(keys());
    pool
}

/// The pool of [`pool`] (power of two choices) with a hedge at the 95th percentile and
/// slow start over 30 s, as a pick finds them in steady traffic: no hedge due, no endpoint
/// ramping up (what a pick pays for having them).
pub(crate) fn hedging_pool() -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder())
        .hedge(Hedge::at_percentile(0.95))
        .slow_start(SlowStart::new(Duration::from_secs(30)));
    pool.set(keys());
    pool
}

/// The default pool with an adaptive concurrency limit per endpoint, `Aimd::new()`
/// (Netflix's defaults: 20 to 200), never reached by one thread: a place taken and given
/// back per call, with a latency sample (two clock reads).
pub(crate) fn limited_pool() -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder()).limit(Aimd::new());
    pool.set(keys());
    pool
}

/// The default pool with a fixed limit per endpoint, `Fixed::new(64)` (a bulkhead, never
/// reached by one thread): a place taken and given back per call, no clock read.
pub(crate) fn bulkhead_pool() -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| Breaker::builder()).limit(Fixed::new(64));
    pool.set(keys());
    pool
}

/// The inner service's error: `operation` failed. An `std::error::Error`, as tower's
/// balancer requires of its services' errors (it boxes them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failed;

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the operation failed")
    }
}

impl Error for Failed {}

/// Every endpoint's inner service: always ready, and its response future is `operation(ok)`,
/// ready at once (`std::future::Ready`), as `tower_groups::stacks::Inner`; its error is
/// [`Failed`]. The request says whether the operation succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Inner;

impl Service<bool> for Inner {
    type Response = u64;
    type Error = Failed;
    type Future = Ready<Result<u64, Failed>>;

    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Failed>> {
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, ok: bool) -> Self::Future {
        ready(operation(ok).map_err(|()| Failed))
    }
}
