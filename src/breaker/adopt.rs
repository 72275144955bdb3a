//! Adopting decisions made elsewhere: a fleet of processes that share one breaker's decision
//! (the `redis` feature's shared breaker, or one on a store of your own) applies what the
//! fleet decided to the local breaker. Each is one change transaction, and the state changes
//! it causes are delivered like any other, marked
//! [`Origin::Adopted`](crate::observe::Origin::Adopted).

use std::time::Duration;

use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::Breaker;

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Follows a trip decided elsewhere: open for exactly `open_for` from now (on this
    /// breaker's clock; at most its [`max_open_duration`](crate::Builder::max_open_duration)),
    /// then the usual half-open. `Duration::ZERO` means the fleet is half-open already: the
    /// breaker goes half-open at once (a second change, adopted too, delivered right after
    /// the first), so
    /// the next call, even at this instant, is a probe.
    ///
    /// From closed or half-open this is a change to open (delivered to observers with
    /// [`Origin::Adopted`](crate::observe::Origin::Adopted), counted in
    /// [`Totals::opened`](crate::Totals::opened)); results of calls admitted before it are
    /// dropped as stale. Already open, the open period is *replaced* (unlike
    /// [`trip_for`](Breaker::trip_for), which only extends it): the fleet's deadline
    /// governs, so that every process goes half-open together. No effect while forced.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::observe::{Observer, Origin, Transition};
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::sync::Mutex;
    /// use std::time::Duration;
    ///
    /// #[derive(Default)]
    /// struct Seen(Mutex<Vec<(State, Origin)>>);
    /// impl Observer for Seen {
    ///     fn on_transition(&self, t: &Transition<'_>) {
    ///         self.0.lock().unwrap().push((t.to, t.origin));
    ///     }
    /// }
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder().clock(clock.clone()).observer(Seen::default()).build();
    /// breaker.adopt_open(Duration::from_secs(20)); // another instance tripped
    /// assert_eq!(breaker.state(), State::Open);
    /// clock.advance(Duration::from_secs(21));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// breaker.adopt_closed(); // another instance's probe succeeded
    /// let seen = breaker.observer().0.lock().unwrap().clone();
    /// assert_eq!(
    ///     seen,
    ///     [
    ///         (State::Open, Origin::Adopted),
    ///         (State::HalfOpen, Origin::Breaker),
    ///         (State::Closed, Origin::Adopted)
    ///     ]
    /// );
    /// ```
    pub fn adopt_open(&self, open_for: Duration) {
        self.control(|m, now| m.adopt_open(open_for, now).into_iter().flatten());
    }

    /// Follows a recovery decided elsewhere: from open or half-open, a change to closed in a
    /// new generation (marked [`Origin::Adopted`](crate::observe::Origin::Adopted)); already closed,
    /// nothing changes and the counts are kept. No effect while forced.
    pub fn adopt_closed(&self) {
        self.control(|m, now| m.adopt_closed(now));
    }
}
