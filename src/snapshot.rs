//! [`Snapshot`]: everything a scrape reports of one breaker. A leaf module of values.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::counts::{Counts, Totals, Transitions};
use crate::forced::Forced;
use crate::state::State;

/// One breaker at one instant, read without side effects: from
/// [`Breaker::snapshot`](crate::Breaker::snapshot).
///
/// `state` is the state the next call would find, computed as the breaker would compute it
/// but without making the change: an open breaker whose open period has passed reads
/// `HalfOpen` (and no `on_state_change` runs, on the scraping thread or any other), and a
/// closed breaker whose count window has passed reads the empty counts of the next one.
/// Nothing else about the breaker changes either: no state, no count, no callback. (Taking
/// a snapshot takes the breaker's lock once, as any locked call does, and folds in what the
/// lock-free lane counted.)
///
/// brpc's two per-connection figures are here too: [`times_opened`](Snapshot::times_opened)
/// (`nBreak`) and [`recent_failures`](Snapshot::recent_failures) (`RecentErr`).
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .name("payments")
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .timeout(Duration::from_secs(10))
///     .clock(clock.clone())
///     .build();
/// let _ = breaker.execute(|| Err::<(), _>("down"));
/// let _ = breaker.execute(|| Ok::<_, ()>(())); // rejected
/// let s = breaker.snapshot();
/// assert_eq!((s.name.as_str(), s.state), ("payments", State::Open));
/// assert_eq!(s.retry_after, Some(Duration::from_secs(10))); // the whole open period is left
/// assert_eq!((s.totals.failures, s.totals.rejected_open, s.times_opened), (1, 1, 1));
///
/// clock.advance(Duration::from_secs(11));
/// assert_eq!(breaker.snapshot().state, State::HalfOpen); // what the next call finds...
/// assert_eq!(breaker.totals().opened, 1);                // ...without having moved it
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Snapshot {
    /// The breaker's name.
    pub name: String,
    /// When the snapshot was taken, on the breaker's clock.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub at: Duration,
    /// The state the next call would find (see above).
    pub state: State,
    /// The forced mode, if any ([`Breaker::forced`](crate::Breaker::forced)).
    pub forced: Option<Forced>,
    /// Whether it is in dry run ([`Builder::dry_run`](crate::Builder::dry_run)): it admits
    /// every call, and counts in [`Totals::would_reject`] those it would have rejected.
    pub dry_run: bool,
    /// The counts the next call would count in.
    pub counts: Counts,
    /// Lifetime counters, rejections included.
    pub totals: Totals,
    /// While open (not forced): what is left of the open period, until a probe is let
    /// through ([`Rejected::Open`](crate::Rejected::Open)'s `retry_after`).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize_option")
    )]
    pub retry_after: Option<Duration>,
    /// How many times the breaker went from each state to each other.
    pub transitions: Transitions,
    /// Times the breaker opened (brpc's `nBreak`); the same as `totals.opened`.
    pub times_opened: u64,
    /// Failures counted since the breaker last recovered (closed after being open), or since
    /// it was built (brpc's `RecentErr`).
    pub recent_failures: u64,
    /// The policy's own figures, by name, where it has some (see
    /// [`TripPolicy::gauges`](crate::policy::TripPolicy::gauges)): e.g. the EMA windows'
    /// error costs and latencies.
    pub policy: BTreeMap<&'static str, f64>,
}
