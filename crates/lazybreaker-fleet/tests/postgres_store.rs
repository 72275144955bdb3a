//! The fleet's store against a real PostgreSQL server: each test starts its own (Debian's
//! `postgres`, on a loopback port of its own, as an unprivileged user, in a temporary
//! directory; see `postgres_server`) and stops it whatever happens. `bash .ci/test` installs
//! Debian's `postgresql` if missing.
//!
//! Real time here is the server's (`clock_timestamp()`): the waits are short and bounded (an
//! open period or a lease that must end), as a real server on loopback is the point.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lazybreaker::observe::{FleetEvent, Observer};
use lazybreaker::Breaker;
use lazybreaker_fleet::postgres::PostgresStore;
use lazybreaker_fleet::{Decision, FleetStore, Lease, SharedBreaker, StoreError, Vote};

mod postgres_server;
use postgres_server::{run_pg as run, PgServer, PASSWORD};

/// The caller's clock reading, which PostgreSQL ignores (its own clock governs).
const NOW: Duration = Duration::ZERO;

fn open(secs: u64) -> Decision {
    Decision::Open(Duration::from_secs(secs))
}

/// Whether `store` writes a trip of `name` for 30 s at generation 1 (a fresh record's next).
async fn trips(store: &PostgresStore, name: &str) -> bool {
    store
        .publish(name, 1, open(30), Vote::NONE, NOW)
        .await
        .unwrap()
        .written
}

#[test]
fn a_trip_is_published_once_and_adopted_and_a_recovery_goes_through_leased_probes() {
    let server = PgServer::start();
    run(async {
        let (a, b) = (server.store(), server.store());
        let fresh = a.read("payments", NOW).await.unwrap();
        assert_eq!(
            (fresh.generation, fresh.open_until_us, fresh.written),
            (0, None, false)
        );
        let published = a
            .publish("payments", 1, open(30), Vote::NONE, NOW)
            .await
            .unwrap();
        assert!(published.written);
        assert_eq!(published.generation, 1);
        let open_for = published.open_for().expect("open");
        assert!(open_for <= Duration::from_secs(30) && open_for > Duration::from_secs(29));
        // B trips from the same generation: the record moved on, B adopts it.
        let adopted = b
            .publish("payments", 1, open(60), Vote::NONE, NOW)
            .await
            .unwrap();
        assert!(!adopted.written);
        assert_eq!(
            (adopted.generation, adopted.open_until_us),
            (1, published.open_until_us),
            "A's deadline, not B's"
        );
        // Still open on the server's clock: no probe yet.
        assert_eq!(
            b.lease_probe("payments", 1, 1, Duration::from_secs(5), "b/1", NOW)
                .await
                .unwrap(),
            Lease::Stale
        );
        // An open period of zero: half-open at once. One slot of one.
        let reopened = a.publish(
            "payments",
            2,
            Decision::Open(Duration::ZERO),
            Vote::NONE,
            NOW,
        );
        assert!(reopened.await.unwrap().written);
        let lease = |store: PostgresStore, holder: &'static str| async move {
            store
                .lease_probe("payments", 2, 1, Duration::from_secs(5), holder, NOW)
                .await
                .unwrap()
        };
        assert_eq!(lease(a.clone(), "a/1").await, Lease::Taken);
        assert_eq!(lease(b.clone(), "b/1").await, Lease::Full);
        assert_eq!(
            b.lease_probe("payments", 1, 1, Duration::from_secs(5), "b/1", NOW)
                .await
                .unwrap(),
            Lease::Stale,
            "another generation"
        );
        // A probe that holds no lease counts nothing.
        let stray = b
            .finish_probe("payments", 2, "b/1", true, 1, NOW)
            .await
            .unwrap();
        assert_eq!((stray.generation, stray.written), (2, false));
        let closed = a
            .finish_probe("payments", 2, "a/1", true, 1, NOW)
            .await
            .unwrap();
        assert!(closed.written);
        assert_eq!((closed.generation, closed.open_until_us), (3, None));
        assert_eq!(b.read("payments", NOW).await.unwrap().generation, 3);
    });
}

#[test]
fn an_expired_lease_frees_its_slot_and_counts_nothing() {
    let server = PgServer::start();
    run(async {
        let store = server.store();
        let half_open = Decision::Open(Duration::ZERO);
        assert!(
            store
                .publish("b", 1, half_open, Vote::NONE, NOW)
                .await
                .unwrap()
                .written
        );
        let short = Duration::from_millis(50);
        assert_eq!(
            store.lease_probe("b", 1, 1, short, "x", NOW).await.unwrap(),
            Lease::Taken
        );
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(
            store.lease_probe("b", 1, 1, short, "y", NOW).await.unwrap(),
            Lease::Taken
        );
        let late = store.finish_probe("b", 1, "x", true, 1, NOW).await.unwrap();
        assert!(!late.written, "its lease had expired");
        assert!(
            store
                .finish_probe("b", 1, "y", true, 1, NOW)
                .await
                .unwrap()
                .written
        );
    });
}

#[test]
fn a_quorum_opens_the_record_at_its_last_distinct_vote() {
    let server = PgServer::start();
    run(async {
        let store = server.store();
        let vote = |instance| Vote::new(3, Duration::from_secs(60), instance);
        for (instance, written) in [("a", false), ("a", false), ("b", false), ("c", true)] {
            let record = store
                .publish("q", 1, open(30), vote(instance), NOW)
                .await
                .unwrap();
            assert_eq!(record.written, written, "vote of {instance}");
            assert_eq!(record.generation, u64::from(written));
        }
        // The votes of the period are cleared with it.
        let next = store
            .publish("q", 2, open(30), vote("a"), NOW)
            .await
            .unwrap();
        assert!(!next.written, "one vote of three");
    });
}

#[test]
fn concurrent_publications_at_one_generation_write_once() {
    let server = PgServer::start();
    run(async {
        let store = server.store().with_pool_size(4);
        let _ = store.read("race", NOW).await.unwrap(); // the schema, once
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(
                    async move { store.publish("race", 1, open(30), Vote::NONE, NOW).await },
                )
            })
            .collect();
        let mut written = 0;
        for task in tasks {
            let record = task.await.unwrap().unwrap();
            assert_eq!(record.generation, 1);
            written += usize::from(record.written);
        }
        assert_eq!(written, 1, "the generation fence lets one through");
    });
}

#[test]
fn a_row_edited_to_an_absurd_deadline_is_refused() {
    let server = PgServer::start();
    run(async {
        let store = server.store();
        assert!(trips(&store, "x").await);
        let client = server.client().await;
        client
            .execute(
                "UPDATE lazybreaker_fleet SET until_us = -5 WHERE name = 'x'",
                &[],
            )
            .await
            .unwrap();
        let read = store.read("x", NOW).await;
        assert!(matches!(read, Err(StoreError::Invalid(_))), "{read:?}");
        // Beyond 2^53 us: the shared breaker refuses it (it decides locally meanwhile).
        client
            .execute(
                "UPDATE lazybreaker_fleet SET until_us = 9007199254740993 WHERE name = 'x'",
                &[],
            )
            .await
            .unwrap();
        let shared = SharedBreaker::builder(server.store())
            .build(Breaker::builder().name("x"))
            .unwrap();
        assert!(shared.check_store().await.is_err(), "an absurd deadline");
        assert!(shared.stats().degraded);
        shared
            .execute(|| async { Ok::<_, ()>(()) })
            .await
            .expect("decided locally");
    });
}

#[test]
fn a_statement_held_by_a_lock_and_an_exhausted_pool_both_end_at_the_store_timeout() {
    let server = PgServer::start();
    run(async {
        let timeout = Duration::from_millis(200);
        let store = server.store().with_timeout(timeout).with_pool_size(1);
        let _ = store.read("held", NOW).await.unwrap();
        assert!(trips(&store, "held").await);
        // Another client holds the row: a publication waits on it.
        let mut holder = server.client().await;
        let tx = holder.transaction().await.unwrap();
        tx.execute(
            "SELECT 1 FROM lazybreaker_fleet WHERE name = 'held' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
        let started = Instant::now();
        // Three operations for the pool's one connection: the first waits on the row, the
        // others for the connection; each ends at the store timeout.
        let (first, second, third) = tokio::join!(
            store.publish("held", 2, open(30), Vote::NONE, NOW),
            store.publish("held", 2, open(30), Vote::NONE, NOW),
            store.read("held", NOW),
        );
        for answer in [first, second] {
            assert!(
                matches!(answer, Err(StoreError::Timeout(t)) if t == timeout),
                "{answer:?}"
            );
        }
        assert!(matches!(third, Err(StoreError::Timeout(_))), "{third:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "bounded by the store timeout"
        );
        // The server ends the held statement at the store timeout too (let it, then let go).
        tokio::time::sleep(Duration::from_millis(100)).await;
        tx.rollback().await.unwrap();
        // The held statement's connection was dropped: the next operation connects again.
        let record = store.read("held", NOW).await.unwrap();
        assert_eq!(
            record.generation, 1,
            "the publication that ran out of time wrote nothing"
        );
    });
}

#[test]
fn check_store_refuses_a_wrong_password_and_a_wrong_database() {
    let server = PgServer::start();
    run(async {
        let build = |config: tokio_postgres::Config| {
            SharedBreaker::builder(PostgresStore::new(config).with_timeout(Duration::from_secs(2)))
                .store_timeout(Duration::from_secs(2))
                .build(Breaker::builder().name("payments"))
                .unwrap()
        };
        let wrong = build(server.config_as("wrong", "postgres"));
        let checked = wrong.check_store().await;
        assert!(checked.is_err(), "a wrong password: {checked:?}");
        assert!(wrong.stats().degraded);
        let nowhere = build(server.config_as(PASSWORD, "no_such_database"));
        assert!(nowhere.check_store().await.is_err(), "a wrong database");
        let right = build(server.config());
        right
            .check_store()
            .await
            .expect("the right password and database");
        assert!(!right.stats().degraded);
        assert!(PostgresStore::from_url("host=127.0.0.1 port=notaport").is_err());
        let err = PostgresStore::from_url("port=notaport password=hunter2").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    });
}

#[test]
fn a_server_restarted_empty_gets_its_schema_back() {
    let mut server = PgServer::start();
    let store = server.store();
    run(async {
        assert!(trips(&store, "r").await);
    });
    server.restart_empty();
    run(async {
        // The first operation finds neither its connection nor the table: an error, then
        // the next connects, creates the schema, and reads a fresh record.
        let mut answer = store.read("r", NOW).await;
        for _ in 0..3 {
            if answer.is_ok() {
                break;
            }
            answer = store.read("r", NOW).await;
        }
        assert_eq!(
            answer.unwrap().generation,
            0,
            "an empty server: closed at generation 0"
        );
        assert!(trips(&store, "r").await);
    });
}

#[test]
fn a_name_with_a_nul_cannot_key_a_row() {
    let store = PostgresStore::new(tokio_postgres::Config::new());
    assert!(store.check_name("a\0b").is_err());
    assert!(store.check_name("payments/eu-west").is_ok());
}

// ---------------------------------------------------------------------------------------
// "Reliability, fourth round": E4 (what the server said) and E5 (durations of
// `Duration::MAX`).

/// What an observer makes of each `Degraded` event, as three readers would: its `Display`
/// (the tracing observer's `WARN` writes it), its `Debug`, and its error's chain walked
/// (the error's text, then each source's).
#[derive(Default)]
struct Told(Mutex<Vec<[String; 3]>>);

impl Observer for Told {
    fn on_fleet(&self, event: &FleetEvent<'_>) {
        if let FleetEvent::Degraded { error, .. } = event {
            let mut chain = Vec::new();
            let mut next: Option<&(dyn std::error::Error + 'static)> = Some(*error);
            for _ in 0..16 {
                let Some(e) = next else { break };
                chain.push(e.to_string());
                next = e.source();
            }
            let texts = [event.to_string(), format!("{event:?}"), chain.join(" <- ")];
            self.0.lock().unwrap().push(texts);
        }
    }
}

/// The server's message, where an operator reads the store's error: the error itself, and
/// the `Degraded` event's every reading.
fn says(error: &StoreError, told: &Told, message: &str) {
    assert!(error.to_string().contains(message), "{error}");
    let told = told.0.lock().unwrap();
    assert_eq!(told.len(), 1, "one Degraded event");
    for text in &told[0] {
        assert!(text.contains(message), "{text}");
    }
}

/// E4: a permission revoked while the breakers run: the error and the `Degraded` event say
/// what PostgreSQL said ("permission denied for table lazybreaker_fleet"), not "db error".
#[test]
fn e4_a_revoked_permission_reaches_the_event_with_the_servers_message() {
    let server = PgServer::start();
    run(async {
        server
            .store()
            .prepare(Duration::from_secs(10))
            .await
            .unwrap();
        let admin = server.client().await;
        admin
            .batch_execute(
                "CREATE ROLE app LOGIN PASSWORD 'app-secret'; \
                 GRANT SELECT, INSERT, UPDATE ON lazybreaker_fleet TO app;",
            )
            .await
            .unwrap();
        let mut config = server.config();
        config.user("app").password("app-secret");
        let store = PostgresStore::new(config)
            .with_timeout(Duration::from_secs(5))
            .without_schema_creation();
        let told = Arc::new(Told::default());
        let shared = SharedBreaker::builder(store)
            .store_timeout(Duration::from_secs(5))
            .build(
                Breaker::builder()
                    .name("revoked")
                    .observer(Arc::clone(&told)),
            )
            .unwrap();
        shared.check_store().await.expect("granted");
        admin
            .batch_execute("REVOKE SELECT, INSERT, UPDATE ON lazybreaker_fleet FROM app")
            .await
            .unwrap();
        let error = shared.check_store().await.unwrap_err();
        says(
            &error,
            &told,
            "permission denied for table lazybreaker_fleet",
        );
    });
}

/// E4: what a row edited into garbage makes the server say ("cannot call jsonb_each on a
/// non-object", "bigint out of range") and why a connection failed ("Connection refused")
/// are in the error's text too.
#[test]
fn e4_a_garbage_row_and_a_refused_connection_say_why() {
    run(async {
        let refused = lazybreaker_test_support::refused();
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(refused.port())
            .user("postgres");
        let store = PostgresStore::new(config).with_timeout(Duration::from_secs(5));
        let told = Arc::new(Told::default());
        let shared = SharedBreaker::builder(store)
            .store_timeout(Duration::from_secs(5))
            .build(
                Breaker::builder()
                    .name("nowhere")
                    .observer(Arc::clone(&told)),
            )
            .unwrap();
        let error = shared.check_store().await.unwrap_err();
        says(&error, &told, "Connection refused");
    });
    let server = PgServer::start();
    run(async {
        let store = server.store();
        let half_open = store.publish("g", 1, Decision::Open(Duration::ZERO), Vote::NONE, NOW);
        assert!(half_open.await.unwrap().written);
        let admin = server.client().await;
        let edit = |sql: &'static str| {
            let admin = &admin;
            async move { admin.batch_execute(sql).await.unwrap() }
        };
        edit("UPDATE lazybreaker_fleet SET probes = '[]' WHERE name = 'g'").await;
        let lease = store
            .lease_probe("g", 1, 1, Duration::from_secs(5), "h", NOW)
            .await;
        let error = lease.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("cannot call jsonb_each on a non-object"),
            "{error}"
        );
        edit("UPDATE lazybreaker_fleet SET probes = '{}' WHERE name = 'g'").await;
        let lease = store
            .lease_probe("g", 1, 1, Duration::from_secs(5), "h", NOW)
            .await;
        assert_eq!(lease.unwrap(), Lease::Taken);
        edit("UPDATE lazybreaker_fleet SET ok = 9223372036854775807 WHERE name = 'g'").await;
        let finish = store.finish_probe("g", 1, "h", true, 2, NOW).await;
        let error = finish.unwrap_err();
        assert!(error.to_string().contains("bigint out of range"), "{error}");
    });
}

/// E5: a store timeout of `Duration::MAX` (an operation's, and `prepare`'s) saturates at
/// PostgreSQL's longest `statement_timeout`: the store connects and answers.
#[test]
fn e5_a_timeout_of_duration_max_saturates() {
    let server = PgServer::start();
    run(async {
        let store = server.store().with_timeout(Duration::MAX);
        store
            .prepare(Duration::MAX)
            .await
            .expect("prepared within Duration::MAX");
        let record = store
            .read("t", NOW)
            .await
            .expect("read within Duration::MAX");
        assert_eq!((record.generation, record.open_until_us), (0, None));
        assert!(trips(&store, "t").await);
    });
}
