//! gRPC's retries and hedging (proposal A6) on tonic: [`ServiceConfig`], the retry and
//! hedging part of a service config, [`RetryLayer`], which retries a channel's calls as it
//! says, and [`HedgeLayer`], which hedges them.

mod config;
mod hedge;
mod layer;
mod replay;
mod watch;

pub use config::{HedgingPolicy, RetryPolicy, ServiceConfig};
pub use hedge::{GrpcHedge, HedgeLayer};
pub use layer::{GrpcRetry, RetryLayer, MAX_BUFFER};
