//! User code may panic anywhere: the policy's hooks, the observers and `on_state_change`, the
//! clock, a classifier, the call. Whatever panics, and whenever (at admission, with a result,
//! when a permit is dropped, while the thread already unwinds, inside a lazy transition):
//!
//! - the panic reaches the caller (or, raised while the thread already unwinds, is dropped and
//!   the first panic reaches the caller);
//! - no admission is stranded: `admitted == successes + failures + exclusions + abandoned +
//!   dropped`;
//! - every state change is delivered, once, in order: delivered == happened;
//! - the breaker recovers (closes again) once the code stops panicking;
//! - the process never aborts.
//!
//! The table at the bottom has one row per hook and per moment; the reproducers of the panic reports
//! follow it as named tests.

use crate::support;

use std::collections::HashSet;
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use lazybreaker::observe::{Observer, Transition};
use lazybreaker::policy::{CallResult, Outcome, SuccessRecorder, TripPolicy};
use lazybreaker::{Breaker, Clock, Counts, Error, ManualClock, Rejected, State, Totals};
use support::hooks::{PolicyHook, POLICY_HOOKS};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Every piece of user code the breaker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Hook {
    Capabilities,
    Gauges,
    OnResult,
    OnProbeResult,
    OpenDuration,
    HalfOpenProbes,
    PolicyStateChange,
    Callback,
    Observer,
    Clock,
    Classifier,
    Call,
}

/// Hooks armed to panic, each once (with the `Hook` itself as the payload).
#[derive(Debug, Clone, Default)]
struct Arms(Arc<Mutex<HashSet<Hook>>>);

impl Arms {
    fn arm(&self, hook: Hook) {
        self.0.lock().unwrap().insert(hook);
    }

    fn disarm_all(&self) {
        self.0.lock().unwrap().clear();
    }

    /// Panics with `hook` if it is armed (and disarms it).
    fn fire(&self, hook: Hook) {
        if self.0.lock().unwrap().remove(&hook) {
            panic_any(hook);
        }
    }
}

type Log = Arc<Mutex<Vec<(State, State)>>>;

/// Trips on the first closed-state failure; every hook can be armed to panic. Records every
/// state change it is told of, under the breaker's lock: what happened, in order.
#[derive(Debug)]
struct RigPolicy {
    arms: Arms,
    happened: Log,
    lane: bool,
}

impl TripPolicy for RigPolicy {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.arms.fire(Hook::OnResult);
        result.outcome == Outcome::Failure && result.counts.consecutive_failures >= 1
    }

    fn open_duration(&mut self, timeout: Duration, _now: Duration) -> Duration {
        self.arms.fire(Hook::OpenDuration);
        timeout
    }

    fn on_probe_result(&mut self, _result: &CallResult<'_>) {
        self.arms.fire(Hook::OnProbeResult);
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        self.arms.fire(Hook::HalfOpenProbes);
        max_requests
    }

    fn on_state_change(&mut self, from: State, to: State, _now: Duration) {
        self.happened.lock().unwrap().push((from, to));
        self.arms.fire(Hook::PolicyStateChange);
    }

    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        self.arms.fire(Hook::Capabilities);
        lazybreaker::policy::Capabilities::default().needs_successes(!self.lane)
    }

    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        self.arms.fire(Hook::Gauges);
        report("rig", 1.0);
    }
}

#[derive(Debug)]
struct RigClock {
    inner: ManualClock,
    arms: Arms,
}

impl Clock for RigClock {
    fn now(&self) -> Duration {
        self.arms.fire(Hook::Clock);
        self.inner.now()
    }
}

#[derive(Debug)]
struct RigObserver {
    arms: Arms,
    delivered: Log,
}

impl Observer for RigObserver {
    fn on_transition(&self, t: &Transition<'_>) {
        self.delivered.lock().unwrap().push((t.from, t.to));
        self.arms.fire(Hook::Observer);
    }
}

struct Rig {
    breaker: Breaker<RigPolicy, RigObserver>,
    clock: ManualClock,
    arms: Arms,
    happened: Log,
    by_callback: Log,
    by_observer: Log,
}

impl Rig {
    fn new(lane: bool) -> Self {
        let (arms, clock) = (Arms::default(), ManualClock::new());
        let (happened, by_callback, by_observer) = (Log::default(), Log::default(), Log::default());
        let breaker = Breaker::builder()
            .name("rig")
            .timeout(TIMEOUT)
            .policy(RigPolicy {
                arms: arms.clone(),
                happened: Arc::clone(&happened),
                lane,
            })
            .observer(RigObserver {
                arms: arms.clone(),
                delivered: Arc::clone(&by_observer),
            })
            .on_state_change({
                let (arms, log) = (arms.clone(), Arc::clone(&by_callback));
                move |_, from, to| {
                    log.lock().unwrap().push((from, to));
                    arms.fire(Hook::Callback);
                }
            })
            .clock(RigClock {
                inner: clock.clone(),
                arms: arms.clone(),
            })
            .build();
        Self {
            breaker,
            clock,
            arms,
            happened,
            by_callback,
            by_observer,
        }
    }

    fn expire(&self) {
        self.clock.advance(TIMEOUT + Duration::from_nanos(1));
    }

    /// Brings the breaker to `pre` with nothing armed.
    fn prepare(&self, pre: Pre) {
        if pre == Pre::Closed {
            return;
        }
        self.breaker.allow().unwrap().failure();
        assert_eq!(self.breaker.state(), State::Open);
        self.expire();
        if pre == Pre::HalfOpen {
            assert_eq!(self.breaker.state(), State::HalfOpen);
        }
    }

    /// Checks every invariant of the module documentation, then drives the breaker back to
    /// closed with nothing armed.
    fn check_and_recover(&self, row: &str) {
        self.arms.disarm_all();
        self.check_accounts(row);
        for _ in 0..4 {
            match self.breaker.state() {
                State::Closed => break,
                State::Open => self.expire(),
                State::HalfOpen => match self.breaker.allow() {
                    Ok(probe) => probe.success(),
                    Err(e) => panic!("{row}: stuck half-open: {e}"),
                },
            }
        }
        assert_eq!(
            self.breaker.state(),
            State::Closed,
            "{row}: did not recover"
        );
        // And it still trips and counts.
        self.breaker.allow().unwrap().failure();
        assert_eq!(self.breaker.state(), State::Open, "{row}: no longer trips");
        self.check_accounts(row);
    }

    fn check_accounts(&self, row: &str) {
        let t: Totals = self.breaker.totals();
        assert_eq!(
            t.admitted,
            t.successes + t.failures + t.exclusions + t.abandoned + t.dropped,
            "{row}: an admission is unaccounted for: {t:?}"
        );
        let happened = self.happened.lock().unwrap().clone();
        assert_eq!(
            *self.by_callback.lock().unwrap(),
            happened,
            "{row}: on_state_change saw other changes than happened"
        );
        assert_eq!(
            *self.by_observer.lock().unwrap(),
            happened,
            "{row}: the observer saw other changes than happened"
        );
        for pair in happened.windows(2) {
            assert_eq!(
                pair[0].1, pair[1].0,
                "{row}: changes out of order: {pair:?}"
            );
        }
        let opened = happened.iter().filter(|(_, to)| *to == State::Open).count();
        assert_eq!(t.opened, opened as u64, "{row}: opened");
    }
}

/// The state a row starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pre {
    Closed,
    /// Open, with its open period over: the next call moves it to half-open lazily.
    OpenExpired,
    HalfOpen,
}

/// What the row does, with the hook armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// `allow()`, then a success if admitted.
    Allow,
    /// `execute(|| Ok(()))`.
    Execute,
    /// `state()`.
    State,
    /// `snapshot()`: reads the policy's gauges.
    Snapshot,
    /// A permit taken unarmed, then its failure reported armed.
    Failure,
    /// A permit taken unarmed, then its success reported armed.
    Success,
    /// A permit taken unarmed, then dropped without a verdict, armed.
    Drop,
    /// A permit held while the call panics: it reports while the thread unwinds.
    DropWhileUnwinding,
    /// `execute` with a call that panics.
    ExecutePanicking,
    /// `execute_classified` with a classifier that may panic.
    Classified,
}

/// Runs the row's moment; the caller catches what it raises.
fn act(rig: &Rig, moment: Moment) {
    let b = &rig.breaker;
    match moment {
        Moment::Allow => {
            if let Ok(permit) = b.allow() {
                permit.success();
            }
        }
        Moment::Execute => {
            let _ = b.execute(|| Ok::<_, ()>(()));
        }
        Moment::State => {
            b.state();
        }
        Moment::Snapshot => {
            b.snapshot();
        }
        Moment::Failure | Moment::Success | Moment::Drop | Moment::DropWhileUnwinding => {
            unreachable!("run() takes the permit unarmed first")
        }
        Moment::ExecutePanicking => {
            let _ = b.execute(|| -> Result<(), ()> { panic_any(Hook::Call) });
        }
        Moment::Classified => {
            let arms = rig.arms.clone();
            let _ = b.execute_classified(
                || Err::<(), _>("refused"),
                move |_| {
                    arms.fire(Hook::Classifier);
                    Outcome::Failure
                },
            );
        }
    }
}

/// Runs one row: `hook` armed, `moment` done from `pre`; returns what the caller caught.
fn run(rig: &Rig, pre: Pre, hook: Hook, moment: Moment) -> Option<Hook> {
    rig.prepare(pre);
    let caught = match moment {
        Moment::Failure | Moment::Success | Moment::Drop | Moment::DropWhileUnwinding => {
            let permit = rig.breaker.allow().expect("admitted unarmed");
            rig.arms.arm(hook);
            catch_unwind(AssertUnwindSafe(|| match moment {
                Moment::Failure => permit.failure(),
                Moment::Success => permit.success(),
                Moment::Drop => drop(permit),
                _ => {
                    let _held = permit;
                    panic_any(Hook::Call);
                }
            }))
        }
        _ => {
            rig.arms.arm(hook);
            catch_unwind(AssertUnwindSafe(|| act(rig, moment)))
        }
    };
    caught
        .err()
        .map(|payload| *payload.downcast_ref::<Hook>().expect("a Hook payload"))
}

#[test]
fn every_hook_at_every_moment_panics_through_and_leaves_the_breaker_whole() {
    use Hook::*;
    use Moment::*;
    use Pre::*;
    // (start from, hook that panics, what is done, what the caller must see)
    let rows: &[(Pre, Hook, Moment, Hook)] = &[
        // A lazy transition inside an admission, a call, a read of the state.
        (OpenExpired, HalfOpenProbes, Allow, HalfOpenProbes),
        (OpenExpired, PolicyStateChange, Allow, PolicyStateChange),
        (OpenExpired, Callback, Allow, Callback),
        (OpenExpired, Observer, Allow, Observer),
        (OpenExpired, Clock, Allow, Clock),
        (OpenExpired, HalfOpenProbes, Execute, HalfOpenProbes),
        (OpenExpired, PolicyStateChange, Execute, PolicyStateChange),
        (OpenExpired, Callback, Execute, Callback),
        (OpenExpired, Observer, Execute, Observer),
        (OpenExpired, HalfOpenProbes, State, HalfOpenProbes),
        (OpenExpired, PolicyStateChange, State, PolicyStateChange),
        (OpenExpired, Callback, State, Callback),
        (OpenExpired, Observer, State, Observer),
        (OpenExpired, Clock, State, Clock),
        // A result: a closed-state failure that trips.
        (Closed, OnResult, Failure, OnResult),
        (Closed, OpenDuration, Failure, OpenDuration),
        (Closed, PolicyStateChange, Failure, PolicyStateChange),
        (Closed, Callback, Failure, Callback),
        (Closed, Observer, Failure, Observer),
        (Closed, Clock, Failure, Clock),
        // A result: a half-open probe that closes or reopens.
        (HalfOpen, OnProbeResult, Success, OnProbeResult),
        (HalfOpen, PolicyStateChange, Success, PolicyStateChange),
        (HalfOpen, Callback, Success, Callback),
        (HalfOpen, Observer, Success, Observer),
        (HalfOpen, Clock, Success, Clock),
        (HalfOpen, OnProbeResult, Failure, OnProbeResult),
        (HalfOpen, OpenDuration, Failure, OpenDuration),
        (HalfOpen, Callback, Failure, Callback),
        // A permit dropped without a verdict.
        (Closed, OnResult, Drop, OnResult),
        (Closed, Clock, Drop, Clock),
        (HalfOpen, OnProbeResult, Drop, OnProbeResult),
        (HalfOpen, Clock, Drop, Clock),
        // A permit dropped while the call unwinds: the hook's panic is dropped, the call's
        // panic reaches the caller.
        (Closed, OnResult, DropWhileUnwinding, Call),
        (Closed, OpenDuration, DropWhileUnwinding, Call),
        (Closed, PolicyStateChange, DropWhileUnwinding, Call),
        (Closed, Callback, DropWhileUnwinding, Call),
        (Closed, Observer, DropWhileUnwinding, Call),
        (Closed, Clock, DropWhileUnwinding, Call),
        (HalfOpen, OnProbeResult, DropWhileUnwinding, Call),
        (HalfOpen, OpenDuration, DropWhileUnwinding, Call),
        (HalfOpen, Callback, DropWhileUnwinding, Call),
        (HalfOpen, Clock, DropWhileUnwinding, Call),
        (Closed, OnResult, ExecutePanicking, Call),
        (Closed, Callback, ExecutePanicking, Call),
        (HalfOpen, OpenDuration, ExecutePanicking, Call),
        // The classifier.
        (Closed, Classifier, Classified, Classifier),
        (HalfOpen, Classifier, Classified, Classifier),
        // A read of the policy's own figures.
        (Closed, Gauges, Snapshot, Gauges),
        (HalfOpen, Gauges, Snapshot, Gauges),
    ];
    // Every policy hook of the shared list has a row (the build-time one has its own test:
    // the breaker does not exist yet when it panics).
    for hook in POLICY_HOOKS {
        let rig_hook = match hook {
            PolicyHook::Capabilities | PolicyHook::SuccessRecorder => continue, // a_policy_panicking_while_the_breaker_is_built_..
            // Asked as a lock holder republishes the lane: lane_failures::a_headroom_panic_..
            // and lane_slow_calls::a_panicking_quiet_successes_..
            PolicyHook::LaneRoom => continue,
            PolicyHook::HalfOpenProbes => HalfOpenProbes,
            PolicyHook::OnResult => OnResult,
            PolicyHook::OpenDuration => OpenDuration,
            PolicyHook::OnProbeResult => OnProbeResult,
            PolicyHook::OnStateChange => PolicyStateChange,
            PolicyHook::Gauges => Gauges,
        };
        assert!(
            rows.iter()
                .any(|row| row.1 == rig_hook && row.3 == rig_hook),
            "no row panics through {hook:?}"
        );
    }
    for lane in [true, false] {
        for &(pre, hook, moment, expected) in rows {
            let row = format!("{pre:?} / {hook:?} / {moment:?} / lane {lane}");
            let rig = Rig::new(lane);
            let caught = run(&rig, pre, hook, moment);
            assert_eq!(caught, Some(expected), "{row}: what the caller caught");
            assert!(
                !rig.arms.0.lock().unwrap().contains(&hook),
                "{row}: the hook never ran"
            );
            rig.check_and_recover(&row);
        }
    }
}

#[test]
fn a_panicking_classifier_counts_as_an_exclusion() {
    let rig = Rig::new(true);
    rig.prepare(Pre::HalfOpen);
    assert_eq!(
        run(&rig, Pre::Closed, Hook::Classifier, Moment::Classified),
        Some(Hook::Classifier)
    );
    // Neither closed nor reopened by a result nobody could classify: the slot is free again.
    assert_eq!(rig.breaker.state(), State::HalfOpen);
    assert_eq!(rig.breaker.counts().total_exclusions, 1);
    rig.breaker
        .allow()
        .expect("the probe slot was given back")
        .success();
    assert_eq!(rig.breaker.state(), State::Closed);
}

// ---------------------------------------------------------------------------------------
// The reproducers of the panic reports, as a user would write them.

/// 1. An `on_state_change` that panics on open → half-open, which happens inside `allow()`:
///    the probe used to be counted with no permit to give its slot back.
#[test]
fn issue_9_a_callback_panicking_on_half_open_does_not_strand_the_probe() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(TIMEOUT)
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .on_state_change(|_, _, to| {
            if to == State::HalfOpen {
                panic!("callback bug");
            }
        })
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(TIMEOUT * 2);
    let caught = catch_unwind(AssertUnwindSafe(|| breaker.allow().map(|p| p.success())));
    assert_eq!(
        *caught.unwrap_err().downcast_ref::<&str>().unwrap(),
        "callback bug"
    );
    // The probe slot was given back: the next probe is admitted, and closes the breaker.
    breaker.allow().expect("not TooManyRequests").success();
    assert_eq!(breaker.state(), State::Closed);
    let t = breaker.totals();
    assert_eq!(
        (t.admitted, t.failures, t.exclusions, t.successes),
        (3, 1, 1, 1)
    );
}

/// 1b. The same under load: a callback that panics on every 4th delivery, 4 threads.
#[test]
fn issue_9_a_callback_panicking_on_every_fourth_delivery_under_load() {
    let clock = ManualClock::new();
    let deliveries = Arc::new(AtomicU64::new(0));
    let log: Log = Arc::default();
    let breaker = Arc::new({
        let (deliveries, log) = (Arc::clone(&deliveries), Arc::clone(&log));
        Breaker::builder()
            .timeout(Duration::from_millis(1))
            .ready_to_trip(|c| c.consecutive_failures >= 1)
            .on_state_change(move |_, from, to| {
                log.lock().unwrap().push((from, to));
                if deliveries.fetch_add(1, Ordering::SeqCst) % 4 == 3 {
                    panic!("every fourth");
                }
            })
            .clock(clock.clone())
            .build()
    });
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let (breaker, clock) = (Arc::clone(&breaker), clock.clone());
            thread::spawn(move || {
                let mut panics = 0;
                for i in 0..3_000u64 {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        if let Ok(permit) = breaker.allow() {
                            if (i * 7 + t) % 5 < 2 {
                                permit.failure()
                            } else {
                                permit.success()
                            }
                        }
                    }));
                    panics += u64::from(r.is_err());
                    if i % 11 == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                }
                panics
            })
        })
        .collect();
    let panics: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(
        panics > 10,
        "the workload made the callback panic ({panics})"
    );
    // Settle: one more call delivers anything still queued, then the counts must add up.
    clock.advance(Duration::from_secs(1));
    let _ = catch_unwind(AssertUnwindSafe(|| breaker.state()));
    let t = breaker.totals();
    assert_eq!(
        t.admitted,
        t.successes + t.failures + t.exclusions + t.abandoned + t.dropped,
        "{t:?}"
    );
    {
        let log = log.lock().unwrap();
        for pair in log.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "out of order or lost: {pair:?}");
        }
        assert_eq!(
            log.iter().filter(|(_, to)| *to == State::Open).count() as u64,
            t.opened
        );
    } // the callback takes the log: release it before calling the breaker again
      // Not stuck: it closes again.
    for _ in 0..4 {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(p) = breaker.allow() {
                p.success()
            }
        }));
        clock.advance(Duration::from_millis(2));
    }
    assert_eq!(
        catch_unwind(AssertUnwindSafe(|| breaker.state())).unwrap_or(State::Open),
        State::Closed
    );
}

/// 2. A policy that panics while a permit is dropped during unwinding used to abort the
///    process. With a rolling window, an out-of-window failure consults `ready_to_trip` with
///    counts that can be all zero: a plain ratio closure divides by zero.
#[test]
fn issue_9_a_policy_panicking_during_unwinding_does_not_abort() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(Duration::from_secs(2))
        .bucket_period(Duration::from_secs(1))
        .ready_to_trip(|c: &Counts| c.total_failures * 100 / c.requests >= 50)
        .clock(clock.clone())
        .build();
    let held = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(5)); // the permit's bucket left the window
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _held = held;
        panic!("the call blew up");
    }));
    // The call's panic reaches the caller; the policy's division by zero was dropped.
    assert_eq!(
        *caught.unwrap_err().downcast_ref::<&str>().unwrap(),
        "the call blew up"
    );
    let t = breaker.totals();
    assert_eq!((t.admitted, t.dropped), (1, 1));
    assert_eq!(breaker.state(), State::Closed);
    // Outside unwinding the same panic reaches the caller.
    let held = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(5));
    let caught = catch_unwind(AssertUnwindSafe(|| held.failure()));
    assert!(caught.is_err(), "the division by zero reaches the caller");
    let t = breaker.totals();
    assert_eq!((t.admitted, t.dropped), (2, 2));
}

/// 3. A clock that panics while a permit reports (a `SystemTime`-based clock after the system
///    clock was set back): the verdict used to be lost, leaving the breaker half-open.
#[test]
fn issue_9_a_clock_panicking_while_a_probe_reports_keeps_the_verdict() {
    let arms = Arms::default();
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .timeout(TIMEOUT)
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .clock(RigClock {
            inner: clock.clone(),
            arms: arms.clone(),
        })
        .build();
    breaker.allow().unwrap().failure();
    clock.advance(TIMEOUT * 2);
    let probe = breaker.allow().unwrap();
    assert_eq!(breaker.state(), State::HalfOpen);
    arms.arm(Hook::Clock);
    let caught = catch_unwind(AssertUnwindSafe(|| probe.success()));
    assert_eq!(
        *caught.unwrap_err().downcast_ref::<Hook>().unwrap(),
        Hook::Clock
    );
    assert_eq!(
        breaker.state(),
        State::Closed,
        "the probe's success was recorded"
    );
    let t = breaker.totals();
    assert_eq!((t.admitted, t.successes, t.failures), (2, 1, 1));
}

/// 4. A policy that panics in `half_open_probes` during the admission that moves open →
///    half-open: the open → half-open change used to be lost.
#[test]
fn issue_9_a_policy_panicking_in_half_open_probes_loses_no_change() {
    #[derive(Debug)]
    struct Probes(bool);
    impl TripPolicy for Probes {
        fn on_result(&mut self, r: &CallResult<'_>) -> bool {
            r.outcome == Outcome::Failure
        }
        fn half_open_probes(&self, max_requests: u64) -> u64 {
            if self.0 {
                panic!("probes");
            }
            max_requests
        }
    }
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let breaker = {
        let log = Arc::clone(&log);
        Breaker::builder()
            .timeout(TIMEOUT)
            .policy(Probes(true))
            .on_state_change(move |_, from, to| log.lock().unwrap().push((from, to)))
            .clock(clock.clone())
            .build()
    };
    breaker.allow().unwrap().failure();
    clock.advance(TIMEOUT * 2);
    assert!(catch_unwind(AssertUnwindSafe(|| breaker.allow().map(|p| p.success()))).is_err());
    // Computed once per half-open period: the panic answered `max_requests` (1), which the
    // next probe now uses without asking again.
    breaker.allow().unwrap().success();
    assert_eq!(
        *log.lock().unwrap(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed)
        ]
    );
}

/// 5. `Permit::into_owned` with the wrong `Arc` used to panic after taking the permit; it is
///    gone, and `allow_owned` reports to the breaker that admitted the call.
#[test]
fn issue_9_owned_permits_report_to_their_own_breaker() {
    let a = Arc::new(Breaker::builder().build());
    let b = Arc::new(Breaker::builder().build());
    let permit = a.allow_owned().unwrap();
    assert!(Arc::ptr_eq(permit.breaker(), &a));
    permit.failure();
    assert_eq!(
        (a.counts().total_failures, b.counts().total_failures),
        (1, 0)
    );
}

#[test]
fn a_rejection_is_not_an_error_of_the_call() {
    let breaker = Breaker::builder()
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .build();
    breaker.allow().unwrap().failure();
    let r =
        breaker.execute(|| -> Result<(), &str> { unreachable!("an open breaker runs nothing") });
    assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
}

#[test]
fn when_the_classifier_and_the_policy_both_panic_the_classifier_wins() {
    let rig = Rig::new(false);
    rig.arms.arm(Hook::OnResult); // fires while the exclusion is recorded
    let caught = run(&rig, Pre::Closed, Hook::Classifier, Moment::Classified);
    assert_eq!(caught, Some(Hook::Classifier), "the first panic wins");
    assert!(
        !rig.arms.0.lock().unwrap().contains(&Hook::OnResult),
        "the policy ran too"
    );
    rig.check_and_recover("classifier then policy");
}

#[test]
fn a_breaker_can_be_used_across_catch_unwind_as_it_is() {
    let breaker = Breaker::builder().build();
    let r = catch_unwind(|| breaker.execute(|| -> Result<(), ()> { panic!("boom") }));
    assert!(r.is_err());
    assert_eq!(breaker.totals().failures, 1);
}

/// A policy whose hook panics while the breaker is built (`capabilities`, asked once): the
/// panic comes out of `build`, where the policy was given, not out of some later, unrelated
/// call.
#[test]
fn a_policy_panicking_while_the_breaker_is_built_panics_out_of_build() {
    #[derive(Debug)]
    struct BadThreshold;
    impl TripPolicy for BadThreshold {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            false
        }
        fn capabilities(&self) -> lazybreaker::policy::Capabilities {
            panic_any("capabilities")
        }
    }
    let built = catch_unwind(|| Breaker::builder().policy(BadThreshold).build());
    let payload = built.expect_err("the panic comes out of build");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"capabilities"));

    #[derive(Debug)]
    struct BadRecorder;
    impl TripPolicy for BadRecorder {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            false
        }
        fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
            panic_any("success_recorder")
        }
    }
    let built = catch_unwind(|| Breaker::builder().policy(BadRecorder).build());
    let payload = built.expect_err("the panic comes out of build");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"success_recorder"));
}

/// A recorder that panics on its second success, for a policy that trips on the second
/// failure.
#[derive(Debug, Default)]
struct SecondPanics(AtomicUsize);

impl SuccessRecorder for SecondPanics {
    fn record_success(&self, _latency: Option<Duration>) {
        if self.0.fetch_add(1, Ordering::Relaxed) == 1 {
            panic_any("record_success");
        }
    }
}

#[derive(Debug, Default)]
struct Recorded(Arc<SecondPanics>);

impl TripPolicy for Recorded {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        if result.outcome == Outcome::Success {
            self.0.record_success(result.latency);
        }
        result.counts.total_failures >= 2
    }
    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default().needs_latency(true)
    }
    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        Some(self.0.clone())
    }
}

/// A success recorder panicking outside the lock: the success stays counted, the panic
/// reaches the caller, and the breaker goes on (it still trips on the policy's rule).
#[test]
fn a_panicking_success_recorder_leaves_the_success_counted() {
    let clock = ManualClock::new();
    let policy = Recorded::default();
    let recorder = policy.0.clone();
    let breaker = Breaker::builder()
        .policy(policy)
        .clock(clock.clone())
        .build();
    breaker.execute(|| Ok::<_, ()>(())).unwrap();
    let caught = catch_unwind(|| breaker.execute(|| Ok::<_, ()>(())));
    let payload = caught.expect_err("the recorder's panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"record_success"));
    let permit = breaker.allow().unwrap();
    clock.advance(Duration::from_millis(3));
    permit.success();
    assert_eq!(
        recorder.0.load(Ordering::Relaxed),
        3,
        "every success reached it once"
    );
    let counts = breaker.counts();
    assert_eq!((counts.requests, counts.total_successes), (3, 3));
    for _ in 0..2 {
        let _ = breaker.execute(|| Err::<(), _>("down"));
    }
    assert_eq!(breaker.state(), State::Open);
}
