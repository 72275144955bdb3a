//! gRPC's retries (proposal A6) through `RetryLayer`: against a real tonic server on
//! 127.0.0.1 (`echo.Echo`, which fails as each call asks), and against a scripted service
//! for the throttling's sequence and the headers of a retry. Every backoff is 1 ns (its
//! draws are 0): no test waits on the wall clock.

mod grpc_upstream;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grpc_upstream::{channel, run, serve, unary, unary_within, Ask, Echo, GET, SUB};
use http::{HeaderMap, Request, Response};
use lazybreaker::retry::RetryStats;
use lazybreaker::{Breaker, State};
use lazybreaker_grpc as grpc;
use lazybreaker_tower::BreakerLayer;
use tonic::body::Body;
use tonic::{Code, Status};
use tower::{service_fn, ServiceBuilder, ServiceExt};

/// A service config for `echo.Echo`'s `Sub`: `attempts` attempts, `UNAVAILABLE` retried,
/// a 1 ns backoff; `throttling` as given (JSON members), if any.
fn config(attempts: u32, throttling: Option<&str>) -> String {
    let throttling = throttling
        .map(|t| format!(r#","retryThrottling":{{{t}}}"#))
        .unwrap_or_default();
    format!(
        r#"{{"methodConfig":[{{"name":[{{"service":"echo.Echo","method":"Sub"}}],
            "retryPolicy":{{"maxAttempts":{attempts},"initialBackoff":"0.000000001s",
            "maxBackoff":"0.000000001s","backoffMultiplier":2,
            "retryableStatusCodes":["UNAVAILABLE"]}}}}]{throttling}}}"#
    )
}

fn layer(attempts: u32) -> grpc::RetryLayer {
    grpc::RetryLayer::from_service_config(&config(attempts, None)).unwrap()
}

fn stats(layer: &grpc::RetryLayer) -> RetryStats {
    layer.config().policy(SUB).unwrap().retry().stats()
}

#[test]
fn unavailable_once_then_ok_is_retried_once() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let retries = layer(3);
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(channel(addr));
        let reply = unary(client.clone(), SUB, Ask::failing(Code::Unavailable, 1))
            .await
            .unwrap();
        assert_eq!(reply.text, "pong");
        assert_eq!(echo.calls.of(SUB), 2, "the failure, then the retry");
        assert_eq!(stats(&retries).retries, 1);

        // A method no policy names passes through: its failure is the answer.
        let status = unary(client, GET, Ask::failing(Code::Unavailable, 1))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(GET), 1);
    });
}

#[test]
fn a_negative_pushback_stops_and_a_zero_one_retries_at_once() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let retries = layer(3);
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(channel(addr));

        for malformed in ["-1", "soon"] {
            let before = echo.calls.of(SUB);
            let status = unary(
                client.clone(),
                SUB,
                Ask::failing(Code::Unavailable, 1_000).pushback(malformed),
            )
            .await
            .unwrap_err();
            assert_eq!(status.code(), Code::Unavailable);
            assert_eq!(echo.calls.of(SUB), before + 1, "{malformed}: not retried");
        }
        assert_eq!(stats(&retries).pushed_back, 2);
        assert_eq!(stats(&retries).retries, 0);

        let before = echo.calls.of(SUB);
        let reply = unary(
            client.clone(),
            SUB,
            Ask::failing(Code::Unavailable, before as u64 + 1).pushback("0"),
        )
        .await
        .unwrap();
        assert_eq!(reply.text, "pong");
        assert_eq!(echo.calls.of(SUB), before + 2, "retried after 0 ms");
        assert_eq!(stats(&retries).retries, 1);
    });
}

#[test]
fn a_status_not_retryable_is_the_answer() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let retries = layer(3);
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(channel(addr));
        for code in [Code::Internal, Code::ResourceExhausted, Code::NotFound] {
            let status = unary(client.clone(), SUB, Ask::failing(code, 1_000))
                .await
                .unwrap_err();
            assert_eq!(status.code(), code);
        }
        assert_eq!(echo.calls.of(SUB), 3, "each sent once");
        assert_eq!(stats(&retries), RetryStats::default(), "nothing decided");
    });
}

#[test]
fn attempts_run_out_and_a_pushback_past_the_deadline_is_not_waited() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let retries = layer(7); // treated as 5
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(channel(addr));
        let status = unary(client.clone(), SUB, Ask::code(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 5, "maxAttempts 7 is 5");
        assert_eq!((stats(&retries).retries, stats(&retries).exhausted), (4, 1));

        // A minute's pushback on a call with a second to live: stopped, not waited.
        let status = unary_within(
            client,
            SUB,
            Ask::code(Code::Unavailable).pushback("60000"),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 6);
        assert_eq!(stats(&retries).past_deadline, 1);
    });
}

#[test]
fn every_attempt_goes_through_the_breaker_and_its_rejection_is_not_retried() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let breaker = Arc::new(
            Breaker::builder()
                .name("echo")
                .ready_to_trip(|c| c.consecutive_failures >= 100)
                .build(),
        );
        let retries = layer(2).count_on(Arc::clone(&breaker));
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .layer(
                BreakerLayer::new(Arc::clone(&breaker))
                    .classify(grpc::status_classifier())
                    .on_rejected(grpc::AsStatus),
            )
            .service(channel(addr));
        let reply = unary(client.clone(), SUB, Ask::failing(Code::Unavailable, 1))
            .await
            .unwrap();
        assert_eq!(reply.text, "pong");
        let totals = breaker.totals();
        assert_eq!((totals.failures, totals.successes), (1, 1), "two calls");
        assert_eq!(totals.retries, 1, "counted on the breaker");

        let _ = unary(client.clone(), SUB, Ask::code(Code::Unavailable)).await;
        assert_eq!(breaker.totals().retries_exhausted, 1);
        assert_eq!(echo.calls.of(SUB), 4);

        // Open: UNAVAILABLE with a pushback, but the breaker's: never retried.
        breaker.force_open();
        assert_eq!(breaker.state(), State::Open);
        let before = stats(&retries);
        let rejected = unary(client, SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert_eq!(echo.calls.of(SUB), 4, "nothing sent");
        assert_eq!(
            breaker.totals().rejected_forced,
            1,
            "rejected once, not again"
        );
        assert_eq!(stats(&retries), before);
    });
}

/// A scripted upstream: `UNAVAILABLE` (trailers-only) while `failing`, else `OK`; counts
/// its calls and keeps each request's headers.
#[derive(Clone, Default)]
struct Script {
    failing: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Script {
    fn service(
        &self,
    ) -> impl tower::Service<
        Request<Body>,
        Response = Response<Body>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
           + Send
           + 'static {
        let script = self.clone();
        service_fn(move |request: Request<Body>| {
            let script = script.clone();
            async move {
                script.calls.fetch_add(1, Ordering::Relaxed);
                script
                    .headers
                    .lock()
                    .unwrap()
                    .push(request.headers().clone());
                let status = if script.failing.load(Ordering::Relaxed) {
                    Status::unavailable("down")
                } else {
                    Status::ok("")
                };
                Ok::<_, Infallible>(status.into_http())
            }
        })
    }

    fn calls(&self) -> usize {
        self.calls.swap(0, Ordering::Relaxed)
    }
}

/// A request for `Sub`, as tonic sends one (with a deadline, if given).
fn request(timeout: Option<&str>) -> Request<Body> {
    let mut request = Request::builder().uri("http://upstream/echo.Echo/Sub");
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    request.body(Body::empty()).unwrap()
}

#[test]
fn the_throttling_runs_as_a6_says() {
    run(async {
        let script = Script::default();
        let retries = grpc::RetryLayer::from_service_config(&config(
            5,
            Some(r#""maxTokens":10,"tokenRatio":0.1"#),
        ))
        .unwrap();
        let bucket = Arc::clone(retries.config().throttling().unwrap());
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(script.service());
        let call = || client.clone().oneshot(request(None));

        // Down: each failure takes a token; retries go out while more than 5 are left.
        script.failing.store(true, Ordering::Relaxed);
        let response = call().await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(script.calls(), 5, "10 → 9, 8, 7, 6 retried; 5 is half");
        assert_eq!(bucket.tokens(), 5.0);
        assert_eq!(retries.throttled(), 1);
        assert_eq!(stats(&retries).retries, 4);
        call().await.unwrap();
        assert_eq!(script.calls(), 1, "4 left: not retried");
        assert_eq!(bucket.tokens(), 4.0);
        assert_eq!(retries.throttled(), 2);

        // Up: each success gives a tenth back.
        script.failing.store(false, Ordering::Relaxed);
        for _ in 0..21 {
            call().await.unwrap();
        }
        assert_eq!(script.calls(), 21);
        assert!((bucket.tokens() - 6.1).abs() < 1e-9, "{}", bucket.tokens());

        // Down again: 6.1 → 5.1 still retries, 5.1 → 4.1 does not.
        script.failing.store(true, Ordering::Relaxed);
        call().await.unwrap();
        assert_eq!(script.calls(), 2);
        assert!((bucket.tokens() - 4.1).abs() < 1e-9, "{}", bucket.tokens());
        assert_eq!(retries.throttled(), 3);
        assert_eq!(stats(&retries).retries, 5);
    });
}

#[test]
fn a_retry_says_which_attempt_it_is_and_what_is_left_of_the_deadline() {
    run(async {
        let script = Script::default();
        script.failing.store(true, Ordering::Relaxed);
        let retries = layer(3);
        let client = ServiceBuilder::new()
            .layer(retries.clone())
            .service(script.service());
        client.oneshot(request(Some("5S"))).await.unwrap();
        assert_eq!(script.calls(), 3);
        let headers = script.headers.lock().unwrap();
        assert!(headers[0].get("grpc-previous-rpc-attempts").is_none());
        assert_eq!(headers[0]["grpc-timeout"], "5S", "the first as sent");
        for (n, headers) in headers.iter().enumerate().skip(1) {
            assert_eq!(
                headers["grpc-previous-rpc-attempts"],
                n.to_string().as_str()
            );
            let left = headers["grpc-timeout"].to_str().unwrap();
            let ms: u64 = left.strip_suffix('m').unwrap().parse().unwrap();
            assert!((1..=5_000).contains(&ms), "{left}");
        }
    });
}
