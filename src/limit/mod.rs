//! Adaptive concurrency limits: how many calls a dependency may have in flight, learned
//! from the calls themselves (their latency, the calls in flight when they started, whether
//! they were dropped), lazily and without a timer: each algorithm is a value that takes the
//! samples its callers report and gives a limit.
//!
//! - [`Aimd`]: additive increase, multiplicative decrease (Netflix's `AIMDLimit`): one more
//!   while the calls in flight reach half the limit, a cut by the backoff ratio on a drop or
//!   a timeout.
//!
//! - [`Gradient2`]: the limit follows the ratio of a long-run latency to the latest one
//!   (Netflix's `Gradient2Limit`): it grows by a queue size while calls stay within a
//!   tolerance of the long-run latency, and shrinks by the ratio (at most by half) when not.
//!
//! - [`Vegas`]: the queue a call's latency implies against the least latency seen (TCP
//!   Vegas; Netflix's `VegasLimit`): a short queue grows the limit, a long one or a drop
//!   shrinks it; the least latency is probed again now and then, at seeded times.
//!
//! - [`Fixed`]: a limit that does not move (a bulkhead; HAProxy's `maxconn`).
//!
//! A [`Limiter`] counts the calls in flight against one of them (a compare-and-swap per
//! call that starts, no lock); [`Pool::limit`](crate::pool::Pool::limit) gives each
//! endpoint of a pool its own.
//!
//! A limit is an overload signal, not a failure: it says how many calls to send, not whether
//! the dependency is broken.

mod aimd;
mod algorithm;
mod gradient2;
mod limiter;
mod sample;
mod vegas;

pub use aimd::Aimd;
pub use algorithm::{Algorithm, Fixed};
pub use gradient2::Gradient2;
pub use limiter::{LimitPermit, Limiter, OwnedLimitPermit};
pub use sample::Sample;
pub use vegas::Vegas;
