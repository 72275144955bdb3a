//! A service's metrics, as a user would wire them: its breaker and its pool of replicas
//! registered with `lazybreaker-otel` on the meter it already has.

use std::sync::Arc;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_otel::BreakerMetrics;
use opentelemetry::metrics::Meter;

/// The service's breaker in front of its payments provider, and its replicas.
pub struct Service {
    pub payments: Arc<Breaker<ConsecutiveFailures>>,
    pub replicas: Arc<Pool<u16, ConsecutiveFailures>>,
}

impl Service {
    /// The service on `clock`, its metrics on `meter`.
    pub fn new(meter: &Meter, clock: &ManualClock) -> Self {
        let payments = Arc::new(
            Breaker::builder()
                .name("payments")
                .policy(ConsecutiveFailures::new(2).expect("a threshold"))
                .clock(clock.clone())
                .build(),
        );
        let replicas = Arc::new(
            Pool::new(|_: &u16| {
                Breaker::builder().policy(ConsecutiveFailures::new(1).expect("a threshold"))
            })
            .clock(clock.clone())
            .named("replicas"),
        );
        replicas.set([8080, 8081, 8082]);
        BreakerMetrics::new(meter)
            .breaker(Arc::clone(&payments))
            .pool(Arc::clone(&replicas));
        Self { payments, replicas }
    }
}
