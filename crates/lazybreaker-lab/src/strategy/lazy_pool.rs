//! lazybreaker's `pool::Pool` with its defaults and a health check: the power of two choices
//! among the replicas whose breakers admit a call, at most half of them isolated, a node
//! revived only when `GET /health` answers 2xx (checked lazily, by the pick that finds its
//! open period over).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::pool::Pool;
use lazybreaker::Breaker;

use super::{outcome, rejected, Strategy};
use crate::client::{Http, Sent};

/// The health check's own deadline: a check must settle well within the breaker's
/// `check_timeout` (500 ms).
const CHECK_DEADLINE: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub(super) struct LazyPool {
    http: Http,
    addrs: Arc<Vec<SocketAddr>>,
    pool: Pool<usize>,
}

impl LazyPool {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let addrs = Arc::new(addrs);
        let (checker, checked) = (http.clone(), Arc::clone(&addrs));
        let pool = Pool::new(|n: &usize| Breaker::builder().name(format!("n{n}"))).health_check(
            move |n: &usize| {
                let (http, addr) = (checker.clone(), checked[*n]);
                async move {
                    http.get_within(addr, "/health", None, CHECK_DEADLINE)
                        .await
                        .answer
                        .is_ok()
                }
            },
        );
        pool.set(0..addrs.len());
        Self { http, addrs, pool }
    }
}

impl LazyPool {
    /// One call through the pool: a pick, the request, its verdict for the node.
    pub(super) async fn send(&self) -> Sent {
        let Ok(pick) = self.pool.pick_async().await else {
            return rejected();
        };
        let node = *pick.key();
        let sent = self.http.get(self.addrs[node], "/work", Some(node)).await;
        pick.record(outcome(sent.answer));
        sent
    }
}

impl Strategy for LazyPool {
    fn name(&self) -> &'static str {
        "lazybreaker pool"
    }

    fn call(&self) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.send())
    }
}
