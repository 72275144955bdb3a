//! State changes reaching OpenTelemetry as the crate docs' "State changes" say: the core's
//! `tracing` observer (`lazybreaker::tracing::TracingObserver`) with `tracing-opentelemetry`'s
//! layer (each change an event of the current span) or with the OpenTelemetry log bridge
//! `opentelemetry-appender-tracing` (each change a log record). SDK providers with the
//! in-memory exporters, read back after `force_flush`; a `ManualClock`: no sleeps.
//!
//! The expectations are the observer's documented contract: target `lazybreaker`, `WARN` on
//! opening and `INFO` otherwise, the fields `breaker`, `from`, `to`, `origin`, `manual`,
//! `dry_run`, the ended generation's counts and `opened`.

use std::collections::BTreeMap;
use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::tracing::TracingObserver;
use lazybreaker::{Breaker, ManualClock};
use opentelemetry::logs::{AnyValue, Severity};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Value;
use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
use opentelemetry_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;

const OPEN_FOR: Duration = Duration::from_secs(30);

/// The breaker's name, as every change carries it in `breaker`.
const NAME: &str = "payments";

/// One change as the observer's contract describes it.
struct Change {
    /// `WARN` for an opening, `INFO` otherwise.
    level: &'static str,
    /// The event's message: the span event's name, the log record's body.
    message: &'static str,
    from: &'static str,
    to: &'static str,
    /// The ended generation's counts: `requests`, `successes`, `failures`, `exclusions`,
    /// `consecutive_successes`, `consecutive_failures`.
    counts: [(&'static str, i64); 6],
    /// Times opened so far, this change included.
    opened: i64,
}

/// The changes of [`trip_and_revive`], in order.
fn expected() -> [Change; 3] {
    let counts = |requests, successes, failures, consecutive_successes, consecutive_failures| {
        [
            ("requests", requests),
            ("successes", successes),
            ("failures", failures),
            ("exclusions", 0),
            ("consecutive_successes", consecutive_successes),
            ("consecutive_failures", consecutive_failures),
        ]
    };
    [
        // Three successes then two failures in a row: the counts that tripped it.
        Change {
            level: "WARN",
            message: "circuit breaker opened",
            from: "closed",
            to: "open",
            counts: counts(5, 3, 2, 0, 2),
            opened: 1,
        },
        // The open period ends: the open generation saw no call.
        Change {
            level: "INFO",
            message: "circuit breaker half-open",
            from: "open",
            to: "half-open",
            counts: counts(0, 0, 0, 0, 0),
            opened: 1,
        },
        // The probe succeeds: the half-open generation's one call.
        Change {
            level: "INFO",
            message: "circuit breaker closed",
            from: "half-open",
            to: "closed",
            counts: counts(1, 1, 0, 1, 0),
            opened: 1,
        },
    ]
}

/// The fields of every change, as `TracingObserver` documents them.
const FIELDS: [&str; 13] = [
    "breaker",
    "from",
    "to",
    "origin",
    "manual",
    "dry_run",
    "requests",
    "successes",
    "failures",
    "exclusions",
    "consecutive_successes",
    "consecutive_failures",
    "opened",
];

/// A breaker that trips at two failures in a row, observed by `TracingObserver`.
fn breaker(clock: &ManualClock) -> Breaker<ConsecutiveFailures, TracingObserver> {
    Breaker::builder()
        .name(NAME)
        .policy(ConsecutiveFailures::new(2).unwrap())
        .timeout(OPEN_FOR)
        .clock(clock.clone())
        .observer(TracingObserver)
        .build()
}

/// Closed → open (tripped by its calls) → half-open (the open period over) → closed (the
/// probe succeeded): three changes, nothing else.
fn trip_and_revive(breaker: &Breaker<ConsecutiveFailures, TracingObserver>, clock: &ManualClock) {
    for _ in 0..3 {
        breaker.execute(|| Ok::<_, ()>(())).unwrap();
    }
    for _ in 0..2 {
        assert!(breaker.execute(|| Err::<(), _>("down")).is_err());
    }
    assert_eq!(breaker.state(), lazybreaker::State::Open);
    // Expiry is strict: the open period over one nanosecond after it ends.
    clock.advance(OPEN_FOR + Duration::from_nanos(1));
    breaker.execute(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(breaker.state(), lazybreaker::State::Closed);
}

/// Counts the events of target `lazybreaker` it sees, span or not: that the observer emitted
/// a change the span layer then dropped.
#[derive(Clone, Default)]
struct Emitted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Emitted {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == "lazybreaker" {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn each_change_is_an_event_of_the_current_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let emitted = Emitted::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("lazybreaker-test")))
        .with(emitted.clone());
    let clock = ManualClock::new();
    let breaker = breaker(&clock);

    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("checkout").entered();
        trip_and_revive(&breaker, &clock);
        drop(span);
        // A change outside every span: emitted (the fourth event), but no span carries it,
        // so the layer drops it.
        breaker.force_open();
    });
    assert_eq!(
        emitted.0.load(std::sync::atomic::Ordering::Relaxed),
        4,
        "three changes in the span, the manual open outside it"
    );
    provider.force_flush().expect("a flush");

    let spans = exporter.get_finished_spans().expect("the exported spans");
    assert_eq!(spans.len(), 1, "the one span, ended: {spans:?}");
    let span = &spans[0];
    assert_eq!(span.name, "checkout");
    assert_eq!(span.events.dropped_count, 0);
    let expected = expected();
    assert_eq!(
        span.events.len(),
        expected.len(),
        "one event per change: {:?}",
        span.events
    );
    for (event, change) in span.events.iter().zip(&expected) {
        let what = format!("{} -> {}", change.from, change.to);
        let attributes: BTreeMap<&str, &Value> = event
            .attributes
            .iter()
            // The layer's own: the event's source location.
            .filter(|kv| !kv.key.as_str().starts_with("code."))
            .map(|kv| (kv.key.as_str(), &kv.value))
            .collect();
        assert_eq!(event.name, change.message, "{what}");
        // The layer adds the level and the target to the observer's fields.
        let mut keys: Vec<&str> = FIELDS.to_vec();
        keys.extend(["level", "target"]);
        keys.sort_unstable();
        assert_eq!(
            attributes.keys().copied().collect::<Vec<_>>(),
            keys,
            "{what}"
        );
        let string = |s: &str| Value::String(s.to_owned().into());
        assert_eq!(attributes["level"], &string(change.level), "{what}");
        assert_eq!(attributes["target"], &string("lazybreaker"), "{what}");
        assert_eq!(attributes["breaker"], &string(NAME), "{what}");
        assert_eq!(attributes["from"], &string(change.from), "{what}");
        assert_eq!(attributes["to"], &string(change.to), "{what}");
        assert_eq!(attributes["origin"], &string("breaker"), "{what}");
        assert_eq!(attributes["manual"], &Value::Bool(false), "{what}");
        assert_eq!(attributes["dry_run"], &Value::Bool(false), "{what}");
        // tracing-opentelemetry records an unsigned integer as its text.
        for (field, n) in change.counts.iter().chain([&("opened", change.opened)]) {
            assert_eq!(
                attributes[field],
                &string(&n.to_string()),
                "{what}: {field}"
            );
        }
    }
}

#[test]
fn each_change_is_a_log_record() {
    let exporter = InMemoryLogExporter::default();
    let provider = SdkLoggerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber =
        tracing_subscriber::registry().with(OpenTelemetryTracingBridge::new(&provider));
    let clock = ManualClock::new();
    let breaker = breaker(&clock);

    tracing::subscriber::with_default(subscriber, || trip_and_revive(&breaker, &clock));
    provider.force_flush().expect("a flush");

    let logs = exporter.get_emitted_logs().expect("the emitted logs");
    let expected = expected();
    assert_eq!(
        logs.len(),
        expected.len(),
        "one record per change: {logs:?}"
    );
    for (log, change) in logs.iter().zip(&expected) {
        let what = format!("{} -> {}", change.from, change.to);
        let record = &log.record;
        // The bridge's one logger: an instrumentation scope with an empty name; the
        // observer's target is the record's.
        assert_eq!(log.instrumentation.name(), "", "{what}");
        assert_eq!(
            record.target().map(|t| t.as_ref()),
            Some("lazybreaker"),
            "{what}"
        );
        let severity = match change.level {
            "WARN" => Severity::Warn,
            _ => Severity::Info,
        };
        assert_eq!(record.severity_number(), Some(severity), "{what}");
        assert_eq!(record.severity_text(), Some(change.level), "{what}");
        assert_eq!(
            record.body(),
            Some(&AnyValue::String(change.message.into())),
            "{what}"
        );
        let attributes: BTreeMap<&str, &AnyValue> = record
            .attributes_iter()
            .map(|(key, value)| (key.as_str(), value))
            .collect();
        let mut keys = FIELDS.to_vec();
        keys.sort_unstable();
        assert_eq!(
            attributes.keys().copied().collect::<Vec<_>>(),
            keys,
            "{what}: the observer's fields, nothing else"
        );
        let string = |s: &str| AnyValue::String(s.to_owned().into());
        assert_eq!(attributes["breaker"], &string(NAME), "{what}");
        assert_eq!(attributes["from"], &string(change.from), "{what}");
        assert_eq!(attributes["to"], &string(change.to), "{what}");
        assert_eq!(attributes["origin"], &string("breaker"), "{what}");
        assert_eq!(attributes["manual"], &AnyValue::Boolean(false), "{what}");
        assert_eq!(attributes["dry_run"], &AnyValue::Boolean(false), "{what}");
        // The bridge records an unsigned integer as an integer.
        for (field, n) in change.counts.iter().chain([&("opened", change.opened)]) {
            assert_eq!(attributes[field], &AnyValue::Int(*n), "{what}: {field}");
        }
    }
}
