//! tower's retry middleware (`tower::retry::Retry`) with tower's budget
//! (`retry::budget::TpsBudget`: a ttl of 10 s, 10 retries a second in reserve, 20 % of the
//! calls) over the `tower-resilience p2c` strategy: a call that fails (a 5xx, a timeout, a
//! transport error, or an open breaker's refusal: to tower's policy, an error) goes again
//! through the balancer, at once, up to three attempts, while the budget allows and the
//! deadline has not passed. The budget gets a deposit per call, as Finagle's does (tower's
//! example deposits on a success instead, which leaves a total outage only the reserve).
//! Each attempt has [`ATTEMPT_TIMEOUT`] (140 ms) within what is left of the deadline.

use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower::retry::budget::{Budget, TpsBudget};
use tower::ServiceExt;

use super::tower_p2c::{Attempt, Failed, TowerP2c};
use super::{work, Strategy, ATTEMPT_TIMEOUT};
use crate::client::{Http, Sent};

/// Attempts per call, the first included (as `lazybreaker pool + retry`).
const ATTEMPTS: u32 = 3;

/// A call as the retry sees it: what to ask for, until when.
#[derive(Debug, Clone)]
struct Request {
    path: Arc<str>,
    deadline: Instant,
}

/// The policy: retry an error while attempts, time and the budget are left.
#[derive(Debug, Clone)]
struct Policy {
    budget: Arc<TpsBudget>,
    made: u32,
}

impl tower::retry::Policy<Request, Sent, Failed> for Policy {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        request: &mut Request,
        result: &mut Result<Sent, Failed>,
    ) -> Option<Self::Future> {
        if result.is_ok() || self.made >= ATTEMPTS || Instant::now() >= request.deadline {
            return None;
        }
        if !self.budget.withdraw() {
            return None;
        }
        self.made += 1;
        Some(ready(()))
    }

    fn clone_request(&mut self, request: &Request) -> Option<Request> {
        Some(request.clone())
    }
}

pub(super) struct TowerRetry {
    p2c: Arc<TowerP2c>,
    budget: Arc<TpsBudget>,
    deadline: Duration,
}

impl std::fmt::Debug for TowerRetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TowerRetry")
    }
}

impl TowerRetry {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let deadline = http.deadline;
        Self {
            p2c: Arc::new(TowerP2c::new(http, addrs)),
            budget: Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)),
            deadline,
        }
    }
}

impl Strategy for TowerRetry {
    fn name(&self) -> &'static str {
        "tower retry + p2c"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            self.budget.deposit();
            let p2c = Arc::clone(&self.p2c);
            let attempt = tower::service_fn(move |request: Request| {
                let p2c = Arc::clone(&p2c);
                async move {
                    let left = request.deadline.saturating_duration_since(Instant::now());
                    let sent = p2c
                        .attempt(Attempt {
                            path: request.path.to_string(),
                            within: ATTEMPT_TIMEOUT.min(left),
                        })
                        .await;
                    if sent.answer.is_ok() {
                        Ok(sent)
                    } else {
                        Err(Failed(sent))
                    }
                }
            });
            let policy = Policy {
                budget: Arc::clone(&self.budget),
                made: 1,
            };
            let request = Request {
                path: Arc::from(work(at)),
                deadline: Instant::now() + self.deadline,
            };
            match tower::retry::Retry::new(policy, attempt)
                .oneshot(request)
                .await
            {
                Ok(sent) | Err(Failed(sent)) => sent,
            }
        })
    }
}
