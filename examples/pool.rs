//! brpc-style node isolation in a client's pool of five nodes, printed as a timeline: one
//! node crashes, is isolated for 100 ms doubling at each failed health check, and comes
//! back; the pool revives it through its health check, with no timer, and the share of
//! traffic per node shows it leave and return.
//!
//! Time is simulated (a `ManualClock` advanced 50 ms per tick, 20 requests a tick), so the
//! example runs in a blink and prints the same timeline every time.
//!
//! Run with `cargo run --example pool`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lazybreaker::policy::{Backoff, ConsecutiveFailures};
use lazybreaker::pool::Pool;
use lazybreaker::{Breaker, ManualClock, State};

const NODES: usize = 5;
const CRASHED: usize = 2;
const TICK: Duration = Duration::from_millis(50);
const REQUESTS_PER_TICK: usize = 20;

/// Runs a future that never waits on anything but itself (the simulated check is ready at
/// once).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
    }
}

fn main() -> Result<(), lazybreaker::ConfigError> {
    let clock = ManualClock::new();
    let up: Arc<Vec<AtomicBool>> = Arc::new((0..NODES).map(|_| AtomicBool::new(true)).collect());
    let at = {
        let clock = clock.clone();
        move || clock.now().as_millis()
    };
    let pool = {
        let at = at.clone();
        let up = Arc::clone(&up);
        // brpc's isolation: 100 ms, doubled at each failed revival, at most 30 s.
        Pool::new(move |_: &usize| {
            let at = at.clone();
            Breaker::builder()
                .policy(
                    Backoff::new(
                        ConsecutiveFailures::new(3).expect("valid"),
                        Duration::from_millis(100),
                        Duration::from_secs(30),
                    )
                    .expect("valid"),
                )
                .on_state_change(move |name, from, to| {
                    println!("{:>6} ms  node {name}: {from} -> {to}", at());
                })
        })
        .clock(clock.clone())
        .health_check(move |node: &usize| {
            let passes = up[*node].load(Ordering::SeqCst);
            std::future::ready(passes)
        })
    };
    pool.set(0..NODES);

    let mut share = [0usize; NODES];
    for tick in 0..120 {
        let ms = tick * TICK.as_millis() as usize;
        if ms == 1_000 {
            println!("{ms:>6} ms  node {CRASHED} crashes");
            up[CRASHED].store(false, Ordering::SeqCst);
        }
        if ms == 4_000 {
            println!("{ms:>6} ms  node {CRASHED} is back");
            up[CRASHED].store(true, Ordering::SeqCst);
        }
        for _ in 0..REQUESTS_PER_TICK {
            let pick = block_on(pool.pick_async()).expect("four nodes always take calls");
            let node = *pick.key();
            share[node] += 1;
            if up[node].load(Ordering::SeqCst) {
                pick.success();
            } else {
                pick.failure();
            }
        }
        if (ms + TICK.as_millis() as usize).is_multiple_of(1_000) {
            let total: usize = share.iter().sum();
            let shares: Vec<String> = share
                .iter()
                .map(|n| format!("{:>3}%", n * 100 / total.max(1)))
                .collect();
            println!(
                "{:>6} ms  share {}",
                ms + TICK.as_millis() as usize,
                shares.join(" ")
            );
            share = [0; NODES];
        }
        clock.advance(TICK);
    }
    let crashed = pool.breaker(&CRASHED).expect("in the pool");
    let totals = crashed.totals();
    println!(
        "node {CRASHED}: {:?}, isolated {} times, health checks {} ({} failed)",
        crashed.state(),
        totals.opened,
        totals.health_checks,
        totals.health_checks_failed
    );
    assert_eq!(crashed.state(), State::Closed, "revived");
    assert!(
        totals.health_checks_failed >= 3,
        "isolation doubled at each failed check"
    );
    Ok(())
}
