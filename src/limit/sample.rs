//! [`Sample`]: what a caller reports of one call to a limit.

use std::time::Duration;

/// One call, as a limit learns from it: how long it took, how many calls were in flight
/// when it started (itself included), and whether it was dropped (rejected by the
/// dependency as overloaded, or timed out by the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// How long the call took.
    pub latency: Duration,
    /// Calls in flight when it started, itself included.
    pub in_flight: u32,
    /// Whether it was dropped: an overload answer, a timeout.
    pub dropped: bool,
}

impl Sample {
    /// A call that answered after `latency`, `in_flight` calls out when it started.
    pub fn new(latency: Duration, in_flight: u32) -> Self {
        Self {
            latency,
            in_flight,
            dropped: false,
        }
    }

    /// A call that was dropped (an overload answer, a timeout), `in_flight` calls out when
    /// it started.
    pub fn dropped(latency: Duration, in_flight: u32) -> Self {
        Self {
            latency,
            in_flight,
            dropped: true,
        }
    }
}
