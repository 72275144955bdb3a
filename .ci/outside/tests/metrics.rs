//! The user's metrics read back through OpenTelemetry's in-memory exporter.

use std::collections::BTreeMap;

use lazybreaker::ManualClock;
use lazybreaker_user::Service;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// Every data point exported, by `name{attribute=value,…}`.
fn collect(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> BTreeMap<String, f64> {
    exporter.reset();
    provider.force_flush().expect("a flush");
    let mut out = BTreeMap::new();
    for scope in exporter
        .get_finished_metrics()
        .expect("the metrics")
        .iter()
        .flat_map(|m| m.scope_metrics())
    {
        for metric in scope.metrics() {
            let mut put = |attributes: Vec<String>, value: f64| {
                out.insert(
                    format!("{}{{{}}}", metric.name(), attributes.join(",")),
                    value,
                );
            };
            let attributes = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                let mut kvs: Vec<String> =
                    kvs.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
                kvs.sort();
                kvs
            };
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(s)) => s
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value() as f64)),
                AggregatedMetrics::U64(MetricData::Gauge(g)) => g
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value() as f64)),
                AggregatedMetrics::I64(MetricData::Sum(s)) => s
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value() as f64)),
                AggregatedMetrics::I64(MetricData::Gauge(g)) => g
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value() as f64)),
                AggregatedMetrics::F64(MetricData::Sum(s)) => s
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value())),
                AggregatedMetrics::F64(MetricData::Gauge(g)) => g
                    .data_points()
                    .for_each(|p| put(attributes(&mut p.attributes()), p.value())),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn the_breaker_and_the_pool_are_exported() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let clock = ManualClock::new();
    let service = Service::new(&provider.meter("lazybreaker-user"), &clock);

    assert!(service.payments.execute(|| Ok::<_, ()>(())).is_ok());
    for _ in 0..2 {
        let _ = service.payments.execute(|| Err::<(), _>("down"));
    }
    assert!(
        service.payments.execute(|| Ok::<_, ()>(())).is_err(),
        "open"
    );
    service.replicas.pick().expect("a replica").success();
    let held = service.replicas.pick().expect("a replica");

    let m = collect(&provider, &exporter);
    let value = |key: &str| *m.get(key).unwrap_or_else(|| panic!("{key} not in {m:#?}"));
    // The breaker: 2 open, its calls by outcome.
    assert_eq!(value("circuit_breaker.state{breaker=payments}"), 2.0);
    assert_eq!(
        value("circuit_breaker.calls{breaker=payments,outcome=success}"),
        1.0
    );
    assert_eq!(
        value("circuit_breaker.calls{breaker=payments,outcome=failure}"),
        2.0
    );
    assert_eq!(
        value("circuit_breaker.calls{breaker=payments,outcome=rejected_open}"),
        1.0
    );
    // The pool: its own figures, and its endpoints' breakers named after their keys.
    assert_eq!(value("circuit_breaker.pool.endpoints{pool=replicas}"), 3.0);
    assert_eq!(value("circuit_breaker.pool.picked{pool=replicas}"), 2.0);
    assert_eq!(value("circuit_breaker.pool.in_flight{pool=replicas}"), 1.0);
    for replica in ["8080", "8081", "8082"] {
        assert_eq!(
            value(&format!("circuit_breaker.state{{breaker={replica}}}")),
            0.0
        );
    }
    held.success();
    assert_eq!(
        collect(&provider, &exporter)["circuit_breaker.pool.in_flight{pool=replicas}"],
        0.0
    );
}
