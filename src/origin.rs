//! [`Origin`]: who made a state change. A leaf module.

/// Who made a state change: the breaker itself, an operator, or a decision made elsewhere
/// and adopted. Carried by every [`Transition`](crate::observe::Transition).
///
/// `#[non_exhaustive]`: later origins (a health check, say) can be added without breaking
/// anyone; a `match` on it needs a wildcard arm.
///
/// # Examples
///
/// ```
/// use lazybreaker::observe::{Observer, Origin, Transition};
/// use lazybreaker::{Breaker, State};
/// use std::sync::Mutex;
///
/// #[derive(Default)]
/// struct Seen(Mutex<Vec<(State, Origin)>>);
/// impl Observer for Seen {
///     fn on_transition(&self, t: &Transition<'_>) {
///         self.0.lock().unwrap().push((t.to, t.origin));
///     }
/// }
///
/// let breaker = Breaker::builder().observer(Seen::default()).build();
/// breaker.force_open();
/// breaker.release();
/// assert_eq!(
///     *breaker.observer().0.lock().unwrap(),
///     [(State::Open, Origin::Manual), (State::Closed, Origin::Manual)]
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Origin {
    /// The breaker's own calls: its policy, a fatal result, a probe, or its clock (an open
    /// period that ended).
    Breaker,
    /// A manual control: [`force_open`](crate::Breaker::force_open),
    /// [`force_closed`](crate::Breaker::force_closed), [`release`](crate::Breaker::release),
    /// [`trip_for`](crate::Breaker::trip_for), or a permit's `failure_open_for`.
    Manual,
    /// A health check's verdict ([`Builder::health_check`](crate::Builder::health_check)): a
    /// passed check's change to half-open, or a failed check's return to open (through
    /// half-open: the check stood in for the probe).
    HealthCheck,
    /// A decision made elsewhere and adopted ([`adopt_open`](crate::Breaker::adopt_open),
    /// [`adopt_closed`](crate::Breaker::adopt_closed)): a fleet sharing this breaker's
    /// decisions, for example.
    Adopted,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Breaker => "breaker",
            Self::Manual => "manual",
            Self::Adopted => "adopted",
            Self::HealthCheck => "health_check",
        })
    }
}
