//! How metrics write a breaker's values: the label of a state, the gauge values of a state
//! and of a manual mode, a retry layer's decisions by label, and a retry's or a hedge's own
//! decisions (their `RetryStats` and `HedgeStats`) by label. One source for the core's
//! Prometheus collector and (through [`door`](crate::door)) `lazybreaker-otel`, so the two
//! agree on these by construction. (The calls by outcome are
//! [`Snapshot::outcomes`](crate::snapshot::Snapshot::outcomes); a pool's picks, retries,
//! hedges and ejections are [`PoolStats`](crate::pool::PoolStats)' methods of the same kind;
//! a check's status is still labelled in each export, and each export's test pins it.) A leaf: it reads the state and the forced mode only.

use crate::forced::Forced;
use crate::state::State;

/// A state as a label (Prometheus) or attribute (OpenTelemetry) value: `closed`,
/// `half_open`, `open` (snake case, unlike [`State::as_str`]'s gobreaker `half-open`).
pub fn state_label(state: State) -> &'static str {
    match state {
        State::Closed => "closed",
        State::HalfOpen => "half_open",
        State::Open => "open",
    }
}

/// A state as a gauge: 0 closed, 1 half-open, 2 open (brpc's and Envoy's order: the
/// higher, the less the breaker lets through).
pub fn state_value(state: State) -> i64 {
    match state {
        State::Closed => 0,
        State::HalfOpen => 1,
        State::Open => 2,
    }
}

/// A manual mode as a gauge: 0 none, 1 forced open, 2 forced closed.
pub fn forced_value(forced: Option<Forced>) -> i64 {
    match forced {
        None => 0,
        Some(Forced::Open) => 1,
        Some(Forced::Closed) => 2,
    }
}

/// A retry layer's decisions after a failed attempt, by the label metrics give them:
/// `retried`, `budget_denied`, `exhausted`, `throttled` (a breaker's
/// [`Totals`](crate::counts::Totals) and a pool's [`PoolStats`](crate::pool::PoolStats) count
/// the same four).
pub(crate) fn retry_decisions(
    retried: u64,
    budget_denied: u64,
    exhausted: u64,
    throttled: u64,
) -> [(&'static str, u64); 4] {
    [
        ("retried", retried),
        ("budget_denied", budget_denied),
        ("exhausted", exhausted),
        ("throttled", throttled),
    ]
}

/// A [`Retry`](crate::retry::Retry)'s decisions ([`RetryStats::decisions`](crate::retry::RetryStats::decisions)
/// reads them, field by field) by the label metrics give them: `retried`, `budget_denied`, `exhausted`
/// (the four of [`retry_decisions`], named alike), `past_deadline`, `pushed_back`,
/// `throttled`.
pub(crate) fn retry_stats_decisions(
    retried: u64,
    budget_denied: u64,
    exhausted: u64,
    past_deadline: u64,
    pushed_back: u64,
    throttled: u64,
) -> [(&'static str, u64); 6] {
    [
        ("retried", retried),
        ("budget_denied", budget_denied),
        ("exhausted", exhausted),
        ("past_deadline", past_deadline),
        ("pushed_back", pushed_back),
        ("throttled", throttled),
    ]
}

/// A [`Hedge`](crate::retry::Hedge)'s decisions ([`HedgeStats::decisions`](crate::retry::HedgeStats::decisions)
/// reads them, field by field) by the label metrics give them: `hedged` (an attempt sent), `won`,
/// `cancelled`, `budget_denied` (the four a pool's hedges are labelled with), `throttled`,
/// `past_deadline`.
pub(crate) fn hedge_stats_decisions(
    hedged: u64,
    won: u64,
    cancelled: u64,
    budget_denied: u64,
    throttled: u64,
    past_deadline: u64,
) -> [(&'static str, u64); 6] {
    [
        ("hedged", hedged),
        ("won", won),
        ("cancelled", cancelled),
        ("budget_denied", budget_denied),
        ("throttled", throttled),
        ("past_deadline", past_deadline),
    ]
}

#[cfg(test)]
mod tests {
    use super::{
        forced_value, hedge_stats_decisions, retry_decisions, retry_stats_decisions, state_label,
        state_value,
    };
    use crate::forced::Forced;
    use crate::state::State;

    #[test]
    fn labels_and_gauge_values_as_the_metrics_document_them() {
        let states = [State::Closed, State::HalfOpen, State::Open];
        assert_eq!(states.map(state_label), ["closed", "half_open", "open"]);
        assert_eq!(states.map(state_value), [0, 1, 2]);
        assert_eq!(
            [None, Some(Forced::Open), Some(Forced::Closed)].map(forced_value),
            [0, 1, 2]
        );
        assert_eq!(
            retry_decisions(4, 3, 2, 1),
            [
                ("retried", 4),
                ("budget_denied", 3),
                ("exhausted", 2),
                ("throttled", 1)
            ]
        );
        assert_eq!(
            retry_stats_decisions(6, 5, 4, 3, 2, 1).map(|(label, _)| label),
            [
                "retried",
                "budget_denied",
                "exhausted",
                "past_deadline",
                "pushed_back",
                "throttled"
            ]
        );
        assert_eq!(
            retry_stats_decisions(6, 5, 4, 3, 2, 1).map(|(_, n)| n),
            [6, 5, 4, 3, 2, 1]
        );
        assert_eq!(
            hedge_stats_decisions(6, 5, 4, 3, 2, 1),
            [
                ("hedged", 6),
                ("won", 5),
                ("cancelled", 4),
                ("budget_denied", 3),
                ("throttled", 2),
                ("past_deadline", 1)
            ]
        );
    }
}
