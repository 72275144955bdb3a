//! tower's hedge middleware (`tower::hedge::Hedge`) over the `tower-resilience p2c`
//! strategy: a call that has not answered after the 95th percentile of the recent
//! latencies (tower's rotating histogram of the calls that succeeded, in milliseconds, over
//! all replicas: a period of 1 s, at least 100 latencies in the last one before it hedges)
//! gets a second attempt through the balancer, and the first attempt to complete wins,
//! whatever it answered (tower's `Select`). Each attempt has [`ATTEMPT_TIMEOUT`] (140 ms)
//! within what is left of the deadline, as the retrying strategies'. tower's hedge has no
//! budget of its own: every call whose first attempt outlasts the percentile is hedged.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tower::{Service, ServiceExt};

use super::tower_p2c::{Attempt, Failed, TowerP2c};
use super::{rejected, work, Strategy, ATTEMPT_TIMEOUT};
use crate::client::{Http, Sent};

/// The percentile the hedge waits for (as `lazybreaker pool + hedge`).
const PERCENTILE: f32 = 0.95;
/// The latencies tower's histogram needs in its last period before it hedges.
const MIN_DATA_POINTS: u64 = 100;
/// tower's histogram's rotation period: the percentile is read over the last full one.
const PERIOD: Duration = Duration::from_secs(1);

/// A call as the hedge sees it: what to ask for, until when.
#[derive(Debug, Clone)]
struct Request {
    path: Arc<str>,
    deadline: Instant,
}

/// Every call may be hedged while its deadline has not passed.
#[derive(Debug, Clone, Copy)]
struct Policy;

impl tower::hedge::Policy<Request> for Policy {
    fn clone_request(&self, request: &Request) -> Option<Request> {
        Some(request.clone())
    }

    fn can_retry(&self, request: &Request) -> bool {
        Instant::now() < request.deadline
    }
}

type Attempts = tower::util::BoxCloneSyncService<Request, Sent, Failed>;

pub(super) struct TowerHedge {
    hedge: Mutex<tower::hedge::Hedge<Attempts, Policy>>,
    deadline: Duration,
}

impl std::fmt::Debug for TowerHedge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TowerHedge")
    }
}

impl TowerHedge {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let deadline = http.deadline;
        let p2c = Arc::new(TowerP2c::new(http, addrs));
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
        let hedge = tower::hedge::Hedge::new(
            tower::util::BoxCloneSyncService::new(attempt),
            Policy,
            MIN_DATA_POINTS,
            PERCENTILE,
            PERIOD,
        );
        Self {
            hedge: Mutex::new(hedge),
            deadline,
        }
    }
}

impl Strategy for TowerHedge {
    fn name(&self) -> &'static str {
        "tower hedge + p2c"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let request = Request {
                path: Arc::from(work(at)),
                deadline: Instant::now() + self.deadline,
            };
            let call = {
                let mut hedge = self.hedge.lock().await;
                match hedge.ready().await {
                    Ok(ready) => ready.call(request),
                    Err(_) => return rejected(),
                }
            };
            match call.await {
                Ok(sent) => sent,
                Err(error) => match error.downcast::<Failed>() {
                    Ok(failed) => failed.0,
                    Err(_) => rejected(),
                },
            }
        })
    }
}
