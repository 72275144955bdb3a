//! A dependency slower than the open period, but healthy: every call it gets succeeds, each
//! taking longer than the breaker stays open. With the default probe timeout (the open
//! `timeout`), a probe still out when the next call arrives after it is *relieved* of its
//! slot (another call probes) but keeps its verdict, so the first probe's success closes the
//! breaker about one open period plus one call's latency after the trip, in a lone breaker
//! and in a pool with its defaults. A probe timeout given explicitly writes the probe off
//! instead (its verdict dropped): see `probe_timeout.rs`.

use std::collections::VecDeque;
use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, ManualClock, OwnedPermit, Rejected, State};

const MS: Duration = Duration::from_millis(1);

/// Calls every `every`, each answering `latency` after it starts (a failure while `failing`
/// says so, a success after), on a breaker of `open` that trips on the first failure.
/// Returns when it closed after the trip, measured from the trip, and the rejected calls'
/// kinds seen meanwhile.
struct Traffic {
    clock: ManualClock,
    breaker: std::sync::Arc<Breaker<ConsecutiveFailures>>,
    out: VecDeque<(Duration, OwnedPermit<ConsecutiveFailures>, bool)>,
    now: Duration,
}

impl Traffic {
    fn new(open: Duration, probe_timeout: Option<Duration>) -> Self {
        let clock = ManualClock::new();
        let mut builder = Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(open)
            .clock(clock.clone());
        if let Some(d) = probe_timeout {
            builder = builder.probe_timeout(d);
        }
        Self {
            breaker: std::sync::Arc::new(builder.build()),
            clock,
            out: VecDeque::new(),
            now: Duration::ZERO,
        }
    }

    /// Moves the clock to `to`, reporting every call due by then in order.
    fn advance_to(&mut self, to: Duration) {
        while let Some(&(due, _, _)) = self.out.front() {
            if due > to {
                break;
            }
            let (due, permit, fails) = self.out.pop_front().unwrap();
            self.clock.advance(due - self.now);
            self.now = due;
            if fails {
                permit.failure();
            } else {
                permit.success();
            }
        }
        self.clock.advance(to - self.now);
        self.now = to;
    }

    /// One call starting now, answering after `latency`.
    fn call(&mut self, latency: Duration, fails: bool) -> Result<(), Rejected> {
        let permit = self.breaker.allow_owned()?;
        self.out.push_back((self.now + latency, permit, fails));
        self.out.make_contiguous().sort_by_key(|(due, _, _)| *due);
        Ok(())
    }
}

/// Trips the breaker with a failure, then runs calls every `every` of `latency` for `run`,
/// and returns how long after the trip it closed again, if it did.
fn recovery(
    open: Duration,
    latency: Duration,
    every: Duration,
    run: Duration,
    probe_timeout: Option<Duration>,
) -> (Option<Duration>, Traffic) {
    let mut t = Traffic::new(open, probe_timeout);
    // The blip: a call that fails at once trips it.
    t.call(Duration::ZERO, true).unwrap();
    t.advance_to(Duration::ZERO);
    assert_eq!(t.breaker.state(), State::Open);
    let mut closed_at = None;
    let mut at = Duration::ZERO;
    while at < run {
        at += every;
        t.advance_to(at);
        if t.breaker.state() == State::Closed {
            closed_at = Some(t.now);
            break;
        }
        let _ = t.call(latency, false);
    }
    (closed_at, t)
}

#[test]
fn a_breaker_closes_on_a_dependency_slower_than_its_open_period() {
    let (open, latency, every) = (100 * MS, 150 * MS, 20 * MS);
    let (closed, t) = recovery(open, latency, every, Duration::from_secs(20), None);
    let closed = closed.expect("a dependency that answers every call closes its breaker");
    // One open period, one call's latency, and the calls' spacing on either side.
    let bound = open + latency + 3 * every;
    assert!(
        closed <= bound,
        "closed {closed:?} after the trip, not within {bound:?}"
    );
    let totals = t.breaker.totals();
    assert!(totals.probes_taken_over >= 1, "{totals:?}");
    assert_eq!(
        totals.dropped, 0,
        "no probe's verdict was thrown away: {totals:?}"
    );
}

#[test]
fn a_breaker_closes_whatever_the_latency_relative_to_the_open_period() {
    for (open_ms, latency_ms, every_ms) in [(100, 1_500, 20), (1_000, 1_500, 100), (100, 10_000, 7)]
    {
        let (open, latency, every) = (open_ms * MS, latency_ms * MS, every_ms * MS);
        let (closed, t) = recovery(open, latency, every, Duration::from_secs(60), None);
        let closed = closed.unwrap_or_else(|| {
            panic!(
                "open {open:?}, calls of {latency:?} every {every:?}: never closed, {:?}",
                t.breaker.totals()
            )
        });
        let bound = open + latency + 3 * every;
        assert!(
            closed <= bound,
            "open {open:?}, calls of {latency:?}: closed after {closed:?}, not within {bound:?}"
        );
        // Load stays bounded: at most one probe per open period while the first is out.
        let probes = t.breaker.totals().admitted - 1;
        let most = 1 + (latency.as_nanos() / open.as_nanos()) as u64 + 1;
        assert!(probes <= most, "{probes} probes, at most {most} expected");
    }
}

#[test]
fn gobreakers_wait_and_an_explicit_probe_timeout_keep_their_meaning() {
    let (open, latency, every) = (100 * MS, 150 * MS, 20 * MS);
    // gobreaker's wait: the one probe is waited for.
    let (closed, t) = recovery(
        open,
        latency,
        every,
        Duration::from_secs(5),
        Some(Duration::MAX),
    );
    assert!(
        closed.is_some_and(|c| c <= open + latency + 2 * every),
        "{closed:?}"
    );
    assert_eq!(t.breaker.totals().probes_taken_over, 0);
    // A probe timeout given says a probe out that long is lost: with the open period's, a
    // dependency slower than it is written off at every probe (the user asked for it).
    let (closed, t) = recovery(open, latency, every, Duration::from_secs(5), Some(open));
    assert_eq!(closed, None);
    let totals = t.breaker.totals();
    assert!(totals.dropped > 10 && totals.successes == 0, "{totals:?}");
}

/// A relieved probe that comes back excluded does not give its slot back a second time, and
/// one that fails reopens the breaker as any probe's failure does.
#[test]
fn a_relieved_probes_verdict_counts_once() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(Duration::from_secs(10))
        .clock(clock.clone())
        .build();
    breaker.trip_for(Duration::ZERO);
    clock.advance(Duration::from_secs(10) + Duration::from_nanos(1));
    let first = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(11));
    let second = breaker
        .allow()
        .expect("the first probe is relieved of its slot");
    assert_eq!(breaker.totals().probes_taken_over, 1);
    first.exclude();
    assert_eq!(
        breaker.allow().unwrap_err(),
        Rejected::TooManyRequests,
        "the second probe holds the only slot"
    );
    second.exclude();
    let third = breaker.allow().expect("its exclusion gave the slot back");
    clock.advance(Duration::from_secs(11));
    let fourth = breaker.allow().expect("relieved again");
    third.failure();
    assert_eq!(
        breaker.state(),
        State::Open,
        "a relieved probe's failure reopens"
    );
    fourth.success();
    let t = breaker.totals();
    assert_eq!(
        t.dropped, 1,
        "the trial ended: the last probe is stale: {t:?}"
    );
    assert_eq!(
        t.admitted,
        t.successes + t.failures + t.exclusions + t.abandoned + t.dropped,
        "{t:?}"
    );
}

/// While a trial runs with every probe out, a snapshot says when a call is admitted again
/// at the latest (the takeover); with gobreaker's wait, the open period as a hint.
#[test]
fn a_full_half_open_breaker_says_when_to_come_back() {
    let clock = ManualClock::new();
    let open = Duration::from_secs(10);
    let breaker = Breaker::builder()
        .timeout(open)
        .clock(clock.clone())
        .build();
    breaker.trip_for(Duration::ZERO);
    clock.advance(open + Duration::from_nanos(1));
    assert_eq!(
        breaker.snapshot().retry_after,
        None,
        "a probe is admitted now"
    );
    let _probe = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(4));
    assert_eq!(breaker.snapshot().retry_after, Some(Duration::from_secs(6)));
    let gobreaker = Breaker::builder()
        .timeout(open)
        .probe_timeout(Duration::MAX)
        .clock(clock.clone())
        .build();
    gobreaker.trip_for(Duration::ZERO);
    clock.advance(open + Duration::from_nanos(1));
    let _probe = gobreaker.allow().unwrap();
    assert_eq!(gobreaker.snapshot().retry_after, Some(open));
}

/// A pool with its defaults (100 ms open periods), three replicas answering every call in
/// 150 ms, all tripped by a blip: back within about an open period and a call, and a pick
/// that finds every replica out is always told when to come back.
#[test]
fn a_pool_of_slow_replicas_recovers_from_a_blip() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &u32| Breaker::builder()).clock(clock.clone());
    pool.set([1, 2, 3]);
    let latency = 150 * MS;
    let every = 2 * MS;
    let mut out: VecDeque<(Duration, lazybreaker::pool::Pick<u32>)> = VecDeque::new();
    let mut now = Duration::ZERO;
    // Where the clock stands.
    let mut at = Duration::ZERO;
    // The blip: every replica fails until it trips (the default: 6 in a row).
    for key in [1, 2, 3] {
        let breaker = pool.breaker(&key).unwrap();
        while breaker.state() == State::Closed {
            breaker.allow().unwrap().failure();
        }
    }
    let (mut no_endpoint, mut without_time, mut picks) = (0, 0, 0);
    let mut recovered_at = None;
    while now < Duration::from_secs(20) {
        now += every;
        while out.front().is_some_and(|(due, _)| *due <= now) {
            let (due, pick) = out.pop_front().unwrap();
            clock.advance(due - at);
            at = due;
            pick.success();
        }
        clock.advance(now - at);
        at = now;
        let all_closed = [1, 2, 3]
            .iter()
            .all(|k| pool.breaker(k).unwrap().state() == State::Closed);
        if all_closed {
            recovered_at = Some(now);
            break;
        }
        picks += 1;
        match pool.pick() {
            Ok(pick) => out.push_back((now + latency, pick)),
            Err(Rejected::NoEndpoint { retry_after }) => {
                no_endpoint += 1;
                without_time += u32::from(retry_after.is_none());
            }
            Err(other) => panic!("{other}"),
        }
    }
    let recovered_at = recovered_at.expect("the pool recovers");
    let bound = 100 * MS + latency + 20 * every;
    assert!(
        recovered_at <= bound,
        "recovered at {recovered_at:?}, not within {bound:?}"
    );
    assert_eq!(
        without_time, 0,
        "{no_endpoint} of {picks} picks found no endpoint"
    );
}
