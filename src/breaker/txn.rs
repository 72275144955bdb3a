//! The change transaction: the one way the machine changes.
//!
//! [`Breaker::transact`] takes the state lock, closes the lock-free lane (folding in what it
//! counted), runs one step of the machine, queues the state change it made for the
//! observers, republishes the lane from the machine's new phase, releases the lock, and
//! delivers queued changes. Reads ([`Breaker::read`]) close and republish the lane too: a
//! drain that left the cells open would visit them one at a time while calls keep counting,
//! and could take a success from a cell it reaches late without its admission, counted in
//! a cell it had passed (a permit reported on another thread, or a thread that moved stripe).

use crate::contain::FirstPanic;
use crate::lane::Lane;
use crate::machine::{Change, Machine};
use crate::nanos::{instant, Nanos};
use crate::observe::{Observer, ThrottleEvent, Transition};

use crate::policy::TripPolicy;
use crate::sync::MutexGuard;

use super::outbox::Outbox;
use super::Breaker;

/// Everything behind the state lock.
#[derive(Debug)]
pub(super) struct Inner<P> {
    pub(super) machine: Machine<P>,
    pub(super) outbox: Outbox,
}

/// Where a step puts the state changes it made: the outbox, if anything observes them.
/// Handed to the step rather than returned from it, so that the common step, which changes
/// nothing, never moves a change (a `Change` is about 180 bytes, and a returned one is
/// copied whether it is there or not).
pub(super) struct Changes<'a> {
    outbox: &'a mut Outbox,
    observes: bool,
}

impl Changes<'_> {
    /// Queues `change`, if there is one and anything observes it.
    #[inline(always)]
    pub(super) fn push(&mut self, change: Option<Change>) {
        if self.observes {
            if let Some(change) = change {
                self.outbox.push(change);
            }
        }
    }

    /// Queues `change`, if anything observes it.
    #[inline(always)]
    pub(super) fn put(&mut self, change: Change) {
        if self.observes {
            self.outbox.push(change);
        }
    }

    /// Queues each change, in order.
    pub(super) fn extend(&mut self, changes: impl IntoIterator<Item = Option<Change>>) {
        for change in changes {
            self.push(change);
        }
    }
}

/// The state lock, held by a thread that may change the machine, with the lane closed.
/// Dropping it publishes what the machine's phase allows without the lock, so the lane is
/// never left closed (not even if the step unwinds).
struct Txn<'a, P: TripPolicy> {
    inner: MutexGuard<'a, Inner<P>>,
    lane: &'a Lane,
    /// Whether the failure room is yet to be asked of the policy before publishing: a step
    /// asks it itself (so that a panic of it reaches the caller with the step's), a read
    /// never does (it spends what the lane used), an unwinding step leaves it to the drop.
    ask_room: bool,
}

impl<P: TripPolicy> Drop for Txn<'_, P> {
    fn drop(&mut self) {
        let machine = &mut self.inner.machine;
        if self.ask_room {
            // Only if the step unwound: its panic is on its way, and a panic here is kept
            // for the next step to resume.
            machine.update_lane_room();
        }
        self.lane.publish(machine.phase());
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Runs `op` on the machine at `now` (the latest time the machine saw, when `None`: the
    /// clock could not be read), queues the changes it made (in order), and delivers queued changes once
    /// the lock is released, unless another thread is delivering (which then delivers them
    /// next, in order). A panic of the policy or of an observer is kept in `panics`.
    pub(super) fn transact<R>(
        &self,
        now: Option<Nanos>,
        panics: &mut FirstPanic,
        op: impl FnOnce(&mut Machine<P>, Nanos, &mut Changes<'_>) -> R,
    ) -> R {
        let value = {
            let mut txn = Txn {
                inner: self.inner.lock(),
                lane: &self.lane,
                ask_room: true,
            };
            let pending = txn.lane.close();
            let inner = &mut *txn.inner;
            inner.machine.absorb(
                pending.requests,
                pending.successes,
                pending.failures,
                pending.tail,
            );
            inner.machine.absorb_rejections(pending.rejected);
            inner.machine.absorb_throttled(pending.throttled);
            let latest = inner.machine.latest();
            let now = now.map_or(latest, |now| now.max(latest));
            let mut changes = Changes {
                outbox: &mut inner.outbox,
                observes: self.observes,
            };
            let value = op(&mut inner.machine, now, &mut changes);
            inner.machine.update_lane_room();
            txn.ask_room = false;
            let inner = &mut *txn.inner;
            panics.merge(inner.machine.take_panic());
            let note = inner.machine.throttle_note();
            (value, inner.outbox.claim(), note)
        };
        let (value, deliver, note) = value;
        if deliver {
            self.deliver(panics);
        }
        if let Some((throttling, probability, throttled)) = note {
            let event = ThrottleEvent {
                breaker: self.name(),
                throttling,
                probability,
                throttled,
            };
            self.observers.throttle(&event, panics);
        }
        value
    }

    /// Delivers queued state changes one at a time, outside the lock, until none is left.
    /// Only the thread that claimed delivery runs this. An observer that panics does not stop
    /// the delivery of the changes after it: its panic is kept in `panics`.
    fn deliver(&self, panics: &mut FirstPanic) {
        loop {
            let Some(change) = self.inner.lock().outbox.next() else {
                return;
            };
            let transition = Transition {
                breaker: self.name(),
                from: change.from,
                to: change.to,
                at: instant(change.at),
                counts: change.counts,
                totals: change.totals,
                origin: change.origin,
                open_for: change.open_for.map(instant),
                forced: change.forced,
                dry_run: self.dry_run,
            };
            self.observers.deliver(&transition, panics);
        }
    }

    /// Runs `f` on the machine under the lock without touching the lane: for what the lane
    /// neither counts nor depends on (the forced mode, the open deadline, the state as it
    /// stands, a rejection counter, the policy).
    pub(super) fn locked<R>(&self, f: impl FnOnce(&mut Machine<P>) -> R) -> R {
        f(&mut self.inner.lock().machine)
    }

    /// Runs `f` on the machine under the lock, with the lane's counts folded in: a read of
    /// the machine (mutable only so that a policy hook can keep its panic), but the lane is
    /// closed while it runs (and republished unchanged), so that what it folds is a
    /// snapshot: a call that meets a closed cell waits for the lock.
    pub(super) fn read<R>(&self, f: impl FnOnce(&mut Machine<P>) -> R) -> R {
        let mut txn = Txn {
            inner: self.inner.lock(),
            lane: &self.lane,
            ask_room: false,
        };
        let pending = txn.lane.close();
        let machine = &mut txn.inner.machine;
        machine.spend_failure_room(pending.failures);
        machine.absorb(
            pending.requests,
            pending.successes,
            pending.failures,
            pending.tail,
        );
        machine.absorb_rejections(pending.rejected);
        machine.absorb_throttled(pending.throttled);
        f(machine)
    }
}
