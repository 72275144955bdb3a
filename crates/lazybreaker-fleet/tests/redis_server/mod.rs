//! A `redis-server` of one test's own, on a loopback port of its own, persistence off, killed
//! on drop whatever happens. `bash .ci/test` installs Debian's `redis-server` if missing and
//! names it in `LAZYBREAKER_REDIS_SERVER`.
//!
//! Ports come from a range below the kernel's ephemeral range (which starts at 32768), handed
//! out by a process-wide counter, so a port stays this test's while its server is down (a
//! restart test) and no parallel test can be given it; and the server that answers must
//! report the pid of the child this test started, so a port taken by anything else is
//! skipped, never shared.
// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed on drop.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    /// Extra arguments the server was started with (`--requirepass secret`, say).
    args: Vec<String>,
}

/// The next port to try: 20000 + 60 ports per process slot, so test binaries (and parallel
/// runs) start apart.
fn next_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let slot = (std::process::id() % 200) as u16;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    20_000 + (slot * 60 + n) % 12_000
}

impl Server {
    /// A server on a free port of this test's own.
    pub(crate) fn start() -> Self {
        Self::try_start()
            .unwrap_or_else(|| panic!("no free loopback port for redis-server after 50 tries"))
    }

    /// [`start`](Self::start), or `None` if no server can be started: `redis-server` is not
    /// installed (for the example, which then says how to get one), or no port is free.
    pub(crate) fn try_start() -> Option<Self> {
        Self::try_start_with(&[])
    }

    /// [`start`](Self::start) with extra server arguments (`["--requirepass", "secret"]`);
    /// the harness authenticates with `--requirepass`'s password to check the server is ours.
    pub(crate) fn start_with(args: &[&str]) -> Self {
        Self::try_start_with(args)
            .unwrap_or_else(|| panic!("no free loopback port for redis-server after 50 tries"))
    }

    fn try_start_with(args: &[&str]) -> Option<Self> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let binary = binary();
        let installed = Command::new(&binary)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !installed {
            return None;
        }
        for _ in 0..50 {
            let port = next_port();
            if TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue; // taken by something else
            }
            if let Some(server) = Self::try_on(port, &args) {
                return Some(server);
            }
        }
        None
    }

    /// A server on `port` again (after [`Server::stop`]: a restart without persistence).
    pub(crate) fn on(port: u16) -> Self {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(server) = Self::try_on(port, &[]) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server cannot take port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts a server on `port`; `None` if it exited or another process answers there.
    fn try_on(port: u16, args: &[String]) -> Option<Self> {
        let binary = binary();
        let password = args
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|at| args.get(at + 1))
            .cloned();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start `{binary}` ({e}): run `bash .ci/test`, which installs it")
            });
        let mut server = Self {
            child,
            port,
            args: args.to_vec(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(_)) = server.child.try_wait() {
                return None; // it exited: the port was taken
            }
            if let Some(pid) = answering_pid(port, password.as_deref()) {
                // Ours, or someone else's server on that port (then ours will exit).
                return (pid == server.child.id()).then_some(server);
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills the server now (the test goes on without it).
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A client of this server.
    pub(crate) fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `redis-server` to run: `LAZYBREAKER_REDIS_SERVER` (which `bash .ci/test` sets), or
/// the one on the `PATH`.
fn binary() -> String {
    std::env::var("LAZYBREAKER_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// Runs `f` on a current-thread tokio runtime, bounded to 30 s.
pub(crate) fn run<F: std::future::Future>(f: F) -> F::Output {
    lazybreaker_test_support::run_current_thread(Duration::from_secs(30), f)
}

/// A store on `client`'s server for reading what the tests wrote (1 s timeout, keys kept
/// 60 s).
pub(crate) async fn store(client: &redis::Client) -> lazybreaker_fleet::redis::RedisStore {
    lazybreaker_fleet::redis::RedisStore::connect(
        client,
        Duration::from_secs(1),
        Duration::from_secs(60),
    )
    .await
    .expect("the server answers")
}

/// The keys matching `pattern` on `client`'s server, sorted.
pub(crate) async fn keys(client: &redis::Client, pattern: &str) -> Vec<String> {
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut con)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// The pid of the Redis server answering on `port` (`INFO server`), if one answers.
fn answering_pid(port: u16, password: Option<&str>) -> Option<u32> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    if let Some(password) = password {
        stream
            .write_all(format!("AUTH {password}\r\n").as_bytes())
            .ok()?;
    }
    stream.write_all(b"INFO server\r\n").ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !contains(&reply, b"process_id:") || !line_ends_after(&reply, b"process_id:") {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 || reply.len() > 64 * 1024 {
            return None;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&reply);
    let line = text.lines().find(|l| l.starts_with("process_id:"))?;
    line["process_id:".len()..].trim().parse().ok()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn line_ends_after(hay: &[u8], needle: &[u8]) -> bool {
    let at = hay.windows(needle.len()).position(|w| w == needle);
    at.is_some_and(|at| hay[at..].contains(&b'\n'))
}
