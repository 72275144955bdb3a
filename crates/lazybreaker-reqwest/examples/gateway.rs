//! An axum gateway in front of two upstreams, calling them with a reqwest client that keeps
//! a breaker per host, against real upstreams on 127.0.0.1: one fails, hangs, asks to back
//! off and recovers; the other stays healthy.
//!
//! Run it with `cargo run -p lazybreaker-reqwest --example gateway`. It stops by
//! itself after about 4 seconds, prints a timeline (one row per round of calls, and every
//! state change) and checks what it showed.
//!
//! The user code is the part between the `gateway` markers below:
//!
//! - **per-host breakers**: `BreakerMiddleware::new(registry)` on the reqwest client keeps
//!   one breaker per `host:port`, so the failing upstream's breaker opens and the healthy
//!   one's stays closed;
//! - **the deadline inside**: each request carries `.timeout(DEADLINE)`, so a hang ends as a
//!   timeout error, which the middleware counts as a failure;
//! - **fallback responses**: a rejected call is answered at once with 503 and `Retry-After`
//!   (`http::rejected_response`), without touching the upstream;
//! - **the upstream's `Retry-After`**: with `StatusRules::new().honor_retry_after()`, a 503
//!   that asks for a second opens the breaker for a second, whatever the policy says.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

// ----- gateway: the user code starts here -----
use lazybreaker::http::{rejected_response, StatusRules};
use lazybreaker::human;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Registry};
use lazybreaker_reqwest::{rejection, BreakerMiddleware};
use reqwest_middleware::ClientWithMiddleware;

/// How long the gateway waits for an upstream.
const DEADLINE: Duration = Duration::from_millis(150);

/// The gateway's state: the client, and where each upstream lives.
#[derive(Clone)]
struct Gateway {
    client: ClientWithMiddleware,
    upstreams: Arc<Vec<String>>,
}

/// The breakers, one per upstream host: three failures in a row open one for 300 ms.
fn breakers() -> Arc<Registry<String>> {
    Arc::new(Registry::new(|_: &String| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(3).expect("a valid threshold"))
            .timeout(Duration::from_millis(300))
            .on_state_change(|host, from, to| println!("       breaker {host}: {from} -> {to}"))
    }))
}

/// The gateway's client: reqwest with a breaker per host that honours `Retry-After`.
fn client(breakers: Arc<Registry<String>>) -> ClientWithMiddleware {
    let middleware = BreakerMiddleware::new(breakers).rules(StatusRules::new().honor_retry_after());
    reqwest_middleware::ClientBuilder::new(reqwest::Client::builder().no_proxy().build().unwrap())
        .with(middleware)
        .build()
}

/// `GET /{upstream}`: the upstream's answer, or the gateway's own when it cannot give one.
async fn proxy(State(gateway): State<Gateway>, Path(index): Path<usize>) -> Response {
    let Some(url) = gateway.upstreams.get(index) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match gateway.client.get(url).timeout(DEADLINE).send().await {
        Ok(response) => {
            let status = response.status();
            let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
            let mut answer = (status, response.bytes().await.unwrap_or_default()).into_response();
            if let Some(value) = retry_after {
                answer.headers_mut().insert(header::RETRY_AFTER, value);
            }
            answer
        }
        Err(err) => match rejection(&err) {
            Some(rejected) => rejected_response(&rejected.rejected()),
            None if err.is_timeout() => StatusCode::GATEWAY_TIMEOUT.into_response(),
            None => StatusCode::BAD_GATEWAY.into_response(),
        },
    }
}

fn gateway(client: ClientWithMiddleware, upstreams: Vec<String>) -> Router {
    let state = Gateway {
        client,
        upstreams: Arc::new(upstreams),
    };
    Router::new()
        .route("/{upstream}", get(proxy))
        .with_state(state)
}
// ----- gateway: the user code ends here -----

/// One round of calls every...
const ROUND_EVERY: Duration = Duration::from_millis(100);
/// The failing upstream's script: (from, mode).
const SCRIPT: [(Duration, u8); 5] = [
    (Duration::ZERO, OK),
    (Duration::from_millis(300), FAIL),
    (Duration::from_millis(1_200), HANG),
    (Duration::from_millis(2_100), BUSY),
    (Duration::from_millis(3_000), OK),
];
/// The example stops after this long.
const RUN_FOR: Duration = Duration::from_millis(4_000);

const OK: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;
const BUSY: u8 = 3;

fn mode_name(mode: u8) -> &'static str {
    match mode {
        OK => "healthy",
        FAIL => "failing (500)",
        HANG => "hung",
        _ => "busy (503, Retry-After: 1)",
    }
}

/// An upstream: its mode, and the requests it received in each mode.
#[derive(Clone, Default)]
struct Upstream {
    mode: Arc<AtomicU8>,
    hits: Arc<[AtomicUsize; 4]>,
}

impl Upstream {
    fn hits(&self, mode: u8) -> usize {
        self.hits[mode as usize].load(Ordering::SeqCst)
    }
}

async fn upstream(State(upstream): State<Upstream>) -> Response {
    let mode = upstream.mode.load(Ordering::SeqCst);
    upstream.hits[mode as usize].fetch_add(1, Ordering::SeqCst);
    match mode {
        OK => "hello".into_response(),
        FAIL => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        HANG => std::future::pending().await,
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
        )
            .into_response(),
    }
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flaky = Upstream::default();
    let steady = Upstream::default();
    let flaky_url = serve(
        Router::new()
            .route("/", get(upstream))
            .with_state(flaky.clone()),
    )
    .await;
    let steady_url = serve(
        Router::new()
            .route("/", get(upstream))
            .with_state(steady.clone()),
    )
    .await;

    let breakers = breakers();
    let gateway_url = serve(gateway(
        client(Arc::clone(&breakers)),
        vec![format!("{flaky_url}/"), format!("{steady_url}/")],
    ))
    .await;
    let outside = reqwest::Client::builder().no_proxy().build().unwrap();

    println!("    t  flaky upstream              gateway /0                 gateway /1");
    let start = Instant::now();
    let (mut steady_failed, mut rounds) = (0, 0);
    let mut mode_was = u8::MAX;
    while start.elapsed() < RUN_FOR {
        let at = start.elapsed();
        let mode = SCRIPT.iter().rev().find(|(from, _)| at >= *from).unwrap().1;
        flaky.mode.store(mode, Ordering::SeqCst);
        let get = |path: &str| outside.get(format!("{gateway_url}{path}")).send();
        let (first, second) = tokio::join!(get("/0"), get("/1"));
        let (first, second) = (first.unwrap(), second.unwrap());
        let shown = |r: &reqwest::Response| match r.headers().get(header::RETRY_AFTER) {
            Some(after) => format!("{} (Retry-After: {})", r.status(), after.to_str().unwrap()),
            None => r.status().to_string(),
        };
        let note = if mode != mode_was {
            mode_name(mode)
        } else {
            ""
        };
        println!(
            "{:>7}  {:<26}  {:<25}  {}",
            human::span(at),
            note,
            shown(&first),
            shown(&second)
        );
        mode_was = mode;
        rounds += 1;
        steady_failed += usize::from(second.status() != StatusCode::OK);
        tokio::time::sleep_until((start + ROUND_EVERY * rounds).into()).await;
    }

    let flaky_key = flaky_url.trim_start_matches("http://").to_owned();
    let steady_key = steady_url.trim_start_matches("http://").to_owned();
    let flaky_totals = breakers.breaker(&flaky_key).totals();
    println!();
    println!(
        "{rounds} rounds; the flaky upstream's breaker ({flaky_key}) opened {} times and answered {} calls \
         itself; the upstream saw {} requests while busy",
        flaky_totals.opened,
        flaky_totals.rejected_open,
        flaky.hits(BUSY)
    );
    assert!(
        flaky_totals.opened >= 2,
        "the failing and the hung upstream tripped it"
    );
    assert!(
        flaky_totals.rejected_open > 0,
        "open, the gateway answered 503 + Retry-After itself"
    );
    assert!(
        flaky.hits(BUSY) <= 2,
        "asked to back off for a second, the gateway sent at most one request per second"
    );
    assert_eq!(
        steady_failed, 0,
        "the healthy upstream's calls all went through"
    );
    assert_eq!(breakers.breaker(&steady_key).totals().opened, 0);
    assert_eq!(
        breakers.breaker(&flaky_key).state(),
        lazybreaker::State::Closed,
        "recovered"
    );
}
