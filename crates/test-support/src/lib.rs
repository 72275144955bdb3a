//! What the workspace's tests share: [`Upstream`], a real axum server on a free
//! 127.0.0.1 port whose answer a test switches ([`OK`], [`FAIL`], [`NOT_FOUND`], [`BUSY`],
//! [`HANG`]) and which counts the requests that reach it, and [`refused`], an address
//! nothing listens on, written once for the tower layer's, the recipes' and the reqwest
//! middleware's tests; [`run_bounded`] and [`run_current_thread`], a future on a tokio
//! runtime bounded in time ([`run`]: current-thread, with the usual bound), so that a hung
//! test fails instead of hanging CI; [`checks`], what the health-check tests share (the
//! core's tests include that file by path). Not published.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

pub mod checks;

/// How the upstream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode(u8);

/// 200, with the header `x-upstream: intact` and [`body`].
pub const OK: Mode = Mode(0);
/// 500.
pub const FAIL: Mode = Mode(1);
/// 404: the caller's mistake, not the upstream's failure.
pub const NOT_FOUND: Mode = Mode(2);
/// 503 with `Retry-After: 120` ([`BUSY_RETRY_AFTER_SECS`]): alive, shedding load.
pub const BUSY: Mode = Mode(3);
/// No answer at all: TCP accepts, the process never responds.
pub const HANG: Mode = Mode(4);

/// The `Retry-After` of a [`BUSY`] answer, in seconds.
pub const BUSY_RETRY_AFTER_SECS: u64 = 120;

/// The body of an [`OK`] answer: long enough to span several reads, every byte placed.
pub fn body() -> Vec<u8> {
    (0..64 * 1024u32).map(|i| (i % 251) as u8).collect()
}

/// An upstream's switch and the requests it received. Clones share both.
#[derive(Debug, Clone, Default)]
pub struct Upstream {
    mode: Arc<AtomicU8>,
    hits: Arc<AtomicUsize>,
}

impl Upstream {
    /// Answers as `mode` from now on.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode.0, Ordering::SeqCst);
    }

    /// The requests that reached it so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Serves it on a free loopback port, every path alike, until the runtime is dropped.
    pub async fn serve(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/", axum::routing::get(answer))
            .route("/{*path}", axum::routing::get(answer))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }
}

async fn answer(State(upstream): State<Upstream>) -> Response {
    upstream.hits.fetch_add(1, Ordering::SeqCst);
    match Mode(upstream.mode.load(Ordering::SeqCst)) {
        OK => ([("x-upstream", "intact")], body()).into_response(),
        FAIL => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        NOT_FOUND => StatusCode::NOT_FOUND.into_response(),
        BUSY => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", BUSY_RETRY_AFTER_SECS.to_string())],
        )
            .into_response(),
        _ => std::future::pending().await,
    }
}

/// A loopback address nothing listens on (a port bound and released): connecting is
/// refused.
pub fn refused() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Runs `f` on a two-thread tokio runtime (a client's connection task runs while the test
/// awaits what it holds up), bounded by `bound`: a hung test fails instead of hanging CI.
pub fn run_bounded<F: Future>(bound: Duration, f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    block_on_bounded(runtime, bound, f)
}

/// Runs `f` on a current-thread tokio runtime (its tasks run only while the test awaits,
/// in the order they yield: the tests that stage an interleaving by hand), bounded by
/// `bound`.
pub fn run_current_thread<F: Future>(bound: Duration, f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    block_on_bounded(runtime, bound, f)
}

/// How long [`run`] lets a test's future take: a hung test fails after 10 s of real time.
pub const BOUND: Duration = Duration::from_secs(10);

/// [`run_current_thread`] with the usual [`BOUND`], for the async tests that need no server.
pub fn run<F: Future>(f: F) -> F::Output {
    run_current_thread(BOUND, f)
}

fn block_on_bounded<F: Future>(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    bound: Duration,
    f: F,
) -> F::Output {
    runtime
        .expect("a tokio runtime")
        .block_on(async { tokio::time::timeout(bound, f).await.expect("bounded") })
}
