//! The `lazybreaker pool` strategy with an adaptive concurrency limit per replica:
//! `Pool::limit(algorithm)`, each replica its own copy. A pick skips a replica with as many
//! calls in flight as its limit (as it skips an isolated one); with every replica at its
//! limit the call is refused at once (`Rejected::Limited`), counted as shed
//! ([`Answer::Shed`](crate::client::Answer::Shed)): a fast failure the caller serves its fallback for.
//!
//! The settings, as a user would choose them from the docs for replicas of one worker
//! and a 300 ms deadline:
//!
//! - `lazybreaker pool + aimd`: [`Aimd`] with `min_limit(1)` (the replica's worker:
//!   a limit of at least one keeps it busy, and Netflix's minimum of 20 would be far above
//!   a worker pool this small to matter),
//!   `timeout(100 ms)` (a third of the deadline: a call that took that long is a drop, the
//!   limit cut by 0.9, while a call that queued still has room before the deadline), and
//!   the rest of Netflix's defaults (20 at first, at most 200, a ratio of 0.9). A healthy
//!   replica holds one or two calls at 100 calls a second: it never reaches half of 20, so
//!   its limit stays 20 and never turns a call away.
//! - `lazybreaker pool + gradient2`: [`Gradient2`] with `min_limit(1)` (the worker, as
//!   AIMD's: Netflix's floor of 20 would never bind here) and Netflix's other defaults (20
//!   at first, at most 200, smoothing 0.2, a queue size of 4, a tolerance of 1.5, a long
//!   window of 600 calls): no timeout to choose, the limit follows the ratio of the long-run
//!   latency to the latest one.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::limit::{Aimd, Algorithm, Gradient2};

use super::lazy_pool::LazyPool;
use super::Strategy;
use crate::client::{Http, Sent};

/// AIMD's floor: the queueing replica's workers ([`WORKERS`](crate::upstream::WORKERS)).
pub(super) const AIMD_MIN_LIMIT: u32 = crate::upstream::WORKERS as u32;
/// AIMD's timeout: a third of the lab's 300 ms deadline.
pub(super) const AIMD_TIMEOUT: Duration = Duration::from_millis(100);

/// The AIMD limit of `lazybreaker pool + aimd`.
pub(super) fn aimd() -> Aimd {
    Aimd::new().min_limit(AIMD_MIN_LIMIT).timeout(AIMD_TIMEOUT)
}

/// Gradient2's floor: the workers, as AIMD's.
pub(super) const GRADIENT2_MIN_LIMIT: u32 = crate::upstream::WORKERS as u32;

/// The Gradient2 limit of `lazybreaker pool + gradient2`.
pub(super) fn gradient2() -> Gradient2 {
    Gradient2::new().min_limit(GRADIENT2_MIN_LIMIT)
}

#[derive(Debug)]
pub(super) struct LazyPoolLimit {
    pool: LazyPool,
    name: &'static str,
}

impl LazyPoolLimit {
    /// The pool with `algorithm` as each replica's limit, named `name` in the report.
    pub(super) fn new(
        http: Http,
        addrs: Vec<SocketAddr>,
        algorithm: impl Algorithm,
        name: &'static str,
    ) -> Self {
        Self {
            pool: LazyPool::configured(http, addrs, None, |pool| pool.limit(algorithm)),
            name,
        }
    }
}

impl Strategy for LazyPoolLimit {
    fn name(&self) -> &'static str {
        self.name
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.pool.send(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aimd_settings_are_in_range() {
        let limit = aimd();
        assert!(limit.validate().is_ok());
        assert_eq!(limit.limit(), 20, "Netflix's first limit");
        assert!(
            AIMD_TIMEOUT < Duration::from_millis(300),
            "below the deadline"
        );
    }
}
