//! The `lazybreaker pool` strategy with a retry: `Pool::retry(Retry::new(3)?)` with its
//! defaults (three attempts, each on another replica at once; a budget of 20 % of the calls
//! plus 10 a second over 10 s), within the pool's deadline (the call's 300 ms). Each attempt
//! has [`ATTEMPT_TIMEOUT`] (140 ms, HAProxy's server timeout with retries) within what is
//! left of the deadline: with the whole deadline for one attempt, a retry after a hang could
//! never fit.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::retry::Retry;

use super::lazy_pool::LazyPool;
use super::{Strategy, ATTEMPT_TIMEOUT};
use crate::client::{Http, Sent};

#[derive(Debug)]
pub(super) struct LazyPoolRetry {
    pool: LazyPool,
}

impl LazyPoolRetry {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let retry = Retry::new(3).expect("3 attempts are valid");
        Self {
            pool: LazyPool::retrying(http, addrs, retry, ATTEMPT_TIMEOUT),
        }
    }
}

impl Strategy for LazyPoolRetry {
    fn name(&self) -> &'static str {
        "lazybreaker pool + retry"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.pool.send(at))
    }
}
