//! The tower way: tower's power of two choices (`balance::p2c`, on requests in flight) over a
//! tower-resilience 0.14 circuit breaker per replica, with its defaults (trips at 50 %
//! failures over the last 100 calls once it has them, stays open 30 s, one call in
//! half-open). An open breaker is ready and fails its call at once, so the balancer keeps
//! choosing it; that is how the two compose.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::sync::Mutex;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{Service, ServiceExt};
use tower_resilience_circuitbreaker::{CircuitBreakerError, CircuitBreakerLayer};

use super::{rejected, Strategy};
use crate::client::{Http, Sent};

/// A call that did not succeed, as the inner service's error (the breaker counts it).
#[derive(Debug)]
struct Failed(Sent);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0.answer)
    }
}

impl std::error::Error for Failed {}

type Node = tower_resilience_circuitbreaker::CircuitBreaker<
    tower::util::BoxCloneSyncService<(), Sent, Failed>,
    tower_resilience_circuitbreaker::DefaultClassifier,
>;
type Balanced = Balance<ServiceList<Vec<PendingRequests<Node>>>, ()>;

pub(super) struct TowerP2c {
    balance: Mutex<Balanced>,
}

impl std::fmt::Debug for TowerP2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TowerP2c")
    }
}

impl TowerP2c {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let nodes: Vec<PendingRequests<Node>> = addrs
            .into_iter()
            .enumerate()
            .map(|(node, addr)| {
                let http = http.clone();
                let send = tower::service_fn(move |()| {
                    let http = http.clone();
                    async move {
                        let sent = http.get(addr, "/work", Some(node)).await;
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
        }
    }
}

impl Strategy for TowerP2c {
    fn name(&self) -> &'static str {
        "tower-resilience p2c"
    }

    fn call(&self) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let call = {
                let mut balance = self.balance.lock().await;
                match balance.ready().await {
                    Ok(ready) => ready.call(()),
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
        })
    }
}
