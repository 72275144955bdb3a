//! Permits: the two-step API. An admitted call holds a permit and reports its result through
//! it; a permit dropped without a result still reports one.
//!
//! [`Permit`] borrows its breaker; [`OwnedPermit`] holds an `Arc` of it, for a call that
//! outlives the borrow (a spawned task, another thread). Both are made only by the breaker,
//! from the admission it granted, so a permit always reports to the breaker that admitted it.

use std::fmt;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::Breaker;
use crate::classify::{Finish, Unsettled};
use crate::contain::Payload;
use crate::machine::{Ticket, Verdict};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, Outcome, TripPolicy};

/// What a permit owes its breaker: the admission it was granted.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    pub(crate) ticket: Ticket,
    /// When the call was admitted; meaningful only if the breaker measures latencies (a plain
    /// number rather than an `Option` keeps a permit two words smaller on the hot path).
    pub(crate) started: Nanos,
}

impl Grant {
    #[inline]
    pub(crate) fn new(ticket: Ticket, started: Nanos) -> Self {
        Self { ticket, started }
    }

    /// The call's latency at `now`, on the machine's timeline, if the breaker `measures`
    /// latencies (only then is `started` meaningful).
    #[inline]
    pub(crate) fn latency(&self, now: Nanos, measures: bool) -> Option<Duration> {
        measures.then(|| Duration::from_nanos(now.saturating_sub(self.started)))
    }
}

/// What a permit dropped without a verdict reports: an abandoned call (counted as the
/// breaker's [`AbandonedAs`](crate::AbandonedAs) setting says), or a failure if the thread is
/// unwinding from a panic (the call blew up).
fn abandoned() -> Verdict {
    if thread::panicking() {
        Verdict::Reported(Outcome::Failure)
    } else {
        Verdict::Abandoned
    }
}

/// Leave to make one call, from [`Breaker::allow`]. Report how the call ended with
/// [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`exclude`](Permit::exclude); each consumes the permit.
///
/// A permit dropped without a verdict (a cancelled future, an early return with `?`) is an
/// abandoned call: counted in [`Totals::abandoned`](crate::Totals::abandoned), and in the
/// counts as an exclusion by default, so a half-open breaker gets its probe slot back instead
/// of staying stuck ([`Builder::abandoned_as`](crate::Builder::abandoned_as) can make it a
/// failure). Dropped while its thread is panicking, it counts as a failure (whatever the
/// panic: a permit dropped during an unrelated unwind counts as a failure too).
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
pub struct Permit<'a, P: TripPolicy = ConsecutiveFailures, O: Observer = ()> {
    breaker: &'a Breaker<P, O>,
    grant: Grant,
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
pub struct OwnedPermit<P: TripPolicy = ConsecutiveFailures, O: Observer = ()> {
    /// `None` once the verdict is reported (only ever seen so inside this module and by
    /// the tower layer's future, which keeps a reported permit until it is dropped).
    breaker: Option<Arc<Breaker<P, O>>>,
    grant: Grant,
}

impl<'a, P: TripPolicy, O: Observer> Permit<'a, P, O> {
    #[inline(always)]
    pub(crate) fn new(breaker: &'a Breaker<P, O>, grant: Grant) -> Self {
        Self { breaker, grant }
    }

    /// The breaker this permit belongs to.
    pub fn breaker(&self) -> &'a Breaker<P, O> {
        self.breaker
    }

    /// Reports `outcome`, whichever it is.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        let breaker = self.breaker;
        breaker.complete(self.into_grant(), Verdict::Reported(outcome));
    }

    fn fail_open_for(self, open_for: Duration) {
        let breaker = self.breaker;
        breaker.complete_open_for(self.into_grant(), Outcome::Failure, open_for);
    }

    fn breaker_name(&self) -> &str {
        self.breaker.name()
    }

    /// The admission, for the breaker to report itself: the permit no longer reports on drop.
    #[inline(always)]
    pub(crate) fn into_grant(self) -> Grant {
        // Every field is `Copy`, so forgetting the permit leaks nothing.
        std::mem::ManuallyDrop::new(self).grant
    }
}

impl<P: TripPolicy, O: Observer> OwnedPermit<P, O> {
    #[inline(always)]
    pub(crate) fn new(breaker: Arc<Breaker<P, O>>, grant: Grant) -> Self {
        Self {
            breaker: Some(breaker),
            grant,
        }
    }

    /// The breaker this permit belongs to.
    pub fn breaker(&self) -> &Arc<Breaker<P, O>> {
        // A permit that users hold has not reported: reporting consumes it.
        self.breaker
            .as_ref()
            .expect("an unreported permit holds its breaker")
    }

    fn breaker_name(&self) -> &str {
        self.breaker.as_deref().map_or("(reported)", Breaker::name)
    }

    fn fail_open_for(self, open_for: Duration) {
        if let (Some(breaker), grant) = self.into_parts() {
            breaker.complete_open_for(grant, Outcome::Failure, open_for);
        }
    }

    /// Reports `outcome`, whichever it is.
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        // Taken apart rather than reported through `&mut self` and then dropped: the drop
        // glue would need the permit in memory, and its wide copies stall on the narrow
        // stores that built it.
        let (breaker, grant) = self.into_parts();
        if let Some(breaker) = breaker {
            breaker.complete(grant, Verdict::Reported(outcome));
        }
    }

    /// The breaker (if not reported yet) and the admission; the permit no longer reports on
    /// drop.
    #[inline(always)]
    fn into_parts(self) -> (Option<Arc<Breaker<P, O>>>, Grant) {
        let mut this = std::mem::ManuallyDrop::new(self);
        (this.breaker.take(), this.grant)
    }
}

/// What the async calls need of a permit, borrowed or owned: one verdict, or one verdict
/// after user code panicked, through `&mut` so that a future can keep its permit in place.
pub trait Report {
    /// Whether the verdict was reported already.
    fn reported(&self) -> bool;
    /// Reports `outcome`, unless reported already.
    fn report(&mut self, outcome: Outcome);
    /// Reports `outcome` (a failure, or a fatal result) after which the dependency asked
    /// for `open_for` (unless reported already): what
    /// [`failure_open_for`](Permit::failure_open_for) does, for either kind of failure.
    fn report_open_for(&mut self, outcome: Outcome, open_for: std::time::Duration);
    /// Reports `outcome` (unless reported already) after user code panicked with
    /// `payload`, then lets that panic continue (it comes first: a panic while reporting is
    /// dropped).
    fn report_then_resume(&mut self, outcome: Outcome, payload: Payload) -> !;
    /// The verdict, moved out to be settled later (unless reported already): for a call
    /// whose response arrived before its outcome is known ([`Unsettled`]). `None` for the
    /// reports that cannot leave their call (a borrowed permit): the call is then counted
    /// at once.
    #[inline(always)]
    fn unsettle(&mut self) -> Option<Unsettled> {
        None
    }
    /// Whether a failure the classifier says is overload
    /// ([`Classify::overloaded`](crate::classify::Classify::overloaded)) is reported apart,
    /// through [`report_overloaded`](Report::report_overloaded) (a pool's pick); otherwise
    /// the classifier is not asked.
    const SEES_OVERLOAD: bool = false;
    /// Reports a failure the classifier says is overload (unless reported already); asked
    /// only when [`SEES_OVERLOAD`](Report::SEES_OVERLOAD).
    fn report_overloaded(&mut self) {
        self.report(Outcome::Failure);
    }
}

/// An owned permit whose verdict can leave with the response, to be settled later: the tower
/// layers' permits (`'static`, so the verdict can go into a type-erased body). Unused
/// without them.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub struct Handing<'a, P: TripPolicy, O: Observer>(pub &'a mut OwnedPermit<P, O>);

impl<P: TripPolicy + 'static, O: Observer + 'static> Report for Handing<'_, P, O> {
    #[inline(always)]
    fn reported(&self) -> bool {
        self.0.reported()
    }

    #[inline(always)]
    fn report(&mut self, outcome: Outcome) {
        self.0.report(outcome);
    }

    fn report_open_for(&mut self, outcome: Outcome, open_for: Duration) {
        self.0.report_open_for(outcome, open_for);
    }

    fn report_then_resume(&mut self, outcome: Outcome, payload: Payload) -> ! {
        self.0.report_then_resume(outcome, payload)
    }

    fn unsettle(&mut self) -> Option<Unsettled> {
        let breaker = self.0.breaker.take()?;
        Some(Unsettled::new(Box::new(OwnedPermit {
            breaker: Some(breaker),
            grant: self.0.grant,
        })))
    }
}

/// An unsettled call's verdict is its permit, boxed.
impl<P: TripPolicy + 'static, O: Observer + 'static> Finish for OwnedPermit<P, O> {
    fn finish(&mut self, outcome: Outcome, open_for: Option<Duration>) {
        match open_for {
            Some(open_for) => self.report_open_for(outcome, open_for),
            None => self.report(outcome),
        }
    }

    fn breaker_name(&self) -> &str {
        self.breaker.as_ref().map_or("", |b| b.name())
    }
}

impl<P: TripPolicy, O: Observer> Report for Option<Permit<'_, P, O>> {
    #[inline(always)]
    fn reported(&self) -> bool {
        self.is_none()
    }

    #[inline(always)]
    fn report(&mut self, outcome: Outcome) {
        if let Some(permit) = self.take() {
            permit.record(outcome);
        }
    }

    fn report_open_for(&mut self, outcome: Outcome, open_for: std::time::Duration) {
        if let Some(permit) = self.take() {
            let breaker = permit.breaker;
            breaker.complete_open_for(permit.into_grant(), outcome, open_for);
        }
    }

    fn report_then_resume(&mut self, outcome: Outcome, payload: Payload) -> ! {
        match self.take() {
            Some(permit) => {
                let breaker = permit.breaker;
                breaker.record_grant_then_resume(permit.into_grant(), outcome, payload)
            }
            None => crate::contain::resume_payload(payload),
        }
    }
}

impl<P: TripPolicy, O: Observer> Report for OwnedPermit<P, O> {
    #[inline(always)]
    fn reported(&self) -> bool {
        self.breaker.is_none()
    }

    #[inline(always)]
    fn report(&mut self, outcome: Outcome) {
        if let Some(breaker) = self.breaker.take() {
            breaker.complete(self.grant, Verdict::Reported(outcome));
        }
    }

    fn report_open_for(&mut self, outcome: Outcome, open_for: std::time::Duration) {
        if let Some(breaker) = self.breaker.take() {
            breaker.complete_open_for(self.grant, outcome, open_for);
        }
    }

    fn report_then_resume(&mut self, outcome: Outcome, payload: Payload) -> ! {
        match self.breaker.take() {
            Some(breaker) => breaker.record_grant_then_resume(self.grant, outcome, payload),
            None => crate::contain::resume_payload(payload),
        }
    }
}

impl<P: TripPolicy, O: Observer> Drop for Permit<'_, P, O> {
    fn drop(&mut self) {
        self.breaker.complete(self.grant, abandoned());
    }
}

impl<P: TripPolicy, O: Observer> Drop for OwnedPermit<P, O> {
    #[inline]
    fn drop(&mut self) {
        if let Some(breaker) = self.breaker.take() {
            breaker.complete(self.grant, abandoned());
        }
    }
}

/// The verdict methods and `Debug`, the same on both permit types (each has its own `record`).
macro_rules! verdicts {
    ($permit:ty, $name:literal) => {
        impl<P: TripPolicy, O: Observer> $permit {
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

            /// The call failed, and the dependency asked for time: counts the failure and
            /// opens the breaker for at least `open_for`, but no longer than its
            /// [`max_open_duration`](crate::Builder::max_open_duration) (one hour by default),
            /// in one step (see [`Breaker::trip_for`](crate::Breaker::trip_for)), e.g. for a
            /// 429 or 503 with
            /// `Retry-After`. The breaker opens even if this result is too late to count (it
            /// was admitted before a state change): the dependency's answer is news either
            /// way. No effect on the state while the breaker is forced.
            pub fn failure_open_for(self, open_for: std::time::Duration) {
                self.fail_open_for(open_for);
            }

            /// The call's result says nothing about the dependency's health: count it as
            /// neither a success nor a failure. In half-open this gives the probe slot back.
            #[inline]
            pub fn exclude(self) {
                self.record(Outcome::Excluded);
            }
        }

        impl<P: TripPolicy, O: Observer> fmt::Debug for $permit {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct($name)
                    .field("breaker", &self.breaker_name())
                    .field("generation", &self.grant.ticket.generation().get())
                    .finish_non_exhaustive()
            }
        }
    };
}

verdicts!(Permit<'_, P, O>, "Permit");
verdicts!(OwnedPermit<P, O>, "OwnedPermit");
