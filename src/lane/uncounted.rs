//! Uncounted admissions: [`Breaker::execute`](crate::Breaker::execute)'s one atomic step.
//!
//! A closed breaker's call made through `execute` on a lane that allows it (no throttle, no
//! latency, a policy that reads no requests) is admitted by a *load* of its cell (and, in a
//! window, one clock reading against the window's end, or its bucket's) without counting
//! anything: it holds the cell's generation (a rolling lane: the key, generation and
//! age) as its ticket. When it
//! succeeds, its request and its success are counted together, in one compare-and-swap on
//! the cell it then finds, if that cell is still open for the same generation (and, in a
//! window, the success is within it: see [`Lane::succeed_uncounted`]). Any other end (a
//! failure, a panic, a cell closed or full, another generation) first counts the request
//! ([`Lane::count_request`], or the machine under the lock if the lane cannot), then
//! reports the result as an admission counted at its start would have.
//!
//! Why it stays exact: the request and the result land together in one place of the
//! cell's order (see the module docs: every lock-free operation has one), where they both
//! would have been had the call been admitted an instant before it returned; the
//! generation check keeps a call admitted in an earlier generation out of a later one, as
//! a counted admission's ticket does (a request whose generation is gone is counted in the
//! totals alone, as a stale result's request is). What differs is only what a reading
//! taken while the call runs shows: its request is not counted yet. So the plan allows
//! this only for a policy whose decisions never read
//! [`Counts::requests`](crate::Counts::requests)
//! ([`Capabilities::reads_requests`](crate::policy::Capabilities::reads_requests)), and the
//! two-step API, whose permits may be held as long as the caller likes, never uses it.
//!
//! A windowed admission reads the window's end (and a rolling lane's key) after loading the
//! cell, then loads the cell again: the same open tag proves what it read was that
//! generation's (or epoch's: a lock holder closes the cells before it stores another end
//! or key), as a counted admission's compare-and-swap does.

use crate::machine::Ticket;
use crate::nanos::Nanos;
use crate::sync::Ordering;

use super::cell::Cell;
use super::Lane;

impl Lane {
    /// Admits a call without counting it, if the lane allows that ([`Plan`](super::Plan)'s
    /// `defers`) and this thread's cell is open (windowed: and `clock`, read then, once, is
    /// within the window): its ticket, whose request is to be counted with its result.
    /// `None`: admit it as any other call.
    #[inline(always)]
    pub(crate) fn admit_uncounted(&self, clock: impl FnOnce() -> Nanos) -> Option<Ticket> {
        if !self.plan.defers() {
            return None;
        }
        let (cell, _) = self.cell();
        let c = Cell(cell.load(Ordering::Acquire));
        if c.is_fast() {
            return Some(Ticket::unaged(c.generation()));
        }
        if c.is_windowed() && clock() <= self.window_until.load(Ordering::Acquire) {
            let ticket = self.ticket_in(c);
            let again = Cell(cell.load(Ordering::Acquire));
            if again.tag() == c.tag() {
                return Some(ticket);
            }
        }
        None
    }

    /// Counts an uncounted admission's request and its success in one compare-and-swap, if
    /// this thread's cell is still open for `ticket` with room for both and,
    /// windowed, the success is within the window (`clock`, read then, once; `None`: it
    /// cannot be read here; not read at all where successes are judged at the latest time
    /// the breaker saw); retries under contention. `false`: count the request first
    /// ([`count_request`](Lane::count_request), or the lock), then the success as any.
    #[inline(always)]
    pub(crate) fn succeed_uncounted(
        &self,
        ticket: Ticket,
        clock: impl FnOnce() -> Option<Nanos>,
    ) -> bool {
        let (cell, base) = self.cell();
        let c = Cell(cell.load(Ordering::Acquire));
        if !self.open_for(c, ticket) || !c.has_request_room() || !c.has_success_room() {
            return false;
        }
        let within = !c.is_windowed()
            || self.plan.latest_successes()
            || clock().is_some_and(|now| now <= self.window_until.load(Ordering::Acquire));
        if !within {
            return false;
        }
        match Self::try_count(cell, c, c.with_request().with_success()) {
            Ok(()) => true,
            Err(found) => {
                self.contended(base, c, found);
                // Within the window already, if windowed: the end is a generation's.
                self.count_uncounted(ticket, true)
            }
        }
    }

    /// Counts an uncounted admission's request lock-free, if a cell is still open for
    /// `ticket` with room, retrying under contention: its result is then
    /// reported as a counted admission's. No clock: the request was admitted within its
    /// generation's window. `false`: the lock counts it (see
    /// [`Machine::count_request`](crate::machine::Machine::count_request)).
    #[inline(never)]
    pub(crate) fn count_request(&self, ticket: Ticket) -> bool {
        self.count_uncounted(ticket, false)
    }

    /// Whether cell `c`, just loaded, is open and counts for `ticket` (its generation, or
    /// in a rolling lane its key: see [`counts_for`](Lane::counts_for)).
    #[inline(always)]
    fn open_for(&self, c: Cell, ticket: Ticket) -> bool {
        c.is_open() && self.counts_for(c, ticket)
    }

    /// Counts the request of an uncounted admission for `ticket`, and its success if
    /// `success`, in one compare-and-swap, retrying under contention.
    #[inline(never)]
    fn count_uncounted(&self, ticket: Ticket, success: bool) -> bool {
        loop {
            let (cell, base) = self.cell();
            let c = Cell(cell.load(Ordering::Acquire));
            if !self.open_for(c, ticket)
                || !c.has_request_room()
                || (success && !c.has_success_room())
            {
                return false;
            }
            let counted = c.with_request();
            let counted = if success {
                counted.with_success()
            } else {
                counted
            };
            match Self::try_count(cell, c, counted) {
                Ok(()) => return true,
                Err(found) => self.contended(base, c, found),
            }
        }
    }
}
