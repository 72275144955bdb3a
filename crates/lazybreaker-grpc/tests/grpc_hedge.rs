//! gRPC's hedging (proposal A6) through `HedgeLayer`, against a real tonic server on
//! 127.0.0.1 (`echo.Echo`, which hangs and fails as each call asks): a slow attempt hedged
//! and the fast answer winning, the slow one dropped; a non-fatal status hedged at once; a
//! fatal one the answer; a pushback stopping or delaying the next hedge; `maxAttempts`, the
//! throttling and a breaker's rejection bounding the hedges. The delays are a few
//! milliseconds of real time; no test waits for a hung attempt.

mod grpc_upstream;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grpc_upstream::{channel, run, serve, unary, Ask, Echo, GET, SUB};
use http::Request;
use lazybreaker::retry::HedgeStats;
use lazybreaker::Breaker;
use lazybreaker_grpc as grpc;
use lazybreaker_tower::BreakerLayer;
use tonic::body::Body;
use tonic::Code;
use tower::{service_fn, ServiceBuilder, ServiceExt};

/// A service config hedging `echo.Echo`'s `Sub`: `attempts` attempts, `delay` apart,
/// `UNAVAILABLE` not fatal; `throttling` as given (JSON members), if any.
fn config(attempts: u32, delay: &str, throttling: Option<&str>) -> String {
    let throttling = throttling
        .map(|t| format!(r#","retryThrottling":{{{t}}}"#))
        .unwrap_or_default();
    format!(
        r#"{{"methodConfig":[{{"name":[{{"service":"echo.Echo","method":"Sub"}}],
            "hedgingPolicy":{{"maxAttempts":{attempts},"hedgingDelay":"{delay}",
            "nonFatalStatusCodes":["UNAVAILABLE"]}}}}]{throttling}}}"#
    )
}

fn layer(attempts: u32, delay: &str) -> grpc::HedgeLayer {
    grpc::HedgeLayer::from_service_config(&config(attempts, delay, None)).unwrap()
}

fn stats(layer: &grpc::HedgeLayer) -> HedgeStats {
    layer.config().hedging(SUB).unwrap().hedge().stats()
}

/// Counts the attempts dropped before they answered.
struct Unfinished(Option<Arc<AtomicUsize>>);

impl Unfinished {
    fn finish(&mut self) {
        self.0 = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(dropped) = &self.0 {
            dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn a_slow_attempt_is_hedged_and_the_fast_answer_wins() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let hedges = layer(2, "0.02s");
        // The channel, each attempt watched for its drop.
        let dropped = Arc::new(AtomicUsize::new(0));
        let gone = Arc::clone(&dropped);
        let channel = channel(addr);
        let watched = service_fn(move |request: Request<Body>| {
            let channel = channel.clone();
            let mut guard = Unfinished(Some(Arc::clone(&gone)));
            async move {
                let answer = channel.oneshot(request).await;
                guard.finish();
                answer
            }
        });
        let client = ServiceBuilder::new().layer(hedges.clone()).service(watched);

        // The first call of `Sub` hangs for 5 s; the hedge, 20 ms later, answers at once.
        let started = Instant::now();
        let reply = unary(client.clone(), SUB, Ask::ok().hang_first(5_000, 1))
            .await
            .unwrap();
        assert_eq!(reply.text, "pong");
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "not the slow one's"
        );
        assert_eq!(echo.calls.of(SUB), 2);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the slow attempt, dropped"
        );
        assert_eq!(stats(&hedges).hedges, 1);
        assert_eq!((hedges.won(), hedges.cancelled()), (1, 1));

        // A method without a hedging policy passes through, once.
        let status = unary(client, GET, Ask::code(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(GET), 1);
        assert_eq!(stats(&hedges).hedges, 1);
    });
}

#[test]
fn a_non_fatal_status_hedges_at_once_and_a_fatal_one_is_the_answer() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let hedges = layer(3, "60s"); // never on time within the test
        let client = ServiceBuilder::new()
            .layer(hedges.clone())
            .service(channel(addr));

        let reply = unary(client.clone(), SUB, Ask::failing(Code::Unavailable, 1))
            .await
            .unwrap();
        assert_eq!(reply.text, "pong");
        assert_eq!(echo.calls.of(SUB), 2, "the failure, then a hedge at once");
        assert_eq!(stats(&hedges).hedges, 1);
        assert_eq!(hedges.won(), 1);

        // Fatal: the call's answer, no hedge.
        for code in [Code::Internal, Code::ResourceExhausted, Code::NotFound] {
            let status = unary(client.clone(), SUB, Ask::code(code))
                .await
                .unwrap_err();
            assert_eq!(status.code(), code);
        }
        assert_eq!(echo.calls.of(SUB), 5, "each sent once");
        assert_eq!(stats(&hedges).hedges, 1);

        // Every attempt non-fatal: three, and the last one's status.
        let status = unary(client, SUB, Ask::code(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 8, "maxAttempts 3");
        assert_eq!(stats(&hedges).hedges, 3);
    });
}

#[test]
fn a_negative_pushback_stops_the_hedges_and_a_positive_one_delays_the_next() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let hedges = layer(3, "60s");
        let client = ServiceBuilder::new()
            .layer(hedges.clone())
            .service(channel(addr));

        for malformed in ["-1", "soon"] {
            let before = echo.calls.of(SUB);
            let status = unary(
                client.clone(),
                SUB,
                Ask::code(Code::Unavailable).pushback(malformed),
            )
            .await
            .unwrap_err();
            assert_eq!(status.code(), Code::Unavailable);
            assert_eq!(echo.calls.of(SUB), before + 1, "{malformed}: no hedge");
        }
        assert_eq!(stats(&hedges).hedges, 0);

        let before = echo.calls.of(SUB) as u64;
        let started = Instant::now();
        let reply = unary(
            client,
            SUB,
            Ask::failing(Code::Unavailable, before + 1).pushback("30"),
        )
        .await
        .unwrap();
        assert_eq!(reply.text, "pong");
        assert!(
            started.elapsed() >= Duration::from_millis(30),
            "pushed back"
        );
        assert_eq!(echo.calls.of(SUB) as u64, before + 2);
        assert_eq!(stats(&hedges).hedges, 1);
    });
}

#[test]
fn max_attempts_above_five_is_five_and_a_zero_delay_sends_them_at_once() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let hedges = layer(9, "0s");
        let client = ServiceBuilder::new()
            .layer(hedges.clone())
            .service(channel(addr));
        // Every attempt hangs 50 ms: all five are out before any answers.
        let started = Instant::now();
        let reply = unary(client, SUB, Ask::hang(50)).await.unwrap();
        assert_eq!(reply.text, "pong");
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(stats(&hedges).hedges, 4, "maxAttempts 9 is 5");
        assert_eq!(
            hedges.cancelled(),
            4,
            "the first answer wins, the others dropped"
        );
    });
}

#[test]
fn the_throttling_stops_the_hedges() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        // Two tokens: one failure leaves one, half of them: no more hedges.
        let json = config(3, "60s", Some(r#""maxTokens":2,"tokenRatio":0.1"#));
        let hedges = grpc::HedgeLayer::from_service_config(&json).unwrap();
        let client = ServiceBuilder::new()
            .layer(hedges.clone())
            .service(channel(addr));
        let status = unary(client, SUB, Ask::code(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 1);
        assert_eq!(hedges.throttled(), 1);
        assert_eq!(stats(&hedges).hedges, 0);
        let bucket = hedges.config().throttling().unwrap();
        assert_eq!(bucket.tokens(), 1.0);
    });
}

#[test]
fn a_breakers_rejection_is_not_hedged() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let breaker = Arc::new(Breaker::builder().name("echo").build());
        let hedges = layer(3, "0s");
        let mut client = ServiceBuilder::new()
            .layer(hedges.clone())
            .layer(
                BreakerLayer::new(Arc::clone(&breaker))
                    .classify(grpc::status_classifier())
                    .on_rejected(grpc::AsStatus),
            )
            .service(channel(addr));
        breaker.force_open();
        // `UNAVAILABLE`, non-fatal, but the breaker's: the answer, with no hedge after it
        // (with a zero delay, every other attempt would go at once).
        let rejected = unary(client.clone(), SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 0, "nothing sent");
        assert_eq!(stats(&hedges).hedges, 0);
        assert_eq!(breaker.totals().rejected_forced, 1, "one attempt, rejected");
        // Ready again: the layer's `poll_ready` is the inner one's.
        client.ready().await.unwrap();
    });
}
