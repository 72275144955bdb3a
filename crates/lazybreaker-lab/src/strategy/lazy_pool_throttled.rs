//! lazybreaker's pool behind one throttled breaker, the recipe of `docs/throttle.md`:
//! overload is the cluster's signal, a node's failure the node's. The front breaker never
//! trips and throttles with `Throttle::new(2.0)` and its defaults over a rolling 10 s window;
//! an overload answer (503, 429) is a failure for it, anything else a node's failure is not
//! its business (an exclusion); the pool behind it is the `lazybreaker pool` strategy.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::policy::Outcome;
use lazybreaker::throttle::Throttle;
use lazybreaker::Breaker;

use super::lazy_pool::LazyPool;
use super::{rejected, Strategy};
use crate::client::{Answer, Http, Sent};

#[derive(Debug)]
pub(super) struct LazyPoolThrottled {
    front: Breaker,
    pool: LazyPool,
}

impl LazyPoolThrottled {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let front = Breaker::builder()
            .name("cluster")
            .never_trips(true)
            .interval(Duration::from_secs(10))
            .bucket_period(Duration::from_secs(1))
            .throttle(Throttle::new(2.0).expect("2 is a valid multiplier"))
            .build();
        Self {
            front,
            pool: LazyPool::new(http, addrs),
        }
    }
}

impl Strategy for LazyPoolThrottled {
    fn name(&self) -> &'static str {
        "lazybreaker pool + throttle"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let Ok(permit) = self.front.allow() else {
                return rejected();
            };
            let sent = self.pool.send(at).await;
            permit.record(match sent.answer {
                Answer::Ok => Outcome::Success,
                Answer::Status {
                    code: 503 | 429, ..
                } => Outcome::Failure,
                _ => Outcome::Excluded,
            });
            sent
        })
    }
}
