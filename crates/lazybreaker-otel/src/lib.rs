//! lazybreaker's metrics through OpenTelemetry: [`BreakerMetrics`] registers observable
//! instruments on a [`Meter`](opentelemetry::metrics::Meter) and reads the breakers,
//! registries and pools it was given (and the retries, hedges and concurrency limiters held
//! on their own) when the meter provider collects, and nothing in between.
//!
//! The figures are those of the core's Prometheus collector
//! (`lazybreaker::prometheus::BreakerCollector`, feature `prometheus`), read from the same
//! snapshots ([`Breaker::snapshot`](lazybreaker::Breaker::snapshot),
//! [`Pool::summary`](lazybreaker::pool::Pool::summary)): nothing is written on a call's path
//! for metrics, and the state is computed when collected, so an open breaker whose open
//! period has passed reads half-open (what the next call would find) even when traffic has
//! stopped, without the collection moving it or running its callbacks.
//!
//! # Instruments
//!
//! Every breaker's data point has the attribute `breaker`: the breaker's name (a registry
//! names its breakers after their keys unless the factory names them). Names must be unique
//! across what one [`BreakerMetrics`] observes: a breaker whose name was already read in
//! the same collection is skipped. A pool's own instruments (`circuit_breaker.pool.*`) have
//! the attribute `pool` instead: its [name](lazybreaker::pool::Pool::named). A retry's, a
//! hedge's or a limiter's instruments held on their own
//! ([`BreakerMetrics::retry`], [`hedge`](BreakerMetrics::hedge),
//! [`limiter`](BreakerMetrics::limiter); `circuit_breaker.retry.*`,
//! `circuit_breaker.hedge.*`, `circuit_breaker.limiter.*`) have the attribute `retry`,
//! `hedge` or `limiter`: the name it was given (unique within its kind, as a breaker's: a
//! repeated one is skipped). The attribute values are the Prometheus label values.
//!
//! Counters are observable counters (monotonic sums, cumulative: the figure since the
//! breaker, pool, retry, hedge or limiter was made); levels that add up across breakers,
//! pools or limiters are observable up-down counters; the coded and measured present figures
//! are observable gauges. Names are OpenTelemetry's dot-separated lowercase, units UCUM (—
//! none); the last column is the series of the core's Prometheus collector carrying the same
//! figure (an OpenTelemetry Prometheus exporter derives the same names: `.` becomes `_`, a
//! counter gets `_total`, the unit `s` gets `_seconds`; a gauge of unit `1` gets `_ratio`,
//! which the core's collector does not add).
//!
//! | instrument | kind | unit | attributes | Prometheus |
//! |---|---|---|---|---|
//! | `circuit_breaker.state` | gauge | `1` | `breaker` | `circuit_breaker_state`: the state the next call finds, **0 closed, 1 half-open, 2 open** |
//! | `circuit_breaker.forced` | gauge | `1` | `breaker` | `circuit_breaker_forced`: the manual override, 0 none, 1 forced open, 2 forced closed |
//! | `circuit_breaker.calls` | counter | `{call}` | `breaker`, `outcome` | `circuit_breaker_calls_total`: `success`, `failure`, `excluded`, `abandoned`, `dropped`, `rejected_open`, `rejected_half_open`, `rejected_forced`; with a throttle also `rejected_throttled`; in dry run also `would_reject` |
//! | `circuit_breaker.admitted` | counter | `{call}` | `breaker` | `circuit_breaker_admitted_total` |
//! | `circuit_breaker.transitions` | counter | `{transition}` | `breaker`, `from`, `to` | `circuit_breaker_transitions_total`: `closed`, `half_open`, `open`, all six pairs |
//! | `circuit_breaker.opened` | counter | `{opening}` | `breaker` | `circuit_breaker_opened_total` (brpc's `nBreak`) |
//! | `circuit_breaker.health_checks` | counter | `{check}` | `breaker`, `result` | `circuit_breaker_health_checks_total`: `passed`, `failed` |
//! | `circuit_breaker.probes_taken_over` | counter | `{trial}` | `breaker` | `circuit_breaker_probes_taken_over_total` |
//! | `circuit_breaker.retries` | counter | `{attempt}` | `breaker`, `decision` | `circuit_breaker_retries_total`: `retried`, `budget_denied`, `exhausted`, `throttled` |
//! | `circuit_breaker.recent_failures` | up-down counter | `{failure}` | `breaker` | `circuit_breaker_recent_failures` (brpc's `RecentErr`) |
//! | `circuit_breaker.retry_after` | gauge | `s` | `breaker` | `circuit_breaker_retry_after_seconds`: while open (not forced), seconds until a probe; else 0 |
//! | `circuit_breaker.health_check.status` | gauge | `1` | `breaker` | `circuit_breaker_health_check_status`: 1 check due, 2 checking; else 0 |
//! | `circuit_breaker.throttle.probability` | gauge | `1` | `breaker` | `circuit_breaker_throttle_probability`: only breakers with a throttle |
//! | `circuit_breaker.policy` | gauge | — | `breaker`, `figure` | `circuit_breaker_policy`: the policy's own figures ([`TripPolicy::gauges`](lazybreaker::policy::TripPolicy::gauges)), their units in their names |
//! | `circuit_breaker.collection.panicked` | gauge | `1` | `breaker` | `circuit_breaker_scrape_panicked`: 1 if the policy's figures panicked in this collection |
//! | `circuit_breaker.pool.endpoints` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_endpoints` |
//! | `circuit_breaker.pool.isolated` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_isolated` |
//! | `circuit_breaker.pool.ejected` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_ejected` |
//! | `circuit_breaker.pool.down` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_down` |
//! | `circuit_breaker.pool.in_flight` | up-down counter | `{pick}` | `pool` | `circuit_breaker_pool_in_flight` |
//! | `circuit_breaker.pool.warming` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_warming` |
//! | `circuit_breaker.pool.at_limit` | up-down counter | `{endpoint}` | `pool` | `circuit_breaker_pool_at_limit` |
//! | `circuit_breaker.pool.picked` | counter | `{pick}` | `pool` | `circuit_breaker_pool_picked_total` |
//! | `circuit_breaker.pool.picks` | counter | `{pick}` | `pool`, `result` | `circuit_breaker_pool_picks_total`: `over_cap`, `no_endpoint`, `overloaded`, `limited`, `limit_skipped` |
//! | `circuit_breaker.pool.retries` | counter | `{attempt}` | `pool`, `decision` | `circuit_breaker_pool_retries_total`: `retried`, `budget_denied`, `exhausted`, `throttled` |
//! | `circuit_breaker.pool.hedges` | counter | `{attempt}` | `pool`, `decision` | `circuit_breaker_pool_hedges_total`: `hedged`, `won`, `cancelled`, `budget_denied` |
//! | `circuit_breaker.pool.ejections` | counter | `{ejection}` | `pool`, `reason` | `circuit_breaker_pool_ejections_total`: `success_rate`, `failure_percentage`, `hung` |
//! | `circuit_breaker.pool.outliers_detected` | counter | `{outlier}` | `pool` | `circuit_breaker_pool_outliers_detected_total` |
//! | `circuit_breaker.retry.decisions` | counter | `{decision}` | `retry`, `decision` | `circuit_breaker_retry_decisions_total`: a [`Retry`](lazybreaker::retry::Retry)'s ([`RetryStats`](lazybreaker::retry::RetryStats)) `retried`, `budget_denied`, `exhausted`, `past_deadline`, `pushed_back`, `throttled` (overlapping `circuit_breaker.retries` when the retry is in front of breakers: never add them) |
//! | `circuit_breaker.retry.budget.balance` | gauge | `{retry}` | `retry` | `circuit_breaker_retry_budget_balance`: the retries its budget allows now (a gauge: one budget shared by several retries is read under each, so a sum would count it twice) |
//! | `circuit_breaker.hedge.decisions` | counter | `{decision}` | `hedge`, `decision` | `circuit_breaker_hedge_decisions_total`: a [`Hedge`](lazybreaker::retry::Hedge)'s ([`HedgeStats`](lazybreaker::retry::HedgeStats)) `hedged`, `won`, `cancelled`, `budget_denied`, `throttled`, `past_deadline` |
//! | `circuit_breaker.hedge.budget.balance` | gauge | `{hedge}` | `hedge` | `circuit_breaker_hedge_budget_balance`: the hedges its budget allows now |
//! | `circuit_breaker.limiter.limit` | up-down counter | `{call}` | `limiter` | `circuit_breaker_limiter_limit`: a [`Limiter`](lazybreaker::limit::Limiter)'s adaptive concurrency limit now |
//! | `circuit_breaker.limiter.in_flight` | up-down counter | `{call}` | `limiter` | `circuit_breaker_limiter_in_flight` |
//! | `circuit_breaker.limiter.limited` | counter | `{call}` | `limiter` | `circuit_breaker_limiter_limited_total`: calls turned away at the limit |
//!
//! With the feature `fleet`, `BreakerMetrics::shared` observes a `lazybreaker-fleet` shared
//! breaker: its local breaker as any other, and its fleet figures (`SharedBreaker::stats`),
//! each with the attribute `breaker`; the Prometheus column is the fleet crate's
//! `FleetCollector` (its feature `prometheus`):
//!
//! | instrument | kind | unit | attributes | Prometheus |
//! |---|---|---|---|---|
//! | `circuit_breaker.fleet.round_trips` | counter | `{operation}` | `breaker` | `circuit_breaker_fleet_round_trips_total`: store operations, one round trip each |
//! | `circuit_breaker.fleet.store_errors` | counter | `{operation}` | `breaker` | `circuit_breaker_fleet_store_errors_total`: store operations that failed or timed out |
//! | `circuit_breaker.fleet.published` | counter | `{decision}` | `breaker` | `circuit_breaker_fleet_published_total`: local decisions written to the shared record |
//! | `circuit_breaker.fleet.adopted` | counter | `{decision}` | `breaker` | `circuit_breaker_fleet_adopted_total`: other instances' decisions adopted |
//! | `circuit_breaker.fleet.recreated` | counter | `{record}` | `breaker` | `circuit_breaker_fleet_recreated_total`: a vanished shared record written again |
//! | `circuit_breaker.fleet.probe_rejections` | counter | `{call}` | `breaker` | `circuit_breaker_fleet_probe_rejections_total`: probes not sent, the fleet's slots all held |
//! | `circuit_breaker.fleet.generation` | gauge | `{generation}` | `breaker` | `circuit_breaker_fleet_generation`: the shared generation followed |
//! | `circuit_breaker.fleet.degraded` | gauge | `1` | `breaker` | `circuit_breaker_fleet_degraded`: 1 while the store is failing |
//!
//! The state is one gauge with three values rather than one data point per state, as in
//! the Prometheus collector: one data point cannot contradict itself, and
//! `circuit_breaker.state == 2` selects the open breakers.
//!
//! Each instrument's callback reads the snapshots itself: every instrument is consistent on
//! its own, two instruments are read moments apart within one collection.
//!
//! **A collection never panics.** A policy's figures (or a clock) that panic cost that
//! breaker its policy figures (or, for a clock, all its data points) in that collection,
//! reported as `circuit_breaker.collection.panicked`; every other breaker is observed as
//! usual. A pool's, retry's, hedge's or limiter's user code that panics (a clock, a limit's
//! [algorithm](lazybreaker::limit::Algorithm)) costs it its own data points in that
//! collection.
//!
//! # State changes
//!
//! The instruments say what the state *is* at each collection and how many changes there
//! were (`circuit_breaker.transitions`, `circuit_breaker.opened`); a change between two
//! collections is not an instrument's data point. Each change as it happens reaches
//! OpenTelemetry through the core's `tracing` observer, with no code of this crate:
//! `lazybreaker::tracing::TracingObserver` (the core's feature `tracing`) emits one event per
//! change, target `lazybreaker`, `WARN` on opening (and on a failed health check, open
//! again), `INFO` otherwise, with the fields `breaker`, `from`, `to`, `origin`, `manual`,
//! `dry_run`, the ended generation's counts (`requests`, `successes`, `failures`,
//! `exclusions`, `consecutive_successes`, `consecutive_failures`) and `opened`. Two layers
//! of a `tracing-subscriber` registry carry these events to an OpenTelemetry SDK, both on the
//! opentelemetry 0.33 this crate uses:
//!
//! - **Span events**: `tracing-opentelemetry` 0.34's layer over a tracer. A change made
//!   inside a span is an event of that span (a change outside every span is dropped),
//!   named after the message (`circuit breaker opened`, `circuit breaker half-open`,
//!   `circuit breaker closed`, `circuit breaker health check failed, open again`), whose
//!   attributes are the fields with `level` and `target` (and the layer's `code.*` source
//!   location); the counts are attributes of their decimal text.
//! - **Logs**: the OpenTelemetry log bridge `opentelemetry-appender-tracing` 0.33 over a
//!   logger provider. Each change is a log record of target `lazybreaker`, severity `Warn`
//!   or `Info` (text `WARN`, `INFO`), the message as its body and the fields as its
//!   attributes, the counts integers. The bridge's records share one instrumentation
//!   scope, with an empty name: select on the target. The same observer writes its
//!   throttle's and its fleet's events under that target too, with fields of their own: a
//!   state change is the record with the fields `from` and `to`.
//!
//! A breaker tripped in a request's span, with both (in-memory exporters here; in a service,
//! its exporters, and the subscriber installed by `tracing::subscriber::set_global_default`):
//!
//! ```
//! use lazybreaker::tracing::TracingObserver;
//! use lazybreaker::Breaker;
//! use opentelemetry::logs::Severity;
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
//! use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//! use tracing_subscriber::layer::SubscriberExt as _;
//!
//! let spans = InMemorySpanExporter::default();
//! let tracer_provider = SdkTracerProvider::builder()
//!     .with_simple_exporter(spans.clone())
//!     .build();
//! let logs = InMemoryLogExporter::default();
//! let logger_provider = SdkLoggerProvider::builder()
//!     .with_simple_exporter(logs.clone())
//!     .build();
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("my-service")))
//!     .with(OpenTelemetryTracingBridge::new(&logger_provider));
//!
//! let breaker = Breaker::builder()
//!     .name("payments")
//!     .ready_to_trip(|c| c.consecutive_failures >= 1)
//!     .observer(TracingObserver)
//!     .build();
//! tracing::subscriber::with_default(subscriber, || {
//!     let _span = tracing::info_span!("checkout").entered();
//!     let _ = breaker.execute(|| Err::<(), _>("down"));
//! });
//! tracer_provider.force_flush()?;
//! logger_provider.force_flush()?;
//!
//! let span = &spans.get_finished_spans()?[0];
//! assert_eq!(span.name, "checkout");
//! assert_eq!(span.events[0].name, "circuit breaker opened");
//! let log = &logs.get_emitted_logs()?[0].record;
//! assert_eq!(log.severity_number(), Some(Severity::Warn));
//! assert_eq!(log.target().map(|t| t.as_ref()), Some("lazybreaker"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Examples
//!
//! ```
//! use lazybreaker::{Breaker, Registry};
//! use lazybreaker_otel::BreakerMetrics;
//! use std::sync::Arc;
//!
//! // With an SDK: `SdkMeterProvider::builder().with_reader(..).build().meter("my-service")`.
//! let meter = opentelemetry::global::meter("my-service");
//! let endpoints = Arc::new(Registry::new(|_: &String| Breaker::builder()));
//! let payments = Arc::new(Breaker::builder().name("payments").build());
//! let metrics = BreakerMetrics::new(&meter);
//! metrics.registry(Arc::clone(&endpoints)).breaker(payments);
//! ```
//!
//! `examples/stdout.rs` exports to stdout with `opentelemetry-stdout`.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "fleet")]
mod fleet;
mod metrics;
mod point;
mod source;
mod standalone;

pub use metrics::BreakerMetrics;
