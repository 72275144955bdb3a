//! Writing down what a breaker says: [`Log`], a shared list that is an [`Observer`] (each
//! transition as an owned entry of the test's choosing) or an `on_state_change` callback.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lazybreaker::observe::{Observer, Transition};
use lazybreaker::State;

/// A state change as a callback or a policy hears of it: `(from, to)`.
pub(crate) type Change = (State, State);

/// What a [`Log`] observer keeps of each transition. Implemented here for [`Change`]; a test
/// binary implements it for its own tuple (the trait is the binary's own,
/// so e.g. `impl FromTransition for (State, State, bool)` is allowed there).
pub(crate) trait FromTransition: Send + 'static {
    fn from_transition(t: &Transition<'_>) -> Self;
}

impl FromTransition for Change {
    fn from_transition(t: &Transition<'_>) -> Self {
        (t.from, t.to)
    }
}

/// A list shared by its clones, in the order things were pushed. A poisoned lock (a test
/// that panics on purpose) is used as it is: nothing panics while holding it.
#[derive(Debug)]
pub(crate) struct Log<T = Change>(Arc<Mutex<Vec<T>>>);

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log(Arc::default())
    }
}

impl<T> Clone for Log<T> {
    fn clone(&self) -> Self {
        Log(Arc::clone(&self.0))
    }
}

impl<T> Log<T> {
    fn lock(&self) -> MutexGuard<'_, Vec<T>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, entry: T) {
        self.lock().push(entry);
    }

    /// Everything so far, leaving the log empty.
    pub(crate) fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.lock())
    }

    /// Everything so far, leaving it in the log.
    pub(crate) fn entries(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.lock().clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Log<Change> {
    /// An `on_state_change` callback pushing each `(from, to)` it is given.
    pub(crate) fn callback(&self) -> impl Fn(&str, State, State) + Send + Sync + 'static {
        let log = self.clone();
        move |_, from, to| log.push((from, to))
    }
}

/// Each transition delivered, as a `T`.
impl<T: FromTransition> Observer for Log<T> {
    fn on_transition(&self, t: &Transition<'_>) {
        self.push(T::from_transition(t));
    }
}
