//! The lane's stripes: one cache-padded cell and counters per core, made on the first
//! collision, and how a thread finds its own.

use super::cell::Cell;
use super::Lane;
use crate::sync::{self, AtomicU64, Ordering};

/// One cell and one rejection counter alone on their cache line (128 bytes: the line and
/// the one the hardware prefetches with it), so that threads counting in neighbouring
/// stripes never share one. The cell counts in the closed state, the counter in the open
/// state: a thread writes one line whatever the state.
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct Stripe {
    pub(super) cell: AtomicU64,
    pub(super) rejected: AtomicU64,
    /// A throttled lane's, while it sheds: the calls turned away on this stripe, and the
    /// draws made here (this stripe's own generator stream: no line shared for a draw).
    pub(super) throttled: AtomicU64,
    pub(super) draws: AtomicU64,
}

/// The most stripes a lane makes: 64 cache lines, 8 KiB.
const MAX_STRIPES: usize = 64;

/// A lane's stripes, closed: one per core the process may run on (a power of two, at most
/// [`MAX_STRIPES`]).
pub(super) fn make_stripes() -> Box<[Stripe]> {
    let n = sync::parallelism()
        .next_power_of_two()
        .clamp(2, MAX_STRIPES);
    (0..n)
        .map(|_| Stripe {
            cell: AtomicU64::new(Cell::CLOSED.0),
            rejected: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            draws: AtomicU64::new(0),
        })
        .collect()
}

/// Empties a rejection counter, writing it only if it holds something (a lock holder's
/// swap of a counter a rejection just wrote would take its line for nothing).
#[inline]
pub(super) fn take(counter: &AtomicU64) -> u64 {
    if counter.load(Ordering::Relaxed) == 0 {
        0
    } else {
        counter.swap(0, Ordering::Relaxed)
    }
}

impl Lane {
    /// The cell this thread counts in, and whether it is the base.
    #[inline(always)]
    pub(super) fn cell(&self) -> (&AtomicU64, bool) {
        match self.stripes.get() {
            Some(stripes) => (&Self::stripe(stripes).cell, false),
            None => (&self.base, true),
        }
    }

    /// This thread's stripe.
    #[inline(always)]
    pub(super) fn stripe(stripes: &[Stripe]) -> &Stripe {
        &stripes[Self::stripe_index(stripes)]
    }

    /// The index of this thread's stripe.
    #[inline(always)]
    pub(super) fn stripe_index(stripes: &[Stripe]) -> usize {
        // `stripes.len()` is a power of two, 2 to 64: the probe's top bits pick one (its
        // low bits are poor: every probe is odd).
        (sync::probe() >> (u32::BITS - stripes.len().trailing_zeros())) as usize
    }

    /// Counts an open-state rejection made lock-free, in this thread's rejection counter: a
    /// compare-and-swap, so that two threads colliding on the base make the stripes (as
    /// they do counting in the closed state) rather than share a counter. The counters are
    /// folded into the totals by the next lock holder, like the cells.
    #[inline]
    pub(crate) fn count_rejection(&self) {
        let (counter, base) = match self.stripes.get() {
            Some(stripes) => (&Self::stripe(stripes).rejected, false),
            None => (&self.base_rejected, true),
        };
        let n = counter.load(Ordering::Relaxed);
        if let Err(found) = counter.compare_exchange(n, n + 1, Ordering::Relaxed, Ordering::Relaxed)
        {
            self.count_rejection_contended(counter, base, n, found);
        }
    }

    /// The counter held `found`, not `expected`: count this rejection anyway, and if another
    /// thread counted in between (the counter went up, not down to a lock holder's drain),
    /// make the stripes (it was the base) or move to another stripe.
    #[cold]
    #[inline(never)]
    fn count_rejection_contended(
        &self,
        counter: &AtomicU64,
        base: bool,
        expected: u64,
        found: u64,
    ) {
        counter.fetch_add(1, Ordering::Relaxed);
        if found < expected {
            return; // drained by a lock holder: no collision
        }
        if base {
            self.stripes.force(make_stripes);
        } else {
            sync::rehash();
        }
    }

    /// A compare-and-swap on this thread's cell, which held `expected`, found `found`: if
    /// another counting thread's count got in first, make the stripes (the cell was the base)
    /// or move this thread to another stripe. A lock holder's close and reopening is no
    /// collision, and makes nothing: the tag changed, or the layout or room did (a reopened
    /// cell may compare higher: narrow, or with less room for failures), or a counter went
    /// down (emptied).
    #[cold]
    pub(super) fn contended(&self, base: bool, expected: Cell, found: Cell) {
        let requests = |c: Cell| c.0 & c.request_capacity();
        let failures = |c: Cell| c.0 & (Cell::FAILURES << Cell::FAILURE_SHIFT);
        // A result counted here always leaves a tail (once there is one); a reopened cell has
        // none.
        let untailed = found.0 & Cell::TAIL_BITS == 0;
        let other_room = failures(found) < failures(expected)
            || (untailed && failures(found) != failures(expected))
            || (untailed && expected.0 & Cell::TAIL_BITS != 0);
        let reopened = found.tag() != expected.tag()
            || found.is_narrow() != expected.is_narrow()
            || requests(found) < requests(expected)
            || found.successes() < expected.successes()
            || (found.is_narrow() && other_room);
        if reopened {
            return;
        }
        if base {
            self.stripes.force(make_stripes);
        } else {
            sync::rehash();
        }
    }

    /// Makes the stripes now (closed), as a collision would: for loom models that start
    /// striped.
    #[cfg(loom)]
    pub(crate) fn make_stripes(&self) {
        self.stripes.force(make_stripes);
    }

    /// The bytes this lane's stripes take (zero until contention made them).
    #[cfg(test)]
    pub(super) fn stripe_bytes(&self) -> usize {
        self.stripes
            .get()
            .map_or(0, |s| s.len() * std::mem::size_of::<Stripe>())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lane::cell::Pending;
    use crate::lane::tests::{
        admitted, closed, closed_with_room, counting, failing, fast, never, t, unread,
    };
    use crate::lane::Entry;
    use crate::machine::Phase;

    /// A caller's compare-and-swap that fails only because a lock holder (a read) closed
    /// the cell and reopened it narrow, or with another room, is no collision.
    #[test]
    fn a_reopening_with_another_room_is_no_collision() {
        for (from, to) in [(0, 3), (3, 1), (1, 3)] {
            let lane = failing(from);
            assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
            let c = Cell(lane.base.load(Ordering::Acquire));
            lane.close();
            lane.publish(closed_with_room(to));
            let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
            lane.contended(true, c, found);
            assert_eq!(lane.stripe_bytes(), 0, "room {from} then {to}");
        }
        // A cell that counted a failure of an earlier period's admission, reopened with the
        // room it had less that failure: the same failure counter, but no tail.
        let lane = failing(2);
        assert!(lane.fail(t(7), unread));
        let c = Cell(lane.base.load(Ordering::Acquire));
        lane.close();
        lane.publish(closed_with_room(1));
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert_eq!(lane.stripe_bytes(), 0, "a tail gone is a reopening");
        // Another thread's failure in between is one.
        let lane = failing(3);
        let c = Cell(lane.base.load(Ordering::Acquire));
        assert!(lane.fail(t(7), unread));
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert_ne!(lane.stripe_bytes(), 0, "a failure counted in between");
    }

    #[test]
    fn once_striped_every_failure_takes_the_lock() {
        let lane = failing(7);
        lane.stripes.force(make_stripes);
        lane.close();
        lane.publish(closed_with_room(7));
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert!(
            !lane.fail(t(7), unread),
            "striped: the lock keeps the order"
        );
        assert!(
            lane.succeed_fast(t(7), unread),
            "successes still count here"
        );
        assert_eq!(
            Cell(lane.base.load(Ordering::Acquire)),
            Cell::CLOSED,
            "the base stays closed once the stripes are opened"
        );
    }

    #[test]
    fn a_collision_on_the_base_makes_closed_stripes_that_the_next_publish_opens() {
        let lane = fast(4);
        assert!(matches!(lane.admit(never), Entry::Admitted { .. }));
        assert_eq!(lane.stripe_bytes(), 0, "uncontended: no stripes");
        // Another thread's count lands between this thread's load and its CAS.
        let c = Cell(lane.base.load(Ordering::Acquire));
        lane.base.fetch_add(Cell::REQUEST, Ordering::AcqRel);
        let found = Lane::try_count(&lane.base, c, c.with_request()).unwrap_err();
        lane.contended(true, c, found);
        assert!(lane.stripe_bytes() >= 2 * 128);
        assert_eq!(lane.stripe_bytes() % 128, 0);
        // The new stripes are closed: the lock is taken until it republishes.
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        assert_eq!(
            lane.close(),
            Pending {
                requests: 2,
                successes: 0,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            },
            "the base's counts are folded in"
        );
        lane.publish(closed(5));
        assert_eq!(lane.admit(never), admitted(5));
        assert!(lane.succeed_fast(t(5), unread));
        assert!(
            !lane.succeed_fast(t(4), unread),
            "an old generation's success takes the lock"
        );
        assert_eq!(
            lane.close(),
            Pending {
                requests: 1,
                successes: 1,
                rejected: 0,
                throttled: 0,
                ..Pending::default()
            }
        );
    }

    #[test]
    fn open_rejections_are_counted_and_folded_by_the_next_close() {
        let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
        for _ in 0..5 {
            lane.count_rejection();
        }
        assert_eq!(lane.close().rejected, 5);
        assert_eq!(lane.close().rejected, 0, "folded once");
        lane.publish(Phase::Open { until: 42 });
        lane.stripes.force(make_stripes);
        lane.count_rejection();
        lane.count_rejection();
        assert_eq!(lane.close().rejected, 2, "striped counters are folded too");
    }
}
