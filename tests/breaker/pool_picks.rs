//! `PoolStats::picks` (the counter `circuit_breaker_pool_picked_total`) counts every pick
//! made, when it is made, and never goes down under discovery: a pick admitted on an
//! endpoint that discovery removed meanwhile is counted, and a reader racing discovery
//! never sees a pick leave the count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, Clock, ManualClock};

/// A manual clock that, armed, removes endpoint `"a"` from its pool at its next reading:
/// discovery between a pick's look at the endpoints and its admission (a pool with a
/// deadline reads its clock between the two).
#[derive(Debug, Clone, Default)]
struct RemovingClock {
    inner: ManualClock,
    armed: Arc<AtomicBool>,
    pool: Arc<OnceLock<Weak<Pool<&'static str>>>>,
}

impl Clock for RemovingClock {
    fn now(&self) -> Duration {
        if self.armed.swap(false, Ordering::SeqCst) {
            if let Some(pool) = self.pool.get().and_then(Weak::upgrade) {
                assert!(pool.remove(&"a"), "the endpoint was in the pool");
            }
        }
        self.inner.now()
    }
}

#[test]
fn a_pick_admitted_after_discovery_removed_its_endpoint_is_counted() {
    let clock = RemovingClock::default();
    let pool = Arc::new(
        Pool::new(|_: &&'static str| Breaker::builder())
            .clock(clock.clone())
            .deadline(Duration::from_secs(1)),
    );
    clock.pool.set(Arc::downgrade(&pool)).unwrap();
    pool.set(["a"]);
    let mut made = 0u64;
    for round in 0..5 {
        // Discovery removes "a" between this pick's look and its admission…
        clock.armed.store(true, Ordering::SeqCst);
        let pick = pool.pick().expect("the endpoint it looked at");
        assert!(!clock.armed.load(Ordering::SeqCst), "the clock was read");
        made += 1;
        pick.success();
        assert!(pool.is_empty());
        // …and "a" comes back (a new breaker), for an ordinary pick.
        pool.insert("a");
        pool.pick().expect("the endpoint").success();
        made += 1;
        assert_eq!(pool.stats().picks, made, "round {round}");
    }
    // A call made on an endpoint's breaker directly is not a pick.
    pool.breaker(&"a").unwrap().allow().unwrap().success();
    assert_eq!(pool.stats().picks, made);
}

#[test]
fn the_picks_never_go_down_while_discovery_churns() {
    const PICKERS: usize = 2;
    const PICKS: u64 = 20_000;
    const CHANGES: usize = 3_000;
    let pool = Pool::new(|_: &u32| Breaker::builder()).deadline(Duration::from_secs(60));
    pool.set(0..4);
    let picked = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let (pool, picked, done) = (&pool, &picked, &done);
    let reads = std::thread::scope(|s| {
        let discovery = s.spawn(move || {
            for i in 0..CHANGES {
                // Endpoints come and go, some stay, the pool is never empty.
                let start = (i % 7) as u32;
                pool.set(start..start + 1 + (i % 4) as u32);
            }
        });
        let pickers: Vec<_> = (0..PICKERS)
            .map(|_| {
                s.spawn(move || {
                    for _ in 0..PICKS {
                        let pick = pool.pick().expect("an endpoint");
                        picked.fetch_add(1, Ordering::SeqCst);
                        pick.success();
                    }
                })
            })
            .collect();
        let reader = s.spawn(move || {
            let mut last = 0;
            let mut reads = 0u64;
            for _ in 0..10_000_000u64 {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                // A pick is counted when it is made: never below the picks finished.
                let finished = picked.load(Ordering::SeqCst);
                let picks = pool.stats().picks;
                assert!(picks >= last, "the picks went down: {last} then {picks}");
                assert!(picks >= finished, "{picks} counted, {finished} made before");
                last = picks;
                reads += 1;
            }
            reads
        });
        discovery.join().unwrap();
        for picker in pickers {
            picker.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        reader.join().unwrap()
    });
    assert!(reads > 0);
    assert_eq!(pool.stats().picks, PICKERS as u64 * PICKS);
    assert_eq!(picked.load(Ordering::SeqCst), PICKERS as u64 * PICKS);
    assert_eq!(pool.stats().no_endpoint, 0);
}
