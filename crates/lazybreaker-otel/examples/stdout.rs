//! lazybreaker's metrics exported to stdout through OpenTelemetry: a breaker tripped and a
//! pool picked from on a `ManualClock`, one collection flushed by hand, then shut down.
//! Bounded, no network: `cargo run -p lazybreaker-otel --example stdout`.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_otel::BreakerMetrics;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

fn main() {
    let provider = SdkMeterProvider::builder()
        .with_reader(
            PeriodicReader::builder(opentelemetry_stdout::MetricExporter::default()).build(),
        )
        .build();
    let meter = provider.meter("lazybreaker-example");

    let clock = ManualClock::new();
    let payments = Arc::new(
        Breaker::builder()
            .name("payments")
            .policy(ConsecutiveFailures::new(2).expect("a threshold above 0"))
            .timeout(Duration::from_secs(30))
            .clock(clock.clone())
            .build(),
    );
    let upstreams = Arc::new(
        Pool::new(|_: &String| Breaker::builder())
            .clock(clock.clone())
            .named("upstreams"),
    );
    upstreams.set(["10.0.0.1:8080".to_owned(), "10.0.0.2:8080".to_owned()]);
    BreakerMetrics::new(&meter)
        .breaker(Arc::clone(&payments))
        .pool(Arc::clone(&upstreams));

    let _ = payments.execute(|| Ok::<_, &str>(()));
    let _ = payments.execute(|| Err::<(), _>("down"));
    let _ = payments.execute(|| Err::<(), _>("down")); // opens
    let _ = payments.execute(|| Ok::<_, &str>(())); // rejected
    upstreams.pick().expect("an endpoint").success();
    clock.advance(Duration::from_secs(5));

    // One collection now, printed by the stdout exporter; then the reader stops.
    provider.force_flush().expect("a flush");
    provider.shutdown().expect("a shutdown");
}
