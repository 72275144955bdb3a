//! The observation seam: how a breaker tells the outside world what happens to it.
//!
//! A [`Breaker`](crate::Breaker) has an [`Observer`] type parameter, `()` by default, which
//! observes nothing and costs nothing: its hooks are empty and monomorphised away. An
//! observer of your own (metrics, logs, a tracing span) is given with
//! [`Builder::observer`](crate::Builder::observer); the
//! [`on_state_change`](crate::Builder::on_state_change) callback is sugar for one.
//!
//! Every hook runs **outside** the breaker's lock, so it may call back into the breaker.
//! State changes reach observers exactly once each, in the order they happened, one at a
//! time (see [`Observer::on_transition`]). A hook that panics does not disturb the breaker:
//! the panic is caught, every remaining change is still delivered, and then the first panic
//! continues to the caller of the breaker method that delivered the change: normally the one
//! that made it, or the thread that was already delivering when it was made (see
//! [`Observer::on_transition`]). It is dropped if that thread is already unwinding from a
//! panic of its own.

use std::sync::Arc;
use std::time::Duration;

use crate::contain::{self, FirstPanic};
use crate::counts::{Counts, Totals};
use crate::forced::Forced;
use crate::state::State;

pub use crate::origin::{Ejection, Origin};

mod fleet;
mod history;
pub use fleet::FleetEvent;
pub use history::{History, Recorded};

/// Observes a breaker: a set of hooks, each with an empty default.
///
/// # Examples
///
/// Counting the trips of a breaker:
///
/// ```
/// use lazybreaker::observe::{Observer, Transition};
/// use lazybreaker::{Breaker, State};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// #[derive(Debug, Default)]
/// struct Trips(AtomicU64);
///
/// impl Observer for Trips {
///     fn on_transition(&self, t: &Transition<'_>) {
///         if t.to == State::Open {
///             // The counts that caused the trip, not the new generation's empty ones.
///             assert_eq!(t.counts.consecutive_failures, 2);
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let breaker = Breaker::builder()
///     .ready_to_trip(|c| c.consecutive_failures >= 2)
///     .observer(Trips::default())
///     .build();
/// for _ in 0..2 {
///     let _ = breaker.execute(|| Err::<(), _>("boom"));
/// }
/// assert_eq!(breaker.observer().0.load(Ordering::Relaxed), 1);
/// ```
pub trait Observer: Send + Sync {
    /// Called with each state change, after the change and outside the breaker's lock;
    /// and with each failed health check, which is not a state change: the breaker stays
    /// open for another period, told as a transition from `Open` to `Open` with
    /// [`Origin::HealthCheck`] and the new period in `open_for` (the breaker's
    /// `on_state_change` callback is not called for it).
    ///
    /// Changes are delivered exactly once each, in the order they happened, one at a time:
    /// the thread whose call made a change delivers it before that call returns, unless
    /// another thread is already delivering, which then delivers it next. A change made from
    /// inside this hook is delivered right after it returns.
    fn on_transition(&self, transition: &Transition<'_>) {
        let _ = transition;
    }

    /// Whether [`on_transition`](Observer::on_transition) wants to be called at all. The
    /// default is `true`; `()` says `false`, so that a breaker without observers does not
    /// even queue its state changes.
    fn observes_transitions(&self) -> bool {
        true
    }

    /// Called when a breaker that shares its decisions with a fleet loses or regains its
    /// store (see [`FleetEvent`]), outside every lock, on the call that found out.
    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let _ = event;
    }

    /// Called when a breaker's throttle ([`Builder::throttle`](crate::Builder::throttle))
    /// starts turning calls away (its probability rose above zero) or stops (back to zero,
    /// or the breaker left the closed state): not a state change, and `on_state_change` is
    /// not called for it. Outside the breaker's lock, on the call that found out (the
    /// lock-free lane leaves a throttle's stop to the next call that takes the lock, which
    /// the lane makes happen once the probability it sees is zero again).
    fn on_throttle(&self, event: &ThrottleEvent<'_>) {
        let _ = event;
    }

    /// The [`History`] this observer keeps, if any: how a status page finds a breaker's
    /// recent changes from the breaker alone. The default is `None`; a `History` answers
    /// itself, an `Arc` or a `Box` what it holds, and a pair its first history.
    fn history(&self) -> Option<&History> {
        None
    }
}

/// The default observer: observes nothing, at no cost.
impl Observer for () {
    fn observes_transitions(&self) -> bool {
        false
    }
}

impl<O: Observer + ?Sized> Observer for Arc<O> {
    fn on_transition(&self, transition: &Transition<'_>) {
        (**self).on_transition(transition)
    }

    fn on_throttle(&self, event: &ThrottleEvent<'_>) {
        (**self).on_throttle(event)
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        (**self).on_fleet(event)
    }

    fn observes_transitions(&self) -> bool {
        (**self).observes_transitions()
    }

    fn history(&self) -> Option<&History> {
        (**self).history()
    }
}

impl<O: Observer + ?Sized> Observer for Box<O> {
    fn on_transition(&self, transition: &Transition<'_>) {
        (**self).on_transition(transition)
    }

    fn on_throttle(&self, event: &ThrottleEvent<'_>) {
        (**self).on_throttle(event)
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        (**self).on_fleet(event)
    }

    fn observes_transitions(&self) -> bool {
        (**self).observes_transitions()
    }

    fn history(&self) -> Option<&History> {
        (**self).history()
    }
}

/// Two observers, both told everything (the first first). The second is told even if the
/// first panics; then the first panic continues (a second one is dropped).
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_transition(&self, transition: &Transition<'_>) {
        let mut panics = FirstPanic::default();
        panics.catch((), || self.0.on_transition(transition));
        panics.catch((), || self.1.on_transition(transition));
        contain::resume(panics);
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let mut panics = FirstPanic::default();
        panics.catch((), || self.0.on_fleet(event));
        panics.catch((), || self.1.on_fleet(event));
        contain::resume(panics);
    }

    fn on_throttle(&self, event: &ThrottleEvent<'_>) {
        let mut panics = FirstPanic::default();
        panics.catch((), || self.0.on_throttle(event));
        panics.catch((), || self.1.on_throttle(event));
        contain::resume(panics);
    }

    fn observes_transitions(&self) -> bool {
        self.0.observes_transitions() || self.1.observes_transitions()
    }

    fn history(&self) -> Option<&History> {
        self.0.history().or_else(|| self.1.history())
    }
}

/// A throttle starting or stopping ([`Observer::on_throttle`]).
///
/// # Examples
///
/// ```
/// use lazybreaker::observe::{Observer, ThrottleEvent};
/// use lazybreaker::{throttle::Throttle, Breaker, ManualClock};
/// use std::sync::Mutex;
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<(bool, f64)>>);
///
/// impl Observer for Log {
///     fn on_throttle(&self, e: &ThrottleEvent<'_>) {
///         self.0.lock().unwrap().push((e.throttling, e.probability));
///     }
/// }
///
/// let breaker = Breaker::builder()
///     .never_trips(true)
///     .throttle(Throttle::new(2.0)?.min_requests(4))
///     .observer(Log::default())
///     .clock(ManualClock::new())
///     .build();
/// for _ in 0..4 {
///     breaker.allow().unwrap().failure();
/// }
/// // 4 requests, no accept: p = 4 / 5 from the fourth failure on.
/// assert_eq!(*breaker.observer().0.lock().unwrap(), [(true, 0.8)]);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ThrottleEvent<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// `true`: it started turning calls away; `false`: it stopped.
    pub throttling: bool,
    /// The probability the next call meets (zero when it stopped).
    pub probability: f64,
    /// Calls it turned away so far ([`Totals::rejected_throttled`](crate::Totals::rejected_throttled)).
    pub throttled: u64,
}

/// A state change, as observers see it: what changed, when, and the numbers that caused it.
///
/// `from == to` only for a failed health check: `Open` to `Open`, [`Origin::HealthCheck`],
/// the open period re-armed for `open_for` (not another opening: `totals.opened` and the
/// breaker's transition counts do not move).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// The state before the change.
    pub from: State,
    /// The state after the change.
    pub to: State,
    /// When the change happened, on the breaker's clock.
    pub at: Duration,
    /// The counts of the generation that ended with this change: for a trip, the counts that
    /// tripped the breaker (gobreaker clears them before its callback runs; here they are
    /// kept).
    pub counts: Counts,
    /// The breaker's lifetime totals right after the change (`opened` includes this change,
    /// when it opened the breaker).
    pub totals: Totals,
    /// Who made the change: the breaker's own calls, a manual control, or a decision made
    /// elsewhere and adopted (a fleet's).
    pub origin: Origin,
    /// The decision, for a change to open: how long from [`at`](Self::at) the open period
    /// lasts (zero: an adopted open period that is over already, so the next call is a
    /// probe). `None` for a change to closed or half-open, and for a forced open, which lasts
    /// until released.
    pub open_for: Option<Duration>,
    /// The manual override in force right after the change
    /// ([`Breaker::forced`](crate::Breaker::forced)).
    pub forced: Option<Forced>,
    /// Whether the breaker is in dry run ([`Builder::dry_run`](crate::Builder::dry_run)):
    /// the change happened, but the breaker admits every call all the same.
    pub dry_run: bool,
}

impl<'a> Transition<'a> {
    /// A transition of `breaker` from `from` to `to` at `at`, with empty counts and totals,
    /// made by the breaker itself: for an observer's own tests. Fill the rest in with the `with_*` methods.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::observe::Transition;
    /// use lazybreaker::{Counts, State};
    /// use std::time::Duration;
    ///
    /// let t = Transition::new("payments", State::Closed, State::Open, Duration::from_secs(3))
    ///     .with_counts(Counts::default().with_consecutive_failures(6));
    /// assert_eq!((t.breaker, t.to, t.counts.consecutive_failures), ("payments", State::Open, 6));
    /// ```
    pub fn new(breaker: &'a str, from: State, to: State, at: Duration) -> Self {
        Self {
            breaker,
            from,
            to,
            at,
            counts: Counts::default(),
            totals: Totals::default(),
            origin: Origin::Breaker,
            open_for: None,
            forced: None,
            dry_run: false,
        }
    }

    /// This transition with `counts`.
    #[must_use]
    pub fn with_counts(mut self, counts: Counts) -> Self {
        self.counts = counts;
        self
    }

    /// This transition with `totals`.
    #[must_use]
    pub fn with_totals(mut self, totals: Totals) -> Self {
        self.totals = totals;
        self
    }

    /// This transition, made by `origin`.
    #[must_use]
    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    /// This transition, opening the breaker for `open_for`.
    #[must_use]
    pub fn with_open_for(mut self, open_for: Option<Duration>) -> Self {
        self.open_for = open_for;
        self
    }

    /// This transition, of a breaker in dry run or not.
    #[must_use]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// This transition, with `forced` in force after it.
    #[must_use]
    pub fn with_forced(mut self, forced: Option<Forced>) -> Self {
        self.forced = forced;
        self
    }
}
