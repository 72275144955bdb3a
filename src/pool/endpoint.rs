//! [`Endpoint`]: one member of a pool, its breaker and its calls in flight.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::breaker::gate::Gate;
use crate::breaker::Breaker;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use crate::nanos::Nanos;
use crate::outcome::Outcome;

use super::outlier::EndpointRecord;
use super::Shared;

/// A health check under way, left in its endpoint ([`Endpoint::parked`]).
pub(super) type Parked<P, O> = Gate<Arc<Breaker<P, O>>>;

/// An endpoint: its key, its breaker, and how many picks of it are in flight.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub struct Endpoint<K, P: TripPolicy, O: Observer> {
    pub(super) key: K,
    pub(super) breaker: Arc<Breaker<P, O>>,
    in_flight: AtomicUsize,
    /// Its picks so far (written with `in_flight`, on the same line: nothing more shared).
    picks: AtomicU64,
    /// With a pool [`deadline`](super::Pool::deadline): when it last showed progress on
    /// the pool's clock (a call came back other than failed, or one went out with none in
    /// flight).
    progress: AtomicU64,
    /// What the pool's outlier detection keeps of it.
    pub(super) outlier: EndpointRecord,
    /// Its health check, started by an async pick that sent its own call elsewhere, for the
    /// async picks that follow to drive ([`Pool::pick_async`](super::Pool::pick_async)).
    pub(super) parked: Mutex<Option<Parked<P, O>>>,
    /// The pool's counts and settings (held here, so that a pick clones nothing shared).
    pub(super) shared: Arc<Shared>,
}

impl<K, P: TripPolicy, O: Observer> Endpoint<K, P, O> {
    pub(super) fn new(key: K, breaker: Arc<Breaker<P, O>>, shared: Arc<Shared>) -> Self {
        Self {
            key,
            breaker,
            in_flight: AtomicUsize::new(0),
            picks: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            outlier: EndpointRecord::default(),
            parked: Mutex::new(None),
            shared,
        }
    }

    /// Its key (for the tower service over the pool).
    pub(crate) fn key(&self) -> &K {
        &self.key
    }

    /// Picks of it in flight (a hint: others move it meanwhile).
    #[inline]
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// One more pick in flight; with a deadline, one going out to an endpoint with none in
    /// flight starts its wait for progress.
    #[inline]
    pub(super) fn start(&self) {
        self.picks.fetch_add(1, Ordering::Relaxed);
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        if before == 0 && self.shared.deadline() != 0 {
            self.progress
                .fetch_max(self.shared.now(), Ordering::Relaxed);
        }
    }

    /// Its picks so far.
    pub(super) fn picks(&self) -> u64 {
        self.picks.load(Ordering::Relaxed)
    }

    /// Its picks so far, handed to the pool as it leaves (counted here no more).
    pub(super) fn take_picks(&self) -> u64 {
        self.picks.swap(0, Ordering::Relaxed)
    }

    /// A pick ended.
    #[inline]
    pub(super) fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// A pick's call came back with `outcome`, everything of it recorded: with a deadline,
    /// anything but a failure is progress (the endpoint answered). Reads the pool's clock
    /// only then (a user clock's panic continues from here, nothing left unrecorded).
    #[inline]
    pub(super) fn answered(&self, outcome: Outcome) {
        if outcome != Outcome::Failure && outcome != Outcome::Fatal && self.shared.deadline() != 0 {
            self.progress
                .fetch_max(self.shared.now(), Ordering::Relaxed);
        }
    }

    /// Its wait for progress starts again at `at` (the end of the open period it was
    /// judged hung for).
    pub(super) fn restart_progress(&self, at: Nanos) {
        self.progress.fetch_max(at, Ordering::Relaxed);
    }

    /// Whether it hangs at `now`: calls in flight, and none came back (other than failed)
    /// for `deadline` since one went out to it idle or since the last that did: its oldest
    /// call in flight is then older than the deadline.
    #[inline]
    pub(super) fn hangs(&self, now: Nanos, deadline: Nanos) -> bool {
        self.in_flight() > 0
            && now.saturating_sub(self.progress.load(Ordering::Relaxed)) >= deadline
    }
}
