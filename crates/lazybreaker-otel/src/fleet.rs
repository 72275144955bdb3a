//! A fleet's shared breakers (feature `fleet`): [`BreakerMetrics::shared`] observes a
//! `lazybreaker_fleet::SharedBreaker`'s local breaker as any other, and its own figures
//! ([`FleetStats`]) as the `circuit_breaker.fleet.*` instruments, read when the meter
//! provider collects. The names, units and meanings are [`FleetStats::counts`] and
//! [`FleetStats::levels`], which the fleet crate's Prometheus collector reads too.

use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};

use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker_fleet::{FleetStats, FleetStore, SharedBreaker};
use opentelemetry::metrics::{Meter, ObservableCounter, ObservableGauge};
use opentelemetry::KeyValue;

use super::metrics::BreakerMetrics;

/// Reads one shared breaker: its name and its figures.
type Source = Box<dyn Fn() -> (String, FleetStats) + Send + Sync>;

/// The shared breakers observed, and their instruments.
pub(crate) struct Fleets {
    sources: Arc<RwLock<Vec<Source>>>,
    _counters: Vec<ObservableCounter<u64>>,
    _gauges: Vec<ObservableGauge<u64>>,
}

/// Every shared breaker's figures now, each with its `breaker` attribute: the first of
/// each name only, as breakers are (a second would observe the same attributes twice).
fn read(sources: &RwLock<Vec<Source>>) -> Vec<(KeyValue, FleetStats)> {
    let mut seen = HashSet::new();
    sources
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|source| source())
        .filter(|(name, _)| seen.insert(name.clone()))
        .map(|(name, stats)| (KeyValue::new("breaker", name), stats))
        .collect()
}

impl Fleets {
    /// Registers the fleet's instruments on `meter`, observing no shared breaker yet.
    pub(crate) fn new(meter: &Meter) -> Self {
        let sources: Arc<RwLock<Vec<Source>>> = Arc::default();
        let none = FleetStats::default();
        let counters = none
            .counts()
            .enumerate()
            .map(|(i, figure)| {
                let sources = Arc::clone(&sources);
                meter
                    .u64_observable_counter(format!("circuit_breaker.fleet.{}", figure.name))
                    .with_unit(figure.unit)
                    .with_description(figure.help)
                    .with_callback(move |o| {
                        for (breaker, stats) in read(&sources) {
                            if let Some(figure) = stats.counts().nth(i) {
                                o.observe(figure.value, std::slice::from_ref(&breaker));
                            }
                        }
                    })
                    .build()
            })
            .collect();
        let gauges = none
            .levels()
            .enumerate()
            .map(|(i, figure)| {
                let sources = Arc::clone(&sources);
                meter
                    .u64_observable_gauge(format!("circuit_breaker.fleet.{}", figure.name))
                    .with_unit(figure.unit)
                    .with_description(figure.help)
                    .with_callback(move |o| {
                        for (breaker, stats) in read(&sources) {
                            if let Some(figure) = stats.levels().nth(i) {
                                o.observe(figure.value, std::slice::from_ref(&breaker));
                            }
                        }
                    })
                    .build()
            })
            .collect();
        Self {
            sources,
            _counters: counters,
            _gauges: gauges,
        }
    }
}

impl BreakerMetrics {
    /// Also observes `shared`: its local breaker as [`breaker`](Self::breaker) does, and
    /// its fleet figures ([`SharedBreaker::stats`]) as `circuit_breaker.fleet.*`, with the
    /// attribute `breaker` (feature `fleet`).
    ///
    /// ```
    /// use lazybreaker::Breaker;
    /// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
    /// use lazybreaker_otel::BreakerMetrics;
    /// use std::sync::Arc;
    ///
    /// let meter = opentelemetry::global::meter("my-service");
    /// let shared = Arc::new(
    ///     SharedBreaker::builder(MemoryStore::new())
    ///         .build(Breaker::builder().name("payments"))
    ///         .unwrap(),
    /// );
    /// BreakerMetrics::new(&meter).shared(Arc::clone(&shared));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    pub fn shared<S, P, O>(&self, shared: Arc<SharedBreaker<S, P, O>>) -> &Self
    where
        S: FleetStore + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.breaker(Arc::clone(shared.breaker()));
        self.fleets
            .sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(move || (shared.name().to_owned(), shared.stats())));
        self
    }
}
