//! [`Plan`]: what the lane may do for a breaker, decided once when it is built.

use crate::policy::Capabilities;

/// What the lane may do for this breaker, whatever its state: decided from the policy's
/// capabilities and the window when the breaker is built. One byte of flags (it sits beside
/// the lane's failure room, in what would be the lane's padding), each read through its
/// method:
///
/// - [`counts_closed`](Self::counts_closed): closed-state admissions and successes may be
///   counted lock-free.
/// - [`epochs`](Self::epochs): the cells count for one key (a generation and a window age) at
///   a time and are tagged with a lane epoch rather than the generation (see the module
///   docs): a rolling window's, and a lane that [`tracks`](Self::tracks) its calls in flight
///   (what an admission checks there changes within a generation).
/// - [`needs_latency`](Self::needs_latency): the policy measures latency, so every admission
///   needs a clock reading.
/// - [`tracks`](Self::tracks): the policy has a slow-call threshold over a time window, so
///   the lane tracks the calls it admits in its in-flight slots.
/// - [`defers`](Self::defers): [`Breaker::execute`](crate::Breaker::execute) may admit a
///   closed-state call without counting it, and count its request with its success (see
///   `uncounted.rs`): a closed-state lane (no latency, no recorder, no slow-call tracking)
///   for a policy whose decisions never read the requests. A throttle's lane never does (its
///   cells' request counters hold the throttle's room): [`Lane::new`](super::Lane::new)
///   clears it.
/// - *could defer*: the lane could defer but for a policy that reads the requests, which
///   [`verdict_at_latest`](Plan::verdict_at_latest) allows.
/// - [`latest_successes`](Self::latest_successes): a success is judged at the latest time the
///   breaker saw, not at a clock reading of its own
///   ([`Builder::verdict_at_latest`](crate::Builder::verdict_at_latest)): a windowed success
///   then counts in its cell without reading the clock. Never for a policy that measures
///   latency (its successes read the clock for the latency).
/// - [`throttled`](Self::throttled): the breaker has a throttle, which the lane sheds with
///   (set by [`Lane::new`](super::Lane::new)).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan(u8);

impl Plan {
    const COUNTS_CLOSED: u8 = 1;
    const EPOCHS: u8 = 1 << 1;
    const NEEDS_LATENCY: u8 = 1 << 2;
    const TRACKS: u8 = 1 << 3;
    const DEFERS: u8 = 1 << 4;
    const COULD_DEFER: u8 = 1 << 5;
    const LATEST_SUCCESSES: u8 = 1 << 6;
    const THROTTLED: u8 = 1 << 7;

    /// This plan with `flag` set if `on`, cleared if not.
    #[must_use]
    const fn with(self, flag: u8, on: bool) -> Self {
        if on {
            Self(self.0 | flag)
        } else {
            Self(self.0 & !flag)
        }
    }

    #[inline(always)]
    const fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }

    /// The plan for a breaker whose policy has `caps`, and whose closed-state window
    /// `rolls` or not. `records_successes`: the policy has a
    /// [`SuccessRecorder`](crate::policy::SuccessRecorder), which takes the closed-state
    /// successes it needs without the lock.
    pub(crate) fn of(
        caps: &Capabilities,
        rolls: bool,
        by_count: bool,
        records_successes: bool,
    ) -> Self {
        let successes_here = !caps.needs_successes || records_successes;
        let slow = caps.effective_slow_threshold().is_some();
        // A slow-call threshold over a time window: the lane tracks its admissions in its
        // slots, and counts a fast success while the policy says none can trip it. Over a
        // count window (which counts a slow call when it returns) every call takes the lock.
        let tracks = slow && !by_count;
        let counts_closed = (successes_here && !slow) || tracks;
        let could_defer = counts_closed
            && !caps.needs_latency
            && !caps.needs_successes
            && !records_successes
            && !tracks;
        Self(0)
            .with(Self::COUNTS_CLOSED, counts_closed)
            .with(Self::EPOCHS, rolls || tracks)
            .with(Self::NEEDS_LATENCY, caps.needs_latency)
            .with(Self::TRACKS, tracks)
            .with(Self::DEFERS, could_defer && !caps.reads_requests)
            .with(Self::COULD_DEFER, could_defer)
    }

    /// This plan, its successes judged at the latest time the breaker saw if `yes` and the
    /// policy measures no latency, and `execute`'s requests counted with their results even
    /// for a policy that reads the requests.
    pub(crate) fn verdict_at_latest(self, yes: bool) -> Self {
        self.with(
            Self::LATEST_SUCCESSES,
            yes && self.counts_closed() && !self.needs_latency() && !self.tracks(),
        )
        .with(
            Self::DEFERS,
            self.defers() || (yes && self.has(Self::COULD_DEFER)),
        )
    }

    /// This plan for a lane with a throttle if `throttled`: it then defers no request (see
    /// [`defers`](Self::defers)).
    pub(super) fn for_throttle(self, throttled: bool) -> Self {
        self.with(Self::DEFERS, self.defers() && !throttled)
            .with(Self::THROTTLED, throttled)
    }

    /// Whether the lane has a throttle.
    #[inline(always)]
    pub(super) fn throttled(&self) -> bool {
        self.has(Self::THROTTLED)
    }

    /// Whether a success is judged at the latest time the breaker saw (no clock reading of
    /// its own, on the lane or under the lock).
    #[inline(always)]
    pub(crate) fn latest_successes(&self) -> bool {
        self.has(Self::LATEST_SUCCESSES)
    }

    /// Whether the lane tracks the calls it admits in in-flight slots (a slow-call
    /// threshold over a time window).
    #[inline(always)]
    pub(crate) fn tracks(&self) -> bool {
        self.has(Self::TRACKS)
    }

    /// Whether the policy measures latency: then the breaker reads the clock for every
    /// admission, lane or lock, as its start.
    #[inline(always)]
    pub(crate) fn needs_latency(&self) -> bool {
        self.has(Self::NEEDS_LATENCY)
    }

    /// Whether closed-state admissions and successes may be counted lock-free.
    #[inline(always)]
    pub(crate) fn counts_closed(&self) -> bool {
        self.has(Self::COUNTS_CLOSED)
    }

    /// Whether the cells count for one key at a time, tagged with a lane epoch.
    #[inline(always)]
    pub(super) fn epochs(&self) -> bool {
        self.has(Self::EPOCHS)
    }

    /// Whether `execute` may admit a closed-state call uncounted (see `uncounted.rs`).
    #[inline(always)]
    pub(super) fn defers(&self) -> bool {
        self.has(Self::DEFERS)
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("counts_closed", &self.counts_closed())
            .field("epochs", &self.epochs())
            .field("needs_latency", &self.needs_latency())
            .field("tracks", &self.tracks())
            .field("defers", &self.defers())
            .field("could_defer", &self.has(Self::COULD_DEFER))
            .field("latest_successes", &self.latest_successes())
            .field("throttled", &self.throttled())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lane::tests::{closed, counting};
    use crate::lane::{Entry, Lane};
    use crate::policy::{ConsecutiveFailures, TripPolicy};

    #[test]
    fn the_plan_keeps_success_and_slow_call_policies_off_the_lane() {
        fn caps(latency: bool, successes: bool) -> Capabilities {
            Capabilities::default()
                .needs_latency(latency)
                .needs_successes(successes)
        }
        assert!(counting().counts_closed());
        let rolling = Plan::of(
            &ConsecutiveFailures::default().capabilities(),
            true,
            false,
            false,
        );
        assert!(
            rolling.counts_closed() && rolling.epochs(),
            "a rolling window counts too"
        );
        let latency = Plan::of(&caps(true, false), false, false, false);
        assert!(
            latency.counts_closed() && latency.needs_latency(),
            "latency alone: the breaker keeps the start"
        );
        assert!(!Plan::of(&caps(false, true), false, false, false).counts_closed());
        assert!(!Plan::of(&caps(true, true), false, false, false).counts_closed());
        assert!(
            Plan::of(&caps(true, true), false, false, true).counts_closed(),
            "successes taken by a recorder"
        );
        let slow = caps(true, false).slow_call_threshold(std::time::Duration::from_secs(1));
        let tracked = Plan::of(&slow, false, false, false);
        assert!(
            tracked.counts_closed() && tracked.tracks() && tracked.epochs(),
            "a time window: admissions tracked in the lane's slots, its cells epoch-tagged"
        );
        assert!(
            !Plan::of(&slow, false, true, true).counts_closed(),
            "a count window: every call under the lock"
        );
        assert!(Plan::of(&caps(false, false), false, false, false).counts_closed());
        let closed = closed(1);
        let lane = Lane::new(
            Plan::of(&caps(false, true), false, false, false),
            closed,
            None,
            None,
        );
        assert_eq!(lane.admit(|| 5), Entry::Locked { now: None });
    }
}
