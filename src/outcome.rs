//! [`Outcome`]: how a call ended, as the breaker counts it. A leaf module.

/// How a call ended, as the breaker counts it.
///
/// `#[non_exhaustive]`: a later verdict (one that trips at once, say) can be added without
/// breaking anyone; a `match` on it needs a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The call failed.
    Failure,
    /// The call's result says nothing about the dependency's health (a cancellation, a
    /// client-side error): it is counted as neither, and in half-open it gives its slot back.
    Excluded,
    /// The call failed in a way that says the dependency is gone (the connection was
    /// refused, the host is unreachable: brpc's `SetFailed` path): counted as a failure, and
    /// it opens the breaker at once, whatever the policy says; in half-open it reopens it,
    /// like any failure. Policies see it as a [`Failure`](Outcome::Failure) with
    /// [`CallResult::fatal`](crate::policy::CallResult::fatal) set. A forced-closed breaker still does not trip.
    Fatal,
}

impl Outcome {
    /// How the count window records it: a fatal result is a failure.
    pub(crate) fn counted(self) -> Self {
        match self {
            Self::Fatal => Self::Failure,
            other => other,
        }
    }
}
