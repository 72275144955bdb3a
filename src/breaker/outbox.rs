//! The outbox: state changes waiting for their observers, delivered one at a time, in the
//! order they happened, exactly once, and never under the state lock.
//!
//! The outbox lives behind the state lock. A lock holder that made a change pushes it and
//! then tries to [`claim`](Outbox::claim) delivery; the claiming thread delivers, outside the
//! lock, until [`next`](Outbox::next) finds the queue empty, and seeing it empty and giving up
//! delivery are one step under the lock, so a change pushed meanwhile by another thread is
//! never left without a deliverer. A thread that finds delivery claimed leaves its change to
//! the deliverer, which delivers it next.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use super::check::HealthCheck;
use crate::contain::FirstPanic;
use crate::machine::Change;
use crate::observe::{Observer, ThrottleEvent, Transition};
use crate::policy::SuccessRecorder;
use crate::state::State;

/// State changes not yet delivered, oldest first, and whether a thread is delivering.
#[derive(Debug)]
pub(super) struct Outbox {
    /// Boxed: a breaker nothing observes never queues a change, and pays a pointer for it
    /// rather than a `VecDeque`'s four words and a flag.
    queue: Option<Box<Queue>>,
}

/// The changes waiting, and whether a thread is delivering them.
#[derive(Debug)]
struct Queue {
    changes: VecDeque<Change>,
    delivering: bool,
}

/// Changes an outbox holds without allocating again: a burst (closed → open → half-open →
/// closed while one slow observer runs).
const BURST: usize = 4;

impl Queue {
    fn new() -> Box<Self> {
        Box::new(Self {
            changes: VecDeque::with_capacity(BURST),
            delivering: false,
        })
    }
}

impl Outbox {
    /// An outbox; with room for a burst of changes without allocating when anyone
    /// `observes` them.
    pub(super) fn new(observes: bool) -> Self {
        Self {
            queue: observes.then(Queue::new),
        }
    }

    pub(super) fn push(&mut self, change: Change) {
        self.queue
            .get_or_insert_with(Queue::new)
            .changes
            .push_back(change);
    }

    /// Claims delivery for the calling thread: `true` if changes are waiting and nobody is
    /// delivering them.
    pub(super) fn claim(&mut self) -> bool {
        match self.queue.as_deref_mut() {
            Some(q) => {
                let claim = !q.delivering && !q.changes.is_empty();
                q.delivering |= claim;
                claim
            }
            None => false,
        }
    }

    /// The next change for the thread that claimed delivery; `None` when none is left, which
    /// gives up delivery in the same step.
    pub(super) fn next(&mut self) -> Option<Change> {
        let q = self.queue.as_deref_mut()?;
        let next = q.changes.pop_front();
        q.delivering = next.is_some();
        next
    }
}

/// The `on_state_change` callback.
pub(super) type StateChangeFn = dyn Fn(&str, State, State) + Send + Sync;

/// Whom the outbox delivers to: the breaker's observer and its `on_state_change` callback,
/// which is an observer too (in the [`Hooks`]).
pub(super) struct Observers<O> {
    pub(super) observer: O,
    pub(super) hooks: Option<Box<Hooks>>,
}

/// What a breaker is given beyond the defaults, that no call reads on its way through an
/// idle default breaker: its name, its `on_state_change` callback, its health check and its
/// policy's success recorder, boxed together (one pointer for all, none without any).
pub(super) struct Hooks {
    pub(super) on_state_change: Option<Arc<StateChangeFn>>,
    /// The health check that revives it, if any ([`Builder::health_check`](super::Builder));
    /// none in dry run, which never runs one.
    pub(super) health_check: Option<Arc<HealthCheck>>,
    /// The breaker's name (empty: none given).
    pub(super) name: Box<str>,
    /// The recorder of a policy's closed-state successes, when the lane counts them for it:
    /// it takes every success the lane counts.
    pub(super) recorder: Option<Arc<dyn SuccessRecorder>>,
}

impl Hooks {
    /// The hooks, boxed, if any is given.
    pub(super) fn of(
        on_state_change: Option<Arc<StateChangeFn>>,
        health_check: Option<Arc<HealthCheck>>,
        name: String,
        recorder: Option<Arc<dyn SuccessRecorder>>,
    ) -> Option<Box<Self>> {
        (on_state_change.is_some()
            || health_check.is_some()
            || !name.is_empty()
            || recorder.is_some())
        .then(|| {
            Box::new(Self {
                on_state_change,
                health_check,
                name: name.into_boxed_str(),
                recorder,
            })
        })
    }
}

impl<O: Observer> Observers<O> {
    /// Tells the callback, then the observer, of `transition`; each is told even if the other
    /// panics, and the first panic is kept in `panics`. The callback hears of state changes
    /// only: not of a failed health check's re-arm (open to open), which observers get.
    pub(super) fn deliver(&self, transition: &Transition<'_>, panics: &mut FirstPanic) {
        if transition.from == transition.to {
            panics.catch((), || self.observer.on_transition(transition));
            return;
        }
        if let Some(callback) = self.on_state_change() {
            panics.catch((), || {
                callback(transition.breaker, transition.from, transition.to)
            });
        }
        panics.catch((), || self.observer.on_transition(transition));
    }

    /// Tells the observer that a throttle started or stopped (never the `on_state_change`
    /// callback: it is no state change).
    pub(super) fn throttle(&self, event: &ThrottleEvent<'_>, panics: &mut FirstPanic) {
        panics.catch((), || self.observer.on_throttle(event));
    }

    pub(super) fn observes_transitions(&self) -> bool {
        self.on_state_change().is_some() || self.observer.observes_transitions()
    }
}

impl<O> Observers<O> {
    fn on_state_change(&self) -> Option<&Arc<StateChangeFn>> {
        self.hooks.as_deref()?.on_state_change.as_ref()
    }

    /// The health check, if any.
    pub(super) fn health_check(&self) -> Option<&Arc<HealthCheck>> {
        self.hooks.as_deref()?.health_check.as_ref()
    }

    /// The breaker's name (empty: none given).
    #[inline]
    pub(super) fn name(&self) -> &str {
        self.hooks.as_deref().map_or("", |hooks| &hooks.name)
    }

    /// The policy's success recorder, if the lane counts successes for it.
    #[inline(always)]
    pub(super) fn recorder(&self) -> Option<&Arc<dyn SuccessRecorder>> {
        self.hooks.as_deref()?.recorder.as_ref()
    }
}

impl<O: fmt::Debug> fmt::Debug for Observers<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observers")
            .field("observer", &self.observer)
            .field("on_state_change", &self.on_state_change().is_some())
            .field("health_check", &self.health_check().is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;

    fn change(to: State) -> Change {
        Change {
            from: State::Closed,
            to,
            at: 0,
            counts: Counts::default(),
            totals: Default::default(),
            origin: crate::origin::Origin::Breaker,
            open_for: None,
            forced: None,
        }
    }

    #[test]
    fn one_deliverer_at_a_time_until_the_queue_is_empty() {
        let mut outbox = Outbox::new(true);
        assert!(!outbox.claim(), "nothing to deliver");
        outbox.push(change(State::Open));
        assert!(outbox.claim());
        outbox.push(change(State::HalfOpen));
        assert!(!outbox.claim(), "already claimed");
        assert_eq!(outbox.next().map(|c| c.to), Some(State::Open));
        assert_eq!(outbox.next().map(|c| c.to), Some(State::HalfOpen));
        assert_eq!(outbox.next(), None);
        outbox.push(change(State::Open));
        assert!(outbox.claim(), "given up with the empty queue");
    }
}
