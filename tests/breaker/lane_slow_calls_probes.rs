//! Probes of the slow-call lane (in-flight slots), from a review: each test states the
//! lock's answer (every operation under the state lock, in one order) and checks the lane
//! gives it: a success read behind a lock step, a seeded differential with manual controls,
//! abandonment and clock jumps, and threads whose every call is counted once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::policy::Locked;
use crate::support::rng::Rng;

use lazybreaker::policy::{CallResult, Capabilities, LaneRoom, Outcome, SlowCalls, TripPolicy};
use lazybreaker::{Breaker, Counts, ManualClock};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `SlowCalls`, writing down the successes it saw at each result it was shown; `quiet`:
/// whether it lets the lane count fast successes (else every call takes the lock: the
/// reference).
#[derive(Debug, Clone)]
struct Seen {
    policy: SlowCalls,
    quiet: bool,
    seen: Arc<Mutex<Vec<(Outcome, u64)>>>,
}

impl TripPolicy for Seen {
    fn on_result(&mut self, r: &CallResult<'_>) -> bool {
        self.seen
            .lock()
            .unwrap()
            .push((r.outcome, r.counts.total_successes));
        self.policy.on_result(r)
    }
    fn capabilities(&self) -> Capabilities {
        self.policy.capabilities()
    }
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        let room = self.policy.lane_room(counts);
        room.quiet_successes(self.quiet && room.quiet_successes)
    }
}

/// A call's success read a clock behind a later lock step that showed the counts to the
/// policy: it comes after that step (the step did not see it), so under the lock it is
/// timed at the breaker's latest time (1.5 s after its start: slow). The lane counts it as
/// fast with its own reading (0.9 s): neither order gives that.
fn success_behind_a_lock_step(quiet: bool) -> (Counts, Vec<(Outcome, u64)>) {
    let base = ManualClock::new();
    let clock = crate::support::clock::Behind::new(&base, ms(600));
    let policy = Seen {
        policy: SlowCalls::new(Duration::from_secs(1), 0.9, 100).unwrap(),
        quiet,
        seen: Arc::default(),
    };
    let b = Breaker::builder()
        .policy(policy.clone())
        .clock(clock.clone())
        .build();
    let p = b.allow().unwrap(); // at 0
    let q = b.allow().unwrap(); // at 0
    base.advance(ms(1_500));
    q.failure(); // at 1.5 s, under the lock: the policy sees the counts
    clock.set(true);
    p.success(); // reads 0.9 s, after the failure's step
    clock.set(false);
    let seen = policy.seen.lock().unwrap().clone();
    (b.counts(), seen)
}

#[test]
fn a_fast_success_read_behind_a_lock_step_is_timed_as_the_lock_times_it() {
    let (lock, lock_seen) = success_behind_a_lock_step(false);
    let (lane, lane_seen) = success_behind_a_lock_step(true);
    // The failure's step saw no success in both.
    assert_eq!(lane_seen.first(), Some(&(Outcome::Failure, 0)));
    assert_eq!(lock_seen.first(), Some(&(Outcome::Failure, 0)));
    assert_eq!(
        (lock.slow_calls, lock.total_successes),
        (2, 1),
        "the lock: the failure (1.5 s) and the success (timed at 1.5 s) are slow"
    );
    assert_eq!(
        (lane.slow_calls, lane.total_successes),
        (lock.slow_calls, lock.total_successes),
        "the lane counted the success after the failure's step, but as fast"
    );
}

fn build<P: TripPolicy>(p: P, clock: &ManualClock, win: u64) -> Breaker<P> {
    let b = Breaker::builder()
        .policy(p)
        .clock(clock.clone())
        .timeout(ms(40))
        .max_requests(2);
    let b = match win {
        0 => b,
        1 => b.interval(ms(100)),
        2 => b.interval(ms(100)).bucket_period(ms(25)),
        _ => b.interval(ms(60)).bucket_period(ms(1)),
    };
    b.build()
}

/// Random calls on a lane breaker and its locked twin: held permits reported, excluded,
/// dropped (abandoned), state reads, manual controls, clock jumps.
fn drive<P: TripPolicy + Clone>(p: P, seed: u64) {
    let mut rng = Rng(seed | 1);
    let win = rng.below(4);
    let clock = ManualClock::new();
    let lane = build(p.clone(), &clock, win);
    let lock = build(Locked(p), &clock, win);
    let mut held: Vec<(
        lazybreaker::Permit<'_, P>,
        lazybreaker::Permit<'_, Locked<P>>,
    )> = Vec::new();
    for step in 0..600 {
        match rng.below(50) {
            0..=5 => {
                let (a, b) = (lane.allow(), lock.allow());
                assert_eq!(a.is_ok(), b.is_ok(), "seed {seed} step {step} allow");
                if let (Ok(a), Ok(b)) = (a, b) {
                    clock.advance(Duration::from_nanos(rng.below(3) * 1_000_000));
                    if rng.below(3) == 0 {
                        a.failure();
                        b.failure();
                    } else {
                        a.success();
                        b.success();
                    }
                }
            }
            6..=22 => {
                let (a, b) = (lane.allow(), lock.allow());
                assert_eq!(a.is_ok(), b.is_ok(), "seed {seed} step {step} allow");
                if let (Ok(a), Ok(b)) = (a, b) {
                    held.push((a, b));
                }
            }
            23..=39 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                let (a, b) = held.swap_remove(i);
                match rng.below(6) {
                    0 => {
                        a.record(Outcome::Excluded);
                        b.record(Outcome::Excluded);
                    }
                    1 => {
                        drop(a);
                        drop(b);
                    }
                    2 => {
                        a.failure();
                        b.failure();
                    }
                    _ => {
                        a.success();
                        b.success();
                    }
                }
            }
            40 | 41 => clock.advance(Duration::from_nanos(rng.below(20_000_000))),
            42 => clock.advance(Duration::from_nanos(rng.below(200_000_000))),
            43 => assert_eq!(lane.state(), lock.state(), "seed {seed} step {step}"),
            44 if rng.below(8) == 0 => match rng.below(4) {
                0 => {
                    lane.force_closed();
                    lock.force_closed();
                }
                1 => {
                    lane.release();
                    lock.release();
                }
                2 => {
                    lane.force_open();
                    lock.force_open();
                }
                _ => {
                    lane.trip_for(ms(10));
                    lock.trip_for(ms(10));
                }
            },
            _ => {
                let (a, b) = (lane.counts(), lock.counts());
                assert_eq!(a, b, "seed {seed} step {step} win {win}");
            }
        }
        if rng.below(40) == 0 {
            let (a, b) = (lane.totals(), lock.totals());
            assert_eq!(a, b, "seed {seed} step {step} totals");
        }
    }
    drop(held);
    assert_eq!(lane.counts(), lock.counts(), "seed {seed}: end");
    assert_eq!(lane.totals(), lock.totals(), "seed {seed}: end totals");
}

#[test]
fn the_slow_call_lane_decides_as_the_lock_with_controls_drops_and_jumps() {
    for seed in 1..2_000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let th = Duration::from_nanos(1 + r.below(40_000_000));
        match r.below(3) {
            0 => drive(
                SlowCalls::new(th, [0.0, 0.2, 0.5, 1.0][r.below(4) as usize], r.below(6)).unwrap(),
                seed,
            ),
            1 => drive(
                SlowCalls::new(th, 0.5, r.below(4))
                    .unwrap()
                    .or(lazybreaker::policy::FailureRatio::new(0.5, 4).unwrap()),
                seed,
            ),
            _ => drive(
                SlowCalls::new(th, 0.3, r.below(4))
                    .unwrap()
                    .judging_probes_on_latency_alone()
                    .or(lazybreaker::policy::ConsecutiveFailures::new(3).unwrap()),
                seed,
            ),
        }
    }
}

/// Threads calling one slow-call breaker (no window, so nothing is dropped as stale unless
/// it trips, which ratio 1.0 over 10^9 requests never does): every call is counted once,
/// slow at most once, and no slot is lost.
#[test]
fn threads_on_the_slow_call_lane_count_every_call_once() {
    use std::sync::atomic::AtomicU64 as A;
    let clock = ManualClock::new();
    let b = Arc::new(
        Breaker::builder()
            .policy(SlowCalls::new(ms(5), 1.0, 1_000_000_000).unwrap())
            .clock(clock.clone())
            .build(),
    );
    let (succ, fail, excl, aband) = (
        Arc::new(A::new(0)),
        Arc::new(A::new(0)),
        Arc::new(A::new(0)),
        Arc::new(A::new(0)),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (clock, stop) = (clock.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(50));
                std::thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let b = b.clone();
            let (succ, fail, excl, aband) =
                (succ.clone(), fail.clone(), excl.clone(), aband.clone());
            std::thread::spawn(move || {
                let mut rng = Rng((t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let mut held = Vec::new();
                for _ in 0..20_000 {
                    let p = b.allow().unwrap();
                    if rng.below(4) == 0 {
                        held.push(p);
                    } else {
                        p.success();
                        succ.fetch_add(1, Ordering::Relaxed);
                    }
                    if held.len() > 20 || (rng.below(3) == 0 && !held.is_empty()) {
                        let i = rng.below(held.len() as u64) as usize;
                        let p = held.swap_remove(i);
                        match rng.below(8) {
                            0 => {
                                p.failure();
                                fail.fetch_add(1, Ordering::Relaxed);
                            }
                            1 => {
                                p.exclude();
                                excl.fetch_add(1, Ordering::Relaxed);
                            }
                            2 => {
                                drop(p);
                                aband.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {
                                p.success();
                                succ.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    if rng.below(500) == 0 {
                        let _ = b.counts();
                    }
                }
                for p in held {
                    p.success();
                    succ.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    let (c, t) = (b.counts(), b.totals());
    let n = 4 * 20_000;
    assert_eq!(c.requests, n, "{c:?}");
    assert_eq!(t.successes, succ.load(Ordering::Relaxed), "{t:?}");
    assert_eq!(t.failures, fail.load(Ordering::Relaxed), "{t:?}");
    assert_eq!(t.abandoned, aband.load(Ordering::Relaxed), "{t:?}");
    assert_eq!(
        c.total_successes + c.total_failures + c.total_exclusions,
        n,
        "{c:?}"
    );
    assert!(c.slow_calls <= n);
    // Every slot free again: 64 calls held past the threshold all counted slow, once.
    let before = c.slow_calls;
    let held: Vec<_> = (0..64).map(|_| b.allow().unwrap()).collect();
    clock.advance(ms(6));
    b.allow().unwrap().success();
    assert_eq!(b.counts().slow_calls, before + 64);
    for p in held {
        p.success();
    }
    assert_eq!(b.counts().slow_calls, before + 64);
}
