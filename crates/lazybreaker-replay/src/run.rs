//! The replay itself: the real breaker on a manual clock, each call admitted at its start
//! and reported at its end, in time order.

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::report::{self, Change, Report};
use super::trace::{Entry, Trace};
use lazybreaker::config::Settings;
use lazybreaker::observe::{Observer, Transition};
use lazybreaker::policy::Outcome;
use lazybreaker::policy::TripPolicy;
use lazybreaker::ManualClock;
use lazybreaker::{Breaker, OwnedPermit};
use lazybreaker::{ConfigError, Rejected};

/// How many calls a replay reports its progress by.
const PROGRESS_EVERY: usize = 1 << 16;

/// A replayed breaker's observer: keeps its changes.
#[derive(Debug, Default)]
struct Log(Mutex<Vec<Change>>);

impl Observer for Log {
    fn on_transition(&self, t: &Transition<'_>) {
        self.0.lock().push(Change {
            at: t.at,
            breaker: t.breaker.to_owned(),
            from: t.from,
            to: t.to,
            origin: t.origin,
        });
    }
}

type Replayed = Breaker<Box<dyn TripPolicy>, Arc<Log>>;

/// A call in flight: its permit, reported with its recorded outcome when it ends.
struct Pending {
    end: u64,
    seq: usize,
    permit: OwnedPermit<Box<dyn TripPolicy>, Arc<Log>>,
    outcome: Outcome,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.end, self.seq) == (other.end, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.end, self.seq).cmp(&(other.end, other.seq))
    }
}

/// Replays `trace` through breakers built from `settings` (see [`super::replay`]).
pub(super) fn run(
    trace: &Trace,
    settings: &Settings,
    name: &str,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report, ConfigError> {
    settings.validate()?;
    let enforcing = enforcing(settings);
    let settings: &Settings = &enforcing;
    let clock = ManualClock::new();
    let log = Arc::new(Log::default());
    let build = |breaker_name: &str| -> Result<Arc<Replayed>, ConfigError> {
        Ok(Arc::new(
            settings
                .to_builder()?
                .name(breaker_name)
                .clock(clock.clone())
                .observer(Arc::clone(&log))
                .build(),
        ))
    };
    // The one breaker exists from the trace's zero, as a service's breaker exists before
    // its calls; a key's breaker is built at that key's first call, as a registry builds it.
    let mut keyed: Vec<Option<Arc<Replayed>>> = vec![None; trace.key_count()];
    let mut single: Option<Arc<Replayed>> = None;
    if trace.entries().iter().any(|e| e.key().is_none()) {
        single = Some(build(name)?);
    }
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut now = 0u64;
    let move_to = |t: u64, now: &mut u64| {
        if t > *now {
            clock.advance(Duration::from_nanos(t - *now));
            *now = t;
        }
    };
    let throttled = settings.knobs.throttle.is_some();
    let mut report = Report::empty(name, trace);
    let bin = report.bin.as_nanos().max(1) as u64;
    report.rejected_over_time = vec![0; (trace.span().as_nanos() as u64 / bin + 1) as usize];
    for (seq, call) in trace.entries().iter().enumerate() {
        if seq % PROGRESS_EVERY == PROGRESS_EVERY - 1 {
            progress(PROGRESS_EVERY as u64);
        }
        // Every call that has answered by this one's start is reported first.
        while pending.peek().is_some_and(|p| p.0.end <= call.start) {
            let Reverse(done) = pending.pop().expect("peeked");
            move_to(done.end, &mut now);
            done.permit.record(done.outcome);
        }
        move_to(call.start, &mut now);
        let slot = match call.key() {
            Some(k) => &mut keyed[k],
            None => &mut single,
        };
        if slot.is_none() {
            *slot = Some(build(call.key().map_or(name, |k| trace.key_name(k)))?);
        }
        let breaker = slot.as_ref().expect("built just above");
        let failed = matches!(call.outcome, Outcome::Failure | Outcome::Fatal);
        if throttled {
            report.throttled_expected += breaker.throttle_probability().unwrap_or(0.0);
        }
        match breaker.allow_owned() {
            Ok(permit) => {
                report.admitted += 1;
                report.failures_admitted += u64::from(failed);
                pending.push(Reverse(Pending {
                    end: call.end(),
                    seq,
                    permit,
                    outcome: call.outcome,
                }));
            }
            Err(rejected) => count_rejection(&mut report, call, bin, &rejected),
        }
    }
    progress((trace.len() % PROGRESS_EVERY) as u64);
    while let Some(Reverse(done)) = pending.pop() {
        move_to(done.end, &mut now);
        done.permit.record(done.outcome);
    }
    drop((keyed, single));
    report.transitions = std::mem::take(&mut *log.0.lock());
    conclude(&mut report, trace);
    Ok(report)
}

/// `settings`, enforcing: a candidate in dry run decides as it would enforcing, and replay
/// counts those decisions.
fn enforcing(settings: &Settings) -> Cow<'_, Settings> {
    if !settings.knobs.dry_run {
        return Cow::Borrowed(settings);
    }
    Cow::Owned(Settings {
        knobs: lazybreaker::Knobs {
            dry_run: false,
            ..settings.knobs.clone()
        },
        ..settings.clone()
    })
}

/// `call`, turned away: counted by what it would have done, and in its bin of `bin` ns.
fn count_rejection(report: &mut Report, call: &Entry, bin: u64, rejected: &Rejected) {
    let failed = matches!(call.outcome, Outcome::Failure | Outcome::Fatal);
    report.throttled += u64::from(rejected.throttle_probability().is_some());
    let at = ((call.start / bin) as usize).min(report.rejected_over_time.len() - 1);
    report.rejected_over_time[at] += 1;
    report.rejected += 1;
    report.rejected_would_fail += u64::from(failed);
    report.rejected_would_succeed += u64::from(call.outcome == Outcome::Success);
}

/// What the report derives from the changes it holds: the openings, the trace's bursts met
/// with the changes, the longest times to trip and to close.
fn conclude(report: &mut Report, trace: &Trace) {
    report.opened = report
        .transitions
        .iter()
        .filter(|c| c.to == lazybreaker::State::Open)
        .count() as u64;
    report.bursts = report::bursts(trace);
    report::meet(&mut report.bursts, &report.transitions);
    report.time_to_trip = report.bursts.iter().filter_map(|b| b.tripped_after).max();
    report.time_to_close = report.bursts.iter().filter_map(|b| b.closed_after).max();
}
