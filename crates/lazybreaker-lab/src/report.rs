//! What a run measured: one [`Row`] per strategy and scenario (and its [`Phase`]s: before,
//! during and after the fault), as markdown tables and JSON.
//!
//! Durations: in the JSON (`results.json`), milliseconds in fields ending in `_ms`, whole
//! (integers) but for the latencies, which keep the histogram's microseconds (the
//! percentiles of loopback calls are fractions of a millisecond); in the tables, as people
//! read them, `<1ms` for a figure above zero that would read `0ms` (`docs/integrations.md`,
//! "Durations in JSON").

use std::time::Duration;

use hdrhistogram::Histogram;
use lazybreaker::human;
use serde::{Deserialize, Serialize};

use crate::run::Sample;
use crate::scenario::{Hit, Scenario, Timeline};
use crate::upstream::ATTEMPT_BIN;

/// The window the time-based figures are read in.
pub const WINDOW: Duration = Duration::from_millis(200);
/// A sick node is isolated once its share of the calls stays at or below this, window after
/// window, until the fault ends (its fair share is one in three).
const ISOLATED_SHARE: f64 = 0.10;
/// It is back once its share of a window reaches this again.
const BACK_SHARE: f64 = 0.20;
/// After a total outage, the service is back once this share of a window's calls succeed.
const BACK_SUCCESS: f64 = 0.90;

/// One strategy in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub scenario: String,
    pub strategy: String,
    pub calls: u64,
    /// Calls answered 2xx within the deadline, in per cent.
    pub success: f64,
    /// Successful calls per second over the run.
    pub goodput: f64,
    /// Calls shed by a concurrency limit ([`Answer::Shed`](crate::client::Answer::Shed)):
    /// refused at once by the client's limit, or by HAProxy's queue.
    #[serde(default)]
    pub shed: u64,
    /// Calls that reached their deadline without an answer
    /// ([`Answer::Timeout`](crate::client::Answer::Timeout)): a hang, or a wait in a queue.
    #[serde(default)]
    pub timed_out: u64,
    /// The attempts the replicas received for the run's calls (a refused connection, or
    /// one never accepted, is not received).
    pub attempts: u64,
    /// Attempts per call: `attempts / calls` (under 1 when calls are turned away unsent).
    pub amplification: f64,
    /// Extra attempts per call: `amplification - 1` (negative when calls are turned away
    /// unsent, or refused, more than others are retried or hedged).
    pub extra: f64,
    /// Latency of every call from when it was due, in milliseconds to the microsecond (the
    /// histogram's unit): a float, the one kind of duration the lab measures below a
    /// millisecond.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Calls sent to the sick node (replica 0) while it was sick; `None` when every node was.
    pub sick_calls: Option<u64>,
    /// Of those, the calls sent after it was isolated.
    pub sick_after_isolation: Option<u64>,
    /// Milliseconds from the fault to isolation (for a total outage: until most calls fail
    /// fast instead of being sent), whole ([`WINDOW`]s); `None`: never within the fault.
    pub isolate_ms: Option<u64>,
    /// Milliseconds from the recovery until the node takes its share again (for a total
    /// outage: until 90 % of a window's calls succeed), whole ([`WINDOW`]s); `None`: not
    /// within the run.
    pub back_ms: Option<u64>,
    /// Calls that failed after the recovery, until the node was back.
    pub wasted: u64,
    /// The figures of each phase: before the fault, during it, after the recovery.
    pub phases: Vec<Phase>,
    /// The figures of the span the scenario's goal is judged on, when it has one
    /// ([`Scenario::focus`]: `cold-start`'s warm-up).
    pub focus: Option<Phase>,
}

/// One phase of a run: the calls due within it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// `before`, `fault` or `after`.
    pub phase: String,
    pub calls: u64,
    /// The attempts the replicas received for these calls.
    pub attempts: u64,
    /// `attempts / calls`.
    pub amplification: f64,
    /// `amplification - 1`.
    pub extra: f64,
    /// Successful calls per second of the phase.
    pub goodput: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// Calls that did not succeed within the deadline (what a user sees fail).
    pub failed: u64,
    /// Of those, the calls the strategy turned away unsent (failing fast).
    pub unsent: u64,
    /// Of those, the calls a concurrency limit shed ([`Row::shed`]).
    #[serde(default)]
    pub shed: u64,
}

/// The phases' names, in order.
pub const PHASES: [&str; 3] = ["before", "fault", "after"];

/// `n / of`, 0 when `of` is.
fn per(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 / of as f64
    }
}

/// The latency histogram of `samples`, in microseconds.
fn histogram<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Histogram<u64> {
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
    for s in samples {
        let micros = u64::try_from(s.latency.as_micros()).unwrap_or(u64::MAX);
        let _ = histogram.record(micros.clamp(1, 3_600_000_000));
    }
    histogram
}

/// The attempts in `attempts` (per [`ATTEMPT_BIN`]) for the calls due in `from..to`.
fn attempts_within(attempts: &[u64], from: Duration, to: Duration) -> u64 {
    let bin = |at: Duration| (at.as_nanos() / ATTEMPT_BIN.as_nanos()) as usize;
    attempts.iter().take(bin(to)).skip(bin(from)).sum()
}

/// The phases of `samples` on `timeline`.
fn phases(timeline: Timeline, samples: &[Sample], attempts: &[u64]) -> Vec<Phase> {
    let spans = [
        (Duration::ZERO, timeline.fault_at),
        (timeline.fault_at, timeline.recover_at),
        (timeline.recover_at, timeline.end),
    ];
    PHASES
        .iter()
        .zip(spans)
        .map(|(name, (from, to))| phase(name, from, to, samples, attempts))
        .collect()
}

/// The figures of the calls of `samples` due in `from..to`, as phase `name`.
fn phase(name: &str, from: Duration, to: Duration, samples: &[Sample], attempts: &[u64]) -> Phase {
    let within: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at >= from && s.at < to)
        .collect();
    let calls = within.len() as u64;
    let ok = within.iter().filter(|s| s.answer.is_ok()).count() as u64;
    let attempts = attempts_within(attempts, from, to);
    let histogram = histogram(within.iter().copied());
    Phase {
        phase: name.to_owned(),
        calls,
        attempts,
        amplification: per(attempts, calls),
        extra: per(attempts, calls) - 1.0,
        goodput: ok as f64 / (to - from).as_secs_f64().max(1e-9),
        p99_ms: ms(histogram.value_at_quantile(0.99)),
        p999_ms: ms(histogram.value_at_quantile(0.999)),
        failed: calls - ok,
        unsent: within
            .iter()
            .filter(|s| s.answer == crate::client::Answer::Rejected)
            .count() as u64,
        shed: within
            .iter()
            .filter(|s| s.answer == crate::client::Answer::Shed)
            .count() as u64,
    }
}

/// `x` with its sign, two decimals (`+0.00` rather than `-0.00`).
fn signed(x: f64) -> String {
    let x = (x * 100.0).round() / 100.0;
    if x == 0.0 {
        "+0.00".to_owned()
    } else {
        format!("{x:+.2}")
    }
}

/// Microseconds (the histogram's unit) as milliseconds.
fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// A latency in milliseconds as people read it ([`human::measured`]: `<1ms` for one above
/// zero that would read `0ms`, as a loopback call's median may).
fn shown(ms: f64) -> String {
    human::measured(Duration::from_secs_f64(ms.max(0.0) / 1e3)).to_string()
}

/// The figures of `samples` for `strategy` in `scenario` on `timeline`, with the
/// `attempts` the replicas received (per [`ATTEMPT_BIN`] of the calls' due times).
pub fn row(
    strategy: &str,
    scenario: &Scenario,
    timeline: Timeline,
    samples: &[Sample],
    attempts: &[u64],
) -> Row {
    let histogram = histogram(samples);
    let attempted = attempts_within(attempts, Duration::ZERO, timeline.end);
    let ok = samples.iter().filter(|s| s.answer.is_ok()).count() as u64;
    let calls = samples.len() as u64;
    let windows = windows(samples, timeline.end);
    let (fault, recover) = (index(timeline.fault_at), index(timeline.recover_at));
    let one = scenario.hit == Hit::One;
    // Isolation: the first window from which the sick node's share (or, for a total outage,
    // the share of calls sent at all) stays low until the fault ends.
    let low = |w: &Window| {
        if one {
            w.share(w.sick) <= ISOLATED_SHARE
        } else {
            w.share(w.sent) <= ISOLATED_SHARE
        }
    };
    let isolated_at = (fault..recover)
        .find(|&i| windows[i..recover].iter().all(low) && !windows[i..recover].is_empty());
    let back_at = (recover..windows.len()).find(|&i| {
        let w = &windows[i];
        if one {
            w.share(w.sick) >= BACK_SHARE
        } else {
            w.calls > 0 && w.share(w.ok) >= BACK_SUCCESS
        }
    });
    let in_fault = |s: &&Sample| s.at >= timeline.fault_at && s.at < timeline.recover_at;
    let sick = |s: &&Sample| s.node == Some(0) && s.answer.reached_a_replica();
    let sick_calls = one.then(|| samples.iter().filter(in_fault).filter(sick).count() as u64);
    let sick_after_isolation = one.then(|| {
        let from = isolated_at.map_or(timeline.recover_at, |i| WINDOW * i as u32);
        samples
            .iter()
            .filter(in_fault)
            .filter(sick)
            .filter(|s| s.at >= from)
            .count() as u64
    });
    let back_until = back_at.map_or(timeline.end, |i| WINDOW * i as u32);
    let wasted = samples
        .iter()
        .filter(|s| s.at >= timeline.recover_at && s.at < back_until && !s.answer.is_ok())
        .count() as u64;
    let millis =
        |i: usize, from: Duration| human::span_ms((WINDOW * i as u32).saturating_sub(from));
    Row {
        scenario: scenario.name.to_owned(),
        strategy: strategy.to_owned(),
        calls,
        success: if calls == 0 {
            0.0
        } else {
            100.0 * ok as f64 / calls as f64
        },
        goodput: ok as f64 / timeline.end.as_secs_f64(),
        shed: samples
            .iter()
            .filter(|s| s.answer == crate::client::Answer::Shed)
            .count() as u64,
        timed_out: samples
            .iter()
            .filter(|s| s.answer == crate::client::Answer::Timeout)
            .count() as u64,
        attempts: attempted,
        amplification: per(attempted, calls),
        extra: per(attempted, calls) - 1.0,
        p50_ms: ms(histogram.value_at_quantile(0.5)),
        p99_ms: ms(histogram.value_at_quantile(0.99)),
        p999_ms: ms(histogram.value_at_quantile(0.999)),
        max_ms: ms(histogram.max()),
        sick_calls,
        sick_after_isolation,
        isolate_ms: isolated_at.map(|i| millis(i, timeline.fault_at)),
        back_ms: back_at.map(|i| millis(i, timeline.recover_at)),
        wasted,
        phases: phases(timeline, samples, attempts),
        focus: scenario
            .focus(timeline)
            .map(|(name, from, to)| phase(name, from, to, samples, attempts)),
    }
}

/// The calls of one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub calls: u64,
    pub ok: u64,
    /// Sent to a replica (not turned away by the strategy).
    pub sent: u64,
    /// Sent to the sick node.
    pub sick: u64,
}

impl Window {
    fn share(&self, n: u64) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            n as f64 / self.calls as f64
        }
    }
}

fn index(at: Duration) -> usize {
    (at.as_nanos() / WINDOW.as_nanos()) as usize
}

/// The calls due in each window of the run.
pub fn windows(samples: &[Sample], end: Duration) -> Vec<Window> {
    let mut windows = vec![Window::default(); index(end).max(1)];
    for s in samples {
        let Some(w) = windows.get_mut(index(s.at)) else {
            continue;
        };
        w.calls += 1;
        w.ok += u64::from(s.answer.is_ok());
        let sent = s.answer.reached_a_replica();
        w.sent += u64::from(sent);
        w.sick += u64::from(sent && s.node == Some(0));
    }
    windows
}

/// The rows as a markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | strategy | success | goodput/s | shed | at deadline | attempts/call | extra/call | p50 | p99 | p999 | to sick node | after isolation | isolated in | back in | failed after recovery |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let millis = |ms: Option<u64>, never: &str| {
        ms.map_or(never.to_owned(), |ms| {
            human::span(Duration::from_millis(ms)).to_string()
        })
    };
    let count = |n: Option<u64>| n.map_or("all".to_owned(), |n| n.to_string());
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.2} % | {:.0} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.strategy,
            r.success,
            r.goodput,
            r.shed,
            r.timed_out,
            r.amplification,
            signed(r.extra),
            shown(r.p50_ms),
            shown(r.p99_ms),
            shown(r.p999_ms),
            count(r.sick_calls),
            count(r.sick_after_isolation),
            millis(r.isolate_ms, "never"),
            millis(r.back_ms, "not in run"),
            r.wasted,
        ));
    }
    out
}

/// The rows phase by phase, as a markdown table: each cell gives the figure before the fault,
/// during it and after the recovery.
pub fn phase_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | strategy | attempts/call | goodput/s | p99 | p999 | failed calls | of which unsent | of which shed |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let cells =
            |f: &dyn Fn(&Phase) -> String| r.phases.iter().map(f).collect::<Vec<_>>().join(" · ");
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.strategy,
            cells(&|p| format!("{:.2}", p.amplification)),
            cells(&|p| format!("{:.0}", p.goodput)),
            cells(&|p| shown(p.p99_ms)),
            cells(&|p| shown(p.p999_ms)),
            cells(&|p| p.failed.to_string()),
            cells(&|p| p.unsent.to_string()),
            cells(&|p| p.shed.to_string()),
        ));
    }
    out
}

/// The rows whose scenario has a span of interest ([`Row::focus`]), over that span, as a
/// markdown table; empty when none has.
pub fn focus_table(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        let Some(f) = &r.focus else { continue };
        if out.is_empty() {
            out.push_str(
                "| scenario | span | strategy | calls | failed | of which unsent | extra/call | p99 | p999 | p99 before the fault |\n\
                 |---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
            );
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            f.phase,
            r.strategy,
            f.calls,
            f.failed,
            f.unsent,
            signed(f.extra),
            shown(f.p99_ms),
            shown(f.p999_ms),
            r.phases
                .first()
                .map_or_else(String::new, |p| shown(p.p99_ms)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Answer;

    fn sample(at_ms: u64, latency_ms: u64, answer: Answer) -> Sample {
        Sample {
            at: Duration::from_millis(at_ms),
            latency: Duration::from_millis(latency_ms),
            answer,
            node: Some(1),
        }
    }

    /// Walks the lab's JSON and fails on a duration written against the rule of every JSON
    /// the crates emit (`docs/integrations.md`, "Durations in JSON"): a field in another
    /// unit (`_ns`, `_us`, `_s`, ...), a `_ms` field that is not an integer (or `null`) but
    /// for the latencies in `floats`, a duration string (the lab writes none). Returns the
    /// `_ms` fields seen, by name, and whether each was set.
    fn check_ms(value: &serde_json::Value, at: &str, floats: &[&str]) -> Vec<(String, bool)> {
        use serde_json::Value;
        let mut seen = Vec::new();
        match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    seen.extend(check_ms(item, &format!("{at}[{i}]"), floats));
                }
            }
            Value::Object(fields) => {
                for (key, field) in fields {
                    let path = format!("{at}.{key}");
                    for unit in ["_ns", "_nanos", "_us", "_micros", "_s", "_secs", "_seconds"] {
                        assert!(!key.ends_with(unit), "{path}: a duration in another unit");
                    }
                    if key.ends_with("_ms") {
                        let float = floats.contains(&key.as_str()) && field.is_f64();
                        assert!(
                            field.is_null() || field.is_u64() || float,
                            "{path} = {field}"
                        );
                        seen.push((key.clone(), !field.is_null()));
                    } else if let Value::String(text) = field {
                        let duration =
                            text.chars().any(|c| c.is_ascii_digit()) && text.ends_with('s');
                        assert!(!duration, "{path} = {text:?}: a duration string");
                    } else {
                        seen.extend(check_ms(field, &path, floats));
                    }
                }
            }
            _ => {}
        }
        seen
    }

    /// A short run in which node 0 takes its share but from 400 ms into the fault to its
    /// end (back in the first whole window after it, 100 ms later), every call answering in
    /// 0.3 ms: its row's JSON has every duration in
    /// milliseconds, whole but for the latencies; its tables read whole milliseconds, `<1ms`
    /// for the latencies.
    #[test]
    fn every_duration_in_the_json_is_milliseconds_and_the_tables_read_whole_ones() {
        let timeline = Timeline::SHORT;
        let scenario = crate::scenario::named("errors").expect("the errors scenario");
        let samples: Vec<Sample> = (0..4_000u64)
            .map(|i| {
                let at = Duration::from_millis(i);
                let shunned = at >= timeline.fault_at + Duration::from_millis(400)
                    && at < timeline.recover_at;
                let node = if shunned && i % 3 == 0 { 1 } else { i % 3 };
                Sample {
                    at,
                    latency: Duration::from_micros(300),
                    answer: Answer::Ok,
                    node: Some(node as usize),
                }
            })
            .collect();
        let r = row("x", scenario, timeline, &samples, &vec![100; 400]);
        assert_eq!((r.isolate_ms, r.back_ms), (Some(400), Some(100)));
        let json = serde_json::to_value(&r).unwrap();
        let latencies = ["p50_ms", "p99_ms", "p999_ms", "max_ms"];
        let seen = check_ms(&json, "row", &latencies);
        for name in latencies.iter().chain(&["isolate_ms", "back_ms"]) {
            assert!(seen.contains(&(name.to_string(), true)), "{name} in {json}");
        }
        assert_eq!(json["isolate_ms"], 400);
        assert!(
            (json["p50_ms"].as_f64().unwrap() - 0.3).abs() < 0.001,
            "{json}"
        );

        let table = table(std::slice::from_ref(&r));
        let cells: Vec<&str> = table
            .lines()
            .nth(2)
            .unwrap()
            .split('|')
            .map(str::trim)
            .collect();
        // p50, p99, p999; isolated in, back in.
        assert_eq!(cells[9..12], ["<1ms", "<1ms", "<1ms"], "{table}");
        assert_eq!(cells[14..16], ["400ms", "100ms"], "{table}");
        assert!(phase_table(&[r]).contains("<1ms · <1ms · <1ms"));
    }

    #[test]
    fn a_phase_counts_its_extra_attempts_and_its_tail() {
        // 1 000 calls due in the first second, one a millisecond: the last one slow, one
        // turned away; 1 100 attempts received for them (ten bins of 110).
        let mut samples: Vec<Sample> = (0..1_000).map(|i| sample(i, 5, Answer::Ok)).collect();
        samples[999].latency = Duration::from_millis(250);
        samples[500].answer = Answer::Rejected;
        samples[501].answer = Answer::Shed;
        let attempts = vec![110; 10];
        let p = phase(
            "x",
            Duration::ZERO,
            Duration::from_secs(1),
            &samples,
            &attempts,
        );
        assert_eq!(
            (p.calls, p.attempts, p.failed, p.unsent, p.shed),
            (1_000, 1_100, 2, 1, 1)
        );
        assert!((p.amplification - 1.1).abs() < 1e-9);
        assert!((p.extra - 0.1).abs() < 1e-9);
        assert!((p.p99_ms - 5.0).abs() < 0.01, "{p:?}");
        assert!(p.p999_ms >= 5.0 && p.p999_ms <= p.p99_ms + 250.0, "{p:?}");
        assert_eq!(signed(p.extra), "+0.10");
        assert_eq!(signed(-0.001), "+0.00");
        assert_eq!(signed(-0.25), "-0.25");
    }
}
