//! Manual control: forcing a breaker open or closed, releasing it, and opening it for a
//! given time (an upstream's `Retry-After`). Each control is one change transaction, and the
//! state changes it causes are delivered like any other, marked
//! [`Origin::Manual`](crate::observe::Origin::Manual).

use std::time::Duration;

use super::permit::Grant;
use crate::contain::{self, FirstPanic};
use crate::forced::Forced;
use crate::machine::{Change, Machine};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::{Outcome, TripPolicy};

use super::Breaker;

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Forces the breaker open until [`release`](Breaker::release): every call is rejected
    /// with [`Rejected::ForcedOpen`](crate::Rejected::ForcedOpen), and it never goes
    /// half-open by itself. [`state`](Breaker::state) answers
    /// [`Open`](crate::State::Open); [`forced`](Breaker::forced) answers
    /// `Some(Forced::Open)`.
    ///
    /// From closed or half-open this is a change to open (delivered to observers as manual,
    /// counted in [`Totals::opened`](crate::Totals::opened)); results of calls admitted
    /// before it are dropped as stale. Already open, the breaker stays open, with no change
    /// delivered. Replaces [`force_closed`](Breaker::force_closed).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Error, Rejected, State};
    ///
    /// let breaker = Breaker::builder().build();
    /// breaker.force_open();
    /// let r = breaker.execute(|| Ok::<_, ()>("never called"));
    /// assert!(matches!(r, Err(Error::Rejected(Rejected::ForcedOpen))));
    /// assert_eq!(breaker.state(), State::Open);
    /// ```
    pub fn force_open(&self) {
        self.control(|m, now| m.force(Forced::Open, now));
    }

    /// Forces the breaker closed until [`release`](Breaker::release): every call is admitted
    /// and counted as usual (the policy sees every result, the counts and totals grow, the
    /// closed-state window still rolls), but the policy never trips it: observe-only, to
    /// roll a new policy out or to keep a breaker from tripping during a migration.
    ///
    /// From open or half-open this is a change to closed in a new generation (manual).
    /// Replaces [`force_open`](Breaker::force_open).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Forced, State};
    ///
    /// let breaker = Breaker::builder().ready_to_trip(|c| c.consecutive_failures >= 1).build();
    /// breaker.force_closed();
    /// for _ in 0..3 {
    ///     let _ = breaker.execute(|| Err::<(), _>("down"));
    /// }
    /// assert_eq!(breaker.state(), State::Closed);   // never tripped
    /// assert_eq!(breaker.counts().consecutive_failures, 3); // but counted
    /// assert_eq!(breaker.forced(), Some(Forced::Closed));
    /// ```
    pub fn force_closed(&self) {
        self.control(|m, now| m.force(Forced::Closed, now));
    }

    /// Ends a forced mode, if any, and puts the breaker back to normal: closed, in a new
    /// generation (the counts start from zero), whatever its state. From open or half-open
    /// this is a change to closed (manual). Also a manual reset of a breaker that was never
    /// forced (Polly's `Reset()`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, State};
    ///
    /// let breaker = Breaker::builder().build();
    /// breaker.force_open();
    /// breaker.release();
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert!(breaker.allow().is_ok());
    /// ```
    pub fn release(&self) {
        self.control(|m, now| m.release(now));
    }

    /// Opens the breaker now for `open_for` (e.g. an upstream's `Retry-After`), but never
    /// longer than [`max_open_duration`](crate::Builder::max_open_duration): the open period
    /// lasts `min(open_for, max_open_duration)`, then the usual half-open. Left at its
    /// default, `max_open_duration` is one hour (or `timeout`, if that is longer), so a
    /// `trip_for` of two hours opens a default breaker for one; set it longer to honour
    /// longer trips. From closed or half-open this is a change to open (manual) until
    /// `now + min(open_for, max_open_duration)`; already open, the open period is extended
    /// to end no earlier than that (a later end is kept), with no change delivered.
    ///
    /// No effect while the breaker is forced (open or closed): an operator's override wins
    /// over the traffic. The policy is not asked for an open duration.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, Rejected, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder().clock(clock.clone()).build();
    /// breaker.trip_for(Duration::from_secs(120)); // "Retry-After: 120"
    /// assert_eq!(
    ///     breaker.allow().unwrap_err(),
    ///     Rejected::Open { retry_after: Duration::from_secs(120) }
    /// );
    /// clock.advance(Duration::from_secs(30));
    /// assert_eq!(
    ///     breaker.allow().unwrap_err().retry_after(),
    ///     Some(Duration::from_secs(90))
    /// );
    /// clock.advance(Duration::from_secs(91));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// ```
    ///
    /// A trip longer than `max_open_duration` is cut to it: two hours on a default breaker
    /// open it for one.
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, Rejected, State};
    /// use std::time::Duration;
    ///
    /// const HOUR: Duration = Duration::from_secs(3_600);
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder().clock(clock.clone()).build();
    /// breaker.trip_for(2 * HOUR);
    /// assert_eq!(breaker.allow().unwrap_err(), Rejected::Open { retry_after: HOUR });
    /// clock.advance(HOUR);
    /// assert_eq!(breaker.state(), State::Open); // up to the hour's last instant
    /// clock.advance(Duration::from_nanos(1));
    /// assert_eq!(breaker.state(), State::HalfOpen); // past one hour, not two
    ///
    /// // With a longer bound, the whole trip.
    /// let clock = ManualClock::new();
    /// let patient = Breaker::builder()
    ///     .max_open_duration(3 * HOUR)
    ///     .clock(clock.clone())
    ///     .build();
    /// patient.trip_for(2 * HOUR);
    /// assert_eq!(patient.allow().unwrap_err(), Rejected::Open { retry_after: 2 * HOUR });
    /// ```
    pub fn trip_for(&self, open_for: Duration) {
        self.control(|m, now| m.trip_for(open_for, now));
    }

    /// The forced mode in effect, if any: see [`force_open`](Breaker::force_open) and
    /// [`force_closed`](Breaker::force_closed). Reads no clock, changes nothing.
    pub fn forced(&self) -> Option<Forced> {
        self.locked(|m| m.forced())
    }

    /// Records `outcome` (a failure, or a fatal result) for the admission `grant` and opens
    /// the breaker for at least `open_for`, in one step (the permits' `failure_open_for`, a
    /// classifier's [`open_for`](crate::Classify::open_for)). The opening applies even if the
    /// result itself is stale: it is fresh news from the dependency.
    pub(crate) fn complete_open_for(&self, grant: Grant, outcome: Outcome, open_for: Duration) {
        let mut panics = FirstPanic::default();
        let now = self.clock.try_now(&mut panics);
        let needs_latency = self.needs_latency;
        self.transact(now, &mut panics, |m, now, changes| {
            let latency = grant.latency(now, needs_latency);
            changes.extend(m.complete_open_for(grant.ticket, outcome, latency, open_for, now));
        });
        contain::resume(panics);
    }

    /// Runs one manual control as a change transaction, at the clock's time (or the latest
    /// the machine saw, if the clock panics), then lets any panic of user code continue.
    pub(super) fn control<C: IntoIterator<Item = Change>>(
        &self,
        op: impl FnOnce(&mut Machine<P>, Nanos) -> C,
    ) {
        let mut panics = FirstPanic::default();
        let now = self.clock.try_now(&mut panics);
        self.transact(now, &mut panics, |m, now, changes| {
            changes.extend(op(m, now).into_iter().map(Some));
        });
        contain::resume(panics);
    }
}
