//! A recorded trace: calls in start order, each with its start, latency and outcome, and
//! optionally the key of the breaker it went through.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::io::{self, BufRead, Write};
use std::sync::OnceLock;
use std::time::Duration;

use lazybreaker::policy::Outcome;

/// No key: the call went through the one breaker.
pub(super) const NO_KEY: u32 = u32::MAX;

/// A recorded trace: calls in start order, each with its start time, latency and outcome,
/// and optionally a key (one breaker per key, as a [`Registry`](lazybreaker::Registry) keeps).
///
/// Built in code with [`push`](Trace::push) and [`push_keyed`](Trace::push_keyed), or read
/// from CSV with [`from_csv`](Trace::from_csv). Times are on the trace's own timeline, from
/// zero; they are kept to the nanosecond, so a replay is exact.
///
/// # Examples
///
/// ```
/// use lazybreaker_replay::Trace;
/// use lazybreaker::policy::Outcome;
/// use std::time::Duration;
///
/// let csv = "start_ms,latency_ms,outcome\n0,12,success\n5,0.5,failure\n";
/// let trace = Trace::from_csv(csv.as_bytes())?;
/// assert_eq!(trace.len(), 2);
/// let second = trace.iter().nth(1).unwrap();
/// assert_eq!(second.latency, Duration::from_micros(500));
/// assert_eq!(second.outcome, Outcome::Failure);
///
/// let mut built = Trace::new();
/// built.push(Duration::ZERO, Duration::from_millis(12), Outcome::Success);
/// built.push(Duration::from_millis(5), Duration::from_micros(500), Outcome::Failure);
/// assert_eq!(built, trace);
/// # Ok::<(), lazybreaker_replay::TraceError>(())
/// ```
#[derive(Clone, Default)]
pub struct Trace {
    /// The calls in the order they were added: in start order unless `out_of_order`.
    calls: Vec<Entry>,
    /// Whether a call was added that starts before the one added last.
    out_of_order: bool,
    /// The calls in start order, when `calls` is not: sorted at the first read after a call
    /// was added out of order (until the next addition, the calls are held twice), and put
    /// back in `calls` at the next addition. A call is never put in its place as it is
    /// added: that moves every later call, and building a trace in reverse order took
    /// quadratic time.
    sorted: OnceLock<Vec<Entry>>,
    keys: Vec<String>,
    /// Each key's index in `keys`.
    index: HashMap<String, u32>,
}

/// One call as kept: times in nanoseconds, the key as an index into the trace's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) start: u64,
    pub(super) latency: u64,
    pub(super) outcome: Outcome,
    pub(super) key: u32,
}

impl Entry {
    /// When the call ended: its start plus its latency.
    pub(super) fn end(&self) -> u64 {
        self.start.saturating_add(self.latency)
    }

    /// Its key's index, if it has one.
    pub(super) fn key(&self) -> Option<usize> {
        (self.key != NO_KEY).then_some(self.key as usize)
    }
}

/// One call of a [`Trace`], as [`Trace::iter`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Call<'a> {
    /// When the call started, from the trace's zero.
    pub start: Duration,
    /// How long it took to answer.
    pub latency: Duration,
    /// How it ended, as the breaker would have been told.
    pub outcome: Outcome,
    /// The key of the breaker it went through, if the trace is keyed.
    pub key: Option<&'a str>,
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a call to the one breaker. A call that starts before the last one added is put
    /// in its place (after the calls that start at the same time); in any order, building a
    /// trace of `n` calls takes O(n log n) time (the calls are sorted once, when next read).
    ///
    /// Times beyond `u64::MAX` nanoseconds (about 584 years) saturate.
    pub fn push(&mut self, start: Duration, latency: Duration, outcome: Outcome) -> &mut Self {
        self.insert(Entry {
            start: nanos(start),
            latency: nanos(latency),
            outcome,
            key: NO_KEY,
        });
        self
    }

    /// Adds a call to the breaker of `key`, as [`push`](Trace::push) does.
    ///
    /// A trace holds at most `u32::MAX - 1` keys: a call with a key beyond them is
    /// counted under the last one.
    pub fn push_keyed(
        &mut self,
        key: &str,
        start: Duration,
        latency: Duration,
        outcome: Outcome,
    ) -> &mut Self {
        let key = self.intern(key);
        self.insert(Entry {
            start: nanos(start),
            latency: nanos(latency),
            outcome,
            key,
        });
        self
    }

    /// How many calls it holds.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether it holds no call.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Its calls, in start order.
    pub fn iter(&self) -> impl Iterator<Item = Call<'_>> + '_ {
        self.entries().iter().map(|e| Call {
            start: Duration::from_nanos(e.start),
            latency: Duration::from_nanos(e.latency),
            outcome: e.outcome,
            key: e.key().map(|k| self.keys[k].as_str()),
        })
    }

    /// Its keys, in the order they first appear.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.keys.iter().map(String::as_str)
    }

    /// When its last call ends (zero for an empty trace).
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.calls.iter().map(Entry::end).max().unwrap_or(0))
    }

    /// Its calls, in start order (calls that start together in the order they were added).
    pub(super) fn entries(&self) -> &[Entry] {
        if !self.out_of_order {
            return &self.calls;
        }
        self.sorted.get_or_init(|| {
            let mut sorted = self.calls.clone();
            sort_by_start(&mut sorted);
            sorted
        })
    }

    /// Puts `calls` in start order, in place: for a trace that is built whole before it is
    /// read (from CSV, from a recorder), so that it holds its calls once.
    pub(super) fn put_in_order(&mut self) {
        if self.out_of_order {
            match self.sorted.take() {
                Some(sorted) => self.calls = sorted,
                None => sort_by_start(&mut self.calls),
            }
            self.out_of_order = false;
        }
    }

    pub(super) fn key_name(&self, key: usize) -> &str {
        &self.keys[key]
    }

    pub(super) fn key_count(&self) -> usize {
        self.keys.len()
    }

    fn intern(&mut self, key: &str) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        if self.keys.len() >= NO_KEY as usize - 1 {
            return NO_KEY - 1;
        }
        let i = self.keys.len() as u32;
        self.keys.push(key.to_owned());
        self.index.insert(key.to_owned(), i);
        i
    }

    /// Adds a call at the end, in constant time (amortised): the calls are put in start
    /// order when next read (see `entries`).
    fn insert(&mut self, entry: Entry) {
        if let Some(sorted) = self.sorted.take() {
            self.calls = sorted;
            self.out_of_order = false;
        }
        crate::work::add(1);
        if self
            .calls
            .last()
            .is_some_and(|last| last.start > entry.start)
        {
            self.out_of_order = true;
        }
        self.calls.push(entry);
    }

    /// Reads a trace from CSV: a header, `start_ms,latency_ms,outcome` or
    /// `start_ms,latency_ms,outcome,key`, then a call a line. Times are milliseconds from
    /// the trace's zero, whole or decimal (to the nanosecond: at most six decimals); an
    /// outcome is `success`, `failure`, `excluded` or `fatal`; a key may be quoted (`"a,b"`,
    /// with `""` for a quote; a line break in a key is not read).
    /// Blank lines are skipped; calls out of start order are put in order.
    ///
    /// # Errors
    ///
    /// A [`TraceError`] that names the line (the header is line 1) and, where one is to
    /// blame, the column: a wrong header, a missing or extra field, a time that is not a
    /// non-negative number of milliseconds, an unknown outcome, or the reader's own error.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker_replay::Trace;
    ///
    /// let bad = "start_ms,latency_ms,outcome\n0,12,success\n4,-1,failure\n";
    /// let err = Trace::from_csv(bad.as_bytes()).unwrap_err();
    /// assert_eq!((err.line(), err.column()), (3, Some("latency_ms")));
    /// assert!(err.to_string().starts_with("line 3, column latency_ms:"));
    /// ```
    pub fn from_csv(reader: impl io::Read) -> Result<Self, TraceError> {
        // Read line by line, not with a CSV crate: the line of every error must be exact,
        // blank lines included (the `csv` crate's record positions are off after a blank
        // line). A field is a line's text between commas, trimmed, or a quoted string.
        let mut lines = io::BufReader::new(reader);
        let mut text = String::new();
        let mut line = 0u64;
        let mut fields: Vec<Cow<'_, str>> = Vec::new();
        let mut next = |text: &mut String, line: &mut u64| -> Result<bool, TraceError> {
            text.clear();
            *line += 1;
            match lines.read_line(text) {
                Ok(0) => Ok(false),
                Ok(_) => Ok(true),
                Err(e) => Err(TraceError::new(*line, None, e.to_string())),
            }
        };
        if !next(&mut text, &mut line)? {
            return Err(TraceError::new(
                1,
                None,
                "no header: the trace is empty".into(),
            ));
        }
        // A spreadsheet's export starts with a byte-order mark (a file saved twice, with
        // two): not part of the header.
        if text.starts_with('\u{feff}') {
            text = text.trim_start_matches('\u{feff}').to_owned();
        }
        split(&text, &mut fields).map_err(|r| TraceError::new(1, None, r))?;
        let keyed = match fields.iter().map(|f| &**f).collect::<Vec<_>>().as_slice() {
            [START, LATENCY, OUTCOME] => false,
            [START, LATENCY, OUTCOME, KEY] => true,
            other => {
                return Err(TraceError::new(
                    1,
                    None,
                    format!(
                        "the header must be `start_ms,latency_ms,outcome` or \
                         `start_ms,latency_ms,outcome,key`, not `{}`",
                        ascii_or_escaped(&other.join(","))
                    ),
                ))
            }
        };
        let columns = if keyed { 4 } else { 3 };
        let mut trace = Self::new();
        while next(&mut text, &mut line)? {
            if text.trim().is_empty() {
                continue;
            }
            let mut fields: Vec<Cow<'_, str>> = Vec::with_capacity(columns);
            split(&text, &mut fields).map_err(|r| TraceError::new(line, None, r))?;
            if fields.len() != columns {
                return Err(TraceError::new(
                    line,
                    None,
                    format!("{} fields where the header has {columns}", fields.len()),
                ));
            }
            let start = millis(&fields[0]).map_err(|r| TraceError::new(line, Some(START), r))?;
            let latency =
                millis(&fields[1]).map_err(|r| TraceError::new(line, Some(LATENCY), r))?;
            let outcome =
                outcome(&fields[2]).map_err(|r| TraceError::new(line, Some(OUTCOME), r))?;
            let key = if keyed {
                if fields[3].is_empty() {
                    return Err(TraceError::new(line, Some(KEY), "an empty key".into()));
                }
                trace.intern(&fields[3])
            } else {
                NO_KEY
            };
            trace.insert(Entry {
                start,
                latency,
                outcome,
                key,
            });
        }
        trace.put_in_order();
        Ok(trace)
    }

    /// Writes the trace as CSV, in the format [`from_csv`](Trace::from_csv) reads (with the
    /// `key` column if any call has a key), times exact to the nanosecond.
    ///
    /// # Errors
    ///
    /// The writer's.
    pub fn write_csv(&self, writer: impl io::Write) -> io::Result<()> {
        let keyed = !self.keys.is_empty();
        let mut out = io::BufWriter::new(writer);
        if keyed {
            writeln!(out, "{START},{LATENCY},{OUTCOME},{KEY}")?;
        } else {
            writeln!(out, "{START},{LATENCY},{OUTCOME}")?;
        }
        let mut text = String::new();
        for e in self.entries() {
            text.clear();
            write_millis(&mut text, e.start);
            text.push(',');
            write_millis(&mut text, e.latency);
            text.push(',');
            text.push_str(outcome_name(e.outcome));
            if keyed {
                text.push(',');
                if let Some(k) = e.key() {
                    quote(&mut text, &self.keys[k]);
                }
            }
            text.push('\n');
            out.write_all(text.as_bytes())?;
        }
        out.flush()
    }
}

/// Puts calls in start order with one stable sort: calls that start together stay in the
/// order they were added, as when each was put in its place as it came. O(n log n), less
/// for calls that come in a few runs in order (logs of several hosts one after the other).
fn sort_by_start(calls: &mut [Entry]) {
    calls.sort_by(|a, b| {
        crate::work::add(1);
        a.start.cmp(&b.start)
    });
}

impl PartialEq for Trace {
    /// The same calls in start order, and the same keys in the same order.
    fn eq(&self, other: &Self) -> bool {
        self.entries() == other.entries() && self.keys == other.keys && self.index == other.index
    }
}

impl Eq for Trace {}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("calls", &self.entries())
            .field("keys", &self.keys)
            .field("index", &self.index)
            .finish()
    }
}

/// Splits one line into its fields: unquoted ones trimmed, quoted ones (`"…"`, with `""`
/// for a quote) as they are.
fn split<'a>(line: &'a str, fields: &mut Vec<Cow<'a, str>>) -> Result<(), String> {
    fields.clear();
    let line = line.trim_end_matches(['\n', '\r']);
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        if let Some(quoted) = trimmed.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let after = loop {
                match chars.next() {
                    Some((i, '"')) if quoted[i + 1..].starts_with('"') => {
                        value.push('"');
                        chars.next();
                    }
                    Some((i, '"')) => break &quoted[i + 1..],
                    Some((_, c)) => value.push(c),
                    None => return Err("a quoted field is not closed on its line".into()),
                }
            };
            fields.push(Cow::Owned(value));
            let after = after.trim_start();
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None if after.is_empty() => return Ok(()),
                None => return Err("text after a quoted field".into()),
            }
        } else {
            match rest.split_once(',') {
                Some((field, next)) => {
                    fields.push(Cow::Borrowed(field.trim()));
                    rest = next;
                }
                None => {
                    fields.push(Cow::Borrowed(rest.trim()));
                    return Ok(());
                }
            }
        }
    }
}

/// `text` as a CSV field: quoted when it holds a comma, a quote, a line break or spaces
/// at its ends.
fn quote(out: &mut String, text: &str) {
    let plain = !text.contains([',', '"', '\n', '\r']) && text.trim() == text;
    if plain {
        out.push_str(text);
    } else {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    }
}

const START: &str = "start_ms";
const LATENCY: &str = "latency_ms";
const OUTCOME: &str = "outcome";
const KEY: &str = "key";

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A non-negative decimal number of milliseconds, exactly, in nanoseconds.
fn millis(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a non-negative number of milliseconds");
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(bad());
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if fraction.len() > 6 {
        return Err(format!(
            "`{text}` has more than six decimals: finer than a nanosecond"
        ));
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let mut frac: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| bad())?
    };
    for _ in fraction.len()..6 {
        frac *= 10;
    }
    whole
        .checked_mul(1_000_000)
        .and_then(|n| n.checked_add(frac))
        .ok_or_else(|| format!("`{text}` milliseconds is too long a time"))
}

/// `nanos` as milliseconds, with as few decimals as exactness needs.
fn write_millis(out: &mut String, nanos: u64) {
    let (whole, frac) = (nanos / 1_000_000, nanos % 1_000_000);
    let _ = write!(out, "{whole}");
    if frac != 0 {
        let mut digits = format!("{frac:06}");
        while digits.ends_with('0') {
            digits.pop();
        }
        out.push('.');
        out.push_str(&digits);
    }
}

fn outcome(text: &str) -> Result<Outcome, String> {
    match text {
        "success" => Ok(Outcome::Success),
        "failure" => Ok(Outcome::Failure),
        "excluded" => Ok(Outcome::Excluded),
        "fatal" => Ok(Outcome::Fatal),
        other => Err(format!(
            "`{other}` is not an outcome: one of success, failure, excluded, fatal"
        )),
    }
}

pub(super) fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Success => "success",
        Outcome::Failure => "failure",
        Outcome::Excluded => "excluded",
        Outcome::Fatal => "fatal",
        _ => "excluded",
    }
}

/// `text` with every character but printable ASCII written as `\u{..}`: the expected
/// header is ASCII, so a header that differs by an invisible character (a no-break space,
/// a zero-width joiner, a soft hyphen) or a look-alike letter (a Cyrillic `о`) shows where.
fn ascii_or_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == ' ' || c.is_ascii_graphic() {
            out.push(c);
        } else {
            let _ = write!(out, "{}", c.escape_unicode());
        }
    }
    out
}

/// Why a trace could not be read: the line (the header is line 1), the column if one is
/// to blame, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    line: u64,
    column: Option<&'static str>,
    reason: String,
}

impl TraceError {
    fn new(line: u64, column: Option<&'static str>, reason: String) -> Self {
        Self {
            line,
            column,
            reason,
        }
    }

    /// The line, counted from 1 (the header).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The column by its header name (`start_ms`, `latency_ms`, `outcome` or `key`), if one
    /// field is to blame.
    pub fn column(&self) -> Option<&'static str> {
        self.column
    }

    /// What is wrong.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for TraceError {
    /// The reason quotes the file; its control and format characters (a NUL, a byte-order
    /// mark, a bidi override) are shown escaped, as `\u{0}`, never raw.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "line {}, column {column}: ", self.line)?,
            None => write!(f, "line {}: ", self.line)?,
        }
        for c in self.reason.chars() {
            if c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
            {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for TraceError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn milliseconds_are_read_exactly_to_the_nanosecond() {
        assert_eq!(millis("0"), Ok(0));
        assert_eq!(millis("12"), Ok(12_000_000));
        assert_eq!(millis("0.000001"), Ok(1));
        assert_eq!(millis(".5"), Ok(500_000));
        assert_eq!(millis("7."), Ok(7_000_000));
        assert_eq!(millis("1.25"), Ok(1_250_000));
        assert!(millis("").is_err());
        assert!(millis(".").is_err());
        assert!(millis("-1").is_err());
        assert!(millis("1e3").is_err());
        assert!(millis("0.0000001").unwrap_err().contains("six decimals"));
        assert!(millis("99999999999999999999").is_err());
        assert!(millis("18446744073709551")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn written_milliseconds_read_back_the_same() {
        for nanos in [0, 1, 10, 999_999, 1_000_000, 1_250_000, 123_456_789_012] {
            let mut text = String::new();
            write_millis(&mut text, nanos);
            assert_eq!(millis(&text), Ok(nanos), "{text}");
        }
        let mut text = String::new();
        write_millis(&mut text, 1_500_000);
        assert_eq!(text, "1.5");
    }

    #[test]
    fn fields_are_trimmed_and_quoted_ones_kept_as_they_are() {
        let mut fields = Vec::new();
        split(" 1 , 2,success , \" a, \"\"b\"\" \" \r\n", &mut fields).unwrap();
        assert_eq!(fields, ["1", "2", "success", " a, \"b\" "]);
        split("a,,b,", &mut fields).unwrap();
        assert_eq!(fields, ["a", "", "b", ""]);
        assert!(split("\"open", &mut fields).is_err());
        let mut text = String::new();
        quote(&mut text, " a, \"b\" ");
        assert_eq!(text, "\" a, \"\"b\"\" \"");
    }

    #[test]
    fn a_call_out_of_order_takes_its_place_after_its_equals() {
        let mut t = Trace::new();
        t.push(ms(10), ms(1), Outcome::Success)
            .push(ms(5), ms(1), Outcome::Failure)
            .push(ms(5), ms(2), Outcome::Excluded)
            .push(ms(20), ms(1), Outcome::Fatal);
        let starts: Vec<_> = t.iter().map(|c| (c.start, c.outcome)).collect();
        assert_eq!(
            starts,
            [
                (ms(5), Outcome::Failure),
                (ms(5), Outcome::Excluded),
                (ms(10), Outcome::Success),
                (ms(20), Outcome::Fatal)
            ]
        );
        assert_eq!(t.span(), ms(21));
    }

    /// The calls `added` as they used to be kept: each put in its place as it came, after
    /// the calls that start at the same time.
    fn one_by_one(added: &[Entry]) -> Vec<Entry> {
        let mut calls: Vec<Entry> = Vec::new();
        for &e in added {
            let at = calls.partition_point(|c| c.start <= e.start);
            calls.insert(at, e);
        }
        calls
    }

    /// A call of the one breaker starting at `start` ms; its latency, in nanoseconds, is
    /// `n`, to tell calls that start together apart.
    fn entry(start: u64, n: u64) -> Entry {
        let outcomes = [Outcome::Success, Outcome::Failure, Outcome::Excluded];
        Entry {
            start: start * 1_000_000,
            latency: n,
            outcome: outcomes[n as usize % 3],
            key: NO_KEY,
        }
    }

    fn csv_of(calls: &[Entry]) -> String {
        let mut text = format!("{START},{LATENCY},{OUTCOME}\n");
        for e in calls {
            write_millis(&mut text, e.start);
            text.push(',');
            write_millis(&mut text, e.latency);
            let _ = writeln!(text, ",{}", outcome_name(e.outcome));
        }
        text
    }

    /// Building a trace out of start order takes O(n log n) work, whatever the order: in
    /// reverse, or per-host logs one after the other (each host's calls in order, their
    /// times overlapping), pushed, read from CSV or recorded. Counted, not timed: the starts
    /// compared and the calls moved to make room; putting each call in its place as it
    /// came moved about n²/2 calls in reverse order. The calls end in the order that gave.
    #[test]
    fn item_3_a_trace_out_of_start_order_is_built_in_n_log_n() {
        const N: u64 = 4096;
        // 147,456 steps; one by one, in reverse order, it was 8.4 million.
        let bound = 3 * N * u64::from(N.ilog2());
        // In reverse, two calls a millisecond (each pair starts together).
        let reversed: Vec<Entry> = (0..N).map(|n| entry((N - 1 - n) / 2, n)).collect();
        // Eight hosts, each a call every 3 ms, 0, 1 or 2 ms after the first host's.
        let hosts: Vec<Entry> = (0..N)
            .map(|n| entry(n % (N / 8) * 3 + n / (N / 8) % 3, n))
            .collect();
        for (shape, added) in [("reversed", &reversed), ("hosts", &hosts)] {
            crate::work::take();
            let mut pushed = Trace::new();
            for e in added {
                pushed.push(
                    Duration::from_nanos(e.start),
                    Duration::from_nanos(e.latency),
                    e.outcome,
                );
            }
            assert_eq!(pushed.iter().count() as u64, N);
            let steps = crate::work::take();
            assert!(
                steps <= bound,
                "{shape}, pushed: {steps} steps for {N} calls"
            );
            assert_eq!(pushed.entries(), one_by_one(added), "{shape}, pushed");

            let read = Trace::from_csv(csv_of(added).as_bytes()).unwrap();
            let steps = crate::work::take();
            assert!(
                steps <= bound,
                "{shape}, from CSV: {steps} steps for {N} calls"
            );
            assert_eq!(read.entries(), one_by_one(added), "{shape}, from CSV");
            assert_eq!(read, pushed);
        }

        // A recorder keeps calls in the order they end: here, the reverse of their starts.
        let clock = lazybreaker::ManualClock::new();
        let recorder = crate::Recorder::with_clock(N as usize, clock.clone());
        recorder.start();
        let mut calls = Vec::new();
        for _ in 0..N {
            calls.push(recorder.begin().unwrap());
            clock.advance(ms(1));
        }
        for call in calls.into_iter().rev() {
            call.end(Outcome::Success);
        }
        crate::work::take();
        let recorded = recorder.trace();
        let starts: Vec<Duration> = recorded.iter().map(|c| c.start).collect();
        let steps = crate::work::take();
        assert!(steps <= bound, "recorded: {steps} steps for {N} calls");
        assert_eq!(starts, (0..N).map(ms).collect::<Vec<_>>());
    }

    /// However calls are added, and read in between, a trace holds what putting each in
    /// its place as it came gave: start order, calls that start together in the order they
    /// were added; CSV, equality and clones see the same.
    #[test]
    fn calls_are_kept_as_if_each_was_put_in_its_place_as_it_came() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let added: Vec<Entry> = (0..600).map(|n| entry(random() % 50, n)).collect();
        let mut t = Trace::new();
        let mut copies = Vec::new();
        for (i, e) in added.iter().enumerate() {
            t.push(
                Duration::from_nanos(e.start),
                Duration::from_nanos(e.latency),
                e.outcome,
            );
            if random() % 40 == 0 {
                // Read, then add more: what was sorted for the read is kept, and extended.
                assert_eq!(t.entries(), one_by_one(&added[..=i]));
                copies.push((i, t.clone()));
            }
        }
        let expected = one_by_one(&added);
        assert_eq!(t.entries(), expected);
        assert_eq!(t.len(), expected.len());
        assert_eq!(
            t.span(),
            Duration::from_nanos(expected.iter().map(Entry::end).max().unwrap())
        );
        for (i, copy) in &copies {
            assert_eq!(copy.entries(), one_by_one(&added[..=*i]));
        }
        let mut in_order = Trace::new();
        for e in &expected {
            in_order.push(
                Duration::from_nanos(e.start),
                Duration::from_nanos(e.latency),
                e.outcome,
            );
        }
        assert_eq!(t, in_order);
        assert_eq!(format!("{t:?}"), format!("{in_order:?}"));
        let (mut csv, mut csv_in_order) = (Vec::new(), Vec::new());
        t.write_csv(&mut csv).unwrap();
        in_order.write_csv(&mut csv_in_order).unwrap();
        assert_eq!(String::from_utf8(csv).unwrap(), csv_of(&expected));
        assert_eq!(csv_in_order, csv_of(&expected).into_bytes());
        let read = Trace::from_csv(csv_of(&added).as_bytes()).unwrap();
        assert_eq!(read.entries(), expected);
        assert_eq!(read, t);
    }

    #[test]
    fn keys_are_kept_once_each_in_first_appearance_order() {
        let mut t = Trace::new();
        t.push_keyed("b", ms(0), ms(1), Outcome::Success)
            .push_keyed("a", ms(1), ms(1), Outcome::Success)
            .push_keyed("b", ms(2), ms(1), Outcome::Failure);
        assert_eq!(t.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(
            t.iter().map(|c| c.key.unwrap()).collect::<Vec<_>>(),
            ["b", "a", "b"]
        );
    }
}
