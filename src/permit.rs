//! Permits: the two-step API. An admitted call holds a permit and reports its result through
//! it; a permit dropped without a result still reports one.
//!
//! [`Permit`] borrows its breaker; [`OwnedPermit`] holds an `Arc` of it, for a call that
//! outlives the borrow (a spawned task, another thread).

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::thread;

use crate::breaker::Breaker;
use crate::clock::Nanos;
use crate::policy::{Outcome, TripPolicy};
use crate::state::Ticket;

/// What a permit owes its breaker: the admission it was given.
#[derive(Debug, Clone, Copy)]
struct Admission {
    ticket: Ticket,
    /// When the call was admitted; meaningful only if the breaker measures latencies (a plain
    /// number rather than an `Option` keeps a permit two words smaller on the hot path).
    started: Nanos,
}

impl Admission {
    #[inline]
    fn report<P: TripPolicy>(self, breaker: &Breaker<P>, outcome: Outcome) {
        breaker.complete(self.ticket, outcome, self.started);
    }
}

/// How a permit dropped without a verdict counts: an exclusion (the call was abandoned), or
/// a failure if the thread is unwinding from a panic (the call blew up).
fn abandoned() -> Outcome {
    if thread::panicking() {
        Outcome::Failure
    } else {
        Outcome::Excluded
    }
}

/// Leave to make one call, from [`Breaker::allow`]. Report how the call ended with
/// [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`exclude`](Permit::exclude); each consumes the permit.
///
/// A permit dropped without a verdict (a cancelled future, an early return with `?`) counts
/// as an exclusion, so a half-open breaker gets its probe slot back instead of staying stuck;
/// dropped while its thread is panicking, it counts as a failure.
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
///
/// let breaker = Breaker::builder().build();
/// match breaker.allow() {
///     Ok(permit) => {
///         let ok = true; // make the call here
///         if ok { permit.success() } else { permit.failure() }
///     }
///     Err(rejected) => eprintln!("not sent: {rejected}"),
/// }
/// assert_eq!(breaker.counts().total_successes, 1);
/// ```
#[must_use = "a permit reports its call's result; dropped unused, it counts as an exclusion"]
pub struct Permit<'a, P: TripPolicy> {
    breaker: &'a Breaker<P>,
    admission: Admission,
}

/// Like [`Permit`], but holding its breaker by `Arc`: `'static`, so it can move into a
/// spawned task or thread. From [`Breaker::allow_owned`].
///
/// # Examples
///
/// ```
/// use lazybreaker::Breaker;
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().build());
/// let permit = breaker.allow_owned().expect("closed");
/// std::thread::spawn(move || permit.success()).join().unwrap();
/// assert_eq!(breaker.counts().total_successes, 1);
/// ```
#[must_use = "a permit reports its call's result; dropped unused, it counts as an exclusion"]
pub struct OwnedPermit<P: TripPolicy> {
    breaker: Arc<Breaker<P>>,
    admission: Admission,
    /// Whether a verdict is still owed: cleared by a report, read on drop.
    pending: bool,
}

impl<'a, P: TripPolicy> Permit<'a, P> {
    #[inline]
    pub(crate) fn new(breaker: &'a Breaker<P>, ticket: Ticket, started: Nanos) -> Self {
        Self {
            breaker,
            admission: Admission { ticket, started },
        }
    }

    /// The breaker this permit belongs to.
    pub fn breaker(&self) -> &'a Breaker<P> {
        self.breaker
    }

    /// Turns this permit into an [`OwnedPermit`] holding `breaker`, which must be the
    /// breaker it came from.
    ///
    /// # Panics
    ///
    /// If `breaker` is another breaker than the one that issued this permit.
    #[track_caller]
    pub fn into_owned(self, breaker: Arc<Breaker<P>>) -> OwnedPermit<P> {
        assert!(
            std::ptr::eq(self.breaker, &*breaker),
            "Permit::into_owned: not the breaker that issued the permit"
        );
        // The owed verdict moves to the owned permit: this one must not report on drop.
        let this = ManuallyDrop::new(self);
        OwnedPermit {
            breaker,
            admission: this.admission,
            pending: true,
        }
    }

    /// Reports `outcome`, whichever it is.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        // The verdict is given: no drop-time report. Every field is `Copy`, so nothing leaks.
        let this = ManuallyDrop::new(self);
        this.admission.report(this.breaker, outcome);
    }
}

impl<P: TripPolicy> OwnedPermit<P> {
    /// The breaker this permit belongs to.
    pub fn breaker(&self) -> &Arc<Breaker<P>> {
        &self.breaker
    }

    /// Reports `outcome`, whichever it is.
    pub fn record(mut self, outcome: Outcome) {
        self.pending = false;
        self.admission.report(&self.breaker, outcome);
    }
}

impl<P: TripPolicy> Drop for Permit<'_, P> {
    fn drop(&mut self) {
        self.admission.report(self.breaker, abandoned());
    }
}

impl<P: TripPolicy> Drop for OwnedPermit<P> {
    fn drop(&mut self) {
        if self.pending {
            self.admission.report(&self.breaker, abandoned());
        }
    }
}

/// The verdict methods, the same on both permit types (each has its own `record`).
macro_rules! verdicts {
    ($permit:ty) => {
        impl<P: TripPolicy> $permit {
            /// The call succeeded.
            #[inline]
            pub fn success(self) {
                self.record(Outcome::Success);
            }

            /// The call failed.
            #[inline]
            pub fn failure(self) {
                self.record(Outcome::Failure);
            }

            /// The call's result says nothing about the dependency's health: count it as
            /// neither a success nor a failure. In half-open this gives the probe slot back.
            #[inline]
            pub fn exclude(self) {
                self.record(Outcome::Excluded);
            }
        }

        impl<P: TripPolicy> fmt::Debug for $permit {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($permit))
                    .field("breaker", &self.breaker.name())
                    .field("admission", &self.admission)
                    .finish()
            }
        }
    };
}

verdicts!(Permit<'_, P>);
verdicts!(OwnedPermit<P>);
