//! SettingsMap configured from a TOML file: one per downstream, each with its own policy.
//!
//! Run it with `cargo run --example from_config --features serde`, or pass another file:
//! `cargo run --example from_config --features serde -- my_breakers.toml`.
//!
//! It loads `examples/breakers.toml` (a table per downstream), builds the breakers on a
//! simulated clock, sends them 8 simulated seconds of traffic during which some downstreams
//! fail, prints each state change as it happens and a JSON snapshot of every breaker at the
//! end. Then it shows what a user sees for a broken file: a typo'd field and a wrong type,
//! reported while parsing, and a value out of range, reported when the breakers are built.

use std::time::Duration;

use lazybreaker::config::{self, SettingsMap};
use lazybreaker::human;
use lazybreaker::{Counts, DynBreaker, ManualClock, State, Totals};

const TICK: Duration = Duration::from_millis(10);
const LATENCY: Duration = Duration::from_millis(5);
const RUN: Duration = Duration::from_secs(8);

// xorshift64*: a tiny deterministic PRNG, so every run prints the same thing.
mod common;
use common::Rng;

/// Each downstream's error rate at time `t` (seconds): payments has a 4 s outage, inventory
/// goes hard down for a second, search fails a third of its calls for a while, shipping
/// fails every call for 60 ms; any other downstream the file adds stays healthy.
fn error_rate(downstream: &str, t: f64) -> f64 {
    match downstream {
        "payments" if (2.0..6.0).contains(&t) => 0.8,
        "inventory" if (3.0..4.0).contains(&t) => 1.0,
        "search" if (1.0..5.0).contains(&t) => 0.35,
        "shipping" if (6.5..6.56).contains(&t) => 1.0,
        _ => 0.02,
    }
}

/// What the example prints for each breaker at the end.
#[derive(serde::Serialize)]
struct Snapshot<'a> {
    name: &'a str,
    state: State,
    counts: Counts,
    totals: Totals,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/breakers.toml").to_owned()
    });
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let settings: SettingsMap = toml::from_str(&text).map_err(|e| format!("{path}: {e}"))?;

    println!("loaded {} breakers from {path}", settings.len());
    // The settings serialise back out, durations as humantime strings.
    if let Some(shipping) = settings.get("shipping") {
        println!("\n[shipping], as the settings write it back:\n");
        println!("{}", toml::to_string(shipping)?);
    }

    // Every breaker on one simulated clock, printing its state changes: each entry named by
    // its key unless it has a `name` (as `config::build_all` names them), then built through
    // `Settings::to_builder`, which takes the clock and the callback.
    let clock = ManualClock::new();
    let mut breakers: Vec<(String, DynBreaker)> = Vec::new();
    for (key, settings) in &settings {
        let mut settings = settings.clone();
        if settings.knobs.name.is_empty() {
            settings.knobs.name = key.clone();
        }
        let at = clock.clone();
        let builder =
            settings
                .to_builder()?
                .clock(clock.clone())
                .on_state_change(move |name, from, to| {
                    println!("{:>8}  {name}: {from} -> {to}", human::span(at.now()));
                });
        breakers.push((key.clone(), builder.build()));
    }

    println!("state changes during {} of traffic:\n", human::span(RUN));
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    while clock.now() < RUN {
        let t = clock.now().as_secs_f64();
        // One call to every downstream per tick: admitted calls take LATENCY.
        let permits: Vec<_> = breakers
            .iter()
            .map(|(key, breaker)| (key, breaker.allow().ok()))
            .collect();
        clock.advance(LATENCY);
        for (key, permit) in permits {
            if let Some(permit) = permit {
                if rng.next_f64() < error_rate(key, t) {
                    permit.failure();
                } else {
                    permit.success();
                }
            }
        }
        clock.advance(TICK - LATENCY);
    }

    let snapshots: Vec<_> = breakers
        .iter()
        .map(|(_, b)| Snapshot {
            name: b.name(),
            state: b.state(),
            counts: b.counts(),
            totals: b.totals(),
        })
        .collect();
    println!(
        "\nat {}s:\n{}",
        RUN.as_secs(),
        serde_json::to_string_pretty(&snapshots)?
    );

    // What a user sees for a broken file.
    println!("\na typo'd field is an error while parsing:\n");
    let typo = "[payments]\ntimeout = \"5s\"\nintervall = \"10s\"\n";
    match toml::from_str::<SettingsMap>(typo) {
        Ok(_) => unreachable!("`intervall` is not a field"),
        Err(err) => println!("{err}"),
    }

    println!("so is a wrong type, however deep:\n");
    let wrong_type = r#"
        [search.policy]
        kind = "any_of"
        policies = [
            { kind = "consecutive_failures", threshold = 5 },
            { kind = "failure_ratio", ratio = 0.5, min_requests = -1 },
        ]
    "#;
    match toml::from_str::<SettingsMap>(wrong_type) {
        Ok(_) => unreachable!("-1 is not a number of requests"),
        Err(err) => println!("{err}"),
    }

    println!("a value out of range is an error when the breakers are built:\n");
    let out_of_range = r#"
        [inventory]
        policy = { kind = "consecutive_failures", threshold = 3 }

        [payments]
        policy = { kind = "failure_ratio", ratio = 1.5, min_requests = 10 }
    "#;
    let settings: SettingsMap = toml::from_str(out_of_range)?;
    match config::build_all(&settings) {
        Ok(_) => unreachable!("a ratio of 1.5 is out of range"),
        Err(err) => {
            println!("{err}");
            println!(
                "  (breaker: {:?}, field: {:?}, value: {:?})",
                err.breaker(),
                err.field(),
                err.value()
            );
        }
    }
    Ok(())
}
