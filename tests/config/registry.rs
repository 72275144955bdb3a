//! `Registry`: breakers per key, made on first use, bounded without timers.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lazybreaker::{Breaker, ManualClock, Registry, RegistryFull, State};

fn trips_on_first_failure(_: &String) -> lazybreaker::Builder {
    Breaker::builder()
        .policy(support::policy::trips_on_first_failure())
        .timeout(Duration::from_secs(10))
}

#[test]
fn a_breaker_per_key_made_on_first_use_and_named_after_it() {
    let built = Arc::new(AtomicUsize::new(0));
    let registry: Registry<String> = Registry::new({
        let built = Arc::clone(&built);
        move |_| {
            built.fetch_add(1, Ordering::SeqCst);
            Breaker::builder()
        }
    });
    assert!(registry.get("a").is_none(), "`get` builds nothing");
    assert_eq!(built.load(Ordering::SeqCst), 0);
    let a = registry.breaker("a");
    assert_eq!(a.name(), "a");
    assert!(Arc::ptr_eq(&a, &registry.breaker("a")));
    assert!(Arc::ptr_eq(&a, &registry.get("a").unwrap()));
    let b = registry.breaker(&String::from("b"));
    assert!(!Arc::ptr_eq(&a, &b));
    assert_eq!(built.load(Ordering::SeqCst), 2, "once per key");
    assert_eq!(registry.len(), 2);
    let mut names: Vec<_> = registry
        .breakers()
        .into_iter()
        .map(|(k, b)| (k, b.name().to_owned()))
        .collect();
    names.sort();
    assert_eq!(names, [("a".into(), "a".into()), ("b".into(), "b".into())]);
}

#[test]
fn a_name_the_factory_gives_is_kept() {
    let registry = Registry::new(|key: &String| Breaker::builder().name(format!("upstream/{key}")));
    assert_eq!(registry.breaker("users").name(), "upstream/users");
}

#[test]
fn the_registry_clock_is_every_breakers_clock() {
    let clock = ManualClock::new();
    let registry = Registry::new(trips_on_first_failure).clock(clock.clone());
    let a = registry.breaker("a");
    a.allow().unwrap().failure();
    assert_eq!(a.state(), State::Open);
    clock.advance(Duration::from_millis(10_001));
    assert_eq!(
        a.state(),
        State::HalfOpen,
        "the breaker reads the registry's clock"
    );
}

#[test]
fn a_bounded_registry_stays_bounded_under_a_key_flood() {
    let registry = Registry::new(|_: &String| Breaker::builder()).max_keys(64);
    for i in 0..10_000 {
        let b = registry.breaker(&format!("host-{i}"));
        b.execute(|| Ok::<_, ()>(())).unwrap();
        assert!(registry.len() <= 64, "at key {i}: {}", registry.len());
    }
    assert_eq!(registry.overflowed(), 0, "idle closed breakers make room");
    assert_eq!(registry.key_limit(), Some(64));
}

#[test]
fn the_least_recently_used_idle_breaker_goes_first() {
    let clock = ManualClock::new();
    let registry = Registry::new(|_: &String| Breaker::builder())
        .max_keys(4)
        .clock(clock.clone());
    for key in ["a", "b", "c", "d"] {
        clock.advance(Duration::from_secs(1));
        registry.breaker(key);
    }
    clock.advance(Duration::from_secs(1));
    registry.breaker("a"); // now "b" is the least recently used
    clock.advance(Duration::from_secs(1));
    registry.breaker("e");
    assert!(registry.get("b").is_none(), "b was evicted");
    for key in ["a", "c", "d", "e"] {
        assert!(registry.get(key).is_some(), "{key} kept");
    }
}

#[test]
fn open_forced_and_busy_breakers_are_never_evicted() {
    let registry = Registry::new(trips_on_first_failure).max_keys(3);
    registry.breaker("open").allow().unwrap().failure();
    registry.breaker("forced").force_closed();
    let busy = registry.breaker("busy").allow_owned().unwrap();
    let full: RegistryFull = registry.try_breaker("new").unwrap_err();
    assert_eq!(full.max_keys, 3);
    // `breaker` still answers: with a breaker of the key's own that is not kept.
    let overflow = registry.breaker("new");
    assert_eq!(overflow.name(), "new");
    assert!(overflow.execute(|| Ok::<_, ()>(())).is_ok());
    assert!(registry.get("new").is_none());
    assert_eq!((registry.len(), registry.overflowed()), (3, 1));
    // Once the busy call ends, its closed breaker is idle and makes room.
    busy.success();
    assert!(registry.try_breaker("new").is_ok());
    assert!(registry.get("busy").is_none());
    assert_eq!(registry.breaker("open").state(), State::Open);
}

#[test]
fn a_removed_breaker_stays_valid_for_its_outstanding_permit() {
    let registry = Registry::new(trips_on_first_failure).max_keys(2);
    let permit = registry.breaker("a").allow_owned().unwrap();
    let old = Arc::clone(permit.breaker());
    assert!(registry.remove("a").is_some());
    let new = registry.breaker("a");
    assert!(!Arc::ptr_eq(&old, &new), "the key got a new breaker");
    permit.failure();
    assert_eq!(
        old.state(),
        State::Open,
        "the evicted breaker took the failure"
    );
    assert_eq!(old.totals().failures, 1);
    assert_eq!(
        new.totals().admitted,
        0,
        "and the new one saw nothing of it"
    );

    // The same through `retain`.
    let b = registry.breaker("b");
    let permit = b.allow().unwrap();
    registry.retain(|key, _| key != "b");
    assert!(registry.get("b").is_none());
    permit.success();
    assert_eq!(b.totals().successes, 1);
}

#[test]
fn remove_idle_sweeps_what_was_not_used_for_that_long() {
    let clock = ManualClock::new();
    let registry = Registry::new(trips_on_first_failure).clock(clock.clone());
    registry.breaker("old");
    registry.breaker("open").allow().unwrap().failure();
    clock.advance(Duration::from_secs(60));
    registry.breaker("recent");
    let held = registry.breaker("held");
    clock.advance(Duration::from_secs(60));
    assert_eq!(registry.remove_idle(Duration::from_secs(90)), 1);
    // Listing is no use: it leaves the last-use times alone (`get` would count as a use).
    let mut keys: Vec<_> = registry.breakers().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(keys, ["held", "open", "recent"]);
    drop(held);
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        registry.remove_idle(Duration::from_secs(90)),
        2,
        "recent and held"
    );
    assert_eq!(registry.len(), 1, "the open one stays");
}

#[test]
fn a_control_applies_to_every_breaker() {
    let registry = Registry::new(trips_on_first_failure);
    let (a, b) = (registry.breaker("a"), registry.breaker("b"));
    registry.force_open_all();
    assert_eq!((a.state(), b.state()), (State::Open, State::Open));
    registry.release_all();
    assert_eq!((a.state(), b.state()), (State::Closed, State::Closed));
    registry.force_closed_all();
    a.allow().unwrap().failure();
    assert_eq!(a.state(), State::Closed);
}

/// 8 threads on 100 shared keys: every call lands in the one breaker the registry keeps for
/// its key, so no count is lost to a duplicate.
#[test]
fn eight_threads_share_one_breaker_per_key() {
    const THREADS: usize = 8;
    const CALLS: usize = 5_000;
    let registry: Arc<Registry<String>> = Arc::new(Registry::new(|_| Breaker::builder()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                for i in 0..CALLS {
                    let key = format!("key-{}", (i * 7 + t) % 100);
                    registry.breaker(&key).execute(|| Ok::<_, ()>(())).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(registry.len(), 100);
    let total: u64 = registry
        .breakers()
        .iter()
        .map(|(_, b)| b.counts().total_successes)
        .sum();
    assert_eq!(total, (THREADS * CALLS) as u64);
}

/// 8 threads flooding a bounded registry with new keys while calling through them.
#[test]
fn eight_threads_flood_a_bounded_registry() {
    const THREADS: usize = 8;
    let registry: Arc<Registry<String>> =
        Arc::new(Registry::new(trips_on_first_failure).max_keys(32));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                for i in 0..2_000 {
                    let key = format!("t{t}-{}", i % 200);
                    let _ =
                        registry
                            .breaker(&key)
                            .execute(|| if i % 97 == 0 { Err(()) } else { Ok(()) });
                    assert!(registry.len() <= 32);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(registry.len() <= 32);
    assert!(!registry.is_empty());
}

#[cfg(feature = "serde")]
mod from_configuration {
    use lazybreaker::config::RegistrySettings;
    use lazybreaker::State;

    const FILE: &str = r#"
        max_keys = 2
        exempt = ["Health"]
        [default]
        timeout = "30s"
        policy = { kind = "consecutive_failures", threshold = 2 }
        [breakers.Sub]
        policy = { kind = "consecutive_failures", threshold = 4 }
    "#;

    fn fail(
        registry: &lazybreaker::Registry<String, Box<dyn lazybreaker::policy::TripPolicy>>,
        key: &str,
        n: usize,
    ) {
        for _ in 0..n {
            let _ = registry.breaker(key).execute(|| Err::<(), _>("down"));
        }
    }

    #[test]
    fn named_keys_a_default_and_exempt_keys() {
        let settings: RegistrySettings = toml::from_str(FILE).unwrap();
        assert_eq!(settings.max_keys, Some(2));
        let registry = settings.build().unwrap();
        assert_eq!(registry.key_limit(), Some(2));
        fail(&registry, "Sub", 3);
        assert_eq!(
            registry.breaker("Sub").state(),
            State::Closed,
            "Sub trips on the 4th"
        );
        fail(&registry, "Sub", 1);
        assert_eq!(registry.breaker("Sub").state(), State::Open);
        fail(&registry, "Get", 2);
        assert_eq!(
            registry.breaker("Get").state(),
            State::Open,
            "the default: 2 failures"
        );
        assert_eq!(registry.breaker("Get").name(), "Get");
        registry.release_all();
        fail(&registry, "Health", 100);
        let health = registry.breaker("Health");
        assert_eq!(health.state(), State::Closed, "never broken");
        assert_eq!(health.counts().consecutive_failures, 100, "but counted");
        // Not even a fatal result (a refused connection, say) trips it.
        let fatal = |_: &Result<(), &str>| lazybreaker::policy::Outcome::Fatal;
        let _ = health.execute_classified(|| Err("refused"), fatal);
        assert_eq!(health.state(), State::Closed, "a fatal result neither");
        // A key that is not exempt opens on it at once.
        registry.release_all();
        let get = registry.breaker("Get");
        let _ = get.execute_classified(|| Err("refused"), fatal);
        assert_eq!(
            get.state(),
            State::Open,
            "fatal trips a key that is not exempt"
        );
    }

    #[test]
    fn an_invalid_entry_is_named() {
        let mut settings: RegistrySettings = toml::from_str(FILE).unwrap();
        settings.default.policy = lazybreaker::config::PolicyConfig::FailureRatio {
            ratio: 1.5,
            min_requests: 1,
        };
        let err = settings.build().err().unwrap();
        assert_eq!(err.field(), "default.policy.ratio");
        let err = toml::from_str::<RegistrySettings>(
            r#"
            [breakers.Sub]
            policy = { kind = "consecutive_failures", threshold = -4 }
            "#,
        )
        .unwrap_err();
        assert!(err.message().contains("breaker `Sub`"), "{}", err.message());
        assert!(
            err.message().contains("`policy.threshold` = -4"),
            "{}",
            err.message()
        );
        let err = toml::from_str::<RegistrySettings>("exempted = []").unwrap_err();
        assert!(
            err.message().contains("invalid `exempted`") && err.message().contains("unknown field"),
            "{}",
            err.message()
        );
    }
}

/// A `retain` closure that panics leaves the registry's size exact: what it removed stays
/// removed and no longer counts against the bound.
#[test]
fn a_panicking_retain_keeps_the_size_exact() {
    let registry = Registry::new(|_: &String| Breaker::builder()).max_keys(4);
    for key in ["a", "b", "c", "d"] {
        registry.breaker(key);
    }
    let mut seen = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        registry.retain(|_, _| {
            seen += 1;
            if seen == 3 {
                panic!("a user's closure");
            }
            false
        })
    }));
    assert!(r.is_err(), "the panic reaches the caller");
    assert_eq!(registry.len(), registry.breakers().len());
    assert_eq!(registry.len(), 2);
    for (_, b) in registry.breakers() {
        b.force_open(); // nothing evictable any more
    }
    let e = registry.try_breaker("e").expect("two places are free");
    let f = registry.try_breaker("f").expect("two places are free");
    assert!(
        registry.try_breaker("g").is_err(),
        "held or forced: nothing to evict"
    );
    drop((e, f));
}

/// A full registry that cannot make room answers a flood of new keys without growing, and
/// takes a key again once a breaker becomes idle (within one batch of insertions).
#[test]
fn a_full_registry_of_open_breakers_answers_a_flood() {
    let registry = Registry::new(trips_on_first_failure).max_keys(32);
    for i in 0..32 {
        registry
            .breaker(&format!("k{i}"))
            .allow()
            .unwrap()
            .failure();
    }
    for i in 0..1_000 {
        let b = registry.breaker(&format!("new{i}"));
        assert_eq!(b.state(), State::Closed, "an unkept breaker of its own");
    }
    assert_eq!((registry.len(), registry.overflowed()), (32, 1_000));
    // Closed and idle again: evictable.
    registry.breaker("k0").release();
    // Held, so that a kept one is busy and cannot be evicted by the next.
    let attempts: Vec<_> = (0..2)
        .map(|i| registry.try_breaker(&format!("later{i}")))
        .collect();
    let kept = attempts.iter().filter(|r| r.is_ok()).count();
    assert_eq!(
        kept, 1,
        "the next scan (within a batch of 2 insertions) finds it"
    );
    assert_eq!(registry.len(), 32);
}

/// `execute` and `with` run the call through the key's breaker, built on first use, and lend
/// it: no `Arc` is cloned for the call.
#[test]
fn execute_and_with_lend_the_keys_breaker() {
    let built = Arc::new(AtomicUsize::new(0));
    let registry: Registry<String> = Registry::new({
        let built = Arc::clone(&built);
        move |key| {
            built.fetch_add(1, Ordering::SeqCst);
            trips_on_first_failure(key)
        }
    });
    assert_eq!(registry.execute("a", || Ok::<_, ()>(1)), Ok(1));
    assert_eq!(built.load(Ordering::SeqCst), 1, "built on first use");
    let a = registry.breaker("a");
    let (same, held) = registry.with("a", |lent| (std::ptr::eq(lent, &*a), Arc::strong_count(&a)));
    assert!(same, "`with` lends the key's breaker");
    assert_eq!(held, 2, "the registry's and this test's: none for the call");
    assert_eq!(a.totals().successes, 1);
    let _ = registry.execute("a", || Err::<(), _>("down"));
    assert_eq!(a.state(), State::Open);
    let rejected = registry.execute("a", || -> Result<(), &str> { panic!("not called") });
    assert!(matches!(rejected, Err(lazybreaker::Error::Rejected(_))));
    assert_eq!(registry.with("b", |b| b.name().to_owned()), "b");
    assert_eq!((built.load(Ordering::SeqCst), registry.len()), (2, 2));
}

/// A full registry that can make no room still runs the call: on a breaker of the key's own
/// that it does not keep, counted in `overflowed`.
#[test]
fn a_full_registry_lends_an_unkept_breaker() {
    let registry = Registry::new(trips_on_first_failure).max_keys(1);
    registry.breaker("forced").force_open();
    assert_eq!(registry.execute("new", || Ok::<_, ()>(3)), Ok(3));
    assert!(registry.get("new").is_none());
    assert_eq!((registry.len(), registry.overflowed()), (1, 1));
}

/// `retain` and `for_each` hold no lock of the registry while they run user code: a closure
/// may call the registry itself.
#[test]
fn retain_and_for_each_may_call_the_registry() {
    let registry = Registry::new(|_: &String| Breaker::builder());
    for key in ["a", "b", "c"] {
        registry.breaker(key);
    }
    registry.retain(|key, _| {
        // Removing another key from inside the sweep, and looking one up.
        if key == "a" {
            registry.remove("c");
        }
        registry.get("b").is_some() && key != "b"
    });
    assert!(registry.get("b").is_none());
    assert_eq!(registry.len(), registry.breakers().len());
    let mut seen = 0;
    registry.for_each(|b| {
        seen += 1;
        assert!(registry.get(b.name()).is_some());
    });
    assert_eq!(seen, registry.len());
}

/// Calls lent a breaker while other threads remove the key (over and over) are all counted:
/// by the key's breaker of the moment or by one removed while the call ran.
#[test]
fn every_lent_call_is_counted_while_its_key_is_removed() {
    const THREADS: usize = 4;
    const CALLS: u64 = 5_000;
    let registry = Registry::new(|_: &String| Breaker::builder());
    let removed = std::sync::Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..CALLS {
                    registry.execute("hot", || Ok::<_, ()>(())).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..2_000 {
                if let Some(b) = registry.remove("hot") {
                    removed.lock().unwrap().push(b);
                }
                thread::yield_now();
            }
        });
    });
    let counted: u64 = removed
        .into_inner()
        .unwrap()
        .iter()
        .chain(registry.get("hot").as_ref())
        .map(|b| b.totals().successes)
        .sum();
    assert_eq!(counted, THREADS as u64 * CALLS);
    assert!(registry.len() <= 1);
}

/// A key whose `Hash` panics while it is being inserted gives its place in the bound back:
/// two such panics no longer leave a `max_keys(2)` registry refusing every key.
#[test]
fn item_11_a_key_whose_hash_panics_leaks_no_place_in_a_bounded_registry() {
    use std::hash::{Hash, Hasher};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Hashes panic while `PANICS` is above zero, counting down.
    static PANICS: AtomicUsize = AtomicUsize::new(0);

    #[derive(Clone, PartialEq, Eq)]
    struct Key(&'static str);
    impl Hash for Key {
        fn hash<H: Hasher>(&self, state: &mut H) {
            if PANICS
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                panic!("the key's hash panicked");
            }
            self.0.hash(state);
        }
    }
    impl std::fmt::Display for Key {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    let registry = Registry::new(|_: &Key| Breaker::builder()).max_keys(2);
    // A new key each time, its n-th hash panicking (the lookup's, then the map's own): a
    // panic anywhere in the insertion.
    let mut panicked = 0;
    for (key, n) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
        PANICS.store(n, Ordering::SeqCst);
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = registry.try_breaker(&Key(key));
        }));
        PANICS.store(0, Ordering::SeqCst);
        panicked += usize::from(attempt.is_err());
    }
    assert!(panicked >= 2, "the insertion hashes the key at least twice");
    // The registry counts what it holds, no more.
    let mut held = 0;
    registry.for_each(|_| held += 1);
    assert_eq!(registry.len(), held);
    // Emptied, both places are free again for two new keys.
    registry.retain(|_, _| false);
    assert_eq!(registry.len(), 0);
    assert!(registry.try_breaker(&Key("x")).is_ok(), "x refused");
    assert!(registry.try_breaker(&Key("y")).is_ok(), "y refused");
    assert_eq!(registry.len(), 2);
}
