//! Retries that cannot storm: budgets that bound how many retries go out, computed lazily on
//! the caller's thread (no timer, thread or task).
//!
//! - [`TokenBucket`]: gRPC's retry throttling (proposal A6): failures drain a bucket,
//!   successes refill it, and retries go out while more than half of it is left.

mod token_bucket;

pub use token_bucket::TokenBucket;
