//! [`Snapshot`]: everything a scrape reports of one breaker. A leaf module of values.
//! Its JSON writes each duration as `docs/integrations.md`, "Durations in JSON", says.

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
#[non_exhaustive]
pub struct Snapshot {
    /// The breaker's name.
    pub name: String,
    /// When the snapshot was taken, on the breaker's clock. Serialized as `at` (exact) and
    /// `at_ms` (whole milliseconds, to the nearest).
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
    /// through ([`Rejected::Open`](crate::Rejected::Open)'s `retry_after`). Half-open with
    /// every probe out (a trial running, the next call turned away with
    /// [`TooManyRequests`](crate::Rejected::TooManyRequests)): how long until a call is
    /// admitted again at the latest, when the probes out are taken over (see
    /// [`Builder::probe_timeout`](crate::Builder::probe_timeout)); with
    /// `probe_timeout(Duration::MAX)`, which never takes them over, the open `timeout`, as
    /// a hint. `None` otherwise. Serialized as `retry_after` (exact) and `retry_after_ms`
    /// (whole milliseconds, rounded up: a wait).
    pub retry_after: Option<Duration>,
    /// How many times the breaker went from each state to each other.
    pub transitions: Transitions,
    /// Times the breaker opened (brpc's `nBreak`); the same as `totals.opened`.
    pub times_opened: u64,
    /// Failures counted since the breaker last recovered (closed after being open), or since
    /// it was built (brpc's `RecentErr`).
    pub recent_failures: u64,
    /// Where a health-checked breaker ([`Builder::health_check`](crate::Builder::health_check))
    /// stands once its open period is over: [`CheckStatus::Due`] or
    /// [`CheckStatus::Running`]. The state is then still `Open` (only a passed check lets it
    /// go half-open) and `retry_after` is `None`: there is no time left to wait, a check must
    /// run. `None` otherwise. Written out only when set.
    pub check: Option<CheckStatus>,
    /// Whether the breaker has a health check (and is not in dry run, which runs none): its
    /// open periods end in a check, not in half-open by themselves. Written out only when
    /// `true`.
    pub health_checked: bool,
    /// For a breaker with a throttle ([`Builder::throttle`](crate::Builder::throttle)): the
    /// probability the next call is turned away with, as the window stands (zero unless
    /// closed); `None` without a throttle. Written out only when set.
    pub throttle_probability: Option<f64>,
    /// The policy's own figures, by name, where it has some (see
    /// [`TripPolicy::gauges`](crate::policy::TripPolicy::gauges)): e.g. the EMA windows'
    /// error costs and latencies.
    pub policy: BTreeMap<&'static str, f64>,
}

/// A snapshot's fields in their order, each duration `x` as `x` (exact) and `x_ms` (whole
/// milliseconds: `at` to the nearest, `retry_after` rounded up, a wait); `check`,
/// `health_checked` and `throttle_probability` only when set.
#[cfg(feature = "serde")]
impl serde::Serialize for Snapshot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use crate::human::{span_ms, wait_ms};
        use crate::serde_duration::fields_ms;
        use serde::ser::SerializeStruct;

        let mut s = serializer.serialize_struct("Snapshot", 17)?;
        s.serialize_field("name", &self.name)?;
        fields_ms(&mut s, ("at", "at_ms"), Some(self.at), span_ms)?;
        s.serialize_field("state", &self.state)?;
        s.serialize_field("forced", &self.forced)?;
        s.serialize_field("dry_run", &self.dry_run)?;
        s.serialize_field("counts", &self.counts)?;
        s.serialize_field("totals", &self.totals)?;
        let retry_after = ("retry_after", "retry_after_ms");
        fields_ms(&mut s, retry_after, self.retry_after, wait_ms)?;
        s.serialize_field("transitions", &self.transitions)?;
        s.serialize_field("times_opened", &self.times_opened)?;
        s.serialize_field("recent_failures", &self.recent_failures)?;
        match &self.check {
            Some(check) => s.serialize_field("check", check)?,
            None => s.skip_field("check")?,
        }
        match self.health_checked {
            true => s.serialize_field("health_checked", &true)?,
            false => s.skip_field("health_checked")?,
        }
        match &self.throttle_probability {
            Some(p) => s.serialize_field("throttle_probability", p)?,
            None => s.skip_field("throttle_probability")?,
        }
        s.serialize_field("policy", &self.policy)?;
        s.end()
    }
}

impl Snapshot {
    /// The calls by outcome, as metrics label them: every result and rejection the totals
    /// count (`success`, `failure`, `excluded`, `abandoned`, `dropped`, `rejected_open`,
    /// `rejected_half_open`, `rejected_forced`), then `rejected_throttled` if the breaker has
    /// a throttle and `would_reject` if it is in dry run. The Prometheus collector's
    /// `circuit_breaker_calls_total{outcome}` and OpenTelemetry's `circuit_breaker.calls`
    /// read these.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Breaker;
    ///
    /// let breaker = Breaker::builder().build();
    /// let _ = breaker.execute(|| Ok::<_, ()>(()));
    /// let _ = breaker.execute(|| Err::<(), _>(()));
    /// let snapshot = breaker.snapshot();
    /// let outcomes: Vec<_> = snapshot.outcomes().collect();
    /// assert_eq!(outcomes[..2], [("success", 1), ("failure", 1)]);
    /// assert_eq!(outcomes.len(), 8); // no throttle, no dry run
    /// ```
    pub fn outcomes(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let t = &self.totals;
        let shadows = self.dry_run.then_some(("would_reject", t.would_reject));
        let throttled = self
            .throttle_probability
            .is_some()
            .then_some(("rejected_throttled", t.rejected_throttled));
        [
            ("success", t.successes),
            ("failure", t.failures),
            ("excluded", t.exclusions),
            ("abandoned", t.abandoned),
            ("dropped", t.dropped),
            ("rejected_open", t.rejected_open),
            ("rejected_half_open", t.rejected_half_open),
            ("rejected_forced", t.rejected_forced),
        ]
        .into_iter()
        .chain(throttled)
        .chain(shadows)
    }
}

/// Where a health-checked breaker stands once its open period is over
/// ([`Snapshot::check`]): it stays open until a check passes.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, CheckStatus, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .ready_to_trip(|c| c.consecutive_failures >= 1)
///     .timeout(Duration::from_secs(10))
///     .health_check(|| async { true })
///     .clock(clock.clone())
///     .build();
/// let _ = breaker.execute(|| Err::<(), _>("down"));
/// assert_eq!(breaker.snapshot().check, None); // open, 10 s to go
/// clock.advance(Duration::from_secs(11));
/// let s = breaker.snapshot();
/// assert_eq!((s.state, s.check, s.retry_after), (State::Open, Some(CheckStatus::Due), None));
/// assert_eq!(CheckStatus::Due.to_string(), "check due");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum CheckStatus {
    /// The open period is over and no check runs: the next call that can run the check
    /// (an async call, [`Pool::pick_async`](crate::pool::Pool::pick_async)) runs it.
    Due,
    /// A call runs the check (it holds the lease, within `check_timeout`); other calls are
    /// rejected with [`Rejected::Checking`](crate::Rejected::Checking) meanwhile.
    Running,
}

impl CheckStatus {
    /// How a status page says it: "check due" or "checking".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Due => "check due",
            Self::Running => "checking",
        }
    }
}

impl std::fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
