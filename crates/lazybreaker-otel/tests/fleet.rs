//! A fleet's shared breakers through OpenTelemetry (feature `fleet`): two instances of one
//! breaker on the in-process `MemoryStore` and one `ManualClock`; the observed one adopts
//! the other's trip, and its local breaker and fleet figures are read back through the SDK's
//! in-memory exporter.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_fleet::{MemoryStore, SharedBreaker};
use lazybreaker_otel::BreakerMetrics;
use lazybreaker_test_support::run;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

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

/// What one instrument exported: its kind, unit, and its data points that have exactly the
/// attribute `breaker` (its value, the point's value), as many as were exported.
#[derive(Debug)]
struct Exported {
    kind: &'static str,
    unit: String,
    by_breaker: Vec<(String, u64)>,
}

impl Exported {
    /// The value of the one data point of `breaker`.
    fn of(&self, breaker: &str) -> u64 {
        let found: Vec<u64> = self
            .by_breaker
            .iter()
            .filter(|(name, _)| name == breaker)
            .map(|(_, value)| *value)
            .collect();
        assert_eq!(found.len(), 1, "{breaker} in {self:?}");
        found[0]
    }
}

fn collect(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> BTreeMap<String, Exported> {
    exporter.reset();
    provider.force_flush().expect("a flush");
    let mut out = BTreeMap::new();
    let finished = exporter.get_finished_metrics().expect("the metrics");
    for metric in finished
        .iter()
        .flat_map(|m| m.scope_metrics())
        .flat_map(|s| s.metrics())
    {
        let mut by_breaker = Vec::new();
        let mut put = |attributes: Vec<&opentelemetry::KeyValue>, value: u64| {
            if let [kv] = attributes[..] {
                if kv.key.as_str() == "breaker" {
                    by_breaker.push((kv.value.to_string(), value));
                }
            }
        };
        let kind = match metric.data() {
            AggregatedMetrics::U64(MetricData::Sum(s)) => {
                s.data_points()
                    .for_each(|p| put(p.attributes().collect(), p.value()));
                "counter"
            }
            AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                g.data_points()
                    .for_each(|p| put(p.attributes().collect(), p.value()));
                "gauge"
            }
            AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                g.data_points()
                    .for_each(|p| put(p.attributes().collect(), u64::try_from(p.value()).unwrap()));
                "gauge"
            }
            _ => "other",
        };
        let exported = Exported {
            kind,
            unit: metric.unit().to_owned(),
            by_breaker,
        };
        out.insert(metric.name().to_owned(), exported);
    }
    out
}

#[test]
fn a_shared_breaker_is_observed_with_its_fleet_figures() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let clock = ManualClock::new();
    let store = MemoryStore::new();
    let payments = member(&store, &clock, "payments");
    let elsewhere = member(&store, &clock, "payments");
    let metrics = BreakerMetrics::new(&provider.meter("lazybreaker-test"));
    // Both instances, in one process: the first of the name is observed, as with breakers.
    metrics
        .shared(Arc::clone(&payments))
        .shared(Arc::clone(&elsewhere));

    run(async {
        payments
            .execute(|| async { Ok::<_, &str>(()) })
            .await
            .unwrap();
        // The other instance trips and publishes; the observed one adopts it after the
        // sync interval, and rejects.
        let _ = elsewhere.execute(|| async { Err::<(), _>("down") }).await;
        clock.advance(SYNC);
        assert!(payments
            .execute(|| async { Ok::<_, &str>(()) })
            .await
            .is_err());
    });

    let m = collect(&provider, &exporter);
    let fleet = |figure: &str| {
        let name = format!("circuit_breaker.fleet.{figure}");
        let exported = m
            .get(&name)
            .unwrap_or_else(|| panic!("{name} not exported: {m:#?}"));
        (
            exported.kind,
            exported.unit.as_str(),
            exported.of("payments"),
        )
    };
    assert_eq!(fleet("adopted"), ("counter", "{decision}", 1));
    // The first added (`payments`, which adopted), not the other (which published).
    assert_eq!(fleet("published"), ("counter", "{decision}", 0));
    assert_eq!(elsewhere.stats().published, 1);
    assert_eq!(fleet("store_errors"), ("counter", "{operation}", 0));
    assert_eq!(fleet("recreated"), ("counter", "{record}", 0));
    assert_eq!(fleet("probe_rejections"), ("counter", "{call}", 0));
    assert_eq!(fleet("generation"), ("gauge", "{generation}", 1));
    assert_eq!(fleet("degraded"), ("gauge", "1", 0));
    // The first call synced, and the one after the interval: at least two round trips.
    let (kind, unit, round_trips) = fleet("round_trips");
    assert_eq!((kind, unit), ("counter", "{operation}"));
    assert!(round_trips >= 2, "{round_trips}");
    // Its local breaker, as any breaker: open, by the adopted trip.
    assert_eq!(m["circuit_breaker.state"].of("payments"), 2);
    // One data point per fleet instrument, though two of the name were added.
    for (name, exported) in &m {
        if name.starts_with("circuit_breaker.fleet.") {
            assert_eq!(exported.by_breaker.len(), 1, "{name}: {exported:?}");
        }
    }
}
