//! Room in a bounded registry: it answers full only when nothing is idle, after a fruitless
//! scan and under a flood of distinct keys alike. (Item 4 of the third reliability round.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use lazybreaker::{Breaker, ManualClock, Registry};

/// Item 4: after a scan that found nothing idle (every breaker forced open), `release_all`
/// makes every breaker idle, and the next new keys all find room: none is answered full
/// because of the scans the fruitless one had skipped.
#[test]
fn item_4_registry_full_only_when_nothing_idle() {
    let clock = ManualClock::new();
    let registry = Registry::new(|_: &String| Breaker::builder())
        .max_keys(64)
        .clock(clock.clone());
    for i in 0..64 {
        registry.breaker(&format!("k{i}"));
    }
    registry.force_open_all();
    assert!(
        registry.try_breaker("refused").is_err(),
        "every breaker forced open: nothing idle"
    );
    registry.release_all();
    for i in 0..8 {
        let key = format!("new{i}");
        assert!(
            registry.try_breaker(&key).is_ok(),
            "{key}: 64 idle closed breakers exist"
        );
    }
    assert_eq!((registry.len(), registry.overflowed()), (64, 0));
    // A registry that truly cannot make room still refuses (the skipped scans kept).
    registry.force_open_all();
    assert!(registry.try_breaker("refused again").is_err());
    assert!(registry.try_breaker("and again").is_err());
}

/// Item 4: threads flooding a bounded registry with distinct keys, each holding at most one
/// breaker at a time, never find it full: a scan that finds its idle breakers taken by a
/// concurrent scan, or an eviction whose room another insertion took, tries again.
#[test]
fn item_4_registry_flood_of_distinct_keys_never_full() {
    const THREADS: usize = 4;
    const KEYS: usize = 2_000;
    let registry = Arc::new(
        Registry::new(|_: &String| Breaker::builder())
            .max_keys(64)
            .clock(ManualClock::new()),
    );
    let full = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let registry = Arc::clone(&registry);
            let full = Arc::clone(&full);
            thread::spawn(move || {
                for i in 0..KEYS {
                    let key = format!("t{t}-k{i}");
                    if i % 2 == 0 {
                        match registry.try_breaker(&key) {
                            Ok(b) => b.execute(|| Ok::<_, ()>(())).unwrap(),
                            Err(_) => {
                                full.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    } else {
                        registry.breaker(&key).execute(|| Ok::<_, ()>(())).unwrap();
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(
        (full.load(Ordering::Relaxed), registry.overflowed()),
        (0, 0),
        "at most {THREADS} breakers in use of 64: never full"
    );
    assert!(registry.len() <= 64);
}
