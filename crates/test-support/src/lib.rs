//! What the workspace's HTTP tests share: [`Upstream`], a real axum server on a free
//! 127.0.0.1 port whose answer a test switches ([`OK`], [`FAIL`], [`NOT_FOUND`], [`BUSY`],
//! [`HANG`]) and which counts the requests that reach it, and [`refused`], an address
//! nothing listens on. Written once for the tower layer's, the recipes' and the reqwest
//! middleware's tests; [`run_bounded`], the two-thread runtime the loopback tests of the
//! fleet, gRPC and reqwest crates run on. Not published.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

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
pub fn run_bounded<F: std::future::Future>(bound: std::time::Duration, f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(async { tokio::time::timeout(bound, f).await.expect("bounded") })
}
