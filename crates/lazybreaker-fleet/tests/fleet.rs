//! The shared breaker against a real `redis-server` and a real PostgreSQL server: several
//! instances in one process, each with its own breaker and its own `ManualClock`, sharing one
//! record. Each test starts its own server (see `redis_server` and `postgres_server`) and
//! stops it whatever happens. The store-agnostic tests run on `MemoryStore`, Redis and
//! PostgreSQL (`on_every_store!`); those that kill, restart or edit the store run on both
//! real servers (`on_real_stores!`).
//!
//! Local time is the instances' manual clocks; the shared deadlines are in the server's
//! time, so a test that needs an open period to pass in the server waits for it for real
//! (short and bounded).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lazybreaker::observe::{FleetEvent, Observer, Transition};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use lazybreaker_fleet::postgres::PostgresStore;
use lazybreaker_fleet::redis::{RedisStore, SharedBreaker};
use lazybreaker_fleet::{
    self as fleet, Decision, FleetStore, Lease, MemoryStore, StoreError, Vote,
};

mod postgres_server;
mod redis_server;
use postgres_server::PgServer;
use redis_server::{keys, run, store, Server};

const SYNC: Duration = Duration::from_millis(100);

/// The caller's clock reading, which the servers ignore (their own clocks govern).
const NOW: Duration = Duration::ZERO;

/// What one instance's observer saw: every transition (to, from, fleet) and fleet event.
#[derive(Default)]
struct Seen {
    transitions: Mutex<Vec<(State, State, bool)>>,
    events: Mutex<Vec<String>>,
}

impl Observer for Seen {
    fn on_transition(&self, t: &Transition<'_>) {
        self.transitions.lock().unwrap().push((
            t.from,
            t.to,
            t.origin == lazybreaker::observe::Origin::Adopted,
        ));
    }

    fn on_fleet(&self, event: &FleetEvent<'_>) {
        let kind = match event {
            FleetEvent::Degraded { .. } => "degraded",
            FleetEvent::Recovered { .. } => "recovered",
            FleetEvent::Recreated { .. } => "recreated",
            _ => "other",
        };
        self.events.lock().unwrap().push(kind.to_owned());
    }
}

/// Where the instances share their record: a real `redis-server`, or a `MemoryStore`. The
/// tests that do not depend on the store itself run on every one (see `on_every_store!`).
trait Backend {
    type Store: FleetStore;
    fn store(&self) -> Self::Store;
    /// Lets `span` pass in the store's time, beside the instances' clocks: a server's clock
    /// is real, so this waits for it (short and bounded); a `MemoryStore`'s time is the
    /// instances' clocks, so this does nothing.
    async fn let_pass(&self, span: Duration) {
        tokio::time::sleep(span).await;
    }
}

impl Backend for Server {
    type Store = RedisStore;
    fn store(&self) -> RedisStore {
        RedisStore::from(self.client()).with_timeout(Duration::from_millis(300))
    }
}

impl Backend for MemoryStore {
    type Store = MemoryStore;
    fn store(&self) -> MemoryStore {
        self.clone()
    }
    async fn let_pass(&self, _span: Duration) {}
}

impl Backend for PgServer {
    type Store = PostgresStore;
    fn store(&self) -> PostgresStore {
        PgServer::store(self)
    }
}

/// A real server a test can kill, bring back empty, and edit by hand as another client could.
trait Controlled: Backend {
    /// Kills the server (the test goes on without it).
    fn kill(&mut self);
    /// Brings it back on the same port, with nothing in it.
    fn restart_empty(&mut self);
    /// Sets breaker `name`'s generation (created if absent) to `value`, verbatim.
    async fn set_generation(&self, name: &str, value: &str);
    /// Removes breaker `name`'s record.
    async fn remove(&self, name: &str);
}

impl Controlled for Server {
    fn kill(&mut self) {
        self.stop();
    }
    fn restart_empty(&mut self) {
        *self = Server::on(self.port);
    }
    async fn set_generation(&self, name: &str, value: &str) {
        hset(self, name, "generation", value).await;
    }
    async fn remove(&self, _name: &str) {
        let mut con = self
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = redis::cmd("FLUSHALL").query_async(&mut con).await.unwrap();
    }
}

impl Controlled for PgServer {
    fn kill(&mut self) {
        self.stop();
    }
    fn restart_empty(&mut self) {
        PgServer::restart_empty(self);
    }
    async fn set_generation(&self, name: &str, value: &str) {
        // The schema is the store's: make it exist as a first operation would.
        let store = PgServer::store(self);
        let _ = store.read(name, Duration::ZERO).await;
        let client = self.client().await;
        client
            .execute(
                &format!(
                    "INSERT INTO lazybreaker_fleet (name, generation) VALUES ($1, {value}) \
                     ON CONFLICT (name) DO UPDATE SET generation = {value}"
                ),
                &[&name],
            )
            .await
            .unwrap();
    }
    async fn remove(&self, name: &str) {
        let client = self.client().await;
        client
            .execute("DELETE FROM lazybreaker_fleet WHERE name = $1", &[&name])
            .await
            .unwrap();
    }
}

/// A store on `server` for reading what the tests wrote.
async fn reader<B: Controlled>(server: &B) -> B::Store {
    server.store()
}

struct Member<S = RedisStore> {
    shared: fleet::SharedBreaker<S, ConsecutiveFailures, Arc<Seen>>,
    clock: ManualClock,
    seen: Arc<Seen>,
}

impl<S: FleetStore> Member<S> {
    fn transitions(&self) -> Vec<(State, State, bool)> {
        self.seen.transitions.lock().unwrap().clone()
    }

    fn events(&self) -> Vec<String> {
        self.seen.events.lock().unwrap().clone()
    }

    async fn ok(&self) -> Result<(), Error<&'static str>> {
        self.shared.execute(|| async { Ok(()) }).await
    }

    /// A healthy call after the sync interval has passed on this instance's clock: its view
    /// is stale, so this call refreshes it first.
    async fn ok_after_sync(&self) -> Result<(), Error<&'static str>> {
        self.clock.advance(SYNC);
        self.ok().await
    }

    async fn fail(&self) -> Result<(), Error<&'static str>> {
        self.shared.execute(|| async { Err("down") }).await
    }
}

/// An instance of breaker `name`: trips at the first failure, open for `open`, probes as
/// `max_requests` says.
fn member<B: Backend>(
    backend: &B,
    name: &str,
    open: Duration,
    max_requests: u32,
) -> Member<B::Store> {
    member_with(backend, name, open, max_requests, 1)
}

/// `N` instances of breaker `name` (as [`member`] makes them), each synced once by a
/// healthy call at its time zero.
async fn synced<const N: usize, B: Backend>(
    backend: &B,
    name: &str,
    open: Duration,
    max_requests: u32,
) -> [Member<B::Store>; N] {
    let members = std::array::from_fn(|_| member(backend, name, open, max_requests));
    for m in &members {
        m.ok().await.unwrap();
    }
    members
}

fn member_with<B: Backend>(
    backend: &B,
    name: &str,
    open: Duration,
    max_requests: u32,
    quorum: u32,
) -> Member<B::Store> {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let shared = fleet::SharedBreaker::builder(backend.store())
        .sync_interval(SYNC)
        .store_timeout(Duration::from_millis(300))
        .lease_for(Duration::from_secs(5))
        .quorum(quorum)
        .build(
            Breaker::builder()
                .name(name)
                .policy(ConsecutiveFailures::new(1).unwrap())
                .max_requests(max_requests)
                .timeout(open)
                .clock(clock.clone())
                .observer(Arc::clone(&seen)),
        )
        .unwrap();
    Member {
        shared,
        clock,
        seen,
    }
}

fn is_open_rejection<E>(r: &Result<(), Error<E>>) -> bool {
    matches!(r, Err(Error::Rejected(Rejected::Open { .. })))
}

async fn closed_calls_and_open_rejections_do_no_store_io_between_refreshes<B: Backend>(fleet: &B) {
    let a = member(fleet, "hot", Duration::from_secs(30), 1);
    a.ok().await.unwrap();
    assert_eq!(a.shared.stats().round_trips, 1, "the first call syncs");
    for _ in 0..1_000 {
        a.ok().await.unwrap();
    }
    assert_eq!(a.shared.stats().round_trips, 1, "closed: no store I/O");
    a.ok_after_sync().await.unwrap();
    assert_eq!(a.shared.stats().round_trips, 2, "stale: one refresh");
    // A trip: one round trip to publish it, then rejections cost nothing.
    assert!(matches!(a.fail().await, Err(Error::Inner("down"))));
    let stats = a.shared.stats();
    assert_eq!((stats.round_trips, stats.published), (3, 1));
    for _ in 0..1_000 {
        assert!(is_open_rejection(&a.ok().await));
    }
    assert_eq!(a.shared.stats().round_trips, 3, "open: no store I/O");
}

/// The store round trips of 10 000 calls, one a millisecond (10 s of the instance's clock),
/// with a 100 ms sync interval: one refresh per interval, and one more per decision.
#[test]
fn store_round_trips_per_10_000_calls() {
    let server = Server::start();
    run(async {
        // Closed all along: a refresh per interval, nothing else.
        let a = member(&server, "quiet", Duration::from_secs(1), 1);
        for _ in 0..10_000 {
            a.ok().await.unwrap();
            a.clock.advance(Duration::from_millis(1));
        }
        assert_eq!(a.shared.stats().round_trips, 100, "10 s / 100 ms");
        // One trip, an open second, one probe that closes it: plus the publication of the
        // trip, the probe's lease, and its end (which writes the recovery).
        let b = member(&server, "bumpy", Duration::from_secs(1), 1);
        for k in 0..10_000 {
            let _ = if k == 5_000 {
                b.fail().await
            } else {
                b.ok().await
            };
            if k == 5_000 {
                // The open second passes in the server's time too.
                tokio::time::sleep(Duration::from_millis(1_050)).await;
            }
            b.clock.advance(Duration::from_millis(1));
        }
        let stats = b.shared.stats();
        assert_eq!(stats.published, 2, "the trip and the recovery");
        assert_eq!(stats.round_trips, 100 + 3, "{stats:?}");
    });
}

async fn one_refresh_in_flight_while_the_other_calls_go_on<B: Backend>(fleet: &B) {
    let a = member(fleet, "flight", Duration::from_secs(30), 1);
    a.ok().await.unwrap();
    a.clock.advance(SYNC);
    let calls = AtomicU32::new(0);
    let call = || async {
        a.shared
            .execute(|| async {
                calls.fetch_add(1, Ordering::Relaxed);
                Ok::<_, ()>(())
            })
            .await
    };
    // Eight calls find the view stale at once: one refreshes, seven go on.
    let results = futures_join8(call).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(calls.load(Ordering::Relaxed), 8);
    assert_eq!(a.shared.stats().round_trips, 2, "one refresh for all eight");
}

/// Runs eight calls concurrently on this task.
async fn futures_join8<F, Fut, T>(call: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (a, b, c, d, e, f, g, h) = tokio::join!(
        call(),
        call(),
        call(),
        call(),
        call(),
        call(),
        call(),
        call()
    );
    vec![a, b, c, d, e, f, g, h]
}

async fn a_trip_is_seen_by_the_others_within_the_sync_interval_and_delivered_as_from_the_fleet<
    B: Backend,
>(
    fleet: &B,
) {
    let open = Duration::from_secs(30);
    let [a, b, c] = synced(fleet, "payments", open, 1).await;
    assert!(matches!(a.fail().await, Err(Error::Inner("down"))));
    assert_eq!(a.shared.state(), State::Open);
    assert_eq!(a.transitions(), [(State::Closed, State::Open, false)]);
    // Within the sync interval B and C still use their cached view...
    b.clock.advance(SYNC / 2);
    b.ok().await.unwrap();
    // ...and their first call after it stops sending.
    for m in [&b, &c] {
        m.clock.advance(SYNC);
        let sent = AtomicU32::new(0);
        let r = m
            .shared
            .execute(|| async {
                sent.fetch_add(1, Ordering::Relaxed);
                Ok::<_, ()>(())
            })
            .await;
        assert!(is_open_rejection(&r), "{r:?}");
        assert_eq!(sent.load(Ordering::Relaxed), 0);
        assert_eq!(
            m.transitions(),
            [(State::Closed, State::Open, true)],
            "adopted, marked as from the fleet"
        );
        assert_eq!(m.shared.stats().adopted, 1);
    }
    // Everyone follows one record: generation 1.
    for m in [&a, &b, &c] {
        assert_eq!(m.shared.stats().generation, 1);
    }
}

async fn a_second_trip_at_the_same_generation_adopts_the_first<B: Backend>(fleet: &B) {
    let (a, b) = (
        member(fleet, "race", Duration::from_secs(30), 1),
        member(fleet, "race", Duration::from_secs(5), 1),
    );
    a.ok().await.unwrap();
    b.ok().await.unwrap();
    let _ = a.fail().await;
    let _ = b.fail().await; // tripped locally at the same generation, for 5 s
    let (sa, sb) = (a.shared.stats(), b.shared.stats());
    assert_eq!((sa.published, sb.published, sb.adopted), (1, 0, 1));
    assert_eq!((sa.generation, sb.generation), (1, 1));
    // B follows A's 30 s deadline, not its own 5 s.
    let Err(Error::Rejected(Rejected::Open { retry_after })) = b.ok().await else {
        panic!("open")
    };
    assert!(retry_after > Duration::from_secs(25), "{retry_after:?}");
}

#[test]
fn deadlines_are_in_server_time_so_skewed_clocks_agree() {
    let server = Server::start();
    run(async {
        let (a, b) = (
            member(&server, "skew", Duration::from_secs(30), 1),
            member(&server, "skew", Duration::from_secs(30), 1),
        );
        // B's clock reads 1000 s more than A's: another host, another epoch.
        b.clock.advance(Duration::from_secs(1_000));
        a.ok().await.unwrap();
        b.ok().await.unwrap();
        let _ = a.fail().await;
        let Err(Error::Rejected(Rejected::Open { retry_after })) = b.ok_after_sync().await else {
            panic!("open")
        };
        assert!(
            retry_after <= Duration::from_secs(30) && retry_after > Duration::from_secs(25),
            "{retry_after:?}"
        );
        // B goes half-open when the fleet's period ends on B's own clock.
        b.clock.advance(Duration::from_secs(31));
        assert_eq!(b.shared.state(), State::HalfOpen);
    });
}

#[test]
fn half_open_probes_are_leased_fleet_wide_and_their_result_closes_the_fleet() {
    let server = Server::start();
    run(async {
        let open = Duration::from_millis(300);
        let max_requests = 2;
        let members: [Member; 3] = synced(&server, "search", open, max_requests).await;
        let _ = members[0].fail().await;
        for m in &members[1..] {
            assert!(is_open_rejection(&m.ok_after_sync().await));
        }
        // The open period passes, in the server's time and on every clock.
        tokio::time::sleep(open + Duration::from_millis(50)).await;
        for m in &members {
            m.clock.advance(open + Duration::from_millis(50));
        }
        // Every instance tries two probes at once (six in all), each held until released.
        let in_flight = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        // A gate that stays open once opened: a probe admitted late runs through (and fails
        // the count below) instead of waiting for a wake-up it missed.
        let released = AtomicBool::new(false);
        async fn held_probe(
            m: &Member,
            in_flight: &AtomicU32,
            most: &AtomicU32,
            released: &AtomicBool,
        ) -> Result<(), Error<()>> {
            m.shared
                .execute(|| async {
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
        let probe = |m| held_probe(m, &in_flight, &most, &released);
        let release = async {
            // Let every probe reach its lease (bounded), then release the holders.
            let deadline = Instant::now() + Duration::from_secs(5);
            while in_flight.load(Ordering::SeqCst) < max_requests && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            released.store(true, Ordering::SeqCst);
        };
        let (r, _) = tokio::join!(
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
        let admitted = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(
            most.load(Ordering::SeqCst),
            max_requests,
            "at most max_requests probes in flight across the fleet"
        );
        assert_eq!(admitted, max_requests as usize, "{results:?}");
        assert!(results
            .iter()
            .filter(|r| r.is_err())
            .all(|r| matches!(r, Err(Error::Rejected(Rejected::TooManyRequests)))));
        let fleet_rejections: u64 = members
            .iter()
            .map(|m| m.shared.stats().fleet_rejections)
            .sum();
        assert!(
            fleet_rejections >= 1,
            "the fleet, not only the local breakers, said no"
        );
        // The probes succeeded: whoever closed published it, and the others follow.
        for m in &members {
            m.ok_after_sync().await.unwrap();
            assert_eq!(m.shared.state(), State::Closed);
        }
    });
}

#[test]
fn a_failed_probe_reopens_the_fleet_with_the_policy_backoff() {
    let server = Server::start();
    run(async {
        let open = Duration::from_millis(200);
        let [a, b] = synced(&server, "reopen", open, 1).await;
        let _ = a.fail().await;
        assert!(
            is_open_rejection(&b.ok_after_sync().await),
            "B follows A's trip"
        );
        tokio::time::sleep(open + Duration::from_millis(50)).await;
        for m in [&a, &b] {
            m.clock.advance(open + Duration::from_millis(50));
            assert_eq!(m.shared.state(), State::HalfOpen);
        }
        // B's probe fails: the fleet opens again, generation 2.
        b.clock.advance(SYNC);
        assert!(matches!(b.fail().await, Err(Error::Inner("down"))));
        assert_eq!(b.shared.stats().generation, 2);
        assert!(is_open_rejection(&a.ok_after_sync().await));
        assert_eq!(a.shared.stats().generation, 2);
        assert_eq!(
            a.transitions().last(),
            Some(&(State::HalfOpen, State::Open, true))
        );
    });
}

async fn a_dead_store_leaves_working_local_breakers_and_a_restart_converges_again<B: Controlled>(
    server: &mut B,
) {
    {
        let [a, b] = synced(&*server, "inventory", Duration::from_secs(30), 1).await;
        server.kill();
        // Calls keep flowing, through the local breakers; none fails because of the store,
        // and none waits long on it.
        for step in 0..20 {
            for m in [&a, &b] {
                m.clock.advance(SYNC);
                let started = Instant::now();
                m.ok().await.unwrap_or_else(|e| panic!("step {step}: {e}"));
                assert!(started.elapsed() < Duration::from_secs(2), "bounded");
            }
        }
        for m in [&a, &b] {
            let stats = m.shared.stats();
            assert!(stats.degraded && stats.store_errors >= 1, "{stats:?}");
            assert_eq!(m.events(), ["degraded"], "told once per outage");
        }
        // A still protects the dependency on its own.
        let _ = a.fail().await;
        assert!(is_open_rejection(&a.ok().await));
        // The server comes back empty.
        server.restart_empty();
        for m in [&a, &b] {
            let _ = m.ok_after_sync().await;
        }
        // A published its trip (generation 1); B follows at its next refresh.
        assert!(is_open_rejection(&b.ok_after_sync().await));
        for m in [&a, &b] {
            let stats = m.shared.stats();
            assert!(!stats.degraded, "{stats:?}");
            assert_eq!(stats.generation, 1);
            assert_eq!(m.events(), ["degraded", "recovered"]);
        }
    }
}

async fn a_vanished_record_is_recreated_from_the_local_state<B: Controlled>(server: &mut B) {
    let [a, b] = synced(&*server, "vanish", Duration::from_secs(30), 1).await;
    let _ = a.fail().await;
    server.remove("vanish").await;
    assert!(is_open_rejection(&a.ok_after_sync().await));
    assert_eq!(a.shared.stats().recreated, 1);
    assert_eq!(a.events(), ["recreated"]);
    let store = reader(&*server).await;
    let record = store.read("vanish", Duration::ZERO).await.unwrap();
    assert_eq!(record.generation, 1);
    assert!(record.open_for().is_some(), "open again, as A is");
    assert!(is_open_rejection(&b.ok_after_sync().await));
}

async fn a_quorum_keeps_one_bad_instance_from_opening_the_fleet<B: Backend>(fleet: &B) {
    let open = Duration::from_secs(30);
    let [a, b, c] = [0, 1, 2].map(|_| member_with(fleet, "quorum", open, 1, 2));
    for m in [&a, &b, &c] {
        m.ok().await.unwrap();
    }
    // A alone trips: it is open, the fleet is not.
    let _ = a.fail().await;
    assert!(is_open_rejection(&a.ok().await));
    b.ok_after_sync().await.unwrap();
    assert_eq!(b.shared.stats().generation, 0);
    // C trips too: two votes, the fleet opens.
    let _ = c.fail().await;
    assert_eq!(c.shared.stats().generation, 1);
    assert!(is_open_rejection(&b.ok_after_sync().await));
}

#[test]
fn the_shared_keys_share_a_hash_tag() {
    let server = Server::start();
    run(async {
        let a = member(&server, "tagged", Duration::from_secs(30), 1);
        a.ok().await.unwrap();
        let _ = a.fail().await;
        let keys = keys(&server.client(), "*").await;
        assert_eq!(keys, ["lazybreaker:{tagged}:state"]);
        let mut con = server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&keys[0])
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(ttl > 0, "expires when unused: {ttl}");
    });
}

#[test]
fn a_name_that_cannot_key_the_record_is_a_config_error() {
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let err = SharedBreaker::builder(client.clone())
        .build(Breaker::builder())
        .unwrap_err();
    assert_eq!(err.field(), "name");
    let err = SharedBreaker::builder(client)
        .build(Breaker::builder().name("a{b}"))
        .unwrap_err();
    assert_eq!((err.field(), err.breaker()), ("name", Some("a{b}")));
}

/// Eight tasks on each of three instances, on a multi-threaded runtime, tripping and
/// recovering the fleet many times: every publication lands exactly once (the record's
/// generation is the sum of the publications), every instance's generations only grow,
/// and every instance's transitions chain legally.
#[test]
fn eight_tasks_on_three_instances_lose_no_update() {
    let server = Server::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let members: Arc<Vec<Member>> = Arc::new(
            (0..3)
                .map(|_| member(&server, "hammer", Duration::from_millis(20), 2))
                .collect(),
        );
        let calls = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for i in 0..3 {
            for t in 0..8u64 {
                let (members, calls) = (Arc::clone(&members), Arc::clone(&calls));
                tasks.push(tokio::spawn(async move {
                    let m = &members[i];
                    let mut last = 0;
                    for k in 0..150u64 {
                        m.clock.advance(Duration::from_millis(1));
                        // Failures in bursts, so the fleet trips and recovers.
                        let fail = (k / 25 + t) % 3 == 0;
                        let calls = &calls;
                        let _ = m
                            .shared
                            .execute(|| async move {
                                calls.fetch_add(1, Ordering::Relaxed);
                                if fail {
                                    Err(())
                                } else {
                                    Ok(())
                                }
                            })
                            .await;
                        let generation = m.shared.stats().generation;
                        assert!(generation >= last, "generations only grow");
                        last = generation;
                        if k % 10 == 0 {
                            // Server time passes too: the fleet's 20 ms open periods end.
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }));
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        for task in tasks {
            tokio::time::timeout_at(deadline, task)
                .await
                .expect("bounded")
                .expect("no panic");
        }
        assert!(calls.load(Ordering::Relaxed) > 0);
        // Every pending decision published, then everyone reads the one record.
        for m in members.iter() {
            m.clock.advance(SYNC);
            m.shared.sync().await;
            m.shared.sync().await;
        }
        let store = store(&server.client()).await;
        let record = store.read("hammer", Duration::ZERO).await.unwrap();
        let published: u64 = members.iter().map(|m| m.shared.stats().published).sum();
        assert!(
            published >= 2,
            "the fleet tripped and recovered: {published}"
        );
        assert_eq!(
            record.generation, published,
            "no lost update, no double count"
        );
        for m in members.iter() {
            assert!(m.shared.stats().store_errors == 0);
            let transitions = m.transitions();
            assert!(
                !transitions.is_empty(),
                "every instance tripped or followed"
            );
            let mut state = State::Closed;
            for &(from, to, fleet) in &transitions {
                assert_eq!(from, state, "chained: {transitions:?}");
                assert_ne!(from, to);
                assert!(
                    !(from == State::Closed && to == State::HalfOpen),
                    "closed never goes half-open"
                );
                assert!(
                    fleet || !(from == State::Open && to == State::Closed),
                    "only the fleet closes an open breaker"
                );
                state = to;
            }
        }
    });
}

/// A probe slower than the store timeout still publishes its result: the budget counts the
/// store's time, not the call's.
#[test]
fn a_probe_slower_than_the_store_timeout_still_closes_the_fleet() {
    let server = Server::start();
    run(async {
        let clock = ManualClock::new();
        let open = Duration::from_millis(100);
        // The 0.1 type and builder, on a `redis::Client`.
        let shared: SharedBreaker<ConsecutiveFailures> = SharedBreaker::builder(server.client())
            .sync_interval(SYNC)
            .store_timeout(Duration::from_millis(30))
            .build(
                Breaker::builder()
                    .name("slow-probe")
                    .policy(ConsecutiveFailures::new(1).unwrap())
                    .timeout(open)
                    .clock(clock.clone()),
            )
            .unwrap();
        let _ = shared.execute(|| async { Err::<(), _>("down") }).await;
        tokio::time::sleep(open + Duration::from_millis(30)).await;
        clock.advance(open + Duration::from_millis(30));
        let probe = shared
            .execute(|| async {
                tokio::time::sleep(Duration::from_millis(80)).await; // > the store timeout
                Ok::<_, ()>(())
            })
            .await;
        assert!(probe.is_ok(), "{probe:?}");
        assert_eq!(shared.state(), State::Closed);
        let store = store(&server.client()).await;
        let record = store.read("slow-probe", Duration::ZERO).await.unwrap();
        assert_eq!(
            (record.generation, record.open_until_us),
            (2, None),
            "published"
        );
    });
}

// ---------------------------------------------------------------------------------------
// "Reliability, fourth round": E5 (durations of `Duration::MAX`) and I3 (a trip for ever), on
// every store.

/// A century: what "a very long open period" is at least, here.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// An instance of breaker `name` as [`member`] makes one, but with no bound on its open
/// periods (`max_open_duration(Duration::MAX)`) and its shared breaker's knobs set by `knobs`.
fn unbounded_member<B: Backend>(
    backend: &B,
    name: &str,
    open: Duration,
    knobs: impl FnOnce(fleet::SharedBuilder<B::Store>) -> fleet::SharedBuilder<B::Store>,
) -> Member<B::Store> {
    let clock = ManualClock::new();
    let seen = Arc::new(Seen::default());
    let builder = fleet::SharedBreaker::builder(backend.store())
        .sync_interval(SYNC)
        .store_timeout(Duration::from_millis(300));
    let shared = knobs(builder)
        .build(
            Breaker::builder()
                .name(name)
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(open)
                .max_open_duration(Duration::MAX)
                .clock(clock.clone())
                .observer(Arc::clone(&seen)),
        )
        .unwrap();
    Member {
        shared,
        clock,
        seen,
    }
}

/// E5: every duration a store is given may be `Duration::MAX` (an open period, a vote
/// window, a lease): the store takes it, and the deadline it makes of it saturates below the
/// bound the readers hold records to (2^53 us), so the record reads back valid.
async fn e5_durations_of_duration_max_saturate_below_the_readers_bound<B: Backend>(fleet: &B) {
    let store = fleet.store();
    // The caller's clock reading: the MemoryStore's time (the servers keep their own).
    let now = Duration::from_secs(1);
    let never = Duration::MAX;
    let open = Decision::Open(never);
    // A quorum of two within a window of `Duration::MAX`: the first vote counts, the second
    // opens the record.
    let first = store.publish("max", 1, open, Vote::new(2, never, "a"), now);
    let first = first.await.expect("a vote for ever");
    assert!(!first.written, "one vote of two");
    let second = store.publish("max", 1, open, Vote::new(2, never, "b"), now);
    let second = second.await.expect("a trip for ever");
    assert!(second.written, "the second vote opens it");
    let until = second.open_until_us.expect("open");
    assert!(
        until <= fleet::SharedRecord::MAX_TIME_US,
        "saturated below the readers' bound: {until}"
    );
    assert!(second.open_for().expect("open") > CENTURY);
    let read = store.read("max", now).await.expect("reads back");
    assert_eq!((read.generation, read.open_until_us), (1, Some(until)));
    // Half-open at once, then a lease that never ends by itself.
    let half_open = store.publish("max", 2, Decision::Open(Duration::ZERO), Vote::NONE, now);
    assert!(half_open.await.unwrap().written);
    let lease = store.lease_probe("max", 2, 1, never, "holder", now);
    assert_eq!(lease.await.expect("a lease for ever"), Lease::Taken);
    let other = store.lease_probe("max", 2, 1, never, "other", now);
    assert_eq!(other.await.unwrap(), Lease::Full, "the lease is held");
    let closed = store.finish_probe("max", 2, "holder", true, 1, now);
    let closed = closed.await.expect("the probe ends");
    assert!(closed.written);
    assert_eq!((closed.generation, closed.open_until_us), (3, None));
}

/// E5: a shared breaker whose every duration knob is `Duration::MAX` (and whose breaker has
/// no bound on its open periods) trips, probes under its fleet lease and recovers, with no
/// store error: each knob saturates, on every store.
async fn e5_a_shared_breaker_with_every_duration_at_max_trips_and_recovers<B: Backend>(fleet: &B) {
    let open = Duration::from_millis(150);
    let a = unbounded_member(fleet, "max-knobs", open, |b| {
        b.store_timeout(Duration::MAX)
            .lease_for(Duration::MAX)
            .vote_window(Duration::MAX)
    });
    a.ok().await.unwrap();
    assert!(matches!(a.fail().await, Err(Error::Inner("down"))));
    assert_eq!(a.shared.stats().published, 1);
    // The open period passes, in the store's time and on the clock.
    fleet.let_pass(open + Duration::from_millis(30)).await;
    a.clock.advance(open + Duration::from_millis(30));
    a.ok()
        .await
        .expect("the probe, leased for ever, closes the fleet");
    assert_eq!(a.shared.state(), State::Closed);
    let stats = a.shared.stats();
    assert_eq!(
        (stats.published, stats.store_errors, stats.degraded),
        (2, 0, false),
        "{stats:?} {:?}",
        a.events()
    );
    assert!(a.events().is_empty(), "{:?}", a.events());
    // A sync interval of `Duration::MAX`: the first call syncs, and none after it.
    let b = unbounded_member(fleet, "max-knobs", open, |b| b.sync_interval(Duration::MAX));
    b.ok().await.unwrap();
    b.clock.advance(CENTURY);
    b.ok().await.unwrap();
    let stats = b.shared.stats();
    assert_eq!((stats.round_trips, stats.generation), (1, 2), "{stats:?}");
}

/// I3: `trip_for(Duration::MAX)` on a breaker whose open periods have no bound opens it for
/// ever (its transition carries no open period, as a forced open's does), but it is no
/// operator's override: it is published, as the longest open period the store holds, and
/// the fleet follows it.
async fn i3_a_trip_for_ever_is_published_as_the_longest_open_period<B: Backend>(fleet: &B) {
    let open = Duration::from_secs(30);
    let [a, b] = [0, 1].map(|_| unbounded_member(fleet, "for-ever", open, |b| b));
    for m in [&a, &b] {
        m.ok().await.unwrap();
    }
    a.shared.breaker().trip_for(Duration::MAX);
    assert!(is_open_rejection(&a.ok().await));
    let stats = a.shared.stats();
    assert_eq!(
        (stats.published, stats.generation, stats.store_errors),
        (1, 1, 0),
        "published: {stats:?}"
    );
    let record = fleet.store().read("for-ever", a.clock.now()).await.unwrap();
    assert_eq!(record.generation, 1);
    assert!(
        record.open_until_us.expect("open") <= fleet::SharedRecord::MAX_TIME_US,
        "{record:?}"
    );
    assert!(record.open_for().expect("open") > CENTURY, "{record:?}");
    // The others follow it: open for a very long time.
    let Err(Error::Rejected(Rejected::Open { retry_after })) = b.ok_after_sync().await else {
        panic!("B follows A's trip")
    };
    assert!(retry_after > CENTURY, "{retry_after:?}");
    assert_eq!(b.shared.stats().generation, 1);
}

/// The store-agnostic tests above, on a `MemoryStore`, on a real `redis-server` and on a real
/// PostgreSQL server of their own: one body each.
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod on_memory {
            $(
                #[test]
                fn $name() {
                    let store = lazybreaker_fleet::MemoryStore::new();
                    super::run(super::$name(&store));
                }
            )*
        }
        mod on_redis {
            $(
                #[test]
                fn $name() {
                    let server = super::Server::start();
                    super::run(super::$name(&server));
                }
            )*
        }
        mod on_postgres {
            $(
                #[test]
                fn $name() {
                    let server = super::PgServer::start();
                    super::run(super::$name(&server));
                }
            )*
        }
    };
}

on_every_store!(
    closed_calls_and_open_rejections_do_no_store_io_between_refreshes,
    one_refresh_in_flight_while_the_other_calls_go_on,
    a_trip_is_seen_by_the_others_within_the_sync_interval_and_delivered_as_from_the_fleet,
    a_second_trip_at_the_same_generation_adopts_the_first,
    a_quorum_keeps_one_bad_instance_from_opening_the_fleet,
    e5_durations_of_duration_max_saturate_below_the_readers_bound,
    e5_a_shared_breaker_with_every_duration_at_max_trips_and_recovers,
    i3_a_trip_for_ever_is_published_as_the_longest_open_period,
);

// ---------------------------------------------------------------------------------------
// The fleet at the edges against a real server ("Reliability, third round"; the MemoryStore
// ones are in tests/fleet_edges.rs).

/// Sets field `field` of breaker `name`'s record to `value` by hand, as another client could.
async fn hset(server: &Server, name: &str, field: &str, value: &str) {
    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = format!("lazybreaker:{{{name}}}:state");
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg(field)
        .arg(value)
        .query_async(&mut con)
        .await
        .unwrap();
}

async fn item_3_a_negative_generation_in_the_store_degrades<B: Controlled>(server: &mut B) {
    {
        server.set_generation("neg", "-1").await;
        let read = reader(&*server).await.read("neg", Duration::ZERO).await;
        assert!(
            matches!(read, Err(lazybreaker_fleet::StoreError::Invalid(_))),
            "{read:?}"
        );
        let m = member(&*server, "neg", Duration::from_secs(10), 1);
        m.ok().await.expect("decided locally");
        assert!(m.shared.stats().degraded);
        assert_eq!(m.shared.stats().generation, 0);
        // The next local trip: no overflow panic out of `execute`.
        assert!(m.fail().await.is_err());
        assert_eq!(m.shared.state(), State::Open);
        assert_eq!(m.events(), ["degraded"], "reported once");
        assert!(m.shared.stats().store_errors >= 1);
    }
}

async fn item_3_a_generation_above_2_53_in_the_store_degrades_and_is_not_written_back<
    B: Controlled,
>(
    server: &mut B,
) {
    {
        let above = (fleet::SharedRecord::MAX_GENERATION + 10).to_string();
        server.set_generation("big", &above).await;
        let m = member(&*server, "big", Duration::from_secs(10), 1);
        m.ok().await.expect("decided locally");
        let stats = m.shared.stats();
        assert!(
            stats.degraded,
            "sharing cannot work at this generation: said so"
        );
        assert_eq!((stats.generation, m.events().len()), (0, 1));
        // The record is removed: the breaker shares again from generation 0, and writes
        // no huge generation back.
        server.remove("big").await;
        m.ok_after_sync().await.unwrap();
        assert!(!m.shared.stats().degraded);
        assert!(m.fail().await.is_err());
        let record = reader(&*server)
            .await
            .read("big", Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(record.generation, 1, "shared again, from the bottom");
    }
}

/// The tests above that kill, restart or edit the store, on a real `redis-server` and a real
/// PostgreSQL server of their own: one body each.
macro_rules! on_real_stores {
    ($($name:ident),* $(,)?) => {
        mod on_real_redis {
            $(
                #[test]
                fn $name() {
                    let mut server = super::Server::start();
                    super::run(super::$name(&mut server));
                }
            )*
        }
        mod on_real_postgres {
            $(
                #[test]
                fn $name() {
                    let mut server = super::PgServer::start();
                    super::run(super::$name(&mut server));
                }
            )*
        }
    };
}

on_real_stores!(
    a_dead_store_leaves_working_local_breakers_and_a_restart_converges_again,
    a_vanished_record_is_recreated_from_the_local_state,
    item_3_a_negative_generation_in_the_store_degrades,
    item_3_a_generation_above_2_53_in_the_store_degrades_and_is_not_written_back,
);

#[test]
fn item_11_check_store_refuses_a_missing_password_and_accepts_the_right_one() {
    let server = Server::start_with(&["--requirepass", "secret"]);
    run(async {
        let build = |url: String| {
            SharedBreaker::builder(redis::Client::open(url).unwrap())
                .store_timeout(Duration::from_millis(500))
                .build(Breaker::builder().name("payments"))
                .unwrap()
        };
        let without = build(server.url());
        let checked = without.check_store().await;
        assert!(checked.is_err(), "no password: {checked:?}");
        assert!(without.stats().degraded);
        let wrong = build(format!("redis://:wrong@127.0.0.1:{}/", server.port));
        assert!(wrong.check_store().await.is_err(), "a wrong password");
        let with = build(format!("redis://:secret@127.0.0.1:{}/", server.port));
        with.check_store().await.expect("the right password");
        let stats = with.stats();
        assert!(!stats.degraded);
        assert_eq!((stats.round_trips, stats.store_errors), (1, 0));
    });
}

/// E6: a number in the Redis record that is not what a breaker writes (a fraction Redis
/// truncates in a script's reply while the script compares it whole, an exponent, a sign)
/// is refused by every operation as invalid, as a negative one is: the members degrade to
/// local decisions, reported once, instead of answering every half-open call "stale".
#[test]
fn e6_a_fractional_number_in_the_redis_record_is_invalid_and_degrades_once() {
    let server = Server::start();
    run(async {
        let store = Backend::store(&server);
        let garbage = [
            ("generation", "2.5"),
            ("until", "1.5"),
            ("ok", "0.5"),
            ("generation", "1e3"),
            ("until", "+5"),
        ];
        for (i, (field, value)) in garbage.into_iter().enumerate() {
            let name = format!("garbage-{i}");
            let half_open =
                store.publish(&name, 1, Decision::Open(Duration::ZERO), Vote::NONE, NOW);
            assert!(half_open.await.unwrap().written);
            hset(&server, &name, field, value).await;
            let answers = [
                store.read(&name, NOW).await.map(|_| ()),
                store
                    .publish(&name, 5, Decision::Closed, Vote::NONE, NOW)
                    .await
                    .map(|_| ()),
                store
                    .lease_probe(&name, 1, 1, Duration::from_secs(5), "h", NOW)
                    .await
                    .map(|_| ()),
                store
                    .finish_probe(&name, 1, "h", true, 1, NOW)
                    .await
                    .map(|_| ()),
            ];
            for answer in answers {
                match answer {
                    Err(StoreError::Invalid(what)) => {
                        assert!(what.contains(field) && what.contains(value), "{what}");
                    }
                    other => panic!("{field} = {value:?}: {other:?}"),
                }
            }
        }
        // The probe's case: A tripped, then the record was edited to generation 2.5,
        // half-open.
        let [a, b] = synced(&server, "frac", Duration::from_secs(30), 1).await;
        let _ = a.fail().await;
        hset(&server, "frac", "generation", "2.5").await;
        hset(&server, "frac", "until", "0").await;
        for _ in 0..5 {
            let (ra, rb) = (a.ok_after_sync().await, b.ok_after_sync().await);
            assert!(is_open_rejection(&ra), "A is open on its own: {ra:?}");
            assert!(rb.is_ok(), "B, closed, decides locally: {rb:?}");
        }
        for m in [&a, &b] {
            let stats = m.shared.stats();
            assert!(stats.degraded && stats.store_errors >= 1, "{stats:?}");
            assert_eq!(stats.fleet_rejections, 0);
            assert_eq!(m.events(), ["degraded"], "reported once");
        }
    });
}
