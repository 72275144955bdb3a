//! The fleet-wide store against a real `redis-server`: each test
//! starts its own server on a loopback port of its own, persistence off, and stops it
//! whatever happens (`redis_server::Server`'s drop). `bash .ci/test` installs Debian's
//! `redis-server` if missing.
//!
//! Real time here is the server's: the waits are short and bounded (a lease or a key that
//! must expire), as a real server on loopback is the point of these tests.

use std::time::{Duration, Instant};

use lazybreaker_fleet::redis::{Lease, RedisStore, StoreError};
use lazybreaker_fleet::{Decision, FleetStore, Vote};

/// The caller's clock reading, which Redis ignores (its own `TIME` governs).
const NOW: Duration = Duration::ZERO;

mod redis_server;
use redis_server::{keys, run, Server};

const TIMEOUT: Duration = Duration::from_millis(500);
const KEY_TTL: Duration = Duration::from_secs(60);

async fn store(server: &Server) -> RedisStore {
    RedisStore::connect(&server.client(), TIMEOUT, KEY_TTL)
        .await
        .expect("the server answers")
}

#[test]
fn a_trip_is_published_once_and_adopted_by_the_others() {
    let server = Server::start();
    run(async {
        let (a, b, c) = (
            store(&server).await,
            store(&server).await,
            store(&server).await,
        );
        let fresh = a.read("payments", NOW).await.unwrap();
        assert_eq!(
            (fresh.generation, fresh.open_until_us),
            (0, None),
            "no record: closed"
        );
        // A trips first at generation 1, for 30 s of server time.
        let published = a
            .publish(
                "payments",
                1,
                Decision::Open(Duration::from_secs(30)),
                Vote::NONE,
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(published.generation, 1);
        let open_for = published.open_for().expect("open");
        assert!(open_for <= Duration::from_secs(30) && open_for > Duration::from_secs(29));
        // B trips too, from the same generation: the record has moved on, B adopts it.
        let adopted = b
            .publish(
                "payments",
                1,
                Decision::Open(Duration::from_secs(5)),
                Vote::NONE,
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(adopted.generation, 1);
        assert_eq!(
            adopted.open_until_us, published.open_until_us,
            "A's deadline, not B's"
        );
        // C, behind (generation 0 view), reads the same decision.
        let seen = c.read("payments", NOW).await.unwrap();
        assert_eq!(seen.open_until_us, published.open_until_us);
        // A recovery at generation 2 closes it for everyone; an older trip cannot reopen it.
        let closed = c
            .publish("payments", 2, Decision::Closed, Vote::NONE, NOW)
            .await
            .unwrap();
        assert_eq!((closed.generation, closed.open_until_us), (2, None));
        let late = b
            .publish(
                "payments",
                1,
                Decision::Open(Duration::from_secs(30)),
                Vote::NONE,
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(
            (late.generation, late.open_until_us),
            (2, None),
            "fenced by generation"
        );
    });
}

#[test]
fn probes_are_leased_fleet_wide_and_a_dead_holders_lease_expires() {
    let server = Server::start();
    run(async {
        let stores = [
            store(&server).await,
            store(&server).await,
            store(&server).await,
        ];
        stores[0]
            .publish("search", 7, Decision::Open(Duration::ZERO), Vote::NONE, NOW)
            .await
            .unwrap();
        let lease = Duration::from_millis(200);
        let mut taken = Vec::new();
        for (i, s) in stores.iter().enumerate() {
            for j in 0..2 {
                let holder = format!("instance-{i}-probe-{j}");
                taken.push(
                    s.lease_probe("search", 7, 2, lease, &holder, NOW)
                        .await
                        .unwrap(),
                );
            }
        }
        let n = taken.iter().filter(|l| **l == Lease::Taken).count();
        assert!(
            taken
                .iter()
                .all(|l| matches!(l, Lease::Taken | Lease::Full)),
            "the others are refused as full, not stale: {taken:?}"
        );
        assert_eq!(
            n, 2,
            "at most max_requests probes across the fleet: {taken:?}"
        );
        assert_eq!(
            stores[1]
                .lease_probe("search", 6, 2, lease, "old", NOW)
                .await
                .unwrap(),
            Lease::Stale,
            "a lease for another generation"
        );
        // A released lease frees its slot at once.
        stores[0]
            .finish_probe("search", 7, "instance-0-probe-0", false, 2, NOW)
            .await
            .unwrap();
        assert_eq!(
            stores[2]
                .lease_probe("search", 7, 2, lease, "next", NOW)
                .await
                .unwrap(),
            Lease::Taken
        );
        // The holders died: their leases expire by themselves (server time).
        tokio::time::sleep(lease + Duration::from_millis(50)).await;
        for k in 0..2 {
            let holder = format!("after-{k}");
            assert_eq!(
                stores[1]
                    .lease_probe("search", 7, 2, lease, &holder, NOW)
                    .await
                    .unwrap(),
                Lease::Taken
            );
        }
    });
}

#[test]
fn a_dead_store_fails_fast_and_a_restarted_one_is_recreated() {
    let mut server = Server::start();
    let port = server.port;
    run(async {
        let s = store(&server).await;
        s.publish(
            "inventory",
            3,
            Decision::Open(Duration::from_secs(30)),
            Vote::NONE,
            NOW,
        )
        .await
        .unwrap();
        // The server dies (a restart without persistence, say).
        server.stop();
        let started = Instant::now();
        let err = s.read("inventory", NOW).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Backend(_) | StoreError::Timeout(_)),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "bounded, never stuck"
        );
        // It comes back empty: the record vanished, and reads as a fresh breaker.
        server = Server::on(port);
        let s = store(&server).await;
        assert_eq!(s.read("inventory", NOW).await.unwrap().generation, 0);
        let again = s
            .publish(
                "inventory",
                4,
                Decision::Open(Duration::from_secs(1)),
                Vote::NONE,
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(again.generation, 4, "recreated");
    });
}

#[test]
fn keys_expire_when_unused_and_share_a_hash_tag() {
    let server = Server::start();
    run(async {
        let s = RedisStore::connect(&server.client(), TIMEOUT, Duration::from_millis(100))
            .await
            .unwrap();
        // Open for 50 ms: the record lives that long plus the 100 ms TTL.
        s.publish(
            "users",
            1,
            Decision::Open(Duration::from_millis(50)),
            Vote::NONE,
            NOW,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await; // half-open now
        let lease = s
            .lease_probe("users", 1, 1, Duration::from_secs(30), "p", NOW)
            .await
            .unwrap();
        assert_eq!(lease, Lease::Taken);
        let found = keys(&server.client(), "lazybreaker:*").await;
        assert_eq!(
            found,
            ["lazybreaker:{users}:probes", "lazybreaker:{users}:state"]
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let left = keys(&server.client(), "lazybreaker:*").await;
        assert!(left.is_empty(), "expired: {left:?}");
    });
}

#[test]
fn a_probe_lease_needs_the_open_period_to_have_passed() {
    let server = Server::start();
    run(async {
        let s = store(&server).await;
        assert_eq!(
            s.lease_probe("cart", 0, 1, Duration::from_secs(1), "p", NOW)
                .await
                .unwrap(),
            Lease::Stale,
            "closed: nothing to probe"
        );
        s.publish(
            "cart",
            1,
            Decision::Open(Duration::from_secs(30)),
            Vote::NONE,
            NOW,
        )
        .await
        .unwrap();
        assert_eq!(
            s.lease_probe("cart", 1, 1, Duration::from_secs(1), "p", NOW)
                .await
                .unwrap(),
            Lease::Stale,
            "still open in the server's time"
        );
    });
}

#[test]
fn an_open_record_outlives_a_shorter_key_ttl() {
    let server = Server::start();
    run(async {
        let s = RedisStore::connect(&server.client(), TIMEOUT, Duration::from_millis(50))
            .await
            .unwrap();
        s.publish(
            "orders",
            2,
            Decision::Open(Duration::from_secs(30)),
            Vote::NONE,
            NOW,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let r = s.read("orders", NOW).await.unwrap();
        assert_eq!(r.generation, 2, "kept through its open period");
        assert!(r.open_for().is_some());
    });
}

#[test]
fn a_huge_open_period_comes_back_whole() {
    let server = Server::start();
    run(async {
        let s = store(&server).await;
        let r = s
            .publish("forever", 1, Decision::Open(Duration::MAX), Vote::NONE, NOW)
            .await
            .unwrap();
        assert!(r.open_for().unwrap() > Duration::from_secs(100 * 365 * 24 * 3600));
    });
}

/// E5: a key time to live and an operation timeout of `Duration::MAX` saturate: the store
/// publishes, votes, leases and closes, and the keys still expire (in about 285 years).
#[test]
fn e5_a_key_ttl_and_a_timeout_of_duration_max_saturate() {
    let server = Server::start();
    run(async {
        let s = RedisStore::new(server.client())
            .with_timeout(Duration::MAX)
            .with_key_ttl(Duration::MAX);
        let never = Duration::MAX;
        let open = Decision::Open(never);
        let vote = s
            .publish("ttl", 1, open, Vote::new(2, never, "a"), NOW)
            .await;
        assert!(!vote.expect("a vote").written);
        let trip = s
            .publish("ttl", 1, open, Vote::new(2, never, "b"), NOW)
            .await;
        assert!(trip.expect("a trip").written);
        let half_open = s.publish("ttl", 2, Decision::Open(Duration::ZERO), Vote::NONE, NOW);
        assert!(half_open.await.expect("half-open").written);
        let lease = s.lease_probe("ttl", 2, 1, never, "h", NOW).await;
        assert_eq!(lease.expect("a lease"), Lease::Taken);
        let closed = s.finish_probe("ttl", 2, "h", true, 1, NOW).await;
        assert!(closed.expect("closed").written);
        let mut con = server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg("lazybreaker:{ttl}:state")
            .query_async(&mut con)
            .await
            .unwrap();
        let century_ms = 100 * 365 * 24 * 3600 * 1000;
        assert!(ttl > century_ms, "expires, but not soon: {ttl} ms");
    });
}
