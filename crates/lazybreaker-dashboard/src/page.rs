//! The page: one self-contained HTML document rendered on the server (readable without
//! JavaScript), with its styles and its small script inline.

use std::fmt::Write;
use std::time::Duration;

use super::source::{Board, PoolLine, Row};
use lazybreaker::human;
use lazybreaker::observe::Recorded;
use lazybreaker::observe::{Ejection, Origin};
use lazybreaker::CheckStatus;
use lazybreaker::Forced;
use lazybreaker::State;

/// The page's styles: no fonts, no images, nothing fetched.
const STYLE: &str = include_str!("page.css");
/// The page's script: refreshes the board in place, filters by name, sends the controls.
const SCRIPT: &str = include_str!("page.js");

/// How the page is drawn.
#[derive(Debug, Clone)]
pub(super) struct Look {
    pub(super) title: String,
    /// How often the script refreshes the board, in milliseconds (0: never).
    pub(super) refresh_ms: u64,
    /// Whether the control routes are on (the page then shows their buttons).
    pub(super) controls: bool,
}

/// Text made safe for HTML, in an element or in a quoted attribute.
pub(super) struct Escaped<'a>(pub(super) &'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// The whole page, the board filtered to names that contain `filter` (case-insensitive).
pub(super) fn render(board: &Board, look: &Look, filter: &str) -> String {
    let mut out = String::with_capacity(16 * 1024 + board.rows.len() * 1024);
    let title = Escaped(&look.title);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>{title}</title><style>{STYLE}</style></head>\
         <body data-refresh-ms=\"{}\" data-controls=\"{}\">\
         <header><h1>{title}</h1>\
         <form method=\"get\" class=\"filter\" role=\"search\">\
         <input id=\"filter\" name=\"filter\" value=\"{}\" placeholder=\"filter by name\" \
         aria-label=\"filter by name\" autocomplete=\"off\">\
         <noscript><button>filter</button></noscript></form>",
        look.refresh_ms,
        u8::from(look.controls),
        Escaped(filter),
    );
    if look.controls {
        out.push_str(
            "<input id=\"token\" type=\"password\" placeholder=\"control token\" \
             aria-label=\"control token\" autocomplete=\"off\">",
        );
    }
    out.push_str("<p id=\"status\">rendered by the server</p></header>");
    board_html(&mut out, board, look, &Needle::new(filter));
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

/// A filter, lowercased once for the whole page: the work per row is the row's name, never
/// the filter (which comes from the query string, as long as the client likes).
struct Needle(String);

impl Needle {
    fn new(filter: &str) -> Self {
        Self(filter.to_lowercase())
    }

    /// Whether `name` passes: it contains the filter, case-insensitively.
    fn shown(&self, name: &str) -> bool {
        self.0.is_empty() || name.to_lowercase().contains(self.0.as_str())
    }
}

/// The part the script replaces: the summary, the breakers' table, the pools' and the
/// recent changes.
fn board_html(out: &mut String, board: &Board, look: &Look, filter: &Needle) {
    let count = |state| {
        board
            .rows
            .iter()
            .filter(|r| r.snapshot.state == state)
            .count()
    };
    let _ = write!(
        out,
        "<main id=\"board\"><p class=\"summary\"><b>{}</b> breakers: \
         <span class=\"n-open\">{} open</span> · <span class=\"n-half-open\">{} half-open</span> · \
         <span class=\"n-closed\">{} closed</span>",
        board.rows.len(),
        count(State::Open),
        count(State::HalfOpen),
        count(State::Closed),
    );
    if board.unreadable > 0 {
        let _ = write!(
            out,
            " · <span class=\"warn\">{} unreadable (their clock panicked)</span>",
            board.unreadable
        );
    }
    out.push_str(
        "</p><table id=\"breakers\"><thead><tr><th>breaker</th><th>state</th><th>forced</th>\
         <th>counts</th><th>totals</th><th>retry after</th><th>opened</th>\
         <th>recent states</th>",
    );
    if look.controls {
        out.push_str("<th>control</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for row in board.rows.iter().filter(|r| filter.shown(&r.snapshot.name)) {
        row_html(out, row, look);
    }
    out.push_str("</tbody></table>");
    if board.rows.is_empty() {
        out.push_str("<p class=\"empty\">No breakers yet.</p>");
    }
    if !board.pools.is_empty() {
        pools_html(out, &board.pools);
    }
    out.push_str("<h2>Recent changes</h2><ol id=\"recent\">");
    for r in board.recent.iter().filter(|r| filter.shown(&r.breaker)) {
        recorded_html(out, r);
    }
    if board.recent.is_empty() {
        out.push_str("<li class=\"empty\">None recorded (a breaker's changes are kept when it observes an <code>observe::History</code>).</li>");
    }
    out.push_str("</ol></main>");
}

/// The pools' own figures, a row per pool in the order given: not filtered (the filter
/// keeps breakers by name; a pool's line sums up all its endpoints).
fn pools_html(out: &mut String, pools: &[PoolLine]) {
    out.push_str(
        "<h2>Pools</h2><table id=\"pools\"><thead><tr><th>pool</th><th>nodes</th>\
         <th>isolated</th><th>ejected</th><th>down</th><th>warming</th><th>in flight</th>\
         <th>picks</th><th>over the cap</th><th>no endpoint</th><th>outliers detected</th>\
         <th>retries</th><th>hedges</th><th>limit</th><th>ejections</th></tr></thead><tbody>",
    );
    for pool in pools {
        let name = Escaped(&pool.name);
        let _ = write!(
            out,
            "<tr class=\"pool\" data-pool=\"{name}\"><td class=\"name\" data-label=\"pool\">\
             <bdi>{name}</bdi>"
        );
        if pool.name.is_empty() {
            out.push_str("<small>unnamed</small>");
        }
        out.push_str("</td>");
        let Some(s) = &pool.summary else {
            out.push_str(
                "<td colspan=\"14\" class=\"warn\" data-label=\"figures\">\
                 unreadable (its clock panicked)</td></tr>",
            );
            continue;
        };
        let t = &s.stats;
        for (label, n) in [
            ("nodes", s.endpoints as u64),
            ("isolated", s.isolated as u64),
            ("ejected", s.ejected as u64),
            ("down", s.down as u64),
            ("warming", s.warming as u64),
            ("in flight", s.in_flight as u64),
            ("picks", t.picks),
            ("over the cap", t.over_cap),
            ("no endpoint", t.no_endpoint),
            ("outliers detected", t.outliers_detected),
        ] {
            let _ = write!(out, "<td data-label=\"{label}\">{n}</td>");
        }
        let _ = write!(
            out,
            "<td data-label=\"retries\">{} retried · {} budget denied · {} throttled · {} \
             exhausted</td>",
            t.retries, t.retries_budget_denied, t.retries_throttled, t.retries_exhausted,
        );
        let _ = write!(
            out,
            "<td data-label=\"hedges\">{} hedged · {} won · {} cancelled · {} budget \
             denied</td>",
            t.hedges, t.hedges_won, t.hedges_cancelled, t.hedges_budget_denied,
        );
        let _ = write!(
            out,
            "<td data-label=\"limit\">{} at their limit · {} limited · {} skipped</td>",
            s.at_limit, t.limited, t.limit_skips,
        );
        let _ = write!(
            out,
            "<td data-label=\"ejections\">{} success rate · {} failure percentage · \
             {} hung</td></tr>",
            t.ejected_success_rate, t.ejected_failure_percentage, t.ejected_hung,
        );
    }
    out.push_str("</tbody></table>");
}

/// A state's class and label.
fn state_class(state: State) -> &'static str {
    state.as_str()
}

fn forced_label(forced: Option<Forced>) -> &'static str {
    match forced {
        Some(Forced::Open) => "forced open",
        Some(Forced::Closed) => "forced closed",
        Some(_) => "forced",
        None => "",
    }
}

fn forced_attr(forced: Option<Forced>) -> &'static str {
    match forced {
        Some(Forced::Open) => "open",
        Some(Forced::Closed) => "closed",
        Some(_) => "forced",
        None => "none",
    }
}

fn row_html(out: &mut String, row: &Row, look: &Look) {
    let s = &row.snapshot;
    let name = Escaped(&s.name);
    let state = state_class(s.state);
    name_cell(out, row, &name, state);
    figure_cells(out, row, state);
    timeline(out, row);
    out.push_str("</td>");
    control_cell(out, row, look, &name);
    out.push_str("</tr>");
}

/// A row's opening and its name cell: the name, its pool, and what to know about it (its
/// figures panicked, a dry run, a name shared by several breakers).
fn name_cell(out: &mut String, row: &Row, name: &Escaped<'_>, state: &str) {
    let s = &row.snapshot;
    let _ = write!(
        out,
        "<tr class=\"breaker {state}\" data-name=\"{name}\" data-state=\"{state}\" \
         data-forced=\"{}\"><td class=\"name\" data-label=\"breaker\"><bdi>{name}</bdi>",
        forced_attr(s.forced),
    );
    if let Some(pool) = &row.pool {
        let _ = write!(out, " <small>pool <bdi>{}</bdi></small>", Escaped(pool));
    }
    if row.panicked {
        out.push_str(" <small class=\"warn\">policy figures panicked</small>");
    }
    if s.dry_run {
        out.push_str(" <small class=\"dry\">dry run: admits every call</small>");
    }
    if row.namesakes > 1 {
        let _ = write!(
            out,
            " <small class=\"warn\">{} breakers share this name: controls refused</small>",
            row.namesakes
        );
    }
}

/// A row's figures, up to the opening of its timeline's cell: the state, the override, the
/// counts (the trip's, when open), the totals, the wait, the openings.
fn figure_cells(out: &mut String, row: &Row, state: &str) {
    let s = &row.snapshot;
    // Open, the counts of the new generation are empty: the trip's say more.
    let tripped = row
        .history
        .last()
        .filter(|r| s.state != State::Closed && r.to == State::Open && r.counts.requests > 0);
    let (c, label) = match tripped {
        Some(r) => (&r.counts, "tripped on: "),
        None => (&s.counts, ""),
    };
    let t = &s.totals;
    // Past its open period, a checked breaker waits for a check: the badge, the wait and the
    // bar say so (never "retry after 0s").
    let check = s.check.map(CheckStatus::as_str);
    let badge = match check {
        Some(check) => format!("{state} · {check}"),
        None => state.to_owned(),
    };
    let retry = match (s.retry_after, check) {
        (Some(d), _) => human::wait(d).to_string(),
        (None, Some(check)) => check.to_owned(),
        (None, None) => String::new(),
    };
    let checks_failed = match t.health_checks_failed {
        0 => String::new(),
        1 => " · 1 check failed".to_owned(),
        n => format!(" · {n} checks failed"),
    };
    // The throttle's share: what it turned away, and the probability the next call meets.
    let throttled = match s.throttle_probability {
        Some(p) => format!(" · {} throttled (p = {p:.2})", t.rejected_throttled),
        None => String::new(),
    };
    // A retry layer's decisions after this breaker's failures, once there are any.
    let retried = match (t.retries, t.retries_budget_denied) {
        (0, 0) => String::new(),
        (retried, 0) => format!(" · {retried} retried"),
        (retried, denied) => format!(" · {retried} retried, {denied} denied by the budget"),
    };
    let _ = write!(
        out,
        "</td><td data-label=\"state\"><span class=\"badge {state}\" data-check=\"{}\">{badge}</span></td>\
         <td data-label=\"forced\" class=\"forced\">{}</td>\
         <td data-label=\"counts\">{label}{} calls · {} ok · {} failed · {} in a row</td>\
         <td data-label=\"totals\">{} ok · {} failed · {} rejected{throttled}{retried}{}</td>\
         <td data-label=\"retry after\">{retry}</td><td data-label=\"opened\">{}{checks_failed}</td>\
         <td data-label=\"recent states\">",
        match s.check {
            Some(CheckStatus::Due) => "due",
            Some(_) => "running",
            None => "none",
        },
        forced_label(s.forced),
        c.requests,
        c.total_successes,
        c.total_failures,
        c.consecutive_failures,
        t.successes,
        t.failures,
        t.rejected_open + t.rejected_half_open + t.rejected_forced,
        if s.dry_run {
            format!(" · {} would have been", t.would_reject)
        } else {
            String::new()
        },
        s.times_opened,
    );
}

/// A row's controls, when the page has them (none for a name several breakers share).
fn control_cell(out: &mut String, row: &Row, look: &Look, name: &Escaped<'_>) {
    if look.controls && row.namesakes > 1 {
        out.push_str("<td data-label=\"control\" class=\"controls\"></td>");
    } else if look.controls {
        out.push_str("<td data-label=\"control\" class=\"controls\">");
        for (action, label) in [
            ("force_open", "force open"),
            ("force_closed", "force closed"),
            ("release", "release"),
        ] {
            let _ = write!(
                out,
                "<button type=\"button\" data-action=\"{action}\" data-name=\"{name}\">{label}</button>"
            );
        }
        out.push_str("</td>");
    }
}

/// The shortest and the longest span a timeline covers.
const SPAN: (Duration, Duration) = (Duration::from_secs(60), Duration::from_secs(3600));
/// The timeline's width in SVG units.
const WIDTH: f64 = 240.0;

/// What a stretch of the bar shows: a state, or (for a health-checked breaker past its open
/// period) the wait for a check, which is neither open nor half-open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shade {
    In(State),
    Check,
}

impl Shade {
    fn class(self) -> &'static str {
        match self {
            Self::In(state) => state_class(state),
            Self::Check => "check",
        }
    }
}

/// The breaker's recent states as an inline SVG bar, from its history up to the snapshot's
/// instant, on the breaker's own clock. An open period that ended with no call since is
/// drawn half-open from its end, what the next call finds; for a health-checked breaker,
/// as the wait for its check ("check due", "checking"), which is what the badge says. A
/// run of failed checks (one folded entry) is drawn open from the first to the last.
fn timeline(out: &mut String, row: &Row) {
    let now = row.snapshot.at;
    let oldest = row.history.first().map_or(now, |r| r.at);
    let start = now.saturating_sub(now.saturating_sub(oldest).clamp(SPAN.0, SPAN.1));
    // A clock younger than the shortest span: the bar covers it all.
    let span = now.saturating_sub(start).max(Duration::from_nanos(1));
    // Until an open period ends, for a change to open (not forced).
    let until = |r: &Recorded| match (r.to, r.open_for) {
        (State::Open, Some(d)) if r.forced.is_none() => Some(r.at.saturating_add(d)),
        _ => None,
    };
    // The state at `start`: the last change before it says, else the first change's `from`.
    let before = row.history.iter().rev().find(|r| r.at <= start);
    let mut state = before
        .map(|r| r.to)
        .or_else(|| row.history.first().map(|r| r.from))
        .unwrap_or(row.snapshot.state);
    let mut open_until = before.and_then(until);
    let after = if row.snapshot.health_checked {
        Shade::Check
    } else {
        Shade::In(State::HalfOpen)
    };
    let mut segments: Vec<(Duration, Duration, Shade)> = Vec::new();
    let mut from = start;
    for r in row.history.iter().filter(|r| r.at > start && r.at <= now) {
        if r.times > 1 && r.first_at > from {
            // Open from the first failed check of the run to the last.
            push_open(&mut segments, from, r.first_at, state, open_until, after);
            from = r.first_at;
            (state, open_until) = (State::Open, None);
        }
        push_open(&mut segments, from, r.at, state, open_until, after);
        from = r.at;
        state = r.to;
        open_until = until(r);
    }
    push_open(&mut segments, from, now, state, open_until, after);
    let x = |t: Duration| (t.saturating_sub(start).as_secs_f64() / span.as_secs_f64()) * WIDTH;
    let _ = write!(
        out,
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} 14\" width=\"{WIDTH}\" height=\"14\" \
         role=\"img\" aria-label=\"states over the last {}\">",
        human::span(span)
    );
    for (a, b, shade) in segments {
        let (x0, x1) = (x(a), x(b));
        let label = match shade {
            Shade::In(state) => state.as_str(),
            // The last stretch says what the badge says; an earlier one, what it was.
            Shade::Check if b == now => row
                .snapshot
                .check
                .map_or("waiting for a check", CheckStatus::as_str),
            Shade::Check => "waiting for a check",
        };
        let _ = write!(
            out,
            "<rect class=\"{}\" x=\"{x0:.1}\" y=\"0\" width=\"{:.1}\" height=\"14\">\
             <title>{label} for {} (until {} ago)</title></rect>",
            shade.class(),
            (x1 - x0).max(0.5),
            human::span(b.saturating_sub(a)),
            human::span(now.saturating_sub(b)),
        );
    }
    out.push_str("</svg>");
}

/// A segment of `state` from `a` to `b`, split where an open period ends (`open_until`):
/// `after` it, half-open, or the wait for a check.
fn push_open(
    segments: &mut Vec<(Duration, Duration, Shade)>,
    a: Duration,
    b: Duration,
    state: State,
    open_until: Option<Duration>,
    after: Shade,
) {
    match open_until {
        Some(end) if state == State::Open && end > a && end < b => {
            segments.push((a, end, Shade::In(State::Open)));
            segments.push((end, b, after));
        }
        Some(end) if state == State::Open && end <= a => segments.push((a, b, after)),
        _ if b > a => segments.push((a, b, Shade::In(state))),
        _ => {}
    }
}

/// How a change's origin reads.
fn origin_label(origin: Origin) -> &'static str {
    match origin {
        Origin::Breaker => "by the breaker",
        Origin::Manual => "manual",
        Origin::Adopted => "adopted",
        Origin::HealthCheck => "by a health check",
        Origin::Ejected(Ejection::SuccessRate) => "ejected by the pool: success rate",
        Origin::Ejected(Ejection::FailurePercentage) => "ejected by the pool: failure percentage",
        Origin::Ejected(Ejection::Hung) => "ejected by the pool: hung",
        Origin::Ejected(_) => "ejected by the pool",
        _ => "other",
    }
}

fn recorded_html(out: &mut String, r: &Recorded) {
    let wall = humantime::format_rfc3339_seconds(r.wall);
    let name = Escaped(&r.breaker);
    let change = match r.times {
        _ if !r.is_failed_check() && r.from == r.to => format!("stays {}", r.from),
        _ if !r.is_failed_check() => format!("{} → {}", r.from, r.to),
        1 => "stays open: health check failed".to_owned(),
        n => format!(
            "stays open: {n} checks failed since <time datetime=\"{since}\">{since}</time>",
            since = humantime::format_rfc3339_seconds(r.since)
        ),
    };
    let _ = write!(
        out,
        "<li class=\"{}\" data-name=\"{name}\" data-origin=\"{}\"><time datetime=\"{wall}\">{wall}</time> \
         <b><bdi>{name}</bdi></b> {change} <span class=\"origin\">{}</span>",
        state_class(r.to),
        r.origin,
        origin_label(r.origin),
    );
    let c = &r.counts;
    if r.to == State::Open && r.origin == Origin::Breaker && c.requests > 0 {
        let _ = write!(
            out,
            " <span class=\"why\">on {} failed of {} calls ({} in a row)</span>",
            c.total_failures, c.requests, c.consecutive_failures
        );
    }
    if let Some(d) = r.open_for {
        let _ = write!(out, " for {}", human::span(d));
    }
    let forced = forced_label(r.forced);
    if !forced.is_empty() {
        let _ = write!(out, " <span class=\"forced\">{forced}</span>");
    }
    out.push_str("</li>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_character_that_could_end_text_or_an_attribute() {
        assert_eq!(
            Escaped("a<b>&\"c'</script>").to_string(),
            "a&lt;b&gt;&amp;&quot;c&#39;&lt;/script&gt;"
        );
        assert_eq!(Escaped("plain").to_string(), "plain");
    }

    #[test]
    fn an_open_period_that_ended_is_drawn_half_open_from_its_end() {
        let mut segments = Vec::new();
        let s = Duration::from_secs;
        let (open, half_open) = (Shade::In(State::Open), Shade::In(State::HalfOpen));
        push_open(
            &mut segments,
            s(10),
            s(50),
            State::Open,
            Some(s(40)),
            half_open,
        );
        assert_eq!(segments, [(s(10), s(40), open), (s(40), s(50), half_open)]);
        segments.clear();
        push_open(
            &mut segments,
            s(45),
            s(50),
            State::Open,
            Some(s(40)),
            half_open,
        );
        assert_eq!(segments, [(s(45), s(50), half_open)]);
        // A checked breaker waits for its check from there: neither open nor half-open.
        segments.clear();
        push_open(
            &mut segments,
            s(10),
            s(50),
            State::Open,
            Some(s(40)),
            Shade::Check,
        );
        assert_eq!(
            segments,
            [(s(10), s(40), open), (s(40), s(50), Shade::Check)]
        );
    }

    #[test]
    fn an_ejection_reads_as_the_pools_with_its_reason() {
        for (reason, label) in [
            (Ejection::SuccessRate, "ejected by the pool: success rate"),
            (
                Ejection::FailurePercentage,
                "ejected by the pool: failure percentage",
            ),
            (Ejection::Hung, "ejected by the pool: hung"),
        ] {
            assert_eq!(origin_label(Origin::Ejected(reason)), label);
        }
    }

    #[test]
    fn durations_read_in_whole_milliseconds() {
        assert_eq!(
            human::span(Duration::from_millis(12_345)).to_string(),
            "12345ms"
        );
        assert_eq!(
            human::span(Duration::from_micros(950_400)).to_string(),
            "950ms"
        );
        assert_eq!(
            human::wait(Duration::from_micros(950_400)).to_string(),
            "951ms"
        );
    }
}
