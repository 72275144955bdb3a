//! Hedging through tower: `HedgeLayer` around a service. A slow attempt is hedged and the
//! fast answer wins, the slow attempt dropped; a failure sends the next attempt at once; a
//! breaker's rejection, a request sent once and a hedge past the deadline are not hedged;
//! `max_attempts` and the budget bound the hedges; a percentile hedge learns its delay.
//! The waits run on tokio's paused clock (no wall time), the budgets on a `ManualClock`;
//! the last test hedges a hung request to a real axum server on 127.0.0.1.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::retry::{Hedge, RetryBudget, TokenBucket};
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_test_support::{Upstream, HANG, OK};
use lazybreaker_tower::{BreakerLayer, HedgeLayer};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

const MS: Duration = Duration::from_millis(1);

/// A budget of 100 % on `clock`, with the default reserve.
fn budget(clock: &ManualClock) -> RetryBudget {
    RetryBudget::new(1.0).unwrap().clock(clock.clone())
}

/// Counts an attempt dropped before it answered.
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

/// An attempt's wait in milliseconds (`None`: forever), and whether it answers.
type Step = (Option<u64>, bool);

/// What the scripted service's attempts do, in order: wait this long (`None`: forever),
/// then answer (`true`) or fail; once the script is spent, 10 ms and an answer.
#[derive(Clone, Default)]
struct Script {
    plan: Arc<Mutex<VecDeque<Step>>>,
    calls: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Script {
    fn then(&self, wait_ms: Option<u64>, answers: bool) -> &Self {
        self.plan.lock().unwrap().push_back((wait_ms, answers));
        self
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// The service: answers `(request, the attempt's index)`.
    #[allow(clippy::type_complexity)]
    fn service(
        &self,
    ) -> impl Service<
        u32,
        Response = (u32, usize),
        Error = io::Error,
        Future = impl std::future::Future<Output = io::Result<(u32, usize)>> + Send,
    > + Clone {
        let script = self.clone();
        tower::service_fn(move |n: u32| {
            let index = script.calls.fetch_add(1, Ordering::SeqCst);
            let (wait, answers) = script
                .plan
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or((Some(10), true));
            let mut guard = Unfinished(Some(Arc::clone(&script.dropped)));
            async move {
                match wait {
                    Some(ms) => tokio::time::sleep(MS * ms as u32).await,
                    None => std::future::pending().await,
                }
                guard.finish();
                if answers {
                    Ok((n, index))
                } else {
                    Err(io::Error::other("reset"))
                }
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_and_the_fast_answer_wins() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(MS * 50).budget(budget(&clock));
    let layer = HedgeLayer::try_new(hedge.clone()).unwrap();
    let script = Script::default();
    script.then(Some(1_000), true).then(Some(10), true);
    let mut service = layer.layer(script.service());

    let started = Instant::now();
    let answer = service.ready().await.unwrap().call(7).await.unwrap();
    assert_eq!(answer, (7, 1), "the hedge's answer");
    assert_eq!(
        started.elapsed(),
        MS * 60,
        "the delay, then the hedge's 10 ms"
    );
    assert_eq!(script.calls(), 2);
    assert_eq!(script.dropped(), 1, "the slow attempt, dropped");
    assert_eq!(hedge.stats().hedges, 1);
    assert_eq!((layer.won(), layer.cancelled()), (1, 1));

    // A fast first attempt: no hedge, nothing dropped.
    let started = Instant::now();
    let answer = service.ready().await.unwrap().call(8).await.unwrap();
    assert_eq!(answer, (8, 2));
    assert_eq!(started.elapsed(), MS * 10);
    assert_eq!((script.calls(), script.dropped()), (3, 1));
    assert_eq!(hedge.stats().hedges, 1);
    assert_eq!((layer.won(), layer.cancelled()), (1, 1));

    // The first attempt answers before the hedge: the hedge is the one dropped.
    script.then(Some(80), true).then(Some(100), true);
    let answer = service.ready().await.unwrap().call(9).await.unwrap();
    assert_eq!(answer, (9, 3), "the first attempt's");
    assert_eq!((script.calls(), script.dropped()), (5, 2));
    assert_eq!((layer.won(), layer.cancelled()), (1, 2));
    // The hedge's own counts say the same.
    let stats = hedge.stats();
    assert_eq!((stats.won, stats.cancelled), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_failure_sends_the_next_attempt_at_once() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(Duration::from_secs(1))
        .max_attempts(3)
        .budget(budget(&clock));
    let script = Script::default();
    script.then(Some(5), false).then(Some(5), true);
    let mut service = HedgeLayer::new(hedge.clone()).layer(script.service());

    let started = Instant::now();
    let answer = service.ready().await.unwrap().call(1).await.unwrap();
    assert_eq!(answer, (1, 1));
    assert_eq!(
        started.elapsed(),
        MS * 10,
        "no delay waited after the failure"
    );
    assert_eq!(hedge.stats().hedges, 1);

    // Every attempt fails: three attempts, and the last failure is the answer.
    for _ in 0..3 {
        script.then(Some(0), false);
    }
    let started = Instant::now();
    let err = service.ready().await.unwrap().call(2).await.unwrap_err();
    assert_eq!(err.to_string(), "reset");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(script.calls(), 5);
    assert_eq!(hedge.stats().hedges, 3);
}

#[tokio::test(start_paused = true)]
async fn max_attempts_bounds_the_hedges() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(MS * 10).max_attempts(3).budget(budget(&clock));
    let layer = HedgeLayer::new(hedge.clone());
    let script = Script::default();
    for _ in 0..10 {
        script.then(None, true); // never answers
    }
    let mut service = layer.layer(script.service());

    let ready = service.ready().await.unwrap();
    let call = tokio::time::timeout(Duration::from_secs(1), ready.call(1)).await;
    assert!(call.is_err(), "no attempt answered");
    assert_eq!(script.calls(), 3, "the first and two hedges, no more");
    assert_eq!(hedge.stats().hedges, 2);
    assert_eq!(script.dropped(), 3, "every attempt dropped with the call");
    assert_eq!(
        layer.cancelled(),
        0,
        "a call dropped is not a hedge's cancel"
    );

    // One attempt: no hedge at all.
    let hedge = Hedge::after(MS * 10).max_attempts(1).budget(budget(&clock));
    let mut service = HedgeLayer::new(hedge.clone()).layer(script.service());
    let ready = service.ready().await.unwrap();
    let call = tokio::time::timeout(Duration::from_secs(1), ready.call(2)).await;
    assert!(call.is_err());
    assert_eq!(script.calls(), 4);
    assert_eq!(hedge.stats().hedges, 0);
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_the_hedges() {
    let clock = ManualClock::new();
    // 20 % of the calls, no reserve.
    let budget = RetryBudget::new(0.2)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone());
    let hedge = Hedge::after(MS * 10).budget(budget.clone());
    let script = Script::default();
    let mut service = HedgeLayer::new(hedge.clone()).layer(script.service());

    for n in 0..10 {
        // Every first attempt is slow.
        script.then(Some(100), true);
        service.ready().await.unwrap().call(n).await.unwrap();
    }
    let stats = hedge.stats();
    assert_eq!(stats.hedges, 2, "20 % of ten calls: {stats:?}");
    assert_eq!(stats.budget_denied, 8);
    assert_eq!(script.calls(), 12);
    assert_eq!(budget.deposits(), 10, "each call deposited once");
}

#[tokio::test(start_paused = true)]
async fn a_breakers_rejection_is_not_hedged() {
    let clock = ManualClock::new();
    let breaker = Arc::new(Breaker::builder().clock(clock.clone()).build());
    breaker.force_open();
    let hedge = Hedge::after(Duration::ZERO)
        .max_attempts(3)
        .budget(budget(&clock));
    let script = Script::default();
    let inner = BreakerLayer::new(Arc::clone(&breaker)).layer(script.service());
    let mut service = HedgeLayer::new(hedge.clone()).layer(inner);

    let err = service.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(err.is_rejected());
    assert_eq!(script.calls(), 0);
    assert_eq!(hedge.stats().hedges, 0, "no attempt after the rejection");

    // A slow first attempt on a closed breaker; the breaker opens before its hedge is due:
    // the hedge is rejected, and no third attempt follows it.
    breaker.force_closed();
    let hedge = Hedge::after(MS * 10).max_attempts(3).budget(budget(&clock));
    let inner = BreakerLayer::new(Arc::clone(&breaker)).layer(script.service());
    let mut service = HedgeLayer::new(hedge.clone()).layer(inner);
    script.then(Some(100), true);
    let call = service.ready().await.unwrap().call(2);
    tokio::pin!(call);
    assert!(
        poll_once(call.as_mut()).is_none(),
        "the first attempt is out"
    );
    breaker.force_open();
    let started = Instant::now();
    let answer = call.await.unwrap();
    assert_eq!(answer, (2, 0), "the first attempt's");
    assert_eq!(started.elapsed(), MS * 100);
    assert_eq!(
        script.calls(),
        1,
        "the hedge was rejected, and none followed"
    );
    assert_eq!(hedge.stats().hedges, 1);
}

/// Polls `future` once.
fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

#[tokio::test(start_paused = true)]
async fn no_hedge_past_the_deadline() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(MS * 100).budget(budget(&clock));
    let script = Script::default();
    script.then(Some(200), true);
    let mut service = HedgeLayer::new(hedge.clone())
        .deadline(MS * 50)
        .layer(script.service());

    let started = Instant::now();
    service.ready().await.unwrap().call(1).await.unwrap();
    assert_eq!(started.elapsed(), MS * 200);
    assert_eq!(script.calls(), 1);
    assert_eq!(hedge.stats().hedges, 0);
}

#[tokio::test(start_paused = true)]
async fn a_percentile_hedge_learns_its_delay() {
    let clock = ManualClock::new();
    let hedge = Hedge::at_percentile(0.5).budget(budget(&clock));
    let layer = HedgeLayer::try_new(hedge.clone()).unwrap();
    let script = Script::default();
    let mut service = layer.layer(script.service());

    // No latency known: a slow call is not hedged.
    script.then(Some(500), true);
    let started = Instant::now();
    service.ready().await.unwrap().call(0).await.unwrap();
    assert_eq!(started.elapsed(), MS * 500);
    assert_eq!(hedge.stats().hedges, 0);
    assert_eq!(layer.estimate().get(), Some(MS * 500), "the first latency");

    // Calls of 20 ms bring the median down to them (within a step: an eighth, times 0.5).
    for n in 0..100 {
        script.then(Some(20), true);
        service.ready().await.unwrap().call(n).await.unwrap();
    }
    let delay = layer.estimate().get().unwrap();
    assert!(delay >= MS * 19 && delay <= MS * 22, "{delay:?}");
    assert_eq!(hedge.stats().hedges, 0);

    // A slow one now is hedged after that delay, and the hedge answers 20 ms later.
    script.then(Some(1_000), true).then(Some(20), true);
    let started = Instant::now();
    let (_, index) = service.ready().await.unwrap().call(7).await.unwrap();
    assert_eq!(index, 102, "the hedge's answer");
    let took = started.elapsed();
    assert!(
        took >= delay + MS * 20 && took <= delay + MS * 21,
        "{took:?} {delay:?}"
    );
    assert_eq!(hedge.stats().hedges, 1);
}

#[tokio::test(start_paused = true)]
async fn http_hedges_only_idempotent_requests() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(MS * 10).budget(budget(&clock));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let inner = tower::service_fn(move |_: Request<String>| {
        let first = seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(2);
        async move {
            tokio::time::sleep(if first { MS * 100 } else { MS * 5 }).await;
            Ok::<_, io::Error>(Response::new(String::new()))
        }
    });
    let mut service = HedgeLayer::http(hedge.clone()).layer(inner);

    let post = Request::post("/orders").body("{}".to_owned()).unwrap();
    let started = Instant::now();
    service.ready().await.unwrap().call(post).await.unwrap();
    assert_eq!(started.elapsed(), MS * 100, "sent once");
    assert_eq!((calls.load(Ordering::SeqCst), hedge.stats().hedges), (1, 0));

    calls.store(0, Ordering::SeqCst);
    let get = Request::get("/orders/7").body(String::new()).unwrap();
    let started = Instant::now();
    service.ready().await.unwrap().call(get).await.unwrap();
    assert_eq!(started.elapsed(), MS * 15, "hedged");
    assert_eq!((calls.load(Ordering::SeqCst), hedge.stats().hedges), (2, 1));
}

/// A request to a hung server on 127.0.0.1, hedged to a healthy one after 50 ms of real
/// time: the healthy one's answer wins, the hung request is dropped.
#[test]
fn a_hung_request_to_a_real_server_is_hedged() {
    lazybreaker_test_support::run(async {
        let (hung, healthy) = (Upstream::default(), Upstream::default());
        hung.set(HANG);
        healthy.set(OK);
        let uri = |addr| format!("http://{addr}/").parse::<Uri>().unwrap();
        let (hung_uri, healthy_uri) = (uri(hung.serve().await), uri(healthy.serve().await));

        // The first attempt to the hung server, every other to the healthy one.
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let attempts = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (seen, gone) = (Arc::clone(&attempts), Arc::clone(&dropped));
        let inner = tower::service_fn(move |mut request: Request<Empty<Bytes>>| {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            let to = if first { &hung_uri } else { &healthy_uri };
            *request.uri_mut() = to.clone();
            let sent = client.request(request);
            let mut guard = Unfinished(Some(Arc::clone(&gone)));
            async move {
                let answer = sent.await;
                guard.finish();
                answer
            }
        });
        let clock = ManualClock::new();
        let breaker = Arc::new(Breaker::builder().clock(clock.clone()).build());
        let hedge = Hedge::after(MS * 50).budget(budget(&clock));
        let layer = HedgeLayer::http(hedge.clone());
        let mut service = tower::ServiceBuilder::new()
            .layer(layer.clone())
            .layer(BreakerLayer::new(Arc::clone(&breaker)))
            .service(inner);

        let request = Request::get("http://upstream/").body(Empty::new()).unwrap();
        let started = std::time::Instant::now();
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["x-upstream"], "intact");
        assert!(started.elapsed() >= MS * 50, "{:?}", started.elapsed());
        assert_eq!((hung.hits(), healthy.hits()), (1, 1));
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the hung request, dropped"
        );
        assert_eq!(
            (hedge.stats().hedges, layer.won(), layer.cancelled()),
            (1, 1, 1)
        );
        // The breaker saw one success; the dropped attempt was abandoned (excluded).
        assert_eq!(breaker.counts().total_successes, 1);
        assert_eq!(breaker.counts().total_failures, 0);
    });
}

#[tokio::test(start_paused = true)]
async fn the_hedges_throttle_is_fed_by_the_attempts() {
    let clock = ManualClock::new();
    // Two tokens: one failure leaves one, half of them: no hedge.
    let hedge = Hedge::after(MS * 10)
        .max_attempts(3)
        .budget(budget(&clock))
        .throttle(TokenBucket::new(2.0, 0.5).unwrap());
    let script = Script::default();
    let mut service = HedgeLayer::new(hedge.clone()).layer(script.service());

    script.then(Some(0), false);
    let err = service.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(err.to_string(), "reset");
    assert_eq!(script.calls(), 1);
    assert_eq!((hedge.stats().hedges, hedge.stats().throttled), (0, 1));
    let bucket = hedge.hedge_throttle().unwrap();
    assert_eq!(bucket.tokens(), 1.0);

    // A success gives half a token back; another makes it more than half: a slow call is
    // hedged again.
    service.ready().await.unwrap().call(2).await.unwrap();
    service.ready().await.unwrap().call(3).await.unwrap();
    assert_eq!(bucket.tokens(), 2.0);
    script.then(Some(100), true);
    let (_, index) = service.ready().await.unwrap().call(4).await.unwrap();
    assert_eq!(index, 4, "the hedge's answer");
    assert_eq!(hedge.stats().hedges, 1);
}
