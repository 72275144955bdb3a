//! The shared breaker on the in-process `MemoryStore`, as users test their own code with it:
//! several `SharedBreaker`s on clones of one `MemoryStore::new()` and one `ManualClock`, no
//! server, no sleeping for time to pass (the store's time is the latest clock reading it was
//! given).

use lazybreaker_test_support::run;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use lazybreaker::observe::{Observer, Origin, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_fleet::{FleetEvent, FleetStore, MemoryStore, SharedBreaker};

const SYNC: Duration = Duration::from_millis(100);
const OPEN: Duration = Duration::from_secs(10);

/// What one instance's observer saw.
#[derive(Default)]
struct Seen {
    transitions: Mutex<Vec<(State, State, Origin)>>,
    events: Mutex<Vec<&'static str>>,
}

impl Observer for Seen {
    fn on_transition(&self, t: &Transition<'_>) {
        self.transitions
            .lock()
            .unwrap()
            .push((t.from, t.to, t.origin));
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let kind = match event {
            FleetEvent::Degraded { .. } => "degraded",
            FleetEvent::Recovered { .. } => "recovered",
            FleetEvent::Recreated { .. } => "recreated",
            _ => "other",
        };
        self.events.lock().unwrap().push(kind);
    }
}

type Instance<O> = SharedBreaker<MemoryStore, ConsecutiveFailures, O>;

/// An instance of breaker `name` on `store` and `clock`: trips at the first failure, open
/// for [`OPEN`], `max_requests` probes, observed by `observer`.
fn member<O: Observer>(
    store: &MemoryStore,
    clock: &ManualClock,
    max_requests: u32,
    observer: O,
) -> Instance<O> {
    SharedBreaker::builder(store.clone())
        .sync_interval(SYNC)
        .build(
            Breaker::builder()
                .name("payments")
                .policy(ConsecutiveFailures::new(1).unwrap())
                .max_requests(max_requests)
                .timeout(OPEN)
                .clock(clock.clone())
                .observer(observer),
        )
        .unwrap()
}

async fn ok<O: Observer>(m: &Instance<O>) -> Result<(), Error<&'static str>> {
    m.execute(|| async { Ok(()) }).await
}

async fn fail<O: Observer>(m: &Instance<O>) -> Result<(), Error<&'static str>> {
    m.execute(|| async { Err("down") }).await
}

fn is_open_rejection<E>(r: &Result<(), Error<E>>) -> bool {
    matches!(r, Err(Error::Rejected(Rejected::Open { .. })))
}

fn transitions(seen: &Seen) -> Vec<(State, State, Origin)> {
    seen.transitions.lock().unwrap().clone()
}

#[test]
fn a_trip_on_one_is_adopted_by_the_others_within_the_sync_interval() {
    let (store, clock) = (MemoryStore::new(), ManualClock::new());
    let seen: [Arc<Seen>; 3] = Default::default();
    let [a, b, c] = [0, 1, 2].map(|i| member(&store, &clock, 1, Arc::clone(&seen[i])));
    run(async {
        for m in [&a, &b, &c] {
            ok(m).await.unwrap();
        }
        assert!(matches!(fail(&a).await, Err(Error::Inner("down"))));
        assert_eq!(a.stats().published, 1);
        // Within the sync interval the others still send; after it, they stop.
        clock.advance(SYNC / 2);
        ok(&b).await.unwrap();
        clock.advance(SYNC / 2);
        for (m, seen) in [(&b, &seen[1]), (&c, &seen[2])] {
            assert!(is_open_rejection(&ok(m).await));
            assert_eq!(
                transitions(seen),
                [(State::Closed, State::Open, Origin::Adopted)]
            );
            let stats = m.stats();
            assert_eq!((stats.adopted, stats.generation), (1, 1));
        }
        assert_eq!(
            transitions(&seen[0]),
            [(State::Closed, State::Open, Origin::Breaker)]
        );
    });
}

#[test]
fn probe_leases_cap_the_fleet_at_max_requests_and_a_success_closes_it() {
    let (store, clock) = (MemoryStore::new(), ManualClock::new());
    let max_requests = 2;
    let members = [0, 1, 2].map(|_| member(&store, &clock, max_requests, ()));
    run(async {
        for m in &members {
            ok(m).await.unwrap();
        }
        let _ = fail(&members[0]).await;
        clock.advance(SYNC);
        for m in &members[1..] {
            assert!(is_open_rejection(&ok(m).await));
        }
        // The open period passes on the one clock, so in the store too.
        clock.advance(OPEN + SYNC);
        // Two probes per instance at once, each held until released.
        let in_flight = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        let released = AtomicBool::new(false);
        let probe = |m| held_probe(m, &in_flight, &most, &released);
        let release = async {
            while in_flight.load(Ordering::SeqCst) < max_requests {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            released.store(true, Ordering::SeqCst);
        };
        let (r, ()) = tokio::join!(
            async {
                tokio::join!(
                    probe(&members[0]),
                    probe(&members[0]),
                    probe(&members[1]),
                    probe(&members[1]),
                    probe(&members[2]),
                    probe(&members[2])
                )
            },
            release
        );
        let results = [r.0, r.1, r.2, r.3, r.4, r.5];
        assert_eq!(most.load(Ordering::SeqCst), max_requests);
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            2,
            "{results:?}"
        );
        assert!(results
            .iter()
            .filter(|r| r.is_err())
            .all(|r| matches!(r, Err(Error::Rejected(Rejected::TooManyRequests)))));
        let fleet_rejections: u64 = members.iter().map(|m| m.stats().fleet_rejections).sum();
        assert!(
            fleet_rejections >= 1,
            "the fleet said no, not only the local breakers"
        );
        // Both probes succeeded: the fleet is closed at generation 2, and everyone follows.
        let record = store.read("payments", clock.now()).await.unwrap();
        assert_eq!((record.generation, record.open_until_us), (2, None));
        clock.advance(SYNC);
        for m in &members {
            ok(m).await.unwrap();
            assert_eq!((m.state(), m.stats().generation), (State::Closed, 2));
        }
    });
}

/// A probe on `m` that holds its call until `released`, counting the calls in flight.
async fn held_probe(
    m: &Instance<()>,
    in_flight: &AtomicU32,
    most: &AtomicU32,
    released: &AtomicBool,
) -> Result<(), Error<()>> {
    m.execute(|| async {
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        while !released.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    })
    .await
}

#[test]
fn a_failing_store_degrades_to_local_decisions_and_recovers() {
    let (store, clock) = (MemoryStore::new(), ManualClock::new());
    let seen: [Arc<Seen>; 2] = Default::default();
    let [a, b] = [0, 1].map(|i| member(&store, &clock, 1, Arc::clone(&seen[i])));
    run(async {
        ok(&a).await.unwrap();
        ok(&b).await.unwrap();
        store.set_failing(true);
        for _ in 0..5 {
            clock.advance(SYNC);
            ok(&a).await.unwrap();
            ok(&b).await.unwrap();
        }
        for (m, seen) in [(&a, &seen[0]), (&b, &seen[1])] {
            let stats = m.stats();
            assert!(stats.degraded && stats.store_errors >= 1, "{stats:?}");
            assert_eq!(*seen.events.lock().unwrap(), ["degraded"], "told once");
        }
        // A still protects the dependency on its own; B does not hear of it.
        let _ = fail(&a).await;
        assert!(is_open_rejection(&ok(&a).await));
        clock.advance(SYNC);
        ok(&b).await.unwrap();
        // The store answers again: A publishes its trip, B follows.
        store.set_failing(false);
        clock.advance(SYNC);
        assert!(is_open_rejection(&ok(&a).await));
        clock.advance(SYNC);
        assert!(is_open_rejection(&ok(&b).await));
        for (m, seen) in [(&a, &seen[0]), (&b, &seen[1])] {
            let stats = m.stats();
            assert!(!stats.degraded, "{stats:?}");
            assert_eq!(stats.generation, 1);
            assert_eq!(*seen.events.lock().unwrap(), ["degraded", "recovered"]);
        }
    });
}

#[test]
fn a_removed_record_is_recreated_from_the_local_state() {
    let (store, clock) = (MemoryStore::new(), ManualClock::new());
    let seen = Arc::new(Seen::default());
    let a = member(&store, &clock, 1, Arc::clone(&seen));
    let b = member(&store, &clock, 1, ());
    run(async {
        ok(&a).await.unwrap();
        ok(&b).await.unwrap();
        let _ = fail(&a).await;
        store.remove("payments");
        clock.advance(SYNC);
        assert!(is_open_rejection(&ok(&a).await));
        assert_eq!(a.stats().recreated, 1);
        assert_eq!(*seen.events.lock().unwrap(), ["recreated"]);
        let record = store.read("payments", clock.now()).await.unwrap();
        assert_eq!(record.generation, 1);
        assert!(record.open_for().is_some(), "open again, as A is");
        assert!(is_open_rejection(&ok(&b).await));
        // clear() too: everything vanishes.
        store.clear();
        let fresh = store.read("payments", clock.now()).await.unwrap();
        assert_eq!((fresh.generation, fresh.open_until_us), (0, None));
    });
}

/// An observer that holds up the delivery of the first adopted trip until released: a slow
/// observer on another thread, which delays what the shared breaker's own link hears.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, bool)>, // (entered, released)
    changed: Condvar,
}

impl Gate {
    fn wait_entered(&self) {
        let guard = self.state.lock().unwrap();
        let (guard, timeout) = self
            .changed
            .wait_timeout_while(guard, Duration::from_secs(10), |(entered, _)| !*entered)
            .unwrap();
        assert!(
            !timeout.timed_out() && guard.0,
            "the delivery reached the gate"
        );
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

impl Observer for Gate {
    fn on_transition(&self, t: &Transition<'_>) {
        if t.origin != Origin::Adopted || t.to != State::Open {
            return;
        }
        let mut guard = self.state.lock().unwrap();
        if guard.0 {
            return;
        }
        guard.0 = true;
        self.changed.notify_all();
        let _ = self
            .changed
            .wait_timeout_while(guard, Duration::from_secs(10), |(_, released)| !*released)
            .unwrap();
    }
}

/// Walk (c)'s risk: whether an admitted call is a half-open probe was decided by what the
/// link had been told, so a delivery held up by a slow observer let a probe skip the
/// fleet-wide lease. The admission decides now: the probe leases its slot, and its success
/// closes the fleet's record.
#[test]
fn item_10_a_probe_leases_its_slot_while_a_slow_observer_holds_up_delivery() {
    let (store, clock) = (MemoryStore::new(), ManualClock::new());
    let gate = Arc::new(Gate::default());
    let a = member(&store, &clock, 1, Arc::clone(&gate));
    let b = member(&store, &clock, 1, ());
    run(async {
        ok(&a).await.unwrap();
        ok(&b).await.unwrap();
        let _ = fail(&b).await; // B trips: generation 1, open for OPEN
    });
    clock.advance(SYNC);
    std::thread::scope(|s| {
        // A adopts the trip on another thread, whose delivery stops in the gate: A's link
        // does not hear of the open breaker.
        let adopting = s.spawn(|| run(a.sync()));
        gate.wait_entered();
        assert_eq!(a.stats().generation, 1);
        // The open period passes: A's next call is a half-open probe.
        clock.advance(OPEN + SYNC);
        let before = a.stats().round_trips;
        assert_eq!(run(ok(&a)), Ok(()));
        let leased_and_finished = a.stats().round_trips - before;
        gate.release();
        adopting.join().unwrap();
        assert_eq!(leased_and_finished, 2, "a lease, and the probe's end");
    });
    let record = run(store.read("payments", clock.now())).unwrap();
    assert_eq!(
        (record.generation, record.open_until_us),
        (2, None),
        "the probe's success closed the fleet"
    );
}

/// The store's timeline is the latest clock reading it was given: one shared manual clock
/// is all a test needs.
#[test]
fn the_store_follows_the_latest_clock_reading() {
    use lazybreaker_fleet::{Decision, Lease, Vote};
    let store = MemoryStore::new();
    run(async {
        let t0 = Duration::from_secs(100);
        let open = Decision::Open(Duration::from_secs(30));
        let r = store.publish("s", 1, open, Vote::NONE, t0).await.unwrap();
        assert_eq!(r.open_for(), Some(Duration::from_secs(30)));
        // An older reading does not move the store back.
        let r = store.read("s", Duration::ZERO).await.unwrap();
        assert_eq!(r.open_for(), Some(Duration::from_secs(30)));
        let lease = Duration::from_secs(5);
        let early = store.lease_probe("s", 1, 1, lease, "p", t0).await.unwrap();
        assert_eq!(early, Lease::Stale, "still open in the store's time");
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            store
                .lease_probe("s", 1, 1, lease, "p", later)
                .await
                .unwrap(),
            Lease::Taken
        );
        assert_eq!(
            store
                .lease_probe("s", 1, 1, lease, "q", later)
                .await
                .unwrap(),
            Lease::Full
        );
        // The holder died: its lease expires.
        let after = later + lease + Duration::from_millis(1);
        assert_eq!(
            store
                .lease_probe("s", 1, 1, lease, "q", after)
                .await
                .unwrap(),
            Lease::Taken
        );
        // A vote short of its quorum leaves the record; the second opens it.
        let trip = Decision::Open(Duration::from_secs(1));
        let window = Duration::from_secs(60);
        let one = store
            .publish("v", 1, trip, Vote::new(2, window, "a"), after)
            .await
            .unwrap();
        assert_eq!((one.generation, one.written), (0, false));
        let two = store
            .publish("v", 1, trip, Vote::new(2, window, "b"), after)
            .await
            .unwrap();
        assert_eq!((two.generation, two.written), (1, true));
    });
}

/// A classifier that asks for time (`Classify::open_for`, an HTTP `Retry-After`, say) opens
/// the shared breaker for that long, as it does a local one, and the fleet adopts it.
#[test]
fn a_classifier_that_asks_for_time_opens_the_shared_breaker_for_that_long() {
    use lazybreaker::classify::Classify;
    use lazybreaker::policy::Outcome;

    /// `Err(secs)`: come back in `secs` seconds.
    struct Busy;
    impl Classify<(), u64> for Busy {
        fn classify(&self, result: &Result<(), u64>) -> Outcome {
            if result.is_ok() {
                Outcome::Success
            } else {
                Outcome::Failure
            }
        }
        fn open_for(&self, result: &Result<(), u64>) -> Option<Duration> {
            result.as_ref().err().map(|secs| Duration::from_secs(*secs))
        }
    }

    run(async {
        let store = MemoryStore::new();
        let clock = ManualClock::new();
        // Two failures in a row would trip it: one that asks for time trips it at once.
        let build = || {
            SharedBreaker::builder(store.clone())
                .sync_interval(SYNC)
                .build(
                    Breaker::builder()
                        .name("payments")
                        .policy(ConsecutiveFailures::new(2).unwrap())
                        .timeout(OPEN)
                        .clock(clock.clone()),
                )
                .unwrap()
        };
        let (a, b) = (build(), build());
        let asked = a.execute_with(|| async { Err::<(), u64>(90) }, Busy).await;
        assert!(matches!(asked, Err(Error::Inner(90))));
        assert_eq!(a.state(), State::Open, "opened by the classifier's answer");

        // Past the breaker's own timeout, still open: for the 90 s asked.
        clock.advance(OPEN + Duration::from_secs(1));
        assert!(is_open_rejection(&ok(&a).await));
        // The other instance adopted the opening.
        clock.advance(SYNC * 2);
        assert!(is_open_rejection(&ok(&b).await));
        clock.advance(Duration::from_secs(90));
        assert_eq!(ok(&a).await, Ok(()), "the probe after the 90 s");
    });
}

/// A member in dry run is a shadow candidate beside enforcing members: it trips and
/// probes for itself, admitting every call, and writes nothing to the fleet, so no
/// enforcing member rejects a real call because of it.
#[test]
fn item_2_a_member_in_dry_run_enforces_nothing_through_the_fleet() {
    run(async {
        let store = MemoryStore::new();
        let clock = ManualClock::new();
        let build = |dry_run: bool| {
            SharedBreaker::builder(store.clone())
                .sync_interval(SYNC)
                .build(
                    Breaker::builder()
                        .name("payments")
                        .policy(ConsecutiveFailures::new(1).unwrap())
                        .timeout(OPEN)
                        .dry_run(dry_run)
                        .clock(clock.clone()),
                )
                .unwrap()
        };
        let (enforcing, shadow) = (build(false), build(true));
        assert_eq!(ok(&enforcing).await, Ok(()));
        for _ in 0..5 {
            // Admitted whatever it would decide: the calls' own errors come back.
            assert!(matches!(fail(&shadow).await, Err(Error::Inner("down"))));
        }
        assert_eq!(shadow.state(), State::Open, "the shadow tripped for itself");
        assert!(shadow.breaker().totals().would_reject >= 3);
        assert_eq!(shadow.stats().published, 0, "and told the fleet nothing");

        clock.advance(SYNC * 2);
        assert_eq!(
            ok(&enforcing).await,
            Ok(()),
            "the enforcing member still admits"
        );
        assert_eq!(enforcing.state(), State::Closed);
        assert_eq!(enforcing.stats().adopted, 0);

        // Its period over, the shadow probes for itself and closes, leasing nothing.
        clock.advance(OPEN + SYNC);
        assert_eq!(ok(&shadow).await, Ok(()));
        assert_eq!(shadow.state(), State::Closed);
        assert_eq!(shadow.stats().published, 0);

        // An enforcing member's own trip is still the fleet's, and the shadow follows it.
        assert!(matches!(fail(&enforcing).await, Err(Error::Inner("down"))));
        assert_eq!(enforcing.stats().published, 1);
        clock.advance(SYNC * 2);
        let _ = ok(&shadow).await; // admitted: a dry run admits every call
        assert_eq!(shadow.state(), State::Open, "the shadow follows the fleet");
    });
}
