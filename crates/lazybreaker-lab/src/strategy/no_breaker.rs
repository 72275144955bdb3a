//! No breaker: each call goes to the next replica in turn, whatever happened before.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use super::{work, Strategy, Turns};
use crate::client::{Http, Sent};

#[derive(Debug)]
pub(super) struct NoBreaker {
    http: Http,
    addrs: Vec<SocketAddr>,
    turns: Turns,
}

impl NoBreaker {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        Self {
            http,
            addrs,
            turns: Turns::default(),
        }
    }
}

impl Strategy for NoBreaker {
    fn name(&self) -> &'static str {
        "no breaker"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let node = self.turns.order(self.addrs.len()).next().unwrap_or(0);
            self.http.get(self.addrs[node], &work(at), Some(node)).await
        })
    }
}
