//! [`History`]: an observer that keeps the last state changes of the breakers it observes,
//! and [`Recorded`], one of them. Its JSON writes each duration as `docs/integrations.md`,
//! "Durations in JSON", says.

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
/// - **Failed checks folded.** A failed health check keeps its breaker open for another
///   period (a transition from `Open` to `Open`, [`Origin::HealthCheck`]); a breaker's
///   failed checks in a row are kept as one entry, the latest, that says how many
///   ([`times`](Recorded::times)) and since when ([`since`](Recorded::since)). So an outage
///   of many checks takes one place, and the trip that began it, with its counts, stays.
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
    /// Changes ever told (folded ones included).
    recorded: u64,
    /// Entries ever written; the next one goes to slot `written % slots.len()`.
    written: u64,
}

impl Ring {
    /// How many slots hold an entry, and the physical slot of the oldest.
    fn kept(&self) -> (usize, usize) {
        let len = self.slots.len();
        if len == 0 {
            return (0, 0);
        }
        let kept = usize::try_from(self.written).map_or(len, |n| n.min(len));
        let start = usize::try_from(self.written % len as u64).unwrap_or(0);
        (kept, if kept < len { 0 } else { start })
    }

    /// The physical slot of the entry `i`-th from the oldest.
    fn slot_of(&self, i: usize) -> usize {
        let (_, oldest) = self.kept();
        (oldest + i) % self.slots.len()
    }

    /// The latest entry of `breaker` (from the oldest), if any is kept.
    fn latest_of(&self, breaker: &str) -> Option<usize> {
        let (kept, _) = self.kept();
        (0..kept)
            .rev()
            .find(|&i| self.slots[self.slot_of(i)].breaker == breaker)
    }

    /// Moves the entry `i`-th from the oldest to the newest place, the later ones one place
    /// back: by swaps, without allocating.
    fn move_to_newest(&mut self, i: usize) {
        let (kept, _) = self.kept();
        for j in i..kept.saturating_sub(1) {
            let (a, b) = (self.slot_of(j), self.slot_of(j + 1));
            self.slots.swap(a, b);
        }
    }
}

/// One state change, as a [`History`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// When the change happened, on the breaker's clock. Serialized as `at` (exact) and
    /// `at_ms` (whole milliseconds, to the nearest).
    pub at: Duration,
    /// When the history was told, on the wall clock (for people: the breaker's own clock may
    /// be a [`ManualClock`](crate::ManualClock) or start at the process's start).
    pub wall: SystemTime,
    /// Who made the change.
    pub origin: Origin,
    /// The counts of the generation the change ended: for a trip, the counts that tripped it.
    pub counts: Counts,
    /// The breaker's lifetime totals right after the change.
    pub totals: Totals,
    /// For a change to open: how long the open period lasts (see
    /// [`Transition::open_for`]). Serialized as `open_for` (exact) and `open_for_ms` (whole
    /// milliseconds, to the nearest).
    pub open_for: Option<Duration>,
    /// The manual override in force right after the change.
    pub forced: Option<Forced>,
    /// Whether the breaker was in dry run ([`Transition::dry_run`]).
    pub dry_run: bool,
    /// How many times in a row it happened: 1, but for a breaker's failed health checks in a
    /// row (open to open, [`Origin::HealthCheck`]), which are kept as one entry with the
    /// latest's fields.
    pub times: u64,
    /// For `times` above 1: when the first of them happened, on the breaker's clock (the
    /// breaker was open from there to [`at`](Recorded::at), but for its checks); else `at`.
    /// Serialized as `first_at` (exact) and `first_at_ms` (whole milliseconds, to the
    /// nearest).
    pub first_at: Duration,
    /// For `times` above 1: when the first of them was told, on the wall clock; else `wall`.
    pub since: SystemTime,
}

impl Recorded {
    /// Whether it is a failed health check: the open period re-armed, no state change.
    pub fn is_failed_check(&self) -> bool {
        self.from == State::Open && self.to == State::Open && self.origin == Origin::HealthCheck
    }
}

/// A recorded change's fields in their order, each duration `x` on the breaker's clock as
/// `x` (exact) and `x_ms` (whole milliseconds, to the nearest), the wall times as
/// milliseconds since the Unix epoch (0 before it).
#[cfg(feature = "serde")]
impl serde::Serialize for Recorded {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use crate::human::span_ms;
        use crate::serde_duration::fields_ms;
        use serde::ser::SerializeStruct;

        let unix_millis = |wall: SystemTime| {
            wall.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        };
        let mut s = serializer.serialize_struct("Recorded", 18)?;
        s.serialize_field("seq", &self.seq)?;
        s.serialize_field("breaker", &self.breaker)?;
        s.serialize_field("from", &self.from)?;
        s.serialize_field("to", &self.to)?;
        fields_ms(&mut s, ("at", "at_ms"), Some(self.at), span_ms)?;
        s.serialize_field("wall", &unix_millis(self.wall))?;
        s.serialize_field("origin", &self.origin)?;
        s.serialize_field("counts", &self.counts)?;
        s.serialize_field("totals", &self.totals)?;
        fields_ms(&mut s, ("open_for", "open_for_ms"), self.open_for, span_ms)?;
        s.serialize_field("forced", &self.forced)?;
        s.serialize_field("dry_run", &self.dry_run)?;
        s.serialize_field("times", &self.times)?;
        fields_ms(
            &mut s,
            ("first_at", "first_at_ms"),
            Some(self.first_at),
            span_ms,
        )?;
        s.serialize_field("since", &unix_millis(self.since))?;
        s.end()
    }
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
            times: 1,
            first_at: Duration::ZERO,
            since: SystemTime::UNIX_EPOCH,
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
                written: 0,
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
        if ring.slots.is_empty() {
            return Vec::new();
        }
        let (kept, _) = ring.kept();
        (0..kept)
            .map(|i| &ring.slots[ring.slot_of(i)])
            .filter(|r| keep(r))
            .cloned()
            .collect()
    }

    /// Records `transition` as told at `wall`, in place: a failed health check whose
    /// breaker's latest entry is one too is folded into it, which moves to the newest place.
    fn record(&self, transition: &Transition<'_>, wall: SystemTime) {
        let mut ring = self.ring.lock();
        let len = ring.slots.len() as u64;
        let seq = ring.recorded;
        ring.recorded += 1;
        if len == 0 {
            return;
        }
        let failed_check = transition.from == State::Open
            && transition.to == State::Open
            && transition.origin == Origin::HealthCheck;
        let run = failed_check
            .then(|| ring.latest_of(transition.breaker))
            .flatten()
            .filter(|&i| ring.slots[ring.slot_of(i)].is_failed_check());
        let index = match run {
            Some(i) => {
                ring.move_to_newest(i);
                let (kept, _) = ring.kept();
                let index = ring.slot_of(kept - 1);
                ring.slots[index].times += 1;
                index
            }
            None => {
                let index = usize::try_from(ring.written % len).unwrap_or(0);
                ring.written += 1;
                let slot = &mut ring.slots[index];
                slot.times = 1;
                slot.first_at = transition.at;
                slot.since = wall;
                index
            }
        };
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
            .field("kept", &ring.kept().0)
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

    fn failed_check(breaker: &str, secs: u64) -> Transition<'_> {
        Transition::new(breaker, State::Open, State::Open, Duration::from_secs(secs))
            .with_origin(Origin::HealthCheck)
            .with_open_for(Some(Duration::from_secs(30)))
    }

    /// A breaker's failed checks in a row take one place, the latest, with how many and
    /// since when; the trip before them stays, even in a small ring, and other breakers'
    /// changes in between do not break the run.
    #[test]
    fn failed_checks_in_a_row_are_folded_and_the_trip_stays() {
        let history = History::new(3);
        history.on_transition(&change("a", State::Open, 10));
        history.on_transition(&failed_check("a", 40));
        history.on_transition(&change("b", State::Open, 41));
        for secs in [70, 100, 130] {
            history.on_transition(&failed_check("a", secs));
        }
        let recent = history.recent();
        let seen: Vec<(&str, State, State, u64)> = recent
            .iter()
            .map(|r| (r.breaker.as_str(), r.from, r.to, r.at.as_secs()))
            .collect();
        assert_eq!(
            seen,
            [
                ("a", State::Closed, State::Open, 10),
                ("b", State::Closed, State::Open, 41),
                ("a", State::Open, State::Open, 130),
            ],
            "the trip kept, the checks folded into the newest place"
        );
        let checks = &recent[2];
        assert!(checks.is_failed_check());
        assert_eq!(
            (checks.times, checks.first_at),
            (4, Duration::from_secs(40))
        );
        assert!(checks.since <= checks.wall);
        assert_eq!(checks.seq, 5, "the latest one told");
        assert_eq!(history.recorded(), 6, "every change told is counted");
        let seq: Vec<u64> = recent.iter().map(|r| r.seq).collect();
        assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
    }

    #[test]
    fn a_failed_check_after_another_change_of_its_breaker_starts_a_new_entry() {
        let history = History::new(8);
        history.on_transition(&failed_check("a", 1));
        history.on_transition(&change("a", State::Open, 2).with_origin(Origin::Manual));
        history.on_transition(&failed_check("a", 3));
        let times: Vec<u64> = history.recent().iter().map(|r| r.times).collect();
        assert_eq!(times, [1, 1, 1]);
        assert_eq!(
            format!("{history:?}"),
            "History { capacity: 8, recorded: 3, kept: 3 }"
        );
        assert_eq!(
            format!("{:?}", History::new(0)),
            "History { capacity: 0, recorded: 0, kept: 0 }"
        );
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
