//! [`Forced`]: a manual override of the state machine. A leaf module.

/// A manual override set by [`Breaker::force_open`](crate::Breaker::force_open) or
/// [`Breaker::force_closed`](crate::Breaker::force_closed), in force until
/// [`Breaker::release`](crate::Breaker::release); read it with
/// [`Breaker::forced`](crate::Breaker::forced).
///
/// While a breaker is forced, [`state`](crate::Breaker::state) still answers one of the
/// three states (forced open is [`Open`](crate::State::Open), forced closed is
/// [`Closed`](crate::State::Closed)), and nothing time-based moves it: a forced-open breaker
/// never goes half-open, a forced-closed one never trips.
///
/// The correspondence: resilience4j's `FORCED_OPEN` and `METRICS_ONLY` states, Hystrix's
/// `forceOpen` / `forceClosed`, Polly's `Isolate()` / `Reset()`.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Forced, Rejected, State};
///
/// let breaker = Breaker::builder().build();
/// breaker.force_open(); // an operator takes the dependency out
/// assert_eq!(breaker.forced(), Some(Forced::Open));
/// assert_eq!(breaker.state(), State::Open);
/// assert_eq!(breaker.allow().unwrap_err(), Rejected::ForcedOpen);
/// breaker.release();
/// assert_eq!((breaker.forced(), breaker.state()), (None, State::Closed));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Forced {
    /// Every call is rejected with [`Rejected::ForcedOpen`](crate::Rejected::ForcedOpen).
    Open,
    /// Every call is admitted and counted as usual, but the policy never trips the breaker:
    /// observe-only, to roll a policy out or to keep a breaker from tripping during a
    /// migration.
    Closed,
}
