//! The count-based sliding window (`Builder::count_window`): the closed-state counts are
//! those of the last N results, checked against a reference written here (a queue of the
//! last N results), step by step, for random sequences of calls; with a policy that lets
//! successes count on the lock-free lane and with the same rule behind a policy that sends
//! every call through the lock. Then the edges: half-open, stale results, slow calls, files
//! and the errors of a bad setting.

use std::collections::VecDeque;
use std::time::Duration;

use lazybreaker::config::Settings;
use lazybreaker::policy::{CallResult, Capabilities, FailureRatio, Outcome, SlowCalls, TripPolicy};
use lazybreaker::{Breaker, Clock, Counts, ManualClock, State, MAX_COUNT_WINDOW};
use proptest::prelude::*;

/// `FailureRatio`'s rule behind a policy that asks to see every success: every call takes
/// the lock.
#[derive(Debug)]
struct Locked(FailureRatio);

impl TripPolicy for Locked {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.0.on_result(result)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().needs_successes(true)
    }
}

/// The last `n` results, as the window is documented to keep them.
#[derive(Debug)]
struct Reference {
    n: usize,
    last: VecDeque<bool>, // true: failed
    exclusions: u64,
}

impl Reference {
    fn push(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Excluded => self.exclusions += 1,
            other => {
                if self.last.len() == self.n {
                    self.last.pop_front();
                }
                self.last.push_back(other != Outcome::Success);
            }
        }
    }

    fn counts(&self) -> Counts {
        let failures = self.last.iter().filter(|&&f| f).count() as u64;
        let run = |failed: bool| self.last.iter().rev().take_while(|&&f| f == failed).count();
        Counts::default()
            .with_requests(self.last.len() as u64)
            .with_total_failures(failures)
            .with_total_successes(self.last.len() as u64 - failures)
            .with_total_exclusions(self.exclusions)
            .with_consecutive_failures(run(true) as u64)
            .with_consecutive_successes(run(false) as u64)
    }

    /// Whether a failure just pushed trips a ratio of `num / den` over at least `min`.
    fn trips(&self, num: u64, den: u64, min: u64) -> bool {
        let c = self.counts();
        c.requests >= min && c.total_failures * den >= num * c.requests
    }
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Success),
        3 => Just(Outcome::Failure),
        1 => Just(Outcome::Excluded),
    ]
}

/// Runs `outcomes` through a closed breaker over the last `n` results and the reference,
/// comparing the state and the counts after every failure and every `read_every` calls
/// (the successes in between are counted on the lane, and folded in at once), and the trip
/// with the reference's.
fn agrees<P: TripPolicy>(
    breaker: &Breaker<P>,
    n: usize,
    (num, den, min): (u64, u64, u64),
    outcomes: &[Outcome],
    read_every: usize,
) -> Result<(), TestCaseError> {
    let mut reference = Reference {
        n,
        last: VecDeque::new(),
        exclusions: 0,
    };
    for (i, &outcome) in outcomes.iter().enumerate() {
        breaker.allow().unwrap().record(outcome);
        reference.push(outcome);
        if outcome == Outcome::Failure && reference.trips(num, den, min) {
            prop_assert_eq!(breaker.state(), State::Open, "call {}", i);
            return Ok(());
        }
        if outcome == Outcome::Failure || i % read_every == 0 {
            prop_assert_eq!(breaker.state(), State::Closed, "call {}", i);
            prop_assert_eq!(breaker.counts(), reference.counts(), "call {}", i);
        }
    }
    prop_assert_eq!(breaker.counts(), reference.counts(), "at the end");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_counts_are_the_last_n_results(
        n in 1usize..12,
        min in 0u64..10,
        half in any::<bool>(),
        read_every in 1usize..30,
        outcomes in prop::collection::vec(outcome(), 0..120),
    ) {
        // Ratios exact in binary: the policy's f64 comparison is the rational one.
        let (num, den) = if half { (1, 2) } else { (3, 4) };
        let ratio = || FailureRatio::new(num as f64 / den as f64, min).unwrap();
        let lane = Breaker::builder().policy(ratio()).count_window(n as u32).build();
        agrees(&lane, n, (num, den, min), &outcomes, read_every)?;
        let locked = Breaker::builder().policy(Locked(ratio())).count_window(n as u32).build();
        agrees(&locked, n, (num, den, min), &outcomes, read_every)?;
    }
}

#[test]
fn successes_counted_without_the_lock_push_out_the_oldest_in_order() {
    // More successes than the window holds, between two reads: the window is full of them.
    let breaker = Breaker::builder()
        .policy(FailureRatio::new(0.5, 4).unwrap())
        .count_window(4)
        .build();
    breaker.allow().unwrap().failure();
    for _ in 0..3 {
        breaker.allow().unwrap().success();
    }
    assert_eq!(
        breaker.counts().total_failures,
        1,
        "the failure is still held"
    );
    breaker.allow().unwrap().success();
    let c = breaker.counts();
    assert_eq!(
        (
            c.requests,
            c.total_successes,
            c.total_failures,
            c.consecutive_successes
        ),
        (4, 4, 0, 4)
    );
    for _ in 0..70_000 {
        breaker.allow().unwrap().success(); // past a lane cell's 16-bit counter
    }
    let c = breaker.counts();
    assert_eq!(
        (c.requests, c.total_successes, c.consecutive_successes),
        (4, 4, 4)
    );
    assert_eq!(
        breaker.totals().successes,
        70_004,
        "the totals keep every call"
    );
    assert_eq!(breaker.totals().admitted, 70_005);
}

#[test]
fn half_open_counts_its_probes_and_closing_starts_an_empty_window() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(FailureRatio::new(0.5, 2).unwrap())
        .count_window(3)
        .max_requests(2)
        .timeout(Duration::from_secs(1))
        .clock(clock.clone())
        .build();
    breaker.allow().unwrap().failure();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(2));
    let probes = [breaker.allow().unwrap(), breaker.allow().unwrap()];
    assert!(breaker.allow().is_err(), "two probes, as max_requests says");
    assert_eq!(breaker.counts().requests, 2, "half-open counts admissions");
    for probe in probes {
        probe.success();
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.counts(), Counts::default());
    breaker.allow().unwrap().success();
    assert_eq!(breaker.counts().requests, 1);
}

#[test]
fn a_result_admitted_before_a_trip_is_dropped() {
    let breaker = Breaker::builder()
        .policy(FailureRatio::new(0.5, 1).unwrap())
        .count_window(10)
        .build();
    let late = breaker.allow().unwrap();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    late.success();
    assert_eq!(breaker.totals().dropped, 1);
}

#[test]
fn slow_calls_are_counted_over_the_last_n_when_they_return() {
    let clock = ManualClock::new();
    // Half of the last 4 calls slower than 100 ms, once 4 are held.
    let breaker = Breaker::builder()
        .policy(SlowCalls::new(Duration::from_millis(100), 0.5, 4).unwrap())
        .count_window(4)
        .clock(clock.clone())
        .build();
    let call = |ms: u64| {
        let permit = breaker.allow().unwrap();
        clock.advance(Duration::from_millis(ms));
        permit.success();
    };
    call(200);
    let stuck = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(5));
    call(1); // the stuck call is not counted while in flight: it holds no result yet
    assert_eq!(breaker.counts().slow_calls, 1);
    call(1);
    call(1);
    assert_eq!(breaker.counts().slow_calls, 1, "200 ms, 1, 1, 1 ms: 1 of 4");
    call(1);
    assert_eq!(
        breaker.counts().slow_calls,
        0,
        "the slow one was pushed out"
    );
    stuck.success(); // 5 s: slow
    call(150);
    assert_eq!(breaker.state(), State::Open, "2 of the last 4 were slow");
}

/// A clock that counts its readings.
#[derive(Debug, Default)]
struct Counting(std::sync::atomic::AtomicU64);

impl Clock for Counting {
    fn now(&self) -> Duration {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Duration::ZERO
    }
}

#[test]
fn a_closed_call_over_a_count_window_reads_no_clock() {
    let clock = std::sync::Arc::new(Counting::default());
    let breaker = Breaker::builder()
        .policy(FailureRatio::new(0.5, 20).unwrap())
        .count_window(100)
        .clock(clock.clone())
        .build();
    let _ = breaker.execute(|| Ok::<_, ()>(())); // the lane's first call
    let before = clock.0.load(std::sync::atomic::Ordering::Relaxed);
    for _ in 0..1000 {
        let _ = breaker.execute(|| Ok::<_, ()>(()));
    }
    assert_eq!(clock.0.load(std::sync::atomic::Ordering::Relaxed), before);
    assert_eq!(breaker.counts().requests, 100);
}

#[test]
fn a_count_window_is_set_from_a_file_and_refused_with_a_time_window() {
    let settings: Settings = toml::from_str(
        "name = \"search\"\ncount_window = 5\npolicy = { kind = \"failure_ratio\", ratio = 0.5, min_requests = 5 }\n",
    )
    .unwrap();
    assert_eq!(settings.knobs.count_window, 5);
    let breaker = settings.to_builder().unwrap().build();
    for _ in 0..9 {
        let _ = breaker.execute(|| Ok::<_, ()>(()));
    }
    assert_eq!(breaker.counts().requests, 5);

    let both: Settings =
        toml::from_str("name = \"search\"\ncount_window = 5\ninterval = \"10s\"\n").unwrap();
    let err = both.validate().unwrap_err();
    assert_eq!(err.field(), "count_window");
    assert_eq!(
        err.to_string(),
        "breaker `search`: invalid `count_window` = 5: is a window of its own: set \
         `count_window` or `interval`, not both"
    );
    let long = format!("count_window = {}\n", MAX_COUNT_WINDOW + 1);
    let err = toml::from_str::<Settings>(&long)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(err.field(), "count_window");

    let err = Breaker::builder()
        .count_window(5)
        .interval(Duration::from_secs(10))
        .build_strict()
        .unwrap_err();
    assert_eq!(err.field(), "count_window");
    // `build` follows gobreaker's forgiving rules: the count window wins.
    let forgiving = Breaker::builder()
        .count_window(2)
        .interval(Duration::from_secs(10))
        .build();
    for _ in 0..3 {
        let _ = forgiving.execute(|| Ok::<_, ()>(()));
    }
    assert_eq!(forgiving.counts().requests, 2);
}
