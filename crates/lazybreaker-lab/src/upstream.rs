//! One upstream replica: a real process (this binary, `upstream` subcommand) serving
//! `GET /work` on 127.0.0.1, whose behaviour the lab switches at run time with
//! `POST /_lab/mode?set=<mode>` (`&capacity=<per second>` for the storm). `GET /health` is
//! what health checks ask; `GET /_lab/count` says how many `/work` requests it received, and
//! `GET /_lab/attempts` how many per 100 ms of the calls' due times (`/work?at=<ms>`: the
//! lab's count of attempts at the replicas, whoever sent them). The faults that are not a
//! behaviour (the process gone, an accept queue that never drains) are made by the lab to
//! the process itself: see [`crate::replicas`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

/// What `/work` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answers 200 after a latency drawn around 5 ms (2 ms plus an exponential of mean 3 ms,
    /// at most 40 ms).
    Healthy,
    /// Answers 500 at once.
    Errors,
    /// Accepts, reads the request, never answers.
    Hang,
    /// Answers 200 twenty times slower than healthy.
    Slow,
    /// Healthy, but 0.5 % of calls answer 500, never two in a row.
    Gray,
    /// Answers 503 with `Retry-After: 1` for a share of calls that rises with the load it
    /// receives (none below 40 requests/s, 90 % from 140/s), else healthy.
    Overloaded,
    /// Answers 503 (no `Retry-After`) to a share of calls that rises with the load it
    /// receives beyond its capacity, `(rate - capacity) / rate`, else healthy: it serves its
    /// capacity and sheds the rest, so every extra attempt raises everyone's odds of a 503.
    Storm,
    /// Just restarted and cold (caches empty, code not warmed up): healthy latencies
    /// multiplied by [`COLD_FACTOR`] at first, the factor easing linearly to 1 over
    /// [`COLD_WARMUP`] from when the mode was set (or the process started in it); `/health`
    /// answers at once (a readiness check passes: the process is up).
    Cold,
    /// Flapping: answers 500 to everything (its `/health` too) for [`FLAP_PERIOD`], then is
    /// healthy for as long, and so on, from when the mode was set.
    Flapping,
    /// Queueing: [`WORKERS`] workers behind a FIFO queue without a bound, each call served
    /// in the healthy latency scaled so that the workers serve `capacity` calls a second
    /// (`/_lab/mode?set=queueing&capacity=N`): a call's latency is its wait in the queue
    /// plus its service, so it grows with the calls the replica holds, and once it is sent
    /// more than it serves the queue builds until the waits reach the client's deadline. A
    /// call whose client gives up leaves the queue (its connection closed, the server drops
    /// it). `/health` answers at once (the process is up, a readiness check passes).
    Queueing,
}

/// A queueing replica's workers ([`Mode::Queueing`]): the calls it serves at once.
pub const WORKERS: usize = 1;

/// The mean of the healthy latency ([`Mode::Healthy`]: 2 ms plus an exponential of mean
/// 3 ms), which a queueing replica's service time scales.
const HEALTHY_MEAN: Duration = Duration::from_millis(5);

/// A cold replica's latency factor when it returns.
pub const COLD_FACTOR: f64 = 15.0;
/// How long a cold replica takes to warm up to its healthy latency.
pub const COLD_WARMUP: Duration = Duration::from_secs(3);
/// Each half of a flapping replica's cycle: this long failing, this long healthy.
pub const FLAP_PERIOD: Duration = Duration::from_secs(1);

/// A cold replica's latency factor `since` after it returned: [`COLD_FACTOR`] at first,
/// easing linearly to 1 at [`COLD_WARMUP`], 1 after.
pub fn cold_factor(since: Duration) -> f64 {
    let left = 1.0 - (since.as_secs_f64() / COLD_WARMUP.as_secs_f64()).min(1.0);
    1.0 + (COLD_FACTOR - 1.0) * left
}

/// How much a queueing replica's service time scales the healthy latency so that its
/// [`WORKERS`] serve `capacity` calls a second: the mean service `WORKERS / capacity` over
/// the healthy mean (1 for no capacity given).
pub fn service_scale(capacity: u64) -> f64 {
    if capacity == 0 || capacity == u64::MAX {
        return 1.0;
    }
    WORKERS as f64 / capacity as f64 / HEALTHY_MEAN.as_secs_f64()
}

/// Whether a flapping replica fails `since` the mode was set: the first [`FLAP_PERIOD`]
/// fails, the next does not, and so on.
pub fn flap_fails(since: Duration) -> bool {
    (since.as_nanos() / FLAP_PERIOD.as_nanos()).is_multiple_of(2)
}

impl Mode {
    /// Its name on the control endpoint.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Errors => "errors",
            Self::Hang => "hang",
            Self::Slow => "slow",
            Self::Gray => "gray",
            Self::Overloaded => "overloaded",
            Self::Storm => "storm",
            Self::Cold => "cold",
            Self::Flapping => "flapping",
            Self::Queueing => "queueing",
        }
    }

    fn from_u8(n: u8) -> Self {
        [
            Self::Healthy,
            Self::Errors,
            Self::Hang,
            Self::Slow,
            Self::Gray,
            Self::Overloaded,
            Self::Storm,
            Self::Cold,
            Self::Flapping,
            Self::Queueing,
        ]
        .get(usize::from(n))
        .copied()
        .unwrap_or(Self::Healthy)
    }

    /// The mode named `name` on the control endpoint.
    pub fn parse(name: &str) -> Option<Self> {
        (0..10).map(Self::from_u8).find(|m| m.as_str() == name)
    }
}

/// The replica's state, shared by its handlers.
#[derive(Debug)]
struct Replica {
    node: usize,
    mode: AtomicU8,
    /// When the mode was last set (or the process started): a cold replica's return, a
    /// flapping one's first failing second.
    since: std::sync::Mutex<Instant>,
    received: AtomicU64,
    /// Gray: whether the last call failed (never two in a row).
    failed_last: AtomicBool,
    /// Overloaded: arrivals in the current 100 ms window and the last one.
    window: arrivals::Window,
    /// Storm: the requests per second it serves before it sheds; queueing: the requests per
    /// second its workers serve.
    capacity: AtomicU64,
    /// Queueing: the workers, a permit each; tokio's semaphore queues its waiters first in,
    /// first out, without a bound.
    workers: tokio::sync::Semaphore,
    /// `/work` requests received, per 100 ms of the calls' due times.
    attempts: std::sync::Mutex<Vec<u64>>,
    rng: std::sync::Mutex<fastrand::Rng>,
}

mod arrivals {
    //! Arrivals per 100 ms, for the overloaded mode's rising share.
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    #[derive(Debug)]
    pub(super) struct Window {
        start: Instant,
        /// (window index << 32) | count in it.
        current: AtomicU64,
        last: AtomicU64,
    }

    impl Window {
        pub(super) fn new() -> Self {
            Self {
                start: Instant::now(),
                current: AtomicU64::new(0),
                last: AtomicU64::new(0),
            }
        }

        /// Counts an arrival; the arrival rate per second of the last full window.
        pub(super) fn arrive(&self) -> f64 {
            let index = (self.start.elapsed().as_millis() / 100) as u64 & 0xffff_ffff;
            let mut seen = self.current.load(Ordering::Relaxed);
            loop {
                let next = if seen >> 32 == index {
                    seen + 1
                } else {
                    // A new window: the one that ended becomes the last (if it was the one
                    // just before), the count starts again.
                    let last = if (seen >> 32) + 1 == index {
                        seen & 0xffff_ffff
                    } else {
                        0
                    };
                    self.last.store(last, Ordering::Relaxed);
                    (index << 32) | 1
                };
                match self.current.compare_exchange_weak(
                    seen,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => seen = actual,
                }
            }
            self.last.load(Ordering::Relaxed) as f64 * 10.0
        }
    }
}

impl Replica {
    fn mode(&self) -> Mode {
        Mode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// How long ago the mode was set.
    fn since(&self) -> Duration {
        self.since
            .lock()
            .map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// A healthy latency: 2 ms plus an exponential of mean 3 ms, at most 40 ms.
    fn latency(&self) -> Duration {
        let u = self.rng.lock().map_or(0.5, |mut r| r.f64());
        let extra = -3.0 * (1.0 - u).ln();
        Duration::from_secs_f64(((2.0 + extra).min(40.0)) / 1000.0)
    }

    fn chance(&self) -> f64 {
        self.rng.lock().map_or(0.5, |mut r| r.f64())
    }

    fn tagged(&self, status: StatusCode) -> Response {
        let mut response = (status, "lab").into_response();
        if let Ok(node) = HeaderValue::from_str(&self.node.to_string()) {
            response.headers_mut().insert("x-node", node);
        }
        response
    }
}

/// A `/work` request's query: when the call it is an attempt of was due, in ms from the
/// run's start.
#[derive(Debug, serde::Deserialize)]
struct Due {
    at: Option<u64>,
}

/// The bins of a replica's attempt counts (`GET /_lab/attempts`): 100 ms of due times each.
pub const ATTEMPT_BIN: Duration = Duration::from_millis(100);

async fn work(State(replica): State<Arc<Replica>>, Query(due): Query<Due>) -> Response {
    replica.received.fetch_add(1, Ordering::Relaxed);
    // Bounded: an hour of bins at most.
    let bin = due
        .at
        .map(|at| (at / ATTEMPT_BIN.as_millis() as u64) as usize);
    if let (Some(bin @ 0..36_000), Ok(mut bins)) = (bin, replica.attempts.lock()) {
        if bins.len() <= bin {
            bins.resize(bin + 1, 0);
        }
        bins[bin] += 1;
    }
    let rate = replica.window.arrive();
    match replica.mode() {
        Mode::Healthy => {
            tokio::time::sleep(replica.latency()).await;
            replica.tagged(StatusCode::OK)
        }
        Mode::Errors => replica.tagged(StatusCode::INTERNAL_SERVER_ERROR),
        Mode::Hang => std::future::pending().await,
        Mode::Slow => {
            tokio::time::sleep(replica.latency() * 20).await;
            replica.tagged(StatusCode::OK)
        }
        Mode::Cold => {
            let factor = cold_factor(replica.since());
            tokio::time::sleep(replica.latency().mul_f64(factor)).await;
            replica.tagged(StatusCode::OK)
        }
        Mode::Flapping => {
            if flap_fails(replica.since()) {
                replica.tagged(StatusCode::INTERNAL_SERVER_ERROR)
            } else {
                tokio::time::sleep(replica.latency()).await;
                replica.tagged(StatusCode::OK)
            }
        }
        Mode::Gray => {
            tokio::time::sleep(replica.latency()).await;
            let fail = replica.chance() < 0.005 && !replica.failed_last.load(Ordering::Relaxed);
            replica.failed_last.store(fail, Ordering::Relaxed);
            replica.tagged(if fail {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::OK
            })
        }
        Mode::Overloaded => {
            let share = ((rate - 40.0) / 100.0).clamp(0.0, 0.9);
            if replica.chance() < share {
                let mut response = replica.tagged(StatusCode::SERVICE_UNAVAILABLE);
                response
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from_static("1"));
                response
            } else {
                tokio::time::sleep(replica.latency()).await;
                replica.tagged(StatusCode::OK)
            }
        }
        Mode::Queueing => {
            // Waits its turn (first in, first out); dropped with the connection when the
            // client gives up, its place in the queue given back.
            let Ok(_worker) = replica.workers.acquire().await else {
                return replica.tagged(StatusCode::SERVICE_UNAVAILABLE);
            };
            let capacity = replica.capacity.load(Ordering::Relaxed);
            tokio::time::sleep(replica.latency().mul_f64(service_scale(capacity))).await;
            replica.tagged(StatusCode::OK)
        }
        Mode::Storm => {
            let capacity = replica.capacity.load(Ordering::Relaxed) as f64;
            let share = if rate > 0.0 {
                ((rate - capacity) / rate).clamp(0.0, 1.0)
            } else {
                0.0
            };
            if replica.chance() < share {
                replica.tagged(StatusCode::SERVICE_UNAVAILABLE)
            } else {
                tokio::time::sleep(replica.latency()).await;
                replica.tagged(StatusCode::OK)
            }
        }
    }
}

async fn health(State(replica): State<Arc<Replica>>) -> Response {
    match replica.mode() {
        Mode::Errors => replica.tagged(StatusCode::INTERNAL_SERVER_ERROR),
        Mode::Hang => std::future::pending().await,
        Mode::Slow => {
            tokio::time::sleep(replica.latency() * 20).await;
            replica.tagged(StatusCode::OK)
        }
        Mode::Flapping if flap_fails(replica.since()) => {
            replica.tagged(StatusCode::INTERNAL_SERVER_ERROR)
        }
        _ => replica.tagged(StatusCode::OK),
    }
}

#[derive(Debug, serde::Deserialize)]
struct Set {
    set: String,
    capacity: Option<u64>,
}

async fn set_mode(State(replica): State<Arc<Replica>>, Query(q): Query<Set>) -> StatusCode {
    match Mode::parse(&q.set) {
        Some(mode) => {
            if let Some(capacity) = q.capacity {
                replica.capacity.store(capacity, Ordering::Relaxed);
            }
            if let Ok(mut since) = replica.since.lock() {
                *since = Instant::now();
            }
            replica.mode.store(mode as u8, Ordering::Relaxed);
            StatusCode::OK
        }
        None => StatusCode::BAD_REQUEST,
    }
}

async fn count(State(replica): State<Arc<Replica>>) -> String {
    replica.received.load(Ordering::Relaxed).to_string()
}

/// The attempts per bin of due times, comma-separated.
async fn attempts(State(replica): State<Arc<Replica>>) -> String {
    let bins = replica
        .attempts
        .lock()
        .map(|b| b.clone())
        .unwrap_or_default();
    bins.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Serves replica `node` on `port` (127.0.0.1) in `mode` (from its start: a cold replica's
/// return) until the process is killed.
pub fn serve(node: usize, port: u16, seed: u64, mode: Mode) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let replica = Arc::new(Replica {
            node,
            mode: AtomicU8::new(mode as u8),
            since: std::sync::Mutex::new(Instant::now()),
            received: AtomicU64::new(0),
            failed_last: AtomicBool::new(false),
            window: arrivals::Window::new(),
            capacity: AtomicU64::new(u64::MAX),
            workers: tokio::sync::Semaphore::new(WORKERS),
            attempts: std::sync::Mutex::new(Vec::new()),
            rng: std::sync::Mutex::new(fastrand::Rng::with_seed(seed)),
        });
        let router = Router::new()
            .route("/work", get(work))
            .route("/health", get(health))
            .route("/_lab/mode", post(set_mode))
            .route("/_lab/count", get(count))
            .route("/_lab/attempts", get(attempts))
            .with_state(replica);
        let listener = listen(port, 1024)?;
        axum::serve(listener, router).await
    })
}

/// A listener on 127.0.0.1:`port` with `backlog`, the address reusable at once (a replica
/// restarted on the port of the one just killed).
pub fn listen(port: u16, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(backlog)
}

/// Holds 127.0.0.1:`port` with an accept queue of one that is never drained: the kernel
/// completes a handshake or two, then drops the rest, and a client's connect times out.
/// Prints `listening` on its standard output once the port is held.
pub fn blackhole(port: u16) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let _listener = listen(port, 1)?;
        // Tell the lab the port is held (a connect would not: the queue may be full already).
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening")?;
            out.flush()?;
        }
        let started = Instant::now();
        // Never accepts; lives until killed (bounded anyway: an hour).
        while started.elapsed() < Duration::from_secs(3600) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cold_replica_warms_up_linearly_and_a_flapping_one_alternates() {
        assert!((cold_factor(Duration::ZERO) - COLD_FACTOR).abs() < 1e-9);
        let half = cold_factor(COLD_WARMUP / 2);
        assert!((half - (1.0 + COLD_FACTOR) / 2.0).abs() < 1e-9, "{half}");
        assert!((cold_factor(COLD_WARMUP) - 1.0).abs() < 1e-9);
        assert!((cold_factor(COLD_WARMUP * 10) - 1.0).abs() < 1e-9);
        assert!(flap_fails(Duration::ZERO));
        assert!(flap_fails(FLAP_PERIOD / 2));
        assert!(!flap_fails(FLAP_PERIOD));
        assert!(!flap_fails(FLAP_PERIOD * 3 / 2));
        assert!(flap_fails(FLAP_PERIOD * 2));
        for mode in (0..10).map(Mode::from_u8) {
            assert_eq!(Mode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(Mode::parse("no such mode"), None);
        // One worker serving 90 calls a second: 11.1 ms each, 20/9 of the healthy mean.
        assert!((service_scale(90) - 20.0 / 9.0).abs() < 1e-9);
        assert!((service_scale(u64::MAX) - 1.0).abs() < 1e-9);
    }
}
