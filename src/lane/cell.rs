//! [`Cell`], one atomic word of the lane's counters, and [`Pending`], what the cells counted.

use crate::counts::Tail;
use crate::generation::Generation;

/// A cell: `[tag: 32 bits][counters: 32 bits]`, its counters in one of two layouts.
///
/// - **Wide** (the top counter bit clear): `[0][successes: 15][requests: 16]`. Every cell but
///   an uncontended lane's base with room for failures.
/// - **Narrow** (set): `[1][tail is successes: 1][tail: 8][failures: 3][successes: 9]
///   [requests: 10]`: the base cell of an uncontended lane that counts failures too
///   ([`Lane::fail`](super::Lane::fail)). Its results stay in order: the *tail* is the run
///   of like results at the end (failures, or successes after the last failure), so that
///   folding the cell gives the consecutive runs that recording each result under the lock
///   would have. The tail is zero until the cell's first failure (then a run of successes
///   is all of them). The failure counter starts at `7 - room` (the room the machine left,
///   see [`Phase::Closed`](crate::machine::Phase::Closed)), so that a cell of another room
///   never compares equal.
///
/// A full counter sends the call to the lock, which empties the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cell(pub(super) u64);

impl Cell {
    pub(super) const REQUEST: u64 = 1;
    /// The request counter, full at this value (wide).
    pub(super) const COUNTER: u64 = 0xffff;
    pub(super) const SUCCESS: u64 = 1 << 16;
    /// The success counter, full at this value (wide).
    pub(super) const SUCCESSES: u64 = 0x7fff;
    pub(super) const NARROW: u64 = 1 << 31;
    pub(super) const NARROW_COUNTER: u64 = 0x3ff;
    pub(super) const NARROW_SUCCESS: u64 = 1 << 10;
    pub(super) const NARROW_SUCCESSES: u64 = 0x1ff;
    pub(super) const FAILURE_SHIFT: u32 = 19;
    pub(super) const FAILURE: u64 = 1 << Self::FAILURE_SHIFT;
    /// The failure counter, full at this value.
    pub(super) const FAILURES: u64 = 7;
    pub(super) const TAIL_SHIFT: u32 = 22;
    pub(super) const TAIL_ONE: u64 = 1 << Self::TAIL_SHIFT;
    pub(super) const TAIL_MAX: u64 = 0xff;
    /// Set: the tail is successes; clear: failures.
    pub(super) const TAIL_SUCCEEDS: u64 = 1 << 30;
    /// The tail and its kind: zero until the narrow cell's first failure.
    pub(super) const TAIL_BITS: u64 = (Self::TAIL_MAX << Self::TAIL_SHIFT) | Self::TAIL_SUCCEEDS;
    pub(super) const TAG_SHIFT: u32 = 32;
    pub(super) const OPEN: u64 = 1;
    pub(super) const WINDOWED: u64 = 2;
    pub(super) const GENERATION_SHIFT: u32 = 2;

    pub(super) const CLOSED: Cell = Cell(0);

    /// An open cell for `generation` (a rolling lane's epoch, masked to a generation's
    /// bits), windowed or not, with empty counters.
    #[inline]
    pub(super) fn open(generation: Generation, windowed: bool) -> Self {
        const _: () = assert!(Generation::BITS + Cell::GENERATION_SHIFT <= 32);
        let tag = (generation.get() << Self::GENERATION_SHIFT)
            | if windowed { Self::WINDOWED } else { 0 }
            | Self::OPEN;
        Cell(tag << Self::TAG_SHIFT)
    }

    /// This cell with its request counter started at `preset` (at most the counter's
    /// capacity): it then has room for that capacity less `preset` admissions.
    #[inline]
    pub(super) fn preset(self, preset: u64) -> Self {
        Cell(self.0 | preset.min(self.request_capacity()))
    }

    #[inline(always)]
    pub(super) fn tag(self) -> u64 {
        self.0 >> Self::TAG_SHIFT
    }

    #[inline(always)]
    pub(super) fn is_open(self) -> bool {
        self.tag() & Self::OPEN != 0
    }

    /// Open and not windowed: counts without a clock.
    #[inline(always)]
    pub(super) fn is_fast(self) -> bool {
        self.tag() & (Self::OPEN | Self::WINDOWED) == Self::OPEN
    }

    #[inline(always)]
    pub(super) fn is_windowed(self) -> bool {
        self.tag() & Self::WINDOWED != 0
    }

    #[inline(always)]
    pub(super) fn generation(self) -> Generation {
        Generation::from_bits(self.tag() >> Self::GENERATION_SHIFT)
    }

    /// Open in `generation` and not windowed.
    #[inline(always)]
    pub(super) fn is_fast_in(self, generation: Generation) -> bool {
        self.tag() == (generation.get() << Self::GENERATION_SHIFT) | Self::OPEN
    }

    #[inline(always)]
    pub(super) fn is_narrow(self) -> bool {
        self.0 & Self::NARROW != 0
    }

    #[inline(always)]
    pub(super) fn request_capacity(self) -> u64 {
        if self.is_narrow() {
            Self::NARROW_COUNTER
        } else {
            Self::COUNTER
        }
    }

    #[inline(always)]
    pub(super) fn has_request_room(self) -> bool {
        let capacity = self.request_capacity();
        self.0 & capacity < capacity
    }

    #[inline(always)]
    pub(super) fn successes(self) -> u64 {
        if self.is_narrow() {
            (self.0 >> 10) & Self::NARROW_SUCCESSES
        } else {
            (self.0 >> 16) & Self::SUCCESSES
        }
    }

    #[inline(always)]
    pub(super) fn tail(self) -> u64 {
        (self.0 >> Self::TAIL_SHIFT) & Self::TAIL_MAX
    }

    /// Room for a success: its counter, and (narrow) a tail of successes that is not full.
    #[inline(always)]
    pub(super) fn has_success_room(self) -> bool {
        if !self.is_narrow() {
            return (self.0 >> 16) & Self::SUCCESSES < Self::SUCCESSES;
        }
        self.successes() < Self::NARROW_SUCCESSES
            && (self.0 & Self::TAIL_SUCCEEDS == 0 || self.tail() < Self::TAIL_MAX)
    }

    /// Room for a failure: a narrow cell whose failure counter (started at `7 - room`) is
    /// not full.
    #[inline(always)]
    pub(super) fn has_failure_room(self) -> bool {
        self.is_narrow() && (self.0 >> Self::FAILURE_SHIFT) & Self::FAILURES < Self::FAILURES
    }

    #[inline(always)]
    pub(super) fn with_request(self) -> Self {
        Cell(self.0 + Self::REQUEST)
    }

    /// One more success (with room): in a narrow cell after a failure it also grows (or
    /// starts) the tail of successes.
    #[inline(always)]
    pub(super) fn with_success(self) -> Self {
        if !self.is_narrow() {
            return Cell(self.0 + Self::SUCCESS);
        }
        if self.0 & Self::TAIL_BITS == 0 {
            return Cell(self.0 + Self::NARROW_SUCCESS);
        }
        self.with_success_after_failures()
    }

    #[cold]
    fn with_success_after_failures(self) -> Self {
        let counted = self.0 + Self::NARROW_SUCCESS;
        if self.0 & Self::TAIL_SUCCEEDS != 0 {
            Cell(counted + Self::TAIL_ONE)
        } else {
            Cell((counted & !Self::TAIL_BITS) | Self::TAIL_SUCCEEDS | Self::TAIL_ONE)
        }
    }

    /// One more failure (a narrow cell, with room): grows the tail of failures, or starts
    /// one.
    #[inline(always)]
    pub(super) fn with_failure(self) -> Self {
        let counted = self.0 + Self::FAILURE;
        if self.0 & Self::TAIL_SUCCEEDS == 0 && self.tail() > 0 {
            Cell(counted + Self::TAIL_ONE)
        } else {
            Cell((counted & !Self::TAIL_BITS) | Self::TAIL_ONE)
        }
    }

    /// This empty open cell, narrow with room for `room` failures (its failure counter
    /// started at `7 - room`) if `room` is above zero; else as it is (wide).
    #[inline]
    pub(super) fn failure_room(self, room: u64) -> Self {
        if room == 0 {
            return self;
        }
        debug_assert!(
            self.0 as u32 == 0,
            "a throttle's preset leaves no room for failures"
        );
        let from = Self::FAILURES - room.min(Self::FAILURES);
        Cell(self.0 | Self::NARROW | (from << Self::FAILURE_SHIFT))
    }

    /// What an open cell counted, its request counter having started at `preset` and (a
    /// narrow one) its failure counter at `7 - failure_room`; nothing for a closed one.
    #[inline]
    pub(super) fn pending(self, preset: u64, failure_room: u64) -> Pending {
        if !self.is_open() {
            return Pending::default();
        }
        let requests = (self.0 & self.request_capacity()).saturating_sub(preset);
        if !self.is_narrow() {
            return Pending {
                requests,
                successes: self.successes(),
                ..Pending::default()
            };
        }
        let failures_from = Self::FAILURES - failure_room.min(Self::FAILURES);
        let tail = match (self.0 & Self::TAIL_SUCCEEDS != 0, self.tail()) {
            (_, 0) => Tail::None,
            (true, n) => Tail::Successes(n),
            (false, n) => Tail::Failures(n),
        };
        Pending {
            requests,
            successes: self.successes(),
            failures: ((self.0 >> Self::FAILURE_SHIFT) & Self::FAILURES)
                .saturating_sub(failures_from),
            tail,
            rejected: 0,
            throttled: 0,
        }
    }
}

/// Requests admitted, successes recorded and open-state rejections made on the lane since
/// the lock last emptied it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) requests: u64,
    pub(crate) successes: u64,
    /// Failures counted on the lane (the base cell's only: see [`Lane::fail`](super::Lane::fail)).
    pub(crate) failures: u64,
    /// The run of like results at the end of the lane's (the base cell's) results, once it
    /// counted a failure.
    pub(crate) tail: Tail,
    pub(crate) rejected: u64,
    /// Calls the lane's throttle turned away.
    pub(crate) throttled: u64,
}

impl Pending {
    /// Adds a stripe's counts. A stripe counts no failure, and is never open in the same
    /// period as a base that counted one (a publish opens the base only while there are no
    /// stripes), so the order of the two needs no merging.
    #[inline]
    pub(super) fn add(&mut self, other: Pending) {
        debug_assert!(other.failures == 0 && other.tail == Tail::None);
        debug_assert!(other.successes == 0 || self.tail == Tail::None);
        self.requests += other.requests;
        self.successes += other.successes;
        self.rejected += other.rejected;
        self.throttled += other.throttled;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lane::tests::{closed_with_room, failing, fast, never, t, unread};
    use crate::lane::{Entry, Lane};

    #[test]
    fn a_full_counter_sends_callers_to_the_lock() {
        let last = (1 << Generation::BITS) - 1;
        let lane = fast(last);
        // The success counter (32 767) fills first, then the request counter (65 535).
        for _ in 0..Cell::SUCCESSES {
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
            assert_eq!(lane.succeed(t(last), never), Ok(None));
        }
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert_eq!(lane.succeed(t(last), never), Err(None));
        for _ in Cell::SUCCESSES + 1..Cell::COUNTER {
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        }
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        let pending = lane.close();
        assert_eq!(
            (pending.requests, pending.successes),
            (Cell::COUNTER, Cell::SUCCESSES)
        );
    }

    #[test]
    fn a_narrow_cell_keeps_its_results_in_order() {
        let lane = failing(3);
        let results = |lane: &Lane, pattern: &str| {
            for c in pattern.chars() {
                assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
                let counted = if c == 'S' {
                    lane.succeed_fast(t(7), unread)
                } else {
                    lane.fail(t(7), unread)
                };
                assert!(counted, "{pattern}: {c} on the lane");
            }
        };
        results(&lane, "SSFSF");
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(lane.fail(t(7), unread), "the third failure: room for three");
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(!lane.fail(t(7), unread), "no room for a fourth");
        assert!(!lane.fail(t(6), unread), "another generation's failure");
        let pending = lane.close();
        assert_eq!(
            (
                pending.requests,
                pending.successes,
                pending.failures,
                pending.tail
            ),
            (7, 3, 3, Tail::Failures(2))
        );
        lane.publish(closed_with_room(2));
        results(&lane, "FSS");
        let pending = lane.close();
        assert_eq!((pending.failures, pending.tail), (1, Tail::Successes(2)));
        // No room: a wide cell, which takes no failure.
        lane.publish(closed_with_room(0));
        assert!(!lane.fail(t(7), unread));
        assert_eq!(lane.close().tail, Tail::None);
    }
}
