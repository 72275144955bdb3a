//! A naive retry, no breaker: each call goes to the next replica in turn and, whatever went
//! wrong (a 5xx, a timeout, a refused connection), goes again at once to the next one, up to
//! four attempts, with no budget and no backoff. Each attempt has [`ATTEMPT_TIMEOUT`]
//! (140 ms) within what is left of the deadline. What a retry loop written in a hurry does:
//! the lab's measure of a retry storm.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use super::{work, Strategy, Turns, ATTEMPT_TIMEOUT};
use crate::client::{Answer, Http, Sent};

/// Attempts per call, the first included.
const ATTEMPTS: usize = 4;

#[derive(Debug)]
pub(super) struct NaiveRetry {
    http: Http,
    addrs: Vec<SocketAddr>,
    turns: Turns,
}

impl NaiveRetry {
    pub(super) fn new(http: Http, addrs: Vec<SocketAddr>) -> Self {
        Self {
            http,
            addrs,
            turns: Turns::default(),
        }
    }
}

impl Strategy for NaiveRetry {
    fn name(&self) -> &'static str {
        "naive retry"
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let (path, started) = (work(at), Instant::now());
            let mut last = Sent {
                answer: Answer::Timeout,
                node: None,
            };
            let order: Vec<usize> = self.turns.order(self.addrs.len()).collect();
            for node in order.into_iter().cycle().take(ATTEMPTS) {
                let left = self.http.deadline.saturating_sub(started.elapsed());
                if left.is_zero() {
                    break;
                }
                let within = ATTEMPT_TIMEOUT.min(left);
                last = self
                    .http
                    .get_within(self.addrs[node], &path, Some(node), within)
                    .await;
                if last.answer.is_ok() {
                    break;
                }
            }
            last
        })
    }
}
