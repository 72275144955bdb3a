//! [`Breaker::execute`]'s uncounted admission: a closed call on a fast lane counted with its
//! result, one compare-and-swap for a success (see the lane's `uncounted.rs`).

use crate::contain::{self, FirstPanic};
use crate::error::Error;
use crate::machine::{Ticket, Verdict};
use crate::observe::Observer;
use crate::policy::{Outcome, TripPolicy};

use super::permit::Grant;
use super::{Breaker, Permit};

/// A call admitted uncounted, while it runs: dropped (its call panicked), it counts the
/// request, then the failure a permit dropped while its thread panics reports.
struct Running<'a, P: TripPolicy, O: Observer> {
    breaker: &'a Breaker<P, O>,
    ticket: Ticket,
}

impl<P: TripPolicy, O: Observer> Drop for Running<'_, P, O> {
    fn drop(&mut self) {
        let panics = self.breaker.count_request(self.ticket);
        drop(Permit::new(self.breaker, Grant::new(self.ticket, 0)));
        contain::resume(panics);
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Makes `call`, admitted uncounted with `ticket`, and counts its request with its
    /// result.
    #[inline(always)]
    pub(super) fn run_uncounted<T, E, F>(&self, ticket: Ticket, call: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        let running = Running {
            breaker: self,
            ticket,
        };
        let result = call();
        std::mem::forget(running);
        match result {
            Ok(value) => {
                if !self.lane.succeed_uncounted(
                    ticket,
                    #[inline(always)]
                    || self.clock.now_infallible(),
                ) {
                    self.settle_uncounted(ticket, Outcome::Success);
                }
                Ok(value)
            }
            Err(err) => {
                self.settle_uncounted(ticket, Outcome::Failure);
                Err(Error::Inner(err))
            }
        }
    }

    /// Counts an uncounted admission's request, then reports `outcome` as a counted
    /// admission's; one panic of user code (the policy, an observer, the clock) continues
    /// once both are in, the first one caught.
    #[inline(never)]
    fn settle_uncounted(&self, ticket: Ticket, outcome: Outcome) {
        let mut panics = self.count_request(ticket);
        // A failure that cannot trip, on an uncontended lane (see `Lane::fail`); the rest
        // as `complete` takes it off its fast paths, keeping its panic with ours.
        let on_lane = outcome == Outcome::Failure
            && self.lane.fail(
                ticket,
                #[inline(always)]
                || self.clock.now_infallible(),
            );
        if !on_lane {
            self.complete_with(
                Grant::new(ticket, 0),
                Verdict::Reported(outcome),
                &mut panics,
            );
        }
        contain::resume(panics);
    }

    /// Counts an uncounted admission's request: on the lane if a cell is still open for its
    /// generation, else under the lock. A panic of the policy (asked for the lane's room
    /// when the lock publishes) is kept for the caller, to resume once the result is in.
    #[inline(never)]
    fn count_request(&self, ticket: Ticket) -> FirstPanic {
        let mut panics = FirstPanic::default();
        if !self.lane.count_request(ticket) {
            self.transact(None, &mut panics, |machine, _, _| {
                machine.count_request(ticket);
            });
        }
        panics
    }
}
