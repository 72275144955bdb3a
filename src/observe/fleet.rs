//! [`FleetEvent`]: what a breaker sharing its decisions with a fleet tells its observers about
//! the store it shares them through. A leaf module of values, store-agnostic.

use std::fmt;

/// The store of a shared breaker failed or came back, as its observers'
/// [`on_fleet`](super::Observer::on_fleet) hook is told. Each event is delivered once, on
/// the call that found out, outside every lock.
///
/// # Examples
///
/// An observer that counts store outages (for an alert), tried on an event of its own:
///
/// ```
/// use lazybreaker::observe::{FleetEvent, Observer};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// #[derive(Default)]
/// struct Outages(AtomicU64);
///
/// impl Observer for Outages {
///     fn on_fleet(&self, event: &FleetEvent<'_>) {
///         if let FleetEvent::Degraded { .. } = event {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let outages = Outages::default();
/// let error = std::io::Error::other("connection refused");
/// let event = FleetEvent::Degraded { breaker: "payments", error: &error };
/// outages.on_fleet(&event);
/// assert_eq!(outages.0.load(Ordering::Relaxed), 1);
/// assert_eq!(
///     event.to_string(),
///     "breaker \"payments\": store failed (connection refused); deciding locally"
/// );
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum FleetEvent<'a> {
    /// A store call failed or timed out: the breaker now decides locally (its own counts and
    /// policy keep protecting the dependency) until the store answers again. Delivered once
    /// per outage, not per failed call.
    Degraded {
        /// The breaker's name.
        breaker: &'a str,
        /// What went wrong.
        error: &'a (dyn std::error::Error + 'static),
    },
    /// The store answered again after an outage: the breaker follows the fleet again.
    Recovered {
        /// The breaker's name.
        breaker: &'a str,
    },
    /// The shared record had vanished (the store restarted without persistence, or the
    /// record expired) and this process wrote it again from its own state.
    Recreated {
        /// The breaker's name.
        breaker: &'a str,
        /// The generation it was written at.
        generation: u64,
    },
}

impl FleetEvent<'_> {
    /// The name of the breaker the event is about.
    pub fn breaker(&self) -> &str {
        match self {
            Self::Degraded { breaker, .. }
            | Self::Recovered { breaker }
            | Self::Recreated { breaker, .. } => breaker,
        }
    }
}

impl fmt::Debug for FleetEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Degraded { breaker, error } => f
                .debug_struct("Degraded")
                .field("breaker", breaker)
                .field("error", &format_args!("{error}"))
                .finish(),
            Self::Recovered { breaker } => f
                .debug_struct("Recovered")
                .field("breaker", breaker)
                .finish(),
            Self::Recreated {
                breaker,
                generation,
            } => f
                .debug_struct("Recreated")
                .field("breaker", breaker)
                .field("generation", generation)
                .finish(),
        }
    }
}

impl fmt::Display for FleetEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Degraded { breaker, error } => write!(
                f,
                "breaker {breaker:?}: store failed ({error}); deciding locally"
            ),
            Self::Recovered { breaker } => {
                write!(f, "breaker {breaker:?}: store back; following the fleet")
            }
            Self::Recreated {
                breaker,
                generation,
            } => write!(
                f,
                "breaker {breaker:?}: shared record recreated at generation {generation}"
            ),
        }
    }
}
