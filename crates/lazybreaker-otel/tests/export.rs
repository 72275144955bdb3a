//! The instruments as an OpenTelemetry SDK exports them: a meter provider with the in-memory
//! exporter, flushed by hand, read back. Breakers and a pool on a `ManualClock`: no sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::limit::{Aimd, Algorithm, Fixed, Limiter, Sample};
use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig};
use lazybreaker::pool::Pool;
use lazybreaker::retry::{Cause, Hedge, Next, Retry, RetryBudget, Stop, TokenBucket};
use lazybreaker::throttle::Throttle;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_otel::BreakerMetrics;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// One exported instrument: its kind as the crate docs name it, its unit, and its data
/// points (attributes, value).
#[derive(Debug)]
struct Exported {
    kind: &'static str,
    unit: String,
    points: Vec<Point>,
}

/// A data point: its attributes, its value.
type Point = (BTreeMap<String, String>, f64);

/// A meter provider exporting into memory, and its exporter.
fn provider() -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    (provider, exporter)
}

/// Collects now (`force_flush`), and reads what the exporter got last, by instrument name.
fn collect(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> BTreeMap<String, Exported> {
    exporter.reset();
    provider.force_flush().expect("a flush");
    let exported = exporter
        .get_finished_metrics()
        .expect("the exported metrics");
    let mut out = BTreeMap::new();
    // Nothing is exported when no instrument has a data point.
    for scope in exported.iter().flat_map(|last| last.scope_metrics()) {
        for metric in scope.metrics() {
            let (kind, points) = match metric.data() {
                AggregatedMetrics::U64(data) => points(data, |v| v as f64),
                AggregatedMetrics::I64(data) => points(data, |v| v as f64),
                AggregatedMetrics::F64(data) => points(data, |v| v),
            };
            let exported = Exported {
                kind,
                unit: metric.unit().to_owned(),
                points,
            };
            out.insert(metric.name().to_owned(), exported);
        }
    }
    out
}

/// A metric's kind and data points, values as `f64`.
fn points<T: Copy + std::fmt::Debug>(
    data: &MetricData<T>,
    value: impl Fn(T) -> f64,
) -> (&'static str, Vec<Point>) {
    let attributes = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
        kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    match data {
        MetricData::Gauge(g) => (
            "gauge",
            g.data_points()
                .map(|p| (attributes(&mut p.attributes()), value(p.value())))
                .collect(),
        ),
        MetricData::Sum(s) => (
            if s.is_monotonic() {
                "counter"
            } else {
                "up-down counter"
            },
            s.data_points()
                .map(|p| (attributes(&mut p.attributes()), value(p.value())))
                .collect(),
        ),
        other => panic!("an instrument of this crate exported {other:?}"),
    }
}

/// The value of `name`'s data point with exactly `attributes`.
fn get(metrics: &BTreeMap<String, Exported>, name: &str, attributes: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<String, String> = attributes
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let metric = metrics
        .get(name)
        .unwrap_or_else(|| panic!("`{name}` not exported: {metrics:#?}"));
    let found: Vec<f64> = metric
        .points
        .iter()
        .filter(|(a, _)| *a == wanted)
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name}{attributes:?} in {:#?}",
        metric.points
    );
    found[0]
}

const OPEN_FOR: Duration = Duration::from_secs(30);

#[test]
fn a_tripped_breaker_and_a_pool_are_exported_with_their_figures() {
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    let clock = ManualClock::new();
    let payments = Arc::new(
        Breaker::builder()
            .name("payments")
            .policy(ConsecutiveFailures::new(2).unwrap())
            .timeout(OPEN_FOR)
            .clock(clock.clone())
            .build(),
    );
    let search = Arc::new(
        Breaker::builder()
            .name("search")
            .clock(clock.clone())
            .build(),
    );
    let pool = Arc::new(
        Pool::new(|_: &u16| Breaker::builder())
            .clock(clock.clone())
            .named("upstreams"),
    );
    pool.set([8080, 8081]);
    let metrics = BreakerMetrics::new(&meter);
    metrics
        .breaker(Arc::clone(&payments))
        .breaker(Arc::clone(&search))
        .pool(Arc::clone(&pool));

    for _ in 0..3 {
        payments.execute(|| Ok::<_, ()>(())).unwrap();
    }
    for _ in 0..2 {
        let _ = payments.execute(|| Err::<(), _>("down"));
    }
    assert!(
        payments.execute(|| Ok::<_, ()>(())).is_err(),
        "open: rejected"
    );
    search.execute(|| Ok::<_, ()>(())).unwrap();
    pool.pick().unwrap().success();
    let held = pool.pick().unwrap();
    clock.advance(Duration::from_secs(10));

    let m = collect(&provider, &exporter);
    let calls = |breaker: &str, outcome: &str| {
        get(
            &m,
            "circuit_breaker.calls",
            &[("breaker", breaker), ("outcome", outcome)],
        )
    };
    assert_eq!(m["circuit_breaker.calls"].kind, "counter");
    assert_eq!(m["circuit_breaker.calls"].unit, "{call}");
    assert_eq!(calls("payments", "success"), 3.0);
    assert_eq!(calls("payments", "failure"), 2.0);
    assert_eq!(calls("payments", "rejected_open"), 1.0);
    assert_eq!(calls("search", "success"), 1.0);
    assert_eq!(calls("search", "failure"), 0.0);
    assert_eq!(
        get(&m, "circuit_breaker.admitted", &[("breaker", "payments")]),
        5.0
    );

    // The state: 0 closed, 1 half-open, 2 open, as the docs define it.
    assert_eq!(m["circuit_breaker.state"].kind, "gauge");
    assert_eq!(m["circuit_breaker.state"].unit, "1");
    assert_eq!(
        get(&m, "circuit_breaker.state", &[("breaker", "payments")]),
        2.0
    );
    assert_eq!(
        get(&m, "circuit_breaker.state", &[("breaker", "search")]),
        0.0
    );
    assert_eq!(
        get(&m, "circuit_breaker.opened", &[("breaker", "payments")]),
        1.0
    );
    let transitions = |breaker: &str, from: &str, to: &str| {
        get(
            &m,
            "circuit_breaker.transitions",
            &[("breaker", breaker), ("from", from), ("to", to)],
        )
    };
    assert_eq!(transitions("payments", "closed", "open"), 1.0);
    assert_eq!(transitions("payments", "open", "half_open"), 0.0);
    assert_eq!(m["circuit_breaker.retry_after"].unit, "s");
    assert_eq!(
        get(
            &m,
            "circuit_breaker.retry_after",
            &[("breaker", "payments")]
        ),
        20.0
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.recent_failures",
            &[("breaker", "payments")]
        ),
        2.0
    );
    assert_eq!(m["circuit_breaker.recent_failures"].kind, "up-down counter");

    // The pool's endpoints are breakers named after their keys; its own figures by `pool`.
    assert_eq!(
        get(
            &m,
            "circuit_breaker.calls",
            &[("breaker", "8080"), ("outcome", "success")]
        ) + get(
            &m,
            "circuit_breaker.calls",
            &[("breaker", "8081"), ("outcome", "success")]
        ),
        1.0
    );
    let pool_figure = |name: &str| get(&m, name, &[("pool", "upstreams")]);
    assert_eq!(pool_figure("circuit_breaker.pool.endpoints"), 2.0);
    assert_eq!(pool_figure("circuit_breaker.pool.in_flight"), 1.0);
    assert_eq!(pool_figure("circuit_breaker.pool.picked"), 2.0);
    assert_eq!(pool_figure("circuit_breaker.pool.isolated"), 0.0);
    assert_eq!(m["circuit_breaker.pool.endpoints"].unit, "{endpoint}");

    // Read at collection time: past the open period with no traffic, the next collection
    // finds the breaker half-open; a finished pick is out of flight.
    held.success();
    clock.advance(OPEN_FOR);
    let m = collect(&provider, &exporter);
    assert_eq!(
        get(&m, "circuit_breaker.state", &[("breaker", "payments")]),
        1.0
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.retry_after",
            &[("breaker", "payments")]
        ),
        0.0
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.pool.in_flight",
            &[("pool", "upstreams")]
        ),
        0.0
    );
}

/// A retry, a hedge and two limiters (over a boxed algorithm and over `Aimd`), driven by
/// hand on a `ManualClock` to figures worked out below (the core's
/// `tests/observe/standalone.rs` scrapes the same): each figure under its name's attribute.
#[test]
fn retries_hedges_and_limiters_held_on_their_own_are_exported() {
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    let clock = ManualClock::new();
    // Budgets of half the calls, no reserve: ⌊calls / 2⌋ less what was paid.
    let half = || {
        RetryBudget::new(0.5)
            .unwrap()
            .min_retries_per_second(0)
            .clock(clock.clone())
    };
    let retry = Retry::new(2)
        .unwrap()
        .budget(half())
        .backoff(Duration::ZERO, Duration::ZERO)
        .seed(1)
        .throttle(TokenBucket::new(4.0, 0.5).unwrap());
    let hedge = Hedge::after(Duration::from_millis(20))
        .max_attempts(3)
        .budget(half())
        .throttle(TokenBucket::new(4.0, 0.5).unwrap());
    let boxed: Arc<Limiter> = Arc::new(Limiter::new(Box::new(Fixed::new(5))));
    let aimd: Arc<Limiter<Aimd>> =
        Arc::new(Limiter::new(Aimd::new().initial_limit(2).min_limit(1)));
    let metrics = BreakerMetrics::new(&meter);
    metrics
        .retry("search", retry.clone())
        .retry("search", Retry::new(5).unwrap())
        .hedge("search", hedge.clone())
        .limiter("fixed", Arc::clone(&boxed))
        .limiter("aimd", Arc::clone(&aimd));
    assert!(
        format!("{metrics:?}").contains("standalone: 5"),
        "{metrics:?}"
    );

    // The retry: four calls (a budget of two retries). a retried then exhausted, b
    // retried; c refused by the spent budget three times; d pushed back four times; the
    // throttle at half, c throttled five times; e past its 10 ms deadline six times; three
    // more calls: eight, a budget of four, two spent.
    let [mut a, mut b, mut c, mut d] = [(); 4].map(|()| retry.start(None));
    assert!(matches!(
        retry.next(&mut a, Cause::Failure),
        Next::Retry { .. }
    ));
    assert_eq!(
        retry.next(&mut a, Cause::Failure),
        Next::Stop(Stop::Exhausted)
    );
    assert!(matches!(
        retry.next(&mut b, Cause::Failure),
        Next::Retry { .. }
    ));
    for _ in 0..3 {
        assert_eq!(retry.next(&mut c, Cause::Failure), Next::Stop(Stop::Budget));
    }
    for _ in 0..4 {
        assert_eq!(
            retry.next(&mut d, Cause::Pushback(None)),
            Next::Stop(Stop::Pushback)
        );
    }
    let throttle = retry.retry_throttle().unwrap();
    throttle.record_failure();
    throttle.record_failure();
    for _ in 0..5 {
        assert_eq!(
            retry.next(&mut c, Cause::Failure),
            Next::Stop(Stop::Throttled)
        );
    }
    let mut e = retry.start(Some(Duration::from_millis(10)));
    clock.advance(Duration::from_millis(10));
    for _ in 0..6 {
        assert_eq!(
            retry.next(&mut e, Cause::Failure),
            Next::Stop(Stop::Deadline)
        );
    }
    for _ in 0..3 {
        let _ = retry.start(None);
    }

    // The hedge: six calls (a budget of three hedges), three sent, four refused; six past
    // their deadline; the throttle at half, one refused; two calls won by a hedge (two
    // cancelled each), one by its first attempt (one cancelled); four more calls: ten, a
    // budget of five, three spent.
    for _ in 0..6 {
        hedge.hedge_budget().deposit();
    }
    for _ in 0..3 {
        assert!(matches!(hedge.next_hedge(1, None), Next::Retry { .. }));
    }
    for _ in 0..4 {
        assert_eq!(hedge.next_hedge(1, None), Next::Stop(Stop::Budget));
    }
    for _ in 0..6 {
        assert_eq!(
            hedge.next_hedge(1, Some(Duration::ZERO)),
            Next::Stop(Stop::Deadline)
        );
    }
    let throttle = hedge.hedge_throttle().unwrap();
    throttle.record_failure();
    throttle.record_failure();
    assert_eq!(hedge.next_hedge(1, None), Next::Stop(Stop::Throttled));
    hedge.count_end(true, 2);
    hedge.count_end(true, 2);
    hedge.count_end(false, 1);
    for _ in 0..4 {
        hedge.hedge_budget().deposit();
    }

    // The limiters: fixed at 5, two calls out; Aimd at 2, two out, four turned away, then
    // the first answers in 5 ms having started with one of two out (half the limit): 3.
    let held = [
        boxed.try_acquire(Duration::ZERO).unwrap(),
        boxed.try_acquire(Duration::ZERO).unwrap(),
    ];
    let first = aimd.try_acquire(Duration::ZERO).unwrap();
    let second = aimd.try_acquire(Duration::ZERO).unwrap();
    for _ in 0..4 {
        assert!(aimd.try_acquire(Duration::ZERO).is_err());
    }
    assert_eq!(first.success(Duration::from_millis(5)), 3);

    let m = collect(&provider, &exporter);
    let retried = |decision: &str| {
        get(
            &m,
            "circuit_breaker.retry.decisions",
            &[("retry", "search"), ("decision", decision)],
        )
    };
    assert_eq!(
        [
            "retried",
            "budget_denied",
            "exhausted",
            "past_deadline",
            "pushed_back",
            "throttled"
        ]
        .map(retried),
        [2.0, 3.0, 1.0, 6.0, 4.0, 5.0]
    );
    assert_eq!(
        m["circuit_breaker.retry.decisions"].points.len(),
        6,
        "the second retry named search skipped"
    );
    assert_eq!(m["circuit_breaker.retry.decisions"].unit, "{decision}");
    assert_eq!(
        get(
            &m,
            "circuit_breaker.retry.budget.balance",
            &[("retry", "search")]
        ),
        2.0
    );
    let hedged = |decision: &str| {
        get(
            &m,
            "circuit_breaker.hedge.decisions",
            &[("hedge", "search"), ("decision", decision)],
        )
    };
    assert_eq!(
        [
            "hedged",
            "won",
            "cancelled",
            "budget_denied",
            "throttled",
            "past_deadline"
        ]
        .map(hedged),
        [3.0, 2.0, 5.0, 4.0, 1.0, 6.0]
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.hedge.budget.balance",
            &[("hedge", "search")]
        ),
        2.0
    );
    let of = |name: &str, limiter: &str| get(&m, name, &[("limiter", limiter)]);
    for (limiter, limit, in_flight, limited) in [("fixed", 5.0, 2.0, 0.0), ("aimd", 3.0, 1.0, 4.0)]
    {
        assert_eq!(of("circuit_breaker.limiter.limit", limiter), limit);
        assert_eq!(of("circuit_breaker.limiter.in_flight", limiter), in_flight);
        assert_eq!(of("circuit_breaker.limiter.limited", limiter), limited);
    }
    assert_eq!(m["circuit_breaker.limiter.limited"].kind, "counter");
    assert_eq!(
        m["circuit_breaker.limiter.in_flight"].kind,
        "up-down counter"
    );

    // Read at collection time: the calls out end, and the next collection has none.
    drop((held, second));
    let m = collect(&provider, &exporter);
    assert_eq!(of_in_flight(&m, "fixed"), 0.0);
    assert_eq!(of_in_flight(&m, "aimd"), 0.0);
}

/// A limiter's calls in flight, as exported.
fn of_in_flight(m: &BTreeMap<String, Exported>, limiter: &str) -> f64 {
    get(
        m,
        "circuit_breaker.limiter.in_flight",
        &[("limiter", limiter)],
    )
}

/// A limiter whose algorithm panics when read costs the collection its own data points
/// only.
#[test]
fn a_panicking_limit_costs_only_its_limiters_data_points() {
    #[derive(Debug)]
    struct Broken;
    impl Algorithm for Broken {
        fn limit(&self) -> u32 {
            panic!("limit")
        }
        fn on_sample(&self, _: Sample) -> u32 {
            1
        }
        fn boxed_clone(&self) -> Box<dyn Algorithm> {
            Box::new(Broken)
        }
    }
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    BreakerMetrics::new(&meter)
        .limiter("broken", Arc::new(Limiter::new(Broken)))
        .limiter("fine", Arc::new(Limiter::new(Fixed::new(7))));
    let m = collect(&provider, &exporter);
    assert_eq!(
        get(&m, "circuit_breaker.limiter.limit", &[("limiter", "fine")]),
        7.0
    );
    assert_eq!(m["circuit_breaker.limiter.limit"].points.len(), 1, "{m:#?}");
}

/// The crate docs' table: instrument, kind, unit and attribute names, by row.
fn documented() -> BTreeMap<String, (String, String, BTreeSet<String>)> {
    let cell = |text: &str| text.trim().trim_matches('`').to_owned();
    include_str!("../src/lib.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `circuit_breaker."))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let attributes = cells[3].split(", ").map(cell).collect();
            let unit = cell(cells[2]).replace('—', "");
            (
                format!("circuit_breaker.{}", cell(cells[0])),
                (cell(cells[1]), unit, attributes),
            )
        })
        .collect()
}

/// The table in the crate docs names every instrument exported, with its kind, unit and
/// attributes, and no instrument that is not. The collection has every instrument: a
/// throttled breaker, a policy with figures, a pool, a retry, a hedge, a limiter.
#[test]
fn the_docs_table_names_every_exported_instrument() {
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    let throttled = Breaker::builder()
        .name("throttled")
        .throttle(Throttle::new(2.0).unwrap())
        .build();
    let ema = Ema::new(EmaConfig::default()).unwrap();
    let figured = Breaker::builder().name("figured").policy(ema).build();
    let pool = Arc::new(Pool::new(|_: &u16| Breaker::builder()).named("upstreams"));
    pool.set([8080]);
    let metrics = BreakerMetrics::new(&meter);
    metrics
        .breaker(Arc::new(throttled))
        .breaker(Arc::new(figured))
        .pool(pool)
        .retry("search", Retry::new(2).unwrap())
        .hedge("search", Hedge::after(Duration::from_millis(20)))
        .limiter("search", Arc::new(Limiter::new(Aimd::new())));
    // The fleet's instruments are registered with the feature `fleet` only.
    #[cfg(feature = "fleet")]
    metrics.shared(Arc::new(
        lazybreaker_fleet::SharedBreaker::builder(lazybreaker_fleet::MemoryStore::new())
            .build(Breaker::builder().name("shared"))
            .unwrap(),
    ));

    let exported = collect(&provider, &exporter);
    let documented = documented();
    assert_eq!(documented.len(), 43, "{documented:#?}");
    let documented: BTreeMap<_, _> = documented
        .into_iter()
        .filter(|(name, _)| cfg!(feature = "fleet") || !name.starts_with("circuit_breaker.fleet."))
        .collect();
    for (name, metric) in &exported {
        let (kind, unit, attributes) = documented
            .get(name)
            .unwrap_or_else(|| panic!("`{name}` is exported but not in the docs' table"));
        assert_eq!(metric.kind, kind, "{name}'s kind");
        assert_eq!(&metric.unit, unit, "{name}'s unit");
        for (point, _) in &metric.points {
            let names: BTreeSet<String> = point.keys().cloned().collect();
            assert_eq!(&names, attributes, "{name}'s attributes");
        }
        assert!(!metric.points.is_empty(), "{name} has data points");
    }
    let missing: Vec<_> = documented
        .keys()
        .filter(|name| !exported.contains_key(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "in the table, never exported: {missing:?}"
    );
}

/// A breaker, registry or pool added after a collection is observed from the next one; a
/// name already read in a collection is skipped.
#[test]
fn sources_added_later_are_observed_and_names_are_unique() {
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    let metrics = BreakerMetrics::new(&meter);
    assert!(!collect(&provider, &exporter).contains_key("circuit_breaker.state"));

    let registry = Arc::new(lazybreaker::Registry::new(|_: &String| Breaker::builder()));
    let _ = registry.breaker("b").execute(|| Ok::<_, ()>(()));
    let _ = registry.breaker("a").execute(|| Err::<(), _>(()));
    let shadow = Arc::new(Breaker::builder().name("a").build());
    metrics.clone().registry(registry).breaker(shadow);
    let m = collect(&provider, &exporter);
    assert_eq!(
        m["circuit_breaker.state"].points.len(),
        2,
        "a, b: the second a skipped"
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.calls",
            &[("breaker", "a"), ("outcome", "failure")]
        ),
        1.0,
        "the registry's a, added first"
    );
    assert!(format!("{metrics:?}").contains("sources: 2"), "{metrics:?}");
}

/// One breaker's panicking `TripPolicy::gauges` does not take the collection down: every
/// breaker is observed, the one whose policy panicked is marked, its figures before the
/// panic kept.
#[test]
fn one_breakers_panicking_gauges_do_not_take_the_collection_down() {
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
    let (provider, exporter) = provider();
    let meter = provider.meter("lazybreaker-test");
    let bad = Arc::new(Breaker::builder().name("bad").policy(BadGauges).build());
    let good = Arc::new(Breaker::builder().name("good").build());
    let _ = good.execute(|| Ok::<_, ()>(()));
    BreakerMetrics::new(&meter).breaker(bad).breaker(good);

    let m = collect(&provider, &exporter);
    let panicked = |breaker: &str| {
        get(
            &m,
            "circuit_breaker.collection.panicked",
            &[("breaker", breaker)],
        )
    };
    assert_eq!((panicked("bad"), panicked("good")), (1.0, 0.0));
    assert_eq!(get(&m, "circuit_breaker.state", &[("breaker", "bad")]), 0.0);
    assert_eq!(
        get(
            &m,
            "circuit_breaker.calls",
            &[("breaker", "good"), ("outcome", "success")]
        ),
        1.0
    );
    assert_eq!(
        get(
            &m,
            "circuit_breaker.policy",
            &[("breaker", "bad"), ("figure", "before_the_panic")]
        ),
        1.5
    );
}
