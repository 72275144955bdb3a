//! The tower layer in a real stack: admission in `call`, rejections as
//! failed futures, an open breaker ready at once even when the inner service is not, timeouts
//! inside and outside the breaker, and `Error<BoxError>` composing with outer layers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::{Breaker, Error, Rejected, State};
use lazybreaker_tower::BreakerLayer;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

fn trips_on_first_failure() -> Arc<Breaker> {
    Arc::new(
        Breaker::builder()
            .policy(lazybreaker::policy::ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(60))
            .build(),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// A service that answers `Err("refused")` when asked to fail, else `Ok("pong")`, and counts
/// the calls that reached it.
fn counting_service() -> (
    Arc<AtomicUsize>,
    impl Service<
            bool,
            Response = &'static str,
            Error = &'static str,
            Future = impl std::future::Future<Output = Result<&'static str, &'static str>> + Send,
        > + Clone,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let inner = tower::service_fn(move |fail: bool| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            if fail {
                Err("refused")
            } else {
                Ok("pong")
            }
        }
    });
    (calls, inner)
}

#[test]
fn calls_go_through_and_failures_trip_it() {
    let breaker = trips_on_first_failure();
    let (calls, inner) = counting_service();
    let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(inner);
    runtime().block_on(async {
        let r = service.ready().await.unwrap().call(false).await;
        assert_eq!(r.unwrap(), "pong");
        let r = service.ready().await.unwrap().call(true).await;
        assert!(matches!(r, Err(Error::Inner("refused"))));
        assert_eq!(breaker.state(), State::Open);
        let r = service.ready().await.unwrap().call(false).await;
        assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
    });
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the rejected call never reached it"
    );
}

/// A layer around a breaker in dry run lets every call through, the breaker tripping all
/// the same: the shadow beside a real layer.
#[test]
fn a_dry_run_layer_lets_every_call_through_and_counts_what_it_would_have_rejected() {
    let breaker = Arc::new(
        Breaker::builder()
            .policy(lazybreaker::policy::ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(60))
            .dry_run(true)
            .build(),
    );
    let (calls, inner) = counting_service();
    let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(inner);
    runtime().block_on(async {
        let r = service.ready().await.unwrap().call(true).await;
        assert!(matches!(r, Err(Error::Inner("refused"))));
        assert_eq!(breaker.state(), State::Open);
        for _ in 0..3 {
            let r = service.ready().await.unwrap().call(false).await;
            assert_eq!(r.unwrap(), "pong");
        }
    });
    assert_eq!(calls.load(Ordering::SeqCst), 4, "every call reached it");
    assert_eq!(
        breaker.state(),
        State::Open,
        "the shadows' successes changed nothing"
    );
    let t = breaker.totals();
    assert_eq!((t.admitted, t.would_reject, t.rejected_open), (1, 3, 0));
}

/// An inner service that is never ready.
#[derive(Clone)]
struct NeverReady;

impl Service<()> for NeverReady {
    type Response = ();
    type Error = BoxError;
    type Future = std::future::Ready<Result<(), BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Pending
    }

    fn call(&mut self, _: ()) -> Self::Future {
        unreachable!("never ready, so never called")
    }
}

#[test]
fn an_open_breaker_is_ready_at_once_even_when_the_inner_service_is_not() {
    let breaker = trips_on_first_failure();
    breaker.allow().unwrap().failure();
    let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(NeverReady);
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut fut = service.call(());
    let r = Pin::new(&mut fut).poll(&mut cx);
    assert!(matches!(
        r,
        Poll::Ready(Err(Error::Rejected(Rejected::Open { .. })))
    ));
    // Closed again, the inner service's readiness is what counts.
    let closed = trips_on_first_failure();
    let mut service = BreakerLayer::new(closed).layer(NeverReady);
    assert!(service.poll_ready(&mut cx).is_pending());
}

/// Forced open (the lane sends every call to the lock), too: an operator who takes a hung
/// dependency out must not wait for its saturated inner service.
#[test]
fn a_forced_open_breaker_is_ready_at_once_even_when_the_inner_service_is_not() {
    let breaker = trips_on_first_failure();
    breaker.force_open();
    let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(NeverReady);
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut fut = service.call(());
    let r = Pin::new(&mut fut).poll(&mut cx);
    assert!(matches!(
        r,
        Poll::Ready(Err(Error::Rejected(Rejected::ForcedOpen)))
    ));
    breaker.release();
    assert!(
        service.poll_ready(&mut cx).is_pending(),
        "released: the inner service's turn"
    );
}

#[test]
fn a_classifier_decides_how_responses_count() {
    let breaker = trips_on_first_failure();
    let inner = tower::service_fn(|status: u16| async move { Ok::<_, BoxError>(status) });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .classify(|r: &Result<u16, BoxError>| match r {
            Ok(s) if *s >= 500 => Outcome::Failure,
            Ok(s) if *s >= 400 => Outcome::Excluded,
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        })
        .layer(inner);
    runtime().block_on(async {
        assert_eq!(service.ready().await.unwrap().call(404).await.unwrap(), 404);
        assert_eq!(breaker.state(), State::Closed, "a 404 is excluded");
        assert_eq!(service.ready().await.unwrap().call(503).await.unwrap(), 503);
        assert_eq!(breaker.state(), State::Open, "a 503 is a failure");
    });
}

/// A dependency that never answers.
#[derive(Clone)]
struct Hung;

impl Service<()> for Hung {
    type Response = ();
    type Error = BoxError;
    type Future = std::future::Pending<Result<(), BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ()) -> Self::Future {
        std::future::pending()
    }
}

fn hung() -> Hung {
    Hung
}

#[test]
fn a_timeout_inside_the_breaker_trips_it_on_a_hung_dependency() {
    let breaker = trips_on_first_failure();
    let mut service = ServiceBuilder::new()
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .timeout(Duration::from_millis(20))
        .service(hung());
    runtime().block_on(async {
        let r = service.ready().await.unwrap().call(()).await;
        assert!(matches!(r, Err(Error::Inner(_))), "the timeout's error");
    });
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.totals().failures, 1);
}

#[test]
fn a_timeout_outside_the_breaker_abandons_the_call() {
    let breaker = trips_on_first_failure();
    let mut service = ServiceBuilder::new()
        .timeout(Duration::from_millis(20))
        .layer(BreakerLayer::new(Arc::clone(&breaker)))
        .service(hung());
    runtime().block_on(async {
        let r: Result<(), BoxError> = service.ready().await.unwrap().call(()).await;
        assert!(r.is_err());
    });
    // Cancelled, not failed: by default an abandoned call is an exclusion.
    assert_eq!(breaker.state(), State::Closed);
    let t = breaker.totals();
    assert_eq!((t.abandoned, t.failures), (1, 0));
}

/// `Error<BoxError>` composes: timeouts around and inside the breaker, and the whole stack's
/// error is a `BoxError`.
#[test]
fn the_layer_composes_in_a_stack_of_timeouts() {
    fn assert_stack<S>(_: &S)
    where
        S: Service<(), Error = BoxError> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
    }
    let breaker = trips_on_first_failure();
    let stack = ServiceBuilder::new()
        .timeout(Duration::from_secs(2))
        .layer(BreakerLayer::new(breaker))
        .timeout(Duration::from_secs(1))
        .service(hung());
    assert_stack(&stack);
}

/// The keyed layer: one breaker per key from the request, made on first use; one key
/// tripping leaves the others alone, and its rejections never reach the inner service.
#[test]
fn the_keyed_layer_keeps_a_breaker_per_key() {
    use lazybreaker::Registry;
    use lazybreaker_tower::KeyedBreakerLayer;

    let registry = Arc::new(Registry::new(|_: &String| {
        Breaker::builder().policy(ConsecutiveFailures::new(2).unwrap())
    }));
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = {
        let calls = Arc::clone(&calls);
        tower::service_fn(move |(_, fail): (String, bool)| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if fail {
                    Err("refused")
                } else {
                    Ok("pong")
                }
            }
        })
    };
    let mut service =
        KeyedBreakerLayer::new(Arc::clone(&registry), |r: &(String, bool)| r.0.clone())
            .layer(inner);
    runtime().block_on(async {
        for _ in 0..2 {
            let r = service
                .ready()
                .await
                .unwrap()
                .call(("Sub".into(), true))
                .await;
            assert!(matches!(r, Err(Error::Inner("refused"))));
        }
        let r = service
            .ready()
            .await
            .unwrap()
            .call(("Sub".into(), false))
            .await;
        match r {
            Err(Error::Rejected(by)) => {
                assert!(matches!(by.rejected(), Rejected::Open { .. }));
                assert_eq!(by.breaker(), "Sub", "the rejection names the key's breaker");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let r = service
            .ready()
            .await
            .unwrap()
            .call(("Get".into(), false))
            .await;
        assert_eq!(r.unwrap(), "pong");
    });
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the rejected call never reached it"
    );
    assert_eq!(registry.len(), 2);
    assert_eq!(registry.get("Sub").unwrap().state(), State::Open);
    assert_eq!(registry.get("Get").unwrap().state(), State::Closed);
    assert_eq!(registry.get("Sub").unwrap().name(), "Sub");
}

/// A classifier that reports the dependency's requested back-off (`Err(Some(secs))`) and,
/// for `Err(None)`, panics while asked for it.
#[derive(Clone)]
struct AsksForTime;

impl lazybreaker::Classify<&'static str, Option<u64>> for AsksForTime {
    fn classify(&self, result: &Result<&'static str, Option<u64>>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }

    fn open_for(&self, result: &Result<&'static str, Option<u64>>) -> Option<Duration> {
        match result {
            Err(Some(secs)) => Some(Duration::from_secs(*secs)),
            Err(None) => panic!("the classifier's own bug"),
            Ok(_) => unreachable!("asked only of failures"),
        }
    }
}

#[test]
fn a_classifiers_open_for_opens_the_breaker_for_that_long() {
    let clock = lazybreaker::ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(5).unwrap())
            .max_open_duration(Duration::from_secs(300))
            .clock(clock.clone())
            .build(),
    );
    let inner = tower::service_fn(|r: Result<&'static str, Option<u64>>| async move { r });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .classify(AsksForTime)
        .layer(inner);
    runtime().block_on(async {
        let r = service.ready().await.unwrap().call(Ok("fine")).await;
        assert_eq!(r.unwrap(), "fine");
        let r = service.ready().await.unwrap().call(Err(Some(90))).await;
        assert!(matches!(r, Err(Error::Inner(Some(90)))));
        assert_eq!(
            breaker.state(),
            State::Open,
            "one failure of five, but asked for time"
        );
        let t = breaker.totals();
        assert_eq!((t.successes, t.failures), (1, 1));
        clock.advance(Duration::from_secs(89));
        assert_eq!(breaker.state(), State::Open);
        clock.advance(Duration::from_secs(2));
        assert_eq!(breaker.state(), State::HalfOpen);

        // A failed probe that asks for an hour: open past the policy's 60 s timeout, and
        // bounded by the longest open period, five minutes.
        let r = service.ready().await.unwrap().call(Err(Some(3_600))).await;
        assert!(r.is_err());
        assert_eq!(breaker.state(), State::Open);
        clock.advance(Duration::from_secs(120));
        assert_eq!(breaker.state(), State::Open, "longer than the timeout");
        clock.advance(Duration::from_secs(181));
        assert_eq!(
            breaker.state(),
            State::HalfOpen,
            "no longer than five minutes"
        );
    });
}

#[test]
fn a_panic_in_open_for_counts_the_call_as_excluded_and_keeps_unwinding() {
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .build(),
    );
    let inner = tower::service_fn(|r: Result<&'static str, Option<u64>>| async move { r });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .classify(AsksForTime)
        .layer(inner);
    let rt = runtime();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let _ = service.ready().await.unwrap().call(Err(None)).await;
        })
    }));
    assert!(unwound.is_err(), "the classifier's panic is not swallowed");
    assert_eq!(breaker.state(), State::Closed);
    let t = breaker.totals();
    assert_eq!(
        (t.failures, t.exclusions),
        (0, 1),
        "accounted for, as an exclusion"
    );
}

/// A classifier that counts every `Err` as `outcome` and asks for `secs` seconds.
#[derive(Clone)]
struct Asks {
    outcome: Outcome,
    secs: u64,
}

impl lazybreaker::Classify<(), ()> for Asks {
    fn classify(&self, result: &Result<(), ()>) -> Outcome {
        if result.is_ok() {
            Outcome::Success
        } else {
            self.outcome
        }
    }

    fn open_for(&self, _: &Result<(), ()>) -> Option<Duration> {
        Some(Duration::from_secs(self.secs))
    }
}

/// The transitions a breaker made: (to, open_for).
#[derive(Default)]
struct Opened(std::sync::Mutex<Vec<(State, Option<Duration>)>>);

impl lazybreaker::observe::Observer for Opened {
    fn on_transition(&self, t: &lazybreaker::observe::Transition<'_>) {
        self.0.lock().unwrap().push((t.to, t.open_for));
    }
}

fn asking(
    clock: &lazybreaker::ManualClock,
    threshold: u64,
) -> Arc<Breaker<ConsecutiveFailures, Opened>> {
    Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(threshold).unwrap())
            .timeout(Duration::from_secs(60))
            .clock(clock.clone())
            .observer(Opened::default())
            .build(),
    )
}

/// A fatal result that also asks for time opens for the longer of the two: the fatal
/// result's own open period (the timeout), not the shorter time asked.
#[test]
fn a_fatal_result_that_asks_for_less_time_still_opens_for_the_timeout() {
    let clock = lazybreaker::ManualClock::new();
    let breaker = asking(&clock, 100);
    let inner = tower::service_fn(|_: ()| async { Err::<(), ()>(()) });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .classify(Asks {
            outcome: Outcome::Fatal,
            secs: 1,
        })
        .layer(inner);
    runtime().block_on(async {
        let _ = service.ready().await.unwrap().call(()).await;
    });
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        *breaker.observer().0.lock().unwrap(),
        [(State::Open, Some(Duration::from_secs(60)))],
        "one change, the fatal result's"
    );
    clock.advance(Duration::from_secs(2));
    assert_eq!(breaker.state(), State::Open, "not after the second asked");
    assert_eq!(breaker.totals().failures, 1);
}

/// When the failure that asks for time is the one that trips the policy, observers hear one
/// change, and it carries the longer open period the breaker actually keeps.
#[test]
fn observers_hear_the_open_period_the_dependency_asked_for() {
    let clock = lazybreaker::ManualClock::new();
    let breaker = asking(&clock, 1);
    let inner = tower::service_fn(|_: ()| async { Err::<(), ()>(()) });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .classify(Asks {
            outcome: Outcome::Failure,
            secs: 120,
        })
        .layer(inner);
    runtime().block_on(async {
        let _ = service.ready().await.unwrap().call(()).await;
    });
    assert_eq!(
        *breaker.observer().0.lock().unwrap(),
        [(State::Open, Some(Duration::from_secs(120)))]
    );
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        breaker.state(),
        State::Open,
        "past the timeout, within the 120 s"
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// Half-open and full: the fallback answers the extra request, counted as a half-open
/// rejection; the probe in flight decides, and the fallback answer is no outcome.
#[test]
fn a_fallback_answers_a_full_half_open_breaker_and_is_no_outcome() {
    let clock = lazybreaker::ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .max_requests(1)
            .timeout(Duration::from_secs(60))
            .clock(clock.clone())
            .build(),
    );
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(Some(released)));
    let inner = tower::service_fn(move |fail: bool| {
        let released = if fail {
            None
        } else {
            released.lock().unwrap().take()
        };
        async move {
            if let Some(released) = released {
                let _ = released.await; // the probe waits for the test
            }
            if fail {
                Err("refused")
            } else {
                Ok("real")
            }
        }
    });
    let mut service = BreakerLayer::new(Arc::clone(&breaker))
        .fallback(|_: &Rejected| "fallback")
        .layer(inner);
    runtime().block_on(async {
        assert_eq!(
            service.ready().await.unwrap().call(true).await,
            Err("refused")
        );
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(
            service.ready().await.unwrap().call(false).await,
            Ok("fallback")
        );
        clock.advance(Duration::from_secs(61));
        let probe = service.ready().await.unwrap().call(false);
        let mut probe = Box::pin(probe);
        assert!(
            futures_poll_once(probe.as_mut()).is_pending(),
            "the probe is in flight"
        );
        let before = breaker.counts();
        assert_eq!(
            service.ready().await.unwrap().call(false).await,
            Ok("fallback")
        );
        assert_eq!(breaker.counts(), before, "a fallback answer is no outcome");
        assert_eq!(breaker.totals().rejected_half_open, 1);
        assert_eq!(breaker.state(), State::HalfOpen);
        release.send(()).unwrap();
        assert_eq!(probe.await, Ok("real"));
        assert_eq!(breaker.state(), State::Closed, "the probe decided");
    });
}

/// Polls `f` once with a no-op waker.
fn futures_poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = std::task::Waker::from(Arc::new(Noop));
    f.poll(&mut Context::from_waker(&waker))
}
