//! Choosing settings from traffic: a synthetic five-minute trace (healthy traffic, a hard
//! outage, a slow degradation, a blip) replayed through the candidates of
//! `examples/replay/candidates.toml`, printed as a table and written as JSON and HTML.
//!
//! ```text
//! cargo run -p lazybreaker-replay --example replay
//! ```
//!
//! The trace it generates is the one shipped as `examples/replay/trace.csv` (checked on
//! every run; `LAZYBREAKER_WRITE_TRACE=1` writes it anew), so the tool gives the same table:
//!
//! ```text
//! cargo run --release -p lazybreaker-replay -- \
//!     --trace examples/replay/trace.csv --candidates examples/replay/candidates.toml \
//!     --html target/replay.html
//! ```

use std::path::Path;
use std::time::Duration;

use lazybreaker::config::SettingsMap;
use lazybreaker::policy::Outcome;
use lazybreaker_replay::{self as replay, Trace};

/// Calls a second.
const RATE: u64 = 20;
/// The trace's length, in seconds.
const SECONDS: u64 = 300;

/// A small deterministic generator (xorshift64*): the same trace on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A whole number in `[low, high]`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// What the dependency did at second `s`: the chance a call fails, and its latency range
/// in milliseconds.
fn health(s: f64) -> (f64, (u64, u64)) {
    match s {
        // A hard outage: refused at once.
        s if (60.0..90.0).contains(&s) => (1.0, (1, 4)),
        // A slow degradation: failures and latency creep up, then it is fixed.
        s if (150.0..210.0).contains(&s) => {
            let worse = (s - 150.0) / 60.0;
            let slow = 40 + (360.0 * worse) as u64;
            (0.6 * worse, (slow, slow + 60))
        }
        // A blip: three bad seconds.
        s if (240.0..243.0).contains(&s) => (0.8, (5, 30)),
        _ => (0.01, (20, 45)),
    }
}

fn trace() -> Trace {
    let mut rng = Rng(0x1a2b_3c4d_5e6f_7788);
    let mut trace = Trace::new();
    for i in 0..SECONDS * RATE {
        // Evenly spaced, with up to 20 ms of jitter.
        let start_ms = i * 1000 / RATE + rng.between(0, 20);
        let (fails, (low, high)) = health(start_ms as f64 / 1e3);
        let outcome = if rng.unit() < fails {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        trace.push(
            Duration::from_millis(start_ms),
            Duration::from_millis(rng.between(low, high)),
            outcome,
        );
    }
    trace
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/replay");
    let trace = trace();
    let mut csv = Vec::new();
    trace.write_csv(&mut csv).expect("writing to memory");
    let shipped = dir.join("trace.csv");
    if std::env::var_os("LAZYBREAKER_WRITE_TRACE").is_some() {
        std::fs::write(&shipped, &csv).expect("writing the trace");
        println!("wrote {}", shipped.display());
    } else {
        let on_disk = std::fs::read(&shipped).expect("examples/replay/trace.csv");
        assert!(
            on_disk == csv,
            "examples/replay/trace.csv is not the trace this example generates: \
             run it with LAZYBREAKER_WRITE_TRACE=1"
        );
    }
    assert_eq!(
        Trace::from_csv(&csv[..]).expect("the trace reads back"),
        trace
    );

    let candidates: SettingsMap = toml::from_str(
        &std::fs::read_to_string(dir.join("candidates.toml")).expect("the candidates file"),
    )
    .expect("the candidates parse");
    let reports = replay::replay_all(&trace, &candidates).expect("the candidates validate");
    print!("{}", replay::table(&reports));

    // The workspace's target directory (this crate's manifest is two levels below it).
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/replay-example");
    std::fs::create_dir_all(&out).expect("target/replay-example");
    std::fs::write(out.join("report.html"), replay::html(&trace, &reports)).expect("html");
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&reports).expect("json"),
    )
    .expect("json");
    println!(
        "\n{} calls, {} bursts; plots in {}",
        trace.len(),
        reports[0].bursts.len(),
        out.join("report.html").display()
    );

    // The outage trips every candidate, and each saved the dependency calls.
    for r in &reports {
        assert!(r.opened >= 1, "{} never opened", r.name);
        assert!(r.rejected_would_fail > 0, "{} saved nothing", r.name);
    }
    // gobreaker's 60 s open period turns away far more good calls than a 5 s one.
    let cost = |name: &str| {
        reports
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.rejected_would_succeed)
            .expect("a candidate of the file")
    };
    assert!(cost("gobreaker_defaults") > 2 * cost("consecutive_5_open_5s"));
}
