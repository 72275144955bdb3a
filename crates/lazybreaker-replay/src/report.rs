//! What a replay found: the figures of one candidate over one trace.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::trace::{Entry, Trace};
use lazybreaker::human;
use lazybreaker::observe::Origin;
use lazybreaker::policy::Outcome;
use lazybreaker::ConfigError;
use lazybreaker::State;

/// What a candidate's breakers decided over a trace: how many calls they admitted and
/// rejected, what the rejected calls would have done, every state change with its time,
/// and how fast they tripped on, and recovered from, the trace's failure bursts.
///
/// A rejected call's outcome is the one recorded in the trace: what the dependency did
/// when the call was made for real. That is how replay tells the calls a breaker saved the
/// dependency from ([`rejected_would_fail`](Report::rejected_would_fail)) from those it
/// cost ([`rejected_would_succeed`](Report::rejected_would_succeed)).
///
/// It serialises as JSON with every duration in whole milliseconds, to the nearest, as an
/// integer (fields ending in `_ms`; `docs/integrations.md`, "Durations in JSON").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The candidate's name: its breaker name in the settings, or its name in a
    /// candidates file.
    pub name: String,
    /// Calls in the trace.
    pub calls: u64,
    /// Calls admitted.
    pub admitted: u64,
    /// Calls rejected (every reason: open, half-open with its probes out).
    pub rejected: u64,
    /// Rejected calls whose recorded outcome is a failure (or fatal): the load the breaker
    /// took off a failing dependency.
    pub rejected_would_fail: u64,
    /// Rejected calls whose recorded outcome is a success: what the breaker cost.
    pub rejected_would_succeed: u64,
    /// Admitted calls whose recorded outcome is a failure (or fatal): the failures that
    /// went through.
    pub failures_admitted: u64,
    /// Of the rejected calls, those a throttle turned away
    /// ([`Builder::throttle`](lazybreaker::Builder::throttle)): the draws as they fell, for
    /// the candidate's seed.
    pub throttled: u64,
    /// The number of calls a throttle is expected to turn away on this trace: the sum, over
    /// the calls, of the probability each met (what `throttled` comes to on average over
    /// seeds). Zero without a throttle.
    pub throttled_expected: f64,
    /// Times a breaker entered the open state (half-open to open included).
    pub opened: u64,
    /// Every state change, in time order.
    pub transitions: Vec<Change>,
    /// The trace's failure bursts, each with how the breakers met it (see [`Burst`]).
    pub bursts: Vec<Burst>,
    /// The longest time to the first trip after a burst's onset, over the bursts that
    /// tripped a breaker: `None` if none did (or the trace has no burst).
    #[serde(rename = "time_to_trip_ms", serialize_with = "option_ms")]
    pub time_to_trip: Option<Duration>,
    /// The longest time to close after a burst ended, over the bursts whose breakers all
    /// closed again within the trace.
    #[serde(rename = "time_to_close_ms", serialize_with = "option_ms")]
    pub time_to_close: Option<Duration>,
    /// The width of the bins of [`rejected_over_time`](Report::rejected_over_time): a round
    /// number of milliseconds that cuts the trace into at most 600 bins.
    #[serde(rename = "bin_ms", serialize_with = "ms")]
    pub bin: Duration,
    /// Calls rejected per bin of the trace's time (by their start), for plots.
    pub rejected_over_time: Vec<u64>,
    /// Why nothing was replayed: the settings did not validate (see
    /// [`replay`](super::replay)). `None` for a replay that ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
}

impl Report {
    /// The report of a trace replayed through nothing.
    pub(super) fn empty(name: &str, trace: &Trace) -> Self {
        Self {
            name: name.to_owned(),
            calls: trace.len() as u64,
            admitted: 0,
            rejected: 0,
            rejected_would_fail: 0,
            rejected_would_succeed: 0,
            failures_admitted: 0,
            throttled: 0,
            throttled_expected: 0.0,
            opened: 0,
            transitions: Vec::new(),
            bursts: Vec::new(),
            time_to_trip: None,
            time_to_close: None,
            bin: bin_for(trace.span()),
            rejected_over_time: Vec::new(),
            invalid: None,
        }
    }

    /// The report of settings that could not be replayed.
    pub(super) fn of_invalid(name: &str, trace: &Trace, error: &ConfigError) -> Self {
        Self {
            invalid: Some(error.to_string()),
            ..Self::empty(name, trace)
        }
    }

    /// Rejected calls whose recorded outcome is an exclusion: neither saved nor cost.
    pub fn rejected_excluded(&self) -> u64 {
        self.rejected - self.rejected_would_fail - self.rejected_would_succeed
    }
}

/// One state change of a replayed breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Change {
    /// When it happened, on the trace's timeline.
    #[serde(rename = "at_ms", serialize_with = "ms")]
    pub at: Duration,
    /// The breaker: the call's key in a keyed trace, else the candidate's name.
    pub breaker: String,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// What made it (a replayed breaker's changes are all its own, [`Origin::Breaker`]).
    pub origin: Origin,
}

/// A failure burst of the trace, and how the candidate's breakers met it.
///
/// The trace is cut into one-second bins ([`BURST_BIN`]); a bin is failing when at least
/// [`BURST_MIN_CALLS`] of its calls counted (successes and failures; exclusions are not)
/// and at least half of those failed. A burst is a run of failing bins: its onset is the
/// start of its first failed call, its end the moment its last failed call answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Burst {
    /// The start of its first failed call.
    #[serde(rename = "onset_ms", serialize_with = "ms")]
    pub onset: Duration,
    /// When its last failed call answered.
    #[serde(rename = "end_ms", serialize_with = "ms")]
    pub end: Duration,
    /// Its failed calls.
    pub failures: u64,
    /// From the onset to the first entry of a breaker into open: zero if one was open
    /// already, `None` if none opened before the next burst's onset (or the trace's end).
    #[serde(rename = "tripped_after_ms", serialize_with = "option_ms")]
    pub tripped_after: Option<Duration>,
    /// From the end to the moment every breaker was closed again: zero if they all were
    /// already, `None` if some breaker stayed open or half-open until the next burst's
    /// onset (or the trace's end), or none ever opened for it.
    #[serde(rename = "closed_after_ms", serialize_with = "option_ms")]
    pub closed_after: Option<Duration>,
}

/// The width of a bin in which [`Burst`]s are found.
pub const BURST_BIN: Duration = Duration::from_secs(1);
/// The fewest counted calls a bin needs to be failing (see [`Burst`]).
pub const BURST_MIN_CALLS: u64 = 5;

/// Whole milliseconds, to the nearest, as people read them ([`human::span_ms`]).
fn ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(human::span_ms(*d))
}

#[allow(clippy::ref_option)] // serde's `serialize_with` passes a reference
fn option_ms<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ms(d, s),
        None => s.serialize_none(),
    }
}

/// The trace's failure bursts, without the breakers' part (see [`Burst`]).
pub(super) fn bursts(trace: &Trace) -> Vec<Burst> {
    let bin = BURST_BIN.as_nanos() as u64;
    // Per failing-or-not bin, in order: (bin index, first failure start, last failure end,
    // failures); bins with no call are not failing.
    let mut found: Vec<Burst> = Vec::new();
    let mut current: Option<(u64, Bin)> = None; // (bin index, its figures)
    let mut last_failing: Option<u64> = None;
    let close = |index: u64, b: Bin, found: &mut Vec<Burst>, last: &mut Option<u64>| {
        if !b.failing() {
            return;
        }
        match (found.last_mut(), *last) {
            (Some(burst), Some(prev)) if prev + 1 == index => {
                burst.end = burst.end.max(Duration::from_nanos(b.last_end));
                burst.failures += b.failures;
            }
            _ => found.push(Burst {
                onset: Duration::from_nanos(b.first_failure),
                end: Duration::from_nanos(b.last_end),
                failures: b.failures,
                tripped_after: None,
                closed_after: None,
            }),
        }
        *last = Some(index);
    };
    for e in trace.entries() {
        let index = e.start / bin;
        match &mut current {
            Some((i, b)) if *i == index => b.add(e),
            _ => {
                if let Some((i, b)) = current.take() {
                    close(i, b, &mut found, &mut last_failing);
                }
                let mut b = Bin::default();
                b.add(e);
                current = Some((index, b));
            }
        }
    }
    if let Some((i, b)) = current {
        close(i, b, &mut found, &mut last_failing);
    }
    found
}

#[derive(Default)]
struct Bin {
    counted: u64,
    failures: u64,
    first_failure: u64,
    last_end: u64,
}

impl Bin {
    fn add(&mut self, e: &Entry) {
        match e.outcome {
            Outcome::Success => self.counted += 1,
            Outcome::Failure | Outcome::Fatal => {
                if self.failures == 0 {
                    self.first_failure = e.start;
                }
                self.counted += 1;
                self.failures += 1;
                self.last_end = self.last_end.max(e.end());
            }
            // Excluded, and any outcome a later version adds: not counted.
            _ => {}
        }
    }

    fn failing(&self) -> bool {
        self.counted >= BURST_MIN_CALLS && self.failures * 2 >= self.counted
    }
}

/// Fills in how the breakers met each burst, from their changes in time order: one sweep
/// over the changes, forward only (the bursts are in time order too).
pub(super) fn meet(bursts: &mut [Burst], changes: &[Change]) {
    let onsets: Vec<Duration> = bursts.iter().map(|b| b.onset).collect();
    let mut sweep = Sweep::default();
    for (i, burst) in bursts.iter_mut().enumerate() {
        let horizon = onsets.get(i + 1).copied().unwrap_or(Duration::MAX);
        sweep.run(changes, |c| c.at < burst.onset);
        let open_at_onset = sweep.open > 0;
        let first_trip = changes[sweep.next..]
            .iter()
            .take_while(|c| c.at < horizon)
            .find(|c| c.to == State::Open);
        burst.tripped_after = if open_at_onset {
            Some(Duration::ZERO)
        } else {
            first_trip.map(|c| c.at - burst.onset)
        };
        burst.closed_after = None;
        if burst.tripped_after.is_none() {
            continue;
        }
        sweep.run(changes, |c| c.at <= burst.end);
        if sweep.not_closed() == 0 {
            burst.closed_after = Some(Duration::ZERO);
            continue;
        }
        // The first change after the end that leaves every breaker closed.
        while let Some(c) = changes.get(sweep.next).filter(|c| c.at < horizon) {
            sweep.apply(c);
            sweep.next += 1;
            if c.to == State::Closed && sweep.not_closed() == 0 {
                burst.closed_after = Some(c.at - burst.end);
                break;
            }
        }
    }
}

/// The breakers' states as the changes up to `next` left them, and how many are open and
/// half-open: a change is applied in constant time, however many breakers there are.
#[derive(Default)]
pub(super) struct Sweep<'a> {
    next: usize,
    states: HashMap<&'a str, State>,
    open: usize,
    half_open: usize,
}

impl<'a> Sweep<'a> {
    /// Applies the changes from `next` on while `before` holds.
    fn run(&mut self, changes: &'a [Change], before: impl Fn(&Change) -> bool) {
        while let Some(c) = changes.get(self.next).filter(|c| before(c)) {
            self.apply(c);
            self.next += 1;
        }
    }

    /// The change `c` happened: its breaker is now in `c.to`.
    pub(super) fn apply(&mut self, c: &'a Change) {
        let was = self.states.insert(&c.breaker, c.to);
        for (state, delta) in [(was, false), (Some(c.to), true)] {
            let count = match state {
                Some(State::Open) => &mut self.open,
                Some(State::HalfOpen) => &mut self.half_open,
                _ => continue,
            };
            if delta {
                *count += 1;
            } else {
                *count -= 1;
            }
        }
    }

    fn not_closed(&self) -> usize {
        self.open + self.half_open
    }

    /// Open if a breaker is, else half-open if one is; `None` when all are closed.
    pub(super) fn worst(&self) -> Option<State> {
        if self.open > 0 {
            Some(State::Open)
        } else if self.half_open > 0 {
            Some(State::HalfOpen)
        } else {
            None
        }
    }
}

/// The most bins a plot's time axis is cut into.
const MAX_BINS: u64 = 600;

/// The width of a plot's bins for a trace that lasts `span`: a round number of
/// milliseconds (1, 2 or 5 times a power of ten) that cuts it into at most 600 bins.
pub(super) fn bin_for(span: Duration) -> Duration {
    let span_ms = span.as_millis().max(1) as u64;
    let raw = span_ms.div_ceil(MAX_BINS);
    let mut unit = 1u64;
    loop {
        for step in [1, 2, 5] {
            if unit * step >= raw {
                return Duration::from_millis(unit * step);
            }
        }
        unit *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn change(at: u64, breaker: &str, from: State, to: State) -> Change {
        Change {
            at: ms(at),
            breaker: breaker.into(),
            from,
            to,
            origin: Origin::Breaker,
        }
    }

    /// Ten calls a second for `secs` seconds from `from_s`, failing when `fail`.
    fn steady(trace: &mut Trace, from_s: u64, secs: u64, fail: bool) {
        for i in 0..secs * 10 {
            let outcome = if fail {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            trace.push(ms(from_s * 1000 + i * 100), ms(20), outcome);
        }
    }

    #[test]
    fn a_run_of_failing_bins_is_one_burst_from_its_first_failure_to_its_last_answer() {
        let mut t = Trace::new();
        steady(&mut t, 0, 3, false);
        steady(&mut t, 3, 2, true);
        steady(&mut t, 5, 3, false);
        steady(&mut t, 8, 1, true);
        let found = bursts(&t);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].onset, found[0].end), (ms(3000), ms(4920)));
        assert_eq!(found[0].failures, 20);
        assert_eq!((found[1].onset, found[1].end), (ms(8000), ms(8920)));
    }

    #[test]
    fn a_bin_needs_enough_calls_and_half_of_them_failed() {
        let mut t = Trace::new();
        for i in 0..4 {
            t.push(ms(i * 10), ms(1), Outcome::Failure); // four: too few
        }
        for i in 0..6 {
            // three of six, and exclusions that do not count
            let o = [Outcome::Failure, Outcome::Success][i as usize % 2];
            t.push(ms(1000 + i * 10), ms(1), o);
            t.push(ms(1005 + i * 10), ms(1), Outcome::Excluded);
        }
        for i in 0..6 {
            // two of six
            let o = if i < 2 {
                Outcome::Fatal
            } else {
                Outcome::Success
            };
            t.push(ms(2000 + i * 10), ms(1), o);
        }
        let found = bursts(&t);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].onset, ms(1000));
        assert_eq!(found[0].failures, 3);
    }

    #[test]
    fn a_burst_is_met_by_its_first_trip_and_its_last_close() {
        let mut b = vec![Burst {
            onset: ms(1000),
            end: ms(3000),
            failures: 9,
            tripped_after: None,
            closed_after: None,
        }];
        let changes = [
            change(1200, "a", State::Closed, State::Open),
            change(1300, "b", State::Closed, State::Open),
            change(3500, "a", State::Open, State::HalfOpen),
            change(3600, "a", State::HalfOpen, State::Closed),
            change(4100, "b", State::Open, State::HalfOpen),
            change(4200, "b", State::HalfOpen, State::Closed),
        ];
        meet(&mut b, &changes);
        assert_eq!(b[0].tripped_after, Some(ms(200)));
        assert_eq!(b[0].closed_after, Some(ms(1200)));

        // Open before the onset: tripped at once; never closed: no time to close.
        meet(&mut b, &[change(500, "b", State::Closed, State::Open)]);
        assert_eq!(b[0].tripped_after, Some(ms(0)));
        assert_eq!(b[0].closed_after, None);

        // No trip at all.
        meet(&mut b, &[]);
        assert_eq!((b[0].tripped_after, b[0].closed_after), (None, None));
    }

    #[test]
    fn each_burst_is_met_by_the_changes_before_the_next_onset() {
        let burst = |onset, end| Burst {
            onset: ms(onset),
            end: ms(end),
            failures: 5,
            tripped_after: None,
            closed_after: None,
        };
        let mut b = vec![burst(1000, 2000), burst(5000, 6000), burst(9000, 9500)];
        let changes = [
            // The first burst trips "a", which closes before the second onset.
            change(1100, "a", State::Closed, State::Open),
            change(2500, "a", State::Open, State::HalfOpen),
            change(2600, "a", State::HalfOpen, State::Closed),
            // The second trips "b", still half-open at the third onset: no time to close.
            change(5300, "b", State::Closed, State::Open),
            change(8000, "b", State::Open, State::HalfOpen),
            // The third finds "b" half-open, not open: it trips again on its own.
            change(9200, "b", State::HalfOpen, State::Open),
            change(9400, "b", State::Open, State::HalfOpen),
            change(9450, "b", State::HalfOpen, State::Closed),
        ];
        meet(&mut b, &changes);
        let met: Vec<_> = b
            .iter()
            .map(|b| (b.tripped_after, b.closed_after))
            .collect();
        assert_eq!(
            met,
            [
                (Some(ms(100)), Some(ms(600))),
                (Some(ms(300)), None),
                (Some(ms(200)), Some(ms(0)))
            ]
        );
    }
}
