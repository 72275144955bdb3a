//! How a pool picks: [`Pool::pick`], and the choice under every pick (the async one's too,
//! which may run an endpoint's health check first: see `beside.rs`).

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::gate::{self, Admit, At, Gate, Ready};
use crate::breaker::holder::Holder;
use crate::breaker::{Breaker, OwnedPermit};
use crate::contain::{self, FirstPanic};
use crate::error::Rejected;
use crate::observe::Observer;
use crate::policy::TripPolicy;

use super::census::{census, walk};
use super::choose::{allowed_isolated, lighter_by_latency, random, Balance};
use super::endpoint::Endpoint;
use super::pick::Pick;
use super::{Endpoints, Pool};
use crate::nanos::Nanos;
use crate::origin::{Ejection, Origin};

/// What a pick found.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub enum Choice<K, P: TripPolicy, O: Observer> {
    /// An endpoint that takes the call.
    Pick(Pick<K, P, O>),
    /// An endpoint whose open period is over, and whose check this pick won: run it.
    Check(Arc<Endpoint<K, P, O>>, Gate<Arc<Breaker<P, O>>>),
}

impl<K, P: TripPolicy, O: Observer> Pool<K, P, O> {
    /// Chooses an endpoint for one call: one whose breaker admits it now (see the
    /// [module documentation](super)). Never waits. An endpoint with a
    /// [health check](Pool::health_check) whose open period is over is left to
    /// [`pick_async`](Pool::pick_async), which can run the check: a sync pick never revives
    /// it unchecked.
    ///
    /// # Errors
    ///
    /// [`Rejected::NoEndpoint`] when no endpoint can take the call: `retry_after` is the
    /// time until the first isolated endpoint can be probed; for one past its open period,
    /// waiting for a check this pick cannot run, the time that check may still take (what is
    /// left of a running check's [`check_timeout`](crate::Builder::check_timeout), or all of
    /// it when none runs yet: never zero, so a client that honours it does not spin;
    /// [`pick_async`](Pool::pick_async) runs the check); for one half-open with its probes
    /// out (a trial running), the time until it admits a call again at the latest (see
    /// [`Snapshot::retry_after`](crate::Snapshot::retry_after)). `None` for an empty pool, or
    /// when every endpoint is forced open.
    pub fn pick(&self) -> Result<Pick<K, P, O>, Rejected> {
        match self.choose(false)? {
            Choice::Pick(pick) => Ok(pick),
            Choice::Check(..) => unreachable!("a sync pick runs no check"),
        }
    }

    /// The power of two choices (or the round-robin turn) first; the full walk when the
    /// first choices do not take the call.
    #[inline]
    pub(crate) fn choose(&self, checking: bool) -> Result<Choice<K, P, O>, Rejected> {
        let endpoints = self.endpoints.load();
        if endpoints.is_empty() {
            return Err(self.no_endpoint(None));
        }
        let judge = self.judge(&endpoints);
        let r = random();
        // The less loaded of the two first; its twin if it is full. An isolated endpoint
        // among them sends the pick to the full walk, which knows the cap.
        for i in self.first_choices(&endpoints, r) {
            match gate::ready(&endpoints[i].breaker) {
                Ready::Passes => {
                    if let Some(choice) = admit(&endpoints[i], checking, judge.at()) {
                        return Ok(choice);
                    }
                }
                Ready::Rejected(Rejected::Open { .. }) | Ready::CheckDue => break,
                Ready::Rejected(_) => {}
            }
        }
        self.choose_slow(&endpoints, r, checking, judge)
    }

    /// The pool's own judgements, each only when asked for and only when due: an interval
    /// of outlier detection that ended, a call in flight past the deadline (one read of the
    /// pool's next look for hangs: nothing is written, nothing scanned, until then). The
    /// reading of the pool's clock they took, for the deadline of the call this pick admits
    /// (none without detection or deadline).
    #[inline]
    fn judge(&self, endpoints: &Endpoints<K, P, O>) -> Judge {
        let deadline = self.deadline;
        if self.detector.is_none() && deadline == 0 {
            if let Some(hedging) = &self.hedging {
                if let Some(now) = hedging.wake.any_due_by(|| self.shared.now()) {
                    hedging.wake.wake_due(now);
                }
            }
            return Judge { now: 0, deadline };
        }
        let now = self.shared.now();
        if let Some(hedging) = &self.hedging {
            if hedging.wake.any_due_by(|| now).is_some() {
                hedging.wake.wake_due(now);
            }
        }
        if let Some(detector) = &self.detector {
            if detector.due(now) {
                detector.evaluate(endpoints, self.max_isolated, now, &self.shared.stats);
            }
        }
        if deadline != 0 && self.shared.hang_due.due(now) {
            self.sweep_hung(endpoints, now);
        }
        Judge { now, deadline }
    }

    /// The first two endpoints a pick tries, the less loaded first: two drawn from `r` (the
    /// power of two choices), or the round-robin turn twice.
    #[inline]
    fn first_choices(&self, endpoints: &Endpoints<K, P, O>, r: u64) -> [usize; 2] {
        let choices = self.drawn(endpoints, r);
        match &self.ramp {
            Some(ramp) => match ramp.active(&self.shared, || self.shared.now()) {
                Some(now) => self.ramped(endpoints, choices, now),
                None => choices,
            },
            None => choices,
        }
    }

    /// The two endpoints drawn, before slow start.
    #[inline]
    fn drawn(&self, endpoints: &Endpoints<K, P, O>, r: u64) -> [usize; 2] {
        let n = endpoints.len();
        match self.balance {
            Balance::PowerOfTwo => {
                let a = (r % n as u64) as usize;
                let b = if n > 1 {
                    (a + 1 + ((r >> 32) % (n as u64 - 1)) as usize) % n
                } else {
                    a
                };
                let lighter = if self.latency_aware {
                    lighter_by_latency(&endpoints[b], &endpoints[a], r)
                } else {
                    endpoints[b].in_flight() < endpoints[a].in_flight()
                };
                if lighter {
                    [b, a]
                } else {
                    [a, b]
                }
            }
            Balance::RoundRobin => {
                let a = self.next.fetch_add(1, Ordering::Relaxed) % n;
                [a, a]
            }
        }
    }

    /// The pool's look for hangs, due at `now` (see [`Pool::deadline`]): every endpoint
    /// with a call in flight for the whole deadline and nothing back since that call went
    /// out is judged hung now, and the next look is set for when the first of the calls
    /// tracked now could hang. One pick looks (the one that claims it); the others go on.
    ///
    /// The next look is a lower bound: the pick that claims this one moves it to `now` plus
    /// the deadline (no call that goes out from now on is due earlier) before it reads the
    /// endpoints, then lowers it to the first call it found; a call that goes out
    /// meanwhile, its start slot missed by this look, reads the bound claimed and lowers it
    /// to its own due time, all of it sequentially consistent (see
    /// [`NextLook::look`](super::hang_watch::NextLook::look)). A panic of an observer of an
    /// ejection continues once every endpoint is judged and the next look is set.
    #[cold]
    #[inline(never)]
    fn sweep_hung(&self, endpoints: &Endpoints<K, P, O>, now: Nanos) {
        let mut panics = FirstPanic::default();
        self.shared.hang_due.look(
            now,
            self.deadline,
            endpoints.iter(),
            |endpoint| &endpoint.progress,
            |endpoint| judge_hung(endpoint, now, &mut panics),
        );
        contain::resume(panics);
    }

    /// Every endpoint, from a random start with a coprime stride: counted first (no
    /// allocation), then, within the cap, the power of two choices among those that admit
    /// calls; over the cap, [`choose_over_cap`](Self::choose_over_cap).
    #[cold]
    #[inline(never)]
    fn choose_slow(
        &self,
        endpoints: &Endpoints<K, P, O>,
        r: u64,
        checking: bool,
        judge: Judge,
    ) -> Result<Choice<K, P, O>, Rejected> {
        let census = match census(endpoints, r, checking, judge, |_, _| {}) {
            ControlFlow::Break(choice) => return Ok(choice),
            ControlFlow::Continue(census) => census,
        };
        if census.over_cap(endpoints.len(), self.max_isolated) {
            return self.choose_over_cap(endpoints, r, checking, judge);
        }
        if census.admitting > 0 {
            if let Some(choice) = two_admitting(endpoints, r, census.admitting, checking, judge) {
                return Ok(choice);
            }
        }
        Err(self.refuse(endpoints, census.earliest))
    }

    /// More endpoints isolated than the cap allows: the surplus, the ones closest to their
    /// probe, shares the calls with the admitting endpoints (this walk collects them: the
    /// one pick path that allocates, in a pool already over its cap).
    #[cold]
    #[inline(never)]
    fn choose_over_cap(
        &self,
        endpoints: &Endpoints<K, P, O>,
        r: u64,
        checking: bool,
        judge: Judge,
    ) -> Result<Choice<K, P, O>, Rejected> {
        let (mut admitting, mut isolated) = (Vec::new(), Vec::new());
        let collect = |endpoint, isolated_for| match isolated_for {
            None => admitting.push(endpoint),
            Some(retry_after) => isolated.push((retry_after, endpoint)),
        };
        let census = match census(endpoints, r, checking, judge, collect) {
            ControlFlow::Break(choice) => return Ok(choice),
            ControlFlow::Continue(census) => census,
        };
        // Over the cap, the surplus of isolated endpoints stays in rotation: the ones
        // closest to their probe, ties (endpoints isolated at one instant) broken the same
        // way on every pick, so that the same ones stay isolated and get their rest.
        let allowed = allowed_isolated(endpoints.len() - census.down, self.max_isolated);
        isolated.sort_by_key(|(retry_after, endpoint)| (*retry_after, Arc::as_ptr(endpoint)));
        let kept = isolated.len().saturating_sub(allowed);
        share_over_cap(admitting, &isolated[..kept], r, checking, judge)
            .ok_or_else(|| self.refuse(endpoints, census.earliest))
    }

    /// The rejection of a pick that found no endpoint, counted.
    pub(super) fn no_endpoint(&self, retry_after: Option<Duration>) -> Rejected {
        self.shared
            .stats
            .no_endpoint
            .fetch_add(1, Ordering::Relaxed);
        Rejected::NoEndpoint { retry_after }
    }
}

/// Within the cap: two of the `admitting` endpoints the census counted, by their rank in
/// the walk, the less loaded first (their states may have moved since: a missing rank is
/// skipped); both full (half-open, their probes out since the count), any other.
fn two_admitting<K, P: TripPolicy, O: Observer>(
    endpoints: &Endpoints<K, P, O>,
    r: u64,
    admitting: usize,
    checking: bool,
    judge: Judge,
) -> Option<Choice<K, P, O>> {
    let walk = || walk(endpoints, r);
    let m = admitting as u64;
    let ranks = [
        (r.rotate_left(29) % m) as usize,
        (r.rotate_left(43) % m) as usize,
    ];
    let nth = |rank: usize| {
        walk()
            .filter(|e| gate::ready(&e.breaker) == Ready::Passes)
            .nth(rank)
    };
    let (a, b) = (nth(ranks[0]), nth(ranks[1]));
    let (first, second) = match (a, b) {
        (Some(a), Some(b)) if b.in_flight() < a.in_flight() => (Some(b), Some(a)),
        other => other,
    };
    for endpoint in [first, second].into_iter().flatten() {
        if let Some(choice) = admit(endpoint, checking, judge.at()) {
            return Some(choice);
        }
    }
    walk()
        .filter(|e| gate::ready(&e.breaker) == Ready::Passes)
        .find_map(|endpoint| admit(endpoint, checking, judge.at()))
}

/// An isolated endpoint, with the time to its probe.
type Isolated<'e, K, P, O> = (Duration, &'e Arc<Endpoint<K, P, O>>);

/// Over the cap: the `admitting` endpoints and those kept in `rotation` (isolated, the
/// ones closest to their probe) share the calls that reach the walk, each with an equal
/// chance; among the admitting, the power of two choices, one that turns out full dropped
/// from the draw; none of them taking the call, the one in rotation with the fewest picks in
/// flight.
fn share_over_cap<K, P: TripPolicy, O: Observer>(
    mut admitting: Vec<&Arc<Endpoint<K, P, O>>>,
    rotation: &[Isolated<'_, K, P, O>],
    r: u64,
    checking: bool,
    judge: Judge,
) -> Option<Choice<K, P, O>> {
    // At its limit, an endpoint kept in rotation is skipped too.
    let kept_in_rotation = |endpoint: &Arc<Endpoint<K, P, O>>| {
        let place = endpoint.take_place(judge.at())?;
        let pick = Pick::kept_in_rotation(Arc::clone(endpoint), judge.at(), place);
        Some(Choice::Pick(pick))
    };
    let mut r = r.rotate_left(29);
    if !rotation.is_empty() {
        let slot = (r % (admitting.len() + rotation.len()) as u64) as usize;
        if let Some((_, endpoint)) = slot.checked_sub(admitting.len()).map(|i| rotation[i]) {
            if let Some(choice) = kept_in_rotation(endpoint) {
                return Some(choice);
            }
        }
    }
    while !admitting.is_empty() {
        let m = admitting.len() as u64;
        r = r.rotate_left(13) ^ random();
        let (a, b) = ((r % m) as usize, ((r >> 32) % m) as usize);
        let i = if admitting[b].in_flight() < admitting[a].in_flight() {
            b
        } else {
            a
        };
        if let Some(choice) = admit(admitting[i], checking, judge.at()) {
            return Some(choice);
        }
        admitting.swap_remove(i);
    }
    let mut rotation: Vec<_> = rotation.iter().map(|(_, e)| *e).collect();
    rotation.sort_by_key(|e| e.in_flight());
    rotation.into_iter().find_map(kept_in_rotation)
}

/// The reading of the pool's clock a pick took, for the deadline of the call it admits
/// (the hangs are judged before, by [`Pool::sweep_hung`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Judge {
    now: Nanos,
    /// The pool's deadline; 0 without one.
    deadline: Nanos,
}

impl Judge {
    /// When a call admitted by this pick goes out, with a deadline to track it for.
    #[inline]
    pub(super) fn at(self) -> Option<Nanos> {
        (self.deadline != 0).then_some(self.now)
    }
}

/// Judges `endpoint` hung at `now` (see [`Pool::deadline`]), its calls in flight written off
/// by the look (so that the next call it gets, its probe, has a deadline of its own): its
/// breaker opened for its next open period, down (out whatever the cap), and counted. An
/// observer's panic is kept in `panics`, for the caller to continue once its judgements are
/// recorded.
fn judge_hung<K, P: TripPolicy, O: Observer>(
    endpoint: &Endpoint<K, P, O>,
    now: Nanos,
    panics: &mut FirstPanic,
) {
    let ejection = Origin::Ejected(Ejection::Hung);
    if endpoint.breaker.eject(None, ejection, true, panics) {
        let open_for = match gate::ready(&endpoint.breaker) {
            Ready::Rejected(Rejected::Open { retry_after }) => retry_after,
            _ => Duration::ZERO,
        };
        let until = now.saturating_add(crate::nanos::saturating_nanos(open_for));
        endpoint.outlier.ejected(Ejection::Hung, until);
        endpoint.shared.stats.ejected(Ejection::Hung);
    }
}

/// A pick of `endpoint` if its breaker admits a call now, through the front door (the one
/// admission of every pick): the endpoint was looked at and admitted calls, but it may have
/// tripped and come to the end of its open period since. Then its check is due, and only the
/// check may revive it: a pick that can run checks (`checking`) takes the lease, to run
/// beside the calls (a failed check rejects no caller); a sync pick declines it (the
/// endpoint stays isolated, the lease free for a pick that can run it) and looks elsewhere.
#[inline]
pub(super) fn admit<K, P: TripPolicy, O: Observer>(
    endpoint: &Arc<Endpoint<K, P, O>>,
    checking: bool,
    at: Option<Nanos>,
) -> Option<Choice<K, P, O>> {
    if checking {
        admit_through(endpoint, Arc::clone(&endpoint.breaker), at, |gate| {
            Some(Choice::Check(Arc::clone(endpoint), gate.beside()))
        })
    } else {
        admit_through(endpoint, &endpoint.breaker, at, |gate| {
            gate.decline();
            None
        })
    }
}

/// [`admit`] through `holder`: the breaker's `Arc` given to a lease that may be parked, or
/// lent (cloned only into a permit) for a pick that runs no check; `on_check` says what a
/// won lease becomes.
#[inline(always)]
fn admit_through<K, P, O, H>(
    endpoint: &Arc<Endpoint<K, P, O>>,
    holder: H,
    at: Option<Nanos>,
    on_check: impl FnOnce(Gate<H>) -> Option<Choice<K, P, O>>,
) -> Option<Choice<K, P, O>>
where
    P: TripPolicy,
    O: Observer,
    H: Holder<P = P, O = O, Permit = OwnedPermit<P, O>>,
{
    // Its limit first (cheaper than the breaker's admission, and nothing to undo): at its
    // limit, it is skipped as an isolated one is, its breaker not asked.
    let place = endpoint.take_place(at)?;
    match gate::admit(holder, At::Now) {
        Admit::Call(permit, _) => Some(Choice::Pick(Pick::admitted(
            Arc::clone(endpoint),
            permit,
            at,
            place,
        ))),
        Admit::Check(gate) => {
            endpoint.unused(place);
            on_check(gate)
        }
        Admit::Rejected(..) => {
            endpoint.unused(place);
            None
        }
    }
}
