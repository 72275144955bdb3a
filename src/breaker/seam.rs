//! The seam: what the layers in front of a breaker may ask of it, beyond the public API.
//!
//! | entry point | asked by | why |
//! |---|---|---|
//! | [`rejected_by`](Breaker::rejected_by) | the registry, the keyed tower layer, the reqwest middleware | a rejection that names the breaker |
//! | [`peek_open`](Breaker::peek_open), [`count_rejection`](Breaker::count_rejection) | the tower layer, the fleet | `poll_ready` fails fast while open; `call` answers the rejection it read and counts it |
//! | [`RequestCount`] (public) | a [`RetryBudget`](crate::retry::RetryBudget) fed by the breaker | the budget's deposits are the breaker's calls, less the retries after its failures: nothing paid per call |
//! | [`snapshot_keeping`](BreakerSeam::snapshot_keeping), [`snapshot_contained`](BreakerSeam::snapshot_contained) | the status page; the Prometheus collector and `lazybreaker-otel` | a snapshot read for monitoring, a panic of the policy's gauges or the clock contained and kept |
//! | [`count_retry`](BreakerSeam::count_retry) | the pool, the tower retry layer, the reqwest and gRPC retries | a retry, or its refusal, counted in the totals of the breaker whose attempt failed |
//! | [`clock_nanos`](Breaker::clock_nanos) | the fleet | one clock read for its staleness check and the admission ([`At::Given`](super::gate::At::Given)) |
//! | [`Builder::max_requests_or_default`] | the fleet | the fleet-wide probe slots |
//! | [`Builder::max_open_duration_or_default`] | the fleet | no open period adopted, followed or published longer than the breaker's own |
//! | [`is_closed_and_unforced`](Breaker::is_closed_and_unforced) | the registry | what it may evict |
//! | [`Builder::unnamed`], [`Builder::clock_source`] | the registry, the pool | a breaker named after its key, on the registry's (the pool's) clock |
//! | [`Builder::open_period_unset`] | the pool | an endpoint whose builder sets no open period gets the pool's backoff (100 ms to 30 s), not a lone breaker's 60 s |
//! | [`Builder::on_return`] | the pool's slow start | an endpoint that comes back (its breaker closes after a trip, a check, an ejection) ramps up from then, told by the breaker's own state change, beside the user's callback |
//! | [`Builder::jitter_unset`] | the pool | an endpoint whose builder sets no jitter gets the pool's spread ([`Pool::jitter`](crate::pool::Pool::jitter)) |
//! | [`eject`](Breaker::eject) (over [`Machine::eject`](crate::machine::Machine::eject)) | the pool's outlier detection and its look for hangs | an ejection is a change of the endpoint's breaker to open, [`Origin::Ejected`](crate::origin::Origin::Ejected), delivered as any other; `down` for a hang |
//! | [`is_down`](Breaker::is_down) (over [`Machine::is_down`](crate::machine::Machine::is_down)) | the pool's walk, its summary and snapshot, the detector's cap | an endpoint down on its own evidence (a failed health check, a hang) is out whatever the cap, and not in the number the cap is a share of |
//! | [`check_wait`](Breaker::check_wait), [`probe_wait`](Breaker::probe_wait) | the pool's walk | a pick that finds no endpoint answers with the time to the first retry: a check it cannot run, a half-open trial with its probes out |
//!
//! The pool's hooks are inherent and crate-private, as the registry's are, rather than a
//! trait of their own: two of them are the machine's (the core, which a trait on the breaker
//! would not cover), and the pool lives in this crate; they sit together below, one block, so
//! that a build without the pool (were it ever a feature) marks them in one place.
//!
//! Admission, health checks and verdicts are not here: every caller asks them of the front
//! door ([`gate`](super::gate)).
//!
//! Each entry point serves an integration behind its feature, so a build without some of them
//! leaves some unused: one attribute on each block says so, the one place the breaker knows
//! that features exist (the entry points stay compiled and checked in every build).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::ClockSource;
use crate::contain::{catch, FirstPanic};
use crate::counts::RetryTally;
use crate::error::{Rejected, RejectedBy};
use crate::lane::Peek;
use crate::machine::Rules;
use crate::observe::Observer;
use crate::origin::Origin;
use crate::policy::TripPolicy;
use crate::retry::{Next, RequestCount, Stop};
use crate::snapshot::Snapshot;
use crate::state::State;

use super::{Breaker, Builder};

/// What a layer in front of a breaker may ask of it beyond the public API (the integration
/// crates, through `door`; the registry and the gate, here).
pub trait BreakerSeam {
    /// `rejected`, naming this breaker.
    fn rejected_by(&self, rejected: Rejected) -> RejectedBy;
    /// The rejection the next call would get because the breaker is open or forced open,
    /// without admitting anything or evaluating any expiry, or `None` (the breaker may still
    /// reject the call for another reason: half-open and full). Lock-free unless the lane
    /// sends every call to the lock anyway (half-open, forced, a policy it cannot count for).
    fn peek_open(&self) -> Option<Rejected>;
    /// Counts `rejected`, a rejection read with [`peek_open`](Self::peek_open) and answered
    /// to a call without asking the breaker again (the tower layer's `call` after its
    /// `poll_ready`), as the breaker counts its own.
    fn count_rejection(&self, rejected: Rejected);
    /// The breaker's clock, in nanoseconds since its epoch: a plain read, for a layer in
    /// front of the breaker that needs the breaker's timeline before it admits anything (a
    /// clock that panics then panics out of that layer's call, with nothing admitted).
    fn clock_nanos(&self) -> u64;
    /// [`snapshot`](Breaker::snapshot), keeping a panic of the policy's gauges in `panics`
    /// (the snapshot then holds the figures reported before it).
    fn snapshot_keeping(&self, panics: &mut FirstPanic) -> Snapshot;
    /// The snapshot a collection reads (the Prometheus collector, `lazybreaker-otel`), its
    /// user code's panics contained: `None` if the clock panicked (no snapshot), else the
    /// snapshot and whether the policy's gauges panicked (it then holds the figures reported
    /// before the panic). Every panic is kept in `panics`, the first of all first.
    fn snapshot_contained(&self, panics: &mut FirstPanic) -> Option<(Snapshot, bool)> {
        let mut own = FirstPanic::default();
        let taken = catch(|| self.snapshot_keeping(&mut own));
        let gauges_panicked = own.is_some();
        panics.merge(own);
        match taken {
            Ok(snapshot) => Some((snapshot, gauges_panicked)),
            Err(payload) => {
                panics.keep(payload);
                None
            }
        }
    }
    /// Counts what a retry layer decided after an attempt through this breaker failed
    /// ([`Totals::retries`](crate::Totals::retries) and the refusals): under the lock, as
    /// a retry follows a failure (nothing on a successful call's path).
    fn count_retry(&self, next: Next);
}

impl<P: TripPolicy, O: Observer> BreakerSeam for Breaker<P, O> {
    #[cold]
    #[inline(never)]
    fn rejected_by(&self, rejected: Rejected) -> RejectedBy {
        RejectedBy::new(self.name(), rejected)
    }

    #[inline]
    fn peek_open(&self) -> Option<Rejected> {
        match self.lane.peek_open(|| self.clock.now()) {
            Peek::Open(_) if self.dry_run => None,
            Peek::Open(rejected) => Some(rejected),
            Peek::Passes | Peek::Expired => None,
            Peek::AskTheLock => self.peek_open_locked(),
        }
    }

    fn count_rejection(&self, rejected: Rejected) {
        match rejected {
            Rejected::Open { .. } => self.lane.count_rejection(),
            _ => self.locked(|m| m.count_rejection(rejected)),
        }
    }

    #[inline]
    fn clock_nanos(&self) -> u64 {
        self.clock.now()
    }

    fn snapshot_keeping(&self, panics: &mut FirstPanic) -> Snapshot {
        self.snapshot_with(panics)
    }

    fn count_retry(&self, next: Next) {
        let tally = match next {
            Next::Retry { .. } => RetryTally::Retried,
            Next::Stop(Stop::Budget) => RetryTally::BudgetDenied,
            Next::Stop(Stop::Exhausted) => RetryTally::Exhausted,
            Next::Stop(Stop::Throttled) => RetryTally::Throttled,
            Next::Stop(_) => return,
        };
        self.locked(|m| m.tally_retry(tally));
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// [`peek_open`](BreakerSeam::peek_open) when the lane cannot answer: under the lock.
    #[inline(never)]
    fn peek_open_locked(&self) -> Option<Rejected> {
        let now = self.clock.now();
        self.locked(|m| m.peek_open(now))
    }
}

impl<P: TripPolicy, O: Observer> RequestCount for Breaker<P, O> {
    /// The calls admitted, less the retries made after this breaker's failures (a retry
    /// is a call like any other, but not a request of the budget's).
    fn requests(&self) -> u64 {
        let totals = self.totals();
        totals.admitted.saturating_sub(totals.retries)
    }
}

/// What a layer in front of a breaker may read of its builder (the fleet's probe slots and
/// longest open period).
pub trait BuilderSeam {
    /// The `max_requests` knob as the breaker will use it (at least 1).
    fn max_requests_or_default(&self) -> u32;
    /// The longest open period the breaker will hold (a forced open excepted): its
    /// `max_open_duration` knob with the default rule applied (one hour, or the timeout if
    /// longer), read from the knobs at build time, as the machine's rules make it.
    fn max_open_duration_or_default(&self) -> Duration;
    /// Whether the breaker will be in dry run ([`Builder::dry_run`]).
    fn is_dry_run(&self) -> bool;
}

impl<P, O> BuilderSeam for Builder<P, O> {
    fn max_requests_or_default(&self) -> u32 {
        self.knobs.max_requests.max(1)
    }

    fn max_open_duration_or_default(&self) -> Duration {
        Rules::from(&self.knobs).max_open_duration()
    }

    fn is_dry_run(&self) -> bool {
        self.knobs.dry_run
    }
}

impl<P, O> Builder<P, O> {
    /// Whether no name was given (the registry then names the breaker after its key).
    pub(crate) fn unnamed(&self) -> bool {
        self.knobs.name.is_empty()
    }

    /// Whether the builder says nothing of its open period (no `timeout`, no `backoff`): a
    /// pool then gives it the pool's backoff.
    pub(crate) fn open_period_unset(&self) -> bool {
        self.knobs.timeout.is_zero() && self.knobs.backoff.is_zero()
    }

    /// Calls `returned` when the breaker closes after being open or half-open, before the
    /// user's [`on_state_change`](Builder::on_state_change) callback (kept): a pool's slow
    /// start. Runs where callbacks run, outside the lock.
    pub(crate) fn on_return(mut self, returned: impl Fn() + Send + Sync + 'static) -> Self {
        let user = self.on_state_change.take();
        self.on_state_change = Some(Arc::new(move |name: &str, from: State, to: State| {
            // The pool's note may read a user clock, which may panic: the user's callback
            // runs all the same, then the panic goes on.
            let mut panics = FirstPanic::default();
            if to == State::Closed && from != State::Closed {
                panics.catch((), &returned);
            }
            if let Some(user) = &user {
                user(name, from, to);
            }
            crate::contain::resume(panics);
        }));
        self
    }

    /// Whether the builder says nothing of its jitter: a pool then gives it the pool's.
    pub(crate) fn jitter_unset(&self) -> bool {
        self.knobs.jitter.is_none()
    }

    /// The clock, as the registry shares it.
    pub(crate) fn clock_source(mut self, clock: ClockSource) -> Self {
        self.clock = Some(clock);
        self
    }
}

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// Whether the breaker is closed and not forced, as it stands (no expiry evaluated,
    /// nothing delivered): what a registry may evict.
    pub(crate) fn is_closed_and_unforced(&self) -> bool {
        self.locked(|m| m.state() == State::Closed && m.forced().is_none())
    }
}

/// The pool's hooks (see the table above): an endpoint's ejection, whether it is down, and
/// how long a pick that finds it out should tell its caller to wait.
impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// A pool's judgement of this endpoint's breaker: opened for `open_for` (or its own next
    /// open period) with `origin`; `down` keeps it out whatever the pool's cap. From closed
    /// or half-open only; no effect while open or forced (`false`).
    /// A panic of user code on the way (the clock, an observer of the change) is kept in
    /// `panics`, for the pool to continue once its own bookkeeping is done.
    pub(crate) fn eject(
        &self,
        open_for: Option<Duration>,
        origin: Origin,
        down: bool,
        panics: &mut FirstPanic,
    ) -> bool {
        let mut ejected = false;
        let now = self.clock.try_now(panics);
        self.transact(now, panics, |m, now, changes| {
            let change = m.eject(open_for, origin, down, now);
            ejected = change.is_some();
            changes.extend(change.map(Some));
        });
        ejected
    }

    /// Whether this open period rests on the breaker's own evidence that its dependency is
    /// down (a failed health check, a pool's judgement that it hangs): a pool keeps it out
    /// whatever its cap.
    pub(crate) fn is_down(&self) -> bool {
        self.read(|m| m.is_down())
    }

    /// Once a health-checked breaker's open period is over, how long a call that cannot run
    /// the check should wait before asking again (never zero); `None` when no check is due.
    pub(crate) fn check_wait(&self) -> Option<Duration> {
        let now = self.clock.now();
        self.read(|m| m.check_wait(now))
    }

    /// Half-open with every probe out, how long until a call is admitted again at the latest
    /// (never zero); `None` otherwise (see `Machine::probe_wait`).
    pub(crate) fn probe_wait(&self) -> Option<Duration> {
        let now = self.clock.now();
        self.read(|m| m.probe_wait(now))
    }
}
