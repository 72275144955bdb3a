//! The seam: what the layers in front of a breaker may ask of it, beyond the public API.
//!
//! | entry point | asked by | why |
//! |---|---|---|
//! | [`allow_owning`](Breaker::allow_owning), [`rejected_by`](Breaker::rejected_by) | the registry, the keyed tower layer | an owned permit from the `Arc` a registry lookup returned, with no second clone; a rejection that names the breaker |
//! | [`peek_open`](Breaker::peek_open), [`count_rejection`](Breaker::count_rejection) | the tower layer, the fleet | `poll_ready` fails fast while open; `call` answers the rejection it read and counts it |
//! | [`allow_probing_at`](Breaker::allow_probing_at), [`clock_nanos`](Breaker::clock_nanos) | the fleet | one clock read for its staleness check and the admission, which says whether the call is a half-open probe |
//! | [`allow_checking_owned`](Breaker::allow_checking_owned), [`peek_ahead`](Breaker::peek_ahead), [`is_checked`](Breaker::is_checked) | the tower layers | a health check run from `poll_ready` (or a keyed layer's response future), the lease kept in the service |
//! | [`allow_checking_at`](Breaker::allow_checking_at) | the fleet | a health check under the fleet-wide probe lease |
//! | [`CheckLease::verdict`], [`CheckLease::run`], [`CheckLease::holder`] | the fleet, the reqwest middleware, the keyed tower layer | a check run in an `async fn`; the breaker a keyed rejection names |
//! | [`Builder::max_requests_or_default`] | the fleet | the fleet-wide probe slots |
//! | [`Builder::max_open_duration_or_default`] | the fleet | no open period adopted, followed or published longer than the breaker's own |
//! | [`is_closed_and_unforced`](Breaker::is_closed_and_unforced) | the registry | what it may evict |
//! | [`Builder::unnamed`], [`Builder::clock_source`] | the registry | a breaker named after its key, on the registry's clock |
//!
//! Each entry point serves an integration behind its feature, so a build without some of them
//! leaves some unused: one attribute on each block says so, the one place the breaker knows
//! that features exist (the entry points stay compiled and checked in every build).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::clock::ClockSource;
use crate::contain;
use crate::error::{Rejected, RejectedBy};
use crate::lane::{Entry, Peek};
use crate::machine::{Ahead, Rules};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::TripPolicy;
use crate::state::State;

use super::check::{admit_checking, Admitted, CheckLease, Holder};
use super::permit::{Grant, OwnedPermit, Permit};
use super::{Breaker, Builder};

#[cfg_attr(not(all(feature = "tower", feature = "fleet")), allow(dead_code))]
impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// [`allow_owned`](Breaker::allow_owned) for an `Arc` the caller gives away (a registry
    /// lookup's): the permit keeps it, with no clone and drop of another. (Through
    /// [`admit_into`], which builds the `Result` in place: through a helper returning a
    /// `Result` of a grant the permit is copied in stalling pieces, which doubled `allow()` +
    /// `success()` to 20 ns.)
    ///
    /// A rejection names this breaker (the caller is one of many: a registry's): the name is
    /// copied on the rejected path only.
    #[inline(always)]
    pub(crate) fn allow_owning(self: Arc<Self>) -> Result<OwnedPermit<P, O>, RejectedBy> {
        self.allow_owning_into(Ok, Err)
    }

    /// [`allow_owning`](Self::allow_owning), its answer handed to `admitted` or `rejected`
    /// rather than returned (see [`admit_into`]).
    #[inline(always)]
    pub(crate) fn allow_owning_into<R>(
        self: Arc<Self>,
        admitted: impl FnOnce(OwnedPermit<P, O>) -> R,
        rejected: impl FnOnce(RejectedBy) -> R,
    ) -> R {
        admit_into(self, admitted, |breaker, refused| {
            rejected(breaker.rejected_by(refused))
        })
    }

    /// `rejected`, naming this breaker.
    #[cold]
    #[inline(never)]
    pub(crate) fn rejected_by(&self, rejected: Rejected) -> RejectedBy {
        RejectedBy::new(self.name(), rejected)
    }

    /// [`allow`](Self::allow) at `now`, a reading of this breaker's clock the caller took (a
    /// layer in front that needed it first; the clock is not read again), with whether the
    /// call admitted is a probe of a half-open period: decided by the admission itself, not
    /// by what observers were told (a delivery can lag the change behind a slow observer).
    /// An admission off the lock-free lane is a closed one; under the lock, the machine's
    /// state at the admission says.
    #[inline]
    pub(crate) fn allow_probing_at(
        &self,
        now: Nanos,
    ) -> Result<(Permit<'_, P, O>, bool), Rejected> {
        match self.lane.admit(|| now) {
            Entry::Admitted { ticket } => Ok((Permit::new(self, Grant::new(ticket, now)), false)),
            other => self.allow_probing_slow(other),
        }
    }

    /// [`allow_probing_at`](Self::allow_probing_at) off the lock-free lane.
    #[inline(never)]
    fn allow_probing_slow(&self, entry: Entry) -> Result<(Permit<'_, P, O>, bool), Rejected> {
        let (grant, probe) = self.admit_slow(entry, |m| m.state() == State::HalfOpen)?;
        Ok((Permit::new(self, grant), probe))
    }

    /// The rejection the next call would get because the breaker is open or forced open,
    /// without admitting anything or evaluating any expiry, or `None` (the breaker may still
    /// reject the call for another reason: half-open and full). Lock-free unless the lane
    /// sends every call to the lock anyway (half-open, forced, a policy it cannot count for).
    #[inline]
    pub(crate) fn peek_open(&self) -> Option<Rejected> {
        match self.lane.peek_open(|| self.clock.now()) {
            Peek::Open(_) if self.dry_run => None,
            Peek::Open(rejected) => Some(rejected),
            Peek::Passes | Peek::Expired => None,
            Peek::AskTheLock => self.peek_open_locked(),
        }
    }

    /// [`peek_open`](Self::peek_open) when the lane cannot answer: under the lock.
    #[inline(never)]
    fn peek_open_locked(&self) -> Option<Rejected> {
        let now = self.clock.now();
        self.locked(|m| m.peek_open(now))
    }

    /// Counts `rejected`, a rejection read with [`peek_open`](Self::peek_open) and answered
    /// to a call without asking the breaker again (the tower layer's `call` after its
    /// `poll_ready`), as the breaker counts its own.
    pub(crate) fn count_rejection(&self, rejected: Rejected) {
        match rejected {
            Rejected::Open { .. } => self.lane.count_rejection(),
            _ => self.locked(|m| m.count_rejection(rejected)),
        }
    }

    /// The breaker's clock, in nanoseconds since its epoch: a plain read, for a layer in
    /// front of the breaker that needs the breaker's timeline before it admits anything (a
    /// clock that panics then panics out of that layer's call, with nothing admitted).
    #[inline]
    pub(crate) fn clock_nanos(&self) -> u64 {
        self.clock.now()
    }

    /// [`allow_checking`](Breaker::allow_checking), with a permit or lease that holds an
    /// `Arc` of the breaker.
    #[inline]
    pub(crate) fn allow_checking_owned(self: &Arc<Self>) -> Result<Admitted<Arc<Self>>, Rejected> {
        admit_checking(Arc::clone(self), None).map(|(admitted, _)| admitted)
    }

    /// [`allow_checking`](Breaker::allow_checking) at `now`, a reading of this breaker's
    /// clock the caller took, with whether a call admitted is a probe of a half-open period
    /// (as [`allow_probing_at`](Self::allow_probing_at)).
    #[inline]
    pub(crate) fn allow_checking_at(
        &self,
        now: Nanos,
    ) -> Result<(Admitted<&Self>, bool), Rejected> {
        admit_checking(self, Some(now))
    }

    /// Whether the breaker has a health check ([`Builder::health_check`]).
    #[inline(always)]
    pub(crate) fn is_checked(&self) -> bool {
        self.health_check.is_some()
    }

    /// [`allow`](Breaker::allow), its answer handed to `admitted` or `rejected` rather than
    /// returned (see [`admit_into`]).
    #[inline(always)]
    pub(crate) fn allow_into<'a, R>(
        &'a self,
        admitted: impl FnOnce(Permit<'a, P, O>) -> R,
        rejected: impl FnOnce(Rejected) -> R,
    ) -> R {
        admit_into(self, admitted, |_, refused| rejected(refused))
    }

    /// [`allow_owned`](Breaker::allow_owned), its answer handed to `admitted` or `rejected`
    /// rather than returned (see [`admit_into`]); the `Arc` is cloned for an admission only.
    #[inline(always)]
    pub(crate) fn allow_owned_into<R>(
        self: &Arc<Self>,
        admitted: impl FnOnce(OwnedPermit<P, O>) -> R,
        rejected: impl FnOnce(Rejected) -> R,
    ) -> R {
        admit_into(self, admitted, |_, refused| rejected(refused))
    }

    /// What the next call would find, without admitting it: the rejection of an open
    /// breaker (or of a check under way), a health check due (the next checking admission
    /// wins its lease), or neither. As lock-free as [`peek_open`](Self::peek_open) but for
    /// an expired open period of a checked breaker, which asks the lock.
    #[inline]
    pub(crate) fn peek_ahead(&self) -> Ahead {
        match self.lane.peek_open(|| self.clock.now()) {
            Peek::Open(_) if self.dry_run => Ahead::Passes,
            Peek::Open(rejected) => Ahead::Rejected(rejected),
            Peek::Passes => Ahead::Passes,
            Peek::Expired if self.health_check.is_none() => Ahead::Passes,
            Peek::Expired | Peek::AskTheLock => self.peek_ahead_locked(),
        }
    }

    /// [`peek_ahead`](Self::peek_ahead) when the lane cannot answer: under the lock.
    #[inline(never)]
    fn peek_ahead_locked(&self) -> Ahead {
        let now = self.clock.now();
        self.locked(|m| m.peek_ahead(now))
    }
}

#[cfg_attr(not(feature = "fleet"), allow(dead_code))]
impl<P, O> Builder<P, O> {
    /// The `max_requests` knob as the breaker will use it (at least 1).
    pub(crate) fn max_requests_or_default(&self) -> u32 {
        self.knobs.max_requests.max(1)
    }

    /// The longest open period the breaker will hold (a forced open excepted): its
    /// `max_open_duration` knob with the default rule applied (one hour, or the timeout if
    /// longer), read from the knobs at build time, as the machine's rules make it.
    pub(crate) fn max_open_duration_or_default(&self) -> Duration {
        Rules::from(&self.knobs).max_open_duration()
    }
}

impl<P, O> Builder<P, O> {
    /// Whether no name was given (the registry then names the breaker after its key).
    pub(crate) fn unnamed(&self) -> bool {
        self.knobs.name.is_empty()
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

/// A check run in an `async fn` (the reqwest middleware, the fleet; the named futures poll
/// theirs by hand), and the lease's breaker for a keyed layer's rejection.
#[cfg_attr(
    not(all(feature = "tower", feature = "reqwest", feature = "fleet")),
    allow(dead_code)
)]
impl<B: Holder> CheckLease<B> {
    /// How the lease holds its breaker.
    pub(crate) fn holder(&self) -> &B {
        &self.breaker
    }

    /// Runs the check to its verdict in the caller's future: `Err` with the payload of a
    /// panic in the user's closure or future (the caller settles the lease as failed and
    /// continues the panic).
    pub(crate) async fn verdict(&self) -> Result<bool, contain::Payload> {
        let mut check = contain::catch(|| self.start())?;
        poll_fn(|cx| match contain::catch(|| check.as_mut().poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(passed)) => Poll::Ready(Ok(passed)),
            Err(payload) => Poll::Ready(Err(payload)),
        })
        .await
    }

    /// Runs the check and settles the lease: the permit of the first half-open probe if
    /// it passed, the rejection if it failed; a panic in the check fails it and continues.
    pub(crate) async fn run(self) -> Result<B::Permit, Rejected> {
        match self.verdict().await {
            Ok(true) => self.passed(),
            Ok(false) => Err(self.failed()),
            Err(payload) => self.failed_then_resume(payload),
        }
    }
}

/// An admission through `holder`, its answer handed to `admitted` (the holder's permit) or
/// to `rejected` (with the holder back) rather than returned: a layer builds its future
/// around the permit in place. (A `Result` of a permit, shared in layout with the rejection,
/// gets copied in pieces whose reloads stall the call; this doubled a tower layer's cost.)
#[inline(always)]
pub(crate) fn admit_into<H: Holder, R>(
    holder: H,
    admitted: impl FnOnce(H::Permit) -> R,
    rejected: impl FnOnce(H, Rejected) -> R,
) -> R {
    let breaker = holder.breaker();
    let mut at = 0;
    match breaker.lane_admit(&mut at) {
        Entry::Admitted { ticket } => admitted(holder.permit(Grant::new(ticket, at))),
        other => match breaker.allow_slow(other) {
            Ok(grant) => admitted(holder.permit(grant)),
            Err(refused) => rejected(holder, refused),
        },
    }
}
