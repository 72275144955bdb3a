//! The breaker's internal unit of time: nanoseconds since a clock's origin.
//!
//! A leaf: every module that computes with time uses it, and it uses nothing of the crate.

use std::time::Duration;

/// Nanoseconds since a clock's origin. `u64` lasts about 584 years; arithmetic on it
/// saturates rather than overflows.
pub(crate) type Nanos = u64;

/// A duration in nanoseconds, saturating at `u64::MAX` (about 584 years).
#[inline]
pub fn saturating_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An instant as policies and observers see it: a `Duration` since the clock's origin.
#[inline]
pub(crate) fn instant(now: Nanos) -> Duration {
    Duration::from_nanos(now)
}
