//! lazybreaker with its defaults, a breaker per replica: each call goes to the next replica
//! in turn whose breaker admits it (gobreaker's defaults: six failures in a row trip it, it
//! stays open 60 s; a refused connection opens it at once).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use lazybreaker::Breaker;

use super::{outcome, rejected, work, Strategy, Turns};
use crate::client::{Http, Sent};

#[derive(Debug)]
pub(super) struct LazyPerNode {
    http: Http,
    addrs: Vec<SocketAddr>,
    breakers: Vec<Breaker>,
    turns: Turns,
}

impl LazyPerNode {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let breakers = (0..addrs.len())
            .map(|n| Breaker::builder().name(format!("n{n}")).build())
            .collect();
        Self {
            http,
            addrs,
            breakers,
            turns: Turns::default(),
        }
    }
}

impl Strategy for LazyPerNode {
    fn name(&self) -> &'static str {
        "lazybreaker per node"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            for node in self.turns.order(self.addrs.len()) {
                if let Ok(permit) = self.breakers[node].allow() {
                    let sent = self.http.get(self.addrs[node], &work(at), Some(node)).await;
                    permit.record(outcome(sent.answer));
                    return sent;
                }
            }
            rejected()
        })
    }
}
