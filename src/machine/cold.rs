//! What an idle closed machine never touches, built on its first need ([`Cold`]), and the
//! totals every machine counts in place ([`Tally`]).
//!
//! A breaker that stays closed and sees only successes and failures in time counts in the
//! [`Tally`] and never builds its [`Cold`]: the first trip, forced state, health-check
//! lease, rejection, excluded, abandoned or dropped result, retry tally, slow-call threshold
//! or throttle does. Every read of
//! an absent [`Cold`] answers what a fresh one holds.

use std::sync::Arc;

use crate::contain::FirstPanic;
use crate::counts::{Totals, Transitions};
use crate::generation::Generation;
use crate::in_flight::InFlight;
use crate::in_flight_slots::InFlightSlots;
use crate::nanos::Nanos;
use crate::throttle::Throttling;

use super::check::Lease;

/// The totals an idle closed breaker counts: the rest of [`Totals`] are the [`Cold`]'s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) admitted: u64,
    pub(super) successes: u64,
    pub(super) failures: u64,
}

impl Tally {
    /// `rest` (the [`Cold`]'s totals, or none) with these counts in place.
    pub(super) fn over(&self, rest: Totals) -> Totals {
        Totals {
            admitted: self.admitted,
            successes: self.successes,
            failures: self.failures,
            ..rest
        }
    }
}

/// The machine's state beyond an idle closed breaker's (see the module's docs).
#[derive(Debug)]
pub(super) struct Cold {
    /// The totals not in the [`Tally`] (the [`Tally`]'s own fields unused here: zero).
    pub(super) totals: Totals,
    pub(super) transitions: Transitions,
    /// Half-open: how many probes it admits and how many successes close it, asked of the
    /// policy once, when the half-open period starts.
    pub(super) probes: u64,
    /// Half-open: the first generation of the trial running. A takeover that relieves the
    /// probes out of their slots (the default `probe_timeout`: see
    /// [`take_over_probes`](super::Machine::take_over_probes)) starts a generation of probes
    /// within the same trial, so a result of any generation from this one on still counts;
    /// every other new generation starts a new trial.
    pub(super) trial_from: Generation,
    /// Half-open: the probe slots given back by relieving takeovers whose probes are still
    /// out (a relieved probe that comes back excluded has its slot given back already).
    pub(super) relieved: u64,
    /// `totals.failures` when the breaker last closed after being open (brpc's `RecentErr`
    /// counts from there).
    pub(super) failures_at_recovery: u64,
    /// The backoff's exponent: failed probes, and trips that came soon after a recovery
    /// (brpc's isolation: a relapse within the backoff's longest period of the last
    /// recovery doubles the period; a trip after that starts over).
    pub(super) failed_recoveries: u32,
    /// When the breaker last closed after being open (none yet: never).
    pub(super) recovered_at: Option<Nanos>,
    /// The open periods the machine computed itself so far: the index of the next one's
    /// draw of the spread ([`Rules::jitter`](super::Rules)), so that the same inputs give the
    /// same times.
    pub(super) open_draws: u64,
    /// The health-check lease in force, if a call holds one (see [`check`](super::check)).
    pub(super) lease: Option<Lease>,
    /// Leases handed out so far: the next one's id.
    pub(super) leases: u64,
    /// The calls in flight, when there is a slow-call threshold (else always empty).
    pub(super) in_flight: InFlight,
    /// The closed-state throttle and its generator, shared with the lock-free lane (none
    /// without a throttle).
    pub(super) throttle: Option<Arc<Throttling>>,
    /// The lane's in-flight slots, shared with it: a slow-call threshold's calls admitted
    /// lock-free (none otherwise).
    pub(super) slots: Option<Arc<InFlightSlots>>,
    /// The first panic the policy raised since the last call, if it did (see
    /// [`Guarded`](super::guarded::Guarded)): a panic builds the cold part.
    pub(super) panic: FirstPanic,
}

impl Cold {
    /// What a machine admitting `probes` probes by default holds before it needs any of it.
    pub(super) fn new(probes: u64) -> Self {
        Self {
            totals: Totals::default(),
            transitions: Transitions::default(),
            probes,
            trial_from: Generation::default(),
            relieved: 0,
            failures_at_recovery: 0,
            failed_recoveries: 0,
            recovered_at: None,
            open_draws: 0,
            lease: None,
            leases: 0,
            in_flight: InFlight::default(),
            throttle: None,
            slots: None,
            panic: FirstPanic::default(),
        }
    }
}
