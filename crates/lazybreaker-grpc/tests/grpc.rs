//! gRPC through the tower layers against a real tonic server on 127.0.0.1: `echo.Echo`
//! (hand-written, prost messages derived in code) and tonic-health's `grpc.health.v1`. The
//! layer goes on the client's `Channel` and on the server's routes; statuses come in the
//! headers (a handler's error) and in the trailers (a stream's). Breaker time is a
//! `ManualClock`; each test is bounded.

mod grpc_upstream;

use std::sync::Arc;
use std::time::Duration;

use grpc_upstream::{channel, run, serve, stream, unary, Ask, Echo, GET, STREAM, SUB};
use lazybreaker::config::RegistrySettings;
use lazybreaker::{Breaker, ManualClock, Registry, State};
use lazybreaker_grpc as grpc;
use lazybreaker_tower::{BreakerLayer, KeyedBreakerLayer};
use tonic::Code;
use tower::ServiceBuilder;

/// The open period of every breaker here.
const OPEN_FOR: Duration = Duration::from_secs(30);

/// A per-method registry from a file, as an operator writes it: two failures in a row open
/// a method's breaker; `Get` is exempt (counted, never broken).
fn registry(
    clock: &ManualClock,
) -> Arc<Registry<String, Box<dyn lazybreaker::policy::TripPolicy>>> {
    let settings: RegistrySettings = toml::from_str(
        r#"
        exempt = ["/echo.Echo/Get"]
        [default]
        timeout = "30s"
        policy = { kind = "consecutive_failures", threshold = 2 }
        "#,
    )
    .unwrap();
    Arc::new(settings.build().unwrap().clock(clock.clone()))
}

/// A breaker that opens on the first failure, on `clock`.
fn one_strike(
    name: &str,
    clock: &ManualClock,
) -> lazybreaker::Builder<impl lazybreaker::policy::TripPolicy + 'static> {
    Breaker::builder()
        .name(name)
        .timeout(OPEN_FOR)
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .clock(clock.clone())
}

/// A client for `addr` behind `breaker`: gRPC's rules, rejections answered as gRPC does.
fn guarded<P: lazybreaker::policy::TripPolicy + 'static>(
    breaker: &Arc<Breaker<P>>,
    addr: std::net::SocketAddr,
) -> lazybreaker_tower::BreakerService<
    tonic::transport::Channel,
    P,
    (),
    grpc::StatusRules,
    grpc::AsStatus,
> {
    ServiceBuilder::new()
        .layer(
            BreakerLayer::new(Arc::clone(breaker))
                .classify(grpc::status_classifier())
                .on_rejected(grpc::AsStatus),
        )
        .service(channel(addr))
}

#[test]
fn one_failing_method_opens_only_its_breaker_and_an_exempt_one_never_breaks() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let client = ServiceBuilder::new()
            .layer(
                KeyedBreakerLayer::new(Arc::clone(&registry), grpc::per_method)
                    .classify(grpc::status_classifier())
                    .on_rejected(grpc::AsStatus),
            )
            .service(channel(addr));

        for _ in 0..2 {
            let status = unary(client.clone(), SUB, Ask::code(Code::Unavailable))
                .await
                .unwrap_err();
            assert_eq!(status.code(), Code::Unavailable);
        }
        assert_eq!(registry.breaker(SUB).state(), State::Open);
        assert_eq!(echo.calls.of(SUB), 2);

        // Rejected without reaching the server: UNAVAILABLE, naming the method's breaker,
        // with the whole open period as the pushback.
        let rejected = unary(client.clone(), SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert!(rejected.message().contains(SUB), "{}", rejected.message());
        assert_eq!(
            rejected.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "30000"
        );
        assert_eq!(echo.calls.of(SUB), 2, "the rejected call was not sent");

        // `Get` has its own breaker, and is exempt: failures are counted, never break it.
        for _ in 0..5 {
            let status = unary(client.clone(), GET, Ask::code(Code::Internal))
                .await
                .unwrap_err();
            assert_eq!(status.code(), Code::Internal);
        }
        let get = registry.breaker(GET);
        assert_eq!(get.state(), State::Closed);
        assert_eq!(get.totals().failures, 5);
        assert_eq!(
            unary(client.clone(), GET, Ask::ok()).await.unwrap().text,
            "pong"
        );
        assert_eq!(echo.calls.of(GET), 6);
    });
}

#[test]
fn resource_exhausted_and_the_callers_errors_do_not_trip() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let breaker = Arc::new(one_strike("echo", &clock).build());
        let client = guarded(&breaker, addr);
        for code in [
            Code::ResourceExhausted,
            Code::InvalidArgument,
            Code::NotFound,
            Code::PermissionDenied,
            Code::Unauthenticated,
            Code::FailedPrecondition,
        ] {
            let status = unary(client.clone(), SUB, Ask::code(code))
                .await
                .unwrap_err();
            assert_eq!(status.code(), code);
        }
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(breaker.totals().exclusions, 6);
        assert_eq!(breaker.totals().failures, 0);

        // A server that is down, once, and the breaker is open.
        let _ = unary(client.clone(), SUB, Ask::code(Code::Unavailable)).await;
        assert_eq!(breaker.state(), State::Open);
    });
}

#[test]
fn a_hang_trips_the_breaker_with_the_deadline_inside_it() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let breaker = Arc::new(one_strike("echo", &clock).build());
        let client = ServiceBuilder::new()
            .layer(BreakerLayer::new(Arc::clone(&breaker)).classify(grpc::status_classifier()))
            .timeout(Duration::from_millis(100)) // inside the breaker
            .service(channel(addr));
        assert_eq!(
            unary(client.clone(), SUB, Ask::ok()).await.unwrap().text,
            "pong"
        );
        let status = unary(client.clone(), SUB, Ask::hang(3_000))
            .await
            .unwrap_err();
        assert_ne!(status.code(), Code::Ok);
        assert_eq!(
            breaker.state(),
            State::Open,
            "the elapsed deadline is a failure"
        );
        assert_eq!(breaker.totals().failures, 1);
    });
}

#[test]
fn a_refused_connection_opens_at_once() {
    run(async {
        // A port nothing listens on: bound, then closed.
        let addr = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let clock = ManualClock::new();
        let breaker = Arc::new(
            Breaker::builder()
                .name("gone")
                .ready_to_trip(|c| c.consecutive_failures >= 100)
                .clock(clock.clone())
                .build(),
        );
        // With `AsStatus` the layer's error stays the channel's, which tonic's client maps
        // to its own `UNAVAILABLE`.
        let client = guarded(&breaker, addr);
        let status = unary(client.clone(), SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert_eq!(breaker.state(), State::Open, "refused is fatal: {status:?}");
        assert_eq!(breaker.totals().failures, 1);
        let rejected = unary(client, SUB, Ask::ok()).await.unwrap_err();
        assert!(
            rejected.message().contains("circuit breaker"),
            "{rejected:?}"
        );
    });
}

#[test]
fn the_status_in_the_trailers_is_classified_when_the_body_ends() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let breaker = Arc::new(one_strike("echo", &clock).build());
        let client = guarded(&breaker, addr);
        trailers_are_judged(client, &breaker, &echo, || None).await;
    });
}

/// A unary call and two streams through `client`, counted by `breaker` (whose calls in
/// flight, where the client keeps them apart, `in_flight` reads): every status in the
/// trailers is judged when the body ends, not on the headers, which said nothing.
async fn trailers_are_judged<S, P>(
    client: S,
    breaker: &Breaker<P>,
    echo: &Echo,
    in_flight: impl Fn() -> Option<usize>,
) where
    S: tonic::client::GrpcService<tonic::body::Body> + Clone,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResponseBody: http_body::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <S::ResponseBody as http_body::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    P: lazybreaker::policy::TripPolicy,
{
    // A unary success: its `OK` is in the trailers, which tonic's client reads.
    assert_eq!(
        unary(client.clone(), GET, Ask::ok()).await.unwrap().text,
        "pong"
    );
    assert_eq!(breaker.totals().successes, 1);

    // A stream that ends well: in flight until its end, then a success.
    let mut ok = stream(client.clone(), Ask::ok()).await.unwrap();
    assert_eq!(breaker.totals().admitted, 2);
    assert_eq!(
        breaker.totals().successes,
        1,
        "not settled before the trailers"
    );
    assert!(
        matches!(in_flight(), None | Some(1)),
        "in flight until its end"
    );
    assert_eq!(ok.message().await.unwrap().unwrap().text, "first");
    assert!(ok.message().await.unwrap().is_none());
    assert_eq!(breaker.totals().successes, 2);
    assert!(matches!(in_flight(), None | Some(0)));

    // A stream that fails after its first message: the headers said nothing, the
    // trailers say INTERNAL.
    let mut failing = stream(client.clone(), Ask::code(Code::Internal))
        .await
        .unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(failing.message().await.unwrap().unwrap().text, "first");
    let status = failing.message().await.unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(breaker.totals().failures, 1);
    assert_eq!(breaker.state(), State::Open, "the trailers' status counted");
    assert_eq!(echo.calls.of(STREAM), 2);
}

#[test]
fn a_stream_dropped_before_its_end_is_abandoned() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let breaker = Arc::new(one_strike("echo", &clock).build());
        let client = guarded(&breaker, addr);
        let unread = stream(client.clone(), Ask::code(Code::Internal))
            .await
            .unwrap();
        drop(unread);
        let totals = breaker.totals();
        assert_eq!((totals.admitted, totals.abandoned), (1, 1));
        assert_eq!(totals.failures, 0);
        assert_eq!(breaker.state(), State::Closed);
    });
}

#[test]
fn revival_is_checked_over_grpc_health_v1() {
    run(async {
        let echo = Echo::default();
        let (addr, health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        // The check asks over a channel of its own, not the one behind the breaker.
        let breaker = Arc::new(
            one_strike("echo", &clock)
                .health_check(grpc::health_check(channel(addr), "echo.Echo"))
                .build(),
        );
        let client = guarded(&breaker, addr);
        let _ = unary(client.clone(), SUB, Ask::code(Code::Unavailable)).await;
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(echo.calls.of(SUB), 1);

        // The server says it is not serving: the check fails, nothing is sent, and the
        // breaker opens for another period.
        health.set_not_serving::<Echo>().await;
        clock.advance(OPEN_FOR + Duration::from_millis(1));
        let rejected = unary(client.clone(), SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert_eq!(
            rejected.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "30000"
        );
        assert_eq!(echo.calls.of(SUB), 1, "nothing sent past a failed check");
        assert_eq!(breaker.totals().health_checks_failed, 1);
        assert_eq!(breaker.state(), State::Open);

        // Serving again: the check passes and the call that ran it is the probe.
        health.set_serving::<Echo>().await;
        clock.advance(OPEN_FOR + Duration::from_millis(1));
        assert_eq!(
            unary(client.clone(), SUB, Ask::ok()).await.unwrap().text,
            "pong"
        );
        assert_eq!(breaker.totals().health_checks, 2);
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(echo.calls.of(SUB), 2);
    });
}

#[test]
fn a_check_without_a_server_or_a_health_service_fails() {
    run(async {
        let addr = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        assert!(!grpc::check(channel(addr), "echo.Echo", grpc::CHECK_DEADLINE).await);
        let (addr, health) = serve(Echo::default()).await;
        assert!(grpc::check(channel(addr), "echo.Echo", grpc::CHECK_DEADLINE).await);
        assert!(
            !grpc::check(channel(addr), "no.Such", grpc::CHECK_DEADLINE).await,
            "SERVICE_UNKNOWN"
        );
        health.set_not_serving::<Echo>().await;
        assert!(!grpc::check(channel(addr), "echo.Echo", grpc::CHECK_DEADLINE).await);
    });
}

#[test]
fn on_a_server_the_layer_protects_a_handler_and_answers_with_the_status() {
    run(async {
        let echo = Echo::default();
        let clock = ManualClock::new();
        let registry = registry(&clock);
        let (health_reporter, health) = grpc_upstream::health();
        health_reporter.set_serving::<Echo>().await;
        let (incoming, addr) = grpc_upstream::listen().await;
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(
                    KeyedBreakerLayer::new(Arc::clone(&registry), grpc::per_method)
                        .classify(grpc::status_classifier())
                        .on_rejected(grpc::AsStatus),
                )
                .add_service(health)
                .add_service(echo.clone())
                .serve_with_incoming(incoming),
        );
        // A plain client: no breaker of its own.
        let client = channel(addr);
        for _ in 0..2 {
            let status = unary(client.clone(), SUB, Ask::code(Code::Internal))
                .await
                .unwrap_err();
            assert_eq!(status.code(), Code::Internal);
        }
        assert_eq!(registry.breaker(SUB).state(), State::Open);
        let rejected = unary(client.clone(), SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert_eq!(
            rejected.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "30000"
        );
        assert_eq!(echo.calls.of(SUB), 2, "the handler was not called");
        // Successes are settled by their trailers, on the server's side too.
        assert_eq!(
            unary(client.clone(), GET, Ask::ok()).await.unwrap().text,
            "pong"
        );
        let get = registry.breaker(GET);
        let mut settled = false;
        for _ in 0..100 {
            // The server's body ends just after the client read it.
            if get.totals().successes == 1 {
                settled = true;
                break;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(settled, "{:?}", get.totals());
    });
}

#[test]
fn a_fallback_answers_with_the_rejected_status_on_a_single_breaker() {
    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let breaker = Arc::new(one_strike("echo", &clock).build());
        breaker.force_open();
        let client = ServiceBuilder::new()
            .layer(
                BreakerLayer::new(Arc::clone(&breaker))
                    .classify(grpc::status_classifier())
                    .fallback(|r| grpc::rejected_status(r).into_http()),
            )
            .service(channel(addr));
        let rejected = unary(client, SUB, Ask::ok()).await.unwrap_err();
        assert_eq!(rejected.code(), Code::Unavailable);
        assert!(
            rejected.metadata().get("grpc-retry-pushback-ms").is_none(),
            "forced: no time"
        );
        assert_eq!(echo.calls.of(SUB), 0);
    });
}

/// The same stream through a `PoolService` with gRPC's rules: the pool judges a status that
/// comes in the trailers when the body ends, as the single layer does, and keeps the
/// endpoint's call in flight until then (not settled on the headers, which said nothing).
#[test]
fn a_pool_service_judges_the_status_in_the_trailers_as_the_single_layer_does() {
    use lazybreaker::pool::Pool;
    use lazybreaker_tower::PoolService;
    use std::net::SocketAddr;

    run(async {
        let echo = Echo::default();
        let (addr, _health) = serve(echo.clone()).await;
        let clock = ManualClock::new();
        let on = clock.clone();
        let pool = Arc::new(Pool::new(move |_: &SocketAddr| one_strike("echo", &on)));
        pool.set([addr]);
        let client = PoolService::new(Arc::clone(&pool), |addr: &SocketAddr| channel(*addr))
            .classify(grpc::status_classifier());
        let breaker = pool.breaker(&addr).expect("the endpoint's breaker");
        trailers_are_judged(client, &breaker, &echo, || pool.in_flight(&addr)).await;
    });
}
