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

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::{work, Strategy};
use crate::client::{Http, Sent};
use crate::replicas::free_port;

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

    /// The strategies HAProxy runs: without retries and with them.
    pub const NAMES: [&'static str; 2] = ["haproxy", "haproxy + retries"];

    /// Starts HAProxy over `addrs` with its configuration written in `dir`, and waits
    /// until it accepts connections (at most 10 s); `retries`: set up to retry on another
    /// server.
    pub async fn start(
        http: Http,
        addrs: &[SocketAddr],
        dir: &Path,
        retries: bool,
    ) -> std::io::Result<Self> {
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
        for (n, addr) in addrs.iter().enumerate() {
            config.push_str(&format!("  server n{n} {addr}\n"));
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
            name: Self::NAMES[usize::from(retries)],
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
        Box::pin(async move { self.http.get(self.front, &work(at), None).await })
    }
}
