//! One throttled breaker in front of a pool: overload is the cluster's signal, a node's
//! failure is the node's.
//!
//! A pool of three nodes isolates a node that fails (its own breaker); the breaker in front
//! never trips on overload but throttles: it sees a 503 from any node as "the cluster
//! accepts less than it is sent" and sheds in proportion, so the healthy nodes are not
//! pushed over too. Printed per second: calls sent, shed by the throttle, answered, and the
//! throttle's probability.
//!
//! Time is simulated (a `ManualClock`, 200 calls a second), so the example runs in a blink
//! and prints the same thing every time. Run with `cargo run --example throttled_pool`.

use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::pool::Pool;
use lazybreaker::throttle::Throttle;
use lazybreaker::{Breaker, ManualClock, Rejected};

const RATE: u64 = 200;
const NODES: usize = 3;

/// What node `node` answers call `i` at second `second`: node 2 is down from 3 s to 6 s
/// (a node failure), and from 8 s to 14 s the whole cluster is overloaded (half of its calls
/// answered 503, whichever node): a fixed pseudo-random pick, the same every run.
fn answer(node: usize, i: u64, second: u64) -> Outcome {
    if node == 2 && (3..6).contains(&second) {
        return Outcome::Failure;
    }
    let draw = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 100;
    if (8..14).contains(&second) && draw < 50 {
        // An overload answer: a failure for the breaker in front, an exclusion for the
        // node's own (the node is not broken; the cluster is full).
        return Outcome::Excluded;
    }
    Outcome::Success
}

fn main() -> Result<(), lazybreaker::ConfigError> {
    let clock = ManualClock::new();
    // The cluster's throttle: trips never (a hard outage is the nodes' to see), sheds when
    // it sends more than 1.5 times what is accepted (k = 1.5), over a rolling 5 s window.
    let front = Breaker::builder()
        .name("cluster")
        .interval(Duration::from_secs(5))
        .bucket_period(Duration::from_secs(1))
        .never_trips(true)
        .throttle(Throttle::new(1.5)?.min_requests(50).seed(1))
        .clock(clock.clone())
        .build();
    // The nodes' breakers: five failures in a row isolate a node for 2 s.
    let pool = Pool::new(|node: &usize| {
        Breaker::builder()
            .name(format!("node {node}"))
            .policy(ConsecutiveFailures::new(5).expect("valid"))
            .timeout(Duration::from_secs(2))
    })
    .clock(clock.clone());
    pool.set(0..NODES);

    println!("second  sent  shed  answered  p(throttle)  node 2");
    let mut i = 0u64;
    let mut shed_in_overload = 0;
    for second in 0..16u64 {
        let (mut sent, mut shed, mut answered) = (0, 0, 0);
        for _ in 0..RATE {
            clock.advance(Duration::from_nanos(1_000_000_000 / RATE));
            i += 1;
            let permit = match front.allow() {
                Ok(permit) => permit,
                Err(Rejected::Throttled { .. }) => {
                    shed += 1;
                    continue;
                }
                Err(other) => panic!("the front never trips: {other}"),
            };
            let Ok(pick) = pool.pick() else {
                permit.exclude(); // no node could take it: not the cluster's answer
                continue;
            };
            sent += 1;
            match answer(*pick.key(), i, second) {
                Outcome::Success => {
                    answered += 1;
                    pick.success();
                    permit.success();
                }
                Outcome::Excluded => {
                    pick.exclude();
                    permit.failure(); // overload counts against the cluster's accepts
                }
                _ => {
                    pick.failure();
                    permit.exclude(); // a broken node is the pool's business
                }
            }
        }
        if (8..14).contains(&second) {
            shed_in_overload += shed;
        }
        let node2 = pool.breaker(&2).expect("in the pool").state();
        println!(
            "{second:>6}  {sent:>4}  {shed:>4}  {answered:>8}  {:>11.2}  {node2}",
            front.throttle_probability().unwrap_or(0.0)
        );
    }
    assert!(
        shed_in_overload > 0,
        "the throttle shed during the overload"
    );
    assert_eq!(front.totals().opened, 0, "the front never trips");
    assert!(
        pool.breaker(&2).expect("in the pool").totals().opened >= 1,
        "node 2 was isolated"
    );
    Ok(())
}
