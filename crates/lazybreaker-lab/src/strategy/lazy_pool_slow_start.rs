//! The `lazybreaker pool` strategy with slow start: `Pool::slow_start(SlowStart::new(3 s))`
//! with its defaults (aggression 1.0: the weight of a returning replica grows linearly;
//! at least 10 %), so that a replica that comes back (its breaker closed after a trip, a
//! failed check, a hang) takes a share of the picks ramping up over 3 s instead of its
//! whole share at once.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::pool::SlowStart;
use lazybreaker::retry::Hedge;

use super::lazy_pool::LazyPool;
use super::{Strategy, ATTEMPT_TIMEOUT};
use crate::client::{Http, Sent};

/// The ramp's window (the `cold-start` replica's warm-up).
const WINDOW: Duration = Duration::from_secs(3);

#[derive(Debug)]
pub(super) struct LazyPoolSlowStart {
    pool: LazyPool,
    name: &'static str,
}

impl LazyPoolSlowStart {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        Self::with(
            http,
            addrs,
            SlowStart::new(WINDOW),
            None,
            "lazybreaker pool + slow start",
        )
    }

    /// The pool with `slow_start` (and `hedge`, each attempt then within
    /// [`ATTEMPT_TIMEOUT`] and the deadline), named `name` in the report.
    pub(super) fn with(
        http: Http,
        addrs: Vec<SocketAddr>,
        slow_start: SlowStart,
        hedge: Option<Hedge>,
        name: &'static str,
    ) -> Self {
        let attempt = hedge.is_some().then_some(ATTEMPT_TIMEOUT);
        Self {
            pool: LazyPool::configured(http, addrs, attempt, |pool| {
                let pool = pool.slow_start(slow_start);
                match hedge {
                    Some(hedge) => pool.hedge(hedge),
                    None => pool,
                }
            }),
            name,
        }
    }
}

impl Strategy for LazyPoolSlowStart {
    fn name(&self) -> &'static str {
        self.name
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.pool.send(at))
    }
}
