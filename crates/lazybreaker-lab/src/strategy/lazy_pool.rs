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
use std::time::{Duration, Instant};

use lazybreaker::policy::Outcome;
use lazybreaker::pool::Pool;
use lazybreaker::retry::Retry;
use lazybreaker::{Breaker, Classify, Rejected};

use super::{outcome, rejected, work, Strategy};
use crate::client::{Answer, Http, Sent};

/// The health check's own deadline: a check must settle well within the breaker's
/// `check_timeout` (500 ms).
const CHECK_DEADLINE: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub(super) struct LazyPool {
    http: Http,
    addrs: Arc<Vec<SocketAddr>>,
    pool: Arc<Pool<usize>>,
    /// With a retry or a hedge: each attempt's timeout (within what is left of the
    /// deadline).
    attempt: Option<Duration>,
}

impl LazyPool {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        Self::configured(http, addrs, None, |pool| pool)
    }

    /// The pool with `retry` ([`Pool::retry`]), each attempt within `attempt` and what is
    /// left of the call's deadline.
    pub(super) fn retrying(
        http: Http,
        addrs: Vec<SocketAddr>,
        retry: Retry,
        attempt: Duration,
    ) -> Self {
        Self::configured(http, addrs, Some(attempt), |pool| pool.retry(retry))
    }

    /// The pool as `configure` leaves it (a hedge, a retry, a slow start), each attempt
    /// within `attempt` (when given) and what is left of the call's deadline.
    pub(super) fn configured(
        http: Http,
        addrs: Vec<SocketAddr>,
        attempt: Option<Duration>,
        configure: impl FnOnce(Pool<usize>) -> Pool<usize>,
    ) -> Self {
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
        let pool = Arc::new(configure(pool));
        pool.set(0..addrs.len());
        Self {
            http,
            addrs,
            pool,
            attempt,
        }
    }

    /// The pool.
    pub(super) fn pool(&self) -> &Arc<Pool<usize>> {
        &self.pool
    }
}

impl LazyPool {
    /// One call through the pool: a pick, the request, its verdict for the node (and, with
    /// a retry, as many more as it makes).
    pub(super) async fn send(&self, at: Duration) -> Sent {
        let (path, started) = (work(at), Instant::now());
        let deadline = self.http.deadline;
        let call = |node: usize| {
            let within = match self.attempt {
                Some(attempt) => attempt.min(deadline.saturating_sub(started.elapsed())),
                None => deadline,
            };
            let path = &path;
            async move {
                Ok::<_, Infallible>(
                    self.http
                        .get_within(self.addrs[node], path, Some(node), within)
                        .await,
                )
            }
        };
        match self.pool.call(call, Answers).await {
            Ok(sent) => sent,
            // Every replica at its limit (a pool with one): shed, at once.
            Err(lazybreaker::Error::Rejected(Rejected::Limited)) => Sent {
                answer: Answer::Shed,
                node: None,
            },
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

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.send(at))
    }
}
