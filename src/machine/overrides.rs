//! Overrides of the machine's own decisions: manual control ([`Machine::force`],
//! [`Machine::release`], [`Machine::trip_for`]) and decisions made elsewhere and adopted
//! ([`Machine::adopt_open`], [`Machine::adopt_closed`]).

use std::time::Duration;

use crate::forced::Forced;
use crate::nanos::{saturating_nanos, Nanos};
use crate::origin::Origin;
use crate::policy::TripPolicy;
use crate::state::State;

use super::{Change, Machine, Ticket, Verdict};
use crate::outcome::Outcome;

impl<P: TripPolicy> Machine<P> {
    /// Forces the machine open or closed until [`release`](Machine::release): a change to
    /// `Open` (never to expire) or to `Closed` (a new generation) unless it is in that state
    /// already. Time-based changes due are not evaluated first: the override acts on the
    /// state as it stands.
    pub(crate) fn force(&mut self, forced: Forced, now: Nanos) -> Option<Change> {
        self.latest = self.latest.max(now);
        self.forced = Some(forced);
        // An override ends a health check under way: its verdict, when it comes, is stale.
        self.end_lease();
        match (forced, self.state) {
            (Forced::Open, State::Open) => {
                self.expiry = Nanos::MAX;
                None
            }
            (Forced::Open, _) => {
                Some(self.enter(State::Open, now, Some(Nanos::MAX), Origin::Manual))
            }
            (Forced::Closed, State::Closed) => None,
            (Forced::Closed, _) => Some(self.enter(State::Closed, now, None, Origin::Manual)),
        }
    }

    /// Ends any override and closes the machine in a new generation, whatever its state: a
    /// change unless it was closed already.
    pub(crate) fn release(&mut self, now: Nanos) -> Option<Change> {
        self.latest = self.latest.max(now);
        self.forced = None;
        // A manual reset is a recovery too: `RecentErr` counts from here.
        let failures = self.totals.failures;
        if failures != 0 || self.cold.is_some() {
            self.cold().failures_at_recovery = failures;
        }
        if self.state == State::Closed {
            self.new_generation(now);
            None
        } else {
            Some(self.enter(State::Closed, now, None, Origin::Manual))
        }
    }

    /// Records a call that failed (`outcome`: a failure, or a fatal result) and whose
    /// dependency asked for `open_for` (an HTTP `Retry-After`), then opens the machine until at
    /// least `now + open_for` (at most the longest open period), in one step. When the result
    /// itself opens it (the policy trips, a fatal result, a failed probe), that change is the
    /// only one and carries the longer of the two open periods; otherwise (the result did not
    /// trip it, or was too late to count) the opening is a manual trip. No opening while
    /// forced. At most two changes: an open period that ended goes half-open first.
    pub(crate) fn complete_open_for(
        &mut self,
        ticket: Ticket,
        outcome: Outcome,
        latency: Option<Duration>,
        open_for: Duration,
        now: Nanos,
    ) -> [Option<Change>; 2] {
        // A shadow call's news would not have reached a breaker that rejected it.
        if ticket.is_shadow() {
            return [None, None];
        }
        let completed = self.complete(ticket, Verdict::Reported(outcome), latency, now);
        let until = now
            .saturating_add(saturating_nanos(open_for))
            .min(now.saturating_add(self.rules.max_open));
        match completed {
            Some(mut change)
                if change.to == State::Open
                    && self.state == State::Open
                    && self.forced.is_none() =>
            {
                if until > self.expiry {
                    self.expiry = until;
                    change.open_for = Some(until - change.at);
                }
                [Some(change), None]
            }
            other => [other, self.open_until(until, now, Origin::Manual)],
        }
    }

    /// A pool's judgement of its endpoint (`origin`, an [`Origin::Ejected`]): from closed or
    /// half-open, a change to open for `open_for` (an outlier's ejection time, at most the
    /// longest open period) or, without one, for the breaker's own next open period (its
    /// backoff included); `down` marks it out whatever the pool's cap, until its next state
    /// change. Already open, or forced, nothing changes.
    pub(crate) fn eject(
        &mut self,
        open_for: Option<Duration>,
        origin: Origin,
        down: bool,
        now: Nanos,
    ) -> Option<Change> {
        self.latest = self.latest.max(now);
        if self.forced.is_some() || self.state == State::Open {
            return None;
        }
        let until = open_for.map(|d| {
            now.saturating_add(saturating_nanos(d))
                .min(now.saturating_add(self.rules.max_open))
        });
        let change = self.enter(State::Open, now, until, origin);
        self.down = down;
        Some(change)
    }

    /// Whether the breaker's own evidence says its dependency is down, this open period (a
    /// failed health check, a pool's judgement that it hangs).
    pub(crate) fn is_down(&self) -> bool {
        self.down && self.state == State::Open
    }

    /// Opens the machine now until at least `now + open_for` (an open period ending later is
    /// kept; at most the longest open period), then the usual half-open. No effect while forced: the override wins.
    pub(crate) fn trip_for(&mut self, open_for: Duration, now: Nanos) -> Option<Change> {
        let until = now.saturating_add(saturating_nanos(open_for));
        self.open_until(until, now, Origin::Manual)
    }

    /// Adopts a decision made elsewhere: open until exactly `now + open_for` (at most the
    /// longest open period), then the usual half-open. From closed or half-open this is a
    /// change to open (adopted); already open, the open period is replaced. Zero: the fleet
    /// is half-open already, and so is this machine at once (a second change, to half-open,
    /// adopted too, whatever `now` reads). No effect while forced: the override wins.
    pub(crate) fn adopt_open(&mut self, open_for: Duration, now: Nanos) -> [Option<Change>; 2] {
        let until = now.saturating_add(saturating_nanos(open_for));
        let opened = self.open_until(until, now, Origin::Adopted);
        let half_open = (open_for.is_zero() && self.state == State::Open && self.forced.is_none())
            .then(|| self.enter(State::HalfOpen, now, None, Origin::Adopted));
        [opened, half_open]
    }

    /// Opens the machine until `until` for `origin` (a manual trip, or an adopted decision), unless
    /// forced: a change to open from closed or half-open; already open, the open period ends
    /// at `until` if that is later (a manual trip only extends it) or whatever it is (the
    /// adopted deadline governs).
    fn open_until(&mut self, until: Nanos, now: Nanos, origin: Origin) -> Option<Change> {
        self.latest = self.latest.max(now);
        // A new open period (or a longer one) ends a health check under way.
        self.end_lease();
        // No open period lasts longer than the rules allow, whoever asks for it.
        let until = until.min(now.saturating_add(self.rules.max_open));
        if self.forced.is_some() {
            return None;
        }
        if self.state == State::Open {
            self.expiry = match origin {
                Origin::Adopted => until,
                _ => self.expiry.max(until),
            };
            return None;
        }
        Some(self.enter(State::Open, now, Some(until), origin))
    }

    /// Adopts a recovery decided elsewhere: from open or half-open a change to closed in a
    /// new generation (adopted); already closed, nothing changes (the counts are
    /// kept). No effect while forced.
    pub(crate) fn adopt_closed(&mut self, now: Nanos) -> Option<Change> {
        self.latest = self.latest.max(now);
        if self.forced.is_some() || self.state == State::Closed {
            return None;
        }
        Some(self.enter(State::Closed, now, None, Origin::Adopted))
    }
}
