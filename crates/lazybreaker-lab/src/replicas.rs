//! The upstream replicas as processes: started from this binary on free loopback ports,
//! switched through their control endpoint, killed (a refusing node), replaced by a
//! listener that never accepts (a full accept queue), restarted (recovery). Every process is
//! killed when [`Replicas`] is dropped, whatever happened.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::upstream::Mode;

/// What runs on a replica's port.
#[derive(Debug)]
enum Running {
    /// The upstream server.
    Upstream(Child),
    /// A listener that never accepts.
    Blackhole(Child),
    /// Nothing: connections are refused.
    Nothing,
}

/// The replicas of one run.
#[derive(Debug)]
pub struct Replicas {
    exe: PathBuf,
    ports: Vec<u16>,
    running: Vec<Running>,
    seed: u64,
    /// The attempts the replicas received per bin of due times ([`ATTEMPT_BIN`](crate::upstream::ATTEMPT_BIN)), read from
    /// each upstream process before it is stopped.
    attempts: Vec<u64>,
}

/// A free port on 127.0.0.1 (the kernel's pick; released for the replica to bind).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Replicas {
    /// Starts `n` healthy replicas, running `exe` (this binary), and waits until each
    /// accepts connections (at most 10 s).
    pub async fn start(exe: PathBuf, n: usize, seed: u64) -> std::io::Result<Self> {
        let mut replicas = Self {
            exe,
            ports: Vec::with_capacity(n),
            running: Vec::with_capacity(n),
            seed,
            attempts: Vec::new(),
        };
        for node in 0..n {
            replicas.ports.push(free_port()?);
            replicas.running.push(Running::Nothing);
            replicas.restart(node).await?;
        }
        Ok(replicas)
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    pub fn addr(&self, node: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports[node]))
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        (0..self.len()).map(|n| self.addr(n)).collect()
    }

    fn spawn(&self, args: &[String]) -> std::io::Result<Child> {
        Command::new(&self.exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
    }

    /// Stops whatever runs on `node`'s port (an upstream's attempts read first).
    pub async fn kill(&mut self, node: usize) {
        if let Running::Upstream(_) = self.running[node] {
            match control(self.addr(node), "GET /_lab/attempts").await {
                Ok(body) => {
                    let bins = body.split(',').filter_map(|n| n.trim().parse::<u64>().ok());
                    for (bin, n) in bins.enumerate() {
                        if self.attempts.len() <= bin {
                            self.attempts.resize(bin + 1, 0);
                        }
                        self.attempts[bin] += n;
                    }
                }
                Err(e) => eprintln!("the attempts of replica {node}: {e}"),
            }
        }
        match std::mem::replace(&mut self.running[node], Running::Nothing) {
            Running::Upstream(mut child) | Running::Blackhole(mut child) => {
                let _ = child.kill().await;
            }
            Running::Nothing => {}
        }
    }

    /// (Re)starts a healthy upstream on `node`'s port and waits until it answers.
    pub async fn restart(&mut self, node: usize) -> std::io::Result<()> {
        self.restart_as(node, Mode::Healthy).await
    }

    /// (Re)starts an upstream on `node`'s port in `mode` from its start (a cold replica
    /// counts its warm-up from there) and waits until it answers.
    pub async fn restart_as(&mut self, node: usize, mode: Mode) -> std::io::Result<()> {
        self.kill(node).await;
        let port = self.ports[node];
        let child = self.spawn(&[
            "upstream".into(),
            "--node".into(),
            node.to_string(),
            "--port".into(),
            port.to_string(),
            "--seed".into(),
            (self.seed + node as u64).to_string(),
            "--mode".into(),
            mode.as_str().into(),
        ])?;
        self.running[node] = Running::Upstream(child);
        wait_accepting(self.addr(node)).await
    }

    /// Replaces `node` with a listener whose accept queue is never drained.
    pub async fn blackhole(&mut self, node: usize) -> std::io::Result<()> {
        self.kill(node).await;
        let port = self.ports[node];
        let mut child = Command::new(&self.exe)
            .args(["blackhole", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        // Wait for its word that the port is held: a connect cannot tell, since the load
        // may fill its queue of one at once.
        let stdout = child.stdout.take();
        self.running[node] = Running::Blackhole(child);
        let said = async {
            use tokio::io::AsyncBufReadExt;
            let mut line = String::new();
            if let Some(stdout) = stdout {
                tokio::io::BufReader::new(stdout)
                    .read_line(&mut line)
                    .await?;
            }
            Ok::<_, std::io::Error>(line)
        };
        match tokio::time::timeout(Duration::from_secs(10), said).await {
            Ok(Ok(line)) if line.trim() == "listening" => Ok(()),
            Ok(Ok(line)) => Err(std::io::Error::other(format!(
                "the listener on {} said {line:?}",
                self.addr(node)
            ))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{} was not held within 10 s", self.addr(node)),
            )),
        }
    }

    /// Sets `node`'s behaviour (an upstream must be running there).
    pub async fn set(&self, node: usize, mode: Mode) -> std::io::Result<()> {
        control(
            self.addr(node),
            &format!("POST /_lab/mode?set={}", mode.as_str()),
        )
        .await?;
        Ok(())
    }

    /// Sets `node` to shed what it receives beyond `capacity` requests a second
    /// ([`Mode::Storm`]).
    pub async fn storm(&self, node: usize, capacity: u64) -> std::io::Result<()> {
        self.set_with(node, Mode::Storm, capacity).await
    }

    /// Sets `node`'s behaviour to `mode` with `capacity` requests a second (what a storming
    /// replica serves before it sheds, what a queueing one's workers serve).
    pub async fn set_with(&self, node: usize, mode: Mode, capacity: u64) -> std::io::Result<()> {
        control(
            self.addr(node),
            &format!("POST /_lab/mode?set={}&capacity={capacity}", mode.as_str()),
        )
        .await?;
        Ok(())
    }

    /// Stops every process.
    pub async fn stop(&mut self) {
        for node in 0..self.len() {
            self.kill(node).await;
        }
    }

    /// The `/work` requests the replicas received, per [`ATTEMPT_BIN`](crate::upstream::ATTEMPT_BIN) of the calls' due
    /// times, from every upstream process stopped so far ([`stop`](Self::stop) them first):
    /// a refused connection or one never accepted is not a request received.
    pub fn attempts(&self) -> &[u64] {
        &self.attempts
    }
}

/// Waits until `addr` accepts a connection (at most 10 s).
async fn wait_accepting(addr: SocketAddr) -> std::io::Result<()> {
    let started = Instant::now();
    loop {
        let connected = tokio::task::spawn_blocking(move || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })
        .await
        .unwrap_or(false);
        if connected {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{addr} did not start listening within 10 s"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One HTTP/1.1 control request (`"METHOD /path"`) to a replica, its body back (at most
/// 2 s).
async fn control(addr: SocketAddr, line: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!(
        "{line} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        if !head.starts_with("HTTP/1.1 200") {
            return Err(std::io::Error::other(format!("{addr} {line}: {head}")));
        }
        Ok(body.to_owned())
    };
    tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "control timed out"))?
}
