//! Health checks beside the calls: the async pick ([`Pool::pick_async`], and
//! [`pick_beside`](Pool::pick_beside) for a caller that cannot wait, the tower service over
//! the pool), the checks it parks in their endpoints and drives, and [`HandingPick`], a
//! pick whose verdict leaves with the response.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::breaker::gate::{self, Gate, Ready};
use crate::breaker::{Breaker, Report};
use crate::classify::Unsettled;
use crate::contain::{self, FirstPanic, Payload};
use crate::error::Rejected;
use crate::observe::Observer;
use crate::outcome::Outcome;
use crate::policy::TripPolicy;

use super::census::walk;
use super::choose::random;
use super::endpoint::Endpoint;
use super::pick::Pick;
use super::picking::{admit, Choice};
use super::Pool;

/// The most health checks one [`Pool::pick_async`] runs before it settles for a pick that
/// runs none.
const MAX_CHECKS_PER_PICK: usize = 2;

/// What an async caller's pick gave (`door::pick_beside`: see [`Pool::pick_async`]).
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub enum Beside<K, P: TripPolicy, O: Observer> {
    /// An endpoint that takes the call.
    Pick(Pick<K, P, O>),
    /// The pool's one endpoint, whose check is under way: wait for it.
    Wait(Arc<Endpoint<K, P, O>>, Gate<Arc<Breaker<P, O>>>),
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O> {
    /// [`pick`](Pool::pick), except that an endpoint whose open period is over runs its
    /// [health check](Pool::health_check) first: passed, this pick is its first probe;
    /// failed, the endpoint is isolated for its next open period and the pick goes on to
    /// the others (at most two checks per pick; then it picks among the rest without
    /// checking). Calls that arrive while a check runs pick other endpoints.
    ///
    /// **No caller waits for a check.** The check is polled once in this pick; a check that
    /// does not answer at once (a connect, a request) is left running beside the calls, and
    /// this pick takes another endpoint if one admits the call, or, when every endpoint is
    /// out, answers [`Rejected::NoEndpoint`] at once (with the time the check may take). The
    /// async picks that follow drive the check (each polls it once, with its own waker); the
    /// first to find it passed takes the revived endpoint as its probe. Only a pool of one
    /// endpoint waits for its check (nothing else can take the call, and no pick might come
    /// to drive it). No task is spawned, no timer set: a check nobody drives is taken over
    /// after its breaker's [`check_timeout`](crate::Builder::check_timeout).
    ///
    /// # Panics
    ///
    /// If the check panics: it counts as failed (the endpoint is isolated again), and the
    /// panic continues out of the pick that polled it.
    ///
    /// # Errors
    ///
    /// As [`pick`](Pool::pick).
    pub async fn pick_async(&self) -> Result<Pick<K, P, O>, Rejected> {
        match poll_fn(|cx| Poll::Ready(self.pick_beside(cx))).await? {
            Beside::Pick(pick) => Ok(pick),
            Beside::Wait(endpoint, gate) => match gate.await {
                Ok(permit) => Ok(Pick::after_check(endpoint, permit)),
                // The pool's one endpoint failed its check: out, and the pick says when to
                // come back.
                Err(_) => self.pick(),
            },
        }
    }

    /// The pick of an async caller, at once, its health checks run beside the calls (see
    /// [`pick_async`](Pool::pick_async)): parked checks driven with `cx` first (a passed one
    /// is this pick's), then the usual choice, a due check polled once and parked if it does
    /// not answer at once. [`Beside::Wait`] only for a pool of one endpoint whose check is
    /// under way: the caller waits for that check.
    pub(crate) fn pick_beside(&self, cx: &mut Context<'_>) -> Result<Beside<K, P, O>, Rejected> {
        if self.shared.parked.load(Ordering::Relaxed) > 0 {
            if let Some(pick) = self.drive_parked(cx) {
                return Ok(Beside::Pick(pick));
            }
        }
        // A failed check isolates its endpoint, and the pick goes on; at most two checks
        // per pick (each started here, none waited for), then a plain pick.
        for _ in 0..MAX_CHECKS_PER_PICK {
            match self.choose(true)? {
                Choice::Pick(pick) => return Ok(Beside::Pick(pick)),
                Choice::Check(endpoint, mut gate) => {
                    match Pin::new(&mut gate).poll(cx) {
                        Poll::Ready(Ok(permit)) => {
                            return Ok(Beside::Pick(Pick::after_check(endpoint, permit)))
                        }
                        Poll::Ready(Err(_)) => continue,
                        Poll::Pending => {}
                    }
                    // The check is under way: another endpoint takes the call if one can,
                    // the check parked beside. In a larger pool with every endpoint out,
                    // the check stays parked and the pick goes on (to another due check, or
                    // to its answer: NoEndpoint). A pool of one waits for its check.
                    if let Some(pick) = self.other(&endpoint) {
                        self.park(&endpoint, gate);
                        return Ok(Beside::Pick(pick));
                    }
                    if self.endpoints.load().len() > 1 {
                        self.park(&endpoint, gate);
                        continue;
                    }
                    return Ok(Beside::Wait(endpoint, gate));
                }
            }
        }
        self.pick().map(Beside::Pick)
    }

    /// A pick of an endpoint other than `checked` (whose check this pick holds) if one
    /// admits the call now, counting no rejection when none does (an endpoint's limit
    /// counts the tries it refuses).
    fn other(&self, checked: &Arc<Endpoint<K, P, O>>) -> Option<Pick<K, P, O>> {
        let endpoints = self.endpoints.load();
        let r = random();
        let pick = walk(&endpoints, r)
            .filter(|e| !Arc::ptr_eq(e, checked))
            .filter(|e| gate::ready(&e.breaker) == Ready::Passes)
            // No clock reading of this pick's: the endpoint reads it, with a deadline.
            .find_map(|e| match admit(e, false, None) {
                Some(Choice::Pick(pick)) => Some(pick),
                _ => None,
            });
        pick
    }

    /// Leaves `gate`, a check under way, in `endpoint` for the async picks that follow.
    fn park(&self, endpoint: &Arc<Endpoint<K, P, O>>, gate: Gate<Arc<Breaker<P, O>>>) {
        let mut slot = endpoint.parked.lock();
        let before = slot.replace(gate);
        if before.is_none() {
            self.shared.parked.fetch_add(1, Ordering::Relaxed);
        }
        drop(slot);
        // A check parked before (its lease lost since, or it would not have been won
        // again) is dropped: its lease, if still held, is released.
        drop(before);
    }

    /// Polls each parked check once with `cx`: a passed one is the pick's (its endpoint's
    /// first probe), a failed one is settled. A panic of a check continues once every
    /// check polled is settled.
    #[cold]
    #[inline(never)]
    fn drive_parked(&self, cx: &mut Context<'_>) -> Option<Pick<K, P, O>> {
        let mut panics = FirstPanic::default();
        let mut taken = None;
        for endpoint in self.endpoints.load().iter() {
            let Some(mut slot) = endpoint.parked.try_lock() else {
                continue; // another pick drives it
            };
            let Some(gate) = slot.as_mut() else {
                continue;
            };
            // A check passed while a panic of one driven before (or its own) will continue
            // admits nothing: the gate gives that probe back unused.
            if let Poll::Ready(probe) = gate.poll_probe(cx, &mut panics) {
                *slot = None;
                self.shared.parked.fetch_sub(1, Ordering::Relaxed);
                drop(slot);
                if let Ok(permit) = probe {
                    taken = Some(Pick::after_check(Arc::clone(endpoint), permit));
                    break;
                }
            }
        }
        contain::resume(panics);
        taken
    }
}

/// A pick whose verdict can leave with the response, to be settled later (a gRPC status in
/// the trailers): a tower service's pick (`'static`, so the verdict can go into a
/// type-erased body), as [`Handing`](crate::breaker::Handing) is for a permit.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub struct HandingPick<'a, K, P: TripPolicy, O: Observer>(pub &'a mut Pick<K, P, O>);

impl<K, P, O> Report for HandingPick<'_, K, P, O>
where
    K: Send + Sync + 'static,
    P: TripPolicy + 'static,
    O: Observer + 'static,
{
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

    const SEES_OVERLOAD: bool = true;

    fn report_overloaded(&mut self) {
        self.0.settle_overloaded();
    }

    /// The pick moves into the verdict whole: the endpoint's call stays in flight, and its
    /// bookkeeping waits, until the outcome is known.
    fn unsettle(&mut self) -> Option<Unsettled> {
        let pick = self.0.hand_over()?;
        Some(Unsettled::new(Box::new(pick)))
    }
}
