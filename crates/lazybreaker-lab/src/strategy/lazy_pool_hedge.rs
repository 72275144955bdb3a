//! The `lazybreaker pool` strategy with a hedge: `Pool::hedge(Hedge::at_percentile(0.95))`
//! with its defaults (two attempts a call at most: one hedge, on another replica, once the
//! first has not answered after the median of the replicas' estimates of their 95th
//! percentile; an attempt that fails starts the hedge at once; paid in the default budget,
//! 20 % of the calls plus 10 a second over 10 s), within the pool's deadline (the call's
//! 300 ms). Each attempt has [`ATTEMPT_TIMEOUT`] (140 ms) within what is left of the
//! deadline, as `lazybreaker pool + retry`'s do.
//!
//! The pool's hedge has no timer: a call waiting for its delay is woken by the next pick
//! of the pool after it (any caller's); at the lab's 300 calls a second a pick comes every
//! 3.3 ms or so, which is how late a hedge may go.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::retry::Hedge;

use super::lazy_pool::LazyPool;
use super::{Strategy, ATTEMPT_TIMEOUT};
use crate::client::{Http, Sent};

/// The percentile the hedge waits for (The Tail at Scale's).
pub(super) const PERCENTILE: f64 = 0.95;

#[derive(Debug)]
pub(super) struct LazyPoolHedge {
    pool: LazyPool,
    name: &'static str,
}

impl LazyPoolHedge {
    /// The hedge after the 95th percentile.
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        Self::with(
            http,
            addrs,
            Hedge::at_percentile(PERCENTILE),
            "lazybreaker pool + hedge",
        )
    }

    /// The pool with `hedge`, named `name` in the report.
    pub(super) fn with(
        http: Http,
        addrs: Vec<SocketAddr>,
        hedge: Hedge,
        name: &'static str,
    ) -> Self {
        Self {
            pool: LazyPool::configured(http, addrs, Some(ATTEMPT_TIMEOUT), |pool| {
                pool.hedge(hedge)
            }),
            name,
        }
    }
}

impl Drop for LazyPoolHedge {
    /// What the hedge did over the run, for whoever reads the lab's log.
    fn drop(&mut self) {
        if let Some(hedge) = self.pool.pool().hedge_policy() {
            eprintln!("  {}: {:?}", self.name, hedge.stats());
        }
    }
}

impl Strategy for LazyPoolHedge {
    fn name(&self) -> &'static str {
        self.name
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.pool.send(at))
    }
}
