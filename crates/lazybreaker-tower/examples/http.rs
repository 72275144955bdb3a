//! A breaker in a real HTTP client stack, against a real upstream on 127.0.0.1 that fails,
//! hangs and recovers.
//!
//! Run it with `cargo run -p lazybreaker-tower --example http`. It stops by itself after
//! about 3 seconds and prints a timeline: one row per call, and every state change.
//!
//! The stack is the one the `tower` module recommends, the deadline *inside* the breaker:
//!
//! ```text
//! ServiceBuilder::new()
//!     .layer(BreakerLayer::new(breaker).classify(StatusRules::new()))  // counts 5xx, errors
//!     .timeout(DEADLINE)                                                // a hang is an error
//!     .service(hyper_util Client)
//! ```
//!
//! What you see: while the upstream answers 500 the breaker trips after three failures;
//! while it is open, calls fail in microseconds (what a gateway would answer: 503 with
//! `Retry-After`) and the upstream receives nothing; every `OPEN_FOR` one probe goes
//! through. While the upstream hangs, each probe ends at the deadline, counted as a failure,
//! and reopens the breaker: a hung dependency trips the breaker like a failing one. Once the
//! upstream recovers, the next probe closes it.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::http::{rejected_response, StatusRules};
use lazybreaker::human;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, MonotonicClock};
use lazybreaker_tower::BreakerLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

/// How long a call may take before the timeout inside the breaker ends it.
const DEADLINE: Duration = Duration::from_millis(150);
/// How long the breaker stays open before it lets a probe through.
const OPEN_FOR: Duration = Duration::from_millis(400);
/// One call every...
const CALL_EVERY: Duration = Duration::from_millis(100);
/// The upstream's script: (from, mode).
const SCRIPT: [(Duration, u8); 4] = [
    (Duration::ZERO, OK),
    (Duration::from_millis(300), FAIL),
    (Duration::from_millis(1_000), HANG),
    (Duration::from_millis(2_000), OK),
];
/// The example stops after this long.
const RUN_FOR: Duration = Duration::from_millis(3_000);

const OK: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;

fn mode_name(mode: u8) -> &'static str {
    match mode {
        OK => "healthy",
        FAIL => "failing (500)",
        _ => "hung",
    }
}

#[derive(Clone, Default)]
struct Upstream {
    mode: Arc<AtomicU8>,
    hits: Arc<AtomicUsize>,
}

async fn handler(axum::extract::State(upstream): axum::extract::State<Upstream>) -> StatusCode {
    upstream.hits.fetch_add(1, Ordering::SeqCst);
    match upstream.mode.load(Ordering::SeqCst) {
        OK => StatusCode::OK,
        FAIL => StatusCode::INTERNAL_SERVER_ERROR,
        _ => std::future::pending().await, // accepts the connection, never answers
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run());
    // Dropping the runtime stops the server and its hung handlers.
}

async fn run() {
    let upstream = Upstream::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let addr = listener.local_addr().expect("its address");
    let app = axum::Router::new()
        .route("/", axum::routing::get(handler))
        .with_state(upstream.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let start = Instant::now();
    let breaker = Arc::new(
        Breaker::builder()
            .name("upstream")
            .policy(ConsecutiveFailures::new(3).expect("a valid threshold"))
            .timeout(OPEN_FOR)
            .clock(MonotonicClock::new())
            .on_state_change(move |name, from, to| {
                println!(
                    "{:>8}           {name}: {from:?} -> {to:?}",
                    human::span(start.elapsed())
                );
            })
            .build(),
    );
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut service = ServiceBuilder::new()
        .layer(BreakerLayer::new(Arc::clone(&breaker)).classify(StatusRules::new()))
        .timeout(DEADLINE)
        .service(client);
    let uri: axum::http::Uri = format!("http://{addr}/").parse().expect("a URI");

    println!("    time  upstream       call");
    let mut script = SCRIPT.iter().peekable();
    let mut ticker = tokio::time::interval(CALL_EVERY);
    while start.elapsed() < RUN_FOR {
        ticker.tick().await;
        while let Some((_, mode)) = script.next_if(|(from, _)| start.elapsed() >= *from) {
            upstream.mode.store(*mode, Ordering::SeqCst);
            println!(
                "{:>8}           upstream is now {}",
                human::span(start.elapsed()),
                mode_name(*mode)
            );
        }
        let sent = Instant::now();
        let request = Request::get(uri.clone())
            .body(Empty::new())
            .expect("a request");
        let result = match service.ready().await {
            Ok(ready) => ready.call(request).await,
            Err(e) => Err(e),
        };
        let took = human::span(sent.elapsed());
        let what = match result {
            Ok(response) => format!("{} in {took}", response.status()),
            Err(Error::Rejected(rejected)) => {
                let answer = rejected_response::<()>(&rejected);
                let retry = answer
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                format!(
                    "rejected in {took}: {rejected} (a gateway answers {}, Retry-After: {retry})",
                    answer.status().as_u16()
                )
            }
            Err(Error::Inner(e)) => format!("failed in {took}: {e}"),
        };
        println!(
            "{:>8}  {:<13}  {what}",
            human::span(start.elapsed()),
            mode_name(upstream.mode.load(Ordering::SeqCst))
        );
    }

    let totals = breaker.totals();
    println!();
    println!(
        "upstream received {} requests; the breaker admitted {} calls ({} succeeded, {} failed)",
        upstream.hits.load(Ordering::SeqCst),
        totals.admitted,
        totals.successes,
        totals.failures,
    );
}
