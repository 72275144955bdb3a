//! [`History`]: an observer that keeps the last state changes of the breakers it observes,
//! and [`Recorded`], one of them.

use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use super::{Observer, Transition};
use crate::counts::{Counts, Totals};
use crate::forced::Forced;
use crate::origin::Origin;
use crate::state::State;

/// Bytes of breaker name each slot holds before it first needs to grow: names up to this
/// long are recorded without allocating.
const NAME_CAPACITY: usize = 64;

/// The last state changes of the breakers it observes, in a ring of fixed size: the first
/// thing asked during an incident ("when did it open, on what counts, who forced it?").
///
/// Attach one `Arc<History>` to as many breakers as you like with
/// [`Builder::observer`](crate::Builder::observer) (or beside another observer, as a pair
/// `(history, other)`); read it at any time with [`recent`](History::recent). A dashboard
/// finds it through the breaker's observer ([`Observer::history`]).
///
/// - **Bounded.** It keeps the last `capacity` changes of all its breakers together; older
///   ones are overwritten. [`recorded`](History::recorded) says how many it was ever told.
/// - **No allocation after start.** Every slot is allocated by [`History::new`]; a change is
///   copied into its slot in place (a breaker name longer than 64 bytes grows its slot
///   once).
/// - **Cheap to read.** Deliveries and reads share one short lock: a delivery copies one
///   change in, a read copies the ring out (`capacity` entries) and lets go.
///
/// Each entry carries the breaker's name, `from`, `to`, the time on the breaker's clock
/// ([`at`](Recorded::at)) and on the wall ([`wall`](Recorded::wall)), who made the change
/// ([`Origin`]: the breaker's policy, a manual control, an adopted decision, a health
/// check), and the counts that caused it.
///
/// # Examples
///
/// ```
/// use lazybreaker::observe::{History, Origin};
/// use lazybreaker::{Breaker, State};
/// use std::sync::Arc;
///
/// let history = Arc::new(History::new(100));
/// let payments = Breaker::builder()
///     .name("payments")
///     .ready_to_trip(|c| c.consecutive_failures >= 2)
///     .observer(Arc::clone(&history))
///     .build();
/// let search = Breaker::builder().name("search").observer(Arc::clone(&history)).build();
///
/// for _ in 0..2 {
///     let _ = payments.execute(|| Err::<(), _>("down"));
/// }
/// search.force_open();
///
/// let recent = history.recent(); // oldest first
/// assert_eq!(recent.len(), 2);
/// let trip = &recent[0];
/// assert_eq!((trip.breaker.as_str(), trip.from, trip.to), ("payments", State::Closed, State::Open));
/// assert_eq!((trip.origin, trip.counts.consecutive_failures), (Origin::Breaker, 2));
/// assert_eq!((recent[1].breaker.as_str(), recent[1].origin), ("search", Origin::Manual));
/// ```
pub struct History {
    ring: Mutex<Ring>,
}

/// The slots, and where the next change goes.
struct Ring {
    slots: Vec<Recorded>,
    /// Changes ever recorded; the next one goes to slot `recorded % slots.len()`.
    recorded: u64,
}

/// One state change, as a [`History`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Recorded {
    /// Its place among everything the history was told: 0 for the first change, one more
    /// for each after it, across all its breakers.
    pub seq: u64,
    /// The breaker's name.
    pub breaker: String,
    /// The state before the change.
    pub from: State,
    /// The state after the change (the same as `from` for a manual control that changed
    /// only the forced mode, as a dashboard records it).
    pub to: State,
    /// When the change happened, on the breaker's clock.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize")
    )]
    pub at: Duration,
    /// When the history was told, on the wall clock (for people: the breaker's own clock may
    /// be a [`ManualClock`](crate::ManualClock) or start at the process's start).
    #[cfg_attr(feature = "serde", serde(serialize_with = "unix_millis"))]
    pub wall: SystemTime,
    /// Who made the change.
    pub origin: Origin,
    /// The counts of the generation the change ended: for a trip, the counts that tripped it.
    pub counts: Counts,
    /// The breaker's lifetime totals right after the change.
    pub totals: Totals,
    /// For a change to open: how long the open period lasts (see
    /// [`Transition::open_for`]).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::serde_duration::serialize_option")
    )]
    pub open_for: Option<Duration>,
    /// The manual override in force right after the change.
    pub forced: Option<Forced>,
    /// Whether the breaker was in dry run ([`Transition::dry_run`]).
    pub dry_run: bool,
}

/// The wall time as milliseconds since the Unix epoch (0 before it).
#[cfg(feature = "serde")]
fn unix_millis<S: serde::Serializer>(wall: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    let millis = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    serializer.serialize_u64(millis)
}

impl Recorded {
    /// An empty slot, with room for a name of `NAME_CAPACITY` bytes.
    fn slot() -> Self {
        Self {
            seq: 0,
            breaker: String::with_capacity(NAME_CAPACITY),
            from: State::Closed,
            to: State::Closed,
            at: Duration::ZERO,
            wall: SystemTime::UNIX_EPOCH,
            origin: Origin::Breaker,
            counts: Counts::default(),
            totals: Totals::default(),
            open_for: None,
            forced: None,
            dry_run: false,
        }
    }
}

impl History {
    /// A history that keeps the last `capacity` state changes (of all the breakers it
    /// observes together). Every slot is allocated here. A capacity of zero keeps nothing
    /// (but still counts what it was told).
    pub fn new(capacity: usize) -> Self {
        Self {
            ring: Mutex::new(Ring {
                slots: (0..capacity).map(|_| Recorded::slot()).collect(),
                recorded: 0,
            }),
        }
    }

    /// How many changes it keeps.
    pub fn capacity(&self) -> usize {
        self.ring.lock().slots.len()
    }

    /// How many changes it was ever told (kept or since overwritten).
    pub fn recorded(&self) -> u64 {
        self.ring.lock().recorded
    }

    /// The changes it keeps, oldest first: the last [`capacity`](History::capacity) of all
    /// its breakers, in the order it was told them.
    pub fn recent(&self) -> Vec<Recorded> {
        self.recent_matching(|_| true)
    }

    /// The changes it keeps of the breaker named `breaker`, oldest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::observe::History;
    /// use lazybreaker::{Breaker, State};
    /// use std::sync::Arc;
    ///
    /// let history = Arc::new(History::new(10));
    /// let a = Breaker::builder().name("a").observer(Arc::clone(&history)).build();
    /// let b = Breaker::builder().name("b").observer(Arc::clone(&history)).build();
    /// a.force_open();
    /// b.force_open();
    /// b.release();
    /// let of_b: Vec<State> = history.recent_for("b").iter().map(|r| r.to).collect();
    /// assert_eq!(of_b, [State::Open, State::Closed]);
    /// ```
    pub fn recent_for(&self, breaker: &str) -> Vec<Recorded> {
        self.recent_matching(|r| r.breaker == breaker)
    }

    /// The kept changes `keep` accepts, oldest first.
    fn recent_matching(&self, keep: impl Fn(&Recorded) -> bool) -> Vec<Recorded> {
        let ring = self.ring.lock();
        let len = ring.slots.len();
        if len == 0 {
            return Vec::new();
        }
        let kept = usize::try_from(ring.recorded).map_or(len, |n| n.min(len));
        let start = usize::try_from(ring.recorded % len as u64).unwrap_or(0);
        let (first, oldest) = if kept < len { (0, kept) } else { (start, len) };
        (0..oldest)
            .map(|i| &ring.slots[(first + i) % len])
            .filter(|r| keep(r))
            .cloned()
            .collect()
    }

    /// Records `transition` as told at `wall`, in place.
    fn record(&self, transition: &Transition<'_>, wall: SystemTime) {
        let mut ring = self.ring.lock();
        let len = ring.slots.len() as u64;
        let seq = ring.recorded;
        ring.recorded += 1;
        if len == 0 {
            return;
        }
        let index = usize::try_from(seq % len).unwrap_or(0);
        let slot = &mut ring.slots[index];
        slot.seq = seq;
        slot.breaker.clear();
        slot.breaker.push_str(transition.breaker);
        slot.from = transition.from;
        slot.to = transition.to;
        slot.at = transition.at;
        slot.wall = wall;
        slot.origin = transition.origin;
        slot.counts = transition.counts;
        slot.totals = transition.totals;
        slot.open_for = transition.open_for;
        slot.forced = transition.forced;
        slot.dry_run = transition.dry_run;
    }
}

impl Observer for History {
    fn on_transition(&self, transition: &Transition<'_>) {
        // The wall clock is read before the lock: the lock covers the copy only.
        self.record(transition, SystemTime::now());
    }

    fn history(&self) -> Option<&History> {
        Some(self)
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ring = self.ring.lock();
        f.debug_struct("History")
            .field("capacity", &ring.slots.len())
            .field("recorded", &ring.recorded)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(breaker: &str, to: State, secs: u64) -> Transition<'_> {
        Transition::new(breaker, State::Closed, to, Duration::from_secs(secs))
    }

    #[test]
    fn keeps_the_last_capacity_changes_oldest_first() {
        let history = History::new(3);
        for secs in 0..5 {
            history.on_transition(&change("a", State::Open, secs));
        }
        let at: Vec<u64> = history.recent().iter().map(|r| r.at.as_secs()).collect();
        assert_eq!(at, [2, 3, 4]);
        let seq: Vec<u64> = history.recent().iter().map(|r| r.seq).collect();
        assert_eq!(seq, [2, 3, 4]);
        assert_eq!((history.recorded(), history.capacity()), (5, 3));
    }

    #[test]
    fn before_the_ring_fills_only_what_was_told() {
        let history = History::new(4);
        assert!(history.recent().is_empty());
        history.on_transition(&change("a", State::Open, 1));
        history.on_transition(&change("b", State::HalfOpen, 2));
        let names: Vec<String> = history.recent().into_iter().map(|r| r.breaker).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(history.recent_for("b")[0].to, State::HalfOpen);
        assert!(history.recent_for("c").is_empty());
    }

    #[test]
    fn zero_capacity_keeps_nothing_but_counts() {
        let history = History::new(0);
        history.on_transition(&change("a", State::Open, 1));
        assert!(history.recent().is_empty());
        assert_eq!(history.recorded(), 1);
    }

    #[test]
    fn a_long_name_is_kept_whole_and_a_shorter_one_after_it_too() {
        let history = History::new(1);
        let long = "x".repeat(200);
        history.on_transition(&change(&long, State::Open, 1));
        assert_eq!(history.recent()[0].breaker, long);
        history.on_transition(&change("short", State::Open, 2));
        assert_eq!(history.recent()[0].breaker, "short");
    }

    #[test]
    fn the_fields_of_the_transition_are_kept() {
        let history = History::new(2);
        let t = change("a", State::Open, 7)
            .with_origin(Origin::HealthCheck)
            .with_counts(Counts::default().with_consecutive_failures(4))
            .with_open_for(Some(Duration::from_secs(30)))
            .with_forced(Some(Forced::Open));
        history.on_transition(&t);
        let r = &history.recent()[0];
        assert_eq!(
            (
                r.origin,
                r.counts.consecutive_failures,
                r.open_for,
                r.forced
            ),
            (
                Origin::HealthCheck,
                4,
                Some(Duration::from_secs(30)),
                Some(Forced::Open)
            )
        );
        assert!(r.wall > SystemTime::UNIX_EPOCH);
    }
}
