//! What a breaker counts, as users read it: [`Counts`] (the current generation's),
//! [`Totals`] and [`Transitions`] (since it was built). The window that keeps the closed
//! state's counts is [`window`](crate::window).

use crate::metric_values::retry_decisions;
use crate::state::State;

/// The numbers of requests and their results in the current generation.
///
/// The breaker clears its counts at every state change and, in the closed state, when its
/// `interval` expires (fixed window) or bucket by bucket (rolling window). Results of requests
/// admitted before a clear are ignored.
///
/// The fields are `u64` where gobreaker's are `u32`: a breaker with `interval = 0` counts
/// forever, and four billion calls are minutes of traffic for a busy service.
///
/// `Counts` is `#[non_exhaustive]` so that later counts (slow calls, say) can be added
/// without breaking anyone: read its fields directly, and build one (in a policy's tests)
/// from [`Counts::default`] with the `with_*` methods.
///
/// # Examples
///
/// ```
/// use lazybreaker::Counts;
///
/// let counts = Counts::default().with_requests(10).with_total_failures(4);
/// assert_eq!((counts.requests, counts.total_failures), (10, 4));
/// assert_eq!(counts.total_successes, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
// A field added later (`slow_calls`) reads as zero from a document written before it.
#[cfg_attr(feature = "serde", serde(default))]
#[non_exhaustive]
pub struct Counts {
    /// Requests admitted, counted at admission (so it includes requests still in flight).
    pub requests: u64,
    /// Requests that succeeded.
    pub total_successes: u64,
    /// Requests that failed.
    pub total_failures: u64,
    /// Requests whose result was excluded: counted neither as a success nor as a failure.
    pub total_exclusions: u64,
    /// Successes since the last failure.
    pub consecutive_successes: u64,
    /// Failures since the last success.
    pub consecutive_failures: u64,
    /// Results (successes and failures) slower than the policy's slow-call threshold
    /// ([`Capabilities::slow_call_threshold`](crate::policy::Capabilities::slow_call_threshold));
    /// always zero for a policy without one. Rolls with the window like every count.
    pub slow_calls: u64,
    /// Calls the throttle turned away in this window, counted only when the throttle counts
    /// them as requests ([`Throttle::count_throttled`](crate::throttle::Throttle::count_throttled)):
    /// not in `requests` (the trip policy never sees them), but in the throttle's. Rolls
    /// with the window like every count; zero in a count window.
    pub throttled: u64,
}

/// `with_*` setters, one per field, for building a `Counts` outside the crate.
macro_rules! setters {
    ($($field:ident => $setter:ident),* $(,)?) => {
        $(
            #[doc = concat!("These counts with `", stringify!($field), "` set to `n`.")]
            #[must_use]
            pub const fn $setter(mut self, n: u64) -> Self {
                self.$field = n;
                self
            }
        )*
    };
}

impl Counts {
    setters! {
        requests => with_requests,
        total_successes => with_total_successes,
        total_failures => with_total_failures,
        total_exclusions => with_total_exclusions,
        consecutive_successes => with_consecutive_successes,
        consecutive_failures => with_consecutive_failures,
        slow_calls => with_slow_calls,
        throttled => with_throttled,
    }

    /// The throttle's requests and accepts in these counts: the requests (with the
    /// throttled ones if `with_throttled`), and the results that were not failures (in a
    /// count window, `by_count`, the exclusions take no place, so only the successes).
    pub(crate) fn throttle_counts(&self, with_throttled: bool, by_count: bool) -> (u64, u64) {
        let requests = self.requests + if with_throttled { self.throttled } else { 0 };
        let accepts = if by_count {
            self.total_successes
        } else {
            self.total_successes + self.total_exclusions
        };
        (requests, accepts)
    }

    pub(crate) fn on_request(&mut self) {
        self.requests += 1;
    }

    pub(crate) fn on_success(&mut self) {
        self.total_successes += 1;
        self.consecutive_successes += 1;
        self.consecutive_failures = 0;
    }

    pub(crate) fn on_failure(&mut self) {
        self.total_failures += 1;
        self.consecutive_failures += 1;
        self.consecutive_successes = 0;
    }

    pub(crate) fn on_exclusion(&mut self) {
        self.total_exclusions += 1;
    }
}

/// Lifetime counters of a breaker, never cleared: for metrics and dashboards.
///
/// Unlike [`Counts`], which belong to the current generation, these add up everything since
/// the breaker was built. Every admitted request ends up in exactly one of `successes`,
/// `failures`, `exclusions`, `abandoned` and `dropped`, once its permit reported (or was
/// dropped): `admitted == successes + failures + exclusions + abandoned + dropped + (requests
/// still in flight)`.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
///
/// let breaker = Breaker::builder().build();
/// let _ = breaker.execute(|| Ok::<_, ()>(()));
/// let in_flight = breaker.allow().unwrap();
/// let t = breaker.totals();
/// assert_eq!((t.admitted, t.successes), (2, 1));
/// drop(in_flight); // an abandoned call: an exclusion in the counts, abandoned in the totals
/// assert_eq!(breaker.counts().total_exclusions, 1);
/// assert_eq!((breaker.totals().abandoned, breaker.totals().exclusions), (1, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Totals {
    /// Requests admitted.
    pub admitted: u64,
    /// Results counted as successes.
    pub successes: u64,
    /// Results counted as failures (a half-open probe's failure included).
    pub failures: u64,
    /// Results counted as exclusions (abandoned calls are counted apart, in `abandoned`).
    pub exclusions: u64,
    /// Results ignored because they arrived after their generation ended (stale) or after
    /// their bucket left a rolling window.
    pub dropped: u64,
    /// Times the breaker entered the open state.
    pub opened: u64,
    /// Calls abandoned without a verdict (a permit dropped, a future of `execute_async`
    /// dropped before the call completed), counted here whatever they counted as in the
    /// window ([`AbandonedAs`](crate::AbandonedAs)) and whatever their generation.
    pub abandoned: u64,
    /// Calls rejected because the breaker was open
    /// ([`Rejected::Open`](crate::Rejected::Open)).
    pub rejected_open: u64,
    /// Calls rejected because the breaker was half-open with every probe slot taken
    /// ([`Rejected::TooManyRequests`](crate::Rejected::TooManyRequests)).
    pub rejected_half_open: u64,
    /// Calls rejected because the breaker was forced open
    /// ([`Rejected::ForcedOpen`](crate::Rejected::ForcedOpen)).
    pub rejected_forced: u64,
    /// Health checks that settled, passed or failed ([`Builder::health_check`](crate::Builder::health_check));
    /// a check whose call was dropped, or that was taken over, is not counted.
    #[cfg_attr(feature = "serde", serde(default))]
    pub health_checks: u64,
    /// Health checks that failed (returned `false` or panicked).
    #[cfg_attr(feature = "serde", serde(default))]
    pub health_checks_failed: u64,
    /// Calls a breaker in dry run ([`Builder::dry_run`](crate::Builder::dry_run)) admitted
    /// although it would have rejected them (open, half-open with its probes out, forced
    /// open): they are counted here and nowhere else (not as admitted, not in the
    /// rejections, their results not in the window). Zero outside dry run.
    #[cfg_attr(feature = "serde", serde(default))]
    pub would_reject: u64,
    /// Half-open trials started again because every probe slot had been held longer than
    /// [`Builder::probe_timeout`](crate::Builder::probe_timeout): each is one call that took
    /// the slots over (the replaced probes' results are dropped when they come).
    #[cfg_attr(feature = "serde", serde(default))]
    pub probes_taken_over: u64,
    /// Calls the throttle turned away in the closed state
    /// ([`Rejected::Throttled`](crate::Rejected::Throttled),
    /// [`Builder::throttle`](crate::Builder::throttle)): not admitted, not a result.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rejected_throttled: u64,
    /// Retries made after a failed attempt through this breaker, as a retry layer reports
    /// them ([`Retry`](crate::retry::Retry) in the pool, the tower, reqwest and gRPC
    /// integrations): the retry itself is an attempt like any other (it may go to another
    /// breaker).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retries: u64,
    /// Retries after a failed attempt through this breaker that the retry budget refused
    /// ([`Stop::Budget`](crate::retry::Stop::Budget)).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retries_budget_denied: u64,
    /// Calls whose last attempt failed through this breaker with every attempt made
    /// ([`Stop::Exhausted`](crate::retry::Stop::Exhausted)).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retries_exhausted: u64,
    /// Retries after a failed attempt through this breaker that the retry's throttle
    /// refused ([`Stop::Throttled`](crate::retry::Stop::Throttled)).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retries_throttled: u64,
}

/// What a retry layer decided after a failed attempt, as a breaker's [`Totals`] count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryTally {
    Retried,
    BudgetDenied,
    Exhausted,
    Throttled,
}

impl Totals {
    /// What a retry layer decided after an attempt through this breaker failed, by the label
    /// metrics give it: `retried`, `budget_denied`, `exhausted`, `throttled` (the Prometheus
    /// collector's `circuit_breaker_retries_total{decision}`, OpenTelemetry's
    /// `circuit_breaker.retries`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Breaker;
    ///
    /// let breaker = Breaker::builder().build();
    /// let decisions = breaker.totals().retry_decisions();
    /// assert_eq!(decisions.map(|(label, _)| label), ["retried", "budget_denied", "exhausted", "throttled"]);
    /// assert!(decisions.iter().all(|(_, n)| *n == 0));
    /// ```
    pub fn retry_decisions(&self) -> [(&'static str, u64); 4] {
        retry_decisions(
            self.retries,
            self.retries_budget_denied,
            self.retries_exhausted,
            self.retries_throttled,
        )
    }

    /// Counts a retry layer's decision.
    pub(crate) fn tally_retry(&mut self, tally: RetryTally) {
        let count = match tally {
            RetryTally::Retried => &mut self.retries,
            RetryTally::BudgetDenied => &mut self.retries_budget_denied,
            RetryTally::Exhausted => &mut self.retries_exhausted,
            RetryTally::Throttled => &mut self.retries_throttled,
        };
        *count += 1;
    }
}

/// How many times a breaker went from each state to each other, manual changes included: for
/// [`Snapshot::transitions`](crate::Snapshot::transitions) and the metrics built on it.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, State};
///
/// let breaker = Breaker::builder().build();
/// breaker.force_open();
/// breaker.release();
/// let t = breaker.snapshot().transitions;
/// assert_eq!(t.get(State::Closed, State::Open), 1);
/// assert_eq!(t.get(State::Open, State::Closed), 1);
/// assert_eq!(t.iter().map(|(_, _, n)| n).sum::<u64>(), 2);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Transitions {
    /// `[from][to]`, by `Transitions::index`.
    counts: [[u64; 3]; 3],
}

impl Transitions {
    const STATES: [State; 3] = [State::Closed, State::HalfOpen, State::Open];

    fn index(state: State) -> usize {
        match state {
            State::Closed => 0,
            State::HalfOpen => 1,
            State::Open => 2,
        }
    }

    /// Times the breaker went from `from` to `to` (0 when `from == to`).
    pub fn get(&self, from: State, to: State) -> u64 {
        self.counts[Self::index(from)][Self::index(to)]
    }

    /// Every change of state `(from, to, times)`, the six of them, zeros included, in a fixed
    /// order (by `from`, then `to`: closed, half-open, open).
    pub fn iter(&self) -> impl Iterator<Item = (State, State, u64)> + '_ {
        Self::STATES.into_iter().flat_map(move |from| {
            Self::STATES
                .into_iter()
                .filter(move |to| *to != from)
                .map(move |to| (from, to, self.get(from, to)))
        })
    }

    pub(crate) fn count(&mut self, from: State, to: State) {
        self.counts[Self::index(from)][Self::index(to)] += 1;
    }
}

/// As a map from `"from->to"` (gobreaker's state names) to the count, the six of them.
#[cfg(feature = "serde")]
impl serde::Serialize for Transitions {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Its length up front (six), for the formats that need it (postcard, bincode).
        let mut map = serializer.serialize_map(Some(6))?;
        for (from, to, n) in self.iter() {
            map.serialize_entry(&format!("{}->{}", from.as_str(), to.as_str()), &n)?;
        }
        map.end()
    }
}

/// The run of like results at the end of results recorded at once (the lock-free lane's),
/// so that folding them keeps the consecutive runs that recording each in turn would have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Tail {
    /// No failure among them: the successes, if any, are all one run.
    #[default]
    None,
    /// They end with this many successes after their last failure.
    Successes(u64),
    /// They end with this many failures after their last success (all of their failures
    /// when they hold no success).
    Failures(u64),
}
