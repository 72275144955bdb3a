//! Health-checked revival: once the open period is over, the first call that can run a
//! check wins a *lease* and runs it before its request is built; only a passed check lets
//! the breaker go half-open, with that call as its first probe. No timer: the lease is
//! taken, run, taken over after `check_timeout`, and settled by the calls that arrive.
//!
//! A lease is fenced by an id and by the state: every state change ends the lease in force
//! ([`Machine::enter`]), so a check that settles after one (a forced open, a manual trip, a
//! taken-over lease) is stale and changes nothing.

use std::num::NonZeroU64;
use std::time::Duration;

use crate::error::Rejected;
use crate::forced::Forced;
use crate::nanos::Nanos;
use crate::origin::Origin;
use crate::policy::TripPolicy;
use crate::snapshot::CheckStatus;
use crate::state::State;

use super::{Change, Machine, Ticket};

/// The lease in force: who holds it and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    /// Non-zero, so that no lease (`None`) takes no room of its own.
    id: NonZeroU64,
    since: Nanos,
}

impl Lease {
    /// The lease a call just won, `id`-th of the machine (counted from 1), at `since`.
    pub(super) fn new(id: u64, since: Nanos) -> Self {
        Self {
            id: NonZeroU64::new(id).unwrap_or(NonZeroU64::MAX),
            since,
        }
    }

    /// Whether `ticket` is this lease's.
    fn is(&self, ticket: CheckTicket) -> bool {
        self.id.get() == ticket.id
    }

    /// When it was won.
    pub(super) fn since(&self) -> Nanos {
        self.since
    }
}

/// What a call that may run a health check gets when the breaker admits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Admitted as usual: the call goes ahead.
    Call(Ticket),
    /// The open period is over and this call holds the check lease: it runs the check, then
    /// settles it ([`Machine::check_passed`], [`Machine::check_failed`], or
    /// [`Machine::check_dropped`]) before anything else.
    Check(CheckTicket),
}

/// The check lease a call holds, to settle it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CheckTicket {
    id: u64,
}

impl<P: TripPolicy> Machine<P> {
    /// Whether the next call is for a health check: a check is configured, the breaker is
    /// not forced, and either it is open and its period ended, or it is half-open and a
    /// takeover of its probe slots is due (the probes out were admitted after a check; the
    /// call that takes their slots over is admitted after one too).
    pub(super) fn check_due(&self, now: Nanos) -> bool {
        if !self.rules.checked() || self.forced.is_some() || now <= self.expiry {
            return false;
        }
        match self.state {
            State::Open => true,
            State::HalfOpen => self.half_open_in_flight() >= self.probes(),
            State::Closed => false,
        }
    }

    /// The lease in force at `now`, if one is: a lease older than `check_timeout` is lost.
    fn live_lease(&self, now: Nanos) -> Option<Lease> {
        self.lease()
            .filter(|lease| now.saturating_sub(lease.since()) <= self.rules.check_timeout)
    }

    /// The rejection of a call that finds a check under way.
    fn rejected_checking(&mut self) -> Rejected {
        self.cold().totals.rejected_open += 1;
        Rejected::Checking
    }

    /// Admits a call that can run a health check: when one is due and no live lease is held,
    /// the call wins the lease ([`Admission::Check`]); while a check is under way, the call is
    /// rejected at once ([`Rejected::Checking`]); otherwise, the usual admission.
    pub(crate) fn admit_checking(
        &mut self,
        now: Nanos,
    ) -> (Result<Admission, Rejected>, Option<Change>) {
        self.latest = self.latest.max(now);
        if !self.check_due(now) {
            let (admitted, change) = self.admit(now);
            return (admitted.map(Admission::Call), change);
        }
        if self.live_lease(now).is_some() {
            return (Err(self.rejected_checking()), None);
        }
        let cold = self.cold();
        cold.leases = cold.leases.saturating_add(1);
        let lease = Lease::new(cold.leases, now);
        cold.lease = Some(lease);
        (
            Ok(Admission::Check(CheckTicket { id: lease.id.get() })),
            None,
        )
    }

    /// For a call that cannot run a check (a sync call): when a check is due and none is
    /// under way, the breaker probes with the call as gobreaker would (it goes half-open);
    /// while one is under way, the call is rejected. `None`: nothing of the check applies.
    pub(super) fn admit_without_check(&mut self, now: Nanos) -> Option<Rejected> {
        if !self.check_due(now) {
            return None;
        }
        if self.live_lease(now).is_some() {
            return Some(self.rejected_checking());
        }
        None
    }

    /// Whether `ticket` holds the lease in force (whatever its age: a check that settles
    /// late but before anyone took over still counts). Every state change ends the lease,
    /// so holding it means the same open period.
    fn holds(&self, ticket: CheckTicket) -> bool {
        self.lease().is_some_and(|lease| lease.is(ticket))
    }

    /// The check of `ticket` passed: an open breaker goes half-open (a change marked
    /// [`Origin::HealthCheck`]) and the call that ran it is admitted as the first probe; a
    /// half-open one admits it as the probe that takes the slots over. A stale lease changes
    /// nothing, and its call gets the rejection the breaker answers now.
    pub(crate) fn check_passed(
        &mut self,
        ticket: CheckTicket,
        now: Nanos,
    ) -> (Result<Ticket, Rejected>, Option<Change>) {
        self.latest = self.latest.max(now);
        if !self.holds(ticket) {
            // Stale: the call arrives anew, but may not revive the breaker unchecked.
            if self.check_due(now) {
                return (Err(self.rejection_now(now)), None);
            }
            return self.admit(now);
        }
        let cold = self.cold();
        cold.lease = None;
        cold.totals.health_checks += 1;
        let change = (self.state == State::Open)
            .then(|| self.enter(State::HalfOpen, now, None, Origin::HealthCheck));
        let (admitted, made) = self.admit(now);
        (admitted, change.or(made))
    }

    /// The check of `ticket` failed (or panicked). Half-open (a takeover's check), the
    /// breaker opens again: a change marked [`Origin::HealthCheck`], a failed recovery, down.
    /// Open, the breaker stays open, its open period
    /// re-armed from `now` for the next period (the policy's duration and backoff, asked as
    /// for an opening). It is not another opening: no state changes, `opened` and the
    /// transitions stay as they are, the failed check is counted in its own totals. The one
    /// event is a re-arm, open to open, marked [`Origin::HealthCheck`] and carrying the new
    /// period, for observers (a status page folds them, a fleet publishes the new period).
    /// The call that ran it is rejected, and counted so if `rejects_caller` (a check run
    /// beside the calls, a pool's, rejects no caller: the pick goes elsewhere). A stale
    /// lease changes nothing.
    pub(crate) fn check_failed(
        &mut self,
        ticket: CheckTicket,
        now: Nanos,
        rejects_caller: bool,
    ) -> (Rejected, Option<Change>) {
        self.latest = self.latest.max(now);
        if !self.holds(ticket) {
            return (self.rejection_now(now), None);
        }
        let cold = self.cold();
        cold.lease = None;
        cold.totals.health_checks += 1;
        cold.totals.health_checks_failed += 1;
        if self.state == State::HalfOpen {
            let reopened = self.enter(State::Open, now, None, Origin::HealthCheck);
            self.down = true;
            self.cold().totals.rejected_open += u64::from(rejects_caller);
            return (Rejected::open_until(self.expiry, now), Some(reopened));
        }
        let counts = self.window.counts();
        self.expiry = self.expiry_of(State::Open, now);
        self.down = true;
        self.cold().totals.rejected_open += u64::from(rejects_caller);
        let rearmed = Change {
            from: State::Open,
            to: State::Open,
            at: now,
            counts,
            totals: self.totals(),
            origin: Origin::HealthCheck,
            open_for: (self.expiry != Nanos::MAX).then(|| self.expiry.saturating_sub(now)),
            forced: self.forced,
        };
        (Rejected::open_until(self.expiry, now), Some(rearmed))
    }

    /// Where a health-checked breaker stands at `now` once its open period is over: a check
    /// is due (the next call that can run it does) or running (a call holds a live lease);
    /// `None` while the period lasts, without a check, forced, or in any other state.
    pub(crate) fn check_status(&self, now: Nanos) -> Option<CheckStatus> {
        if !self.check_due(now) {
            return None;
        }
        Some(match self.live_lease(now) {
            Some(_) => CheckStatus::Running,
            None => CheckStatus::Due,
        })
    }

    /// How long a call that cannot run the check should wait before it asks again, once the
    /// open period is over: what is left of the running check's `check_timeout` (by then it
    /// has settled, or the next call takes it over), or the whole `check_timeout` when one is
    /// due and nobody runs it yet (the time a check may take). Never zero, so that a caller
    /// honouring it does not spin; `None` when no check is due.
    pub(crate) fn check_wait(&self, now: Nanos) -> Option<Duration> {
        if !self.check_due(now) {
            return None;
        }
        let left = match self.live_lease(now) {
            Some(lease) => lease
                .since()
                .saturating_add(self.rules.check_timeout)
                .saturating_sub(now),
            None => self.rules.check_timeout,
        };
        Some(Duration::from_nanos(left.max(1)))
    }

    /// The call that held `ticket` was dropped before its check settled: the lease is
    /// released with no verdict, so the next call runs the check again.
    pub(crate) fn check_dropped(&mut self, ticket: CheckTicket) {
        if self.holds(ticket) {
            self.end_lease();
        }
    }

    /// The rejection a call gets now, counted, without admitting it: for the call of a stale
    /// lease. Closed or half-open, the call is held back all the same (its own check failed,
    /// or another check is due): [`Rejected::Checking`].
    fn rejection_now(&mut self, now: Nanos) -> Rejected {
        let rejected = match (self.state, self.forced) {
            (State::Open, Some(Forced::Open)) => Rejected::ForcedOpen,
            (State::Open, _) if !self.check_due(now) => Rejected::open_until(self.expiry, now),
            (State::HalfOpen, _) if !self.check_due(now) => Rejected::TooManyRequests,
            _ => Rejected::Checking,
        };
        self.count_rejection(rejected);
        rejected
    }
}
