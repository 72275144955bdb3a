//! loom models of the breaker's concurrency protocol. Each model asserts an invariant over
//! every interleaving loom explores (bounded by `LOOM_MAX_PREEMPTIONS`).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --target-dir target/loom --test loom`
//!
//! The models live here, against the public API, rather than inside the crate: the crate's
//! `sync` shim swaps its state mutex, the lane's atomics and stripes, and the manual clock's
//! atomic for loom's, so these models exercise exactly the code users run. Two test-only
//! hooks, under `cfg(loom)` only: `Breaker::loom_make_stripes` starts a model with the
//! lane's stripes already made, as a first collision would; `pool::LoomHangWatch` drives the
//! pool's watch for hung endpoints (the code its picks run, on bare endpoints: no breakers,
//! no clock).
#![cfg(loom)]

use std::sync::{Arc as StdArc, OnceLock, Weak};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use lazybreaker::policy::{CallResult, ConsecutiveFailures, Ema, EmaConfig, TripPolicy};
use lazybreaker::pool::LoomHangWatch;
use lazybreaker::{Breaker, ManualClock, Rejected, State};

const TIMEOUT: Duration = Duration::from_secs(1);

type Log = Arc<Mutex<Vec<(State, State)>>>;

/// Trips on the first failure, and writes down every state change as it happens, under the
/// breaker's lock: the truth that `on_state_change` deliveries are checked against.
#[derive(Debug)]
struct Truth {
    trips: ConsecutiveFailures,
    log: Log,
    /// Whether the policy says it reads the requests (else `execute` counts a call's
    /// request with its success, one compare-and-swap: see the models at the end).
    reads_requests: bool,
}

impl TripPolicy for Truth {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.trips.on_result(result)
    }

    fn on_state_change(&mut self, from: State, to: State, _now: Duration) {
        self.log.lock().unwrap().push((from, to));
    }

    // Like the counting policies: closed-state calls go through the lock-free lane.
    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default()
            .needs_successes(false)
            .reads_requests(self.reads_requests)
    }
}

type Tested = Breaker<Truth>;

/// A breaker that trips on its first failure; returns it with the log of the changes that
/// happened and the log of the changes `on_state_change` received.
fn logged(max_requests: u32, clock: &ManualClock) -> (StdArc<Tested>, Log, Log) {
    logged_reading(max_requests, clock, true)
}

/// [`logged`], its policy reading the requests or not.
fn logged_reading(
    max_requests: u32,
    clock: &ManualClock,
    reads_requests: bool,
) -> (StdArc<Tested>, Log, Log) {
    let (happened, delivered) = (new_log(), new_log());
    let breaker = {
        let delivered = delivered.clone();
        Breaker::builder()
            .max_requests(max_requests)
            .timeout(TIMEOUT)
            .policy(Truth {
                trips: ConsecutiveFailures::new(1).unwrap(),
                log: happened.clone(),
                reads_requests,
            })
            .on_state_change(move |_, from, to| delivered.lock().unwrap().push((from, to)))
            .clock(clock.clone())
            .build()
    };
    (StdArc::new(breaker), happened, delivered)
}

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn changes(log: &Log) -> Vec<(State, State)> {
    log.lock().unwrap().clone()
}

/// Trips `breaker` and moves `clock` past the timeout, leaving it half-open.
fn make_half_open(breaker: &Tested, clock: &ManualClock) {
    breaker.allow().unwrap().failure();
    clock.advance(TIMEOUT + Duration::from_nanos(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// 1. Concurrent failures in closed: exactly one closed -> open, delivered exactly once.
#[test]
fn concurrent_failures_trip_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged(1, &clock);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    if let Ok(permit) = breaker.allow() {
                        permit.failure();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        // Every call has returned, so every change must have been delivered already.
        assert_eq!(changes(&happened), vec![(State::Closed, State::Open)]);
        assert_eq!(changes(&delivered), vec![(State::Closed, State::Open)]);
    });
}

/// 2. Half-open with `max_requests = k`: never more than k probes admitted at once; a
///    probe dropped without a verdict frees its slot for a concurrent `allow`.
#[test]
fn half_open_admits_at_most_max_requests() {
    loom::model(|| {
        const K: usize = 1;
        let clock = ManualClock::new();
        let (breaker, _, _) = logged(K as u32, &clock);
        make_half_open(&breaker, &clock);
        let holding = Arc::new(AtomicUsize::new(0));
        // `released[i]`: worker i was admitted and has dropped its probe.
        let released = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let (breaker, holding, released) =
                    (breaker.clone(), holding.clone(), released.clone());
                thread::spawn(move || {
                    let other_released = released[1 - i].load(Ordering::SeqCst);
                    match breaker.allow() {
                        Ok(permit) => {
                            let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(now <= K, "{now} probes admitted at once, max {K}");
                            holding.fetch_sub(1, Ordering::SeqCst);
                            drop(permit); // cancelled: no verdict
                            released[i].store(true, Ordering::SeqCst);
                        }
                        Err(rejected) => {
                            assert_eq!(rejected, Rejected::TooManyRequests);
                            // The only other probe had given its slot back before this
                            // `allow` began: the slot was free.
                            assert!(!other_released, "a dropped probe did not free its slot");
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        // Every dropped probe gave its slot back: the breaker is not stuck.
        assert_eq!(breaker.state(), State::HalfOpen);
        breaker.allow().expect("slots were given back").success();
        assert_eq!(breaker.state(), State::Closed);
    });
}

/// 3. A permit from an older generation never changes the counts or closes the breaker,
///    even when its verdict races the open -> half-open transition.
#[test]
fn stale_permit_never_closes() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, _, _) = logged(1, &clock);
        let old = breaker.allow_owned().unwrap();
        breaker.allow().unwrap().failure(); // trips: `old` belongs to a dead generation
        let advance = {
            let (breaker, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                clock.advance(TIMEOUT + Duration::from_nanos(1));
                breaker.state()
            })
        };
        let late = thread::spawn(move || old.success());
        late.join().unwrap();
        assert_eq!(advance.join().unwrap(), State::HalfOpen);
        assert_eq!(
            breaker.state(),
            State::HalfOpen,
            "a stale success closed the breaker"
        );
        assert_eq!(breaker.counts().total_successes, 0);
        assert_eq!(breaker.counts().requests, 0);
    });
}

/// 4. State changes reach `on_state_change` once each, in the order they happened, never two
///    at a time, all before the calls that made them have returned; and a callback that calls
///    back into the breaker completes.
#[test]
fn callbacks_are_serial_ordered_and_may_reenter() {
    loom::model(|| {
        let clock = ManualClock::new();
        let inside = Arc::new(AtomicBool::new(false));
        let (happened, delivered) = (new_log(), new_log());
        let me: StdArc<OnceLock<Weak<Tested>>> = StdArc::default();
        let breaker = StdArc::new({
            let (inside, delivered, me) = (inside.clone(), delivered.clone(), me.clone());
            Breaker::builder()
                .timeout(TIMEOUT)
                .policy(Truth {
                    trips: ConsecutiveFailures::new(1).unwrap(),
                    log: happened.clone(),
                    reads_requests: true,
                })
                .on_state_change(move |_, from, to| {
                    assert!(
                        !inside.swap(true, Ordering::SeqCst),
                        "two callbacks at once"
                    );
                    // Re-entering the breaker from its callback must not deadlock.
                    if let Some(b) = me.get().and_then(Weak::upgrade) {
                        let _ = b.state();
                    }
                    delivered.lock().unwrap().push((from, to));
                    inside.store(false, Ordering::SeqCst);
                })
                .clock(clock.clone())
                .build()
        });
        me.set(StdArc::downgrade(&breaker)).unwrap();
        let probe = breaker.allow_owned().unwrap();
        let tripper = thread::spawn(move || probe.failure());
        let prober = {
            let (breaker, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                clock.advance(TIMEOUT + Duration::from_nanos(1));
                let _ = breaker.state();
            })
        };
        tripper.join().unwrap();
        prober.join().unwrap();
        let happened = changes(&happened);
        assert_eq!(happened.first(), Some(&(State::Closed, State::Open)));
        assert_eq!(changes(&delivered), happened);
    });
}

/// 5. `execute` from two threads while a third advances the clock past the timeout: the
///    open -> half-open transition happens exactly once.
#[test]
fn half_open_is_entered_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged(2, &clock);
        breaker.allow().unwrap().failure();
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || {
                    let _ = breaker.execute(|| Ok::<_, ()>(()));
                })
            })
            .collect();
        let advancer = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(TIMEOUT + Duration::from_nanos(1)))
        };
        for c in callers {
            c.join().unwrap();
        }
        advancer.join().unwrap();
        let _ = breaker.state(); // evaluates the expiry if no caller came after the advance
        let happened = changes(&happened);
        let entries = happened
            .iter()
            .filter(|&&t| t == (State::Open, State::HalfOpen))
            .count();
        assert_eq!(entries, 1, "{happened:?}");
        assert_eq!(changes(&delivered), happened);
    });
}

/// 6. The lock-free lane: successes and admissions recorded without the lock never leak
///    across a trip, and every admitted call is accounted for exactly once.
#[test]
fn lock_free_successes_never_leak_across_a_trip() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged(1, &clock);
        let succeeding = {
            let breaker = breaker.clone();
            thread::spawn(move || match breaker.allow() {
                Ok(permit) => {
                    permit.success();
                    true
                }
                Err(rejected) => {
                    assert!(matches!(rejected, Rejected::Open { .. }));
                    false
                }
            })
        };
        let failing = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().map(|p| p.failure()).is_ok())
        };
        let admitted = [succeeding.join().unwrap(), failing.join().unwrap()];
        assert!(
            admitted[1],
            "the failing call came first or alongside: admitted"
        );
        let totals = breaker.totals();
        let admitted = admitted.iter().filter(|&&a| a).count() as u64;
        assert_eq!(totals.admitted, admitted, "{totals:?}");
        assert_eq!(totals.failures, 1);
        // The success counted (before the trip) or was dropped as stale (after): once.
        assert_eq!(
            totals.successes + totals.dropped,
            admitted - 1,
            "{totals:?}"
        );
        // Whatever the order, the open generation has counted nothing.
        assert_eq!(breaker.counts(), Default::default());
        assert_eq!(changes(&happened), vec![(State::Closed, State::Open)]);
        assert_eq!(changes(&delivered), changes(&happened));
    });
}

/// 7. A reader taking `counts()` while calls are counted lock-free sees a consistent
///    snapshot each time: never a success without its admission, never going backwards.
#[test]
fn counts_read_alongside_the_lock_free_lane_are_consistent() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, _, _) = logged(1, &clock);
        let caller = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    breaker.allow().unwrap().success();
                }
            })
        };
        let mut last = lazybreaker::Counts::default();
        for _ in 0..2 {
            let c = breaker.counts();
            assert!(c.requests >= c.total_successes, "{c:?}");
            assert!(c.requests >= last.requests && c.total_successes >= last.total_successes);
            assert_eq!(c.consecutive_successes, c.total_successes);
            last = c;
        }
        caller.join().unwrap();
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (2, 2));
    });
}

/// 8. A fixed closed-state window on the lock-free lane: a success racing the window's end
///    counts in the old window or is dropped as stale, never in the new one.
#[test]
fn a_success_racing_the_end_of_its_window_never_lands_in_the_next() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = StdArc::new(
            Breaker::builder()
                .interval(TIMEOUT)
                .policy(ConsecutiveFailures::new(1).unwrap())
                .clock(clock.clone())
                .build(),
        );
        let permit = breaker.allow_owned().unwrap();
        let late = thread::spawn(move || permit.success());
        let ender = {
            let (breaker, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                clock.advance(TIMEOUT + Duration::from_nanos(1));
                breaker.state()
            })
        };
        late.join().unwrap();
        assert_eq!(ender.join().unwrap(), State::Closed);
        let _ = breaker.state(); // ends the window if no call did since the advance
        assert_eq!(
            breaker.counts(),
            Default::default(),
            "counted in the new window"
        );
        let totals = breaker.totals();
        assert_eq!((totals.admitted, totals.successes + totals.dropped), (1, 1));
    });
}

/// 9. An open-state rejection, taken without the lock, never reports a deadline that is not
///    an open period's, even when the breaker recovers (and starts a closed-state window)
///    while the rejection reads the lane.
#[test]
fn an_open_rejection_never_reports_a_windows_end() {
    loom::model(|| {
        let window = TIMEOUT * 10;
        let clock = ManualClock::new();
        let breaker = StdArc::new(
            Breaker::builder()
                .interval(window)
                .timeout(TIMEOUT)
                .policy(ConsecutiveFailures::new(1).unwrap())
                .clock(clock.clone())
                .build(),
        );
        breaker.allow().unwrap().failure(); // open until TIMEOUT
        let rejected = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().err().and_then(|r| r.retry_after()))
        };
        let recoverer = {
            let (breaker, clock) = (breaker.clone(), clock.clone());
            thread::spawn(move || {
                clock.advance(TIMEOUT * 2);
                if let Ok(probe) = breaker.allow() {
                    probe.success();
                }
            })
        };
        recoverer.join().unwrap();
        if let Some(retry_after) = rejected.join().unwrap() {
            assert!(
                retry_after <= TIMEOUT,
                "rejected as open for {retry_after:?}, longer than any open period"
            );
        }
    });
}

/// 10. Counting in the lane's cells never loses or invents a count, while a reader drains
///     them: with the stripes made up front, and with the base alone (where a collision
///     makes them in the middle of the model).
#[test]
fn counts_in_stripes_are_never_lost() {
    for striped in [true, false] {
        loom::model(move || {
            let clock = ManualClock::new();
            let (breaker, _, _) = logged(1, &clock);
            if striped {
                breaker.loom_make_stripes();
                assert_eq!(breaker.state(), State::Closed); // a lock holder opens them
            }
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = breaker.clone();
                    thread::spawn(move || breaker.allow().unwrap().success())
                })
                .collect();
            let c = breaker.counts();
            assert!(c.requests >= c.total_successes, "{c:?}");
            for caller in callers {
                caller.join().unwrap();
            }
            let c = breaker.counts();
            assert_eq!((c.requests, c.total_successes), (2, 2), "striped {striped}");
            let t = breaker.totals();
            assert_eq!(
                (t.admitted, t.successes),
                (2, 2),
                "striped {striped}: {t:?}"
            );
        });
    }
}

/// 11. A success counted in a stripe while another thread trips the breaker lands in the
///     closed generation (before the trip) or is dropped as stale (after it), never in the
///     open one, and is never lost: the lock holder closes every stripe before it changes
///     the machine.
#[test]
fn a_success_in_a_stripe_never_leaks_across_a_trip() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged(1, &clock);
        breaker.loom_make_stripes();
        assert_eq!(breaker.state(), State::Closed);
        let permit = breaker.allow_owned().unwrap();
        let late = thread::spawn(move || permit.success());
        let tripper = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().map(|p| p.failure()).is_ok())
        };
        late.join().unwrap();
        assert!(tripper.join().unwrap(), "admitted before its own failure");
        assert_eq!(
            breaker.counts(),
            Default::default(),
            "counted in the open generation"
        );
        let t = breaker.totals();
        assert_eq!((t.admitted, t.failures), (2, 1), "{t:?}");
        assert_eq!(
            t.successes + t.dropped,
            1,
            "the success was lost or doubled: {t:?}"
        );
        assert_eq!(changes(&happened), vec![(State::Closed, State::Open)]);
        assert_eq!(changes(&delivered), changes(&happened));
    });
}

/// 12. A `counts()` snapshot taken while a permit admitted on one thread reports on another
///     (each counting in its own stripe) never shows a success without its admission: a read
///     closes the lane while it folds the cells. (Found by a probe: a read that drained the
///     cells one at a time, leaving them open, could pass the admission's cell before the
///     admission and reach the success's cell after the success.)
fn handed_over(admit_here: bool) {
    loom::model(move || {
        let breaker = StdArc::new(
            Breaker::builder()
                .timeout(TIMEOUT)
                .policy(ConsecutiveFailures::new(5).unwrap())
                .clock(ManualClock::new())
                .build(),
        );
        breaker.loom_make_stripes();
        assert_eq!(breaker.state(), State::Closed); // opens the stripes
        let reader = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                let c = breaker.counts();
                assert!(
                    c.requests >= c.total_successes,
                    "a success without its admission: {c:?}"
                );
            })
        };
        if admit_here {
            let permit = breaker.allow_owned().unwrap();
            thread::spawn(move || permit.success()).join().unwrap();
        } else {
            let b = breaker.clone();
            let permit = thread::spawn(move || b.allow_owned().unwrap())
                .join()
                .unwrap();
            permit.success();
        }
        reader.join().unwrap();
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (1, 1));
    });
}

#[test]
fn a_permit_admitted_here_and_reported_there() {
    handed_over(true);
}

#[test]
fn a_permit_admitted_there_and_reported_here() {
    handed_over(false);
}

/// 13. Open rejections counted lock-free (in the base counter, or in stripes made by a
///     collision) while a reader folds the counters in: every rejection is counted exactly
///     once, never lost between a count and a fold, never folded twice.
#[test]
fn open_rejections_are_counted_once_each() {
    for striped in [true, false] {
        loom::model(move || {
            let clock = ManualClock::new();
            let (breaker, _, _) = logged(1, &clock);
            breaker.allow().unwrap().failure(); // open
            if striped {
                breaker.loom_make_stripes();
                let _ = breaker.totals(); // a lock holder republishes the lane
            }
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = breaker.clone();
                    thread::spawn(move || {
                        assert!(matches!(breaker.allow(), Err(Rejected::Open { .. })));
                    })
                })
                .collect();
            let midway = breaker.totals().rejected_open;
            assert!(midway <= 2, "striped {striped}: {midway}");
            for caller in callers {
                caller.join().unwrap();
            }
            assert_eq!(breaker.totals().rejected_open, 2, "striped {striped}");
        });
    }
}

/// A breaker counting over a rolling window of two buckets, `TIMEOUT` each, on the lock-free
/// lane, tripping on the first failure.
fn rolling(clock: &ManualClock) -> StdArc<Breaker<ConsecutiveFailures>> {
    rolling_tripping_at(clock, 1)
}

/// [`rolling`], tripping on the `failures`-th failure in a row.
fn rolling_tripping_at(clock: &ManualClock, failures: u64) -> StdArc<Breaker<ConsecutiveFailures>> {
    StdArc::new(
        Breaker::builder()
            .interval(TIMEOUT * 2)
            .bucket_period(TIMEOUT)
            .policy(ConsecutiveFailures::new(failures).unwrap())
            .clock(clock.clone())
            .build(),
    )
}

/// A thread that advances `clock` by one bucket and asks `breaker` its state, which rolls
/// it to the next age; joined, it gives that state.
fn roll<P: TripPolicy + 'static>(
    breaker: &StdArc<Breaker<P>>,
    clock: &ManualClock,
) -> thread::JoinHandle<State> {
    let (breaker, clock) = (breaker.clone(), clock.clone());
    thread::spawn(move || {
        clock.advance(TIMEOUT);
        breaker.state() // rolls to age 1
    })
}

/// 14. A rolling window on the lock-free lane: a success racing its bucket's roll counts in
///     its own bucket (lock-free before the roll, or under the lock after it), never in the
///     next one, even when it read the lane before the roll and the next bucket's cell holds
///     the same counters as the one it read (the cell's epoch tells them apart).
#[test]
fn a_success_racing_a_roll_never_lands_in_the_next_bucket() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = rolling(&clock);
        let permit = breaker.allow_owned().unwrap(); // age 0, counted in a cell
        let _ = breaker.counts(); // folded: the cell is empty again, as the next bucket's
        let late = thread::spawn(move || permit.success());
        let roller = roll(&breaker, &clock);
        late.join().unwrap();
        assert_eq!(roller.join().unwrap(), State::Closed);
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (1, 1), "both buckets");
        clock.advance(TIMEOUT); // age 2: the first bucket leaves the window
        let _ = breaker.state(); // rolls (`counts` is a pure read)
        let c = breaker.counts();
        assert_eq!(
            (c.requests, c.total_successes),
            (0, 0),
            "the success was counted in the bucket after its own"
        );
    });
}

/// 15. A rolling window on the lock-free lane: an admission racing a roll carries the age of
///     the bucket its request was counted in, so that its success lands beside it (a bucket
///     never holds a success without its request, nor the reverse).
#[test]
fn an_admission_racing_a_roll_carries_the_bucket_it_was_counted_in() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = rolling(&clock);
        let caller = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().unwrap().success())
        };
        let roller = roll(&breaker, &clock);
        caller.join().unwrap();
        assert_eq!(roller.join().unwrap(), State::Closed);
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (1, 1), "both buckets");
        clock.advance(TIMEOUT); // age 2: the first bucket leaves, the second stays
        let _ = breaker.state(); // rolls (`counts` is a pure read)
        let c = breaker.counts();
        assert_eq!(
            c.requests, c.total_successes,
            "a request and its success in different buckets"
        );
    });
}

/// 16. brpc's EMA policy records closed-state successes on the lock-free lane, in its windows'
///     atomics outside the lock, while failures are recorded under the lock: a success and
///     a failure at once each reach both windows exactly once (no update lost between the
///     lane's compare-and-swap loops and the lock holder's).
#[test]
fn ema_successes_recorded_without_the_lock_are_never_lost() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = StdArc::new(
            Breaker::builder()
                .policy(Ema::new(EmaConfig::default()).unwrap())
                .clock(clock)
                .build(),
        );
        let success = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().unwrap().success())
        };
        breaker.allow().unwrap().failure();
        success.join().unwrap();
        assert_eq!(breaker.state(), State::Closed, "within the initial stage");
        let (long, short) =
            breaker.inspect_policy(|p| (p.recorder().long_window(), p.recorder().short_window()));
        for window in [long, short] {
            assert_eq!(
                (window.initial_samples, window.initial_errors),
                (2, 1),
                "every result once: {window:?}"
            );
        }
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes, c.total_failures), (2, 1, 1));
    });
}

/// 17. A half-open probe held past the probe timeout (the default: the open `timeout`) is
///     taken over by a caller while its late verdict races it: the breaker ends closed,
///     never half-open with nothing out; the late verdict counts only if it came before the
///     takeover, and is dropped otherwise; every admitted call is accounted for once;
///     half-open -> closed is delivered exactly once.
#[test]
fn a_probe_held_past_its_timeout_is_taken_over_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged(1, &clock);
        make_half_open(&breaker, &clock);
        let hung = breaker.allow_owned().unwrap();
        assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
        clock.advance(TIMEOUT + Duration::from_nanos(1));
        let late = thread::spawn(move || hung.success());
        // Admitted either way: as the new trial's probe, or in closed after the late success.
        breaker.allow().unwrap().success();
        late.join().unwrap();
        assert_eq!(breaker.state(), State::Closed);
        let t = breaker.totals();
        assert!(t.probes_taken_over <= 1, "{t:?}");
        assert_eq!(t.dropped, t.probes_taken_over, "the late verdict: {t:?}");
        // The trip, the hung probe, and the caller.
        assert_eq!(t.admitted, 3, "{t:?}");
        assert_eq!(
            t.admitted,
            t.successes + t.failures + t.exclusions + t.abandoned + t.dropped,
            "{t:?}"
        );
        let happened = changes(&happened);
        let closings = happened
            .iter()
            .filter(|&&c| c == (State::HalfOpen, State::Closed))
            .count();
        assert_eq!(closings, 1, "{happened:?}");
        assert_eq!(changes(&delivered), happened);
    });
}

/// A breaker only a throttle acts on: `k = 2`, no cap, throttling from the first request,
/// its generator seeded with `seed`.
fn throttled(seed: u64) -> StdArc<Breaker> {
    StdArc::new(
        Breaker::builder()
            .never_trips(true)
            .throttle(
                lazybreaker::throttle::Throttle::new(2.0)
                    .unwrap()
                    .min_requests(1)
                    .max_probability(1.0)
                    .seed(seed),
            )
            .clock(ManualClock::new())
            .build(),
    )
}

/// The throttle's room on the lock-free lane: with `min_requests = 1` and `k = 2`, the first
/// admission finds no request (`p` = 0) and the second, with the first still in flight, finds
/// one request and no accept (`p` = 1/2). Two threads admit at once, one on the lane: the
/// lane gives room for one admission only, so whichever comes second is decided by the
/// machine, which draws (seed 3's first draw is 0.113, below 1/2) and turns it away, in
/// every interleaving: one admitted, one throttled, and neither lost.
#[test]
fn the_lane_admits_no_more_than_the_throttle_leaves_room_for() {
    loom::model(|| {
        let breaker = throttled(3);
        let other = StdArc::clone(&breaker);
        // Each permit is held until both have asked (dropped after: abandoned).
        let held = thread::spawn(move || other.allow_owned());
        let mine = breaker.allow_owned();
        let theirs = held.join().unwrap();
        let admitted = usize::from(mine.is_ok()) + usize::from(theirs.is_ok());
        assert_eq!(admitted, 1);
        for r in [&mine, &theirs] {
            if let Err(rejected) = r {
                assert_eq!(*rejected, Rejected::Throttled { probability: 0.5 });
            }
        }
        let t = breaker.totals();
        assert_eq!((t.admitted, t.rejected_throttled), (1, 1), "{t:?}");
    });
}

/// Shedding on the lock-free lane: once a failure left the throttle no room, admissions are
/// decided on the lane (no lock), each from the published counts plus its cell's, with one
/// draw from the generator the machine shares. Two threads at once: each call is admitted
/// or turned away exactly once, counted once, with a probability the formula gives for the
/// counts it could have seen (1 request and no accept, or 2 with the other's admission).
#[test]
fn shedding_on_the_lane_accounts_for_every_call() {
    loom::model(|| {
        let breaker = throttled(4);
        breaker.allow().unwrap().failure(); // 1 request, no accept: p = 1/2 from now on
        let other = StdArc::clone(&breaker);
        let theirs = thread::spawn(move || other.allow_owned().map(drop));
        let mine = breaker.allow_owned().map(drop);
        let theirs = theirs.join().unwrap();
        let mut throttled = 0;
        for r in [mine, theirs] {
            if let Err(rejected) = r {
                let p = rejected.throttle_probability().expect("throttled");
                assert!(p == 0.5 || p == 2.0 / 3.0, "{p}");
                throttled += 1;
            }
        }
        // Seed 4's first draw is 0.431, below any probability either could meet.
        assert!(throttled >= 1);
        let t = breaker.totals();
        assert_eq!(t.rejected_throttled, throttled);
        assert_eq!(t.admitted + t.rejected_throttled, 3, "{t:?}");
        assert_eq!(
            t.admitted,
            t.successes + t.failures + t.exclusions + t.abandoned + t.dropped,
            "{t:?}"
        );
    });
}

/// A breaker on `ConsecutiveFailures::new(3)` (room for two failures on the lane) after one
/// success, so that its lane is published with that room.
fn three_in_a_row(clock: &ManualClock) -> StdArc<Breaker<ConsecutiveFailures>> {
    let breaker = StdArc::new(
        Breaker::builder()
            .policy(ConsecutiveFailures::new(3).unwrap())
            .timeout(TIMEOUT)
            .clock(clock.clone())
            .build(),
    );
    breaker.allow().unwrap().success();
    breaker
}

/// A failure counted on the lane, a success on another thread, and a failure that takes
/// the lock (the counts read between them), in every interleaving: each is counted once,
/// and the runs are those of one order of the three. (Killed by counting a lane failure
/// without its tail: the runs then disagree with every order.)
#[test]
fn a_lane_failure_racing_a_success_and_a_lock_holder_keeps_one_order() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = three_in_a_row(&clock);
        let _ = breaker.counts(); // publishes the room: two failures
        let failing = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().unwrap().failure())
        };
        let succeeding = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().unwrap().success())
        };
        let read = breaker.counts();
        failing.join().unwrap();
        succeeding.join().unwrap();
        let c = breaker.counts();
        assert_eq!(
            (c.requests, c.total_successes, c.total_failures),
            (3, 2, 1),
            "{c:?}"
        );
        // Either the failure came last (a run of one) or the success did.
        assert!(
            (c.consecutive_failures, c.consecutive_successes) == (1, 0)
                || (c.consecutive_failures, c.consecutive_successes) == (0, 1),
            "{c:?}"
        );
        // The read in between saw a prefix of one order: never a result without its
        // admission, and runs that match its totals.
        assert!(
            read.total_successes + read.total_failures <= read.requests,
            "{read:?}"
        );
        assert!(read.consecutive_failures <= read.total_failures, "{read:?}");
        assert_eq!(breaker.state(), State::Closed);
        let t = breaker.totals();
        assert_eq!(
            (t.admitted, t.successes, t.failures, t.dropped),
            (3, 2, 1, 0)
        );
    });
}

/// Two failures on the lane from two threads, then a third: the third trips, whichever
/// thread counted where (the lane's room is two, and a failure beyond it takes the lock).
#[test]
fn lane_failures_from_two_threads_still_trip_on_the_third() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = three_in_a_row(&clock);
        let _ = breaker.counts();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let breaker = breaker.clone();
                thread::spawn(move || breaker.allow().unwrap().failure())
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(breaker.counts().consecutive_failures, 2);
        assert_eq!(breaker.state(), State::Closed);
        breaker.allow().unwrap().failure();
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.totals().failures, 3);
    });
}

/// A failure counted on the lane racing its bucket's roll counts in its own bucket (on the
/// lane before the roll, under the lock after it), never in the next one, and leaves the
/// window with it: the narrow cell's failure counter and tail are folded at the bucket they
/// counted for. (Killed by counting a lane failure in a cell open for another bucket.)
#[test]
fn a_lane_failure_racing_a_roll_stays_in_its_bucket() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = rolling_tripping_at(&clock, 3);
        let permit = breaker.allow_owned().unwrap(); // age 0
        assert_eq!(breaker.state(), State::Closed); // a step: room for two failures
        let failing = thread::spawn(move || permit.failure());
        let roller = roll(&breaker, &clock);
        failing.join().unwrap();
        assert_eq!(roller.join().unwrap(), State::Closed);
        let c = breaker.counts();
        assert_eq!(
            (c.requests, c.total_failures, c.consecutive_failures),
            (1, 1, 1),
            "{c:?}"
        );
        clock.advance(TIMEOUT); // age 2: the first bucket leaves the window
        let _ = breaker.state();
        let c = breaker.counts();
        assert_eq!(
            (c.requests, c.total_failures),
            (0, 0),
            "the failure was counted in the bucket after its own: {c:?}"
        );
        assert_eq!(breaker.totals().failures, 1);
    });
}

loom::thread_local! {
    /// The time [`ThreadClock`] reads on this thread.
    static THREAD_NOW: std::cell::Cell<Duration> = std::cell::Cell::new(Duration::ZERO);
}

/// A clock each thread sets for itself: so that a model decides which thread reads which
/// time, whatever the interleaving (a shared clock moved by one thread would make the
/// other's reading part of the race).
#[derive(Debug, Clone)]
struct ThreadClock;

impl lazybreaker::Clock for ThreadClock {
    fn now(&self) -> Duration {
        THREAD_NOW.with(|now| now.get())
    }
}

fn set_thread_now(now: Duration) {
    THREAD_NOW.with(|n| n.set(now));
}

/// `SlowCalls` (a second, half of the calls, at least 1000 requests: it never trips here),
/// writing down the successes counted at each check of the calls in flight.
#[derive(Debug)]
struct WatchedSlow {
    policy: lazybreaker::policy::SlowCalls,
    checks: StdArc<std::sync::Mutex<Vec<u64>>>,
}

impl TripPolicy for WatchedSlow {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        if result.in_flight {
            self.checks
                .lock()
                .unwrap()
                .push(result.counts.total_successes);
        }
        self.policy.on_result(result)
    }
    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        self.policy.capabilities()
    }
    fn lane_room(&self, counts: &lazybreaker::Counts) -> lazybreaker::policy::LaneRoom {
        self.policy.lane_room(counts)
    }
}

type Checks = StdArc<std::sync::Mutex<Vec<u64>>>;

fn watched_slow() -> (StdArc<Breaker<WatchedSlow>>, Checks) {
    set_thread_now(Duration::ZERO);
    let checks = Checks::default();
    let policy = WatchedSlow {
        policy: lazybreaker::policy::SlowCalls::new(TIMEOUT, 0.5, 1000).unwrap(),
        checks: checks.clone(),
    };
    let breaker = Breaker::builder().policy(policy).clock(ThreadClock).build();
    (StdArc::new(breaker), checks)
}

/// A slow-call policy's lane admission (at 0) racing a lock holder's admission at 2 s, for
/// which a call started at 0 is overdue: if the lane's admission came first, the lock
/// holder's check counts it as slow; if not, the lane sends it to the lock, which starts it
/// at 2 s. Either way the call is counted as slow once, and only by a check. (Killed by
/// claiming the slot after the cell's compare-and-swap: a check between the two misses the
/// call, which is then counted as slow only when it returns.)
#[test]
fn a_slow_call_admission_racing_an_overdue_check_is_seen_by_it() {
    loom::model(|| {
        let (breaker, checks) = watched_slow();
        let admitting = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow_owned().unwrap())
        };
        let checking = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                set_thread_now(2 * TIMEOUT);
                breaker.allow().unwrap().success();
            })
        };
        let permit = admitting.join().unwrap();
        checking.join().unwrap();
        set_thread_now(2 * TIMEOUT);
        permit.success(); // two seconds after 0, or none after 2 s
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (2, 2), "{c:?}");
        let checks = checks.lock().unwrap().clone();
        assert_eq!(
            c.slow_calls,
            checks.len() as u64,
            "a call admitted before the check is counted by it: {c:?}, checks {checks:?}"
        );
        assert_eq!(breaker.totals().successes, 2);
    });
}

/// A slow-call policy's fast success on the lane (1 s after its start at 0: exactly the
/// threshold) racing a lock holder's admission at 2 s, for which the call is overdue: either
/// the success comes first (not slow, and no longer in flight), or the check counts the call
/// as slow before its success is counted, and the success then takes the lock. Never a call
/// counted as slow in flight after its success counted. (Killed by counting the success in
/// the cell before the slot is marked completing.)
#[test]
fn a_slow_call_fast_success_racing_an_overdue_check_keeps_one_order() {
    loom::model(|| {
        let (breaker, checks) = watched_slow();
        let permit = breaker.allow_owned().unwrap(); // on the lane, at 0
        let succeeding = thread::spawn(move || {
            set_thread_now(TIMEOUT);
            permit.success();
        });
        let checking = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                set_thread_now(2 * TIMEOUT);
                breaker.allow().unwrap().success();
            })
        };
        succeeding.join().unwrap();
        checking.join().unwrap();
        let c = breaker.counts();
        assert_eq!((c.requests, c.total_successes), (2, 2), "{c:?}");
        let checks = checks.lock().unwrap().clone();
        assert!(
            checks.iter().all(|&successes| successes == 0),
            "a call counted as slow in flight after its success: {checks:?}"
        );
        assert_eq!(
            c.slow_calls,
            checks.len() as u64,
            "{c:?}, checks {checks:?}"
        );
    });
}

/// The deadline of the hang-watch models below (`LoomHangWatch`), in nanoseconds.
const DEADLINE: u64 = 10;

/// A hang watch over `endpoints` bare endpoints whose next look is due at `DEADLINE` (a
/// call went out at 0 on endpoint 0 and came back: the bound stays where that call put it,
/// and the look due then finds its slot free). The slot a model's call takes has been used
/// once, and freed by a sequentially consistent store (`Progress::end`'s): loom lets a
/// sequentially consistent load return a store that is not sequentially consistent (as an
/// atomic's initial value is not) past a later one that is, the call's claim, which C++20's
/// single order forbids and no hardware does (tokio-rs/loom#180).
fn watch_due_at_the_deadline(endpoints: usize) -> Arc<LoomHangWatch> {
    let watch = LoomHangWatch::new(endpoints, DEADLINE);
    watch.end(watch.start(0, 0).expect("a free start slot"));
    assert!(!watch.due(DEADLINE - 1) && watch.due(DEADLINE));
    Arc::new(watch)
}

/// The pool's hang watch: a call that goes out at 5 (due at 15), its clock read before a
/// pick's look at 10 claims the next look (moving it to 20), is never forgotten: the look
/// reads its slot and lowers the bound to 15, or the call reads the bound the look claimed
/// and lowers it to 15. Either way the next look comes by 15, and that look judges the
/// endpoint hung. (Killed by weakening either of the call's slot claim and bound read in
/// `Progress::start` from `SeqCst` to `Relaxed`, or both to `AcqRel` and `Acquire`; by
/// weakening the look's claim and slot reads to `AcqRel` and `Acquire`; by reading the
/// bound before claiming the slot; and by the look reading the slots before its claim: each
/// lets the look miss the slot and the call miss the claim. Killed too, by a loom artifact,
/// by `end` freeing the slot with `AcqRel`: see `watch_due_at_the_deadline`.)
#[test]
fn a_call_going_out_while_a_look_claims_is_never_forgotten() {
    loom::model(|| {
        let watch = watch_due_at_the_deadline(1);
        let calling = {
            let watch = watch.clone();
            thread::spawn(move || watch.start(0, 5).is_some())
        };
        let looking = {
            let watch = watch.clone();
            thread::spawn(move || watch.look(10))
        };
        assert!(calling.join().unwrap(), "a free start slot");
        let look = looking.join().unwrap();
        assert!(look.first_due.is_some() && look.hung.is_empty(), "{look:?}");
        let due = 5 + DEADLINE;
        assert!(
            watch.next_look() <= due,
            "a call due at {due} forgotten: next look at {}, the look found {look:?}",
            watch.next_look()
        );
        assert!(watch.due(due));
        assert_eq!(watch.look(due).hung, [0], "judged hung at its due time");
    });
}

/// The pool's hang watch: a call on endpoint 0 that goes out at 5 (due at 15) while a pick
/// looks at 16, past that due time, with a call due at 22 in flight on endpoint 1: the look
/// judges endpoint 0 hung (it read the slot), or it leaves the next look at 15 at the
/// latest (the call lowered it, and the look's own lowering, to 22, keeps the earlier
/// bound), so that the next pick judges it. Endpoint 1 is not hung before 22. (Killed by
/// setting the next look to the first due time found, a store, instead of lowering it, a
/// `fetch_min`, at the end of `NextLook::look`: it overwrites the call's 15 with 22; and by
/// each mutation that kills the model above.)
#[test]
fn a_call_overdue_at_a_racing_look_is_judged_by_it_or_by_the_next_pick() {
    loom::model(|| {
        let watch = watch_due_at_the_deadline(2);
        let held = watch.start(1, 12).expect("a free start slot");
        assert_eq!(
            watch.next_look(),
            DEADLINE,
            "a call due at 22 leaves it at 10"
        );
        let calling = {
            let watch = watch.clone();
            thread::spawn(move || watch.start(0, 5).is_some())
        };
        let looking = {
            let watch = watch.clone();
            thread::spawn(move || watch.look(16))
        };
        assert!(calling.join().unwrap(), "a free start slot");
        let look = looking.join().unwrap();
        let due = 5 + DEADLINE;
        match look.hung.as_slice() {
            [0] => {}
            [] => {
                assert!(
                    watch.next_look() <= due,
                    "a call due at {due} missed by the look at 16 and forgotten: next look \
                     at {}, the look found {look:?}",
                    watch.next_look()
                );
                assert_eq!(watch.look(16).hung, [0], "judged hung by the next pick");
            }
            hung => panic!("judged hung: {hung:?}"),
        }
        assert_eq!(watch.look(21).hung, [0; 0], "endpoint 1 is due at 22");
        assert_eq!(watch.look(22).hung, [1]);
        watch.end(held);
    });
}

/// The pool's hang watch: two picks look at once (at 10 and 12) while a call that went out
/// at 0 hangs: exactly one claims the look, the endpoint is judged hung once (one ejection,
/// counted once), and the next look is a deadline past the claiming pick's time (nothing
/// tracked is left). (Killed by claiming with a read and a store, rather than one
/// read-modify-write: both picks claim, and judge the endpoint twice.)
#[test]
fn two_picks_looking_at_once_judge_a_hang_once() {
    loom::model(|| {
        let watch = Arc::new(LoomHangWatch::new(1, DEADLINE));
        let _hanging = watch.start(0, 0).expect("a free start slot");
        let looks: Vec<_> = [10, 12]
            .into_iter()
            .map(|now| {
                let watch = watch.clone();
                thread::spawn(move || watch.look(now))
            })
            .collect();
        let looks: Vec<_> = looks.into_iter().map(|l| l.join().unwrap()).collect();
        let claimed: Vec<_> = looks.iter().filter(|l| l.first_due.is_some()).collect();
        assert_eq!(claimed.len(), 1, "exactly one pick looks: {looks:?}");
        let hung: Vec<usize> = looks.iter().flat_map(|l| l.hung.clone()).collect();
        assert_eq!(hung, [0], "judged hung once: {looks:?}");
        let next = watch.next_look();
        assert!(
            next == 10 + DEADLINE || next == 12 + DEADLINE,
            "the next look a deadline past the claiming pick's: {next}, {looks:?}"
        );
    });
}

/// The retry budget: two retries race for the one the budget has left, one of them moving
/// the withdrawals on to a new slice (the slice before goes into the ring): exactly one is
/// granted. (Killed by deciding on the ring and the head read apart, without the head's
/// compare-and-swap: both see room, and the budget is overspent.)
#[test]
fn two_retries_racing_for_the_last_room_get_one() {
    loom::model(|| {
        let clock = ManualClock::new();
        let budget = lazybreaker::retry::RetryBudget::new(1.0)
            .unwrap()
            .min_retries_per_second(0)
            .clock(clock.clone());
        budget.deposit();
        budget.deposit();
        assert!(budget.try_withdraw(), "one of two");
        clock.advance(Duration::from_millis(1500)); // the next slice
        let granted: Vec<_> = (0..2)
            .map(|_| {
                let budget = budget.clone();
                thread::spawn(move || budget.try_withdraw())
            })
            .collect();
        let granted = granted
            .into_iter()
            .map(|g| g.join().unwrap())
            .filter(|&g| g)
            .count();
        assert_eq!(granted, 1, "two deposits at 100 %: two retries in all");
        assert_eq!(budget.balance(), 0);
    });
}

/// An adaptive limit's calls in flight: two calls race for the last place under a limit of
/// one, a third thread gives a place back meanwhile; never more calls hold a place than the
/// limit, every try is either admitted or counted limited, and every place comes back.
/// (Killed by admitting on a load and an increment apart, without the compare-and-swap:
/// both see a free place, and two calls hold the one.)
#[test]
fn two_calls_racing_for_the_last_place_under_a_limit_get_one() {
    use lazybreaker::limit::{Fixed, Limiter};
    loom::model(|| {
        let limiter = Arc::new(Limiter::new(Fixed::new(2)));
        let first = limiter.try_start().expect("a free place");
        assert_eq!(first, 1);
        let holding = Arc::new(AtomicUsize::new(1));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, holding) = (limiter.clone(), holding.clone());
                thread::spawn(move || match limiter.try_start() {
                    Some(in_flight) => {
                        assert!(in_flight <= 2, "in flight with it: {in_flight}");
                        let held = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(held <= 2, "{held} places held under a limit of 2");
                        holding.fetch_sub(1, Ordering::SeqCst);
                        limiter.end(None);
                        true
                    }
                    None => false,
                })
            })
            .collect();
        let admitted = racers
            .into_iter()
            .map(|r| r.join().unwrap())
            .filter(|&a| a)
            .count() as u64;
        assert!(admitted >= 1, "one place was free throughout");
        assert_eq!(
            admitted + limiter.limited(),
            2,
            "every try admitted or limited"
        );
        limiter.end(None);
        assert_eq!(limiter.in_flight(), 0, "every place back");
    });
}

/// An AIMD limit's samples from two threads: each grows the limit by one, with no update
/// lost (its one word moves by compare-and-swap), and the calls in flight come back to zero.
#[test]
fn samples_from_two_calls_are_both_learned() {
    use lazybreaker::limit::{Aimd, Limiter, Sample};
    loom::model(|| {
        let limiter = Arc::new(Limiter::new(Aimd::new().initial_limit(2).min_limit(1)));
        let calls: Vec<_> = (0..2)
            .map(|_| {
                let limiter = limiter.clone();
                thread::spawn(move || {
                    let in_flight = limiter.try_start().expect("a limit of two");
                    // Both report the limit reached: 2 in flight of at most 3.
                    let sample = Sample::new(Duration::from_millis(1), in_flight.max(2));
                    limiter.end(Some(sample))
                })
            })
            .collect();
        for c in calls {
            c.join().unwrap();
        }
        assert_eq!(limiter.limit(), 4, "2, then one more per sample");
        assert_eq!(limiter.in_flight(), 0);
    });
}

/// A pool's endpoint counts its places under its limit on its own picks started and ended
/// (`Limiter::try_start_on`): three calls race for the one place a limit of one leaves
/// beside a call in flight that ends meanwhile; never two calls in flight at once, every
/// try admitted or counted limited, and the counters end level. (Killed by giving a refused
/// try back on `ended` rather than `started`: a later try subtracts an end whose start it
/// never counted, and a second call gets the one place.)
#[test]
fn calls_counted_on_an_endpoints_picks_never_pass_its_limit() {
    use lazybreaker::limit::{Fixed, Limiter};
    use loom::sync::atomic::AtomicU64;
    loom::model(|| {
        let limiter = Arc::new(Limiter::new(Fixed::new(1)));
        let counters = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let holding = Arc::new(AtomicUsize::new(0));
        let first = limiter
            .try_start_on(&counters.0, &counters.1)
            .expect("the place is free");
        assert_eq!(first, 1);
        holding.fetch_add(1, Ordering::SeqCst);
        let ender = {
            let (counters, holding) = (counters.clone(), holding.clone());
            thread::spawn(move || {
                holding.fetch_sub(1, Ordering::SeqCst);
                counters.1.fetch_add(1, Ordering::SeqCst);
            })
        };
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, counters, holding) =
                    (limiter.clone(), counters.clone(), holding.clone());
                thread::spawn(
                    move || match limiter.try_start_on(&counters.0, &counters.1) {
                        Some(in_flight) => {
                            assert!(in_flight >= 1, "the count includes the call itself");
                            let held = holding.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(held <= 1, "{held} calls in flight under a limit of 1");
                            holding.fetch_sub(1, Ordering::SeqCst);
                            counters.1.fetch_add(1, Ordering::SeqCst);
                            true
                        }
                        None => false,
                    },
                )
            })
            .collect();
        ender.join().unwrap();
        let admitted = racers
            .into_iter()
            .map(|r| r.join().unwrap())
            .filter(|&a| a)
            .count() as u64;
        assert_eq!(
            admitted + limiter.limited(),
            2,
            "every try admitted or limited"
        );
        let (started, ended) = (
            counters.0.load(Ordering::SeqCst),
            counters.1.load(Ordering::SeqCst),
        );
        assert_eq!(started, ended, "every start ended or given back");
    });
}

/// 19. `execute`'s uncounted admission (a policy that reads no requests): two calls on two
///     threads, each counting its request with its success in one compare-and-swap, while
///     the main thread reads the counts (a lock holder closing and reopening the cells),
///     with and without stripes: a read never shows a success without its request, and no
///     count is lost or doubled.
#[test]
fn uncounted_admissions_count_with_their_successes() {
    for striped in [true, false] {
        loom::model(move || {
            let clock = ManualClock::new();
            let (breaker, _, _) = logged_reading(1, &clock, false);
            if striped {
                breaker.loom_make_stripes();
                assert_eq!(breaker.state(), State::Closed);
            }
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = breaker.clone();
                    thread::spawn(move || breaker.execute(|| Ok::<_, ()>(())).is_ok())
                })
                .collect();
            let c = breaker.counts();
            assert!(c.requests >= c.total_successes, "{c:?}");
            for caller in callers {
                assert!(caller.join().unwrap(), "closed: admitted");
            }
            let c = breaker.counts();
            assert_eq!((c.requests, c.total_successes), (2, 2), "striped {striped}");
            let t = breaker.totals();
            assert_eq!(
                (t.admitted, t.successes),
                (2, 2),
                "striped {striped}: {t:?}"
            );
        });
    }
}

/// 20. An uncounted admission whose breaker trips while it runs: its success lands in the
///     closed generation with its request (before the trip) or is dropped as stale with its
///     request in the totals only (after it), never in the open generation, never lost.
#[test]
fn an_uncounted_success_never_leaks_across_a_trip() {
    loom::model(|| {
        let clock = ManualClock::new();
        let (breaker, happened, delivered) = logged_reading(1, &clock, false);
        let succeeding = {
            let breaker = breaker.clone();
            thread::spawn(move || match breaker.execute(|| Ok::<_, ()>(())) {
                Ok(()) => true,
                Err(lazybreaker::Error::Rejected(Rejected::Open { .. })) => false,
                Err(other) => panic!("{other:?}"),
            })
        };
        let failing = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().map(|p| p.failure()).is_ok())
        };
        let admitted = [succeeding.join().unwrap(), failing.join().unwrap()];
        assert!(admitted[1], "the failing call came first or alongside");
        let admitted = admitted.iter().filter(|&&a| a).count() as u64;
        let totals = breaker.totals();
        assert_eq!(totals.admitted, admitted, "{totals:?}");
        assert_eq!(totals.failures, 1);
        assert_eq!(
            totals.successes + totals.dropped,
            admitted - 1,
            "{totals:?}"
        );
        assert_eq!(breaker.counts(), Default::default(), "the open generation");
        assert_eq!(changes(&happened), vec![(State::Closed, State::Open)]);
        assert_eq!(changes(&delivered), changes(&happened));
    });
}

/// 21. `execute`'s uncounted admission in a fixed or rolling window (one clock read at
///     admission; with
///     `verdict_at_latest`, none at the success), racing the window's end seen by another
///     thread: the call's request and success land together in one generation or the
///     success is dropped as stale with its request in the totals: never one without the
///     other in the counts, never lost.
#[test]
fn an_uncounted_call_racing_its_windows_end_counts_whole_or_stale() {
    for (latest, bucket) in [
        (false, Duration::ZERO),
        (true, Duration::ZERO),
        (false, TIMEOUT / 2),
        (true, TIMEOUT / 2),
    ] {
        loom::model(move || {
            let clock = ManualClock::new();
            let breaker = StdArc::new(
                Breaker::builder()
                    .interval(TIMEOUT)
                    .bucket_period(bucket)
                    .timeout(TIMEOUT)
                    .verdict_at_latest(latest)
                    .policy(Truth {
                        trips: ConsecutiveFailures::new(1).unwrap(),
                        log: new_log(),
                        reads_requests: false,
                    })
                    .clock(clock.clone())
                    .build(),
            );
            let caller = {
                let breaker = breaker.clone();
                thread::spawn(move || breaker.execute(|| Ok::<_, ()>(())).is_ok())
            };
            clock.advance(TIMEOUT + Duration::from_nanos(1));
            assert_eq!(breaker.state(), State::Closed, "the window rolled over");
            assert!(caller.join().unwrap(), "closed: admitted");
            let c = breaker.counts();
            assert_eq!(c.requests, c.total_successes, "latest {latest}: {c:?}");
            assert!(c.requests <= 1);
            let t = breaker.totals();
            assert_eq!(t.admitted, 1, "latest {latest}: {t:?}");
            assert_eq!(t.successes + t.dropped, 1, "latest {latest}: {t:?}");
        });
    }
}

/// 22. `verdict_at_latest`: a success that reaches the lock while another thread's step holds
///     it (the lane's cells closed) is still judged at the latest time the breaker saw, not
///     at a clock reading of its own: it ends no window. (Found by a review: the decision
///     was taken from the lane's mode word, which says a lock holder is stepping, and the
///     success read the clock then.) The one thing ruled out: the success dropped in a new
///     window that nothing but its own verdict started, while the other thread's failure
///     counted in the old one.
#[test]
fn a_success_judged_at_the_latest_time_ends_no_window_behind_another_step() {
    loom::model(|| {
        let clock = ManualClock::new();
        let breaker = StdArc::new(
            Breaker::builder()
                .interval(TIMEOUT)
                .timeout(TIMEOUT)
                .verdict_at_latest(true)
                .policy(Truth {
                    trips: ConsecutiveFailures::new(2).unwrap(),
                    log: new_log(),
                    reads_requests: false,
                })
                .clock(clock.clone())
                .build(),
        );
        // Stripes: every failure takes the lock.
        breaker.loom_make_stripes();
        assert_eq!(breaker.state(), State::Closed);
        let permit = breaker.allow_owned().unwrap();
        let failing = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.allow().map(|p| p.failure()).is_ok())
        };
        clock.advance(TIMEOUT + Duration::from_nanos(1));
        permit.success();
        assert!(failing.join().unwrap(), "closed: admitted");
        let (t, c) = (breaker.totals(), breaker.counts());
        assert!(
            !(t.dropped == 1 && t.failures == 1 && c.requests == 0),
            "the success ended the window itself: {t:?} {c:?}"
        );
    });
}
