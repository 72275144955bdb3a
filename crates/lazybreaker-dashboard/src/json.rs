//! `GET /breakers` and `GET /pools`: the board as JSON, for scripts.
//!
//! Every duration `x` is written twice, as the core's serde writes every report's: `x`, a
//! duration string of full precision (`"2s 512ms 108ns"`), and `x_ms` beside it, whole
//! milliseconds as an integer, rounded as [`lazybreaker::human`] rounds for the page: a wait
//! up, any other duration to the nearest (see the crate docs, and `docs/integrations.md`,
//! "Durations in JSON").

use serde::Serialize;

use super::source::{Board, PoolLine, Row};
use lazybreaker::observe::Recorded;
use lazybreaker::pool::{PoolStats, PoolSummary};
use lazybreaker::Snapshot;

/// One breaker: its snapshot's fields (each duration with its `_ms`), the pool it is an
/// endpoint of, its recent changes.
#[derive(Serialize)]
struct Breaker<'a> {
    #[serde(flatten)]
    snapshot: &'a Snapshot,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a str>,
    /// Whether its policy's figures panicked while read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    policy_panicked: bool,
    /// How many breakers of the page have its name, when more than one: the controls refuse
    /// the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    name_shared_by: Option<usize>,
    /// Its recent changes (each duration with its `_ms`).
    history: &'a [Recorded],
}

fn breaker(row: &Row) -> Breaker<'_> {
    Breaker {
        snapshot: &row.snapshot,
        pool: row.pool.as_deref(),
        policy_panicked: row.panicked,
        name_shared_by: (row.namesakes > 1).then_some(row.namesakes),
        history: &row.history,
    }
}

/// Every breaker of the board, in the page's order (open, half-open, closed; by name).
pub(super) fn board(board: &Board) -> String {
    let all: Vec<Breaker<'_>> = board.rows.iter().map(breaker).collect();
    serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".to_owned())
}

/// One breaker, as a control answers it.
pub(super) fn row(row: &Row) -> String {
    serde_json::to_string_pretty(&breaker(row)).unwrap_or_else(|_| "{}".to_owned())
}

/// One pool: its name, then [`PoolSummary`]'s fields (its [`PoolStats`] as `stats`), or
/// `unreadable` when its user code panicked while they were read.
#[derive(Serialize)]
struct Pool<'a> {
    name: &'a str,
    #[serde(flatten)]
    summary: Option<Summary>,
    /// Whether its figures could not be read (a clock panicked).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unreadable: bool,
}

/// [`PoolSummary`], field for field (the core's type has no serde of its own).
#[derive(Serialize)]
struct Summary {
    endpoints: usize,
    isolated: usize,
    ejected: usize,
    down: usize,
    in_flight: usize,
    warming: usize,
    at_limit: usize,
    stats: Stats,
}

/// [`PoolStats`], field for field.
#[derive(Serialize)]
struct Stats {
    picks: u64,
    over_cap: u64,
    over_cap_successes: u64,
    over_cap_failures: u64,
    no_endpoint: u64,
    overloaded: u64,
    outliers_detected: u64,
    ejected_success_rate: u64,
    ejected_failure_percentage: u64,
    ejected_hung: u64,
    retries: u64,
    retries_budget_denied: u64,
    retries_exhausted: u64,
    retries_throttled: u64,
    hedges: u64,
    hedges_won: u64,
    hedges_cancelled: u64,
    hedges_budget_denied: u64,
    limited: u64,
    limit_skips: u64,
}

impl From<&PoolSummary> for Summary {
    fn from(s: &PoolSummary) -> Self {
        let t: &PoolStats = &s.stats;
        Self {
            endpoints: s.endpoints,
            isolated: s.isolated,
            ejected: s.ejected,
            down: s.down,
            in_flight: s.in_flight,
            warming: s.warming,
            at_limit: s.at_limit,
            stats: Stats {
                picks: t.picks,
                over_cap: t.over_cap,
                over_cap_successes: t.over_cap_successes,
                over_cap_failures: t.over_cap_failures,
                no_endpoint: t.no_endpoint,
                overloaded: t.overloaded,
                outliers_detected: t.outliers_detected,
                ejected_success_rate: t.ejected_success_rate,
                ejected_failure_percentage: t.ejected_failure_percentage,
                ejected_hung: t.ejected_hung,
                retries: t.retries,
                retries_budget_denied: t.retries_budget_denied,
                retries_exhausted: t.retries_exhausted,
                retries_throttled: t.retries_throttled,
                hedges: t.hedges,
                hedges_won: t.hedges_won,
                hedges_cancelled: t.hedges_cancelled,
                hedges_budget_denied: t.hedges_budget_denied,
                limited: t.limited,
                limit_skips: t.limit_skips,
            },
        }
    }
}

/// Every pool, in the order given.
pub(super) fn pools(pools: &[PoolLine]) -> String {
    let all: Vec<Pool<'_>> = pools
        .iter()
        .map(|p| Pool {
            name: &p.name,
            summary: p.summary.as_ref().map(Summary::from),
            unreadable: p.summary.is_none(),
        })
        .collect();
    serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".to_owned())
}
