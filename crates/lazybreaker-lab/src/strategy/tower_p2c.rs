//! The tower way: tower's power of two choices (`balance::p2c`, on requests in flight) over a
//! tower-resilience 0.14 circuit breaker per replica, with its defaults (trips at 50 %
//! failures over the last 100 calls once it has them, stays open 30 s, one call in
//! half-open). An open breaker is ready and fails its call at once, so the balancer keeps
//! choosing it; that is how the two compose.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::Mutex;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{Service, ServiceExt};
use tower_resilience_circuitbreaker::{CircuitBreakerError, CircuitBreakerLayer};

use super::{rejected, work, Strategy};
use crate::client::{Http, Sent};

/// A call that did not succeed, as the inner service's error (the breaker counts it).
#[derive(Debug)]
pub(super) struct Failed(pub(super) Sent);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0.answer)
    }
}

impl std::error::Error for Failed {}

/// One attempt through the balancer: the path to ask for and its timeout.
#[derive(Debug, Clone)]
pub(super) struct Attempt {
    pub(super) path: String,
    pub(super) within: Duration,
}

type Node = tower_resilience_circuitbreaker::CircuitBreaker<
    tower::util::BoxCloneSyncService<Attempt, Sent, Failed>,
    tower_resilience_circuitbreaker::DefaultClassifier,
>;
type Balanced = Balance<ServiceList<Vec<PendingRequests<Node>>>, Attempt>;

pub(super) struct TowerP2c {
    balance: Mutex<Balanced>,
    deadline: Duration,
}

impl std::fmt::Debug for TowerP2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TowerP2c")
    }
}

impl TowerP2c {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let deadline = http.deadline;
        let nodes: Vec<PendingRequests<Node>> = addrs
            .into_iter()
            .enumerate()
            .map(|(node, addr)| {
                let http = http.clone();
                let send = tower::service_fn(move |attempt: Attempt| {
                    let http = http.clone();
                    async move {
                        let sent = http
                            .get_within(addr, &attempt.path, Some(node), attempt.within)
                            .await;
                        if sent.answer.is_ok() {
                            Ok(sent)
                        } else {
                            Err(Failed(sent))
                        }
                    }
                });
                let layer = CircuitBreakerLayer::builder()
                    .name(format!("n{node}"))
                    .build()
                    .expect("the defaults are valid");
                let breaker =
                    tower::Layer::layer(&layer, tower::util::BoxCloneSyncService::new(send));
                PendingRequests::new(breaker, CompleteOnResponse::default())
            })
            .collect();
        Self {
            balance: Mutex::new(Balance::new(ServiceList::new(nodes))),
            deadline,
        }
    }

    /// One attempt: the balancer's pick, through its breaker.
    pub(super) async fn attempt(&self, attempt: Attempt) -> Sent {
        let call = {
            let mut balance = self.balance.lock().await;
            match balance.ready().await {
                Ok(ready) => ready.call(attempt),
                Err(_) => return rejected(),
            }
        };
        match call.await {
            Ok(sent) => sent,
            Err(error) => match error.downcast::<CircuitBreakerError<Failed>>() {
                Ok(e) => match *e {
                    CircuitBreakerError::Inner(Failed(sent)) => sent,
                    _ => rejected(),
                },
                Err(_) => rejected(),
            },
        }
    }
}

impl Strategy for TowerP2c {
    fn name(&self) -> &'static str {
        "tower-resilience p2c"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(self.attempt(Attempt {
            path: work(at),
            within: self.deadline,
        }))
    }
}
