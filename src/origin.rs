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
    /// A [pool](crate::pool::Pool) took its endpoint out for the reason given: an outlier
    /// among its peers ([`OutlierDetection`](crate::pool::OutlierDetection)), or a node that
    /// hangs (no call back within the pool's [`deadline`](crate::pool::Pool::deadline)).
    Ejected(Ejection),
}

/// Why a [pool](crate::pool::Pool) took an endpoint out ([`Origin::Ejected`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Ejection {
    /// Its success rate fell below its peers' (Envoy's `success_rate` detector).
    SuccessRate,
    /// Its failure percentage reached the threshold (Envoy's `failure_percentage`).
    FailurePercentage,
    /// Calls to it were in flight longer than the pool's deadline and none came back since
    /// (brpc's `E1008`, judged at pick time).
    Hung,
}

impl Ejection {
    /// How a metric label says it: `success_rate`, `failure_percentage`, `hung`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SuccessRate => "success_rate",
            Self::FailurePercentage => "failure_percentage",
            Self::Hung => "hung",
        }
    }
}

impl std::fmt::Display for Ejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Breaker => "breaker",
            Self::Manual => "manual",
            Self::Adopted => "adopted",
            Self::HealthCheck => "health_check",
            Self::Ejected(Ejection::SuccessRate) => "ejected_success_rate",
            Self::Ejected(Ejection::FailurePercentage) => "ejected_failure_percentage",
            Self::Ejected(Ejection::Hung) => "ejected_hung",
        })
    }
}
