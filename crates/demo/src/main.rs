//! A circuit breaker in front of a dependency that goes down and slowly comes back.
//!
//! Run it with `cargo run -p lazybreaker-demo`. Time is simulated (a `ManualClock`) and the
//! dependency's failures come from a seeded PRNG, so the 30 simulated seconds run instantly
//! and print the same thing every time.
//!
//! What you see: the breaker trips soon after the outage starts, and the client stops sending
//! calls that can only fail. Every `timeout` the breaker goes half-open and lets a few probes
//! through; while the dependency is still failing a probe fails and the breaker opens again.
//! Once the dependency has mostly recovered, the probes succeed and the breaker closes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::human;
use lazybreaker::policy::{FailureRatio, Outcome};
use lazybreaker::{Breaker, ManualClock, Permit, Rejected, State};

// The breaker's settings, chosen for a busy client (500 calls/s):
// - trip when at least half of the calls of the current 1 s window failed, once it holds 20
//   calls: a ratio shrugs off the odd error, and with this much traffic a 1 s window reacts
//   within a fraction of a second;
// - stay open 3 s before probing: long enough to spare the dependency, short enough to notice
//   its recovery soon;
// - in half-open, let 3 probes through at once and close after 3 successes in a row.
const RATIO: f64 = 0.5;
const MIN_CALLS: u64 = 20;
const INTERVAL: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_secs(3);
const PROBES: u32 = 3;

// The simulation.
const CALL_EVERY: Duration = Duration::from_millis(2); // 50 calls per 100 ms, 500 per second
const OK_LATENCY: Duration = Duration::from_millis(20);
const TIMEOUT_LATENCY: Duration = Duration::from_millis(200); // every failure is a timeout
const ROWS: u32 = 30; // one timeline row per simulated second
const BAR: usize = 20; // width of the traffic bar

// xorshift64*: a tiny deterministic PRNG, so that the demo needs no dependency.
mod rng;
use rng::Rng;

/// The dependency's health: healthy (1% errors) until 5 s, hard down (every call times out)
/// until 12 s, then recovering, its error rate falling from 100% back to 1% over 10 s.
fn error_rate(t: Duration) -> f64 {
    match t.as_secs_f64() {
        t if t < 5.0 => 0.01,
        t if t < 12.0 => 1.0,
        t => (1.0 - (t - 12.0) / 10.0).max(0.01),
    }
}

fn health(rate: f64) -> String {
    let word = match rate {
        r if r >= 1.0 => "DOWN",
        r if r > 0.01 => "recovering",
        _ => "healthy",
    };
    format!("{:>3.0}% {word:<10}", rate * 100.0)
}

/// Why a state change happened, for the timeline.
fn why(from: State, to: State) -> &'static str {
    match (from, to) {
        (State::Closed, State::Open) => "trip: too many failures",
        (State::Open, State::HalfOpen) => "timeout over: probing",
        (State::HalfOpen, State::Open) => "a probe failed: open again",
        _ => "the probes succeeded",
    }
}

/// What happened to the calls of one second.
#[derive(Default)]
struct Tally {
    sent: usize,          // admitted by the breaker, sent to the dependency
    failed: usize,        // sent, and failed
    open: usize,          // rejected with `Rejected::Open`
    busy: usize,          // rejected with `Rejected::TooManyRequests` (all probes in flight)
    saved: usize,         // rejected calls that would have failed
    would_succeed: usize, // rejected calls that would have succeeded
}

impl Tally {
    /// `#` sent and succeeded, `x` sent and failed, `.` rejected by the breaker; anything
    /// that happened gets at least one cell, so that a few probes show.
    fn bar(&self) -> String {
        let total = (self.sent + self.open + self.busy) as f64;
        let cells = |n: usize| match n {
            0 => 0,
            n => ((n as f64 / total * BAR as f64).round() as usize).max(1),
        };
        let failed = cells(self.failed);
        let rejected = cells(self.open + self.busy).min(BAR - failed);
        "#".repeat(BAR - failed - rejected) + &"x".repeat(failed) + &".".repeat(rejected)
    }
}

fn main() -> Result<(), lazybreaker::ConfigError> {
    let clock = ManualClock::new();
    // Every state change, stamped with the simulated time it happened at. The callback runs
    // outside the breaker's lock, before the call that caused the change returns.
    let changes: Arc<Mutex<Vec<(Duration, State, State)>>> = Arc::default();
    let breaker = Breaker::builder()
        .name("inventory")
        .policy(FailureRatio::new(RATIO, MIN_CALLS)?)
        .interval(INTERVAL)
        .timeout(TIMEOUT)
        .max_requests(PROBES)
        .clock(clock.clone())
        .on_state_change({
            let (clock, changes) = (clock.clone(), Arc::clone(&changes));
            move |_name, from, to| changes.lock().unwrap().push((clock.now(), from, to))
        })
        .build();

    println!(
        "breaker {:?}: trips at >= {:.0}% failures of >= {MIN_CALLS} calls in a {} \
         window,\n  stays open {}, then lets {PROBES} probes through (max_requests)",
        breaker.name(),
        RATIO * 100.0,
        human::span(INTERVAL),
        human::span(TIMEOUT),
    );
    println!(
        "client: {} calls/s; a success takes {}, a failure is a {} timeout\n",
        Duration::from_secs(1).as_nanos() / CALL_EVERY.as_nanos(),
        human::span(OK_LATENCY),
        human::span(TIMEOUT_LATENCY),
    );
    // One row per simulated second: the breaker's state at its end, what happened to that
    // second's 500 calls, the dependency's error rate as the second starts, and a bar.
    println!(
        " time   state at end  sent  rejected  failed  downstream err  # ok x failed . rejected"
    );

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Calls waiting for their answer: (answer due at, how the call ends, its permit).
    let mut in_flight: Vec<(Duration, Outcome, Permit<'_, FailureRatio>)> = Vec::new();
    let (mut rows, mut shown) = (Vec::new(), 0);
    for second in 0..ROWS {
        let mut row = Tally::default();
        while clock.now() < Duration::from_secs(u64::from(second) + 1) {
            let now = clock.now();
            // Answers that have arrived report their outcome through their permit.
            let (due, waiting): (Vec<_>, Vec<_>) =
                in_flight.drain(..).partition(|(at, _, _)| *at <= now);
            in_flight = waiting;
            for (_, outcome, permit) in due {
                permit.record(outcome);
            }
            // The dependency's answer is drawn for every call, sent or not, so that we know
            // what a rejected call would have done.
            let ok = rng.next_f64() >= error_rate(now);
            match breaker.allow() {
                Ok(permit) => {
                    row.sent += 1;
                    row.failed += usize::from(!ok);
                    in_flight.push(if ok {
                        (now + OK_LATENCY, Outcome::Success, permit)
                    } else {
                        (now + TIMEOUT_LATENCY, Outcome::Failure, permit)
                    });
                }
                Err(rejected) => {
                    match rejected {
                        Rejected::Open { .. } => row.open += 1,
                        _ => row.busy += 1, // `Rejected::TooManyRequests`
                    }
                    row.saved += usize::from(!ok);
                    row.would_succeed += usize::from(ok);
                }
            }
            clock.advance(CALL_EVERY);
        }
        println!(
            "{second:>2}-{:>2}s  {:<12} {:>4}  {:>8}  {:>6}  {}  {}",
            second + 1,
            breaker.state(), // reading the state is lazy too: it may go half-open right here
            row.sent,
            row.open + row.busy,
            row.failed,
            health(error_rate(Duration::from_secs(second.into()))),
            row.bar(),
        );
        // The state changes of this second, under its row.
        let changes = changes.lock().unwrap();
        for &(at, from, to) in &changes[shown..] {
            let (at, change) = (human::span(at), format!("{from} -> {to}"));
            println!("   {at:>8}  {change:<22} {}", why(from, to));
        }
        shown = changes.len();
        rows.push(row);
    }
    drop(in_flight); // unanswered permits, dropped, count as exclusions

    let changes = changes.lock().unwrap();
    let count = |from, to| changes.iter().filter(|c| (c.1, c.2) == (from, to)).count();
    let trips = count(State::Closed, State::Open);
    let reopened = count(State::HalfOpen, State::Open);
    let sum = |f: fn(&Tally) -> usize| rows.iter().map(f).sum::<usize>();
    let (sent, open, busy) = (sum(|r| r.sent), sum(|r| r.open), sum(|r| r.busy));
    let (failed, saved) = (sum(|r| r.failed), sum(|r| r.saved));
    let (calls, lost, no_breaker) = (sent + open + busy, sum(|r| r.would_succeed), failed + saved);
    println!("\nsummary over {ROWS} simulated seconds");
    println!("  calls made by the client              {calls:>6}");
    println!("  admitted: sent to the dependency      {sent:>6}");
    println!("  rejected: breaker open                {open:>6}  (Rejected::Open)");
    println!("  rejected: half-open, probes busy      {busy:>6}  (Rejected::TooManyRequests)");
    println!("  failures that reached the dependency  {failed:>6}  (no breaker: {no_breaker})");
    println!("  saved: rejected calls that would fail {saved:>6}");
    println!("  cost: rejected calls that would work  {lost:>6}");
    println!("  trips (closed -> open)                {trips:>6}");
    println!("  failed probes (half-open -> open)     {reopened:>6}");
    Ok(())
}
