//! A node that crashes, comes back broken, then healthy, behind a reqwest client with a
//! breaker per host that revives only through a health check.
//!
//! - The node crashes: its port refuses connections, and the host's breaker opens at once.
//! - It comes back broken: it accepts connections, but its health path answers 500. The
//!   first request after the open period runs the check, which fails: that request is
//!   rejected without being sent, and the breaker opens again.
//! - It comes back healthy: the check passes, and that request is the first probe.
//!
//! The example prints what reached the node in each phase: no user request while it was
//! broken. No timer runs: each check is run by the request that finds it due.
//!
//! Run with `cargo run -p lazybreaker-reqwest --example health_check`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use lazybreaker::{Breaker, Registry};
use lazybreaker_reqwest::{path_check, rejection, BreakerMiddleware};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// How long the breaker stays open after a crash, or after a failed check.
const OPEN_FOR: Duration = Duration::from_millis(300);
/// The check's own deadline: shorter than the breaker's `check_timeout` (500 ms).
const CHECK_DEADLINE: Duration = Duration::from_millis(200);

/// The node's switch and what reached it.
#[derive(Default)]
struct Node {
    healthy: AtomicBool,
    user_requests: AtomicUsize,
    health_checks: AtomicUsize,
}

/// Serves the node on `addr` until the returned sender is used (or dropped): a crash.
async fn start(addr: SocketAddr, node: &Arc<Node>) -> (oneshot::Sender<()>, SocketAddr) {
    let listener = TcpListener::bind(addr).await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("a local address");
    let status = |node: &Node| match node.healthy.load(Ordering::SeqCst) {
        true => StatusCode::OK,
        false => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let (api, health) = (Arc::clone(node), Arc::clone(node));
    let app = axum::Router::new()
        .route(
            "/api",
            axum::routing::get(move || async move {
                api.user_requests.fetch_add(1, Ordering::SeqCst);
                status(&api)
            }),
        )
        .route(
            "/health",
            axum::routing::get(move || async move {
                health.health_checks.fetch_add(1, Ordering::SeqCst);
                status(&health)
            }),
        );
    let (crash, crashed) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let serving = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = crashed.await;
        });
        serving.await.expect("serve");
    });
    (crash, addr)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let node = Arc::new(Node::default());
    node.healthy.store(true, Ordering::SeqCst);
    let (crash, addr) = start("127.0.0.1:0".parse().unwrap(), &node).await;

    // One breaker per host, each revived only through a GET of the host's health path.
    let checker = reqwest::Client::new();
    let registry = Arc::new(Registry::new(move |host: &String| {
        let health = format!("http://{host}/health").parse().expect("a URL");
        Breaker::builder()
            .timeout(OPEN_FOR)
            .health_check(path_check(checker.clone(), health, CHECK_DEADLINE))
    }));
    let client = reqwest_middleware::ClientBuilder::new(
        // No idle connections: each phase starts from a fresh connect.
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("a client"),
    )
    .with(BreakerMiddleware::new(Arc::clone(&registry)))
    .build();
    let api = format!("http://{addr}/api");
    let send = || async {
        match client.get(&api).send().await {
            Ok(response) => format!("{}", response.status()),
            Err(err) => match rejection(&err) {
                Some(rejected) => format!("rejected: {rejected}"),
                None => format!("failed: {err}"),
            },
        }
    };

    println!("healthy node:   {}", send().await);

    crash.send(()).expect("the server runs");
    tokio::time::sleep(Duration::from_millis(50)).await;
    println!("crashed node:   {}", send().await);
    println!("                {}", send().await);

    // Back, but broken: it accepts connections and answers 500 on its health path.
    node.healthy.store(false, Ordering::SeqCst);
    let (_broken, _) = start(addr, &node).await;
    let before = node.user_requests.load(Ordering::SeqCst);
    tokio::time::sleep(OPEN_FOR + Duration::from_millis(50)).await;
    println!("broken node:    {}", send().await);
    let while_broken = node.user_requests.load(Ordering::SeqCst) - before;
    println!(
        "                user requests that reached the broken node: {while_broken} \
         (health checks: {})",
        node.health_checks.load(Ordering::SeqCst)
    );
    assert_eq!(
        while_broken, 0,
        "no user request reaches a node that failed its check"
    );

    // Healthy again: the next check passes, and that request is the first probe.
    node.healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(OPEN_FOR + Duration::from_millis(50)).await;
    println!("revived node:   {}", send().await);
    let breaker = registry.breaker(&addr.to_string());
    let totals = breaker.totals();
    println!(
        "                breaker {:?}, health checks {} ({} failed)",
        breaker.state(),
        totals.health_checks,
        totals.health_checks_failed
    );
    assert_eq!((totals.health_checks, totals.health_checks_failed), (2, 1));
}
