//! Replay a recorded trace through candidate settings, exactly as live breakers with those
//! settings would have decided: to choose a breaker's numbers from real traffic.
//!
//! A [`Trace`] is a list of calls, each with its start, latency and outcome (and optionally
//! a key: one breaker per key, as a [`Registry`](lazybreaker::Registry) keeps). [`replay`] runs
//! the crate's real breaker, built from a [`Settings`], on a [`ManualClock`](lazybreaker::ManualClock):
//! each call asks for admission at its start and, if admitted, reports its recorded outcome
//! at its start plus its latency, every event in time order. The breaker has no timer and
//! reads time only from its clock, so its decisions are the ones a live breaker with the
//! same settings makes for the same calls at the same times, to the nanosecond; a million
//! calls replay in a fraction of a second.
//!
//! Events at the same instant: the calls that answer at `t` are reported before the calls
//! that start at `t` ask (a call that returns at once has returned before the next one
//! starts), the answers in the order their calls started. The breaker of the calls without
//! a key exists from the trace's zero, as a service's breaker exists before its first call
//! (a fixed window's first generation starts there); the breaker of a key is built at that
//! key's first call, as a [`Registry`](lazybreaker::Registry) builds it.
//!
//! # What replay cannot know
//!
//! - **A rejected call's outcome is the recorded one**: what the dependency did when the
//!   call was made for real. Replay counts it as saved
//!   ([`rejected_would_fail`](Report::rejected_would_fail)) or as a cost
//!   ([`rejected_would_succeed`](Report::rejected_would_succeed)) on that ground.
//! - **No feedback**: the load a breaker takes off a dependency does not change the trace.
//!   A dependency that recovers sooner because it was left alone recovers, in the replay,
//!   when it recovered for real; one that failed because it was overloaded still fails.
//! - **Health checks are code**, not settings: a replayed breaker has none, and goes
//!   half-open by its open period alone.
//!
//! # Recording a trace
//!
//! [`Recorder`] keeps the last calls made through it once [`start`](Recorder::start)ed (off,
//! a call pays one atomic load), and writes them in the CSV [`Trace::from_csv`] reads. A
//! call a breaker rejected was never made: for a complete trace, record through a breaker
//! in dry run.
//!
//! # The tool
//!
//! `cargo run --release -p lazybreaker-replay -- --trace T.csv
//! --candidates C.toml [--json R.json] [--html R.html]` replays a trace through every
//! candidate of a file of named breakers ([`SettingsMap`]), prints [`table`] and its
//! [`legend`], and writes
//! the reports as JSON (`{"trace": {"calls", "keys", "span_ms"}, "candidates": [Report…]}`)
//! and [`html`]. Durations: in the JSON, whole milliseconds as integers in fields ending in
//! `_ms`; in the table and the page, as people read them, `<1ms` for a time above zero that
//! would read `0ms` (`docs/integrations.md`, "Durations in JSON").
//!
//! A keyed trace replays a breaker per distinct key, as a registry keeps them: about 2.4 KB
//! of memory per key and candidate while it runs (10⁵ distinct keys took 241 MB more; a
//! million would take about 2.4 GB).
//!
//! # Beside a live dry run
//!
//! A breaker in dry run ([`Builder::dry_run`](lazybreaker::Builder::dry_run)) makes the same
//! decisions live, on production traffic, without enforcing them: its
//! [`Totals::would_reject`](lazybreaker::Totals::would_reject) is the replay's
//! [`rejected`](Report::rejected), and its transitions are the replay's (a property the
//! crate's tests check on random traces). Settings in dry run replay as if enforcing.
//!
//! Exactly so when the breaker and the [`Recorder`] read one clock at the same instants (a
//! [`ManualClock`](lazybreaker::ManualClock) in tests). In real time they read time apart:
//! the breaker at admission and at the result, on its own clock (by default a coarse one,
//! a few milliseconds a tick), the recorder at `begin` and `end`, on the precise
//! [`MonotonicClock`](lazybreaker::MonotonicClock). A call near an expiry can then fall on
//! the other side of it in the replay, and the figures agree within a few per cent (one run
//! of three threads for three seconds: 4 436 would-be rejections live against 4 786 in the
//! replay on the coarse clock; 4 783 against 4 794 with `PreciseClock` for the breaker). For
//! the closest match, build the breaker with `.clock(PreciseClock::new())` and give the
//! recorder the same kind of clock ([`Recorder::with_clock`]).
//!
//! # Examples
//!
//! ```
//! use lazybreaker::config::{PolicyConfig, Settings};
//! use lazybreaker_replay::{replay, Trace};
//! use lazybreaker::policy::Outcome;
//! use lazybreaker::Knobs;
//! use std::time::Duration;
//!
//! // Ten calls a second: healthy for 10 s, down for 5 s, healthy again.
//! let mut trace = Trace::new();
//! for i in 0..300u64 {
//!     let start = Duration::from_millis(i * 100);
//!     let down = (10_000..15_000).contains(&(i * 100));
//!     let outcome = if down { Outcome::Failure } else { Outcome::Success };
//!     trace.push(start, Duration::from_millis(20), outcome);
//! }
//! let settings = Settings {
//!     knobs: Knobs { timeout: Duration::from_secs(2), ..Knobs::default() },
//!     policy: PolicyConfig::ConsecutiveFailures { threshold: 5 },
//!     ..Settings::default()
//! };
//! let report = replay(&trace, &settings);
//! assert_eq!(report.calls, 300);
//! assert_eq!(report.failures_admitted, 5 + 2); // five to trip, a probe after each 2 s
//! assert_eq!(report.rejected_would_fail, 50 - 7);
//! assert_eq!(report.opened, 3);
//! // The fifth failure (at 10.4 s) answered 20 ms after it started: open at 10.42 s.
//! assert_eq!(report.time_to_trip, Some(Duration::from_millis(420)));
//! // The last probe failed at 14.62 s: open until 16.62 s, through 17 calls that would
//! // have succeeded; the probe at 16.7 s closed it at 16.72 s, 1.8 s after the outage's
//! // last failure answered (14.92 s).
//! assert_eq!(report.rejected_would_succeed, 17);
//! assert_eq!(report.time_to_close, Some(Duration::from_millis(1800)));
//! ```

#![warn(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod plot;
mod record;
mod report;
mod run;
mod trace;
mod work;

pub use plot::{html, legend, table};
pub use record::{Recorder, Recording};
pub use report::{Burst, Change, Report, BURST_BIN, BURST_MIN_CALLS};
pub use trace::{Call, Trace, TraceError};

use lazybreaker::config::{Settings, SettingsMap};
use lazybreaker::ConfigError;

/// Replays `trace` through breakers built from `settings`, one per key of a keyed trace
/// (see the [module documentation](self) for the semantics, and what replay cannot know).
///
/// Settings that do not [validate](Settings::validate) replay nothing: the report has the
/// trace's `calls` and nothing else, and its [`invalid`](Report::invalid) says why (use
/// [`try_replay`] to have the error instead).
pub fn replay(trace: &Trace, settings: &Settings) -> Report {
    try_replay(trace, settings).unwrap_or_else(|e| Report::of_invalid(name(settings), trace, &e))
}

/// Like [`replay`], with invalid settings an error.
///
/// # Errors
///
/// The [`ConfigError`] of [`Settings::validate`].
pub fn try_replay(trace: &Trace, settings: &Settings) -> Result<Report, ConfigError> {
    run::run(trace, settings, name(settings), &|_| ())
}

/// Replays `trace` through every candidate of `candidates` (a file of named breakers, as
/// [`SettingsMap`] reads it), on as many threads as the machine has cores: one report per
/// candidate, in the map's order, each named by its key.
///
/// # Errors
///
/// The first candidate that does not validate, by its key (the other candidates are not
/// replayed).
pub fn replay_all(trace: &Trace, candidates: &SettingsMap) -> Result<Vec<Report>, ConfigError> {
    replay_all_with_progress(trace, candidates, &|_| ())
}

/// Like [`replay_all`], telling `progress` how many more calls have been replayed, now and
/// then (every 65,536 calls of a candidate, and at each candidate's end): over all the
/// candidates, the figures add up to the trace's length times the number of candidates.
/// It is called from the replaying threads.
///
/// # Errors
///
/// As [`replay_all`].
pub fn replay_all_with_progress(
    trace: &Trace,
    candidates: &SettingsMap,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Report>, ConfigError> {
    let named: Vec<(&String, Settings)> = candidates
        .iter()
        .map(|(key, settings)| {
            let mut settings = settings.clone();
            if settings.knobs.name.is_empty() {
                settings.knobs.name.clone_from(key);
            }
            (key, settings)
        })
        .collect();
    for (_, settings) in &named {
        settings.validate()?;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(named.len().max(1));
    let mut reports: Vec<Option<Result<Report, ConfigError>>> =
        (0..named.len()).map(|_| None).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = parking_lot::Mutex::new(&mut reports);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((key, settings)) = named.get(i) else {
                    return;
                };
                let report = run::run(trace, settings, key, progress);
                done.lock()[i] = Some(report);
            });
        }
    });
    reports
        .into_iter()
        .map(|r| r.expect("every candidate was replayed"))
        .collect()
}

/// The name of a replay of `settings`: its breaker name, or `replay`.
fn name(settings: &Settings) -> &str {
    if settings.knobs.name.is_empty() {
        "replay"
    } else {
        &settings.knobs.name
    }
}
