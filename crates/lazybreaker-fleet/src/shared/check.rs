//! A shared breaker's health check: once the fleet's open period is over, one instance runs
//! the check, under the fleet-wide probe lease with room for one (so no other instance checks
//! or probes meanwhile); its call is then the fleet's first probe, under the same lease, and
//! its result is published as a probe's. A failed check reopens the local breaker, which is
//! published as a failed probe's reopening is.

use std::future::{poll_fn, Future};
use std::sync::atomic::Ordering;
use std::time::Duration;

use lazybreaker::classify::Classify;
use lazybreaker::door::contain;
use lazybreaker::door::gate::{Checked, Gate};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Observer;
use lazybreaker::policy::{Outcome, TripPolicy};
use lazybreaker::{Error, Rejected};

use super::super::store::{FleetStore, Lease};
use super::{Budget, Held, LinkedBreaker, SharedBreaker};

impl<S: FleetStore, P: TripPolicy, O: Observer> SharedBreaker<S, P, O> {
    /// A call that won the local breaker's check lease: leases the fleet's probe slot, runs
    /// the check, then makes the call as the first probe (passed) or is rejected (failed),
    /// within `left` of store time.
    pub(super) async fn checked<F, Fut, T, E, C>(
        &self,
        mut gate: Gate<&LinkedBreaker<P, O>>,
        make: F,
        classify: C,
        left: Duration,
    ) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classify<T, E>,
    {
        let mut budget = Budget::new(left);
        let held = match self.lease_check(&mut budget).await {
            Ok(held) => held,
            Err(rejected) => {
                drop(gate); // released: no verdict
                self.breaker.count_rejection(rejected);
                contain::resume(budget.panics);
                return Err(Error::Rejected(rejected));
            }
        };
        // A panic starting or polling the check is its failure, and continues once the
        // failure is settled and published.
        let permit = match poll_fn(|cx| gate.poll_settle(cx, &mut budget.panics)).await {
            Checked::Passed(permit) => permit,
            Checked::Failed(rejected) => {
                self.settle(held, Outcome::Failure, &mut budget).await;
                contain::resume(budget.panics);
                return Err(Error::Rejected(rejected));
            }
            Checked::Stale(rejected) => {
                // The breaker moved on meanwhile: the fleet's slot is given back.
                self.settle(held, Outcome::Excluded, &mut budget).await;
                contain::resume(budget.panics);
                return Err(Error::Rejected(rejected));
            }
        };
        // The check's lease is the probe's: one holder fleet-wide for both.
        self.probe_call(permit, held, make, classify, budget).await
    }

    /// Leases the fleet's probe slot for a check, with room for one holder: `None` for a
    /// local check (the fleet is not open with this process, or the store failed); rejected
    /// with [`Rejected::Checking`] while another instance checks or probes, or when the
    /// record moved on (which is followed; the next call finds what it says).
    async fn lease_check(&self, budget: &mut Budget) -> Result<Option<Held>, Rejected> {
        let view = *self.fleet.view.lock();
        if view.local_only || self.fleet.degraded.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let n = self.fleet.probes.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}/{n}", self.fleet.instance);
        let lease = self.fleet.store.lease_probe(
            self.name(),
            view.generation,
            1,
            self.fleet.knobs.lease_for,
            &holder,
            self.now(),
        );
        match self.op(budget, lease).await {
            Some(Lease::Taken) => {
                self.note_lease(n);
                Ok(Some(Held {
                    holder,
                    number: n,
                    generation: view.generation,
                }))
            }
            None => Ok(None),
            Some(Lease::Full) => {
                self.note_full();
                self.fleet
                    .stats
                    .fleet_rejections
                    .fetch_add(1, Ordering::Relaxed);
                Err(Rejected::Checking)
            }
            Some(Lease::Stale) => {
                self.sync_with(budget, true).await;
                Err(Rejected::Checking)
            }
        }
    }
}
