//! A PostgreSQL server of one test's own: Debian's `postgres` binaries (`bash .ci/test`
//! installs the `postgresql` package if missing and names its `bin` directory in
//! `LAZYBREAKER_POSTGRES_BIN`), a data directory copied from one `initdb` per test binary
//! into a temporary directory, run as an unprivileged user (`nobody` when the tests run as
//! root: PostgreSQL refuses root), listening on 127.0.0.1 only on a free port of its own,
//! durability off, stopped (and its directory removed) on drop whatever happens.
//!
//! Connections from 127.0.0.1 need the password (`password`: checked by the server against
//! its stored verifier, sent in clear over loopback, so that a client built without
//! optimizations spends no time on SCRAM's key stretching): user `postgres`,
//! password [`PASSWORD`], database `postgres`.
// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lazybreaker_fleet::postgres::PostgresStore;

/// The password of user `postgres`.
pub(crate) const PASSWORD: &str = "fleet-secret";

/// A running PostgreSQL server, stopped on drop.
pub(crate) struct PgServer {
    child: Option<Child>,
    pub(crate) port: u16,
    /// This server's directory (its data directory inside), removed on drop.
    dir: PathBuf,
}

/// The uid and gid to run the server as: `nobody`'s when running as root, else our own.
fn unprivileged() -> Option<(u32, u32)> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    root.then_some((65_534, 65_534))
}

/// The directory of `initdb` and `postgres`: `LAZYBREAKER_POSTGRES_BIN`, or the newest
/// `/usr/lib/postgresql/*/bin`.
fn bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("LAZYBREAKER_POSTGRES_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.pop().unwrap_or_else(|| {
        panic!("no PostgreSQL server: run `bash .ci/test`, which installs Debian's `postgresql`")
    })
}

/// A command run as the unprivileged user.
fn command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    if let Some((uid, gid)) = unprivileged() {
        cmd.uid(uid).gid(gid);
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

/// A fresh directory of this process's, owned by the unprivileged user.
fn fresh_dir(what: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("lazybreaker-pg-{}-{what}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some((uid, gid)) = unprivileged() {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
    }
    dir
}

/// One `initdb` per test binary: the data directory every server copies.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        remove_stale();
        let dir = fresh_dir("template");
        let pwfile = dir.join("pwfile");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if let Some((uid, gid)) = unprivileged() {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).unwrap();
        }
        let data = dir.join("data");
        let status = command(&bin_dir().join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=password",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--no-sync", "-E", "UTF8", "--locale=C"])
            .status()
            .expect("initdb runs");
        assert!(status.success(), "initdb failed");
        data
    })
}

/// Removes what test processes that are gone left behind (a template lives as long as its
/// process, and a killed process drops nothing).
fn remove_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("lazybreaker-pg-")
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The next port to try: 33000 + 40 ports per process slot (above the Redis harness's).
fn next_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let slot = (std::process::id() % 200) as u16;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Below the kernel's default ephemeral range's top, clear of Redis's 20000..32000.
    33_000 + (slot * 40 + n) % 8_000
}

impl PgServer {
    /// [`start`](Self::start), or `None` when PostgreSQL is not installed (for the example,
    /// which then says how to get it).
    pub(crate) fn try_start() -> Option<Self> {
        let installed = std::env::var_os("LAZYBREAKER_POSTGRES_BIN").is_some()
            || std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
        installed.then(Self::start)
    }

    /// A server on a free port of this test's own, empty but for the default databases.
    pub(crate) fn start() -> Self {
        for _ in 0..50 {
            let port = next_port();
            if TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            let dir = fresh_dir("server");
            copy_dir(template(), &dir.join("data"));
            let mut server = Self {
                child: None,
                port,
                dir,
            };
            if server.launch() {
                return server;
            }
        }
        panic!("no free loopback port for postgres after 50 tries")
    }

    /// Starts the postmaster on this server's port and data directory; `false` if it exited
    /// (the port was taken meanwhile).
    fn launch(&mut self) -> bool {
        let child = command(&bin_dir().join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=40"])
            .process_group(0)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return false;
            }
            // Ready once our own postmaster says so: the status line of its `postmaster.pid`
            // (the port alone might be someone else's, and accepts before recovery ends).
            let pid_file = std::fs::read_to_string(self.dir.join("data").join("postmaster.pid"));
            let ready = pid_file.is_ok_and(|text| {
                let lines: Vec<&str> = text.lines().collect();
                lines.first().map(|l| l.trim())
                    == self.child.as_ref().map(|c| c.id().to_string()).as_deref()
                    && lines.get(7).is_some_and(|l| l.trim() == "ready")
            });
            if ready {
                return true;
            }
            assert!(Instant::now() < deadline, "postgres did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server now, fast (the test goes on without it); its data stays.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT: PostgreSQL's fast shutdown (disconnects the clients, no wait).
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty (a new cluster: the table is gone).
    pub(crate) fn restart_empty(&mut self) {
        self.stop();
        let data = self.dir.join("data");
        let _ = std::fs::remove_dir_all(&data);
        copy_dir(template(), &data);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(
                Instant::now() < deadline,
                "postgres cannot take its port back"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The connection settings of user `postgres`, with `password` and database `dbname`.
    pub(crate) fn config_as(&self, password: &str, dbname: &str) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .password(password)
            .dbname(dbname)
            .connect_timeout(Duration::from_secs(5));
        config
    }

    /// The connection settings of user `postgres`, right password, database `postgres`.
    pub(crate) fn config(&self) -> tokio_postgres::Config {
        self.config_as(PASSWORD, "postgres")
    }

    /// A store on this server: 300 ms a statement (the tests' bound), the pool's default.
    pub(crate) fn store(&self) -> PostgresStore {
        PostgresStore::new(self.config()).with_timeout(Duration::from_millis(300))
    }

    /// A plain client of this server (its connection driven on the current runtime), for
    /// what a test does by hand: edit a row, hold a lock.
    pub(crate) async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = self
            .config()
            .connect(tokio_postgres::NoTls)
            .await
            .expect("the server answers");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies directory `from` into `to` (made), keeping modes and owners (`cp -a`).
fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// Runs `f` on a multi-thread tokio runtime (a plain client's connection task must run
/// while a test awaits a store held up by it), bounded to 60 s.
pub(crate) fn run_pg<F: std::future::Future>(f: F) -> F::Output {
    lazybreaker_test_support::run_bounded(Duration::from_secs(60), f)
}
