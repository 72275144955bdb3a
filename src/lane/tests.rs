//! The lane's unit tests of admission and results, and the fixtures the concept files'
//! tests share.

use super::*;
use crate::lane::cell::{Cell, Pending};
use crate::policy::{ConsecutiveFailures, TripPolicy};

pub(super) fn never() -> Nanos {
    panic!("the fast lane reads no clock")
}

pub(super) fn unread() -> Option<Nanos> {
    panic!("no clock read for a fast cell, or a result it does not count")
}

pub(super) fn gen(n: u64) -> Generation {
    Generation::from_bits(n)
}

pub(super) fn t(n: u64) -> Ticket {
    Ticket::unaged(gen(n))
}

pub(super) fn admitted(n: u64) -> Entry {
    Entry::Admitted { ticket: t(n) }
}

pub(super) fn counting() -> Plan {
    Plan::of(
        &ConsecutiveFailures::default().capabilities(),
        false,
        false,
        false,
    )
}

/// Closed in generation `n`, counting every success on the lane, no failure.
pub(super) fn closed(n: u64) -> Phase {
    Phase::Closed {
        generation: gen(n),
        age: 0,
        window_end: None,
        room: u64::MAX,
        failure_room: 0,
        shed_from: None,
        since: 0,
        locked: false,
    }
}

/// A lane closed in generation `n` (see [`closed`]).
pub(super) fn fast(n: u64) -> Lane {
    Lane::new(counting(), closed(n), None, None)
}

/// Closed in generation 7 (no window), with room for `room` failures.
pub(super) fn closed_with_room(room: u64) -> Phase {
    Phase::Closed {
        generation: gen(7),
        age: 0,
        window_end: None,
        room: u64::MAX,
        failure_room: room,
        shed_from: None,
        since: 0,
        locked: false,
    }
}

/// A lane with room for `room` failures in generation 7 (no window).
pub(super) fn failing(room: u64) -> Lane {
    Lane::new(counting(), closed_with_room(room), None, None)
}

#[test]
fn fast_lane_counts_and_hands_over() {
    let lane = fast(7);
    assert_eq!(lane.admit(never), admitted(7));
    assert_eq!(lane.admit(never), admitted(7));
    assert_eq!(lane.succeed(t(7), never), Ok(None));
    assert_eq!(
        lane.succeed(t(6), never),
        Err(None),
        "another generation takes the lock"
    );
    assert_eq!(
        lane.close(),
        Pending {
            requests: 2,
            successes: 1,
            rejected: 0,
            throttled: 0,
            ..Pending::default()
        }
    );
    lane.publish(closed(7));
    assert_eq!(lane.admit(never), admitted(7), "fast again");
    assert_eq!(
        lane.close(),
        Pending {
            requests: 1,
            successes: 0,
            rejected: 0,
            throttled: 0,
            ..Pending::default()
        }
    );
    assert_eq!(lane.admit(never), Entry::Locked { now: None }, "closed");
    assert_eq!(lane.succeed(t(7), never), Err(None));
}

#[test]
fn a_windowed_lane_counts_until_its_window_ends() {
    let lane = Lane::new(
        counting(),
        Phase::Closed {
            generation: gen(3),
            age: 0,
            window_end: Some(100),
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        },
        None,
        None,
    );
    assert_eq!(lane.admit(|| 100), Entry::Admitted { ticket: t(3) });
    assert_eq!(lane.succeed(t(3), || 100), Ok(Some(100)));
    // Strictly after `until` the window has expired: the lock starts the next one.
    assert_eq!(lane.admit(|| 101), Entry::Locked { now: Some(101) });
    assert_eq!(lane.succeed(t(3), || 101), Err(Some(101)));
    assert_eq!(
        lane.succeed(t(2), never),
        Err(None),
        "stale: no clock needed"
    );
    assert_eq!(
        lane.close(),
        Pending {
            requests: 1,
            successes: 1,
            rejected: 0,
            throttled: 0,
            ..Pending::default()
        }
    );
}

/// A rolling lane, open for `age` of `generation` until `bucket_end`.
fn rolling(generation: u64, age: u64, bucket_end: Nanos) -> Lane {
    let lane = Lane::new(
        Plan::of(
            &ConsecutiveFailures::default().capabilities(),
            true,
            false,
            false,
        ),
        Phase::Closed {
            generation: gen(generation),
            age,
            window_end: Some(bucket_end),
            room: u64::MAX,
            failure_room: 0,
            shed_from: None,
            since: 0,
            locked: false,
        },
        None,
        None,
    );
    assert_eq!(
        lane.extra
            .as_ref()
            .expect("a rolling lane's")
            .epoch
            .load(Ordering::Relaxed),
        1,
        "opened once"
    );
    lane
}

fn rolling_at(lane: &Lane, generation: u64, age: u64, bucket_end: Nanos) {
    lane.publish(Phase::Closed {
        generation: gen(generation),
        age,
        window_end: Some(bucket_end),
        room: u64::MAX,
        failure_room: 0,
        shed_from: None,
        since: 0,
        locked: false,
    });
}

#[test]
fn a_rolling_lane_counts_for_its_bucket_and_sends_the_others_to_the_lock() {
    let lane = rolling(3, 5, 100);
    let aged = Ticket::aged(gen(3), 5);
    assert_eq!(lane.admit(|| 100), Entry::Admitted { ticket: aged });
    assert_eq!(lane.succeed(aged, || 100), Ok(Some(100)));
    assert_eq!(
        lane.succeed(Ticket::aged(gen(3), 4), never),
        Err(None),
        "an earlier bucket's result is the lock's, without a clock read"
    );
    assert_eq!(
        lane.succeed(Ticket::aged(gen(2), 5), never),
        Err(None),
        "another generation's too"
    );
    assert_eq!(lane.succeed(Ticket::SHADOW, never), Err(None));
    assert!(
        lane.succeed_fast(aged, || Some(100)),
        "in the bucket: counted inline"
    );
    assert!(
        !lane.succeed_fast(aged, || Some(101)),
        "past it: the slow path"
    );
    assert!(
        !lane.succeed_fast(aged, || None),
        "a user clock: the slow path"
    );
    assert!(!lane.succeed_fast(Ticket::aged(gen(3), 4), unread));
    assert_eq!(
        lane.admit(|| 101),
        Entry::Locked { now: Some(101) },
        "the bucket ended"
    );
    assert_eq!(lane.succeed(aged, || 101), Err(Some(101)));
    assert_eq!(
        lane.close(),
        Pending {
            requests: 1,
            successes: 2,
            rejected: 0,
            throttled: 0,
            ..Pending::default()
        }
    );
    rolling_at(&lane, 3, 6, 200);
    assert_eq!(
        lane.admit(|| 150),
        Entry::Admitted {
            ticket: Ticket::aged(gen(3), 6)
        }
    );
    assert_eq!(lane.succeed(aged, never), Err(None), "age 5 rolled");
}

#[test]
fn a_rolling_lanes_next_bucket_never_takes_a_count_meant_for_the_last() {
    let lane = rolling(1, 0, 10);
    // A caller loads its (empty) cell in age 0, then the lock holder rolls to age 1:
    // the new cell is empty too, but its epoch differs, so the caller's
    // compare-and-swap fails and it starts over (seeing age 1's key).
    let loaded = Cell(lane.base.load(Ordering::Acquire));
    lane.close();
    rolling_at(&lane, 1, 1, 20);
    let reopened = Cell(lane.base.load(Ordering::Acquire));
    assert_ne!(loaded, reopened);
    assert_eq!(loaded.pending(0, 0), reopened.pending(0, 0));
    assert!(Lane::try_count(&lane.base, loaded, loaded.with_success()).is_err());
    // The generation keeps its bits; an age past the key's bits counts under the lock.
    rolling_at(&lane, 1, 1 << KEY_AGE_BITS, 30);
    assert_eq!(lane.admit(|| 25), Entry::Locked { now: None });
}

#[test]
fn a_shadow_calls_success_never_counts_on_the_lane() {
    // Every generation's cell, the last one before the wrap and the first included: a
    // dry run's shadow call must take the lock, where the machine drops it.
    for n in [0, 1, (1 << Generation::BITS) - 1] {
        let lane = fast(n);
        assert_eq!(lane.admit(never), admitted(n));
        assert!(!lane.succeed_fast(Ticket::SHADOW, unread), "generation {n}");
        assert_eq!(
            lane.succeed(Ticket::SHADOW, never),
            Err(None),
            "generation {n}"
        );
        assert!(
            lane.succeed_fast(t(n), unread),
            "the cell still counts its own"
        );
    }
}

#[test]
fn open_lane_gives_its_deadline_with_the_reading() {
    let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
    assert_eq!(lane.admit(|| 40), Entry::Open { until: 42, now: 40 });
    assert_eq!(lane.succeed(t(0), never), Err(None));
    lane.publish(Phase::HalfOpen);
    assert_eq!(lane.admit(never), Entry::Locked { now: None });
}

#[test]
fn an_open_lanes_peek_says_what_is_left_of_the_open_period() {
    let lane = Lane::new(counting(), Phase::Open { until: 42 }, None, None);
    let rejected = |ns| {
        Peek::Open(Rejected::Open {
            retry_after: std::time::Duration::from_nanos(ns),
        })
    };
    assert_eq!(lane.peek_open(|| 40), rejected(2));
    assert_eq!(lane.peek_open(|| 42), rejected(1), "the last open instant");
    assert_eq!(lane.peek_open(|| 43), Peek::Expired);
}
