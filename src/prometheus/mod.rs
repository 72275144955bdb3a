//! Prometheus metrics, pulled at scrape time (feature `prometheus`, on the official
//! `prometheus-client` crate): a [`BreakerCollector`] over registries, pools and single
//! breakers that reads each breaker's [`Snapshot`] when Prometheus scrapes, and nothing in
//! between; and over the retries, hedges and adaptive concurrency limiters held on their
//! own, read the same way.
//!
//! Nothing is written on the call path for metrics: every figure is a counter the breaker
//! keeps anyway ([`Totals`](crate::Totals), [`Transitions`](crate::Transitions)) or is
//! computed from its state when scraped. So the state gauge is right even when traffic has
//! stopped: an open breaker whose open period has passed reads half-open (what the next call
//! would find), without the scrape moving it or running its callbacks.
//!
//! # Metrics
//!
//! Every series has the label `breaker`: the breaker's name (a registry names its breakers
//! after their keys unless the factory names them). Names must be unique across what one
//! collector collects: a breaker whose name was already collected in the same scrape is
//! skipped, so that the exposition never holds two series with one label set. A pool's own
//! series (`circuit_breaker_pool_…`) have the label `pool` instead: its
//! [name](Pool::named). A retry's, a hedge's or a limiter's series held on their own
//! ([`BreakerCollector::retry`], [`hedge`](BreakerCollector::hedge),
//! [`limiter`](BreakerCollector::limiter); `circuit_breaker_retry_…`,
//! `circuit_breaker_hedge_…`, `circuit_breaker_limiter_…`) have the label `retry`, `hedge`
//! or `limiter`: the name it was given (unique within its kind, as a breaker's: a repeated
//! one is skipped). Counters get `_total` appended by the encoder.
//!
//! | metric | type | labels | value |
//! |---|---|---|---|
//! | `circuit_breaker_state` | gauge | `breaker` | the state the next call finds: 0 closed, 1 half-open, 2 open |
//! | `circuit_breaker_forced` | gauge | `breaker` | the manual override: 0 none, 1 forced open, 2 forced closed |
//! | `circuit_breaker_calls_total` | counter | `breaker`, `outcome` | calls by how they ended: `success`, `failure`, `excluded`, `abandoned`, `dropped` (a result too late for its generation or window), `rejected_open`, `rejected_half_open`, `rejected_forced`; for a breaker with a throttle ([`Builder::throttle`](crate::Builder::throttle)) also `rejected_throttled`; for a breaker in dry run ([`Builder::dry_run`](crate::Builder::dry_run)) also `would_reject`, the calls it admitted as shadows |
//! | `circuit_breaker_admitted_total` | counter | `breaker` | calls admitted (each ends, unless still in flight, as one of the first five outcomes) |
//! | `circuit_breaker_transitions_total` | counter | `breaker`, `from`, `to` | state changes, manual ones included; `from`/`to` are `closed`, `half_open`, `open`; all six pairs, zeros included |
//! | `circuit_breaker_opened_total` | counter | `breaker` | times opened (brpc's `nBreak`) |
//! | `circuit_breaker_health_checks_total` | counter | `breaker`, `result` | health checks that settled ([`Builder::health_check`](crate::Builder::health_check)), `passed` or `failed` |
//! | `circuit_breaker_probes_taken_over_total` | counter | `breaker` | half-open trials started again because every probe was held past [`probe_timeout`](crate::Builder::probe_timeout) ([`Totals::probes_taken_over`](crate::Totals::probes_taken_over)) |
//! | `circuit_breaker_retries_total` | counter | `breaker`, `decision` | what a retry layer decided after an attempt through the breaker failed ([`Totals::retries`](crate::Totals::retries) and the refusals): `retried`, `budget_denied`, `exhausted`, `throttled` |
//! | `circuit_breaker_throttle_probability` | gauge | `breaker` | for a breaker with a throttle: the probability the next call is turned away with (0 unless closed); the family is left out when no breaker has one |
//! | `circuit_breaker_recent_failures` | gauge | `breaker` | failures since the breaker last recovered (brpc's `RecentErr`) |
//! | `circuit_breaker_retry_after_seconds` | gauge | `breaker` | while open (not forced): seconds until a probe is let through; else 0 |
//! | `circuit_breaker_health_check_status` | gauge | `breaker` | a health-checked breaker open past its period, waiting for a check ([`Snapshot::check`]): 1 check due, 2 checking; else 0 |
//! | `circuit_breaker_policy` | gauge | `breaker`, `figure` | the policy's own figures ([`TripPolicy::gauges`]), e.g. `ema_long_error_cost_us` |
//! | `circuit_breaker_pool_endpoints` | gauge | `pool` | a [`Pool`]'s endpoints ([`BreakerCollector::pool`]; each endpoint's breaker has the series above, named after its key) |
//! | `circuit_breaker_pool_isolated` | gauge | `pool` | its endpoints isolated (their breakers open, as the next pick finds them) |
//! | `circuit_breaker_pool_ejected` | gauge | `pool` | of those, endpoints the pool ejected whose ejection runs now: an outlier ([`OutlierDetection`](crate::pool::OutlierDetection)), a hang ([`Pool::deadline`]) |
//! | `circuit_breaker_pool_down` | gauge | `pool` | of those, endpoints out on their own evidence (a failed health check, a hang), out whatever the [cap](Pool::max_isolated) |
//! | `circuit_breaker_pool_in_flight` | gauge | `pool` | its picks in flight |
//! | `circuit_breaker_pool_warming` | gauge | `pool` | its endpoints ramping up after coming back ([`Pool::slow_start`]) |
//! | `circuit_breaker_pool_picked_total` | counter | `pool` | picks made: endpoints chosen for a call, those kept in rotation over the cap included ([`PoolStats::picks`](crate::pool::PoolStats::picks)) |
//! | `circuit_breaker_pool_at_limit` | gauge | `pool` | its endpoints with as many picks in flight as their adaptive concurrency limit ([`Pool::limit`]) |
//! | `circuit_breaker_pool_picks_total` | counter | `pool`, `result` | picks it counted itself: `over_cap` (an isolated endpoint kept in rotation), `no_endpoint`, `overloaded`, `limited` (answered [`Rejected::Limited`](crate::Rejected::Limited)), `limit_skipped` (an endpoint's limit turned the pick elsewhere) ([`PoolStats`](crate::pool::PoolStats)) |
//! | `circuit_breaker_pool_retries_total` | counter | `pool`, `decision` | what the pool's [retry](Pool::retry) decided after a failed call: `retried` (on another endpoint), `budget_denied`, `exhausted`, `throttled` ([`PoolStats`](crate::pool::PoolStats)) |
//! | `circuit_breaker_pool_hedges_total` | counter | `pool`, `decision` | what the pool's [hedge](Pool::hedge) did: `hedged` (an attempt sent), `won` (a call answered first by a hedge), `cancelled` (attempts cancelled, counted neither way), `budget_denied` ([`PoolStats`](crate::pool::PoolStats)) |
//! | `circuit_breaker_pool_ejections_total` | counter | `pool`, `reason` | ejections by reason ([`Ejection::as_str`](crate::observe::Ejection::as_str)): `success_rate`, `failure_percentage`, `hung`; each is also a change of its endpoint's breaker to open (from closed, or from half-open), in its `circuit_breaker_transitions_total` and `circuit_breaker_opened_total` |
//! | `circuit_breaker_pool_outliers_detected_total` | counter | `pool` | outliers outlier detection found, ejected or not (the [enforcement](crate::pool::OutlierDetection::enforcement)'s draw, the cap) |
//! | `circuit_breaker_retry_decisions_total` | counter | `retry`, `decision` | what a [`Retry`](crate::retry::Retry) (and its clones) decided after a failed attempt ([`RetryStats`](crate::retry::RetryStats)): `retried`, `budget_denied`, `exhausted`, `past_deadline`, `pushed_back` (a negative gRPC pushback), `throttled`; a retry in front of breakers (the tower, reqwest and gRPC retries, a pool's) also counts its decisions in each breaker's `circuit_breaker_retries_total`: the two overlap, never add them |
//! | `circuit_breaker_retry_budget_balance` | gauge | `retry` | the retries its [budget](crate::retry::RetryBudget::balance) allows now, beyond those made (a budget shared by several retries is read under each) |
//! | `circuit_breaker_hedge_decisions_total` | counter | `hedge`, `decision` | what a [`Hedge`](crate::retry::Hedge) (and its clones) did ([`HedgeStats`](crate::retry::HedgeStats)): `hedged` (an attempt sent), `won`, `cancelled`, `budget_denied` (as a pool's hedges), `throttled`, `past_deadline` |
//! | `circuit_breaker_hedge_budget_balance` | gauge | `hedge` | the hedges its [budget](crate::retry::Hedge::hedge_budget) allows now, beyond those made |
//! | `circuit_breaker_limiter_limit` | gauge | `limiter` | a [`Limiter`](crate::limit::Limiter)'s adaptive concurrency limit now |
//! | `circuit_breaker_limiter_in_flight` | gauge | `limiter` | its calls in flight |
//! | `circuit_breaker_limiter_limited_total` | counter | `limiter` | the calls it turned away at its limit ([`Rejected::Limited`](crate::Rejected::Limited)) |
//! | `circuit_breaker_scrape_panicked` | gauge | `breaker` | 1 if the breaker's policy panicked while its figures were read for this scrape (its `circuit_breaker_policy` series are then those reported before the panic); else 0 |
//!
//! **A scrape never panics.** A policy's [`gauges`](TripPolicy::gauges) (or a clock) that
//! panics costs that breaker its policy figures (or, for a clock, all its series) in that
//! scrape, and is reported as `circuit_breaker_scrape_panicked`; every other breaker's
//! series are encoded as usual. A pool's, retry's, hedge's or limiter's user code that
//! panics (a clock, a limit's [algorithm](crate::limit::Algorithm)) costs it its own series
//! in that scrape. This is the one place the crate ends a user panic instead of
//! letting it continue: a scrape runs for the monitoring system, which can neither handle the
//! panic nor afford to lose every breaker's series to one. Elsewhere
//! ([`Breaker::snapshot`], [`BreakerCollector::snapshots`]) the panic continues to the
//! caller, after the breaker's bookkeeping.
//!
//! The state is one gauge with three values rather than one series per state: a single
//! series cannot contradict itself (one series per state pushed from transitions is how
//! peers end up with every state at 1), and `circuit_breaker_state == 2` selects the open
//! breakers.
//!
//! # Examples
//!
//! ```
//! use lazybreaker::prometheus::BreakerCollector;
//! use lazybreaker::{Breaker, Registry};
//! use prometheus_client::encoding::text::encode;
//! use std::sync::Arc;
//!
//! let endpoints = Arc::new(Registry::new(|_: &String| Breaker::builder()));
//! let payments = Arc::new(Breaker::builder().name("payments").build());
//! let mut metrics = prometheus_client::registry::Registry::default();
//! metrics.register_collector(Box::new(
//!     BreakerCollector::new().registry(Arc::clone(&endpoints)).breaker(Arc::clone(&payments)),
//! ));
//!
//! let _ = endpoints.breaker("api.example.com").execute(|| Ok::<_, ()>(()));
//! let mut text = String::new();
//! encode(&mut text, &metrics).unwrap();
//! assert!(text.contains(r#"circuit_breaker_state{breaker="payments"} 0"#));
//! assert!(text.contains(
//!     r#"circuit_breaker_calls_total{breaker="api.example.com",outcome="success"} 1"#
//! ));
//! ```

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::breaker::{Breaker, BreakerSeam};
use crate::contain::{self, end, FirstPanic};
use crate::metric_values::{forced_value, state_label, state_value};
use crate::observe::Observer;
use crate::policy::TripPolicy;
use crate::pool::{Pool, PoolSummary};
use crate::registry::Registry;
use crate::snapshot::{CheckStatus, Snapshot};

mod standalone;

/// Where a collector gets snapshots from: each breaker's, and whether its user code (the
/// policy's gauges, the clock) panicked while it was taken (the first panic kept in the
/// `FirstPanic`).
type Source = Box<dyn Fn(&mut Vec<(Snapshot, bool)>, &mut FirstPanic) + Send + Sync>;

/// A `prometheus-client` [`Collector`] that reads the breakers it was given at each scrape:
/// see the [module documentation](self) for the metrics. Register it with
/// `prometheus_client::registry::Registry::register_collector`.
#[derive(Default)]
pub struct BreakerCollector {
    sources: Vec<Source>,
    pools: Vec<PoolSource>,
    standalone: standalone::Standalone,
}

impl BreakerCollector {
    /// A collector of no breakers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also collects `breaker`.
    #[must_use]
    pub fn breaker<P, O>(mut self, breaker: Arc<Breaker<P, O>>) -> Self
    where
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        self.sources.push(Box::new(move |out, panics| {
            out.extend(breaker.snapshot_contained(panics))
        }));
        self
    }

    /// Also collects every breaker `registry` holds at each scrape.
    #[must_use]
    pub fn registry<K, P, O, S>(mut self, registry: Arc<Registry<K, P, O, S>>) -> Self
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
        S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
    {
        self.sources.push(Box::new(move |out, panics| {
            let from = out.len();
            registry.for_each(|breaker| out.extend(breaker.snapshot_contained(panics)));
            // A stable exposition: the registry's breakers by name.
            out[from..].sort_by(|a, b| a.0.name.cmp(&b.0.name));
        }));
        self
    }

    /// Also collects the breakers of every endpoint `pool` has at each scrape, named after
    /// their keys (in the pool's order).
    #[must_use]
    pub fn pool<K, P, O>(mut self, pool: Arc<Pool<K, P, O>>) -> Self
    where
        K: Send + Sync + 'static,
        P: TripPolicy + Send + 'static,
        O: Observer + Send + Sync + 'static,
    {
        let endpoints = Arc::clone(&pool);
        self.sources.push(Box::new(move |out, panics| {
            endpoints.for_each(|breaker| out.extend(breaker.snapshot_contained(panics)));
        }));
        self.pools
            .push(Box::new(move || match contain::catch(|| pool.summary()) {
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
            }));
        self
    }

    /// The snapshots a scrape would encode now, in the order the breakers and registries
    /// were added (a registry's breakers by name), the first of each name only.
    ///
    /// # Panics
    ///
    /// If a breaker's user code does (its policy's gauges, its clock): every snapshot is
    /// taken first, then the first panic continues. (A scrape does not panic: see the
    /// [module documentation](self).)
    pub fn snapshots(&self) -> Vec<Snapshot> {
        let (snapshots, panics) = self.collect();
        contain::resume(panics);
        snapshots.into_iter().map(|(s, _)| s).collect()
    }

    /// Every snapshot, whether its user code panicked, and the first panic.
    fn collect(&self) -> (Vec<(Snapshot, bool)>, FirstPanic) {
        let (mut out, mut panics) = (Vec::new(), FirstPanic::default());
        for source in &self.sources {
            source(&mut out, &mut panics);
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|(s, _)| seen.insert(s.name.clone()));
        (out, panics)
    }
}

impl fmt::Debug for BreakerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerCollector")
            .field("sources", &self.sources.len())
            .field("standalone", &self.standalone.len())
            .finish()
    }
}

/// One family: its descriptor, then one series per `(labels, value)`.
fn family<L, V>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result
where
    L: prometheus_client::encoding::EncodeLabelSet,
    V: Value,
{
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        value.encode(&mut metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A counter or gauge value.
trait Value {
    fn encode(&self, encoder: &mut prometheus_client::encoding::MetricEncoder<'_>) -> fmt::Result;
}

/// A counter's value.
struct Count(u64);

impl Value for Count {
    fn encode(&self, encoder: &mut prometheus_client::encoding::MetricEncoder<'_>) -> fmt::Result {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.0, None)
    }
}

/// A gauge's value.
struct Level<N>(N);

impl<N: prometheus_client::encoding::EncodeGaugeValue> Value for Level<N> {
    fn encode(&self, encoder: &mut prometheus_client::encoding::MetricEncoder<'_>) -> fmt::Result {
        encoder.encode_gauge(&self.0)
    }
}

/// A breaker's series label.
fn breaker_label(s: &Snapshot) -> [(&'static str, String); 1] {
    [("breaker", s.name.clone())]
}

/// The breakers' states and overrides.
fn encode_states(e: &mut DescriptorEncoder<'_>, snapshots: &[Snapshot]) -> fmt::Result {
    family(
        e,
        "circuit_breaker_state",
        "The state the next call finds: 0 closed, 1 half-open, 2 open.",
        MetricType::Gauge,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Level(state_value(s.state)))),
    )?;
    family(
        e,
        "circuit_breaker_forced",
        "The manual override: 0 none, 1 forced open, 2 forced closed.",
        MetricType::Gauge,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Level(forced_value(s.forced)))),
    )
}

/// The breakers' counters: calls, admissions, changes, openings, checks, takeovers.
fn encode_counters(e: &mut DescriptorEncoder<'_>, snapshots: &[Snapshot]) -> fmt::Result {
    family(
        e,
        "circuit_breaker_calls",
        "Calls by how they ended.",
        MetricType::Counter,
        snapshots.iter().flat_map(|s| {
            s.outcomes().map(move |(outcome, n)| {
                (
                    [("breaker", s.name.clone()), ("outcome", outcome.to_owned())],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_admitted",
        "Calls admitted.",
        MetricType::Counter,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Count(s.totals.admitted))),
    )?;
    family(
        e,
        "circuit_breaker_transitions",
        "State changes, manual ones included.",
        MetricType::Counter,
        snapshots.iter().flat_map(|s| {
            s.transitions.iter().map(move |(from, to, n)| {
                (
                    [
                        ("breaker", s.name.clone()),
                        ("from", state_label(from).to_owned()),
                        ("to", state_label(to).to_owned()),
                    ],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_opened",
        "Times the breaker opened (brpc's nBreak).",
        MetricType::Counter,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Count(s.times_opened))),
    )?;
    family(
        e,
        "circuit_breaker_health_checks",
        "Health checks that settled, by result.",
        MetricType::Counter,
        snapshots.iter().flat_map(|s| {
            let t = &s.totals;
            [
                ("passed", t.health_checks - t.health_checks_failed),
                ("failed", t.health_checks_failed),
            ]
            .into_iter()
            .map(move |(result, n)| {
                (
                    [("breaker", s.name.clone()), ("result", result.to_owned())],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_probes_taken_over",
        "Half-open trials started again because every probe slot was held past probe_timeout.",
        MetricType::Counter,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Count(s.totals.probes_taken_over))),
    )?;
    family(
        e,
        "circuit_breaker_retries",
        "What a retry layer decided after an attempt through the breaker failed: retried, \
         budget_denied, exhausted, throttled.",
        MetricType::Counter,
        snapshots.iter().flat_map(|s| {
            s.totals.retry_decisions().map(move |(decision, n)| {
                (
                    [
                        ("breaker", s.name.clone()),
                        ("decision", decision.to_owned()),
                    ],
                    Count(n),
                )
            })
        }),
    )
}

/// The breakers' present figures: recent failures, the open period's rest, a check's
/// status, the throttle's probability.
fn encode_gauges(e: &mut DescriptorEncoder<'_>, snapshots: &[Snapshot]) -> fmt::Result {
    family(
        e,
        "circuit_breaker_recent_failures",
        "Failures since the breaker last recovered (brpc's RecentErr).",
        MetricType::Gauge,
        snapshots
            .iter()
            .map(|s| (breaker_label(s), Level(s.recent_failures as i64))),
    )?;
    family(
        e,
        "circuit_breaker_retry_after_seconds",
        "While open: seconds until a probe is let through; else 0 (0 too once the period \
         is over and a health check must pass: see circuit_breaker_health_check_status).",
        MetricType::Gauge,
        snapshots.iter().map(|s| {
            let secs = s.retry_after.map_or(0.0, |d| d.as_secs_f64());
            (breaker_label(s), Level(secs))
        }),
    )?;
    family(
        e,
        "circuit_breaker_health_check_status",
        "Open past its period, waiting for a health check: 1 check due, 2 checking; else 0.",
        MetricType::Gauge,
        snapshots.iter().map(|s| {
            let status = match s.check {
                None => 0,
                Some(CheckStatus::Due) => 1,
                Some(_) => 2,
            };
            (breaker_label(s), Level(status))
        }),
    )?;
    if snapshots.iter().any(|s| s.throttle_probability.is_some()) {
        family(
            e,
            "circuit_breaker_throttle_probability",
            "The throttle's probability of turning the next call away (closed state).",
            MetricType::Gauge,
            snapshots
                .iter()
                .filter_map(|s| s.throttle_probability.map(|p| (breaker_label(s), Level(p)))),
        )?;
    }
    Ok(())
}

/// Whose figures panicked for this scrape, and the policies' own figures.
fn encode_figures(
    e: &mut DescriptorEncoder<'_>,
    snapshots: &[Snapshot],
    panicked: &[(String, bool)],
) -> fmt::Result {
    family(
        e,
        "circuit_breaker_scrape_panicked",
        "1 if the breaker's policy panicked while its figures were read for this scrape.",
        MetricType::Gauge,
        panicked
            .iter()
            .map(|(breaker, p)| ([("breaker", breaker.clone())], Level(i64::from(*p)))),
    )?;
    family(
        e,
        "circuit_breaker_policy",
        "The policy's own figures.",
        MetricType::Gauge,
        snapshots.iter().flat_map(|s| {
            s.policy.iter().map(move |(figure, value)| {
                (
                    [
                        ("breaker", s.name.clone()),
                        ("figure", (*figure).to_owned()),
                    ],
                    Level(*value),
                )
            })
        }),
    )
}

impl Collector for BreakerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        // One breaker's panicking user code must not take every series down: the panic is
        // reported as a series, not resumed (see the module documentation).
        let (taken, panics) = self.collect();
        end(panics);
        let panicked: Vec<_> = taken.iter().map(|(s, p)| (s.name.clone(), *p)).collect();
        let snapshots: Vec<Snapshot> = taken.into_iter().map(|(s, _)| s).collect();
        let e = &mut encoder;
        encode_states(e, &snapshots)?;
        encode_counters(e, &snapshots)?;
        encode_gauges(e, &snapshots)?;
        encode_figures(e, &snapshots, &panicked)?;
        self.encode_pools(e)?;
        self.standalone.encode(e)
    }
}

impl BreakerCollector {
    /// The pools' own series, after their endpoints' breakers.
    fn encode_pools(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        if self.pools.is_empty() {
            return Ok(());
        }
        let pools: Vec<PoolFigures> = self.pools.iter().filter_map(|figures| figures()).collect();
        encode_pool_gauges(e, &pools)?;
        encode_pool_picks(e, &pools)?;
        encode_pool_ejections(e, &pools)
    }
}

/// A pool's own series' label.
fn pool_label(p: &PoolFigures) -> [(&'static str, String); 1] {
    [("pool", p.name.clone())]
}

/// The pools' gauges: their endpoints, isolated, ejected, down, and picks in flight.
fn encode_pool_gauges(e: &mut DescriptorEncoder<'_>, pools: &[PoolFigures]) -> fmt::Result {
    for (metric, help, value) in [
        (
            "circuit_breaker_pool_endpoints",
            "Endpoints in the pool.",
            (|s: &PoolSummary| s.endpoints) as fn(&PoolSummary) -> usize,
        ),
        (
            "circuit_breaker_pool_isolated",
            "Endpoints isolated: their breakers open.",
            |s: &PoolSummary| s.isolated,
        ),
        (
            "circuit_breaker_pool_ejected",
            "Endpoints isolated because the pool ejected them (an outlier, a hang), the \
             ejection running.",
            |s: &PoolSummary| s.ejected,
        ),
        (
            "circuit_breaker_pool_down",
            "Endpoints isolated on their own evidence (a failed health check, a hang), \
             whatever the cap.",
            |s: &PoolSummary| s.down,
        ),
        (
            "circuit_breaker_pool_in_flight",
            "Picks in flight, all endpoints together.",
            |s: &PoolSummary| s.in_flight,
        ),
        (
            "circuit_breaker_pool_warming",
            "Endpoints ramping up after coming back (slow start), their share of the picks \
             below a full one.",
            |s: &PoolSummary| s.warming,
        ),
        (
            "circuit_breaker_pool_at_limit",
            "Endpoints with as many picks in flight as their adaptive concurrency limit.",
            |s: &PoolSummary| s.at_limit,
        ),
    ] {
        family(
            e,
            metric,
            help,
            MetricType::Gauge,
            pools
                .iter()
                .map(|p| (pool_label(p), Level(value(&p.summary) as i64))),
        )?;
    }
    Ok(())
}

/// The pools' counts of picks: made, and counted by the pool itself by result.
fn encode_pool_picks(e: &mut DescriptorEncoder<'_>, pools: &[PoolFigures]) -> fmt::Result {
    family(
        e,
        "circuit_breaker_pool_picked",
        "Picks made: endpoints chosen for a call.",
        MetricType::Counter,
        pools
            .iter()
            .map(|p| (pool_label(p), Count(p.summary.stats.picks))),
    )?;
    family(
        e,
        "circuit_breaker_pool_picks",
        "Picks the pool counted itself, by result.",
        MetricType::Counter,
        pools.iter().flat_map(|p| {
            p.summary.stats.picks_by_result().map(move |(result, n)| {
                (
                    [("pool", p.name.clone()), ("result", result.to_owned())],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_pool_retries",
        "What the pool's retry decided after a failed call: retried (on another endpoint), \
         budget_denied, exhausted, throttled.",
        MetricType::Counter,
        pools.iter().flat_map(|p| {
            p.summary.stats.retry_decisions().map(move |(decision, n)| {
                (
                    [("pool", p.name.clone()), ("decision", decision.to_owned())],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_pool_hedges",
        "What the pool's hedge did: hedged (an attempt sent), won (a call answered first by \
         a hedge), cancelled (attempts cancelled, counted neither way), budget_denied.",
        MetricType::Counter,
        pools.iter().flat_map(|p| {
            p.summary.stats.hedge_decisions().map(move |(decision, n)| {
                (
                    [("pool", p.name.clone()), ("decision", decision.to_owned())],
                    Count(n),
                )
            })
        }),
    )
}

/// The pools' ejections by reason, and the outliers their detection found.
fn encode_pool_ejections(e: &mut DescriptorEncoder<'_>, pools: &[PoolFigures]) -> fmt::Result {
    family(
        e,
        "circuit_breaker_pool_ejections",
        "Endpoints the pool ejected, by reason (each also a change of the endpoint's \
         breaker to open).",
        MetricType::Counter,
        pools.iter().flat_map(|p| {
            p.summary.stats.ejections().map(move |(reason, n)| {
                (
                    [
                        ("pool", p.name.clone()),
                        ("reason", reason.as_str().to_owned()),
                    ],
                    Count(n),
                )
            })
        }),
    )?;
    family(
        e,
        "circuit_breaker_pool_outliers_detected",
        "Outliers outlier detection found, ejected or not.",
        MetricType::Counter,
        pools
            .iter()
            .map(|p| (pool_label(p), Count(p.summary.stats.outliers_detected))),
    )
}

/// A pool's own figures, read at a scrape.
struct PoolFigures {
    name: String,
    summary: PoolSummary,
}

/// Reads one pool's figures; `None` if its user code (a breaker's clock) panicked, which
/// costs the scrape that pool's own series only.
type PoolSource = Box<dyn Fn() -> Option<PoolFigures> + Send + Sync>;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use prometheus_client::encoding::text::encode;

    use super::BreakerCollector;
    use std::time::Duration;

    use crate::breaker::Breaker;
    use crate::limit::{Aimd, Limiter};
    use crate::policy::{Ema, EmaConfig};
    use crate::pool::Pool;
    use crate::retry::{Hedge, Retry};
    use crate::throttle::Throttle;

    /// Every series name of an exposition, with the label names its series carry.
    fn exported(text: &str) -> BTreeMap<String, BTreeSet<String>> {
        let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (head, _value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = head.split_once('{').unwrap_or((head, ""));
            let labels = labels
                .trim_end_matches('}')
                .split(',')
                .filter(|pair| !pair.is_empty())
                .map(|pair| pair.split_once('=').expect("k=\"v\"").0.to_owned());
            names.entry(name.to_owned()).or_default().extend(labels);
        }
        names
    }

    /// The module docs' table of metrics: name, type and label names, by row.
    fn documented() -> BTreeMap<String, (String, BTreeSet<String>)> {
        let cell = |text: &str| text.trim().trim_matches('`').to_owned();
        include_str!("mod.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//! | `circuit_breaker_"))
            .map(|row| {
                let cells: Vec<&str> = row.split(" | ").collect();
                let labels = cells[2].split(", ").map(cell).collect();
                (
                    format!("circuit_breaker_{}", cell(cells[0])),
                    (cells[1].trim().to_owned(), labels),
                )
            })
            .collect()
    }

    /// I5: the table in the module docs names every metric the collector exports (a
    /// counter by its `_total` series), with its type and labels, and no metric it does not
    /// export. The scrape has every family: a throttled breaker, a policy with figures, a
    /// pool, a retry, a hedge, a limiter.
    #[test]
    fn item_i5_the_docs_table_names_every_exported_metric() {
        let throttled = Arc::new(
            Breaker::builder()
                .name("throttled")
                .throttle(Throttle::new(2.0).unwrap())
                .build(),
        );
        let ema = Ema::new(EmaConfig::default()).unwrap();
        let figured = Arc::new(Breaker::builder().name("figured").policy(ema).build());
        let pool = Arc::new(Pool::new(|_: &u16| Breaker::builder()).named("upstreams"));
        pool.set([8080]);
        let limiter = Arc::new(Limiter::new(Aimd::new()));
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(
            BreakerCollector::new()
                .breaker(throttled)
                .breaker(figured)
                .pool(pool)
                .retry("search", Retry::new(2).unwrap())
                .hedge("search", Hedge::after(Duration::from_millis(20)))
                .limiter("search", limiter),
        ));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        let types: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|line| line.split_once(' '))
            .collect();

        let exported = exported(&text);
        let documented = documented();
        assert!(exported.len() >= 20, "{text}");
        for (name, labels) in &exported {
            let (kind, documented_labels) = documented
                .get(name)
                .unwrap_or_else(|| panic!("`{name}` is exported but not in the docs' table"));
            let family = name.strip_suffix("_total").unwrap_or(name);
            let exported_kind = types.get(family).or_else(|| types.get(name.as_str()));
            assert_eq!(exported_kind, Some(&kind.as_str()), "{name}'s type");
            assert_eq!(labels, documented_labels, "{name}'s labels");
        }
        let missing: Vec<_> = documented
            .keys()
            .filter(|name| !exported.contains_key(*name))
            .collect();
        assert!(
            missing.is_empty(),
            "in the table, never exported: {missing:?}"
        );
    }
}
