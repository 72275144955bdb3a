//! What a pool counts and reports: its own counters ([`Stats`]), the endpoints removed
//! whose picks it still counts ([`Retired`]), and the figures it hands out
//! ([`PoolStats`], [`PoolSummary`], [`PoolSnapshot`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::metric_values::retry_decisions;
use crate::observe::{Ejection, Observer};
use crate::policy::TripPolicy;
use crate::snapshot::Snapshot;

use std::fmt;

use crate::breaker::gate::{self, Ready};
use crate::breaker::Breaker;
use crate::error::Rejected;
use crate::state::State;

use super::{Endpoint, Pool};

/// What a pool counts itself (its breakers count the rest).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) over_cap: AtomicU64,
    pub(crate) over_cap_successes: AtomicU64,
    pub(crate) over_cap_failures: AtomicU64,
    pub(crate) no_endpoint: AtomicU64,
    pub(crate) overloaded: AtomicU64,
    pub(crate) outliers_detected: AtomicU64,
    pub(crate) ejected_success_rate: AtomicU64,
    pub(crate) ejected_failure_percentage: AtomicU64,
    pub(crate) ejected_hung: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) retries_budget_denied: AtomicU64,
    pub(crate) retries_exhausted: AtomicU64,
    pub(crate) retries_throttled: AtomicU64,
    pub(crate) hedges: AtomicU64,
    pub(crate) hedges_won: AtomicU64,
    pub(crate) hedges_cancelled: AtomicU64,
    pub(crate) hedges_budget_denied: AtomicU64,
    pub(crate) limited: AtomicU64,
    pub(crate) limit_skips: AtomicU64,
    /// The most picks [`Pool::stats`](super::Pool::stats) reported: it never reports fewer.
    pub(crate) picks_reported: AtomicU64,
}

/// The endpoints removed from a pool whose picks it still counts: kept while a pick may
/// still be made on them (by a pick that read the endpoints before their removal), then
/// folded into one number.
pub(super) struct Retired<K, P: TripPolicy, O: Observer> {
    /// Removed, and still held elsewhere (a pick in flight, a pick reading the endpoints
    /// as they were).
    pub(super) endpoints: Vec<Arc<Endpoint<K, P, O>>>,
    /// The picks of the removed endpoints that nothing holds any more: no pick can be made
    /// on them.
    pub(super) picks: u64,
}

impl<K, P: TripPolicy, O: Observer> Retired<K, P, O> {
    /// Folds the endpoints that nothing else holds into `picks`, and gives them back (to
    /// be dropped outside the lock: a breaker's drop may run user code).
    pub(super) fn compact(&mut self) -> Vec<Arc<Endpoint<K, P, O>>> {
        let mut gone = Vec::new();
        let mut i = 0;
        while i < self.endpoints.len() {
            // Held here alone (an acquiring check): nothing can start a pick on it, and
            // every pick started on it is seen.
            if Arc::get_mut(&mut self.endpoints[i]).is_some() {
                let endpoint = self.endpoints.swap_remove(i);
                self.picks = self.picks.saturating_add(endpoint.picks());
                gone.push(endpoint);
            } else {
                i += 1;
            }
        }
        gone
    }

    /// The picks of the removed endpoints.
    pub(super) fn picks(&self) -> u64 {
        self.endpoints
            .iter()
            .fold(self.picks, |sum, e| sum.saturating_add(e.picks()))
    }
}

impl Stats {
    /// Counts an ejection for `reason`.
    pub(crate) fn ejected(&self, reason: Ejection) {
        let counter = match reason {
            Ejection::SuccessRate => &self.ejected_success_rate,
            Ejection::FailurePercentage => &self.ejected_failure_percentage,
            _ => &self.ejected_hung,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a pool did so far beyond its breakers' own counts ([`Pool::stats`](super::Pool::stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PoolStats {
    /// Picks made: each endpoint the pool chose for a call (those kept in rotation over the
    /// cap included), counted when the pick is made; those of endpoints removed since
    /// included, a pick made on an endpoint after its removal too. It never goes down (a
    /// try an endpoint's limit refuses may be counted for the instant it takes, by a read
    /// made meanwhile: at most one a thread). A
    /// call made directly on an endpoint's breaker ([`Pool::breaker`](super::Pool::breaker)) is not a pick.
    pub picks: u64,
    /// Picks of an endpoint kept in rotation over the isolation cap, its breaker open.
    pub over_cap: u64,
    /// Of those, reported successes.
    pub over_cap_successes: u64,
    /// Of those, reported failures (fatal ones included).
    pub over_cap_failures: u64,
    /// Picks rejected with [`Rejected::NoEndpoint`](crate::error::Rejected::NoEndpoint).
    pub no_endpoint: u64,
    /// Picks reported [overloaded](super::Pick::overloaded).
    pub overloaded: u64,
    /// Outliers found by [outlier detection](super::Pool::outlier_detection), ejected or not (the
    /// enforcement's draw, the cap).
    pub outliers_detected: u64,
    /// Ejections for a success rate below the peers'.
    pub ejected_success_rate: u64,
    /// Ejections for a failure percentage at the threshold.
    pub ejected_failure_percentage: u64,
    /// Endpoints judged hung at pick time ([`Pool::deadline`](super::Pool::deadline)).
    pub ejected_hung: u64,
    /// Calls retried on another endpoint ([`Pool::retry`](super::Pool::retry)): one per
    /// retry made.
    pub retries: u64,
    /// Retries the retry budget refused.
    pub retries_budget_denied: u64,
    /// Calls whose last attempt failed with every attempt made.
    pub retries_exhausted: u64,
    /// Retries the retry's throttle refused (failures everywhere lately).
    pub retries_throttled: u64,
    /// Hedges [`Pool::call`](super::Pool::call) sent ([`Pool::hedge`](super::Pool::hedge)).
    pub hedges: u64,
    /// Calls answered first by a hedge rather than by their first attempt.
    pub hedges_won: u64,
    /// Attempts cancelled because another attempt of their call answered first (counted
    /// neither as a success nor as a failure).
    pub hedges_cancelled: u64,
    /// Hedges the budget (or the throttle) refused.
    pub hedges_budget_denied: u64,
    /// Picks answered [`Rejected::Limited`](crate::error::Rejected::Limited): every endpoint
    /// that could take the call at its limit ([`Pool::limit`](super::Pool::limit)).
    pub limited: u64,
    /// Times an endpoint's limit turned a pick's try away (the pick tried another, or was
    /// limited): one pick may count several, one per endpoint it tried.
    pub limit_skips: u64,
}

impl PoolStats {
    /// The picks the pool counted itself, by the label metrics give them: `over_cap`,
    /// `no_endpoint`, `overloaded`, `limited`, `limit_skipped` (the Prometheus collector's
    /// `circuit_breaker_pool_picks_total{result}`, OpenTelemetry's
    /// `circuit_breaker.pool.picks`).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::pool::Pool;
    /// use lazybreaker::Breaker;
    ///
    /// let pool = Pool::new(|_: &u16| Breaker::builder());
    /// assert!(pool.pick().is_err()); // no endpoint yet
    /// assert_eq!(pool.stats().picks_by_result()[1], ("no_endpoint", 1));
    /// ```
    pub fn picks_by_result(&self) -> [(&'static str, u64); 5] {
        [
            ("over_cap", self.over_cap),
            ("no_endpoint", self.no_endpoint),
            ("overloaded", self.overloaded),
            ("limited", self.limited),
            ("limit_skipped", self.limit_skips),
        ]
    }

    /// What the pool's [retry](super::Pool::retry) decided after a failed call, by the label
    /// metrics give it: `retried` (on another endpoint), `budget_denied`, `exhausted`,
    /// `throttled`, as a breaker's [`Totals::retry_decisions`](crate::Totals::retry_decisions).
    pub fn retry_decisions(&self) -> [(&'static str, u64); 4] {
        retry_decisions(
            self.retries,
            self.retries_budget_denied,
            self.retries_exhausted,
            self.retries_throttled,
        )
    }

    /// What the pool's [hedge](super::Pool::hedge) did, by the label metrics give it:
    /// `hedged` (an attempt sent), `won`, `cancelled`, `budget_denied`.
    pub fn hedge_decisions(&self) -> [(&'static str, u64); 4] {
        [
            ("hedged", self.hedges),
            ("won", self.hedges_won),
            ("cancelled", self.hedges_cancelled),
            ("budget_denied", self.hedges_budget_denied),
        ]
    }

    /// The pool's ejections by reason.
    pub fn ejections(&self) -> [(Ejection, u64); 3] {
        [
            (Ejection::SuccessRate, self.ejected_success_rate),
            (Ejection::FailurePercentage, self.ejected_failure_percentage),
            (Ejection::Hung, self.ejected_hung),
        ]
    }
}

/// A pool's own figures ([`Pool::summary`](super::Pool::summary)), for a scrape or a status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PoolSummary {
    /// Its endpoints.
    pub endpoints: usize,
    /// Endpoints isolated as the next pick finds them: their breakers open (or forced
    /// open, or checking).
    pub isolated: usize,
    /// Of those, endpoints the pool ejected (an outlier, a hang) whose ejection runs.
    pub ejected: usize,
    /// Of those, endpoints out on their own evidence (a failed health check, a hang),
    /// whatever the cap.
    pub down: usize,
    /// Picks in flight, all endpoints together.
    pub in_flight: usize,
    /// Endpoints ramping up after coming back ([`Pool::slow_start`](super::Pool::slow_start)),
    /// their weight below 1.
    pub warming: usize,
    /// Endpoints with as many picks in flight as their limit ([`Pool::limit`](super::Pool::limit)).
    pub at_limit: usize,
    /// The pool's counts.
    pub stats: PoolStats,
}

/// A pool as it stood ([`Pool::snapshot`](super::Pool::snapshot)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PoolSnapshot<K> {
    /// Each endpoint, in the pool's order.
    pub endpoints: Vec<EndpointSnapshot<K>>,
    /// How many endpoints are isolated: their breakers open (or forced open).
    pub isolated: usize,
    /// Of those, how many are ejected now by the pool's own judgement (an outlier, a hang).
    pub ejected: usize,
    /// Picks in flight, all endpoints together.
    pub in_flight: usize,
    /// The pool's own counts.
    pub stats: PoolStats,
}

/// One endpoint of a [`PoolSnapshot`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EndpointSnapshot<K> {
    /// The endpoint's key.
    pub key: K,
    /// Its breaker's snapshot.
    pub snapshot: Snapshot,
    /// Its picks in flight.
    pub in_flight: usize,
    /// The ejection running now, if the pool ejected it ([`Pool::outlier_detection`](super::Pool::outlier_detection),
    /// [`Pool::deadline`](super::Pool::deadline)) and its ejection time is not over.
    pub ejected: Option<Ejection>,
    /// Its ejection multiplier: one more for each outlier ejection, one less for each
    /// interval in rotation (its next ejection lasts `base_ejection` × one more than this).
    pub ejections: u32,
    /// Whether it is out on its own evidence (a failed health check, a hang), whatever the
    /// cap.
    pub down: bool,
    /// Its share of the picks while it ramps up after coming back
    /// ([`Pool::slow_start`](super::Pool::slow_start)): in (0, 1), 1 once ramped up (and
    /// without slow start).
    pub weight: f64,
    /// Its calls' latency at the pool's hedge's percentile, as the pool estimates it
    /// ([`Pool::hedge`](super::Pool::hedge) with
    /// [`Hedge::at_percentile`](crate::retry::Hedge::at_percentile)); `None` before any is
    /// known, and without such a hedge.
    pub latency: Option<std::time::Duration>,
    /// Its adaptive concurrency limit now ([`Pool::limit`](super::Pool::limit)); `None`
    /// without one.
    pub limit: Option<u32>,
    /// Picks its limit turned away.
    pub limited: u64,
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O>
where
    K: Clone + Eq + fmt::Display,
{
    /// The pool as it stands: each endpoint's breaker snapshot (as the next call would find
    /// it: an open period that is over reads half-open) and picks in flight, and how many
    /// are isolated. Read without moving any breaker, as [`Breaker::snapshot`] is.
    pub fn snapshot(&self) -> PoolSnapshot<K> {
        let now = self.shared.now();
        let endpoints: Vec<EndpointSnapshot<K>> = self
            .endpoints
            .load()
            .iter()
            .map(|e| {
                let snapshot = e.breaker.snapshot();
                let open = snapshot.state == State::Open;
                EndpointSnapshot {
                    key: e.key.clone(),
                    in_flight: e.in_flight(),
                    ejected: e
                        .outlier
                        .last_ejection(now)
                        .filter(|(_, running)| *running && open)
                        .map(|(reason, _)| reason),
                    ejections: e.outlier.multiplier(),
                    down: open && e.breaker.is_down(),
                    weight: self.weight_now(e, now),
                    latency: e.latency.get(),
                    limit: e.limit_now(),
                    limited: e.limited(),
                    snapshot,
                }
            })
            .collect();
        PoolSnapshot {
            isolated: endpoints
                .iter()
                .filter(|e| e.snapshot.state == State::Open)
                .count(),
            ejected: endpoints.iter().filter(|e| e.ejected.is_some()).count(),
            in_flight: endpoints.iter().map(|e| e.in_flight).sum(),
            endpoints,
            stats: self.stats(),
        }
    }
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O> {
    /// What the pool counted so far beyond its breakers. Takes a lock that discovery takes
    /// to replace the endpoints (not while it builds a breaker), which picks never take.
    pub fn stats(&self) -> PoolStats {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = &self.shared.stats;
        let mut retired = self.retired.lock();
        let compacted = retired.compact();
        let endpoints = self.endpoints.load();
        let picks = endpoints
            .iter()
            .fold(retired.picks(), |sum, e| sum.saturating_add(e.picks()));
        // A try its limit is refusing counts among its endpoint's picks for an instant (see
        // `Limiter::try_start_on`): never report fewer picks than before.
        let picks = s
            .picks_reported
            .fetch_max(picks, Ordering::Relaxed)
            .max(picks);
        drop(retired);
        drop(compacted);
        PoolStats {
            picks,
            over_cap: n(&s.over_cap),
            over_cap_successes: n(&s.over_cap_successes),
            over_cap_failures: n(&s.over_cap_failures),
            no_endpoint: n(&s.no_endpoint),
            overloaded: n(&s.overloaded),
            outliers_detected: n(&s.outliers_detected),
            ejected_success_rate: n(&s.ejected_success_rate),
            ejected_failure_percentage: n(&s.ejected_failure_percentage),
            ejected_hung: n(&s.ejected_hung),
            retries: n(&s.retries),
            retries_budget_denied: n(&s.retries_budget_denied),
            retries_exhausted: n(&s.retries_exhausted),
            retries_throttled: n(&s.retries_throttled),
            hedges: n(&s.hedges),
            hedges_won: n(&s.hedges_won),
            hedges_cancelled: n(&s.hedges_cancelled),
            hedges_budget_denied: n(&s.hedges_budget_denied),
            limited: n(&s.limited),
            limit_skips: n(&s.limit_skips),
        }
    }

    /// The pool's name ([`named`](Pool::named)); empty by default.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pool's own figures, without a breaker snapshot: what a scrape or a status page
    /// reads (its endpoints, how many are isolated, ejected and down as the next pick finds
    /// them, its picks in flight, its counts).
    ///
    /// # Panics
    ///
    /// If a breaker's user clock panics.
    pub fn summary(&self) -> PoolSummary {
        let now = self.shared.now();
        let endpoints = self.endpoints.load();
        let (mut isolated, mut ejected, mut down) = (0, 0, 0);
        for e in endpoints.iter() {
            let out = matches!(
                gate::ready(&e.breaker),
                Ready::CheckDue
                    | Ready::Rejected(
                        Rejected::Open { .. } | Rejected::ForcedOpen | Rejected::Checking
                    )
            );
            if !out {
                continue;
            }
            isolated += 1;
            if e.outlier
                .last_ejection(now)
                .is_some_and(|(_, running)| running)
            {
                ejected += 1;
            }
            if e.breaker.is_down() {
                down += 1;
            }
        }
        PoolSummary {
            endpoints: endpoints.len(),
            isolated,
            ejected,
            down,
            in_flight: endpoints.iter().map(|e| e.in_flight()).sum(),
            warming: endpoints
                .iter()
                .filter(|e| self.weight_now(e, now) < 1.0)
                .count(),
            at_limit: endpoints.iter().filter(|e| e.at_limit()).count(),
            stats: self.stats(),
        }
    }

    /// Runs `f` on every endpoint's breaker, in the pool's order, without a lock.
    pub fn for_each(&self, mut f: impl FnMut(&Breaker<P, O>)) {
        for endpoint in self.endpoints.load().iter() {
            f(&endpoint.breaker);
        }
    }
}
