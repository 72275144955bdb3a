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
    /// A variant's ticker ([`ticking`](Self::ticking)), stopped when the strategy is.
    ticker: Option<tokio::task::JoinHandle<()>>,
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
            ticker: None,
        }
    }

    /// A measuring aid, not a recipe: [`with`](Self::with), and a task that makes (and
    /// drops unused) a pick of the pool every `tick`, so that a call waiting for its hedge's
    /// delay is woken within `tick` of it whatever the traffic, as a timer would (a pick
    /// dropped unused is excluded: counted neither way). Must be called within a tokio
    /// runtime.
    pub(super) fn ticking(
        http: Http,
        addrs: Vec<SocketAddr>,
        hedge: Hedge,
        tick: Duration,
        name: &'static str,
    ) -> Self {
        let mut strategy = Self::with(http, addrs, hedge, name);
        let pool = std::sync::Arc::clone(strategy.pool.pool());
        strategy.ticker = Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(tick);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                drop(pool.pick());
            }
        }));
        strategy
    }
}

impl Drop for LazyPoolHedge {
    /// What the hedge did over the run, for whoever reads the lab's log.
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
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
