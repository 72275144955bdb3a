//! Breakers per method, from a TOML file, with an operator at the controls.
//!
//! Run it with `cargo run --example methods --features serde`. Time is simulated (a
//! `ManualClock` shared by the registry and its breakers), so the 20 simulated seconds run
//! instantly and print the same thing every time.
//!
//! The script: `Sub` fails from 3 s to 9 s and its breaker trips, probes and recovers on its
//! own, while `Get` and `Health` are untouched (a breaker per method: "Sub may break, Health
//! must not"). At 12 s an operator forces `Get` open (an incident elsewhere) and releases it
//! at 16 s. `Health` fails now and then, and is exempt: counted, never broken.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::config::RegistrySettings;
use lazybreaker::observe::{Observer, Transition};
use lazybreaker::{Error, ManualClock, Registry, State};

const METHODS: [&str; 3] = ["Get", "Sub", "Health"];
const CALL_EVERY: Duration = Duration::from_millis(50); // 20 calls per method per second
const SECONDS: u64 = 20;

/// Whether the upstream's method fails at `t` (simulated milliseconds).
fn fails(method: &str, t: u64, n: u64) -> bool {
    match method {
        "Sub" => (3_000..9_000).contains(&t),
        "Health" => n.is_multiple_of(7),
        _ => false,
    }
}

/// Transitions, printed in the timeline row of the second they happened in.
#[derive(Clone, Default)]
struct Changes(Arc<Mutex<Vec<String>>>);

impl Observer for Changes {
    fn on_transition(&self, t: &Transition<'_>) {
        let manual = if t.origin == lazybreaker::observe::Origin::Manual {
            " (manual)"
        } else {
            ""
        };
        self.0.lock().unwrap().push(format!(
            "{}: {:?} -> {:?}{manual} at {:.2}s",
            t.breaker,
            t.from,
            t.to,
            t.at.as_secs_f64()
        ));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/methods.toml");
    let settings: RegistrySettings = toml::from_str(&std::fs::read_to_string(path)?)?;
    println!(
        "{path}: {} method(s) configured, exempt: {:?}\n",
        settings.breakers.len(),
        settings.exempt
    );

    // The file's registry, with the example's clock and observer on every breaker.
    let clock = ManualClock::new();
    let changes = Changes::default();
    let factory = settings.factory()?; // checks every entry, naming the invalid one
    let registry = {
        let changes = changes.clone();
        Registry::new(move |method: &String| factory(method).observer(changes.clone()))
            .clock(clock.clone())
    };
    let registry = match settings.max_keys {
        Some(max) => registry.max_keys(max),
        None => registry,
    };

    println!(
        "  time  {:<24}{:<24}{:<24}",
        METHODS[0], METHODS[1], METHODS[2]
    );
    let mut n = 0;
    for second in 0..SECONDS {
        let mut row: BTreeMap<&str, (u32, u32, u32)> = BTreeMap::new();
        let operator = |what: &str| changes.0.lock().unwrap().push(format!("operator: {what}"));
        if second == 12 {
            operator("force_open(Get)");
            registry.breaker("Get").force_open();
        }
        if second == 16 {
            operator("release(Get)");
            registry.breaker("Get").release();
        }
        for _ in 0..(1_000 / CALL_EVERY.as_millis() as u64) {
            let t = clock.now().as_millis() as u64;
            for method in METHODS {
                n += 1;
                let fail = fails(method, t, n);
                let r = registry.breaker(method).execute(|| {
                    if fail {
                        Err("unavailable")
                    } else {
                        Ok(())
                    }
                });
                let cell = row.entry(method).or_default();
                match r {
                    Ok(()) => cell.0 += 1,
                    Err(Error::Inner(_)) => cell.1 += 1,
                    Err(Error::Rejected(_)) => cell.2 += 1,
                }
            }
            clock.advance(CALL_EVERY);
        }
        let cells: Vec<String> = METHODS
            .iter()
            .map(|m| {
                let (ok, failed, rejected) = row[*m];
                let state = match registry.breaker(*m).state() {
                    State::Closed => "closed",
                    State::HalfOpen => "half-open",
                    State::Open => "open",
                };
                format!("{state:<9} {ok:>2}/{failed:>2}/{rejected:>2}")
            })
            .collect();
        println!(
            "{:>5}s  {:<24}{:<24}{:<24}",
            second, cells[0], cells[1], cells[2]
        );
        for change in changes.0.lock().unwrap().drain(..) {
            println!("        {change}");
        }
    }
    println!(
        "\n(a row per simulated second, from its start; each cell: the state at the end of the
second, then its ok/failed/rejected calls; the changes of the second below it)"
    );
    Ok(())
}
