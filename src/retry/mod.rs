//! Retries that cannot storm: a policy that retries only where a retry can help, paid for in
//! a budget that bounds how many retries go out, computed lazily on the caller's thread (no
//! timer, thread or task: the caller waits on its own runtime).
//!
//! - [`Retry`]: how many attempts, on what budget, after what wait; [`Retry::next`] says,
//!   after each failed attempt, whether to retry and after how long ([`Next`]), or why not
//!   ([`Stop`]).
//! - [`RetryBudget`]: Finagle's and Envoy's percent budget: retries at most a percent of the
//!   requests within a `ttl`, plus a reserve.
//! - [`Hedge`]: a second attempt elsewhere for a call that has not answered after a delay
//!   (fixed, or a percentile of the recent latencies: [`LatencyEstimate`]), paid for in the
//!   same budget.
//! - [`TokenBucket`]: gRPC's retry throttling (proposal A6): failures drain a bucket,
//!   successes refill it, and retries go out while more than half of it is left.

mod attempts;
mod backoff;
mod budget;
mod estimate;
mod feed;
mod hedge;
mod ledger;
mod policy;
mod stats;
mod token_bucket;

pub use attempts::{Attempts, Cause, Next, Stop};
pub use budget::RetryBudget;
pub use estimate::LatencyEstimate;
pub use feed::RequestCount;
pub use hedge::{Hedge, HedgeStats};
pub use policy::Retry;
pub use stats::RetryStats;
pub use token_bucket::TokenBucket;
