//! The breaker against a real HTTP server on 127.0.0.1 that can fail, hang and recover
//!: an axum upstream, hyper-util's client as the tower service under the
//! breaker, tower's timeout inside or around it.
//!
//! The three abandoned-call cases: (a) a deadline *inside* the breaker trips it on a hung
//! server; (b) a deadline *around* it trips it when abandoned calls count as failures (and,
//! with the default, is cancelled without tripping it); (c) a cancelled half-open probe
//! never leaves the breaker stuck, whatever the setting.
//!
//! The breaker's time is a `ManualClock`; the only real time is the deadline on a hung
//! request (`DEADLINE`, short) and the bound on each test (`BOUND`).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Response, StatusCode, Uri};
use http_body_util::Empty;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::http::status_classifier;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{AbandonedAs, Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_test_support::{refused, Upstream, FAIL, HANG, OK};
use lazybreaker_tower::BreakerLayer;
use tower::timeout::error::Elapsed;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// How long a request to the hung server waits before its deadline cancels it.
const DEADLINE: Duration = Duration::from_millis(50);
/// The most any test may take; it fails rather than wait longer.
const BOUND: Duration = Duration::from_secs(20);
/// The breaker's open period (on the manual clock).
const OPEN_FOR: Duration = Duration::from_secs(30);
/// Past the open period: it ends strictly after `OPEN_FOR`, as gobreaker's `expiry.Before(now)`.
const PAST_OPEN: Duration = Duration::from_millis(30_001);
/// Consecutive failures that trip the breaker.
const TRIP_AFTER: u64 = 3;

/// Serves `upstream` on a free loopback port until the runtime is dropped.
async fn serve(upstream: Upstream) -> Uri {
    format!("http://{}/", upstream.serve().await)
        .parse()
        .unwrap()
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;
type HttpResponse = Response<hyper::body::Incoming>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get(uri: &Uri) -> Request<Empty<Bytes>> {
    Request::get(uri.clone()).body(Empty::new()).unwrap()
}

fn breaker(clock: &ManualClock, abandoned: AbandonedAs) -> Arc<Breaker> {
    Arc::new(
        Breaker::builder()
            .name("upstream")
            .policy(ConsecutiveFailures::new(TRIP_AFTER).unwrap())
            .timeout(OPEN_FOR)
            .abandoned_as(abandoned, abandoned)
            .clock(clock.clone())
            .build(),
    )
}

/// Runs a test on its own runtime (the server with it), bounded by [`BOUND`]; dropping the
/// runtime stops the server and cancels its hung handlers.
fn run<F: Future<Output = ()>>(test: F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(BOUND, test)
            .await
            .expect("the test finished within its bound");
    });
}

/// One call through a service, readiness included.
async fn call<S, R>(service: &mut S, uri: &Uri) -> Result<R, S::Error>
where
    S: Service<Request<Empty<Bytes>>, Response = R>,
{
    service.ready().await?.call(get(uri)).await
}

/// The stack with the timeout inside the breaker: its expiry is the call's own error.
fn timeout_inside(
    breaker: &Arc<Breaker>,
) -> impl Service<Request<Empty<Bytes>>, Response = HttpResponse, Error = Error<BoxError>> {
    ServiceBuilder::new()
        .layer(BreakerLayer::new(Arc::clone(breaker)).classify(status_classifier()))
        .timeout(DEADLINE)
        .service(client())
}

/// The stack with the timeout around the breaker: its expiry cancels the call.
fn timeout_outside(
    breaker: &Arc<Breaker>,
) -> impl Service<Request<Empty<Bytes>>, Response = HttpResponse, Error = BoxError> {
    ServiceBuilder::new()
        .timeout(DEADLINE)
        .layer(BreakerLayer::new(Arc::clone(breaker)).classify(status_classifier()))
        .service(client())
}

fn is_elapsed(e: &BoxError) -> bool {
    e.is::<Elapsed>()
}

fn is_rejected_open(e: &BoxError) -> bool {
    matches!(
        e.downcast_ref::<Error<hyper_util::client::legacy::Error>>(),
        Some(Error::Rejected(Rejected::Open { .. }))
    )
}

/// (a) A deadline inside the breaker: each hung call ends in the timeout's error, counted as
/// a failure; the breaker trips, fails fast without touching the server, and recovers.
#[test]
fn a_timeout_inside_the_breaker_trips_it_on_a_hung_server() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, AbandonedAs::Exclusion);
        let mut service = timeout_inside(&breaker);

        upstream.set(HANG);
        for _ in 0..TRIP_AFTER {
            match call(&mut service, &uri).await {
                Err(Error::Inner(e)) => assert!(is_elapsed(&e), "the deadline's error: {e}"),
                other => panic!("expected the deadline's error, got {other:?}"),
            }
        }
        assert_eq!(breaker.state(), State::Open);
        let r = call(&mut service, &uri).await;
        assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
        assert_eq!(
            upstream.hits(),
            TRIP_AFTER as usize,
            "the rejection sent nothing"
        );
        let t = breaker.totals();
        assert_eq!((t.failures, t.abandoned), (TRIP_AFTER, 0));

        // Open period over, server back: the probe closes it.
        clock.advance(PAST_OPEN);
        upstream.set(OK);
        let r = call(&mut service, &uri)
            .await
            .expect("the probe got through");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(upstream.hits(), TRIP_AFTER as usize + 1);
    });
}

/// (a) The same with `execute_async` and the deadline inside the closure.
#[test]
fn a_deadline_inside_execute_async_trips_it_on_a_hung_server() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, AbandonedAs::Exclusion);
        let client = client();

        upstream.set(HANG);
        for _ in 0..TRIP_AFTER {
            let r = breaker
                .execute_async_classified(
                    || async {
                        match tokio::time::timeout(DEADLINE, client.request(get(&uri))).await {
                            Ok(response) => response.map_err(BoxError::from),
                            Err(elapsed) => Err(BoxError::from(elapsed)),
                        }
                    },
                    status_classifier(),
                )
                .await;
            assert!(matches!(r, Err(Error::Inner(_))), "the deadline's error");
        }
        assert_eq!(breaker.state(), State::Open);
        let built = AtomicUsize::new(0);
        let r = breaker
            .execute_async(|| {
                built.fetch_add(1, Ordering::SeqCst);
                client.request(get(&uri))
            })
            .await;
        assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
        assert_eq!(
            built.load(Ordering::SeqCst),
            0,
            "an open breaker builds no request"
        );
        assert_eq!(upstream.hits(), TRIP_AFTER as usize);
        assert_eq!(breaker.totals().failures, TRIP_AFTER);
    });
}

/// (b) A deadline around the breaker, abandoned calls counted as failures: the hung server
/// trips it too, and the calls are visible as abandoned.
#[test]
fn a_timeout_outside_trips_it_when_abandoned_calls_count_as_failures() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, AbandonedAs::Failure);
        let mut service = timeout_outside(&breaker);

        upstream.set(HANG);
        for _ in 0..TRIP_AFTER {
            let e = call(&mut service, &uri).await.unwrap_err();
            assert!(is_elapsed(&e), "the deadline's error: {e}");
        }
        assert_eq!(breaker.state(), State::Open);
        let e = call(&mut service, &uri).await.unwrap_err();
        assert!(
            is_rejected_open(&e),
            "rejected, as an `Error` in the BoxError: {e}"
        );
        assert_eq!(upstream.hits(), TRIP_AFTER as usize);
        let t = breaker.totals();
        assert_eq!(t.abandoned, TRIP_AFTER, "every cancelled call is counted");
        assert_eq!(t.admitted, TRIP_AFTER);
    });
}

/// (b), the default: a deadline around the breaker cancels the calls, which count as
/// abandoned exclusions, and the breaker stays closed: the documented price of the default,
/// visible in `Totals::abandoned`.
#[test]
fn with_the_default_a_timeout_outside_cancels_without_tripping() {
    run(async {
        let upstream = Upstream::default();
        let uri = serve(upstream.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, AbandonedAs::default());
        let mut service = timeout_outside(&breaker);

        upstream.set(HANG);
        let calls = 2 * TRIP_AFTER;
        for _ in 0..calls {
            let e = call(&mut service, &uri).await.unwrap_err();
            assert!(is_elapsed(&e), "the deadline's error: {e}");
        }
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(upstream.hits(), calls as usize);
        let t = breaker.totals();
        assert_eq!((t.abandoned, t.failures, t.exclusions), (calls, 0, 0));
    });
}

/// (c) A half-open probe cancelled by a deadline around the breaker never leaves it stuck:
/// as an exclusion it gives its slot back at once, as a failure it reopens the breaker for
/// one more open period. Either way the recovered server closes it.
#[test]
fn a_cancelled_half_open_probe_never_leaves_it_stuck() {
    for abandoned in [AbandonedAs::Exclusion, AbandonedAs::Failure] {
        run(async {
            let upstream = Upstream::default();
            let uri = serve(upstream.clone()).await;
            let clock = ManualClock::new();
            let breaker = breaker(&clock, abandoned);
            let mut service = timeout_outside(&breaker);

            upstream.set(FAIL);
            for _ in 0..TRIP_AFTER {
                let r = call(&mut service, &uri).await.expect("a 500 is a response");
                assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
            }
            assert_eq!(breaker.state(), State::Open, "{abandoned:?}");
            clock.advance(PAST_OPEN);
            assert_eq!(breaker.state(), State::HalfOpen);

            upstream.set(HANG);
            let e = call(&mut service, &uri).await.unwrap_err();
            assert!(is_elapsed(&e), "the probe was cancelled: {e}");
            assert_eq!(breaker.totals().abandoned, 1);
            let hits = upstream.hits();
            assert_eq!(hits, TRIP_AFTER as usize + 1);
            match abandoned {
                AbandonedAs::Exclusion => {
                    // The slot is free again: the next call is a probe, not TooManyRequests.
                    assert_eq!(breaker.state(), State::HalfOpen);
                }
                _ => {
                    assert_eq!(breaker.state(), State::Open);
                    let e = call(&mut service, &uri).await.unwrap_err();
                    assert!(is_rejected_open(&e), "reopened: {e}");
                    assert_eq!(upstream.hits(), hits, "and the hung server gets no probe");
                    clock.advance(PAST_OPEN);
                    assert_eq!(breaker.state(), State::HalfOpen);
                }
            }

            upstream.set(OK);
            let r = call(&mut service, &uri)
                .await
                .expect("the next probe got through");
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(breaker.state(), State::Closed, "{abandoned:?}");
            assert_eq!(upstream.hits(), hits + 1);
        });
    }
}

/// `Error<BoxError>` composes in a real client stack: timeouts around and inside the breaker
/// over hyper-util's client, the whole stack a `BoxError` service that is `Clone + Send`.
#[test]
fn the_layer_composes_in_a_real_client_stack() {
    fn assert_stack<S>(_: &S)
    where
        S: Service<Request<Empty<Bytes>>, Response = HttpResponse, Error = BoxError>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
    }
    let clock = ManualClock::new();
    let stack = ServiceBuilder::new()
        .timeout(Duration::from_secs(2))
        .layer(BreakerLayer::new(breaker(&clock, AbandonedAs::default())))
        .timeout(Duration::from_secs(1))
        .service(client());
    assert_stack(&stack);
}

/// A refused connection under the layers (hyper-util's error, boxed by the timeout, wraps
/// the socket's `io::Error`) trips the breaker at once with `classifier_with_io`.
#[test]
fn a_refused_connection_under_the_layers_trips_at_once() {
    run(async {
        let uri: Uri = format!("http://{}/", refused()).parse().unwrap();
        let clock = ManualClock::new();
        let breaker = breaker(&clock, AbandonedAs::Exclusion); // 3 failures in a row...
        let mut service = ServiceBuilder::new()
            .layer(
                BreakerLayer::new(Arc::clone(&breaker))
                    .classify(lazybreaker::http::StatusRules::new().classifier_with_io()),
            )
            .timeout(Duration::from_secs(5))
            .service(client());
        let r = call(&mut service, &uri).await;
        assert!(matches!(r, Err(Error::Inner(_))), "refused");
        assert_eq!(
            breaker.state(),
            State::Open,
            "...but a refused connection is fatal"
        );
    });
}
