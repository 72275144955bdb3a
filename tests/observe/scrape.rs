//! A real scrape: a registry of breakers driven through trips and recoveries, a
//! `/metrics` endpoint served by axum on 127.0.0.1, scraped with a real HTTP client, the
//! exposition text parsed, and every value checked against each breaker's `snapshot()`,
//! including a breaker whose open period passed with no traffic (the scrape says half-open
//! without having moved it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::{Breaker, ManualClock, Registry, Snapshot, State};
use prometheus_client::encoding::text::encode;

const OPEN_FOR: Duration = Duration::from_secs(10);
const PAST_OPEN: Duration = Duration::from_millis(10_001);
const BOUND: Duration = Duration::from_secs(20);

/// Every series of an exposition: `(name, labels sorted) -> value`.
pub(super) type Series = BTreeMap<(String, Vec<(String, String)>), f64>;

/// Parses the text format: `name{k="v",...} value` lines; comments skipped.
pub(super) fn parse(text: &str) -> Series {
    let mut series = Series::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (head, value) = line.rsplit_once(' ').expect("a value");
        let value: f64 = value.parse().expect("a number");
        let (name, labels) = match head.split_once('{') {
            None => (head.to_owned(), Vec::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("closed labels");
                let mut labels: Vec<(String, String)> = rest
                    .split("\",")
                    .map(|pair| {
                        let (k, v) = pair.split_once("=\"").expect("k=\"v\"");
                        (k.to_owned(), v.trim_end_matches('"').to_owned())
                    })
                    .collect();
                labels.sort();
                (name.to_owned(), labels)
            }
        };
        assert!(
            series.insert((name, labels), value).is_none(),
            "one series per line: {line}"
        );
    }
    series
}

pub(super) fn get(series: &Series, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    *series
        .get(&(name.to_owned(), labels.clone()))
        .unwrap_or_else(|| panic!("no series {name}{labels:?}"))
}

/// Checks every series of `snapshot`'s breaker against it.
fn check(series: &Series, s: &Snapshot) {
    let b = s.name.as_str();
    let state = match s.state {
        State::Closed => 0.0,
        State::HalfOpen => 1.0,
        State::Open => 2.0,
    };
    assert_eq!(
        get(series, "circuit_breaker_state", &[("breaker", b)]),
        state,
        "{b}"
    );
    let forced = match s.forced {
        None => 0.0,
        Some(lazybreaker::Forced::Open) => 1.0,
        Some(_) => 2.0,
    };
    assert_eq!(
        get(series, "circuit_breaker_forced", &[("breaker", b)]),
        forced,
        "{b}"
    );
    let t = &s.totals;
    for (outcome, n) in [
        ("success", t.successes),
        ("failure", t.failures),
        ("excluded", t.exclusions),
        ("abandoned", t.abandoned),
        ("dropped", t.dropped),
        ("rejected_open", t.rejected_open),
        ("rejected_half_open", t.rejected_half_open),
        ("rejected_forced", t.rejected_forced),
    ] {
        let got = get(
            series,
            "circuit_breaker_calls_total",
            &[("breaker", b), ("outcome", outcome)],
        );
        assert_eq!(got, n as f64, "{b} {outcome}");
    }
    assert_eq!(
        get(series, "circuit_breaker_admitted_total", &[("breaker", b)]),
        t.admitted as f64
    );
    for (result, n) in [
        ("passed", t.health_checks - t.health_checks_failed),
        ("failed", t.health_checks_failed),
    ] {
        let got = get(
            series,
            "circuit_breaker_health_checks_total",
            &[("breaker", b), ("result", result)],
        );
        assert_eq!(got, n as f64, "{b} health checks {result}");
    }
    assert_eq!(
        get(
            series,
            "circuit_breaker_probes_taken_over_total",
            &[("breaker", b)]
        ),
        t.probes_taken_over as f64,
        "{b} probes taken over"
    );
    for (decision, n) in [
        ("retried", t.retries),
        ("budget_denied", t.retries_budget_denied),
        ("exhausted", t.retries_exhausted),
        ("throttled", t.retries_throttled),
    ] {
        let got = get(
            series,
            "circuit_breaker_retries_total",
            &[("breaker", b), ("decision", decision)],
        );
        assert_eq!(got, n as f64, "{b} retries {decision}");
    }
    for (from, to, n) in s.transitions.iter() {
        let label = |state: State| match state {
            State::Closed => "closed",
            State::HalfOpen => "half_open",
            State::Open => "open",
        };
        let got = get(
            series,
            "circuit_breaker_transitions_total",
            &[("breaker", b), ("from", label(from)), ("to", label(to))],
        );
        assert_eq!(got, n as f64, "{b} {from:?} -> {to:?}");
    }
    assert_eq!(
        get(series, "circuit_breaker_opened_total", &[("breaker", b)]),
        s.times_opened as f64
    );
    assert_eq!(
        get(series, "circuit_breaker_recent_failures", &[("breaker", b)]),
        s.recent_failures as f64
    );
    let retry = s.retry_after.map_or(0.0, |d| d.as_secs_f64());
    let got = get(
        series,
        "circuit_breaker_retry_after_seconds",
        &[("breaker", b)],
    );
    assert!((got - retry).abs() < 1e-6, "{b}: {got} vs {retry}");
}

async fn scrape(uri: &str) -> String {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = Request::get(uri).body(Empty::new()).unwrap();
    let response = client
        .request(request)
        .await
        .expect("the scrape got an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[test]
fn every_scraped_value_matches_the_snapshot() {
    let clock = ManualClock::new();
    let changes = Arc::new(AtomicUsize::new(0));
    let registry: Arc<Registry<String>> = Arc::new({
        let changes = Arc::clone(&changes);
        Registry::new(move |_: &String| {
            let changes = Arc::clone(&changes);
            Breaker::builder()
                .policy(ConsecutiveFailures::new(2).unwrap())
                .timeout(OPEN_FOR)
                .on_state_change(move |_, _, _| {
                    changes.fetch_add(1, Ordering::SeqCst);
                })
        })
        .clock(clock.clone())
    });
    let fail = |key: &str| {
        let _ = registry.breaker(key).execute(|| Err::<(), _>("down"));
    };
    let ok = |key: &str| {
        let _ = registry.breaker(key).execute(|| Ok::<_, ()>(()));
    };

    // "healthy": successes only. "recovered": trips, then recovers. "expired": trips, and
    // its open period passes with no traffic. "forced": forced open, rejecting.
    for _ in 0..5 {
        ok("healthy");
    }
    fail("recovered");
    fail("recovered");
    ok("recovered"); // rejected
    fail("expired");
    fail("expired");
    ok("expired"); // rejected
    clock.advance(PAST_OPEN);
    ok("recovered"); // the probe closes it
    ok("recovered");
    fail("recovered");
    registry.breaker("forced").force_open();
    for _ in 0..3 {
        ok("forced");
    }
    drop(registry.breaker("healthy").allow_owned().unwrap()); // an abandoned call
    let changes_before = changes.load(Ordering::SeqCst);

    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register_collector(Box::new(
        BreakerCollector::new().registry(Arc::clone(&registry)),
    ));
    let metrics = Arc::new(metrics);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let text = runtime.block_on(async {
        tokio::time::timeout(BOUND, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = axum::Router::new().route(
                "/metrics",
                axum::routing::get(move || {
                    let metrics = Arc::clone(&metrics);
                    async move {
                        let mut text = String::new();
                        encode(&mut text, &metrics).unwrap();
                        text
                    }
                }),
            );
            tokio::spawn(async move { axum::serve(listener, app).await });
            scrape(&format!("http://{addr}/metrics")).await
        })
        .await
        .expect("the scrape finished within its bound")
    });
    drop(runtime);

    assert_eq!(
        changes.load(Ordering::SeqCst),
        changes_before,
        "the scrape moved no breaker and ran no callback"
    );
    let series = parse(&text);
    let mut names: Vec<_> = registry.breakers().into_iter().map(|(k, _)| k).collect();
    names.sort();
    assert_eq!(names, ["expired", "forced", "healthy", "recovered"]);
    for (_, breaker) in registry.breakers() {
        check(&series, &breaker.snapshot());
    }

    // The values the scenario implies, independently of `snapshot()`.
    let v = |name: &str, labels: &[(&str, &str)]| get(&series, name, labels);
    assert_eq!(
        v("circuit_breaker_state", &[("breaker", "expired")]),
        1.0,
        "half-open next"
    );
    assert_eq!(
        v(
            "circuit_breaker_transitions_total",
            &[
                ("breaker", "expired"),
                ("from", "open"),
                ("to", "half_open")
            ]
        ),
        0.0,
        "but not moved"
    );
    assert_eq!(v("circuit_breaker_state", &[("breaker", "recovered")]), 0.0);
    assert_eq!(v("circuit_breaker_state", &[("breaker", "forced")]), 2.0);
    assert_eq!(v("circuit_breaker_forced", &[("breaker", "forced")]), 1.0);
    let calls = |b: &str, o: &str| {
        v(
            "circuit_breaker_calls_total",
            &[("breaker", b), ("outcome", o)],
        )
    };
    assert_eq!(calls("healthy", "success"), 5.0);
    assert_eq!(calls("healthy", "abandoned"), 1.0);
    assert_eq!(calls("recovered", "failure"), 3.0);
    assert_eq!(calls("recovered", "rejected_open"), 1.0);
    assert_eq!(calls("expired", "rejected_open"), 1.0);
    assert_eq!(calls("forced", "rejected_forced"), 3.0);
    assert_eq!(
        v("circuit_breaker_opened_total", &[("breaker", "recovered")]),
        1.0
    );
    assert_eq!(
        v(
            "circuit_breaker_recent_failures",
            &[("breaker", "recovered")]
        ),
        1.0
    );
    assert_eq!(
        v(
            "circuit_breaker_retry_after_seconds",
            &[("breaker", "expired")]
        ),
        0.0
    );
    assert_eq!(
        v(
            "circuit_breaker_transitions_total",
            &[
                ("breaker", "recovered"),
                ("from", "half_open"),
                ("to", "closed")
            ]
        ),
        1.0
    );
    assert_eq!(
        v(
            "circuit_breaker_transitions_total",
            &[("breaker", "forced"), ("from", "closed"), ("to", "open")]
        ),
        1.0
    );
}

/// The retry-after gauge reads the configured open period exactly at the trip: `0.5`, not
/// `0.500000001` (the nanosecond by which the strict expiry outlasts the period).
#[test]
fn the_retry_after_gauge_reads_the_configured_open_period() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .name("tripped")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_millis(500))
            .clock(clock.clone())
            .build(),
    );
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new().breaker(Arc::clone(&breaker)),
    ));
    let scrape = || {
        let mut text = String::new();
        encode(&mut text, &registry).expect("a scrape");
        text
    };
    let gauge = || {
        get(
            &parse(&scrape()),
            "circuit_breaker_retry_after_seconds",
            &[("breaker", "tripped")],
        )
    };
    assert_eq!(gauge(), 0.0, "closed");
    clock.advance(Duration::from_secs(2));
    let _ = breaker.execute(|| Err::<(), _>("down"));
    assert_eq!(gauge(), 0.5);
    let text = scrape();
    let line = r#"circuit_breaker_retry_after_seconds{breaker="tripped"} 0.5"#;
    assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    clock.advance(Duration::from_millis(250));
    assert_eq!(gauge(), 0.25);
    clock.advance(Duration::from_millis(250) + Duration::from_nanos(1));
    assert_eq!(gauge(), 0.0, "half-open next");
}

/// A breaker in dry run has a `would_reject` series of its calls, and only it: the calls it
/// admitted though it would have rejected them.
#[test]
fn a_dry_run_breaker_scrapes_the_calls_it_would_have_rejected() {
    let build = |name: &str, dry_run: bool| {
        Arc::new(
            Breaker::builder()
                .name(name)
                .policy(ConsecutiveFailures::new(2).unwrap())
                .dry_run(dry_run)
                .clock(ManualClock::new())
                .build(),
        )
    };
    let (shadow, real) = (build("shadow", true), build("real", false));
    for _ in 0..5 {
        let _ = shadow.execute(|| Err::<(), _>("down"));
        let _ = real.execute(|| Err::<(), _>("down"));
    }
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new()
            .breaker(Arc::clone(&shadow))
            .breaker(Arc::clone(&real)),
    ));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    let series = parse(&text);
    let calls = |breaker: &str, outcome: &str| {
        get(
            &series,
            "circuit_breaker_calls_total",
            &[("breaker", breaker), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("shadow", "would_reject"), 3.0);
    assert_eq!(calls("shadow", "rejected_open"), 0.0);
    assert_eq!(calls("real", "rejected_open"), 3.0);
    let line = r#"circuit_breaker_calls_total{breaker="real",outcome="would_reject"}"#;
    assert!(
        !text.contains(line),
        "no shadow series outside dry run:\n{text}"
    );
    // Both tripped at the same call: the dry run changes the admissions, not the state.
    let state = |b: &str| get(&series, "circuit_breaker_state", &[("breaker", b)]);
    assert_eq!((state("shadow"), state("real")), (2.0, 2.0));
}

/// A half-open probe held past the probe timeout and taken over shows in its own counter.
#[test]
fn a_probe_taken_over_is_counted_in_the_scrape() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .name("hung")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(OPEN_FOR)
            .clock(clock.clone())
            .build(),
    );
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new().breaker(Arc::clone(&breaker)),
    ));
    let taken_over = || {
        let mut text = String::new();
        encode(&mut text, &registry).expect("a scrape");
        get(
            &parse(&text),
            "circuit_breaker_probes_taken_over_total",
            &[("breaker", "hung")],
        )
    };
    let _ = breaker.execute(|| Err::<(), _>("down"));
    clock.advance(PAST_OPEN);
    let _hung = breaker.allow().unwrap();
    assert_eq!(taken_over(), 0.0);
    clock.advance(PAST_OPEN);
    breaker.allow().unwrap().success();
    assert_eq!(taken_over(), 1.0);
}

/// A throttled breaker scrapes the probability its next call meets and the calls it turned
/// away; a breaker without a throttle has neither series.
#[test]
fn a_throttled_breaker_scrapes_its_probability_and_its_throttled_calls() {
    let clock = ManualClock::new();
    let throttled = Arc::new(
        Breaker::builder()
            .name("orders")
            .never_trips(true)
            .throttle(
                lazybreaker::throttle::Throttle::new(2.0)
                    .unwrap()
                    .min_requests(10)
                    .max_probability(1.0),
            )
            .clock(clock.clone())
            .build(),
    );
    let plain = Arc::new(Breaker::builder().name("plain").clock(clock).build());
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new()
            .breaker(Arc::clone(&throttled))
            .breaker(Arc::clone(&plain)),
    ));
    let scrape = || {
        let mut text = String::new();
        encode(&mut text, &registry).expect("a scrape");
        parse(&text)
    };
    let orders = [("breaker", "orders")];
    assert_eq!(
        get(&scrape(), "circuit_breaker_throttle_probability", &orders),
        0.0
    );
    // 10 failures and 2 successes: p = (12 - 2 * 2) / 13.
    for _ in 0..10 {
        throttled.allow().unwrap().failure();
    }
    let mut turned_away = 0;
    let mut successes = 0;
    while successes < 2 {
        match throttled.allow() {
            Ok(permit) => {
                permit.success();
                successes += 1;
            }
            Err(_) => turned_away += 1,
        }
    }
    let series = scrape();
    let p = get(&series, "circuit_breaker_throttle_probability", &orders);
    assert!((p - 8.0 / 13.0).abs() < 1e-12, "{p}");
    assert_eq!(throttled.snapshot().throttle_probability, Some(8.0 / 13.0));
    assert_eq!(
        get(
            &series,
            "circuit_breaker_calls_total",
            &[("breaker", "orders"), ("outcome", "rejected_throttled")]
        ),
        f64::from(turned_away)
    );
    assert!(!series.keys().any(|(name, labels)| {
        name == "circuit_breaker_throttle_probability" && labels.iter().any(|(_, v)| v == "plain")
    }));
    assert!(!series.keys().any(|(_, labels)| {
        labels.iter().any(|(_, v)| v == "plain")
            && labels.iter().any(|(_, v)| v == "rejected_throttled")
    }));
}

/// The health-check counters, by result, read what the checks did: one failed check, then
/// one passed; and a checked breaker whose open period is over reads open (waiting for its
/// check), not half-open.
#[test]
fn the_health_check_counters_read_the_checks_that_settled() {
    use std::sync::atomic::AtomicBool;
    let clock = ManualClock::new();
    let healthy = Arc::new(AtomicBool::new(false));
    let h = Arc::clone(&healthy);
    let breaker = Arc::new(
        Breaker::builder()
            .name("checked")
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(OPEN_FOR)
            .clock(clock.clone())
            .health_check(move || std::future::ready(h.load(Ordering::SeqCst)))
            .build(),
    );
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new().breaker(Arc::clone(&breaker)),
    ));
    let series = || {
        let mut text = String::new();
        encode(&mut text, &registry).expect("a scrape");
        parse(&text)
    };
    let checks = |result: &str| {
        get(
            &series(),
            "circuit_breaker_health_checks_total",
            &[("breaker", "checked"), ("result", result)],
        )
    };
    let call = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(breaker.execute_async(|| async { Ok::<_, ()>(()) }))
    };
    assert_eq!((checks("passed"), checks("failed")), (0.0, 0.0));
    let _ = breaker.execute(|| Err::<(), _>("down"));
    clock.advance(PAST_OPEN);
    assert_eq!(
        get(
            &series(),
            "circuit_breaker_state",
            &[("breaker", "checked")]
        ),
        2.0,
        "open until its check passes"
    );
    assert!(call().is_err(), "the check fails");
    assert_eq!((checks("passed"), checks("failed")), (0.0, 1.0));
    clock.advance(PAST_OPEN);
    healthy.store(true, Ordering::SeqCst);
    assert!(call().is_ok(), "the check passes, the call probes");
    assert_eq!((checks("passed"), checks("failed")), (1.0, 1.0));
    check(&series(), &breaker.snapshot());
    let t = breaker.snapshot().totals;
    assert_eq!((t.health_checks, t.health_checks_failed), (2, 1));
}

/// One breaker's panicking `TripPolicy::gauges` must not take the whole scrape down (every
/// breaker's series lost): the scrape encodes every breaker, marks the one whose policy
/// panicked, and does not panic;
/// `snapshots()`, a call of the user's own, still lets the panic continue.
#[test]
fn item_6_one_breakers_panicking_gauges_do_not_take_the_scrape_down() {
    use lazybreaker::policy::{CallResult, TripPolicy};

    #[derive(Debug)]
    struct BadGauges;
    impl TripPolicy for BadGauges {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            false
        }
        fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
            report("before_the_panic", 1.5);
            panic!("gauges");
        }
    }
    let bad = Arc::new(Breaker::builder().name("bad").policy(BadGauges).build());
    let good = Arc::new(Breaker::builder().name("good").build());
    let _ = good.execute(|| Ok::<_, ()>(()));
    let collector = BreakerCollector::new()
        .breaker(Arc::clone(&bad))
        .breaker(Arc::clone(&good));
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(collector));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("a scrape");
    for line in [
        r#"circuit_breaker_state{breaker="bad"} 0"#,
        r#"circuit_breaker_state{breaker="good"} 0"#,
        r#"circuit_breaker_calls_total{breaker="good",outcome="success"} 1"#,
        r#"circuit_breaker_scrape_panicked{breaker="bad"} 1"#,
        r#"circuit_breaker_scrape_panicked{breaker="good"} 0"#,
        r#"circuit_breaker_policy{breaker="bad",figure="before_the_panic"} 1.5"#,
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    // The user's own read still panics, after taking every snapshot.
    let again = BreakerCollector::new().breaker(bad).breaker(good);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| again.snapshots()));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"gauges"),
        "the panic continues from snapshots()"
    );
}

/// A pool's endpoints are scraped as breakers named after their keys.
#[test]
fn a_pools_endpoints_are_scraped_by_key() {
    let clock = ManualClock::new();
    let pool = Arc::new(
        lazybreaker::pool::Pool::new(|_: &u16| {
            Breaker::builder()
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN_FOR)
        })
        .clock(clock.clone())
        .named("upstreams")
        .max_isolated(1.0),
    );
    pool.set([8080, 8081]);
    pool.breaker(&8081).unwrap().allow().unwrap().failure();
    let held = pool.pick().unwrap(); // 8080, in flight during the scrape
    pool.breaker(&8080).unwrap().trip_for(OPEN_FOR);
    assert!(pool.pick().is_err(), "both isolated: NoEndpoint, counted");
    pool.breaker(&8080).unwrap().release();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(BreakerCollector::new().pool(Arc::clone(&pool))));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    let series = parse(&text);
    assert_eq!(
        get(&series, "circuit_breaker_state", &[("breaker", "8080")]),
        0.0
    );
    assert_eq!(
        get(&series, "circuit_breaker_state", &[("breaker", "8081")]),
        2.0
    );
    for (key, breaker) in pool.breakers() {
        assert_eq!(breaker.name(), key.to_string());
        check(&series, &breaker.snapshot());
    }
    let of_pool = |name: &str| get(&series, name, &[("pool", "upstreams")]);
    assert_eq!(of_pool("circuit_breaker_pool_endpoints"), 2.0);
    assert_eq!(of_pool("circuit_breaker_pool_isolated"), 1.0);
    assert_eq!(of_pool("circuit_breaker_pool_in_flight"), 1.0);
    let picks = |result: &str| {
        get(
            &series,
            "circuit_breaker_pool_picks_total",
            &[("pool", "upstreams"), ("result", result)],
        )
    };
    assert_eq!((picks("no_endpoint"), picks("over_cap")), (1.0, 0.0));
    drop(held);
}

/// A pool's ejections and hangs, scraped: the ejected and down gauges, the ejections by
/// reason, the outliers found; and the ejection as its endpoint's breaker tells it, a change
/// from closed to open. Two pools in one collector, each under its own label.
#[test]
fn a_pools_ejections_and_hangs_are_scraped_by_reason() {
    use lazybreaker::pool::{Balance, OutlierDetection, Pool};

    let clock = ManualClock::new();
    // "edge": endpoint 2 of five fails 90 % of its 100 calls; the first pick after the
    // interval ejects it (failure percentage, Envoy's 85 %).
    let edge = Arc::new(
        Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(1_000).unwrap()))
            .clock(clock.clone())
            .named("edge")
            .balance(Balance::RoundRobin)
            .outlier_detection(OutlierDetection::new().failure_percentage(85, 5, 50)),
    );
    edge.set(0..5);
    let mut calls_to_2 = 0;
    for _ in 0..500 {
        let pick = edge.pick().unwrap();
        if *pick.key() == 2 {
            calls_to_2 += 1;
            if calls_to_2 % 10 != 0 {
                pick.failure();
                continue;
            }
        }
        pick.success();
    }
    assert_eq!(calls_to_2, 100);
    clock.advance(Duration::from_secs(10));
    edge.pick().unwrap().success();
    assert_eq!(edge.stats().ejected_failure_percentage, 1);
    // "stuck": two endpoints whose calls never come back; a deadline later both are out
    // (whatever the cap) and the pool answers NoEndpoint.
    let stuck_clock = ManualClock::new();
    let stuck = Arc::new(
        Pool::new(|_: &u32| Breaker::builder())
            .clock(stuck_clock.clone())
            .named("stuck")
            .balance(Balance::RoundRobin)
            .deadline(Duration::from_millis(300)),
    );
    stuck.set([10, 11]);
    let hanging = [stuck.pick().unwrap(), stuck.pick().unwrap()];
    stuck_clock.advance(Duration::from_millis(300));
    assert!(stuck.pick().is_err(), "both hung: NoEndpoint");

    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new()
            .pool(Arc::clone(&edge))
            .pool(Arc::clone(&stuck)),
    ));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    for line in [
        "# TYPE circuit_breaker_pool_ejected gauge",
        r#"circuit_breaker_pool_ejected{pool="edge"} 1"#,
        r#"circuit_breaker_pool_ejected{pool="stuck"} 2"#,
        "# TYPE circuit_breaker_pool_down gauge",
        r#"circuit_breaker_pool_down{pool="edge"} 0"#,
        r#"circuit_breaker_pool_down{pool="stuck"} 2"#,
        r#"circuit_breaker_pool_isolated{pool="edge"} 1"#,
        r#"circuit_breaker_pool_isolated{pool="stuck"} 2"#,
        r#"circuit_breaker_pool_in_flight{pool="stuck"} 2"#,
        "# TYPE circuit_breaker_pool_ejections counter",
        r#"circuit_breaker_pool_ejections_total{pool="edge",reason="success_rate"} 0"#,
        r#"circuit_breaker_pool_ejections_total{pool="edge",reason="failure_percentage"} 1"#,
        r#"circuit_breaker_pool_ejections_total{pool="edge",reason="hung"} 0"#,
        r#"circuit_breaker_pool_ejections_total{pool="stuck",reason="success_rate"} 0"#,
        r#"circuit_breaker_pool_ejections_total{pool="stuck",reason="failure_percentage"} 0"#,
        r#"circuit_breaker_pool_ejections_total{pool="stuck",reason="hung"} 2"#,
        "# TYPE circuit_breaker_pool_outliers_detected counter",
        r#"circuit_breaker_pool_outliers_detected_total{pool="edge"} 1"#,
        r#"circuit_breaker_pool_outliers_detected_total{pool="stuck"} 0"#,
        r#"circuit_breaker_pool_picks_total{pool="stuck",result="no_endpoint"} 1"#,
        // 500 calls and the pick that ejected; two hanging picks.
        "# TYPE circuit_breaker_pool_picked counter",
        r#"circuit_breaker_pool_picked_total{pool="edge"} 501"#,
        r#"circuit_breaker_pool_picked_total{pool="stuck"} 2"#,
        // The ejection is the endpoint's breaker opening: counted where every opening is.
        r#"circuit_breaker_state{breaker="2"} 2"#,
        r#"circuit_breaker_transitions_total{breaker="2",from="closed",to="open"} 1"#,
        r#"circuit_breaker_opened_total{breaker="2"} 1"#,
        r#"circuit_breaker_transitions_total{breaker="10",from="closed",to="open"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line} in:\n{text}"
        );
    }
    // Every figure is the pool's own summary, read at the scrape.
    let series = parse(&text);
    for pool in [&edge, &stuck] {
        let summary = pool.summary();
        let of = |name: &str| get(&series, name, &[("pool", pool.name())]);
        assert_eq!(
            of("circuit_breaker_pool_endpoints"),
            summary.endpoints as f64
        );
        assert_eq!(of("circuit_breaker_pool_ejected"), summary.ejected as f64);
        assert_eq!(of("circuit_breaker_pool_down"), summary.down as f64);
        assert_eq!(
            of("circuit_breaker_pool_outliers_detected_total"),
            summary.stats.outliers_detected as f64
        );
    }
    drop(hanging);
}

/// A pool that retries, scraped: its retries by decision, and the breaker of the endpoint
/// that failed counting the retries made after its failures.
#[test]
fn a_pools_retries_are_scraped_by_decision() {
    use lazybreaker::classify::OkIsSuccess;
    use lazybreaker::pool::Pool;
    use lazybreaker::retry::{Retry, RetryBudget};
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    let clock = ManualClock::new();
    let budget = RetryBudget::new(0.5)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone());
    let pool = Arc::new(
        Pool::new(|_: &&str| Breaker::builder().policy(ConsecutiveFailures::new(1_000).unwrap()))
            .clock(clock.clone())
            .named("retrying")
            .retry(Retry::new(2).unwrap().budget(budget)),
    );
    pool.set(["sick", "well"]);
    for _ in 0..40 {
        let call = pool.call(
            |key| async move {
                if key == "sick" {
                    Err("503")
                } else {
                    Ok(())
                }
            },
            OkIsSuccess,
        );
        let mut call = std::pin::pin!(call);
        let Poll::Ready(_) = call.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("the calls complete at once");
        };
    }
    let stats = pool.stats();
    assert!(stats.retries > 0, "{stats:?}");
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(BreakerCollector::new().pool(Arc::clone(&pool))));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    let series = parse(&text);
    for (decision, n) in [
        ("retried", stats.retries),
        ("budget_denied", stats.retries_budget_denied),
        ("exhausted", stats.retries_exhausted),
        ("throttled", stats.retries_throttled),
    ] {
        let got = get(
            &series,
            "circuit_breaker_pool_retries_total",
            &[("pool", "retrying"), ("decision", decision)],
        );
        assert_eq!(got, n as f64, "{decision}");
    }
    let sick = pool.breaker(&"sick").unwrap().totals();
    assert_eq!(
        sick.retries + sick.retries_budget_denied,
        stats.retries + stats.retries_budget_denied
    );
    for (key, breaker) in pool.breakers() {
        assert_eq!(breaker.name(), key);
        check(&series, &breaker.snapshot());
    }
}

#[test]
fn a_pools_hedges_and_warming_endpoints_are_scraped() {
    use lazybreaker::classify::OkIsSuccess;
    use lazybreaker::pool::{Pool, SlowStart};
    use lazybreaker::retry::Hedge;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let clock = ManualClock::new();
    let pool = Arc::new(
        Pool::new(|_: &&str| Breaker::builder())
            .clock(clock.clone())
            .named("hedging")
            .hedge(Hedge::after(Duration::from_millis(10)))
            .slow_start(SlowStart::new(Duration::from_secs(10))),
    );
    pool.set(["a", "b"]);
    assert!(pool.insert("c"), "added to a running pool: it warms up");
    // Every attempt fails at once: each call sends its hedge at once, and fails.
    for _ in 0..6 {
        let call = pool.call(|_| async { Err::<(), _>("500") }, OkIsSuccess);
        let mut call = std::pin::pin!(call);
        let Poll::Ready(_) = call.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("the calls complete at once");
        };
    }
    let stats = pool.stats();
    assert!(stats.hedges > 0, "{stats:?}");
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(BreakerCollector::new().pool(Arc::clone(&pool))));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    let series = parse(&text);
    for (decision, n) in [
        ("hedged", stats.hedges),
        ("won", stats.hedges_won),
        ("cancelled", stats.hedges_cancelled),
        ("budget_denied", stats.hedges_budget_denied),
    ] {
        let got = get(
            &series,
            "circuit_breaker_pool_hedges_total",
            &[("pool", "hedging"), ("decision", decision)],
        );
        assert_eq!(got, n as f64, "{decision}");
    }
    assert_eq!(
        get(
            &series,
            "circuit_breaker_pool_warming",
            &[("pool", "hedging")]
        ),
        1.0
    );
}

#[test]
fn a_pools_limit_is_scraped() {
    use lazybreaker::limit::Fixed;
    use lazybreaker::pool::Pool;
    let pool = Arc::new(
        Pool::new(|_: &&str| Breaker::builder())
            .named("limited")
            .limit(Fixed::new(1)),
    );
    pool.set(["a", "b"]);
    let held: Vec<_> = (0..2).map(|_| pool.pick().unwrap()).collect();
    for _ in 0..3 {
        assert_eq!(pool.pick().unwrap_err(), lazybreaker::Rejected::Limited);
    }
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(BreakerCollector::new().pool(Arc::clone(&pool))));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    let series = parse(&text);
    let pool_label = [("pool", "limited")];
    assert_eq!(
        get(&series, "circuit_breaker_pool_at_limit", &pool_label),
        2.0
    );
    let picks = |result| {
        get(
            &series,
            "circuit_breaker_pool_picks_total",
            &[("pool", "limited"), ("result", result)],
        )
    };
    assert_eq!(picks("limited"), 3.0);
    // Each limited pick tried both endpoints' limits at least once.
    assert!(picks("limit_skipped") >= 6.0, "{}", picks("limit_skipped"));
    assert_eq!(picks("no_endpoint"), 0.0);
    drop(held);
}
