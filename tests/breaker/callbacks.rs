//! `on_state_change`: delivered outside the lock, once each, in order, one at a time, and
//! free to call back into the breaker.

use crate::support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

use lazybreaker::policy::ReadyToTrip;
use lazybreaker::{Breaker, Counts, ManualClock, State};
use support::log::Log;
use support::policy::ready_on_first_failure;

type Policy = ReadyToTrip<fn(&Counts) -> bool>;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `f` on another thread and fails the test if it has not finished within a generous
/// bound: a deadlock becomes a failure instead of a hung test run.
fn without_deadlock<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("deadlock: the call did not complete")
}

/// A breaker whose callback gets the breaker itself (through a weak reference) and runs
/// `reenter` on it.
fn reentrant(
    clock: &ManualClock,
    reenter: impl Fn(&Breaker<Policy>, State, State) + Send + Sync + 'static,
) -> (Arc<Breaker<Policy>>, Log) {
    let log = Log::default();
    let me: Arc<OnceLock<Weak<Breaker<Policy>>>> = Arc::default();
    let breaker = Arc::new({
        let log = log.clone();
        let me = Arc::clone(&me);
        Breaker::builder()
            .name("reentrant")
            .timeout(TIMEOUT)
            .ready_to_trip(ready_on_first_failure as fn(&Counts) -> bool)
            .on_state_change(move |_, from, to| {
                log.push((from, to));
                if let Some(breaker) = me.get().and_then(Weak::upgrade) {
                    reenter(&breaker, from, to);
                }
            })
            .clock(clock.clone())
            .build()
    });
    me.set(Arc::downgrade(&breaker)).unwrap();
    (breaker, log)
}

#[test]
fn a_callback_can_read_the_breaker_without_deadlock() {
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (breaker, log) = {
        let seen = Arc::clone(&seen);
        reentrant(&clock, move |b, _, _| {
            seen.lock().unwrap().push((b.state(), b.counts()));
        })
    };
    let b = Arc::clone(&breaker);
    without_deadlock(move || b.allow().unwrap().failure());
    // Delivered before the call that caused it returned.
    assert_eq!(log.entries(), vec![(State::Closed, State::Open)]);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(State::Open, Counts::default())]
    );
}

#[test]
fn a_change_made_inside_a_callback_is_delivered_right_after_it() {
    let clock = ManualClock::new();
    let inner_done = Arc::new(AtomicUsize::new(0));
    let (breaker, log) = {
        let inner_done = Arc::clone(&inner_done);
        reentrant(&clock, move |b, _, to| {
            if to == State::HalfOpen {
                // The probe succeeds from inside the callback: half-open -> closed happens
                // now, but must be delivered only after this callback returns.
                b.execute(|| Ok::<_, ()>(())).unwrap();
                inner_done.store(1, Ordering::SeqCst);
            }
            if to == State::Closed {
                assert_eq!(
                    inner_done.load(Ordering::SeqCst),
                    1,
                    "delivered after the callback"
                );
            }
        })
    };
    breaker.allow().unwrap().failure();
    clock.advance(TIMEOUT * 2);
    let b = Arc::clone(&breaker);
    let state = without_deadlock(move || b.state());
    assert_eq!(
        state,
        State::HalfOpen,
        "state() reports the state it evaluated"
    );
    assert_eq!(
        log.entries(),
        vec![
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ],
        "all three delivered, in order, before state() returned"
    );
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_panicking_callback_propagates_and_does_not_block_later_changes() {
    let clock = ManualClock::new();
    let (breaker, log) = reentrant(&clock, |_, _, to| {
        if to == State::Open {
            panic!("callback failed");
        }
    });
    let unwound = catch_unwind(AssertUnwindSafe(|| breaker.allow().unwrap().failure()));
    assert!(unwound.is_err(), "the callback's panic reaches the caller");
    assert_eq!(breaker.state(), State::Open);
    clock.advance(TIMEOUT * 2);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        log.entries(),
        vec![(State::Closed, State::Open), (State::Open, State::HalfOpen)]
    );
}

#[test]
fn callbacks_never_overlap_and_arrive_in_order_across_threads() {
    let clock = ManualClock::new();
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let log = Log::default();
    let breaker = {
        let (inside, overlaps, log) = (inside.clone(), overlaps.clone(), log.clone());
        Arc::new(
            Breaker::builder()
                .timeout(Duration::from_millis(1))
                .ready_to_trip(ready_on_first_failure as fn(&Counts) -> bool)
                .on_state_change(move |_, from, to| {
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    log.push((from, to));
                    thread::yield_now();
                    inside.store(false, Ordering::SeqCst);
                })
                .clock(clock.clone())
                .build(),
        )
    };
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let (breaker, clock) = (Arc::clone(&breaker), clock.clone());
            thread::spawn(move || {
                for i in 0..2_000u32 {
                    if let Ok(permit) = breaker.allow() {
                        if (i + t) % 3 == 0 {
                            permit.failure()
                        } else {
                            permit.success()
                        }
                    }
                    if i % 7 == 0 {
                        clock.advance(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two callbacks ran at once"
    );
    let log = log.entries();
    assert!(
        log.len() > 10,
        "the workload made transitions ({})",
        log.len()
    );
    assert_eq!(log[0].0, State::Closed);
    for pair in log.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "out of order or lost: {pair:?}");
    }
    assert_eq!(log.last().unwrap().1, breaker.state());
}

/// Makes a call on `breaker` that panics with "the call blew up"; checks that this panic is
/// the one that reaches the caller.
fn call_that_blows_up(breaker: &Breaker<Policy>) {
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        breaker.execute(|| -> Result<(), ()> { panic!("the call blew up") })
    }));
    assert_eq!(
        *unwound.unwrap_err().downcast_ref::<&str>().unwrap(),
        "the call blew up"
    );
}

#[test]
fn a_change_made_by_a_panicking_call_is_delivered_before_the_panic_reaches_the_caller() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Breaker::builder()
        .timeout(TIMEOUT)
        .ready_to_trip(ready_on_first_failure as fn(&Counts) -> bool)
        .on_state_change(log.callback())
        .clock(clock.clone())
        .build();
    // The call panics: its permit records the failure while unwinding, which trips the
    // breaker; the callback runs (contained) before the panic reaches the caller.
    call_that_blows_up(&breaker);
    assert_eq!(log.entries(), vec![(State::Closed, State::Open)]);
    assert!(breaker.allow().is_err());
    assert_eq!(log.len(), 1, "delivered once");
}

#[test]
fn a_callback_that_panics_while_the_call_unwinds_is_dropped_and_the_first_panic_wins() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .ready_to_trip(ready_on_first_failure as fn(&Counts) -> bool)
        .on_state_change(|_, _, _| panic!("the callback blew up"))
        .clock(clock.clone())
        .build();
    // No abort, and the caller sees the call's panic, not the callback's.
    call_that_blows_up(&breaker);
    assert_eq!(breaker.state(), State::Open);
    let t = breaker.totals();
    assert_eq!((t.admitted, t.failures, t.opened), (1, 1, 1));
}
