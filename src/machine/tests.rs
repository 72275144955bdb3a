//! The machine's unit tests: open periods, probes, generations, the counts a change carries,
//! a panicking policy.

use super::*;
use crate::policy::ConsecutiveFailures;
use crate::policy::FailureRatio;

const MS: Nanos = 1_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn moved(change: Option<Change>) -> Option<(State, State)> {
    change.map(|c| (c.from, c.to))
}

fn machine(rules: Rules, threshold: u64) -> Machine<ConsecutiveFailures> {
    Machine::new(rules, ConsecutiveFailures::new(threshold).unwrap(), 0)
}

#[test]
fn open_expires_strictly_after_the_timeout() {
    let mut m = machine(Rules::new(1, Duration::ZERO, Duration::ZERO, ms(10)), 1);
    let (ticket, _) = m.admit(0);
    let t = moved(m.complete(
        ticket.unwrap(),
        Verdict::Reported(Outcome::Failure),
        None,
        0,
    ));
    assert_eq!(t, Some((State::Closed, State::Open)));
    // What is left of the open period, without the nanosecond of the strict expiry.
    let wait = |ns| {
        Err(Rejected::Open {
            retry_after: Duration::from_nanos(ns),
        })
    };
    assert_eq!(m.admit(0).0, wait(10 * MS), "the whole timeout at the trip");
    assert_eq!(m.admit(4 * MS).0, wait(6 * MS));
    assert_eq!(m.peek(4 * MS).retry_after, Some(ms(6)));
    assert_eq!(
        m.peek_open(4 * MS),
        Some(Rejected::Open { retry_after: ms(6) })
    );
    let (r, t) = m.admit(10 * MS);
    assert_eq!(
        r,
        Err(Rejected::Open {
            retry_after: Duration::from_nanos(1)
        })
    );
    assert_eq!(t, None);
    let (r, t) = m.admit(10 * MS + 1);
    assert!(r.is_ok());
    assert_eq!(moved(t), Some((State::Open, State::HalfOpen)));
}

#[test]
fn half_open_admits_max_requests_and_exclusions_give_slots_back() {
    let mut m = machine(Rules::new(2, Duration::ZERO, Duration::ZERO, ms(1)), 1);
    let (t, _) = m.admit(0);
    m.complete(t.unwrap(), Verdict::Reported(Outcome::Failure), None, 0);
    let (a, _) = m.admit(2 * MS);
    let (b, _) = m.admit(2 * MS);
    assert_eq!(m.admit(2 * MS).0, Err(Rejected::TooManyRequests));
    assert_eq!(
        m.complete(
            a.unwrap(),
            Verdict::Reported(Outcome::Excluded),
            None,
            2 * MS
        ),
        None
    );
    let (c, _) = m.admit(2 * MS);
    assert!(c.is_ok());
    assert_eq!(
        m.complete(
            b.unwrap(),
            Verdict::Reported(Outcome::Success),
            None,
            2 * MS
        ),
        None
    );
    assert_eq!(
        moved(m.complete(
            c.unwrap(),
            Verdict::Reported(Outcome::Success),
            None,
            2 * MS
        )),
        Some((State::HalfOpen, State::Closed))
    );
}

#[test]
fn a_layer_that_looks_ahead_sees_a_slot_held_past_the_probe_timeout_as_free() {
    let rules = Rules::new(1, Duration::ZERO, Duration::ZERO, ms(10)).probe_timeout(ms(5));
    let mut m = machine(rules, 1);
    let (t, _) = m.admit(0);
    m.complete(t.unwrap(), Verdict::Reported(Outcome::Failure), None, 0);
    let (hung, change) = m.admit(11 * MS);
    assert_eq!(moved(change), Some((State::Open, State::HalfOpen)));
    assert_eq!(
        m.peek_ahead(16 * MS),
        Ready::Rejected(Rejected::TooManyRequests)
    );
    assert_eq!(m.peek_ahead(16 * MS + 1), Ready::Passes);
    let (probe, change) = m.admit(16 * MS + 1);
    assert_eq!((probe.is_ok(), change), (true, None), "no state change");
    assert_eq!(
        m.complete(
            hung.unwrap(),
            Verdict::Reported(Outcome::Failure),
            None,
            17 * MS
        ),
        None,
        "the replaced probe's failure is stale"
    );
    assert_eq!(m.totals().dropped, 1);
}

#[test]
fn a_result_from_an_older_generation_is_dropped() {
    let mut m = machine(Rules::new(1, ms(10), Duration::ZERO, ms(1)), 1);
    let (t, _) = m.admit(0);
    // The fixed window expires strictly after 10 ms; the result arrives after that.
    assert_eq!(
        m.complete(
            t.unwrap(),
            Verdict::Reported(Outcome::Failure),
            None,
            11 * MS
        ),
        None
    );
    assert_eq!(m.state(), State::Closed);
    assert_eq!(m.counts(), Counts::default());
    assert_eq!(m.totals().dropped, 1);
}

#[test]
fn a_change_carries_the_counts_that_caused_it() {
    let policy = FailureRatio::new(0.5, 2).unwrap();
    let rules = Rules::new(1, Duration::ZERO, Duration::ZERO, ms(1))
        .with_capabilities(&policy.capabilities());
    let mut m = Machine::new(rules, policy, 0);
    let (a, _) = m.admit(0);
    let (b, _) = m.admit(0);
    assert_eq!(
        m.complete(a.unwrap(), Verdict::Reported(Outcome::Success), None, 5),
        None
    );
    let change = m
        .complete(b.unwrap(), Verdict::Reported(Outcome::Failure), None, 7)
        .unwrap();
    assert_eq!(
        (change.from, change.to, change.at),
        (State::Closed, State::Open, 7)
    );
    assert_eq!(
        (
            change.counts.requests,
            change.counts.total_successes,
            change.counts.total_failures
        ),
        (2, 1, 1)
    );
    assert_eq!((change.totals.opened, change.totals.failures), (1, 1));
    assert_eq!(
        m.counts(),
        Counts::default(),
        "the new generation starts empty"
    );
}

#[test]
fn a_panicking_policy_finishes_the_step_and_keeps_the_first_panic() {
    #[derive(Debug)]
    struct Panics;
    impl TripPolicy for Panics {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            panic!("on_result")
        }
        fn half_open_probes(&self, _: u64) -> u64 {
            panic!("half_open_probes")
        }
    }
    let mut m = Machine::new(
        Rules::new(3, Duration::ZERO, Duration::ZERO, ms(1)),
        Panics,
        0,
    );
    let (t, _) = m.admit(0);
    assert_eq!(
        m.complete(t.unwrap(), Verdict::Reported(Outcome::Failure), None, 0),
        None,
        "no trip"
    );
    assert_eq!(m.totals().failures, 1);
    assert!(m.cold.is_some(), "the panic is kept in the cold part");
    assert!(m.take_panic().is_some(), "kept");
    assert!(!m.take_panic().is_some(), "taken");
}

#[test]
fn an_idle_machine_is_small_and_builds_nothing_of_its_own() {
    // On 64-bit targets: the part every breaker holds inline (its lane and own fields apart).
    #[cfg(target_pointer_width = "64")]
    assert!(
        std::mem::size_of::<Machine<ConsecutiveFailures>>() <= 136,
        "a machine takes {} bytes",
        std::mem::size_of::<Machine<ConsecutiveFailures>>()
    );
    let mut m = machine(Rules::new(1, Duration::ZERO, Duration::ZERO, ms(1)), 3);
    for outcome in [Outcome::Success, Outcome::Failure, Outcome::Success] {
        let (t, _) = m.admit(0);
        assert_eq!(
            m.complete(t.unwrap(), Verdict::Reported(outcome), None, 0),
            None
        );
    }
    assert!(!m.take_panic().is_some());
    assert!(
        m.cold.is_none(),
        "successes and failures build no cold part"
    );
    assert_eq!(
        m.counts(),
        Counts::default()
            .with_requests(3)
            .with_total_successes(2)
            .with_total_failures(1)
            .with_consecutive_successes(1)
    );
}
