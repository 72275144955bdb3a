//! A hung replica is cut off by `Pool::deadline` at the first pick after its deadline passed,
//! whichever endpoints that pick would choose: with the power of two choices (which puts the
//! hung replica, its calls piling up, last), with round robin (whose turn may be another's),
//! for a hang that starts after the pool last looked, and for a hang behind an older slow
//! call that did get an answer after it.

use std::time::Duration;

use lazybreaker::observe::Ejection;
use lazybreaker::pool::{Balance, Pick, Pool};
use lazybreaker::{Breaker, ManualClock, State};

const DEADLINE: Duration = Duration::from_millis(300);
const HUNG: u32 = 0;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Replicas `0..3` with a deadline of [`DEADLINE`], balanced by `balance`; each breaker
/// opens for 10 s, so that an ejection lasts through the test.
fn replicas(clock: &ManualClock, balance: Balance) -> Pool<u32> {
    let pool = Pool::new(|_: &u32| Breaker::builder().timeout(Duration::from_secs(10)))
        .clock(clock.clone())
        .balance(balance)
        .deadline(DEADLINE);
    pool.set(0..3);
    pool
}

/// `n` picks: those of [`HUNG`] are kept (they never report), the others answer at once.
fn traffic(pool: &Pool<u32>, n: usize, hanging: &mut Vec<Pick<u32>>) {
    for _ in 0..n {
        let pick = pool.pick().expect("an endpoint");
        if *pick.key() == HUNG {
            hanging.push(pick);
        } else {
            pick.success();
        }
    }
}

/// The hung replica is out: ejected as hung once, its breaker open, and no pick goes to it.
fn assert_cut_off(pool: &Pool<u32>) {
    assert_eq!(pool.stats().ejected_hung, 1, "the hung replica is ejected");
    assert_eq!(pool.breaker(&HUNG).unwrap().state(), State::Open);
    let snapshot = pool.snapshot();
    let hung = snapshot.endpoints.iter().find(|e| e.key == HUNG).unwrap();
    assert_eq!(hung.ejected, Some(Ejection::Hung));
    assert!(hung.down);
    for _ in 0..60 {
        let pick = pool.pick().expect("a healthy replica");
        assert_ne!(*pick.key(), HUNG, "a pick went to the hung replica");
        pick.success();
    }
    assert_eq!(pool.stats().ejected_hung, 1);
}

#[test]
fn a_hung_replica_is_out_by_the_first_pick_after_its_deadline_with_two_choices() {
    let clock = ManualClock::new();
    let pool = replicas(&clock, Balance::PowerOfTwo);
    let mut hanging = Vec::new();
    // The hung replica gets one call (then it has more in flight than its peers: the
    // power of two choices puts it second, after a replica that admits the call).
    for _ in 0..200 {
        if !hanging.is_empty() {
            break;
        }
        traffic(&pool, 1, &mut hanging);
    }
    assert_eq!(hanging.len(), 1, "the hung replica got a call");
    clock.advance(DEADLINE - Duration::from_nanos(1));
    traffic(&pool, 20, &mut hanging);
    assert_eq!(
        hanging.len(),
        1,
        "two choices keep to the replicas that answer"
    );
    assert_eq!(pool.stats().ejected_hung, 0, "not yet a deadline");
    clock.advance(Duration::from_nanos(1));
    // The very next pick, whichever two replicas it draws.
    pool.pick().expect("a healthy replica").success();
    assert_cut_off(&pool);
    drop(hanging);
}

#[test]
fn a_hung_replica_is_out_by_the_first_pick_after_its_deadline_with_round_robin() {
    let clock = ManualClock::new();
    let pool = replicas(&clock, Balance::RoundRobin);
    let mut hanging = Vec::new();
    // Turns 0, 1, 2, 0: the next turn is replica 1's.
    traffic(&pool, 4, &mut hanging);
    assert_eq!(hanging.len(), 2);
    clock.advance(DEADLINE);
    let pick = pool.pick().expect("a healthy replica");
    assert_eq!(*pick.key(), 1, "the turn of a replica that answers");
    pick.success();
    assert_cut_off(&pool);
    drop(hanging);
}

#[test]
fn a_hang_that_starts_after_the_pool_last_looked_is_judged_on_time() {
    let clock = ManualClock::new();
    let pool = replicas(&clock, Balance::RoundRobin);
    let mut held = Vec::new();
    traffic(&pool, 3, &mut held); // t = 0: turns 0, 1, 2
    held.pop().unwrap().success(); // replica 0 answers
    clock.advance(DEADLINE);
    traffic(&pool, 3, &mut held); // t = 300: the pool looks, and nothing hangs
    assert_eq!(pool.stats().ejected_hung, 0);
    held.pop().unwrap().success();
    clock.advance(ms(50));
    traffic(&pool, 3, &mut held); // t = 350: replica 0's call hangs
    assert_eq!(held.len(), 1);
    clock.advance(DEADLINE - Duration::from_nanos(1));
    traffic(&pool, 1, &mut held); // t = 650 less 1 ns: replica 0's turn, another call
    assert_eq!(pool.stats().ejected_hung, 0, "not yet a deadline");
    clock.advance(Duration::from_nanos(1)); // t = 650
    let pick = pool.pick().expect("a healthy replica");
    assert_eq!(*pick.key(), 1, "the turn of a replica that answers");
    pick.success();
    assert_cut_off(&pool);
    drop(held);
}

#[test]
fn a_hang_behind_an_older_slow_call_that_got_an_answer_after_it_is_judged() {
    let clock = ManualClock::new();
    let pool = replicas(&clock, Balance::RoundRobin);
    let mut held = Vec::new();
    traffic(&pool, 3, &mut held); // t = 0: a slow call to replica 0, still out
    let slow = held.pop().unwrap();
    clock.advance(ms(10));
    traffic(&pool, 3, &mut held); // t = 10: replica 0 answers this one at once
    held.pop().unwrap().success();
    clock.advance(ms(10));
    traffic(&pool, 3, &mut held); // t = 20: this one never comes back
    assert_eq!(held.len(), 1);
    // From t = 20 replica 0 answers nothing, with a call out since: a deadline later
    // (t = 320) it hangs, its slow call from t = 0 notwithstanding.
    clock.advance(DEADLINE - Duration::from_nanos(1));
    traffic(&pool, 1, &mut held); // replica 0's turn, another call
    assert_eq!(pool.stats().ejected_hung, 0, "not yet a deadline");
    clock.advance(Duration::from_nanos(1));
    let pick = pool.pick().expect("a healthy replica");
    assert_eq!(*pick.key(), 1, "the turn of a replica that answers");
    pick.success();
    assert_cut_off(&pool);
    drop((slow, held));
}
