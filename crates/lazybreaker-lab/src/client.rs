//! The client every strategy sends through: one hyper connection pool, a per-call deadline,
//! and what came back, reduced to what the report and the breakers need.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// What a call came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx within the deadline.
    Ok,
    /// Another status within the deadline; `retry_after` when a 503 or 429 asked for time.
    Status {
        code: u16,
        retry_after: Option<Duration>,
    },
    /// No answer within the deadline (a hang, a connect that never completes).
    Timeout,
    /// The connection was refused.
    Refused,
    /// Another transport error (a reset, a closed connection).
    Io,
    /// Never sent: the strategy's breaker or balancer turned it away.
    Rejected,
    /// Shed: a concurrency limit refused it, at once (lazybreaker's `Rejected::Limited`:
    /// every replica at its limit), or HAProxy with `maxconn` answered its own 503, naming
    /// no server (the call waited in its queue past `timeout queue`). Never sent to a
    /// replica: a fast failure, to be served elsewhere or later.
    Shed,
}

impl Answer {
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }

    /// Whether a replica received it: neither turned away nor shed before it was sent.
    pub fn reached_a_replica(self) -> bool {
        !matches!(self, Self::Rejected | Self::Shed)
    }
}

/// A call's answer and the replica that got it, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub answer: Answer,
    pub node: Option<usize>,
}

/// The shared client.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
    pub deadline: Duration,
}

impl Http {
    pub fn new(deadline: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(deadline));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(256)
            .build(connector);
        Self { client, deadline }
    }

    /// `GET path` on `addr` within the deadline; `node` is who the caller sent it to (a
    /// load balancer's answer names the replica in `x-node` instead).
    pub async fn get(&self, addr: SocketAddr, path: &str, node: Option<usize>) -> Sent {
        self.get_within(addr, path, node, self.deadline).await
    }

    /// [`get`](Self::get) within `deadline`.
    pub async fn get_within(
        &self,
        addr: SocketAddr,
        path: &str,
        node: Option<usize>,
        deadline: Duration,
    ) -> Sent {
        let uri = match format!("http://{addr}{path}").parse() {
            Ok(uri) => uri,
            Err(_) => {
                return Sent {
                    answer: Answer::Io,
                    node,
                }
            }
        };
        let call = async {
            let response = self.client.get(uri).await;
            let response = match response {
                Ok(response) => response,
                Err(e) => return (transport(&e), None),
            };
            let status = response.status();
            let tagged = response
                .headers()
                .get("x-node")
                .and_then(|v| v.to_str().ok())
                .and_then(node_of);
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok())
                .map(Duration::from_secs);
            // The body is read whole: the call is over when the answer is.
            if response.into_body().collect().await.is_err() {
                return (Answer::Io, tagged);
            }
            let answer = if status.is_success() {
                Answer::Ok
            } else {
                Answer::Status {
                    code: status.as_u16(),
                    retry_after,
                }
            };
            (answer, tagged)
        };
        match tokio::time::timeout(deadline, call).await {
            Ok((answer, tagged)) => Sent {
                answer,
                node: tagged.or(node),
            },
            Err(_) => Sent {
                answer: Answer::Timeout,
                node,
            },
        }
    }
}

/// A replica's index from an `x-node` header: `2`, or HAProxy's server name `n2`.
fn node_of(value: &str) -> Option<usize> {
    value.trim_start_matches('n').parse().ok()
}

/// How a transport error reads: refused, or another I/O error.
fn transport(error: &(dyn std::error::Error + 'static)) -> Answer {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Answer::Refused;
            }
        }
        cause = e.source();
    }
    Answer::Io
}
