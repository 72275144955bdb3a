//! `GET /breakers`: the board as JSON, for scripts.

use serde::Serialize;

use super::source::{Board, Row};
use lazybreaker::observe::Recorded;
use lazybreaker::Snapshot;

/// One breaker: its snapshot's fields, the pool it is an endpoint of, its recent changes.
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
