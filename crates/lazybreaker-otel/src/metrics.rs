//! [`BreakerMetrics`]: the observable instruments, registered once on a `Meter`, and the
//! sources their callbacks read when the meter provider collects.

use std::fmt;
use std::sync::Arc;

use lazybreaker::door::metrics::{forced_value, state_label, state_value};
use lazybreaker::limit::{Algorithm, Limiter};
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::pool::{Pool, PoolSummary};
use lazybreaker::retry::{Hedge, Retry};
use lazybreaker::Breaker;
use lazybreaker::CheckStatus;
use lazybreaker::Registry;
use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Meter, ObservableCounter, ObservableGauge,
    ObservableUpDownCounter,
};
use opentelemetry::KeyValue;

use crate::point::{level, pair};
use crate::source::{PoolFigures, Sources, Taken};
use crate::standalone::{self, Held, HeldInstruments};

/// lazybreaker's metrics as OpenTelemetry observable instruments: see the
/// [crate documentation](crate) for the instruments.
///
/// [`new`](Self::new) registers every instrument on the meter at once; the breakers,
/// registries and pools added since are read by the instruments' callbacks each time the
/// meter provider collects, and nothing is written on a call's path. A clone shares the
/// same instruments and sources: what is added through one is observed by all.
///
/// The instruments' callbacks live as long as the meter provider does (the OpenTelemetry
/// SDK has no way to take an observable instrument's callback back): dropping this handle
/// does not stop the observation, and what was added stays observed. Build one per meter
/// and add every source to it (or to its clones): two built on one meter would register
/// each instrument twice, and a breaker observed by both would give two readings of one
/// data point in a collection.
#[derive(Clone)]
pub struct BreakerMetrics {
    sources: Arc<Sources>,
    held: Arc<Held>,
    instruments: Arc<Instruments>,
    /// The shared breakers' own figures (feature `fleet`).
    #[cfg(feature = "fleet")]
    pub(crate) fleets: Arc<crate::fleet::Fleets>,
}

/// The registered instruments, kept with the handle.
struct Instruments {
    counters: Vec<ObservableCounter<u64>>,
    up_down: Vec<ObservableUpDownCounter<i64>>,
    gauges: Vec<ObservableGauge<i64>>,
    float_gauges: Vec<ObservableGauge<f64>>,
    held: HeldInstruments,
}

impl BreakerMetrics {
    /// Registers the instruments on `meter`, observing no breaker yet.
    pub fn new(meter: &Meter) -> Self {
        let sources = Arc::new(Sources::default());
        let held = Arc::new(Held::default());
        let s = &sources;
        let instruments = Instruments {
            counters: breaker_counters(meter, s)
                .into_iter()
                .chain(pool_counters(meter, s))
                .collect(),
            up_down: up_down_counters(meter, s),
            gauges: gauges(meter, s),
            float_gauges: float_gauges(meter, s),
            held: standalone::instruments(meter, &held),
        };
        Self {
            sources,
            held,
            instruments: Arc::new(instruments),
            #[cfg(feature = "fleet")]
            fleets: Arc::new(crate::fleet::Fleets::new(meter)),
        }
    }

    /// Also observes `breaker`.
    pub fn breaker<P, O>(&self, breaker: Arc<Breaker<P, O>>) -> &Self
    where
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.sources.breaker(breaker);
        self
    }

    /// Also observes every breaker `registry` holds at each collection (by name).
    pub fn registry<K, P, O, S>(&self, registry: Arc<Registry<K, P, O, S>>) -> &Self
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
        S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
    {
        self.sources.registry(registry);
        self
    }

    /// Also observes the breakers of every endpoint `pool` has at each collection, named
    /// after their keys, and the pool's own figures (`circuit_breaker.pool.*`, attribute
    /// `pool`: its [name](Pool::named)).
    pub fn pool<K, P, O>(&self, pool: Arc<Pool<K, P, O>>) -> &Self
    where
        K: Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.sources.pool(pool);
        self
    }

    /// Also observes `retry`, a [`Retry`] held on its own (alone, or the one a tower
    /// `RetryLayer`, a reqwest or a gRPC retry decides with), under the attribute
    /// `retry="name"`: its decisions ([`Retry::stats`]) as `circuit_breaker.retry.decisions`
    /// and its budget's balance
    /// ([`RetryBudget::balance`](lazybreaker::retry::RetryBudget::balance)) as
    /// `circuit_breaker.retry.budget.balance`, read at each collection.
    ///
    /// A clone of the retry is as good as the retry: clones share the counters and the
    /// budget (but [`Retry::seed`] starts a retry's counters afresh: give it the retry as
    /// configured). The retries' names must be unique: a name already read in a collection
    /// is skipped, the first kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::{Cause, Retry};
    /// use lazybreaker_otel::BreakerMetrics;
    ///
    /// let meter = opentelemetry::global::meter("my-service");
    /// let retry = Retry::new(3)?;
    /// BreakerMetrics::new(&meter).retry("search", retry.clone());
    /// let mut attempts = retry.start(None);
    /// let _ = retry.next(&mut attempts, Cause::Failure); // counted where the metrics read
    /// assert_eq!(retry.stats().retries, 1);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn retry(&self, name: impl Into<String>, retry: Retry) -> &Self {
        self.held.retry(name.into(), retry);
        self
    }

    /// Also observes `hedge`, a [`Hedge`] held on its own (alone, or the one a tower
    /// `HedgeLayer` or a gRPC hedge decides with), under the attribute `hedge="name"`: its
    /// decisions ([`Hedge::stats`]) as `circuit_breaker.hedge.decisions` and its budget's
    /// balance ([`Hedge::hedge_budget`]) as `circuit_breaker.hedge.budget.balance`, read at
    /// each collection.
    ///
    /// A clone of the hedge is as good as the hedge: clones share the counters and the
    /// budget. The hedges' names must be unique: a name already read in a collection is
    /// skipped, the first kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::retry::Hedge;
    /// use lazybreaker_otel::BreakerMetrics;
    /// use std::time::Duration;
    ///
    /// let meter = opentelemetry::global::meter("my-service");
    /// let hedge = Hedge::after(Duration::from_millis(20));
    /// BreakerMetrics::new(&meter).hedge("search", hedge.clone());
    /// ```
    pub fn hedge(&self, name: impl Into<String>, hedge: Hedge) -> &Self {
        self.held.hedge(name.into(), hedge);
        self
    }

    /// Also observes `limiter`, an adaptive concurrency [`Limiter`] held on its own (over
    /// any algorithm: `Limiter<Box<dyn Algorithm>>`, `Limiter<Aimd>`, …), under the
    /// attribute `limiter="name"`: its limit as `circuit_breaker.limiter.limit`, its calls in
    /// flight as `circuit_breaker.limiter.in_flight` and the calls it turned away
    /// ([`Rejected::Limited`](lazybreaker::Rejected::Limited)) as
    /// `circuit_breaker.limiter.limited`, read at each collection. (A pool's limits are its
    /// endpoints': `circuit_breaker.pool.at_limit`.)
    ///
    /// The limiters' names must be unique: a name already read in a collection is skipped,
    /// the first kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::limit::{Aimd, Limiter};
    /// use lazybreaker_otel::BreakerMetrics;
    /// use std::sync::Arc;
    ///
    /// let meter = opentelemetry::global::meter("my-service");
    /// let limiter = Arc::new(Limiter::new(Aimd::new()));
    /// BreakerMetrics::new(&meter).limiter("search", Arc::clone(&limiter));
    /// ```
    pub fn limiter<A: Algorithm>(
        &self,
        name: impl Into<String>,
        limiter: Arc<Limiter<A>>,
    ) -> &Self {
        self.held.limiter(name.into(), limiter);
        self
    }
}

impl fmt::Debug for BreakerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (sources, pools) = self.sources.len();
        let i = &self.instruments;
        let held = &i.held;
        let instruments = i.counters.len()
            + i.up_down.len()
            + i.gauges.len()
            + i.float_gauges.len()
            + held.counters.len()
            + held.up_down.len()
            + held.gauges.len();
        f.debug_struct("BreakerMetrics")
            .field("sources", &sources)
            .field("pools", &pools)
            .field("standalone", &self.held.len())
            .field("instruments", &instruments)
            .finish()
    }
}

/// What one instrument observes of one breaker: its snapshot, its `breaker` attribute.
type PerBreaker<T> = fn(&Taken, &KeyValue, &dyn AsyncInstrument<T>);

/// What one instrument observes of one pool: its figures, its `pool` attribute.
type PerPool<T> = fn(&PoolSummary, &KeyValue, &dyn AsyncInstrument<T>);

/// `builder` with a callback observing every breaker's snapshot.
fn breakers<'a, I, T: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    sources: &Arc<Sources>,
    observe: PerBreaker<T>,
) -> AsyncInstrumentBuilder<'a, I, T> {
    let sources = Arc::clone(sources);
    builder.with_callback(move |instrument| {
        for taken in sources.snapshots() {
            let breaker = KeyValue::new("breaker", taken.snapshot.name.clone());
            observe(&taken, &breaker, instrument);
        }
    })
}

/// `builder` with a callback observing every pool's own figures.
fn pools<'a, I, T: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    sources: &Arc<Sources>,
    observe: PerPool<T>,
) -> AsyncInstrumentBuilder<'a, I, T> {
    let sources = Arc::clone(sources);
    builder.with_callback(move |instrument| {
        for PoolFigures { name, summary } in sources.pools() {
            observe(&summary, &KeyValue::new("pool", name), instrument);
        }
    })
}

/// The breakers' monotonic counts.
fn breaker_counters(meter: &Meter, s: &Arc<Sources>) -> Vec<ObservableCounter<u64>> {
    let counter = |name: &'static str, unit: &'static str, help: &'static str| {
        meter
            .u64_observable_counter(name)
            .with_unit(unit)
            .with_description(help)
    };
    vec![
        breakers(
            counter(
                "circuit_breaker.calls",
                "{call}",
                "Calls by how they ended.",
            ),
            s,
            |t, b, o| {
                for (outcome, n) in t.snapshot.outcomes() {
                    o.observe(n, &pair(b, "outcome", outcome));
                }
            },
        )
        .build(),
        breakers(
            counter("circuit_breaker.admitted", "{call}", "Calls admitted."),
            s,
            |t, b, o| o.observe(t.snapshot.totals.admitted, std::slice::from_ref(b)),
        )
        .build(),
        breakers(
            counter(
                "circuit_breaker.transitions",
                "{transition}",
                "State changes, manual ones included.",
            ),
            s,
            |t, b, o| {
                for (from, to, n) in t.snapshot.transitions.iter() {
                    let attributes = [
                        b.clone(),
                        KeyValue::new("from", state_label(from)),
                        KeyValue::new("to", state_label(to)),
                    ];
                    o.observe(n, &attributes);
                }
            },
        )
        .build(),
        breakers(
            counter(
                "circuit_breaker.opened",
                "{opening}",
                "Times the breaker opened (brpc's nBreak).",
            ),
            s,
            |t, b, o| o.observe(t.snapshot.times_opened, std::slice::from_ref(b)),
        )
        .build(),
        breakers(
            counter(
                "circuit_breaker.health_checks",
                "{check}",
                "Health checks that settled, by result.",
            ),
            s,
            |t, b, o| {
                let totals = &t.snapshot.totals;
                let failed = totals.health_checks_failed;
                o.observe(totals.health_checks - failed, &pair(b, "result", "passed"));
                o.observe(failed, &pair(b, "result", "failed"));
            },
        )
        .build(),
        breakers(
            counter(
                "circuit_breaker.probes_taken_over",
                "{trial}",
                "Half-open trials started again because every probe slot was held past \
                 probe_timeout.",
            ),
            s,
            |t, b, o| o.observe(t.snapshot.totals.probes_taken_over, std::slice::from_ref(b)),
        )
        .build(),
        breakers(
            counter(
                "circuit_breaker.retries",
                "{attempt}",
                "What a retry layer decided after an attempt through the breaker failed.",
            ),
            s,
            |t, b, o| {
                for (decision, n) in t.snapshot.totals.retry_decisions() {
                    o.observe(n, &pair(b, "decision", decision));
                }
            },
        )
        .build(),
    ]
}

/// The pools' monotonic counts.
fn pool_counters(meter: &Meter, s: &Arc<Sources>) -> Vec<ObservableCounter<u64>> {
    let counter = |name: &'static str, unit: &'static str, help: &'static str| {
        meter
            .u64_observable_counter(name)
            .with_unit(unit)
            .with_description(help)
    };
    vec![
        pools(
            counter(
                "circuit_breaker.pool.picked",
                "{pick}",
                "Picks made: endpoints chosen for a call.",
            ),
            s,
            |p, a, o| o.observe(p.stats.picks, std::slice::from_ref(a)),
        )
        .build(),
        pools(
            counter(
                "circuit_breaker.pool.picks",
                "{pick}",
                "Picks the pool counted itself, by result.",
            ),
            s,
            |p, a, o| {
                for (result, n) in p.stats.picks_by_result() {
                    o.observe(n, &pair(a, "result", result));
                }
            },
        )
        .build(),
        pools(
            counter(
                "circuit_breaker.pool.retries",
                "{attempt}",
                "What the pool's retry decided after a failed call.",
            ),
            s,
            |p, a, o| {
                for (decision, n) in p.stats.retry_decisions() {
                    o.observe(n, &pair(a, "decision", decision));
                }
            },
        )
        .build(),
        pools(
            counter(
                "circuit_breaker.pool.hedges",
                "{attempt}",
                "What the pool's hedge did: hedged, won, cancelled, budget_denied.",
            ),
            s,
            |p, a, o| {
                for (decision, n) in p.stats.hedge_decisions() {
                    o.observe(n, &pair(a, "decision", decision));
                }
            },
        )
        .build(),
        pools(
            counter(
                "circuit_breaker.pool.ejections",
                "{ejection}",
                "Endpoints the pool ejected, by reason.",
            ),
            s,
            |p, a, o| {
                for (reason, n) in p.stats.ejections() {
                    o.observe(n, &pair(a, "reason", reason.as_str()));
                }
            },
        )
        .build(),
        pools(
            counter(
                "circuit_breaker.pool.outliers_detected",
                "{outlier}",
                "Outliers outlier detection found, ejected or not.",
            ),
            s,
            |p, a, o| o.observe(p.stats.outliers_detected, std::slice::from_ref(a)),
        )
        .build(),
    ]
}

/// Levels that add up across breakers and pools: recent failures, the pools' endpoints
/// and picks in flight.
fn up_down_counters(meter: &Meter, s: &Arc<Sources>) -> Vec<ObservableUpDownCounter<i64>> {
    let mut built = vec![breakers(
        meter
            .i64_observable_up_down_counter("circuit_breaker.recent_failures")
            .with_unit("{failure}")
            .with_description("Failures since the breaker last recovered (brpc's RecentErr)."),
        s,
        |t, b, o| o.observe(level(t.snapshot.recent_failures), std::slice::from_ref(b)),
    )
    .build()];
    let pool_levels: [PoolLevel; 7] = [
        (
            "circuit_breaker.pool.endpoints",
            "{endpoint}",
            "Endpoints in the pool.",
            |p| p.endpoints,
        ),
        (
            "circuit_breaker.pool.isolated",
            "{endpoint}",
            "Endpoints isolated: their breakers open.",
            |p| p.isolated,
        ),
        (
            "circuit_breaker.pool.ejected",
            "{endpoint}",
            "Endpoints isolated because the pool ejected them, the ejection running.",
            |p| p.ejected,
        ),
        (
            "circuit_breaker.pool.down",
            "{endpoint}",
            "Endpoints isolated on their own evidence, whatever the cap.",
            |p| p.down,
        ),
        (
            "circuit_breaker.pool.in_flight",
            "{pick}",
            "Picks in flight, all endpoints together.",
            |p| p.in_flight,
        ),
        (
            "circuit_breaker.pool.warming",
            "{endpoint}",
            "Endpoints ramping up after coming back (slow start).",
            |p| p.warming,
        ),
        (
            "circuit_breaker.pool.at_limit",
            "{endpoint}",
            "Endpoints with as many picks in flight as their adaptive concurrency limit.",
            |p| p.at_limit,
        ),
    ];
    for (name, unit, help, read) in pool_levels {
        let sources = Arc::clone(s);
        built.push(
            meter
                .i64_observable_up_down_counter(name)
                .with_unit(unit)
                .with_description(help)
                .with_callback(move |o| {
                    for PoolFigures { name, summary } in sources.pools() {
                        o.observe(level(read(&summary)), &[KeyValue::new("pool", name)]);
                    }
                })
                .build(),
        );
    }
    built
}

/// A pool's level: its instrument's name, unit and description, and its figure.
type PoolLevel = (
    &'static str,
    &'static str,
    &'static str,
    fn(&PoolSummary) -> usize,
);

/// The breakers' coded present figures: state, override, health check, a panic.
fn gauges(meter: &Meter, s: &Arc<Sources>) -> Vec<ObservableGauge<i64>> {
    let gauge = |name: &'static str, help: &'static str| {
        meter
            .i64_observable_gauge(name)
            .with_unit("1")
            .with_description(help)
    };
    vec![
        breakers(
            gauge(
                "circuit_breaker.state",
                "The state the next call finds: 0 closed, 1 half-open, 2 open.",
            ),
            s,
            |t, b, o| o.observe(state_value(t.snapshot.state), std::slice::from_ref(b)),
        )
        .build(),
        breakers(
            gauge(
                "circuit_breaker.forced",
                "The manual override: 0 none, 1 forced open, 2 forced closed.",
            ),
            s,
            |t, b, o| o.observe(forced_value(t.snapshot.forced), std::slice::from_ref(b)),
        )
        .build(),
        breakers(
            gauge(
                "circuit_breaker.health_check.status",
                "Open past its period, waiting for a health check: 1 check due, 2 checking; \
                 else 0.",
            ),
            s,
            |t, b, o| {
                let status = match t.snapshot.check {
                    None => 0,
                    Some(CheckStatus::Due) => 1,
                    Some(_) => 2,
                };
                o.observe(status, std::slice::from_ref(b));
            },
        )
        .build(),
        breakers(
            gauge(
                "circuit_breaker.collection.panicked",
                "1 if the breaker's policy panicked while its figures were read for this \
                 collection; else 0.",
            ),
            s,
            |t, b, o| o.observe(i64::from(t.panicked), std::slice::from_ref(b)),
        )
        .build(),
    ]
}

/// The breakers' measured present figures: the open period's rest, the throttle's
/// probability, the policy's own figures.
fn float_gauges(meter: &Meter, s: &Arc<Sources>) -> Vec<ObservableGauge<f64>> {
    vec![
        breakers(
            meter
                .f64_observable_gauge("circuit_breaker.retry_after")
                .with_unit("s")
                .with_description(
                    "While open (not forced): seconds until a probe is let through; else 0.",
                ),
            s,
            |t, b, o| {
                let secs = t.snapshot.retry_after.map_or(0.0, |d| d.as_secs_f64());
                o.observe(secs, std::slice::from_ref(b));
            },
        )
        .build(),
        breakers(
            meter
                .f64_observable_gauge("circuit_breaker.throttle.probability")
                .with_unit("1")
                .with_description(
                    "The throttle's probability of turning the next call away (0 unless \
                     closed); only breakers with a throttle.",
                ),
            s,
            |t, b, o| {
                if let Some(p) = t.snapshot.throttle_probability {
                    o.observe(p, std::slice::from_ref(b));
                }
            },
        )
        .build(),
        breakers(
            meter
                .f64_observable_gauge("circuit_breaker.policy")
                .with_description("The policy's own figures, each named by `figure`."),
            s,
            |t, b, o| {
                for (&figure, &value) in &t.snapshot.policy {
                    o.observe(value, &pair(b, "figure", figure));
                }
            },
        )
        .build(),
    ]
}
