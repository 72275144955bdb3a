//! [`Endpoint`]: one member of a pool, its breaker and its calls in flight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::breaker::Breaker;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::Shared;

/// An endpoint: its key, its breaker, and how many picks of it are in flight.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub struct Endpoint<K, P: TripPolicy, O: Observer> {
    pub(super) key: K,
    pub(super) breaker: Arc<Breaker<P, O>>,
    in_flight: AtomicUsize,
    /// The pool's counts and settings (held here, so that a pick clones nothing shared).
    pub(super) shared: Arc<Shared>,
}

impl<K, P: TripPolicy, O: Observer> Endpoint<K, P, O> {
    pub(super) fn new(key: K, breaker: Arc<Breaker<P, O>>, shared: Arc<Shared>) -> Self {
        Self {
            key,
            breaker,
            in_flight: AtomicUsize::new(0),
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

    /// One more pick in flight.
    #[inline]
    pub(super) fn start(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A pick ended.
    #[inline]
    pub(super) fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
