//! The fleet's probe slots as a shared breaker knows them taken ([`Slots`]): while they are
//! full, a half-open call is turned away before the local breaker would take its probes
//! over, and before a store round trip that could only answer "full".

use std::sync::atomic::Ordering;

use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::TripPolicy;
use lazybreaker::State;

use super::super::store::FleetStore;
use super::{nanos, SharedBreaker};

/// The fleet's probe slots as this process knows them taken: its own live leases, and
/// whether the store answered that every slot was held since the view was last refreshed.
/// While they fill the fleet's slots, a half-open call is turned away here, before the
/// local breaker would take its probes over (they hold the fleet's slots: the fleet has not
/// written them off) and before a store round trip that could only answer "full". The
/// fleet's lease expiry is its probe timeout: once this process's leases expire, the local
/// breaker's takeover goes ahead, and the new probe leases the slot again.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// The number of each lease held, and when it expires on the breaker's clock.
    pub(super) own: Vec<(u64, u64)>,
    /// The store answered full, since the last refresh.
    pub(super) full_seen: bool,
}

impl<S: FleetStore, P: TripPolicy, O: Observer> SharedBreaker<S, P, O> {
    /// Whether a call at `now` would find the fleet's probe slots full while the local
    /// breaker is half-open (see [`Slots`]): this process's live leases fill them, or the
    /// store said so since the last refresh.
    #[cold]
    #[inline(never)]
    pub(super) fn fleet_full(&self, now: u64) -> bool {
        let full = {
            let mut slots = self.fleet.slots.lock();
            slots.own.retain(|&(_, expires)| expires > now);
            if slots.own.is_empty() && !slots.full_seen {
                self.fleet.slots_hint.store(false, Ordering::Relaxed);
            }
            slots.full_seen || slots.own.len() as u64 >= self.fleet.max_requests
        };
        full && self.breaker.state() == State::HalfOpen
    }

    /// A lease this process took: its number, held until `lease_for` from now.
    pub(super) fn note_lease(&self, number: u64) {
        let expires = self
            .breaker
            .clock_nanos()
            .saturating_add(nanos(self.fleet.knobs.lease_for));
        self.fleet.slots.lock().own.push((number, expires));
        self.fleet.slots_hint.store(true, Ordering::Relaxed);
    }

    /// The store answered that every slot is held: so it stays, as far as this process
    /// knows, until the next refresh.
    pub(super) fn note_full(&self) {
        self.fleet.slots.lock().full_seen = true;
        self.fleet.slots_hint.store(true, Ordering::Relaxed);
    }

    /// A refresh: what the store said of the slots is old (a lease of this process's is
    /// still its own until given back, or expired).
    pub(super) fn forget_full(&self) {
        if self.fleet.slots_hint.load(Ordering::Relaxed) {
            self.fleet.slots.lock().full_seen = false;
        }
    }
}
