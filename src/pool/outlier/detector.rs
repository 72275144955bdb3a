//! The detector at run time: when an interval's judgement is due (read by every pick), the
//! one evaluation that runs it, and what each endpoint keeps of its ejections.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::breaker::gate::{self, Ready};
use crate::contain::{self, FirstPanic};
use crate::error::Rejected;
use crate::jitter::{seed_of, Jitter};
use crate::nanos::{saturating_nanos, Nanos};
use crate::observe::Observer;
use crate::origin::{Ejection, Origin};
use crate::policy::TripPolicy;
use crate::throttle::Draws;

use super::super::choose::allowed_isolated;
use super::super::endpoint::Endpoint;
use super::super::Stats;
use super::judge::{outliers, Tally};
use super::OutlierDetection;

/// A pool's outlier detection: its settings and where its intervals stand.
#[derive(Debug)]
pub(crate) struct Detector {
    pub(crate) settings: OutlierDetection,
    /// The end of the current interval on the pool's clock; 0 before the first pick.
    next: AtomicU64,
    /// Held by the one pick that evaluates (the others go on without waiting): how many
    /// evaluations ran, for the enforcement's draws.
    evaluations: Mutex<u64>,
    draws: Draws,
    /// The pool's spread of the ejection times ([`Pool::jitter`](super::super::Pool::jitter)).
    pub(crate) jitter: f64,
}

/// What an endpoint keeps for its pool's outlier detection and its ejections (written by
/// evaluations, which are serialised, and by a pick that judges the endpoint hung; read by
/// snapshots).
#[derive(Debug, Default)]
pub(crate) struct EndpointRecord {
    /// Its breaker's lifetime successes and failures at the last evaluation.
    seen_successes: AtomicU64,
    seen_failures: AtomicU64,
    /// The ejection multiplier: one more for each ejection, one less for each interval in
    /// rotation.
    multiplier: AtomicU32,
    /// When its last ejection ends, on the pool's clock (0: never ejected).
    ejected_until: AtomicU64,
    /// Why it was last ejected: 0 never, else [`Ejection`] as [`reason_code`].
    reason: AtomicU8,
}

fn reason_code(reason: Ejection) -> u8 {
    match reason {
        Ejection::SuccessRate => 1,
        Ejection::FailurePercentage => 2,
        _ => 3,
    }
}

impl EndpointRecord {
    /// Its ejection multiplier now.
    pub(crate) fn multiplier(&self) -> u32 {
        self.multiplier.load(Ordering::Relaxed)
    }

    /// Its last ejection's reason, and whether that ejection still runs at `now`.
    pub(crate) fn last_ejection(&self, now: Nanos) -> Option<(Ejection, bool)> {
        let reason = match self.reason.load(Ordering::Relaxed) {
            0 => return None,
            1 => Ejection::SuccessRate,
            2 => Ejection::FailurePercentage,
            _ => Ejection::Hung,
        };
        Some((reason, now < self.ejected_until.load(Ordering::Relaxed)))
    }

    /// Notes an ejection for `reason` until `until`.
    pub(crate) fn ejected(&self, reason: Ejection, until: Nanos) {
        self.reason.store(reason_code(reason), Ordering::Relaxed);
        self.ejected_until.store(until, Ordering::Relaxed);
    }
}

impl Detector {
    pub(crate) fn new(settings: OutlierDetection, jitter: f64) -> Self {
        let draws = Draws::new(settings.seed);
        Self {
            settings,
            next: AtomicU64::new(0),
            evaluations: Mutex::new(0),
            draws,
            jitter,
        }
    }

    /// Whether an interval ended by `now` (or none began yet): a pick then evaluates.
    #[inline]
    pub(crate) fn due(&self, now: Nanos) -> bool {
        now >= self.next.load(Ordering::Relaxed)
    }

    /// Judges the interval (or intervals) that ended by `now`, if no other pick does it
    /// already: each endpoint's results since the last evaluation, read from its breaker's
    /// totals (what the pool already counts: nothing more on the hot path); the outliers
    /// ejected within the pool's cap (`max_isolated` of the endpoints that are not down),
    /// by the enforcement's draw; the multipliers of the endpoints in rotation shrunk, once
    /// per interval that ended. A panic of user code on the way (an observer of an ejection,
    /// a clock) continues once the evaluation is done and recorded.
    #[cold]
    #[inline(never)]
    pub(crate) fn evaluate<K, P: TripPolicy, O: Observer>(
        &self,
        endpoints: &[Arc<Endpoint<K, P, O>>],
        max_isolated: f64,
        now: Nanos,
        stats: &Stats,
    ) {
        let Some(mut evaluations) = self.evaluations.try_lock() else {
            return;
        };
        let next = self.next.load(Ordering::Relaxed);
        if now < next {
            return; // another pick evaluated meanwhile
        }
        let interval = saturating_nanos(self.settings.interval).max(1);
        let tallies: Vec<Tally> = endpoints.iter().map(|e| tally(&e.outlier)).collect();
        let tallies: Vec<Tally> = endpoints
            .iter()
            .zip(tallies)
            .map(|(e, seen)| e.outlier_tally(seen))
            .collect();
        if next == 0 {
            // The first pick starts the first interval: nothing to judge yet.
            self.next
                .store(now.saturating_add(interval).max(1), Ordering::Relaxed);
            return;
        }
        let elapsed = (now - next) / interval + 1;
        self.next.store(
            next.saturating_add(elapsed.saturating_mul(interval)),
            Ordering::Relaxed,
        );
        *evaluations += 1;
        let evaluation = *evaluations;

        let found = outliers(
            &tallies,
            self.settings.success_rate.as_ref(),
            self.settings.spread,
            self.settings.failure_percentage.as_ref(),
        );
        let mut room = Room::of(endpoints, max_isolated);
        let mut panics = FirstPanic::default();
        let mut ejected_now = vec![false; endpoints.len()];
        for (i, reason) in found {
            stats.outliers_detected.fetch_add(1, Ordering::Relaxed);
            let enforced =
                self.draws.at(evaluation, i as u64) * 100.0 < f64::from(self.settings.enforcement);
            if enforced
                && room.takes_one()
                && self.eject(&endpoints[i], reason, now, evaluation, &mut panics)
            {
                ejected_now[i] = true;
                room.took_one();
                stats.ejected(reason);
            }
        }
        shrink_multipliers(endpoints, &ejected_now, next, interval, elapsed);
        contain::resume(panics);
    }

    /// Ejects `endpoint`, an outlier found at `now` for `reason`, unless it is isolated
    /// since the interval ended or opened (or forced) meanwhile: its breaker opened for the
    /// ejection time its multiplier gives (spread by the pool's jitter, drawn from the
    /// endpoint's name, the detector's seed and the `evaluation`), the multiplier grown, the
    /// ejection noted.
    fn eject<K, P: TripPolicy, O: Observer>(
        &self,
        endpoint: &Endpoint<K, P, O>,
        reason: Ejection,
        now: Nanos,
        evaluation: u64,
        panics: &mut FirstPanic,
    ) -> bool {
        if gate::ready(&endpoint.breaker) != Ready::Passes {
            return false; // isolated since the interval ended
        }
        let record = &endpoint.outlier;
        let multiplier = record.multiplier().saturating_add(1);
        let seed = seed_of(endpoint.breaker.name()) ^ self.settings.seed;
        let ejection = Duration::from_nanos(Jitter::new(self.jitter, seed).spread(
            saturating_nanos(self.settings.ejection_time(multiplier)),
            evaluation,
        ));
        let origin = Origin::Ejected(reason);
        if !endpoint
            .breaker
            .eject(Some(ejection), origin, false, panics)
        {
            return false; // opened (or forced) meanwhile
        }
        // Until its breaker's open period ends (the ejection time, or the breaker's
        // longest open period if that is shorter).
        let open_for = match gate::ready(&endpoint.breaker) {
            Ready::Rejected(Rejected::Open { retry_after }) => retry_after,
            _ => ejection,
        };
        record.multiplier.store(multiplier, Ordering::Relaxed);
        record.ejected(reason, now.saturating_add(saturating_nanos(open_for)));
        true
    }
}

/// The multipliers of the endpoints in rotation shrink, once per interval that ended with
/// them in rotation, that is, past their ejection time (an ejection that ends exactly at a
/// boundary is still running there, as in Envoy, which checks for the multiplier before it
/// returns an endpoint): `elapsed` intervals of `interval` ended since `next`; the endpoints
/// `ejected_now` are left as they are.
fn shrink_multipliers<K, P: TripPolicy, O: Observer>(
    endpoints: &[Arc<Endpoint<K, P, O>>],
    ejected_now: &[bool],
    next: Nanos,
    interval: Nanos,
    elapsed: u64,
) {
    for (endpoint, ejected) in endpoints.iter().zip(ejected_now) {
        if *ejected {
            continue;
        }
        let record = &endpoint.outlier;
        let until = record.ejected_until.load(Ordering::Relaxed);
        let before = if until < next {
            0
        } else {
            (until - next) / interval + 1
        };
        let shrink = u32::try_from(elapsed.saturating_sub(before)).unwrap_or(u32::MAX);
        let m = record.multiplier();
        record
            .multiplier
            .store(m.saturating_sub(shrink), Ordering::Relaxed);
    }
}

/// What the cap leaves of an evaluation's room to eject: endpoints isolated on the
/// traffic's judgement against the cap's allowance, and endpoints in rotation.
struct Room {
    isolated: usize,
    allowed: usize,
    in_rotation: usize,
}

impl Room {
    /// The room the `endpoints` leave, as a pick's walk counts them, under a cap of
    /// `max_isolated` (a share of the endpoints that are not down).
    fn of<K, P: TripPolicy, O: Observer>(
        endpoints: &[Arc<Endpoint<K, P, O>>],
        max_isolated: f64,
    ) -> Self {
        let (mut isolated, mut down, mut in_rotation) = (0, 0, 0usize);
        for endpoint in endpoints {
            match isolation(endpoint) {
                Isolation::Passive => isolated += 1,
                Isolation::Down => down += 1,
                Isolation::None => in_rotation += 1,
                Isolation::Aside => {}
            }
        }
        let allowed = allowed_isolated(endpoints.len() - down, max_isolated);
        Self {
            isolated,
            allowed,
            in_rotation,
        }
    }

    /// Whether one more ejection fits: within the cap, and an outlier among its peers is
    /// never the last endpoint in rotation (a pool of one has no peers; its breaker still
    /// trips on its own policy).
    fn takes_one(&self) -> bool {
        self.isolated < self.allowed && self.in_rotation > 1
    }

    /// One more ejected.
    fn took_one(&mut self) {
        self.isolated += 1;
        self.in_rotation -= 1;
    }
}

/// What an endpoint's record saw at the last evaluation.
fn tally(record: &EndpointRecord) -> Tally {
    Tally {
        successes: record.seen_successes.load(Ordering::Relaxed),
        failures: record.seen_failures.load(Ordering::Relaxed),
    }
}

impl<K, P: TripPolicy, O: Observer> Endpoint<K, P, O> {
    /// Its results since `seen` (the totals of the last evaluation), the record moved on.
    fn outlier_tally(&self, seen: Tally) -> Tally {
        let totals = self.breaker.totals();
        self.outlier
            .seen_successes
            .store(totals.successes, Ordering::Relaxed);
        self.outlier
            .seen_failures
            .store(totals.failures, Ordering::Relaxed);
        Tally {
            successes: totals.successes.saturating_sub(seen.successes),
            failures: totals.failures.saturating_sub(seen.failures),
        }
    }
}

/// How an endpoint is out, for the cap.
enum Isolation {
    /// In rotation (half-open and full included: it takes calls again as its probes end).
    None,
    /// Out, but not the pool's isolation: forced open by an operator, or its health
    /// check under way.
    Aside,
    /// On the traffic's judgement (its breaker open, an ejection): what the cap bounds.
    Passive,
    /// On its own evidence (a failed health check, a hang): out whatever the cap, and not
    /// in the number the cap is a share of.
    Down,
}

/// How `endpoint` is out, as a pick's walk counts it.
fn isolation<K, P: TripPolicy, O: Observer>(endpoint: &Endpoint<K, P, O>) -> Isolation {
    match gate::ready(&endpoint.breaker) {
        Ready::CheckDue | Ready::Rejected(Rejected::Open { .. }) => {
            if endpoint.breaker.is_down() {
                Isolation::Down
            } else {
                Isolation::Passive
            }
        }
        Ready::Rejected(Rejected::ForcedOpen | Rejected::Checking) => Isolation::Aside,
        _ => Isolation::None,
    }
}
