//! The `tracing` feature: one event per state change, with its fields, outside the lock;
//! nothing per call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::tracing::TracingObserver;
use lazybreaker::{Breaker, ManualClock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One captured event: level, target, and its fields as text.
#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    target: String,
    fields: Vec<(String, String)>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn one_event_per_transition_with_its_cause() {
    let capture = Capture::default();
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .name("payments")
        .ready_to_trip(|c| c.consecutive_failures >= 2)
        .timeout(Duration::from_secs(5))
        .clock(clock.clone())
        .observer(TracingObserver)
        .build();
    tracing::subscriber::with_default(capture.clone(), || {
        for _ in 0..100 {
            breaker.execute(|| Ok::<_, ()>(())).unwrap();
        }
        assert!(capture.0.lock().unwrap().is_empty(), "nothing per call");
        let _ = breaker.execute(|| Err::<(), _>(()));
        let _ = breaker.execute(|| Err::<(), _>(()));
        clock.advance(Duration::from_secs(6));
        breaker.execute(|| Ok::<_, ()>(())).unwrap();
        breaker.force_open();
    });
    let events = capture.0.lock().unwrap().clone();
    let summary: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e.level,
                e.field("from").unwrap().to_owned(),
                e.field("to").unwrap().to_owned(),
                e.field("manual").unwrap().to_owned(),
            )
        })
        .collect();
    let s = |a: &str| a.to_owned();
    assert_eq!(
        summary,
        [
            (Level::WARN, s("closed"), s("open"), s("false")),
            (Level::INFO, s("open"), s("half-open"), s("false")),
            (Level::INFO, s("half-open"), s("closed"), s("false")),
            (Level::WARN, s("closed"), s("open"), s("true")),
        ]
    );
    let trip = &events[0];
    assert_eq!(trip.target, "lazybreaker");
    assert_eq!(trip.field("breaker"), Some("payments"));
    assert_eq!(
        trip.field("requests"),
        Some("102"),
        "the counts that tripped it"
    );
    assert_eq!(trip.field("failures"), Some("2"));
    assert_eq!(trip.field("consecutive_failures"), Some("2"));
    assert_eq!(trip.field("opened"), Some("1"));
    assert_eq!(trip.field("message"), Some("circuit breaker opened"));
}

/// A throttle starting and stopping: one `WARN` when it starts turning calls away, one
/// `INFO` when it stops (the dependency accepts again), nothing per throttled call.
#[test]
fn a_throttle_starting_and_stopping_is_one_event_each() {
    let capture = Capture::default();
    let breaker = Breaker::builder()
        .name("orders")
        .never_trips(true)
        .throttle(
            lazybreaker::throttle::Throttle::new(2.0)
                .unwrap()
                .min_requests(10),
        )
        .clock(ManualClock::new())
        .observer(TracingObserver)
        .build();
    tracing::subscriber::with_default(capture.clone(), || {
        // Overloaded: every call fails until the throttle has turned 50 away.
        while breaker.totals().rejected_throttled < 50 {
            if let Ok(permit) = breaker.allow() {
                permit.failure();
            }
        }
        // Healed: every admitted call succeeds until p is back to zero.
        for _ in 0..2_000 {
            if let Ok(permit) = breaker.allow() {
                permit.success();
            }
        }
        assert_eq!(breaker.throttle_probability(), Some(0.0));
    });
    let events = capture.0.lock().unwrap().clone();
    let summary: Vec<_> = events
        .iter()
        .map(|e| (e.level, e.field("message").unwrap_or_default().to_owned()))
        .collect();
    assert_eq!(
        summary,
        [
            (Level::WARN, "circuit breaker throttling".to_owned()),
            (Level::INFO, "circuit breaker stopped throttling".to_owned()),
        ]
    );
    assert_eq!(events[0].field("breaker"), Some("orders"));
    // It started at the tenth failure: 10 requests, no accept, p = 10 / 11 capped at 0.9.
    assert_eq!(events[0].field("probability"), Some("0.9"));
    assert_eq!(events[0].field("throttled"), Some("0"));
    assert_eq!(events[1].field("probability"), Some("0.0"));
    assert!(events.iter().all(|e| e.target == "lazybreaker"));
}
