//! Panic containment: the one place where the breaker runs user code that may panic.
//!
//! Every piece of user code the breaker runs (the policy's hooks, the observers and the
//! `on_state_change` callback, the clock) goes through [`catch`] or [`FirstPanic::catch`], so
//! the breaker can finish the step it was taking (no permit stranded, no state change lost)
//! before the panic continues with [`resume`].
//!
//! The rules, the same everywhere:
//!
//! - A panic is never swallowed: once the breaker is consistent again, the first panic of the
//!   operation continues to the caller.
//! - When several pieces of user code panic in one operation, the first panic wins; the later
//!   ones are dropped.
//! - When the thread is already unwinding (a permit dropped by a panicking call), a panic
//!   from user code is dropped instead of resumed: a second panic during unwinding would abort
//!   the process, and the first panic is already on its way to the caller.
//!
//! Catching a panic inside a destructor that runs while the thread unwinds is sound since
//! Rust 1.71 (the crate's MSRV is 1.83): that is what lets a permit dropped by a panicking
//! call run the policy and the observers safely.
//!
//! A leaf module: it knows nothing of the breaker.

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::thread;

/// A caught panic's payload.
pub(crate) type Payload = Box<dyn Any + Send + 'static>;

/// Runs user code, catching a panic.
///
/// `AssertUnwindSafe`: the code given here is user code that the breaker calls with its own
/// state borrowed, and every caller restores that state to a consistent one (by finishing the
/// step with a neutral answer) before the panic continues.
#[inline]
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Payload> {
    panic::catch_unwind(AssertUnwindSafe(f))
}

/// Lets a caught panic continue: resumes it, unless the thread is already unwinding, in which
/// case it is dropped (a second panic escaping during unwinding would abort the process).
#[inline]
pub fn resume(panic: FirstPanic) {
    if let Some(payload) = panic.0 {
        let payload = *payload;
        if thread::panicking() {
            // Leaked, not dropped: a destructor that panicked here would abort the process.
            std::mem::forget(payload);
        } else {
            panic::resume_unwind(payload);
        }
    }
}

/// Lets a caught panic continue even if the thread is already unwinding (then it aborts, as
/// any panic in a destructor during unwinding would): for a panic that user code raised in
/// the caller's own frame, which `catch` caught only to finish the breaker's bookkeeping.
pub(crate) fn resume_now(panic: FirstPanic) -> ! {
    match panic.0 {
        Some(payload) => panic::resume_unwind(*payload),
        None => unreachable!("resume_now is called with a caught panic"),
    }
}

/// Lets a caught panic continue at once.
pub fn resume_payload(payload: Payload) -> ! {
    panic::resume_unwind(payload)
}

/// The first panic caught during one operation; later ones are dropped. Boxed again: one
/// word, not two, in every machine that keeps one (a panic pays the allocation).
#[derive(Default)]
#[must_use = "a caught panic must be resumed"]
pub struct FirstPanic(Option<Box<Payload>>);

impl FirstPanic {
    /// Keeps `payload` unless a panic is already kept. A losing payload is leaked, not
    /// dropped: its destructor is user code, which could run here under the breaker's lock
    /// (and call the breaker, or panic again). A second panic is rare; a few leaked bytes are
    /// the safe price.
    pub fn keep(&mut self, payload: Payload) {
        match self.0 {
            None => self.0 = Some(Box::new(payload)),
            Some(_) => std::mem::forget(payload),
        }
    }

    /// Adds the panics of `other`, keeping the first.
    pub fn merge(&mut self, other: FirstPanic) {
        match (&self.0, other.0) {
            (None, payload) => self.0 = payload,
            (Some(_), Some(payload)) => std::mem::forget(payload),
            (Some(_), None) => {}
        }
    }

    /// Whether a panic was caught.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Whether [`resume`] will let the kept panic continue: one was caught and the thread is
    /// not already unwinding.
    pub fn will_resume(&self) -> bool {
        self.is_some() && !thread::panicking()
    }

    /// Takes the panic kept so far, leaving none.
    pub fn take(&mut self) -> FirstPanic {
        FirstPanic(self.0.take())
    }

    /// Runs user code; if it panics, keeps the panic and answers `fallback`.
    #[inline]
    pub fn catch<R>(&mut self, fallback: R, f: impl FnOnce() -> R) -> R {
        match catch(f) {
            Ok(answer) => answer,
            Err(payload) => {
                self.keep(payload);
                fallback
            }
        }
    }
}

impl fmt::Debug for FirstPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FirstPanic")
            .field(&self.0.as_ref().map(|_| "..."))
            .finish()
    }
}

/// Ends a caught panic without letting it continue: resumed where it is caught again, and
/// dropped (a payload whose destructor panics is leaked). A scrape reports it instead, and so
/// does a status page.
pub fn end(panics: FirstPanic) {
    if let Err(payload) = catch(|| resume(panics)) {
        if let Err(again) = catch(|| drop(payload)) {
            std::mem::forget(again);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(panic: FirstPanic) -> String {
        let payload = *panic.0.expect("a panic was kept");
        payload.downcast_ref::<&str>().unwrap().to_string()
    }

    #[test]
    fn the_first_panic_wins() {
        let mut panics = FirstPanic::default();
        assert_eq!(panics.catch(0, || 7), 7);
        assert!(!panics.is_some());
        assert_eq!(panics.catch(0, || panic!("first")), 0);
        assert_eq!(panics.catch(1, || panic!("second")), 1);
        assert_eq!(message(panics), "first");
    }

    #[test]
    fn resume_continues_the_panic() {
        let mut panics = FirstPanic::default();
        panics.catch((), || panic!("boom"));
        let caught = catch(|| resume(panics)).unwrap_err();
        assert_eq!(*caught.downcast_ref::<&str>().unwrap(), "boom");
        resume(FirstPanic::default()); // nothing kept: nothing happens
    }

    #[test]
    fn resume_drops_the_panic_while_unwinding() {
        struct ResumeOnDrop(Option<FirstPanic>);
        impl Drop for ResumeOnDrop {
            fn drop(&mut self) {
                resume(self.0.take().unwrap());
            }
        }
        let mut panics = FirstPanic::default();
        panics.catch((), || panic!("second"));
        let caught = catch(|| {
            let _guard = ResumeOnDrop(Some(panics));
            panic!("first");
        })
        .unwrap_err();
        assert_eq!(*caught.downcast_ref::<&str>().unwrap(), "first");
    }
}
