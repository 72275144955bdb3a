//! Stress probes of the lock-free lane and its striped counting (`src/lane/`) under plain
//! threads (loom's models are in `tests/loom.rs`): many threads on one breaker, with random
//! verdicts, permits held across calls and handed between threads, a clock moved by another
//! thread, and readers that check every snapshot they take; afterwards everything must add up.
//! Then a lone thread after contention, which must count lock-free again.
//!
//! Every loop is bounded; nothing sleeps. The tests take a file-wide lock so that they never
//! overlap (timing, and the allocation counts of the striping test).
//!
//! Run: `cargo test --release --test lane_probe` (a debug build runs fewer calls).

mod support;

use std::alloc::System;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use lazybreaker::policy::{ConsecutiveFailures, FailureRatio, TripPolicy};
use lazybreaker::{Breaker, Builder, Clock, Counts, Error, ManualClock, OwnedPermit, Rejected};
use lazybreaker::{State, Totals};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use support::log::{Change, Log};
use support::policy::{Record, Recorded};
use support::rng::Rng;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WORKERS: usize = 8;
const READERS: usize = 2;
/// Calls each worker makes at least (unless the time budget runs out first); workers keep
/// calling until the clock thread has finished, up to `MAX_CALLS`.
const CALLS: u64 = if cfg!(debug_assertions) {
    6_000
} else {
    60_000
};
const MAX_CALLS: u64 = 50 * CALLS;
/// The wall-clock budget of one stress run.
const BUDGET: Duration = Duration::from_secs(if cfg!(debug_assertions) { 4 } else { 3 });
/// Milliseconds the clock thread advances at most, one at a time.
const TICKS: u64 = if cfg!(debug_assertions) { 2_000 } else { 8_000 };
/// Worker calls (all workers together) per millisecond of the clock: the clock thread waits
/// for them, so that the clock neither races ahead of the calls nor lags behind.
const CALLS_PER_TICK: u64 = 128;
/// Permits a worker holds at most; the shared mailbox holds at most this many per worker.
const HELD: usize = 4;

/// One test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Built<P: TripPolicy> {
    breaker: Arc<Breaker<Recorded<P>>>,
    /// What the policy was told, under the lock: every change as it happened, and how often
    /// each outcome reached it.
    record: Record,
    /// Every change the `on_state_change` callback received.
    delivered: Log,
}

fn build<P: TripPolicy>(
    policy: Recorded<P>,
    clock: impl Clock + 'static,
    configure: impl FnOnce(Builder<Recorded<P>>) -> Builder<Recorded<P>>,
) -> Built<P> {
    let record = policy.record();
    let delivered = Log::default();
    let breaker = configure(Breaker::builder().policy(policy))
        .on_state_change(delivered.callback())
        .clock(clock)
        .build();
    Built {
        breaker: Arc::new(breaker),
        record,
        delivered,
    }
}

/// The breaker of a stress run, on a manual clock: at most 3 probes, open for `timeout`,
/// and the settings `configure` adds.
fn stressed<P: TripPolicy>(
    policy: Recorded<P>,
    timeout: Duration,
    configure: impl FnOnce(Builder<Recorded<P>>) -> Builder<Recorded<P>>,
) -> (ManualClock, Built<P>) {
    let clock = ManualClock::new();
    let built = build(policy, clock.clone(), |b| {
        configure(b.max_requests(3).timeout(timeout))
    });
    (clock, built)
}

/// Every admitted call is accounted for, once, and every change that happened was delivered,
/// once, in order, along a legal walk from closed, each trip counted in `opened`. Returns
/// the state the walk ends in.
fn check_accounts(
    totals: &Totals,
    admitted: u64,
    happened: &[Change],
    delivered: &[Change],
) -> State {
    assert_eq!(totals.admitted, admitted, "{totals:?}");
    assert_eq!(
        totals.successes + totals.failures + totals.exclusions + totals.abandoned + totals.dropped,
        admitted,
        "{totals:?}"
    );
    assert_eq!(delivered, happened);
    let legal = [
        (State::Closed, State::Open),
        (State::Open, State::HalfOpen),
        (State::HalfOpen, State::Open),
        (State::HalfOpen, State::Closed),
    ];
    let mut now = State::Closed;
    for &(from, to) in happened {
        assert_eq!(from, now, "a change from a state the breaker was not in");
        assert!(legal.contains(&(from, to)), "illegal change {from} -> {to}");
        now = to;
    }
    assert_eq!(
        totals.opened as usize,
        happened.iter().filter(|t| t.1 == State::Open).count()
    );
    now
}

/// What a thread saw and did.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    calls: u64,
    admitted: u64,
    rejected_open: u64,
    rejected_busy: u64,
    /// Verdicts given: success, failure, exclusion; then permits dropped without one.
    reported: [u64; 4],
    /// An open rejection whose `retry_after` exceeded every open period.
    too_long: u64,
    longest_retry: Duration,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.calls += o.calls;
        self.admitted += o.admitted;
        self.rejected_open += o.rejected_open;
        self.rejected_busy += o.rejected_busy;
        for i in 0..4 {
            self.reported[i] += o.reported[i];
        }
        self.too_long += o.too_long;
        self.longest_retry = self.longest_retry.max(o.longest_retry);
    }

    /// A rejection of a call during which the clock moved by `moved`.
    fn rejected(&mut self, r: Rejected, timeout: Duration, moved: Duration) {
        match r {
            Rejected::Open { retry_after } => {
                self.rejected_open += 1;
                self.longest_retry = self.longest_retry.max(retry_after);
                // `retry_after` is `until - now` (at least 1 ns), where `now` is the breaker's
                // reading (taken during the call, possibly long before the lock) and `until`
                // is at most an open period after the trip: at most `timeout + moved`.
                if retry_after > timeout + moved {
                    self.too_long += 1;
                }
            }
            Rejected::TooManyRequests => self.rejected_busy += 1,
            other => panic!("unexpected rejection {other:?}"),
        }
    }
}

/// What the readers saw that no linearisable breaker could show.
#[derive(Debug, Default)]
struct Anomalies {
    reads: AtomicU64,
    /// `counts()`: fewer requests than results in the generation.
    counts_torn: AtomicU64,
    /// `totals()`: fewer admissions than results.
    totals_torn: AtomicU64,
    /// `totals()`: a counter went backwards.
    totals_backwards: AtomicU64,
    first: Mutex<Option<String>>,
}

impl Anomalies {
    fn note(&self, which: &AtomicU64, what: String) {
        which.fetch_add(1, Ordering::Relaxed);
        self.first.lock().unwrap().get_or_insert(what);
    }
}

fn counts_ok(c: &Counts) -> bool {
    c.requests >= c.total_successes + c.total_failures + c.total_exclusions
}

fn totals_ok(t: &Totals) -> bool {
    t.admitted >= t.successes + t.failures + t.exclusions + t.abandoned + t.dropped
}

fn not_backwards(a: &Totals, b: &Totals) -> bool {
    b.admitted >= a.admitted
        && b.successes >= a.successes
        && b.failures >= a.failures
        && b.exclusions >= a.exclusions
        && b.dropped >= a.dropped
        && b.abandoned >= a.abandoned
        && b.opened >= a.opened
}

/// The workload: `WORKERS` threads making mixed calls (some held, some handed to another
/// thread through a mailbox), a clock thread, and `READERS` threads reading `counts()`,
/// `totals()` and `state()` and checking each snapshot. Then everything must add up.
fn stress<P: TripPolicy + 'static>(
    name: &str,
    policy: P,
    timeout: Duration,
    configure: impl FnOnce(Builder<Recorded<P>>) -> Builder<Recorded<P>>,
) {
    let _serial = serial();
    let (clock, built) = stressed(Recorded::new(policy), timeout, configure);
    let Built {
        breaker,
        record,
        delivered,
    } = built;
    let deadline = Instant::now() + BUDGET;
    let mailbox: Arc<Mutex<Vec<OwnedPermit<Recorded<P>>>>> = Arc::default();
    let start = Arc::new(Barrier::new(WORKERS + READERS + 2));
    let workers_done = Arc::new(AtomicBool::new(false));
    let clock_done = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let anomalies = Arc::new(Anomalies::default());

    let ticker = {
        let (clock, start, done) = (clock.clone(), start.clone(), clock_done.clone());
        let progress = progress.clone();
        thread::spawn(move || {
            start.wait();
            let mut ticks = 0;
            while ticks < TICKS && Instant::now() < deadline {
                if progress.load(Ordering::Relaxed) < ticks * CALLS_PER_TICK {
                    thread::yield_now();
                    continue;
                }
                clock.advance(Duration::from_millis(1));
                ticks += 1;
            }
            done.store(true, Ordering::Release);
            ticks
        })
    };

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (breaker, start, done, anomalies) = (
                breaker.clone(),
                start.clone(),
                workers_done.clone(),
                anomalies.clone(),
            );
            thread::spawn(move || {
                start.wait();
                let mut last = Totals::default();
                let mut i = 0u64;
                while i < 20 * CALLS && !done.load(Ordering::Acquire) {
                    i += 1;
                    if i.is_multiple_of(64) && Instant::now() >= deadline {
                        break;
                    }
                    anomalies.reads.fetch_add(1, Ordering::Relaxed);
                    let c = breaker.counts();
                    if !counts_ok(&c) {
                        anomalies.note(&anomalies.counts_torn, format!("counts {c:?}"));
                    }
                    let t = breaker.totals();
                    if !totals_ok(&t) {
                        anomalies.note(&anomalies.totals_torn, format!("totals {t:?}"));
                    }
                    if !not_backwards(&last, &t) {
                        anomalies.note(
                            &anomalies.totals_backwards,
                            format!("totals went from {last:?} to {t:?}"),
                        );
                    }
                    last = t;
                    // One reader also runs transactions (the lane is closed and reopened).
                    if r == 0 && i.is_multiple_of(4) {
                        let _ = breaker.state();
                    }
                }
                i
            })
        })
        .collect();

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (breaker, start, mailbox) = (breaker.clone(), start.clone(), mailbox.clone());
            let (clock, clock_done, progress) =
                (clock.clone(), clock_done.clone(), progress.clone());
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1).wrapping_mul(0xabcd));
                let mut me = Tally::default();
                let mut held: Vec<OwnedPermit<Recorded<P>>> = Vec::new();
                start.wait();
                let verdict = |rng: &mut Rng, permit: OwnedPermit<Recorded<P>>, me: &mut Tally| {
                    // Outages: in the first half of every 100 ms, 60 % of calls fail.
                    let outage = clock.now().as_millis() % 100 < 50;
                    match rng.next() % 20 {
                        0 => {
                            permit.exclude();
                            me.reported[2] += 1;
                        }
                        1 => {
                            drop(permit);
                            me.reported[3] += 1;
                        }
                        r if r < if outage { 14 } else { 3 } => {
                            permit.failure();
                            me.reported[1] += 1;
                        }
                        _ => {
                            permit.success();
                            me.reported[0] += 1;
                        }
                    }
                };
                let mut steps = 0u64;
                while steps < MAX_CALLS && (steps < CALLS || !clock_done.load(Ordering::Acquire)) {
                    if steps.is_multiple_of(64) && Instant::now() >= deadline {
                        break;
                    }
                    steps += 1;
                    if steps.is_multiple_of(16) {
                        progress.fetch_add(16, Ordering::Relaxed);
                    }
                    if steps.is_multiple_of(256) {
                        thread::yield_now(); // lock-free calls never block: let the clock run
                    }
                    let action = rng.next() % 10;
                    if action < 9 {
                        me.calls += 1; // an `allow` or an `execute`
                    }
                    match action {
                        // The common case: `execute`, mostly successes.
                        0..=5 => {
                            // Outages: in the first half of every 100 ms, half the calls fail.
                            let outage = clock.now().as_millis() % 100 < 50;
                            let fail = rng.next() % 100 < if outage { 50 } else { 5 };
                            let t0 = clock.now();
                            let r = breaker.execute(|| if fail { Err(()) } else { Ok(()) });
                            let moved = clock.now() - t0;
                            match r {
                                Ok(()) => {
                                    me.admitted += 1;
                                    me.reported[0] += 1;
                                }
                                Err(Error::Inner(())) => {
                                    me.admitted += 1;
                                    me.reported[1] += 1;
                                }
                                Err(Error::Rejected(r)) => me.rejected(r, timeout, moved),
                            }
                        }
                        // A permit held across other calls, or handed to another thread.
                        6..=8 => match (clock.now(), breaker.allow_owned(), clock.now()) {
                            (_, Ok(permit), _) => {
                                me.admitted += 1;
                                if rng.next().is_multiple_of(3) {
                                    let mut mb = mailbox.lock().unwrap();
                                    if mb.len() < HELD * WORKERS {
                                        mb.push(permit);
                                    } else {
                                        drop(mb);
                                        verdict(&mut rng, permit, &mut me);
                                    }
                                } else if held.len() < HELD {
                                    held.push(permit);
                                } else {
                                    verdict(&mut rng, permit, &mut me);
                                }
                            }
                            (t0, Err(r), t1) => me.rejected(r, timeout, t1 - t0),
                        },
                        // Finish someone else's call.
                        _ => {
                            let other = mailbox.lock().unwrap().pop();
                            if let Some(permit) = other {
                                verdict(&mut rng, permit, &mut me);
                            }
                        }
                    }
                    while !held.is_empty() && rng.next().is_multiple_of(2) {
                        let i = (rng.next() % held.len() as u64) as usize;
                        let permit = held.swap_remove(i);
                        verdict(&mut rng, permit, &mut me);
                    }
                }
                for permit in held {
                    permit.success();
                    me.reported[0] += 1;
                }
                me
            })
        })
        .collect();

    start.wait();
    let mut all = Tally::default();
    for w in workers {
        all.add(&w.join().unwrap());
    }
    workers_done.store(true, Ordering::Release);
    for permit in std::mem::take(&mut *mailbox.lock().unwrap()) {
        permit.success();
        all.reported[0] += 1;
    }
    let reads: Vec<u64> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let ticks = ticker.join().unwrap();

    let totals = breaker.totals();
    let counts = breaker.counts();
    let state = breaker.state();
    let happened = record.happened.entries();
    let delivered = delivered.entries();
    println!(
        "[{name}] {} calls by {WORKERS} workers, {ticks} ms ticked, reads {reads:?}: \
         {} admitted, {} rejected open (longest retry_after {:?}), {} rejected half-open, \
         {} state changes; {totals:?}; now {state:?} {counts:?}; anomalies {anomalies:?}",
        all.calls,
        all.admitted,
        all.rejected_open,
        all.longest_retry,
        all.rejected_busy,
        happened.len(),
    );

    assert_eq!(
        all.admitted + all.rejected_open + all.rejected_busy,
        all.calls
    );
    // Every admitted call is accounted for, once; every change that happened was delivered,
    // once, in order, along a legal walk that ends where the breaker is.
    let now = check_accounts(&totals, all.admitted, &happened, &delivered);
    assert_eq!(now, state);
    assert_eq!(all.reported.iter().sum::<u64>(), all.admitted);
    // Nothing was counted as what it was not.
    assert!(totals.successes <= all.reported[0], "{totals:?} {all:?}");
    assert!(totals.failures <= all.reported[1], "{totals:?} {all:?}");
    assert!(totals.exclusions <= all.reported[2], "{totals:?} {all:?}");
    assert_eq!(totals.abandoned, all.reported[3], "{totals:?} {all:?}");
    assert!(counts_ok(&counts), "{counts:?}");
    // An open rejection never reported a deadline beyond an open period (a window's end).
    assert_eq!(all.too_long, 0, "longest {:?}", all.longest_retry);
    // Every snapshot a reader took was one a locked breaker could have shown.
    let first = anomalies.first.lock().unwrap().clone();
    assert_eq!(
        (
            anomalies.counts_torn.load(Ordering::Relaxed),
            anomalies.totals_torn.load(Ordering::Relaxed),
            anomalies.totals_backwards.load(Ordering::Relaxed),
        ),
        (0, 0, 0),
        "torn snapshots over {} reads; first: {first:?}",
        anomalies.reads.load(Ordering::Relaxed)
    );
    // The workload exercised the machine.
    assert!(totals.opened >= 1, "never tripped: {totals:?}");
    assert!(all.rejected_open > 0, "{all:?}");
}

/// No closed-state window: admissions and successes count without a clock.
#[test]
fn stress_without_a_window() {
    stress(
        "no window",
        ConsecutiveFailures::new(4).unwrap(),
        Duration::from_millis(20),
        |b| b,
    );
}

/// Fixed windows of 3 ms: window ends race the calls all the time.
#[test]
fn stress_with_short_fixed_windows() {
    stress(
        "3 ms windows",
        FailureRatio::new(0.4, 10).unwrap(),
        Duration::from_millis(20),
        |b| b.interval(Duration::from_millis(3)),
    );
}

/// Windows much longer than the open period (2 ms): an open rejection reporting a window's
/// end would be seen as a `retry_after` longer than any open period.
#[test]
fn stress_with_windows_longer_than_the_open_period() {
    stress(
        "200 ms windows, 2 ms open",
        ConsecutiveFailures::new(3).unwrap(),
        Duration::from_millis(2),
        |b| b.interval(Duration::from_millis(200)),
    );
}

/// Threads of the second workload ([`stress_held`]).
const THREADS: usize = 8;
/// Calls each of its workers makes at least; they keep calling until the clock has stopped.
const MIN_CALLS: u64 = 5_000;
/// Milliseconds its clock thread advances, one at a time, while the workers call.
const HELD_TICKS: u64 = 1_000;

/// Everything under the lock: a rolling window and a ratio policy that sees every result.
#[test]
fn everything_adds_up_under_contention_on_the_lock() {
    let policy = Recorded::new(FailureRatio::new(0.4, 10).unwrap()).needs_successes(true);
    stress_held(policy, |b| {
        b.interval(Duration::from_millis(50))
            .bucket_period(Duration::from_millis(10))
    });
}

/// gobreaker's defaults: closed-state admissions and successes on the lock-free lane, open
/// rejections without the lock, failures and half-open under it.
#[test]
fn everything_adds_up_under_contention_on_the_lock_free_lane() {
    let policy = Recorded::new(ConsecutiveFailures::new(4).unwrap()).needs_successes(false);
    stress_held(policy, |b| b);
}

/// A fixed closed-state window on the lock-free lane: every window's end races the calls.
#[test]
fn everything_adds_up_under_contention_on_the_windowed_lane() {
    let policy = Recorded::new(FailureRatio::new(0.4, 10).unwrap()).needs_successes(false);
    stress_held(policy, |b| b.interval(Duration::from_millis(10)));
}

/// A rolling closed-state window on the lock-free lane: every bucket's roll races the calls,
/// and a permit held across rolls reports into its own bucket or is dropped with it.
#[test]
fn everything_adds_up_under_contention_on_the_rolling_lane() {
    let policy = Recorded::new(FailureRatio::new(0.4, 10).unwrap()).needs_successes(false);
    stress_held(policy, |b| {
        b.interval(Duration::from_millis(50))
            .bucket_period(Duration::from_millis(10))
    });
}

/// A count window (the last 20 results) on the lock-free lane: successes folded in batches,
/// failures under the lock.
#[test]
fn everything_adds_up_under_contention_on_the_count_window_lane() {
    let policy = Recorded::new(FailureRatio::new(0.4, 10).unwrap()).needs_successes(false);
    stress_held(policy, |b| b.count_window(20));
}

/// The second workload: `THREADS` workers whose permits are all held a while, then finished
/// in random order with random verdicts (some excluded or dropped), on a breaker with
/// `policy` and the settings `configure` adds, and a clock thread. Then everything must add
/// up.
fn stress_held<P: TripPolicy + 'static>(
    policy: Recorded<P>,
    configure: impl FnOnce(Builder<Recorded<P>>) -> Builder<Recorded<P>>,
) {
    let _serial = serial();
    let (clock, built) = stressed(policy, Duration::from_millis(20), configure);
    let Built {
        breaker,
        record,
        delivered,
    } = built;

    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (clock, start, done) = (clock.clone(), Arc::clone(&start), Arc::clone(&done));
        thread::spawn(move || {
            start.wait();
            for _ in 0..HELD_TICKS {
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
                    while !held.is_empty() && !rng.next().is_multiple_of(3) {
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

    // Every call was either admitted or rejected, and every admitted call is accounted for;
    // every call has returned: every change that happened was delivered, once, in order,
    // along a legal walk from closed.
    assert_eq!(admitted + rejected_open + rejected_busy, calls);
    let totals = breaker.totals();
    let history = record.happened.entries();
    check_accounts(&totals, admitted, &history, &delivered.entries());

    // The workload really exercised the machine (tripping, probing, rejecting).
    assert!(totals.opened >= 2, "tripped only {} times", totals.opened);
    assert!(rejected_open > 0 && totals.dropped > 0, "{totals:?}");
    println!(
        "{calls} calls: {admitted} admitted, {rejected_open} rejected open, {rejected_busy} \
         rejected half-open, {} state changes over {HELD_TICKS} ms; {totals:?}",
        history.len()
    );
}

/// Only successes, several threads, and a reader draining the lane all the time: the reader's
/// snapshots must never show a success without its admission (threads move between
/// stripes when they collide, between a call's admission and its success).
#[test]
fn snapshots_never_show_a_success_without_its_admission() {
    let _serial = serial();
    const THREADS: usize = 4;
    let Built { breaker, .. } = build(
        Recorded::new(ConsecutiveFailures::new(1000).unwrap()),
        ManualClock::new(),
        |b| b,
    );
    let deadline = Instant::now() + BUDGET;
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let callers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (breaker, start) = (breaker.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut n = 0u64;
                // At most 8 000 per thread between two folds: far from a cell's 65 535.
                while n < 4 * CALLS {
                    if n.is_multiple_of(64) && Instant::now() >= deadline {
                        break;
                    }
                    n += 1;
                    breaker.allow().unwrap().success();
                }
                n
            })
        })
        .collect();
    let reader = {
        let (breaker, start, done) = (breaker.clone(), start.clone(), done.clone());
        thread::spawn(move || {
            start.wait();
            let (mut reads, mut torn, mut first) = (0u64, 0u64, None);
            while !done.load(Ordering::Acquire) && reads < 100 * CALLS {
                reads += 1;
                let c = breaker.counts();
                if !counts_ok(&c) {
                    torn += 1;
                    first.get_or_insert(c);
                }
                if reads % 4096 == 0 && Instant::now() >= deadline {
                    break;
                }
            }
            (reads, torn, first)
        })
    };
    let calls: u64 = callers.into_iter().map(|c| c.join().unwrap()).sum();
    done.store(true, Ordering::Release);
    let (reads, torn, first) = reader.join().unwrap();
    let t = breaker.totals();
    println!("[snapshots] {calls} calls, {reads} reads, {torn} torn (first {first:?}); {t:?}");
    assert_eq!((t.admitted, t.successes), (calls, calls));
    assert_eq!(
        torn, 0,
        "{torn} of {reads} snapshots showed more successes than requests; first {first:?}"
    );
}

/// A success reported after its fixed window ended (on the clock it reads) is dropped, never
/// counted in its old window nor in the next one, whatever races it: many such successes at
/// once, while another thread starts the next window.
#[test]
fn successes_after_their_window_are_dropped_not_counted() {
    let _serial = serial();
    const LATE: usize = 6;
    const ROUNDS: u64 = if cfg!(debug_assertions) { 200 } else { 1_000 };
    const WINDOW: Duration = Duration::from_millis(10);
    let clock = ManualClock::new();
    let Built { breaker, .. } = build(
        Recorded::new(ConsecutiveFailures::new(1).unwrap()),
        clock.clone(),
        |b| b.interval(WINDOW),
    );
    let deadline = Instant::now() + BUDGET;
    let before = Arc::new(Barrier::new(LATE + 2));
    let after = Arc::new(Barrier::new(LATE + 2));
    let stop = Arc::new(AtomicBool::new(false));
    let late: Vec<_> = (0..LATE)
        .map(|_| {
            let (breaker, before, after, stop) =
                (breaker.clone(), before.clone(), after.clone(), stop.clone());
            thread::spawn(move || loop {
                // Admitted in this round's window (lock-free, or by the lock).
                let permit = breaker.allow_owned().unwrap();
                before.wait(); // the main thread moves the clock past the window's end
                after.wait();
                if stop.load(Ordering::Acquire) {
                    drop(permit);
                    return;
                }
                permit.success();
            })
        })
        .collect();
    let starter = {
        let (breaker, before, after, stop) =
            (breaker.clone(), before.clone(), after.clone(), stop.clone());
        thread::spawn(move || loop {
            before.wait();
            after.wait();
            if stop.load(Ordering::Acquire) {
                return;
            }
            // The next window's first call, racing the late successes.
            breaker.allow().unwrap().success();
        })
    };
    let mut rounds = 0;
    let mut expected = Totals::default();
    while rounds < ROUNDS && Instant::now() < deadline {
        rounds += 1;
        before.wait();
        clock.advance(WINDOW + Duration::from_nanos(1));
        after.wait();
        expected.admitted += LATE as u64 + 1;
        expected.dropped += LATE as u64;
        expected.successes += 1;
        // The round's calls race; wait for them by waiting for the next round's barrier.
    }
    // Release everyone one last time, telling them to stop (their permits are dropped
    // unused: abandoned, and exclusions in the window, which did not end).
    before.wait();
    stop.store(true, Ordering::Release);
    after.wait();
    for l in late {
        l.join().unwrap();
    }
    starter.join().unwrap();
    let t = breaker.totals();
    let c = breaker.counts();
    println!("[late] {rounds} rounds of {LATE} late successes: {t:?}, counts {c:?}");
    // The last round's permits (admitted in a window that did not end) were dropped unused.
    assert_eq!(t.admitted, expected.admitted + LATE as u64, "{t:?}");
    assert_eq!((t.abandoned, t.exclusions), (LATE as u64, 0), "{t:?}");
    assert_eq!(
        t.successes, expected.successes,
        "a late success was counted: {t:?}"
    );
    assert_eq!(t.dropped, expected.dropped, "{t:?}");
    // The current window holds the last round's calls only: its first call, a success, and
    // the permits dropped unused.
    assert_eq!(
        (c.requests, c.total_successes, c.total_exclusions),
        (LATE as u64 + 1, 1, LATE as u64),
        "{c:?}"
    );
}

/// Runs `n` successes on this thread alone; returns how many of them reached the policy
/// (each of which took the lock).
fn lone_successes<P: TripPolicy>(built: &Built<P>, n: u64) -> u64 {
    let before = built.record.consulted(0);
    for _ in 0..n {
        built.breaker.allow().unwrap().success();
    }
    built.record.consulted(0) - before
}

/// After a burst of contention (which makes the stripes), a thread alone counts lock-free
/// again: its successes no longer reach the policy (a locked success always would).
fn back_to_the_lane_after_a_burst(window: Option<Duration>) {
    let _serial = serial();
    let clock = ManualClock::new();
    let built = build(
        Recorded::new(ConsecutiveFailures::new(1).unwrap()),
        clock.clone(),
        |b| match window {
            Some(w) => b.interval(w),
            None => b,
        },
    );
    let deadline = Instant::now() + BUDGET;
    // Warm up alone: every success lock-free from the start.
    assert_eq!(lone_successes(&built, 1_000), 0);
    let mut locked_in_bursts = 0;
    for burst in 0..4 {
        let start = Arc::new(Barrier::new(WORKERS));
        let threads: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (breaker, start) = (built.breaker.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    // 8 x 5 000 calls stay below a cell's 65 535: no lock for a full counter.
                    for i in 0..5_000u32 {
                        if i % 256 == 0 && Instant::now() >= deadline {
                            break;
                        }
                        breaker.allow().unwrap().success();
                    }
                })
            })
            .collect();
        let before = built.record.consulted(0);
        for t in threads {
            t.join().unwrap();
        }
        let locked = built.record.consulted(0) - before;
        locked_in_bursts += locked;
        // A call that met its stripe closed (made since the last publish) took the lock,
        // which opened every stripe; since then, the lone thread must not need it again.
        let t = built.breaker.totals(); // a read: folds the cells, takes nothing else
        let alone = lone_successes(&built, 20_000);
        println!(
            "[burst {burst}, window {window:?}] successes that took the lock: {locked} in the \
             burst, {alone} of 20 000 alone after; {t:?}"
        );
        assert_eq!(
            alone, 0,
            "a lone thread kept taking the lock after contention"
        );
        assert_eq!(built.breaker.state(), State::Closed);
    }
    let t = built.breaker.totals();
    assert_eq!(t.admitted, t.successes, "{t:?}");
    println!("[window {window:?}] {locked_in_bursts} successes took the lock in all bursts");
}

#[test]
fn a_lone_thread_counts_lock_free_after_contention_without_a_window() {
    back_to_the_lane_after_a_burst(None);
}

#[test]
fn a_lone_thread_counts_lock_free_after_contention_with_a_window() {
    back_to_the_lane_after_a_burst(Some(Duration::from_secs(3600)));
}

/// A clock that, once armed, makes one call on its breaker from inside its own reading: for
/// a windowed lane that reads the clock between loading its cell and its compare-and-swap,
/// this is a collision on the base, made deterministic. It makes the stripes.
#[derive(Debug)]
struct Colliding {
    time: ManualClock,
    breaker: OnceLock<Weak<Breaker<Recorded<ConsecutiveFailures>>>>,
    armed: AtomicBool,
}

impl Clock for Colliding {
    fn now(&self) -> Duration {
        if self.armed.swap(false, Ordering::AcqRel) {
            if let Some(b) = self.breaker.get().and_then(Weak::upgrade) {
                b.allow().unwrap().success();
            }
        }
        self.time.now()
    }
}

/// The stripes made by a collision (observed as their allocation) are opened by the next
/// lock holder, after which a lone thread counts lock-free again: no success takes the lock.
#[test]
fn stripes_made_by_a_collision_are_opened_and_used() {
    let _serial = serial();
    let clock = Arc::new(Colliding {
        time: ManualClock::new(),
        breaker: OnceLock::new(),
        armed: AtomicBool::new(false),
    });
    let built = build(
        Recorded::new(ConsecutiveFailures::new(1).unwrap()),
        clock.clone(),
        |b| b.interval(Duration::from_secs(3600)),
    );
    clock.breaker.set(Arc::downgrade(&built.breaker)).unwrap();
    assert_eq!(lone_successes(&built, 1_000), 0, "on the base, lock-free");

    // No other thread runs now (the tests are serial): what is allocated is the breaker's.
    clock.armed.store(true, Ordering::Release);
    let region = Region::new(GLOBAL);
    let permit = built.breaker.allow().unwrap();
    let made = region.change();
    assert!(!clock.armed.load(Ordering::Acquire), "the clock was read");
    permit.success();
    println!("[collision] the colliding admission allocated {made:?}");
    assert!(
        made.bytes_allocated >= 2 * 128,
        "the collision made no stripes: {made:?}"
    );

    let alone = lone_successes(&built, 20_000);
    assert_eq!(
        alone, 0,
        "successes took the lock after the stripes were made"
    );
    let t = built.breaker.totals();
    assert_eq!((t.admitted, t.successes), (21_002, 21_002), "{t:?}");
}

/// A permit admitted on one thread and reported on another (one in flight at a time, handed
/// back and forth): a reader's snapshot must never hold the success without the admission.
/// The admission may land in a stripe the reader's drain has already passed, and the success
/// in one it has not reached yet.
#[test]
fn handed_over_permits_never_make_a_torn_snapshot() {
    let _serial = serial();
    type Slot = Mutex<Option<OwnedPermit<Recorded<ConsecutiveFailures>>>>;
    let Built { breaker, .. } = build(
        Recorded::new(ConsecutiveFailures::new(1000).unwrap()),
        ManualClock::new(),
        |b| b,
    );
    let deadline = Instant::now() + BUDGET;
    let done = Arc::new(AtomicBool::new(false));
    // slots[i]: a permit for thread i to report.
    let slots: Arc<[Slot; 2]> = Arc::new([Mutex::new(None), Mutex::new(None)]);
    *slots[0].lock().unwrap() = Some(breaker.allow_owned().unwrap());
    let start = Arc::new(Barrier::new(3));
    let pair: Vec<_> = (0..2)
        .map(|i| {
            let (breaker, slots, start, done) =
                (breaker.clone(), slots.clone(), start.clone(), done.clone());
            thread::spawn(move || {
                start.wait();
                let mut n = 0u64;
                while n < 20 * CALLS && !done.load(Ordering::Acquire) {
                    let mine = slots[i].lock().unwrap().take();
                    let Some(permit) = mine else {
                        if n.is_multiple_of(64) && Instant::now() >= deadline {
                            break;
                        }
                        thread::yield_now();
                        continue;
                    };
                    n += 1;
                    permit.success();
                    // Stay a while between the success and the next admission: the state in
                    // which a torn snapshot shows.
                    for _ in 0..200 {
                        std::hint::spin_loop();
                    }
                    let next = breaker.allow_owned().unwrap();
                    *slots[1 - i].lock().unwrap() = Some(next);
                }
                n
            })
        })
        .collect();
    let reader = {
        let (breaker, start, done) = (breaker.clone(), start.clone(), done.clone());
        thread::spawn(move || {
            start.wait();
            let (mut reads, mut torn, mut first) = (0u64, 0u64, None);
            let began = Instant::now();
            while reads < 1_000 * CALLS {
                reads += 1;
                let c = breaker.counts();
                if !counts_ok(&c) {
                    torn += 1;
                    first.get_or_insert(c);
                }
                if reads % 1024 == 0 {
                    let now = Instant::now();
                    if now >= deadline || now - began >= BUDGET / 2 {
                        break;
                    }
                }
            }
            done.store(true, Ordering::Release);
            (reads, torn, first)
        })
    };
    let (reads, torn, first) = reader.join().unwrap();
    let handed: u64 = pair.into_iter().map(|t| t.join().unwrap()).sum();
    for slot in slots.iter() {
        if let Some(p) = slot.lock().unwrap().take() {
            p.success();
        }
    }
    let t = breaker.totals();
    println!("[handover] {handed} permits handed over, {reads} reads, {torn} torn (first {first:?}); {t:?}");
    assert_eq!((t.admitted, t.successes), (handed + 1, handed + 1), "{t:?}");
    assert_eq!(
        torn, 0,
        "{torn} of {reads} snapshots showed more successes than requests; first {first:?}"
    );
}
