//! The front door: how every caller but the inline `allow` / `allow_owned` / `execute` hot
//! paths asks a breaker for a call, runs a due health check, and turns a result into a
//! verdict. `execute_async`, the tower layers (single, keyed, pool), the reqwest
//! middleware, a pool's pick and the fleet's shared breaker all come through here, so a
//! capability of the call path lands once.
//!
//! | step | function | what it owns |
//! |---|---|---|
//! | look | [`ready`] | what the next call would find, admitting nothing (`poll_ready`, a pool's look) |
//! | admit | [`admit`], [`admit_into`] (and [`allow_into`], for a call that cannot wait for a check) | the lane, the lock, the health-check lease, whether the call is a half-open probe; the clock read here ([`At::Now`]) or given ([`At::Given`]) |
//! | check | [`Gate`] | the user's check started, polled and settled under panic containment; a probe admitted while a panic will continue given back unused ([`Gate::poll_probe`]); dropped, the lease is released with no verdict |
//! | verdict | [`record`], [`poll_call`] | every method of [`Classify`]: `classify`, `open_for`, `unsettled` / `defer`, `overloaded` |
//!
//! A holder ([`Holder`]) says how the call holds its breaker: borrowed, an `Arc` given away,
//! or an `Arc` lent (cloned for an admission only).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use sync_wrapper::SyncWrapper;

use crate::classify::{judge, Classify};
use crate::contain::{self, FirstPanic};
use crate::error::Rejected;
use crate::lane::{Entry, Peek};
use crate::machine::Admission;
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::{Outcome, TripPolicy};
use crate::state::State;

use super::check::{CheckFuture, CheckLease};
use super::holder::Holder;
use super::permit::{Grant, Report};
use super::seam::BreakerSeam;
use super::Breaker;

pub use crate::machine::Ready;

/// When an admission happens: at a reading of the breaker's clock taken here, or at one the
/// caller took already (a layer in front that needed the breaker's timeline first: the
/// fleet's staleness check), which is not read again.
#[derive(Debug, Clone, Copy)]
pub enum At {
    /// Read the breaker's clock (only if the admission needs it).
    Now,
    /// This reading of the breaker's clock.
    Given(Nanos),
}

/// What the next call would find, without admitting it: the rejection of an open breaker
/// (or of a check under way), a health check due (the next admission wins its lease), or
/// neither. Lock-free but for an expired open period of a checked breaker, or a lane that
/// sends every call to the lock (half-open, forced, a policy it cannot count for).
#[inline]
pub fn ready<P: TripPolicy, O: Observer>(breaker: &Breaker<P, O>) -> Ready {
    match breaker.lane.peek_open(|| breaker.clock.now()) {
        Peek::Open(_) if breaker.dry_run => Ready::Passes,
        Peek::Open(rejected) => Ready::Rejected(rejected),
        Peek::Passes => Ready::Passes,
        Peek::Expired if !breaker.checked => Ready::Passes,
        Peek::Expired | Peek::AskTheLock => ready_locked(breaker),
    }
}

/// [`ready`] when the lane cannot answer: under the lock.
#[inline(never)]
fn ready_locked<P: TripPolicy, O: Observer>(breaker: &Breaker<P, O>) -> Ready {
    let now = breaker.clock.now();
    breaker.locked(|m| m.peek_ahead(now))
}

/// What an admission gave.
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub enum Admit<H: Holder> {
    /// The call goes ahead, reporting through this permit; `true` if it is a probe of a
    /// half-open period (decided by the admission itself, under the lock, not by what the
    /// observers were told: a delivery can lag a change behind a slow observer).
    Call(H::Permit, bool),
    /// Not admitted; the holder back (to name the breaker in a keyed rejection).
    Rejected(H, Rejected),
    /// The open period is over and this call won the health-check lease: it runs the check
    /// ([`Gate`]) before it builds its request.
    Check(Gate<H>),
}

/// The admission of one call through `holder`, at `at`.
#[inline(always)]
pub fn admit<H: Holder>(holder: H, at: At) -> Admit<H> {
    admit_into(
        holder,
        at,
        (),
        |(), permit, probe| Admit::Call(permit, probe),
        |(), holder, rejected| Admit::Rejected(holder, rejected),
        |(), gate| Admit::Check(gate),
    )
}

/// [`admit`], its answer handed to the continuation that fits (with `context`, moved into
/// whichever runs) rather than returned: a layer builds its future around the permit in
/// place. (A `Result` of a permit, shared in layout with the rejection, gets copied in
/// pieces whose reloads stall the call; this doubled a tower layer's cost.)
#[inline(always)]
pub fn admit_into<H: Holder, X, R>(
    holder: H,
    at: At,
    context: X,
    call: impl FnOnce(X, H::Permit, bool) -> R,
    rejected: impl FnOnce(X, H, Rejected) -> R,
    check: impl FnOnce(X, Gate<H>) -> R,
) -> R {
    let breaker = holder.breaker();
    let mut now = 0;
    let entry = match at {
        At::Now => breaker.lane_admit(&mut now),
        At::Given(given) => {
            now = given;
            breaker.lane.admit(|| given)
        }
    };
    match entry {
        Entry::Admitted { ticket } => call(context, holder.permit(Grant::new(ticket, now)), false),
        other => match admit_locked(holder, other) {
            Admit::Call(permit, probe) => call(context, permit, probe),
            Admit::Rejected(holder, refused) => rejected(context, holder, refused),
            Admit::Check(gate) => check(context, gate),
        },
    }
}

/// The admission of a call that cannot wait for a health check (`allow`'s, for any
/// holder: a registry's `allow`): a due check is not run; the breaker probes with the call
/// as gobreaker would, or rejects it while a check runs.
#[inline(always)]
pub(crate) fn allow_into<H: Holder, X, R>(
    holder: H,
    context: X,
    call: impl FnOnce(X, H::Permit) -> R,
    rejected: impl FnOnce(X, H, Rejected) -> R,
) -> R {
    let breaker = holder.breaker();
    let mut now = 0;
    match breaker.lane_admit(&mut now) {
        Entry::Admitted { ticket } => call(context, holder.permit(Grant::new(ticket, now))),
        other => match breaker.allow_slow(other) {
            Ok(grant) => call(context, holder.permit(grant)),
            Err(refused) => rejected(context, holder, refused),
        },
    }
}

/// An admission off the lock-free lane: an open breaker's rejection (no lock), or the lock,
/// where a checked breaker whose open period is over hands out its lease.
#[inline(never)]
fn admit_locked<H: Holder>(holder: H, entry: Entry) -> Admit<H> {
    let breaker = holder.breaker();
    if !breaker.checked {
        return match breaker.admit_slow(entry, |m| m.state() == State::HalfOpen) {
            Ok((grant, probe)) => Admit::Call(holder.permit(grant), probe),
            Err(refused) => Admit::Rejected(holder, refused),
        };
    }
    let now = match breaker.entry_now(entry) {
        Ok(now) => now,
        Err(refused) => return Admit::Rejected(holder, refused),
    };
    let mut panics = FirstPanic::default();
    let admitted = breaker.transact(Some(now), &mut panics, |m, now, changes| {
        let (admitted, change) = m.admit_checking(now);
        changes.push(change);
        admitted.map(|a| match a {
            Admission::Call(ticket) => Ok((Grant::new(ticket, now), m.state() == State::HalfOpen)),
            Admission::Check(ticket) => Err(ticket),
        })
    });
    let admitted = match admitted {
        Ok(Ok((grant, probe))) => Admit::Call(holder.clone().permit(grant), probe),
        Ok(Err(ticket)) => Admit::Check(Gate::new(CheckLease::new(holder.clone(), ticket))),
        Err(refused) => Admit::Rejected(holder.clone(), refused),
    };
    if panics.will_resume() {
        // An observer or the policy panicked on the way: nothing will run, so the
        // admission is given back (a permit dropped while panicking is a failure, so it is
        // excluded first; a lease is released) before the panic continues.
        match admitted {
            Admit::Call(permit, _) => H::exclude(permit),
            Admit::Check(gate) => drop(gate),
            Admit::Rejected(..) => {}
        }
        contain::resume(panics);
        // Reached only while this thread is unwinding already (the panic is then dropped):
        // nothing was admitted.
        return Admit::Rejected(holder, Rejected::Checking);
    }
    admitted
}

/// How a health check settled.
#[derive(Debug)]
pub enum Checked<T> {
    /// It passed: the breaker went half-open and this call is its first probe.
    Passed(T),
    /// It failed (returned `false`, or panicked): the breaker opened again; the call is
    /// rejected with what the breaker answers now.
    Failed(Rejected),
    /// It passed, but the lease was stale (the breaker moved on meanwhile: forced, tripped
    /// by hand, taken over) and the call, treated as arriving now, was not admitted.
    Stale(Rejected),
}

impl<T> Checked<T> {
    /// The probe's permit, or the rejection.
    pub fn into_result(self) -> Result<T, Rejected> {
        match self {
            Checked::Passed(permit) => Ok(permit),
            Checked::Failed(rejected) | Checked::Stale(rejected) => Err(rejected),
        }
    }

    /// The one rule for a probe and a panic: a check that passed while a panic kept in
    /// `panics` will continue (an observer's or the policy's on the way, another check's a
    /// pool drove before) admits no call, for the call will not be made. Its permit is given
    /// back unused through `exclude` (dropped while unwinding, it would count as its
    /// breaker's failure) and the call is held back ([`Rejected::Checking`]), as a lease
    /// that went stale.
    fn excluded_on_panic(self, panics: &FirstPanic, exclude: impl FnOnce(T)) -> Self {
        match self {
            Checked::Passed(permit) if panics.will_resume() => {
                exclude(permit);
                Checked::Stale(Rejected::Checking)
            }
            checked => checked,
        }
    }
}

/// A call that holds the health-check lease: the one place a check runs and its lease is
/// settled. The user's check is started on the first poll (so a call that cannot run it,
/// [`decline`](Gate::decline), calls no user code), polled in the caller's future under
/// panic containment, and settled once: passed, the call is the first half-open probe;
/// failed or panicked, the breaker opens again. Dropped unsettled (the call was cancelled
/// during its check), the lease is released with no verdict, so the next call runs the check
/// again.
///
/// `Send` and `Sync` when the holder is (the check's future is only reached through
/// `&mut`); `Unpin`. As a [`Future`], it resolves to the probe's permit or the rejection,
/// a panic of the check continuing once its failure is settled.
pub struct Gate<H: Holder> {
    /// The check's future once started; dropped before the lease is released.
    check: Option<SyncWrapper<CheckFuture>>,
    lease: CheckLease<H>,
    /// The check runs beside the calls ([`Gate::beside`]): its failure rejects no caller.
    beside: bool,
}

impl<H: Holder> Gate<H> {
    fn new(lease: CheckLease<H>) -> Self {
        Self {
            check: None,
            lease,
            beside: false,
        }
    }

    /// This check runs beside the calls (a pool's: the pick that won it sends its call
    /// elsewhere, or answers with the pool's own rejection): its failure reopens the breaker
    /// as any failed check, but rejects no caller, so it is counted in the breaker's
    /// `health_checks_failed` only, not in `rejected_open`.
    #[must_use]
    pub fn beside(mut self) -> Self {
        self.beside = true;
        self
    }

    /// How the lease holds its breaker.
    pub fn holder(&self) -> &H {
        self.lease.holder()
    }

    /// For a call that cannot run the check (it has no way to wait for it): the lease is
    /// given back with no verdict, and the call is held back as every call is while a check
    /// runs ([`Rejected::Checking`], counted). The next call that can runs the check.
    pub fn decline(self) -> Rejected {
        let breaker = self.holder().clone();
        drop(self);
        breaker.breaker().count_rejection(Rejected::Checking);
        Rejected::Checking
    }

    /// Polls the check (started on the first poll) and, once it finished, settles the
    /// lease. A panic of user code on the way (the check's closure or future, an observer
    /// of the change) is kept in `panics`, for the caller to continue once its own
    /// bookkeeping is done; the check's own panic counts as its failure.
    ///
    /// # Panics
    ///
    /// Polled again after it settled.
    pub fn poll_settle(
        &mut self,
        cx: &mut Context<'_>,
        panics: &mut FirstPanic,
    ) -> Poll<Checked<H::Permit>> {
        let verdict = match self.poll_verdict(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(verdict) => verdict,
        };
        // Settled on a reckoning of its own: a panic the caller kept before (a fleet's
        // observer) must not cost a passed check its probe.
        let mut own = FirstPanic::default();
        let lease = &mut self.lease;
        let checked = match verdict {
            Ok(true) => match lease.passed_keeping(&mut own) {
                Ok(permit) => Checked::Passed(permit).excluded_on_panic(&own, H::exclude),
                Err(rejected) => Checked::Stale(rejected),
            },
            Ok(false) => Checked::Failed(lease.failed_keeping(&mut own, !self.beside)),
            Err(payload) => {
                own.keep(payload);
                Checked::Failed(lease.failed_keeping(&mut own, !self.beside))
            }
        };
        // The user's future goes once the lease is settled; its destructor is user code too.
        if let Some(check) = self.check.take() {
            own.catch((), || drop(check));
        }
        panics.merge(own);
        Poll::Ready(checked)
    }

    /// [`poll_settle`](Gate::poll_settle), answered as the call goes on: the probe's permit,
    /// or the rejection. A probe admitted while a panic kept in `panics` will continue (this
    /// check's, or one the caller kept before: a pool drives several checks in one pick)
    /// is given back unused, and the call held back ([`Rejected::Checking`]): it will not be
    /// made, and its permit dropped while unwinding would count as its breaker's failure.
    ///
    /// # Panics
    ///
    /// Polled again after it settled.
    pub fn poll_probe(
        &mut self,
        cx: &mut Context<'_>,
        panics: &mut FirstPanic,
    ) -> Poll<Result<H::Permit, Rejected>> {
        let checked = ready!(self.poll_settle(cx, panics));
        Poll::Ready(checked.excluded_on_panic(panics, H::exclude).into_result())
    }

    /// The check's verdict once it finished: `Err` with the payload of a panic in the
    /// user's closure or future.
    fn poll_verdict(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, contain::Payload>> {
        assert!(!self.lease.settled(), "`Gate` polled after it settled");
        if self.check.is_none() {
            let lease = &self.lease;
            match contain::catch(|| lease.start()) {
                Ok(check) => self.check = Some(SyncWrapper::new(check)),
                Err(payload) => return Poll::Ready(Err(payload)),
            }
        }
        let check = self.check.as_mut().expect("started above").get_mut();
        match contain::catch(|| check.as_mut().poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(passed)) => Poll::Ready(Ok(passed)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

impl<H: Holder> Future for Gate<H> {
    type Output = Result<H::Permit, Rejected>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut panics = FirstPanic::default();
        let checked = ready!(self.get_mut().poll_settle(cx, &mut panics));
        contain::resume(panics);
        Poll::Ready(checked.into_result())
    }
}

// Neither field is pinned: the check's future is boxed.
impl<H: Holder> Unpin for Gate<H> {}

impl<H: Holder> fmt::Debug for Gate<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("lease", &self.lease)
            .field("started", &self.check.is_some())
            .finish()
    }
}

/// What [`record`] did with a result.
#[must_use = "a kept panic must be resumed"]
#[allow(missing_debug_implementations)] // the front door's, not a public API
pub enum Recorded {
    /// The verdict was reported, counting as this.
    Counted(Outcome),
    /// The result's outcome shows later ([`Classify::unsettled`]): its verdict went with it.
    Deferred,
    /// User code panicked (the classifier: the call was reported excluded; its `defer`: the
    /// verdict was dropped with the panic, an abandoned call). The panic, to continue once
    /// the caller's own bookkeeping is done.
    Panicked(FirstPanic),
}

impl Recorded {
    /// Continues a kept panic, if any.
    #[inline(always)]
    pub fn resume(self) {
        if let Recorded::Panicked(panics) = self {
            contain::resume(panics);
        }
    }
}

/// The one verdict site: how `result` counts, reported through `report`, honouring every
/// method of [`Classify`]: `classify`, `open_for` (a failure opens the breaker for that
/// long), `unsettled` / `defer` (a report that can leave its call hands its verdict to the
/// result; one that cannot counts at once), and `overloaded` (a report that tells overload
/// apart, a pool's pick). A panic in the classifier reports the call excluded (the breaker
/// cannot know what the result meant) and is handed back.
#[inline]
pub fn record<R, T, E, C>(report: &mut R, classify: &C, result: &mut Result<T, E>) -> Recorded
where
    R: Report,
    C: Classify<T, E> + ?Sized,
{
    match contain::catch(|| classify.unsettled(result)) {
        Ok(false) => {}
        Ok(true) => {
            if let Some(verdict) = report.unsettle() {
                return match contain::catch(|| classify.defer(result, verdict)) {
                    Ok(()) => Recorded::Deferred,
                    Err(payload) => panicked(payload, None::<&mut R>),
                };
            }
        }
        Err(payload) => return panicked(payload, Some(report)),
    }
    let judged = contain::catch(|| {
        let (outcome, open_for) = judge(classify, result);
        let overloaded = R::SEES_OVERLOAD
            && matches!(outcome, Outcome::Failure | Outcome::Fatal)
            && classify.overloaded(result);
        (outcome, open_for, overloaded)
    });
    match judged {
        Ok((outcome, _, true)) => {
            report.report_overloaded();
            Recorded::Counted(outcome)
        }
        Ok((outcome, None, false)) => {
            report.report(outcome);
            Recorded::Counted(outcome)
        }
        Ok((outcome, Some(open_for), false)) => {
            report.report_open_for(outcome, open_for);
            Recorded::Counted(outcome)
        }
        Err(payload) => panicked(payload, Some(report)),
    }
}

/// A classifier's panic: the call reported excluded through `report` if given (a panic
/// while reporting is dropped: the classifier's came first), the panic kept.
#[cold]
fn panicked<R: Report>(payload: contain::Payload, report: Option<&mut R>) -> Recorded {
    let mut panics = FirstPanic::default();
    panics.keep(payload);
    if let Some(report) = report {
        panics.catch((), || report.report(Outcome::Excluded));
    }
    Recorded::Panicked(panics)
}

/// Polls an admitted call and, once it completes, reports its result through `report`
/// ([`record`]): how every async call of the crate settles. A panic while polling is
/// reported as a failure and continues; a panic in the classifier as an exclusion, and
/// continues.
///
/// # Panics
///
/// Polled again after the call completed (a future polled after completion).
#[inline]
pub fn poll_call<Fut, T, E, R, C>(
    call: Pin<&mut Fut>,
    cx: &mut Context<'_>,
    report: &mut R,
    classify: &C,
) -> Poll<Result<T, E>>
where
    Fut: Future<Output = Result<T, E>>,
    R: Report,
    C: Classify<T, E> + ?Sized,
{
    // Not through `poll_judged`: handing the result on in a pair costs a tower call a
    // tenth more (the result is moved once more, through memory).
    let mut result = ready!(poll_once(call, cx, report));
    record(report, classify, &mut result).resume();
    Poll::Ready(result)
}

/// [`poll_call`], with how the result counted: `None` when its verdict went with it
/// ([`Recorded::Deferred`]). For a caller that acts on the verdict (a retry).
///
/// # Panics
///
/// Polled again after the call completed (a future polled after completion).
#[inline]
pub(crate) fn poll_judged<Fut, T, E, R, C>(
    call: Pin<&mut Fut>,
    cx: &mut Context<'_>,
    report: &mut R,
    classify: &C,
) -> Poll<(Result<T, E>, Option<Outcome>)>
where
    Fut: Future<Output = Result<T, E>>,
    R: Report,
    C: Classify<T, E> + ?Sized,
{
    let mut result = ready!(poll_once(call, cx, report));
    let outcome = match record(report, classify, &mut result) {
        Recorded::Counted(outcome) => Some(outcome),
        Recorded::Deferred => None,
        Recorded::Panicked(panics) => {
            contain::resume(panics);
            None
        }
    };
    Poll::Ready((result, outcome))
}

/// Polls an admitted call once: its result when it completes; a panic while polling is
/// reported as a failure and continues. What [`poll_call`] and [`poll_judged`] share.
#[inline(always)]
fn poll_once<Fut, T, E, R>(
    call: Pin<&mut Fut>,
    cx: &mut Context<'_>,
    report: &mut R,
) -> Poll<Result<T, E>>
where
    Fut: Future<Output = Result<T, E>>,
    R: Report,
{
    assert!(!report.reported(), "a call polled after completion");
    match contain::catch(|| call.poll(cx)) {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(result)) => Poll::Ready(result),
        Err(payload) => report.report_then_resume(Outcome::Failure, payload),
    }
}

#[cfg(test)]
mod tests {
    //! The gate as a table: each holder (borrowed, an `Arc` given away, an `Arc` lent) ×
    //! each `At` × each way a call can find the breaker (the fast path, a half-open probe,
    //! open, and a check due that passes, fails, panics, is dropped or is declined).
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;
    use crate::breaker::Builder;
    use crate::clock::ManualClock;
    use crate::policy::ConsecutiveFailures;

    const OPEN: Duration = Duration::from_secs(10);

    /// How the breaker stands when the call arrives.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Found {
        Closed,
        /// Unchecked, its open period over.
        HalfOpen,
        Open,
        /// Checked, its open period over: the check answers so.
        CheckDue(Check),
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Check {
        Passes,
        Fails,
        Panics,
    }

    /// What the call does with a lease it wins.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Then {
        Poll,
        Drop,
        Decline,
    }

    /// A breaker as `found` says, opening at the first failure; its check's runs counted.
    fn breaker(clock: &ManualClock, found: Found, runs: &Arc<AtomicU32>) -> Arc<Breaker> {
        let builder = Builder::new()
            .name("gate")
            .timeout(OPEN)
            .policy(ConsecutiveFailures::new(1).unwrap())
            .clock(clock.clone());
        let builder = match found {
            Found::CheckDue(check) => {
                let runs = Arc::clone(runs);
                builder.health_check(move || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    async move {
                        match check {
                            Check::Passes => true,
                            Check::Fails => false,
                            Check::Panics => panic!("the check panicked"),
                        }
                    }
                })
            }
            _ => builder,
        };
        let b = Arc::new(builder.build());
        if found != Found::Closed {
            b.allow().unwrap().failure();
        }
        if matches!(found, Found::HalfOpen | Found::CheckDue(_)) {
            clock.advance(OPEN + Duration::from_nanos(1));
        }
        b
    }

    fn kind(rejected: Rejected) -> &'static str {
        match rejected {
            Rejected::Open { .. } => "open",
            Rejected::Checking => "checking",
            Rejected::TooManyRequests => "too many",
            _ => "other",
        }
    }

    /// One admission through `holder` at `at`, and what came of it.
    fn row<H: Holder>(holder: H, at: At, then: Then) -> String {
        let breaker = holder.clone();
        let state = || format!("{:?}", breaker.breaker().state());
        match admit(holder, at) {
            Admit::Call(permit, probe) => {
                H::exclude(permit);
                format!("call probe={probe}")
            }
            Admit::Rejected(_, rejected) => format!("rejected {}", kind(rejected)),
            Admit::Check(mut gate) => match then {
                Then::Drop => {
                    drop(gate);
                    "check dropped".into()
                }
                Then::Decline => format!("check declined: {}", kind(gate.decline())),
                Then::Poll => {
                    let polled = contain::catch(|| {
                        let mut cx = Context::from_waker(Waker::noop());
                        Pin::new(&mut gate).poll(&mut cx)
                    });
                    match polled {
                        Ok(Poll::Ready(Ok(permit))) => {
                            H::exclude(permit);
                            format!("check passed, {}", state())
                        }
                        Ok(Poll::Ready(Err(rejected))) => {
                            format!("check failed: {}, {}", kind(rejected), state())
                        }
                        Ok(Poll::Pending) => "pending".into(),
                        Err(_) => format!("check panicked, {}", state()),
                    }
                }
            },
        }
    }

    /// Every row, for one way of holding the breaker (`$b`, the `Arc`, made into the holder
    /// by `$hold`); `$given` says whether the admission is given the clock's reading.
    macro_rules! table {
        ($b:ident => $hold:expr, $given:expr) => {{
            use Check::*;
            use Found::*;
            let rows: [(Found, Then, &str, u32); 10] = [
                (Closed, Then::Poll, "call probe=false", 0),
                (HalfOpen, Then::Poll, "call probe=true", 0),
                (Open, Then::Poll, "rejected open", 0),
                (CheckDue(Passes), Then::Poll, "check passed, HalfOpen", 1),
                (CheckDue(Fails), Then::Poll, "check failed: open, Open", 1),
                (CheckDue(Panics), Then::Poll, "check panicked, Open", 1),
                // A dropped or declined lease runs no user code, and the next call wins it.
                (CheckDue(Passes), Then::Drop, "check dropped", 0),
                (
                    CheckDue(Passes),
                    Then::Decline,
                    "check declined: checking",
                    0,
                ),
                // Whatever the check would have said.
                (CheckDue(Fails), Then::Drop, "check dropped", 0),
                (
                    CheckDue(Panics),
                    Then::Decline,
                    "check declined: checking",
                    0,
                ),
            ];
            for (found, then, expected, expected_runs) in rows {
                let clock = ManualClock::new();
                let runs = Arc::new(AtomicU32::new(0));
                let b = breaker(&clock, found, &runs);
                let at = if $given {
                    At::Given(b.clock_nanos())
                } else {
                    At::Now
                };
                let before = b.totals();
                let got = row(
                    {
                        let $b = &b;
                        $hold
                    },
                    at,
                    then,
                );
                let ctx = format!("{found:?} then {then:?}, given={}", $given);
                assert_eq!(got, expected, "{ctx}");
                assert_eq!(
                    runs.load(Ordering::SeqCst),
                    expected_runs,
                    "check runs: {ctx}"
                );
                let totals = b.totals();
                match (found, then) {
                    (CheckDue(Passes), Then::Poll) => {
                        assert_eq!((totals.health_checks, totals.health_checks_failed), (1, 0))
                    }
                    (CheckDue(_), Then::Poll) => {
                        assert_eq!((totals.health_checks, totals.health_checks_failed), (1, 1))
                    }
                    (CheckDue(_), Then::Drop | Then::Decline) => {
                        assert_eq!(totals.health_checks, 0, "{ctx}");
                        let declined = u64::from(then == Then::Decline);
                        assert_eq!(
                            totals.rejected_open,
                            before.rejected_open + declined,
                            "{ctx}"
                        );
                        // The lease is free again: the next call wins it.
                        assert!(
                            matches!(
                                admit(
                                    {
                                        let $b = &b;
                                        $hold
                                    },
                                    At::Now
                                ),
                                Admit::Check(_)
                            ),
                            "{ctx}"
                        );
                    }
                    (Open, _) => assert_eq!(totals.rejected_open, before.rejected_open + 1),
                    _ => assert_eq!(totals.admitted, before.admitted + 1, "{ctx}"),
                }
            }
        }};
    }

    #[test]
    fn a_borrowed_breaker_through_the_gate() {
        table!(b => &**b, false);
        table!(b => &**b, true);
    }

    #[test]
    fn an_arc_given_away_through_the_gate() {
        table!(b => Arc::clone(b), false);
        table!(b => Arc::clone(b), true);
    }

    #[test]
    fn an_arc_lent_through_the_gate() {
        table!(b => b, false);
        table!(b => b, true);
    }

    /// What a report saw, for the verdict table.
    #[derive(Default)]
    struct Seen {
        reported: Vec<String>,
        deferrable: bool,
        sees_overload: bool,
    }

    impl Report for Seen {
        fn reported(&self) -> bool {
            false
        }
        fn report(&mut self, outcome: Outcome) {
            self.reported.push(format!("{outcome:?}"));
        }
        fn report_open_for(&mut self, outcome: Outcome, open_for: Duration) {
            self.reported.push(format!("{outcome:?} for {open_for:?}"));
        }
        fn report_then_resume(&mut self, _: Outcome, payload: contain::Payload) -> ! {
            contain::resume_payload(payload)
        }
        fn unsettle(&mut self) -> Option<crate::classify::Unsettled> {
            if !self.deferrable {
                return None;
            }
            self.reported.push("deferred".into());
            Some(crate::classify::Unsettled::new(Box::new(Noop)))
        }
        fn report_overloaded(&mut self) {
            self.reported.push("overloaded".into());
        }
    }

    /// Tells overload apart.
    struct Overload(Seen);

    struct Noop;
    impl crate::classify::Finish for Noop {
        fn finish(&mut self, _: Outcome, _: Option<Duration>) {}
        fn breaker_name(&self) -> &str {
            ""
        }
    }

    /// `Err(0)`: a failure; `Err(n)`: a failure that asks for `n` seconds, and is overload;
    /// `Ok(1)`: unsettled; `Ok(2)`: the classifier panics.
    struct Rules;
    impl Classify<u32, u64> for Rules {
        fn classify(&self, result: &Result<u32, u64>) -> Outcome {
            match result {
                Ok(2) => panic!("the classifier panicked"),
                Ok(_) => Outcome::Success,
                Err(_) => Outcome::Failure,
            }
        }
        fn open_for(&self, result: &Result<u32, u64>) -> Option<Duration> {
            match result {
                Err(n) if *n > 0 => Some(Duration::from_secs(*n)),
                _ => None,
            }
        }
        fn overloaded(&self, result: &Result<u32, u64>) -> bool {
            matches!(result, Err(n) if *n > 0)
        }
        fn unsettled(&self, result: &Result<u32, u64>) -> bool {
            matches!(result, Ok(1))
        }
    }

    #[test]
    fn the_verdict_honours_every_method_of_classify() {
        let rows: [(Result<u32, u64>, bool, bool, &str); 8] = [
            (Ok(0), false, false, "Success"),
            (Err(0), false, false, "Failure"),
            (Err(30), false, false, "Failure for 30s"),
            (Err(30), false, true, "overloaded"),
            (Err(0), false, true, "Failure"),
            // Unsettled: deferred where the report can leave its call, counted at once
            // where it cannot.
            (Ok(1), true, false, "deferred"),
            (Ok(1), false, false, "Success"),
            (Ok(2), false, false, "Excluded"),
        ];
        for (result, deferrable, overload, expected) in rows {
            let mut result = result;
            let seen = Seen {
                deferrable,
                sees_overload: overload,
                ..Seen::default()
            };
            let (recorded, reported) = if overload {
                let mut report = Overload(seen);
                let recorded = record(&mut report, &Rules, &mut result);
                (recorded, report.0.reported)
            } else {
                let mut report = seen;
                let recorded = record(&mut report, &Rules, &mut result);
                (recorded, report.reported)
            };
            assert_eq!(reported, [expected], "{result:?}");
            let panicked = matches!(recorded, Recorded::Panicked(_));
            assert_eq!(panicked, result == Ok(2), "{result:?}");
            if let Recorded::Panicked(panics) = recorded {
                let caught = contain::catch(|| contain::resume(panics)).unwrap_err();
                assert_eq!(
                    *caught.downcast_ref::<&str>().unwrap(),
                    "the classifier panicked"
                );
            }
        }
    }

    impl Report for Overload {
        fn reported(&self) -> bool {
            false
        }
        fn report(&mut self, outcome: Outcome) {
            self.0.report(outcome);
        }
        fn report_open_for(&mut self, outcome: Outcome, open_for: Duration) {
            self.0.report_open_for(outcome, open_for);
        }
        fn report_then_resume(&mut self, outcome: Outcome, payload: contain::Payload) -> ! {
            self.0.report_then_resume(outcome, payload)
        }
        const SEES_OVERLOAD: bool = true;
        fn report_overloaded(&mut self) {
            assert!(self.0.sees_overload);
            self.0.report_overloaded();
        }
    }
}
