//! A brpc-style client: a refused connection isolates the node at once, and three connect
//! timeouts in a row trip it, as a policy composition over real loopback sockets.
//!
//! Run it with `cargo run --example brpc_style`. It stops by itself in about a second.
//!
//! The composition: `classify::io_errors()` turns a refused connection into
//! `Outcome::Fatal` (the breaker opens at once, whatever the policy: brpc's `ECONNREFUSED`)
//! and a timed-out connect into a failure; the policy is `ConsecutiveFailures::new(3)`
//! (three in a row) `.or(Ema)` (brpc's error-cost windows for everything else).
//!
//! The "timeouts" are real: an upstream that listens but never accepts, its accept queue
//! filled by held connections, so that the next SYNs are dropped and connects time out.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use lazybreaker::classify::io_errors;
use lazybreaker::human;
use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig, TripPolicy};
use lazybreaker::{Breaker, Error};

const CONNECT_TIMEOUT: Duration = Duration::from_millis(50);
/// The most connections held to fill an accept queue (Linux: the backlog, 128, plus one).
const MAX_HELD: usize = 1_024;

fn node(name: &str) -> Result<Breaker<impl TripPolicy>, lazybreaker::ConfigError> {
    Ok(Breaker::builder()
        .name(name)
        .policy(ConsecutiveFailures::new(3)?.or(Ema::new(EmaConfig::default())?))
        .timeout(Duration::from_secs(5))
        .on_state_change(|name, from, to| println!("          {name}: {from} -> {to}"))
        .build())
}

/// One connect through `breaker`, printed.
fn connect(breaker: &Breaker<impl TripPolicy>, addr: SocketAddr, start: Instant) {
    let sent = Instant::now();
    let r = breaker.execute_classified(
        || TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT),
        io_errors(),
    );
    let what = match r {
        Ok(_) => "connected".to_owned(),
        Err(Error::Inner(e)) => format!("{:?} after {}", e.kind(), human::span(sent.elapsed())),
        Err(Error::Rejected(r)) => format!("rejected: {r}"),
    };
    println!(
        "{:>8}  {}: {what}",
        human::span(start.elapsed()),
        breaker.name()
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();

    // Node A listens but never accepts: fill its accept queue until connects time out.
    let stuck = TcpListener::bind("127.0.0.1:0")?;
    let a = stuck.local_addr()?;
    let mut held = Vec::new();
    while held.len() < MAX_HELD {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(stream) => held.push(stream),
            Err(_) => break,
        }
    }
    println!(
        "node A ({a}) accepts nothing: its queue holds {} connections\n",
        held.len()
    );
    let node_a = node("A")?;
    for _ in 0..5 {
        connect(&node_a, a, start);
    }

    // Node B: nothing listens there any more.
    let b = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    println!("\nnode B ({b}) is gone: connections are refused\n");
    let node_b = node("B")?;
    for _ in 0..3 {
        connect(&node_b, b, start);
    }

    println!(
        "\nA tripped on its third timeout in a row; B on its first refused connection.\n\
         Totals: A {:?} failures, B {:?} failures.",
        node_a.totals().failures,
        node_b.totals().failures
    );
    drop((held, stuck));
    Ok(())
}
