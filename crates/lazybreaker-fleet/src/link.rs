//! [`Link`]: the observer a shared breaker adds beside its own, through which it learns of
//! the local changes it must publish, and what they decided.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::Forced;
use lazybreaker::State;
use parking_lot::Mutex;

/// The observer a [`SharedBreaker`](super::SharedBreaker) adds beside the breaker's own (the
/// second of the pair): it notes each local change to open or closed as waiting to be
/// published, and what the latest change delivered decided. Public only because it appears
/// in the type of [`SharedBreaker::breaker`](super::SharedBreaker::breaker); it cannot be
/// named outside the crate.
#[derive(Debug)]
pub struct Link {
    /// A local change to open or closed (not adopted from the fleet) waits to be published.
    pending: AtomicBool,
    /// The latest change delivered, as its transition carried it.
    latest: Mutex<Noted>,
}

/// What a delivered change decided: the parts of its [`Transition`] a publication needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Noted {
    pub(super) to: State,
    pub(super) origin: Origin,
    /// When it happened, on the breaker's clock.
    pub(super) at: Duration,
    /// For a change to open: how long from `at` ([`Duration::MAX`] for an open period that
    /// never ends by itself, see [`open_for`]); `None` for a forced open and the other
    /// changes.
    pub(super) open_for: Option<Duration>,
    pub(super) forced: Option<Forced>,
}

impl Default for Noted {
    /// A fresh breaker: closed, nothing decided.
    fn default() -> Self {
        Self {
            to: State::Closed,
            origin: Origin::Breaker,
            at: Duration::ZERO,
            open_for: None,
            forced: None,
        }
    }
}

impl Link {
    pub(super) fn new() -> Self {
        Self {
            pending: AtomicBool::new(false),
            latest: Mutex::new(Noted::default()),
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

    /// The latest change delivered.
    pub(super) fn latest(&self) -> Noted {
        *self.latest.lock()
    }
}

impl Observer for Link {
    fn on_transition(&self, t: &Transition<'_>) {
        // Noted before the flag is raised: a publisher that takes the flag reads this change
        // (or a later one).
        *self.latest.lock() = Noted {
            to: t.to,
            origin: t.origin,
            at: t.at,
            open_for: open_for(t),
            forced: t.forced,
        };
        if t.origin != Origin::Adopted && t.to != State::HalfOpen {
            self.pending.store(true, Ordering::Release);
        }
    }
}

/// How long the change `t` opens the breaker for, as a publication needs it. The transition
/// carries no period both for a forced open (which lasts until released, and stays local)
/// and for an open period whose end saturated (a [`trip_for`](lazybreaker::Breaker::trip_for)
/// or a backoff of [`Duration::MAX`] under a `max_open_duration` of `Duration::MAX`); the
/// override in force tells them apart. The second is a very long open period, published as
/// one (the store saturates its deadline): [`Duration::MAX`].
fn open_for(t: &Transition<'_>) -> Option<Duration> {
    match t.open_for {
        None if t.to == State::Open && t.forced.is_none() => Some(Duration::MAX),
        open_for => open_for,
    }
}
