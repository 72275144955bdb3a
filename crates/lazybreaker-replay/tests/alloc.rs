//! Recording allocates nothing per call, on or off: counted, not timed. A counting global
//! allocator (`stats_alloc`) counts every allocation of the process; this target has its
//! own `main` (`harness = false`) and starts no thread, so between two readings of the
//! counter only the code under test runs. Each check warms its path up first (the recorder
//! allocates its ring when built), then asserts that [`CALLS`] further calls allocate,
//! reallocate and free nothing.

use std::alloc::System;
use std::hint::black_box;
use std::process::ExitCode;

use lazybreaker::policy::Outcome;
use lazybreaker::{Breaker, ManualClock};
use lazybreaker_replay::Recorder;
use stats_alloc::{Region, Stats, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Calls before counting.
const WARM_UP: usize = 1_000;
/// Calls counted, after the warm-up.
const CALLS: usize = 10_000;

/// The heap traffic of [`CALLS`] runs of `call`, after [`WARM_UP`] uncounted runs.
fn count(mut call: impl FnMut()) -> Stats {
    for _ in 0..WARM_UP {
        call();
    }
    let region = Region::new(GLOBAL);
    for _ in 0..CALLS {
        call();
    }
    region.change()
}

#[inline(never)]
fn ok() -> Result<u64, &'static str> {
    Ok(black_box(1))
}

type Check = (&'static str, fn() -> Stats);

fn checks() -> Vec<Check> {
    vec![
        ("recorder_on_keyed", || {
            // Recording, into a ring that is full (it overwrites), under a key seen before.
            let recorder = Recorder::with_clock(64, ManualClock::new());
            let b = Breaker::builder().build();
            recorder.start();
            count(|| {
                let call = recorder.begin().unwrap();
                black_box(b.execute(ok)).unwrap();
                call.end_keyed("api.example.com", Outcome::Success);
            })
        }),
        ("recorder_off", || {
            let recorder = Recorder::new(64);
            let b = Breaker::builder().build();
            count(|| {
                black_box(recorder.execute(&b, ok)).unwrap();
            })
        }),
    ]
}

fn main() -> ExitCode {
    // The counter itself must see an allocation per call where there is one.
    let boxed = count(|| drop(black_box(Box::new(black_box(7u64)))));
    assert_eq!(
        (boxed.allocations, boxed.deallocations),
        (CALLS, CALLS),
        "the counting allocator missed a Box per call"
    );
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let checks: Vec<_> = checks()
        .into_iter()
        .filter(|(name, _)| filter.as_deref().is_none_or(|f| name.contains(f)))
        .collect();
    println!("\nrunning {} allocation checks", checks.len());
    let mut failed = 0;
    for (name, check) in &checks {
        let stats = check();
        let clean = stats.allocations == 0 && stats.reallocations == 0 && stats.deallocations == 0;
        println!(
            "test {name} ... {} ({} allocations, {} reallocations, {} deallocations)",
            if clean { "ok" } else { "FAILED" },
            stats.allocations,
            stats.reallocations,
            stats.deallocations,
        );
        failed += usize::from(!clean);
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed\n",
        if failed == 0 { "ok" } else { "FAILED" },
        checks.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
