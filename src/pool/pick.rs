//! [`Pick`]: the endpoint a pool chose for one call, reporting its result like a permit.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::time::Duration;

use crate::breaker::{Breaker, OwnedPermit, Report};
use crate::classify::Finish;
use crate::contain::{self, Payload};
use crate::observe::Observer;
use crate::outcome::Outcome;
use crate::policy::{ConsecutiveFailures, TripPolicy};

use super::endpoint::Endpoint;
use super::hang_watch::Tracked;
use super::limit::{Place, Said};
use crate::nanos::Nanos;

/// The endpoint a [`Pool`](super::Pool) chose for one call: send the call to
/// [`key`](Pick::key), then report its result ([`success`](Pick::success),
/// [`failure`](Pick::failure), [`exclude`](Pick::exclude), [`record`](Pick::record)), as
/// with a permit.
///
/// - Owned (`'static`, `Send`): move it into the call's future.
/// - It counts toward its endpoint's calls in flight until reported or dropped.
/// - Dropped without a report, the call counts as excluded (neither a success nor a
///   failure; a half-open endpoint gets its probe slot back). Dropped while its thread
///   panics, it counts as a failure, as a permit does.
/// - An endpoint kept in rotation over the isolation cap ([`Pool::max_isolated`](super::Pool::max_isolated))
///   is picked while its breaker is open: [`over_cap`](Pick::over_cap) says so, and its
///   result is counted by the pool ([`PoolStats`](super::PoolStats)), not by the breaker,
///   which revives by its own probes.
#[must_use = "a pick reports its call's result; dropped unused, it counts as an exclusion"]
pub struct Pick<K, P: TripPolicy = ConsecutiveFailures, O: Observer = ()> {
    endpoint: Arc<Endpoint<K, P, O>>,
    /// `None` for a pick over the cap (the breaker was open), and once reported.
    permit: Option<OwnedPermit<P, O>>,
    over_cap: bool,
    reported: bool,
    /// Its start slot on the endpoint, with a pool deadline.
    tracked: Option<Tracked>,
    /// Its place under the endpoint's limit, with a pool limit, until given back.
    place: Place,
}

impl<K, P: TripPolicy, O: Observer> Pick<K, P, O> {
    /// A pick the endpoint's breaker admitted with `permit`, going out at `at` on the pool's
    /// clock (read before the admission; `None`: read now, with a deadline, if no user code
    /// reads it).
    pub(super) fn admitted(
        endpoint: Arc<Endpoint<K, P, O>>,
        permit: OwnedPermit<P, O>,
        at: Option<Nanos>,
        place: Place,
    ) -> Self {
        let tracked = endpoint.start(at, place.held());
        Self {
            endpoint,
            permit: Some(permit),
            over_cap: false,
            reported: false,
            tracked,
            place,
        }
    }

    /// A pick the endpoint's breaker admitted with `permit` after a passed health check: a
    /// place under its limit if one is free (the endpoint was out: its calls are few), read
    /// on the pool's clock if no user code reads it (a user clock's panic cannot be let out
    /// here, the permit held); else the call goes without one.
    pub(crate) fn after_check(endpoint: Arc<Endpoint<K, P, O>>, permit: OwnedPermit<P, O>) -> Self {
        let place = match endpoint.shared.now_infallible() {
            Some(now) => endpoint.take_place(Some(now)).unwrap_or(Place::NONE),
            None => Place::NONE,
        };
        Self::admitted(endpoint, permit, None, place)
    }

    /// A pick of an isolated endpoint kept in rotation over the cap, going out at `at`.
    pub(super) fn kept_in_rotation(
        endpoint: Arc<Endpoint<K, P, O>>,
        at: Option<Nanos>,
        place: Place,
    ) -> Self {
        let tracked = endpoint.start(at, place.held());
        let stats = &endpoint.shared.stats;
        stats.over_cap.fetch_add(1, Ordering::Relaxed);
        Self {
            endpoint,
            permit: None,
            over_cap: true,
            reported: false,
            tracked,
            place,
        }
    }

    /// Its endpoint.
    pub(super) fn endpoint(&self) -> &Endpoint<K, P, O> {
        &self.endpoint
    }

    /// The endpoint's key: where to send the call.
    pub fn key(&self) -> &K {
        &self.endpoint.key
    }

    /// The endpoint's breaker.
    pub fn breaker(&self) -> &Arc<Breaker<P, O>> {
        &self.endpoint.breaker
    }

    /// Whether the endpoint was picked over the isolation cap, its breaker open.
    pub fn over_cap(&self) -> bool {
        self.over_cap
    }

    /// Reports the call a success.
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Reports the call a failure.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Reports the call excluded: it counts neither way.
    pub fn exclude(self) {
        self.record(Outcome::Excluded);
    }

    /// Reports `outcome`, whichever it is.
    pub fn record(mut self, outcome: Outcome) {
        self.settle(outcome);
    }

    /// Reports that the endpoint said it is overloaded (an HTTP 503 or 429 with
    /// `Retry-After`, gRPC's `RESOURCE_EXHAUSTED`, brpc's `ELIMIT`): it is alive and
    /// shedding load, which is not a fault, so by default the breaker counts the call as
    /// excluded and the endpoint stays in rotation (a failure instead with
    /// [`Pool::overload_isolates`](super::Pool::overload_isolates)). Counted in
    /// [`PoolStats::overloaded`](super::PoolStats::overloaded).
    pub fn overloaded(mut self) {
        self.settle_overloaded();
    }

    /// [`overloaded`](Pick::overloaded) through `&mut` (a future keeps its pick in place).
    pub(crate) fn settle_overloaded(&mut self) {
        if self.reported {
            return;
        }
        let shared = &self.endpoint.shared;
        shared.stats.overloaded.fetch_add(1, Ordering::Relaxed);
        let outcome = if shared.overload_isolates.load(Ordering::Relaxed) {
            Outcome::Failure
        } else {
            Outcome::Excluded
        };
        self.settle_saying(outcome, Said::Overloaded);
    }

    /// Tells the endpoint's limit what the call's end says of it, if the pick held a place
    /// under it (the place itself comes back with the pick's end, counted by `book`); last
    /// of a report: a user clock's panic continues from here, everything else recorded.
    fn learn(&mut self, said: Said) {
        let place = std::mem::replace(&mut self.place, Place::NONE);
        if place.held() {
            self.endpoint.learn(place, said);
        }
    }

    /// The pick's own bookkeeping for `outcome` (its endpoint's picks in flight, the pool's
    /// counts of picks over the cap): `false` if it was reported already.
    fn book(&mut self, outcome: Outcome) -> bool {
        if std::mem::replace(&mut self.reported, true) {
            return false;
        }
        self.endpoint.end(self.tracked);
        if self.over_cap {
            let stats = &self.endpoint.shared.stats;
            let counter = match outcome {
                Outcome::Success => Some(&stats.over_cap_successes),
                Outcome::Excluded => None,
                _ => Some(&stats.over_cap_failures),
            };
            if let Some(counter) = counter {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    fn settle(&mut self, outcome: Outcome) {
        self.settle_saying(outcome, Said::Outcome(outcome));
    }

    fn settle_saying(&mut self, outcome: Outcome, said: Said) {
        if self.book(outcome) {
            if let Some(permit) = self.permit.take() {
                permit.record(outcome);
            }
            self.endpoint.answered(outcome, self.tracked);
            self.learn(said);
        }
    }
}

impl<K, P: TripPolicy, O: Observer> Pick<K, P, O> {
    /// The pick moved out whole, for a verdict settled later ([`HandingPick`]): the
    /// endpoint's call stays in flight, and its bookkeeping waits, until the outcome is
    /// known; this one is left reported. `None` if it was reported already.
    ///
    /// [`HandingPick`]: super::HandingPick
    pub(super) fn hand_over(&mut self) -> Option<Self> {
        if std::mem::replace(&mut self.reported, true) {
            return None;
        }
        Some(Pick {
            endpoint: Arc::clone(&self.endpoint),
            permit: self.permit.take(),
            over_cap: self.over_cap,
            reported: false,
            tracked: self.tracked,
            place: std::mem::replace(&mut self.place, Place::NONE),
        })
    }
}

impl<K, P: TripPolicy, O: Observer> Drop for Pick<K, P, O> {
    fn drop(&mut self) {
        // A pick dropped unreported, or a report cut short by a panic: its limit learns
        // nothing, and its place (if it holds one) comes back with its end, below.
        if self.reported {
            return;
        }
        if std::thread::panicking() {
            // As a permit dropped while panicking: a failure (the permit's drop says so).
            self.book(Outcome::Failure);
            drop(self.permit.take());
        } else if self.book(Outcome::Excluded) {
            // Abandoned: excluded, and no answer from the endpoint.
            if let Some(permit) = self.permit.take() {
                permit.record(Outcome::Excluded);
            }
        }
    }
}

/// A pick reports as a permit does, for the futures that settle calls (a tower service over
/// the pool).
impl<K, P: TripPolicy, O: Observer> Report for Pick<K, P, O> {
    fn reported(&self) -> bool {
        self.reported
    }

    fn report(&mut self, outcome: Outcome) {
        self.settle(outcome);
    }

    fn report_open_for(&mut self, outcome: Outcome, open_for: Duration) {
        if self.book(outcome) {
            if let Some(mut permit) = self.permit.take() {
                permit.report_open_for(outcome, open_for);
            }
            self.endpoint.answered(outcome, self.tracked);
            // The endpoint said when to come back: it is shedding load.
            self.learn(Said::Overloaded);
        }
    }

    fn report_then_resume(&mut self, outcome: Outcome, payload: Payload) -> ! {
        match (self.book(outcome), self.permit.take()) {
            (true, Some(mut permit)) => permit.report_then_resume(outcome, payload),
            _ => contain::resume_payload(payload),
        }
    }

    const SEES_OVERLOAD: bool = true;

    fn report_overloaded(&mut self) {
        self.settle_overloaded();
    }
}

/// An unsettled pick's verdict is the pick, boxed.
impl<K, P, O> Finish for Pick<K, P, O>
where
    K: Send + Sync + 'static,
    P: TripPolicy + 'static,
    O: Observer + 'static,
{
    fn finish(&mut self, outcome: Outcome, open_for: Option<Duration>) {
        match open_for {
            Some(open_for) => self.report_open_for(outcome, open_for),
            None => self.report(outcome),
        }
    }

    fn breaker_name(&self) -> &str {
        self.endpoint.breaker.name()
    }
}

impl<K: fmt::Debug, P: TripPolicy, O: Observer> fmt::Debug for Pick<K, P, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pick")
            .field("key", &self.endpoint.key)
            .field("over_cap", &self.over_cap())
            .finish_non_exhaustive()
    }
}
