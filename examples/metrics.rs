//! Serves `/metrics` on 127.0.0.1 while a dependency goes down and comes back, and scrapes
//! it over HTTP as Prometheus would.
//!
//! Run it with `cargo run --example metrics --features prometheus`. The outage is simulated
//! (a `ManualClock`: 30 simulated seconds run at once, the same every time); the server and
//! the scrapes are real. Every 5 simulated seconds it scrapes its own endpoint and prints the
//! breaker's series. Watch `circuit_breaker_state` go 0 → 2 → 1 → 0, the rejections count up
//! while open, and, at 25 s, a breaker whose open period has passed with no traffic read as
//! half-open (1) by the scrape without the scrape having moved it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::human;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::{Breaker, ManualClock, Registry};
use prometheus_client::encoding::text::encode;

const CALL_EVERY: Duration = Duration::from_millis(100);
const SECONDS: u64 = 30;

/// The dependencies: `payments` is down from 5 s to 12 s; `search` fails from 18 s to 19 s
/// and then gets no traffic at all.
fn fails(key: &str, t: Duration) -> Option<bool> {
    let s = t.as_secs_f64();
    match key {
        "payments" => Some((5.0..12.0).contains(&s)),
        "search" if s < 18.0 => Some(false),
        "search" if s < 19.0 => Some(true),
        _ => None, // no traffic
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let clock = ManualClock::new();
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::new(|_: &String| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(3).expect("a valid threshold"))
                .timeout(Duration::from_secs(3))
        })
        .clock(clock.clone()),
    );
    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register_collector(Box::new(
        BreakerCollector::new().registry(Arc::clone(&registry)),
    ));
    let metrics = Arc::new(metrics);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let uri = format!(
        "http://{}/metrics",
        listener.local_addr().expect("its address")
    );
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = Arc::clone(&metrics);
            async move {
                let mut text = String::new();
                encode(&mut text, &metrics).expect("text encoding");
                text
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("serving {uri}\n");

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    for _ in 0..SECONDS * 1_000 / CALL_EVERY.as_millis() as u64 {
        let t = clock.now();
        for key in ["payments", "search"] {
            if let Some(fail) = fails(key, t) {
                let _ =
                    registry
                        .breaker(key)
                        .execute(|| if fail { Err("unavailable") } else { Ok(()) });
            }
        }
        clock.advance(CALL_EVERY);
        let now = clock.now();
        if now.as_millis().is_multiple_of(5_000) {
            let request = Request::get(uri.as_str())
                .body(Empty::new())
                .expect("a request");
            let response = client.request(request).await.expect("a scrape");
            let body = response
                .into_body()
                .collect()
                .await
                .expect("a body")
                .to_bytes();
            let text = String::from_utf8_lossy(&body);
            println!("--- scrape at {} ---", human::span(now));
            for line in text.lines().filter(|l| shown(l)) {
                println!("{line}");
            }
            println!();
        }
    }
}

/// The series worth printing: state, rejections, failures and opens.
fn shown(line: &str) -> bool {
    !line.starts_with('#')
        && (line.starts_with("circuit_breaker_state")
            || line.starts_with("circuit_breaker_opened_total")
            || (line.starts_with("circuit_breaker_transitions_total")
                && line.contains("from=\"open\",to=\"half_open\""))
            || (line.starts_with("circuit_breaker_calls_total")
                && (line.contains("\"failure\"")
                    || line.contains("\"success\"")
                    || line.contains("\"rejected_open\""))))
}
