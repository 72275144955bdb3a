//! A replay's reports as a text table and as one self-contained HTML page with a plot per
//! candidate.

use std::fmt::Write as _;
use std::time::Duration;

use plotters::prelude::*;

use super::report::{bin_for, Report, Sweep};
use super::trace::Trace;
use lazybreaker::human;
use lazybreaker::policy::Outcome;
use lazybreaker::State;

/// The reports as a text table, one row per candidate: the figures of [`Report`], times as
/// people read them (`459ms`, `1m 5s`; `<1ms` above zero but under half a millisecond; `-`
/// where there is none). [`legend`] says what each
/// column means.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::Settings;
/// use lazybreaker_replay::{replay, table, Trace};
///
/// let report = replay(&Trace::new(), &Settings::default());
/// let text = table(&[report]);
/// assert!(text.lines().next().unwrap().starts_with("candidate"));
/// assert!(text.lines().nth(1).unwrap().starts_with("replay"));
/// ```
pub fn table(reports: &[Report]) -> String {
    // A throttle's columns, after `rejected`, when a candidate has one that met a
    // probability above zero: what it turned away, and what it was expected to.
    let throttles = throttles(reports);
    let with_throttle = |cells: Vec<String>, r: Option<&Report>| -> Vec<String> {
        if !throttles {
            return cells;
        }
        let mut cells = cells;
        let (drawn, expected) = match r {
            Some(r) => (
                r.throttled.to_string(),
                format!("{:.1}", r.throttled_expected),
            ),
            None => ("throttled".to_owned(), "expected".to_owned()),
        };
        cells.insert(4, expected);
        cells.insert(4, drawn);
        cells
    };
    let header = with_throttle(HEADER.iter().map(|h| (*h).to_owned()).collect(), None);
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| with_throttle(row(r).into(), Some(r)))
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, &w)) in cells.zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(text, "{cell:<w$}");
            } else {
                let _ = write!(text, "  {cell:>w$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().map(String::as_str));
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// The table's columns.
const HEADER: [&str; 10] = [
    "candidate",
    "calls",
    "admitted",
    "rejected",
    "saved",
    "cost",
    "failures in",
    "opened",
    "to trip",
    "to close",
];

/// What each column means, in the order of the table (the throttle's two columns, which
/// come after `rejected`, last): the legend beside the HTML table and below the text one.
const LEGEND: [(&str, &str); 12] = [
    ("candidate", "the candidate's name in the candidates file"),
    ("calls", "calls in the trace"),
    ("admitted", "calls the candidate's breakers let through"),
    (
        "rejected",
        "calls they turned away (open, or half-open with every probe out, or throttled)",
    ),
    (
        "saved",
        "rejected calls that failed when they were made for real: load taken off a failing dependency",
    ),
    (
        "cost",
        "rejected calls that succeeded when they were made for real: good calls the breaker would have lost",
    ),
    (
        "failures in",
        "admitted calls that failed: the failures that got through",
    ),
    (
        "opened",
        "times a breaker opened (half-open back to open included)",
    ),
    (
        "to trip",
        "the longest time from a failure burst's first failure to the first trip, over the bursts that tripped a breaker (- if none did)",
    ),
    (
        "to close",
        "the longest time from a burst's end to every breaker being closed again, over the bursts after which they all closed (- if none)",
    ),
    (
        "throttled",
        "rejected calls the throttle turned away, as the random draws fell",
    ),
    (
        "expected",
        "the calls the throttle is expected to turn away on this trace, on average over draws",
    ),
];

/// The legend's rows for these reports: the throttle's only when the table shows its
/// columns.
fn legend_rows(reports: &[Report]) -> &'static [(&'static str, &'static str)] {
    if throttles(reports) {
        &LEGEND
    } else {
        &LEGEND[..10]
    }
}

fn throttles(reports: &[Report]) -> bool {
    reports
        .iter()
        .any(|r| r.throttled > 0 || r.throttled_expected > 0.0)
}

/// What each column of [`table`] means, one line a column, as plain text: to print below
/// the table.
///
/// # Examples
///
/// ```
/// use lazybreaker::config::Settings;
/// use lazybreaker_replay::{legend, replay, Trace};
///
/// let text = legend(&[replay(&Trace::new(), &Settings::default())]);
/// assert!(text.lines().any(|l| l.starts_with("saved") && l.contains("failed")));
/// ```
pub fn legend(reports: &[Report]) -> String {
    let rows = legend_rows(reports);
    let width = rows.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (column, meaning) in rows {
        let _ = writeln!(out, "{column:<width$}  {meaning}");
    }
    out
}

/// One report's cells, in the order of [`HEADER`].
fn row(r: &Report) -> [String; 10] {
    let ms =
        |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), |d| human::measured(d).to_string());
    [
        r.name.clone(),
        r.calls.to_string(),
        r.admitted.to_string(),
        r.rejected.to_string(),
        r.rejected_would_fail.to_string(),
        r.rejected_would_succeed.to_string(),
        r.failures_admitted.to_string(),
        r.opened.to_string(),
        ms(r.time_to_trip),
        ms(r.time_to_close),
    ]
}

/// The reports as one self-contained HTML page (no script, no external resource): the
/// table, then per candidate a plot over the trace's time of its failure rate (the share
/// of counted calls that failed, per bin), the share of calls the candidate rejected, and
/// its breakers' states as bands (red where a breaker was open, amber half-open; with keys,
/// where at least one key's breaker was).
///
/// # Examples
///
/// ```
/// use lazybreaker::config::Settings;
/// use lazybreaker::policy::Outcome;
/// use lazybreaker_replay::{html, replay, Trace};
/// use std::time::Duration;
///
/// let mut trace = Trace::new();
/// for i in 0..100 {
///     let outcome = if i < 50 { Outcome::Success } else { Outcome::Failure };
///     trace.push(Duration::from_millis(i * 10), Duration::from_millis(5), outcome);
/// }
/// let page = html(&trace, &[replay(&trace, &Settings::default())]);
/// assert!(page.starts_with("<!DOCTYPE html>"));
/// assert_eq!(page.matches("<svg").count(), 1);
/// assert!(!page.contains("<script"));
/// ```
pub fn html(trace: &Trace, reports: &[Report]) -> String {
    let bin = bin_for(trace.span());
    let counted = per_bin(trace, bin);
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>lazybreaker replay</title><style>\
         body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
         table{border-collapse:collapse}td,th{padding:.2em .7em;text-align:right}\
         td:first-child,th:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}\
         figure{margin:1.5em 0}svg{max-width:100%;height:auto}\
         .key span{display:inline-block;width:1em;height:.8em;margin:0 .3em 0 1em}\
         .results{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}\
         dl.legend{margin:0;max-width:32em}dl.legend dt{font-weight:bold;float:left;clear:left;\
         width:6.5em}dl.legend dd{margin:0 0 .3em 7em}\
         </style></head><body>\n<h1>Replay</h1>\n",
    );
    let _ = writeln!(
        page,
        "<p>{} calls over {}, {}; plots in bins of {}.</p>",
        trace.len(),
        human::measured(trace.span()),
        match trace.key_count() {
            0 => "one breaker".to_owned(),
            1 => "one key".to_owned(),
            n => format!("{n} keys, a breaker each"),
        },
        human::measured(bin)
    );
    let with_throttle = throttles(reports);
    page.push_str("<div class=\"results\"><table><thead><tr>");
    let header = HEADER.iter().take(4).chain(
        ["throttled", "expected"]
            .iter()
            .filter(|_| with_throttle)
            .chain(HEADER.iter().skip(4)),
    );
    for cell in header {
        let _ = write!(page, "<th>{cell}</th>");
    }
    page.push_str("</tr></thead><tbody>\n");
    for report in reports {
        page.push_str("<tr>");
        let mut cells: Vec<String> = row(report).into();
        if with_throttle {
            cells.insert(4, format!("{:.1}", report.throttled_expected));
            cells.insert(4, report.throttled.to_string());
        }
        for cell in cells {
            let _ = write!(page, "<td>{}</td>", escape(&cell));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody></table>\n<dl class=\"legend\">\n");
    for (column, meaning) in legend_rows(reports) {
        let _ = writeln!(page, "<dt>{column}</dt><dd>{}</dd>", escape(meaning));
    }
    page.push_str(
        "</dl></div>\n<p class=\"key\">\
         <span style=\"background:#222\"></span>failure rate \
         <span style=\"background:#1f5fbf\"></span>calls rejected \
         <span style=\"background:#f3b3b3\"></span>open \
         <span style=\"background:#f7dc9c\"></span>half-open</p>\n",
    );
    for report in reports {
        let _ = writeln!(
            page,
            "<figure><figcaption><b>{}</b>: {} rejected, {} saved, {} cost, opened {} time(s)</figcaption>",
            escape(&report.name),
            report.rejected,
            report.rejected_would_fail,
            report.rejected_would_succeed,
            report.opened
        );
        match plot(trace.span(), bin, &counted, report) {
            Ok(svg) => page.push_str(&svg),
            Err(e) => {
                let _ = write!(page, "<p>no plot: {}</p>", escape(&e));
            }
        }
        page.push_str("</figure>\n");
    }
    page.push_str("</body></html>\n");
    page
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Per bin: counted calls (successes and failures), failures, and all calls.
struct Bins {
    counted: Vec<u64>,
    failures: Vec<u64>,
    calls: Vec<u64>,
}

fn per_bin(trace: &Trace, bin: Duration) -> Bins {
    let width = bin.as_nanos().max(1) as u64;
    let n = (trace.span().as_nanos() as u64 / width + 1) as usize;
    let mut bins = Bins {
        counted: vec![0; n],
        failures: vec![0; n],
        calls: vec![0; n],
    };
    for e in trace.entries() {
        let i = ((e.start / width) as usize).min(n - 1);
        bins.calls[i] += 1;
        match e.outcome {
            Outcome::Success => bins.counted[i] += 1,
            Outcome::Failure | Outcome::Fatal => {
                bins.counted[i] += 1;
                bins.failures[i] += 1;
            }
            // Excluded, and any outcome a later version adds: not counted.
            _ => {}
        }
    }
    bins
}

/// Where the candidate's breakers were open or half-open: `(from, to, state)` in seconds,
/// with keys the union (open wins over half-open).
///
/// One pass over the changes, each applied in constant time: with many keys open at once,
/// looking through every breaker not closed at each change took quadratic time (40,000
/// keys open together took 46 s to draw).
fn bands(report: &Report, span: Duration) -> Vec<(f64, f64, State)> {
    let mut states = Sweep::default();
    let mut bands = Vec::new();
    let mut current: Option<(f64, State)> = None;
    for c in &report.transitions {
        crate::work::add(1);
        states.apply(c);
        let at = c.at.as_secs_f64();
        let now = states.worst();
        if current.map(|(_, s)| s) != now {
            if let Some((from, s)) = current.take() {
                bands.push((from, at, s));
            }
            current = now.map(|s| (at, s));
        }
    }
    if let Some((from, s)) = current {
        bands.push((from, span.as_secs_f64().max(from), s));
    }
    bands
}

/// One candidate's plot, as an SVG element.
fn plot(span: Duration, bin: Duration, bins: &Bins, report: &Report) -> Result<String, String> {
    let mut svg = String::new();
    let width = bin.as_secs_f64();
    let end = span.as_secs_f64().max(width);
    {
        let root = SVGBackend::with_string(&mut svg, (960, 280)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(34)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..end, 0f64..100f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("% of calls")
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(|e| e.to_string())?;
        let open = RGBColor(243, 179, 179).filled();
        let half_open = RGBColor(247, 220, 156).filled();
        chart
            .draw_series(bands(report, span).into_iter().map(|(from, to, state)| {
                let style = if state == State::Open {
                    open
                } else {
                    half_open
                };
                Rectangle::new([(from, 0.0), (to, 100.0)], style)
            }))
            .map_err(|e| e.to_string())?;
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 * 100.0 / whole as f64
            }
        };
        let failure_rate = (0..bins.counted.len())
            .map(|i| (i as f64 * width, share(bins.failures[i], bins.counted[i])));
        chart
            .draw_series(LineSeries::new(
                failure_rate,
                RGBColor(34, 34, 34).stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        let rejected = (0..bins.calls.len()).map(|i| {
            let r = report.rejected_over_time.get(i).copied().unwrap_or(0);
            (i as f64 * width, share(r, bins.calls[i]))
        });
        chart
            .draw_series(LineSeries::new(
                rejected,
                RGBColor(31, 95, 191).stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Change;
    use lazybreaker::config::{PolicyConfig, Settings};
    use lazybreaker::observe::Origin;
    use lazybreaker::Knobs;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The bands as they used to be found: the breakers not closed kept in a list, looked
    /// through at every change.
    fn bands_looking_through_every_breaker(
        report: &Report,
        span: Duration,
    ) -> Vec<(f64, f64, State)> {
        let mut states: Vec<(&str, State)> = Vec::new();
        let mut bands = Vec::new();
        let mut current: Option<(f64, State)> = None;
        let worst = |states: &[(&str, State)]| {
            if states.iter().any(|(_, s)| *s == State::Open) {
                Some(State::Open)
            } else if states.iter().any(|(_, s)| *s == State::HalfOpen) {
                Some(State::HalfOpen)
            } else {
                None
            }
        };
        for c in &report.transitions {
            states.retain(|(b, _)| *b != c.breaker);
            if c.to != State::Closed {
                states.push((&c.breaker, c.to));
            }
            let at = c.at.as_secs_f64();
            let now = worst(&states);
            if current.map(|(_, s)| s) != now {
                if let Some((from, s)) = current.take() {
                    bands.push((from, at, s));
                }
                current = now.map(|s| (at, s));
            }
        }
        if let Some((from, s)) = current {
            bands.push((from, span.as_secs_f64().max(from), s));
        }
        bands
    }

    fn settings(timeout: u64, threshold: u64) -> Settings {
        Settings {
            knobs: Knobs {
                timeout: ms(timeout),
                ..Knobs::default()
            },
            policy: PolicyConfig::ConsecutiveFailures { threshold },
            ..Settings::default()
        }
    }

    /// `keys` keys that each fail in the first millisecond, then succeed at 2 s: all open
    /// at once for about two seconds (the probe of the report).
    fn keys_open_at_once(keys: u64) -> Trace {
        let mut trace = Trace::new();
        for (at, outcome) in [(0, Outcome::Failure), (2000, Outcome::Success)] {
            for k in 0..keys {
                let start = ms(at) + Duration::from_micros(k);
                trace.push_keyed(&format!("k{k}"), start, ms(1), outcome);
            }
        }
        trace
    }

    /// Drawing the report of many keys open at once takes work in proportion to the
    /// changes, not to the changes times the breakers open: counted, not timed (the
    /// breakers' states looked at). Looking through every breaker not closed at each
    /// change took two million looks for 1,000 keys, and 46 s to draw 40,000.
    #[test]
    fn item_12_the_html_of_many_keys_open_at_once_is_drawn_in_linear_time() {
        const KEYS: u64 = 1000;
        let trace = keys_open_at_once(KEYS);
        let report = crate::replay(&trace, &settings(1000, 1));
        let changes = report.transitions.len() as u64;
        assert_eq!(changes, 3 * KEYS, "open, half-open, closed: each key");
        crate::work::take();
        let page = html(&trace, std::slice::from_ref(&report));
        let steps = crate::work::take();
        assert!(steps <= 2 * changes, "{steps} steps for {changes} changes");
        assert_eq!(
            bands(&report, trace.span()),
            bands_looking_through_every_breaker(&report, trace.span())
        );
        assert_eq!(page.matches("<svg").count(), 1);
    }

    /// The bands are the ones looking through every breaker at each change gave: on keys
    /// open at once, on keys that flap (half-open to open again), on the one breaker, and
    /// on changes made by hand, ties in time included.
    #[test]
    fn bands_are_the_union_of_the_breakers_states_as_before() {
        let mut flapping = Trace::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..3000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let failing =
                (i / 400).is_multiple_of(2) && !seed.is_multiple_of(4) || seed.is_multiple_of(7);
            let outcome = if failing {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            let key = format!("k{}", seed % 23);
            flapping.push_keyed(&key, ms(i * 3), ms(seed % 40), outcome);
        }
        let mut single = Trace::new();
        for i in 0..2000u64 {
            let outcome = if (i / 150) % 2 == 0 {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            single.push(ms(i * 5), ms(20), outcome);
        }
        let mut compared = 0;
        for trace in [keys_open_at_once(50), flapping, single] {
            for settings in [settings(1000, 1), settings(200, 3), settings(50, 2)] {
                let report = crate::replay(&trace, &settings);
                assert_eq!(
                    bands(&report, trace.span()),
                    bands_looking_through_every_breaker(&report, trace.span())
                );
                compared += report.transitions.len();
            }
        }
        assert!(compared > 500, "{compared} changes");

        let change = |at: u64, breaker: &str, from: State, to: State| Change {
            at: ms(at),
            breaker: breaker.into(),
            from,
            to,
            origin: Origin::Breaker,
        };
        let (closed, open, half_open) = (State::Closed, State::Open, State::HalfOpen);
        let mut report = crate::replay(&Trace::new(), &settings(1000, 1));
        report.transitions = vec![
            change(100, "a", closed, open),
            change(200, "b", closed, open),
            change(300, "a", open, half_open),
            change(400, "b", open, half_open),
            change(400, "a", half_open, closed),
            change(500, "b", half_open, open),
            change(600, "b", open, half_open),
            change(600, "b", half_open, closed),
            change(700, "c", closed, half_open),
        ];
        let found = bands(&report, ms(650));
        assert_eq!(found, bands_looking_through_every_breaker(&report, ms(650)));
        assert_eq!(
            found,
            [
                (0.1, 0.4, open),
                (0.4, 0.5, half_open),
                (0.5, 0.6, open),
                (0.6, 0.6, half_open),
                (0.7, 0.7, half_open)
            ]
        );
    }

    #[test]
    fn times_read_in_whole_milliseconds_or_minutes_and_seconds() {
        let mut report = Report::empty("r", &Trace::new());
        // 2139.0004 ms rounds to 2139 ms; 61.4 s to 1 min 1 s.
        report.time_to_trip = Some(Duration::from_nanos(2_139_000_400));
        report.time_to_close = Some(Duration::from_millis(61_400));
        let cells = row(&report);
        assert_eq!(cells[8], "2139ms");
        assert_eq!(cells[9], "1m 1s");
        report.time_to_trip = None;
        report.time_to_close = Some(Duration::ZERO);
        let cells = row(&report);
        assert_eq!((cells[8].as_str(), cells[9].as_str()), ("-", "0ms"));
        // Above zero but under half a millisecond: not "0ms", which reads as at once.
        report.time_to_trip = Some(Duration::from_micros(300));
        report.time_to_close = Some(Duration::from_micros(500));
        let cells = row(&report);
        assert_eq!((cells[8].as_str(), cells[9].as_str()), ("<1ms", "1ms"));
    }

    #[test]
    fn every_column_has_a_line_in_the_legend() {
        let mut report = Report::empty("r", &Trace::new());
        assert_eq!(
            legend_rows(std::slice::from_ref(&report)).len(),
            HEADER.len()
        );
        for (column, (named, _)) in HEADER.iter().zip(&LEGEND) {
            assert_eq!(column, named);
        }
        report.throttled_expected = 0.5;
        let text = legend(&[report]);
        assert_eq!(text.lines().count(), HEADER.len() + 2);
        assert!(text.lines().last().unwrap().starts_with("expected"));
    }

    #[test]
    fn bins_are_round_and_at_most_six_hundred() {
        let ms = Duration::from_millis;
        assert_eq!(bin_for(ms(0)), ms(1));
        assert_eq!(bin_for(ms(600)), ms(1));
        assert_eq!(bin_for(ms(601)), ms(2));
        assert_eq!(bin_for(ms(60_000)), ms(100));
        assert_eq!(bin_for(ms(3_600_000)), ms(10_000));
        assert_eq!(bin_for(ms(1_800_001)), ms(5_000));
    }
}
