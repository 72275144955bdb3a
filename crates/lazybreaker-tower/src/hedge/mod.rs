//! Hedging (feature `hedge`): [`HedgeLayer`] and [`HedgeService`], a
//! [`lazybreaker::retry::Hedge`] around a tower service, waiting on tokio's timer; each
//! call's attempts raced in its [`HedgeFuture`]. Requests are copied by the retries'
//! [`Replay`](crate::Replay), a breaker's rejection found by their
//! [`MaybeRejected`](crate::MaybeRejected). The recipe is in the
//! [crate documentation](crate#hedging).

mod future;
mod layer;
mod service;

pub use future::HedgeFuture;
pub use layer::HedgeLayer;
pub use service::HedgeService;
