//! The concurrency limit through tower: `LimitLayer` turns the call past its limit away at
//! once; a place comes back however a call ends (an answer, an error, a dropped future, a
//! panic); an overload answer or a timeout cuts an `Aimd` limit; a `Limited` rejection
//! never reaches a breaker inside; a retry outside retries it; and against a real server on
//! 127.0.0.1, calls beyond the limit to a hung upstream are shed. The limit's time is a
//! `ManualClock`; tokio's clock, where a timer runs, is paused (no wall time).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use lazybreaker::limit::{Aimd, Fixed, Limiter};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::retry::{Retry, RetryBudget};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_tower::{BreakerLayer, IntoInner, LimitLayer, RetryLayer};
use tokio::sync::oneshot;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

type Answer = Result<Response<()>, BoxError>;

/// What a call to [`held`] does: answer what its sender sends, or panic when polled.
enum Call {
    Answer(oneshot::Receiver<Answer>),
    Panic,
}

/// A service whose calls answer when the test says (each request carries its answer's
/// channel), or panic.
fn held() -> impl Service<Call, Response = Response<()>, Error = BoxError, Future: Send> + Clone {
    tower::service_fn(|call: Call| async move {
        match call {
            Call::Answer(answer) => answer.await.expect("the test answers every call"),
            Call::Panic => panic!("the inner call panicked"),
        }
    })
}

/// A call to [`held`], and the sender of its answer.
fn call() -> (oneshot::Sender<Answer>, Call) {
    let (tx, rx) = oneshot::channel();
    (tx, Call::Answer(rx))
}

fn status(code: u16) -> Answer {
    Ok(Response::builder().status(code).body(()).unwrap())
}

/// Polls `future` once, with a waker that wakes nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test]
async fn the_call_past_the_limit_is_rejected_at_once() {
    let clock = ManualClock::new();
    let layer = LimitLayer::new(Fixed::new(2)).clock(clock.clone());
    let mut service = layer.layer(held());
    let limiter = layer.limiter();

    let (a, first) = call();
    let first = service.ready().await.unwrap().call(first);
    let (_b, second) = call();
    let _second = service.ready().await.unwrap().call(second);
    assert_eq!(limiter.in_flight(), 2);

    // The third: answered at once, never sent (its sender is dropped unanswered).
    let (_, third) = call();
    let third = pin!(service.ready().await.unwrap().call(third));
    let Poll::Ready(Err(err)) = poll_once(third) else {
        panic!("rejected without waiting")
    };
    assert!(matches!(err, Error::Rejected(Rejected::Limited)), "{err:?}");
    assert_eq!((limiter.in_flight(), limiter.limited()), (2, 1));

    // One answers: its place is free for the next call.
    clock.advance(Duration::from_millis(5));
    a.send(status(200)).unwrap();
    assert_eq!(first.await.unwrap().status(), StatusCode::OK);
    assert_eq!(limiter.in_flight(), 1);
    let (_c, fourth) = call();
    let _fourth = service.ready().await.unwrap().call(fourth);
    assert_eq!((limiter.in_flight(), limiter.limited()), (2, 1));
}

#[tokio::test]
async fn a_place_comes_back_on_success_error_drop_and_panic() {
    let layer =
        LimitLayer::new(Aimd::new().initial_limit(4).min_limit(1)).clock(ManualClock::new());
    let limiter = Arc::clone(layer.limiter());
    let mut service = layer.layer(held());

    // An answer: a sample (1 of 4 in flight: below half, the limit stays).
    let (tx, ok) = call();
    let ok = service.call(ok);
    tx.send(status(200)).unwrap();
    assert!(ok.await.is_ok());
    assert_eq!((limiter.in_flight(), limiter.limit()), (0, 4));

    // An error of the call's own: its place back, nothing learned.
    let (tx, failed) = call();
    let failed = service.call(failed);
    tx.send(Err("reset".into())).unwrap();
    let err = failed.await.unwrap_err();
    assert!(matches!(err, Error::Inner(_)));
    assert_eq!((limiter.in_flight(), limiter.limit()), (0, 4));

    // A future dropped before it completes: cancelled, its place back.
    let (_tx, cancelled) = call();
    let mut cancelled = Box::pin(service.call(cancelled));
    assert!(poll_once(cancelled.as_mut()).is_pending());
    assert_eq!(limiter.in_flight(), 1);
    drop(cancelled);
    assert_eq!((limiter.in_flight(), limiter.limit()), (0, 4));

    // A panic in the inner future: its place back at once, and the panic goes on.
    let mut panicking = Box::pin(service.call(Call::Panic));
    let caught = std::panic::catch_unwind(AssertUnwindSafe(|| poll_once(panicking.as_mut())));
    assert!(caught.is_err(), "the panic continued");
    assert_eq!(
        limiter.in_flight(),
        0,
        "given back before the future is dropped"
    );
    drop(panicking);
    assert_eq!((limiter.in_flight(), limiter.limit()), (0, 4));
}

#[tokio::test]
async fn an_overload_answer_cuts_the_limit_and_a_failure_does_not() {
    let layer =
        LimitLayer::http(Aimd::new().initial_limit(30).min_limit(1)).clock(ManualClock::new());
    let limiter = Arc::clone(layer.limiter());
    let mut service = layer.layer(held());
    let mut answer = |code: u16| {
        let (tx, request) = call();
        let future = service.call(request);
        tx.send(status(code)).unwrap();
        future
    };

    assert_eq!(answer(500).await.unwrap().status(), 500);
    assert_eq!(limiter.limit(), 30, "a failure says nothing of the limit");
    assert_eq!(answer(404).await.unwrap().status(), 404);
    assert_eq!(limiter.limit(), 30, "nor does an excluded answer");
    // A 503 without `Retry-After`: the server sheds load, the limit is cut by 0.9.
    assert_eq!(answer(503).await.unwrap().status(), 503);
    assert_eq!(limiter.limit(), 27);
    assert_eq!(answer(429).await.unwrap().status(), 429);
    assert_eq!(limiter.limit(), 24);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_cuts_the_limit() {
    let layer =
        LimitLayer::new(Aimd::new().initial_limit(30).min_limit(1)).clock(ManualClock::new());
    let limiter = Arc::clone(layer.limiter());
    // tower's timeout inside the limit, over a call that never answers.
    let service = ServiceBuilder::new()
        .layer(layer)
        .timeout(Duration::from_millis(100))
        .service(tower::service_fn(|()| std::future::pending::<Answer>()));
    let err = service.oneshot(()).await.unwrap_err();
    assert!(matches!(&err, Error::Inner(e) if e.is::<tower::timeout::error::Elapsed>()));
    assert_eq!((limiter.in_flight(), limiter.limit()), (0, 27));
}

#[tokio::test]
async fn a_failure_that_took_the_deadline_is_a_timeout() {
    let clock = ManualClock::new();
    let layer = LimitLayer::new(Aimd::new().initial_limit(30).min_limit(1))
        .clock(clock.clone())
        .deadline(Duration::from_secs(1));
    let limiter = Arc::clone(layer.limiter());
    let mut service = layer.layer(held());

    let (tx, quick) = call();
    let quick = service.call(quick);
    tx.send(Err("reset".into())).unwrap();
    assert!(quick.await.is_err());
    assert_eq!(limiter.limit(), 30, "a quick failure says nothing");

    let (tx, slow) = call();
    let slow = service.call(slow);
    clock.advance(Duration::from_secs(1));
    tx.send(Err("deadline".into())).unwrap();
    assert!(slow.await.is_err());
    assert_eq!(limiter.limit(), 27, "a failure at the deadline is a drop");
}

#[tokio::test]
async fn a_limited_call_never_reaches_the_breaker_inside() {
    let breaker = Arc::new(
        Breaker::builder()
            .name("upstream")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .clock(ManualClock::new())
            .build(),
    );
    let layer = LimitLayer::new(Fixed::new(1))
        .clock(ManualClock::new())
        .on_rejected(IntoInner);
    let limiter = Arc::clone(layer.limiter());
    let mut service = ServiceBuilder::new()
        .layer(layer)
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .service(held());

    let (tx, first) = call();
    let first = service.ready().await.unwrap().call(first);
    let before = breaker.totals();
    assert_eq!(before.admitted, 1);
    for _ in 0..5 {
        let (_, request) = call();
        let err = service
            .ready()
            .await
            .unwrap()
            .call(request)
            .await
            .unwrap_err();
        // One error type: the limit's rejection in the breaker's own `Error`.
        assert_eq!(err.rejection(), Some(Rejected::Limited));
    }
    assert_eq!(
        breaker.totals(),
        before,
        "not admitted, not counted, not rejected"
    );
    assert_eq!(breaker.state(), State::Closed, "a limit cannot trip it");
    assert_eq!(limiter.limited(), 5);

    tx.send(status(200)).unwrap();
    assert!(first.await.is_ok());
    assert_eq!((breaker.totals().successes, limiter.in_flight()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_retry_outside_retries_a_limited_call() {
    let clock = ManualClock::new();
    let limiter = Arc::new(Limiter::new(Fixed::new(1)));
    let budget = RetryBudget::new(1.0).unwrap().clock(clock.clone());
    let retry = Retry::new(3).unwrap().budget(budget).seed(7);
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()))
        .layer(LimitLayer::shared(Arc::clone(&limiter)).clock(clock.clone()))
        .service(tower::service_fn(
            |n: u32| async move { Ok::<_, BoxError>(n) },
        ));

    // The one place, taken by a call elsewhere; given back while the retry waits.
    let elsewhere = limiter.try_acquire_owned(clock.now()).unwrap();
    let (answer, ()) = tokio::join!(service.oneshot(7), async move {
        tokio::task::yield_now().await;
        elsewhere.ignore();
    });
    assert_eq!(answer.unwrap(), 7, "the retry found a place");
    assert_eq!(limiter.limited(), 1);
    assert_eq!(retry.stats().retries, 1, "paid for in the budget");
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_never_retries_a_breakers_rejection_under_the_limit() {
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .clock(ManualClock::new())
            .build(),
    );
    let clock = ManualClock::new();
    let retry = Retry::new(3)
        .unwrap()
        .budget(RetryBudget::new(1.0).unwrap().clock(clock.clone()))
        .seed(7);
    let layer = LimitLayer::new(Fixed::new(4))
        .clock(clock)
        .on_rejected(IntoInner);
    let limiter = Arc::clone(layer.limiter());
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()))
        .layer(layer)
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .service(tower::service_fn(|_: u32| async {
            Err::<u32, BoxError>("refused".into())
        }));

    // The first attempt fails and trips the breaker; the retry meets its rejection, and stops.
    let err = service.oneshot(1).await.unwrap_err();
    assert!(
        matches!(err.rejection(), Some(Rejected::Open { .. })),
        "{err:?}"
    );
    assert_eq!(retry.stats().retries, 1);
    assert_eq!((limiter.in_flight(), limiter.limited()), (0, 0));
}

/// Against a real axum server on 127.0.0.1 that never answers: the calls beyond the limit
/// are shed at once, without reaching it; once the hung calls are cancelled, their places
/// come back.
#[test]
fn calls_beyond_the_limit_to_a_hung_upstream_are_shed() {
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use lazybreaker_test_support::{Upstream, HANG, OK};

    lazybreaker_test_support::run(async {
        let upstream = Upstream::default();
        upstream.set(HANG);
        let uri: http::Uri = format!("http://{}/", upstream.serve().await)
            .parse()
            .unwrap();
        let client: Client<_, http_body_util::Empty<axum::body::Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let layer = LimitLayer::http(Fixed::new(2));
        let limiter = Arc::clone(layer.limiter());
        let service = layer.layer(client);
        let get = || Request::get(uri.clone()).body(Default::default()).unwrap();

        let hung: Vec<_> = (0..2)
            .map(|_| tokio::spawn(service.clone().oneshot(get())))
            .collect();
        while upstream.hits() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(limiter.in_flight(), 2);
        for _ in 0..10 {
            let err = service.clone().oneshot(get()).await.unwrap_err();
            assert!(matches!(err, Error::Rejected(Rejected::Limited)), "{err:?}");
        }
        assert_eq!(
            (upstream.hits(), limiter.limited()),
            (2, 10),
            "shed, never sent"
        );

        for task in hung {
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
        }
        assert_eq!(
            limiter.in_flight(),
            0,
            "cancelled calls give their places back"
        );
        upstream.set(OK);
        let response = service.clone().oneshot(get()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(limiter.in_flight(), 0);
    });
}
