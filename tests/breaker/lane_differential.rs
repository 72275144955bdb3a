//! The lock-free lane against the lock: a breaker whose policy lets the lane count failures
//! (and successes) against the same policy behind a wrapper that sends every result through
//! the lock, driven by the same random calls on one `ManualClock` (seeded), held permits
//! reported out of order, counts compared only now and then (so that the lane holds many
//! results between folds). Every count, state and total must agree.

use lazybreaker::policy::{
    ConsecutiveFailures, FailureCount, FailureRatio, Outcome, SlowCalls, TripPolicy,
};
use lazybreaker::{Breaker, Counts, ManualClock, Permit};
use std::time::Duration;

use crate::support::policy::Locked;
use crate::support::rng::Rng;

/// No window, a fixed one, or a rolling one, by `win`.
fn build<P: TripPolicy>(p: P, clock: &ManualClock, win: u64) -> Breaker<P> {
    let b = Breaker::builder().policy(p).clock(clock.clone());
    let b = match win {
        0 => b,
        1 => b.interval(Duration::from_millis(100)),
        _ => b
            .interval(Duration::from_millis(100))
            .bucket_period(Duration::from_millis(25)),
    };
    b.build()
}

/// 400 random steps on both breakers from `seed`.
fn drive<P: TripPolicy + Clone>(p: P, seed: u64) {
    let mut rng = Rng(seed | 1);
    let win = rng.below(3);
    let clock = ManualClock::new();
    let lane = build(p.clone(), &clock, win);
    let lock = build(Locked(p), &clock, win);
    let mut held: Vec<(Permit<'_, P>, Permit<'_, Locked<P>>)> = Vec::new();
    for step in 0..400 {
        match rng.below(40) {
            0..=5 => {
                // a call now
                let (a, b) = (lane.allow(), lock.allow());
                assert_eq!(a.is_ok(), b.is_ok(), "seed {seed} step {step} allow");
                if let (Ok(a), Ok(b)) = (a, b) {
                    if rng.below(3) == 0 {
                        a.success();
                        b.success();
                    } else {
                        a.failure();
                        b.failure();
                    }
                }
            }
            6..=20 => {
                let (a, b) = (lane.allow(), lock.allow());
                assert_eq!(a.is_ok(), b.is_ok(), "seed {seed} step {step} allow");
                if let (Ok(a), Ok(b)) = (a, b) {
                    held.push((a, b));
                }
            }
            21..=37 if !held.is_empty() => {
                let i = rng.below(held.len() as u64) as usize;
                let (a, b) = held.swap_remove(i);
                match rng.below(4) {
                    0 => {
                        a.success();
                        b.success();
                    }
                    1 => {
                        a.record(Outcome::Excluded);
                        b.record(Outcome::Excluded);
                    }
                    _ => {
                        a.failure();
                        b.failure();
                    }
                }
            }
            38 => clock.advance(Duration::from_millis(rng.below(30))),
            _ => {
                let (a, b) = (lane.counts(), lock.counts());
                assert_eq!(a, b, "seed {seed} step {step} win {win}");
            }
        }
        if rng.below(60) == 0 {
            assert_eq!(lane.state(), lock.state(), "seed {seed} step {step}");
            let (a, b) = (lane.totals(), lock.totals());
            assert_eq!(a, b, "seed {seed} step {step} totals");
        }
    }
    drop(held);
    let (a, b): (Counts, Counts) = (lane.counts(), lock.counts());
    assert_eq!(a, b, "seed {seed}: after the held permits were dropped");
}

#[test]
fn the_lane_counts_as_the_lock_does() {
    for seed in 1..5_000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        match r.below(6) {
            0 => drive(ConsecutiveFailures::new(1 + r.below(9)).unwrap(), seed),
            1 => drive(
                FailureCount::new(1 + r.below(12), r.below(5)).unwrap(),
                seed,
            ),
            2 => drive(
                FailureRatio::new(
                    [0.1, 0.25, 0.3, 0.5, 0.7, 1.0][r.below(6) as usize],
                    r.below(8),
                )
                .unwrap(),
                seed,
            ),
            3 => drive(
                ConsecutiveFailures::new(2 + r.below(6))
                    .unwrap()
                    .or(FailureCount::new(2 + r.below(10), 0).unwrap()),
                seed,
            ),
            // Slow calls: the lane tracks its calls in flight (held permits pass the threshold
            // as the clock moves), against the machine tracking them.
            4 => drive(
                SlowCalls::new(
                    Duration::from_millis(5 + r.below(40)),
                    [0.2, 0.5, 1.0][r.below(3) as usize],
                    r.below(6),
                )
                .unwrap(),
                seed,
            ),
            _ => drive(
                SlowCalls::new(Duration::from_millis(5 + r.below(40)), 0.5, r.below(4))
                    .unwrap()
                    .or(ConsecutiveFailures::new(2 + r.below(6)).unwrap()),
                seed,
            ),
        }
    }
}
