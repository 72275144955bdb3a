//! [`State`]: gobreaker's three states. A leaf module.

use std::fmt;

/// The state of a circuit breaker: gobreaker's three.
///
/// `State` is deliberately exhaustive: a breaker is always in exactly one of these, and code
/// that matches on it should not need a wildcard arm.
///
/// # Examples
///
/// ```
/// use lazybreaker::State;
///
/// assert_eq!(State::HalfOpen.to_string(), "half-open");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum State {
    /// Calls go through; results are counted and the policy decides when to trip.
    Closed,
    /// A limited number of probe calls go through; their results decide between closed and
    /// open.
    HalfOpen,
    /// Calls are rejected until the open duration has passed.
    Open,
}

impl State {
    /// The name gobreaker prints: `closed`, `half-open` or `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::HalfOpen => "half-open",
            State::Open => "open",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
