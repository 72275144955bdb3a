//! The fleet's own figures for Prometheus (feature `prometheus`, on `prometheus-client`, as
//! the core's collector): a [`FleetCollector`] reads each shared breaker it was given at
//! scrape time, nothing on a call's path. Register it beside the core's
//! [`BreakerCollector`](lazybreaker::prometheus::BreakerCollector), which reads the shared
//! breaker's local breaker ([`SharedBreaker::breaker`]) as any other.
//!
//! | series | type | labels | what |
//! |---|---|---|---|
//! | `circuit_breaker_fleet_round_trips_total` | counter | `breaker` | store operations made, one round trip each |
//! | `circuit_breaker_fleet_store_errors_total` | counter | `breaker` | store operations that failed or timed out (the breaker then decided locally) |
//! | `circuit_breaker_fleet_published_total` | counter | `breaker` | local decisions written to the shared record |
//! | `circuit_breaker_fleet_adopted_total` | counter | `breaker` | other instances' decisions adopted |
//! | `circuit_breaker_fleet_recreated_total` | counter | `breaker` | times a vanished shared record was written again |
//! | `circuit_breaker_fleet_probe_rejections_total` | counter | `breaker` | half-open probes not sent, the fleet's probe slots all held ([`FleetStats::fleet_rejections`]) |
//! | `circuit_breaker_fleet_generation` | gauge | `breaker` | the shared generation this instance follows |
//! | `circuit_breaker_fleet_degraded` | gauge | `breaker` | 1 while the store is failing, else 0 |
//!
//! The names and meanings come from [`FleetStats::counts`] and [`FleetStats::levels`], which
//! `lazybreaker-otel` reads too (`circuit_breaker.fleet.*`).
//!
//! ```
//! use lazybreaker::prometheus::BreakerCollector;
//! use lazybreaker::Breaker;
//! use lazybreaker_fleet::prometheus::FleetCollector;
//! use lazybreaker_fleet::{MemoryStore, SharedBreaker};
//! use prometheus_client::registry::Registry;
//! use std::sync::Arc;
//!
//! let shared = Arc::new(
//!     SharedBreaker::builder(MemoryStore::new())
//!         .build(Breaker::builder().name("payments"))
//!         .unwrap(),
//! );
//! let mut registry = Registry::default();
//! registry.register_collector(Box::new(
//!     BreakerCollector::new().breaker(Arc::clone(shared.breaker())),
//! ));
//! registry.register_collector(Box::new(FleetCollector::new().shared(Arc::clone(&shared))));
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains(r#"circuit_breaker_state{breaker="payments"} 0"#));
//! assert!(text.contains(r#"circuit_breaker_fleet_round_trips_total{breaker="payments"} 0"#));
//! ```

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::shared::SharedBreaker;
use super::stats::{FleetFigure, FleetStats};
use super::store::FleetStore;

/// Reads one shared breaker: its name and its figures.
type Source = Box<dyn Fn() -> (String, FleetStats) + Send + Sync>;

/// A `prometheus-client` [`Collector`] of the shared breakers it was given: see the
/// [module documentation](self) for the series.
#[derive(Default)]
pub struct FleetCollector {
    sources: Vec<Source>,
}

impl FleetCollector {
    /// A collector of no shared breaker yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also collects `shared`'s figures, labelled with its name.
    #[must_use]
    pub fn shared<S, P, O>(mut self, shared: Arc<SharedBreaker<S, P, O>>) -> Self
    where
        S: FleetStore + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.sources
            .push(Box::new(move || (shared.name().to_owned(), shared.stats())));
        self
    }
}

impl fmt::Debug for FleetCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetCollector")
            .field("sources", &self.sources.len())
            .finish()
    }
}

/// A shared breaker's figures in the order of the series: the counts, then the levels.
fn figures(stats: &FleetStats) -> Vec<(FleetFigure, MetricType)> {
    let counts = stats.counts().map(|f| (f, MetricType::Counter));
    counts
        .chain(stats.levels().map(|f| (f, MetricType::Gauge)))
        .collect()
}

impl Collector for FleetCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        // The first shared breaker of each name only, as the core's collector does with
        // breakers: a second one would write a second sample of the same series.
        let mut seen = HashSet::new();
        let read: Vec<(String, Vec<(FleetFigure, MetricType)>)> = self
            .sources
            .iter()
            .map(|source| source())
            .filter(|(name, _)| seen.insert(name.clone()))
            .map(|(name, stats)| (name, figures(&stats)))
            .collect();
        // The families, named by what no breaker's figures change.
        for (i, (figure, kind)) in figures(&FleetStats::default()).into_iter().enumerate() {
            if read.is_empty() {
                break;
            }
            let name = format!("circuit_breaker_fleet_{}", figure.name);
            let mut metric = encoder.encode_descriptor(&name, figure.help, None, kind)?;
            for (breaker, figures) in &read {
                let Some((figure, _)) = figures.get(i) else {
                    continue;
                };
                let labels = [("breaker", breaker.as_str())];
                let mut family = metric.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => {
                        family.encode_counter::<NoLabelSet, _, u64>(&figure.value, None)?
                    }
                    _ => family.encode_gauge(&figure.value)?,
                }
            }
        }
        Ok(())
    }
}
