//! What a lock holder does to the lane: [`close`](Lane::close) it before a change, folding
//! what was counted, and [`publish`](Lane::publish) what callers may do after it.

use super::cell::{Cell, Pending};
use super::stripes::take;
use super::{Lane, COUNTING, LOCKED, MODE_SHIFT, OPEN, STEPPING};
use crate::generation::Generation;
use crate::machine::{Phase, Ticket};
use crate::nanos::Nanos;
use crate::sync::Ordering;

impl Lane {
    /// Closes the lane for a lock holder about to change the machine, handing it what was
    /// recorded lock-free. Call with the state lock held, and [`publish`](Lane::publish)
    /// before releasing it.
    ///
    /// (Inlined: its three counters come back in registers. Returned through memory, they
    /// were stored one word at a time and read back two at once, a store-forwarding stall
    /// that cost a locked operation about a quarter of its time.)
    #[inline(always)]
    pub(crate) fn close(&self) -> Pending {
        let mut pending = Pending::default();
        // Only lock holders write the mode word and open cells, and a locked lane was
        // published with every cell closed and empty: then there is nothing to swap (a cell
        // made since is made closed), and only the rejection counters may hold anything.
        let mode = self.word.load(Ordering::Relaxed) >> MODE_SHIFT;
        if mode != LOCKED && mode != STEPPING {
            self.word.store(STEPPING << MODE_SHIFT, Ordering::Release);
            let preset = self
                .throttle()
                .map_or(0, |t| t.preset.load(Ordering::Relaxed));
            // The base first: it holds what was counted before the stripes were opened (a
            // publish opens the base only while there are none), failures included.
            let room = u64::from(self.failure_room.load(Ordering::Relaxed));
            pending = Cell(self.base.swap(Cell::CLOSED.0, Ordering::AcqRel)).pending(preset, room);
            if let Some(stripes) = self.stripes.get() {
                for stripe in stripes.iter() {
                    let cell = Cell(stripe.cell.swap(Cell::CLOSED.0, Ordering::AcqRel));
                    pending.add(cell.pending(preset, 0));
                }
            }
        }
        // Rejection counters are not part of the cell protocol: a rejection counts whenever
        // it lands, before this swap (folded now) or after (folded by the next lock holder).
        if let Some(shedding) = self.throttle() {
            pending.throttled = shedding.throttled.swap(0, Ordering::AcqRel);
            if let Some(stripes) = self.stripes.get() {
                pending.throttled += stripes
                    .iter()
                    .map(|s| s.throttled.swap(0, Ordering::AcqRel))
                    .sum::<u64>();
            }
        }
        pending.rejected += take(&self.base_rejected);
        if let Some(stripes) = self.stripes.get() {
            pending.rejected += stripes.iter().map(|s| take(&s.rejected)).sum::<u64>();
        }
        pending
    }

    /// Publishes what callers may do without the lock in `phase`. Call with the state lock
    /// held, after [`close`](Lane::close) (or at construction): the cells are empty.
    pub(crate) fn publish(&self, phase: Phase) {
        let (preset, shed_from) = self.publish_throttle(phase);
        let (mode, cell) = self.opening(phase, shed_from);
        let cell = if cell.is_open() {
            cell.preset(preset)
        } else {
            cell
        };
        self.open_cells(phase, cell);
        self.word.store(mode << MODE_SHIFT, Ordering::Release);
    }

    /// The mode word and the cell `phase` publishes (its counters empty, before any preset
    /// or room for failures); `shed_from`: the counts a throttle with no room left sheds from.
    /// Stores what the open cells need read beside them (a window's end, a rolling key) first.
    #[inline]
    fn opening(&self, phase: Phase, shed_from: Option<(u64, u64)>) -> (u64, Cell) {
        match phase {
            // A lane that tracks its calls, while a fast success may trip the policy.
            Phase::Closed { locked: true, .. } => (LOCKED, Cell::CLOSED),
            Phase::Closed {
                generation,
                age,
                window_end,
                since,
                ..
            } if self.plan.counts_closed() && self.plan.epochs() => {
                self.open_epoch(Ticket::aged(generation, age), window_end, since)
            }
            Phase::Closed {
                generation,
                window_end,
                ..
            } if self.plan.counts_closed() => {
                // A policy that measures latency has windowed cells, windowless or not: an
                // admission then reads the clock, its start.
                let windowed =
                    window_end.is_some() || self.plan.needs_latency() || shed_from.is_some();
                if windowed {
                    // Without a window, an end no reading reaches but a clock that panicked
                    // (read as `Nanos::MAX`, which must take the lock).
                    let until = window_end.unwrap_or(Nanos::MAX - 1);
                    self.window_until.store(until, Ordering::Release);
                }
                (COUNTING, Cell::open(generation, windowed))
            }
            Phase::Open { until } => {
                self.open_until.store(until, Ordering::Release);
                (OPEN, Cell::CLOSED)
            }
            Phase::Closed { .. } | Phase::HalfOpen | Phase::Forced => (LOCKED, Cell::CLOSED),
        }
    }

    /// A lane whose cells carry an epoch (a rolling window's, or one that tracks its calls)
    /// opened for the key of `ticket` until `window_end`, admitting nothing read before
    /// `since`; locked where no key names it or the window has no end.
    #[inline]
    fn open_epoch(&self, ticket: Ticket, window_end: Option<Nanos>, since: Nanos) -> (u64, Cell) {
        match (self.extra.as_deref(), Self::key_of(ticket), window_end) {
            (Some(extra), Some(key), Some(until)) => {
                // A new epoch at every opening, so that a cell of one bucket is never
                // mistaken for the next one's (its counters may be back to zero).
                let epoch = extra.epoch.load(Ordering::Relaxed).wrapping_add(1);
                extra.epoch.store(epoch, Ordering::Relaxed);
                extra.key.store(key, Ordering::Release);
                self.window_until.store(until, Ordering::Release);
                if let Some(tracked) = &extra.tracked {
                    tracked.since.store(since, Ordering::Release);
                }
                (COUNTING, Cell::open(Generation::from_bits(epoch), true))
            }
            _ => (LOCKED, Cell::CLOSED),
        }
    }

    /// Stores `cell` in the cells callers count in: the base, with the room for failures
    /// `phase` leaves, until the stripes are made; then every stripe, with none.
    #[inline]
    fn open_cells(&self, phase: Phase, cell: Cell) {
        // Failures count on the base alone, in one order with its successes: once the stripes
        // are made, the base is left closed and every failure takes the lock.
        match self.stripes.get() {
            None => {
                let room = match phase {
                    Phase::Closed { failure_room, .. } if cell.is_open() => failure_room,
                    _ => 0,
                };
                // (A room past the counter's is the counter's: `Cell::failure_room`.)
                self.failure_room
                    .store(room.min(Cell::FAILURES) as u8, Ordering::Relaxed);
                let base = if cell.is_open() {
                    cell.failure_room(room)
                } else {
                    cell
                };
                self.base.store(base.0, Ordering::Release);
            }
            Some(stripes) => {
                self.failure_room.store(0, Ordering::Relaxed);
                let cell = if cell.is_open() {
                    cell.failure_room(0)
                } else {
                    cell
                };
                for stripe in stripes.iter() {
                    stripe.cell.store(cell.0, Ordering::Release);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lane::tests::{fast, never};
    use crate::lane::{Entry, Peek};

    fn stepping(lane: &Lane) -> bool {
        lane.word.load(Ordering::Acquire) >> MODE_SHIFT == STEPPING
    }

    #[test]
    fn a_closed_lane_is_stepping_until_its_next_publish() {
        let lane = fast(2);
        assert!(!stepping(&lane), "counting");
        lane.close();
        assert!(stepping(&lane), "a lock holder closed it");
        assert_eq!(lane.admit(never), Entry::Locked { now: None });
        assert_eq!(lane.peek_open(never), Peek::AskTheLock);
        lane.publish(Phase::HalfOpen);
        assert!(
            !stepping(&lane),
            "published locked: half-open waits for the machine"
        );
        lane.close();
        assert!(
            !stepping(&lane),
            "a locked lane has nothing a caller could wait for"
        );
        lane.publish(Phase::Open { until: 10 });
        lane.close();
        assert!(stepping(&lane), "an open lane closed for a step");
        assert_eq!(lane.peek_open(|| 5), Peek::AskTheLock);
    }
}
