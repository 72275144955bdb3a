//! State changes as `tracing` events (feature `tracing`): [`TracingObserver`], one event per
//! transition, emitted through the observation seam, so outside the breaker's lock, in order
//! and exactly once. Nothing is emitted per call.

use crate::observe::{FleetEvent, Observer, Origin, ThrottleEvent, Transition};
use crate::state::State;

/// An [`Observer`] that emits one `tracing` event per state change, with target
/// `lazybreaker`: `WARN` when the breaker opens (or a failed health check keeps it open for
/// another period: `from` and `to` are then both `open`), `INFO` otherwise. Fields: `breaker`, `from`,
/// `to` (gobreaker's state names), `origin` (`breaker`, `manual`, `adopted`, `health_check`,
/// or a pool's ejection: `ejected_success_rate`, `ejected_failure_percentage`,
/// `ejected_hung`; see [`Origin`]), `manual` (whether `origin` is `manual`), `dry_run` (whether the breaker is
/// in dry run, admitting every call: see [`Builder::dry_run`](crate::Builder::dry_run)), and the counts of the generation that ended
/// (`requests`, `successes`, `failures`, `exclusions`, `consecutive_successes`,
/// `consecutive_failures`) with the times opened so far (`opened`).
///
/// Combine it with another observer as a tuple: `.observer((TracingObserver, mine))`.
///
/// # Examples
///
/// ```
/// use lazybreaker::tracing::TracingObserver;
/// use lazybreaker::Breaker;
///
/// let breaker = Breaker::builder()
///     .name("payments")
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .observer(TracingObserver)
///     .build();
/// // With a subscriber installed, this logs
/// // WARN lazybreaker: circuit breaker opened breaker="payments" from="closed" to="open" ...
/// let _ = breaker.execute(|| Err::<(), _>("down"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TracingObserver;

macro_rules! transition_event {
    ($level:expr, $t:expr, $message:literal) => {{
        let t = $t;
        ::tracing::event!(
            target: "lazybreaker",
            $level,
            breaker = t.breaker,
            from = t.from.as_str(),
            to = t.to.as_str(),
            origin = %t.origin,
            manual = t.origin == Origin::Manual,
            dry_run = t.dry_run,
            requests = t.counts.requests,
            successes = t.counts.total_successes,
            failures = t.counts.total_failures,
            exclusions = t.counts.total_exclusions,
            consecutive_successes = t.counts.consecutive_successes,
            consecutive_failures = t.counts.consecutive_failures,
            opened = t.totals.opened,
            $message
        )
    }};
}

impl Observer for TracingObserver {
    fn on_transition(&self, t: &Transition<'_>) {
        match t.to {
            // A failed health check re-arms the open period: no state change.
            State::Open if t.from == State::Open => transition_event!(
                ::tracing::Level::WARN,
                t,
                "circuit breaker health check failed, open again"
            ),
            State::Open => transition_event!(::tracing::Level::WARN, t, "circuit breaker opened"),
            State::HalfOpen => {
                transition_event!(::tracing::Level::INFO, t, "circuit breaker half-open")
            }
            State::Closed => transition_event!(::tracing::Level::INFO, t, "circuit breaker closed"),
        }
    }

    /// A throttle starting to turn calls away (`WARN`, "circuit breaker throttling") or
    /// stopping (`INFO`, "circuit breaker stopped throttling"), with the fields `breaker`,
    /// `probability` (the next call's) and `throttled` (calls turned away so far).
    fn on_throttle(&self, event: &ThrottleEvent<'_>) {
        if event.throttling {
            ::tracing::event!(
                target: "lazybreaker",
                ::tracing::Level::WARN,
                breaker = event.breaker,
                probability = event.probability,
                throttled = event.throttled,
                "circuit breaker throttling"
            );
        } else {
            ::tracing::event!(
                target: "lazybreaker",
                ::tracing::Level::INFO,
                breaker = event.breaker,
                probability = event.probability,
                throttled = event.throttled,
                "circuit breaker stopped throttling"
            );
        }
    }

    /// A shared breaker's store failing (`WARN`), coming back or being recreated (`INFO`),
    /// with the fields `breaker` and `event` (the event's description).
    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let breaker = event.breaker();
        match event {
            FleetEvent::Degraded { .. } => ::tracing::event!(
                target: "lazybreaker",
                ::tracing::Level::WARN,
                breaker,
                event = %event,
                "circuit breaker store failed"
            ),
            _ => ::tracing::event!(
                target: "lazybreaker",
                ::tracing::Level::INFO,
                breaker,
                event = %event,
                "circuit breaker store event"
            ),
        }
    }
}
