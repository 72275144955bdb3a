//! A pool against five real axum upstreams on 127.0.0.1, through reqwest: one refuses
//! connections, one hangs, one answers 500, one flaps, one is healthy. Breaker time is a
//! `ManualClock`; the only real time is the client's deadline on the hung upstream
//! (`DEADLINE`) and the bound on each test (`BOUND`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_reqwest::{check_path, ResponseRules};

/// The client's deadline per request (the hung upstream's requests end with it).
const DEADLINE: Duration = Duration::from_millis(150);
/// The health check's deadline.
const CHECK_DEADLINE: Duration = Duration::from_millis(300);
/// The most a test may take.
const BOUND: Duration = Duration::from_secs(20);
const OPEN_FOR: Duration = Duration::from_secs(10);
const PAST_OPEN: Duration = Duration::from_millis(10_001);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Refuses,
    Hangs,
    Fails,
    Flaps,
    Healthy,
}

/// An upstream: how it answers, whether it was repaired, and what reached it.
#[derive(Default)]
struct Upstream {
    repaired: AtomicBool,
    api_hits: AtomicUsize,
    health_hits: AtomicUsize,
}

/// Serves an upstream of `kind` on a free loopback port (a refusing one: a port bound and
/// released, so nothing listens there).
async fn serve(kind: Kind, upstream: Arc<Upstream>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    if kind == Kind::Refuses {
        drop(listener);
        return addr;
    }
    let (api, health) = (Arc::clone(&upstream), upstream);
    let app = axum::Router::new()
        .route(
            "/api",
            axum::routing::get(move || {
                let upstream = Arc::clone(&api);
                async move {
                    let n = upstream.api_hits.fetch_add(1, Ordering::SeqCst);
                    let repaired = upstream.repaired.load(Ordering::SeqCst);
                    match kind {
                        _ if repaired => StatusCode::OK,
                        Kind::Hangs => std::future::pending().await,
                        Kind::Fails => StatusCode::INTERNAL_SERVER_ERROR,
                        Kind::Flaps if n % 2 == 1 => StatusCode::INTERNAL_SERVER_ERROR,
                        _ => StatusCode::OK,
                    }
                }
            }),
        )
        .route(
            "/health",
            axum::routing::get(move || {
                let upstream = Arc::clone(&health);
                async move {
                    upstream.health_hits.fetch_add(1, Ordering::SeqCst);
                    match kind {
                        _ if upstream.repaired.load(Ordering::SeqCst) => StatusCode::OK,
                        Kind::Fails | Kind::Hangs => StatusCode::INTERNAL_SERVER_ERROR,
                        _ => StatusCode::OK,
                    }
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The five upstreams, by address.
struct Fleet {
    kinds: HashMap<SocketAddr, Kind>,
    upstreams: HashMap<Kind, Arc<Upstream>>,
    addrs: HashMap<Kind, SocketAddr>,
}

async fn five() -> Fleet {
    let mut fleet = Fleet {
        kinds: HashMap::new(),
        upstreams: HashMap::new(),
        addrs: HashMap::new(),
    };
    for kind in [
        Kind::Refuses,
        Kind::Hangs,
        Kind::Fails,
        Kind::Flaps,
        Kind::Healthy,
    ] {
        let upstream = Arc::new(Upstream::default());
        let addr = serve(kind, Arc::clone(&upstream)).await;
        fleet.kinds.insert(addr, kind);
        fleet.upstreams.insert(kind, upstream);
        fleet.addrs.insert(kind, addr);
    }
    fleet
}

/// A pool over `addrs`: two consecutive failures isolate an endpoint for [`OPEN_FOR`],
/// revived through its `/health` path.
fn pool(clock: &ManualClock, addrs: &[SocketAddr], max_isolated: f64) -> Arc<Pool<SocketAddr>> {
    let checker = reqwest::Client::new();
    let pool = Pool::new(|_: &SocketAddr| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(2).unwrap())
            .timeout(OPEN_FOR)
    })
    .clock(clock.clone())
    .max_isolated(max_isolated)
    .health_check(move |addr: &SocketAddr| {
        check_path(&checker, format!("http://{addr}/health"), CHECK_DEADLINE)
    });
    pool.set(addrs.iter().copied());
    Arc::new(pool)
}

/// One request through the pool: picked, sent, classified (2xx success, a refused
/// connection fatal, anything else a failure) and reported. The endpoint, or the rejection.
async fn request(
    pool: &Pool<SocketAddr>,
    client: &reqwest::Client,
) -> Result<SocketAddr, Rejected> {
    let pick = pool.pick_async().await?;
    let addr = *pick.key();
    let outcome = match client.get(format!("http://{addr}/api")).send().await {
        Ok(response) if response.status().is_success() => Outcome::Success,
        Ok(_) => Outcome::Failure,
        Err(e) if e.is_connect() => Outcome::Fatal,
        Err(_) => Outcome::Failure,
    };
    pick.record(outcome);
    Ok(addr)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .unwrap()
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    lazybreaker_test_support::run_bounded(BOUND, f)
}

#[test]
fn broken_upstreams_get_no_share_once_isolated_and_revive_through_their_health_path() {
    run(async {
        let fleet = five().await;
        let clock = ManualClock::new();
        let addrs: Vec<_> = fleet.addrs.values().copied().collect();
        let pool = pool(&clock, &addrs, 0.8);
        let client = client();
        // Detection: enough requests that each bad upstream is hit and isolated.
        for _ in 0..60 {
            request(&pool, &client).await.expect("an endpoint");
        }
        for kind in [Kind::Refuses, Kind::Hangs, Kind::Fails] {
            let breaker = pool.breaker(&fleet.addrs[&kind]).unwrap();
            assert_eq!(breaker.state(), State::Open, "{kind:?} isolated");
        }
        // After isolation: their share is nothing, the others share the calls.
        let before: HashMap<Kind, usize> = fleet
            .upstreams
            .iter()
            .map(|(k, u)| (*k, u.api_hits.load(Ordering::SeqCst)))
            .collect();
        let mut seen: HashMap<Kind, usize> = HashMap::new();
        for _ in 0..200 {
            let addr = request(&pool, &client).await.expect("an endpoint");
            *seen.entry(fleet.kinds[&addr]).or_default() += 1;
        }
        for kind in [Kind::Refuses, Kind::Hangs, Kind::Fails] {
            assert_eq!(seen.get(&kind), None, "{kind:?} got calls while isolated");
        }
        for kind in [Kind::Hangs, Kind::Fails] {
            let hits = fleet.upstreams[&kind].api_hits.load(Ordering::SeqCst);
            assert_eq!(hits, before[&kind], "{kind:?} received nothing");
        }
        assert!(seen[&Kind::Healthy] >= 60, "{seen:?}");
        assert!(
            seen[&Kind::Flaps] >= 30,
            "the flapping one stays in: {seen:?}"
        );

        // Revival: the failing upstream is repaired; past its open period, its health path
        // passes and it gets calls again. The refusing one fails its check and stays out.
        fleet.upstreams[&Kind::Fails]
            .repaired
            .store(true, Ordering::SeqCst);
        clock.advance(PAST_OPEN);
        let mut seen: HashMap<Kind, usize> = HashMap::new();
        for _ in 0..200 {
            let addr = request(&pool, &client).await.expect("an endpoint");
            *seen.entry(fleet.kinds[&addr]).or_default() += 1;
        }
        assert!(seen.get(&Kind::Fails).copied().unwrap_or(0) > 0, "{seen:?}");
        assert_eq!(seen.get(&Kind::Refuses), None);
        let fails = pool.breaker(&fleet.addrs[&Kind::Fails]).unwrap();
        assert_eq!(fails.state(), State::Closed);
        assert_eq!(fails.totals().health_checks, 1);
        assert!(
            fleet.upstreams[&Kind::Fails]
                .health_hits
                .load(Ordering::SeqCst)
                >= 1
        );
        let refuses = pool.breaker(&fleet.addrs[&Kind::Refuses]).unwrap();
        assert_eq!(refuses.state(), State::Open);
        assert!(refuses.totals().health_checks_failed >= 1);
    });
}

#[test]
fn with_every_upstream_down_the_pool_rejects_with_the_time_to_the_probe() {
    run(async {
        let fleet = five().await;
        let clock = ManualClock::new();
        let down = [fleet.addrs[&Kind::Refuses], fleet.addrs[&Kind::Fails]];
        let pool = pool(&clock, &down, 1.0);
        let client = client();
        let mut rejected = None;
        for _ in 0..20 {
            if let Err(r) = request(&pool, &client).await {
                rejected = Some(r);
                break;
            }
        }
        match rejected {
            Some(Rejected::NoEndpoint { retry_after }) => {
                assert_eq!(retry_after.map(|d| d <= OPEN_FOR), Some(true));
            }
            other => panic!("expected NoEndpoint, got {other:?}"),
        }
    });
}

#[test]
fn two_and_three_endpoints_keep_one_in_rotation_or_isolate_one() {
    run(async {
        let fleet = five().await;
        let clock = ManualClock::new();
        let client = client();
        // Two endpoints, one broken: isolated, the healthy one takes everything.
        let pool2 = pool(
            &clock,
            &[fleet.addrs[&Kind::Fails], fleet.addrs[&Kind::Healthy]],
            0.5,
        );
        for _ in 0..20 {
            request(&pool2, &client).await.unwrap();
        }
        let mut seen = HashMap::new();
        for _ in 0..50 {
            let addr = request(&pool2, &client).await.unwrap();
            *seen.entry(fleet.kinds[&addr]).or_insert(0) += 1;
        }
        assert_eq!(seen, HashMap::from([(Kind::Healthy, 50)]));
        // Three endpoints, two broken: one may be isolated, the other stays in rotation.
        let pool3 = pool(
            &clock,
            &[
                fleet.addrs[&Kind::Fails],
                fleet.addrs[&Kind::Refuses],
                fleet.addrs[&Kind::Healthy],
            ],
            0.5,
        );
        for _ in 0..60 {
            request(&pool3, &client).await.unwrap();
        }
        let snapshot = pool3.snapshot();
        assert_eq!(
            snapshot.isolated, 2,
            "both broken ones tripped: {snapshot:?}"
        );
        let stats = pool3.stats();
        assert!(
            stats.over_cap > 0,
            "one over the cap stays in rotation: {stats:?}"
        );
        assert_eq!(stats.no_endpoint, 0, "never all out with the cap");
    });
}

#[test]
fn no_call_is_lost_or_counted_twice_under_four_tasks() {
    run(async {
        let fleet = five().await;
        let clock = ManualClock::new();
        let addrs = [fleet.addrs[&Kind::Flaps], fleet.addrs[&Kind::Healthy]];
        let pool = Pool::new(|_: &SocketAddr| {
            Breaker::builder().policy(ConsecutiveFailures::new(1_000).unwrap())
        })
        .clock(clock.clone());
        pool.set(addrs);
        let pool = Arc::new(pool);
        let client = client();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (pool, client) = (Arc::clone(&pool), client.clone());
                tokio::spawn(async move {
                    for _ in 0..50 {
                        request(&pool, &client).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let mut reported = 0;
        for addr in addrs {
            let t = pool.breaker(&addr).unwrap().totals();
            assert_eq!(t.admitted, t.successes + t.failures, "{addr}");
            reported += t.admitted;
        }
        assert_eq!(reported, 200);
        let hits: usize = [Kind::Flaps, Kind::Healthy]
            .iter()
            .map(|k| fleet.upstreams[k].api_hits.load(Ordering::SeqCst))
            .sum();
        assert_eq!(hits, 200, "each call reached one upstream once");
    });
}

/// Serves `/busy`, a 503 with `Retry-After: 120` (an upstream shedding load).
async fn serve_busy() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/busy",
        axum::routing::get(|| async {
            (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "120")])
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A pool of `addr` alone, whose breaker never trips on failures (a fatal result opens it).
fn one(clock: &ManualClock, addr: SocketAddr) -> Pool<SocketAddr> {
    let pool = Pool::new(|_: &SocketAddr| {
        Breaker::builder().policy(ConsecutiveFailures::new(1_000).unwrap())
    })
    .clock(clock.clone());
    pool.set([addr]);
    pool
}

/// One `Pool::call` with a plain client, counted by the crate's public classifier.
async fn call(
    pool: &Pool<SocketAddr>,
    client: &reqwest::Client,
    path: &str,
) -> Result<reqwest::Response, Error<reqwest::Error>> {
    pool.call(
        |addr| client.get(format!("http://{addr}{path}")).send(),
        ResponseRules::new(),
    )
    .await
}

#[test]
fn pool_call_with_response_rules_counts_a_500_a_failure_and_a_200_a_success() {
    run(async {
        let fleet = five().await;
        let clock = ManualClock::new();
        let client = client();

        let healthy = one(&clock, fleet.addrs[&Kind::Healthy]);
        let ok = call(&healthy, &client, "/api").await.unwrap();
        assert_eq!(ok.status(), 200);
        let t = healthy
            .breaker(&fleet.addrs[&Kind::Healthy])
            .unwrap()
            .totals();
        assert_eq!((t.admitted, t.successes, t.failures), (1, 1, 0));

        let fails = one(&clock, fleet.addrs[&Kind::Fails]);
        for n in 1..=2 {
            // The response comes back untouched; the pool counts it a failure.
            let failed = call(&fails, &client, "/api").await.unwrap();
            assert_eq!(failed.status(), 500);
            let t = fails.breaker(&fleet.addrs[&Kind::Fails]).unwrap().totals();
            assert_eq!((t.admitted, t.successes, t.failures), (n, 0, n));
        }
        assert_eq!(
            fleet.upstreams[&Kind::Fails]
                .api_hits
                .load(Ordering::SeqCst),
            2
        );
    });
}

#[test]
fn pool_call_with_response_rules_counts_errors_and_overload_as_the_middleware_does() {
    run(async {
        let fleet = five().await;
        let busy_addr = serve_busy().await;
        let clock = ManualClock::new();
        let client = client();

        // A 503 with Retry-After: the pool's overload (excluded by default), not a failure.
        let busy = one(&clock, busy_addr);
        let answer = call(&busy, &client, "/busy").await.unwrap();
        assert_eq!(answer.status(), 503);
        assert_eq!(busy.stats().overloaded, 1);
        let t = busy.breaker(&busy_addr).unwrap().totals();
        assert_eq!((t.successes, t.failures, t.exclusions), (0, 0, 1));

        // A refused connection: fatal, the endpoint's breaker opens at once.
        let refuses = one(&clock, fleet.addrs[&Kind::Refuses]);
        match call(&refuses, &client, "/api").await {
            Err(Error::Inner(e)) => assert!(e.is_connect(), "{e:?}"),
            other => panic!("expected a connect error, got {other:?}"),
        }
        let breaker = refuses.breaker(&fleet.addrs[&Kind::Refuses]).unwrap();
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().failures, 1);

        // A timeout inside the call (the client's deadline): a failure.
        let hangs = one(&clock, fleet.addrs[&Kind::Hangs]);
        match call(&hangs, &client, "/api").await {
            Err(Error::Inner(e)) => assert!(e.is_timeout(), "{e:?}"),
            other => panic!("expected a timeout, got {other:?}"),
        }
        let t = hangs.breaker(&fleet.addrs[&Kind::Hangs]).unwrap().totals();
        assert_eq!((t.failures, t.abandoned), (1, 0));
    });
}
