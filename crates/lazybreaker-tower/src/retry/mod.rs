//! Retries (feature `retry`): [`RetryLayer`] and [`RetryPolicy`], tower's retry middleware
//! driven by a [`lazybreaker::retry::Retry`], waiting on tokio's timer; [`Replay`] says
//! which requests may be sent again ([`Idempotent`] for HTTP, feature `http`), and
//! [`MaybeRejected`] which errors are a breaker's rejections (never retried). The recipe is
//! in the [crate documentation](crate#retries).

mod layer;
mod policy;
pub(crate) mod rejected;
pub(crate) mod replay;

pub use layer::RetryLayer;
pub use policy::{RetryPolicy, RetryWait};
pub use rejected::MaybeRejected;
#[cfg(feature = "http")]
pub use replay::Idempotent;
pub use replay::{CloneRequest, Replay};
