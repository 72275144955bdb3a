//! What the instruments observe: the breakers, registries and pools added to a
//! [`BreakerMetrics`](crate::metrics::BreakerMetrics), read into snapshots when the meter
//! provider collects, each breaker's user code's panics contained (as the core's Prometheus
//! collector contains them).

use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};

use lazybreaker::door::contain::{self, end, FirstPanic};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::pool::{Pool, PoolSummary};
use lazybreaker::Breaker;
use lazybreaker::Registry;
use lazybreaker::Snapshot;

/// Where snapshots come from: each breaker's, and whether its user code (the policy's
/// gauges, the clock) panicked while it was taken (the first panic kept in the
/// `FirstPanic`).
type Source = Arc<dyn Fn(&mut Vec<(Snapshot, bool)>, &mut FirstPanic) + Send + Sync>;

/// Reads one pool's own figures; `None` if its user code (a breaker's clock) panicked.
type PoolSource = Arc<dyn Fn() -> Option<PoolFigures> + Send + Sync>;

/// A pool's own figures, read at a collection.
pub(crate) struct PoolFigures {
    /// The pool's name ([`Pool::named`]).
    pub(crate) name: String,
    /// Its figures.
    pub(crate) summary: PoolSummary,
}

/// One breaker's snapshot at a collection, and whether its policy's figures panicked.
pub(crate) struct Taken {
    pub(crate) snapshot: Snapshot,
    pub(crate) panicked: bool,
}

/// The sources the instruments' callbacks share; added to at any time.
#[derive(Default)]
pub(crate) struct Sources {
    breakers: RwLock<Vec<Source>>,
    pools: RwLock<Vec<PoolSource>>,
}

impl Sources {
    /// Adds a single breaker.
    pub(crate) fn breaker<P, O>(&self, breaker: Arc<Breaker<P, O>>)
    where
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.add(Arc::new(move |out, panics| {
            out.extend(breaker.snapshot_contained(panics))
        }));
    }

    /// Adds every breaker a registry holds at each collection, by name.
    pub(crate) fn registry<K, P, O, S>(&self, registry: Arc<Registry<K, P, O, S>>)
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
        S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
    {
        self.add(Arc::new(move |out, panics| {
            let from = out.len();
            registry.for_each(|breaker| out.extend(breaker.snapshot_contained(panics)));
            out[from..].sort_by(|a, b| a.0.name.cmp(&b.0.name));
        }));
    }

    /// Adds a pool: its endpoints' breakers, and its own figures.
    pub(crate) fn pool<K, P, O>(&self, pool: Arc<Pool<K, P, O>>)
    where
        K: Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        let endpoints = Arc::clone(&pool);
        self.add(Arc::new(move |out, panics| {
            endpoints.for_each(|breaker| out.extend(breaker.snapshot_contained(panics)));
        }));
        let figures: PoolSource = Arc::new(move || match contain::catch(|| pool.summary()) {
            Ok(summary) => Some(PoolFigures {
                name: pool.name().to_owned(),
                summary,
            }),
            Err(payload) => {
                let mut panics = FirstPanic::default();
                panics.keep(payload);
                end(panics);
                None
            }
        });
        self.pools
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(figures);
    }

    fn add(&self, source: Source) {
        self.breakers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(source);
    }

    /// Every breaker's snapshot now, in the order they were added (a registry's by name),
    /// the first of each name only. A panic of user code is ended here, not resumed: a
    /// collection runs for the monitoring system, which can do nothing with it.
    pub(crate) fn snapshots(&self) -> Vec<Taken> {
        let (mut out, mut panics) = (Vec::new(), FirstPanic::default());
        // Cloned out of the lock first: reading a breaker runs user code (its clock, its
        // policy's figures), never under the lock.
        let sources = self
            .breakers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for source in &sources {
            source(&mut out, &mut panics);
        }
        end(panics);
        let mut seen = HashSet::new();
        out.into_iter()
            .filter(|(s, _)| seen.insert(s.name.clone()))
            .map(|(snapshot, panicked)| Taken { snapshot, panicked })
            .collect()
    }

    /// Every pool's own figures now, in the order they were added (a pool whose user code
    /// panicked left out).
    pub(crate) fn pools(&self) -> Vec<PoolFigures> {
        let pools = self
            .pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        pools.iter().filter_map(|figures| figures()).collect()
    }

    /// How many breaker sources and pools were added.
    pub(crate) fn len(&self) -> (usize, usize) {
        let breakers = self
            .breakers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let pools = self
            .pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (breakers, pools)
    }
}
