//! lazybreaker's `pool::Pool` with its defaults, a health check and the calls' deadline: the
//! power of two choices among the replicas whose breakers admit a call, at most half of them
//! isolated on the traffic's judgement (a replica whose check failed, or that hangs past the
//! deadline, is out whatever the cap), open 100 ms at first and backing off, a node revived
//! only when `GET /health` answers 2xx (checked lazily, beside the calls, by the picks that
//! find its open period over). Each call goes through `Pool::call`, a `Retry-After` honoured.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::Outcome;
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, Classify};

use super::{outcome, rejected, Strategy};
use crate::client::{Answer, Http, Sent};

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
        let pool = Pool::new(|n: &usize| Breaker::builder().name(format!("n{n}")))
            .deadline(http.deadline)
            .health_check(move |n: &usize| {
                let (http, addr) = (checker.clone(), checked[*n]);
                async move {
                    http.get_within(addr, "/health", None, CHECK_DEADLINE)
                        .await
                        .answer
                        .is_ok()
                }
            });
        pool.set(0..addrs.len());
        Self { http, addrs, pool }
    }
}

impl LazyPool {
    /// One call through the pool: a pick, the request, its verdict for the node.
    pub(super) async fn send(&self) -> Sent {
        let call = |node: usize| async move {
            Ok::<_, Infallible>(self.http.get(self.addrs[node], "/work", Some(node)).await)
        };
        match self.pool.call(call, Answers).await {
            Ok(sent) => sent,
            Err(_) => rejected(),
        }
    }
}

/// How the pool counts an answer: [`outcome`]'s rules, and a 503 or 429 with `Retry-After`
/// opens the replica's breaker for that long, as `http::StatusRules::honor_retry_after`
/// does for a response (the replica asked for the time).
struct Answers;

impl Classify<Sent, Infallible> for Answers {
    fn classify(&self, sent: &Result<Sent, Infallible>) -> Outcome {
        match sent {
            Ok(sent) => outcome(sent.answer),
            Err(never) => match *never {},
        }
    }

    fn open_for(&self, sent: &Result<Sent, Infallible>) -> Option<Duration> {
        match sent {
            Ok(Sent {
                answer:
                    Answer::Status {
                        code: 429 | 503,
                        retry_after,
                    },
                ..
            }) => retry_after.filter(|d| !d.is_zero()),
            _ => None,
        }
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
