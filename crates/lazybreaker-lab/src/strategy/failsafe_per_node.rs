//! failsafe 1.3 with its defaults, a breaker per replica (a success rate below 80 % over
//! 30 s, once it has 5 calls, or 5 failures in a row trip it; it stays open 10 s at first,
//! backing off to 300 s, jittered): each call goes to the next replica in turn whose breaker
//! permits it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use super::{rejected, work, Strategy, Turns};
use crate::client::{Http, Sent};

type Node = failsafe::StateMachine<
    failsafe::failure_policy::OrElse<
        failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::EqualJittered>,
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
    >,
    (),
>;

pub(super) struct FailsafePerNode {
    http: Http,
    addrs: Vec<SocketAddr>,
    breakers: Vec<Node>,
    turns: Turns,
}

impl std::fmt::Debug for FailsafePerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailsafePerNode")
    }
}

impl FailsafePerNode {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        let breakers = addrs
            .iter()
            .map(|_| failsafe::Config::new().build())
            .collect();
        Self {
            http,
            addrs,
            breakers,
            turns: Turns::default(),
        }
    }
}

impl Strategy for FailsafePerNode {
    fn name(&self) -> &'static str {
        "failsafe per node"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            for node in self.turns.order(self.addrs.len()) {
                let breaker = &self.breakers[node];
                if !breaker.is_call_permitted() {
                    continue;
                }
                let (http, addr) = (&self.http, self.addrs[node]);
                let result = failsafe::futures::CircuitBreaker::call(breaker, async move {
                    let sent = http.get(addr, &work(at), Some(node)).await;
                    if sent.answer.is_ok() {
                        Ok(sent)
                    } else {
                        Err(sent)
                    }
                })
                .await;
                return match result {
                    Ok(sent) | Err(failsafe::Error::Inner(sent)) => sent,
                    Err(failsafe::Error::Rejected) => continue,
                };
            }
            rejected()
        })
    }
}
