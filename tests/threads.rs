//! A plain-threads stress test (loom's models are in `tests/loom.rs`): many threads, random
//! outcomes, a clock moved by another thread; afterwards everything must add up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use lazybreaker::policy::{CallResult, ConsecutiveFailures, FailureRatio, TripPolicy};
use lazybreaker::{Breaker, Builder, ManualClock, Rejected, State};

const THREADS: usize = 8;
/// Calls each worker makes at least; workers keep calling until the clock has stopped.
const MIN_CALLS: u64 = 5_000;
/// Milliseconds the clock thread advances, one at a time, while the workers call.
const TICKS: u64 = 1_000;

type Log = Arc<Mutex<Vec<(State, State)>>>;

/// A policy that also writes down each state change as it happens (under the breaker's
/// lock): the history that the callback's deliveries must match.
#[derive(Debug)]
struct Recorded<P> {
    policy: P,
    history: Log,
    /// `false` lets closed-state successes go through the lock-free lane.
    needs_successes: bool,
}

impl<P: TripPolicy> TripPolicy for Recorded<P> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.policy.on_result(result)
    }

    fn on_state_change(&mut self, from: State, to: State, _now: Duration) {
        self.history.lock().unwrap().push((from, to));
    }

    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default().needs_successes(self.needs_successes)
    }
}

/// xorshift64*: a deterministic stream per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Everything under the lock: a rolling window and a ratio policy that sees every result.
#[test]
fn everything_adds_up_under_contention_on_the_lock() {
    stress(FailureRatio::new(0.4, 10).unwrap(), true, |b| {
        b.interval(Duration::from_millis(50))
            .bucket_period(Duration::from_millis(10))
    });
}

/// gobreaker's defaults: closed-state admissions and successes on the lock-free lane, open
/// rejections without the lock, failures and half-open under it.
#[test]
fn everything_adds_up_under_contention_on_the_lock_free_lane() {
    stress(ConsecutiveFailures::new(4).unwrap(), false, |b| b);
}

/// A fixed closed-state window on the lock-free lane: every window's end races the calls.
#[test]
fn everything_adds_up_under_contention_on_the_windowed_lane() {
    stress(FailureRatio::new(0.4, 10).unwrap(), false, |b| {
        b.interval(Duration::from_millis(10))
    });
}

/// Runs the workload on a breaker with `policy` (seeing successes or not) and the settings
/// `configure` adds, then checks that everything adds up.
fn stress<P: TripPolicy + 'static>(
    policy: P,
    needs_successes: bool,
    configure: impl FnOnce(Builder<Recorded<P>>) -> Builder<Recorded<P>>,
) {
    let (history, delivered): (Log, Log) = Default::default();
    let clock = ManualClock::new();
    let builder = Breaker::builder()
        .max_requests(3)
        .timeout(Duration::from_millis(20))
        .policy(Recorded {
            policy,
            history: Arc::clone(&history),
            needs_successes,
        });
    let breaker = {
        let delivered = Arc::clone(&delivered);
        configure(builder)
            .on_state_change(move |_, from, to| delivered.lock().unwrap().push((from, to)))
            .clock(clock.clone())
            .build()
    };
    let breaker = Arc::new(breaker);

    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (clock, start, done) = (clock.clone(), Arc::clone(&start), Arc::clone(&done));
        thread::spawn(move || {
            start.wait();
            for _ in 0..TICKS {
                clock.advance(Duration::from_millis(1));
                thread::yield_now();
            }
            done.store(true, Ordering::Release);
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (breaker, start, done) =
                (Arc::clone(&breaker), Arc::clone(&start), Arc::clone(&done));
            let clock = clock.clone();
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
                let (mut calls, mut admitted, mut open, mut busy) = (0u64, 0u64, 0u64, 0u64);
                let mut held = Vec::new();
                start.wait();
                while calls < MIN_CALLS || !done.load(Ordering::Acquire) {
                    calls += 1;
                    if calls % 256 == 0 {
                        // Lock-free calls never block: leave the clock thread room to run.
                        thread::yield_now();
                    }
                    match breaker.allow_owned() {
                        Ok(permit) => {
                            admitted += 1;
                            held.push(permit);
                        }
                        Err(Rejected::Open { .. }) => open += 1,
                        Err(Rejected::TooManyRequests) => busy += 1,
                        Err(other) => panic!("unexpected rejection {other:?}"),
                    }
                    // Finish a random number of the calls in flight, in random order, with a
                    // random verdict; some are excluded or abandoned. The dependency has
                    // outages: in the first half of every 100 ms, 80 % of calls fail, in the
                    // second half 10 %.
                    let outage = clock.now().as_millis() % 100 < 50;
                    while !held.is_empty() && rng.next() % 3 != 0 {
                        let i = (rng.next() % held.len() as u64) as usize;
                        let permit = held.swap_remove(i);
                        match rng.next() % 20 {
                            0..=1 => permit.exclude(),
                            2 => drop(permit),
                            r if r < if outage { 19 } else { 5 } => permit.failure(),
                            _ => permit.success(),
                        }
                    }
                }
                for permit in held {
                    permit.success();
                }
                (calls, admitted, open, busy)
            })
        })
        .collect();
    let (mut calls, mut admitted, mut rejected_open, mut rejected_busy) = (0, 0, 0, 0);
    for w in workers {
        let (c, a, o, b) = w.join().unwrap();
        calls += c;
        admitted += a;
        rejected_open += o;
        rejected_busy += b;
    }
    ticker.join().unwrap();

    // Every call was either admitted or rejected, and every admitted call is accounted for.
    assert_eq!(admitted + rejected_open + rejected_busy, calls);
    let totals = breaker.totals();
    assert_eq!(totals.admitted, admitted);
    assert_eq!(
        totals.successes + totals.failures + totals.exclusions + totals.abandoned + totals.dropped,
        admitted,
        "{totals:?}"
    );

    // Every call has returned: every change that happened was delivered, once, in order.
    let history = history.lock().unwrap().clone();
    let delivered = delivered.lock().unwrap().clone();
    assert_eq!(delivered, history);

    // The history is a legal walk from closed.
    let legal = [
        (State::Closed, State::Open),
        (State::Open, State::HalfOpen),
        (State::HalfOpen, State::Open),
        (State::HalfOpen, State::Closed),
    ];
    let mut state = State::Closed;
    for &(from, to) in &history {
        assert_eq!(from, state, "a change from a state the breaker was not in");
        assert!(legal.contains(&(from, to)), "illegal change {from} -> {to}");
        state = to;
    }
    assert_eq!(
        totals.opened as usize,
        history.iter().filter(|t| t.1 == State::Open).count()
    );

    // The workload really exercised the machine (tripping, probing, rejecting).
    assert!(totals.opened >= 2, "tripped only {} times", totals.opened);
    assert!(rejected_open > 0 && totals.dropped > 0, "{totals:?}");
    println!(
        "{calls} calls: {admitted} admitted, {rejected_open} rejected open, {rejected_busy} \
         rejected half-open, {} state changes over {TICKS} ms; {totals:?}",
        history.len()
    );
}
