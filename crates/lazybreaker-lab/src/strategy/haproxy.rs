//! HAProxy (Debian's package) in front of the replicas, as the load balancer a user would
//! pick instead of a client-side breaker: round robin, passive checks on the traffic
//! (`observe layer7`, `error-limit 10`, `on-error mark-down`) and active checks
//! (`GET /health` every second, down after 2 failures, up after 2 passes), its timeouts at
//! the client's deadline. The answer names the replica (`x-node`, HAProxy's server name),
//! its own 503 or 504 included.
//!
//! With retries (`haproxy + retries`), as an operator would set it up to retry on another
//! server: `retries 2`, `option redispatch 1` (every retry to another server), `retry-on
//! conn-failure empty-response response-timeout 500 502 503 504`, and a server timeout of
//! 140 ms (so that a retry after a hang fits in the deadline); the connect timeout stays at
//! the deadline.
//!
//! With `maxconn` (`haproxy maxconn`), as an operator tunes it for replicas of a known
//! capacity: each server line `maxconn` the replica's workers (one)
//! ([`WORKERS`](crate::upstream::WORKERS)), so that HAProxy holds at most that many calls on
//! a server and sends the next one to a server with a free slot (round robin skips a full
//! server), queueing it in the backend only when every server is full; and `timeout queue
//! 100ms` (a third of the client's deadline: a call that waited that long for a slot gets
//! HAProxy's 503 while its client still has the time for a fallback, instead of waiting
//! until the deadline; unset, it would be the connect timeout, the whole deadline). No
//! `maxqueue`: it bounds a server's own queue, which holds only the calls bound to that
//! server (persistence, which the lab does not use); the backend's queue is bounded by
//! `timeout queue`. HAProxy's own 503 (naming no server) counts as shed
//! ([`Answer::Shed`](crate::client::Answer::Shed)). The checks are `haproxy`'s.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::{work, Strategy};
use crate::client::{Answer, Http, Sent};
use crate::replicas::free_port;
use crate::upstream::WORKERS;

/// HAProxy's `timeout queue` with `maxconn`: a third of the client's deadline.
const QUEUE_SHARE_OF_DEADLINE: u32 = 3;

/// A running HAProxy, killed when dropped.
#[derive(Debug)]
pub struct HaProxy {
    name: &'static str,
    http: Http,
    front: SocketAddr,
    _process: Child,
}

impl HaProxy {
    /// Whether the `haproxy` binary is on this machine.
    pub fn available() -> bool {
        std::process::Command::new("haproxy")
            .arg("-v")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The strategies HAProxy runs: alone, with retries, with `maxconn` on each server.
    pub const NAMES: [&'static str; 3] = ["haproxy", "haproxy + retries", "haproxy maxconn"];

    /// Starts HAProxy set up as the strategy `name` (one of [`NAMES`](Self::NAMES)) over
    /// `addrs`, its configuration written in `dir`, and waits until it accepts connections
    /// (at most 10 s).
    ///
    /// # Errors
    ///
    /// `name` is not one of [`NAMES`](Self::NAMES), or HAProxy did not start.
    pub async fn start(
        http: Http,
        addrs: &[SocketAddr],
        dir: &Path,
        name: &str,
    ) -> std::io::Result<Self> {
        let name = *Self::NAMES
            .iter()
            .find(|n| **n == name)
            .ok_or_else(|| std::io::Error::other(format!("no haproxy strategy {name:?}")))?;
        let (retries, maxconn) = (name == Self::NAMES[1], name == Self::NAMES[2]);
        let port = free_port()?;
        let deadline = http.deadline.as_millis();
        let mut config = format!(
            "global\n  maxconn 4096\n\n\
             defaults\n  mode http\n  timeout connect {deadline}ms\n  timeout client 10s\n  \
             timeout server {deadline}ms\n  timeout check 200ms\n\n\
             frontend lab\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\n\
             backend replicas\n  balance roundrobin\n  option httpchk GET /health\n  \
             http-after-response set-header x-node %s\n  \
             default-server check inter 1s fall 2 rise 2 observe layer7 error-limit 10 on-error mark-down\n"
        );
        if retries {
            config.push_str(
                "  retries 2\n  option redispatch 1\n  \
                 retry-on conn-failure empty-response response-timeout 500 502 503 504\n  \
                 timeout server 140ms\n",
            );
        }
        let server = if maxconn {
            config.push_str(&format!(
                "  timeout queue {}ms\n",
                http.deadline.as_millis() / u128::from(QUEUE_SHARE_OF_DEADLINE)
            ));
            format!(" maxconn {WORKERS}")
        } else {
            String::new()
        };
        for (n, addr) in addrs.iter().enumerate() {
            config.push_str(&format!("  server n{n} {addr}{server}\n"));
        }
        std::fs::create_dir_all(dir)?;
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config)?;
        let process = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        while tokio::net::TcpStream::connect(front).await.is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(std::io::Error::other("haproxy did not start within 10 s"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            name,
            http,
            front,
            _process: process,
        })
    }
}

impl Strategy for HaProxy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn call(&self, at: Duration) -> Pin<Box<dyn Future<Output = Sent> + Send + '_>> {
        Box::pin(async move {
            let sent = self.http.get(self.front, &work(at), None).await;
            match sent {
                // HAProxy's own 503, no server named: with `maxconn`, the call waited in its
                // queue past `timeout queue`.
                Sent {
                    answer: Answer::Status { code: 503, .. },
                    node: None,
                } if self.name == Self::NAMES[2] => Sent {
                    answer: Answer::Shed,
                    node: None,
                },
                sent => sent,
            }
        })
    }
}
