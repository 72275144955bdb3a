//! The status page on 127.0.0.1 while a simulated outage runs: `payments` fails for a while
//! every six seconds, trips, is probed and recovers; `search` is forced open by an operator.
//!
//! ```text
//! cargo run -p lazybreaker-dashboard --example dashboard                  # until Ctrl-C
//! cargo run -p lazybreaker-dashboard --example dashboard -- --for 4s      # 4 s, then exits
//! cargo run -p lazybreaker-dashboard --example dashboard -- --screenshot docs/dashboard.png
//! ```
//!
//! It prints the page's address and serves it until Ctrl-C. `--for <duration>` (`4s`,
//! `1m 30s`) serves it that long and exits, as CI runs it. `--screenshot <file>` runs the
//! outage until `payments` trips, then stops the traffic (the page keeps being served, and
//! `payments` reads half-open once its open period is over) while headless Chromium
//! (`chromium`, or the program `LAZYBREAKER_CHROMIUM` names) loads the page at 1280 × 500
//! and writes it to `<file>` as a PNG; then it exits. That is how `docs/dashboard.png` is
//! made.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::History;
use lazybreaker::Breaker;
use lazybreaker_dashboard::Dashboard;

/// How long the example serves.
enum Run {
    /// Until Ctrl-C.
    UntilStopped,
    /// For this long.
    For(Duration),
    /// Until the screenshot is written to this file.
    Screenshot(PathBuf),
}

const USAGE: &str = "usage: dashboard [--for <duration>] [--screenshot <file.png>]";

/// One tick of the simulation.
const TICK: Duration = Duration::from_millis(100);
/// The ticks of the outage, out of every 60 (six seconds): payments is down in these.
const DOWN: std::ops::Range<u64> = 5..20;
/// The tick the traffic stops at for a screenshot: payments tripped (at tick 7), its
/// open period (8 ticks) not over yet.
const SCREENSHOT_AT: u64 = 12;
/// The longest Chromium may take to write the screenshot.
const SCREENSHOT_BOUND: Duration = Duration::from_secs(90);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let run = match parse(std::env::args().skip(1)) {
        Ok(run) => run,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let history = Arc::new(History::new(256));
    let build = |name: &str| {
        Arc::new(
            Breaker::builder()
                .name(name)
                .ready_to_trip(|c| c.consecutive_failures >= 3)
                .timeout(Duration::from_millis(800))
                .observer(Arc::clone(&history))
                .build(),
        )
    };
    let (payments, search, inventory) = (build("payments"), build("search"), build("inventory"));
    search.force_open();
    let router = Dashboard::new()
        .breaker(Arc::clone(&payments))
        .breaker(Arc::clone(&search))
        .breaker(Arc::clone(&inventory))
        .controls("change-me")
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    println!("dashboard on {url} (controls token: change-me)");
    match &run {
        Run::UntilStopped => println!("press Ctrl-C to stop it"),
        Run::For(d) => println!("stops by itself in {}", humantime::format_duration(*d)),
        Run::Screenshot(file) => println!("taking a screenshot into {}", file.display()),
    }
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let deadline = match run {
        Run::For(d) => Some(tokio::time::Instant::now() + d),
        _ => None,
    };
    let mut chromium: Option<Chromium> = None;
    let mut tick = 0_u64;
    loop {
        if chromium.is_none() {
            // Payments is down for a while every six seconds.
            let down = DOWN.contains(&(tick % 60));
            let _ = payments.execute(|| if down { Err("timeout") } else { Ok(()) });
            let _ = inventory.execute(|| Ok::<_, ()>(()));
        }
        if let Run::Screenshot(file) = &run {
            if tick == SCREENSHOT_AT {
                chromium = Some(Chromium::screenshot(&url, file));
            }
            if chromium.as_mut().is_some_and(Chromium::done) {
                println!("screenshot written to {}", file.display());
                break;
            }
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            break;
        }
        tokio::select! {
            stopped = &mut ctrl_c => {
                stopped.expect("Ctrl-C is listened for");
                println!("stopped by Ctrl-C");
                break;
            }
            () = tokio::time::sleep(TICK) => tick += 1,
        }
    }
    drop(chromium);
    let s = payments.snapshot();
    println!("payments: {} (opened {} times)", s.state, s.times_opened);
    println!("recorded changes: {}", history.recorded());
    if tick >= DOWN.end {
        assert!(s.times_opened >= 1, "payments never tripped in its outage");
    }
}

/// The run the arguments ask for.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Run, String> {
    let mut run = Run::UntilStopped;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        run = match flag.as_str() {
            "--for" => {
                let text = value()?;
                let d = humantime::parse_duration(&text).map_err(|e| {
                    format!("--for {text:?}: {e} (a duration such as \"4s\" or \"1m 30s\")")
                })?;
                Run::For(d)
            }
            "--screenshot" => Run::Screenshot(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        };
    }
    Ok(run)
}

/// Headless Chromium writing a screenshot, in a profile of its own (removed, and Chromium
/// stopped if it still runs, when dropped).
struct Chromium {
    child: Child,
    profile: PathBuf,
    started: std::time::Instant,
}

impl Chromium {
    /// Starts Chromium writing the page at `url` to `file` as a 1280 × 500 PNG.
    fn screenshot(url: &str, file: &std::path::Path) -> Self {
        let program = std::env::var("LAZYBREAKER_CHROMIUM").unwrap_or_else(|_| "chromium".into());
        let profile = std::env::temp_dir().join(format!(
            "lazybreaker-dashboard-example-{}",
            std::process::id()
        ));
        let file = std::path::absolute(file).expect("a path for the screenshot");
        let child = Command::new(&program)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--virtual-time-budget=3000",
                "--window-size=1280,500",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--screenshot={}", file.display()))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {program:?} ({e}): install Debian's chromium"));
        Self {
            child,
            profile,
            started: std::time::Instant::now(),
        }
    }

    /// Whether Chromium wrote the screenshot; panics if it failed or took too long.
    fn done(&mut self) -> bool {
        if let Some(status) = self.child.try_wait().expect("chromium runs") {
            assert!(status.success(), "chromium failed: {status}");
            return true;
        }
        assert!(
            self.started.elapsed() < SCREENSHOT_BOUND,
            "chromium did not finish in {SCREENSHOT_BOUND:?}"
        );
        false
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
