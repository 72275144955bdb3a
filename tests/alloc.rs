//! Zero heap allocations per call, on every hot path: counted, not timed, so the
//! figure is exact and the same on every run. The one exception by design, checked too: a
//! rejection that names its breaker ([`lazybreaker::RejectedBy`]) copies the name.
//!
//! A counting global allocator (`stats_alloc`, wrapping `std::alloc::System`; this package
//! forbids `unsafe_code`, so the `GlobalAlloc` impl comes from that crate) counts every
//! allocation, reallocation and deallocation of the process. This target has its own `main`
//! (`harness = false` in Cargo.toml) and starts no thread, so between two readings of the
//! counter the only code running is the code under test: nothing else can allocate.
//!
//! Each check warms its path up first (a breaker allocates its bucket ring and its small
//! callback queue when it is built, the rules no breaker built before shares, and what an
//! idle breaker never touches on its first trip, rejection, exclusion or forced state; the
//! standard library initialises some thread-locals on first use), then asserts that
//! [`CALLS`] further calls allocate, reallocate and free nothing at all.
//!
//! Run it with `cargo test --test alloc`; `cargo test --test alloc -- NAME` runs the checks
//! whose name contains `NAME`.

mod support;

use std::alloc::System;
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::observe::History;
use lazybreaker::policy::{Ema, EmaConfig, Outcome};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
use stats_alloc::{Region, Stats, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Calls before counting.
const WARM_UP: usize = 1_000;
/// Calls counted, after the warm-up.
const CALLS: usize = 10_000;
/// An open period no check outlives on the real clock.
const LONG: Duration = Duration::from_secs(3600);
/// The most an idle default breaker takes, inline and on the heap (256 bytes on x86-64).
const IDLE_BREAKER_BYTES: usize = 256;
/// The most a `Registry<u64>` of 10⁵ idle keys holds a key (380 bytes on x86-64).
const REGISTRY_KEY_BYTES: u64 = 400;

/// The heap traffic of `calls` runs of `call`, after `warm_up` uncounted runs.
fn count_with(warm_up: usize, calls: usize, mut call: impl FnMut()) -> Stats {
    for _ in 0..warm_up {
        call();
    }
    let region = Region::new(GLOBAL);
    for _ in 0..calls {
        call();
    }
    region.change()
}

/// The heap traffic of [`CALLS`] runs of `call`, after [`WARM_UP`] uncounted runs.
fn count(call: impl FnMut()) -> Stats {
    count_with(WARM_UP, CALLS, call)
}

/// One successful call.
#[inline(never)]
fn ok() -> Result<u64, &'static str> {
    Ok(black_box(1))
}

/// One failed call.
#[inline(never)]
fn err() -> Result<u64, &'static str> {
    Err(black_box("refused"))
}

/// The default breaker (gobreaker's settings), tripped open for [`LONG`].
/// A breaker (30 s timeout, on a manual clock) whose callback counts the changes delivered.
fn counting_callbacks() -> (Breaker, ManualClock, Arc<AtomicUsize>) {
    let changes = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&changes);
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .timeout(Duration::from_secs(30))
        .clock(clock.clone())
        .on_state_change(move |_, _, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .build();
    (b, clock, changes)
}

fn open_breaker() -> Breaker {
    let breaker = Breaker::builder().timeout(LONG).build();
    support::setup::trip(&breaker);
    breaker
}

/// A half-open breaker on a manual clock, its one probe slot taken by the permit returned
/// alongside.
fn half_open_full(clock: &ManualClock) -> Breaker {
    let breaker = Breaker::builder()
        .timeout(Duration::from_secs(1))
        .clock(clock.clone())
        .build();
    support::setup::half_open(&breaker, clock, Duration::from_secs(2));
    breaker
}

/// A breaker whose policy never trips, to count failures without the breaker opening.
fn never_trips() -> Breaker<impl lazybreaker::policy::TripPolicy> {
    Breaker::builder().ready_to_trip(|_| false).build()
}

/// A check: its name, and a run that returns the heap traffic it counted.
type Check = (&'static str, fn() -> Stats);

/// Every check.
fn checks() -> Vec<Check> {
    #[allow(unused_mut)] // pushed to with some features only
    let mut checks: Vec<Check> = vec![
        ("closed/execute_success", || {
            let b = Breaker::builder().build();
            count(|| {
                black_box(b.execute(ok)).unwrap();
            })
        }),
        ("closed/ratio_windows", || {
            // A failure ratio over each window kind, 1 % failures: rolling buckets (the first
            // roll after warm-up included), a fixed window, and the last 100 calls.
            let ratio = || lazybreaker::policy::FailureRatio::new(0.5, 20).unwrap();
            let windows = [
                Breaker::builder()
                    .policy(ratio())
                    .interval(std::time::Duration::from_secs(10))
                    .bucket_period(std::time::Duration::from_secs(1))
                    .build(),
                Breaker::builder()
                    .policy(ratio())
                    .interval(std::time::Duration::from_secs(10))
                    .build(),
                Breaker::builder().policy(ratio()).count_window(100).build(),
            ];
            let mut i = 0u32;
            let stats = count(|| {
                i += 1;
                for b in &windows {
                    let _ = black_box(b.execute(if i.is_multiple_of(100) { err } else { ok }));
                }
            });
            assert!(windows.iter().all(|b| b.state() == State::Closed));
            stats
        }),
        ("closed/execute_failure", || {
            let b = never_trips();
            count(|| {
                black_box(b.execute(err)).unwrap_err();
            })
        }),
        ("closed/execute_failure_default_policy", || {
            // Five failures then a success, over and over: the default policy never trips.
            let b = Breaker::builder().build();
            let mut i = 0u32;
            let stats = count(|| {
                i += 1;
                let _ = black_box(b.execute(if i.is_multiple_of(6) { ok } else { err }));
            });
            assert_eq!(b.state(), State::Closed);
            stats
        }),
        ("closed/execute_classified_excluded", || {
            let b = Breaker::builder().build();
            count(|| {
                let _ = black_box(b.execute_classified(err, |_| Outcome::Excluded));
            })
        }),
        ("closed/allow_success", || {
            let b = Breaker::builder().build();
            count(|| b.allow().unwrap().success())
        }),
        ("closed/allow_failure", || {
            let b = never_trips();
            count(|| b.allow().unwrap().failure())
        }),
        ("closed/allow_exclude", || {
            let b = Breaker::builder().build();
            count(|| b.allow().unwrap().exclude())
        }),
        ("closed/allow_record", || {
            let b = never_trips();
            let outcomes = [Outcome::Success, Outcome::Failure, Outcome::Excluded];
            let mut i = 0;
            count(|| {
                i += 1;
                b.allow().unwrap().record(outcomes[i % 3]);
            })
        }),
        ("closed/dropped_permit", || {
            let b = Breaker::builder().build();
            count(|| drop(black_box(b.allow().unwrap())))
        }),
        ("closed/allow_owned_success", || {
            // Clones the `Arc` into the permit: a reference count, not an allocation.
            let b = Arc::new(Breaker::builder().build());
            count(|| b.allow_owned().unwrap().success())
        }),
        ("closed/allow_owned_dropped", || {
            let b = Arc::new(Breaker::builder().build());
            count(|| drop(black_box(b.allow_owned().unwrap())))
        }),
        ("open/execute_rejected", || {
            let b = open_breaker();
            count(|| {
                let r = black_box(b.execute(ok));
                assert!(matches!(r, Err(Error::Rejected(Rejected::Open { .. }))));
            })
        }),
        ("open/allow_rejected", || {
            let b = open_breaker();
            count(|| {
                let r = black_box(b.allow());
                assert!(matches!(r, Err(Rejected::Open { .. })));
            })
        }),
        ("half_open/allow_rejected", || {
            let clock = ManualClock::new();
            let b = half_open_full(&clock);
            let probe = b.allow().unwrap();
            let stats = count(|| {
                let r = black_box(b.allow());
                assert!(matches!(r, Err(Rejected::TooManyRequests)));
            });
            probe.success();
            stats
        }),
        ("half_open/execute_rejected", || {
            let clock = ManualClock::new();
            let b = half_open_full(&clock);
            let probe = b.allow().unwrap();
            let stats = count(|| {
                let r = black_box(b.execute(ok));
                assert!(matches!(r, Err(Error::Rejected(Rejected::TooManyRequests))));
            });
            probe.success();
            stats
        }),
        ("half_open/probe_excluded", || {
            // A probe slot taken and given back (an exclusion keeps the breaker half-open).
            let clock = ManualClock::new();
            let b = half_open_full(&clock);
            let stats = count(|| b.allow().unwrap().exclude());
            assert_eq!(b.state(), State::HalfOpen);
            stats
        }),
        ("interval/execute_success", || {
            let b = Breaker::builder().interval(Duration::from_secs(10)).build();
            count(|| {
                black_box(b.execute(ok)).unwrap();
            })
        }),
        ("interval/expiring", || {
            // The fixed window expires every 10 calls: a new generation each time.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .interval(Duration::from_secs(10))
                .clock(clock.clone())
                .build();
            let mut i = 0u32;
            count(|| {
                i += 1;
                clock.advance(Duration::from_millis(1_001));
                let _ = black_box(b.execute(if i.is_multiple_of(3) { err } else { ok }));
            })
        }),
        ("interval/stale_permit", || {
            // A permit from an expired generation: its result is dropped, not counted.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .interval(Duration::from_secs(10))
                .clock(clock.clone())
                .build();
            count(|| {
                let permit = b.allow().unwrap();
                clock.advance(Duration::from_secs(11));
                permit.failure();
            })
        }),
        ("rolling/execute_success", || {
            let b = Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .build();
            count(|| {
                black_box(b.execute(ok)).unwrap();
            })
        }),
        ("rolling/rolling_buckets", || {
            // A bucket rolls every few calls; every 100th call comes after an hour's idle,
            // which rolls the whole ring.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .clock(clock.clone())
                .build();
            let mut i = 0u32;
            count(|| {
                i += 1;
                let step = if i.is_multiple_of(100) {
                    LONG
                } else {
                    Duration::from_millis(300)
                };
                clock.advance(step);
                let _ = black_box(b.execute(if i.is_multiple_of(3) { err } else { ok }));
            })
        }),
        ("rolling/max_buckets", || {
            // A bucket period so short that the ring is widened to its maximum length.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_nanos(1))
                .clock(clock.clone())
                .build();
            count(|| {
                clock.advance(Duration::from_millis(7));
                black_box(b.execute(ok)).unwrap();
            })
        }),
        ("ema/execute", || {
            // brpc's defaults; 1 failure in 100 calls of the same latency stays under both
            // windows' budgets. The latency comes from a manual clock: on the real one, a
            // loaded machine (a compiler running beside the test) made a failure slow
            // enough to break the short window now and then.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .policy(Ema::new(EmaConfig::default()).unwrap())
                .clock(clock.clone())
                .build();
            let mut i = 0u32;
            let stats = count_with(5_000, CALLS, || {
                i += 1;
                let call = if i.is_multiple_of(100) { err } else { ok };
                let _ = black_box(b.execute(|| {
                    clock.advance(Duration::from_millis(1));
                    call()
                }));
            });
            assert_eq!(b.state(), State::Closed);
            stats
        }),
        ("ema/allow_failure_with_latency", || {
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .policy(Ema::new(EmaConfig::default()).unwrap())
                .clock(clock.clone())
                .build();
            let mut i = 0u32;
            count_with(5_000, CALLS, || {
                i += 1;
                let permit = b.allow().unwrap();
                clock.advance(Duration::from_micros(300));
                if i.is_multiple_of(100) {
                    permit.failure()
                } else {
                    permit.success()
                }
            })
        }),
        ("read/state", || {
            let b = Breaker::builder().build();
            count(|| {
                black_box(b.state());
            })
        }),
        ("read/counts", || {
            let b = Breaker::builder().build();
            count(|| {
                black_box(b.counts());
            })
        }),
        ("read/totals", || {
            let b = Breaker::builder().build();
            count(|| {
                black_box(b.totals());
            })
        }),
        ("read/open_state_and_counts", || {
            let b = open_breaker();
            count(|| {
                black_box((b.state(), b.counts(), b.totals()));
            })
        }),
        ("cycle/trip_recover_with_callback", || {
            // closed -> open -> half-open -> closed, each change delivered to a callback.
            // The first cycle may size the callback queue; the later ones allocate nothing.
            let (b, clock, changes) = counting_callbacks();
            let cycle = || {
                for _ in 0..6 {
                    let _ = b.execute(err);
                }
                assert_eq!(b.state(), State::Open);
                clock.advance(Duration::from_secs(31));
                assert_eq!(b.state(), State::HalfOpen);
                b.execute(ok).unwrap();
                assert_eq!(b.state(), State::Closed);
            };
            let stats = count_with(1, 1_000, cycle);
            assert_eq!(changes.load(Ordering::Relaxed), 3 * 1_001);
            stats
        }),
        ("cycle/reopen_from_half_open_with_callback", || {
            // closed -> open -> half-open -> open (the probe fails) -> half-open -> closed.
            let (b, clock, changes) = counting_callbacks();
            let cycle = || {
                for _ in 0..6 {
                    let _ = b.execute(err);
                }
                clock.advance(Duration::from_secs(31));
                let _ = b.execute(err);
                assert_eq!(b.state(), State::Open);
                clock.advance(Duration::from_secs(31));
                b.execute(ok).unwrap();
                assert_eq!(b.state(), State::Closed);
            };
            let stats = count_with(1, 1_000, cycle);
            assert_eq!(changes.load(Ordering::Relaxed), 5 * 1_001);
            stats
        }),
        ("pool/pick_and_report", || {
            // Sixteen closed endpoints: a pick reads the endpoints, chooses, admits and
            // reports without touching the heap.
            let pool = lazybreaker::pool::Pool::new(|_: &u32| Breaker::builder());
            pool.set(0..16);
            count(|| pool.pick().unwrap().success())
        }),
        ("pool/pick_skipping_an_isolated_endpoint", || {
            // Two endpoints, one isolated: the picks that draw it first walk to the other,
            // also without touching the heap.
            let pool = lazybreaker::pool::Pool::new(|_: &u32| Breaker::builder());
            pool.set(0..2);
            pool.breaker(&1).unwrap().trip_for(LONG);
            count(|| {
                let pick = pool.pick().unwrap();
                assert_eq!(*pick.key(), 0);
                pick.success();
            })
        }),
        ("registry/allow_admitted", || {
            let registry = lazybreaker::Registry::new(|_: &String| Breaker::builder());
            count(|| registry.allow("search").unwrap().success())
        }),
        ("registry/execute_lends_the_breaker", || {
            let registry = lazybreaker::Registry::new(|_: &String| Breaker::builder());
            count(|| {
                black_box(registry.execute("search", ok)).unwrap();
            })
        }),
        ("registry/with_lends_the_breaker", || {
            let registry = lazybreaker::Registry::new(|_: &String| Breaker::builder());
            count(|| registry.with("search", |b| b.allow().unwrap().success()))
        }),
        ("registry/allow_rejected_names_the_breaker", || {
            // The one path that allocates by design: a rejection that names its breaker
            // copies the name (one allocation, freed with the rejection), so that the open
            // path writes nothing shared.
            let registry = lazybreaker::Registry::new(|_: &String| Breaker::builder());
            registry.breaker("search").trip_for(LONG);
            count(|| {
                let r = black_box(registry.allow("search"));
                assert!(r.is_err_and(|by| by.breaker() == "search"));
            })
        }),
        ("memory/ten_thousand_idle_breakers_allocate_nothing", || {
            // A registry of mostly idle breakers: an uncontended breaker lives in its own
            // `size_of` (no stripes, no callback queue, no bucket ring, no cold part) and the
            // rules it shares, so building and calling ten thousand of them touches the heap
            // not at all.
            let mut breakers: Vec<Breaker> = Vec::with_capacity(10_000);
            // Default breakers read their rules from a static: none allocates them.
            let region = Region::new(GLOBAL);
            for _ in 0..10_000 {
                breakers.push(Breaker::builder().build());
            }
            for b in &breakers {
                black_box(b.execute(ok)).unwrap();
                b.allow().unwrap().failure();
            }
            let stats = region.change();
            println!(
                "  (a breaker takes {} bytes inline; contention adds 128 bytes per stripe, \
                 one stripe per core, 2 to 64)",
                std::mem::size_of::<Breaker>()
            );
            drop(breakers);
            stats
        }),
        ("memory/an_idle_default_breaker_is_small", || {
            // An idle default breaker: its inline size, and nothing on the heap of its own
            // (no stripes, no slow-call slots, no bucket ring, no name, no cold part: a
            // trip, a rejection or a forced state builds that, nor rules of its own: a
            // default breaker's are in a static). In an `Arc` (a registry's), the `Arc`'s two
            // counts and nothing else besides.
            const BOUND: usize = IDLE_BREAKER_BYTES;
            let inline = std::mem::size_of::<Breaker>();
            assert!(inline <= BOUND, "a breaker takes {inline} bytes inline");
            let region = Region::new(GLOBAL);
            let breaker = black_box(Breaker::builder().build());
            let built = region.change();
            assert_eq!(
                (built.allocations, built.bytes_allocated),
                (0, 0),
                "an idle default breaker allocated"
            );
            assert!(
                inline + built.bytes_allocated <= BOUND,
                "an idle default breaker takes {} bytes inline and on the heap",
                inline + built.bytes_allocated
            );
            // Its calls keep it idle: a success and a failure build nothing.
            let region = Region::new(GLOBAL);
            black_box(breaker.execute(ok)).unwrap();
            breaker.allow().unwrap().failure();
            assert_eq!(
                region.change().allocations,
                0,
                "an idle breaker's calls allocated"
            );
            // The first breaker built by rules no other has allocates them, once.
            let region = Region::new(GLOBAL);
            let alone = black_box(Breaker::builder().timeout(Duration::from_secs(61)).build());
            let own = region.change();
            assert_eq!(own.allocations, 1);
            assert!(
                own.bytes_allocated <= 136,
                "a breaker's own rules take {} bytes",
                own.bytes_allocated
            );
            drop(alone);
            let region = Region::new(GLOBAL);
            let shared = black_box(Arc::new(breaker));
            let boxed = region.change();
            assert_eq!(boxed.allocations, 1);
            assert!(
                boxed.bytes_allocated <= inline + 16,
                "a breaker in an `Arc` takes {} bytes",
                boxed.bytes_allocated
            );
            drop(shared);
            built
        }),
        ("memory/a_registry_key_is_small", || {
            // A registry of idle keys: the breaker in its `Arc`, the slot, the name (the key's
            // `Display`) and the map's share, per key.
            const KEYS: u64 = 100_000;
            let region = Region::new(GLOBAL);
            let registry = lazybreaker::Registry::new(|_: &u64| Breaker::builder());
            for key in 0..KEYS {
                black_box(registry.execute(&key, ok)).unwrap();
            }
            let stats = region.change();
            let held = (stats.bytes_allocated as i64 + stats.bytes_reallocated as i64
                - stats.bytes_deallocated as i64) as u64;
            println!("  (a registry holds {} bytes a key)", held / KEYS);
            assert!(
                held / KEYS <= REGISTRY_KEY_BYTES,
                "a registry holds {} bytes a key",
                held / KEYS
            );
            drop(registry);
            // Counted for the assertions above, not for the per-call figure.
            Stats::default()
        }),
        ("cycle/history_records_every_change", || {
            // A history smaller than the changes made: its ring wraps many times, and a
            // breaker name as long as a slot keeps (64 bytes) is copied into the slot.
            let clock = ManualClock::new();
            let history = Arc::new(History::new(8));
            let b = Breaker::builder()
                .name("a-breaker-name-exactly-as-long-as-a-history-slot-keeps-64-bytes")
                .ready_to_trip(|counts| counts.consecutive_failures >= 1)
                .timeout(Duration::from_secs(5))
                .clock(clock.clone())
                .observer(Arc::clone(&history))
                .build();
            let before = history.recorded();
            let cycle = || {
                b.execute(err).unwrap_err(); // closed -> open
                clock.advance(Duration::from_secs(6)); // open -> half-open
                assert_eq!(b.state(), State::HalfOpen);
                b.execute(ok).unwrap(); // half-open -> closed
            };
            let stats = count_with(1, 200, cycle);
            // Three changes a cycle, every one recorded, the warm-up's too.
            assert_eq!(history.recorded() - before, 3 * 201);
            assert_eq!(history.recent().len(), 8);
            stats
        }),
        ("cycle/ema_isolation", || {
            // brpc's EMA trips, isolates (doubling), revives through half-open.
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .policy(
                    Ema::new(EmaConfig {
                        short_window_size: 10,
                        short_window_error_percent: 20,
                        long_window_size: 20,
                        long_window_error_percent: 10,
                        ..EmaConfig::default()
                    })
                    .unwrap(),
                )
                .clock(clock.clone())
                .on_state_change(|_, _, _| {})
                .build();
            let cycle = || {
                while b.state() == State::Closed {
                    let permit = b.allow().unwrap();
                    clock.advance(Duration::from_millis(2));
                    permit.failure();
                }
                clock.advance(Duration::from_secs(60));
                assert_eq!(b.state(), State::HalfOpen);
                b.execute(ok).unwrap();
                assert_eq!(b.state(), State::Closed);
            };
            count_with(1, 200, cycle)
        }),
    ];
    checks
}

/// The counter itself: it must see an allocation per call where there is one, including
/// the crate's own (building a breaker allocates its bucket ring and callback queue), or
/// every zero above would prove nothing.
fn self_check() {
    let boxed = count(|| drop(black_box(Box::new(black_box(7u64)))));
    assert_eq!(
        (boxed.allocations, boxed.deallocations),
        (CALLS, CALLS),
        "the counting allocator missed a Box per call"
    );
    let built = count_with(0, 1, || {
        black_box(
            Breaker::builder()
                .interval(Duration::from_secs(10))
                .bucket_period(Duration::from_secs(1))
                .on_state_change(|_, _, _| {})
                .build(),
        );
    });
    assert!(
        built.allocations > 0,
        "the counting allocator saw no allocation when a breaker was built"
    );
    println!(
        "self check: a Box per call counts {} allocations in {CALLS} calls; building a breaker counts {}",
        boxed.allocations, built.allocations
    );
}

fn main() -> ExitCode {
    self_check();
    // `cargo test` passes its own flags through; a bare word filters the checks by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let checks: Vec<_> = checks()
        .into_iter()
        .filter(|(name, _)| filter.as_deref().is_none_or(|f| name.contains(f)))
        .collect();
    println!("\nrunning {} allocation checks", checks.len());
    let mut failed = Vec::new();
    for (name, check) in &checks {
        let stats = check();
        // Per call, one allocation of the name and one free where a rejection names its
        // breaker; nothing anywhere else.
        let each = if name.ends_with("names_the_breaker") {
            CALLS
        } else {
            0
        };
        let clean =
            stats.allocations == each && stats.reallocations == 0 && stats.deallocations == each;
        println!(
            "test {name} ... {} ({} allocations, {} reallocations, {} deallocations, {} bytes)",
            if clean { "ok" } else { "FAILED" },
            stats.allocations,
            stats.reallocations,
            stats.deallocations,
            stats.bytes_allocated,
        );
        if !clean {
            failed.push(*name);
        }
    }
    let passed = checks.len() - failed.len();
    if failed.is_empty() {
        println!("\ntest result: ok. {passed} passed; 0 failed\n");
        ExitCode::SUCCESS
    } else {
        println!("\nfailures: {}", failed.join(", "));
        println!(
            "\ntest result: FAILED. {passed} passed; {} failed\n",
            failed.len()
        );
        ExitCode::FAILURE
    }
}
