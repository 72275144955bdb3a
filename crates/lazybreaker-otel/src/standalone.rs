//! The retries, hedges and limiters a [`BreakerMetrics`](crate::metrics::BreakerMetrics) was
//! given on their own (not through a breaker or a pool), and the instruments that observe
//! them (`circuit_breaker.retry.*`, `circuit_breaker.hedge.*`, `circuit_breaker.limiter.*`),
//! read when the meter provider collects, their user code's panics contained (as the core's
//! Prometheus collector contains them).

use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};

use lazybreaker::door::contain::{self, end, FirstPanic};
use lazybreaker::limit::{Algorithm, Limiter};
use lazybreaker::retry::{Hedge, HedgeStats, Retry, RetryStats};
use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Meter, ObservableCounter, ObservableGauge,
    ObservableUpDownCounter,
};
use opentelemetry::KeyValue;

use crate::point::{level, pair};

/// Reads one limiter's figures (its algorithm's limit is user code).
type LimiterSource = Arc<dyn Fn() -> LimiterFigures + Send + Sync>;

/// A limiter's figures, read at a collection.
struct LimiterFigures {
    limit: u32,
    in_flight: u32,
    limited: u64,
}

/// What the instruments read besides breakers and pools, each under the name it was given;
/// added to at any time.
#[derive(Default)]
pub(crate) struct Held {
    retries: RwLock<Vec<(String, Retry)>>,
    hedges: RwLock<Vec<(String, Hedge)>>,
    limiters: RwLock<Vec<(String, LimiterSource)>>,
}

impl Held {
    /// Adds a retry (a clone shares its counters and budget).
    pub(crate) fn retry(&self, name: String, retry: Retry) {
        push(&self.retries, (name, retry));
    }

    /// Adds a hedge (a clone shares its counters and budget).
    pub(crate) fn hedge(&self, name: String, hedge: Hedge) {
        push(&self.hedges, (name, hedge));
    }

    /// Adds a limiter over any algorithm.
    pub(crate) fn limiter<A: Algorithm>(&self, name: String, limiter: Arc<Limiter<A>>) {
        let read: LimiterSource = Arc::new(move || LimiterFigures {
            limit: limiter.limit(),
            in_flight: limiter.in_flight(),
            limited: limiter.limited(),
        });
        push(&self.limiters, (name, read));
    }

    /// How many retries, hedges and limiters were added.
    pub(crate) fn len(&self) -> usize {
        lock_len(&self.retries) + lock_len(&self.hedges) + lock_len(&self.limiters)
    }

    /// Every retry's decisions and budget balance now, by name.
    fn retries(&self) -> Vec<(KeyValue, (RetryStats, u64))> {
        read(&self.retries, "retry", |r| {
            (r.stats(), r.retry_budget().balance())
        })
    }

    /// Every hedge's decisions and budget balance now, by name.
    fn hedges(&self) -> Vec<(KeyValue, (HedgeStats, u64))> {
        read(&self.hedges, "hedge", |h| {
            (h.stats(), h.hedge_budget().balance())
        })
    }

    /// Every limiter's figures now, by name.
    fn limiters(&self) -> Vec<(KeyValue, LimiterFigures)> {
        read(&self.limiters, "limiter", |read| read())
    }
}

fn push<T>(list: &RwLock<Vec<T>>, item: T) {
    list.write()
        .unwrap_or_else(PoisonError::into_inner)
        .push(item);
}

fn lock_len<T>(list: &RwLock<Vec<T>>) -> usize {
    list.read().unwrap_or_else(PoisonError::into_inner).len()
}

/// Each named source's figures with its attribute (`key` = its name), the first of each
/// name only, a source whose reading panicked left out (a budget's clock, a limit's
/// algorithm: user code). The sources are cloned out of the lock first (cheap: each shares
/// its state), so that no user code runs under it. The panic is ended here, not resumed: a
/// collection runs for the monitoring system, which can do nothing with it.
fn read<S: Clone, F>(
    sources: &RwLock<Vec<(String, S)>>,
    key: &'static str,
    figures: impl Fn(&S) -> F,
) -> Vec<(KeyValue, F)> {
    let sources = sources
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut seen = HashSet::new();
    let mut panics = FirstPanic::default();
    let read = sources
        .iter()
        .filter(|(name, _)| seen.insert(name.as_str()))
        .filter_map(|(name, source)| match contain::catch(|| figures(source)) {
            Ok(figures) => Some((KeyValue::new(key, name.clone()), figures)),
            Err(payload) => {
                panics.keep(payload);
                None
            }
        })
        .collect();
    end(panics);
    read
}

/// The instruments of the retries, hedges and limiters, kept with the handle.
pub(crate) struct HeldInstruments {
    pub(crate) counters: Vec<ObservableCounter<u64>>,
    pub(crate) up_down: Vec<ObservableUpDownCounter<i64>>,
    pub(crate) gauges: Vec<ObservableGauge<i64>>,
}

/// `builder` with a callback observing what `read` reads of `held` at each collection.
fn observing<'a, I, T: 'static, F: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    held: &Arc<Held>,
    read: fn(&Held) -> Vec<(KeyValue, F)>,
    observe: fn(&F, &KeyValue, &dyn AsyncInstrument<T>),
) -> AsyncInstrumentBuilder<'a, I, T> {
    let held = Arc::clone(held);
    builder.with_callback(move |instrument| {
        for (attribute, figures) in read(&held) {
            observe(&figures, &attribute, instrument);
        }
    })
}

/// Registers the instruments of the retries, hedges and limiters on `meter`.
pub(crate) fn instruments(meter: &Meter, held: &Arc<Held>) -> HeldInstruments {
    let counters = vec![
        observing(
            meter
                .u64_observable_counter("circuit_breaker.retry.decisions")
                .with_unit("{decision}")
                .with_description(
                    "What a retry decided after a failed attempt: retried, budget_denied, \
                     exhausted, past_deadline, pushed_back, throttled.",
                ),
            held,
            Held::retries,
            |(s, _), a, o| {
                for (decision, n) in s.decisions() {
                    o.observe(n, &pair(a, "decision", decision));
                }
            },
        )
        .build(),
        observing(
            meter
                .u64_observable_counter("circuit_breaker.hedge.decisions")
                .with_unit("{decision}")
                .with_description(
                    "What a hedge did: hedged, won, cancelled, budget_denied, throttled, \
                     past_deadline.",
                ),
            held,
            Held::hedges,
            |(s, _), a, o| {
                for (decision, n) in s.decisions() {
                    o.observe(n, &pair(a, "decision", decision));
                }
            },
        )
        .build(),
        observing(
            meter
                .u64_observable_counter("circuit_breaker.limiter.limited")
                .with_unit("{call}")
                .with_description("Calls the limiter turned away at its limit."),
            held,
            Held::limiters,
            |f, a, o| o.observe(f.limited, std::slice::from_ref(a)),
        )
        .build(),
    ];
    let up_down = vec![
        observing(
            meter
                .i64_observable_up_down_counter("circuit_breaker.limiter.limit")
                .with_unit("{call}")
                .with_description("The limiter's adaptive concurrency limit now."),
            held,
            Held::limiters,
            |f, a, o| o.observe(i64::from(f.limit), std::slice::from_ref(a)),
        )
        .build(),
        observing(
            meter
                .i64_observable_up_down_counter("circuit_breaker.limiter.in_flight")
                .with_unit("{call}")
                .with_description("Calls in flight under the limiter."),
            held,
            Held::limiters,
            |f, a, o| o.observe(i64::from(f.in_flight), std::slice::from_ref(a)),
        )
        .build(),
    ];
    let gauges = vec![
        observing(
            meter
                .i64_observable_gauge("circuit_breaker.retry.budget.balance")
                .with_unit("{retry}")
                .with_description(
                    "The retries the retry's budget allows now, beyond those already made.",
                ),
            held,
            Held::retries,
            |(_, balance), a, o| o.observe(level(*balance), std::slice::from_ref(a)),
        )
        .build(),
        observing(
            meter
                .i64_observable_gauge("circuit_breaker.hedge.budget.balance")
                .with_unit("{hedge}")
                .with_description(
                    "The hedges the hedge's budget allows now, beyond those already made.",
                ),
            held,
            Held::hedges,
            |(_, balance), a, o| o.observe(level(*balance), std::slice::from_ref(a)),
        )
        .build(),
    ];
    HeldInstruments {
        counters,
        up_down,
        gauges,
    }
}
