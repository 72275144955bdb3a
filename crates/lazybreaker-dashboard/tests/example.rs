//! The `dashboard` example as a new user runs it: it serves the page until Ctrl-C, says how
//! to stop it, and takes `--for <duration>` for a bounded run (as CI runs it).
//!
//! The example's binary is the one `cargo test -p lazybreaker-dashboard` (or
//! `cargo build -p lazybreaker-dashboard --examples`) built beside this test's.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The longest the example may take to print a line or to exit when it should.
const BOUND: Duration = Duration::from_secs(60);

/// The example's binary, built beside this test's (`target/<profile>/examples/`).
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile
        .join("examples")
        .join(format!("dashboard{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built: `cargo test -p lazybreaker-dashboard` builds it",
        path.display()
    );
    path
}

/// The example, started with `args`, its output read line by line on a thread of its own.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(example())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next line of its output (bounded).
    fn line(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(BOUND)
            .unwrap_or_else(|e| panic!("no line from the example ({e}) after {:?}", self.seen));
        self.seen.push(line.clone());
        line
    }

    /// Waits for it to exit (bounded: killed after [`BOUND`]), with the rest of its output.
    fn exit(mut self) -> (ExitStatus, String) {
        let pid = self.child.id();
        let mut child = self.child;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let status = child.wait();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            let _ = tx.send((status, stderr));
        });
        let Ok((status, stderr)) = rx.recv_timeout(BOUND) else {
            signal("-KILL", pid);
            panic!("the example did not exit in {BOUND:?}: {:?}", self.seen);
        };
        self.seen.extend(self.lines.try_iter());
        let mut out = self.seen.join("\n");
        out.push('\n');
        out.push_str(&stderr);
        (status.unwrap(), out)
    }
}

/// Sends `signal` (`-INT`, `-KILL`) to the process `pid`.
fn signal(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}: {status}");
}

/// The status line of a GET of `url` (`http://127.0.0.1:port/`), over a fresh connection.
fn status_of(url: &str) -> String {
    let addr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("not the page's address: {url}"));
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply.lines().next().unwrap_or_default().to_owned()
}

/// The address in the example's first line: `dashboard on http://…/ (controls token: …)`.
fn address(first: &str) -> String {
    first
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned()
}

/// Run plainly, it says how to stop it, serves the page, and stops on Ctrl-C (SIGINT),
/// cleanly: exit status 0, its summary printed. (It used to stop by itself 4 s after
/// printing the address, and a SIGINT killed it.)
#[test]
fn it_serves_until_ctrl_c_and_says_so() {
    let mut run = Running::start(&[]);
    let url = address(&run.line());
    assert!(run.line().contains("Ctrl-C"), "{:?}", run.seen);
    assert_eq!(status_of(&url), "HTTP/1.1 200 OK");
    // Served again: a user's browser comes back.
    assert_eq!(status_of(&url), "HTTP/1.1 200 OK");
    signal("-INT", run.child.id());
    let (status, out) = run.exit();
    assert!(status.success(), "{status}: {out}");
    assert!(out.contains("stopped by Ctrl-C"), "{out}");
    assert!(out.contains("payments: "), "{out}");
}

/// `--for <duration>` serves the page that long, then exits by itself with status 0; so
/// does `--for=<duration>`.
#[test]
fn for_a_duration_it_serves_then_stops_by_itself() {
    for args in [&["--for", "300ms"][..], &["--for=0s"]] {
        let mut run = Running::start(args);
        let url = address(&run.line());
        assert!(run.line().contains("stops by itself"), "{:?}", run.seen);
        let (status, out) = run.exit();
        assert!(status.success(), "{args:?}: {status}: {out}");
        assert!(out.contains("payments: "), "{out}");
        assert!(
            TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).is_err(),
            "{args:?}: still served after it exited"
        );
    }
}

/// An argument it does not know, or a duration it cannot read, is refused with its usage
/// (status 2), before anything is served.
#[test]
fn a_wrong_argument_is_refused_with_the_usage() {
    for (args, says) in [
        (&["--for", "soon"][..], "--for \"soon\""),
        (&["--for"], "--for needs a value"),
        (&["--port", "80"], "unknown argument \"--port\""),
    ] {
        let (status, out) = Running::start(args).exit();
        assert_eq!(status.code(), Some(2), "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
        assert!(out.contains("usage: dashboard [--for <duration>]"), "{out}");
        assert!(!out.contains("http://"), "{args:?}: {out}");
    }
}
