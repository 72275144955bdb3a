//! The fleet at the edges, on the in-process `MemoryStore` and a store answering garbage (no
//! server, time from one `ManualClock`): a record open for a decade followed and written
//! back for at most the maximum open period, records beyond what the protocol represents
//! degrading to local decisions instead of panicking or wrapping, a panicking classifier, a
//! failing store's error and its whole source chain. (The fleet's part of the third
//! reliability round, each test named after its item; the Redis ones are in `tests/fleet.rs`.)

use lazybreaker_test_support::run;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::Observer;
use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_fleet::{
    Decision, FleetEvent, FleetStore, Lease, MemoryStore, SharedBreaker, SharedRecord, StoreError,
    Vote,
};

const SYNC: Duration = Duration::from_millis(100);
const OPEN: Duration = Duration::from_secs(10);
const MAX_OPEN: Duration = Duration::from_secs(300);
const DECADE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Counts the `Degraded` events.
#[derive(Default, Clone)]
struct Degradations(Arc<AtomicU32>);

impl Observer for Degradations {
    fn on_fleet(&self, event: &FleetEvent<'_>) {
        if let FleetEvent::Degraded { .. } = event {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Degradations {
    fn count(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

type Member<S> = SharedBreaker<S, ConsecutiveFailures, Degradations>;

/// An instance of `payments` on `store` and `clock`: trips at the first failure, open for
/// [`OPEN`], at most [`MAX_OPEN`] however it is opened, one probe.
fn member<S: FleetStore>(store: S, clock: &ManualClock, seen: &Degradations) -> Member<S> {
    SharedBreaker::builder(store)
        .sync_interval(SYNC)
        .build(
            Breaker::builder()
                .name("payments")
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(OPEN)
                .max_open_duration(MAX_OPEN)
                .clock(clock.clone())
                .observer(seen.clone()),
        )
        .unwrap()
}

async fn ok<S: FleetStore>(m: &Member<S>) -> Result<(), Error<&'static str>> {
    m.execute(|| async { Ok::<_, &str>(()) }).await
}

async fn fail<S: FleetStore>(m: &Member<S>) -> Result<(), Error<&'static str>> {
    m.execute(|| async { Err::<(), _>("down") }).await
}

/// How long the record stays open, as the store reads it now.
async fn record_open_for(store: &MemoryStore, clock: &ManualClock) -> Option<Duration> {
    store
        .read("payments", clock.now())
        .await
        .unwrap()
        .open_for()
}

// ---------------------------------------------------------------------------------------
// Item 2: open periods are bounded, in the fleet too.

#[test]
fn item_2_a_record_opened_for_a_decade_elsewhere_is_followed_for_at_most_the_maximum() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    run(async {
        // Another client opens the record for ten years.
        let far = store.publish(
            "payments",
            1,
            Decision::Open(DECADE),
            Vote::NONE,
            clock.now(),
        );
        assert!(far.await.unwrap().written);
        let m = member(store.clone(), &clock, &seen);
        m.sync().await;
        match ok(&m).await {
            Err(Error::Rejected(Rejected::Open { retry_after })) => {
                // (The breaker's open period is inclusive: a nanosecond more is its own.)
                let most = MAX_OPEN + Duration::from_millis(1);
                assert!(retry_after <= most, "adopted for {retry_after:?}");
            }
            other => panic!("not adopted as open: {other:?}"),
        }
        // Once the local maximum has passed, the fleet probes (the long record is cut to a
        // half-open one) instead of following the decade again: the probe closes it.
        clock.advance(MAX_OPEN + SYNC);
        ok(&m).await.expect("the fleet probes after the maximum");
        assert_eq!(m.state(), State::Closed);
        assert_eq!(record_open_for(&store, &clock).await, None);
        assert_eq!(seen.count(), 0);
    });
}

#[test]
fn item_2_a_local_trip_for_a_decade_is_published_and_written_back_bounded() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    run(async {
        let m = member(store.clone(), &clock, &seen);
        ok(&m).await.unwrap();
        m.breaker().trip_for(DECADE);
        assert!(ok(&m).await.is_err(), "open");
        let published = record_open_for(&store, &clock)
            .await
            .expect("published open");
        assert!(published <= MAX_OPEN, "published for {published:?}");
        // The record vanishes: what is written back from the local state is bounded too.
        store.remove("payments");
        clock.advance(SYNC);
        assert!(ok(&m).await.is_err(), "still open");
        assert_eq!(m.stats().recreated, 1);
        let written_back = record_open_for(&store, &clock)
            .await
            .expect("written back open");
        assert!(
            written_back <= MAX_OPEN,
            "written back for {written_back:?}"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Item 3: records read from the store are validated.

/// A store that answers `generation` and `open_until_us` to every read, and otherwise is
/// a `MemoryStore`: a record written by hand, as `HSET` by another client would.
#[derive(Clone)]
struct Garbage {
    inner: MemoryStore,
    generation: u64,
    open_until_us: Option<u64>,
}

impl FleetStore for Garbage {
    async fn read(&self, breaker: &str, now: Duration) -> Result<SharedRecord, StoreError> {
        let real = self.inner.read(breaker, now).await?;
        Ok(SharedRecord::new(
            self.generation,
            self.open_until_us,
            real.server_now_us,
            false,
        ))
    }

    async fn publish(
        &self,
        breaker: &str,
        generation: u64,
        decision: Decision,
        vote: Vote<'_>,
        now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        self.inner
            .publish(breaker, generation, decision, vote, now)
            .await
    }

    async fn lease_probe(
        &self,
        breaker: &str,
        generation: u64,
        max_requests: u64,
        lease_for: Duration,
        holder: &str,
        now: Duration,
    ) -> Result<Lease, StoreError> {
        let lease =
            self.inner
                .lease_probe(breaker, generation, max_requests, lease_for, holder, now);
        lease.await
    }

    async fn finish_probe(
        &self,
        breaker: &str,
        generation: u64,
        holder: &str,
        succeeded: bool,
        max_requests: u64,
        now: Duration,
    ) -> Result<SharedRecord, StoreError> {
        let finish =
            self.inner
                .finish_probe(breaker, generation, holder, succeeded, max_requests, now);
        finish.await
    }
}

/// A member on a store answering the record given, which then trips: it must degrade
/// (once, counted), decide locally, and never panic.
fn degrades_on(generation: u64, open_until_us: Option<u64>) {
    let (clock, seen) = (ManualClock::new(), Degradations::default());
    let store = Garbage {
        inner: MemoryStore::new(),
        generation,
        open_until_us,
    };
    let m = member(store, &clock, &seen);
    run(ok(&m)).expect("decided locally: closed");
    let stats = m.stats();
    assert!(stats.degraded, "an invalid record degrades");
    assert_eq!((stats.store_errors, seen.count()), (1, 1));
    assert_eq!(stats.generation, 0, "not followed");
    // A local trip: no overflow, no panic out of `execute`.
    let tripped = catch_unwind(AssertUnwindSafe(|| run(fail(&m))));
    assert!(tripped.expect("no panic").is_err());
    assert_eq!(m.state(), State::Open);
    clock.advance(SYNC);
    assert!(run(ok(&m)).is_err(), "open locally");
    assert_eq!(seen.count(), 1, "reported once");
}

#[test]
fn item_3_a_generation_read_as_u64_max_degrades_and_a_trip_does_not_panic() {
    degrades_on(u64::MAX, None);
}

#[test]
fn item_3_a_generation_above_2_53_degrades() {
    degrades_on(SharedRecord::MAX_GENERATION + 1, None);
}

#[test]
fn item_3_a_deadline_beyond_the_representable_range_degrades() {
    degrades_on(1, Some(u64::MAX));
}

#[test]
fn item_3_the_memory_store_refuses_generations_above_2_53() {
    let store = MemoryStore::new();
    run(async {
        let over = SharedRecord::MAX_GENERATION + 1;
        let closed = Decision::Closed;
        let refused = store.publish("payments", over, closed, Vote::NONE, Duration::ZERO);
        assert!(matches!(refused.await, Err(StoreError::Invalid(_))));
        let max = SharedRecord::MAX_GENERATION;
        let at_max = store.publish("payments", max, closed, Vote::NONE, Duration::ZERO);
        assert!(at_max.await.unwrap().written);
    });
}

#[test]
fn item_3_a_trip_at_the_last_generation_degrades_instead_of_wrapping() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    run(async {
        let max = SharedRecord::MAX_GENERATION;
        let last = store.publish("payments", max, Decision::Closed, Vote::NONE, clock.now());
        assert!(last.await.unwrap().written);
        let m = member(store.clone(), &clock, &seen);
        ok(&m).await.unwrap();
        assert_eq!(m.stats().generation, max);
        assert!(fail(&m).await.is_err());
        assert_eq!(m.state(), State::Open, "open locally");
        let stats = m.stats();
        assert!(stats.degraded, "the trip could not be shared: said so");
        assert_eq!((stats.store_errors, seen.count()), (1, 1));
        let record = store.read("payments", clock.now()).await.unwrap();
        assert_eq!((record.generation, record.open_until_us), (max, None));
    });
}

// ---------------------------------------------------------------------------------------
// Item 5: a panicking classifier counts as an exclusion, as in the local APIs.

/// A call through `m` whose classifier panics: the panic continues out of the call.
fn call_with_a_panicking_classifier<S: FleetStore>(m: &Member<S>) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        run(m.execute_classified(
            || async { Err::<(), _>("down") },
            |_: &Result<(), &str>| -> Outcome { panic!("classifier") },
        ))
    }));
    let payload = outcome.expect_err("the classifier's panic continues");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"classifier"));
}

#[test]
fn item_5_a_panicking_classifier_is_an_exclusion_in_closed() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    let m = member(store.clone(), &clock, &seen);
    run(ok(&m)).unwrap();
    call_with_a_panicking_classifier(&m);
    let counts = m.breaker().counts();
    assert_eq!((counts.total_failures, counts.total_exclusions), (0, 1));
    assert_eq!(m.state(), State::Closed);
    let record = run(store.read("payments", clock.now())).unwrap();
    assert_eq!((record.generation, record.open_until_us), (0, None));
}

#[test]
fn item_5_a_panicking_classifier_in_half_open_does_not_reopen_the_fleet() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    let (a, b) = (
        member(store.clone(), &clock, &seen),
        member(store.clone(), &clock, &seen),
    );
    run(async {
        ok(&a).await.unwrap();
        ok(&b).await.unwrap();
        assert!(fail(&a).await.is_err());
    });
    let tripped = run(store.read("payments", clock.now())).unwrap();
    assert_eq!(tripped.generation, 1);
    clock.advance(OPEN + SYNC);
    // A's probe: its classifier panics.
    call_with_a_panicking_classifier(&a);
    let after = run(store.read("payments", clock.now())).unwrap();
    assert_eq!(
        (after.generation, after.open_until_us),
        (1, tripped.open_until_us),
        "the fleet did not reopen"
    );
    assert_eq!(a.state(), State::HalfOpen);
    assert_eq!(a.breaker().counts().total_exclusions, 1);
    // The lease was given back: B's probe goes at once, and closes the fleet.
    run(async {
        b.sync().await;
        ok(&b).await.expect("the probe slot is free");
    });
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        run(store.read("payments", clock.now())).unwrap().generation,
        2
    );
}

// ---------------------------------------------------------------------------------------
// Item 11: a misconfigured store is checked at start-up.

#[test]
fn item_11_check_store_returns_the_error_of_a_failing_store_and_degrades() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    let m = member(store.clone(), &clock, &seen);
    run(async {
        store.set_failing(true);
        let checked = m.check_store().await;
        assert!(
            matches!(checked, Err(StoreError::Backend(_))),
            "{checked:?}"
        );
        let stats = m.stats();
        assert!(stats.degraded);
        assert_eq!(
            (stats.store_errors, stats.round_trips, seen.count()),
            (1, 1, 1)
        );
        store.set_failing(false);
        // Another instance tripped meanwhile: a successful check syncs the view.
        let open = Decision::Open(OPEN);
        assert!(
            store
                .publish("payments", 1, open, Vote::NONE, clock.now())
                .await
                .unwrap()
                .written
        );
        m.check_store().await.expect("the store answers");
        let stats = m.stats();
        assert!(!stats.degraded);
        assert_eq!((stats.generation, stats.adopted), (1, 1));
        assert_eq!(m.state(), State::Open);
    });
}

// ---------------------------------------------------------------------------------------
// "Reliability, fourth round", E4: a store error's text holds its cause.

/// An error whose text leaves its cause to `source`, as `tokio_postgres`'s "db error" does.
#[derive(Debug)]
struct Terse(
    &'static str,
    Option<Box<dyn std::error::Error + Send + Sync>>,
);

impl std::fmt::Display for Terse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Terse {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.1.as_deref().map(|e| e as _)
    }
}

#[test]
fn e4_a_backend_errors_text_holds_its_whole_source_chain_once() {
    let denied = Terse("ERROR: permission denied for table lazybreaker_fleet", None);
    let error = StoreError::backend(Terse("db error", Some(Box::new(denied))));
    assert_eq!(
        error.to_string(),
        "the breaker store failed: db error: ERROR: permission denied for table lazybreaker_fleet"
    );
    // The cause is in the text, so not behind `source` as well: a reporter that walks the
    // chain says it once.
    assert!(std::error::Error::source(&error).is_none());
    // An error that says its cause already (as Redis's do) is not repeated; one deeper in
    // the chain that it does not say is added.
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    let wrapped = Terse("connecting: connection refused", Some(Box::new(refused)));
    let error = StoreError::backend(Terse("no connection", Some(Box::new(wrapped))));
    assert_eq!(
        error.to_string(),
        "the breaker store failed: no connection: connecting: connection refused"
    );
    // The event's text, which the tracing observer writes, holds it too.
    let event = FleetEvent::Degraded {
        breaker: "payments",
        error: &error,
    };
    assert!(event.to_string().contains("connection refused"), "{event}");
    assert!(
        format!("{event:?}").contains("connection refused"),
        "{event:?}"
    );
}

// ---------------------------------------------------------------------------------------
// "Reliability, fourth round", I3: a trip for ever is shared (the real stores' runs are in
// tests/fleet.rs).

#[test]
fn i3_a_trip_for_ever_is_published_and_written_back_for_ever() {
    let (store, clock, seen) = (
        MemoryStore::new(),
        ManualClock::new(),
        Degradations::default(),
    );
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    run(async {
        let m = SharedBreaker::builder(store.clone())
            .sync_interval(SYNC)
            .build(
                Breaker::builder()
                    .name("payments")
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .max_open_duration(Duration::MAX)
                    .clock(clock.clone())
                    .observer(seen.clone()),
            )
            .unwrap();
        ok(&m).await.unwrap();
        m.breaker().trip_for(Duration::MAX);
        assert!(ok(&m).await.is_err(), "open");
        assert_eq!(m.stats().published, 1, "{:?}", m.stats());
        let published = record_open_for(&store, &clock)
            .await
            .expect("published open");
        assert!(published > century, "published for {published:?}");
        // The record vanishes: it is written back from the local state, for ever too.
        store.remove("payments");
        clock.advance(SYNC);
        assert!(ok(&m).await.is_err(), "still open");
        assert_eq!(m.stats().recreated, 1);
        let written_back = record_open_for(&store, &clock)
            .await
            .expect("written back open");
        assert!(written_back > century, "written back for {written_back:?}");
        assert_eq!(seen.count(), 0, "no store error");
    });
}
