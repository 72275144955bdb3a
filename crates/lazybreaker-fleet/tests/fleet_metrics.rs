//! The fleet's figures as Prometheus scrapes them (feature `prometheus`): shared breakers on
//! the in-process `MemoryStore` and one `ManualClock`, their `FleetCollector` series beside
//! the core collector's series of their local breakers.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_fleet::prometheus::FleetCollector;
use lazybreaker_fleet::{MemoryStore, SharedBreaker};
use lazybreaker_test_support::run;
use prometheus_client::registry::Registry;

const SYNC: Duration = Duration::from_millis(100);

/// An instance of breaker `name` on `store`: trips at the first failure, open for 10 s.
fn member(store: &MemoryStore, clock: &ManualClock, name: &str) -> Arc<SharedBreaker<MemoryStore>> {
    Arc::new(
        SharedBreaker::builder(store.clone())
            .sync_interval(SYNC)
            .build(
                Breaker::builder()
                    .name(name)
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .timeout(Duration::from_secs(10))
                    .clock(clock.clone()),
            )
            .unwrap(),
    )
}

/// The value of the series `series` (its name and labels, as the text writes them).
fn value(text: &str, series: &str) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .collect();
    assert_eq!(found.len(), 1, "{series} in\n{text}");
    found[0]
}

#[test]
fn each_shared_breaker_has_its_fleet_series_beside_its_breakers() {
    let clock = ManualClock::new();
    let (payments_store, search_store) = (MemoryStore::new(), MemoryStore::new());
    // This instance's payments breaker, and another instance's on the same store.
    let payments = member(&payments_store, &clock, "payments");
    let elsewhere = member(&payments_store, &clock, "payments");
    let search = member(&search_store, &clock, "search");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(
        BreakerCollector::new()
            .breaker(Arc::clone(payments.breaker()))
            .breaker(Arc::clone(search.breaker())),
    ));
    registry.register_collector(Box::new(
        FleetCollector::new()
            .shared(Arc::clone(&payments))
            .shared(Arc::clone(&search))
            // A second of the name: skipped (the first kept), or every payments series
            // below would have two samples.
            .shared(Arc::clone(&elsewhere)),
    ));
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };

    run(async {
        for m in [&payments, &elsewhere, &search] {
            m.execute(|| async { Ok::<_, &str>(()) }).await.unwrap();
        }
        let text = scrape();
        for (name, figure) in [
            ("payments", "published"),
            ("payments", "adopted"),
            ("payments", "store_errors"),
            ("payments", "probe_rejections"),
            ("search", "store_errors"),
        ] {
            let series = format!("circuit_breaker_fleet_{figure}_total{{breaker=\"{name}\"}}");
            assert_eq!(value(&text, &series), 0.0, "{series}");
        }
        // The first call of each synced: one round trip.
        assert_eq!(
            value(
                &text,
                r#"circuit_breaker_fleet_round_trips_total{breaker="payments"}"#
            ),
            1.0
        );

        // The other instance trips and publishes; this one adopts it after the sync interval.
        let _ = elsewhere.execute(|| async { Err::<(), _>("down") }).await;
        clock.advance(SYNC);
        assert!(payments
            .execute(|| async { Ok::<_, &str>(()) })
            .await
            .is_err());
        // The search store fails: its breaker decides locally.
        search_store.set_failing(true);
        search
            .execute(|| async { Ok::<_, &str>(()) })
            .await
            .unwrap();
    });

    let text = scrape();
    let fleet = |figure: &str, name: &str| {
        value(
            &text,
            &format!("circuit_breaker_fleet_{figure}{{breaker=\"{name}\"}}"),
        )
    };
    assert_eq!(fleet("adopted_total", "payments"), 1.0);
    assert_eq!(
        fleet("published_total", "payments"),
        0.0,
        "the other instance published"
    );
    assert_eq!(fleet("generation", "payments"), 1.0);
    assert_eq!(fleet("degraded", "payments"), 0.0);
    assert_eq!(fleet("degraded", "search"), 1.0);
    assert!(fleet("store_errors_total", "search") >= 1.0, "{text}");
    // The adopted trip, as the core's collector reads the local breaker: open.
    assert_eq!(
        value(&text, r#"circuit_breaker_state{breaker="payments"}"#),
        2.0
    );
    assert_eq!(
        value(&text, r#"circuit_breaker_state{breaker="search"}"#),
        0.0
    );
    // Every family once, with its type.
    for (family, kind) in [
        ("round_trips", "counter"),
        ("store_errors", "counter"),
        ("published", "counter"),
        ("adopted", "counter"),
        ("recreated", "counter"),
        ("probe_rejections", "counter"),
        ("generation", "gauge"),
        ("degraded", "gauge"),
    ] {
        let line = format!("# TYPE circuit_breaker_fleet_{family} {kind}");
        assert_eq!(text.matches(&line).count(), 1, "{line} in\n{text}");
    }
}

#[test]
fn a_collector_of_no_shared_breaker_writes_nothing() {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(FleetCollector::new()));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(!text.contains("circuit_breaker_fleet"), "{text}");
}

/// The module docs' table names every family the collector writes, with its type, and no
/// other: each of `FleetStats::counts` a counter (`_total`), each of `levels` a gauge.
#[test]
fn the_docs_table_is_the_collectors_families() {
    use lazybreaker_fleet::FleetStats;
    let documented: Vec<(String, String)> = include_str!("../src/prometheus.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `circuit_breaker_fleet_"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            (
                cells[0].trim_end_matches('`').to_owned(),
                cells[1].to_owned(),
            )
        })
        .collect();
    let none = FleetStats::default();
    let expected: Vec<(String, String)> = none
        .counts()
        .map(|f| (format!("{}_total", f.name), "counter".to_owned()))
        .chain(
            none.levels()
                .map(|f| (f.name.to_owned(), "gauge".to_owned())),
        )
        .collect();
    assert_eq!(documented, expected);
}
