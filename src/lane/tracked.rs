//! A slow-call threshold's calls in flight on the lane: admitted into the in-flight slots,
//! and freed with a fast success (see [`InFlightSlots`]).

use super::cell::Cell;
use super::{Entry, Lane, MODE_SHIFT, OPEN};
use crate::in_flight_slots::{InFlightSlots, MAX_KEY};
use crate::machine::Ticket;
use crate::nanos::Nanos;
use crate::sync::{self, AtomicU64, Ordering};
use std::sync::Arc;

/// What a lane that tracks its calls in flight keeps (see [`InFlightSlots`]).
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) slots: Arc<InFlightSlots>,
    /// The slow-call threshold: a success slower than this goes to the lock.
    pub(super) threshold: Nanos,
    /// The machine's latest time at the opening, before which no call is admitted here (see
    /// [`Phase::Closed`](crate::machine::Phase::Closed)'s `since`). Written before the cells
    /// are opened.
    pub(super) since: AtomicU64,
}

impl Lane {
    /// An admission at `now` on a lane that tracks its calls in flight: a slot claimed first,
    /// then the cell's compare-and-swap, then the slot published with the call's key and
    /// start (or given back if the compare-and-swap failed), retrying under contention. The
    /// opening's window end (which the lock holder bounded by the first instant a call in
    /// flight may be overdue) and `since` are read after the cell: a compare-and-swap that
    /// succeeds proves both were its opening's (the cells carry an epoch).
    #[inline(never)]
    pub(super) fn admit_tracked(&self, tracked: &Tracked, now: Nanos) -> Entry {
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            if !c.is_open() {
                if self.word.load(Ordering::Acquire) >> MODE_SHIFT == OPEN {
                    let until = self.open_until.load(Ordering::Acquire);
                    return Entry::Open { until, now };
                }
                return Entry::Locked { now: Some(now) };
            }
            if !c.has_request_room()
                || now > self.window_until.load(Ordering::Acquire)
                || now < tracked.since.load(Ordering::Acquire)
            {
                return Entry::Locked { now: Some(now) };
            }
            let ticket = self.ticket_in(c);
            let Some(key) = Self::slot_key(ticket) else {
                return Entry::Locked { now: Some(now) };
            };
            // A thread's probe spreads the threads over the table (its top bits: its low
            // ones are poor).
            let hint = (sync::probe() >> 26) as usize;
            let Some(slot) = tracked.slots.claim(hint) else {
                return Entry::Locked { now: Some(now) };
            };
            match Self::try_count(cell, c, c.with_request()) {
                Ok(()) => {
                    tracked.slots.publish(slot, key, now);
                    return Entry::Admitted {
                        ticket: ticket.in_slot(slot),
                    };
                }
                Err(found) => {
                    tracked.slots.abandon(slot);
                    self.contended(base, c, found);
                }
            }
        }
    }

    /// The key a call's slot holds: its rolling key, while it fits a slot.
    #[inline(always)]
    fn slot_key(ticket: Ticket) -> Option<u64> {
        Self::key_of(ticket).filter(|&key| key <= MAX_KEY)
    }

    /// Records the success at `now` of a call this lane admitted in an in-flight slot
    /// (`ticket`, started at `started`) lock-free, if it was not slow, was not counted as
    /// slow while in flight, and its cell is open for it with room, the window not ended and
    /// `now` not older than the opening's `since`:
    /// the slot is marked completing, the cell counts the success, and the slot is freed
    /// (see [`InFlightSlots`]). `false` sends it to the lock, its slot still held.
    #[inline(never)]
    pub(crate) fn succeed_tracked(&self, ticket: Ticket, started: Nanos, now: Nanos) -> bool {
        let (Some(tracked), Some(slot), Some(key)) =
            (self.tracked(), ticket.slot(), Self::slot_key(ticket))
        else {
            return false;
        };
        if now.saturating_sub(started) > tracked.threshold {
            return false;
        }
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            // A reading older than the opening's `since` comes after a lock step that saw a
            // later time: under the lock it would be timed at that time (and may be slow).
            let counting = c.is_open()
                && c.has_success_room()
                && self.counts_for(c, ticket)
                && now <= self.window_until.load(Ordering::Acquire)
                && now >= tracked.since.load(Ordering::Acquire);
            if !counting || !tracked.slots.begin_success(slot, key) {
                return false;
            }
            match Self::try_count(cell, c, c.with_success()) {
                Ok(()) => {
                    tracked.slots.finish(slot);
                    return true;
                }
                Err(found) => {
                    tracked.slots.resume(slot, key);
                    self.contended(base, c, found);
                }
            }
        }
    }
}
