//! Replay decides as live breakers do: random traces through every built-in policy and
//! window, replayed and then driven call by call through real breakers (a `Registry` for a
//! keyed trace) on a `ManualClock`; and the CSV reader's errors, line and column.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::config::{PolicyConfig, Settings, SettingsMap};
use lazybreaker::observe::{Observer, Transition};
use lazybreaker::policy::{EmaConfig, Outcome, TripPolicy};
use lazybreaker::{Builder, Knobs, ManualClock, OwnedPermit, Registry, State};
use lazybreaker_replay::{replay, replay_all, try_replay, Trace};
use parking_lot::Mutex;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One call of a generated trace: start, latency (ms), outcome, key.
type Gen = (u64, u64, Outcome, Option<usize>);

const KEYS: [&str; 3] = ["alpha", "beta", "gamma"];

/// What the live breakers decided: per call whether admitted, and every change.
struct Live {
    admitted: Vec<bool>,
    changes: Vec<(Duration, String, State, State)>,
    /// What the breakers admitted as shadows (in dry run).
    would_reject: u64,
    /// What their throttles turned away.
    throttled: u64,
}

type Changes = Arc<Mutex<Vec<(Duration, String, State, State)>>>;

/// Keeps a live breaker's changes, each at the clock's reading when it is told.
struct Log {
    clock: ManualClock,
    changes: Changes,
}

impl Observer for Log {
    fn on_transition(&self, t: &Transition<'_>) {
        let change = (self.clock.now(), t.breaker.to_owned(), t.from, t.to);
        self.changes.lock().push(change);
    }
}

/// A builder from `settings` on `clock` whose changes land in `changes`.
fn builder(settings: &Settings, clock: &ManualClock, changes: &Changes) -> Builder<Dyn, Log> {
    settings
        .to_builder()
        .unwrap()
        .clock(clock.clone())
        .observer(Log {
            clock: clock.clone(),
            changes: Arc::clone(changes),
        })
}

type Dyn = Box<dyn TripPolicy>;
type InFlight = Vec<(u64, usize, OwnedPermit<Dyn, Log>, Outcome)>;

/// Drives the calls through live breakers, one at a time: before each call starts, the
/// calls in flight that have answered by then report (by end, then by start order).
fn live(calls: &[Gen], settings: &Settings, keyed: bool) -> Live {
    let clock = ManualClock::new();
    let changes: Changes = Arc::default();
    let one = Arc::new(builder(settings, &clock, &changes).name("replay").build());
    let (s, c, ch) = (settings.clone(), clock.clone(), Arc::clone(&changes));
    let registry = Registry::new(move |_: &String| builder(&s, &c, &ch));
    let mut in_flight: InFlight = Vec::new();
    let mut admitted = vec![false; calls.len()];
    let to = |t: u64| {
        let now = clock.now();
        clock.advance(ms(t).saturating_sub(now));
    };
    let report_until = |t: u64, in_flight: &mut InFlight| {
        let mut due: Vec<_> = Vec::new();
        let mut i = 0;
        while i < in_flight.len() {
            if in_flight[i].0 <= t {
                due.push(in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|d| (d.0, d.1));
        for (end, _, permit, outcome) in due {
            to(end);
            permit.record(outcome);
        }
    };
    for (i, &(start, latency, outcome, key)) in calls.iter().enumerate() {
        report_until(start, &mut in_flight);
        to(start);
        let permit = match key {
            Some(k) if keyed => registry.allow(KEYS[k]).ok(),
            _ => one.allow_owned().ok(),
        };
        if let Some(permit) = permit {
            admitted[i] = true;
            in_flight.push((start + latency, i, permit, outcome));
        }
    }
    report_until(u64::MAX, &mut in_flight);
    let changes = changes.lock().clone();
    // A total over the one breaker and the registry's.
    let total = |of: fn(&lazybreaker::Totals) -> u64| {
        of(&one.totals())
            + registry
                .breakers()
                .iter()
                .map(|(_, b)| of(&b.totals()))
                .sum::<u64>()
    };
    Live {
        admitted,
        changes,
        would_reject: total(|t| t.would_reject),
        throttled: total(|t| t.rejected_throttled),
    }
}

fn trace_of(calls: &[Gen], keyed: bool) -> Trace {
    let mut t = Trace::new();
    for &(start, latency, outcome, key) in calls {
        match key {
            Some(k) if keyed => t.push_keyed(KEYS[k], ms(start), ms(latency), outcome),
            _ => t.push(ms(start), ms(latency), outcome),
        };
    }
    t
}

/// Calls on a 10 ms grid (so that starts and ends meet), in phases of health and failure.
fn calls() -> impl Strategy<Value = Vec<Gen>> {
    prop::collection::vec(
        (0u64..6, 0u64..25, 0u32..100, 0usize..3, any::<bool>()),
        1..250,
    )
    .prop_map(|raw| {
        let mut start = 0;
        raw.into_iter()
            .enumerate()
            .map(|(i, (gap, latency, roll, key, _))| {
                start += gap * 10;
                // Failure-heavy stretches alternate with healthy ones.
                let failing = (i / 40) % 2 == 1;
                let outcome = match (failing, roll) {
                    (_, 0..=4) => Outcome::Excluded,
                    (true, 5..=9) => Outcome::Fatal,
                    (true, 10..=79) | (false, 10..=17) => Outcome::Failure,
                    _ => Outcome::Success,
                };
                (start, latency * 10, outcome, Some(key))
            })
            .collect()
    })
}

/// Every built-in policy, with thresholds a few hundred calls can reach.
fn policies() -> Vec<PolicyConfig> {
    vec![
        PolicyConfig::ConsecutiveFailures { threshold: 3 },
        PolicyConfig::FailureRatio {
            ratio: 0.5,
            min_requests: 6,
        },
        PolicyConfig::FailureCount {
            failures: 4,
            min_requests: 5,
        },
        PolicyConfig::SlowCalls {
            threshold: ms(120),
            ratio: 0.4,
            min_requests: 5,
            probes_on_latency_alone: false,
        },
        PolicyConfig::Ema(EmaConfig {
            short_window_size: 8,
            short_window_error_percent: 30,
            long_window_size: 16,
            long_window_error_percent: 20,
            min_error_cost: ms(100),
            ..EmaConfig::default()
        }),
        PolicyConfig::AnyOf {
            policies: vec![
                PolicyConfig::ConsecutiveFailures { threshold: 5 },
                PolicyConfig::SlowCalls {
                    threshold: ms(150),
                    ratio: 0.5,
                    min_requests: 4,
                    probes_on_latency_alone: false,
                },
            ],
        },
    ]
}

/// The windows: none (counts reset only by a change), fixed, rolling.
fn windows() -> [(Duration, Duration); 3] {
    [(ms(0), ms(0)), (ms(400), ms(0)), (ms(1000), ms(100))]
}

fn settings(policy: usize, window: usize, timeout: u64, probes: u32) -> Settings {
    let (interval, bucket_period) = windows()[window];
    Settings {
        knobs: Knobs {
            interval,
            bucket_period,
            timeout: ms(timeout),
            max_requests: probes,
            ..Knobs::default()
        },
        policy: policies()[policy].clone(),
        ..Settings::default()
    }
}

fn check(calls: &[Gen], settings: &Settings, keyed: bool) -> Result<(), TestCaseError> {
    let report = try_replay(&trace_of(calls, keyed), settings).unwrap();
    let live = live(calls, settings, keyed);
    let admitted = live.admitted.iter().filter(|a| **a).count() as u64;
    let failed = |o: Outcome| matches!(o, Outcome::Failure | Outcome::Fatal);
    let (mut would_fail, mut would_succeed, mut failures_admitted) = (0, 0, 0);
    for (call, &ok) in calls.iter().zip(&live.admitted) {
        match (ok, call.2) {
            (true, o) if failed(o) => failures_admitted += 1,
            (false, o) if failed(o) => would_fail += 1,
            (false, Outcome::Success) => would_succeed += 1,
            _ => {}
        }
    }
    prop_assert_eq!(report.calls, calls.len() as u64);
    prop_assert_eq!(report.admitted, admitted);
    prop_assert_eq!(report.rejected, calls.len() as u64 - admitted);
    prop_assert_eq!(report.rejected_would_fail, would_fail);
    prop_assert_eq!(report.rejected_would_succeed, would_succeed);
    prop_assert_eq!(report.failures_admitted, failures_admitted);
    let replayed: Vec<_> = report
        .transitions
        .iter()
        .map(|c| (c.at, c.breaker.clone(), c.from, c.to))
        .collect();
    prop_assert_eq!(&replayed, &live.changes);
    let opened = live.changes.iter().filter(|c| c.3 == State::Open).count() as u64;
    prop_assert_eq!(report.opened, opened);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn replay_decides_as_a_live_breaker_does(
        calls in calls(),
        policy in 0..6usize,
        window in 0..3usize,
        timeout in 1u64..30,
        probes in 0u32..4,
    ) {
        check(&calls, &settings(policy, window, timeout * 50, probes), false)?;
    }

    #[test]
    fn a_keyed_replay_decides_as_a_live_registry_does(
        calls in calls(),
        policy in 0..6usize,
        window in 0..3usize,
        timeout in 1u64..30,
        probes in 0u32..4,
    ) {
        check(&calls, &settings(policy, window, timeout * 50, probes), true)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A throttled candidate: the same seed and calls make the same draws, live or replayed,
    /// so every admission, every throttled call and every change match.
    #[test]
    fn a_throttled_replay_decides_as_a_live_breaker_does(
        calls in calls(),
        policy in 0..6usize,
        window in 0..3usize,
        k in 1u32..4,
        min_requests in 0u64..12,
        cap in 1u32..=10,
        seed in any::<u64>(),
        count_throttled in any::<bool>(),
        keyed in any::<bool>(),
    ) {
        let mut s = settings(policy, window, 300, 1);
        s.knobs.throttle = Some(
            lazybreaker::throttle::Throttle::new(f64::from(k))
                .unwrap()
                .min_requests(min_requests)
                .max_probability(f64::from(cap) / 10.0)
                .seed(seed)
                .count_throttled(count_throttled),
        );
        check(&calls, &s, keyed)?;
        let report = try_replay(&trace_of(&calls, keyed), &s).unwrap();
        let live = live(&calls, &s, keyed);
        prop_assert_eq!(report.throttled, live.throttled);
        prop_assert!(report.throttled <= report.rejected);
        prop_assert!(report.throttled_expected >= 0.0);
        prop_assert!(report.throttled_expected <= report.calls as f64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A jittered candidate: each open period drawn from the same seed (the breaker's name
    /// by default, or its own) and the same count of draws, live or replayed, so every
    /// admission and every change match, at the same instants.
    #[test]
    fn a_jittered_replay_decides_as_a_live_breaker_does(
        calls in calls(),
        policy in 0..6usize,
        window in 0..3usize,
        timeout in 1u64..30,
        tenths in 1u32..=10,
        seed in proptest::option::of(any::<u64>()),
        keyed in any::<bool>(),
    ) {
        let mut s = settings(policy, window, timeout * 50, 1);
        s.knobs.jitter = Some(f64::from(tenths) / 10.0);
        s.knobs.jitter_seed = seed;
        check(&calls, &s, keyed)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A live breaker in dry run admits every call, and changes state as the replay of the
    /// same settings enforcing them: what it would have rejected is what the replay rejects.
    #[test]
    fn a_live_dry_run_matches_the_replay_of_its_settings(
        calls in calls(),
        policy in 0..6usize,
        window in 0..3usize,
        timeout in 1u64..30,
        keyed in any::<bool>(),
    ) {
        let enforcing = settings(policy, window, timeout * 50, 1);
        let mut shadow = enforcing.clone();
        shadow.knobs.dry_run = true;
        let report = try_replay(&trace_of(&calls, keyed), &enforcing).unwrap();
        let live = live(&calls, &shadow, keyed);
        prop_assert!(live.admitted.iter().all(|a| *a));
        prop_assert_eq!(live.would_reject, report.rejected);
        let replayed: Vec<_> = report
            .transitions
            .iter()
            .map(|c| (c.at, c.breaker.clone(), c.from, c.to))
            .collect();
        prop_assert_eq!(replayed, live.changes);
    }
}

/// Every policy and window at least once, on one trace with a hard outage: the property
/// above samples them; this makes sure none is left out, and that each trips.
#[test]
fn every_policy_and_window_trips_on_an_outage_and_matches_live() {
    let mut calls = Vec::new();
    for i in 0..600u64 {
        let down = (100..350).contains(&i);
        let outcome = if down {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        let latency = if down { 200 } else { 20 };
        calls.push((i * 10, latency, outcome, None));
    }
    for policy in 0..policies().len() {
        for window in 0..windows().len() {
            let s = settings(policy, window, 300, 1);
            check(&calls, &s, false).unwrap();
            let report = replay(&trace_of(&calls, false), &s);
            assert!(
                report.opened >= 1,
                "policy {policy} window {window}: {report:?}"
            );
            assert!(
                report.rejected_would_fail > 0,
                "policy {policy} window {window}"
            );
        }
    }
}

#[test]
fn every_candidate_of_a_file_is_replayed_and_named_by_its_key() {
    let candidates: SettingsMap = toml::from_str(
        r#"
        [strict]
        timeout = "1s"
        policy = { kind = "consecutive_failures", threshold = 2 }
        [lenient]
        timeout = "1s"
        policy = { kind = "consecutive_failures", threshold = 50 }
        "#,
    )
    .unwrap();
    let mut trace = Trace::new();
    for i in 0..100 {
        trace.push(ms(i * 10), ms(1), Outcome::Failure);
    }
    let reports = replay_all(&trace, &candidates).unwrap();
    let names: Vec<_> = reports.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["lenient", "strict"]); // the map's order
                                              // Two failures trip the strict one (at 11 ms), open for the rest of the second.
    assert_eq!(reports[1].failures_admitted, 2);
    assert_eq!(reports[1].opened, 1);
    assert_eq!(reports[0].failures_admitted, 50);
    assert_eq!(reports[0].opened, 1);
}

#[test]
fn settings_that_do_not_validate_replay_nothing_and_say_why() {
    let bad = Settings {
        policy: PolicyConfig::FailureRatio {
            ratio: 1.5,
            min_requests: 1,
        },
        ..Settings::default()
    };
    let mut trace = Trace::new();
    trace.push(ms(0), ms(1), Outcome::Success);
    let report = replay(&trace, &bad);
    assert_eq!((report.calls, report.admitted, report.rejected), (1, 0, 0));
    let why = report.invalid.as_deref().unwrap();
    assert!(why.contains("ratio"), "{why}");
    assert!(try_replay(&trace, &bad).is_err());
}

#[test]
fn the_csv_reader_names_the_line_and_the_column() {
    let cases: &[(&str, u64, Option<&str>, &str)] = &[
        ("", 1, None, "empty"),
        ("start,latency,outcome\n", 1, None, "header"),
        (
            "start_ms,latency_ms,outcome\n0,1,success\n1,2\n",
            3,
            None,
            "2 fields",
        ),
        (
            "start_ms,latency_ms,outcome\nx,1,success\n",
            2,
            Some("start_ms"),
            "`x`",
        ),
        (
            "start_ms,latency_ms,outcome\n0,1.0000001,success\n",
            2,
            Some("latency_ms"),
            "six decimals",
        ),
        (
            "start_ms,latency_ms,outcome\n0,1,succes\n",
            2,
            Some("outcome"),
            "`succes`",
        ),
        (
            "start_ms,latency_ms,outcome,key\n0,1,success,a\n\n2,1,failure,\n",
            4,
            Some("key"),
            "empty key",
        ),
        (
            "start_ms,latency_ms,outcome\n0,1,success,extra\n",
            2,
            None,
            "4 fields",
        ),
        (
            "start_ms,latency_ms,outcome,key\r\n\r\n0,1,success,\"a\r\n",
            3,
            None,
            "not closed",
        ),
        (
            "start_ms,latency_ms,outcome,key\n0,1,success,\"a\" b\n",
            2,
            None,
            "after a quoted",
        ),
    ];
    for &(text, line, column, says) in cases {
        let err = Trace::from_csv(text.as_bytes()).unwrap_err();
        assert_eq!(
            (err.line(), err.column()),
            (line, column),
            "{text:?}: {err}"
        );
        assert!(err.to_string().contains(says), "{text:?}: {err}");
        assert!(
            err.to_string().starts_with(&format!("line {line}")),
            "{err}"
        );
    }
}

#[test]
fn a_trace_written_as_csv_reads_back_the_same() {
    let mut trace = Trace::new();
    trace
        .push_keyed(
            "a,b \"quoted\"",
            ms(0),
            Duration::from_nanos(1_500),
            Outcome::Fatal,
        )
        .push_keyed(
            "plain",
            Duration::from_nanos(2_000_001),
            ms(3),
            Outcome::Excluded,
        )
        .push_keyed("plain", ms(5), ms(0), Outcome::Success);
    let mut csv = Vec::new();
    trace.write_csv(&mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    assert!(
        text.starts_with("start_ms,latency_ms,outcome,key\n0,0.0015,fatal,"),
        "{text}"
    );
    assert_eq!(Trace::from_csv(text.as_bytes()).unwrap(), trace);
}

/// Walks the replay's JSON and fails on a duration written against the rule of every JSON
/// the crates emit (`docs/integrations.md`, "Durations in JSON"): a field in another unit
/// (`_ns`, `_us`, `_s`, ...), a `_ms` field that is not whole milliseconds (an integer, or
/// `null` where there is none), or a duration string (the replay writes none). Returns the
/// `_ms` fields seen, by name, and whether each was set.
fn check_ms(value: &serde_json::Value, at: &str) -> Vec<(String, bool)> {
    use serde_json::Value;
    let mut seen = Vec::new();
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                seen.extend(check_ms(item, &format!("{at}[{i}]")));
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let path = format!("{at}.{key}");
                for unit in ["_ns", "_nanos", "_us", "_micros", "_s", "_secs", "_seconds"] {
                    assert!(!key.ends_with(unit), "{path}: a duration in another unit");
                }
                if key.ends_with("_ms") {
                    assert!(field.is_null() || field.is_u64(), "{path} = {field}");
                    seen.push((key.clone(), !field.is_null()));
                } else if let Value::String(text) = field {
                    assert!(
                        humantime::parse_duration(text).is_err(),
                        "{path} = {text:?}: a duration string"
                    );
                } else {
                    seen.extend(check_ms(field, &path));
                }
            }
        }
        _ => {}
    }
    seen
}

/// Every duration of a report is whole milliseconds, to the nearest, in a field ending in
/// `_ms`: a trace of odd microseconds, to see the rounding.
#[test]
fn every_duration_in_a_reports_json_is_whole_milliseconds() {
    let mut trace = Trace::new();
    // Ten calls failing from 1000.6 ms, one every 10 ms and 0.5 ms, each answering in
    // 1.3 ms; then successes until 4 s.
    for i in 0..10u64 {
        let start = Duration::from_micros(1_000_600 + i * 10_500);
        trace.push(start, Duration::from_micros(1_300), Outcome::Failure);
    }
    for i in 0..100u64 {
        trace.push(ms(2_000 + i * 20), ms(1), Outcome::Success);
    }
    let candidates: SettingsMap = toml::from_str(
        r#"
        [quick]
        timeout = "250ms"
        policy = { kind = "consecutive_failures", threshold = 3 }
        "#,
    )
    .unwrap();
    let reports = replay_all(&trace, &candidates).unwrap();
    let json = serde_json::to_value(&reports).unwrap();
    let seen = check_ms(&json, "candidates");
    for name in [
        "at_ms",
        "onset_ms",
        "end_ms",
        "tripped_after_ms",
        "closed_after_ms",
    ] {
        assert!(seen.contains(&(name.into(), true)), "{name} in {json}");
    }
    for name in ["time_to_trip_ms", "time_to_close_ms", "bin_ms"] {
        assert!(seen.contains(&(name.into(), true)), "{name} in {json}");
    }
    let r = &json[0];
    // The third failure, at 1021.6 ms, answered at 1022.9 ms: the trip, 1023 ms to the
    // nearest; the burst from 1000.6 ms (1001), 22.3 ms before it (22).
    assert_eq!(r["transitions"][0]["at_ms"], 1_023);
    assert_eq!(r["bursts"][0]["onset_ms"], 1_001);
    assert_eq!(r["bursts"][0]["tripped_after_ms"], 22);
    assert_eq!(r["time_to_trip_ms"], 22);
}

/// The tool, run as a user runs it: on files, with its outputs checked against the library.
mod tool {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;

    fn dir(name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    const CANDIDATES: &str = r#"
        [quick]
        timeout = "2s"
        policy = { kind = "consecutive_failures", threshold = 3 }
        ["<b>&slow</b>"]
        timeout = "30s"
        policy = { kind = "consecutive_failures", threshold = 20 }
    "#;

    fn outage() -> Trace {
        let mut trace = Trace::new();
        for i in 0..2_000u64 {
            let down = (500..900).contains(&i);
            let outcome = if down {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            trace.push_keyed(KEYS[(i % 2) as usize], ms(i * 10), ms(15), outcome);
        }
        trace
    }

    fn run(args: &[&std::ffi::OsStr]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_lazybreaker-replay"))
            .args(args)
            .output()
            .unwrap()
    }

    #[test]
    fn the_tool_prints_the_table_and_writes_the_json_and_the_html() {
        let dir = dir("replay-tool");
        let (trace_path, candidates_path) = (dir.join("trace.csv"), dir.join("c.toml"));
        let (json_path, html_path) = (dir.join("r.json"), dir.join("r.html"));
        let trace = outage();
        trace
            .write_csv(std::fs::File::create(&trace_path).unwrap())
            .unwrap();
        std::fs::write(&candidates_path, CANDIDATES).unwrap();
        let out = run(&[
            "--trace".as_ref(),
            trace_path.as_os_str(),
            "--candidates".as_ref(),
            candidates_path.as_os_str(),
            "--json".as_ref(),
            json_path.as_os_str(),
            "--html".as_ref(),
            html_path.as_os_str(),
        ]);
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let candidates: SettingsMap = toml::from_str(CANDIDATES).unwrap();
        let reports = replay_all(&trace, &candidates).unwrap();
        let mut lines = stdout.lines();
        let header: Vec<_> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(header[..4], ["candidate", "calls", "admitted", "rejected"]);
        for r in &reports {
            let row = lines.next().unwrap();
            assert!(row.starts_with(&r.name), "{row}");
            let figures: Vec<u64> = row[r.name.len()..]
                .split_whitespace()
                .take(7)
                .map(|f| f.parse().unwrap())
                .collect();
            let expected = [
                2000,
                r.admitted,
                r.rejected,
                r.rejected_would_fail,
                r.rejected_would_succeed,
                r.failures_admitted,
                r.opened,
            ];
            assert_eq!(figures, expected, "{row}");
        }
        assert!(reports
            .iter()
            .all(|r| r.opened >= 1 && r.rejected_would_fail > 0));

        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
        assert_eq!(json["trace"]["calls"], 2000);
        assert_eq!(json["trace"]["keys"], 2);
        let first = &json["candidates"][1];
        assert_eq!(first["name"], "quick");
        for field in [
            "calls",
            "admitted",
            "rejected",
            "rejected_would_fail",
            "rejected_would_succeed",
            "failures_admitted",
            "opened",
        ] {
            assert!(first[field].is_u64(), "{field} in {first}");
        }
        assert_eq!(first["admitted"], reports[1].admitted);
        let change = &first["transitions"][0];
        assert_eq!(
            (change["from"].as_str(), change["to"].as_str()),
            (Some("closed"), Some("open"))
        );
        assert!(change["at_ms"].as_f64().unwrap() > 5000.0);
        assert!(["alpha", "beta"].contains(&change["breaker"].as_str().unwrap()));
        let burst = &first["bursts"][0];
        assert_eq!(burst["onset_ms"], 5000.0);
        assert!(burst["tripped_after_ms"].as_f64().unwrap() > 0.0);
        assert!(first["time_to_close_ms"].as_f64().is_some());
        let seen = check_ms(&json, "report");
        assert!(seen.contains(&("span_ms".into(), true)), "{json}");
        assert_eq!(json["trace"]["span_ms"], 20_005);

        let html = std::fs::read_to_string(&html_path).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 2);
        assert!(html.contains("&lt;b&gt;&amp;slow&lt;/b&gt;"));
        assert!(!html.contains("<b>&slow</b>"));
        // Self-contained: nothing to load (an SVG's namespace is a name, not a resource).
        for loads in ["<script", "<link", "src=", "href=", "url(", "@import"] {
            assert!(!html.contains(loads), "{loads}");
        }
        assert!(html.contains("<rect"), "the state bands");
        assert!(html.contains("<polyline"), "the lines");

        // Each file written named on stderr, as given, in the order written; stdout only the table.
        let stderr = String::from_utf8(out.stderr).unwrap();
        let wrote: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("wrote "))
            .collect();
        assert_eq!(
            wrote,
            [json_path.to_str().unwrap(), html_path.to_str().unwrap()],
            "{stderr}"
        );
        assert!(wrote.iter().all(|p| std::path::Path::new(p).is_file()));
        assert!(!stdout.contains("wrote "), "{stdout}");
    }

    #[test]
    fn the_tool_names_each_file_it_wrote_as_given_and_nothing_else() {
        let dir = dir("replay-tool-wrote");
        let trace = outage();
        trace
            .write_csv(std::fs::File::create(dir.join("trace.csv")).unwrap())
            .unwrap();
        std::fs::write(dir.join("c.toml"), CANDIDATES).unwrap();
        let _ = std::fs::remove_file(dir.join("page.html"));
        let run_in = |extra: &[&str]| {
            let out = Command::new(env!("CARGO_BIN_EXE_lazybreaker-replay"))
                .current_dir(&dir)
                .args(["--trace", "trace.csv", "--candidates", "c.toml"])
                .args(extra)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stderr).unwrap()
        };

        // A relative path is printed as given, and names the file written there.
        let stderr = run_in(&["--html", "page.html"]);
        assert_eq!(stderr.trim_end(), "wrote page.html");
        assert!(dir.join("page.html").is_file());

        // No output file asked for: nothing said to have been written.
        let stderr = run_in(&[]);
        assert!(!stderr.contains("wrote"), "{stderr}");
    }

    /// The tool on a trace and a candidates file, nothing else.
    fn run_on(trace: &std::path::Path, candidates: &std::path::Path) -> std::process::Output {
        run(&[
            "--trace".as_ref(),
            trace.as_os_str(),
            "--candidates".as_ref(),
            candidates.as_os_str(),
        ])
    }

    #[test]
    fn the_tool_names_the_file_and_the_line_of_a_bad_trace() {
        let dir = dir("replay-tool-bad");
        let (trace_path, candidates_path) = (dir.join("bad.csv"), dir.join("c.toml"));
        std::fs::write(
            &trace_path,
            "start_ms,latency_ms,outcome\n0,1,success\n5,1,maybe\n",
        )
        .unwrap();
        std::fs::write(&candidates_path, CANDIDATES).unwrap();
        let out = run_on(&trace_path, &candidates_path);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("bad.csv: line 3, column outcome"),
            "{stderr}"
        );

        std::fs::write(&trace_path, "start_ms,latency_ms,outcome\n0,1,success\n").unwrap();
        std::fs::write(
            &candidates_path,
            "[x]\npolicy = { kind = \"failure_ratio\", ratio = 2.0, min_requests = 1 }\n",
        )
        .unwrap();
        let out = run_on(&trace_path, &candidates_path);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("c.toml") && stderr.contains("ratio"),
            "{stderr}"
        );

        let out = run(&["--trace".as_ref(), trace_path.as_os_str()]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "a missing argument is a usage error"
        );
    }

    /// The page explains its table beside it: a line for every column, in plain words; the text
    /// table's legend says the same.
    #[test]
    fn the_page_and_the_table_explain_their_columns() {
        let trace = outage();
        let candidates: SettingsMap = toml::from_str(CANDIDATES).unwrap();
        let reports = replay_all(&trace, &candidates).unwrap();
        let page = lazybreaker_replay::html(&trace, &reports);
        let text = lazybreaker_replay::legend(&reports);
        for (column, words) in [
            (
                "saved",
                "rejected calls that failed when they were made for real",
            ),
            (
                "cost",
                "rejected calls that succeeded when they were made for real",
            ),
            ("failures in", "admitted calls that failed"),
            ("opened", "times a breaker opened"),
            ("to trip", "the longest time from a failure burst"),
            ("to close", "the longest time from a burst"),
        ] {
            assert!(
                page.contains(&format!(
                    "<dt>{column}</dt><dd>{}",
                    words.replace('\'', "&#39;")
                )),
                "{column}"
            );
            let line = text.lines().find(|l| l.starts_with(column)).unwrap();
            assert!(line.contains(words), "{line}");
        }
        let table = page.split("<dl class=\"legend\">").next().unwrap();
        assert!(table.contains("<th>to trip</th><th>to close</th>"));
    }
}

/// A trace recorded from a live breaker in dry run replays to what that breaker saw: the
/// calls it would have rejected are the replay's rejections, its changes the replay's.
#[test]
fn a_recorded_dry_run_replays_to_what_the_live_breaker_decided() {
    use lazybreaker_replay::Recorder;
    let clock = ManualClock::new();
    let settings = Settings {
        knobs: Knobs {
            timeout: ms(200),
            max_requests: 2,
            dry_run: true,
            ..Knobs::default()
        },
        policy: PolicyConfig::ConsecutiveFailures { threshold: 3 },
        ..Settings::default()
    };
    let changes: Changes = Arc::default();
    let live = builder(&settings, &clock, &changes).build();
    let recorder = Recorder::with_clock(10_000, clock.clone());
    recorder.start();
    for i in 0..600u64 {
        clock.advance(ms(10));
        let fails = (150..300).contains(&i) || i % 17 == 0;
        let latency = ms(1 + i % 7);
        let result = recorder.execute(&live, || {
            clock.advance(latency);
            if fails {
                Err("down")
            } else {
                Ok(())
            }
        });
        assert_eq!(result.is_err(), fails, "dry run: every call was made");
    }
    let mut csv = Vec::new();
    recorder.write_csv(&mut csv).unwrap();
    let trace = Trace::from_csv(&csv[..]).unwrap();
    assert_eq!(trace.len(), 600);
    let report = replay(&trace, &settings);
    let totals = live.totals();
    assert!(totals.would_reject > 100, "{totals:?}");
    assert_eq!(report.rejected, totals.would_reject);
    assert_eq!(report.admitted, totals.admitted);
    // The same changes, the trace's zero being the first call's start (10 ms in).
    let replayed: Vec<_> = report
        .transitions
        .iter()
        .map(|c| (c.at + ms(10), c.from, c.to))
        .collect();
    let lived: Vec<_> = changes.lock().iter().map(|c| (c.0, c.2, c.3)).collect();
    assert_eq!(replayed, lived);
}

/// A call that panics through `Recorder::execute` is a failure to the breaker, and so in the
/// trace; the panic continues to the caller.
#[test]
fn item_13_a_call_that_panics_is_recorded_as_the_failure_the_breaker_counted() {
    use lazybreaker::{Breaker, ManualClock};
    use lazybreaker_replay::Recorder;

    let recorder = Recorder::with_clock(16, ManualClock::new());
    recorder.start();
    let breaker = Breaker::builder().build();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        recorder.execute(&breaker, || -> Result<(), ()> {
            panic!("the call panicked")
        })
    }));
    let payload = caught.expect_err("the panic continues");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the call panicked"));
    assert_eq!(breaker.totals().failures, 1);
    let trace = recorder.trace();
    let calls: Vec<_> = trace.iter().map(|c| c.outcome).collect();
    assert_eq!(calls, [Outcome::Failure]);
    // A call that returns is recorded as before.
    recorder.execute(&breaker, || Ok::<_, ()>(())).unwrap();
    let trace = recorder.trace();
    let calls: Vec<_> = trace.iter().map(|c| c.outcome).collect();
    assert_eq!(calls, [Outcome::Failure, Outcome::Success]);
}

/// A spreadsheet's CSV starts with a byte-order mark: the header is read past it. What an
/// error quotes of the file shows its control characters escaped, never raw.
#[test]
fn item_14_a_byte_order_mark_is_read_past_and_control_characters_are_shown_escaped() {
    let trace = Trace::from_csv("\u{feff}start_ms,latency_ms,outcome\n0,5,success\n".as_bytes())
        .expect("a header behind a byte-order mark");
    assert_eq!(trace.len(), 1);
    let keyed =
        Trace::from_csv("\u{feff}start_ms,latency_ms,outcome,key\n0,5,failure,a\n".as_bytes())
            .expect("a keyed header behind a byte-order mark");
    assert_eq!(keyed.keys().collect::<Vec<_>>(), ["a"]);

    let err = Trace::from_csv("start_ms,latency_ms,outcome\n0,5,succ\0ess\n".as_bytes())
        .expect_err("not an outcome");
    let shown = err.to_string();
    assert!(!shown.contains('\0'), "{shown:?}");
    assert!(shown.contains("succ\\u{0}ess"), "{shown}");
    assert!(shown.starts_with("line 2, column outcome: "), "{shown}");

    // A mark further in is no header's, and is shown escaped too.
    let err =
        Trace::from_csv("start_ms,\u{feff}latency_ms,outcome\n".as_bytes()).expect_err("header");
    let shown = err.to_string();
    assert!(
        !shown.contains('\u{feff}') && shown.contains("\\u{feff}"),
        "{shown}"
    );
}

/// A trace saved by a spreadsheet (a byte-order mark, quoted header cells, CRLF line ends;
/// saved twice, two marks) reads as the same calls as the plain file.
#[test]
fn a_spreadsheets_trace_reads_as_the_same_calls() {
    let plain =
        "start_ms,latency_ms,outcome,key\n0,5,success,a\n1.5,20,failure,\"b,c\"\n3,7,excluded,a\n";
    let expected = Trace::from_csv(plain.as_bytes()).unwrap();
    let calls = |t: &Trace| {
        t.iter()
            .map(|c| (c.start, c.latency, c.outcome, c.key.map(str::to_owned)))
            .collect::<Vec<_>>()
    };
    assert_eq!(calls(&expected).len(), 3);
    let crlf = plain.replace('\n', "\r\n");
    let quoted = crlf.replacen(
        "start_ms,latency_ms,outcome,key",
        "\"start_ms\",\"latency_ms\",\"outcome\",\"key\"",
        1,
    );
    for saved in [
        format!("\u{feff}{plain}"),
        format!("\u{feff}{crlf}"),
        format!("\u{feff}{quoted}"),
        format!("\u{feff}\u{feff}{plain}"),
    ] {
        let trace = Trace::from_csv(saved.as_bytes()).unwrap_or_else(|e| panic!("{saved:?}: {e}"));
        assert_eq!(calls(&trace), calls(&expected), "{saved:?}");
    }
}

/// A header that differs from the expected one only by what cannot be seen (a zero-width
/// joiner, a soft hyphen) or by a look-alike letter (a Cyrillic `о`) is refused with the
/// difference written out, so the two headers in the message do not look identical.
#[test]
fn a_header_that_differs_invisibly_is_shown_with_the_difference_escaped() {
    for (header, shown) in [
        ("start_ms,latency\u{200d}_ms,outcome", "latency\\u{200d}_ms"),
        ("start_ms,latency_ms,out\u{ad}come", "out\\u{ad}come"),
        ("start_ms,latency_ms,\u{43e}utcome", "\\u{43e}utcome"),
    ] {
        let err = Trace::from_csv(format!("{header}\n0,5,success\n").as_bytes())
            .expect_err("a header that is not the expected one");
        let message = err.to_string();
        assert_eq!(err.line(), 1);
        assert!(message.contains(shown), "{message}");
        assert!(message.is_ascii(), "{message}");
    }
}

/// An overload: 100 calls a second for 200 s, 40 % of them answered 503 (a failure) from
/// 50 s to 110 s. A throttle with `k` below 1 / 0.6 sheds in proportion; `k = 2` tolerates
/// it (accepts are more than half the requests). The drawn count stays within a few
/// standard deviations of the expected one (the sum of `p`), and replay matches live.
#[test]
fn an_overload_is_shed_in_proportion_and_the_draws_meet_their_expectation() {
    let mut calls = Vec::new();
    let mut rng = 7u64;
    for i in 0..20_000u64 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let overloaded = (5_000..11_000).contains(&i);
        let outcome = if overloaded && (rng >> 33) % 10 < 4 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        calls.push((i * 10, 20, outcome, None));
    }
    let trace = trace_of(&calls, false);
    let candidate = |k: f64| Settings {
        knobs: Knobs {
            interval: Duration::from_secs(10),
            bucket_period: Duration::from_secs(1),
            throttle: Some(lazybreaker::throttle::Throttle::new(k).unwrap().seed(5)),
            ..Knobs::default()
        },
        policy: PolicyConfig::FailureRatio {
            ratio: 0.8,
            min_requests: 100,
        },
        ..Settings::default()
    };
    let gentle = replay(&trace, &candidate(2.0));
    assert_eq!(gentle.opened, 0);
    assert_eq!(
        gentle.throttled, 0,
        "k = 2 lets a 60 % success rate through"
    );
    let firm = replay(&trace, &candidate(1.2));
    assert_eq!(
        firm.opened, 0,
        "no trip: the throttle sheds, the breaker stays closed"
    );
    // In steady overload p = (1 - 1.2 * 0.6) = 0.28 of the calls, over about 6 000 calls.
    assert!(
        (1_000..2_500).contains(&firm.throttled),
        "{} throttled",
        firm.throttled
    );
    let sigma = firm.throttled_expected.sqrt();
    assert!(
        (firm.throttled as f64 - firm.throttled_expected).abs() < 5.0 * sigma,
        "drawn {} against expected {:.1}",
        firm.throttled,
        firm.throttled_expected
    );
    assert_eq!(firm.rejected, firm.throttled);
    check(&calls, &candidate(1.2), false).unwrap();
}

/// The two counting modes on the shipped trace (`examples/replay/trace.csv`: 20 calls a
/// second, a 30 s hard outage from 60 s to 90 s, then a minute healthy): a throttle only
/// (`never_trips`, so every rejection is the throttle's), `k = 2`, a rolling 10 s window.
/// How long after the outage each keeps turning calls away; printed for the docs
/// (`docs/throttle.md`), and the book's mode must take longer.
#[test]
fn the_shipped_trace_measures_how_long_each_counting_mode_keeps_shedding() {
    let csv = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/replay/trace.csv"
    ))
    .unwrap();
    let trace = Trace::from_csv(csv.as_bytes()).unwrap();
    let recovery = |count_throttled: bool| {
        let settings = Settings {
            knobs: Knobs {
                interval: Duration::from_secs(10),
                bucket_period: Duration::from_secs(1),
                never_trips: true,
                throttle: Some(
                    lazybreaker::throttle::Throttle::new(2.0)
                        .unwrap()
                        .count_throttled(count_throttled),
                ),
                ..Knobs::default()
            },
            ..Settings::default()
        };
        let report = replay(&trace, &settings);
        assert_eq!(
            report.rejected, report.throttled,
            "only the throttle rejects"
        );
        // The last bin in the healthy minute after the outage with a call turned away.
        let bin = report.bin.as_secs_f64();
        let (from, to) = ((90.0 / bin) as usize, (150.0 / bin) as usize);
        let last = (from..to)
            .rev()
            .find(|&i| report.rejected_over_time[i] > 0)
            .map(|i| (i + 1) as f64 * bin - 90.0);
        let after: u64 = report.rejected_over_time[from..to].iter().sum();
        (report.throttled, after, last)
    };
    let (total, after, last) = recovery(false);
    let (total_counted, after_counted, last_counted) = recovery(true);
    eprintln!(
        "throttled calls, and after the outage (until the last, in s): not counted {total}, {after} ({last:?}); counted {total_counted}, {after_counted} ({last_counted:?})"
    );
    assert!(total > 0 && total_counted > total);
    assert!(after_counted > after, "{after_counted} against {after}");
    assert!(last_counted.unwrap_or(0.0) > last.unwrap_or(0.0));
}

/// How long each open period of `report` lasted: from each change to open to the next
/// change of that breaker (to half-open, at the first call after the period).
fn open_periods(report: &lazybreaker_replay::Report) -> Vec<Duration> {
    report
        .transitions
        .windows(2)
        .filter(|w| w[0].to == State::Open && w[1].from == State::Open)
        .map(|w| w[1].at - w[0].at)
        .collect()
}

#[test]
fn a_replay_carries_the_candidates_jitter() {
    // A call every millisecond, each failing at once: the breaker trips, and each probe
    // fails; the first call strictly after an open period of `p` ms comes `p + 1` ms after
    // it opened.
    let mut trace = Trace::new();
    for t in 0..20_000 {
        trace.push(ms(t), ms(0), Outcome::Failure);
    }
    let candidate = |jitter: Option<f64>| Settings {
        knobs: Knobs {
            name: "payments".into(),
            timeout: ms(1_000),
            jitter,
            ..Knobs::default()
        },
        policy: PolicyConfig::ConsecutiveFailures { threshold: 3 },
        ..Settings::default()
    };
    let exact = open_periods(&replay(&trace, &candidate(None)));
    assert!(exact.len() >= 15, "{}", exact.len());
    assert!(exact.iter().all(|p| *p == ms(1_001)), "{exact:?}");
    let spread = open_periods(&replay(&trace, &candidate(Some(0.5))));
    assert!(spread.len() > exact.len(), "shorter periods, more of them");
    assert!(
        spread.iter().all(|p| (ms(501)..=ms(1_001)).contains(p)),
        "{spread:?}"
    );
    let distinct: std::collections::BTreeSet<_> = spread.iter().collect();
    assert!(distinct.len() > 5, "{spread:?}");
    assert_eq!(
        open_periods(&replay(&trace, &candidate(Some(0.5)))),
        spread,
        "the same candidate replays the same periods"
    );
}
