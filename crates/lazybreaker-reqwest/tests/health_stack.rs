//! Health-checked revival through the stack: the tower layer (the check runs in
//! `poll_ready`), the keyed layer (a call holds its request while its breaker's check runs),
//! the fleet (one check per fleet, under the fleet-wide probe lease, against `MemoryStore`),
//! and the reqwest middleware with the TCP and health-path checks, against a real axum
//! server on 127.0.0.1. Breaker time is a `ManualClock`; checks are settled by hand, except
//! the real ones against the server.

use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_test_support::checks::{
    due, poll_once, Check, Log, Noop, Verdict, OPEN_FOR, PAST_OPEN,
};
use lazybreaker_test_support::run;
use tower::{Layer, Service};

/// Polls `service` for readiness once, with a waker that does nothing.
fn poll_ready<S: Service<R>, R>(service: &mut S) -> Poll<Result<(), S::Error>> {
    let waker = Waker::from(Arc::new(Noop));
    service.poll_ready(&mut Context::from_waker(&waker))
}

/// An inner service that counts the requests that reach it.
fn counted(
    hits: &Arc<AtomicUsize>,
) -> impl Service<(), Response = &'static str, Error = Infallible, Future: Unpin + Send + Sync>
       + Clone
       + Send {
    let hits = Arc::clone(hits);
    tower::service_fn(move |()| {
        hits.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok("real"))
    })
}

mod layer {
    use super::*;
    use lazybreaker_tower::BreakerLayer;

    fn checked() -> (Arc<Breaker<ConsecutiveFailures, Log>>, ManualClock, Check) {
        let check = Check::default();
        let (breaker, clock) = due(&check);
        (Arc::new(breaker), clock, check)
    }

    #[test]
    fn the_check_runs_in_poll_ready_and_no_request_reaches_the_service_until_it_passes() {
        let (breaker, clock, check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let layer = BreakerLayer::new(Arc::clone(&breaker));
        let mut service = layer.layer(counted(&hits));
        assert!(
            poll_ready(&mut service).is_pending(),
            "not ready while its check runs"
        );
        assert_eq!(check.runs(), 1);

        // Another service on the same breaker is ready at once, with the check's rejection.
        let mut other = layer.layer(counted(&hits));
        assert!(matches!(poll_ready(&mut other), Poll::Ready(Ok(()))));
        let mut rejected = other.call(());
        assert!(matches!(
            poll_once(&mut rejected),
            Poll::Ready(Err(Error::Rejected(Rejected::Checking)))
        ));
        assert_eq!(check.runs(), 1, "the check runs once");

        // Failed: ready, and the call that follows is rejected for a new open period.
        check.settle(Verdict::Fail);
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        match poll_once(&mut service.call(())) {
            Poll::Ready(Err(Error::Rejected(Rejected::Open { retry_after }))) => {
                assert_eq!(retry_after, OPEN_FOR);
            }
            other => panic!("expected an open rejection, got {other:?}"),
        }
        assert_eq!(
            hits.load(Ordering::SeqCst),
            0,
            "no request reached the service"
        );
        assert_eq!(breaker.state(), State::Open);

        // The next period's check passes: that call is the probe, and closes the breaker.
        clock.advance(PAST_OPEN);
        check.reset();
        assert!(poll_ready(&mut service).is_pending());
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        check.settle(Verdict::Pass);
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        assert!(matches!(
            poll_once(&mut service.call(())),
            Poll::Ready(Ok("real"))
        ));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(breaker.state(), State::Closed);
        let t = breaker.totals();
        assert_eq!((t.health_checks, t.health_checks_failed), (2, 1));
        assert_eq!(
            t.rejected_open, 2,
            "the call during the check, and the failed check's: each counted once"
        );
        assert_eq!(t.successes, 1);
    }

    #[test]
    fn no_lease_is_taken_while_the_inner_service_is_not_ready() {
        let (breaker, _clock, check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let layer = BreakerLayer::new(Arc::clone(&breaker));
        let mut stuck = layer.layer(NeverReady);
        assert!(
            poll_ready(&mut stuck).is_pending(),
            "its inner service is not ready"
        );
        assert_eq!(check.runs(), 0, "no check started, no lease held");
        // Another service, whose inner service is ready, wins the check.
        let mut ready = layer.layer(counted(&hits));
        assert!(poll_ready(&mut ready).is_pending());
        assert_eq!(check.runs(), 1);
    }

    /// An inner service that is never ready.
    struct NeverReady;

    impl Service<()> for NeverReady {
        type Response = &'static str;
        type Error = Infallible;
        type Future = std::future::Ready<Result<&'static str, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Pending
        }
        fn call(&mut self, (): ()) -> Self::Future {
            unreachable!("never ready")
        }
    }

    #[test]
    fn the_checks_wakeup_reaches_the_task_waiting_for_readiness() {
        use tower::ServiceExt;
        let (tx, rx) = tokio::sync::oneshot::channel::<bool>();
        let rx = std::sync::Mutex::new(Some(rx));
        let clock = ManualClock::new();
        let breaker = Arc::new(
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
                .clock(clock.clone())
                .health_check(move || {
                    let rx = rx.lock().unwrap().take();
                    async move {
                        match rx {
                            Some(rx) => rx.await.unwrap_or(false),
                            None => false,
                        }
                    }
                })
                .build(),
        );
        breaker.allow().unwrap().failure();
        clock.advance(PAST_OPEN);
        let hits = Arc::new(AtomicUsize::new(0));
        let service = BreakerLayer::new(Arc::clone(&breaker)).layer(counted(&hits));
        run(async {
            let call = tokio::spawn(service.oneshot(()));
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(!call.is_finished(), "waiting for its check");
            assert_eq!(hits.load(Ordering::SeqCst), 0);
            tx.send(true).unwrap();
            // Woken by the check's own future: no poll from here.
            assert_eq!(call.await.unwrap().unwrap(), "real");
        });
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert_eq!(breaker.state(), State::Closed);
    }

    #[test]
    fn a_service_holding_a_running_check_is_still_send_and_sync() {
        // A stack (axum's `Router::layer`) asks its services to be `Send + Sync`; a check's
        // future need only be `Send`.
        fn send_sync<T: Send + Sync>(_: &T) {}
        let (breaker, _clock, _check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let mut service = BreakerLayer::new(breaker).layer(counted(&hits));
        assert!(poll_ready(&mut service).is_pending());
        send_sync(&service);
        send_sync(&service.call(())); // a response future too
    }

    #[test]
    fn a_service_dropped_during_its_check_releases_the_lease() {
        let (breaker, _clock, check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let layer = BreakerLayer::new(Arc::clone(&breaker));
        let mut first = layer.layer(counted(&hits));
        assert!(poll_ready(&mut first).is_pending());
        drop(first);
        let mut second = layer.layer(counted(&hits));
        assert!(
            poll_ready(&mut second).is_pending(),
            "the next service runs the check again"
        );
        assert_eq!(check.runs(), 2);
        assert_eq!(breaker.totals().health_checks, 0, "no verdict yet");
    }

    #[test]
    fn a_panicking_check_fails_and_keeps_unwinding_out_of_poll_ready() {
        let (breaker, _clock, check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(counted(&hits));
        check.settle(Verdict::Panic);
        let unwound = catch_unwind(AssertUnwindSafe(|| poll_ready(&mut service)));
        assert!(unwound.is_err(), "the check's panic is not swallowed");
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().health_checks_failed, 1);
        // The service is still usable: the new open period rejects.
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        assert!(matches!(
            poll_once(&mut service.call(())),
            Poll::Ready(Err(Error::Rejected(Rejected::Open { .. })))
        ));
        assert_eq!(hits.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_call_without_poll_ready_is_held_back_and_does_not_revive_the_breaker() {
        let (breaker, _clock, check) = checked();
        let hits = Arc::new(AtomicUsize::new(0));
        let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(counted(&hits));
        assert!(matches!(
            poll_once(&mut service.call(())),
            Poll::Ready(Err(Error::Rejected(Rejected::Checking)))
        ));
        assert_eq!((hits.load(Ordering::SeqCst), check.runs()), (0, 0));
        assert_eq!(breaker.state(), State::Open, "not revived unchecked");
        // Its readiness then runs the check as usual.
        assert!(poll_ready(&mut service).is_pending());
        assert_eq!(check.runs(), 1);
    }

    #[test]
    fn a_breaker_without_a_check_probes_from_poll_ready_as_before() {
        let clock = ManualClock::new();
        let breaker = Arc::new(
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
                .clock(clock.clone())
                .build(),
        );
        breaker.allow().unwrap().failure();
        clock.advance(PAST_OPEN);
        let hits = Arc::new(AtomicUsize::new(0));
        let mut service = BreakerLayer::new(Arc::clone(&breaker)).layer(counted(&hits));
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        assert!(matches!(
            poll_once(&mut service.call(())),
            Poll::Ready(Ok("real"))
        ));
        assert_eq!(breaker.state(), State::Closed);
    }
}

mod keyed {
    use super::*;
    use lazybreaker::Registry;
    use lazybreaker_tower::KeyedBreakerLayer;
    use std::collections::HashMap;
    use std::sync::Mutex;

    type Hits = Arc<Mutex<HashMap<&'static str, usize>>>;

    /// An inner service keyed by the request's first field, failing when its second is
    /// `true`, counting what reaches it per key.
    fn per_key(
        hits: &Hits,
    ) -> impl Service<
        (&'static str, bool),
        Response = &'static str,
        Error = &'static str,
        Future: Unpin,
    > + Clone {
        let hits = Arc::clone(hits);
        tower::service_fn(move |(key, fail): (&'static str, bool)| {
            *hits.lock().unwrap().entry(key).or_default() += 1;
            std::future::ready(if fail { Err("down") } else { Ok("real") })
        })
    }

    #[test]
    fn a_call_that_wins_its_breakers_check_holds_its_request_until_the_check_passes() {
        let clock = ManualClock::new();
        let check = Check::default();
        let c = check.clone();
        let registry = Registry::new(move |_: &&'static str| {
            let c = c.clone();
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
                .health_check(move || c.run())
        })
        .clock(clock.clone());
        let registry = Arc::new(registry);
        let hits: Hits = Arc::default();
        let layer = KeyedBreakerLayer::new(Arc::clone(&registry), |r: &(&'static str, bool)| r.0);
        let mut service = layer.layer(per_key(&hits));
        let hits_of = |key| hits.lock().unwrap().get(key).copied().unwrap_or(0);

        assert!(matches!(
            poll_once(&mut service.call(("a", true))),
            Poll::Ready(Err(Error::Inner("down")))
        ));
        assert_eq!(registry.breaker(&"a").state(), State::Open);
        clock.advance(PAST_OPEN);

        let mut first = service.call(("a", false));
        assert!(poll_once(&mut first).is_pending(), "its check runs first");
        assert_eq!((check.runs(), hits_of("a")), (1, 1));
        match poll_once(&mut service.call(("a", false))) {
            Poll::Ready(Err(Error::Rejected(by))) => {
                assert_eq!((by.breaker(), by.rejected()), ("a", Rejected::Checking));
            }
            other => panic!("expected a rejection during the check, got {other:?}"),
        }
        // Another key is not held up.
        assert!(matches!(
            poll_once(&mut service.call(("b", false))),
            Poll::Ready(Ok("real"))
        ));

        check.settle(Verdict::Fail);
        match poll_once(&mut first) {
            Poll::Ready(Err(Error::Rejected(by))) => {
                assert!(matches!(by.rejected(), Rejected::Open { .. }), "{by}");
            }
            other => panic!("expected an open rejection, got {other:?}"),
        }
        assert_eq!(hits_of("a"), 1, "only the call that tripped it reached `a`");

        clock.advance(PAST_OPEN);
        check.reset();
        let mut second = service.call(("a", false));
        assert!(poll_once(&mut second).is_pending());
        check.settle(Verdict::Pass);
        assert!(matches!(poll_once(&mut second), Poll::Ready(Ok("real"))));
        assert_eq!(hits_of("a"), 2);
        let a = registry.breaker(&"a");
        assert_eq!(a.state(), State::Closed);
        let t = a.totals();
        assert_eq!((t.health_checks, t.health_checks_failed), (2, 1));
    }

    /// A registry of breakers that trip at the first failure, checked by `check`.
    fn registry(clock: &ManualClock, check: &Check) -> Arc<Registry<&'static str>> {
        let c = check.clone();
        Arc::new(
            Registry::new(move |_: &&'static str| {
                let c = c.clone();
                Breaker::builder()
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .timeout(OPEN_FOR)
                    .health_check(move || c.run())
            })
            .clock(clock.clone()),
        )
    }

    #[test]
    fn a_panicking_check_fails_the_keyed_call_and_keeps_unwinding() {
        let clock = ManualClock::new();
        let check = Check::default();
        let registry = registry(&clock, &check);
        let hits: Hits = Arc::default();
        let mut service =
            KeyedBreakerLayer::new(Arc::clone(&registry), |r: &(&'static str, bool)| r.0)
                .layer(per_key(&hits));
        let _ = poll_once(&mut service.call(("a", true)));
        clock.advance(PAST_OPEN);
        let mut call = service.call(("a", false));
        assert!(poll_once(&mut call).is_pending());
        check.settle(Verdict::Panic);
        let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(&mut call)));
        assert!(unwound.is_err(), "the check's panic is not swallowed");
        let a = registry.breaker(&"a");
        assert_eq!(a.state(), State::Open);
        assert_eq!(a.totals().health_checks_failed, 1);
        assert_eq!(
            hits.lock().unwrap()["a"],
            1,
            "the held request was never sent"
        );
    }

    #[test]
    fn a_keyed_call_dropped_during_its_check_releases_the_lease_unsent() {
        let clock = ManualClock::new();
        let check = Check::default();
        let c = check.clone();
        let registry = Arc::new(
            Registry::new(move |_: &&'static str| {
                let c = c.clone();
                Breaker::builder()
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .timeout(OPEN_FOR)
                    .health_check(move || c.run())
            })
            .clock(clock.clone()),
        );
        let hits: Hits = Arc::default();
        let mut service =
            KeyedBreakerLayer::new(Arc::clone(&registry), |r: &(&'static str, bool)| r.0)
                .layer(per_key(&hits));
        let _ = poll_once(&mut service.call(("a", true)));
        clock.advance(PAST_OPEN);
        let mut first = service.call(("a", false));
        assert!(poll_once(&mut first).is_pending());
        drop(first);
        let mut second = service.call(("a", false));
        assert!(poll_once(&mut second).is_pending(), "checks again");
        assert_eq!(check.runs(), 2);
        assert_eq!(
            hits.lock().unwrap()["a"],
            1,
            "the dropped request was never sent"
        );
    }
}

mod fleet {
    use super::*;
    use lazybreaker_fleet::{MemoryStore, SharedBreaker};
    use std::future::Future;
    use std::pin::Pin;

    type Instance = SharedBreaker<MemoryStore, ConsecutiveFailures>;

    fn member(store: &MemoryStore, clock: &ManualClock, check: &Check, probes: u32) -> Instance {
        let c = check.clone();
        SharedBreaker::builder(store.clone())
            .build(
                Breaker::builder()
                    .name("payments")
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .max_requests(probes)
                    .timeout(OPEN_FOR)
                    .clock(clock.clone())
                    .health_check(move || c.run()),
            )
            .unwrap()
    }

    /// A request that counts itself sent as it is built.
    fn counted_request(
        sent: &AtomicUsize,
    ) -> std::future::Ready<Result<&'static str, &'static str>> {
        sent.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok("real"))
    }

    /// Polls `f` once from inside the runtime (the store's timeouts need its timers).
    async fn poll_in<F: Future + ?Sized>(f: &mut Pin<Box<F>>) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await
    }

    /// Two instances of one breaker, tripped by `a` and followed by `b`, past the open
    /// period, the fleet's half-open period admitting `probes` probes at once.
    fn tripped_with(probes: u32) -> (Instance, Instance, Check, Check, ManualClock) {
        let (store, clock) = (MemoryStore::new(), ManualClock::new());
        let (check_a, check_b) = (Check::default(), Check::default());
        let a = member(&store, &clock, &check_a, probes);
        let b = member(&store, &clock, &check_b, probes);
        run(async {
            let failed = a.execute(|| async { Err::<(), _>("down") }).await;
            assert!(matches!(failed, Err(Error::Inner("down"))));
            b.sync().await;
        });
        assert_eq!((a.state(), b.state()), (State::Open, State::Open));
        clock.advance(PAST_OPEN);
        (a, b, check_a, check_b, clock)
    }

    fn tripped() -> (Instance, Instance, Check, Check, ManualClock) {
        tripped_with(1)
    }

    #[test]
    fn the_check_holds_the_fleet_alone_even_with_room_for_more_probes() {
        let (a, b, check_a, check_b, _clock) = tripped_with(3);
        run(async {
            let mut first = Box::pin(a.execute(|| async { Ok::<_, &'static str>("real") }));
            assert!(poll_in(&mut first).await.is_pending());
            let during = b.execute(|| async { Ok::<_, &'static str>("real") }).await;
            assert!(
                matches!(during, Err(Error::Rejected(Rejected::Checking))),
                "{during:?}"
            );
            assert_eq!(b.stats().fleet_rejections, 1);
            check_a.settle(Verdict::Pass);
            assert!(matches!(poll_in(&mut first).await, Poll::Ready(Ok("real"))));
        });
        assert_eq!(check_b.runs(), 0);
    }

    #[test]
    fn one_check_runs_per_fleet_and_its_call_is_the_fleets_probe() {
        let (a, b, check_a, check_b, _clock) = tripped();
        let sent = AtomicUsize::new(0);
        let request = || counted_request(&sent);
        run(async {
            let mut first = Box::pin(a.execute(request));
            assert!(poll_in(&mut first).await.is_pending(), "a runs the check");
            // b finds the fleet's slot held: rejected at once, its own check not run.
            let during = b.execute(request).await;
            assert!(
                matches!(during, Err(Error::Rejected(Rejected::Checking))),
                "{during:?}"
            );
            assert_eq!((check_a.runs(), check_b.runs()), (1, 0));
            assert_eq!(sent.load(Ordering::SeqCst), 0);
            assert_eq!(
                b.breaker().totals().rejected_open,
                1,
                "b counts the rejection it answered"
            );
            check_a.settle(Verdict::Pass);
            assert!(matches!(poll_in(&mut first).await, Poll::Ready(Ok("real"))));
            assert_eq!(sent.load(Ordering::SeqCst), 1);
            assert_eq!(a.state(), State::Closed, "the probe closed the fleet");
            // b follows the fleet's recovery: closed, without a check of its own.
            b.sync().await;
            assert_eq!(b.state(), State::Closed);
            assert!(b.execute(request).await.is_ok());
        });
        assert_eq!(check_b.runs(), 0, "one check for the fleet");
        let t = a.breaker().totals();
        assert_eq!((t.health_checks, t.health_checks_failed), (1, 0));
    }

    #[test]
    fn a_failed_check_reopens_the_fleet_and_sends_nothing() {
        let (a, b, check_a, check_b, _clock) = tripped();
        let sent = AtomicUsize::new(0);
        let request = || counted_request(&sent);
        run(async {
            check_a.settle(Verdict::Fail);
            let failed = a.execute(request).await;
            assert!(
                matches!(failed, Err(Error::Rejected(Rejected::Open { .. }))),
                "{failed:?}"
            );
            let published = a.stats().published;
            assert_eq!(published, 2, "the trip, then the reopening");
            b.sync().await;
            assert_eq!(b.state(), State::Open, "b follows the new open period");
            let rejected = b.execute(request).await;
            assert!(matches!(
                rejected,
                Err(Error::Rejected(Rejected::Open { .. }))
            ));
        });
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        assert_eq!((check_a.runs(), check_b.runs()), (1, 0));
        assert_eq!(a.breaker().totals().health_checks_failed, 1);
    }

    #[test]
    fn a_panicking_check_reopens_the_fleet_and_keeps_unwinding() {
        let (a, b, check_a, _check_b, _clock) = tripped();
        check_a.settle(Verdict::Panic);
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            run(a.execute(|| async { Ok::<_, &'static str>("real") }))
        }));
        assert!(unwound.is_err(), "the check's panic is not swallowed");
        assert_eq!(a.state(), State::Open);
        assert_eq!(a.stats().published, 2, "the reopening was published first");
        run(b.sync());
        assert_eq!(b.state(), State::Open);
    }
}

mod reqwest_checks {
    use super::*;
    use lazybreaker::http::StatusRules;
    use lazybreaker::Registry;
    use lazybreaker_reqwest::{
        check_path, check_tcp, path_check, rejection, tcp_check, BreakerMiddleware,
    };
    use lazybreaker_test_support::run_bounded;
    use std::net::SocketAddr;
    use std::sync::atomic::AtomicU16;
    use std::time::Duration;

    /// The checks' own deadline (real time: they talk to a real server).
    const DEADLINE: Duration = Duration::from_millis(400);
    /// The most a test may take, on the two-thread runtime (a client's connection task runs
    /// while the test awaits what it holds up).
    const BOUND: Duration = Duration::from_secs(10);

    /// A node: `/health` answers the status in `health`, `/api` the one in `api`, and each
    /// path counts its requests.
    #[derive(Clone, Default)]
    struct Node {
        health: Arc<AtomicU16>,
        api: Arc<AtomicU16>,
        health_hits: Arc<AtomicUsize>,
        api_hits: Arc<AtomicUsize>,
    }

    fn status(code: &AtomicU16) -> axum::http::StatusCode {
        axum::http::StatusCode::from_u16(code.load(Ordering::SeqCst)).unwrap()
    }

    async fn serve(node: &Node) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (h, a) = (node.clone(), node.clone());
        let app = axum::Router::new()
            .route(
                "/health",
                axum::routing::get(move || async move {
                    h.health_hits.fetch_add(1, Ordering::SeqCst);
                    status(&h.health)
                }),
            )
            .route(
                "/api",
                axum::routing::get(move || async move {
                    a.api_hits.fetch_add(1, Ordering::SeqCst);
                    status(&a.api)
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    #[test]
    fn tcp_check_passes_on_a_listener_and_fails_on_a_closed_port() {
        run_bounded(BOUND, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let check = tcp_check(addr, DEADLINE);
            assert!(check().await, "a listener accepts");
            drop(listener);
            assert!(!check().await, "a closed port refuses");
        });
    }

    #[test]
    fn path_check_passes_on_2xx_only() {
        run_bounded(BOUND, async {
            let node = Node::default();
            let addr = serve(&node).await;
            let url = format!("http://{addr}/health").parse().unwrap();
            let check = path_check(reqwest::Client::new(), url, DEADLINE);
            for (code, passes) in [(200, true), (204, true), (500, false), (404, false)] {
                node.health.store(code, Ordering::SeqCst);
                assert_eq!(check().await, passes, "status {code}");
            }
            assert_eq!(node.health_hits.load(Ordering::SeqCst), 4);
        });
    }

    #[test]
    fn check_tcp_runs_one_check_in_one_call() {
        run_bounded(BOUND, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            assert!(check_tcp(addr, DEADLINE).await, "a listener accepts");
            drop(listener);
            assert!(!check_tcp(addr, DEADLINE).await, "a closed port refuses");
        });
    }

    #[test]
    fn check_path_runs_one_check_in_one_call_and_passes_on_2xx_only() {
        run_bounded(BOUND, async {
            let node = Node::default();
            let addr = serve(&node).await;
            let client = reqwest::Client::new();
            let url = format!("http://{addr}/health");
            for (code, passes) in [(200, true), (204, true), (500, false), (404, false)] {
                node.health.store(code, Ordering::SeqCst);
                assert_eq!(
                    check_path(&client, &url, DEADLINE).await,
                    passes,
                    "status {code}"
                );
            }
            assert_eq!(node.health_hits.load(Ordering::SeqCst), 4);
            // A URL that does not parse fails the check, and sends nothing.
            assert!(!check_path(&client, "not a url", DEADLINE).await);
            assert_eq!(node.health_hits.load(Ordering::SeqCst), 4);
        });
    }

    #[test]
    fn the_middleware_sends_no_request_to_a_host_until_its_health_path_answers_2xx() {
        run_bounded(BOUND, async {
            let node = Node::default();
            node.api.store(500, Ordering::SeqCst);
            node.health.store(500, Ordering::SeqCst);
            let addr = serve(&node).await;
            let clock = ManualClock::new();
            let checker = reqwest::Client::new();
            let registry = Arc::new(
                Registry::new(move |host: &String| {
                    let url = format!("http://{host}/health").parse().unwrap();
                    Breaker::builder()
                        .policy(ConsecutiveFailures::new(1).unwrap())
                        .timeout(OPEN_FOR)
                        .health_check(path_check(checker.clone(), url, DEADLINE))
                })
                .clock(clock.clone()),
            );
            let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
                .with(BreakerMiddleware::new(Arc::clone(&registry)).rules(StatusRules::new()))
                .build();
            let api = format!("http://{addr}/api");
            let api_hits = || node.api_hits.load(Ordering::SeqCst);

            let tripped = client.get(&api).send().await.unwrap();
            assert_eq!(tripped.status(), 500);
            assert_eq!(api_hits(), 1);

            // Broken: the node accepts connections, its health path answers 500.
            node.api.store(200, Ordering::SeqCst);
            clock.advance(PAST_OPEN);
            let err = client.get(&api).send().await.unwrap_err();
            let by = rejection(&err).expect("a rejection");
            assert!(matches!(by.rejected(), Rejected::Open { .. }), "{by}");
            assert_eq!(api_hits(), 1, "the request was not sent");
            assert_eq!(node.health_hits.load(Ordering::SeqCst), 1);

            // Healthy: the check passes, and that request is the probe.
            node.health.store(200, Ordering::SeqCst);
            clock.advance(PAST_OPEN);
            let revived = client.get(&api).send().await.unwrap();
            assert_eq!(revived.status(), 200);
            assert_eq!(api_hits(), 2);
            let breaker = registry.breaker(&addr.to_string());
            assert_eq!(breaker.state(), State::Closed);
            let t = breaker.totals();
            assert_eq!((t.health_checks, t.health_checks_failed), (2, 1));
        });
    }
}
