//! [`judge`]: how a completed call counts, as one pure function of the call, the state and
//! the rules. Everything a verdict kind, a knob or a policy capability changes about the
//! counting of one result is decided here, and tested by one table.

use std::time::Duration;

use crate::abandoned::AbandonedAs;
use crate::policy::Outcome;
use crate::state::State;

use super::{Rules, Verdict};

/// How a call counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Judged {
    /// What the window counts and the policy sees: `Success`, `Failure` or `Excluded`
    /// (never `Fatal`: a fatal result is a failure with `fatal` set).
    pub(super) outcome: Outcome,
    /// The call was reported [`Outcome::Fatal`]: it trips at once.
    pub(super) fatal: bool,
    /// Slower than the policy's threshold (never an exclusion, and not counted twice).
    pub(super) slow: bool,
    /// The call was reported (not abandoned): the totals count its outcome. An abandoned
    /// call is counted in the totals as abandoned instead.
    pub(super) reported: bool,
}

/// How a call that ended with `verdict` after `latency` (when measured) counts in `state`
/// under `rules`; `counted_in_flight`: it was counted as slow already while in flight.
pub(super) fn judge(
    verdict: Verdict,
    latency: Option<Duration>,
    state: State,
    rules: &Rules,
    counted_in_flight: bool,
) -> Judged {
    let reported = match verdict {
        Verdict::Reported(outcome) => Some(outcome),
        Verdict::Abandoned => None,
    };
    // An abandoned call counts as the state's setting says.
    let as_reported = reported.unwrap_or(match (state, rules.abandoned) {
        (State::HalfOpen, (_, AbandonedAs::Failure))
        | (State::Closed, (AbandonedAs::Failure, _)) => Outcome::Failure,
        _ => Outcome::Excluded,
    });
    // A fatal failure is a failure that trips at once: the policy sees a failure.
    let fatal = as_reported == Outcome::Fatal;
    let mut outcome = as_reported.counted();
    let slow = outcome != Outcome::Excluded
        && !counted_in_flight
        && matches!((latency, rules.slow_threshold), (Some(l), Some(t)) if l > t);
    if state == State::HalfOpen && rules.slow_threshold.is_some() {
        if slow {
            outcome = Outcome::Failure; // a slow probe counts as failed
        } else if rules.probes_on_latency
            && outcome == Outcome::Failure
            && !fatal
            && reported.is_some()
        {
            outcome = Outcome::Success; // judged on latency alone (Sentinel)
        }
    }
    Judged {
        outcome,
        fatal,
        slow,
        reported: reported.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Capabilities;

    use AbandonedAs::{Exclusion as AbX, Failure as AbF};
    use Outcome::{Excluded as X, Failure as F, Fatal, Success as S};
    use State::{Closed as C, HalfOpen as H};

    const T: Duration = Duration::from_millis(100);
    const FAST: Option<Duration> = Some(Duration::from_millis(10));
    const SLOW: Option<Duration> = Some(Duration::from_millis(150));

    /// The rules of one row: how abandoned calls count (closed, half-open), the slow-call
    /// threshold `T` or none, probes judged on latency alone or not.
    fn rules(abandoned: (AbandonedAs, AbandonedAs), threshold: bool, alone: bool) -> Rules {
        let caps = Capabilities::default()
            .needs_latency(true)
            .slow_call_threshold(threshold.then_some(T))
            .probes_on_latency_alone(alone);
        Rules::new(1, Duration::ZERO, Duration::ZERO, Duration::ZERO)
            .abandoned_as(abandoned.0, abandoned.1)
            .with_capabilities(&caps)
    }

    /// (verdict, latency, state, rules, counted in flight) and what it must count as:
    /// (outcome, fatal, slow, reported).
    type Row<'a> = (
        Verdict,
        Option<Duration>,
        State,
        &'a Rules,
        bool,
        (Outcome, bool, bool, bool),
    );

    fn reported(o: Outcome) -> Verdict {
        Verdict::Reported(o)
    }

    #[test]
    fn every_verdict_counts_as_the_documented_semantics_say() {
        let plain = rules((AbX, AbX), false, false);
        let abandon_fails = rules((AbF, AbF), false, false);
        let abandon_fails_half_open = rules((AbX, AbF), false, false);
        let slow = rules((AbX, AbX), true, false);
        let sentinel = rules((AbX, AbX), true, true);
        let ab = Verdict::Abandoned;
        let rows: &[Row<'_>] = &[
            // Reported outcomes count as themselves; a fatal one as a failure that trips.
            (reported(S), None, C, &plain, false, (S, false, false, true)),
            (reported(F), None, C, &plain, false, (F, false, false, true)),
            (reported(X), None, C, &plain, false, (X, false, false, true)),
            (
                reported(Fatal),
                None,
                C,
                &plain,
                false,
                (F, true, false, true),
            ),
            (
                reported(Fatal),
                None,
                H,
                &plain,
                false,
                (F, true, false, true),
            ),
            // Abandoned calls: excluded by default, a failure where the state's setting says.
            (ab, None, C, &plain, false, (X, false, false, false)),
            (ab, None, H, &plain, false, (X, false, false, false)),
            (ab, None, C, &abandon_fails, false, (F, false, false, false)),
            (ab, None, H, &abandon_fails, false, (F, false, false, false)),
            (
                ab,
                None,
                C,
                &abandon_fails_half_open,
                false,
                (X, false, false, false),
            ),
            (
                ab,
                None,
                H,
                &abandon_fails_half_open,
                false,
                (F, false, false, false),
            ),
            // No threshold: nothing is slow, whatever the latency.
            (reported(S), SLOW, C, &plain, false, (S, false, false, true)),
            // A threshold: slower is slow (a success stays a success in closed) ...
            (reported(S), SLOW, C, &slow, false, (S, false, true, true)),
            (reported(F), SLOW, C, &slow, false, (F, false, true, true)),
            (reported(S), FAST, C, &slow, false, (S, false, false, true)),
            (
                reported(S),
                Some(T),
                C,
                &slow,
                false,
                (S, false, false, true),
            ),
            // ... never an exclusion, never twice, never without a latency.
            (reported(X), SLOW, C, &slow, false, (X, false, false, true)),
            (reported(S), SLOW, C, &slow, true, (S, false, false, true)),
            (reported(S), None, C, &slow, false, (S, false, false, true)),
            // In half-open a slow probe fails, a fast one counts as reported.
            (reported(S), SLOW, H, &slow, false, (F, false, true, true)),
            (reported(S), FAST, H, &slow, false, (S, false, false, true)),
            (reported(F), FAST, H, &slow, false, (F, false, false, true)),
            // Sentinel: a fast failed probe is a success; a slow, fatal or abandoned one not.
            (
                reported(F),
                FAST,
                H,
                &sentinel,
                false,
                (S, false, false, true),
            ),
            (
                reported(F),
                SLOW,
                H,
                &sentinel,
                false,
                (F, false, true, true),
            ),
            (
                reported(Fatal),
                FAST,
                H,
                &sentinel,
                false,
                (F, true, false, true),
            ),
            (
                ab,
                FAST,
                H,
                &rules((AbX, AbF), true, true),
                false,
                (F, false, false, false),
            ),
            // ... and only in half-open.
            (
                reported(F),
                FAST,
                C,
                &sentinel,
                false,
                (F, false, false, true),
            ),
        ];
        for (i, &(verdict, latency, state, rules, in_flight, want)) in rows.iter().enumerate() {
            let got = judge(verdict, latency, state, rules, in_flight);
            let (outcome, fatal, slow, reported) = want;
            assert_eq!(
                got,
                Judged {
                    outcome,
                    fatal,
                    slow,
                    reported
                },
                "row {i}: {verdict:?} after {latency:?} in {state:?}"
            );
        }
    }
}
