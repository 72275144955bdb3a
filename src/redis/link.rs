//! [`Link`]: the observer a shared breaker adds beside its own, through which it learns of
//! the local changes it must publish.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::observe::{Observer, Origin, Transition};
use crate::State;

/// The observer a [`SharedBreaker`](super::SharedBreaker) adds beside the breaker's own (the
/// second of the pair): it notes each local change to open or closed as waiting to be
/// published, and the state as last changed. Opaque: it only appears in the breaker's type.
#[derive(Debug)]
pub struct Link {
    /// A local change to open or closed (not adopted from the fleet) waits to be published.
    pending: AtomicBool,
    /// The state after the latest change delivered (0 closed, 1 half-open, 2 open).
    state: AtomicU8,
}

impl Link {
    pub(super) fn new() -> Self {
        Self {
            pending: AtomicBool::new(false),
            state: AtomicU8::new(0),
        }
    }

    /// Whether a local decision waits to be published.
    #[inline]
    pub(super) fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Takes the waiting decision, if any: a change delivered after this is waiting again.
    pub(super) fn take_pending(&self) -> bool {
        self.pending.swap(false, Ordering::AcqRel)
    }

    /// Puts back a decision that could not be published (the store failed).
    pub(super) fn restore_pending(&self) {
        self.pending.store(true, Ordering::Release);
    }

    /// Whether the latest change delivered left the breaker closed: then a call just
    /// admitted is no probe, without asking the breaker (a lock).
    #[inline]
    pub(super) fn closed(&self) -> bool {
        self.state.load(Ordering::Relaxed) == 0
    }
}

impl Observer for Link {
    fn on_transition(&self, t: &Transition<'_>) {
        let state = match t.to {
            State::Closed => 0,
            State::HalfOpen => 1,
            State::Open => 2,
        };
        self.state.store(state, Ordering::Relaxed);
        if t.origin != Origin::Adopted && t.to != State::HalfOpen {
            self.pending.store(true, Ordering::Release);
        }
    }
}
