//! [`Endpoint`]: one member of a pool, its breaker and its calls in flight.

use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::atomic::{AtomicU64, Ordering};
use crate::breaker::gate::Gate;
use crate::breaker::Breaker;
use crate::limit::Limiter;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use crate::nanos::Nanos;
use crate::outcome::Outcome;
use crate::retry::LatencyEstimate;

use super::hang_watch::{Progress, Tracked};
use super::outlier::EndpointRecord;
use super::slow_start::NOT_RETURNED;
use super::Shared;

/// A health check under way, left in its endpoint ([`Endpoint::parked`]).
pub(super) type Parked<P, O> = Gate<Arc<Breaker<P, O>>>;

/// An endpoint: its key, its breaker, and its picks (made, and in flight).
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub struct Endpoint<K, P: TripPolicy, O: Observer> {
    pub(super) key: K,
    pub(super) breaker: Arc<Breaker<P, O>>,
    calls: Calls,
    /// The pool's [`deadline`](super::Pool::deadline) in nanoseconds (0: none), kept here
    /// beside the calls in flight.
    pub(super) deadline: Nanos,
    /// With a deadline: the calls in flight it tracks, and when it last answered.
    pub(super) progress: Progress,
    /// An estimate of its calls' latency at the pool's hedge's percentile
    /// ([`Pool::hedge`](super::Pool::hedge)), written by the calls that succeed on it.
    pub(super) latency: LatencyEstimate,
    /// When it came back, for the pool's slow start ([`NOT_RETURNED`]: not since it was
    /// made), written by its breaker's return (shared with the callback that notes it).
    pub(super) returned_at: Arc<StdAtomicU64>,
    /// What the pool's outlier detection keeps of it.
    pub(super) outlier: EndpointRecord,
    /// Its adaptive concurrency limit ([`Pool::limit`](super::Pool::limit)), if the pool
    /// has one.
    pub(super) limiter: Option<Limiter>,
    /// Its health check, started by an async pick that sent its own call elsewhere, for the
    /// async picks that follow to drive ([`Pool::pick_async`](super::Pool::pick_async)).
    pub(super) parked: Mutex<Option<Parked<P, O>>>,
    /// The pool's counts and settings (held here, so that a pick clones nothing shared).
    pub(super) shared: Arc<Shared>,
}

impl<K, P: TripPolicy, O: Observer> Endpoint<K, P, O> {
    pub(super) fn new(
        key: K,
        breaker: Arc<Breaker<P, O>>,
        shared: Arc<Shared>,
        deadline: Nanos,
    ) -> Self {
        Self {
            deadline,
            key,
            breaker,
            calls: Calls::default(),
            progress: Progress::default(),
            outlier: EndpointRecord::default(),
            limiter: None,
            latency: LatencyEstimate::new(),
            returned_at: Arc::new(StdAtomicU64::new(NOT_RETURNED)),
            parked: Mutex::new(None),
            shared,
        }
    }

    /// Its key (for the tower service over the pool).
    pub(crate) fn key(&self) -> &K {
        &self.key
    }

    /// Picks of it in flight (a hint: others move it meanwhile).
    #[inline]
    pub(super) fn in_flight(&self) -> usize {
        // The ends first: every pick ended by then started before, so this never goes
        // below zero.
        let ended = self.calls.ended.load(Ordering::Acquire);
        let started = self.calls.started.load(Ordering::Relaxed);
        started.saturating_sub(ended) as usize
    }

    /// Its picks so far (over the cap included), each counted when it was made.
    pub(super) fn picks(&self) -> u64 {
        self.calls.started.load(Ordering::Relaxed)
    }

    /// Picks ended so far (reported, or dropped).
    pub(super) fn ended(&self) -> u64 {
        self.calls.ended.load(Ordering::Relaxed)
    }

    /// One more pick, in flight, going out at `at` (the pool's clock, read before the
    /// admission; `None` when the pool has no deadline or could not read it without user
    /// code), counted among the picks started unless its place under the endpoint's limit
    /// counted it already (`counted`): with a deadline, the call takes a free start slot if
    /// one is left, and the slot it took comes back ([`Tracked`]); a tracked call due before
    /// the pool's next look for hangs brings that look forward.
    #[inline]
    pub(super) fn start(&self, at: Option<Nanos>, counted: bool) -> Option<Tracked> {
        if !counted {
            self.calls.started.fetch_add(1, Ordering::Relaxed);
        }
        if self.deadline == 0 {
            return None;
        }
        let at = at.or_else(|| self.shared.now_infallible())?;
        self.progress
            .start(at, self.deadline, &self.shared.hang_due)
    }

    /// A pick ended; its start slot, if it still holds it, is free again.
    #[inline]
    pub(super) fn end(&self, tracked: Option<Tracked>) {
        if let Some(t) = tracked {
            self.progress.end(t);
        }
        // Sequentially consistent, as the limit's count of its places reads it
        // (`Limiter::try_start_on`).
        self.calls.ended.fetch_add(1, Ordering::SeqCst);
    }

    /// Its picks started and ended, for its limit to count its places on.
    #[inline]
    pub(super) fn counters(&self) -> (&AtomicU64, &AtomicU64) {
        (&self.calls.started, &self.calls.ended)
    }

    /// A pick's call came back with `outcome`, everything of it recorded (a dropped pick is
    /// not an answer, and does not come here): with a deadline, the endpoint answered unless
    /// the call failed after the deadline had passed (a timeout is no answer). Reads the
    /// pool's clock only then (a user clock's panic continues from here, nothing left
    /// unrecorded).
    #[inline]
    pub(super) fn answered(&self, outcome: Outcome, tracked: Option<Tracked>) {
        let deadline = self.deadline;
        if deadline == 0 {
            return;
        }
        let now = self.shared.now();
        let in_time = tracked.is_none_or(|t| now.saturating_sub(t.at()) < deadline);
        if in_time || matches!(outcome, Outcome::Success | Outcome::Excluded) {
            self.progress.answered(now);
        }
    }
}

/// An endpoint's picks: two counters that only grow, on one cache line (a pick writes
/// both, one at its start and one at its end).
#[derive(Debug, Default)]
#[repr(C, align(16))]
struct Calls {
    /// Its picks made.
    started: AtomicU64,
    /// Of those, the ones that ended (reported, or dropped).
    ended: AtomicU64,
}
