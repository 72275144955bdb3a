//! The instruments as an OpenTelemetry SDK exports them: a meter provider with the in-memory
//! exporter, flushed by hand, read back. Breakers and a pool on a `ManualClock`: no sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig};
use lazybreaker::pool::Pool;
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
/// throttled breaker, a policy with figures, a pool.
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
        .pool(pool);
    // The fleet's instruments are registered with the feature `fleet` only.
    #[cfg(feature = "fleet")]
    metrics.fleet(Arc::new(
        lazybreaker_fleet::SharedBreaker::builder(lazybreaker_fleet::MemoryStore::new())
            .build(Breaker::builder().name("shared"))
            .unwrap(),
    ));

    let exported = collect(&provider, &exporter);
    let documented = documented();
    assert_eq!(documented.len(), 36, "{documented:#?}");
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
