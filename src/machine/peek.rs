//! Reads of the machine without side effects ([`Machine::peek`], [`Machine::peek_open`]),
//! and the rejections answered elsewhere that it counts.

use crate::counts::Counts;
use crate::error::Rejected;
use crate::forced::Forced;
use crate::nanos::Nanos;
use crate::policy::TripPolicy;
use crate::snapshot::CheckStatus;
use crate::state::State;
use std::time::Duration;

use super::Machine;

/// The machine as the next call would find it at some instant, computed without changing
/// anything: what a snapshot reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Peek {
    pub(crate) state: State,
    pub(crate) counts: Counts,
    pub(crate) retry_after: Option<Duration>,
    /// A health-checked breaker past its open period: a check due or running.
    pub(crate) check: Option<CheckStatus>,
}

/// What the next call would find, as a layer that prepares calls before it has them (a tower
/// service's `poll_ready`) asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Rejected: open, forced open, or a health check under way.
    Rejected(Rejected),
    /// The open period is over and no check runs: the next checking admission wins the
    /// check lease.
    CheckDue,
    /// Neither: the next call is admitted or rejected as usual.
    Passes,
}

impl<P: TripPolicy> Machine<P> {
    /// What the next call would find at `now`, as [`refresh`](Machine::refresh) would make
    /// it, without making it: the state, the counts it would count in, and how long until a
    /// probe while open.
    pub(crate) fn peek(&self, now: Nanos) -> Peek {
        let now = now.max(self.latest);
        let (state, counts) = match self.state {
            State::Open if self.forced.is_none() && now > self.expiry && !self.rules.checked() => {
                (State::HalfOpen, Counts::default())
            }
            State::Closed if now > self.expiry => (State::Closed, Counts::default()),
            State::Closed if self.window.is_rolling() => {
                let age = now.saturating_sub(self.window.start()) / self.rules.bucket_period;
                (State::Closed, self.window.counts_at(age))
            }
            state => (state, self.window.counts()),
        };
        let check = self.check_status(now);
        let retry_after = match (state, self.forced) {
            // Past the period, waiting for a check: nothing left to wait, a check must run.
            (State::Open, None) if check.is_some() => None,
            (State::Open, None) => Rejected::open_until(self.expiry, now).retry_after(),
            // A trial running with every probe out: when a call is admitted again at the
            // latest (a check due: none, as open).
            (State::HalfOpen, None) if check.is_none() => self.probe_wait(now),
            _ => None,
        };
        Peek {
            state,
            counts,
            retry_after,
            check,
        }
    }

    /// The rejection a call would get at `now` because the breaker is open or forced open,
    /// without evaluating anything or admitting anything.
    pub(crate) fn peek_open(&self, now: Nanos) -> Option<Rejected> {
        // In dry run nothing is turned away.
        if self.rules.dry_run {
            return None;
        }
        match (self.state, self.forced) {
            (State::Open, Some(Forced::Open)) => Some(Rejected::ForcedOpen),
            (State::Open, _) if now <= self.expiry => Some(Rejected::open_until(self.expiry, now)),
            // Past the period (or a takeover's check due), with a health check under way:
            // held back until it settles.
            (State::Open | State::HalfOpen, _)
                if self.check_due(now)
                    && self.lease().is_some_and(|l| {
                        now.saturating_sub(l.since()) <= self.rules.check_timeout
                    }) =>
            {
                Some(Rejected::Checking)
            }
            _ => None,
        }
    }

    /// What the next call would find at `now`, without admitting it (see [`Ready`]).
    pub(crate) fn peek_ahead(&self, now: Nanos) -> Ready {
        if self.rules.dry_run {
            return Ready::Passes;
        }
        let now = now.max(self.latest);
        match self.peek_open(now) {
            Some(rejected) => Ready::Rejected(rejected),
            None if self.check_due(now) => Ready::CheckDue,
            // Half-open with every probe out (and not for longer than `probe_timeout`): the
            // next call would be turned away.
            None if self.state == State::HalfOpen
                && self.half_open_in_flight() >= self.probes()
                && now <= self.expiry =>
            {
                Ready::Rejected(Rejected::TooManyRequests)
            }
            None => Ready::Passes,
        }
    }

    /// Half-open with every probe slot held (a trial running, the next call turned away): how
    /// long until a call is admitted again at the latest: the rest of the probe timeout,
    /// after which the next call takes the slots over (or, with a check due, the time the
    /// check may take); without a takeover (`probe_timeout(Duration::MAX)`), the open
    /// `timeout`, as a hint (a slot frees when a probe reports). `None` otherwise. Never
    /// zero, so that a caller honouring it does not spin.
    pub(crate) fn probe_wait(&self, now: Nanos) -> Option<Duration> {
        let now = now.max(self.latest);
        if self.state != State::HalfOpen
            || self.forced.is_some()
            || self.half_open_in_flight() < self.probes()
        {
            return None;
        }
        if let Some(wait) = self.check_wait(now) {
            return Some(wait);
        }
        let left = match self.expiry {
            Nanos::MAX => self.rules.timeout,
            until => until.saturating_sub(now),
        };
        Some(Duration::from_nanos(left.max(1)))
    }

    /// Counts a rejection answered elsewhere (by the tower layer, from a peek).
    #[inline]
    pub(crate) fn count_rejection(&mut self, rejected: Rejected) {
        match rejected {
            Rejected::Open { .. } => self.cold().totals.rejected_open += 1,
            Rejected::TooManyRequests => self.cold().totals.rejected_half_open += 1,
            Rejected::ForcedOpen => self.cold().totals.rejected_forced += 1,
            Rejected::Checking => self.cold().totals.rejected_open += 1,
            Rejected::Throttled { .. } => self.cold().totals.rejected_throttled += 1,
            // A pool's or a limit's, not a breaker's: nothing of this breaker's to count.
            Rejected::NoEndpoint { .. } | Rejected::Limited => {}
        }
    }

    /// Counts `rejected` open-state rejections made elsewhere (the lock-free lane).
    pub(crate) fn absorb_rejections(&mut self, rejected: u64) {
        if rejected > 0 {
            self.cold().totals.rejected_open += rejected;
        }
    }
}
