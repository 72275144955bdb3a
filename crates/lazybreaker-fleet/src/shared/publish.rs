//! The shared record as this process writes and follows it: a local decision published, a
//! shared one adopted or followed, a vanished record written again, a long open period cut.

use std::sync::atomic::Ordering;
use std::time::Duration;

use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::{FleetEvent, Observer, Origin};
use lazybreaker::policy::TripPolicy;
use lazybreaker::{Rejected, State};

use super::slots::Slots;
use super::{nanos, validated, Budget, SharedBreaker, View};
use crate::store::{Decision, FleetStore, SharedRecord, StoreError, Vote};

/// The local breaker as a publication sees it.
enum Local {
    /// Forced open or closed: an operator's override, which stays local.
    Forced,
    /// Following the fleet: the latest change was adopted.
    Followed,
    /// Open for this much longer.
    Open(Duration),
    /// Half-open: its open period is over and its probes decide.
    HalfOpen,
    Closed,
}

impl<S: FleetStore, P: TripPolicy, O: Observer> SharedBreaker<S, P, O> {
    /// The record is open for longer than the local breaker's longest open period, and the
    /// cut period this process followed is over: publishes the record half-open (its open
    /// period over) at the next generation, so that the fleet probes, as the local breaker
    /// does, instead of following the long period again.
    pub(super) async fn cut(&self, view: View, budget: &mut Budget) {
        if self.fleet.dry_run {
            return; // a shadow writes nothing
        }
        let Some(next) = self.next_generation(view, budget) else {
            return;
        };
        let now = self.now();
        let decision = Decision::Open(Duration::ZERO);
        let write = self
            .fleet
            .store
            .publish(self.name(), next, decision, Vote::NONE, now);
        let Some(record) = self.op(budget, validated(write)).await else {
            return;
        };
        if record.written {
            self.fleet.stats.published.fetch_add(1, Ordering::Relaxed);
            self.follow(record);
        } else if record.generation >= next {
            self.adopt(record);
        }
    }

    /// The generation after the view's, or `None` (degraded) if the view is at the last
    /// one a store can hold ([`SharedRecord::MAX_GENERATION`]).
    fn next_generation(&self, view: View, budget: &mut Budget) -> Option<u64> {
        let next = view
            .generation
            .checked_add(1)
            .filter(|next| *next <= SharedRecord::MAX_GENERATION);
        if next.is_none() {
            let error = StoreError::Invalid(format!(
                "generation {} is the last a store can hold",
                view.generation
            ));
            self.degrade(&error, budget);
        }
        next
    }

    /// Writes the record again, at the generation this process follows, from the local
    /// state: it vanished (the store restarted without persistence, or it expired).
    pub(super) async fn recreate(&self, view: View, budget: &mut Budget) {
        if self.fleet.dry_run {
            return; // a shadow writes nothing: the next enforcing member recreates it
        }
        let name = self.name();
        let decision = match self.fresh() {
            Local::Open(d) if !view.local_only => Decision::Open(d.min(self.fleet.max_open)),
            // Half-open (its probes decide) in an open fleet: open, with the period over.
            Local::HalfOpen if view.open => Decision::Open(Duration::ZERO),
            _ => Decision::Closed,
        };
        let now = self.now();
        let write = self
            .fleet
            .store
            .publish(name, view.generation, decision, Vote::NONE, now);
        let Some(record) = self.op(budget, validated(write)).await else {
            return;
        };
        if record.written {
            self.fleet.stats.recreated.fetch_add(1, Ordering::Relaxed);
            let event = FleetEvent::Recreated {
                breaker: name,
                generation: view.generation,
            };
            self.tell(&event, budget);
        }
        if record.generation > view.generation {
            self.adopt(record);
        }
    }

    /// Publishes the local decision that waits, at the next generation, or adopts the
    /// newer record found instead. `false` if the store could not take it (it waits again).
    pub(super) async fn publish_local(&self, budget: &mut Budget) -> bool {
        if self.fleet.dry_run {
            return true; // a shadow decides nothing for the fleet
        }
        let view = *self.fleet.view.lock();
        let name = self.name();
        let knobs = &self.fleet.knobs;
        let open_for = match self.local() {
            Local::Forced | Local::Followed => return true,
            // Open here while the fleet is open and its period not over: adopted already.
            Local::Open(_) if view.open && self.breaker.clock_nanos() < view.open_until => {
                return true;
            }
            Local::Open(d) => Some(d.min(self.fleet.max_open)),
            // Tripped here and half-open already, before the trip was published: the
            // fleet must still hear of it (its period over: the probes decide).
            Local::HalfOpen if !view.open && !view.local_only => Some(Duration::ZERO),
            Local::HalfOpen => return true,
            Local::Closed if !view.open || view.local_only => {
                // Nothing to tell the fleet: it was closed all along.
                self.fleet.view.lock().local_only = false;
                return true;
            }
            Local::Closed => None,
        };
        // A trip is a vote when the fleet needs a quorum (the script opens at once for 1).
        let (decision, vote) = match open_for {
            Some(d) => (
                Decision::Open(d),
                Vote::new(knobs.quorum, knobs.vote_window, &self.fleet.instance),
            ),
            None => (Decision::Closed, Vote::NONE),
        };
        let Some(next) = self.next_generation(view, budget) else {
            return false;
        };
        let now = self.now();
        let write = self.fleet.store.publish(name, next, decision, vote, now);
        let published = self.op(budget, validated(write)).await;
        let Some(record) = published else {
            return false;
        };
        if record.written {
            self.fleet.stats.published.fetch_add(1, Ordering::Relaxed);
            self.follow(record);
        } else if record.generation >= next {
            self.adopt(record); // the record had moved on: follow it instead
        } else {
            // A vote short of the quorum: open here only.
            self.fleet.view.lock().local_only = true;
        }
        true
    }

    /// The local breaker as a publication sees it: what the latest change delivered
    /// decided, as the link noted it (its open period mapped onto the clock now), and the
    /// override read fresh. A change not delivered yet raises the pending flag when it is,
    /// and is published then. The override cannot come from the link: forcing a breaker
    /// already in that state, or releasing a closed one, changes no state, and no
    /// transition tells of it.
    fn local(&self) -> Local {
        let noted = self.link.latest();
        if noted.forced.is_some() || self.breaker.forced().is_some() {
            return Local::Forced;
        }
        if noted.origin == Origin::Adopted {
            // The latest change is the fleet's own decision, made after the local one
            // that waits: that one is overtaken, and the breaker follows the fleet already.
            return Local::Followed;
        }
        match (noted.to, noted.open_for) {
            (State::HalfOpen, _) => Local::HalfOpen,
            (State::Closed, _) => Local::Closed,
            // Forced open, released since (the release is on its way to the link).
            (State::Open, None) => Local::Forced,
            (State::Open, Some(open_for)) => {
                let until = noted.at.saturating_add(open_for);
                match until.checked_sub(self.now()) {
                    Some(left) => Local::Open(left),
                    // Inclusive, as the breaker's open period: half-open strictly after.
                    None => Local::HalfOpen,
                }
            }
        }
    }

    /// The local breaker as it stands, read fresh (three reads): for writing a vanished
    /// record again, which no delivered change prompted (the link's latest change may be
    /// older than the state, when a delivery lags).
    fn fresh(&self) -> Local {
        if self.breaker.forced().is_some() {
            return Local::Forced;
        }
        match self.breaker.state() {
            State::HalfOpen => Local::HalfOpen,
            State::Closed => Local::Closed,
            State::Open => Local::Open(match self.breaker.peek_open() {
                Some(Rejected::Open { retry_after }) => retry_after,
                _ => Duration::ZERO,
            }),
        }
    }

    /// Adopts a record another process wrote.
    pub(super) fn adopt(&self, record: SharedRecord) {
        self.fleet.stats.adopted.fetch_add(1, Ordering::Relaxed);
        self.follow(record);
    }

    /// Makes the local breaker follow `record`, mapping its deadline (server time) onto the
    /// local clock: open for what is left of its open period as of when it was read.
    pub(super) fn follow(&self, record: SharedRecord) {
        let mut applied = {
            let mut view = self.fleet.view.lock();
            if record.generation < view.generation {
                return; // an older answer overtaken by a newer one
            }
            // Never longer than the local breaker's longest open period (which the breaker
            // holds to as well): a record opened for years by anyone is followed that long.
            if record.generation > view.generation {
                // Every lease of the old generation is gone with it.
                *self.fleet.slots.lock() = Slots::default();
            }
            let left = record.open_for().map_or(0, nanos);
            let max = nanos(self.fleet.max_open);
            *view = View {
                generation: record.generation,
                open: record.open_until_us.is_some(),
                open_until: self.breaker.clock_nanos().saturating_add(left.min(max)),
                local_only: false,
                capped: left > max,
            };
            *view
        };
        // The breaker is changed outside the view's lock (its observers run meanwhile). If
        // another call followed a newer record in between, its change may have come first:
        // then the newest view is applied again, so the breaker ends as the view says.
        for _ in 0..4 {
            self.apply(applied);
            let now = *self.fleet.view.lock();
            if now.generation == applied.generation {
                return;
            }
            applied = now;
        }
    }

    /// Makes the local breaker what `view` says the fleet is.
    fn apply(&self, view: View) {
        if !view.open {
            return self.breaker.adopt_closed();
        }
        let left = view.open_until.saturating_sub(self.breaker.clock_nanos());
        if left > 0 {
            self.breaker.adopt_open(Duration::from_nanos(left));
        } else if self.breaker.state() != State::HalfOpen {
            // The fleet is half-open: so is this breaker at its next call (a breaker already
            // half-open keeps its probes in flight).
            self.breaker.adopt_open(Duration::ZERO);
        }
    }
}
